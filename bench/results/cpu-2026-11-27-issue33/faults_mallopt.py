# faults.py of cpu-2026-11-27-issue32 with MALLOPT=1: glibc told to keep freed memory (M_MMAP_THRESHOLD and
# M_TRIM_THRESHOLD 1 GiB), which removes the page faults of fresh activations: python faults_mallopt.py pt|cc mobilenet_v2
# Page faults per training step: one model per process (argv[1] = pt | cc), resnet50, batch 8,
# channels_last input; 2 warm-up steps, then 4 timed steps with the process's minor faults
# read from getrusage around them.
import copy, resource, sys, time, torch, ctypes, os
if os.environ.get("MALLOPT"):
    libc = ctypes.CDLL("libc.so.6"); print("mallopt", libc.mallopt(-3, 1 << 30), libc.mallopt(-1, 1 << 30))
import torch.nn.functional as F
import convcore.torch as ct
from convcore import model_bench as mb
models = mb.import_torchvision()
torch.manual_seed(0)
which, name = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "resnet50")
m = getattr(models, name)()
model = (copy.deepcopy(m).to(memory_format=torch.channels_last) if which == "pt" else ct.convert(copy.deepcopy(m))).train()
x = torch.randn(8, 3, 224, 224).to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (8,))
def step():
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), labels).backward()
for _ in range(2):
    step()
r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
times = []
for _ in range(4):
    s = time.perf_counter(); step(); times.append((time.perf_counter() - s) * 1e3)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(which, name, "step ms", [round(t) for t in times], "minor faults/step", (r1.ru_minflt - r0.ru_minflt) / 4,
      "major", (r1.ru_majflt - r0.ru_majflt) / 4, "sys s/step", round((r1.ru_stime - r0.ru_stime) / 4, 3),
      "user s/step", round((r1.ru_utime - r0.ru_utime) / 4, 3))
