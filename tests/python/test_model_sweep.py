"""convcore.torch.convert against PyTorch on networks of other libraries (convcore.model_sweep):
every model of model_sweep.SAMPLE (timm's CNN families, MONAI's 3-D networks, wav2vec 2.0's
feature extractor) in float64 NCHW with fuse=False and fuse=True, a few of them in float32
channels_last, and the harness itself: it must call a wrong output wrong and an exception
raised."""

import functools
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("monai")

from torch import nn  # noqa: E402

import convcore.torch as convcore_torch  # noqa: E402
from convcore import model_sweep  # noqa: E402

try:
    model_sweep.import_timm()  # torchvision's import fix first: a plain `import timm` fails here
except ImportError as e:
    pytest.skip(f"timm: {e}", allow_module_level=True)

# One thread each: the models are small, and make test runs two stages side by side.
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.model_sweep]

CHANNELS_LAST_FLOAT32 = ("resnet18", "dla34", "fastvit_t8", "mobilenetv3_small_050",
                         "convnext_atto", "monai.DynUNet", "torchaudio.wav2vec2_fe")


@functools.lru_cache(maxsize=None)
def checked(name, dtype=torch.float64, use_channels_last=False):
    """model_sweep.check_model's record for ``name`` in both modes, computed once for the two
    tests that read it (float64 NCHW against 1e-10 alone: the sample's networks do not amplify
    rounding, bench/results/sweep-2026-12-07-float64)."""
    return model_sweep.check_model(name, ("convert", "fuse"), dtype, use_channels_last, sensitivity=False)


def expect_ok(record, mode):
    result = record["results"][mode]
    if result["outcome"] == "skipped":
        pytest.fail(f"{record['model']} is in SAMPLE but was skipped ({result['reason']}): "
                    f"SAMPLE is stale for this timm/MONAI")
    assert result["outcome"] == "ok", \
        f"{record['model']} {mode}: {result['outcome']}: {result.get('reason')}"


@pytest.mark.parametrize("name,mode", [(name, mode) for name in model_sweep.SAMPLE
                                       for mode in ("convert", "fuse")])
def test_sample_float64(name, mode):
    expect_ok(checked(name), mode)


@pytest.mark.parametrize("name,mode", [(name, mode) for name in CHANNELS_LAST_FLOAT32
                                       for mode in ("convert", "fuse")])
def test_sample_float32_channels_last(name, mode):
    expect_ok(checked(name, torch.float32, True), mode)


def test_sample_and_families():
    """Every family prefix names timm models, every SAMPLE model exists and lies in the sweep."""
    timm_names = model_sweep.import_timm().list_models()
    for prefix in model_sweep.FAMILIES:
        assert any(n.startswith(prefix) for n in timm_names), prefix
    swept = set(model_sweep.all_models())
    assert len(model_sweep.SAMPLE) >= 40 + len(model_sweep.EXTRA_MODELS)
    assert [n for n in model_sweep.SAMPLE if n not in swept] == []
    assert len(set(model_sweep.SAMPLE)) == len(model_sweep.SAMPLE)


def test_select_models():
    assert model_sweep.select_models(sample=True) == list(model_sweep.SAMPLE)
    dla = model_sweep.select_models("dla*")
    assert "dla34" in dla and all(n.startswith("dla") for n in dla)
    assert model_sweep.select_models("monai.*,resnet18", limit=6) == \
        list(model_sweep.MONAI_NETS) + ["resnet18"]
    with pytest.raises(ValueError, match="no model matches"):
        model_sweep.select_models("no_such_net*")


class Tiny(nn.Module):
    """Conv, batch norm, ReLU and a residual add: what fuse=True fuses."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + x)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(model_sweep, "build", lambda name: (
        Tiny().eval(), {"input_size": (3, 16, 16)}, "test"))


def test_randomize_moves_batch_norm_and_constants():
    model = model_sweep.randomize_(Tiny(), torch.Generator().manual_seed(0))
    bn = model.bn
    for t in (bn.running_mean, bn.running_var - 1, bn.weight - 1, bn.bias):
        assert t.abs().min() > 0
    assert (bn.running_var >= 0.5).all()


@pytest.mark.parametrize("modes", [("convert", "fuse", "inference_mode", "autograd",
                                    "autograd_fuse")])
def test_harness_ok(tiny, modes):
    record = model_sweep.check_model("tiny", modes, size=16)
    assert {m: r["outcome"] for m, r in record["results"].items()} == dict.fromkeys(modes, "ok")
    assert record["convs"] == 1 and record["input_shape"] == [2, 3, 16, 16]
    assert all(r["convcore_convs"] == 1 for r in record["results"].values())


def test_harness_wrong_and_raised(tiny, monkeypatch):
    """A converted model that computes something else is wrong (its output, or with a right
    output, its gradients), one that raises is raised, with the exception's first line."""
    convert = convcore_torch.convert

    def perturbed(model, fuse=False):
        model = convert(model, fuse=fuse)
        with torch.no_grad():
            model.conv.weight[0, 0, 0, 0] += 1e-6
        return model
    monkeypatch.setattr(convcore_torch, "convert", perturbed)
    record = model_sweep.check_model("tiny", ("convert", "autograd"), size=16)
    for result in record["results"].values():
        assert result["outcome"] == "wrong" and result["error"] > 1e-10, result
        assert "> bound 1e-10" in result["reason"]

    def wrong_gradient(model, fuse=False):
        model = convert(model, fuse=fuse)
        model.conv.weight.register_hook(lambda g: g * 1.001)
        return model
    monkeypatch.setattr(convcore_torch, "convert", wrong_gradient)
    record = model_sweep.check_model("tiny", ("convert", "autograd"), size=16)
    assert record["results"]["convert"]["outcome"] == "ok"
    result = record["results"]["autograd"]
    assert result["outcome"] == "wrong" and result["output_error"] < 1e-14, result
    assert "worst conv.weight > bound 1e-10" in result["reason"]

    def failing(model, fuse=False):
        raise RuntimeError("no such layer\nsecond line")
    monkeypatch.setattr(convcore_torch, "convert", failing)
    result = model_sweep.check_model("tiny", ("fuse",), size=16)["results"]["fuse"]
    assert result == {**result, "outcome": "raised",
                      "reason": "convert: RuntimeError: no such layer"}


def test_harness_skipped(monkeypatch):
    """A model PyTorch cannot run, or that cannot be built, is skipped with why."""
    monkeypatch.setattr(model_sweep, "build", lambda name: (
        nn.Sequential(nn.Conv2d(3, 3, 7), nn.Flatten(), nn.Linear(5, 1)).eval(),
        {"input_size": (3, 8, 8)}, "test"))
    result = model_sweep.check_model("bad", ("convert",), size=8)["results"]["convert"]
    assert result["outcome"] == "skipped" and result["reason"].startswith("PyTorch cannot run it")

    def unbuildable(name):
        raise ValueError("unknown model")
    monkeypatch.setattr(model_sweep, "build", unbuildable)
    result = model_sweep.check_model("bad", ("convert",))["results"]["convert"]
    assert result == {"outcome": "skipped", "reason": "cannot be built: ValueError: unknown model"}


def test_input_shapes():
    assert model_sweep.input_shapes({"input_size": (3, 299, 299), "min_input_size": (3, 75, 75)},
                                    64) == [(3, 64, 64), (3, 75, 75), (3, 128, 128), (3, 299, 299)]
    assert model_sweep.input_shapes({"input_size": (1, 96, 96)}, 64) == [(1, 64, 64), (1, 96, 96)]
    assert model_sweep.input_shapes({"input_size": (3, 256, 256), "fixed_input_size": True},
                                    64) == [(3, 256, 256)]


def test_cli(tmp_path, capsys):
    """The command line writes summary.md and sweep.json, one line per model, and exits 1 when
    a model is wrong."""
    out = tmp_path / "sweep"
    assert model_sweep.main(["--out", str(out), "--models", "resnet18", "--size", "32",
                             "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("resnet18") and "convert ok" in lines[0] and "fuse ok" in lines[0]
    assert lines[-1].startswith("1 models, 2 (model, mode) checks: 2 ok, 0 wrong, 0 raised")
    run = json.loads((out / "sweep.json").read_text())
    assert run["counts"] == {"ok": 2, "wrong": 0, "raised": 0, "skipped": 0}
    assert run["failures"] == [] and run["in_progress"] is None
    for key in ("torch", "timm", "monai", "torchaudio"):
        assert key in run["environment"]["versions"]
    assert run["environment"]["cpu"] and [m["model"] for m in run["models"]] == ["resnet18"]
    summary = (out / "summary.md").read_text()
    assert "| convert | 1 | 0 | 0 | 0 |" in summary and "| resnet18 | timm " in summary
