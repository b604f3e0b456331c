import copy, sys, time, torch
import torch.nn.functional as F
import convcore.torch as ct
from convcore import model_bench as mb
models = mb.import_torchvision()
torch.manual_seed(0)
name = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 8
m = getattr(models, name)()
pt = copy.deepcopy(m).to(memory_format=torch.channels_last).train()
cc = ct.convert(copy.deepcopy(m)).train()
x = torch.randn(batch, 3, 224, 224).to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (batch,))
def step(model):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), labels).backward()
for _ in range(2):
    step(pt); step(cc)
def t(model):
    s = time.perf_counter(); step(model); return (time.perf_counter() - s) * 1e3
ts = {"pt": [], "cc": []}
for _ in range(3):
    ts["pt"].append(t(pt)); ts["cc"].append(t(cc))
print({k: sorted(v) for k, v in ts.items()})
from torch.profiler import profile, ProfilerActivity
res = {}
for key, model in (("pt", pt), ("cc", cc)):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step(model)
    agg = {}
    for e in prof.key_averages():
        agg[e.key] = (e.self_cpu_time_total / 1e3, e.count)
    res[key] = agg
keys = set(res["pt"]) | set(res["cc"])
rows = sorted(keys, key=lambda k: -max(res["pt"].get(k, (0, 0))[0], res["cc"].get(k, (0, 0))[0]))
print(f"{'op':55} {'pt ms':>8} {'n':>5} {'cc ms':>8} {'n':>5}")
for k in rows[:40]:
    a = res["pt"].get(k, (0, 0)); b = res["cc"].get(k, (0, 0))
    print(f"{k[:55]:55} {a[0]:8.1f} {a[1]:5d} {b[0]:8.1f} {b[1]:5d}")
print("total", sum(v[0] for v in res["pt"].values()), sum(v[0] for v in res["cc"].values()))
