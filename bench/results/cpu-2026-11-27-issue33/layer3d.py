# One 3x3x3 Conv3d layer (stride 1, padding 1, batch 1), PyTorch against convcore.torch.conv3d per algorithm,
# in channels_last_3d and NCDHW: python layer3d.py C K D (min of 5 calls after one warm-up; GFLOP/s of the direct count)
import time, sys, torch, torch.nn.functional as F
import convcore, convcore.torch as ct
torch.manual_seed(0)
def tm(f, reps=5):
    f(); ts = []
    for _ in range(reps):
        s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
    return min(ts) * 1e3
c, k, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for fmt in (torch.channels_last_3d, torch.contiguous_format):
    x = torch.randn(1, c, d, d, d).to(memory_format=fmt); w = torch.randn(k, c, 3, 3, 3)
    flops = 2 * 27 * c * k * d ** 3 / 1e9
    with torch.no_grad():
        print(fmt, "pytorch", f"{tm(lambda: F.conv3d(x, w, None, 1, 1)):.1f} ms")
        for algo in ("auto", "winograd_4x4_3x3", "im2col_gemm", "implicit_gemm"):
            t = tm(lambda: ct.conv3d(x, w, None, 1, 1, algo=algo))
            print(f"   {algo:18s} {t:7.1f} ms  {flops / t * 1e3:6.1f} GF/s")
    # one 2-D slice call, as the taps run it
    xs = x[0].transpose(0, 1); conv = convcore.Convolution(padding=1)
    ys = torch.zeros(d, k, d, d).to(memory_format=torch.channels_last if fmt == torch.channels_last_3d else torch.contiguous_format)
    for algo in ("winograd_4x4_3x3",):
        t0 = tm(lambda: conv.forward(xs, w[:, :, 1], algo=algo))
        t1 = tm(lambda: conv.forward(xs, w[:, :, 1], algo=algo, out=ys, beta=1.0))
        print(f"   2-D slice {algo}: beta=0 new {t0:.1f} ms, beta=1 into y {t1:.1f} ms; xs packed nhwc {xs.is_contiguous(memory_format=torch.channels_last)}")
