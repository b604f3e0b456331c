"""What a repeated algo="auto" call pays for selection: the same call with the algorithm named,
interleaved, on a tiny layer (where a call's fixed cost dominates) and on a network layer.
Prints the median per-call time of each and the difference.

    .venv/bin/python bench/selection_overhead.py
"""
import statistics
import time

import numpy as np

import convcore

LAYERS = {"tiny 1x8x8x8 3x3": ((1, 8, 8, 8), (8, 8, 3, 3), 1),
          "resnet18 layer1 3x3": ((1, 64, 56, 56), (64, 64, 3, 3), 1)}


def per_call_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    print(f"convcore {convcore.__version__}; median of 15 interleaved rounds, per call")
    for label, (xs, ws, pad) in LAYERS.items():
        rng = np.random.default_rng(0)
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        conv = convcore.Convolution(padding=pad)
        y = np.empty(conv.output_shape(xs, ws), np.float32)
        conv.forward(x, w, out=y)  # first use: auto times its candidates
        named = conv.last_algo
        calls = 2000 if xs[1] <= 8 else 20
        times = {"auto": [], named: []}
        for rnd in range(15):
            for algo in (["auto", named] if rnd % 2 == 0 else [named, "auto"]):
                times[algo].append(per_call_us(lambda a=algo: conv.forward(x, w, algo=a, out=y), calls))
        auto_us, named_us = statistics.median(times["auto"]), statistics.median(times[named])
        print(f"{label:22s} auto {auto_us:9.2f} us   {named:16s} {named_us:9.2f} us   "
              f"difference {auto_us - named_us:+.2f} us")


if __name__ == "__main__":
    main()
