import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
def best(f,n=7):
    r=[]
    for _ in range(n):
        s=time.perf_counter(); f(); r.append((time.perf_counter()-s)*1e3)
    return round(min(r),2)
for (c,l,k,s) in [(1,16000,10,5)]:
  for cl in (True,False):
    x=torch.randn(1,c,l); w=torch.randn(512,c,k)
    if cl: x=x.transpose(1,2).contiguous().transpose(1,2)
    for algo in ("auto","im2col_gemm","implicit_gemm","depthwise","im2win","direct"):
      cv=convcore.Convolution(convcore.ConvDesc(stride=s,spatial_dims=1))
      try:
        cv.forward(x,w,algo=algo,filter_version=1)
        print(c,l,k,s,cl, algo, best(lambda: cv.forward(x,w,algo=algo,filter_version=1)), cv.last_algo)
      except Exception as e: pass
    print(c,l,k,s,cl, "pt", best(lambda: F.conv1d(x,w,None,s)))
