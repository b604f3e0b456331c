import torch, time, convcore, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
def best(f,n=5):
    t=[]
    for _ in range(n):
        s=time.perf_counter(); f(); t.append((time.perf_counter()-s)*1e3)
    return round(min(t),2)
for (C,K,D) in [(64,32,32),(128,64,16),(256,128,8)]:
    dy=torch.randn(1,C,D,D,D).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(C,K,2,2,2)
    xs=(1,K,2*D,2*D,2*D)
    conv=convcore.Convolution(convcore.ConvDesc(padding=0,stride=2,spatial_dims=3)); conv._nd.schedule="native"
    out=conv.backward_data(dy,w,xs,algo="im2col_gemm")
    ptout=F.conv_transpose3d(dy,w,None,2)
    r={"native_new":best(lambda: conv.backward_data(dy,w,xs,algo="im2col_gemm")),
       "native_out":best(lambda: conv.backward_data(dy,w,xs,algo="im2col_gemm",out=out)),
       "pt":best(lambda: F.conv_transpose3d(dy,w,None,2)),
       "pt_out_copy":best(lambda: ptout.copy_(dy.new_zeros(1).expand_as(ptout))),
       "mm": best(lambda: torch.mm(dy.permute(0,2,3,4,1).reshape(-1,C), w.reshape(C,-1)))}
    gf=2*D**3*C*K*8/1e9
    print((C,K,D), r, "GEMM GFLOP", round(gf,3), "rate@native_out", round(gf/r["native_out"]*1e3,1), flush=True)
