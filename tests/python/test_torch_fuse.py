"""convert(fuse=True): batch norms folded into the convolutions in eval mode (and run as PyTorch
runs them in training), residual adds and activations in convcore's epilogue, in nn.Sequential
and in torch.fx graphs. Each fused model against the same model unfused (PyTorch's own modules),
in float64 and float32, in eval and training mode, after weight changes of every kind, and
under graph captures."""

import copy
import operator

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import convcore  # noqa: E402
import convcore.torch as ct  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

BOUND = {torch.float64: 1e-12, torch.float32: 1e-5}


def rel(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / ref.norm())


def randomize_batch_norms(model, seed=0):
    """Running statistics and affine parameters far from the identity a fresh BN has."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.rand(n, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(n, generator=g) * 2 + 0.3)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                    m.bias.copy_(torch.rand(n, generator=g) - 0.5)
    return model


class Block(nn.Module):
    """ResNet's basic block: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), with one ReLU
    module used twice, as torchvision writes it."""

    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = None
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1, bias=True)
        self.bn = nn.BatchNorm2d(8)
        self.blocks = nn.Sequential(Block(8, 8), Block(8, 12, stride=2))
        self.head = nn.Sequential(nn.Conv2d(12, 6, 1), nn.BatchNorm2d(6, affine=False), nn.SiLU(),
                                  nn.Conv2d(6, 4, 1), nn.ReLU6())

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        return self.head(self.blocks(x)).mean((2, 3))


def pair(dtype=torch.float32, seed=0):
    """(a PyTorch model in eval mode, a fused convcore copy of it)."""
    torch.manual_seed(seed)
    ref = randomize_batch_norms(Net().to(dtype), seed).eval()
    return ref, ct.convert(copy.deepcopy(ref), fuse=True)


def example(dtype=torch.float32, seed=1, batch=2, size=11):
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def assert_same_gradients(model, ref, bound=1e-10):
    """Each parameter's gradient within bound x the largest gradient (a conv bias before a batch
    norm in training has a gradient of 0 up to rounding)."""
    scale = max(float(q.grad.abs().max()) for q in ref.parameters())
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert float((p.grad - q.grad).abs().max()) <= bound * scale, name


def fused_calls(model):
    """The fused chains in the graphs convert(fuse=True) traced of ``model``'s own forward: each a
    _conv_chain (conv, bn, activation module, x, residual, activation, add) or _sequential_chain
    call."""
    return [n for g in ct._fused_graphs(model).get("", []) for n in g.nodes
            if n.op == "call_function" and n.target in (ct._conv_chain, ct._sequential_chain)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_fused_model_matches_pytorch_in_eval(dtype):
    ref, fused = pair(dtype)
    assert isinstance(fused, Net) and type(fused).__name__ == "Net"
    # Each module's own graph: the stem's batch norm and F.relu in the root's; in each block,
    # conv1's batch norm and ReLU, conv2's batch norm, and the residual add with the ReLU after it
    # (the second block's residual is its shortcut); the modules stay as they were. The
    # shortcut's batch norm and the head are in nn.Sequentials, fused in place.
    assert [(n.args[0].target, n.args[1].target, n.args[2], n.args[4:]) for n in fused_calls(fused)] == [
        ("stem", "bn", None, (None, "relu", None))]
    for block in fused.blocks:
        assert isinstance(block, Block) and type(block).__name__ == "Block"
        assert type(block.bn1) is nn.BatchNorm2d and not block.conv1._has_fused_batch_norm
        calls = fused_calls(block)
        assert [(c.args[0].target, c.args[1].target, c.args[2].target, c.args[5], c.args[6]) for c in calls] == [
            ("conv1", "bn1", "relu", "relu", None), ("conv2", "bn2", "relu", "relu", "iadd")]
    shortcut = fused.blocks[1].shortcut
    assert type(shortcut[1]).__name__ == "_FusedBatchNorm2d" and shortcut[0]._has_fused_batch_norm
    assert [type(m).__name__ for m in fused.head] == ["Conv2d", "_FusedBatchNorm2d", "Identity",
                                                      "Conv2d", "Identity"]
    assert [m.activation for m in fused.head if isinstance(m, ct.Conv2d)] == ["silu", "relu6"]
    assert list(fused.state_dict()) == list(ref.state_dict())
    for layout in (torch.contiguous_format, torch.channels_last):
        x = example(dtype).contiguous(memory_format=layout)
        with torch.no_grad():
            assert rel(fused(x), ref(x)) < BOUND[dtype]
        with torch.inference_mode():
            assert rel(fused(x), ref(x)) < BOUND[dtype]


def test_training_keeps_the_batch_norms():
    """In training mode the fused model computes what PyTorch does: batch statistics, the same
    running statistics afterwards, the same gradients."""
    ref, fused = pair(torch.float64)
    ref.train()
    fused.train()
    x = example(torch.float64)
    y, want = fused(x), ref(x)
    assert rel(y, want) < 1e-12
    y.square().sum().backward()
    want.square().sum().backward()
    assert_same_gradients(fused, ref)
    for (name, b), (_, c) in zip(fused.named_buffers(), ref.named_buffers()):
        assert torch.equal(b, c) or rel(b, c) < 1e-12, name
    # and back in eval mode, with the statistics training moved
    fused.eval()
    ref.eval()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < 1e-12


def test_eval_mode_autograd_flows_through_the_folded_batch_norm():
    """Fine-tuning with the batch norms in eval mode: gradients of the conv weights and of the
    BN's affine parameters through the folded weights."""
    ref, fused = pair(torch.float64)
    x = example(torch.float64).requires_grad_()
    xr = x.detach().clone().requires_grad_()
    y, want = fused(x), ref(xr)
    assert rel(y, want) < 1e-12
    y.sum().backward()
    want.sum().backward()
    assert rel(x.grad, xr.grad) < 1e-10
    assert_same_gradients(fused, ref)


@pytest.mark.parametrize("freeze", [False, True])
def test_folded_weights_follow_every_weight_change(freeze):
    ref, fused = pair(torch.float64)
    if freeze:
        fused = ct.convert(fused, fuse=True, freeze=True)
    x = example(torch.float64)
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < 1e-12
    # an optimizer-like in-place step on a conv weight and on a BN parameter and buffer
    with torch.no_grad():
        for model in (fused, ref):
            model.stem.weight.mul_(0.5)
            model.blocks[0].bn2.weight.add_(0.25)
            model.blocks[1].bn1.running_var.mul_(3)
        assert rel(fused(x), ref(x)) < 1e-12
    # load_state_dict
    other = randomize_batch_norms(Net().double(), seed=5).eval()
    ref.load_state_dict(other.state_dict())
    fused.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < 1e-12
    # .data writes (no version counter): seen by the default check; with freeze=True after refresh()
    for model in (fused, ref):
        model.blocks[0].conv1.weight.data.mul_(-1)
        model.blocks[0].bn1.running_mean.data.add_(1)
    with torch.no_grad():
        if freeze:
            ct.refresh(fused)
        assert rel(fused(x), ref(x)) < 1e-12
    # a new Parameter, and a parametrized weight (a property, not in the module's _parameters)
    for model in (fused, ref):
        model.blocks[1].conv2.weight = nn.Parameter(model.blocks[1].conv2.weight.detach() * -2)
        torch.nn.utils.parametrize.register_parametrization(model.blocks[0].conv2, "weight", Halved())
        torch.nn.utils.parametrize.register_parametrization(model.blocks[0].bn2, "weight", Halved())
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < 1e-12
        for model in (fused, ref):
            model.blocks[0].conv2.parametrizations.weight.original.mul_(3)
        assert rel(fused(x), ref(x)) < 1e-12


class Halved(nn.Module):
    def forward(self, w):
        return w * 0.5


def test_load_state_dict_from_the_unfused_model_and_back():
    ref, fused = pair()
    plain = Net().eval()
    plain.load_state_dict(fused.state_dict())
    x = example()
    with torch.no_grad():
        assert rel(plain(x), ref(x)) < 1e-6
    assert fused.load_state_dict(ref.state_dict()) is not None


def test_deepcopy_and_dtype_conversion():
    ref, fused = pair()
    x = example()
    with torch.no_grad():
        fused(x)  # folded filters made for float32
        twin = copy.deepcopy(fused)
        assert rel(twin(x), ref(x)) < 1e-5
        fused.double()
        ref.double()
        assert rel(fused(x.double()), ref(x.double())) < 1e-12


def test_a_residual_that_broadcasts_is_added_by_pytorch():
    class Bias(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.offset = nn.Parameter(torch.randn(1, 4, 1, 1))

        def forward(self, x):
            return F.relu(self.conv(x) + self.offset)

    torch.manual_seed(0)
    ref = Bias().eval()
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    assert len(fused_calls(fused)) == 1
    x = example()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < 1e-6
    y = fused(x)
    y.sum().backward()
    ref(x).sum().backward()
    assert rel(fused.offset.grad, ref.offset.grad) < 1e-5


def test_modules_whose_graph_depends_on_the_mode_are_fused_in_their_children():
    class ModeDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block(3, 4, stride=2)
            self.extra = nn.Conv2d(4, 4, 1)

        def forward(self, x):
            y = self.block(x)
            return self.extra(y) if self.training else y

    torch.manual_seed(0)
    ref = randomize_batch_norms(ModeDependent()).eval()
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    assert isinstance(fused, ModeDependent) and fused_calls(fused) == []  # nothing to fuse in the root
    assert len(fused_calls(fused.block)) == 2  # its child is fused
    x = example()
    for training in (False, True):
        fused.train(training)
        ref.train(training)
        torch.manual_seed(0)
        y = fused(x)
        torch.manual_seed(0)
        assert rel(y, ref(x)) < 1e-5


def test_nothing_fused_where_nothing_follows_and_hooks_are_respected():
    seen = []
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), nn.BatchNorm2d(4), nn.ReLU())
    ct.convert(model, fuse=True)
    assert [type(m).__name__ for m in model] == ["Conv2d", "MaxPool2d", "BatchNorm2d", "ReLU"]
    hooked = nn.BatchNorm2d(4)
    hooked.register_forward_hook(lambda *a: seen.append(1))
    model = ct.convert(nn.Sequential(nn.Conv2d(3, 4, 3), hooked, nn.ReLU()), fuse=True)
    assert type(model[1]) is nn.BatchNorm2d and model[0].activation == "identity"
    model(example())
    assert seen == [1]
    # a batch norm without running statistics normalizes with the batch's, also in eval: kept
    model = ct.convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)),
                       fuse=True)
    assert type(model[1]) is nn.BatchNorm2d


def test_jit_trace_export_and_fx_of_a_fused_model():
    ref, fused = pair()
    x = example()
    with torch.no_grad():
        traced = torch.jit.trace(fused, (x,), check_trace=False)
        assert "convcore::conv2d" in str(traced.inlined_graph)
        assert rel(traced(example(seed=3)), ref(example(seed=3))) < 1e-5
    exported = torch.export.export(fused, (x,))
    assert "convcore.conv2d" in str(exported.graph)
    with torch.no_grad():
        assert rel(exported.module()(example(seed=3)), ref(example(seed=3))) < 1e-5
    symbolic = torch.fx.symbolic_trace(fused)
    with torch.no_grad():
        assert rel(symbolic(example(seed=3)), ref(example(seed=3))) < 1e-5


def test_jit_script_refuses_a_fused_batch_norm():
    model = ct.convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval(), fuse=True)
    with pytest.raises(torch.jit.Error, match="fused batch norm"):
        torch.jit.script(model)(example())


def test_torch_compile_of_a_fused_model_matches_eager():
    """aot_eager: the graph inductor would get, with the operator's residual and prepared
    filters; then the weights change and the compiled model follows."""
    ref, fused = pair()
    compiled = torch.compile(fused, backend="aot_eager", fullgraph=True)
    x = example(seed=4)
    with torch.no_grad():
        assert rel(compiled(x), ref(x)) < 1e-5
        for model in (fused, ref):
            model.blocks[1].conv2.weight.mul_(-0.5)
        assert rel(compiled(x), ref(x)) < 1e-5
    y = compiled(x)  # with autograd (the graph is traced again)
    y.sum().backward()
    assert fused.blocks[1].conv2.weight.grad is not None


class VggLike(nn.Module):
    """Convolutions without batch norms (VGG's, DenseNet's after a pre-activation): a fused
    ReLU, a bare layer, and the functional conv2d."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(8, 8, 3, padding=1))
        self.w = nn.Parameter(torch.randn(4, 8, 1, 1))

    def forward(self, x):
        return ct.conv2d(self.features(x), self.w)


def operator_calls(model, grad):
    """The convcore::conv2d calls of the graph torch.compile traces in this grad mode."""
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm

    with torch.set_grad_enabled(grad):
        torch.compile(model, backend=backend, fullgraph=True)(example())
    return [n for n in graphs[0].graph.nodes if n.target is torch.ops.convcore.conv2d.default
            or n.target is torch.ops.convcore.conv2d]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("build", ["resnet-like", "vgg-like"])
def test_a_graph_without_autograd_keeps_every_layers_prepared_filters(build, grad):
    """Every operator call of a graph traced without autograd keeps its transformed filters
    (prepared), whichever way the layer reaches the operator (folded batch norm, fused
    activation, bare layer, functional conv2d); a graph traced with autograd prepares none."""
    model = pair()[1] if build == "resnet-like" else ct.convert(VggLike().eval(), fuse=True)
    calls = operator_calls(model, grad)
    assert calls
    for node in calls:
        prepared = node.kwargs.get("prepared", node.args[10] if len(node.args) > 10 else False)
        assert prepared is (not grad), node.format_node()


def test_the_operator_with_a_residual():
    torch.manual_seed(4)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    z = torch.randn(2, 4, 6, 6, dtype=torch.float64, requires_grad=True)
    for act in ("identity", "relu", "silu"):
        fn = lambda x, w, b, z: torch.ops.convcore.conv2d(  # noqa: E731
            x, w, b, [1, 1], [1, 1], [1, 1], 1, "im2col_gemm", act, z)
        assert torch.autograd.gradcheck(fn, (x, w, b, z))
        pre = F.conv2d(x, w, b, padding=1) + z
        want = {"identity": pre, "relu": F.relu(pre), "silu": F.silu(pre)}[act]
        assert rel(fn(x, w, b, z), want) < 1e-12
    args = (x.detach().float(), w.detach().float(), b.detach().float(), [1, 1], [1, 1], [1, 1], 1,
            "auto", "relu", z.detach().float(), True)
    torch.library.opcheck(torch.ops.convcore.conv2d.default, args)
    with pytest.raises(convcore.BadParamError, match="residual"):
        torch.ops.convcore.conv2d(*args[:9], z.detach(), True)  # float64 residual, float32 input


def test_the_operator_in_every_grad_mode_and_under_fake_tensors():
    """The operator's CPU autograd kernel: the same output whether a gradient is recorded
    (custom_op's autograd), not needed (torch.no_grad: the implementation directly) or excluded
    (inference_mode); a grad_fn exactly when one is recorded; FakeTensors (a graph being traced)
    get the fake implementation's output, not a call into convcore."""
    torch.manual_seed(5)
    x, w, b = torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)
    args = ([1, 1], [1, 1], [1, 1], 1, "auto", "relu")
    want = F.relu(F.conv2d(x, w, b, padding=1))
    op = torch.ops.convcore.conv2d.default
    y = op(x, w.requires_grad_(), b, *args)
    assert y.grad_fn is not None and rel(y, want) < 1e-5
    with torch.no_grad():
        y = op(x, w, b, *args)
        assert y.grad_fn is None and rel(y, want) < 1e-5
    with torch.inference_mode():
        assert rel(op(x, w, b, *args), want) < 1e-5
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    fx, fw = mode.from_tensor(x), mode.from_tensor(w.detach())
    with mode, torch.no_grad():
        y = op(fx, fw, None, *args)
        assert type(y).__name__ == "FakeTensor" and tuple(y.shape) == (1, 4, 6, 6)
    with torch.no_grad():  # the mode not entered: the tensors' own dispatch finds it
        y = op(fx, fw, None, *args)
        assert type(y).__name__ == "FakeTensor" and tuple(y.shape) == (1, 4, 6, 6)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: x + conv(x), conv an nn.Sequential whose last part is a
    Sequential(conv, bn) (torchvision's Conv2dNormActivation without activation)."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU6()),
            nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c, bias=False),
                          nn.BatchNorm2d(2 * c), nn.ReLU6()),
            nn.Sequential(nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c)))

    def forward(self, x):
        return x + self.conv(x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_a_residual_add_after_a_sequential_runs_in_its_last_layer(dtype):
    torch.manual_seed(0)
    ref = randomize_batch_norms(nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), InvertedResidual(6)).to(dtype)).eval()
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    block = fused[1]
    assert isinstance(block, InvertedResidual)
    assert type(block.conv).__name__ == "_ResidualSequential"
    assert type(block.conv[2]).__name__ == "_ResidualSequential"  # passes them on to its Conv2d
    assert [n.target for n in fused_calls(block)] == [ct._sequential_chain]
    assert list(fused.state_dict()) == list(ref.state_dict())
    x = example(dtype)
    for layout in (torch.contiguous_format, torch.channels_last):
        with torch.no_grad():
            assert rel(fused(x.contiguous(memory_format=layout)), ref(x)) < BOUND[dtype]
    ref.train()
    fused.train()
    y, want = fused(x), ref(x)
    assert rel(y, want) < 10 * BOUND[dtype]
    y.square().sum().backward()
    want.square().sum().backward()
    assert_same_gradients(fused, ref, 1e-9 if dtype == torch.float64 else 1e-4)
    # called with one input it is the nn.Sequential it was
    with torch.no_grad():
        fused.eval()
        ref.eval()
        assert rel(block.conv(x.new_ones(1, 6, 5, 5)), ref[1].conv(x.new_ones(1, 6, 5, 5))) < BOUND[dtype]


# ---- the fused 1x1 -> depthwise pair --------------------------------------------------------

def expand_depthwise(dtype, c=5, expand=40, k=3, stride=2, act=nn.ReLU6):
    """MobileNetV2's and EfficientNet's layers as torchvision writes them: a 1x1 expansion, a
    depthwise convolution and a 1x1 projection, each a Sequential(conv, bn[, activation])."""
    torch.manual_seed(0)
    return randomize_batch_norms(nn.Sequential(
        nn.Sequential(nn.Conv2d(c, expand, 1, bias=False), nn.BatchNorm2d(expand), act()),
        nn.Sequential(nn.Conv2d(expand, expand, k, stride, k // 2, groups=expand, bias=False),
                      nn.BatchNorm2d(expand), act()),
        nn.Sequential(nn.Conv2d(expand, c, 1, bias=False), nn.BatchNorm2d(c))).to(dtype)).eval()


def pair_input(dtype, c=5, layout=torch.channels_last):
    x = torch.randn(2, c, 13, 11, generator=torch.Generator().manual_seed(3), dtype=dtype)
    return x.contiguous(memory_format=layout)


def ran_as_pair(fused):
    return fused[0][0].__dict__.pop("_last_algo", None) == "pointwise_depthwise"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("k,stride,act", [(3, 2, nn.ReLU6), (5, 1, nn.SiLU), (3, 1, nn.ReLU)],
                         ids=["3x3s2-relu6", "5x5s1-silu", "3x3s1-relu"])
def test_a_1x1_then_depthwise_runs_as_one_pair_in_inference(dtype, k, stride, act):
    ref = expand_depthwise(dtype, k=k, stride=stride, act=act)
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    assert type(fused).__name__ == "_PairSequential"
    assert list(fused.__dict__["_pointwise_depthwise"]) == ["0"]
    assert list(fused.state_dict()) == list(ref.state_dict())
    x = pair_input(dtype)
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            y = fused(x)
            assert ran_as_pair(fused)
            assert y.is_contiguous(memory_format=torch.channels_last)
            assert rel(y, ref(x)) < BOUND[dtype]
    with torch.no_grad():  # NCHW: the layers one by one
        y = fused(pair_input(dtype, layout=torch.contiguous_format))
        assert not ran_as_pair(fused)
        assert rel(y, ref(x)) < BOUND[dtype]


def test_the_pair_runs_its_layers_one_by_one_where_it_must():
    """Hooks see each layer's own output; training mode, autograd and graph captures run the
    layers one by one: each gives PyTorch's result."""
    dtype = torch.float64
    ref = expand_depthwise(dtype)
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    x = pair_input(dtype)
    seen = []
    handle = fused[0][0].register_forward_hook(lambda m, i, o: seen.append(o.shape))
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND[dtype]
    assert seen == [torch.Size([2, 40, 13, 11])] and not ran_as_pair(fused)
    handle.remove()
    ref.train(), fused.train()
    assert rel(fused(x), ref(x)) < BOUND[dtype] and not ran_as_pair(fused)
    ref.eval(), fused.eval()
    y, want = fused(x), ref(x)  # autograd records: the layers one by one
    assert not ran_as_pair(fused)
    y.square().sum().backward()
    want.square().sum().backward()
    assert_same_gradients(fused, ref, 1e-9)
    with torch.no_grad():
        traced = torch.jit.trace(fused, x)
        ran_as_pair(fused)  # (trace's check ran the module eagerly)
        assert rel(traced(x), ref(x)) < BOUND[dtype]
        assert not ran_as_pair(fused)
        assert rel(torch.fx.symbolic_trace(fused)(x), ref(x)) < BOUND[dtype]


@pytest.mark.parametrize("freeze", [False, True])
def test_the_pair_follows_weight_changes(freeze):
    dtype = torch.float64
    ref = expand_depthwise(dtype)
    fused = ct.convert(copy.deepcopy(ref), fuse=True, freeze=freeze)
    x = pair_input(dtype)

    def check():
        with torch.no_grad():
            assert rel(fused(x), ref(x)) < BOUND[dtype]
            assert ran_as_pair(fused)

    check()
    with torch.no_grad():  # in place: the version counters move
        for model in (ref, fused):
            model[0][0].weight.mul_(1.5)
            model[1][1].running_var.mul_(2.0)
    check()
    fused.load_state_dict(randomize_batch_norms(ref, seed=5).state_dict())
    check()
    for model in (ref, fused):  # behind the version counters: seen unless freeze trusts them
        model[1][0].weight.data[:, :, 1, 1] += 0.5
    if freeze:
        ct.refresh(fused)
    check()


def test_deepcopy_and_pickle_of_a_model_with_pairs():
    import pickle
    dtype = torch.float32
    ref = expand_depthwise(dtype)
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    x = pair_input(dtype)
    with torch.no_grad():
        y = fused(x)
        for copied in (copy.deepcopy(fused), pickle.loads(pickle.dumps(fused))):
            assert torch.equal(copied(x), y)
            assert ran_as_pair(copied)
            pair = copied.__dict__["_pointwise_depthwise"]["0"]
            assert pair.pw is copied[0][0] and pair.dw is copied[1][0]


def graph_targets(model, x, grad):
    """The call targets of the graph torch.compile traces of model(x) in this grad mode."""
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm

    with torch.set_grad_enabled(grad):
        y = torch.compile(model, backend=backend, fullgraph=True)(x)
    return y, [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]


def test_torch_compile_runs_the_pair_as_one_operator_without_autograd():
    """A graph traced without autograd calls convcore::pointwise_depthwise (folded weights, the
    operator's prepared filters follow weight changes); with autograd, or on NCHW input, the two
    layers' convcore::conv2d."""
    pair_op = torch.ops.convcore.pointwise_depthwise.default
    calls_pair = lambda targets: pair_op in targets or torch.ops.convcore.pointwise_depthwise in targets  # noqa: E731
    dtype = torch.float32
    ref = expand_depthwise(dtype, k=5, stride=1, act=nn.SiLU)
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    x = pair_input(dtype)
    y, targets = graph_targets(fused, x, grad=False)
    assert calls_pair(targets)
    assert rel(y, ref(x)) < BOUND[dtype]
    _, targets = graph_targets(fused, x, grad=True)
    assert not calls_pair(targets)
    _, targets = graph_targets(fused, pair_input(dtype, layout=torch.contiguous_format), grad=False)
    assert not calls_pair(targets)
    compiled = torch.compile(fused, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        assert rel(compiled(x), ref(x)) < BOUND[dtype]
        for model in (ref, fused):
            model[1][0].weight.mul_(-0.5)
        assert rel(compiled(x), ref(x)) < BOUND[dtype]
        # the operator itself, on NCHW input (its fallback: the two convolutions)
        w1, b1 = ct._fold_batch_norm(fused[0][0].weight, None, fused[0][1])
        w2, b2 = ct._fold_batch_norm(fused[1][0].weight, None, fused[1][1])
        xn = pair_input(dtype, layout=torch.contiguous_format)
        out = pair_op(xn, w1, b1, "silu", w2, b2, "silu", [1, 1], [2, 2], [1, 1])
        assert rel(fused[2](out), ref(xn)) < BOUND[dtype]


@pytest.mark.parametrize("freeze", [False, True])
def test_a_pair_without_batch_norms_follows_data_writes_and_geometry_changes(freeze):
    """Bare layers (no batch norm: the pair checks their own weights), in one Sequential with the
    activation between them; a weight written behind its version counter (refresh with freeze),
    then the depthwise layer's stride changed after the conversion."""
    dtype = torch.float64
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(5, 40, 1), nn.ReLU6(), nn.Conv2d(40, 40, 3, 2, 1, groups=40)).to(dtype).eval()
    fused = ct.convert(copy.deepcopy(ref), fuse=True, freeze=freeze)
    assert list(fused.__dict__["_pointwise_depthwise"]) == ["0"]
    x = pair_input(dtype)

    def check():
        with torch.no_grad():
            assert rel(fused(x), ref(x)) < BOUND[dtype]
        assert fused[0].__dict__.pop("_last_algo", None) == "pointwise_depthwise"

    check()
    for model in (ref, fused):
        model[0].weight.data[3] += 1.0
    if freeze:
        ct.refresh(fused)
    check()
    for model in (ref, fused):
        model[2].stride = (1, 1)
    check()
