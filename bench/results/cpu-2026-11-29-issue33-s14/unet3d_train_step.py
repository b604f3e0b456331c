# A unet3d training step (convcore, converted with fuse=True, NCDHW), repeated for perf.
import sys, time, torch, torch.nn.functional as F
import convcore.torch as ct
from convcore.bench_networks import UNet3d
torch.manual_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "convcore"
model = UNet3d()
if mode == "convcore":
    model = ct.convert(model, fuse=True)
x = torch.randn(1, 1, 64, 64, 64)
if mode == "pytorch_cl":
    model = model.to(memory_format=torch.channels_last_3d); x = x.contiguous(memory_format=torch.channels_last_3d)
target = torch.randint(0, 2, (1, 64, 64, 64))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    opt.step()
for _ in range(2): step()
ts = []
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    t = time.perf_counter(); step(); ts.append((time.perf_counter() - t) * 1e3)
print(mode, "step ms", [round(t) for t in ts])
