import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
L=[("l4 3x3x3",(1,512,2,7,7),(512,512,3,3,3),(1,1,1),(1,1,1)),
   ("l4.0.conv1 s2",(1,256,4,14,14),(512,256,3,3,3),(1,1,1),(2,2,2)),
   ("l1 3x3x3",(1,64,16,56,56),(64,64,3,3,3),(1,1,1),(1,1,1))]
def best(f,n=3):
    r=[]
    for _ in range(n):
        s=time.perf_counter(); f(); r.append((time.perf_counter()-s)*1e3)
    return round(min(r),2)
for name,xs,ws,p,s in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    y=F.conv3d(x,w,None,s,p); dy=torch.randn_like(y)
    for sch in ("native","taps","stacked","auto"):
      for algo in ("auto","im2col_gemm","implicit_gemm","winograd_3x3_2x2"):
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        try:
            conv.backward_filter(x,dy,tuple(w.shape),algo=algo)
            print(name, sch, algo, best(lambda: conv.backward_filter(x,dy,tuple(w.shape),algo=algo)), conv.last_algo, flush=True)
        except Exception as e: print(name, sch, algo, "x", str(e)[:90])
    print(name,"pt", best(lambda: torch.ops.aten.convolution_backward(dy,x,w,None,s,p,(1,1,1),False,(0,0,0),1,(False,True,False))))
