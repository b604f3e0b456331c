# wav2vec2_fe's Conv1d layers one by one, inference: convcore.torch.conv1d (auto, and each algorithm) vs F.conv1d
import time, torch, torch.nn.functional as F, convcore.torch as ct, convcore
L=[(1,16000,512,10,5),(512,3199,512,3,2),(512,1599,512,3,2),(512,799,512,3,2),(512,399,512,3,2),(512,199,512,2,2),(512,99,512,2,2)]
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
torch.manual_seed(0)
with torch.inference_mode():
  tot=[0,0]
  for c,l,k,r,s in L:
    x=torch.randn(1,c,l); w=torch.randn(k,c,r)
    xl=x.transpose(1,2).contiguous().transpose(1,2)
    res={}
    for name,xx in (("ncl",x),("nlc",xl)):
      for algo in ["auto","implicit_gemm","im2col_gemm","direct","fft","poly_hankel"]:
        f=lambda: ct.conv1d(xx,w,None,s,0,1,1,algo)
        try: f(); f()
        except Exception as e: continue
        res[f"{name}/{algo}"]=round(min(once(f) for _ in range(5)),2)
    pt=min(min(once(lambda: F.conv1d(x,w,None,s)) for _ in range(5)), min(once(lambda: F.conv1d(xl,w,None,s)) for _ in range(5)))
    best=min(res.values()); tot[0]+=pt; tot[1]+=res["ncl/auto"]
    print((c,l,k,r,s), f"pt {pt:.2f} best {best:.2f} ({min(res,key=res.get)}) ratio {pt/best:.2f}", res, flush=True)
  print("sum pt", round(tot[0],1), "sum convcore ncl/auto", round(tot[1],1))
