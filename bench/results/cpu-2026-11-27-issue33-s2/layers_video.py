# Per Conv3d layer of a video network, batch 1, 3x16x112x112, inference (torch.inference_mode):
# PyTorch's F.conv3d in its faster memory format for the layer (the min over NCDHW and
# channels_last_3d) against convcore.torch.conv3d (auto, channels_last_3d in and out, its
# filters kept between calls as a converted model keeps them). Each layer alone on random
# inputs of its shapes; 5 interleaved rounds, min per contender.
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
import convcore.torch as ct
from convcore import model_bench as mb
name = sys.argv[1] if len(sys.argv) > 1 else "r3d_18"
model = mb.build_model(name)
shapes = []
hooks = [m.register_forward_pre_hook(lambda m, a: shapes.append((m, tuple(a[0].shape))))
         for m in model.modules() if isinstance(m, nn.Conv3d)]
with torch.inference_mode():
    model(torch.randn(1, 3, 16, 112, 112))


def once(f):
    s = time.perf_counter(); f(); return (time.perf_counter() - s) * 1e3


tot = [0.0, 0.0]
seen = {}
with torch.inference_mode():
    for m, shape in shapes:
        key = (shape, tuple(m.weight.shape), m.stride, m.padding)
        if key not in seen:
            x = torch.randn(shape)
            xc = x.contiguous(memory_format=torch.channels_last_3d)
            args = (m.weight, None, m.stride, m.padding, m.dilation, m.groups)
            runs = {"ncdhw": lambda: F.conv3d(x, *args), "cl3d": lambda: F.conv3d(xc, *args),
                    "convcore": lambda: ct.conv3d(xc, *args)}
            for f in runs.values():
                f(); f()  # warm: plans, schedules, kept filters
            best = {k: min(once(f) for _ in range(1)) for k, f in runs.items()}
            for _ in range(4):
                for k, f in runs.items():
                    best[k] = min(best[k], once(f))
            seen[key] = (min(best["ncdhw"], best["cl3d"]), best["convcore"],
                         "ncdhw" if best["ncdhw"] < best["cl3d"] else "cl3d")
        a, b, fmt = seen[key]
        tot[0] += a; tot[1] += b
        print(f"{str(shape):24s} w{tuple(m.weight.shape)!s:22s} s{m.stride} p{m.padding}  "
              f"pytorch({fmt}) {a:7.1f}  convcore {b:7.1f}  {a / b:5.2f}x", flush=True)
print(f"total pytorch {tot[0]:.0f} ms, convcore {tot[1]:.0f} ms, {tot[0] / tot[1]:.2f}x")
