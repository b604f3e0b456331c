import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
def best(f,n=5):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),2)
x=torch.randn(1,1,64,64,64).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(32,1,3,3,3)
for r in range(2):
  for algo in ("auto","im2win","implicit_gemm","cyclic_minimal","im2col_gemm"):
    conv=convcore.Convolution(convcore.ConvDesc(padding=1,spatial_dims=3)); conv._nd.schedule="stacked"
    conv.forward(x,w,algo=algo,filter_version=1)
    print(algo, best(lambda: conv.forward(x,w,algo=algo,filter_version=1)), conv.last_algo if hasattr(conv,'last_algo') else '', flush=True)
  print("pt", best(lambda: F.conv3d(x,w,None,1,1)))
