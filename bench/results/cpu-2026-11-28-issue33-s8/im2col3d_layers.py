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
   ("r2+1 stem.0",(1,3,16,112,112),(45,3,1,7,7),(0,3,3),(1,2,2)),
   ("r2+1 stem.3",(1,45,16,56,56),(64,45,3,1,1),(1,0,0),(1,1,1)),
   ("r3d l2 ds",(1,64,16,56,56),(128,64,1,1,1),(0,0,0),(2,2,2)),
   ("r3d l2.0.conv1 s2",(1,64,16,56,56),(128,64,3,3,3),(1,1,1),(2,2,2)),
   ("r2+1 l2.0 3x1x1 s2",(1,230,16,28,28),(128,230,3,1,1),(1,0,0),(2,1,1)),
   ("unet head",(1,32,64,64,64),(2,32,1,1,1),(0,0,0),(1,1,1)),
   ("unet down0",(1,1,64,64,64),(32,1,3,3,3),(1,1,1),(1,1,1))]
for name,xs,ws,p,s in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    r={}
    for sch in ("native","taps","stacked","merged","auto"):
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        try:
            conv.forward(x,w,filter_version=1)
            r[sch]=best(lambda: conv.forward(x,w,filter_version=1))
        except Exception as e: pass
    r["pt"]=best(lambda: F.conv3d(x,w,None,s,p))
    print(name, r, flush=True)
