import torch, time, convcore, sys, statistics
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
for N,C,K,H,st in [(16,512,512,7,1),(16,256,512,14,2),(16,256,256,14,1),(16,128,128,28,1),(16,64,64,56,1)]:
    x=torch.randn(N,C,H,H).contiguous(memory_format=torch.channels_last); w=torch.randn(K,C,3,3).contiguous(memory_format=torch.channels_last)
    Ho=(H+2-3)//st+1
    dy=torch.randn(N,K,Ho,Ho).contiguous(memory_format=torch.channels_last)
    runs={}
    for algo in sys.argv[1].split(","):
        conv=convcore.Convolution(convcore.ConvDesc(padding=(1,1),stride=(st,st)))
        try: conv.backward_filter(x,dy,w.shape,algo=algo)
        except Exception as e: print(algo,e); continue
        runs[algo+"("+str(conv.last_algo)+")"]=lambda conv=conv,algo=algo: conv.backward_filter(x,dy,w.shape,algo=algo)
    runs["pt"]=lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[st,st],[1,1],[1,1],False,[0,0],1,[False,True,False])
    names=list(runs); T={n:[] for n in names}
    for r in range(6):
        order=names[r%len(names):]+names[:r%len(names)]
        for n in order:
            t=time.perf_counter(); runs[n](); T[n].append((time.perf_counter()-t)*1e3)
    print(N,C,K,H,st, "  ".join(f"{n} {min(T[n]):.2f}/{statistics.median(T[n]):.2f}" for n in names), flush=True)
