"""convcore.torch's 1-D, 3-D and transposed convolutions (conv1d, conv3d, conv_transpose1d/2d/3d and
their modules) against PyTorch's own, in float64: every backward-data algorithm as the transposed
forward, both memory formats, the gradients, PyTorch's OpInfo samples, the modules' state_dict and
convert(), the captures (torch.compile, torch.jit.trace) and the errors."""

import copy
import pickle

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import convcore  # noqa: E402
import convcore.torch as ct  # noqa: E402
from reference import assert_compiled_matches_eager, error_bound  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

FLOAT64_TOL = 1e-10


def rel_err(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / max(float(ref.norm()), 1e-300))


def rand(*shape, dtype=torch.float64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(*shape, generator=g, dtype=dtype) * 2 - 1
    return t.requires_grad_(grad)


def assert_grads_match(ours, ref, inputs, ref_inputs=None, seed=1, tol=FLOAT64_TOL):
    """ours and ref have the same value, and the same gradients with respect to ``inputs`` and
    ``ref_inputs`` (default: the same tensors) for a random output gradient."""
    assert ours.shape == ref.shape
    assert rel_err(ours, ref) <= tol
    g = rand(*ref.shape, dtype=ref.dtype, seed=seed)
    ref_inputs = inputs if ref_inputs is None else ref_inputs
    used = [i for i, t in enumerate(inputs) if t is not None and t.requires_grad]
    assert used
    mine = torch.autograd.grad(ours, [inputs[i] for i in used], g)
    theirs = torch.autograd.grad(ref, [ref_inputs[i] for i in used], g)
    for a, b in zip(mine, theirs):
        assert rel_err(a, b) <= tol


# ---- conv1d ---------------------------------------------------------------------------------------

# (n, c, length, k, s, stride, padding, dilation, groups, bias)
CONV1D = [
    (2, 3, 17, 4, 3, 1, 1, 1, 1, True),
    (1, 4, 20, 6, 5, 2, 2, 1, 2, False),
    (3, 6, 13, 6, 3, 3, 0, 2, 6, True),       # depthwise, dilated
    (2, 8, 9, 5, 1, 1, 0, 1, 1, True),        # 1 x 1
    (1, 2, 5, 3, 7, 1, 3, 1, 1, True),        # filter longer than the input
    (2, 4, 31, 4, 4, 1, "same", 3, 2, True),  # an odd total padding
    (1, 3, 12, 2, 3, 2, "valid", 1, 1, False),
]


@pytest.mark.parametrize("algo", ["auto", "direct", "im2col_gemm", "implicit_gemm", "fft"])
@pytest.mark.parametrize("cfg", CONV1D, ids=str)
def test_conv1d_matches_torch(cfg, algo):
    n, c, length, k, s, stride, padding, dilation, groups, has_bias = cfg
    x, w = rand(n, c, length, grad=True), rand(k, c // groups, s, seed=2, grad=True)
    b = rand(k, seed=3, grad=True) if has_bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    try:
        assert_grads_match(ct.conv1d(x, w, b, algo=algo, **kw), F.conv1d(x, w, b, **kw), (x, w, b))
    except convcore.NotSupportedError as e:
        assert algo == "fft" and "stride" in str(e)  # the classic algorithms run every problem


def test_conv1d_channels_last_layout_and_unbatched():
    # N x L x C memory (strides (L*C, 1, C)) runs as channels_last 2-D and comes back the same way
    x = rand(2, 11, 6).transpose(1, 2)
    w, b = rand(4, 6, 3, seed=2), rand(4, seed=3)
    y = ct.conv1d(x, w, b, padding=1)
    assert y.stride(1) == 1 and rel_err(y, F.conv1d(x, w, b, padding=1)) <= FLOAT64_TOL
    assert rel_err(ct.conv1d(x[0], w, b, padding=1), F.conv1d(x[0], w, b, padding=1)) <= FLOAT64_TOL


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv1d_module_is_a_drop_in(padding_mode):
    torch.manual_seed(0)
    ref = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2,
                    padding_mode=padding_mode).double()
    ours = ct.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2,
                     padding_mode=padding_mode, algo="im2col_gemm").double()
    ours.load_state_dict(ref.state_dict())
    assert ours.state_dict().keys() == ref.state_dict().keys()
    x = rand(3, 4, 15, grad=True)
    assert_grads_match(ours(x), ref(x), (x, ours.weight, ours.bias), (x, ref.weight, ref.bias))


# ---- transposed -----------------------------------------------------------------------------------

# (n, c_in, h, w, c_out, r, s, stride, padding, output_padding, dilation, groups, bias)
TRANSPOSED = [
    (2, 4, 5, 6, 3, 3, 3, 1, 1, 0, 1, 1, True),          # 3x3 stride 1: Winograd's case
    (1, 6, 4, 5, 4, 3, 2, 2, 0, 1, 1, 2, False),
    (2, 4, 7, 3, 8, 4, 4, 2, 1, 0, 1, 1, True),          # the decoder's 4x4 stride 2
    (1, 3, 4, 4, 6, 2, 3, (2, 3), (1, 0), (1, 2), (1, 2), 3, True),
    (2, 6, 3, 5, 6, 3, 3, 1, 2, 0, 2, 6, True),          # depthwise, dilated
    (1, 5, 6, 6, 7, 1, 1, 1, 0, 0, 1, 1, True),          # 1 x 1
    (2, 4, 3, 3, 4, 5, 5, 3, 2, 2, 1, 1, False),
    (1, 2, 4, 5, 4, 3, 3, 1, 0, (1, 0), 2, 1, True),     # output_padding >= stride (< dilation)
]


def transposed_args(cfg, dtype=torch.float64, grad=True):
    n, cin, h, w, cout, r, s, stride, padding, output_padding, dilation, groups, has_bias = cfg
    x = rand(n, cin, h, w, dtype=dtype, grad=grad)
    wt = rand(cin, cout // groups, r, s, dtype=dtype, seed=2, grad=grad)
    b = rand(cout, dtype=dtype, seed=3, grad=grad) if has_bias else None
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)
    return x, wt, b, kw


def conv_of(kw):
    """The convolution that the transposed one is the backward-data pass of."""
    return convcore.Convolution(padding=kw["padding"], stride=kw["stride"],
                                dilation=kw["dilation"], groups=kw["groups"])


@pytest.mark.parametrize("algo", [a.name.lower() for a in convcore.BwdDataAlgo])
@pytest.mark.parametrize("cfg", TRANSPOSED, ids=str)
def test_conv_transpose2d_every_backward_data_algorithm(cfg, algo):
    """The transposed forward is the backward-data pass: each algorithm that takes the problem
    gives PyTorch's result within its declared bound (float32); the others refuse clearly."""
    x, w, b, kw = transposed_args(cfg, torch.float32, grad=False)
    ref = F.conv_transpose2d(x.double(), w.double(), None if b is None else b.double(), **kw)
    applicable = conv_of(kw).applicable_algos(ref.shape, w.shape, direction="backward_data")
    if algo not in applicable:
        with pytest.raises(convcore.NotSupportedError):
            ct.conv_transpose2d(x, w, b, algo=algo, **kw)
        return
    y = ct.conv_transpose2d(x, w, b, algo=algo, **kw)
    assert y.dtype == torch.float32
    assert rel_err(y, ref) <= error_bound(algo, "float32", "backward_data")


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
@pytest.mark.parametrize("cfg", TRANSPOSED, ids=str)
def test_conv_transpose2d_gradients_match_torch(cfg, memory_format):
    x, w, b, kw = transposed_args(cfg)
    x = x.detach().to(memory_format=memory_format).requires_grad_()
    y = ct.conv_transpose2d(x, w, b, **kw)
    assert y.is_contiguous(memory_format=memory_format)
    assert_grads_match(y, F.conv_transpose2d(x, w, b, **kw), (x, w, b))


def test_conv_transpose2d_gradcheck_and_opcheck():
    x, w, b, kw = transposed_args(TRANSPOSED[3])
    x, w, b = x[:1, :, :3, :3].detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda *t: ct.conv_transpose2d(*t, **kw), (x, w, b))
    args = [list(v) if isinstance(v, tuple) else [v, v] for v in
            (kw["stride"], kw["padding"], kw["output_padding"], kw["dilation"])]
    torch.library.opcheck(torch.ops.convcore.conv_transpose2d.default,
                          (x.detach().float(), w.detach().float(), b.detach().float(), *args,
                           kw["groups"], "auto"))


def test_conv_transpose1d_matches_torch():
    # (stride, padding, output_padding, dilation, groups, c_out)
    for stride, padding, output_padding, dilation, groups, cout in [
            (1, 0, 0, 1, 1, 6), (2, 1, 1, 1, 2, 6), (3, 2, 2, 2, 1, 3), (2, 0, 1, 3, 4, 8)]:
        x, w = rand(2, 4, 9, grad=True), rand(4, cout // groups, 3, seed=2, grad=True)
        b = rand(cout, seed=3, grad=True)
        kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                  dilation=dilation)
        assert_grads_match(ct.conv_transpose1d(x, w, b, **kw), F.conv_transpose1d(x, w, b, **kw),
                           (x, w, b))


def test_transposed_algo_triple_names_its_own_passes():
    x, w, b, kw = transposed_args(TRANSPOSED[0])
    # (its forward: backward data; d input: forward; d weight: backward filter)
    y = ct.conv_transpose2d(x, w, b, algo=("winograd_4x4_3x3", "im2win", "winograd_3x3_2x2"), **kw)
    assert_grads_match(y, F.conv_transpose2d(x, w, b, **kw), (x, w, b), tol=1e-8)
    with pytest.raises(convcore.BadParamError, match="im2win"):
        ct.conv_transpose2d(x, w, b, algo=("im2win", "direct", "direct"), **kw)


@pytest.mark.parametrize("cls, ref_cls", [(ct.ConvTranspose2d, nn.ConvTranspose2d),
                                          (ct.ConvTranspose1d, nn.ConvTranspose1d)])
def test_transposed_modules_are_drop_ins(cls, ref_cls):
    torch.manual_seed(0)
    ref = ref_cls(4, 6, 3, stride=2, padding=1, groups=2).double()
    ours = cls(4, 6, 3, stride=2, padding=1, groups=2, algo="im2col_gemm").double()
    ours.load_state_dict(ref.state_dict())
    shape = (2, 4, 5, 5) if cls is ct.ConvTranspose2d else (2, 4, 5)
    x = rand(*shape, grad=True)
    assert_grads_match(ours(x), ref(x), (x, ours.weight, ours.bias), (x, ref.weight, ref.bias))
    size = [10] * (len(shape) - 2)  # output_size picks the output padding
    assert ours(x, output_size=size).shape == ref(x, output_size=size).shape
    assert rel_err(ours(x, output_size=size), ref(x, output_size=size)) <= FLOAT64_TOL


def test_convert_replaces_1d_and_transposed_layers_sharing_their_parameters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose1d(4, 3, 4, stride=2),
                          nn.Unflatten(1, (3, 1)), nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1))
    x = torch.randn(2, 2, 8)
    expected = model(x)
    weights = [p for p in model.parameters()]
    converted = ct.convert(model, algo="implicit_gemm")
    assert [type(m) for m in converted] == [ct.Conv1d, nn.ReLU, ct.ConvTranspose1d, nn.Unflatten,
                                            ct.ConvTranspose2d]
    assert all(a is b for a, b in zip(converted.parameters(), weights))
    assert converted[0].algo == "implicit_gemm"
    assert rel_err(converted(x), expected) <= 1e-5


class KernelOnlyConv3d(nn.Conv3d):
    """As torchvision's Conv3DSimple: its own constructor and a static method, nn.Conv3d's forward."""

    def __init__(self, in_planes, out_planes):
        super().__init__(in_planes, out_planes, 3, padding=1, bias=False)

    @staticmethod
    def downsample_stride(stride):
        return stride, stride, stride


class KernelOnlyConv2d(nn.Conv2d):
    def __init__(self, in_planes, out_planes):
        super().__init__(in_planes, out_planes, 3, padding=1)


class OwnForwardConv3d(nn.Conv3d):
    def forward(self, input):
        return super().forward(input) * 2


def test_convert_takes_subclasses_that_compute_as_their_base():
    """A subclass of a torch.nn convolution that overrides nothing but its constructor
    (torchvision's Conv3DSimple and Conv3DNoTemporal) is converted, keeping its class and
    methods, and survives pickling and deepcopy; one with its own forward stays as it is."""
    torch.manual_seed(0)
    model = nn.Sequential(KernelOnlyConv3d(2, 3), nn.Flatten(1, 2), KernelOnlyConv2d(12, 4),
                          nn.Unflatten(1, (4, 1)), OwnForwardConv3d(4, 2, 1))
    x = torch.randn(2, 2, 4, 5, 6)
    expected = model(x)
    converted = ct.convert(copy.deepcopy(model))
    assert isinstance(converted[0], ct.Conv3d) and isinstance(converted[0], KernelOnlyConv3d)
    assert converted[0].downsample_stride(2) == (2, 2, 2)
    assert isinstance(converted[2], ct.Conv2d) and isinstance(converted[2], KernelOnlyConv2d)
    assert type(converted[4]) is OwnForwardConv3d
    assert rel_err(converted(x), expected) <= 1e-5
    for copied in (copy.deepcopy(converted), pickle.loads(pickle.dumps(converted))):
        assert [type(m) for m in copied] == [type(m) for m in converted]
        assert rel_err(copied(x), expected) <= 1e-5


def bn3d_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1, bias=False), nn.BatchNorm3d(4), nn.ReLU(),
                          nn.Conv3d(4, 3, (1, 3, 3), stride=(1, 2, 2)), nn.BatchNorm3d(3))
    for bn in (model[1], model[4]):
        with torch.no_grad():
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return model


def test_fuse_folds_batchnorm3d_in_eval_and_trains_as_pytorch():
    """convert(fuse=True) gives each Conv3d the BatchNorm3d after it: folded into the weights in
    eval mode (made again when a weight or statistic changes, .data writes included), run as
    PyTorch runs it in training mode (its statistics updated alike), through torch.fx (the mode's
    branch stays live), torch.compile and autograd."""
    model = bn3d_model()
    fused = ct.convert(copy.deepcopy(model), fuse=True)
    assert [type(m).__name__ for m in fused] == ["Conv3d", "_FusedBatchNorm3d", "ReLU", "Conv3d",
                                                 "_FusedBatchNorm3d"]
    assert list(fused.state_dict()) == list(model.state_dict())
    x = torch.randn(2, 2, 5, 7, 6)
    traced = torch.fx.symbolic_trace(fused)
    for mode in ("eval", "train", "eval"):
        for m in (model, fused, traced):
            getattr(m, mode)()
        for run in (fused, traced):
            expected = model(x)
            assert rel_err(run(x), expected) <= 1e-5, (mode, run)
            with torch.no_grad():
                assert rel_err(run(x.contiguous(memory_format=torch.channels_last_3d)),
                               model(x)) <= 1e-5
        for a, b in zip(fused.buffers(), model.buffers()):  # the training steps' statistics
            assert rel_err(a.float(), b.float()) <= 1e-5
    with torch.no_grad():
        for m in (model, fused):
            m[1].running_var.data.mul_(3)  # behind autograd's back
            m[3].weight.data.mul_(-1)
        assert rel_err(fused(x), model(x)) <= 1e-5
    fused.eval()
    model.eval()
    x.requires_grad_(True)
    y = fused(x)
    dy = torch.randn_like(y)
    grads = torch.autograd.grad(y, [x, fused[0].weight, fused[1].weight], dy)
    expected = torch.autograd.grad(model(x), [x, model[0].weight, model[1].weight], dy)
    for a, b in zip(grads, expected):
        assert rel_err(a, b) <= 1e-4
    assert_compiled_matches_eager(fused, x.detach())


def test_fuse_gives_conv1d_the_activation_after_it():
    """convert(fuse=True) moves the nn.GELU (both forms), nn.ReLU or nn.SiLU after a Conv1d into its
    epilogue (wav2vec2's feature extractor: Conv1d, GELU): the state_dict's keys stay, the output
    and gradients are PyTorch's (float64), in both layouts, through torch.jit.trace and
    torch.compile; a hooked activation stays a module."""
    torch.manual_seed(5)
    hooked = nn.ReLU()
    hooked.register_forward_hook(lambda *a: None)
    model = nn.Sequential(nn.Conv1d(3, 20, 4, stride=2), nn.GELU(), nn.Conv1d(20, 18, 3, stride=2),
                          nn.GELU(approximate="tanh"), nn.Conv1d(18, 17, 3, padding=1), nn.SiLU(),
                          nn.Conv1d(17, 16, 2), hooked).double()
    fused = ct.convert(copy.deepcopy(model), fuse=True)
    assert [type(m).__name__ for m in fused] == ["Conv1d", "Identity"] * 3 + ["Conv1d", "ReLU"]
    assert [m.activation for m in fused if isinstance(m, ct.Conv1d)] == ["gelu", "gelu_tanh", "silu",
                                                                         "identity"]
    assert "activation='gelu'" in repr(fused[0])
    assert list(fused.state_dict()) == list(model.state_dict())
    x = rand(2, 3, 61, grad=True)
    assert_grads_match(fused(x), model(x), [x] + list(fused.parameters()), [x] + list(model.parameters()))
    xl = x.detach().transpose(1, 2).contiguous().transpose(1, 2)  # N x L x C memory
    with torch.no_grad():
        assert rel_err(fused(xl), model(xl)) <= FLOAT64_TOL
    traced = torch.jit.trace(fused, x.detach())
    assert rel_err(traced(x.detach()), model(x.detach())) <= FLOAT64_TOL
    assert_compiled_matches_eager(fused, x.detach())
    with pytest.raises(convcore.BadParamError, match="activation"):
        fused[0].activation = "softplus"


def test_fuse_gives_conv1d_and_conv3d_the_group_norm_and_activation_after_them():
    """convert(fuse=True) fuses an nn.GroupNorm after a Conv1d or Conv3d, and the activation
    after it (wav2vec2's first layer), keeping the state_dict. Inference normalizes the layer's
    output in place (contiguous and channels-last); autograd, torch.fx, torch.jit.trace and
    torch.compile run PyTorch's group_norm; all give PyTorch's values and gradients, and see
    weight changes (.data writes included), torch.export too. A hooked group norm stays a module."""
    torch.manual_seed(6)
    model = nn.Sequential(nn.Conv1d(1, 12, 5, stride=3), nn.GroupNorm(12, 12), nn.GELU(),
                          nn.Conv1d(12, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(), nn.Conv1d(8, 4, 1))
    hooked = nn.GroupNorm(2, 6)
    hooked.register_forward_hook(lambda *a: None)
    volume = nn.Sequential(nn.Conv3d(2, 6, 3, padding=1), nn.GroupNorm(3, 6), nn.SiLU(),
                           nn.Conv3d(6, 6, 1), hooked, nn.ReLU())
    for net, x in ((model, torch.randn(2, 1, 80)), (volume, torch.randn(2, 2, 4, 5, 6))):
        fused = ct.convert(copy.deepcopy(net), fuse=True)
        assert list(fused.state_dict()) == list(net.state_dict())
        names = [type(m).__name__ for m in fused]
        assert names.count("_FusedGroupNorm") == (2 if net is model else 1), names
        for m, ref in zip(fused, net):
            if type(m).__name__ == "_FusedGroupNorm":
                assert m.weight is not ref.weight  # deepcopy; the placeholder shares fused's own
        with torch.no_grad():
            for m in fused.modules():
                if isinstance(m, nn.GroupNorm):
                    m.weight.data.uniform_(0.5, 1.5), m.bias.data.uniform_(-0.5, 0.5)
            net.load_state_dict(fused.state_dict())
        layouts = [x, x.contiguous(memory_format=torch.channels_last_3d) if x.dim() == 5
                   else x.transpose(1, 2).contiguous().transpose(1, 2)]
        for xx in layouts:
            with torch.inference_mode():
                assert rel_err(fused(xx), net(xx)) <= 1e-5
            with torch.no_grad():
                assert rel_err(fused(xx), net(xx)) <= 1e-5
        xg = x.clone().requires_grad_()
        y, want = fused(xg), net(xg)
        assert rel_err(y, want) <= 1e-5
        dy = torch.randn_like(y)
        for a, b in zip(torch.autograd.grad(y, [xg] + list(fused.parameters()), dy),
                        torch.autograd.grad(want, [xg] + list(net.parameters()), dy)):
            # (a bias before a group norm over single channels gets a gradient of 0 up to rounding)
            assert float((a - b).norm()) <= 1e-4 * max(float(b.norm()), 0.1)
        traced = torch.fx.symbolic_trace(fused)
        jit = torch.jit.trace(fused, x)
        exported = torch.export.export(fused, (x,)).module()
        with torch.no_grad():
            for m in (fused, net):
                m[1].weight.data.mul_(-2)  # behind autograd's back
            for run in (fused, traced, jit, exported):
                assert rel_err(run(x), net(x)) <= 1e-5
        assert_compiled_matches_eager(fused, x)
    assert type(fused[4]) is nn.GroupNorm and type(fused[5]) is nn.ReLU  # the hooked one stays


def test_torch_compile_and_jit_trace():
    torch.manual_seed(0)
    model = ct.convert(nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.ReLU(),
                                     nn.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1)))
    assert_compiled_matches_eager(model, torch.randn(2, 3, 9))
    decoder = ct.convert(nn.Sequential(nn.ConvTranspose2d(4, 3, 4, stride=2, padding=1), nn.ReLU()))
    assert_compiled_matches_eager(decoder, torch.randn(2, 4, 5, 5))
    x = torch.randn(1, 4, 5, 5)
    traced = torch.jit.trace(decoder, x)
    assert "convcore::conv_transpose2d" in str(traced.inlined_graph)
    with torch.no_grad():
        decoder[0].weight.mul_(2)  # the trace reads the weight, it did not keep an output
    assert rel_err(traced(x), decoder(x)) <= 1e-6


def test_jit_script_is_a_clear_error():
    for layer in (nn.Conv1d(2, 3, 3), nn.ConvTranspose2d(2, 3, 3), nn.Conv3d(2, 3, 3)):
        with pytest.raises(convcore.NotSupportedError, match="torch.jit.trace"):
            torch.jit.script(ct.convert(nn.Sequential(layer)))


def test_errors_name_the_argument():
    x, w = torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3)
    with pytest.raises(convcore.BadParamError, match="output_padding"):
        ct.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(convcore.BadParamError, match="channels"):
        ct.conv_transpose2d(torch.randn(1, 3, 5, 5), w)
    with pytest.raises(convcore.BadParamError, match="bias"):
        ct.conv_transpose2d(x, w, torch.randn(4))
    with pytest.raises(convcore.BadParamError, match="groups"):
        ct.conv_transpose2d(x, w, groups=3)
    with pytest.raises(convcore.BadParamError, match="at least 1"):
        ct.conv_transpose2d(torch.randn(1, 4, 1, 1), w, padding=2)
    with pytest.raises(convcore.BadParamError, match="weight must be 3-D"):
        ct.conv1d(torch.randn(1, 4, 5), torch.randn(2, 4, 3, 3))
    with pytest.raises(convcore.BadParamError, match="stride"):
        ct.conv1d(torch.randn(1, 4, 5), torch.randn(2, 4, 3), stride=(1, 2))
    with pytest.raises(convcore.BadParamError, match="dtype"):
        ct.conv_transpose1d(torch.randn(1, 4, 5).half(), torch.randn(4, 2, 3).half())


# ---- 3-D ----------------------------------------------------------------------------------------------

def test_depth_taps_match_enumeration():
    from convcore._nd import depth_taps
    for d_in in range(1, 7):
        for taps in range(1, 5):
            for pad in range(0, 4):
                for stride in range(1, 4):
                    for dil in range(1, 3):
                        d_out = (d_in + 2 * pad - dil * (taps - 1) - 1) // stride + 1
                        if d_out < 1:
                            continue
                        expected = {}
                        for kd in range(taps):
                            ods = [od for od in range(d_out) if 0 <= od * stride - pad + kd * dil < d_in]
                            if ods:
                                expected[kd] = (ods[0], len(ods), ods[0] * stride - pad + kd * dil)
                                assert ods == list(range(ods[0], ods[0] + len(ods)))
                        got = {kd: rest for kd, *rest in depth_taps(d_in, d_out, pad, stride, dil, taps)}
                        assert got == {kd: list(v) for kd, v in expected.items()}


# (n, c, d, h, w, k, t, r, s, stride, padding, dilation, groups, bias)
CONV3D = [
    (1, 3, 5, 6, 7, 4, 3, 3, 3, 1, 1, 1, 1, True),                  # 3x3x3 stride 1
    (2, 4, 7, 5, 6, 6, 3, 2, 3, (2, 1, 2), (1, 0, 2), (2, 1, 1), 2, False),
    (1, 4, 6, 6, 5, 4, 1, 3, 3, 1, (0, 1, 1), 1, 4, True),          # depthwise, 1 x 3 x 3
    (1, 2, 4, 4, 4, 3, 5, 1, 1, 3, 2, 1, 1, True),                  # taps that reach only padding
    (2, 3, 5, 5, 5, 2, 3, 3, 3, 1, "same", 2, 1, True),
]


@pytest.mark.parametrize("algo", ["auto", "direct", "im2col_gemm", "implicit_gemm",
                                  "winograd_4x4_3x3"])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last_3d])
@pytest.mark.parametrize("cfg", CONV3D, ids=str)
def test_conv3d_matches_torch(cfg, memory_format, algo):
    n, c, d, h, w, k, t, r, s, stride, padding, dilation, groups, has_bias = cfg
    x = rand(n, c, d, h, w).to(memory_format=memory_format).requires_grad_()
    wt, b = rand(k, c // groups, t, r, s, seed=2, grad=True), rand(k, seed=3, grad=True) if has_bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    winograd_fits = (r, s) == (3, 3) and stride in (1, (1, 1, 1)) and dilation in (1, (1, 1, 1))
    if algo == "winograd_4x4_3x3" and not winograd_fits:
        with pytest.raises(convcore.NotSupportedError):
            ct.conv3d(x, wt, b, algo=algo, **kw)
        return
    y = ct.conv3d(x, wt, b, algo=algo, **kw)
    assert y.is_contiguous(memory_format=memory_format)
    tol = 1e-9 if algo.startswith("winograd") else FLOAT64_TOL
    assert_grads_match(y, F.conv3d(x, wt, b, **kw), (x, wt, b), tol=tol)


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last_3d])
def test_conv_transpose3d_matches_torch(memory_format):
    # (stride, padding, output_padding, dilation, groups): the U-Net's 2x2x2 stride 2, and one
    # output_padding of stride or more (smaller than the dilation)
    for (cin, cout, kernel), (stride, padding, output_padding, dilation, groups) in [
            ((4, 6, 2), (2, 0, 0, 1, 1)), ((4, 6, 3), ((1, 2, 2), 1, (0, 1, 1), 1, 2)),
            ((2, 2, 3), (1, 0, (1, 0, 1), 2, 1))]:
        x = rand(2, cin, 3, 4, 5).to(memory_format=memory_format).requires_grad_()
        w = rand(cin, cout // groups, kernel, kernel, kernel, seed=2, grad=True)
        b = rand(cout, seed=3, grad=True)
        kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
                  dilation=dilation)
        y = ct.conv_transpose3d(x, w, b, **kw)
        assert y.is_contiguous(memory_format=memory_format)
        assert_grads_match(y, F.conv_transpose3d(x, w, b, **kw), (x, w, b))


@pytest.mark.parametrize("cls, ref_cls", [(ct.Conv3d, nn.Conv3d), (ct.ConvTranspose3d, nn.ConvTranspose3d)])
def test_3d_modules_are_drop_ins_and_convert_converts_them(cls, ref_cls):
    torch.manual_seed(0)
    ref = ref_cls(4, 6, 3, stride=2, padding=1, groups=2).double()
    ours = cls(4, 6, 3, stride=2, padding=1, groups=2, algo="im2col_gemm").double()
    ours.load_state_dict(ref.state_dict())
    x = rand(1, 4, 5, 4, 6, grad=True)
    assert_grads_match(ours(x), ref(x), (x, ours.weight, ours.bias), (x, ref.weight, ref.bias))
    converted = ct.convert(nn.Sequential(ref))
    assert type(converted[0]) is cls and converted[0].weight is ref.weight
    assert rel_err(converted(x), ref(x)) <= FLOAT64_TOL


def test_3d_torch_compile():
    torch.manual_seed(0)
    model = ct.convert(nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(),
                                     nn.ConvTranspose3d(4, 2, 2, stride=2)))
    assert_compiled_matches_eager(model, torch.randn(1, 2, 3, 4, 4))


def nd_model():
    return nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose1d(4, 3, 4, stride=2),
                         nn.Unflatten(1, (3, 1)), nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1),
                         nn.Unflatten(1, (2, 1)), nn.Conv3d(2, 2, 3, padding=1),
                         nn.ConvTranspose3d(2, 1, 2, stride=2))


def test_every_way_a_user_touches_the_converted_layers():
    """torch.fx, torch.export, inference_mode, load_state_dict, .data writes and optimizer steps
    on the converted 1-D, 3-D and transposed layers give PyTorch's results, with autograd and
    without (where conv3d keeps the filters it made from the weights between calls)."""
    torch.manual_seed(0)
    model = nd_model()
    x = torch.randn(2, 2, 8)
    converted = ct.convert(copy.deepcopy(model))

    def close(a, b):
        assert rel_err(a, b) <= 1e-5

    def same_output():  # with autograd, and without
        expected = model(x)
        close(converted(x), expected)
        with torch.no_grad():
            close(converted(x), expected)

    same_output()
    fx = torch.fx.symbolic_trace(converted)
    assert "convcore.conv_transpose3d" in str(fx.graph) and "convcore.conv3d" in str(fx.graph)
    close(fx(x), model(x))
    close(torch.export.export(converted, (x,)).module()(x), model(x))
    with torch.inference_mode():
        same_output()
    with torch.no_grad():
        model[6].weight.data.mul_(-2)  # a .data write
    converted.load_state_dict(model.state_dict())
    same_output()
    converted[6].weight.data.copy_(model[6].weight.data * 3)
    model[6].weight.data.mul_(3)
    same_output()
    opt_ref, opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, converted))
    for m, o in ((model, opt_ref), (converted, opt)):
        for _ in range(2):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
    for a, b in zip(converted.parameters(), model.parameters()):
        close(a, b)
    same_output()


# ---- PyTorch's own samples --------------------------------------------------------------------------

OPINFO = {"nn.functional.conv1d": ct.conv1d, "nn.functional.conv_transpose1d": ct.conv_transpose1d,
          "nn.functional.conv_transpose2d": ct.conv_transpose2d, "nn.functional.conv2d": ct.conv2d,
          "nn.functional.conv3d": ct.conv3d, "nn.functional.conv_transpose3d": ct.conv_transpose3d}


@pytest.mark.parametrize("name", sorted(OPINFO))
def test_opinfo_samples(name):
    """Every sample of PyTorch's OpInfo for the function (torch's own test inputs: unbatched,
    padding strings, groups, dilation, output_padding), values and gradients."""
    common = pytest.importorskip("torch.testing._internal.common_methods_invocations")
    (op,) = [o for o in common.op_db if o.name == name and o.variant_test_name == ""]
    samples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))
    assert samples
    for sample in samples:
        inputs = [sample.input] + [a for a in sample.args if isinstance(a, torch.Tensor)]
        ours = OPINFO[name](sample.input, *sample.args, **sample.kwargs)
        ref = op.op(sample.input, *sample.args, **sample.kwargs)
        assert_grads_match(ours, ref, inputs)


@pytest.mark.parametrize("cls, dims", [(nn.Conv1d, 1), (nn.Conv3d, 3), (nn.ConvTranspose1d, 1),
                                       (nn.ConvTranspose2d, 2), (nn.ConvTranspose3d, 3)],
                         ids=["conv1d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_an_output_changed_in_place_under_autograd(cls, dims, channels_last):
    """MONAI's SegResNet adds its residual in place (``x += identity``) to a convolution's output
    while autograd records: the operator's output is a tensor of its own, not a view (autograd
    forbids changing a custom function's view output in place)."""
    torch.manual_seed(0)
    ref = cls(3, 4, 3, padding=1).double()
    ours = ct.convert(copy.deepcopy(ref))
    x = torch.randn((2, 3) + (5, 6, 7)[:dims], dtype=torch.float64)
    if channels_last and dims > 1:
        x = x.contiguous(memory_format=torch.channels_last if dims == 2 else torch.channels_last_3d)
    grads = []
    for model in (ours, ref):
        xi = x.clone().requires_grad_()
        y = model(xi)
        y += 1.0
        torch.relu_(y).square().sum().backward()
        grads.append((y.detach(), xi.grad, model.weight.grad))
    for got, want in zip(*grads):
        assert float((got - want).norm() / want.norm()) < 1e-12


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_numpy_conv_transpose_matches_torch(dims):
    """Convolution.conv_transpose (the NumPy API's transposed convolution, the core's backward-data
    pass with PyTorch's output padding checked by the core) against F.conv_transpose1d/2d/3d in
    float64: stride 2, padding 1, groups 2, an output padding of 1; an output padding as large as
    the stride is refused, naming it."""
    import numpy as np
    rng = np.random.default_rng(dims)
    spatial = {1: (7,), 2: (5, 6), 3: (3, 4, 5)}[dims]
    x = rng.standard_normal((2, 4) + spatial)
    w = rng.standard_normal((4, 3) + (3,) * dims)
    conv = convcore.Convolution(padding=1, stride=2, groups=2, spatial_dims=dims)
    y = conv.conv_transpose(x, w, output_padding=1, algo="direct")
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    ref = fn(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1, output_padding=1, groups=2).numpy()
    assert y.shape == ref.shape
    assert np.linalg.norm(y - ref) <= 1e-12 * np.linalg.norm(ref)
    with pytest.raises(convcore.BadParamError, match="outputPadding"):
        conv.conv_transpose(x, w, output_padding=2)
