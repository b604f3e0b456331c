# The 3-D FFT (C API native, cpu/fft_3d.cpp) against the FFT through the depth decomposition
# ("taps": a 2-D FFT convolution per depth tap; "stacked"), convcore's default (auto) and PyTorch's
# better layout, on V-Net's 5x5x5 layers (Milletari et al. 2016: 16-128 channels, 64^3 .. 8^3 at
# batch 1; here stage 1 at 48^3 to fit the session) and a 7x7x7 stem. Forward, inference; warm
# input; min of 5 after two warm-up calls, ms. Layouts: NCDHW for convcore's FFT (any strides),
# channels_last_3d for the other convcore schedules' inputs where they are faster.
import sys, time, torch, torch.nn.functional as F, numpy as np, convcore
from convcore.bench_timing import single_threaded_numpy_blas
torch.set_num_threads(2)
single_threaded_numpy_blas()  # NumPy's own OpenBLAS threads would spin beside the timed runs
L = [  # (C, K, D=H=W, kernel, padding, stride)
    (16, 16, 48, 5, 2, 1),
    (32, 32, 32, 5, 2, 1),
    (64, 64, 16, 5, 2, 1),
    (128, 128, 8, 5, 2, 1),
    (3, 64, 32, 7, 3, 2),
]
def best(f, reps=5):
    f(); f()
    r = []
    for _ in range(reps):
        s = time.perf_counter(); f(); r.append((time.perf_counter() - s) * 1e3)
    return min(r)
torch.manual_seed(0)
for c, k, s, t, pad, stride in L:
    x = torch.randn(1, c, s, s, s); w = torch.randn(k, c, t, t, t) * 0.05
    xl = x.contiguous(memory_format=torch.channels_last_3d)
    ref = F.conv3d(x.double(), w.double(), None, stride, pad)
    res = {}
    with torch.inference_mode():
        res["pytorch ncdhw"] = best(lambda: F.conv3d(x, w, None, stride, pad))
        res["pytorch cl3d"] = best(lambda: F.conv3d(xl, w, None, stride, pad))
    xn, wn = x.numpy(), w.numpy()
    for schedule in ("native", "taps", "stacked"):
        conv = convcore.Convolution(padding=pad, stride=stride, spatial_dims=3)
        conv._nd.schedule = schedule
        try:
            y = conv.forward(xn, wn, algo="fft")
        except Exception as e:
            res[f"fft {schedule}"] = f"n/a ({type(e).__name__})"; continue
        r = ref.numpy()
        err = float(np.sqrt(np.sum((y - r) ** 2) / np.sum(r * r)))
        res[f"fft {schedule}"] = round(best(lambda: conv.forward(xn, wn, algo="fft")), 1)
        res[f"fft {schedule} relerr"] = f"{err:.1e}"
    conv = convcore.Convolution(padding=pad, stride=stride, spatial_dims=3)
    xln = xl.numpy() if False else xl.permute(0, 2, 3, 4, 1).numpy().transpose(0, 4, 1, 2, 3)
    res["convcore auto cl3d"] = round(best(lambda: conv.forward(xln, wn, filter_version=1)), 1)
    print((c, k, s, t, pad, stride), {kk: (round(v, 1) if isinstance(v, float) else v) for kk, v in res.items()}, flush=True)
