import torch, time, convcore, os, torch.nn.functional as F
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
for (c,k,d) in [(32,32,64),(64,32,64),(32,64,32),(64,64,32)]:
    x=torch.randn(1,c,d,d,d).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(k,c,3,3,3)
    convs={}
    for mode in ("nest","tap"):
        if mode=="tap": os.environ["XX_NO_NEST"]="1"
        else: os.environ.pop("XX_NO_NEST",None)
        cv=convcore.Convolution(convcore.ConvDesc(padding=1,spatial_dims=3)); cv._nd.schedule="native"
        out=cv.forward(x,w,algo="winograd_4x4_3x3",filter_version=1); convs[mode]=(cv,out)
    t={"nest":[], "tap":[], "pt":[]}
    for r in range(5):
        for mode in ("nest","tap"):
            if mode=="tap": os.environ["XX_NO_NEST"]="1"
            else: os.environ.pop("XX_NO_NEST",None)
            cv,out=convs[mode]
            s=time.perf_counter(); cv.forward(x,w,algo="winograd_4x4_3x3",filter_version=1,out=out); t[mode].append((time.perf_counter()-s)*1e3)
        s=time.perf_counter(); F.conv3d(x,w,None,1,1); t["pt"].append((time.perf_counter()-s)*1e3)
    ref=F.conv3d(x,w,None,1,1)
    print(c,k,d, {m:round(min(v),1) for m,v in t.items()}, float((convs["tap"][1]-ref).norm()/ref.norm()), float((convs["nest"][1]-ref).norm()/ref.norm()), flush=True)
