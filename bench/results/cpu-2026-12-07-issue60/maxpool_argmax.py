import torch, copy, convcore
import torch.nn as nn, torch.nn.functional as F
import convcore.torch as ct
torch.set_num_threads(2); convcore.set_num_threads(2)
from convcore import model_sweep as ms
name = "seresnext26d_32x4d"
torch.manual_seed(ms._seed(name, 0))
model, cfg, _ = ms.build(name)
ms.randomize_(model, torch.Generator().manual_seed(ms._seed(name, 0)))
model = model.double().eval()
g = torch.Generator().manual_seed(ms._seed(name, 0) + 1)
x64 = torch.randn(2, 3, 64, 64, generator=g, dtype=torch.float64)
conv = ct.convert(copy.deepcopy(model).float().to(memory_format=torch.channels_last))
caught = {}
def hook(key):
    return lambda m, i, o: caught.__setitem__(key, i[0].detach().double())
model.maxpool.register_forward_hook(hook("ref")); conv.maxpool.register_forward_hook(hook("ours"))
with torch.no_grad():
    model(x64); conv(x64.float().contiguous(memory_format=torch.channels_last))
p = model.maxpool
_, i_ref = F.max_pool2d(caught["ref"], p.kernel_size, p.stride, p.padding, return_indices=True)
_, i_ours = F.max_pool2d(caught["ours"], p.kernel_size, p.stride, p.padding, return_indices=True)
print("max-pool windows whose argmax differs:", int((i_ref != i_ours).sum()), "of", i_ref.numel())
