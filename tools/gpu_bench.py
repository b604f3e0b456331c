#!/usr/bin/env python3
"""The layer benchmark of make gpu-check: `convcore bench`'s per-layer measurement
(convcore.cli.bench_problem: every applicable algorithm checked against DIRECT, then timed with
CUDA events against torch conv2d in NCHW and channels_last, cudnn.benchmark on, TF32 off) over
several suites in one process, within a time limit.

Each suite gets a share of the time limit in proportion to its layer count, plus what the
suites before it left unused; a layer is started only while its suite's share lasts and when the
longest layer so far would still end within the limit. The results
are rewritten to OUT/bench.json after every layer, so a run that is killed keeps what it
finished; layers not started are listed under "not_run".

    python3 tools/gpu_bench.py --out DIR --time-limit 100 bench/suites/default.txt ...
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

import convcore
from convcore import bench_suite, bench_timing, cli


def _json_default(v):
    return None if isinstance(v, float) and not math.isfinite(v) else str(v)


def layer_summary(rows):
    """The fastest convcore algorithm against the faster PyTorch layout on one layer."""
    timed = [r for r in rows if "median_ms" in r]
    ours = [r for r in timed if not r["algo"].startswith("torch")]
    theirs = [r for r in timed if r["algo"].startswith("torch")]
    if not ours:
        return None
    best = min(ours, key=lambda r: r["median_ms"])
    torch_ms = min((r["median_ms"] for r in theirs), default=None)
    return {"layer": best["layer"], "problem": best["problem"], "best_algo": best["algo"],
            "best_ms": best["median_ms"], "torch_ms": torch_ms,
            "speedup_vs_torch": torch_ms / best["median_ms"] if torch_ms else None,
            "auto_algo": next((r["algo"] for r in ours if r.get("auto")), None),
            "mismatches": [r["algo"] for r in rows if r.get("check") == "MISMATCH"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="+", help="suite files, in order of priority")
    parser.add_argument("--out", required=True, help="folder for bench.json and bench.txt")
    parser.add_argument("--time-limit", type=float, default=100.0, help="seconds for all suites")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per contender")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (to test this script)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)

    bench_args = cli.build_parser().parse_args(
        ["bench", "--device", args.device, "--reps", str(args.reps), "--no-retime"])
    torch = bench_timing.import_torch()
    bench_timing.single_threaded_numpy_blas()
    if args.device != "cpu":
        if not torch.cuda.is_available() or convcore.cuda_device_count() == 0:
            print("no CUDA device visible to torch or convcore", file=sys.stderr)
            return 2
        bench_timing.cudnn_as_competitor(torch)
        device_name = torch.cuda.get_device_name()
    else:
        device_name = bench_timing.cpu_model_name()

    suites = []
    for path in args.suites:
        with open(path) as f:
            suites.append((path, bench_suite.parse_suite(f.read(), path)))
    total_layers = sum(len(problems) for _, problems in suites)
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name, "convcore_version": convcore.__version__,
        "build_info": convcore.build_info(), "torch_version": torch.__version__,
        "cudnn_benchmark": args.device != "cpu", "tf32": False, "reps": args.reps,
        "time_limit_s": args.time_limit,
        "protocol": "convcore bench's per-layer protocol (cli.bench_problem): every applicable "
                    "algorithm checked against DIRECT, warm-up, then interleaved timed runs "
                    "(CUDA events, warm cache), median; torch conv2d in NCHW and channels_last",
        "suites": [], "results": [], "layers": [], "not_run": []}
    out_json = os.path.join(args.out, "bench.json")

    def save():
        with open(out_json, "w") as f:
            json.dump(report, f, indent=1, default=_json_default)

    used_share = 0.0
    longest = 0.0  # the longest layer so far: none starts that would likely end past the limit
    for path, problems in suites:
        used_share += args.time_limit * len(problems) / total_layers
        suite_deadline = start + used_share
        record = {"suite": os.path.basename(path), "layers": len(problems), "done": 0,
                  "not_run": [], "errors": []}
        report["suites"].append(record)
        for problem in problems:
            now = time.monotonic()
            if now >= suite_deadline or now + longest > start + args.time_limit:
                record["not_run"].append(problem.label)
                report["not_run"].append(f"{record['suite']}:{problem.label}")
                continue
            print(f"[{time.monotonic() - start:6.1f} s] {record['suite']}: {problem.label} "
                  f"{problem.descriptor()}", file=sys.stderr, flush=True)
            began = time.monotonic()
            try:
                rows = cli.bench_problem(problem, bench_args, torch, lambda m: print(m, file=sys.stderr))
            except Exception as e:  # noqa: BLE001  (one failing layer must not end the run)
                record["errors"].append(f"{problem.label}: {type(e).__name__}: {e}")
                print(f"!!! {problem.label}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                continue
            for r in rows:
                r["suite"] = record["suite"]
            report["results"].extend(rows)
            summary = layer_summary(rows)
            if summary:
                report["layers"].append(dict(summary, suite=record["suite"]))
            record["done"] += 1
            longest = max(longest, time.monotonic() - began)
            save()
    speedups = [s["speedup_vs_torch"] for s in report["layers"] if s["speedup_vs_torch"]]
    report["summary"] = {
        "layers": total_layers, "done": sum(s["done"] for s in report["suites"]),
        "not_run": len(report["not_run"]),
        "errors": sum(len(s["errors"]) for s in report["suites"]),
        "mismatches": sorted({f"{s['suite']}:{s['layer']}:{a}" for s in report["layers"]
                              for a in s["mismatches"]}),
        "geomean_speedup_vs_torch": math.exp(statistics.fmean(math.log(v) for v in speedups))
        if speedups else None,
        "seconds": round(time.monotonic() - start, 1)}
    save()

    text = [f"convcore {convcore.__version__} on {device_name}, torch {torch.__version__} "
            f"(cudnn.benchmark on, TF32 off), {args.reps} reps, median", ""]
    text.append(cli.format_table(report["results"], True))
    text.append("")
    text.append("per layer: fastest convcore algorithm vs the faster PyTorch layout "
                "(speedup > 1: convcore is faster)")
    for s in report["layers"]:
        ratio = f"{s['speedup_vs_torch']:.2f}x" if s["speedup_vs_torch"] else "-"
        text.append(f"  {s['suite']:<20} {s['layer']:<28} {s['best_algo']:<18} "
                    f"{s['best_ms']:9.3f} ms  torch {s['torch_ms'] or float('nan'):9.3f} ms  {ratio}")
    summary = report["summary"]
    text.append("")
    for s in report["suites"]:
        text.append(f"{s['suite']}: {s['done']}/{s['layers']} layers"
                    + (f", not run (time limit): {', '.join(s['not_run'])}" if s["not_run"] else "")
                    + (f", errors: {'; '.join(s['errors'])}" if s["errors"] else ""))
    geomean = summary["geomean_speedup_vs_torch"]
    text.append(f"{summary['done']}/{summary['layers']} layers in {summary['seconds']} s; "
                f"geometric mean speedup vs PyTorch {geomean:.2f}x" if geomean else "no layer timed")
    if summary["mismatches"]:
        text.append(f"!!! MISMATCH against DIRECT: {', '.join(summary['mismatches'])}")
    with open(os.path.join(args.out, "bench.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))
    return 1 if summary["mismatches"] or summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
