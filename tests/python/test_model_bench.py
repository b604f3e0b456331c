"""convcore bench --model: whole torchvision networks, PyTorch against convcore.torch
(convcore.model_bench). Tiny inputs and 2 reps: the structure of the results, not the speed."""

import json
import math
import os
import re
import statistics
import subprocess
import sys

import pytest
import torch
from torch import nn

import convcore
import convcore.torch as convcore_torch
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


@pytest.mark.pure_python
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


@pytest.fixture(scope="module")
def resnet18_train():
    # batch 2: batch norm's gradients over layer4's 2x2 maps of one image amplify rounding past
    # the error bound
    return model_bench.run("resnet18", batch=2, size=64, train=True, reps=2, layer_reps=2,
                           time_limit=5, log=quiet)


def test_training_step(resnet18_train):
    (result,) = resnet18_train["models"]
    assert result["mode"] == "train" and result["correct"]
    check_end_to_end(result, reps=2)
    assert set(result["contenders"]) == set(model_bench.CONTENDERS)  # no engines in training
    assert "layers" not in result  # no hooked passes in training
    text = model_bench.format_model(result)
    assert f"{result['speedup']:.2f}x median" in text and "outputs and gradients" in text


def check_train_rows(rows, layers):
    """Each layer has one row per training pass, with finite positive times, the ratios and
    GFLOP/s computed from them, and an algorithm convcore can run in that pass."""
    assert [(r["layer"], r["pass"]) for r in rows] == [
        (layer, p) for layer in layers for p in model_bench.TRAIN_PASSES]
    for r in rows:
        times = [r["convcore_ms"], r["convcore_min_ms"], r["pytorch_ms"], r["pytorch_min_ms"]]
        assert all(math.isfinite(t) and t > 0 for t in times), r
        assert r["convcore_min_ms"] <= r["convcore_ms"] and r["pytorch_min_ms"] <= r["pytorch_ms"]
        assert r["speedup"] == pytest.approx(r["pytorch_ms"] / r["convcore_ms"])
        assert r["loss_ms"] == pytest.approx(r["convcore_ms"] - r["pytorch_ms"])
        flops = bench_suite.parse_problem(r["problem"]).flops()
        assert r["convcore_gflops"] == pytest.approx(flops / (r["convcore_ms"] * 1e6))
        assert r["pytorch_gflops"] == pytest.approx(flops / (r["pytorch_ms"] * 1e6))


def test_train_layer_rows(resnet18_train):
    """The training table: forward, backward data and backward filter of every conv layer, and
    the totals per pass as the sums of the rows a training step runs."""
    (result,) = resnet18_train["models"]
    convs = [name for name, m in model_bench.build_model("resnet18").named_modules()
             if isinstance(m, nn.Conv2d)]
    rows = result["train_layers"]
    check_train_rows(rows, convs)
    assert result["train_layer_reps"] == 2
    # The rows ran in convcore's best layout: an algorithm that runs only NHWC tensors (the
    # fused Winograd at stride 2) is valid there; run each row's algorithm in that layout.
    memory_format = (torch.channels_last if "channels_last" in result["best_convcore"]
                     else torch.contiguous_format)
    for r in rows:
        problem = bench_suite.parse_problem(r["problem"])
        conv = convcore.Convolution(problem.desc())
        x, w = (torch.randn(s).contiguous(memory_format=memory_format)
                for s in (problem.x_shape, problem.w_shape))
        dy = torch.randn(conv.output_shape(x.shape, w.shape)).contiguous(memory_format=memory_format)
        if r["pass"] == "forward":
            conv.forward(x, w, algo=r["algo"])
        elif r["pass"] == "backward_data":
            conv.backward_data(dy, w, x.shape, algo=r["algo"])
        else:
            conv.backward_filter(x, dy, w.shape, algo=r["algo"])
        assert not r["bias"]  # resnet's convs have none
        # the image needs no gradient: the first layer's backward data is not in a step
        assert r["in_step"] == (r["layer"] != "conv1" or r["pass"] != "backward_data")
    totals = result["train_totals"]
    assert set(totals) == set(model_bench.TRAIN_PASSES) | {"all"}
    for p, t in totals.items():
        counted = [r for r in rows if r["in_step"] and p in (r["pass"], "all")]
        assert t["layers"] == len(counted)
        assert t["convcore_ms"] == pytest.approx(sum(r["convcore_ms"] for r in counted))
        assert t["pytorch_ms"] == pytest.approx(sum(r["pytorch_ms"] for r in counted))
        assert t["speedup"] == pytest.approx(t["pytorch_ms"] / t["convcore_ms"])
        assert t["loss_ms"] == pytest.approx(t["convcore_ms"] - t["pytorch_ms"])
    assert totals["backward_data"]["layers"] == len(convs) - 1
    assert totals["all"]["convcore_ms"] == pytest.approx(
        sum(totals[p]["convcore_ms"] for p in model_bench.TRAIN_PASSES))
    json.loads(json.dumps(resnet18_train))
    text = model_bench.format_model(result)
    worst = min(model_bench.TRAIN_PASSES, key=lambda p: totals[p]["speedup"])
    assert f"weakest pass against PyTorch: {model_bench.PASS_LABELS[worst]}" in text
    assert re.search(rf"\nbackward filter +{len(convs)} ", text) and "all three" in text
    assert "Per layer and training pass" in resnet18_train["protocol"]
    # the GFLOP/s against the machine's sgemm, measured once per run
    peak = resnet18_train["machine"]["sgemm_gflops"]
    assert peak > 0 and result["sgemm_gflops"] == peak
    assert f"sgemm: {peak:.1f} GFLOP/s" in text and "convcore % of sgemm" in text
    worst_row = min(rows, key=lambda r: r["speedup"])
    assert re.search(rf" {worst_row['convcore_gflops']:.1f} +{worst_row['pytorch_gflops']:.1f} +"
                     rf"{100 * worst_row['convcore_gflops'] / peak:.0f}\n", text)


def test_train_layer_with_bias_and_groups(torch):
    """One layer's training passes: a grouped convolution with a bias (dw and db in one call),
    convcore's from a converted layer, PyTorch's for a layer that is not one."""
    layer = convcore_torch.Conv2d(4, 6, 3, padding=1, stride=2, groups=2, bias=True)
    problem = bench_suite.parse_problem("mb1ic4ih9oc6kh3ph1sh2g2")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        rows, rounds = model_bench._time_train_layer("conv", problem, layer, "channels_last",
                                                     "nchw", 2, 5.0, generator)
        plain = nn.Conv2d(4, 6, 3, padding=1, stride=2, groups=2)
        pytorch_rows, _ = model_bench._time_train_layer("conv", problem, plain, "nchw", "nchw", 2,
                                                        5.0, generator)
    assert rounds == 2
    check_train_rows(rows, ["conv"])
    check_train_rows(pytorch_rows, ["conv"])
    assert all(r["bias"] for r in rows)
    conv = convcore.Convolution(problem.desc())
    for r in rows:
        assert r["algo"] in conv.applicable_algos(problem.x_shape, problem.w_shape,
                                                  direction=r["pass"])
    assert [r["algo"] for r in pytorch_rows] == ["pytorch"] * 3
    totals = model_bench.train_totals([dict(r, in_step=True) for r in rows])
    assert totals["all"]["convcore_ms"] == pytest.approx(sum(r["convcore_ms"] for r in rows))


@pytest.mark.harness
def test_cli_json_suite_plot(tmp_path, capsys):
    report, suite, plots = tmp_path / "r.json", tmp_path / "suite.txt", tmp_path / "plots"
    code = cli.main(["bench", "--model", "resnet18", "--size", "32", "--reps", "2",
                     "--time-limit", "5", "--json", str(report), "--write-suite", str(suite),
                     "--plot", str(plots), "--engines", "none"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "speedup" in out and "pytorch channels_last" in out
    assert "BLAS: " in out  # the OpenBLAS kernels the run had

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


@pytest.mark.harness
def test_engines(monkeypatch):
    """Every engine timed with the contenders, each output checked against PyTorch; one that is
    not installed is reported as missing, never dropped."""
    engines = model_bench.engine_names("all")
    assert engines == list(model_bench.ENGINES)
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    # layer_reps=1: the per-layer rows come after the engines' timing in the same run
    report = model_bench.run("resnet18", batch=1, size=32, reps=2, layer_reps=1, time_limit=5,
                             log=quiet, engines=engines)
    (result,) = report["models"]
    assert "error" not in result, result.get("error")
    assert len(result["layers"]) == RESNET18_CONVS
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


@pytest.mark.harness  # convcore's own code here is test_torch_nd's
def test_nd_network_end_to_end_and_training():
    """A bench_networks model (wav2vec 2.0's Conv1d feature extractor: its own input, no class
    scores) runs as the four contenders, in inference and in training (the output's mean square)."""
    rows = None
    for train in (False, True):
        (result,) = model_bench.run(["wav2vec2_fe"], batch=1, reps=2, layer_reps=0 if train else 2,
                                    time_limit=5, train=train, engines=(), log=quiet)["models"]
        check_end_to_end(result, reps=2)
        assert result["correct"] and result["input_shape"] == [1, 1, 16000]
        assert result["conv_layers"] == 7
        assert "input 1x16000" in model_bench.format_model(result)
        rows = rows or {r["layer"]: r for r in result.get("layers", [])}
    # inference's per-layer rows: one per Conv1d, described as an NdLayer
    assert sorted(rows) == sorted(f"layers.{i}" for i in (0, 3, 5, 7, 9, 11, 13))
    first = rows["layers.0"]
    assert first["problem"] == "mb1ic1iw16000oc512kw10pw0sw5dw1g1"
    assert first["gflops"] == pytest.approx(2 * 512 * 10 * 3199 / (first["convcore_ms"] * 1e6))
    assert all(r["convcore_ms"] > 0 and r["pytorch_ms"] > 0 for r in rows.values())
    assert {"r3d_18", "mc3_18", "r2plus1d_18", "unet3d", "wav2vec2_fe"} <= set(model_bench.model_names())


def test_nd_layer_descriptors_and_flops(torch):
    """NdLayer: 3-D and transposed layers' benchdnn-style descriptors (depth fields first, a
    transposed layer's sizes those of its input) and FLOPs (a transposed layer's taps meet each
    input point)."""
    from convcore.bench_networks import UNet3d
    model = UNet3d(widths=(4, 8)).eval()
    layers = dict(model_bench.nd_layers(model, torch.randn(1, 1, 8, 8, 8)))
    assert len(layers) == len([m for m in model.modules()
                               if isinstance(m, (nn.Conv3d, nn.ConvTranspose3d))])
    first, up = layers["down.0.0"], layers["up.0"]
    assert first.descriptor() == ("mb1ic1id8ih8iw8oc4kd3kh3kw3pd1ph1pw1sd1sh1sw1dd1dh1dw1g1")
    assert first.flops() == 2 * 4 * 1 * 27 * 8 ** 3
    assert up.descriptor() == ("deconv:mb1ic8id4ih4iw4oc4kd2kh2kw2pd0ph0pw0sd2sh2sw2dd1dh1dw1g1")
    assert up.flops() == 2 * 4 * 8 * 8 * 4 ** 3
    # no 2-D BenchProblem for them: conv_problems describes Conv2d layers only
    assert model_bench.conv_problems(model, torch.randn(1, 1, 8, 8, 8)) == []


def test_unet3d_converts_and_matches(torch):
    from convcore.bench_networks import UNet3d
    torch.manual_seed(0)
    model = UNet3d(widths=(4, 8)).eval()
    x = torch.randn(1, 1, 8, 8, 8)
    converted = convcore_torch.convert(model)
    assert type(converted.up[0]) is convcore_torch.ConvTranspose3d
    assert type(converted.down[0][0]) is convcore_torch.Conv3d
    with torch.no_grad():
        assert (converted(x) - model(x)).norm() <= 1e-5 * model(x).norm()
