import numpy as np, convcore, time, sys
c, k, d, hw = (int(v) for v in sys.argv[1:5])
algo = sys.argv[5]
conv = convcore.Convolution(convcore.ConvDesc(padding=(1, 0)))
x = np.random.randn(1, d, hw, c).astype(np.float32).transpose(0, 3, 1, 2)
w = np.random.randn(k, c, 3, 1).astype(np.float32)
out = np.empty((1, d, hw, k), np.float32).transpose(0, 3, 1, 2)
for _ in range(3): conv.forward(x, w, algo=algo, out=out, filter_version=1)
ts = []
for _ in range(int(sys.argv[6]) if len(sys.argv) > 6 else 20):
    t = time.perf_counter(); conv.forward(x, w, algo=algo, out=out, filter_version=1); ts.append(time.perf_counter() - t)
print(algo, c, k, d, hw, "min %.2f ms median %.2f" % (min(ts) * 1e3, sorted(ts)[len(ts)//2] * 1e3))
