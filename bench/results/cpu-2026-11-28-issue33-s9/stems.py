import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
def best(f,n=5):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),2)
L=[("r3d stem",(1,3,16,112,112),(64,3,3,7,7),(1,3,3),(1,2,2)),
   ("r2+1 stem.0",(1,3,16,112,112),(45,3,1,7,7),(0,3,3),(1,2,2))]
for name,xs,ws,p,s in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    for sch in ("native","taps","stacked","merged","auto"):
      for algo in ("auto","implicit_gemm","im2win","im2col_gemm"):
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        try:
            conv.forward(x,w,algo=algo,filter_version=1)
            print(name, sch, algo, best(lambda: conv.forward(x,w,algo=algo,filter_version=1)), conv.last_algo, flush=True)
        except Exception as e: pass
    print(name,"pt", best(lambda: F.conv3d(x,w,None,s,p)), flush=True)
