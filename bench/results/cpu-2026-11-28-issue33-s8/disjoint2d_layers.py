import torch, time, convcore, torch.nn.functional as F, sys
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
def best(f,n=7):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),3)
cases=[("up2d k2s2 128->64 64x64",(1,128,64,64),(128,64,2,2),2,(1,64,128,128)),
       ("up2d k2s2 256->128 32x32",(1,256,32,32),(256,128,2,2),2,(1,128,64,64)),
       ("ds 1x1s2 256->512 56",(1,512,28,28),(512,256,1,1),2,(1,256,56,56)),
       ("ds 1x1s2 64->128 56 b8",(8,128,28,28),(128,64,1,1),2,(8,64,56,56))]
for name,dys,ws,s,xs in cases:
    dy=torch.randn(*dys).contiguous(memory_format=torch.channels_last); w=torch.randn(*ws)
    conv=convcore.Convolution(convcore.ConvDesc(padding=0,stride=s))
    r={}
    for algo in ("im2col_gemm","pointwise","implicit_gemm","auto"):
        try:
            conv.backward_data(dy,w,xs,algo=algo)
            r[algo]=best(lambda: conv.backward_data(dy,w,xs,algo=algo))
        except Exception as e: r[algo]="n/a"
    r["pt"]=best(lambda: torch.ops.aten.convolution_backward(dy, torch.empty(xs).contiguous(memory_format=torch.channels_last), w, None, [s,s],[0,0],[1,1],False,[0,0],1,[True,False,False])[0])
    print(name, r, flush=True)
