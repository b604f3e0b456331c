"""Every CUDA-registered algorithm, forward, backward data and backward filter, against the
CPU float64 references (tests/python/reference.py, test_backward.py) on the CPU tests' problems,
with outputs poisoned (NaN) before each run and each algorithm's documented bound; alpha/beta;
strided (non-packed) tensors; the Python interface (DLPack from torch CUDA tensors on
the current stream, zero-copy results, out=, mixed devices). Skips without a GPU; FAILS on a GPU
machine whose convcore lacks CUDA (conftest.py)."""
import math
import zlib

import numpy as np
import pytest

from reference import PROBLEMS, Problem, error_bound, relative_error

DIRECTIONS = ("forward", "backward_data", "backward_filter")
PROBE = Problem(2, 8, 12, 12, 8, 3, 3, padding=(1, 1))  # every algorithm's home ground


def _bwd():
    import test_backward  # imports convcore: only after the GPU gate
    return test_backward


def bound(direction, algo, dtype):
    return error_bound(algo, dtype, direction)


def algo_names(cc, direction):
    enum_cls = {"forward": cc.Algo, "backward_data": cc.BwdDataAlgo,
                "backward_filter": cc.BwdFilterAlgo}[direction]
    return [a.name.lower() for a in enum_cls]


_REGISTERED = {}


def registered(cc, direction):
    """The algorithms with a CUDA solver in this build, for `direction`: those whose
    workspace query on PROBE does not say "not implemented/no solver ... in this build"."""
    if direction not in _REGISTERED:
        conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
        names = []
        for algo in algo_names(cc, direction):
            try:
                conv.workspace_size(PROBE.x_shape, PROBE.w_shape, algo, device="cuda",
                                    dtype="float32", direction=direction)
            except cc.NotSupportedError as e:
                if "in this build" in str(e):
                    continue
            names.append(algo)
        _REGISTERED[direction] = names
    return _REGISTERED[direction]


def seed_of(problem):
    return zlib.crc32(str(problem).encode())


def run_case(cc, torch, problem, dtype, direction):
    """{algo: relative error} over the registered algorithms that accept the problem, and the
    reasons of those that refuse it."""
    bwd = _bwd()
    x, w, dy = bwd.inputs(problem, dtype, seed_of(problem))
    conv = cc.Convolution(cc.ConvDesc(**problem.desc_kwargs()))
    if direction == "forward":
        ref = problem.reference(x, w)
    elif direction == "backward_data":
        ref = bwd.backward_data_reference(problem, dy, w, x.shape)
    else:
        ref = bwd.backward_filter_reference(problem, x, dy, w.shape)
    xd, wd, dyd = (torch.from_numpy(a).cuda() for a in (x, w, dy))
    errors, refusals = {}, {}
    for algo in registered(cc, direction):
        try:
            conv.workspace_size(x.shape, w.shape, algo, device="cuda", dtype=dtype,
                                direction=direction)
        except cc.NotSupportedError as e:
            assert str(e).strip(), f"{algo}: NOT_SUPPORTED without a reason"
            refusals[algo] = str(e)
            continue
        out = torch.full(ref.shape, math.nan, dtype=xd.dtype, device="cuda")  # poisoned
        if direction == "forward":
            res = conv.forward(xd, wd, algo=algo, out=out)
        elif direction == "backward_data":
            res = conv.backward_data(dyd, wd, x.shape, algo=algo, out=out)
        else:
            res = conv.backward_filter(xd, dyd, w.shape, algo=algo, out=out)
        assert res is out, f"{algo}: out= must be returned"
        errors[algo] = relative_error(out.cpu().numpy(), ref)
    return errors, refusals


def assert_bounds(errors, direction, dtype, problem):
    bad = [f"{a}: {e:.3g} > {bound(direction, a, dtype):g}" for a, e in errors.items()
           if not e <= bound(direction, a, dtype)]  # also catches NaN (the poison)
    assert not bad, f"{direction} {problem} {dtype}: " + "; ".join(bad)


def test_gpu_build(cc):
    assert cc.cuda_device_count() >= 1
    for direction in DIRECTIONS:
        assert "direct" in registered(cc, direction), f"DIRECT {direction} is not registered on CUDA"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("problem", PROBLEMS, ids=str)
def test_every_cuda_algorithm(cc, torch_cuda, problem, direction, dtype):
    errors, _ = run_case(cc, torch_cuda, problem, dtype, direction)
    assert "direct" in errors, "DIRECT runs every problem"
    assert_bounds(errors, direction, dtype, problem)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_every_registered_algorithm_runs_somewhere(cc, torch_cuda, direction):
    """A registered algorithm that no test problem reaches would pass the test above untested."""
    ran = set()
    for problem in PROBLEMS + [PROBE]:
        errors, _ = run_case(cc, torch_cuda, problem, "float32", direction)
        ran |= set(errors)
    assert set(registered(cc, direction)) <= ran, (
        f"registered on CUDA but never run: {sorted(set(registered(cc, direction)) - ran)}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_alpha_beta(cc, torch_cuda, direction, dtype):
    torch = torch_cuda
    bwd = _bwd()
    problem = PROBE
    x, w, dy = bwd.inputs(problem, dtype, 7)
    conv = cc.Convolution(cc.ConvDesc(**problem.desc_kwargs()))
    ref = {"forward": lambda: problem.reference(x, w),
           "backward_data": lambda: bwd.backward_data_reference(problem, dy, w, x.shape),
           "backward_filter": lambda: bwd.backward_filter_reference(problem, x, dy, w.shape)}[direction]()
    xd, wd, dyd = (torch.from_numpy(a).cuda() for a in (x, w, dy))
    prev = np.random.default_rng(3).uniform(-1, 1, ref.shape).astype(dtype)
    bad = []
    for algo in registered(cc, direction):
        for alpha, beta in ((0.5, 0.0), (-2.0, 0.75), (1.0, 1.0)):
            out = torch.from_numpy(prev.copy()).cuda()
            kw = dict(algo=algo, out=out, alpha=alpha, beta=beta)
            try:
                if direction == "forward":
                    conv.forward(xd, wd, **kw)
                elif direction == "backward_data":
                    conv.backward_data(dyd, wd, x.shape, **kw)
                else:
                    conv.backward_filter(xd, dyd, w.shape, **kw)
            except cc.NotSupportedError:
                break
            want = alpha * ref + beta * prev.astype(np.float64)
            err = relative_error(out.cpu().numpy(), want)
            if not err <= bound(direction, algo, dtype):
                bad.append(f"{algo} alpha={alpha} beta={beta}: {err:.3g}")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_strided_tensors(cc, torch_cuda, direction):
    """Non-packed CUDA views in and out (the core stages them through the workspace)."""
    torch = torch_cuda
    bwd = _bwd()
    problem = PROBE
    x, w, dy = bwd.inputs(problem, "float64", 11)
    conv = cc.Convolution(cc.ConvDesc(**problem.desc_kwargs()))

    def strided(a):  # a view with a gap between rows and the channels permuted in memory
        t = torch.zeros(a.shape[0], a.shape[2], a.shape[3] + 3, a.shape[1], dtype=torch.float64,
                        device="cuda")
        v = t.permute(0, 3, 1, 2)[:, :, :, :a.shape[3]]
        v.copy_(torch.from_numpy(a))
        assert not v.is_contiguous()
        return v

    xd, dyd, wd = strided(x), strided(dy), torch.from_numpy(w).cuda()
    if direction == "forward":
        ref = problem.reference(x, w)
    elif direction == "backward_data":
        ref = bwd.backward_data_reference(problem, dy, w, x.shape)
    else:
        ref = bwd.backward_filter_reference(problem, x, dy, w.shape)
    bad = []
    for algo in registered(cc, direction):
        out = strided(np.full(ref.shape, np.nan)) if direction != "backward_filter" else \
            torch.full(ref.shape, math.nan, dtype=torch.float64, device="cuda")
        try:
            if direction == "forward":
                conv.forward(xd, wd, algo=algo, out=out)
            elif direction == "backward_data":
                conv.backward_data(dyd, wd, x.shape, algo=algo, out=out)
            else:
                conv.backward_filter(xd, dyd, w.shape, algo=algo, out=out)
        except cc.NotSupportedError:
            continue
        err = relative_error(out.cpu().numpy(), ref)
        if not err <= bound(direction, algo, "float64"):
            bad.append(f"{algo}: {err:.3g}")
    assert not bad, "; ".join(bad)


# ---- the Python interface --------------------------------------------------------------------

def _probe_tensors(torch, dtype=None):
    dtype = dtype or torch.float32
    gen = torch.Generator().manual_seed(5)
    x = (torch.rand(*PROBE.x_shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    w = (torch.rand(*PROBE.w_shape, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    return x, w


def test_result_is_a_cuda_tensor_shared_without_copy(cc, torch_cuda):
    torch = torch_cuda
    x, w = _probe_tensors(torch)
    conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
    y = conv.forward(x.cuda(), w.cuda(), algo="direct")
    assert hasattr(y, "__dlpack__") and y.device.type == "cuda"
    y2 = torch.from_dlpack(y)
    assert y2.data_ptr() == y.data_ptr(), "torch.from_dlpack must not copy"
    ref = PROBE.reference(x.numpy(), w.numpy())
    assert relative_error(y2.cpu().numpy(), ref) <= bound("forward", "direct", np.float32)


def test_runs_on_the_current_torch_stream(cc, torch_cuda):
    """x is written on a side stream after a long sleep; convcore must queue behind it on that
    stream (on any other stream it would read the old x)."""
    torch = torch_cuda
    x, w = _probe_tensors(torch)
    conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
    xd, wd = torch.zeros_like(x, device="cuda"), w.cuda()
    x_pinned = x.pin_memory()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on the side stream
        xd.copy_(x_pinned, non_blocking=True)
        for algo in registered(cc, "forward"):
            try:
                y = conv.forward(xd, wd, algo=algo)
            except cc.NotSupportedError:
                continue
            side.synchronize()
            err = relative_error(y.cpu().numpy(), PROBE.reference(x.numpy(), w.numpy()))
            assert err <= bound("forward", algo, np.float32), f"{algo}: {err:.3g} (wrong stream?)"


def test_out_is_written_in_place(cc, torch_cuda):
    torch = torch_cuda
    x, w = _probe_tensors(torch)
    conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
    out = torch.full(conv.output_shape(PROBE.x_shape, PROBE.w_shape), math.nan, device="cuda")
    ptr = out.data_ptr()
    res = conv.forward(x.cuda(), w.cuda(), algo="direct", out=out)
    assert res is out and out.data_ptr() == ptr and torch.isfinite(out).all()


def test_mixed_devices_are_a_clear_error(cc, torch_cuda):
    torch = torch_cuda
    x, w = _probe_tensors(torch)
    conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
    with pytest.raises(cc.BadParamError, match="different devices"):
        conv.forward(x.cuda(), w, algo="direct")
    with pytest.raises(cc.BadParamError, match="different devices"):
        conv.forward(x, w.cuda(), algo="direct")
    out_cpu = torch.empty(conv.output_shape(PROBE.x_shape, PROBE.w_shape))
    with pytest.raises(cc.BadParamError, match="out is on"):
        conv.forward(x.cuda(), w.cuda(), algo="direct", out=out_cpu)
    dy = torch.zeros(conv.output_shape(PROBE.x_shape, PROBE.w_shape))
    with pytest.raises(cc.BadParamError, match="different devices"):
        conv.backward_data(dy.cuda(), w, PROBE.x_shape, algo="direct")
    with pytest.raises(cc.BadParamError, match="different devices"):
        conv.backward_filter(x, dy.cuda(), PROBE.w_shape, algo="direct")
    if torch.cuda.device_count() >= 2:
        with pytest.raises(cc.BadParamError, match="different devices"):
            conv.forward(x.to("cuda:0"), w.to("cuda:1"), algo="direct")


def test_cupy_arrays(cc):
    """CuPy in, CuPy out (on the array's device and current stream), zero-copy both ways.
    CuPy is optional: this one test skips without it."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (optional)")
    x, w = PROBE.inputs("float32", seed=2)
    conv = cc.Convolution(cc.ConvDesc(**PROBE.desc_kwargs()))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        y = conv.forward(cupy.asarray(x), cupy.asarray(w), algo="direct")
        assert isinstance(y, cupy.ndarray)
        assert cupy.from_dlpack(y).data.ptr == y.data.ptr
        stream.synchronize()
    err = relative_error(cupy.asnumpy(y), PROBE.reference(x, w))
    assert err <= bound("forward", "direct", np.float32)
