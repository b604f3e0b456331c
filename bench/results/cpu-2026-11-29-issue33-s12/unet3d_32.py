# unet3d's 32 -> 32 3x3x3 layer at 64^3 (merge.2.3 / down.0.3), channels_last_3d: convcore's
# algorithms against PyTorch, one process, interleaved, prepared filters, min of 5 calls; and the
# cost of a new 33.5 MB output (page faults) alone.
# Other layers: python unet3d_32.py C,K,D ... (e.g. 32,64,32 1,32,64).
import sys, time, torch, convcore, torch.nn.functional as F
torch.manual_seed(0)
shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or [(32, 32, 64), (32, 64, 32)]
for c, k, d in shapes:
    x = torch.randn(1, c, d, d, d).contiguous(memory_format=torch.channels_last_3d)
    w = (torch.randn(k, c, 3, 3, 3) * 0.05).contiguous()
    runs = {}
    for algo in ["winograd_4x4_3x3", "winograd_2x2_3x3", "implicit_gemm", "im2col_gemm", "auto"]:
        conv = convcore.Convolution(convcore.ConvDesc(padding=(1, 1, 1), spatial_dims=3))
        try:
            conv.forward(x, w, algo=algo, filter_version=1)
        except Exception as e:
            print(f"  {algo}: {str(e)[:120]}"); continue
        label = algo if algo != "auto" else f"auto={conv.last_algo}"
        runs[label] = (lambda conv=conv, algo=algo: conv.forward(x, w, algo=algo, filter_version=1))
    runs["pytorch"] = lambda: F.conv3d(x, w, None, 1, 1)
    runs["new output only"] = lambda: torch.empty(1, k, d, d, d, memory_format=torch.channels_last_3d).fill_(0)
    names = list(runs); T = {m: [] for m in names}
    for i in range(5):
        for m in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter(); runs[m](); T[m].append((time.perf_counter() - t) * 1e3)
    pt = min(T["pytorch"])
    print(f"{c}->{k} at {d}^3: pytorch {pt:.2f} ms |", "  ".join(f"{m} {min(T[m]):.2f}" + (f" ({pt / min(T[m]):.2f}x)" if m != "new output only" else "") for m in names if m != "pytorch"), flush=True)
