import torch, time, convcore, torch.nn.functional as F, sys, statistics
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
torch.manual_seed(0)
exec(open('/work/main/bench/results/cpu-2026-11-28-issue33-s10/shapes.py').read())
for name in sys.argv[1].split(","):
    xs,ws,p,s=L[name]
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws).contiguous(memory_format=torch.channels_last_3d)
    runs={}
    for spec in sys.argv[2].split(","):
        sch,algo=spec.split(":")
        conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,spatial_dims=3)); conv._nd.schedule=sch
        try: conv.forward(x,w,algo=algo,filter_version=1)
        except Exception as e: continue
        runs[spec+"("+conv.last_algo+")"]=(lambda conv=conv,algo=algo: conv.forward(x,w,algo=algo,filter_version=1))
    runs["pt"]=lambda: F.conv3d(x,w,None,s,p)
    names=list(runs); T={n:[] for n in names}
    for r in range(8):
        order=names[r%len(names):]+names[:r%len(names)]
        for n in order:
            t=time.perf_counter(); runs[n](); T[n].append((time.perf_counter()-t)*1e3)
    print(name, "  ".join(f"{n} {min(T[n]):.2f}/{statistics.median(T[n]):.2f}" for n in names), flush=True)
