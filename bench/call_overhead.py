"""A convolution call's fixed cost, against PyTorch's, on a tiny layer (1x8x8x8, 3x3, padding 1)
where the arithmetic is negligible: convcore.Convolution on NumPy arrays vs torch's F.conv2d,
convcore.torch.Conv2d vs nn.Conv2d (inference, with a bias, and a training step: zero_grad,
forward, sum, backward), and algo="auto" vs the algorithm it picks. All interleaved in one
process; the median of 15 rounds, per call. Targets (issue 29): NumPy / F.conv2d <= 1.3,
Conv2d / nn.Conv2d <= 1.2 in inference and in training, auto - named <= 0.5 us.

    .venv/bin/python bench/call_overhead.py [--threads N]
"""
import argparse
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


def training_step(module, x):
    import torch

    def step():
        with torch.enable_grad():  # the inference cases run with grad disabled
            module.zero_grad(set_to_none=True)
            module(x).sum().backward()
    return step


def main():
    import torch
    import torch.nn.functional as F

    import convcore.torch as cct

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="threads for torch and convcore "
                        "(default: their own defaults)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        convcore.set_num_threads(args.threads)
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
    layer_bias = torch.nn.Conv2d(8, 8, 3, padding=1)
    converted_bias = cct.convert(torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1)))

    cases = {
        "convcore numpy, algo named": lambda: conv.forward(x, w, algo=picked),
        "convcore numpy, algo=auto": lambda: conv.forward(x, w, algo="auto"),
        "torch F.conv2d": lambda: F.conv2d(xt, wt, padding=1),
        "convcore.torch.Conv2d": lambda: converted(xt),
        "torch nn.Conv2d": lambda: layer(xt),
        "convcore.torch.Conv2d, bias": lambda: converted_bias(xt),
        "torch nn.Conv2d, bias": lambda: layer_bias(xt),
        "convcore.torch training step": training_step(converted_bias, xt),
        "torch training step": training_step(layer_bias, xt),
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
    print(f"  ... with a bias:                {med['convcore.torch.Conv2d, bias'] / med['torch nn.Conv2d, bias']:.2f}x")
    print(f"  ... training step:              {med['convcore.torch training step'] / med['torch training step']:.2f}x")
    print(f"  auto - named ({picked}):   {med['convcore numpy, algo=auto'] - med['convcore numpy, algo named']:+.2f} us")


if __name__ == "__main__":
    main()
