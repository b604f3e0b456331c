"""How well "auto" picks the backward passes' algorithms (issue 32, item 3): for each layer of a
suite (default: bench/suites/unseen_cpu.txt, networks the forward heuristic was never fitted on;
the backward order's grouped and NCHW rules were read off its misses, so mobile_cpu.txt is the
held-out check), at a training batch, each pass (backward data, backward filter) and each layout (NCHW,
channels_last), every algorithm that runs the problem is timed, interleaved with the others,
against the one a fresh "auto" plan chose (the first call times the heuristic's top candidates,
as a network's first training step does). A pass counts as well chosen when auto's algorithm
is within --within (10%) of the fastest median.

    .venv/bin/python bench/backward_selection.py [--suite FILE] [--batch 8] [--reps 5] [--json F]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

# "auto" as on a machine that has timed nothing yet: no find-db file, whose records of earlier
# runs would join the candidates (the process's own cache still holds what it times)
os.environ.setdefault("CONVCORE_FIND_DB", "off")
import convcore  # noqa: E402
from convcore import bench_suite  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA, FILTER = 1, 2  # the binding's directions (convcore.torch's _BACKWARD_DATA / _FILTER)


def timed(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def measure(problem, batch, layout, direction, reps, slow_cutoff):
    """{algorithm name: median ms} for every algorithm that runs the pass, and auto's pick."""
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn((batch,) + problem.x_shape[1:]).to(memory_format=fmt)
    w = torch.randn(problem.w_shape)
    y = torch.nn.functional.conv2d(x, w, None, (problem.sh, problem.sw), (problem.ph, problem.pw),
                                   (problem.dh, problem.dw), problem.g)
    dy = torch.randn_like(y)
    enum = convcore.BwdDataAlgo if direction == DATA else convcore.BwdFilterAlgo

    def call(conv, algo_id):
        if direction == DATA:
            return conv._backward_torch_cpu(DATA, dy, w, tuple(x.shape), algo_id)
        return conv._backward_torch_cpu(FILTER, x, dy, tuple(w.shape), algo_id)

    # auto, as a layer's first training step meets it: a fresh plan, whose first call times
    auto_conv = convcore.Convolution(problem.desc())
    call(auto_conv, -1)
    to_dlpack = torch.utils.dlpack.to_dlpack
    a, b, out = (dy, w, torch.empty_like(x)) if direction == DATA else (x, dy, torch.empty_like(w))
    picked = enum(convcore._convcore.backward_capsules(direction, to_dlpack(a), to_dlpack(b), to_dlpack(out),
                                                       auto_conv.desc._params, -1, auto_conv._plans(),
                                                       None)).name
    conv = convcore.Convolution(problem.desc())
    runs = {}
    for algo in enum:
        try:
            first = timed(lambda: call(conv, algo.value))
        except (convcore.NotSupportedError, convcore.BadParamError):
            continue
        runs[algo.name] = [first]
    # interleaved rounds; an algorithm slower than slow_cutoff x the fastest first call drops out
    best_first = min(t[0] for t in runs.values())
    live = [name for name, t in runs.items() if t[0] <= slow_cutoff * best_first or name == picked]
    for _ in range(reps):
        for name in live:
            runs[name].append(timed(lambda: call(conv, enum[name].value)))
    medians = {name: statistics.median(t[1:]) if len(t) > 1 else t[0] for name, t in runs.items()}
    return medians, picked


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default=os.path.join(REPO, "bench", "suites", "unseen_cpu.txt"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--within", type=float, default=0.10)
    parser.add_argument("--threads", type=int, default=0, help="torch and convcore threads (0: all)")
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    problems = bench_suite.parse_suite(open(args.suite).read(), args.suite)
    rows, good = [], 0
    print(f"{'layer':34s} {'pass':7s} {'layout':13s} {'auto':18s} {'fastest':18s} auto/fastest")
    for problem in problems:
        for direction, pass_name in ((DATA, "data"), (FILTER, "filter")):
            for layout in ("nchw", "channels_last"):
                medians, picked = measure(problem, args.batch, layout, direction, args.reps, 5.0)
                fastest = min(medians, key=medians.get)
                ratio = medians[picked] / medians[fastest]
                good += ratio <= 1 + args.within
                rows.append({"layer": problem.name, "pass": pass_name, "layout": layout, "auto": picked,
                             "fastest": fastest, "ratio": ratio, "median_ms": medians})
                print(f"{problem.name[:34]:34s} {pass_name:7s} {layout:13s} {picked.lower():18s} "
                      f"{fastest.lower():18s} {ratio:5.2f}", flush=True)
    share = good / len(rows)
    print(f"auto within {args.within:.0%} of the fastest: {good}/{len(rows)} passes ({share:.0%}); "
          f"geomean auto/fastest {statistics.geometric_mean(r['ratio'] for r in rows):.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": os.path.relpath(args.suite, REPO), "batch": args.batch, "reps": args.reps,
                       "within": args.within, "share_within": share, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
