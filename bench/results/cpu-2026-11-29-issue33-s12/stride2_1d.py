# wav2vec2's stride-2 3-tap Conv1d layers (512 -> 512): convcore's algorithms against PyTorch, in
# one process, interleaved; channels-first (NCW as NCHW with H = 1) and channels-last.
import torch, time, convcore, torch.nn.functional as F, sys
torch.manual_seed(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
for L in [3199, 1599, 799, 399]:
    for cl in [False, True]:
        x = torch.randn(1, 512, 1, L); w = torch.randn(512, 512, 1, 3) * 0.05
        if cl: x = x.contiguous(memory_format=torch.channels_last); w = w.contiguous(memory_format=torch.channels_last)
        x1 = x[:, :, 0, :].contiguous() if not cl else x[:, :, 0, :]
        w1 = w[:, :, 0, :].contiguous() if not cl else w[:, :, 0, :]
        runs = {}
        for algo in ["winograd_4x4_3x3", "winograd_2x2_3x3", "im2col_gemm", "implicit_gemm", "auto"]:
            conv = convcore.Convolution(convcore.ConvDesc(stride=(1, 2)))
            try: conv.forward(x, w, algo=algo, filter_version=1)
            except Exception as e: print(algo, "->", str(e)[:120]); continue
            runs[algo + "(" + conv.last_algo + ")"] = (lambda conv=conv, algo=algo: conv.forward(x, w, algo=algo, filter_version=1))
        runs["pt"] = (lambda: F.conv1d(x1, w1, None, 2))
        ref = F.conv1d(x1.double(), w1.double(), None, 2)
        for n, f in runs.items():
            if n != "pt":
                y = f()[:, :, 0, :].double(); err = ((y - ref).norm() / ref.norm()).item()
                if err > 1e-5: print("ERR", n, err)
        names = list(runs); T = {n: [] for n in names}
        for r in range(reps):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                t = time.perf_counter(); runs[n](); T[n].append((time.perf_counter() - t) * 1e3)
        pt = min(T["pt"])
        print(L, "NWC" if cl else "NCW", "  ".join(f"{n} {min(T[n]):.2f}ms ({pt / min(T[n]):.2f}x)" for n in names), flush=True)
