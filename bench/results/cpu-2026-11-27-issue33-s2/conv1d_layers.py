# Conv1d layers, batch 1, inference: PyTorch's F.conv1d in its faster memory format (min over NCL
# and NLC) against convcore.torch.conv1d per algorithm (NLC in and out, filters kept between
# calls), 5 interleaved rounds, min per contender, ms. The 3-tap stride-1 layers are where the
# 1-D minimal algorithms apply (WINOGRAD F(2,3), F(4,3), CYCLIC_MINIMAL's 4-point cyclic
# convolution); the wav2vec2 feature extractor's strided layers are there for comparison.
import time, torch, torch.nn.functional as F
import convcore.torch as ct

LAYERS = [  # (C, K, L, taps, stride)
    (256, 256, 16000, 3, 1), (512, 512, 4000, 3, 1), (128, 128, 16000, 3, 1), (64, 64, 16000, 3, 1),
    (512, 512, 3199, 3, 2), (512, 512, 199, 2, 2), (1, 512, 16000, 10, 5),
]
ALGOS = ["auto", "im2col_gemm", "implicit_gemm", "winograd_2x2_3x3", "winograd_4x4_3x3", "cyclic_minimal"]


def once(f):
    s = time.perf_counter(); f(); return (time.perf_counter() - s) * 1e3


torch.manual_seed(0)
with torch.inference_mode():
    for c, k, length, taps, stride in LAYERS:
        x = torch.randn(1, c, length)
        xl = x.transpose(1, 2).contiguous().transpose(1, 2)
        w = torch.randn(k, c, taps) / (c * taps) ** 0.5
        pad = taps // 2 if stride == 1 else 0
        runs = {"pytorch_ncl": lambda: F.conv1d(x, w, None, stride, pad),
                "pytorch_nlc": lambda: F.conv1d(xl, w, None, stride, pad)}
        ref = F.conv1d(x.double(), w.double(), None, stride, pad)
        for algo in ALGOS:
            f = (lambda a: lambda: ct.conv1d(xl, w, None, stride, pad, algo=a))(algo)
            try:
                y = f()
            except Exception:  # NOT_SUPPORTED
                continue
            err = ((y.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-4, (algo, err)
            runs[algo] = f
        for f in runs.values():
            f(); f()
        best = {name: once(f) for name, f in runs.items()}
        for _ in range(4):
            for name, f in runs.items():
                best[name] = min(best[name], once(f))
        pt = min(best["pytorch_ncl"], best["pytorch_nlc"])
        cells = "  ".join(f"{a} {best[a]:.2f} ({pt / best[a]:.2f}x)" for a in ALGOS if a in best)
        print(f"C{c} K{k} L{length} taps{taps} s{stride}: pytorch {pt:.2f} "
              f"(ncl {best['pytorch_ncl']:.2f}, nlc {best['pytorch_nlc']:.2f})  {cells}", flush=True)
