# A video network's training step (convcore, converted with fuse=True, channels_last_3d), for perf.
import sys, time, torch, torch.nn.functional as F
from convcore.model_bench import import_torchvision
import convcore.torch as ct
torch.manual_seed(0)
name, mode, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = getattr(import_torchvision().video, name)(weights=None)
if mode == "convcore":
    model = ct.convert(model, fuse=True)
model = model.to(memory_format=torch.channels_last_3d)
x = torch.randn(1, 3, 16, 112, 112).contiguous(memory_format=torch.channels_last_3d)
target = torch.randint(0, 400, (1,))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
def step():
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), target).backward()
    opt.step()
for _ in range(2): step()
ts = []
for _ in range(reps):
    t = time.perf_counter(); step(); ts.append((time.perf_counter() - t) * 1e3)
print(name, mode, "step ms", [round(t) for t in ts])
