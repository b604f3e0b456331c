# The first calls of a converted video network in a new process: what Find and the 3-D schedule
# choice cost. Run it twice with the same CONVCORE_FIND_DB: the first process times everything,
# the second reads the find-db. Usage: python first_steps.py NAME train|infer
import sys, time, torch, torch.nn.functional as F
import convcore
from convcore.model_bench import import_torchvision
import convcore.torch as ct
torch.manual_seed(0)
name, mode = sys.argv[1], sys.argv[2]
model = ct.convert(getattr(import_torchvision().video, name)(weights=None), fuse=True).to(memory_format=torch.channels_last_3d)
x = torch.randn(1, 3, 16, 112, 112).contiguous(memory_format=torch.channels_last_3d)
target = torch.randint(0, 400, (1,))
times = []
for i in range(4):
    t = time.perf_counter()
    if mode == "train":
        F.cross_entropy(model(x), target).backward()
    else:
        with torch.no_grad():
            model(x)
    times.append(round((time.perf_counter() - t) * 1e3))
print(name, mode, "calls (ms):", times, convcore.find_stats(), flush=True)
