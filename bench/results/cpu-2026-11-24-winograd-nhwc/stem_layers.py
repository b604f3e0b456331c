import torch, convcore, time, statistics, os
torch.set_num_threads(int(os.environ.get("T","2")))
cases = [(3,224,64,7,2,3),(3,224,32,3,2,1),(3,224,64,3,1,1),(64,56,128,3,2,1),(128,28,256,3,2,1),(256,14,512,3,2,1)]
for (c,h,k,r,st,pad) in cases:
    x = torch.randn(1,c,h,h); xl = x.to(memory_format=torch.channels_last); wt = torch.randn(k,c,r,r)
    conv = convcore.Convolution(convcore.ConvDesc(padding=pad, stride=st))
    algos = ["implicit_gemm","im2win","im2col_gemm"]
    cands = {"torch_nchw": lambda: torch.nn.functional.conv2d(x, wt, padding=pad, stride=st),
             "torch_cl": lambda: torch.nn.functional.conv2d(xl, wt, padding=pad, stride=st)}
    for i,a in enumerate(algos):
        cands[a] = (lambda a=a, i=i: conv.forward(xl, wt, algo=a, filter_version=i+1))
    times = {kk: [] for kk in cands}
    with torch.no_grad():
        for f in cands.values(): f(); f()
        for _ in range(15):
            for kk,f in cands.items():
                t=time.perf_counter(); f(); times[kk].append(time.perf_counter()-t)
    P = (h + 2*pad - r)//st + 1
    fl = 2*c*k*r*r*P*P
    med = {kk: statistics.median(v)*1e3 for kk,v in times.items()}
    bt = min(med["torch_nchw"], med["torch_cl"])
    print(f"{c}->{k} {r}x{r}/{st}@{h}: " + "  ".join(f"{kk} {v:.3f} ({fl/v/1e6:.0f})" for kk,v in med.items()) + f" | implicit vs torch {bt/med['implicit_gemm']:.2f}x", flush=True)
