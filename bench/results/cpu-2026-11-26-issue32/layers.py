import time, torch, convcore, itertools
torch.set_num_threads(2)
def tm(f, reps=5):
    f(); ts=[]
    for _ in range(reps):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
layers=[("res2 3x3",8,64,56,56,64,3,1,1),("res3 3x3",8,128,28,28,128,3,1,1),("res4 3x3",8,256,14,14,256,3,1,1),
        ("res3 s2 3x3",8,64,56,56,128,3,2,1),("1x1 256->64",8,256,56,56,64,1,1,0),("1x1 s2 256->512",8,256,56,56,512,1,2,0),("stem 7x7",8,3,224,224,64,7,2,3),("mnv2 stem",8,3,224,224,32,3,2,1),("dw 144@56",8,144,56,56,144,3,1,1),("dw 96 s2",8,96,112,112,96,3,2,1)]
a=torch.randn(4096,4096); b=torch.randn(4096,4096)
print("sgemm GF/s", 2*4096**3/tm(lambda: a@b, 3)/1e6)
for name,n,c,h,w,k,r,s,p in layers:
    conv=convcore.Convolution(convcore.ConvDesc(padding=p,stride=s,groups=c if name.startswith('dw') else 1))
    for fmt in (torch.contiguous_format, torch.channels_last):
        x=torch.randn(n,c,h,w).to(memory_format=fmt); g=c if name.startswith('dw') else 1; wt=torch.randn(k,c//g,r,r)
        g=c if name.startswith('dw') else 1; y=torch.nn.functional.conv2d(x,wt,stride=s,padding=p,groups=g); dy=torch.randn_like(y)
        tdx=tm(lambda: torch.ops.aten.convolution_backward(dy,x,wt,None,[s,s],[p,p],[1,1],False,[0,0],g,[True,False,False]))
        tdw=tm(lambda: torch.ops.aten.convolution_backward(dy,x,wt,None,[s,s],[p,p],[1,1],False,[0,0],g,[False,True,False]))
        cdx=tm(lambda: conv._backward_torch_cpu(1, dy, wt, x.shape, -1))
        cdw=tm(lambda: conv._backward_torch_cpu(2, x, dy, wt.shape, -1))
        td=torch.utils.dlpack.to_dlpack
        a1=convcore._convcore.backward_capsules(1, td(dy), td(wt), td(torch.empty_like(x)), conv.desc._params, -1, conv._plans(), None)
        a2=convcore._convcore.backward_capsules(2, td(x), td(dy), td(torch.empty_like(wt)), conv.desc._params, -1, conv._plans(), None)
        names=(convcore.BwdDataAlgo(a1).name, convcore.BwdFilterAlgo(a2).name)
        fl=2*n*k*(c//g)*r*r*y.shape[2]*y.shape[3]/1e9
        print(f"{name:16s} {'cl' if fmt==torch.channels_last else 'nchw':4s} dx torch {tdx:7.2f} cc {cdx:7.2f} ({fl/cdx*1e3:5.0f} GF/s) | dw torch {tdw:7.2f} cc {cdw:7.2f} ({fl/cdw*1e3:5.0f} GF/s) {names}", flush=True)
