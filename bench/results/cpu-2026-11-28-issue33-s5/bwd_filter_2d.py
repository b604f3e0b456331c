import time, torch, convcore
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
def best(f):
    f(); f(); return min(once(f) for _ in range(3))
torch.manual_seed(0)
for n,c,h,k in ((16,64,56,64),(8,128,28,128),(4,256,14,256),(2,512,7,512)):
    x=torch.randn(n,c,h,h).contiguous(memory_format=torch.channels_last); w=torch.randn(k,c,3,3)
    dy=torch.randn(n,k,h,h).contiguous(memory_format=torch.channels_last)
    conv=convcore.Convolution(padding=1)
    res={}
    for algo in ("auto","implicit_gemm","im2col_gemm","winograd_3x3_2x2","fft_tiling"):
        try: res[algo]=round(best(lambda: conv.backward_filter(x,dy,w.shape,algo=algo)),1)
        except Exception as e: res[algo]=str(e)[:30]
    pt=best(lambda: torch.ops.aten.convolution_backward(dy,x,w.contiguous(memory_format=torch.channels_last),None,(1,1),(1,1),(1,1),False,(0,0),1,(False,True,False)))
    ptn=best(lambda: torch.ops.aten.convolution_backward(dy.contiguous(),x.contiguous(),w,None,(1,1),(1,1),(1,1),False,(0,0),1,(False,True,False)))
    print((n,c,h,k),"pt cl %.1f nchw %.1f"%(pt,ptn),res,flush=True)
