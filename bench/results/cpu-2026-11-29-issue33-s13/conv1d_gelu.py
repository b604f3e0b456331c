import time, torch, torch.nn.functional as F
import convcore.torch as ct
torch.manual_seed(0)
def t(f, reps=15):
    ts=[]
    for _ in range(reps):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return sorted(ts)[reps//2]*1e3
for L in (3199, 799):
    x = torch.randn(1, 512, L); w = torch.randn(512, 512, 3) * 0.03
    xl = x.transpose(1, 2).contiguous().transpose(1, 2)
    with torch.inference_mode():
        for name, xx in (("ncw", x), ("nwc", xl)):
            for _ in range(2):
                r = dict(
                  torch_conv=t(lambda: F.conv1d(xx, w, stride=2)),
                  torch_conv_gelu=t(lambda: F.gelu(F.conv1d(xx, w, stride=2))),
                  cc_id=t(lambda: ct.conv1d(xx, w, stride=2)),
                  cc_gelu=t(lambda: ct.conv1d(xx, w, stride=2, activation="gelu")),
                  cc_relu=t(lambda: ct.conv1d(xx, w, stride=2, activation="relu")),
                  cc_id_then_gelu=t(lambda: F.gelu(ct.conv1d(xx, w, stride=2))))
            print(L, name, " ".join(f"{k} {v:.2f}" for k, v in r.items()))
