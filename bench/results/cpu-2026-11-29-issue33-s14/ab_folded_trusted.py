# A/B in one process: Conv3d's folded batch norm through the direct route with the folded
# weight's version number (trusted) against the functional route that checks it per call.
import sys, time, torch
from convcore.model_bench import import_torchvision
import convcore.torch as ct, convcore._torch_nd as nd
torch.manual_seed(0)
cl = torch.channels_last_3d
name = sys.argv[1]
model = ct.convert(getattr(import_torchvision().video, name)(weights=None).eval(), fuse=True).to(memory_format=cl)
x = torch.randn(1, 3, 16, 112, 112).contiguous(memory_format=cl)
orig = nd._PaddedForward._padded_forward
def patched(self, input, weight, bias, trusted=False):
    return orig(self, input, weight, bias, trusted and not self.__dict__.get("_ab_checked", False))
nd._PaddedForward._padded_forward = patched
import copy
models = {"trusted": model, "checked": copy.deepcopy(model)}
for m in models["checked"].modules():
    if isinstance(m, nd.Conv3d): m.__dict__["_ab_checked"] = True
T = {"trusted": [], "checked": []}
with torch.inference_mode():
    for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 12):
        for k in (("trusted", "checked") if i % 2 else ("checked", "trusted")):
            if i == 0: models[k](x)
            t = time.perf_counter(); models[k](x); T[k].append((time.perf_counter() - t) * 1e3)
for k, v in T.items():
    v = sorted(v[1:]); print(name, k, "median %.1f min %.1f" % (v[len(v)//2], v[0]))
