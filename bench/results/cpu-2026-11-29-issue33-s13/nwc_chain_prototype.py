# A measurement, not a feature: wav2vec2_fe converted (fuse=True, freeze=True) with its layers
# after the first run on N x L x C memory (one transpose after layer 0, one at the end), against
# the converted model as it runs (NCL between layers) and PyTorch; median of 40 interleaved calls.
import time, copy, torch
import convcore.torch as ct
from convcore.bench_networks import Wav2Vec2FeatureExtractor
torch.manual_seed(0)
m = Wav2Vec2FeatureExtractor().eval()
c = ct.convert(copy.deepcopy(m), fuse=True, freeze=True)
x = torch.randn(1, 1, 16000)
def chain(x):
    h = c.layers[0](x)  # conv0 + GN + GELU (fused), NCL
    h = h.transpose(1, 2).contiguous().transpose(1, 2)  # NWC memory
    for layer in list(c.layers)[3:]:
        h = layer(h)
    return h.contiguous()
runs = {"pytorch": lambda: m(x), "convcore": lambda: c(x), "convcore nwc chain": lambda: chain(x)}
with torch.inference_mode():
    print("err", float((chain(x) - m(x)).abs().max()))
    T = {k: [] for k in runs}
    for i in range(40):
        for k in runs:
            t = time.perf_counter(); runs[k](); T[k].append((time.perf_counter() - t) * 1e3)
    for k in runs:
        v = sorted(T[k])[len(T[k]) // 2]; print(f"{k:20s} {v:.2f} ms  ({sorted(T['pytorch'])[20]/v:.2f}x)")
