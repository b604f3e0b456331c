import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
def best(f,n=7):
    r=[]
    for _ in range(n):
        s=time.perf_counter(); f(); r.append((time.perf_counter()-s)*1e3)
    return round(min(r),2)
for cl in (True,False):
  x=torch.randn(1,32,64,64,64); w=torch.randn(2,32,1,1,1)
  if cl: x=x.contiguous(memory_format=torch.channels_last_3d)
  for algo in ("auto","pointwise","implicit_gemm","im2col_gemm","direct"):
    c=convcore.Convolution(convcore.ConvDesc(spatial_dims=3))
    try:
        c.forward(x,w,algo=algo,filter_version=1)
        print(cl, algo, best(lambda: c.forward(x,w,algo=algo,filter_version=1)), c.last_algo)
    except Exception as e: print(cl, algo, "x", str(e)[:100])
  print(cl, "pt", best(lambda: F.conv3d(x,w)))
