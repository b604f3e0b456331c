import time, torch, convcore
torch.set_num_threads(2)
def tm(f, reps=7):
    f(); ts=[]
    for _ in range(reps):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
P=convcore.BwdDataAlgo.POINTWISE.value
shapes=[(32,16,112),(16,96,112),(96,24,56),(24,144,56),(144,24,56),(144,32,28),(192,32,28),(32,192,28),(192,64,14),(384,64,14),(64,384,14),(576,96,14),(96,576,14),(960,160,7),(160,960,7),(256,64,56),(64,256,56),(512,128,28),(1024,256,14),(2048,512,7)]
tot=[0,0,0]
for c,k,h in shapes:
    n=8
    x=torch.randn(n,c,h,h).to(memory_format=torch.channels_last); w=torch.randn(k,c,1,1)
    dy=torch.randn(n,k,h,h).to(memory_format=torch.channels_last)
    conv=convcore.Convolution(convcore.ConvDesc()); conv2=convcore.Convolution(convcore.ConvDesc())
    wT=w.permute(1,0,2,3).contiguous()
    a=conv._backward_torch_cpu(1, dy, w, x.shape, P); b=conv2.forward(dy, wT, algo="pointwise")
    err=float((a-b).norm()/a.norm())
    t1=tm(lambda: conv._backward_torch_cpu(1, dy, w, x.shape, P))
    t2=tm(lambda: conv2.forward(dy, wT, algo="pointwise"))
    t3=tm(lambda: torch.ops.aten.convolution_backward(dy,x,w,None,[1,1],[0,0],[1,1],False,[0,0],1,[True,False,False]))
    tot[0]+=t1; tot[1]+=t2; tot[2]+=t3
    print(f"C{c:4d} K{k:4d} @{h:3d}  blas {t1:7.3f}  fwdkernel {t2:7.3f}  torch {t3:7.3f}  err {err:.1e}", flush=True)
print("total", tot)
