"""Time every applicable CPU algorithm on a sampled grid of layers (and optionally the bench
suites) for fitting the algo="auto" heuristic (tools/fit_heuristic.py).

Reuses `convcore bench`'s machinery (convcore.cli.bench_problem: correctness check against
DIRECT, warm-up, interleaved reps). The machine may be shared, so by default it runs convcore on
one thread and measures process CPU time (which other jobs on the cores barely disturb), each
algorithm's time is the *minimum* of its interleaved reps, and the load average is recorded per
layer. DIRECT (30-200x
slower than the rest) is timed only on layers under --direct-max-flops; elsewhere it is run once
as the correctness reference and recorded as not timed.

    PYTHONPATH=<convcore> python bench/collect_selection_data.py --output bench/data/grid_cpu.json

The grid: batch 1-8, channels 1-512, image 7-512, kernels 1-11 (+ a few 13-25), stride 1-2,
dilation 1-2, groups (grouped, depthwise), 'same' or no padding; drawn with a fixed seed, at
most --max-flops per layer, until --budget-s is spent (the whole collection stays under ~15
minutes on 2 cores).
"""

import argparse
import datetime
import glob
import json
import os
import platform
import random
import sys
import time
import types

import convcore
from convcore import bench_suite, cli

HERE = os.path.dirname(os.path.abspath(__file__))

BATCHES = [1, 1, 1, 2, 4, 8]
CHANNELS = [1, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
IMAGES = [7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224,
          256, 320, 384, 512]
KERNELS = [1, 1, 3, 3, 3, 3, 5, 5, 5, 7, 7, 9, 11]
LARGE_KERNELS = [13, 15, 17, 21, 25]


def sample_problem(rng, max_flops, max_elements):
    """A random BenchProblem from the grid, or None when it breaks a limit."""
    k = rng.choice(LARGE_KERNELS) if rng.random() < 0.06 else rng.choice(KERNELS)
    stride = 2 if rng.random() < 0.25 else 1
    dilation = 2 if (k > 1 and rng.random() < 0.1) else 1
    n = rng.choice(BATCHES)
    h = rng.choice(IMAGES)
    w = h if rng.random() < 0.85 else rng.choice(IMAGES)
    kind = rng.random()
    if kind < 0.12:  # depthwise
        c = kk = rng.choice(CHANNELS[3:])
        g = c
    else:
        c = rng.choice(CHANNELS)
        kk = rng.choice(CHANNELS[1:]) if rng.random() < 0.5 else c * rng.choice([1, 1, 2])
        g = 1
        if kind < 0.2 and c >= 8 and kk % 8 == 0:
            g = rng.choice([2, 4, 8])
    pad = dilation * (k // 2) if rng.random() < 0.7 else 0
    p = bench_suite.BenchProblem(mb=n, ic=c, ih=h, iw=w, oc=kk, kh=k, kw=k, sh=stride, sw=stride, ph=pad,
                         pw=pad, dh=dilation, dw=dilation, g=g)
    oh, ow = p.output_hw()
    if oh < 1 or ow < 1 or c > 512 or kk > 512:
        return None
    if p.flops() > max_flops or max(n * c * h * w, n * kk * oh * ow) > max_elements:
        return None
    return p


def grid(count, seed, max_flops, max_elements):
    rng = random.Random(seed)
    problems, seen = [], set()
    while len(problems) < count:
        p = sample_problem(rng, max_flops, max_elements)
        if p is not None and p.descriptor() not in seen:
            seen.add(p.descriptor())
            p.name = f"grid:{len(problems)}"
            problems.append(p)
    return problems


def suite_problems():
    problems = []
    for path in sorted(glob.glob(os.path.join(HERE, "suites", "*.txt"))):
        with open(path) as f:
            for p in bench_suite.parse_suite(f.read(), path):
                p.name = f"{os.path.basename(path)[:-4]}:{p.label}"
                problems.append(p)
    return problems


def time_layer(problem, reps, direct_max_flops, cpu_time):
    """{algo: min ms} for every applicable algorithm (DIRECT only when small enough)."""
    conv = convcore.Convolution(problem.desc())
    applicable = conv.applicable_algos(problem.x_shape, problem.w_shape)
    algos = [a for a in applicable if a != "direct" or problem.flops() <= direct_max_flops]
    args = types.SimpleNamespace(dtype="float32", device="cpu", algos=algos, warmup=0, reps=reps,
                                 cpu_time=cpu_time)
    rows = cli.bench_problem(problem, args, None, lambda m: print(m, file=sys.stderr))
    times = {r["algo"]: min(r["times_ms"]) for r in rows if "times_ms" in r}
    bad = [r["algo"] for r in rows if r.get("check") == "MISMATCH"]
    return {"problem": problem.descriptor(), "layer": problem.label, "flops": problem.flops(),
            "applicable": applicable, "auto_choice_at_collection": applicable[0],
            "min_ms": times, "mismatch": bad, "loadavg_1min": os.getloadavg()[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True, help="JSON file to write")
    ap.add_argument("--count", type=int, default=400, help="grid layers to draw (default 400)")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--suites", action="store_true", help="also time bench/suites/*.txt first")
    ap.add_argument("--reps", type=int, default=3, help="interleaved reps per algorithm (min)")
    ap.add_argument("--max-flops", type=float, default=1e9)
    ap.add_argument("--max-elements", type=float, default=2e7)
    ap.add_argument("--direct-max-flops", type=float, default=3e7)
    ap.add_argument("--threads", type=int, default=1, help="convcore's CPU threads (default 1)")
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="cpu (default): process CPU time, robust to other jobs on the cores")
    ap.add_argument("--budget-s", type=float, default=840, help="stop drawing after this long")
    args = ap.parse_args(argv)

    convcore.set_num_threads(args.threads)
    problems = (suite_problems() if args.suites else []) + grid(args.count, args.seed,
                                                                args.max_flops, args.max_elements)
    start, layers = time.monotonic(), []
    for i, p in enumerate(problems):
        if time.monotonic() - start > args.budget_s:
            print(f"budget spent after {i} layers", file=sys.stderr)
            break
        layers.append(time_layer(p, args.reps, args.direct_max_flops, args.clock == "cpu"))
        if i % 20 == 0:
            print(f"{i}/{len(problems)} {time.monotonic() - start:.0f} s load "
                  f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    report = {
        "generated_by": "bench/collect_selection_data.py " + " ".join(argv or sys.argv[1:]),
        "convcore_version": convcore.__version__, "build_info": convcore.build_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpu_count": os.cpu_count(), "dtype": "float32",
        "threads": args.threads, "clock": args.clock,
        "statistic": f"min of {args.reps} interleaved reps (after one checked run)",
        "loadavg_at_end": os.getloadavg(), "seconds": round(time.monotonic() - start, 1),
        "layers": layers,
    }
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{len(layers)} layers written to {args.output} in {report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
