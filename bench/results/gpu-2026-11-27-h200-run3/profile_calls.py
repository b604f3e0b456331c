"""What one convcore forward call costs on the GPU beside its kernels (the ~0.09 ms floor of the
layer bench, where cuDNN takes 0.04-0.06 ms): torch.profiler over 20 calls per algorithm on
resnet50's res2_3x3 at batch 1 (CUDA runtime calls and kernels, with counts), and the wall time
per call against torch's conv2d, both synchronised per call.

    PYTHONPATH=<site> python3 profile_calls.py [cuda|cpu]
"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import convcore
from convcore import bench_suite

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
on_cuda = device.startswith("cuda")
(problem,) = bench_suite.parse_suite("mb1ic64ih56oc64kh3ph1  res2_3x3\n", "inline")
conv = convcore.Convolution(problem.desc())
x = torch.randn(problem.x_shape, device=device)
w = torch.randn(problem.w_shape, device=device)
y_shape = conv.output_shape(problem.x_shape, problem.w_shape)
out = torch.empty(y_shape, device=device)
sync = torch.cuda.synchronize if on_cuda else (lambda: None)
print(convcore.build_info())
print("device:", torch.cuda.get_device_name(0) if on_cuda else "cpu")


def wall_ms(fn, reps=50):
    for _ in range(5):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


print(f"torch conv2d: {wall_ms(lambda: torch.nn.functional.conv2d(x, w, padding=1)):.4f} ms per call (median, synchronised)")
for algo in ("implicit_gemm", "im2col_gemm", "winograd_4x4_3x3", "direct"):
    fn = lambda a=algo: conv.forward(x, w, algo=a, out=out, filter_version=0)  # noqa: E731
    print(f"\n== {algo}: {wall_ms(fn):.4f} ms per call (median, synchronised)")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(20):
            fn()
        sync()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60))
