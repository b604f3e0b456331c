"""A convolution call's fixed cost, against PyTorch's, on a tiny layer (1x8x8x8, 3x3, padding 1)
where the arithmetic is negligible: convcore.Convolution on NumPy arrays vs torch's F.conv2d,
convcore.torch.Conv2d vs nn.Conv2d (inference), and algo="auto" vs the algorithm it picks.
All interleaved in one process; the median of 15 rounds, per call.

    .venv/bin/python bench/call_overhead.py
"""
import statistics
import time

import numpy as np

import convcore

CALLS = 2000
ROUNDS = 15


def per_call_us(fn):
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - start) / CALLS * 1e6


def main():
    import torch
    import torch.nn.functional as F

    import convcore.torch as cct

    torch.set_grad_enabled(False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    conv = convcore.Convolution(padding=1)
    conv.forward(x, w, algo="auto")
    picked = conv.last_algo
    layer = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
    converted = cct.convert(torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)))
    cases = {
        "convcore numpy, algo named": lambda: conv.forward(x, w, algo=picked),
        "convcore numpy, algo=auto": lambda: conv.forward(x, w, algo="auto"),
        "torch F.conv2d": lambda: F.conv2d(xt, wt, padding=1),
        "convcore.torch.Conv2d": lambda: converted(xt),
        "torch nn.Conv2d": lambda: layer(xt),
    }
    for fn in cases.values():  # warm-up: selection, allocations
        for _ in range(50):
            fn()
    times = {name: [] for name in cases}
    for r in range(ROUNDS):
        names = list(cases)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate the order
        for name in names:
            times[name].append(per_call_us(cases[name]))
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"convcore {convcore.__version__}, torch {torch.__version__}; {torch.get_num_threads()} threads; "
          f"tiny layer 1x8x8x8 3x3; median of {ROUNDS} interleaved rounds of {CALLS} calls")
    for name, us in med.items():
        print(f"  {name:30s} {us:7.2f} us")
    print(f"  numpy call / F.conv2d:          {med['convcore numpy, algo named'] / med['torch F.conv2d']:.2f}x")
    print(f"  convcore.torch / nn.Conv2d:     {med['convcore.torch.Conv2d'] / med['torch nn.Conv2d']:.2f}x")
    print(f"  auto - named ({picked}):   {med['convcore numpy, algo=auto'] - med['convcore numpy, algo named']:+.2f} us")


if __name__ == "__main__":
    main()
