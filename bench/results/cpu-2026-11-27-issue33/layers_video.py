# Per Conv3d layer of a video network, batch 1, 3x16x112x112, channels_last_3d: PyTorch's F.conv3d
# against convcore.torch.conv3d (auto), each layer alone on random inputs of its shapes, min of 3
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
import convcore.torch as ct
from convcore import model_bench as mb
name = sys.argv[1] if len(sys.argv) > 1 else "r3d_18"
model = mb.build_model(name)
shapes = []
hooks = [m.register_forward_pre_hook(lambda m, a: shapes.append((m, tuple(a[0].shape)))) for m in model.modules() if isinstance(m, nn.Conv3d)]
with torch.inference_mode():
    model(torch.randn(1, 3, 16, 112, 112))
def tm(f):
    f(); ts = []
    for _ in range(3):
        s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
    return min(ts) * 1e3
tot = [0.0, 0.0]
seen = {}
with torch.inference_mode():
    for m, shape in shapes:
        key = (shape, m.weight.shape, m.stride, m.padding)
        if key not in seen:
            x = torch.randn(shape).to(memory_format=torch.channels_last_3d)
            args = (m.weight, None, m.stride, m.padding, m.dilation, m.groups)
            seen[key] = (tm(lambda: F.conv3d(x, *args)), tm(lambda: ct.conv3d(x, *args)))
        a, b = seen[key]
        tot[0] += a; tot[1] += b
        print(f"{str(shape):24s} w{tuple(m.weight.shape)!s:22s} s{m.stride} p{m.padding}  pytorch {a:7.1f}  convcore {b:7.1f}  {a / b:5.2f}x")
print(f"total pytorch {tot[0]:.0f} ms, convcore {tot[1]:.0f} ms, {tot[0] / tot[1]:.2f}x")
