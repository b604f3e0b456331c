# CYCLIC_MINIMAL 3-D: the taps schedule against the native (nested) form, auto and PyTorch
import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
for (C,D,H) in [(64,16,56),(128,8,28),(16,48,48)]:
    x=torch.randn(1,C,D,H,H).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(C,C,3,3,3)
    res={}
    for sch,algo in (("taps","cyclic_minimal"),("native","cyclic_minimal"),("auto","auto")):
        conv=convcore.Convolution(convcore.ConvDesc(padding=1,spatial_dims=3)); conv._nd.schedule=sch
        conv.forward(x,w,algo=algo,filter_version=1)
        res[sch+"/"+algo]=round(min(once(lambda: conv.forward(x,w,algo=algo,filter_version=1)) for _ in range(3)),1)
    res["pt"]=round(min(once(lambda: F.conv3d(x,w,None,1,1)) for _ in range(3)),1)
    print((C,D,H), res, flush=True)
