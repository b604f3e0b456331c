# Stride-2 3x3 (and 1x3) layers, channels-last: convcore's algorithms against PyTorch, in one
# process, interleaved, prepared filters (filter_version), min of `reps` calls.
import sys, time, torch, convcore, torch.nn.functional as F
torch.manual_seed(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
# name, N, C, H, W, K, R, S, pad, stride
layers = [
    ("resnet layer2.0.conv1", 1, 64, 56, 56, 128, 3, 3, 1, 2),
    ("resnet layer3.0.conv1", 1, 128, 28, 28, 256, 3, 3, 1, 2),
    ("resnet layer4.0.conv1", 1, 256, 14, 14, 512, 3, 3, 1, 2),
    ("mc3 layer2.0.conv1 (16 planes)", 16, 64, 56, 56, 128, 3, 3, 1, 2),
    ("mc3 layer4.0.conv1 (16 planes)", 16, 256, 14, 14, 512, 3, 3, 1, 2),
    ("wav2vec2 layers.3 (1x3, NWC)", 1, 512, 1, 3199, 512, 1, 3, 0, 2),
    ("wav2vec2 layers.7 (1x3, NWC)", 1, 512, 1, 799, 512, 1, 3, 0, 2),
]
algos = ["winograd_4x4_3x3", "winograd_2x2_3x3", "implicit_gemm", "im2col_gemm", "auto"]
for name, n, c, h, w_, k, r, s, pad, st in layers:
    x = torch.randn(n, c, h, w_).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(k, c, r, s) * 0.05).contiguous(memory_format=torch.channels_last)
    ph, pw = (pad if r > 1 else 0), (pad if s > 1 else 0)
    sh, sw = (st if r > 1 else 1), st
    ref = F.conv2d(x.double(), w.double(), None, (sh, sw), (ph, pw))
    runs = {}
    for algo in algos:
        conv = convcore.Convolution(convcore.ConvDesc(padding=(ph, pw), stride=(sh, sw)))
        try:
            y = conv.forward(x, w, algo=algo, filter_version=1)
        except Exception as e:
            print(f"  {algo}: {str(e)[:150]}"); continue
        err = ((y.double() - ref).norm() / ref.norm()).item()
        label = algo if algo != "auto" else f"auto={conv.last_algo}"
        if err > 1e-4: print("  ERR", label, err)
        runs[label] = (lambda conv=conv, algo=algo: conv.forward(x, w, algo=algo, filter_version=1))
    runs["pytorch"] = lambda: F.conv2d(x, w, None, (sh, sw), (ph, pw))
    names = list(runs); T = {m: [] for m in names}
    for i in range(reps):
        for m in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter(); runs[m](); T[m].append((time.perf_counter() - t) * 1e3)
    pt = min(T["pytorch"])
    print(name, f"pytorch {pt:.2f} ms |", "  ".join(f"{m} {min(T[m]):.2f} ({pt / min(T[m]):.2f}x)" for m in names if m != "pytorch"), flush=True)
