import torch, time, convcore, torch.nn.functional as F, sys
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
L=[("stem",(1,3,16,112,112),(64,3,3,7,7),(1,3,3),(1,2,2)),
   ("l1 3x3x3",(1,64,16,56,56),(64,64,3,3,3),(1,1,1),(1,1,1)),
   ("l2.0.conv1 s2",(1,64,16,56,56),(128,64,3,3,3),(1,1,1),(2,2,2)),
   ("l2 3x3x3",(1,128,8,28,28),(128,128,3,3,3),(1,1,1),(1,1,1)),
   ("l2 ds",(1,64,16,56,56),(128,64,1,1,1),(0,0,0),(2,2,2)),
   ("l3.0.conv1 s2",(1,128,8,28,28),(256,128,3,3,3),(1,1,1),(2,2,2)),
   ("l3 3x3x3",(1,256,4,14,14),(256,256,3,3,3),(1,1,1),(1,1,1)),
   ("l3 ds",(1,128,8,28,28),(256,128,1,1,1),(0,0,0),(2,2,2)),
   ("l4.0.conv1 s2",(1,256,4,14,14),(512,256,3,3,3),(1,1,1),(2,2,2)),
   ("l4 3x3x3",(1,512,2,7,7),(512,512,3,3,3),(1,1,1),(1,1,1)),
   ("l4 ds",(1,256,4,14,14),(512,256,1,1,1),(0,0,0),(2,2,2))]
cl = sys.argv[1] == "cl" if len(sys.argv) > 1 else True
def t(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
tot={}
for name,xs,ws,p,s in L:
    x=torch.randn(*xs); w=torch.randn(*ws)
    if cl: x=x.contiguous(memory_format=torch.channels_last_3d)
    y=F.conv3d(x,w,None,s,p); dy=torch.randn_like(y)
    conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3))
    fns={
     "cc fwd": lambda: conv.forward(x,w,filter_version=1),
     "cc bwd data": lambda: conv.backward_data(dy,w,tuple(x.shape)),
     "cc bwd filter": lambda: conv.backward_filter(x,dy,tuple(w.shape)),
     "pt fwd": lambda: F.conv3d(x,w,None,s,p),
     "pt bwd data": lambda: torch.ops.aten.convolution_backward(dy,x,w,None,s,p,(1,1,1),False,(0,0,0),1,(True,False,False)),
     "pt bwd filter": lambda: torch.ops.aten.convolution_backward(dy,x,w,None,s,p,(1,1,1),False,(0,0,0),1,(False,True,False)),
    }
    for f in fns.values(): f()
    r={k:[] for k in fns}
    for _ in range(3):
        for k,f in fns.items(): r[k].append(t(f))
    m={k:min(v) for k,v in r.items()}
    row=[]
    for ps in ("fwd","bwd data","bwd filter"):
        a,b=m["cc "+ps],m["pt "+ps]; row.append(f"{ps} {a:7.2f}/{b:7.2f} {b/a:4.2f}x")
        tot.setdefault(ps,[0,0]); tot[ps][0]+=a; tot[ps][1]+=b
    algos=(conv.last_algo,)
    print(f"{name:14s}", " | ".join(row), flush=True)
print("totals", {k:(round(a,1),round(b,1),round(b/a,2)) for k,(a,b) in tot.items()})
