# SGEMM rates on this machine: wav2vec2_fe layer 2 GEMM and 2048^3
import numpy as np, time, torch
a=np.random.rand(512,1536).astype(np.float32); b=np.random.rand(1536,1599).astype(np.float32)
ta=torch.from_numpy(a); tb=torch.from_numpy(b)
big=np.random.rand(2048,2048).astype(np.float32)
for name,f,fl in (("np 512x1536x1599",lambda: a@b, 2*512*1536*1599),("torch mm",lambda: ta@tb,2*512*1536*1599),("np 2048^3",lambda: big@big,2*2048**3)):
    f()
    r=[]
    for _ in range(10):
        s=time.perf_counter(); f(); r.append(time.perf_counter()-s)
    print(name, round(min(r)*1e3,2),"ms", round(fl/min(r)/1e9),"GFLOP/s")
