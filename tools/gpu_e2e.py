#!/usr/bin/env python3
"""One network end to end on the GPU, for make gpu-check: a torchvision model (random weights,
float32, inference under torch.inference_mode) in four contenders, interleaved with a rotating
start order and timed with CUDA events:

    pytorch nchw, pytorch channels_last     PyTorch with cuDNN (cudnn.benchmark on, TF32 off)
    convcore nchw, convcore channels_last   a copy converted with convcore.torch.convert
                                            (algo auto, fuse=True), fed the same inputs

speedup = the faster PyTorch layout's median / the faster convcore layout's median. The logits
are checked against PyTorch NCHW (relative L2 error). Writes OUT/e2e.json and prints a report.

    python3 tools/gpu_e2e.py --model resnet50 --batch 32 --out DIR --time-limit 40
"""
import argparse
import copy
import datetime
import json
import os
import statistics
import sys
import time

import torch

import convcore
import convcore.torch as convcore_torch
from convcore import bench_timing, model_bench

ERROR_BOUND = 1e-3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--out", required=True)
    parser.add_argument("--time-limit", type=float, default=40.0,
                        help="seconds for the whole run; timing stops early to stay within it")
    parser.add_argument("--reps", type=int, default=20, help="timed rounds at most")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (to test this script)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    cuda = args.device != "cpu"
    if cuda:
        if not torch.cuda.is_available() or convcore.cuda_device_count() == 0:
            print("no CUDA device visible to torch or convcore", file=sys.stderr)
            return 2
        bench_timing.cudnn_as_competitor(torch)

    def log(message):
        print(f"[{time.monotonic() - start:6.1f} s] {message}", file=sys.stderr, flush=True)

    log(f"building {args.model}, batch {args.batch}, {args.size}x{args.size}")
    model = model_bench.build_model(args.model).to(args.device)
    x = torch.randn(args.batch, 3, args.size, args.size, generator=torch.Generator().manual_seed(0))
    x = x.to(args.device)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    converted = convcore_torch.convert(copy.deepcopy(model), algo="auto", fuse=True)
    models = {"pytorch nchw": (model, x),
              "pytorch channels_last": (copy.deepcopy(model).to(memory_format=torch.channels_last), x_cl),
              "convcore nchw": (converted, x),
              "convcore channels_last": (converted, x_cl)}
    result = {"model": args.model, "batch": args.batch, "size": args.size, "device": args.device,
              "device_name": torch.cuda.get_device_name() if cuda else "cpu",
              "torch_version": torch.__version__, "convcore_version": convcore.__version__,
              "cudnn_benchmark": cuda, "tf32": False,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "protocol": __doc__.split("\n\n")[0], "failed": {}}

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def timed(fn):
        """Milliseconds of one call: CUDA events on the current stream (wall clock on the CPU)."""
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            return begin.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    with torch.inference_mode():
        log("checking outputs (the first call also selects convcore's algorithms)")
        outputs = {}
        for name, (m, inp) in models.items():
            try:
                outputs[name] = m(inp).float()
                sync()
            except (RuntimeError, convcore.Error) as e:
                if name.startswith("pytorch"):
                    raise
                result["failed"][name] = f"{type(e).__name__}: {e}"
        ref = outputs["pytorch nchw"].double()
        norm = torch.linalg.vector_norm(ref).item() or 1.0
        result["rel_error"] = {n: torch.linalg.vector_norm(o.double() - ref).item() / norm
                               for n, o in outputs.items() if n != "pytorch nchw"}
        bound = max(ERROR_BOUND, 4 * result["rel_error"].get("pytorch channels_last", 0.0))
        result["error_bound"] = bound
        result["correct"] = all(e <= bound for n, e in result["rel_error"].items()
                                if n.startswith("convcore")) and not result["failed"]
        del outputs, ref
        contenders = {n: (lambda m=m, i=i: m(i)) for n, (m, i) in models.items()
                      if n not in result["failed"]}
        log(f"warm-up: {args.warmup} runs each")
        for _ in range(args.warmup):
            for fn in contenders.values():
                fn()
        sync()
        times = {n: [] for n in contenders}
        names = list(contenders)
        round_ms = None
        for rep in range(args.reps):
            left = args.time_limit - (time.monotonic() - start)
            if rep >= 3 and round_ms is not None and left < 2 * round_ms / 1e3 + 2:
                log(f"time limit: stopping after {rep} rounds")
                break
            t0 = time.monotonic()
            for i in range(len(names)):
                name = names[(rep + i) % len(names)]
                times[name].append(timed(contenders[name]))
            round_ms = (time.monotonic() - t0) * 1e3
    result["reps"] = min(len(t) for t in times.values())
    result["contenders"] = {n: {"times_ms": t, "min_ms": min(t), "median_ms": statistics.median(t)}
                            for n, t in times.items() if t}
    c = result["contenders"]
    best_torch = min((n for n in c if n.startswith("pytorch")), key=lambda n: c[n]["median_ms"])
    best_cc = min((n for n in c if n.startswith("convcore")), key=lambda n: c[n]["median_ms"],
                  default=None)
    result["best_pytorch"], result["best_convcore"] = best_torch, best_cc
    result["speedup"] = c[best_torch]["median_ms"] / c[best_cc]["median_ms"] if best_cc else None
    result["algorithms"] = sorted({str(m.last_algo) for m in converted.modules()
                                   if getattr(m, "last_algo", None)})
    result["seconds"] = round(time.monotonic() - start, 1)

    lines = [f"{args.model} end to end, batch {args.batch}, {args.size}x{args.size}, inference, "
             f"{result['device_name']}, torch {torch.__version__}"
             f"{' (cudnn.benchmark on, TF32 off)' if cuda else ''}, "
             f"{result['reps']} rounds"]
    for n in models:
        if n in c:
            mark = " <- best PyTorch" if n == best_torch else (" <- best convcore" if n == best_cc else "")
            lines.append(f"  {n:<24} min {c[n]['min_ms']:9.3f} ms  median {c[n]['median_ms']:9.3f} ms{mark}")
        else:
            lines.append(f"  {n:<24} failed: {result['failed'].get(n, '?')}")
    if result["speedup"]:
        lines.append(f"speedup (best PyTorch / best convcore, median): {result['speedup']:.2f}x")
    errors = ", ".join(f"{n} {e:.2g}" for n, e in result["rel_error"].items())
    lines.append(f"logits vs pytorch nchw (relative L2 error): {errors} -> "
                 + ("ok" if result["correct"] else "!!! convcore above") + f" (bound {bound:.2g})")
    with open(os.path.join(args.out, "e2e.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "e2e.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
