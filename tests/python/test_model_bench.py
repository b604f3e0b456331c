"""convcore bench --model: whole torchvision networks, PyTorch against convcore.torch
(convcore.model_bench). Tiny inputs and 2 reps: the structure of the results, not the speed."""

import json
import math
import os
import statistics
import subprocess
import sys

import pytest
from torch import nn

from convcore import bench_suite, cli, model_bench

RESNET18_CONVS = 20


def quiet(message):
    pass


@pytest.fixture(scope="module")
def resnet18():
    return model_bench.run(["resnet18"], batch=1, size=32, reps=2, layer_reps=2, time_limit=5,
                           log=quiet)


def check_end_to_end(result, reps):
    """What run() promises for one model's end-to-end timing: the four contenders, each with
    `reps` finite positive times and their min and median; the best layout of each library; the
    speedups as the ratios of those times; a relative error per contender within the bound."""
    assert "error" not in result, result.get("error")
    contenders = result["contenders"]
    assert set(model_bench.CONTENDERS) <= set(contenders) and not result["failed"]
    assert result["reps"] == reps
    for name, c in contenders.items():
        times = c["times_ms"]
        assert len(times) == reps and all(math.isfinite(t) and t > 0 for t in times), (name, times)
        assert c["min_ms"] == min(times) and c["median_ms"] == statistics.median(times)
    for side, key in (("pytorch", "best_pytorch"), ("convcore", "best_convcore")):
        layouts = [n for n in model_bench.CONTENDERS if n.startswith(side)]
        assert result[key] == min(layouts, key=lambda n: contenders[n]["median_ms"])
    best_torch, best_convcore = contenders[result["best_pytorch"]], contenders[result["best_convcore"]]
    assert result["speedup"] == pytest.approx(best_torch["median_ms"] / best_convcore["median_ms"])
    assert result["speedup_min"] == pytest.approx(
        min(contenders[n]["min_ms"] for n in model_bench.CONTENDERS if n.startswith("pytorch"))
        / min(contenders[n]["min_ms"] for n in model_bench.CONTENDERS if n.startswith("convcore")))
    errors = result["rel_error"]
    assert set(errors) == set(contenders) - {"pytorch nchw"}
    assert all(math.isfinite(e) and e >= 0 for e in errors.values())
    assert result["correct"] == all(errors[n] <= result["error_bound"]
                                    for n in errors if n.startswith("convcore"))


def test_import_torchvision_twice():
    models = model_bench.import_torchvision()
    assert model_bench.import_torchvision() is models
    assert {"resnet18", "resnet50", "mobilenet_v2", "vgg16", "efficientnet_b0"} <= set(
        model_bench.model_names())


def test_convcore_does_not_import_torchvision():
    code = "import sys, convcore, convcore.torch, convcore.cli; print('torchvision' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_end_to_end_contenders(resnet18):
    assert set(resnet18["machine"]) >= {"cpu", "threads", "torch_version", "convcore_version",
                                        "git_commit", "date"}
    assert resnet18["protocol"]
    (result,) = resnet18["models"]
    assert result["model"] == "resnet18" and result["conv_layers"] == RESNET18_CONVS
    check_end_to_end(result, reps=2)


def test_correctness_check(resnet18):
    (result,) = resnet18["models"]
    assert result["correct"]
    for name in ("convcore nchw", "convcore channels_last"):
        assert result["rel_error"][name] < 1e-4


def test_per_layer_rows(resnet18):
    (result,) = resnet18["models"]
    model = model_bench.build_model("resnet18")
    convs = [name for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == RESNET18_CONVS
    rows = result["layers"]
    assert sorted(r["layer"] for r in rows) == sorted(convs)
    for r in rows:
        assert r["convcore_ms"] > 0 and r["pytorch_ms"] > 0
        assert r["loss_ms"] == pytest.approx(r["convcore_ms"] - r["pytorch_ms"])
        assert r["algo"]
        bench_suite.parse_problem(r["problem"])
    conv1 = next(r for r in rows if r["layer"] == "conv1")
    assert conv1["problem"] == "mb1ic3ih32iw32oc64kh7kw7ph3pw3sh2sw2dh1dw1g1"
    assert 0 < sum(r["share_pct"] for r in rows) <= 100
    totals = result["totals"]
    assert 0 < totals["convcore_conv_ms"] <= totals["convcore_network_ms"]
    assert 0 < totals["pytorch_conv_ms"] <= totals["pytorch_network_ms"]
    text = model_bench.format_model(result)
    assert "speedup" in text and "top" in text and "layer1.0.conv1" in text


def test_training_step():
    report = model_bench.run("resnet18", batch=2, size=64, train=True, reps=2, time_limit=5,
                             log=quiet)
    (result,) = report["models"]
    assert result["mode"] == "train" and result["correct"]
    check_end_to_end(result, reps=2)
    assert set(result["contenders"]) == set(model_bench.CONTENDERS)  # no engines in training
    assert "layers" not in result  # no per-layer passes in training
    text = model_bench.format_model(result)
    assert f"{result['speedup']:.2f}x median" in text and "outputs and gradients" in text


def test_cli_json_suite_plot(tmp_path, capsys):
    report, suite, plots = tmp_path / "r.json", tmp_path / "suite.txt", tmp_path / "plots"
    code = cli.main(["bench", "--model", "resnet18", "--size", "32", "--reps", "2",
                     "--time-limit", "5", "--json", str(report), "--write-suite", str(suite),
                     "--plot", str(plots), "--engines", "none"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "speedup" in out and "pytorch channels_last" in out

    data = json.loads(report.read_text())
    assert data["machine"]["threads"] >= 1 and data["protocol"]
    (result,) = data["models"]
    assert result["model"] == "resnet18" and len(result["layers"]) == RESNET18_CONVS

    problems = bench_suite.parse_suite(suite.read_text(), str(suite))
    descriptors = [p.descriptor() for p in problems]
    assert len(descriptors) == len(set(descriptors))
    assert set(descriptors) == {r["problem"] for r in result["layers"]}
    assert all(p.name.startswith("resnet18:") for p in problems)
    assert problems[0].name == "resnet18:conv1"

    assert os.path.getsize(plots / "resnet18.png") > 0


def test_engines(monkeypatch):
    """Every engine timed with the contenders, each output checked against PyTorch; one that is
    not installed is reported as missing, never dropped."""
    engines = model_bench.engine_names("all")
    assert engines == list(model_bench.ENGINES)
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    report = model_bench.run("resnet18", batch=1, size=32, reps=2, layer_reps=0, time_limit=5,
                             log=quiet, engines=engines)
    (result,) = report["models"]
    assert "error" not in result, result.get("error")
    assert result["contender_names"][-len(engines):] == engines
    assert result["failed"] == {"openvino": "missing: openvino is not installed (pip install openvino)"}
    timed = [n for n in engines if n != "openvino"]
    for name in timed:
        assert len(result["contenders"][name]["times_ms"]) == 2
        assert result["rel_error"][name] < 1e-4 and result["engines_correct"][name]
    medians = {n: c["median_ms"] for n, c in result["contenders"].items()}
    best_other = min(m for n, m in medians.items() if not n.startswith("convcore"))
    best_ours = min(m for n, m in medians.items() if n.startswith("convcore"))
    assert result["speedup_vs_best_engine"] == pytest.approx(best_other / best_ours)
    text = model_bench.format_model(result)
    assert "openvino" in text and "missing" in text and "against the best engine" in text
    with pytest.raises(ValueError, match="unknown engine 'tensorrt'"):
        model_bench.engine_names("onnxruntime,tensorrt")


def test_unknown_model_is_a_clear_error(capsys):
    code = cli.main(["bench", "--model", "resnet1000", "--reps", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown model 'resnet1000'" in err and "resnet18" in err
    assert "Traceback" not in err
    with pytest.raises(ValueError, match="unknown model 'nonet'"):
        model_bench.run(["nonet"])


def test_model_options_need_model(capsys):
    assert cli.main(["bench", "--size", "32"]) == 2
    assert "--size: only with --model" in capsys.readouterr().err
    assert cli.main(["bench", "--model", "resnet18", "--suite", "x.txt"]) == 2
    assert "--suite" in capsys.readouterr().err
