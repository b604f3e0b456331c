import copy, torch, sys
import torch.nn as nn
from convcore import model_sweep as ms
import convcore.torch as ct
torch.set_num_threads(2); import convcore; convcore.set_num_threads(2)
name = sys.argv[1]
torch.manual_seed(ms._seed(name, 0))
model, cfg, _ = ms.build(name)
ms.randomize_(model, torch.Generator().manual_seed(ms._seed(name, 0)))
model = model.double().eval()
g = torch.Generator().manual_seed(ms._seed(name, 0) + 1)
x64 = torch.randn(2, 3, 64, 64, generator=g, dtype=torch.float64)
with torch.no_grad(): ref_out = ms.flatten(model(x64))
proj = ms._projection(ref_out, ms._seed(name, 0) + 2)
_, ref_grads = ms.gradients(model, x64, proj)
base = copy.deepcopy(model).float().to(memory_format=torch.channels_last)
x = x64.float().contiguous(memory_format=torch.channels_last)
_, own = ms.gradients(base, x, proj)
print("pytorch own", ms._gradient_error(own, ref_grads)[0])
allc = ct.convert(copy.deepcopy(base))
_, g_all = ms.gradients(allc, x, proj)
print("all converted", ms._gradient_error(g_all, ref_grads))
names = [] if len(sys.argv) > 2 else [n for n, m in base.named_modules() if type(m) is nn.Conv2d]
res = []
for n in names:
    m = copy.deepcopy(base)
    parent, _, leaf = n.rpartition(".")
    p = m.get_submodule(parent) if parent else m
    setattr(p, leaf, ct.convert(getattr(p, leaf)))
    _, gg = ms.gradients(m, x, proj)
    res.append((ms._gradient_error(gg, ref_grads)[0], n))
res.sort(reverse=True)
for r in res[:5]: print(r)
