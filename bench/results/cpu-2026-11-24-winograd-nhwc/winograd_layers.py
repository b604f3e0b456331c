import torch, convcore, time, sys, statistics
import os; torch.set_num_threads(int(os.environ.get("T","2")))
torch.manual_seed(0)
layers = [(1,64,56,56,64),(1,128,28,28,128),(1,256,14,14,256),(1,512,7,7,512),(1,64,224,224,64),(1,256,56,56,256),(1,512,28,28,512),(1,512,14,14,512)]
if len(sys.argv) > 1: layers = [tuple(map(int, a.split(','))) for a in sys.argv[1:]]
reps = 15
for (n,c,h,w,k) in layers:
    x = torch.randn(n,c,h,w)
    xl = x.to(memory_format=torch.channels_last)
    wt = torch.randn(k,c,3,3)
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    cands = {
      "torch_nchw": lambda: torch.nn.functional.conv2d(x, wt, padding=1),
      "torch_cl": lambda: torch.nn.functional.conv2d(xl, wt, padding=1),
      "wino4_nhwc": lambda: conv.forward(xl, wt, algo="winograd_4x4_3x3", filter_version=1),
      "wino4_nchw": lambda: conv.forward(x, wt, algo="winograd_4x4_3x3", filter_version=2),
      "wino2_nhwc": lambda: conv.forward(xl, wt, algo="winograd_2x2_3x3", filter_version=3),
    }
    times = {kk: [] for kk in cands}
    with torch.no_grad():
        for f in cands.values(): f(); f()
        for r in range(reps):
            for kk, f in cands.items():
                t = time.perf_counter(); f(); times[kk].append(time.perf_counter()-t)
    flops = 2*n*c*k*h*w*9
    med = {kk: statistics.median(v)*1e3 for kk, v in times.items()}
    best_torch = min(med["torch_nchw"], med["torch_cl"])
    print(f"{c}->{k}@{h}x{w} n{n}: " + "  ".join(f"{kk} {v:.3f}ms ({flops/v/1e6:.0f} GF/s)" for kk, v in med.items()) + f"  | wino4_nhwc vs torch best {best_torch/med['wino4_nhwc']:.2f}x", flush=True)
