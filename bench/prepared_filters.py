"""Time saved per layer by keeping transformed filters between inference calls.

Each 3x3 convolution of a torchvision network, as a convcore.torch.Conv2d in inference on its
real input shape (warm: the same input every call), run two ways interleaved in one process:
its plan keeping the transformed filters (the default) and transforming them at every call.
The algorithm is the one "auto" picks for the layer. Median of ROUNDS rounds.

    .venv/bin/python bench/prepared_filters.py [model ...]     (default: resnet18 vgg16)
"""
import statistics
import sys
import time

import torch

import convcore.torch as cct
from convcore.model_bench import import_torchvision

ROUNDS = 15
MIN_ROUND_S = 0.02


def layer_inputs(model, size=224):
    """(name, Conv2d, input) for each 3x3 convolution, inputs captured by a forward pass."""
    found = []
    hooks = [m.register_forward_pre_hook(lambda m, args, name=name: found.append((name, m, args[0].clone())))
             for name, m in model.named_modules()
             if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)]
    model(torch.randn(1, 3, size, size))
    for h in hooks:
        h.remove()
    return found


def per_call_ms(fn):
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_ROUND_S and calls >= 3:
            return elapsed / calls * 1e3


def main(models):
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch 1, 224x224; "
          f"median of {ROUNDS} interleaved rounds")
    print(f"{'layer':28s} {'problem':26s} {'algo':18s} {'kept ms':>8s} {'per call ms':>11s} {'saved':>6s}")
    for name in models:
        model = cct.convert(getattr(import_torchvision(), name)().eval())
        kept_total = per_call_total = 0.0
        for layer_name, layer, x in layer_inputs(model):
            transform_each_call = cct.Conv2d.__new__(cct.Conv2d)
            transform_each_call.__dict__.update({k: v for k, v in layer.__dict__.items()
                                                 if k not in ("_convcore_conv", "_prepared_weight")})
            transform_each_call.__dict__["_filter_version"] = lambda weight: -1
            cases = {"kept": lambda: layer(x), "per call": lambda: transform_each_call(x)}
            for fn in cases.values():
                fn()
            times = {k: [] for k in cases}
            for r in range(ROUNDS):
                for k in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
                    times[k].append(per_call_ms(cases[k]))
            kept, per_call = (statistics.median(times[k]) for k in cases)
            kept_total += kept
            per_call_total += per_call
            problem = f"{x.shape[1]}->{layer.out_channels} @{x.shape[2]} s{layer.stride[0]}"
            print(f"{name + ':' + layer_name:28s} {problem:26s} {layer.last_algo:18s} {kept:8.3f} "
                  f"{per_call:11.3f} {1 - kept / per_call:6.1%}")
        print(f"{name + ': all 3x3 layers':28s} {'':26s} {'':18s} {kept_total:8.3f} {per_call_total:11.3f} "
              f"{1 - kept_total / per_call_total:6.1%}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["resnet18", "vgg16"])
