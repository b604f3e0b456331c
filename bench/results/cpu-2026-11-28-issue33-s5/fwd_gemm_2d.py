import time, torch, convcore, torch.nn.functional as F
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
def best(f):
    f(); f(); return min(once(f) for _ in range(4))
torch.manual_seed(0)
for n,c,h,k,st in ((8,192,56,128,2),(16,64,56,64,1),(4,768,14,512,2),(2,1536,7,512,1)):
    x=torch.randn(n,c,h,h).contiguous(memory_format=torch.channels_last); w=torch.randn(k,c,3,3)
    conv=convcore.Convolution(padding=1,stride=st)
    res={}
    for algo in ("auto","implicit_gemm","im2col_gemm","winograd_4x4_3x3"):
        try: res[algo]=round(best(lambda: conv.forward(x,w,algo=algo)),1)
        except Exception as e: res[algo]="n/a"
    wl=w.contiguous(memory_format=torch.channels_last)
    pt=best(lambda: F.conv2d(x,wl,None,st,1)); ptn=best(lambda: F.conv2d(x.contiguous(),w,None,st,1))
    fl=2*n*k*c*9*(h//st)**2/1e9
    print((n,c,h,k,st),"GFLOP %.2f pt cl %.1f nchw %.1f"%(fl,pt,ptn),res,"conv GF/s %.0f pt GF/s %.0f"%(fl/min(v for v in res.values() if isinstance(v,float))*1e3, fl/min(pt,ptn)*1e3),flush=True)
