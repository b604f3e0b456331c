"""An independent float64 reference convolution in NumPy (not convcore's DIRECT), the problem
generator, and the per-algorithm error bounds the tests hold convcore to."""

import random
from dataclasses import dataclass

import numpy as np

# DIRECT, IM2COL_GEMM and IMPLICIT_GEMM support every problem on the CPU: applicable_algos must
# always list them.
CLASSIC_ALGOS = ("direct", "im2col_gemm", "implicit_gemm")


def error_bound(algo, dtype, direction="forward"):
    """The bound ||out - ref|| / ||ref|| that convcore declares for ``algo`` (its one list of
    algorithms, read through convcore.algorithm_info)."""
    import convcore  # here, not at the top: tests/gpu import this module before their GPU gate
    return convcore.algorithm_info(algo, direction).error_bound(dtype)


def relative_error(y, ref):
    """||y - ref|| / ||ref||; the absolute error when ref is all zeros (an output that only
    sees padding)."""
    y = np.asarray(y, dtype=np.float64)
    ref_norm = np.linalg.norm(ref)
    return float(np.linalg.norm(y - ref) / (ref_norm if ref_norm > 0 else 1.0))


def output_size(size, pad, kernel, stride, dilation):
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def conv2d_reference(x, w, padding=(0, 0), stride=(1, 1), dilation=(1, 1), groups=1,
                     mode="cross_correlation"):
    """y[n, k, p, q] = sum_{c, r, s} x[n, g*C/G + c, p*sh + r*dh - ph, q*sw + s*dw - pw] * w[k, c, r, s]
    in float64 (k in group g); mode "convolution" flips w in both spatial axes."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if mode == "convolution":
        w = w[:, :, ::-1, ::-1]
    n, c, h, wd = x.shape
    k, c_per_group, r_size, s_size = w.shape
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    p_size = output_size(h, ph, r_size, sh, dh)
    q_size = output_size(wd, pw, s_size, sw, dw)
    assert c == c_per_group * groups and k % groups == 0 and p_size > 0 and q_size > 0
    k_per_group = k // groups
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    y = np.zeros((n, k, p_size, q_size))
    for g in range(groups):
        xg = xp[:, g * c_per_group:(g + 1) * c_per_group]
        wg = w[g * k_per_group:(g + 1) * k_per_group]
        for r in range(r_size):
            for s in range(s_size):
                rows = slice(r * dh, r * dh + sh * (p_size - 1) + 1, sh)
                cols = slice(s * dw, s * dw + sw * (q_size - 1) + 1, sw)
                y[:, g * k_per_group:(g + 1) * k_per_group] += np.einsum(
                    "ncpq,kc->nkpq", xg[:, :, rows, cols], wg[:, :, r, s])
    return y


def convnd_reference(x, w, padding, stride, dilation, groups=1, mode="cross_correlation"):
    """The convolution in 1 to 3 spatial dimensions (x: N x C x spatial..., w: K x C/G x
    kernel...) in float64, with its two gradients as functions of dy:
    (y, backward_data(dy), backward_filter(dy)). One einsum per filter tap and group."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    dims = x.ndim - 2
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * dims
    if mode == "convolution":
        w = w[flip]
    k, cg = w.shape[:2]
    kg = k // groups
    out = [output_size(size, p, kern, s, d) for size, p, kern, s, d in
           zip(x.shape[2:], padding, w.shape[2:], stride, dilation)]
    assert x.shape[1] == cg * groups and k % groups == 0 and min(out) > 0
    xp = np.zeros(x.shape[:2] + tuple(size + 2 * p for size, p in zip(x.shape[2:], padding)))
    inner = tuple(slice(p, p + size) for p, size in zip(padding, x.shape[2:]))
    xp[(slice(None), slice(None)) + inner] = x
    taps = list(np.ndindex(*w.shape[2:]))

    def window(tap):  # the input positions tap reads, for every output position
        return tuple(slice(t * d, t * d + s * (o - 1) + 1, s)
                     for t, d, s, o in zip(tap, dilation, stride, out))

    letters = "pqr"[:dims]
    y = np.zeros((x.shape[0], k) + tuple(out))
    for g in range(groups):
        cs, ks = slice(g * cg, (g + 1) * cg), slice(g * kg, (g + 1) * kg)
        for tap in taps:
            y[:, ks] += np.einsum(f"nc{letters},kc->nk{letters}",
                                  xp[(slice(None), cs) + window(tap)], w[(ks, slice(None)) + tap])

    def backward_data(dy):
        dxp = np.zeros_like(xp)
        for g in range(groups):
            cs, ks = slice(g * cg, (g + 1) * cg), slice(g * kg, (g + 1) * kg)
            for tap in taps:
                dxp[(slice(None), cs) + window(tap)] += np.einsum(
                    f"nk{letters},kc->nc{letters}", dy[:, ks], w[(ks, slice(None)) + tap])
        return dxp[(slice(None), slice(None)) + inner]

    def backward_filter(dy):
        dw = np.zeros_like(w)
        for g in range(groups):
            cs, ks = slice(g * cg, (g + 1) * cg), slice(g * kg, (g + 1) * kg)
            for tap in taps:
                dw[(ks, slice(None)) + tap] = np.einsum(
                    f"nc{letters},nk{letters}->kc", xp[(slice(None), cs) + window(tap)], dy[:, ks])
        return dw[flip] if mode == "convolution" else dw

    return y, backward_data, backward_filter


@dataclass(frozen=True)
class Problem:
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    padding: tuple = (0, 0)
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    groups: int = 1
    mode: str = "cross_correlation"

    @property
    def x_shape(self):
        return (self.n, self.c, self.h, self.w)

    @property
    def w_shape(self):
        return (self.k, self.c // self.groups, self.r, self.s)

    def desc_kwargs(self):
        return dict(padding=self.padding, stride=self.stride, dilation=self.dilation,
                    groups=self.groups, mode=self.mode)

    def inputs(self, dtype, seed=0):
        """Fresh uniform(-1, 1) x and w (never zeros)."""
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, self.x_shape).astype(dtype)
        w = rng.uniform(-1, 1, self.w_shape).astype(dtype)
        return x, w

    def reference(self, x, w):
        return conv2d_reference(x, w, self.padding, self.stride, self.dilation, self.groups,
                                self.mode)

    def __str__(self):
        m = "conv" if self.mode == "convolution" else "xcorr"
        return (f"n{self.n}c{self.c}h{self.h}w{self.w}k{self.k}r{self.r}s{self.s}"
                f"p{self.padding[0]}x{self.padding[1]}s{self.stride[0]}x{self.stride[1]}"
                f"d{self.dilation[0]}x{self.dilation[1]}g{self.groups}{m}")


# Hand-picked cases: the shapes the fast algorithms target and the edges of the classic ones.
NAMED_PROBLEMS = [
    Problem(1, 3, 8, 8, 4, 3, 3, padding=(1, 1)),                     # 3x3 same
    Problem(2, 4, 9, 7, 5, 3, 3),                                      # odd sizes, valid
    Problem(1, 8, 6, 6, 8, 1, 1),                                      # 1x1
    Problem(1, 1, 32, 32, 1, 3, 3, padding=(1, 1)),                    # single channel
    Problem(1, 2, 13, 11, 3, 5, 5, padding=(2, 2)),                    # 5x5
    Problem(1, 3, 20, 20, 4, 7, 7, padding=(3, 3), stride=(2, 2)),     # 7x7 stride 2
    Problem(1, 3, 27, 27, 4, 11, 11, stride=(4, 4)),                   # 11x11 stride 4
    Problem(2, 6, 10, 10, 6, 3, 3, padding=(1, 1), groups=6),          # depthwise
    Problem(1, 8, 9, 9, 12, 3, 3, padding=(1, 1), groups=4),           # grouped
    Problem(1, 4, 12, 12, 4, 3, 3, padding=(2, 2), dilation=(2, 2)),   # dilated
    Problem(1, 3, 7, 9, 2, 2, 4, padding=(1, 0), mode="convolution"),  # true convolution
    Problem(1, 2, 5, 5, 3, 5, 5),                                      # filter == input
    Problem(1, 2, 1, 1, 3, 3, 3, padding=(1, 1)),                      # 1x1 image, padded
    Problem(3, 5, 4, 17, 2, 1, 3, padding=(0, 1), stride=(1, 3)),      # rectangular, mixed
    # 3x3, stride 1 (the Winograd / FFT / cyclic shapes): odd sizes, tiles cut at the edges.
    Problem(2, 16, 13, 11, 16, 3, 3, padding=(1, 1)),
    Problem(1, 5, 10, 7, 3, 3, 3, mode="convolution"),
    Problem(1, 12, 9, 9, 6, 3, 3, padding=(1, 1), groups=3),
    Problem(1, 3, 4, 4, 2, 3, 3, padding=(3, 3)),                      # padding > filter radius
]


def random_problems(count, seed=1234):
    """Seeded random problems: odd sizes, padding 0-3, stride 1-3, dilation 1-2, groups 1-4
    (and depthwise), both modes."""
    rng = random.Random(seed)
    problems = []
    while len(problems) < count:
        groups = rng.choice([1, 1, 2, 3, 4, "depthwise"])
        if groups == "depthwise":
            c = rng.randint(1, 6)
            groups, k = c, c * rng.randint(1, 2)
        else:
            c = groups * rng.randint(1, 4)
            k = groups * rng.randint(1, 3)
        r, s = rng.randint(1, 5), rng.randint(1, 5)
        h, w = rng.randint(1, 15), rng.randint(1, 15)
        padding = (rng.randint(0, 3), rng.randint(0, 3))
        stride = (rng.randint(1, 3), rng.randint(1, 3))
        dilation = (rng.randint(1, 2), rng.randint(1, 2))
        if (output_size(h, padding[0], r, stride[0], dilation[0]) < 1
                or output_size(w, padding[1], s, stride[1], dilation[1]) < 1):
            continue
        problems.append(Problem(rng.randint(1, 3), c, h, w, k, r, s, padding, stride, dilation,
                                groups, rng.choice(["cross_correlation", "convolution"])))
    return problems


PROBLEMS = NAMED_PROBLEMS + random_problems(26)


def assert_compiled_matches_eager(model, x):
    """torch.compile(model) (aot_eager, fullgraph) gives the eager model's output and parameter
    gradients bit for bit."""
    import torch
    # a fresh start: the compiles of earlier tests count against dynamo's recompile limit (8 per
    # code object, e.g. nn.Sequential.forward's)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    y_eager = model(x)
    g = torch.randn_like(y_eager)
    eager_grads = torch.autograd.grad(y_eager, list(model.parameters()), g)
    y_comp = compiled(x)
    comp_grads = torch.autograd.grad(y_comp, list(model.parameters()), g)
    assert torch.equal(y_comp, y_eager)
    for a, b in zip(comp_grads, eager_grads):
        assert torch.equal(a, b)
