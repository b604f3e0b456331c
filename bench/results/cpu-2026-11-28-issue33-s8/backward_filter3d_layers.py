# backward filter of 3-D layers: the native 3-D IM2COL_GEMM against the other schedules and PyTorch
import torch, time, convcore, sys
torch.manual_seed(0)
def best(f,n=3):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),1)
L=[("r3d layer1 3x3x3",(1,64,16,56,56),(64,64,3,3,3),(1,1,1),(1,1,1)),
   ("r3d l2.0 3x3x3 s2",(1,64,16,56,56),(128,64,3,3,3),(1,1,1),(2,2,2)),
   ("r3d l2 ds 1x1x1 s2",(1,64,16,56,56),(128,64,1,1,1),(0,0,0),(2,2,2)),
   ("r3d stem",(1,3,16,112,112),(64,3,3,7,7),(1,3,3),(1,2,2)),
   ("r3d layer3 3x3x3",(1,256,4,14,14),(256,256,3,3,3),(1,1,1),(1,1,1))]
for name,xs,ws,p,s in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    y=torch.nn.functional.conv3d(x,w,None,s,p); dy=torch.randn_like(y)
    r={}
    for sch in ("native","taps","stacked","merged"):
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        try:
            conv.backward_filter(x,dy,ws)
            r[sch]=best(lambda: conv.backward_filter(x,dy,ws))
        except Exception as e: pass
    r["pt"]=best(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, list(s), list(p), [1,1,1], False, [0,0,0], 1, [False,True,False])[1])
    print(name, r, flush=True)
