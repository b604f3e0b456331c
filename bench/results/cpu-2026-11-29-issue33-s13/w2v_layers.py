import time, torch, copy
import convcore.torch as ct
from convcore.bench_networks import Wav2Vec2FeatureExtractor
torch.manual_seed(0)
m = Wav2Vec2FeatureExtractor().eval()
x = torch.randn(1, 1, 16000)
c = ct.convert(copy.deepcopy(m), fuse=True)
def per_module(model, x, reps=20):
    times = {}
    with torch.inference_mode():
        for r in range(reps):
            h = x
            for name, mod in model.layers.named_children():
                t = time.perf_counter(); h = mod(h); dt = time.perf_counter() - t
                times.setdefault(name, []).append(dt)
    return {k: sorted(v)[len(v)//2]*1e3 for k, v in times.items()}
for _ in range(2):
    a = per_module(m, x); b = per_module(c, x)
for k in a:
    print(f"{k:3s} {type(m.layers[int(k)]).__name__:10s} torch {a[k]:6.2f}  convcore {b[k]:6.2f}")
print("sum", sum(a.values()), sum(b.values()))
from convcore.bench_networks import channels_last
def whole(model, x, reps=30):
    ts=[]
    with torch.inference_mode():
        for r in range(reps):
            t=time.perf_counter(); model(x); ts.append(time.perf_counter()-t)
    return sorted(ts)[len(ts)//2]*1e3
xl = channels_last(x)
for _ in range(2):
    print("whole ncw torch %.2f convcore %.2f | nwc torch %.2f convcore %.2f" % (whole(m,x), whole(c,x), whole(m,xl), whole(c,xl)))
print(c.layers[0](x).stride(), m.layers[0](x).stride(), c.layers[0](xl).stride())
b = per_module(c, xl); a = per_module(m, xl)
for k in a:
    print(f"NWC {k:3s} {type(m.layers[int(k)]).__name__:10s} torch {a[k]:6.2f}  convcore {b[k]:6.2f}")
