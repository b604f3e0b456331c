# A/B of the training step: python ab_train.py r3d_18,mc3_18 LABEL (LD_LIBRARY_PATH picks the library)
import sys
from convcore import model_bench
from convcore.bench_timing import single_threaded_numpy_blas
single_threaded_numpy_blas()
names = sys.argv[1].split(",")
res = model_bench.run(names, batch=1, train=True, reps=3, layer_reps=0, time_limit=60, engines=(), log=lambda *a, **k: None)
for r in res["models"]:
    c = r["contenders"]
    print(sys.argv[2], r["model"], "speedup %.2f" % r["speedup"], {n: round(v["median_ms"]) for n, v in c.items()}, flush=True)
