import time, torch, convcore.torch as ct
from convcore.model_bench import import_torchvision
torch.manual_seed(0)
cl = torch.channels_last_3d
def best(f, n=9):
    f(); ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append((time.perf_counter()-t)*1e3)
    return min(ts)
ref = getattr(import_torchvision().video, "mc3_18")(weights=None).eval().to(memory_format=cl)
import sys
model = ct.convert(getattr(import_torchvision().video, "mc3_18")(weights=None).eval(), fuse=True, freeze=len(sys.argv) > 1).to(memory_format=cl)
model.load_state_dict(ref.state_dict())
x = torch.randn(1, 3, 16, 112, 112).contiguous(memory_format=cl)
got = {}
def grab(name):
    def hook(m, inp, out): got[name] = (inp[0], out)
    return hook
model.layer2[0].downsample.register_forward_hook(grab("cc"))
ref.layer2[0].downsample.register_forward_hook(grab("pt"))
with torch.inference_mode():
    model(x); ref(x)
    for k in ("cc", "pt"):
        i, o = got[k]
        print(k, "input cl3d", i.is_contiguous(memory_format=cl), "contig", i.is_contiguous(), "out cl3d", o.is_contiguous(memory_format=cl), tuple(i.stride()))
    xi = got["cc"][0]
    print("downsample alone on the network's input: convcore %.3f ms, pytorch %.3f ms" % (best(lambda: model.layer2[0].downsample(xi)), best(lambda: ref.layer2[0].downsample(got["pt"][0]))))
    conv = model.layer2[0].downsample[0]
    print("conv alone (unfused weights):", "%.3f" % best(lambda: torch.nn.functional.conv3d(xi, conv.weight, None, conv.stride)), "convcore functional %.3f" % best(lambda: ct.conv3d(xi, conv.weight, None, conv.stride)))
