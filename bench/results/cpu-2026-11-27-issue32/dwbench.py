import sys, time, torch, convcore
torch.set_num_threads(2)
def tm(f, reps=5):
    f(); ts=[]
    for _ in range(reps):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
layers=[("res2 3x3",8,64,56,56,64,3,1,1),("res3 3x3",8,128,28,28,128,3,1,1),("res4 3x3",8,256,14,14,256,3,1,1),("res5 3x3",8,512,7,7,512,3,1,1),
        ("res3 s2 3x3",8,64,56,56,128,3,2,1),("stem 7x7",8,3,224,224,64,7,2,3),("mnv2 stem",8,3,224,224,32,3,2,1),("1x1 32->192@28",8,32,28,28,192,1,1,0)]
sel = sys.argv[1].split(',') if len(sys.argv)>1 else None
algos = sys.argv[2].split(',') if len(sys.argv)>2 else ["IM2COL_GEMM","IMPLICIT_GEMM"]
fmts = [torch.channels_last] if len(sys.argv)>3 and sys.argv[3]=='cl' else [torch.contiguous_format, torch.channels_last]
for name,n,c,h,w,k,r,s,p in layers:
    if sel and not any(name.startswith(x) for x in sel): continue
    conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s))
    for fmt in fmts:
        x=torch.randn(n,c,h,w).to(memory_format=fmt); wt=torch.randn(k,c,r,r)
        y=torch.nn.functional.conv2d(x,wt,stride=s,padding=p); dy=torch.randn_like(y)
        fl=2*n*k*c*r*r*y.shape[2]*y.shape[3]/1e9
        ref=torch.ops.aten.convolution_backward(dy,x,wt,None,[s,s],[p,p],[1,1],False,[0,0],1,[False,True,False])[1]
        res={"torch": tm(lambda: torch.ops.aten.convolution_backward(dy,x,wt,None,[s,s],[p,p],[1,1],False,[0,0],1,[False,True,False]))}
        for a in algos:
            aid = getattr(convcore.BwdFilterAlgo, a).value
            try:
                out = conv._backward_torch_cpu(2, x, dy, wt.shape, aid)
                err = float((out-ref).norm()/ref.norm())
                res[a] = tm(lambda: conv._backward_torch_cpu(2, x, dy, wt.shape, aid))
                if err > 1e-4: res[a+"_ERR"]=err
            except Exception as e:
                res[a] = str(e)[:40]
        print(f"{name:16s} {'cl' if fmt==torch.channels_last else 'nchw':4s} {fl:6.2f}GF " + " ".join(f"{k_}={v:.2f}" if isinstance(v,float) else f"{k_}={v}" for k_,v in res.items()), flush=True)
