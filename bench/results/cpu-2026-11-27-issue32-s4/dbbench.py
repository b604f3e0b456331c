import time, torch, convcore, statistics
from convcore import _api
import convcore.torch as ct
torch.manual_seed(0)
conv = convcore.Convolution(padding=1) if hasattr(convcore, "Convolution") else None
def t(fn, reps=15):
    fn(); ts=[]
    for _ in range(reps):
        a=time.perf_counter(); fn(); ts.append((time.perf_counter()-a)*1e3)
    return min(ts), statistics.median(ts)
for shape in [(8,64,224,224),(8,256,56,56),(8,512,14,14)]:
    for fmt in (torch.contiguous_format, torch.channels_last):
        dy = torch.randn(*shape).contiguous(memory_format=fmt)
        y = torch.relu(torch.randn(*shape)).contiguous(memory_format=fmt)
        db = torch.empty(shape[1])
        conv = convcore.Convolution(padding=1)
        pt_sum = lambda: dy.sum((0,2,3))
        pt_relu = lambda: (torch.ops.aten.threshold_backward(dy, y, 0.0).sum((0,2,3)))
        out = {"torch sum": t(pt_sum), "torch relu_bwd+sum": t(pt_relu), "cc backward_bias": t(lambda: conv.backward_bias(dy, out=db))}
        if hasattr(ct, "_epilogue_backward_cpu"):
            out["cc fused relu+db"] = t(lambda: ct._epilogue_backward_cpu("relu", dy, y, True))
            out["cc db only"] = t(lambda: ct._epilogue_backward_cpu("identity", dy, None, True))
        c = convcore.Convolution if hasattr(convcore,'Convolution') else None
        print(shape, "NHWC" if fmt == torch.channels_last else "NCHW", {k: f"{v[0]:.2f}/{v[1]:.2f}" for k, v in out.items()})
