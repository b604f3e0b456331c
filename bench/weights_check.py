"""What keeping convcore.torch's filters right costs in inference: torchvision networks converted
with convcore.torch.convert, batch 1, 224x224, each in three ways, interleaved in one process:

- built as users do (outside inference_mode), the default (the weights' fingerprint checked at
  every call);
- built and converted inside torch.inference_mode() (weights without a version counter), the
  default: issue 29 asks for it within 10% of the first;
- built as users do, with freeze=True (the weights trusted: no fingerprint), the cost floor.

Each contender in its faster input layout (NCHW or channels_last, the better of both measured
here); medians of interleaved rounds, the starting contender rotating.

    .venv/bin/python bench/weights_check.py [--models resnet18,mobilenet_v2] [--rounds 15]
"""
import argparse
import statistics
import time

import torch

import convcore
import convcore.torch as cct
from convcore.model_bench import import_torchvision


def build(name, inference):
    models = import_torchvision()
    torch.manual_seed(0)
    with torch.inference_mode(inference):
        model = getattr(models, name)().eval()
        return model



def timed(fn, x):
    start = time.perf_counter()
    fn(x)
    return (time.perf_counter() - start) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"convcore {convcore.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"batch 1, 224x224; median of {args.rounds} interleaved rounds, ms")
    for name in args.models.split(","):
        normal = cct.convert(build(name, False), fuse=True)
        with torch.inference_mode():
            made_in_inference = cct.convert(build(name, True), fuse=True)
        frozen = cct.convert(build(name, False), fuse=True, freeze=True)
        contenders = {"default": normal, "built in inference_mode": made_in_inference,
                      "freeze=True": frozen}
        x = torch.randn(1, 3, 224, 224)
        inputs = {"nchw": x, "channels_last": x.contiguous(memory_format=torch.channels_last)}
        times = {(c, layout): [] for c in contenders for layout in inputs}
        keys = list(times)
        with torch.inference_mode():
            for key in keys:  # warm-up: selection, prepared filters
                for _ in range(2):
                    contenders[key[0]](inputs[key[1]])
            for r in range(args.rounds):
                for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                    times[key].append(timed(contenders[key[0]], inputs[key[1]]))
        best = {c: min((statistics.median(times[(c, layout)]), layout) for layout in inputs)
                for c in contenders}
        base = best["default"][0]
        print(f"{name}:")
        for c, (ms, layout) in best.items():
            print(f"  {c:26s} {ms:8.2f} ms ({layout})  {ms / base:.3f}x the default")


if __name__ == "__main__":
    main()
