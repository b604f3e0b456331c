import torch, time, convcore, sys, torch.nn.functional as F
torch.manual_seed(0)
x=torch.randn(1,64,16,56,56).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(128,64,1,1,1)
sch=sys.argv[1]
conv=convcore.Convolution(convcore.ConvDesc(padding=0,stride=2,spatial_dims=3)); conv._nd.schedule=sch
y=conv.forward(x,w,filter_version=1)
def t(f,n=200):
    s=time.perf_counter()
    for _ in range(n*5): f()
    return round((time.perf_counter()-s)/(5*n)*1e3,3)
print(sch, "out=", t(lambda: conv.forward(x,w,filter_version=1,out=y)), "new", t(lambda: conv.forward(x,w,filter_version=1)), "pt", t(lambda: F.conv3d(x,w,None,2)))
