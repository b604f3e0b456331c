# Per Conv3d layer, inference, batch 1: convcore.torch.conv3d under each 3-D schedule forced
# (convcore/_nd.py: taps, stacked, native, merged; the converted layer's way: channels_last_3d
# in, filters kept), and, for "merged", each 2-D algorithm named; against F.conv3d in both
# memory formats. Min of 4 warm calls each, after 2 untimed ones.
#   python schedules.py r3d        r3d_18's 3x3x3 layers (and its stem, stride-2, 1x1x1 ones)
#   python schedules.py temporal   r2plus1d_18's 3x1x1 layers
import sys, time, torch, torch.nn.functional as F
import convcore.torch as ct
from convcore import _torch_nd as tn

LAYERS = {  # (x shape, w shape, stride, padding)
    "r3d": [((1, 64, 16, 56, 56), (64, 64, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
            ((1, 128, 8, 28, 28), (128, 128, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
            ((1, 256, 4, 14, 14), (256, 256, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
            ((1, 512, 2, 7, 7), (512, 512, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
            ((1, 64, 16, 56, 56), (128, 64, 3, 3, 3), (2, 2, 2), (1, 1, 1)),
            ((1, 3, 16, 112, 112), (64, 3, 3, 7, 7), (1, 2, 2), (1, 3, 3)),
            ((1, 64, 16, 56, 56), (128, 64, 1, 1, 1), (2, 2, 2), (0, 0, 0))],
    "temporal": [((1, 144, 16, 56, 56), (64, 144, 3, 1, 1), (1, 1, 1), (1, 0, 0)),
                 ((1, 288, 8, 28, 28), (128, 288, 3, 1, 1), (1, 1, 1), (1, 0, 0)),
                 ((1, 45, 16, 56, 56), (64, 45, 3, 1, 1), (1, 1, 1), (1, 0, 0))],
}


def once(f):
    start = time.perf_counter()
    f()
    return (time.perf_counter() - start) * 1e3


torch.manual_seed(0)
with torch.inference_mode():
    for xs, ws, st, pd in LAYERS[sys.argv[1] if len(sys.argv) > 1 else "r3d"]:
        x = torch.randn(xs).contiguous(memory_format=torch.channels_last_3d)
        w = torch.randn(ws)
        res = {}
        for sch in ("taps", "stacked", "native", "merged"):
            algos = ("auto", "implicit_gemm", "winograd_4x4_3x3") if sch == "merged" else ("auto",)
            for algo in algos:
                tn._weight_conv3d.cache_clear()
                conv = tn._weight_conv3d(w.data_ptr(), tuple(w.shape), st, pd, (1, 1, 1), 1)
                conv._nd.schedule = sch
                f = lambda: ct.conv3d(x, w, None, st, pd, 1, 1, algo)  # noqa: E731
                try:
                    f(), f()
                except Exception:  # the schedule does not run this layer
                    continue
                res[f"{sch}/{algo}"] = round(min(once(f) for _ in range(4)), 1)
        xn = x.contiguous()
        res["pytorch_cl3d"] = round(min(once(lambda: F.conv3d(x, w, None, st, pd)) for _ in range(4)), 1)
        res["pytorch_ncdhw"] = round(min(once(lambda: F.conv3d(xn, w, None, st, pd)) for _ in range(4)), 1)
        print(xs, ws, st, res, flush=True)
