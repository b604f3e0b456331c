"""Graph captures of a converted torchvision resnet18: each one records convcore's operator and
gives the right outputs on an input it was not captured with, also after the weights change
(torch.jit.trace with and without grad, torch.jit.script, torch.fx.symbolic_trace and torchvision's
create_feature_extractor, torch.export, torch.compile). A capture that cannot take the model must
raise, never give a graph with a stale output baked in (the inference path calls convcore
directly, which a capture would not see)."""

import copy

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import convcore.torch as ct  # noqa: E402
from convcore.model_bench import import_torchvision  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

TOLERANCE = 2e-3  # ||y - ref|| / ||ref|| of resnet18's logits with convcore's float32 algorithms


def rel_err(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    return float((y - ref).norm() / ref.norm())


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "fused"])
def resnet18(request):
    """(PyTorch's resnet18 in eval mode, a converted copy sharing nothing with it): plain, or
    with fuse=True (batch norms folded, residual adds and ReLUs in the epilogue)."""
    models = import_torchvision()
    torch.manual_seed(0)
    reference = models.resnet18(num_classes=10).eval()
    with torch.no_grad():  # batch norms that are not the identity
        for m in reference.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return reference, ct.convert(copy.deepcopy(reference), fuse=request.param)


def example(seed, batch=1):
    return torch.randn(batch, 3, 40, 40, generator=torch.Generator().manual_seed(seed))


def assert_captured(captured, reference, converted, grad=False):
    """The capture matches PyTorch on a new input, and after a change to the weights (made in
    both models: a capture must read the weights of the moment, not those it was made with)."""
    x = example(1)
    with torch.set_grad_enabled(grad):
        assert rel_err(captured(x), reference(x)) <= TOLERANCE
        with torch.no_grad():
            for ours, theirs in zip(converted.parameters(), reference.parameters()):
                theirs.mul_(0.5)
                ours.copy_(theirs)
        assert rel_err(captured(x), reference(x)) <= TOLERANCE


@pytest.fixture
def models(resnet18):
    reference, converted = resnet18
    reference, converted = copy.deepcopy(reference), copy.deepcopy(converted)
    return reference, converted


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_jit_trace(models, grad):
    reference, converted = models
    with torch.set_grad_enabled(grad):
        traced = torch.jit.trace(converted, example(0))
    assert "convcore::conv2d" in str(traced.inlined_graph)
    assert_captured(traced, reference, converted, grad)


def test_jit_script(models):
    reference, converted = models
    if any(isinstance(m, ct.Conv2d) and m._has_fused_batch_norm for m in converted.modules()):
        # a batch norm fused in an nn.Sequential (the downsample's): refused, with the reason
        with pytest.raises(Exception, match="fused batch norm"):
            torch.jit.script(converted)(example(0))
        return
    scripted = torch.jit.script(converted)
    assert "convcore::conv2d" in str(scripted.inlined_graph)
    assert_captured(scripted, reference, converted)


def test_jit_script_refuses_a_padding_string():
    layer = ct.Conv2d(3, 4, 3, padding="same")
    with pytest.raises(Exception, match="padding='same' or 'valid'"):
        torch.jit.script(layer)(torch.randn(1, 3, 5, 5))


def test_fx_symbolic_trace(models):
    reference, converted = models
    graph = torch.fx.symbolic_trace(converted)
    targets = [n.target for n in graph.graph.nodes if n.op in ("call_function", "call_method")]
    # resnet18's 20 convolutions
    assert targets.count(torch.ops.convcore.conv2d) + targets.count("_fused_forward") == 20
    assert_captured(graph, reference, converted)


def test_create_feature_extractor(models):
    reference, converted = models
    feature_extraction = pytest.importorskip("torchvision.models.feature_extraction")
    ours = feature_extraction.create_feature_extractor(converted, {"layer2": "features", "fc": "logits"})
    theirs = feature_extraction.create_feature_extractor(reference, {"layer2": "features", "fc": "logits"})
    x = example(1)
    with torch.no_grad():
        got, expected = ours(x), theirs(x)
    for name in ("features", "logits"):
        assert rel_err(got[name], expected[name]) <= TOLERANCE


def test_fx_symbolic_trace_refuses_same_padding():
    model = nn.Sequential(ct.Conv2d(3, 4, 3, padding="same"))
    with pytest.raises(Exception, match="padding='same'"):
        torch.fx.symbolic_trace(model)


def test_torch_export(models):
    reference, converted = models
    exported = torch.export.export(converted, (example(0),))
    assert "convcore.conv2d" in str(exported.graph)
    # The exported program holds the weights it was exported with: compare before any change.
    x = example(1)
    with torch.no_grad():
        assert rel_err(exported.module()(x), reference(x)) <= TOLERANCE


def test_torch_compile(models):
    reference, converted = models
    compiled = torch.compile(converted, backend="aot_eager", fullgraph=True)
    assert_captured(compiled, reference, converted)
