import torch, time, torch.nn.functional as F, statistics
exec(open('/work/main/bench/results/cpu-2026-11-28-issue33-s10/shapes.py').read())
for name in ["l2c1_00","stem3","l2c1_03"]:
    xs,ws,p,s=L[name]
    xc=torch.randn(*xs); xl=xc.contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    wl=w.contiguous(memory_format=torch.channels_last_3d)
    R={"ncdhw":lambda: F.conv3d(xc,w,None,s,p),"cl":lambda: F.conv3d(xl,w,None,s,p),"clw":lambda: F.conv3d(xl,wl,None,s,p)}
    T={k:[] for k in R}
    for r in range(6):
        for k in R:
            t=time.perf_counter(); R[k](); T[k].append((time.perf_counter()-t)*1e3)
    print(name, {k:(round(min(v),2),round(statistics.median(v),2)) for k,v in T.items()})
