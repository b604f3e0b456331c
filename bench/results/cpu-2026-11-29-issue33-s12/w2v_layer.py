# wav2vec2_fe's layers.3 in the converted network: the converted module on its captured input
# against convcore.Convolution (auto) and F.conv1d, interleaved.
import time, torch, convcore, convcore.torch as ct, torch.nn.functional as F
from convcore.bench_networks import Wav2Vec2FeatureExtractor
torch.manual_seed(0)
m = Wav2Vec2FeatureExtractor().eval()
cm = ct.convert(m)
x = torch.randn(1, 1, 16000)
cap = {}
h = cm.layers[3].register_forward_pre_hook(lambda mod, inp: cap.__setitem__("x", inp[0]))
with torch.inference_mode():
    cm(x); h.remove()
    xi = cap["x"]; w = m.layers[3].weight.detach()
    print("input strides", xi.stride(), xi.is_contiguous())
    conv = convcore.Convolution(convcore.ConvDesc(stride=(1, 2)))
    runs = {"converted module": lambda: cm.layers[3](xi),
            "Convolution auto": lambda: conv.forward(xi.unsqueeze(2), w.unsqueeze(2), algo="auto", filter_version=1),
            "F.conv1d": lambda: F.conv1d(xi, w, None, 2)}
    for f in runs.values(): f()
    print("auto picked", conv.last_algo)
    T = {n: [] for n in runs}
    names = list(runs)
    for i in range(15):
        for n in names[i % 3:] + names[:i % 3]:
            t = time.perf_counter(); runs[n](); T[n].append((time.perf_counter() - t) * 1e3)
    for n in names: print(f"{n}: min {min(T[n]):.2f} median {sorted(T[n])[7]:.2f} ms")
    for a in ["winograd_4x4_3x3", "im2col_gemm", "auto"]:
        cm.layers[3].algo = a
        cm.layers[3](xi)
        T = []
        for i in range(10):
            t = time.perf_counter(); cm.layers[3](xi); T.append((time.perf_counter() - t) * 1e3)
        print(f"converted module algo={a}: min {min(T):.2f} ms")
        y = conv.forward(xi.unsqueeze(2), w.unsqueeze(2), algo=a, filter_version=1)
        T = []
        for i in range(10):
            t = time.perf_counter(); conv.forward(xi.unsqueeze(2), w.unsqueeze(2), algo=a, filter_version=1); T.append((time.perf_counter() - t) * 1e3)
        print(f"Convolution algo={a}: min {min(T):.2f} ms")
