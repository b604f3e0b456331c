# r3d_18's 3x3x3 stride-2 layers, channels_last_3d: convcore's algorithms against PyTorch, one
# process, interleaved, prepared filters, min of `reps` calls.
import sys, time, torch, convcore, torch.nn.functional as F
torch.manual_seed(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
for name, c, d, h, k in [("layer2.0.conv1", 64, 16, 56, 128), ("layer3.0.conv1", 128, 8, 28, 256),
                         ("layer4.0.conv1", 256, 4, 14, 512)]:
    x = torch.randn(1, c, d, h, h).contiguous(memory_format=torch.channels_last_3d)
    w = (torch.randn(k, c, 3, 3, 3) * 0.05).contiguous()
    ref = F.conv3d(x.double(), w.double(), None, 2, 1)
    runs = {}
    for algo in ["winograd_4x4_3x3", "winograd_2x2_3x3", "implicit_gemm", "im2col_gemm", "auto"]:
        conv = convcore.Convolution(convcore.ConvDesc(padding=(1, 1, 1), stride=(2, 2, 2), spatial_dims=3))
        try:
            y = conv.forward(x, w, algo=algo, filter_version=1)
        except Exception as e:
            print(f"  {algo}: {str(e)[:150]}"); continue
        err = ((y.double() - ref).norm() / ref.norm()).item()
        label = algo if algo != "auto" else f"auto={conv.last_algo}"
        if err > 1e-4: print("  ERR", label, err)
        runs[label] = (lambda conv=conv, algo=algo: conv.forward(x, w, algo=algo, filter_version=1))
    runs["pytorch"] = lambda: F.conv3d(x, w, None, 2, 1)
    names = list(runs); T = {m: [] for m in names}
    for i in range(reps):
        for m in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter(); runs[m](); T[m].append((time.perf_counter() - t) * 1e3)
    pt = min(T["pytorch"])
    print(name, f"pytorch {pt:.2f} ms |", "  ".join(f"{m} {min(T[m]):.2f} ({pt / min(T[m]):.2f}x)" for m in names if m != "pytorch"), flush=True)
