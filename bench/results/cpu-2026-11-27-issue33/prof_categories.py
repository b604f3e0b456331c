# A training step profiled by category (convolutions, batch norm, activations, copies, autograd, other), PyTorch
# channels_last against convcore.torch.convert (fuse=True with a 3rd argument "fuse"), 4 interleaved profiled steps each:
# python prof_categories.py mobilenet_v2 8 fuse
import copy, sys, time, torch, collections
import torch.nn.functional as F
import convcore.torch as ct
from convcore import model_bench as mb
from torch.profiler import profile, ProfilerActivity
models = mb.import_torchvision()
torch.manual_seed(0)
name = sys.argv[1]; batch = int(sys.argv[2]); fuse = len(sys.argv) > 3 and sys.argv[3] == "fuse"
m = getattr(models, name)()
pt = copy.deepcopy(m).to(memory_format=torch.channels_last).train()
cc = ct.convert(copy.deepcopy(m), fuse=fuse).train()
x = torch.randn(batch, 3, 224, 224).to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (batch,))
def step(model):
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), labels).backward()
for _ in range(2):
    step(pt); step(cc)
def cat(k):
    if k.startswith("autograd") or k.endswith("Backward0") or "defaultBackward" in k: return "autograd"
    if "conv" in k.lower(): return "conv:" + k
    if "batch_norm" in k: return "bn"
    if "hardtanh" in k or "clamp" in k or "threshold" in k or "silu" in k or "relu" in k: return "act"
    if k in ("aten::copy_", "aten::clone"): return "copy"
    return "other"
tot = {k: collections.Counter() for k in ("pt", "cc")}
others = {k: collections.Counter() for k in ("pt", "cc")}
wall = {k: [] for k in ("pt", "cc")}
for r in range(4):
    for key, model in (("pt", pt), ("cc", cc)):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            s = time.perf_counter(); step(model); wall[key].append((time.perf_counter() - s) * 1e3)
        for e in prof.key_averages():
            if cat(e.key) == "other": others[key][e.key] += e.self_cpu_time_total / 1e3 / 4
            tot[key][cat(e.key)] += e.self_cpu_time_total / 1e3 / 4
for k in ("pt", "cc"):
    print(k, "wall", [round(w) for w in wall[k]], {c: round(v, 1) for c, v in sorted(tot[k].items())}, "sum", round(sum(tot[k].values()), 1))
for k in ("pt", "cc"): print(k, [(a, round(b, 1)) for a, b in others[k].most_common(8)])
