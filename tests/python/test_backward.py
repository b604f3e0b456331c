"""The backward passes (Convolution.backward_data / backward_filter / backward_bias): every
applicable algorithm against float64 references (NumPy adjoints of reference.py's definition,
and torch.nn.grad.conv2d_input / conv2d_weight), the adjoint identities, alpha/beta with a
NaN-poisoned output, strided and torch inputs, applicability and every error path."""

import zlib

import numpy as np
import pytest

import convcore
from reference import PROBLEMS, Problem, relative_error

DTYPES = [np.float32, np.float64]
SOME_PROBLEMS = PROBLEMS[::3]

CLASSIC = ("direct", "im2col_gemm", "implicit_gemm")


def bound(direction, algo, dtype):
    """The bound ||grad - ref|| / ||ref|| convcore declares for ``algo`` of ``direction``."""
    return convcore.algorithm_info(algo, direction).error_bound(dtype)


def pid(p):
    return str(p)


# ---- NumPy references: the adjoints of reference.conv2d_reference, term for term ------------------

def _geometry(problem, x_shape, w_shape):
    n, c, h, wd = x_shape
    k, cg, r_size, s_size = w_shape
    (ph, pw), (sh, sw), (dh, dw) = problem.padding, problem.stride, problem.dilation
    p_size = (h + 2 * ph - dh * (r_size - 1) - 1) // sh + 1
    q_size = (wd + 2 * pw - dw * (s_size - 1) - 1) // sw + 1
    return n, c, h, wd, k, cg, r_size, s_size, ph, pw, sh, sw, dh, dw, p_size, q_size


def backward_data_reference(problem, dy, w, x_shape):
    """dx for y = conv2d_reference(x, w): the forward's einsum terms, scattered back."""
    dy = np.asarray(dy, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if problem.mode == "convolution":
        w = w[:, :, ::-1, ::-1]
    n, c, h, wd, k, cg, rr, ss, ph, pw, sh, sw, dh, dw, pp, qq = _geometry(problem, x_shape, w.shape)
    g_count, kg = problem.groups, k // problem.groups
    dxp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    for g in range(g_count):
        dyg = dy[:, g * kg:(g + 1) * kg]
        wg = w[g * kg:(g + 1) * kg]
        for r in range(rr):
            for s in range(ss):
                rows = slice(r * dh, r * dh + sh * (pp - 1) + 1, sh)
                cols = slice(s * dw, s * dw + sw * (qq - 1) + 1, sw)
                dxp[:, g * cg:(g + 1) * cg, rows, cols] += np.einsum("nkpq,kc->ncpq", dyg, wg[:, :, r, s])
    return dxp[:, :, ph:ph + h, pw:pw + wd]


def backward_filter_reference(problem, x, dy, w_shape):
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    n, c, h, wd, k, cg, rr, ss, ph, pw, sh, sw, dh, dw, pp, qq = _geometry(problem, x.shape, w_shape)
    g_count, kg = problem.groups, k // problem.groups
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    grad = np.zeros(w_shape)
    for g in range(g_count):
        xg = xp[:, g * cg:(g + 1) * cg]
        dyg = dy[:, g * kg:(g + 1) * kg]
        for r in range(rr):
            for s in range(ss):
                rows = slice(r * dh, r * dh + sh * (pp - 1) + 1, sh)
                cols = slice(s * dw, s * dw + sw * (qq - 1) + 1, sw)
                grad[g * kg:(g + 1) * kg, :, r, s] = np.einsum("ncpq,nkpq->kc", xg[:, :, rows, cols], dyg)
    if problem.mode == "convolution":  # the flipped filter's gradient, flipped back
        grad = grad[:, :, ::-1, ::-1]
    return grad


def inputs(problem, dtype, seed):
    rng = np.random.default_rng(seed)
    x, w = problem.inputs(dtype, seed=seed)
    y_shape = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs())).output_shape(
        x.shape, w.shape)
    dy = rng.uniform(-1, 1, y_shape).astype(dtype)
    return x, w, dy


def seed_of(problem):
    return zlib.crc32(str(problem).encode())


def assert_within(direction, results, ref, dtype, context):
    failures = []
    for algo, got in results.items():
        got = np.asarray(got)
        assert got.dtype == np.dtype(dtype) and got.shape == ref.shape, (algo, got.dtype, got.shape)
        err = relative_error(got, ref)
        if not err <= bound(direction, algo, dtype):  # also catches NaN
            failures.append(f"{algo}: relative error {err:.3g} > {bound(direction, algo, dtype):g}")
    assert not failures, f"{direction} {context}: " + "; ".join(failures)


# ---- the references themselves ------------------------------------------------------------------

@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_references_agree_with_torch(problem, torch):
    """The NumPy adjoints against torch.nn.grad in float64 (independent implementations)."""
    x, w, dy = inputs(problem, np.float64, seed_of(problem))
    wt = torch.from_numpy(w.copy())
    if problem.mode == "convolution":
        wt = torch.flip(wt, dims=(2, 3))
    kw = dict(stride=problem.stride, padding=problem.padding, dilation=problem.dilation,
              groups=problem.groups)
    dx = torch.nn.grad.conv2d_input(x.shape, wt, torch.from_numpy(dy), **kw).numpy()
    dw = torch.nn.grad.conv2d_weight(torch.from_numpy(x), wt.shape, torch.from_numpy(dy), **kw)
    if problem.mode == "convolution":
        dw = torch.flip(dw, dims=(2, 3))
    np.testing.assert_allclose(backward_data_reference(problem, dy, w, x.shape), dx, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(backward_filter_reference(problem, x, dy, w.shape), dw.numpy(),
                               rtol=1e-12, atol=1e-12)


# ---- every algorithm, both directions ------------------------------------------------------------

def applicable(conv, problem, dtype, direction):
    algos = conv.applicable_algos(problem.x_shape, problem.w_shape, dtype=np.dtype(dtype).name,
                                  direction=direction)
    missing = [a for a in CLASSIC if a not in algos]
    assert not missing, f"{direction} applicable_algos for {problem} is {algos}: {missing} missing"
    assert algos[-1] == "direct", algos  # the reference is the last resort
    return algos


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_every_backward_data_algorithm(problem, dtype):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = inputs(problem, dtype, seed_of(problem))
    ref = backward_data_reference(problem, dy, w, x.shape)
    algos = applicable(conv, problem, dtype, "backward_data")
    results = {a: conv.backward_data(dy, w, x.shape, algo=a) for a in algos}
    assert_within("backward_data", results, ref, dtype, problem)
    for a in convcore.BwdDataAlgo:  # the others refuse, with a reason naming the algorithm
        if a.name.lower() not in algos:
            with pytest.raises(convcore.NotSupportedError, match=a.name):
                conv.backward_data(dy, w, x.shape, algo=a)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_every_backward_filter_algorithm(problem, dtype):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = inputs(problem, dtype, seed_of(problem))
    ref = backward_filter_reference(problem, x, dy, w.shape)
    algos = applicable(conv, problem, dtype, "backward_filter")
    results = {a: conv.backward_filter(x, dy, w.shape, algo=a) for a in algos}
    assert_within("backward_filter", results, ref, dtype, problem)
    for a in convcore.BwdFilterAlgo:
        if a.name.lower() not in algos:
            with pytest.raises(convcore.NotSupportedError, match=a.name):
                conv.backward_filter(x, dy, w.shape, algo=a)


def test_fast_algorithms_are_applicable_where_documented():
    """3x3 stride 1: Winograd and the FFT family in both directions; stride 2: only the classics;
    1x1: POINTWISE too."""
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    for direction, winograd in (("backward_data", {"winograd_2x2_3x3", "winograd_4x4_3x3"}),
                                ("backward_filter", {"winograd_3x3_2x2"})):
        algos = conv.applicable_algos((2, 8, 12, 12), (8, 8, 3, 3), direction=direction)
        assert set(algos) == set(CLASSIC) | winograd | {"fft", "fft_tiling", "fine_grained_fft",
                                                        "poly_hankel"}, (direction, algos)
    strided = convcore.Convolution(convcore.ConvDesc(padding=1, stride=2))
    for direction in ("backward_data", "backward_filter"):
        assert set(strided.applicable_algos((1, 4, 9, 9), (4, 4, 3, 3), direction=direction)) == set(CLASSIC)
        pointwise = strided.applicable_algos((1, 4, 9, 9), (4, 4, 1, 1), direction=direction)
        assert set(pointwise) == set(CLASSIC) | {"pointwise"} and pointwise[0] == "pointwise", pointwise


# ---- adjoint identities (an oracle independent of any reference) --------------------------------

@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_adjoint_identities(problem):
    """<conv(x, w), dy> = <x, backward_data(dy, w)> = <w, backward_filter(x, dy)>."""
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = inputs(problem, np.float64, seed_of(problem) + 1)
    lhs = float(np.vdot(conv.forward(x, w, algo="direct"), dy))
    dx = conv.backward_data(dy, w, x.shape, algo="implicit_gemm")
    dw = conv.backward_filter(x, dy, w.shape, algo="im2col_gemm")
    scale = np.abs(x).sum() * np.abs(w).sum() * np.abs(dy).max() + 1.0
    assert abs(lhs - float(np.vdot(x, dx))) <= 1e-12 * scale
    assert abs(lhs - float(np.vdot(w, dw))) <= 1e-12 * scale


# ---- against torch.nn.grad, torch tensors in and out --------------------------------------------

@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_torch_tensors_match_torch_grad(problem, torch):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = (torch.from_numpy(a) for a in inputs(problem, np.float64, seed_of(problem)))
    wt = torch.flip(w, dims=(2, 3)) if problem.mode == "convolution" else w
    kw = dict(stride=problem.stride, padding=problem.padding, dilation=problem.dilation,
              groups=problem.groups)
    ref_dx = torch.nn.grad.conv2d_input(x.shape, wt, dy, **kw)
    ref_dw = torch.nn.grad.conv2d_weight(x, wt.shape, dy, **kw)
    if problem.mode == "convolution":
        ref_dw = torch.flip(ref_dw, dims=(2, 3))
    for algo in conv.applicable_algos(x.shape, w.shape, dtype="float64", direction="backward_data"):
        dx = conv.backward_data(dy, w, x.shape, algo=algo)
        assert isinstance(dx, torch.Tensor) and dx.dtype == torch.float64
        assert relative_error(dx.numpy(), ref_dx.numpy()) <= bound("backward_data", algo, np.float64)
    for algo in conv.applicable_algos(x.shape, w.shape, dtype="float64", direction="backward_filter"):
        dw = conv.backward_filter(x, dy, w.shape, algo=algo)
        assert isinstance(dw, torch.Tensor) and dw.dtype == torch.float64
        assert relative_error(dw.numpy(), ref_dw.numpy()) <= bound("backward_filter", algo, np.float64)
    db = conv.backward_bias(dy)
    assert isinstance(db, torch.Tensor) and tuple(db.shape) == (w.shape[0],)
    np.testing.assert_allclose(db.numpy(), dy.sum(dim=(0, 2, 3)).numpy(), rtol=1e-12, atol=1e-12)


def test_torch_float32_and_strided_grads(torch):
    """float32 against torch's own float64 gradient; channels_last x, a stride-0 (expanded) dy as
    autograd makes for y.sum(), and a transposed view: all read correctly."""
    problem = Problem(2, 6, 11, 10, 4, 3, 3, padding=(1, 1), groups=2)
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, _ = (torch.from_numpy(a) for a in inputs(problem, np.float32, 3))
    x = x.contiguous(memory_format=torch.channels_last)
    dy = torch.ones(1, 1, 1, 1).expand(2, 4, 11, 10)  # strides 0
    kw = dict(padding=1, groups=2)
    ref_dx = torch.nn.grad.conv2d_input(x.shape, w.double(), dy.double(), **kw)
    ref_dw = torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), **kw)
    for algo in ("implicit_gemm", "im2col_gemm", "fft"):
        dx = conv.backward_data(dy, w, x.shape, algo=algo)
        dw = conv.backward_filter(x, dy, w.shape, algo=algo)
        assert dx.dtype == torch.float32 and dw.dtype == torch.float32
        assert relative_error(dx.numpy(), ref_dx.numpy()) <= bound("backward_data", algo, np.float32)
        assert relative_error(dw.numpy(), ref_dw.numpy()) <= bound("backward_filter", algo, np.float32)
    np.testing.assert_allclose(conv.backward_bias(dy).numpy(), np.full(4, 220.0), rtol=1e-6)  # 2 x 11 x 10


# ---- alpha / beta, out=, strided NumPy views -----------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_alpha_beta_and_nan_poisoned_out(dtype):
    problem = Problem(2, 4, 9, 8, 6, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = inputs(problem, dtype, 11)
    ref_dx = backward_data_reference(problem, dy, w, x.shape)
    ref_dw = backward_filter_reference(problem, x, dy, w.shape)
    ref_db = dy.astype(np.float64).sum(axis=(0, 2, 3))
    rng = np.random.default_rng(5)
    for algo in conv.applicable_algos(x.shape, w.shape, dtype=np.dtype(dtype).name, direction="backward_data"):
        algo = convcore.BwdDataAlgo[algo.upper()]
        out = np.full(x.shape, np.nan, dtype)  # beta == 0: never read
        assert conv.backward_data(dy, w, x.shape, algo=algo, out=out, alpha=0.5) is out
        assert relative_error(out, 0.5 * ref_dx) <= bound("backward_data", algo.name.lower(), dtype)
        prev = rng.uniform(-1, 1, x.shape).astype(dtype)
        out = prev.copy()
        conv.backward_data(dy, w, x.shape, algo=algo, out=out, alpha=-2.0, beta=0.75)
        assert relative_error(out, -2.0 * ref_dx + 0.75 * prev) <= bound("backward_data", algo.name.lower(), dtype)
    for algo in conv.applicable_algos(x.shape, w.shape, dtype=np.dtype(dtype).name, direction="backward_filter"):
        algo = convcore.BwdFilterAlgo[algo.upper()]
        out = np.full(w.shape, np.nan, dtype)
        conv.backward_filter(x, dy, w.shape, algo=algo, out=out, alpha=3.0)
        assert relative_error(out, 3.0 * ref_dw) <= bound("backward_filter", algo.name.lower(), dtype)
        prev = rng.uniform(-1, 1, w.shape).astype(dtype)
        out = prev.copy()
        conv.backward_filter(x, dy, w.shape, algo=algo, out=out, alpha=1.0, beta=1.0)
        assert relative_error(out, ref_dw + prev) <= bound("backward_filter", algo.name.lower(), dtype)
    out = np.full(6, np.nan, dtype)
    conv.backward_bias(dy, out=out)
    assert relative_error(out, ref_db) <= (1e-6 if dtype == np.float32 else 1e-14)
    prev = np.arange(6, dtype=dtype)
    out = prev.copy()
    conv.backward_bias(dy, out=out, alpha=2.0, beta=-1.0)
    assert relative_error(out, 2.0 * ref_db - prev) <= (1e-6 if dtype == np.float32 else 1e-14)


def test_strided_numpy_views_in_and_out():
    problem = Problem(2, 4, 10, 9, 6, 3, 3, padding=(1, 1), mode="convolution")
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w, dy = inputs(problem, np.float64, 12)
    big_dy = np.zeros(dy.shape[:3] + (dy.shape[3] * 2,))
    big_dy[..., ::2] = dy
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # channels-last view
    big_out = np.full(x.shape[:3] + (x.shape[3] * 3,), 5.0)
    out = big_out[..., ::3]
    for algo in ("direct", "im2col_gemm", "implicit_gemm", "fft", "winograd_2x2_3x3"):
        conv.backward_data(big_dy[..., ::2], w, x.shape, algo=algo, out=out)
        np.testing.assert_allclose(out, backward_data_reference(problem, dy, w, x.shape), rtol=1e-10,
                                   atol=1e-10)
        assert (big_out[..., 1::3] == 5.0).all() and (big_out[..., 2::3] == 5.0).all()
    for algo in ("direct", "implicit_gemm", "winograd_3x3_2x2", "poly_hankel"):
        dw = conv.backward_filter(x_cl, big_dy[..., ::2], w.shape, algo=algo)
        np.testing.assert_allclose(dw, backward_filter_reference(problem, x, dy, w.shape), rtol=1e-10,
                                   atol=1e-10)
    np.testing.assert_allclose(conv.backward_bias(big_dy[..., ::2]), dy.sum(axis=(0, 2, 3)), rtol=1e-12)
    # KRSC filters (channels-last weights): w read and dw written in place, with alpha/beta
    w_krsc = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    dw_base = np.full((w.shape[0], w.shape[2], w.shape[3], w.shape[1]), 2.0)
    dw_krsc = dw_base.transpose(0, 3, 1, 2)
    for data_algo, algo in (("direct", "direct"), ("implicit_gemm", "implicit_gemm"),
                            ("winograd_2x2_3x3", "winograd_3x3_2x2"), ("fft", "fft")):
        conv.backward_data(dy, w_krsc, x.shape, algo=data_algo, out=out)
        np.testing.assert_allclose(out, backward_data_reference(problem, dy, w, x.shape), rtol=1e-10,
                                   atol=1e-10)
        dw_krsc[...] = 2.0
        conv.backward_filter(x, dy, w.shape, algo=algo, out=dw_krsc, alpha=0.5, beta=-1.0)
        np.testing.assert_allclose(dw_krsc, 0.5 * backward_filter_reference(problem, x, dy, w.shape) - 2.0,
                                   rtol=1e-10, atol=1e-10)


def test_auto_and_empty_batch(monkeypatch):
    monkeypatch.setenv("CONVCORE_AUTO", "heuristic")  # auto = the ranking's first
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    x, w, dy = inputs(Problem(1, 3, 6, 6, 2, 3, 3, padding=(1, 1)), np.float32, 2)
    first = conv.applicable_algos(x.shape, w.shape, direction="backward_data")[0]
    np.testing.assert_array_equal(conv.backward_data(dy, w, x.shape),
                                  conv.backward_data(dy, w, x.shape, algo=first))
    first = conv.applicable_algos(x.shape, w.shape, direction="backward_filter")[0]
    np.testing.assert_array_equal(conv.backward_filter(x, dy, w.shape),
                                  conv.backward_filter(x, dy, w.shape, algo=first))
    # an empty batch: dx is empty, dw and db are empty sums (zeros, or beta * out)
    dx = conv.backward_data(dy[:0], w, (0, 3, 6, 6))
    assert dx.shape == (0, 3, 6, 6)
    assert (conv.backward_filter(x[:0], dy[:0], w.shape) == 0).all()
    out = np.ones(w.shape, np.float32)
    conv.backward_filter(x[:0], dy[:0], w.shape, out=out, beta=0.5)
    assert (out == 0.5).all()
    assert (conv.backward_bias(dy[:0]) == 0).all()


def test_workspace_sizes_and_directions():
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    xs, ws = (2, 8, 12, 12), (8, 8, 3, 3)
    for direction, enum_cls in (("backward_data", convcore.BwdDataAlgo),
                                ("backward_filter", convcore.BwdFilterAlgo)):
        for algo in conv.applicable_algos(xs, ws, direction=direction):
            size = conv.workspace_size(xs, ws, algo, direction=direction)
            assert size == conv.workspace_size(xs, ws, enum_cls[algo.upper()], direction=direction)
            assert size >= 0
        assert conv.workspace_size(xs, ws, "direct", direction=direction) == 0
        auto = conv.workspace_size(xs, ws, "auto", direction=direction)
        assert auto == conv.workspace_size(xs, ws, conv.applicable_algos(xs, ws, direction=direction)[0],
                                           direction=direction)
    assert conv.workspace_size(xs, ws, "im2col_gemm", direction="backward_data") == 8 * 9 * 144 * 4
    strided = convcore.Convolution(convcore.ConvDesc(padding=1, stride=2))
    with pytest.raises(convcore.NotSupportedError, match="stride"):
        strided.workspace_size(xs, ws, "fft", direction="backward_filter")
    with pytest.raises(convcore.BadParamError, match="direction"):
        conv.applicable_algos(xs, ws, direction="backward")
    with pytest.raises(convcore.BadParamError, match="BwdFilterAlgo"):
        conv.workspace_size(xs, ws, "winograd_2x2_3x3", direction="backward_filter")
    # enum members of another direction are accepted by name
    assert conv.workspace_size(xs, ws, convcore.Algo.FFT, direction="backward_data") == \
        conv.workspace_size(xs, ws, "fft", direction="backward_data")


# ---- errors --------------------------------------------------------------------------------------

def test_error_paths():
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    x, w, dy = inputs(Problem(2, 4, 7, 7, 6, 3, 3, padding=(1, 1)), np.float32, 4)
    with pytest.raises(convcore.BadParamError, match="dy: expected shape"):
        conv.backward_data(dy[:, :, :5], w, x.shape)
    with pytest.raises(convcore.BadParamError, match="dy: expected shape"):
        conv.backward_filter(x, dy[:, :4], w.shape)
    with pytest.raises(convcore.BadParamError, match="x_shape"):
        conv.backward_data(dy, w, (2, 4, 7))
    with pytest.raises(convcore.BadParamError, match="w_shape"):
        conv.backward_filter(x, dy, (6, 4, 3))
    with pytest.raises(convcore.BadParamError, match="does not match"):
        conv.backward_data(dy.astype(np.float64), w, x.shape)
    with pytest.raises(convcore.BadParamError, match="does not match"):
        conv.backward_filter(x, dy.astype(np.float64), w.shape)
    with pytest.raises(convcore.BadParamError, match="not supported"):
        conv.backward_data(dy.astype(np.int32), w, x.shape)
    with pytest.raises(convcore.BadParamError, match="beta"):
        conv.backward_data(dy, w, x.shape, beta=1.0)
    with pytest.raises(convcore.BadParamError, match="beta"):
        conv.backward_bias(dy, beta=2.0)
    with pytest.raises(convcore.BadParamError, match="out"):
        conv.backward_data(dy, w, x.shape, out=np.zeros((2, 4, 7, 6), np.float32))
    with pytest.raises(convcore.BadParamError, match="out"):
        conv.backward_filter(x, dy, w.shape, out=np.zeros((6, 4, 3, 2), np.float32))
    with pytest.raises(convcore.BadParamError, match="out"):
        conv.backward_bias(dy, out=np.zeros(5, np.float32))
    with pytest.raises(convcore.BadParamError, match="out: dtype"):
        conv.backward_bias(dy, out=np.zeros(6, np.float64))
    ro = np.zeros(x.shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(convcore.BadParamError, match="read-only"):
        conv.backward_data(dy, w, x.shape, out=ro)
    with pytest.raises(convcore.BadParamError, match="unknown BwdDataAlgo"):
        conv.backward_data(dy, w, x.shape, algo="im2win")
    with pytest.raises(convcore.BadParamError, match="alpha"):
        conv.backward_filter(x, dy, w.shape, alpha=float("nan"))
    with pytest.raises(convcore.BadParamError, match="4-D"):
        conv.backward_bias(dy[0])
    with pytest.raises(convcore.BadParamError):
        conv.backward_data(dy, w[:, :3], x.shape)  # w's C/groups does not match x_shape
    # NotSupported with the algorithm named, and a subclass relation the user can rely on
    strided = convcore.Convolution(convcore.ConvDesc(padding=1, stride=2))
    xs, _, dys = inputs(Problem(1, 4, 9, 9, 6, 3, 3, padding=(1, 1), stride=(2, 2)), np.float32, 1)
    with pytest.raises(convcore.NotSupportedError, match="algo=poly_hankel.*stride"):
        strided.backward_data(dys, w, xs.shape, algo="poly_hankel")
    with pytest.raises(convcore.NotSupportedError, match="WINOGRAD_3X3_2X2.*stride"):
        strided.backward_filter(xs, dys, w.shape, algo=convcore.BwdFilterAlgo.WINOGRAD_3X3_2X2)
    assert issubclass(convcore.BadParamError, ValueError)
