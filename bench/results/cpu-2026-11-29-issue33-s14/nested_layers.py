import time, torch, convcore, torch.nn.functional as F
torch.manual_seed(0)
def bench(f, n=5):
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append((time.perf_counter()-t)*1e3)
    return min(ts)
for c,k,d in [(32,32,64),(32,64,32)]:
    tiles=(d+3)//4
    x2 = torch.randn(tiles, c, d, d).contiguous(memory_format=torch.channels_last)
    w2 = (torch.randn(k, c, 3, 3)*0.05)
    conv = convcore.Convolution(convcore.ConvDesc(padding=(1,1)))
    conv.forward(x2, w2, algo="winograd_4x4_3x3", filter_version=1)
    t1 = bench(lambda: conv.forward(x2, w2, algo="winograd_4x4_3x3", filter_version=1))
    x3 = torch.randn(1, c, d, d, d).contiguous(memory_format=torch.channels_last_3d)
    w3 = (torch.randn(k, c, 3, 3, 3)*0.05)
    conv3 = convcore.Convolution(convcore.ConvDesc(padding=(1,1,1), spatial_dims=3))
    conv3.forward(x3, w3, algo="winograd_4x4_3x3", filter_version=1)
    t3 = bench(lambda: conv3.forward(x3, w3, algo="winograd_4x4_3x3", filter_version=1))
    tp = bench(lambda: F.conv3d(x3, w3, None, 1, 1))
    big = torch.empty(d*d*d*c*6//4); src=torch.randn(d*d*d*c*6//4)
    tcopy = bench(lambda: big.copy_(src))
    print(f"{c}->{k} {d}^3: one 2-D call over {tiles} planes {t1:.2f} ms (x6 = {6*t1:.2f}); nested 3-D {t3:.2f}; pytorch {tp:.2f}; copy of X_d size {tcopy:.2f}")
