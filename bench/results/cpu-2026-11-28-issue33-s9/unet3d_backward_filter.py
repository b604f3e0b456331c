import torch, time, convcore, os, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
L=[("r3d l4",(1,512,2,7,7),(512,512,3,3,3)),("r3d l3",(1,256,4,14,14),(256,256,3,3,3)),("down.3.3",(1,256,8,8,8),(256,256,3,3,3)),("down.2.3",(1,128,16,16,16),(128,128,3,3,3)),
   ("merge.0.0",(1,256,16,16,16),(128,256,3,3,3)),
   ("down.1.3",(1,64,32,32,32),(64,64,3,3,3)),("r3d l2",(1,128,8,28,28),(128,128,3,3,3))]
for name,xs,ws in L:
    x=torch.randn(*xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(*ws)
    y=F.conv3d(x,w,None,1,1); dy=torch.randn_like(y)
    conv=convcore.Convolution(convcore.ConvDesc(padding=1,spatial_dims=3)); conv._nd.schedule="native"
    t={"chunks":[], "partials":[], "pt":[]}
    outs={}
    for r in range(6):
        for mode in (("chunks","partials") if r % 2 else ("partials","chunks")):
            if mode=="partials": os.environ["XX_PARTIALS"]="1"
            else: os.environ.pop("XX_PARTIALS",None)
            s=time.perf_counter(); outs[mode]=conv.backward_filter(x,dy,tuple(w.shape),algo="im2col_gemm"); t[mode].append((time.perf_counter()-s)*1e3)
        s=time.perf_counter(); torch.ops.aten.convolution_backward(dy,x,w,None,(1,1,1),(1,1,1),(1,1,1),False,(0,0,0),1,(False,True,False)); t["pt"].append((time.perf_counter()-s)*1e3)
    d=float((torch.as_tensor(outs["chunks"])-torch.as_tensor(outs["partials"])).norm()/torch.as_tensor(outs["partials"]).norm())
    print(name, {k:round(min(v[2:]),1) for k,v in t.items()}, f"{d:.1e}", flush=True)
