# IM2COL_GEMM on 3-D layers: the native form against the per-tap decomposition of the same algorithm
import torch, time, convcore
torch.manual_seed(0)
def best(f,n=5):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),2)
L=[("r3d stem",(1,3,16,112,112),(64,3,3,7,7),(1,3,3),(1,2,2)),
   ("r3d l2.0.conv1 s2",(1,64,16,56,56),(128,64,3,3,3),(1,1,1),(2,2,2)),
   ("r3d layer1 3x3x3",(1,64,16,56,56),(64,64,3,3,3),(1,1,1),(1,1,1)),
   ("r3d l2 ds",(1,64,16,56,56),(128,64,1,1,1),(0,0,0),(2,2,2)),
   ("r2+1 stem.3",(1,45,16,56,56),(64,45,3,1,1),(1,0,0),(1,1,1))]
for name,xs,ws,p,s in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    r={}
    for sch in ("native","taps"):
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        conv.forward(x,w,algo="im2col_gemm",filter_version=1)
        r[sch]=best(lambda: conv.forward(x,w,algo="im2col_gemm",filter_version=1))
    print(name, "IM2COL_GEMM", r, flush=True)
