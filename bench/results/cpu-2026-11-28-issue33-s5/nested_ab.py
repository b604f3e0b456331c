import sys, time, torch, torch.nn.functional as F
import convcore.torch as ct
from convcore import _torch_nd as tn
L=[((1,64,16,56,56),(64,64,3,3,3)),((1,128,8,28,28),(128,128,3,3,3)),((1,256,4,14,14),(256,256,3,3,3)),((1,512,2,7,7),(512,512,3,3,3))]
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
torch.manual_seed(0)
with torch.inference_mode():
  for xs,ws in L:
    x=torch.randn(xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(ws)
    res={}
    for algo in ("winograd_4x4_3x3","winograd_2x2_3x3"):
        tn._weight_conv3d.cache_clear()
        conv=tn._weight_conv3d(w.data_ptr(),tuple(w.shape),(1,1,1),(1,1,1),(1,1,1),1)
        conv._nd.schedule="native"
        f=lambda: ct.conv3d(x,w,None,1,1,1,1,algo)
        y=f(); f()
        res[algo[9:12]]=round(min(once(f) for _ in range(5)),1)
    r=F.conv3d(x,w,None,1,1)
    res["err"]=f"{((y-r).norm()/r.norm()).item():.1e}"
    res["pt_cl"]=round(min(once(lambda: F.conv3d(x,w,None,1,1)) for _ in range(4)),1)
    print(sys.argv[1], xs[1:], res, flush=True)
