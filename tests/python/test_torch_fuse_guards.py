"""convert(fuse=True) runs a fused graph only for the calls it was traced for: each pattern that
networks outside torchvision use (timm's DLA, FastViT, VoVNet, ...) in a small module of its own,
fused, against the same module in PyTorch, in float64. Each test fails where the fusion trusted
the call it was traced from."""

import copy
import pickle
from typing import List, Optional

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import convcore.torch as ct  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

BOUND = 1e-12


def rel(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / ref.norm())


def randomized(model):
    """``model`` in float64 and eval mode, its batch norms far from the identity."""
    g = torch.Generator().manual_seed(0)
    model = model.double()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.rand(n, generator=g, dtype=torch.float64) - 0.5)
                m.running_var.copy_(torch.rand(n, generator=g, dtype=torch.float64) * 2 + 0.3)
                m.weight.copy_(torch.rand(n, generator=g, dtype=torch.float64) + 0.5)
                m.bias.copy_(torch.rand(n, generator=g, dtype=torch.float64) - 0.5)
    return model.eval()


def fused_pair(cls, *args):
    torch.manual_seed(0)
    ref = randomized(cls(*args))
    return ref, ct.convert(copy.deepcopy(ref), fuse=True)


def example(c=4, size=9, seed=1):
    return torch.randn(2, c, size, size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def fused_chains(module):
    """The fused chains (_conv_chain / _sequential_chain calls) of ``module``'s traced graphs."""
    graphs = ct._fused_graphs(module).get("", [])
    return [n for g in graphs for n in g.nodes if n.op == "call_function" and n.target in
            (ct._conv_chain, ct._sequential_chain)]


class OptionalShortcut(nn.Module):
    """timm's DlaBasic: ``forward(x, shortcut=None)``, the shortcut is x when not given."""

    def __init__(self, c=4):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x, shortcut: Optional[torch.Tensor] = None, children: Optional[List[torch.Tensor]] = None):
        if shortcut is None:
            shortcut = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += shortcut
        return self.relu(out)


def test_an_optional_shortcut_argument_is_fused_per_call_signature():
    ref, fused = fused_pair(OptionalShortcut)
    x, s = example(), example(seed=2)
    with torch.no_grad():
        for args, kwargs in (((x,), {}), ((x, s), {}), ((x,), {"shortcut": s}), ((x, None), {}),
                             ((x,), {"shortcut": None, "children": None}), ((x, s, []), {})):
            assert rel(fused(*args, **kwargs), ref(*args, **kwargs)) < BOUND, (args, kwargs)
    # each signature has its own graph; with a shortcut given, the residual is that argument
    assert len(ct._fused_graphs(fused)[""]) >= 3
    assert all(n.args[4] is not None for n in fused_chains(fused) if n.target is ct._conv_chain
               and n.args[0].target == "conv2")


class OwnInputResidual(nn.Module):
    """timm's FastViT RepConditionalPosEnc: ``conv(x) + x``, the residual is the convolution's input."""

    def __init__(self, c=4):
        super().__init__()
        self.pos = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.pos(x) + x)


def test_a_residual_that_is_the_convolutions_input_runs():
    ref, fused = fused_pair(OwnInputResidual)
    x = example()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND
        assert rel(fused(x.contiguous(memory_format=torch.channels_last)), ref(x)) < BOUND
    y = fused(x.requires_grad_())
    y.sum().backward()
    # the layer itself, and the operator, given a residual that is (a view of) the input
    layer = ct.Conv2d(4, 4, 3, padding=1).double()
    with torch.no_grad():
        want = F.relu(F.conv2d(x, layer.weight, layer.bias, padding=1) + x)
        assert rel(layer(x, x, "relu"), want) < BOUND
        assert rel(layer(x, x[:], "relu"), want) < BOUND
        assert rel(torch.ops.convcore.conv2d(x, layer.weight, layer.bias, [1, 1], [1, 1], [1, 1], 1,
                                             "auto", "relu", x), want) < BOUND


class IsinstanceBranch(nn.Module):
    """timm's DenseNet layers: ``isinstance(x, torch.Tensor)`` decides what the input is; a
    traced value is not a tensor, so a trace would take the other branch."""

    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(2 * c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        inputs = [x, x * 2] if isinstance(x, torch.Tensor) else x
        return F.relu(self.bn(self.conv(torch.cat(inputs, 1))))


class IsTensorBranch(IsinstanceBranch):
    def forward(self, x):
        inputs = [x, x * 2] if torch.is_tensor(x) else x
        return F.relu(self.bn(self.conv(torch.cat(inputs, 1))))


@pytest.mark.parametrize("cls", [IsinstanceBranch, IsTensorBranch], ids=["isinstance", "torch.is_tensor"])
def test_isinstance_of_an_argument_stops_the_trace(cls):
    ref, fused = fused_pair(cls)
    x = example()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND
        assert rel(fused([x, x]), ref([x, x])) < BOUND


class AppendList(nn.Sequential):
    """timm's VoVNet SequentialAppendList: an nn.Sequential whose forward is its own."""

    def forward(self, x, outputs: List[torch.Tensor]):
        for module in self:
            x = module(x)
            outputs.append(x)
        return torch.cat(outputs, 1)


def test_a_sequential_with_its_own_forward_is_not_fused_as_one():
    torch.manual_seed(0)
    ref = randomized(AppendList(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()))
    fused = ct.convert(copy.deepcopy(ref), fuse=True)
    assert type(fused[1]) is nn.BatchNorm2d and type(fused[2]) is nn.ReLU
    x = example()
    with torch.no_grad():
        assert rel(fused(x, []), ref(x, [])) < BOUND


class Flagged(nn.Module):
    """A forward that reads one of the module's flags (timm's grad_checkpointing, use_residual)."""

    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.residual = True

    def forward(self, x):
        y = self.bn(self.conv(x))
        return F.relu(y + x if self.residual else y)


def test_a_flag_changed_after_convert_is_followed():
    ref, fused = fused_pair(Flagged)
    x = example()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND
        fused.residual = ref.residual = False
        assert rel(fused(x), ref(x)) < BOUND
        assert len(ct._fused_graphs(fused)[""]) == 2


def test_the_training_mode_has_graphs_of_its_own():
    class ModeBranch(Flagged):
        def forward(self, x):
            y = self.bn(self.conv(x))
            return F.relu(y + x) if self.training else F.relu(y)

    ref, fused = fused_pair(ModeBranch)
    x = example()
    for training in (False, True, False):
        ref.train(training)
        fused.train(training)
        with torch.no_grad():
            assert rel(fused(x), ref(x)) < BOUND


def test_hooks_and_modules_set_after_convert_are_respected():
    ref, fused = fused_pair(OptionalShortcut)
    x = example()
    seen = []
    fused.bn2.register_forward_hook(lambda m, i, o: seen.append(o.clone()))
    ref.bn2.register_forward_hook(lambda m, i, o: seen.append(o.clone()))
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND
        assert len(seen) == 2 and rel(seen[0], seen[1]) < BOUND
        # another activation, and a plain PyTorch convolution, in place of the fused modules
        fused.relu, ref.relu = nn.GELU(), nn.GELU()
        assert rel(fused(x), ref(x)) < BOUND
        fused.conv2 = copy.deepcopy(ref.conv2)
        assert rel(fused(x), ref(x)) < BOUND


class SideEffect(nn.Module):
    """A forward that keeps a tensor on the module (a trace would keep a symbolic value there)."""

    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        self.features = self.bn(self.conv(x))
        return F.relu(self.features)


def test_a_forward_that_writes_the_module_runs_as_written():
    ref, fused = fused_pair(SideEffect)
    x = example()
    with torch.no_grad():
        assert rel(fused(x), ref(x)) < BOUND
        assert rel(fused.features, ref.features) < BOUND


class ListInput(nn.Module):
    """timm's DlaRoot: ``forward(x_children: List[Tensor])``."""

    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(2 * c, c, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, children: List[torch.Tensor]):
        x = self.bn(self.conv(torch.cat(children, 1)))
        x += children[0]
        return self.relu(x)


def test_a_list_argument_and_the_same_tensor_twice():
    ref, fused = fused_pair(ListInput)
    a, b = example(), example(seed=2)
    with torch.no_grad():
        for children in ([a, b], [a, a], (b, a)):
            assert rel(fused(children), ref(children)) < BOUND
    ref2, fused2 = fused_pair(OptionalShortcut)
    with torch.no_grad():
        assert rel(fused2(a, a), ref2(a, a)) < BOUND


def test_copies_pickles_and_script_of_a_guarded_module():
    ref, fused = fused_pair(OptionalShortcut)
    x, s = example(), example(seed=2)
    with torch.no_grad():
        fused(x, s)
        for other in (copy.deepcopy(fused), pickle.loads(pickle.dumps(fused))):
            assert isinstance(other, OptionalShortcut) and type(other).__name__ == "OptionalShortcut"
            assert rel(other(x), ref(x)) < BOUND and rel(other(x, s), ref(x, s)) < BOUND
        assert list(fused.state_dict()) == list(ref.state_dict())
        scripted = torch.jit.script(fused)  # the module's own forward
        assert rel(scripted(x, s), ref(x, s)) < BOUND


def test_training_gradients_through_a_guarded_module():
    ref, fused = fused_pair(OptionalShortcut)
    ref.train()
    fused.train()
    x = example()
    for model in (ref, fused):
        model(x, x * 0.5).square().sum().backward()
    for (name, p), q in zip(fused.named_parameters(), ref.parameters()):
        assert rel(p.grad, q.grad) < 1e-10, name
