import torch, time, convcore, torch.nn.functional as F, sys, statistics, numpy as np
from convcore.bench_timing import single_threaded_numpy_blas
torch.manual_seed(0)
for C,K,H,W,kh in [(45,64,16,3136,3),(64,64,16,3136,1),(45,64,16,3136,1),(135,64,16,3136,1),(64,128,56,56,3)]:
    x=torch.randn(1,C,H,W).contiguous(memory_format=torch.channels_last); w=torch.randn(K,C,kh,1).contiguous(memory_format=torch.channels_last)
    pad=(kh//2,0)
    runs={}
    for algo in ["implicit_gemm","pointwise","auto"]:
        conv=convcore.Convolution(convcore.ConvDesc(padding=pad))
        try: conv.forward(x,w,algo=algo,filter_version=1)
        except Exception as e: continue
        runs[algo+"("+conv.last_algo+")"]=(lambda conv=conv,algo=algo: conv.forward(x,w,algo=algo,filter_version=1))
    runs["pt"]=lambda: F.conv2d(x,w,None,1,pad)
    names=list(runs); T={n:[] for n in names}
    for r in range(8):
        order=names[r%len(names):]+names[:r%len(names)]
        for n in order:
            t=time.perf_counter(); runs[n](); T[n].append((time.perf_counter()-t)*1e3)
    fl=2*C*K*kh*H*W/1e9
    print(C,K,H,W,kh, "  ".join(f"{n} {min(T[n]):.2f}ms/{fl/min(T[n])*1e3:.0f}GF" for n in names), flush=True)
