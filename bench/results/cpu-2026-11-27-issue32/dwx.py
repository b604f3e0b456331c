import time, torch, convcore
torch.set_num_threads(2)
def tm(f, reps=7):
    f(); ts=[]
    for _ in range(reps):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
D=convcore.BwdDataAlgo.DEPTHWISE.value
for c,h,r,s in [(32,112,3,1),(144,56,3,1),(192,28,3,1),(384,14,3,1),(576,14,3,1),(960,7,3,1),(672,14,5,1),(240,28,5,1),(96,112,3,2),(144,56,3,2)]:
  for fmt in (torch.channels_last, torch.contiguous_format):
    n=8; p=r//2
    x=torch.randn(n,c,h,h).to(memory_format=fmt); w=torch.randn(c,1,r,r)
    y=torch.nn.functional.conv2d(x,w,stride=s,padding=p,groups=c); dy=torch.randn_like(y)
    conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,groups=c)); conv2=convcore.Convolution(convcore.ConvDesc(padding=r-1-p,groups=c))
    wf=w.flip(2,3).contiguous()
    t1=tm(lambda: conv._backward_torch_cpu(1, dy, w, x.shape, D))
    t3=tm(lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[s,s],[p,p],[1,1],False,[0,0],c,[True,False,False]))
    if s==1:
        a=conv._backward_torch_cpu(1, dy, w, x.shape, D); b=conv2.forward(dy, wf, algo="depthwise")
        err=float((a-b).norm()/a.norm())
        t2=tm(lambda: conv2.forward(dy, wf, algo="depthwise"))
    else: t2=err=float('nan')
    print(f"C{c:4d} @{h:3d} {r}x{r}/{s} {'cl  ' if fmt==torch.channels_last else 'nchw'} bwd {t1:7.3f} fwdkernel {t2:7.3f} torch {t3:7.3f} err {err:.1e}", flush=True)
