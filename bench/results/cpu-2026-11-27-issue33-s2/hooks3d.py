import torch, copy, time, sys, collections
import convcore.torch as ct
from convcore import model_bench as mb
name = sys.argv[1] if len(sys.argv) > 1 else "r3d_18"
model = mb.build_model(name).eval()
conv = ct.convert(copy.deepcopy(model), fuse=True)
x = torch.randn(1, 3, 16, 112, 112)
xc = x.contiguous(memory_format=torch.channels_last_3d)
def instrument(m):
    times = collections.defaultdict(float); start = {}
    for n, mod in m.named_modules():
        if isinstance(mod, torch.nn.Conv3d):
            mod.register_forward_pre_hook(lambda mod, a, n=n: start.__setitem__(n, time.perf_counter()))
            mod.register_forward_hook(lambda mod, a, o, n=n: times.__setitem__(n, times[n] + time.perf_counter() - start[n]))
    return times
tc, tp = instrument(conv), instrument(model)
with torch.inference_mode():
    for _ in range(2): conv(xc); model(x)
    tc.clear(); tp.clear()
    totals = {"convcore": 0.0, "pytorch": 0.0}
    for _ in range(3):
        s = time.perf_counter(); conv(xc); totals["convcore"] += time.perf_counter() - s
        s = time.perf_counter(); model(x); totals["pytorch"] += time.perf_counter() - s
for label, t, tot in (("convcore", tc, totals["convcore"]), ("pytorch", tp, totals["pytorch"])):
    conv_ms = sum(t.values()) / 3 * 1e3
    print(f"{label}: total {tot / 3 * 1e3:.0f} ms per pass, Conv3d layers {conv_ms:.0f} ms, rest {tot / 3 * 1e3 - conv_ms:.0f} ms")
for n in list(tc)[:8]:
    print(f"  {n:28s} convcore {tc[n] / 3 * 1e3:6.1f}  pytorch {tp[n] / 3 * 1e3:6.1f}")
