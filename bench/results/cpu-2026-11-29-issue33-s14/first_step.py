# The first training steps of a converted video network: what the per-layer schedule timing costs.
import sys, time, torch, torch.nn.functional as F
from convcore.model_bench import import_torchvision
import convcore.torch as ct
torch.manual_seed(0)
name = sys.argv[1]
model = ct.convert(getattr(import_torchvision().video, name)(weights=None), fuse=True).to(memory_format=torch.channels_last_3d)
x = torch.randn(1, 3, 16, 112, 112).contiguous(memory_format=torch.channels_last_3d)
target = torch.randint(0, 400, (1,))
for i in range(4):
    t = time.perf_counter()
    F.cross_entropy(model(x), target).backward()
    print(name, "step", i, round((time.perf_counter() - t) * 1e3), "ms", flush=True)
with torch.no_grad():
    for i in range(2):
        t = time.perf_counter(); model(x); print(name, "inference", i, round((time.perf_counter() - t) * 1e3), "ms", flush=True)
