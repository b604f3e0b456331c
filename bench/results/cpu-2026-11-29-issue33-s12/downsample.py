# mc3_18 / r2plus1d's 1x1x1 stride-(1,2,2) downsample layers (NDHWC): convcore's algorithms
# against PyTorch, one process, interleaved, prepared filters, min of 10 calls.
import time, torch, convcore, torch.nn.functional as F
torch.manual_seed(0)
for c, k, d, h in [(64, 128, 16, 56), (128, 256, 16, 28), (256, 512, 16, 14)]:
    x = torch.randn(1, c, d, h, h).contiguous(memory_format=torch.channels_last_3d)
    w = (torch.randn(k, c, 1, 1, 1) * 0.05).contiguous()
    ref = F.conv3d(x.double(), w.double(), None, (1, 2, 2))
    runs = {}
    for algo in ["pointwise", "implicit_gemm", "im2col_gemm", "auto"]:
        conv = convcore.Convolution(convcore.ConvDesc(stride=(1, 2, 2), spatial_dims=3))
        try:
            y = conv.forward(x, w, algo=algo, filter_version=1)
        except Exception as e:
            print(f"  {algo}: {str(e)[:120]}"); continue
        err = ((y.double() - ref).norm() / ref.norm()).item()
        label = algo if algo != "auto" else f"auto={conv.last_algo}"
        if err > 1e-4: print("  ERR", label, err)
        runs[label] = (lambda conv=conv, algo=algo: conv.forward(x, w, algo=algo, filter_version=1))
    runs["pytorch"] = lambda: F.conv3d(x, w, None, (1, 2, 2))
    names = list(runs); T = {m: [] for m in names}
    for i in range(10):
        for m in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter(); runs[m](); T[m].append((time.perf_counter() - t) * 1e3)
    pt = min(T["pytorch"])
    print(f"{c}->{k} {d}x{h}^2", f"pytorch {pt:.3f} ms |", "  ".join(f"{m} {min(T[m]):.3f} ({pt / min(T[m]):.2f}x)" for m in names if m != "pytorch"), flush=True)
