"""convcore.torch: the custom operators, autograd through convcore's backward passes, the
nn.Conv2d drop-in, convert(), state_dict, torch.compile. Small shapes: the file runs in seconds."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import convcore  # noqa: E402
import convcore.torch as ct  # noqa: E402
from reference import assert_compiled_matches_eager, error_bound  # noqa: E402



pytestmark = pytest.mark.usefixtures("one_thread")


CLASSIC = ["direct", "im2col_gemm", "implicit_gemm", "auto"]


def _preparations():
    """Filters the core has prepared and kept on this thread's CPU handle (its plan cache). A test
    that counts them starts with convcore.clear_plan_cache(): filters another test kept for the
    same bytes at the same address are rightly reused."""
    return convcore.plan_cache_info()["filter_preparations"]


def rel_err(y, ref):
    """||y - ref|| / ||ref|| in float64."""
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / max(float(ref.norm()), 1e-300))


def bound(algo, direction, x, w, kw):
    """The float32 bound of ``algo`` in ``direction``; for "auto", the largest bound among the
    candidates it times (the heuristic's first SELECT_CANDIDATES)."""
    if algo == "auto":
        conv = convcore.Convolution(padding=kw["padding"], stride=kw["stride"],
                                    dilation=kw["dilation"], groups=kw["groups"])
        top = conv.applicable_algos(x.shape, w.shape, direction=direction)
        return max(bound(a, direction, x, w, kw) for a in top[:convcore._convcore.SELECT_CANDIDATES])
    return error_bound(algo, "float32", direction)


# (n, c, h, w, k, r, s, stride, padding, dilation, groups, bias)
CONFIGS = [
    (2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, True),
    (1, 4, 7, 5, 6, 3, 2, 2, 0, 1, 2, False),
    (2, 2, 6, 7, 3, 1, 1, 1, 0, 1, 1, True),
    (1, 4, 8, 8, 4, 3, 3, 1, 2, 2, 4, True),           # depthwise, dilated
    (1, 3, 7, 7, 2, 2, 3, (2, 1), (1, 0), 1, 1, True),  # rectangular everything
    (2, 6, 5, 6, 3, 3, 3, 3, 1, (1, 2), 3, False),
    (1, 2, 4, 4, 2, 5, 5, 1, 2, 1, 1, True),           # filter larger than the image
    (1, 4, 9, 6, 8, 3, 1, (1, 2), (0, 1), (2, 1), 2, True),
]


def make(cfg, dtype=torch.float64, requires_grad=True, seed=0):
    n, c, h, w, k, r, s, stride, padding, dilation, groups, has_bias = cfg
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, c, h, w, generator=g, dtype=dtype) * 2 - 1
    wt = torch.rand(k, c // groups, r, s, generator=g, dtype=dtype) * 2 - 1
    b = torch.rand(k, generator=g, dtype=dtype) * 2 - 1 if has_bias else None
    for t in (x, wt, b):
        if t is not None:
            t.requires_grad_(requires_grad)
    return x, wt, b, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


def cfg_id(cfg):
    return "n{}c{}h{}w{}k{}r{}s{}_st{}_p{}_d{}_g{}_{}".format(*cfg[:11], "b" if cfg[11] else "nob")


def has_backward():
    return hasattr(convcore.Convolution, "backward_data")


needs_backward = pytest.mark.skipif(not has_backward(),
                                    reason="this convcore build has no backward passes")


# ---- import and forward -----------------------------------------------------------------------------

def test_import_convcore_does_not_import_torch():
    code = "import sys, convcore; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("algo", CLASSIC)
@pytest.mark.parametrize("cfg", CONFIGS[:5], ids=cfg_id)
def test_forward_matches_torch(cfg, algo):
    x, w, b, kw = make(cfg, torch.float32, requires_grad=False)
    y = ct.conv2d(x, w, b, algo=algo, **kw)
    ref = F.conv2d(x.double(), w.double(), None if b is None else b.double(), **kw)
    assert y.dtype == torch.float32 and y.shape == ref.shape
    assert rel_err(y, ref) <= bound(algo, "forward", x, w, kw)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own
@pytest.mark.parametrize("padding,padding_mode,dilation,k", [
    ("same", "zeros", 1, 3), ("same", "zeros", 1, 4), ("same", "zeros", (2, 1), (2, 3)),
    ("valid", "zeros", 1, 3), (1, "reflect", 1, 3), ((2, 1), "circular", 1, 3),
    ("same", "replicate", 1, 4)])
def test_padding_variants_match_nn_conv2d(padding, padding_mode, dilation, k):
    torch.manual_seed(0)
    ref = nn.Conv2d(3, 4, k, padding=padding, padding_mode=padding_mode, dilation=dilation,
                    dtype=torch.float64)
    mine = ct.Conv2d(3, 4, k, padding=padding, padding_mode=padding_mode, dilation=dilation,
                     dtype=torch.float64)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    y = mine(x)
    assert y.shape == ref(x).shape
    assert rel_err(y, ref(x)) <= 1e-12
    if has_backward():
        xr, xm = x.clone().requires_grad_(), x.clone().requires_grad_()
        g = torch.randn_like(y)
        (ref(xr) * g).sum().backward()
        (mine(xm) * g).sum().backward()
        assert rel_err(xm.grad, xr.grad) <= 1e-12
        assert rel_err(mine.weight.grad, ref.weight.grad) <= 1e-12
        assert rel_err(mine.bias.grad, ref.bias.grad) <= 1e-12


def test_same_padding_with_stride_is_rejected():
    x, w = torch.randn(1, 2, 5, 5), torch.randn(2, 2, 3, 3)
    for conv2d in (ct.conv2d, convcore.conv2d):  # the same errors in both modules
        with pytest.raises(convcore.BadParamError, match="strided"):
            conv2d(x, w, stride=2, padding="same")
        with pytest.raises(convcore.BadParamError, match="padding string"):
            conv2d(x, w, padding="full")


def test_unbatched_input():
    x, w = torch.randn(2, 5, 5), torch.randn(3, 2, 3, 3)
    y = ct.conv2d(x, w, padding=1)
    assert y.shape == (3, 5, 5)
    assert rel_err(y, F.conv2d(x, w, padding=1)) <= 1e-5


def test_channels_last_and_empty_batch():
    x = torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)
    w = torch.randn(4, 4, 3, 3)
    y = ct.conv2d(x, w, padding=1)
    assert rel_err(y, F.conv2d(x, w, padding=1)) <= 1e-5
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    y = ct.conv2d(torch.randn(0, 4, 6, 6), w, torch.randn(4))
    assert y.shape == (0, 4, 4, 4)


# ---- errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.complex64])
def test_unsupported_dtype_is_a_bad_param_in_both_modules(dtype):
    """One exception per kind of error: a dtype convcore does not support is a BadParamError in
    convcore.torch as in convcore (also a TypeError, as PyTorch raises, and a ValueError)."""
    x, w = torch.ones(1, 2, 4, 4, dtype=dtype), torch.ones(2, 2, 3, 3, dtype=dtype)
    with pytest.raises(convcore.BadParamError, match="float32 and torch.float64"):
        ct.conv2d(x, w)
    with pytest.raises(convcore.BadParamError, match="float32 and torch.float64"):
        torch.ops.convcore.conv2d(x, w, None, [1, 1], [0, 0], [1, 1], 1, "auto")
    with pytest.raises(convcore.BadParamError, match="float32 and torch.float64"):
        ct.Conv2d(2, 2, 3, dtype=torch.float32)(x)
    with pytest.raises(convcore.BadParamError, match="float32 and float64"):
        convcore.conv2d(x, w)  # the NumPy/DLPack API, on the same tensors
    with pytest.raises(convcore.BadParamError, match="float32 and float64"):
        convcore.conv2d(x.numpy() if dtype != torch.bfloat16 else x.view(torch.int16).numpy(),
                        w.numpy() if dtype != torch.bfloat16 else w.view(torch.int16).numpy())
    with pytest.raises(TypeError):  # what PyTorch-style callers catch
        ct.conv2d(x, w)
    with pytest.raises(TypeError):
        convcore.conv2d(x, w)


def test_supported_dtypes_are_the_same_in_both_modules():
    assert [d.name for d in convcore.SUPPORTED_DTYPES] == ["float32", "float64"]
    assert ct.SUPPORTED_DTYPES == (torch.float32, torch.float64)
    assert [str(t) for t in ct.SUPPORTED_DTYPES] == [f"torch.{d.name}" for d in convcore.SUPPORTED_DTYPES]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own
def test_conv2d_takes_the_same_arguments_in_both_modules():
    """convcore.conv2d and convcore.torch.conv2d take F.conv2d's arguments in its order; each
    adds keyword extras of its own."""
    import inspect
    f_args = ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
    for fn in (convcore.conv2d, ct.conv2d):
        assert list(inspect.signature(fn).parameters)[:7] == f_args, fn
    x, w, b = torch.randn(2, 4, 7, 6), torch.randn(6, 2, 3, 2), torch.randn(6)
    args = (x, w, b, (2, 1), (1, 2), (1, 2), 2)  # positional, F.conv2d's order
    ref = F.conv2d(*args)
    assert rel_err(convcore.conv2d(*args), ref) <= 1e-5
    assert rel_err(ct.conv2d(*args), ref) <= 1e-5
    y = convcore.conv2d(x.numpy(), w.numpy(), b.numpy(), (2, 1), (1, 2), (1, 2), 2)
    assert rel_err(torch.from_numpy(y), ref) <= 1e-5
    for padding in ("same", "valid"):  # "same" with an even kernel pads one side more
        ref = F.conv2d(x, w, b, 1, padding, (1, 2), 2)
        for out in (convcore.conv2d(x, w, b, 1, padding, (1, 2), 2),
                    torch.from_numpy(convcore.conv2d(x.numpy(), w.numpy(), b.numpy(), 1, padding,
                                                     (1, 2), 2))):
            assert out.shape == ref.shape and rel_err(out, ref) <= 1e-5


def test_mixed_dtypes_and_devices_are_rejected():
    x, w = torch.randn(1, 2, 4, 4), torch.randn(2, 2, 3, 3, dtype=torch.float64)
    with pytest.raises(convcore.BadParamError, match="must be equal"):
        ct.conv2d(x, w)
    with pytest.raises(convcore.NotSupportedError, match="CPU and CUDA"):
        ct.conv2d(x.to("meta"), w.float().to("meta"))
    with pytest.raises(convcore.BadParamError, match="bias"):
        ct.conv2d(x, w.float(), torch.randn(3))
    layer = ct.Conv2d(2, 2, 3, bias=False)
    with torch.no_grad():
        layer(x)  # the shapes are known to the layer now; a weight of another dtype is still refused
        layer.weight = nn.Parameter(w)
        with pytest.raises(convcore.BadParamError, match="must be equal"):
            layer(x)


def test_unknown_algo_is_a_bad_param():
    with pytest.raises(convcore.BadParamError, match="unknown algorithm"):
        ct.Conv2d(2, 2, 3, algo="fastest")
    with pytest.raises(convcore.BadParamError, match="unknown algorithm"):
        ct.conv2d(torch.randn(1, 2, 4, 4), torch.randn(2, 2, 3, 3), algo="fastest")


# ---- gradients ----------------------------------------------------------------------------------------

@needs_backward
@pytest.mark.parametrize("cfg", CONFIGS, ids=cfg_id)
def test_gradcheck_float64(cfg):
    x, w, b, kw = make(cfg)
    assert torch.autograd.gradcheck(lambda *a: ct.conv2d(*a, **kw), (x, w, b))


@needs_backward
@pytest.mark.parametrize("algo", CLASSIC)
@pytest.mark.parametrize("cfg", CONFIGS[:5], ids=cfg_id)
def test_gradients_match_torch(cfg, algo):
    x, w, b, kw = make(cfg, torch.float32)
    y = ct.conv2d(x, w, b, algo=algo, **kw)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, [t for t in (x, w, b) if t is not None], g)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    b64 = None if b is None else b.detach().double().requires_grad_()
    y64 = F.conv2d(x64, w64, b64, **kw)
    refs = torch.autograd.grad(y64, [t for t in (x64, w64, b64) if t is not None], g.double())
    assert rel_err(y, y64) <= bound(algo, "forward", x, w, kw)
    directions = ("backward_data", "backward_filter", "backward_data")  # db: any pick is exact
    for name, got, ref, direction in zip(("dx", "dw", "db"), grads, refs, directions):
        assert got.dtype == torch.float32 and got.shape == ref.shape, name
        assert rel_err(got, ref) <= bound(algo, direction, x, w, kw), name


@needs_backward
@pytest.mark.parametrize("algo,passes", [
    ("im2win", ("im2win", "auto", "auto")),                       # no backward IM2WIN
    ("winograd_2x2_3x3", ("winograd_2x2_3x3", "winograd_2x2_3x3", "auto")),
    (("winograd_4x4_3x3", "winograd_2x2_3x3", "winograd_3x3_2x2"),
     ("winograd_4x4_3x3", "winograd_2x2_3x3", "winograd_3x3_2x2")),
    ((convcore.Algo.FFT, "fft", "poly_hankel"), ("fft", "fft", "poly_hankel"))])
def test_algo_per_pass(algo, passes):
    """One name serves each pass that has it (the others: auto); a triple picks each pass."""
    assert tuple(ct._split_algo(ct._algo_spec(algo))) == passes
    x, w, b, kw = make(CONFIGS[0], torch.float32)  # 3x3, stride 1: every algorithm applies
    m = ct.Conv2d(3, 4, 3, padding=1, algo=algo)
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = F.conv2d(x64, w64, b.detach().double(), **kw)
    y = m(x)
    g = torch.randn_like(y)
    dx, dw = torch.autograd.grad(y, (x, m.weight), g)
    dx64, dw64 = torch.autograd.grad(y64, (x64, w64), g.double())
    fwd_bound = bound(passes[0], "forward", x, w, kw)
    assert rel_err(y, y64) <= fwd_bound
    assert rel_err(dx, dx64) <= bound(passes[1], "backward_data", x, w, kw)
    assert rel_err(dw, dw64) <= bound(passes[2], "backward_filter", x, w, kw)


@needs_backward
def test_strict_triple_and_unsupported_backward_algo():
    with pytest.raises(convcore.BadParamError, match="for the backward data pass"):
        ct.Conv2d(2, 2, 3, algo=("auto", "im2win", "auto"))
    with pytest.raises(convcore.BadParamError, match="3 algorithms"):
        ct.conv2d(torch.randn(1, 2, 4, 4), torch.randn(2, 2, 3, 3), algo="direct,direct")
    # FFT backward data needs stride 1: NOT_SUPPORTED from convcore, not a silent substitute
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    y = ct.conv2d(x, torch.randn(2, 2, 3, 3), stride=2, algo=("direct", "fft", "direct"))
    with pytest.raises(convcore.NotSupportedError):
        y.sum().backward()


@needs_backward
def test_only_needed_gradients_and_strided_dy():
    """Frozen weights or inputs: the other gradient still flows; y.sum() gives an expanded dy."""
    x, w, b, kw = make(CONFIGS[0], torch.float64)
    w.requires_grad_(False)
    ct.conv2d(x, w, b, **kw).sum().backward()
    ref_x = x.detach().clone().requires_grad_()
    F.conv2d(ref_x, w, b.detach(), **kw).sum().backward()
    assert w.grad is None and rel_err(x.grad, ref_x.grad) <= 1e-12
    x2 = x.detach()
    w2 = w.detach().clone().requires_grad_()
    ct.conv2d(x2, w2, None, **kw).sum().backward()
    ref_w = w.detach().clone().requires_grad_()
    F.conv2d(x2, ref_w, None, **kw).sum().backward()
    assert rel_err(w2.grad, ref_w.grad) <= 1e-12


@needs_backward
@pytest.mark.parametrize("cfg", [CONFIGS[0], CONFIGS[1], CONFIGS[4]], ids=cfg_id)
def test_opcheck(cfg):
    x, w, b, kw = make(cfg, torch.float32)
    args = (x, w, b, list(ct._pair(kw["stride"])), list(ct._pair(kw["padding"])),
            list(ct._pair(kw["dilation"])), kw["groups"], "auto")
    torch.library.opcheck(torch.ops.convcore.conv2d.default, args)
    xd, wd = x.detach(), w.detach()
    y = torch.ops.convcore.conv2d(xd, wd, None, *args[3:])
    dy = torch.randn_like(y)
    torch.library.opcheck(torch.ops.convcore.conv2d_backward_data.default,
                          (dy, wd, list(x.shape), *args[3:]))
    torch.library.opcheck(torch.ops.convcore.conv2d_backward_filter.default,
                          (xd, dy, list(w.shape), *args[3:]))
    torch.library.opcheck(torch.ops.convcore.conv2d_backward_bias.default, (dy,))


# ---- the module, convert, state_dict -----------------------------------------------------------------

def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(8, 4, 3, padding="same", dilation=2, groups=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 5))


def test_convert_shares_parameters_and_keeps_mode():
    torch.manual_seed(0)
    model = nn.Sequential(small_cnn(), nn.Sequential(nn.Identity()))
    model.eval()
    params = {name: p for name, p in model.named_parameters()}
    x = torch.randn(2, 3, 8, 8)
    ref = model(x)
    converted = ct.convert(model, algo="im2col_gemm")
    convs = [m for m in converted.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 3 and all(type(m) is ct.Conv2d for m in convs)
    assert all(m.algo == "im2col_gemm" and not m.training for m in converted.modules()
               if isinstance(m, ct.Conv2d))
    for name, p in converted.named_parameters():
        assert p is params[name], name
    assert rel_err(converted(x), ref) <= 1e-5
    assert "algo='im2col_gemm'" in repr(converted)
    assert ct.convert(converted, algo="direct") is converted  # converted modules get the new algo
    assert all(m.algo == "direct" for m in converted.modules() if isinstance(m, ct.Conv2d))
    # a Conv2d at the root is returned converted; a subclass of nn.Conv2d with a method of its
    # own is left alone, one without keeps its class (test_torch_nd has the rest)
    assert type(ct.convert(nn.Conv2d(2, 2, 1))) is ct.Conv2d

    class MyConv(nn.Conv2d):
        def forward(self, input):
            return super().forward(input) + 1
    assert type(ct.convert(MyConv(2, 2, 1))) is MyConv

    class PlainSubclass(nn.Conv2d):
        pass
    plain = ct.convert(PlainSubclass(2, 2, 1))
    assert isinstance(plain, ct.Conv2d) and isinstance(plain, PlainSubclass)


def test_state_dict_round_trip():
    torch.manual_seed(0)
    plain = small_cnn()
    converted = ct.convert(small_cnn(), algo="direct")
    sd = converted.state_dict()
    assert list(sd) == list(plain.state_dict())           # same keys, no "algo"
    plain.load_state_dict(sd)
    back = ct.convert(small_cnn())
    back.load_state_dict(plain.state_dict())
    for (k1, v1), (k2, v2) in zip(sd.items(), back.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    m = ct.Conv2d(2, 3, 3, bias=False, algo=("implicit_gemm", "auto", "direct"))
    assert list(m.state_dict()) == ["weight"]


@needs_backward
def test_training_loss_curve_matches_nn_conv2d():
    """20 SGD steps of a 3-conv CNN on random data: the convcore loss curve equals PyTorch's to
    a relative 1e-4 per step (float32; the difference is the summation order of each conv)."""
    torch.manual_seed(0)
    ref_model = small_cnn()
    model = ct.convert(small_cnn())
    model.load_state_dict(ref_model.state_dict())
    x, target = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    curves = []
    for m in (ref_model, model):
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves.append(losses)
    ref_losses, losses = curves
    assert ref_losses[-1] < 0.8 * ref_losses[0]  # it does learn
    for step, (a, b) in enumerate(zip(losses, ref_losses)):
        assert abs(a - b) <= 1e-4 * abs(b), (step, losses, ref_losses)


@needs_backward
def test_torch_compile_matches_eager():
    # backend "aot_eager": Dynamo traces the model (the custom op through its fake), AOTAutograd
    # traces forward and backward (the backward ops through their fakes) and partitions them, the
    # graphs then run eagerly. The default backend (inductor) works too and gives bit-identical
    # results (checked by hand): it lowers the same graphs, the convcore ops staying extern calls,
    # but compiling C++ for the surrounding ops took 55 s on this 2-core machine.
    torch.manual_seed(0)
    model = ct.convert(small_cnn())
    assert_compiled_matches_eager(model, torch.randn(4, 3, 8, 8))


@needs_backward
def test_torch_compile_dynamic_shapes():
    """One graph for several image sizes: the fakes compute shapes symbolically ("same" padding
    with an even kernel included)."""
    torch.manual_seed(0)
    model = nn.Sequential(ct.Conv2d(3, 4, 4, padding="same"), nn.ReLU(),
                          ct.Conv2d(4, 2, 3, stride=2, padding=1))
    compiled = torch.compile(model, backend="aot_eager", dynamic=True, fullgraph=True)
    for size in (7, 10):
        x = torch.randn(2, 3, size, size + 1, requires_grad=True)
        y = compiled(x)
        (dx,) = torch.autograd.grad(y.sum(), x)
        x2 = x.detach().clone().requires_grad_()
        y2 = model(x2)
        (dx2,) = torch.autograd.grad(y2.sum(), x2)
        assert y.shape == y2.shape and torch.equal(y, y2) and torch.equal(dx, dx2)


FIND_IN_PLACE_SCRIPT = """
import json, sys, torch, convcore, convcore.torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2),
                      nn.ReLU(), nn.Conv2d(8, 4, 1)).eval()
torch.manual_seed(0)
x = torch.randn(2, 3, 17, 15)
with torch.no_grad():
    expected = model(x)
    model = convcore.torch.convert(model, algo="find")
    y = model(x)          # each layer's first call times its candidates on the real activations
    stats = convcore.find_stats()
    y2 = model(x)         # later calls only look the decision up
err = float((y - expected).norm() / expected.norm())
print(json.dumps({"timed": stats["timed_runs"], "timed_after": convcore.find_stats()["timed_runs"],
                  "algos": [m.last_algo for m in model if isinstance(m, convcore.torch.Conv2d)],
                  "err": err, "same": bool(torch.equal(y, y2))}))
"""


def test_convert_find_times_in_place_once_per_machine(tmp_path):
    """algo="find": the first forward of each layer times the algorithms on the layer's real
    input and weights; the winners go into the find-db, so a second process times nothing."""
    env = dict(os.environ, CONVCORE_FIND_DB=str(tmp_path / "find-db.txt"), OMP_NUM_THREADS="1")
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", FIND_IN_PLACE_SCRIPT], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["timed"] >= 3 * 3  # three layers, several algorithms each
    assert first["timed_after"] == first["timed"]
    assert second["timed"] == 0 and second["algos"] == first["algos"]
    assert all(first["algos"]) and first["same"] and second["same"]
    assert first["err"] < 1e-4 and second["err"] < 1e-4


def test_eager_calls_convcore_directly_and_captures_record_the_operator(monkeypatch):
    """Eager calls on CPU tensors skip the custom operator's dispatch: without autograd
    (no_grad, inference_mode, inputs that need no grad) the layer calls convcore directly, with
    autograd through _Conv2dFunction (the operator's formulas). A capture (here torch.jit.trace)
    records the operator. All compute the same bits."""
    torch.manual_seed(0)
    layer = ct.Conv2d(3, 5, 3, padding=1, algo="im2col_gemm")
    x = torch.randn(2, 3, 9, 7)
    through_op = ct._conv2d_op(x, layer.weight, layer.bias, [1, 1], [1, 1], [1, 1], 1,
                               "im2col_gemm")
    real_op = convcore._torch_ops._conv2d_op  # (conv2d's operator route calls it from there)
    monkeypatch.setattr(convcore._torch_ops, "_conv2d_op", lambda *a: pytest.fail("the operator was called"))
    with torch.no_grad():
        direct = layer(x)
    with torch.inference_mode():
        direct_inference = layer(x)
    eager_grad = layer(x)
    assert eager_grad.grad_fn is not None and type(eager_grad.grad_fn).__name__.startswith("_Conv2dFunction")
    assert torch.equal(direct, through_op.detach()) and torch.equal(direct_inference, direct)
    assert torch.equal(eager_grad.detach(), direct)
    assert layer.last_algo == "im2col_gemm"
    frozen = ct.Conv2d(3, 5, 3, padding=1, algo="im2col_gemm").requires_grad_(False)
    frozen.load_state_dict(layer.state_dict())
    assert torch.equal(frozen(x), direct)      # nothing requires grad: no operator either
    monkeypatch.setattr(convcore._torch_ops, "_conv2d_op", real_op)
    with torch.no_grad():
        traced = torch.jit.trace(layer, x)
    assert "convcore::conv2d" in str(traced.graph)
    assert torch.equal(traced(x), direct)


@needs_backward
@pytest.mark.parametrize("activation", ["identity", "relu", "relu6", "silu"])
def test_eager_autograd_matches_the_operator(activation):
    """_Conv2dFunction (eager, CPU) and the operator's autograd give the same gradients, for each
    activation; dy as y.sum() gives it (expanded, stride 0) and channels_last."""
    torch.manual_seed(0)
    for memory_format in (torch.contiguous_format, torch.channels_last):
        x = (torch.randn(2, 4, 7, 6) * 3).to(memory_format=memory_format).requires_grad_(True)
        w = torch.randn(6, 4, 3, 3, requires_grad=True)
        b = torch.randn(6, requires_grad=True)
        y = ct.conv2d(x, w, b, padding=1, activation=activation)
        assert type(y.grad_fn).__name__.startswith("_Conv2dFunction")
        y_op = ct._conv2d_op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "auto", activation)
        assert torch.equal(y, y_op)
        g = torch.randn_like(y)  # a dy of y's layout, and one expanded
        for loss, loss_op in (((y * g).sum(), (y_op * g).sum()), (y.sum(), y_op.sum())):
            grads = torch.autograd.grad(loss, (x, w, b), retain_graph=True)
            grads_op = torch.autograd.grad(loss_op, (x, w, b), retain_graph=True)
            for got, expected in zip(grads, grads_op):
                assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5)
            assert grads[0].is_contiguous(memory_format=memory_format)


@needs_backward
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
def test_training_with_a_fused_silu_or_gelu_keeps_the_preactivation(activation):
    """A Conv2d or Conv1d with a fused SiLU or GELU, recorded by autograd on CPU tensors: the
    convolution, then PyTorch's activation, which keeps its input (the fused op keeps only y, and
    its backward would run the convolution again). Gradients as PyTorch's (float64); without
    autograd the fused op, with the same values."""
    torch.manual_seed(2)
    approximate = "tanh" if activation == "gelu_tanh" else "none"
    act = F.silu if activation == "silu" else (lambda v: F.gelu(v, approximate=approximate))
    recorded = "SiluBackward" if activation == "silu" else "GeluBackward"
    for layer, conv, x in ((ct.Conv2d(4, 6, 3, padding=1), F.conv2d, torch.randn(2, 4, 7, 6)),
                           (ct.Conv1d(4, 6, 3, padding=1), F.conv1d, torch.randn(2, 4, 9))):
        layer = layer.double()
        layer.activation = activation
        x = x.double().requires_grad_(True)
        y = layer(x)
        assert type(y.grad_fn).__name__.startswith(recorded), type(y.grad_fn).__name__
        x_ref = x.detach().clone().requires_grad_(True)
        w_ref = layer.weight.detach().clone().requires_grad_(True)
        b_ref = layer.bias.detach().clone().requires_grad_(True)
        ref = act(conv(x_ref, w_ref, b_ref, padding=1))
        assert rel_err(y, ref) <= 1e-12
        g = torch.randn_like(ref)
        got = torch.autograd.grad((y * g).sum(), (x, layer.weight, layer.bias))
        expected = torch.autograd.grad((ref * g).sum(), (x_ref, w_ref, b_ref))
        for a, b in zip(got, expected):
            assert rel_err(a, b) <= 1e-12
        with torch.no_grad():
            assert rel_err(layer(x), ref) <= 1e-12


@needs_backward
def test_eager_double_backward_is_a_clear_error():
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    (dx,) = torch.autograd.grad(ct.conv2d(x, w).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|twice"):
        dx.sum().backward()


def test_channels_last_weights_are_read_in_place():
    """A channels_last model (KRSC weights) in inference and in training, against float64."""
    torch.manual_seed(1)
    layer = ct.Conv2d(6, 8, 3, padding=1, algo="winograd_4x4_3x3").to(memory_format=torch.channels_last)
    assert not layer.weight.is_contiguous()
    x = torch.randn(2, 6, 9, 7).to(memory_format=torch.channels_last).requires_grad_(True)
    ref = F.conv2d(x.double(), layer.weight.double(), layer.bias.double(), padding=1)
    limit = bound("winograd_4x4_3x3", "forward", x, layer.weight, {})
    with torch.no_grad():
        assert rel_err(layer(x), ref) <= limit
        assert rel_err(layer(x), ref) <= limit  # the kept (prepared) KRSC filters
    layer(x).square().sum().backward()
    x64, w64 = x.detach().double().requires_grad_(True), layer.weight.detach().double().requires_grad_(True)
    F.conv2d(x64, w64, layer.bias.detach().double(), padding=1).square().sum().backward()
    assert rel_err(layer.weight.grad, w64.grad) <= 1e-4 and rel_err(x.grad, x64.grad) <= 1e-4


def _new_weights(layer, seed):
    return torch.randn(layer.weight.shape, generator=torch.Generator().manual_seed(seed))


def _optimizer_step(layer, x, seed):
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    layer.train()
    layer(x).square().sum().backward()  # through the operator: nothing prepared
    optimizer.step()
    layer.eval()


def _load_state_dict(layer, x, seed):
    layer.load_state_dict({"weight": _new_weights(layer, seed)})


def _in_place_no_grad(layer, x, seed):
    with torch.no_grad():
        layer.weight.mul_(-2)


def _new_parameter(layer, x, seed):
    layer.weight = nn.Parameter(_new_weights(layer, seed))


def _data_copy(layer, x, seed):
    layer.weight.data.copy_(_new_weights(layer, seed))  # no version counter moves


def _data_assign(layer, x, seed):
    layer.weight.data = _new_weights(layer, seed)


def _data_in_place(layer, x, seed):
    layer.weight.data[0].neg_()  # one output channel only


def _inference_copy(layer, x, seed):
    with torch.inference_mode():
        layer.weight.copy_(_new_weights(layer, seed))  # an inference tensor: no version counter


# (how the weights change, whether their version counter sees it)
WEIGHT_CHANGES = [(_optimizer_step, True), (_load_state_dict, True), (_in_place_no_grad, True),
                  (_new_parameter, True), (_data_copy, False), (_data_assign, True),
                  (_data_in_place, False), (_inference_copy, False)]


@pytest.mark.parametrize("freeze", [False, True], ids=["default", "freeze"])
@pytest.mark.parametrize("change,seen", WEIGHT_CHANGES, ids=[c.__name__[1:] for c, _ in WEIGHT_CHANGES])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last],
                         ids=["nchw", "nhwc"])
def test_inference_never_runs_filters_older_than_the_weights(change, seen, freeze, memory_format):
    """In inference a layer keeps its transformed filters (Winograd's U) and transforms them again
    only when its weights changed. By default every way of changing them is seen (a fingerprint
    of the weight at every call); with freeze=True those its version counter sees, and the others
    after refresh(). Every output the layer gives matches the reference of the weights it has."""
    torch.manual_seed(0)
    made_under_inference = change is _inference_copy
    with torch.inference_mode(made_under_inference):
        layer = ct.Conv2d(8, 8, 3, padding=1, bias=False, algo="winograd_4x4_3x3", freeze=freeze)
        layer = layer.to(memory_format=memory_format).eval()
    x = torch.randn(1, 8, 12, 12).to(memory_format=memory_format)
    convcore.clear_plan_cache()
    base = _preparations()
    limit = bound("winograd_4x4_3x3", "forward", x, layer.weight, {})

    def run():
        with torch.no_grad():
            return layer(x)

    def matches_weights(y):
        ref = F.conv2d(x.double(), layer.weight.detach().double(), padding=1)
        return rel_err(y, ref) <= limit

    first = run()
    assert matches_weights(first) and _preparations() - base == 1
    assert torch.equal(run(), first) and _preparations() - base == 1  # nothing changed: kept
    change(layer, x, seed=1)
    y = run()
    if freeze and not seen:  # freeze's contract: trusted until refresh()
        assert _preparations() - base == 1
        assert ct.refresh(layer) is layer
        y = run()
    assert _preparations() - base == 2 and matches_weights(y)
    assert torch.equal(run(), y) and _preparations() - base == 2  # and kept again


@pytest.mark.parametrize("dims", [1, 3], ids=["conv1d", "conv3d"])
@pytest.mark.parametrize("freeze", [False, True], ids=["default", "freeze"])
@pytest.mark.parametrize("change,seen", WEIGHT_CHANGES, ids=[c.__name__[1:] for c, _ in WEIGHT_CHANGES])
def test_nd_inference_never_runs_filters_older_than_the_weights(change, seen, freeze, dims):
    """Conv1d's and Conv3d's freeze, as Conv2d's: in inference the layer keeps its transformed
    filters while its weights stay; by default every way of changing them is seen, with
    freeze=True those its version counter sees, and the others after refresh() (until then the
    filters it had)."""
    torch.manual_seed(0)
    cls, ref_fn = (ct.Conv1d, F.conv1d) if dims == 1 else (ct.Conv3d, F.conv3d)
    with torch.inference_mode(change is _inference_copy):
        layer = cls(16, 16, 3, padding=1, bias=False, algo="winograd_4x4_3x3", freeze=freeze).eval()
    x = torch.randn(1, 16, 40) if dims == 1 else torch.randn(1, 16, 4, 6, 7)
    # the bound of one 2-D pass, times the depth taps a 3-D output sums
    limit = dims * bound("winograd_4x4_3x3", "forward", x.unsqueeze(2) if dims == 1 else x[:, :, 0],
                         layer.weight.unsqueeze(2) if dims == 1 else layer.weight[:, :, 0], {})

    def made():  # what the Convolution keeping the filters of the weight at its address made
        w = layer.weight
        if dims == 1:
            return _preparations()
        conv = ct._torch_nd._weight_conv3d(w.data_ptr(), tuple(w.shape), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1)
        return conv._nd._kept.get("version")  # a new number whenever its filters are made again

    def run():
        with torch.no_grad():
            return layer(x)

    def matches_weights(y):
        return rel_err(y, ref_fn(x.double(), layer.weight.detach().double(), padding=1)) <= limit

    first = run()
    before = made()
    assert matches_weights(first) and before is not None and (dims == 3 or before >= 1)
    assert ("_prepared_weight" in layer.__dict__) == freeze  # the frozen route: no fingerprint
    assert torch.equal(run(), first) and made() == before  # nothing changed: kept
    change(layer, x, seed=1)
    y = run()
    if freeze and not seen:  # freeze's contract: trusted until refresh()
        assert torch.equal(y, first)
        assert ct.refresh(layer) is layer
        y = run()
    assert matches_weights(y)
    before = made()
    assert torch.equal(run(), y) and made() == before  # and kept again


def _scale_in_place(w):
    w.mul_(-2)


def _one_channel_through_data(w):
    w.data[0].neg_()  # one output channel, no version counter moves


def _copy_new_values(w):
    w.copy_(torch.randn(w.shape, generator=torch.Generator().manual_seed(5)))


@pytest.mark.parametrize("change", [_scale_in_place, _one_channel_through_data, _copy_new_values],
                         ids=["in_place", "data_in_place", "copy"])
@pytest.mark.parametrize("dims", [1, 2])
def test_functional_inference_keeps_filters_checked_against_the_weight(dims, change):
    """convcore.torch.conv2d and conv1d without autograd recording keep the filters they made from
    a weight (per weight address, checked against its bytes at every call), as the modules do:
    made once while the weight stays, made again after any change to it."""
    torch.manual_seed(3)
    w = torch.randn((8, 8, 3, 3) if dims == 2 else (8, 8, 3), requires_grad=True)
    x = torch.randn((1, 8, 12, 12) if dims == 2 else (1, 8, 40))
    fn, ref_fn = (ct.conv2d, F.conv2d) if dims == 2 else (ct.conv1d, F.conv1d)
    convcore.clear_plan_cache()
    before = _preparations()
    limit = bound("winograd_4x4_3x3", "forward", x if dims == 2 else x.unsqueeze(2),
                  w if dims == 2 else w.unsqueeze(2), {})

    def run():
        with torch.no_grad():
            y = fn(x, w, padding=1, algo="winograd_4x4_3x3")
        assert rel_err(y, ref_fn(x.double(), w.detach().double(), padding=1)) <= limit
        return y

    first = run()
    assert _preparations() == before + 1
    assert torch.equal(run(), first) and _preparations() == before + 1  # kept
    with torch.no_grad():
        change(w)
    run()
    assert _preparations() == before + 2


def test_freeze_is_checked_and_copies_keep_their_own_plans():
    with pytest.raises(convcore.BadParamError, match="freeze"):
        ct.Conv2d(2, 2, 3, freeze=1)
    with pytest.raises(convcore.BadParamError, match="freeze"):
        ct.convert(nn.Conv2d(2, 2, 3), freeze="yes")
    model = ct.convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Conv2d(4, 4, 3), nn.Conv1d(4, 4, 3)), freeze=True)
    assert all(m.freeze for m in model)
    with pytest.raises(convcore.BadParamError, match="freeze"):
        ct.Conv1d(2, 2, 3, freeze=1)
    with pytest.raises(convcore.BadParamError, match="freeze"):
        ct.Conv3d(2, 2, 3, freeze=1)
    layer = ct.Conv2d(8, 8, 3, padding=1, algo="winograd_4x4_3x3").eval()
    x = torch.randn(1, 8, 12, 12)
    clone = __import__("copy").deepcopy(layer)  # the plans stay behind; the copy makes its own
    with torch.no_grad():
        assert torch.equal(clone(x), layer(x))


@pytest.mark.parametrize("algo", ["auto", "depthwise", "im2col_gemm", "direct"])
def test_output_follows_the_input_memory_format(algo):
    """PyTorch's rule: channels_last in, channels_last out (forward and the input gradient),
    NCHW in, NCHW out; the values against float64, for depthwise and pointwise layers (which run
    NHWC natively) and a grouped 3x3 one (converted)."""
    torch.manual_seed(3)
    layers = [ct.Conv2d(6, 12, 3, padding=1, stride=2, groups=6, algo=algo),
              ct.Conv2d(6, 10, 1, algo=algo), ct.Conv2d(6, 8, 3, padding=1, groups=2, algo=algo)]
    for layer in layers:
        if algo == "depthwise" and layer.groups != layer.in_channels:
            continue
        for fmt in (torch.channels_last, torch.contiguous_format):
            x = torch.randn(2, 6, 9, 7).to(memory_format=fmt).requires_grad_(True)
            with torch.no_grad():
                y = layer(x)
            assert y.is_contiguous(memory_format=fmt), (layer, fmt)
            x64, w64 = x.detach().double().requires_grad_(True), layer.weight.detach().double().requires_grad_(True)
            ref = F.conv2d(x64, w64, layer.bias.detach().double(), layer.stride, layer.padding,
                           groups=layer.groups)
            assert rel_err(y, ref) <= 1e-5
            y = layer(x)
            assert y.is_contiguous(memory_format=fmt)
            y.square().sum().backward()
            ref.square().sum().backward()
            assert x.grad.is_contiguous(memory_format=fmt), (layer, fmt)
            assert rel_err(x.grad, x64.grad) <= 1e-4 and rel_err(layer.weight.grad, w64.grad) <= 1e-4
            layer.weight.grad = None
