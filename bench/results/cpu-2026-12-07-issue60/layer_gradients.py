import copy, torch, sys
import torch.nn.functional as F
from convcore import model_sweep as ms
import convcore.torch as ct
torch.set_num_threads(2); import convcore; convcore.set_num_threads(2)
name = sys.argv[1]
torch.manual_seed(ms._seed(name, 0))
model, cfg, _ = ms.build(name)
ms.randomize_(model, torch.Generator().manual_seed(ms._seed(name, 0)))
model = model.float().eval()
x = torch.randn(2, 3, 64, 64).contiguous(memory_format=torch.channels_last)
conv_in = {}
conv = ct.convert(copy.deepcopy(model).to(memory_format=torch.channels_last))
hooks = []
for n, m in conv.named_modules():
    if isinstance(m, ct.Conv2d):
        hooks.append(m.register_forward_hook(lambda mod, i, o, n=n: conv_in.__setitem__(n, (i[0].detach(), o.shape))))
with torch.no_grad():
    conv(x)
worst = []
for n, m in conv.named_modules():
    if n not in conv_in: continue
    xi, oshape = conv_in[n]
    xi = xi.clone().requires_grad_()
    dy = torch.randn(oshape).contiguous(memory_format=torch.channels_last)
    y = m._conv_forward(xi, m.weight, m.bias)
    gx, gw = torch.autograd.grad(y, (xi, m.weight), dy)
    x64 = xi.detach().double().requires_grad_()
    w64 = m.weight.detach().double().requires_grad_()
    y64 = F.conv2d(x64, w64, None, m.stride, m.padding, m.dilation, m.groups)
    rx, rw = torch.autograd.grad(y64, (x64, w64), dy.double())
    ex = float((gx.double() - rx).norm() / rx.norm()); ew = float((gw.double() - rw).norm() / rw.norm())
    worst.append((max(ex, ew), n, ex, ew, tuple(xi.shape), tuple(m.weight.shape), m.stride, m.padding, m.groups))
worst.sort(reverse=True)
for w in worst[:6]: print(w)
