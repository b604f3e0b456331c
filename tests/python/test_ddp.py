"""convcore.torch under DistributedDataParallel: 2 CPU processes (gloo) train a small CNN converted
with convcore.torch.convert, and the same CNN unconverted, from the same initial weights on the same
per-rank data. The converted CNN's loss curve matches PyTorch's within float32 round-off, each
parameter's gradient is all-reduced to the same value on both ranks, the parameters stay equal
across ranks, and the converted CNN's convolutions (forward and backward) ran on convcore."""

import copy
import datetime
import os
import socket
import time

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import convcore  # noqa: E402
import convcore.torch as ct  # noqa: E402

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

WORLD_SIZE = 2
STEPS = 6
BATCH_PER_RANK = 4
LR = 0.1
# Per step, |convcore loss - PyTorch loss| <= LOSS_RTOL * |PyTorch loss|, and per step and parameter
# ||convcore grad - PyTorch grad|| <= GRAD_RTOL * ||PyTorch grad||. The two models differ only by
# float32 round-off (about 1e-7 in the losses, 4e-6 in the gradients). Gradients left unaveraged
# across ranks move the losses by ~10%, one rank's loss scaled by 1.5 by ~4%; a 0.1% error in one
# parameter's gradient is 10x GRAD_RTOL.
LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-4
TIMEOUT_S = 120  # whole run; a hung collective fails the test instead of blocking it

CONVCORE_OPS = ("convcore::conv2d", "convcore::conv2d_backward_data",
                "convcore::conv2d_backward_filter", "convcore::conv2d_backward_bias")


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def rank_batch(rank):
    """This rank's fixed batch: float32 inputs and labels, different on each rank."""
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(BATCH_PER_RANK, 3, 16, 16, generator=gen)
    y = torch.randint(0, 10, (BATCH_PER_RANK,), generator=gen)
    return x, y


def train(model, x, y):
    """STEPS of SGD on (x, y) under DDP; per step this rank's loss, gradients and parameters, and
    the names of the operators that ran in the first step (forward, backward, optimizer)."""
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
    record = {"loss": [], "grads": [], "params": []}
    for step in range(STEPS):
        with torch.autograd.profiler.profile(enabled=step == 0) as prof:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
        if step == 0:
            record["ops"] = sorted({event.name for event in prof.function_events})
        record["loss"].append(loss.item())
        record["grads"].append([p.grad.clone() for p in ddp.module.parameters()])
        record["params"].append([p.detach().clone() for p in ddp.module.parameters()])
    record["conv_types"] = [f"{type(m).__module__}.{type(m).__name__}"
                            for m in ddp.module.modules() if isinstance(m, nn.Conv2d)]
    return record


def train_worker(rank, port, out_dir):
    """One DDP rank: trains the CNN unconverted, then converted, and saves both records."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    convcore.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        reference = small_cnn()
        converted = ct.convert(copy.deepcopy(reference))
        x, y = rank_batch(rank)
        records = {"torch": train(reference, x, y), "convcore": train(converted, x, y)}
        torch.save(records, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """[rank 0's records, rank 1's records], each {"torch": record, "convcore": record}."""
    out_dir = tmp_path_factory.mktemp("ddp")
    context = mp.start_processes(train_worker, args=(free_port(), str(out_dir)),
                                 nprocs=WORLD_SIZE, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    # join() raises ProcessRaisedException, with the worker's traceback, if a worker failed
    while not context.join(timeout=max(0.0, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            for process in context.processes:
                process.terminate()
                process.join()
            pytest.fail(f"DDP workers still running after {TIMEOUT_S} s (a hung collective?)")
    return [torch.load(out_dir / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]


def test_converted_model_ran_convcore(ranks):
    for records in ranks:
        assert records["convcore"]["conv_types"] == ["convcore.torch.Conv2d"] * 3
        ops = records["convcore"]["ops"]
        assert all(op in ops for op in CONVCORE_OPS), ops
        assert not any("convolution" in op for op in ops), ops
        # the unconverted model is PyTorch's own convolution
        assert records["torch"]["conv_types"] == ["torch.nn.modules.conv.Conv2d"] * 3
        assert "aten::convolution" in records["torch"]["ops"]
        assert not any(op.startswith("convcore::") for op in records["torch"]["ops"])


def test_ranks_had_different_data(ranks):
    for step in range(STEPS):
        assert ranks[0]["convcore"]["loss"][step] != ranks[1]["convcore"]["loss"][step]


@pytest.mark.parametrize("model", ["torch", "convcore"])
def test_gradients_and_parameters_equal_across_ranks(ranks, model):
    rank0, rank1 = ranks[0][model], ranks[1][model]
    for step in range(STEPS):
        for i, (g0, g1) in enumerate(zip(rank0["grads"][step], rank1["grads"][step])):
            assert torch.equal(g0, g1), f"step {step}: parameter {i}'s gradient differs by rank"
        for i, (p0, p1) in enumerate(zip(rank0["params"][step], rank1["params"][step])):
            assert torch.equal(p0, p1), f"step {step}: parameter {i} differs by rank"


def test_loss_curve_matches_pytorch(ranks):
    """Per rank and per step, and the global loss (the mean over ranks) too."""
    curves = {model: torch.tensor([r[model]["loss"] for r in ranks], dtype=torch.float64)
              for model in ("torch", "convcore")}
    for model in curves:
        curves[model] = torch.cat([curves[model], curves[model].mean(0, keepdim=True)])
    torch.testing.assert_close(curves["convcore"], curves["torch"], rtol=LOSS_RTOL, atol=0)
    global_loss = curves["torch"][-1].tolist()
    assert all(a > b for a, b in zip(global_loss, global_loss[1:])), f"not falling: {global_loss}"


def test_gradients_match_pytorch(ranks):
    for rank, records in enumerate(ranks):
        for step in range(STEPS):
            for i, (g, ref) in enumerate(zip(records["convcore"]["grads"][step],
                                             records["torch"]["grads"][step])):
                err = float((g.double() - ref.double()).norm() / ref.double().norm())
                assert err <= GRAD_RTOL, f"rank {rank}, step {step}, parameter {i}: {err:.2e}"
