"""bench/compare_runs.py on two small hand-made runs: the per-run score of auto, the layers
timed with the vCPUs split (round_trip_ns over 200 ns) marked and left out of the second count."""

import importlib.util
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compare_runs():
    spec = importlib.util.spec_from_file_location("compare_runs", os.path.join(REPO, "bench", "compare_runs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write_run(path, rows):
    os.makedirs(path)
    results = []
    for layer, auto, times, round_trip in rows:
        for algo, ms in times.items():
            results.append({"layer": layer, "algo": algo, "median_ms": ms, "times_ms": [ms],
                            "auto": algo == auto, "round_trip_ns": round_trip})
    with open(os.path.join(path, "suite.json"), "w") as f:
        json.dump({"results": results}, f)


def test_split_layers_are_marked_and_counted_apart(tmp_path, capsys):
    rows = [
        ("a", "fft", {"fft": 1.0, "direct": 3.0, "torch": 2.0}, [60, 70]),      # auto right
        ("b", "direct", {"fft": 1.0, "direct": 1.5, "torch": 2.0}, [60, 350]),  # wrong, split
        ("c", "fft", {"fft": 1.0, "direct": 1.05, "torch": 2.0}, None),         # right, no check
    ]
    _write_run(str(tmp_path / "r1"), rows)
    _write_run(str(tmp_path / "r2"), [(l, a, t, [50, 60]) for l, a, t, _ in rows])
    assert _compare_runs().main([str(tmp_path / "r1"), str(tmp_path / "r2")]) == 0
    out = capsys.readouterr().out
    assert "| suite | b | fft 2.00x (split) | direct 1.50 |" in out
    assert "| suite | a | fft 2.00x | fft 1.00 |" in out
    assert "- r1: auto within 10% of the fastest on 2/3 layers (67%); 1 layers timed with the vCPUs split, on the other 2: 2" in out
    assert "- r2: auto within 10% of the fastest on 2/3 layers (67%)\n" in out
