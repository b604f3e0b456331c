import time, torch, convcore, convcore.torch as ct, torch.nn.functional as F
torch.manual_seed(0)
def best(f, n=9):
    f(); ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append((time.perf_counter()-t)*1e3)
    return min(ts)
cl = torch.channels_last_3d
for c,k,h in [(64,128,56),(128,256,28),(256,512,14)]:
    x = torch.randn(1,c,16,h,h).contiguous(memory_format=cl)
    m = torch.nn.Conv3d(c, k, 1, stride=(1,2,2), bias=False)
    mc = ct.convert(torch.nn.Sequential(torch.nn.Conv3d(c, k, 1, stride=(1,2,2), bias=False)))
    mc[0].weight.data.copy_(m.weight.data)
    m = m.to(memory_format=cl); mc = mc.to(memory_format=cl)
    with torch.inference_mode():
        tp = best(lambda: m(x)); tc = best(lambda: mc(x))
        conv = convcore.Convolution(convcore.ConvDesc(stride=(1,2,2), spatial_dims=3))
        w = m.weight.detach().contiguous(memory_format=cl)
        ta = best(lambda: conv.forward(x, w, filter_version=1))
        algos = {}
        for a in ["pointwise", "implicit_gemm", "im2col_gemm"]:
            try: algos[a] = round(best(lambda: conv.forward(x, w, algo=a, filter_version=1)), 3)
            except Exception as e: algos[a] = str(e)[:40]
    print(f"{c}->{k} 16x{h}^2 s(1,2,2): pytorch {tp:.3f} convcore.torch {tc:.3f} Convolution auto {ta:.3f} ({conv.last_algo}) {algos}")
