# 2-D 1x1 stride-2 on a view of every second plane of an NDHWC volume, against its packed copy
import torch, time, convcore
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
x5=torch.randn(1,64,16,56,56).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(128,64,1,1)
xv=x5[0].permute(1,0,2,3)[::2]
xp=xv.contiguous(memory_format=torch.channels_last)
y=torch.empty(8,128,28,28).contiguous(memory_format=torch.channels_last)
conv=convcore.Convolution(convcore.ConvDesc(stride=2))
for name,x in (("view",xv),("packed",xp)):
  for a in ("pointwise","implicit_gemm"):
    conv.forward(x,w,algo=a,filter_version=1,out=y)
    print(name,a,round(min(once(lambda: conv.forward(x,w,algo=a,filter_version=1,out=y)) for _ in range(9)),3))
