import time, torch, convcore, sys
c,k,d = [int(v) for v in sys.argv[1].split(",")]
x3 = torch.randn(1, c, d, d, d).contiguous(memory_format=torch.channels_last_3d)
w3 = (torch.randn(k, c, 3, 3, 3)*0.05)
y = torch.empty(1, k, d, d, d).contiguous(memory_format=torch.channels_last_3d)
conv3 = convcore.Convolution(convcore.ConvDesc(padding=(1,1,1), spatial_dims=3))
algo = sys.argv[2] if len(sys.argv) > 2 else "winograd_4x4_3x3"
conv3.forward(x3, w3, algo=algo, filter_version=1, out=y)
ts=[]; tn=[]
for i in range(7):
    t=time.perf_counter(); conv3.forward(x3, w3, algo=algo, filter_version=1, out=y); ts.append((time.perf_counter()-t)*1e3)
    t=time.perf_counter(); conv3.forward(x3, w3, algo=algo, filter_version=1); tn.append((time.perf_counter()-t)*1e3)
print(sys.argv[1], algo, "out= %.2f ms, new y %.2f ms" % (min(ts), min(tn)))
