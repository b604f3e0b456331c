"""The convcore command: info, bench, the suite parser (convcore.bench_suite) and the timing
module it shares with the model benchmark (convcore.bench_timing)."""

import json
import os
import subprocess
import sys

import pytest

from convcore import bench_suite, bench_timing, cli

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

TINY_SUITE = """\
# two small layers
mb1ic4ih12oc8kh3ph1   tiny_3x3
mb2ic6ih9iw7oc4kh1g2  # no name, grouped 1x1
"""


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "convcore.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_info_shows_build_options():
    result = run_cli("info")
    assert result.returncode == 0, result.stderr
    assert "convcore 0.1" in result.stdout
    assert "blas: " in result.stdout and "fft: " in result.stdout and "cuda: " in result.stdout
    assert "GPUs visible: " in result.stdout


def test_bench_tiny_suite(tmp_path):
    suite = tmp_path / "tiny.txt"
    suite.write_text(TINY_SUITE)
    report = tmp_path / "results.json"
    result = run_cli("bench", "--suite", str(suite), "--reps", "2", "--threads", "1",
                     "--json", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for column in ("layer", "algorithm", "time ms", "GFLOP/s", "workspace", "t/best", "check"):
        assert column in out
    assert "tiny_3x3" in out and "mb2ic6ih9iw7oc4kh1kw1ph0pw0sh1sw1dh1dw1g2" in out
    for algo in ("direct", "im2col_gemm", "implicit_gemm"):
        assert algo in out
    assert "MISMATCH" not in out

    data = json.loads(report.read_text())
    assert data["convcore_version"] and data["reps"] == 2 and len(data["suite"]) == 2
    rows = [r for r in data["results"] if r["layer"] == "tiny_3x3"]
    algos = {r["algo"] for r in rows}
    assert {"direct", "im2col_gemm", "implicit_gemm"} <= algos
    for r in rows:
        assert len(r["times_ms"]) == 2 and r["median_ms"] > 0 and r["gflops"] > 0
        assert r["check"] == "ok"
    best = [r for r in rows if not r["algo"].startswith("torch")]
    assert min(r["ratio_to_best"] for r in best) == pytest.approx(1.0)
    if sys.platform.startswith("linux"):  # the hypervisor's steal during the layer's timing
        steal = rows[0]["steal"]
        assert steal["wall_ms"] > 0 and len(steal["steal_ms"]) == os.cpu_count()
        assert all(ms >= 0 for ms in steal["steal_ms"])
    if (os.cpu_count() or 1) >= 2:  # a cache line's round trip between two threads, before/after
        assert len(rows[0]["round_trip_ns"]) == 2 and all(ns > 0 for ns in rows[0]["round_trip_ns"])
    if "torch" in algos:  # PyTorch in NCHW and channels_last; the competitor is the faster
        assert "t/torch" in out and "torch_cl" in algos
        torch_rows = [r for r in rows if r["algo"] in ("torch", "torch_cl")]
        assert min(r["ratio_to_torch"] for r in torch_rows) == pytest.approx(1.0)


def test_stolen_layers_are_named():
    rows = [{"layer": "a", "steal": {"wall_ms": 100.0, "steal_ms": [0.0, 5.0]}},
            {"layer": "a", "steal": {"wall_ms": 100.0, "steal_ms": [0.0, 5.0]}},
            {"layer": "b", "steal": {"wall_ms": 100.0, "steal_ms": [1.0, 1.5]}},
            {"layer": "c", "steal": {"wall_ms": 50.0, "steal_ms": [3.0, 0.0]}},
            {"layer": "d", "steal": None}, {"layer": "e"}]
    assert cli._stolen_layers(rows) == [("c", pytest.approx(0.06)), ("a", pytest.approx(0.05))]


def test_split_layers_are_named():
    rows = [{"layer": "a", "round_trip_ns": [60.0, 350.0]}, {"layer": "a", "round_trip_ns": [60.0, 350.0]},
            {"layer": "b", "round_trip_ns": [80.0, 90.0]}, {"layer": "c", "round_trip_ns": None},
            {"layer": "d", "round_trip_ns": [0.0, 0.0]}, {"layer": "e"}]
    assert cli._split_layers(rows) == [("a", 350.0)]


@pytest.mark.pure_python
def test_bench_modules_do_not_import_each_other():
    """cli (the layer suite) and model_bench (whole networks) share bench_timing and bench_suite;
    neither imports the other at import time (cli imports model_bench in --model's path only),
    and the shared modules import neither."""
    code = ("import sys\n"
            "import convcore.bench_timing, convcore.bench_suite\n"
            "assert not {'convcore.cli', 'convcore.model_bench'} & set(sys.modules), 'shared'\n"
            "import convcore.cli\n"
            "assert 'convcore.model_bench' not in sys.modules, 'cli'\n"
            "del sys.modules['convcore.cli']\n"
            "import convcore.model_bench\n"
            "assert 'convcore.cli' not in sys.modules, 'model_bench'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_cache_line_round_trip_is_measured():
    """0 on one CPU; else a measured time: more than a nanosecond, and finite. No upper bound: on a
    loaded machine (the CI runs two stages at a time on 2 cores) a trip waits for the other
    thread's next time slice, milliseconds."""
    import convcore
    ns = convcore._convcore.cache_line_round_trip_ns()
    if (os.cpu_count() or 1) < 2:
        assert ns == 0.0
    else:
        assert 1.0 < ns < float("inf"), ns


def test_bench_algos_option(tmp_path, capsys):
    suite = tmp_path / "tiny.txt"
    suite.write_text(TINY_SUITE)
    code = cli.main(["bench", "--suite", str(suite), "--reps", "1", "--no-torch",
                     "--algos", "direct,WINOGRAD_2X2_3X3", "--dtype", "float64"])
    out = capsys.readouterr().out
    assert code == 0
    assert "direct" in out and "im2col_gemm" not in out and "torch" not in out.split("\n", 1)[1]
    assert "not applicable" in out  # winograd: 1x1 layer (and not built yet)


def test_cpu_timer_prepares_the_caches():
    """cold: the flush buffer is written before every timed run (twice the last-level cache);
    warm: the contender runs once untimed before every timed run."""
    calls = []
    cold = bench_timing.CpuTimer(cache="cold")
    assert cold.flush_buffer.nbytes >= 2 * (1 << 20)
    for _ in range(3):
        cold.time_ms(lambda: calls.append("cold"))
    assert calls == ["cold"] * 3 and cold.flushes == 3 and cold.flush_buffer[0] == 3.0
    woken = []
    cold.wake = lambda: woken.append(len(calls))  # after the flush, before the timed run
    cold.time_ms(lambda: calls.append("cold"))
    assert woken == [3] and len(calls) == 4
    del calls[3]
    assert bench_timing.CpuTimer(cache="cold").flush_buffer is cold.flush_buffer  # one per process
    warm = bench_timing.CpuTimer(cache="warm")
    assert warm.flush_buffer is None
    warm.time_ms(lambda: calls.append("warm"))
    assert calls[3:] == ["warm", "warm"]


def test_bench_cache_option(tmp_path, capsys):
    suite = tmp_path / "tiny.txt"
    suite.write_text(TINY_SUITE)
    report = tmp_path / "warm.json"
    code = cli.main(["bench", "--suite", str(suite), "--reps", "1", "--no-torch", "--cache", "warm",
                     "--algos", "direct", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0 and "warm cache" in out and "BLAS: " in out
    assert json.loads(report.read_text())["cache"] == "warm"
    with pytest.raises(SystemExit):
        cli.main(["bench", "--cache", "lukewarm"])


def test_bench_errors(tmp_path, capsys):
    assert cli.main(["bench", "--algos", "nope"]) == 2
    assert "--algos: unknown nope" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("mb1ic3ih8oc4kh3\nmb1ic3xx8\n")
    assert cli.main(["bench", "--suite", str(bad)]) == 2
    assert f"{bad}:2: cannot parse 'xx8'" in capsys.readouterr().err
    assert cli.main(["bench", "--suite", str(tmp_path / "missing.txt")]) == 2


def test_default_suite_file_matches_builtin():
    path = os.path.join(REPO, "bench", "suites", "default.txt")
    if not os.path.exists(path):
        pytest.skip("not in a source checkout")
    with open(path) as f:
        assert f.read() == bench_suite.DEFAULT_SUITE
    problems = bench_suite.parse_suite(bench_suite.DEFAULT_SUITE)
    assert any(p.kh == 7 for p in problems) and any(p.kh == 11 for p in problems)
    assert any(p.ic == 1 and p.ih == 512 for p in problems)


# ---- the suite parser ----------------------------------------------------------------------------

def test_parse_full_problem():
    p = bench_suite.parse_problem("mb1ic64ih56iw56oc64kh3kw3ph1pw1sh1sw1dh1dw1g1 resnet:res2a")
    assert (p.mb, p.ic, p.ih, p.iw, p.oc, p.kh, p.kw) == (1, 64, 56, 56, 64, 3, 3)
    assert (p.ph, p.pw, p.sh, p.sw, p.dh, p.dw, p.g) == (1, 1, 1, 1, 1, 1, 1)
    assert p.name == "resnet:res2a" and p.label == "resnet:res2a"
    assert p.output_hw() == (56, 56)
    assert p.flops() == 2 * 64 * 64 * 9 * 56 * 56


def test_parse_defaults_and_partners():
    p = bench_suite.parse_problem("ic3ih224oc64kh7sh2ph3")
    assert (p.mb, p.iw, p.kw, p.sw, p.pw, p.dh, p.dw, p.g) == (1, 224, 7, 2, 3, 1, 1, 1)
    assert p.name == "" and p.label == p.descriptor()
    assert bench_suite.parse_problem(p.descriptor()) == p
    q = bench_suite.parse_problem('g2_mb2ic4iw10ih6oc2kw3n"named"  # comment')
    assert (q.g, q.mb, q.ih, q.iw, q.kh, q.kw, q.name) == (2, 2, 6, 10, 3, 3, "named")


@pytest.mark.parametrize("line, text", [
    ("ic3ih8kh3", "lacks oc"),
    ("ic3oc4kh3", "lacks ih"),
    ("ic3ih8oc4", "lacks kh"),
    ("ic3ih8oc4kh3dh0", "dh1 means no dilation"),
    ("ic3ih8oc4kh3oh7", "oh/ow given"),
    ("ic3ih8oc4kh3ic4", "ic given twice"),
    ("ic3ih8oc4kh3id4", "cannot parse 'id4'"),
])
def test_parse_errors(line, text):
    with pytest.raises(ValueError, match=text):
        bench_suite.parse_problem(line)


def test_parse_suite_reports_line_numbers():
    with pytest.raises(ValueError, match="my.txt:3: "):
        bench_suite.parse_suite("# header\nic3ih8oc4kh3\nbogus\n", "my.txt")
    with pytest.raises(ValueError, match="no problems"):
        bench_suite.parse_suite("# only comments\n\n")


# ---- package information -----------------------------------------------------------------------

def test_package_information():
    import convcore
    assert convcore.__version__.count(".") == 2
    info = convcore.build_info()
    assert {"version", "blas", "fft", "cuda"} <= set(info)
    assert info["version"] == convcore.__version__
    assert convcore.cuda_device_count() >= 0
    prefix = convcore.cmake_prefix_path()
    assert os.path.isfile(os.path.join(prefix, "lib", "cmake", "convcore", "convcoreConfig.cmake"))
    assert os.path.isfile(os.path.join(prefix, "include", "convcore", "convcore.h"))


def _import_in_subprocess(coretype):
    """{environ_unchanged, chosen, reported, kernels} of `import convcore` in a new process whose
    OPENBLAS_CORETYPE is ``coretype`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    code = ("import json, os\n"
            "before = dict(os.environ)\n"
            "import convcore\n"
            "from convcore import bench_timing\n"
            "print(json.dumps({'environ_unchanged': dict(os.environ) == before,\n"
            "                  'chosen': convcore.openblas_coretype_chosen,\n"
            "                  'reported': bench_timing.openblas_coretype(),\n"
            "                  'blas': convcore.build_info()['blas']}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_import_leaves_the_environment_alone():
    """`import convcore` sets OPENBLAS_CORETYPE only while OpenBLAS loads (SkylakeX kernels on an
    AVX-512 CPU that Debian's OpenBLAS does not recognise), then restores os.environ; the choice
    is still in effect and reported (convcore.openblas_coretype_chosen, bench_timing)."""
    result = _import_in_subprocess(None)
    assert result["environ_unchanged"]
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next((line.split(":", 1)[1].split() for line in f
                              if line.startswith("flags")), []))
    except OSError:
        flags = set()
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= flags:
        assert result["chosen"] == result["reported"] == "SKYLAKEX"
        if "OpenBLAS" in result["blas"]:
            assert "kernels SkylakeX" in result["blas"], result["blas"]
    else:
        assert result["chosen"] is None and result["reported"] is None
    pinned = _import_in_subprocess("HASWELL")  # the user's choice is left alone
    assert pinned["environ_unchanged"] and pinned["chosen"] is None
    assert pinned["reported"] == "HASWELL"
    if "OpenBLAS" in pinned["blas"]:
        assert "kernels Haswell" in pinned["blas"], pinned["blas"]


def test_bench_layout_option(tmp_path, capsys):
    """--layout nhwc: convcore's x and y in NHWC, checked against DIRECT like NCHW, and recorded."""
    suite = tmp_path / "tiny.txt"
    suite.write_text("mb1ic8ih9oc8kh3ph1g8 dw\nmb1ic8ih7oc12kh1 pw\n")
    report = tmp_path / "nhwc.json"
    code = cli.main(["bench", "--suite", str(suite), "--reps", "1", "--no-torch", "--layout", "nhwc",
                     "--algos", "direct,depthwise,pointwise,implicit_gemm", "--json", str(report)])
    out = capsys.readouterr().out
    assert code == 0 and "convcore in NHWC" in out and "MISMATCH" not in out
    data = json.loads(report.read_text())
    assert data["layout"] == "nhwc"
    assert {r["algo"] for r in data["results"] if r.get("check") == "ok"} >= {"depthwise", "pointwise", "implicit_gemm"}
    with pytest.raises(SystemExit):
        cli.main(["bench", "--layout", "nchwc"])
