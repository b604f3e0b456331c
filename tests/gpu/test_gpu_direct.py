"""DIRECT on CUDA through the Python API, with CUDA torch tensors, against
torch.nn.functional.conv2d in float64 on the CPU. Runs only on a machine with a GPU."""
import random
import zlib

import pytest

convcore = pytest.importorskip("convcore", reason="convcore is not built/installed")
torch = pytest.importorskip("torch", reason="PyTorch is not installed")


def _convcore_cuda_devices():
    count = getattr(convcore, "cuda_device_count", None)
    return count() if callable(count) else 0


pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU"),
    pytest.mark.skipif(_convcore_cuda_devices() == 0,
                       reason="convcore reports no CUDA device (built without CUDA or no GPU)"),
]


def _to_torch(out, device):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "__dlpack__"):
        return torch.from_dlpack(out)
    return torch.as_tensor(out, device=device)


def _cases(count=24, seed=1234):
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        g = rng.randint(1, 3)
        c = dict(n=rng.randint(1, 3), groups=g, cin=g * rng.randint(1, 4), cout=g * rng.randint(1, 4),
                 h=rng.randint(1, 19), w=rng.randint(1, 19), r=rng.randint(1, 5), s=rng.randint(1, 5),
                 padding=(rng.randint(0, 2), rng.randint(0, 2)),
                 stride=(rng.randint(1, 3), rng.randint(1, 3)),
                 dilation=(rng.randint(1, 2), rng.randint(1, 2)),
                 mode=rng.choice(["cross_correlation", "convolution"]))
        span_h = c["dilation"][0] * (c["r"] - 1) + 1
        span_w = c["dilation"][1] * (c["s"] - 1) + 1
        if c["h"] + 2 * c["padding"][0] >= span_h and c["w"] + 2 * c["padding"][1] >= span_w:
            cases.append(c)
    return cases


@pytest.mark.parametrize("dtype,bound", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("case", _cases(), ids=lambda c: "g{groups}n{n}c{cin}k{cout}_{h}x{w}_{r}x{s}_{mode}".format(**c))
def test_direct_matches_torch(case, dtype, bound):
    gen = torch.Generator().manual_seed(zlib.crc32(repr(sorted(case.items())).encode()))
    x = torch.rand(case["n"], case["cin"], case["h"], case["w"], generator=gen, dtype=torch.float64) * 2 - 1
    w = torch.rand(case["cout"], case["cin"] // case["groups"], case["r"], case["s"], generator=gen,
                   dtype=torch.float64) * 2 - 1
    # Round the inputs to the tested precision first, so the reference sees the same numbers.
    x, w = x.to(dtype).to(torch.float64), w.to(dtype).to(torch.float64)
    w_ref = w.flip(2, 3) if case["mode"] == "convolution" else w
    ref = torch.nn.functional.conv2d(x, w_ref, stride=case["stride"], padding=case["padding"],
                                     dilation=case["dilation"], groups=case["groups"])

    desc = convcore.ConvDesc(padding=case["padding"], stride=case["stride"], dilation=case["dilation"],
                             groups=case["groups"], mode=case["mode"])
    out = convcore.Convolution(desc).forward(x.to(dtype).cuda(), w.to(dtype).cuda(), algo="direct")
    y = _to_torch(out, "cuda")
    assert y.is_cuda, "a CUDA input must give a CUDA output"
    assert tuple(y.shape) == tuple(ref.shape)
    y = y.detach().to("cpu", torch.float64)
    assert torch.isfinite(y).all()
    err = (y - ref).abs().max().item() / max(ref.abs().max().item(), 1e-300)
    assert err <= bound, f"max |convcore - torch| / max |torch| = {err:.3g} > {bound}"
