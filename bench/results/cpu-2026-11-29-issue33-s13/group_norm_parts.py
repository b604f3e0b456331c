import time, torch, torch.nn.functional as F
def t(f, reps=20):
    ts=[]
    for _ in range(reps):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return sorted(ts)[reps//2]*1e3
y = torch.randn(1, 512, 3199); g = torch.randn(512); b = torch.randn(512)
with torch.inference_mode():
    print("var_mean", t(lambda: torch.var_mean(y.view(1, 512, -1), dim=-1, correction=0)))
    s = torch.randn(1, 512, 1); sh = torch.randn(1, 512, 1)
    print("addcmul out", t(lambda: torch.addcmul(sh, y, s, out=y)))
    print("mul_ add_", t(lambda: y.mul_(s).add_(sh)))
    print("gelu_", t(lambda: torch.ops.aten.gelu_(y)))
    print("gelu", t(lambda: F.gelu(y)))
    print("group_norm", t(lambda: F.group_norm(y, 512, g, b)))
    print("threads", torch.get_num_threads())
