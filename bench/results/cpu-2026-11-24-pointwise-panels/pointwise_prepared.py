# steady state as a network runs it: convcore.torch.Conv2d (prepared filters) vs torch, interleaved
import sys, os, time, statistics, torch, convcore, convcore.torch as ct
T=int(os.environ.get("NT","2")); torch.set_num_threads(T); convcore.set_num_threads(T)
ks = int(os.environ.get("KS","1")); pad = ks // 2
algos = os.environ.get("ALGOS", "pointwise,im2col_gemm,implicit_gemm").split(",")
for spec in sys.argv[1:]:
    n,c,h,k = [int(v) for v in spec.split(',')]
    ref = torch.nn.Conv2d(c,k,ks,padding=pad,bias=False).eval()
    mods = {}
    for a in algos:
        m = ct.Conv2d(c,k,ks,padding=pad,bias=False,algo=a).eval(); m.weight = ref.weight; mods[a] = m
    xs = {"nchw": torch.randn(n,c,h,h)}; xs["cl"] = xs["nchw"].contiguous(memory_format=torch.channels_last)
    fns = {"torch_nchw": lambda: ref(xs["nchw"]), "torch_cl": lambda: ref(xs["cl"])}
    for a, m in mods.items():
        fns[a] = (lambda m=m: m(xs["cl"]))
    times = {kk: [] for kk in fns}
    with torch.inference_mode():
        for kk in list(fns):
            try:
                for _ in range(3): fns[kk]()
            except Exception as e:
                print(kk, "fails:", str(e)[:80]); del fns[kk]; del times[kk]
        for r in range(int(os.environ.get("REPS","30"))):
            keys = list(fns); keys = keys[r%len(keys):] + keys[:r%len(keys)]
            for kk in keys:
                t = time.perf_counter(); fns[kk](); times[kk].append(time.perf_counter()-t)
    fl = 2*n*c*k*h*h*ks*ks
    med = {kk: statistics.median(v) for kk,v in times.items()}
    best_t = min(med["torch_nchw"], med["torch_cl"])
    gf = {a: fl/med[a]/1e9 for a in med}
    print(f"{spec} k{ks}: GF " + " ".join(f"{a} {gf[a]:.0f}" for a in med))
    print(f"{spec} k{ks}: " + "  ".join(f"{kk} {med[kk]*1e3:.3f}" for kk in med) + "  | vs best torch: " + " ".join(f"{a} {best_t/med[a]:.2f}x" for a in mods if a in med), flush=True)
