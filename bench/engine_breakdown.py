"""Where a network's inference time goes, per kind of operation, in convcore and in the engines
(the per-op breakdown behind `convcore bench --model`'s end-to-end numbers):

    python bench/engine_breakdown.py mobilenet_v2 [--runs 20] [--threads 2]

- convcore: convcore.torch.convert(model, fuse=True), channels_last, timed per leaf module type
  with forward hooks (a fused Conv2d includes its batch norm, residual and activation);
- ONNX Runtime: its own profiler (enable_profiling), time per node type;
- OpenVINO: per-node performance counters (PERF_COUNT), time per executed layer type;
- PyTorch channels_last, timed as convcore is, for reference.
Each is the mean per run over --runs runs after 3 warm-up runs. Hooks and profilers add their
own cost, so the totals exceed the end-to-end times of the model benchmark: compare the shares.
"""

import argparse
import collections
import copy
import json
import os
import tempfile
import warnings

import torch

import convcore
import convcore.torch as convcore_torch
from convcore import bench_timing, model_bench


def torch_ops(model, x, runs):
    """ms per run by leaf module type (forward pre-hook to forward hook; a convcore Conv2d
    includes what it fused), and "outside modules" for the rest of the network's time (functional
    ops such as residual adds, and Python). torch.profiler is not used: on these VMs it slows
    the OpenMP runs down a hundredfold."""
    import time
    totals, started = collections.Counter(), {}
    handles = []
    for m in model.modules():
        if next(m.children(), None) is not None:
            continue
        name = type(m).__name__ + (" (convcore)" if isinstance(m, convcore_torch.Conv2d) else "")

        def pre(module, args, key=id(m)):
            started[key] = time.perf_counter()

        def post(module, args, output, key=id(m), name=name):
            totals[name] += (time.perf_counter() - started.pop(key)) * 1e3
        handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        totals.clear()
        start = time.perf_counter()
        for _ in range(runs):
            model(x)
        wall = (time.perf_counter() - start) * 1e3
    for h in handles:
        h.remove()
    result = collections.Counter({k: v / runs for k, v in totals.items()})
    result["outside modules"] = max(0.0, wall / runs - sum(result.values()))
    return result


def onnxruntime_ops(model, x, runs, threads):
    import onnxruntime
    onnx = model_bench.onnx_bytes(model, x)
    options = model_bench.onnxruntime_options(threads)
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = onnxruntime.InferenceSession(onnx, options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x.numpy()}
    for _ in range(3):
        session.run(None, feed)
    with open(session.end_profiling()) as f:  # drop the warm-up runs' events
        warm = len(json.load(f))
    options.enable_profiling = True
    session = onnxruntime.InferenceSession(onnx, options, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, feed)
    for _ in range(runs):
        session.run(None, feed)
    with open(session.end_profiling()) as f:
        events = json.load(f)[warm:]
    totals = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            totals[e["args"]["op_name"]] += e["dur"] / 1e3 / runs
    return totals


def openvino_ops(model, x, runs, threads):
    import openvino
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = openvino.convert_model(model, example_input=x)
    compiled = openvino.Core().compile_model(converted, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads, "PERF_COUNT": True})
    request, array = compiled.create_infer_request(), x.numpy()
    for _ in range(3):
        request.infer([array])
    totals = collections.Counter()
    for _ in range(runs):
        request.infer([array])
        for info in request.get_profiling_info():
            if info.status == info.Status.EXECUTED:
                totals[info.exec_type] += info.real_time.total_seconds() * 1e3 / runs
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=model_bench.default_threads())
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    convcore.set_num_threads(args.threads)
    model = model_bench.build_model(args.model)
    x = torch.randn(1, 3, args.size, args.size)
    channels_last = x.to(memory_format=torch.channels_last)
    sides = {
        "convcore": lambda: torch_ops(convcore_torch.convert(copy.deepcopy(model), fuse=True), channels_last,
                                      args.runs),
        "onnxruntime": lambda: onnxruntime_ops(model, x, args.runs, args.threads),
        "openvino": lambda: openvino_ops(model, x, args.runs, args.threads),
        "pytorch channels_last": lambda: torch_ops(
            copy.deepcopy(model).to(memory_format=torch.channels_last), channels_last, args.runs),
    }
    print(f"{args.model}, batch 1, {args.size}x{args.size}, {bench_timing.cpu_model_name()}, "
          f"{args.threads} threads, {args.runs} runs: ms per run by operation (profiled)")
    for side, measure in sides.items():
        try:
            totals = measure()
        except ImportError as e:
            print(f"\n{side}: missing ({e})")
            continue
        total = sum(totals.values())
        print(f"\n{side}: {total:.3f} ms")
        for op, ms in totals.most_common(12):
            print(f"  {op:40s} {ms:8.3f}  {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    main()
