import time, torch, convcore
import sys; torch.set_num_threads(int(sys.argv[1]))
td=torch.utils.dlpack.to_dlpack
def tm(f, reps=21):
    f(); ts=[]
    for _ in range(reps):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
cl=torch.channels_last
conv=convcore.Convolution(convcore.ConvDesc())
k,c,hw=192,32,28
dy=torch.randn(8,k,hw,hw).to(memory_format=cl); w=torch.randn(k,c,1,1); x=torch.randn(8,c,hw,hw).to(memory_format=cl)
out=torch.empty_like(x)
a=convcore.BwdDataAlgo.POINTWISE.value
print("torch_cpu path", tm(lambda: conv._backward_torch_cpu(1, dy, w, x.shape, a)))
print("capsules prealloc", tm(lambda: convcore._convcore.backward_capsules(1, td(dy), td(w), td(out), conv.desc._params, a, conv._plans(), None)))
print("capsules new out", tm(lambda: convcore._convcore.backward_capsules(1, td(dy), td(w), td(torch.empty_like(x)), conv.desc._params, a, conv._plans(), None)))
print("empty only", tm(lambda: torch.empty_like(x)))
print("w contiguous?", w.is_contiguous(), w.stride())
import os
print("threads in process", len(os.listdir("/proc/self/task")))
import subprocess
print(sorted(set(l.split()[-1] for l in open("/proc/self/maps") if "gomp" in l or "omp" in l.split()[-1])))
