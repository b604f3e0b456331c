"""Whether "auto" holds: its choice against the fastest algorithm, timed as callers run them.

For each layer of the suites and each caller's protocol (per-call: a NumPy call without
filter_version, the filters transformed at every call; prepared: filter_version=1, a plan's
prepared filters), in the cache state of --state:
  network        (the default) as a layer of a network runs: before each timed call the caches
                 are flushed (twice the L3 written), the OpenMP pool woken and x read again, so
                 the input is warm and the weights and prepared filters are cold (as Find times
                 on the CPU, docs/find.md);
  after-other    each call right after another algorithm's call, nothing else: the weights stay
                 warm (both algorithms read them), each one's transformed filters may not;
  1. the fastest algorithm: every applicable one but DIRECT in interleaved rounds, the starting
     one rotating; the fastest median wins;
  2. auto's choice, made on its first call with a fresh find-db (what a new user gets);
  3. auto's choice against the fastest in --pairs alternating pairs (auto then fastest, then the
     other way round): the median of auto's times over the median of the fastest's. 1.0 when
     auto chose the fastest.
It prints one line per layer and protocol, then per protocol: layers within 10%, the geomean of
the ratios and the worst layer. The issue's target: within 10% on at least 90% of layers, none
beyond 1.25x.

    env -u OPENBLAS_CORETYPE .venv/bin/python bench/auto_holds.py \\
        --suite bench/suites/unseen_cpu.txt --json bench/results/<run>/auto_holds.json
"""
import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

WITHIN = 1.10


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def timed(fn, before=None):
    if before is not None:
        before()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def rounds(contenders, count, before=None):
    """{name: [ms]}: each round runs every contender once, the first one rotating; `before`
    (untimed) before each call."""
    names = list(contenders)
    times = {n: [] for n in names}
    gc.disable()
    try:
        for r in range(count):
            for i in range(len(names)):
                name = names[(r + i) % len(names)]
                times[name].append(timed(contenders[name], before))
    finally:
        gc.enable()
    return times


def layer_rows(convcore, problem, protocols, args):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, problem.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, problem.w_shape).astype(np.float32)
    rows = []
    before = None
    if args.state == "network":
        from convcore.bench_timing import _flush_buffer, _thread_pool_waker
        flush, wake = _flush_buffer(), _thread_pool_waker(None)

        def before():
            flush.fill(1.0)
            wake()
            x.sum()
    for protocol in protocols:
        version = 1 if protocol == "prepared" else None
        conv = convcore.Convolution(problem.desc())
        algos = [a for a in conv.applicable_algos(problem.x_shape, problem.w_shape) if a != "direct"]
        y = np.empty(conv.output_shape(problem.x_shape, problem.w_shape), np.float32)
        # auto first, on a fresh decision: what a new user's first call times and keeps
        conv.forward(x, w, algo="auto", out=y, filter_version=version)
        auto = conv.last_algo
        calls = {a: (lambda a=a: conv.forward(x, w, algo=a, out=y, filter_version=version)) for a in algos}
        for fn in calls.values():  # plans, prepared filters, first touch
            fn()
        times = rounds(calls, args.rounds, before)
        medians = {a: statistics.median(t) for a, t in times.items()}
        fastest = min(medians, key=medians.get)
        ratio, auto_ms, fastest_ms = 1.0, medians[auto], medians[fastest]
        if auto != fastest:
            pair = rounds({auto: calls[auto], fastest: calls[fastest]}, args.pairs, before)
            auto_ms, fastest_ms = statistics.median(pair[auto]), statistics.median(pair[fastest])
            ratio = auto_ms / fastest_ms
        rows.append({"layer": problem.name or problem.descriptor(), "problem": problem.descriptor(),
                     "protocol": protocol, "auto": auto, "fastest": fastest, "ratio": ratio,
                     "auto_ms": auto_ms, "fastest_ms": fastest_ms, "round_medians_ms": medians})
        print(f"{rows[-1]['layer']:<34} {protocol:<9} auto {auto:<17} fastest {fastest:<17} "
              f"{ratio:5.2f}", flush=True)
    return rows


def summary(rows, protocol):
    sel = [r for r in rows if r["protocol"] == protocol]
    if not sel:
        return None
    ratios = [r["ratio"] for r in sel]
    worst = max(sel, key=lambda r: r["ratio"])
    return {"protocol": protocol, "layers": len(sel), "within": sum(q <= WITHIN for q in ratios),
            "geomean": math.exp(sum(math.log(q) for q in ratios) / len(ratios)),
            "worst": worst["ratio"], "worst_layer": worst["layer"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", required=True, help="a suite file (repeatable)")
    parser.add_argument("--protocol", choices=["per-call", "prepared", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds of every algorithm")
    parser.add_argument("--pairs", type=int, default=41, help="alternating pairs, auto against the fastest")
    parser.add_argument("--state", choices=["network", "after-other"], default="network",
                        help="the caches' state at each timed call (see above)")
    parser.add_argument("--json", help="also write the rows and summaries here")
    args = parser.parse_args()
    os.environ["CONVCORE_FIND_DB"] = os.path.join(tempfile.mkdtemp(prefix="auto_holds_"), "find-db.txt")
    import convcore
    from convcore.bench_suite import parse_suite
    protocols = ["per-call", "prepared"] if args.protocol == "both" else [args.protocol]
    rows = []
    for suite in args.suite:
        for problem in parse_suite(open(suite).read(), suite):
            rows += layer_rows(convcore, problem, protocols, args)
    sums = [s for s in (summary(rows, p) for p in protocols) if s]
    for s in sums:
        print(f"{s['protocol']}: auto within 10% on {s['within']}/{s['layers']} layers, geomean "
              f"{s['geomean']:.3f}, worst {s['worst']:.2f} ({s['worst_layer']})")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "convcore": convcore.__file__, "args": vars(args),
                       "summaries": sums, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
