"""The fused epilogue: ``Convolution.forward(..., bias=, activation=, residual=, alpha2=)`` against
a float64 NumPy reference, its argument errors, and convcore.torch: the bias and fused
activations of ``convert(model, fuse=True)`` (outputs against PyTorch, gradients against float64
PyTorch and torch.autograd.gradcheck)."""

import math

import numpy as np
import pytest

import convcore
from reference import assert_compiled_matches_eager, conv2d_reference, error_bound, relative_error

ACTS = {
    "identity": lambda v: v,
    "relu": lambda v: np.maximum(v, 0.0),
    "relu6": lambda v: np.clip(v, 0.0, 6.0),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "gelu": lambda v: v * 0.5 * np.vectorize(math.erfc)(-v / math.sqrt(2.0)),
    "gelu_tanh": lambda v: v / (1.0 + np.exp(-2 * math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
}


def _inputs(dtype, seed=0, n=2, c=5, h=9, w=8, k=6):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(dtype)
    wt = rng.uniform(-1, 1, (k, c, 3, 3)).astype(dtype)
    bias = (3 * rng.uniform(-1, 1, k)).astype(dtype)  # moves values across ReLU6's bounds
    z = rng.uniform(-1, 1, (n, k, h, w)).astype(dtype)
    return x, wt, bias, z


def _expected(x, w, bias, z, act, alpha=1.0, alpha2=1.0):
    v = alpha * conv2d_reference(x, w, padding=(1, 1))
    if z is not None:
        v = v + alpha2 * z.astype(np.float64)
    if bias is not None:
        v = v + bias.astype(np.float64)[None, :, None, None]
    return ACTS[act](v)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("algo", ["direct", "im2col_gemm", "winograd_4x4_3x3", "fft", "auto"])
@pytest.mark.parametrize("act", list(ACTS))
def test_forward_epilogue_matches_reference(dtype, algo, act):
    x, w, bias, z = _inputs(dtype)
    conv = convcore.Convolution(padding=1)
    bound = 4 * error_bound("direct" if algo == "auto" else algo, dtype) + 1e-6
    for b, r in ((bias, None), (None, z), (bias, z)):
        y = conv.forward(x, w, algo=algo, bias=b, activation=act, residual=r, alpha2=-0.5, alpha=1.5)
        assert y.dtype == np.dtype(dtype)
        err = relative_error(y, _expected(x, w, b, r, act, alpha=1.5, alpha2=-0.5))
        assert err < bound, (algo, act, b is not None, r is not None, err)


def test_residual_in_place_and_into_out():
    x, w, bias, z = _inputs("float32", seed=1)
    conv = convcore.Convolution(padding=1)
    want = _expected(x, w, bias, z, "relu", alpha2=2.0)
    out = z.copy()  # the residual is out itself
    res = conv.forward(x, w, out=out, bias=bias, activation="relu", residual=out, alpha2=2.0)
    assert res is out
    assert relative_error(out, want) < 1e-5
    out2 = np.full_like(z, np.nan)  # never read
    conv.forward(x, w, out=out2, bias=bias, activation="relu", residual=z, alpha2=2.0)
    assert relative_error(out2, want) < 1e-5


def test_torch_tensors_and_channels_last():
    torch = pytest.importorskip("torch")
    x, w, bias, z = _inputs("float32", seed=2)
    want = _expected(x, w, bias, z, "silu")
    conv = convcore.Convolution(padding=1)
    xt = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
    zt = torch.from_numpy(z)  # NCHW residual for an NHWC output: copied into its layout
    for algo in ("direct", "im2col_gemm", "auto"):
        y = conv.forward(xt, torch.from_numpy(w), algo=algo, bias=torch.from_numpy(bias),
                         activation="silu", residual=zt)
        assert y.is_contiguous(memory_format=torch.channels_last)
        assert relative_error(y.numpy(), want) < 1e-5
    # the fast path (torch CPU tensors, new output, no residual) takes bias and activation
    y = conv.forward(torch.from_numpy(x), torch.from_numpy(w), bias=torch.from_numpy(bias),
                     activation="relu6")
    assert relative_error(y.numpy(), _expected(x, w, bias, None, "relu6")) < 1e-5


def test_bad_epilogue_arguments_name_the_argument():
    x, w, bias, z = _inputs("float32", seed=3)
    conv = convcore.Convolution(padding=1)
    cases = [
        (dict(activation="tanh"), "activation"),
        (dict(activation=3), "activation"),
        (dict(bias=np.ones(5, np.float32)), "bias: expected shape (6,)"),
        (dict(bias=np.ones((6, 1), np.float32)), "bias: expected shape (6,)"),
        (dict(bias=np.ones(6, np.float64)), "bias: dtype float64"),
        (dict(residual=np.ones((2, 6, 9, 7), np.float32)), "residual: expected shape"),
        (dict(residual=z.astype(np.float64)), "residual: dtype float64"),
        (dict(residual=z, alpha2="x"), "alpha2"),
        (dict(bias=bias, out=np.zeros_like(z), beta=1.0), "beta"),
    ]
    for kwargs, words in cases:
        with pytest.raises(convcore.BadParamError, match=words.replace("(", r"\(").replace(")", r"\)")):
            conv.forward(x, w, **kwargs)
    # the residual must not share memory with x, nor overlap out without being out
    xr = np.zeros((2, 6, 9, 8), np.float32)
    with pytest.raises(convcore.BadParamError, match="residual overlaps x"):
        conv.forward(xr[:, :5], w, residual=xr, out=np.zeros_like(z))
    buf = np.zeros(z.size + 8, np.float32)
    out = buf[:z.size].reshape(z.shape)
    shifted = buf[8:].reshape(z.shape)
    with pytest.raises(convcore.BadParamError, match="residual overlaps out without being out"):
        conv.forward(x, w, out=out, residual=shifted)
    with pytest.raises(convcore.BadParamError, match="bias overlaps out"):
        conv.forward(x, w, out=out, bias=buf[:6])


# ---- convcore.torch ---------------------------------------------------------------------------

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import convcore.torch as ct  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_thread")


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


TORCH_ACTS = {"relu": nn.ReLU, "relu6": nn.ReLU6, "silu": nn.SiLU,
              "gelu": lambda inplace=False: nn.GELU(),
              "gelu_tanh": lambda inplace=False: nn.GELU(approximate="tanh")}
FUSED_ACTS = TORCH_ACTS  # convert(fuse=True) fuses each


def _block(act_cls):
    """A torchvision-like block (VGG's features): conv, act, conv, act, pool, conv, act."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), act_cls(inplace=True), nn.Conv2d(8, 8, 3, padding=1),
                         act_cls(), nn.MaxPool2d(2), nn.Conv2d(8, 4, 3, padding=1, bias=False), act_cls(),
                         nn.Conv2d(4, 4, 1))


@pytest.mark.parametrize("act", list(FUSED_ACTS))
def test_convert_fuse_matches_pytorch_and_keeps_the_state_dict(act):
    torch.manual_seed(0)
    model = _block(TORCH_ACTS[act]).eval()
    ref = _block(TORCH_ACTS[act]).eval()
    ref.load_state_dict(model.state_dict())
    keys = list(model.state_dict())
    fused = ct.convert(model, fuse=True)
    assert [type(m).__name__ for m in fused] == ["Conv2d", "Identity", "Conv2d", "Identity", "MaxPool2d",
                                                 "Conv2d", "Identity", "Conv2d"]
    assert [m.activation for m in fused if isinstance(m, ct.Conv2d)] == [act, act, act, "identity"]
    assert list(fused.state_dict()) == keys
    fused.load_state_dict(ref.state_dict())  # loadable either way
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        want = ref(x)
        assert _rel(fused(x), want) < 1e-5
        xl = x.contiguous(memory_format=torch.channels_last)
        assert _rel(fused(xl), want) < 1e-5
    # without fuse the activations stay modules; the bias still runs in the epilogue
    plain = ct.convert(_block(TORCH_ACTS[act]).eval())
    plain.load_state_dict(ref.state_dict())
    assert sum(isinstance(m, nn.Identity) for m in plain) == 0
    with torch.no_grad():
        assert _rel(plain(x), want) < 1e-5


def test_fuse_leaves_non_adjacent_and_hooked_activations():
    relu = nn.ReLU()
    relu.register_forward_hook(lambda *a: None)
    model = nn.Sequential(nn.ReLU(), nn.Conv2d(2, 2, 1), nn.MaxPool2d(1), nn.ReLU(), nn.Conv2d(2, 2, 1), relu)
    ct.convert(model, fuse=True)
    assert [type(m).__name__ for m in model] == ["ReLU", "Conv2d", "MaxPool2d", "ReLU", "Conv2d", "ReLU"]
    assert all(m.activation == "identity" for m in model if isinstance(m, ct.Conv2d))
    with pytest.raises(convcore.BadParamError, match="fuse"):
        ct.convert(model, fuse="yes")
    with pytest.raises(convcore.BadParamError, match="activation"):
        ct.Conv2d(2, 2, 1, activation="tanh")


@pytest.mark.parametrize("act", list(FUSED_ACTS))
def test_fused_training_gradients_match_float64_pytorch(act):
    """A fused Sequential trained in float32: its gradients against the same unfused float64
    PyTorch model's (conv, bias, activation by PyTorch)."""
    torch.manual_seed(1)
    ref = _block(TORCH_ACTS[act]).double()
    model = _block(TORCH_ACTS[act])
    model.load_state_dict(ref.state_dict())
    model = ct.convert(model, fuse=True)
    assert sum(isinstance(m, nn.Identity) for m in model) == 3
    x = torch.randn(2, 3, 12, 12)
    xr = x.double().requires_grad_()
    x.requires_grad_()
    out, want = model(x), ref(xr)
    assert _rel(out, want) < 1e-5
    g = torch.randn_like(want)
    out.backward(g.float())
    want.backward(g)
    assert _rel(x.grad, xr.grad) < 1e-5
    for (name, p), (_, pr) in zip(model.named_parameters(), ref.named_parameters()):
        assert _rel(p.grad, pr.grad) < 1e-5, name


@pytest.mark.parametrize("act", ["identity", "relu", "relu6", "silu", "gelu", "gelu_tanh"])
def test_gradcheck_float64_through_the_fused_activation(act):
    torch.manual_seed(2)
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    b = (2 * torch.randn(3, dtype=torch.float64)).requires_grad_()
    if act == "relu6":
        with torch.no_grad():
            w.mul_(3)  # outputs on both sides of 6
    fn = lambda *a: ct.conv2d(*a, padding=1, algo="im2col_gemm", activation=act)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w, b))
    y = fn(x, w, b)
    pre = torch.nn.functional.conv2d(x, w, b, padding=1)
    want = {"identity": pre, "relu": torch.relu(pre), "relu6": torch.nn.functional.relu6(pre),
            "silu": torch.nn.functional.silu(pre), "gelu": torch.nn.functional.gelu(pre),
            "gelu_tanh": torch.nn.functional.gelu(pre, approximate="tanh")}[act]
    assert _rel(y, want) < 1e-12
    if act in ("relu", "relu6"):
        assert bool((pre < 0).any())  # the activation's gradient is exercised where it is 0


def test_vgg_layers_fused():
    """VGG features built by torchvision's own make_layers (conv, ReLU(inplace), pool, ...),
    converted with fuse=True: output and gradients against PyTorch."""
    from convcore import model_bench
    models = model_bench.import_torchvision()
    torch.manual_seed(3)
    feats = models.vgg.make_layers([16, "M", 32, "M"])  # conv relu pool conv relu pool
    ref = models.vgg.make_layers([16, "M", 32, "M"])
    ref.load_state_dict(feats.state_dict())
    fused = ct.convert(feats, fuse=True)
    assert sum(isinstance(m, nn.Identity) for m in fused) == 2
    x = torch.randn(1, 3, 32, 32, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y, want = fused(x), ref(xr)
    assert _rel(y, want) < 1e-5
    y.square().sum().backward()
    want.square().sum().backward()
    assert _rel(x.grad, xr.grad) < 1e-4
    assert _rel(fused[0].weight.grad, ref[0].weight.grad) < 1e-4
    assert _rel(fused[0].bias.grad, ref[0].bias.grad) < 1e-4


@pytest.mark.parametrize("act", ["relu", "silu", "gelu"])
def test_opcheck_and_compile_with_activation(act):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    torch.library.opcheck(torch.ops.convcore.conv2d.default, (x, w, b, [1, 1], [1, 1], [1, 1], 1, "auto", act))
    model = ct.convert(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), TORCH_ACTS[act](), nn.Conv2d(4, 2, 1)),
                       fuse=True)
    assert_compiled_matches_eager(model, x)
