# Backward data of 3x3x3 stride-1 layers (r3d_18 layer4/layer3, unet3d down.3), NDHWC, batch 1:
# the "native" schedule with the Winograd (algo auto) and with IM2COL_GEMM (dy's im2col by w
# transposed), the per-tap decomposition, auto's pick, and PyTorch; min/median of 6 interleaved
# rounds. Run: .venv/bin/python backward_data_3x3x3.py l4,l3,u3
import torch, time, convcore, sys, statistics
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
S={"l4":((1,512,2,7,7),512),"l3":((1,256,4,14,14),256),"l2":((1,128,8,28,28),128),"l1":((1,64,16,56,56),64),
   "u3":((1,256,8,8,8),256),"u2":((1,128,16,16,16),128)}
for name in sys.argv[1].split(","):
    xs,k=S[name]
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(k,xs[1],3,3,3).contiguous(memory_format=torch.channels_last_3d)
    dy=torch.randn(1,k,*xs[2:]).contiguous(memory_format=torch.channels_last_3d)
    ref=torch.ops.aten.convolution_backward(dy,x,w,None,[1,1,1],[1,1,1],[1,1,1],False,[0,0,0],1,[True,False,False])[0]
    runs={}
    for sch,algo in [("native","auto"),("native","im2col_gemm"),("taps","auto"),("auto","auto")]:
        conv=convcore.Convolution(convcore.ConvDesc(padding=(1,1,1),spatial_dims=3)); conv._nd.schedule=sch
        f=lambda conv=conv,algo=algo: conv.backward_data(dy,w,x.shape,algo=algo)
        r=f(); runs[f"{sch}:{algo}"]=f
        assert float((r-ref).norm()/ref.norm())<1e-5
    runs["pt"]=lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[1,1,1],[1,1,1],[1,1,1],False,[0,0,0],1,[True,False,False])
    names=list(runs); T={n:[] for n in names}
    for r in range(6):
        order=names[r%len(names):]+names[:r%len(names)]
        for n in order:
            t=time.perf_counter(); runs[n](); T[n].append((time.perf_counter()-t)*1e3)
    print(name, "  ".join(f"{n} {min(T[n]):.2f}/{statistics.median(T[n]):.2f}" for n in names), flush=True)
