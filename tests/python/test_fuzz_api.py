"""Property-based fuzzing of the Python API: random and adversarial shapes, values,
dtypes, layouts and parameters for ConvDesc and Convolution.forward. Every case ends either in
a typed convcore error (BadParamError / NotSupportedError) or in a result equal to the float64
NumPy reference; an independent model of the rules decides which, so a valid problem that is
rejected, or an invalid one that is accepted, fails too. Bounded: a few hundred examples, well
under a minute (also under AddressSanitizer)."""

import math
import sys

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import convcore  # noqa: E402
from convcore import BadParamError, NotSupportedError  # noqa: E402
from reference import (  # noqa: E402
    CLASSIC_ALGOS, conv2d_reference, error_bound, output_size, relative_error)

ALGOS = [a.name.lower() for a in convcore.Algo]
FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- parameters ------------------------------------------------------------------------------

# Mostly small valid ints; sometimes what a careless caller passes.
BAD_SCALARS = [-1, -(2 ** 63), 2 ** 40 + 1, 2 ** 64, 1.5, float("nan"), "2", None, True,
               (1, 2, 3), [], np.int64(-3)]


def param(lo, hi):
    one = st.integers(lo, hi)
    return st.one_of(one, st.tuples(one, one), st.tuples(one), st.tuples(one, one, one),
                     st.sampled_from(BAD_SCALARS))


def spatial_dims(*values):
    """The spatial dimension count valid ConvDesc arguments mean (the sequences' common length,
    else 2), or None when their lengths disagree or are not 1 to 3."""
    lengths = {len(v) for v in values if isinstance(v, (tuple, list))}
    if len(lengths) > 1:
        return None
    dims = lengths.pop() if lengths else 2
    return dims if 1 <= dims <= 3 else None


def as_dims(v, lo, dims):
    """The per-dimension values a valid ConvDesc argument means, or None when it is invalid."""
    def one(e):
        if isinstance(e, bool) or not isinstance(e, (int, np.integer)):
            return None
        e = int(e)
        return e if lo <= e <= 2 ** 40 else None
    if isinstance(v, (tuple, list)):
        if len(v) != dims:
            return None
        values = tuple(one(e) for e in v)
        return None if None in values else values
    e = one(v)
    return None if e is None else (e,) * dims


@FUZZ
@given(padding=param(0, 5), stride=param(1, 3), dilation=param(1, 3),
       groups=st.one_of(st.integers(1, 4), st.sampled_from(BAD_SCALARS)),
       mode=st.sampled_from(["cross_correlation", "convolution", "CONVOLUTION", "", 1, None]))
def test_conv_desc_validates_every_argument(padding, stride, dilation, groups, mode):
    dims = spatial_dims(padding, stride, dilation)
    expect_ok = (dims is not None and as_dims(padding, 0, dims) is not None
                 and as_dims(stride, 1, dims) is not None and as_dims(dilation, 1, dims) is not None
                 and as_dims(groups, 1, 1) is not None and not isinstance(groups, (tuple, list))
                 and mode in ("cross_correlation", "convolution"))
    try:
        d = convcore.ConvDesc(padding=padding, stride=stride, dilation=dilation, groups=groups,
                              mode=mode)
    except BadParamError:
        assert not expect_ok
        return
    assert expect_ok, "ConvDesc accepted invalid arguments"
    assert d.spatial_dims == dims
    assert d.padding == as_dims(padding, 0, dims) and d.stride == as_dims(stride, 1, dims)
    assert d.dilation == as_dims(dilation, 1, dims) and d.groups == int(groups)


# ---- forward -------------------------------------------------------------------------------

DTYPES = ["float32", "float64"]
BAD_DTYPES = ["float16", "int32", "int64", "complex64", "bool", "uint8"]
LAYOUTS = ["contiguous", "nhwc", "strided", "reversed", "fortran", "unaligned", "3d", "5d",
           "empty_batch"]


def make_array(rng, shape, dtype, layout, special):
    """An array of `shape` (as seen by the caller) in `dtype` with the memory `layout`."""
    data = rng.integers(-4, 5, size=shape).astype(np.float64) * 0.5
    if special and data.size:
        flat = data.reshape(-1)
        idx = rng.integers(0, flat.size, size=max(1, flat.size // 20))
        flat[idx] = rng.choice([np.nan, np.inf, -np.inf], size=idx.size)
    if dtype == "bool":
        return data > 0
    data = data.astype(dtype)
    if layout == "nhwc" and data.ndim == 4:
        return np.ascontiguousarray(data.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    if layout == "strided":
        big = np.zeros(tuple(2 * s for s in shape), dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = data
        return view
    if layout == "reversed" and data.ndim >= 1:
        return np.ascontiguousarray(data[..., ::-1])[..., ::-1]
    if layout == "fortran":
        return np.asfortranarray(data)
    if layout == "unaligned" and data.itemsize > 1:
        buf = np.zeros(data.nbytes + 1, np.uint8)
        view = np.frombuffer(buf.data, dtype=data.dtype, count=data.size, offset=1).reshape(shape)
        view.flags.writeable and np.copyto(view, data)
        return view
    return data


@st.composite
def problems(draw):
    # Half the cases are valid problems (checked against the reference); the others break one
    # thing at a time (which one: `bad`), so that each rejection has a single cause.
    bad = draw(st.sampled_from([None] * 6 + ["shape", "dtype", "layout", "algo", "out", "blend"]))
    groups = draw(st.sampled_from([1, 1, 2, 3, "depthwise"]))
    if groups == "depthwise":
        c = draw(st.integers(1, 4))
        groups, k = c, c * draw(st.integers(1, 2))
    else:
        c = groups * draw(st.integers(1, 3))
        k = groups * draw(st.integers(1, 3))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    cg = c // groups
    if bad == "shape":
        edit = draw(st.integers(1, 5))
        if edit == 1:
            c += 1                      # groups no longer divide C (or C/groups mismatches w)
        elif edit == 2:
            cg += 1                     # w's C/groups mismatches
        elif edit == 3:
            k += 1 if groups > 1 else 0  # K not divisible by groups
        elif edit == 4:
            r = h + 7                   # a filter larger than the input (valid with padding)
    x_shape, w_shape = (n, c, h, w), (k, cg, r, s)
    if bad == "shape" and edit == 5:
        x_shape = (n, 0, h, w)          # a zero-size axis
    desc = dict(padding=(draw(st.integers(0, 6)), draw(st.integers(0, 6))),  # may exceed R
                stride=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                dilation=(draw(st.sampled_from([1, 1, 2, 3])), draw(st.integers(1, 2))),
                groups=groups, mode=draw(st.sampled_from(["cross_correlation", "convolution"])))
    dtype = w_dtype = draw(st.sampled_from(DTYPES))
    if bad == "dtype":
        if draw(st.booleans()):
            w_dtype = draw(st.sampled_from(DTYPES + BAD_DTYPES).filter(lambda t: t != dtype))
        else:
            dtype = w_dtype = draw(st.sampled_from(BAD_DTYPES))
    x_layout = draw(st.sampled_from(LAYOUTS[:6]))  # contiguous, nhwc, strided, reversed, fortran, unaligned
    w_layout = draw(st.sampled_from(["contiguous"] * 4 + LAYOUTS[1:6]))
    if bad == "layout":
        x_layout = draw(st.sampled_from(["3d", "5d", "empty_batch"]))
    algo = draw(st.sampled_from(ALGOS + ["auto", "AUTO", " Direct ", convcore.Algo.IMPLICIT_GEMM]))
    if bad == "algo":
        algo = draw(st.sampled_from(["", "fft2", 3, None, 2.0]))
    out_kind = draw(st.sampled_from(["none"] * 3 + ["fresh", "strided"]))
    if bad == "out":
        out_kind = draw(st.sampled_from(["wrong_shape", "wrong_dtype", "readonly"]))
    blend = draw(st.sampled_from([(1.0, 0.0)] * 3 + [(0.5, 0.25), (-2.0, 1.0)]))
    if blend[1] != 0 and out_kind == "none":
        out_kind = "fresh"               # blending needs out=
    if bad == "blend":
        blend = draw(st.sampled_from([(float("nan"), 0.0), (1.0, float("inf")), (0.5, 1.0)]))
        if blend == (0.5, 1.0):
            out_kind = "none"            # beta != 0 without out=
    special = draw(st.sampled_from([None] * 5 + ["x", "w"]))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return (x_shape, w_shape, desc, dtype, w_dtype, x_layout, w_layout, algo, out_kind, blend,
            special, seed)


def model(x_shape, w_shape, desc, dtype, w_dtype, x_layout, w_layout, algo, out_kind, blend):
    """(valid, output shape) by the documented rules, independent of convcore's code."""
    if dtype not in DTYPES or w_dtype != dtype:
        return False, None
    if x_layout in ("3d", "5d") or w_layout in ("3d", "5d"):
        return False, None
    algo_ok = (isinstance(algo, convcore.Algo)
               or (isinstance(algo, str) and algo.strip().lower() in ALGOS + ["auto"]))
    if not algo_ok:
        return False, None
    alpha, beta = blend
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return False, None
    n, c, h, w = x_shape
    k, cg, r, s = w_shape
    g = desc["groups"]
    if x_layout == "empty_batch":
        n = 0
    if c < 1 or c % g or cg != c // g or k % g:
        return False, None
    p = output_size(h, desc["padding"][0], r, desc["stride"][0], desc["dilation"][0])
    q = output_size(w, desc["padding"][1], s, desc["stride"][1], desc["dilation"][1])
    if p < 1 or q < 1:
        return False, None
    shape = (n, k, p, q)
    if out_kind in ("wrong_shape", "wrong_dtype", "readonly"):
        return False, shape
    if beta != 0 and out_kind == "none":
        return False, shape
    return True, shape


@settings(FUZZ, max_examples=600)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN/Inf in the reference and casts
@given(problems())
def test_forward_typed_error_or_correct_result(case):
    (x_shape, w_shape, desc, dtype, w_dtype, x_layout, w_layout, algo, out_kind, blend, special,
     seed) = case
    rng = np.random.default_rng(seed)
    xs = {"3d": x_shape[1:], "5d": x_shape + (1,)}.get(x_layout, x_shape)
    if x_layout == "empty_batch":
        xs = (0,) + x_shape[1:]
    ws = {"3d": w_shape[1:], "5d": w_shape + (1,)}.get(w_layout, w_shape)
    x = make_array(rng, xs, dtype, x_layout, special == "x")
    w = make_array(rng, ws, w_dtype, w_layout, special == "w")
    valid, y_shape = model(x_shape, w_shape, desc, dtype, w_dtype, x_layout, w_layout, algo,
                           out_kind, blend)
    alpha, beta = blend
    out = None
    if y_shape is not None and out_kind != "none":
        odt = dtype if dtype in DTYPES else "float32"
        if out_kind == "wrong_dtype":
            odt = "float64" if odt == "float32" else "float32"
        shape = y_shape if out_kind != "wrong_shape" else y_shape[:3] + (y_shape[3] + 1,)
        out = make_array(rng, shape, odt, "strided" if out_kind == "strided" else "contiguous",
                         False)
        if out_kind == "readonly":
            out.flags.writeable = False
    out_before = None if out is None else np.array(out, dtype=np.float64)

    conv = convcore.Convolution(convcore.ConvDesc(**desc))
    try:
        y = conv.forward(x, w, algo=algo, out=out, alpha=alpha, beta=beta)
    except BadParamError:
        event("BadParamError: " + str(sys.exc_info()[1])[:25])
        assert not valid, "a valid problem was rejected"
        return
    except NotSupportedError:
        event("NotSupportedError")
        assert valid, "an invalid problem got NotSupportedError instead of BadParamError"
        name = algo.name.lower() if isinstance(algo, convcore.Algo) else algo.strip().lower()
        assert name not in CLASSIC_ALGOS, f"{name} must run every valid problem"
        return
    assert valid, "convcore accepted an invalid problem"
    event("result checked" if special is None else "non-finite data")
    assert isinstance(y, np.ndarray) and y.shape == y_shape and y.dtype == np.dtype(dtype)
    if out is not None:
        assert y is out
    if y_shape[0] == 0:
        return
    ref = conv2d_reference(x, w, desc["padding"], desc["stride"], desc["dilation"],
                           desc["groups"], desc["mode"])
    ref = alpha * ref + (beta * out_before if beta != 0 else 0.0)
    name = algo.name.lower() if isinstance(algo, convcore.Algo) else algo.strip().lower()
    if special is None:
        used = name if name != "auto" else None
        bound = error_bound(used, dtype) if used else max(
            error_bound(a, dtype) for a in ALGOS)
        assert relative_error(y, ref) <= bound
    elif special == "x" and name in ("direct", "im2col_gemm", "implicit_gemm"):
        # NaN and Inf in x: the same NaN positions and the same infinities as the reference
        np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
        np.testing.assert_array_equal(np.isposinf(y), np.isposinf(ref))
        np.testing.assert_array_equal(np.isneginf(y), np.isneginf(ref))


# Sizes that overflow or are out of range: 64-bit limits, negative, beyond 64 bits.
HUGE_X = [0, 2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1, -(2 ** 63), 2 ** 63, 2 ** 70]
HUGE_W = [0, 2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1, 2 ** 64]


@st.composite
def shape_queries(draw):
    """(x_shape, w_shape, padding, stride, dilation, dtype). A quarter anything (any rank,
    negative and huge sizes, huge parameters); the others 4-D with matching channels and
    mostly small parameters: mostly problems output_shape accepts, some with huge sizes."""
    dtype = draw(st.sampled_from(["float32", "float64", "float32", "float64", "int8"]))
    if draw(st.integers(0, 3)) == 0:
        x = draw(st.lists(st.one_of(st.integers(-3, 12), st.sampled_from(HUGE_X)), max_size=6))
        w = draw(st.lists(st.one_of(st.integers(-3, 6), st.sampled_from(HUGE_W)), max_size=6))
        return (tuple(x), tuple(w), draw(st.integers(0, 2 ** 40)), draw(st.integers(1, 2 ** 40)),
                draw(st.integers(1, 2 ** 40)), dtype)
    c = draw(st.integers(1, 8))
    h = draw(st.integers(1, 12) if draw(st.integers(0, 5)) else st.sampled_from([2 ** 31, 2 ** 40]))
    x = (draw(st.sampled_from([0, 1, 1, 2, 3])), c, h, draw(st.integers(1, 12)))
    w = (draw(st.integers(1, 8)), c, draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    params = [draw(st.integers(lo, hi)) if draw(st.integers(0, 7)) else draw(st.integers(lo, 2 ** 40))
              for lo, hi in ((0, 3), (1, 3), (1, 2))]
    return (x, w, *params, dtype)


def test_shape_queries_never_crash():
    """output_shape, applicable_algos and workspace_size on huge and nonsense shapes: an
    answer or a typed error, and DIRECT always applicable to what output_shape accepts (with a
    batch; an empty batch has no algorithm to rank): in applicable_algos' list, with a
    workspace size. The run must check that claim on many problems, not on a few."""
    checked = []

    @FUZZ
    @given(shape_queries())
    def check(query):
        x_shape, w_shape, padding, stride, dilation, dtype = query
        conv = convcore.Convolution(padding=padding, stride=stride, dilation=dilation)
        try:
            shape = conv.output_shape(x_shape, w_shape)
        except BadParamError:
            shape = None
        if shape is not None:
            assert len(shape) == 4 and all(d >= 0 for d in shape)
        if shape is not None and dtype != "int8" and x_shape[0] >= 1:
            # The claim: no error here, and DIRECT among the applicable algorithms.
            algos = conv.applicable_algos(x_shape, w_shape, dtype=dtype)
            assert "direct" in algos, (x_shape, w_shape, algos)
            workspace = conv.workspace_size(x_shape, w_shape, "direct", dtype=dtype)
            assert isinstance(workspace, int) and workspace >= 0
            checked.append(shape)
            event("DIRECT checked")
        for call in (lambda: conv.applicable_algos(x_shape, w_shape, dtype=dtype),
                     lambda: conv.workspace_size(x_shape, w_shape, "im2col_gemm", dtype=dtype),
                     lambda: conv.workspace_size(x_shape, w_shape, "fft", dtype=dtype)):
            try:
                result = call()
            except (BadParamError, NotSupportedError):
                continue  # a typed error (the problem is invalid, or not this algorithm's)
            if isinstance(result, list):
                assert "direct" in result and len(set(result)) == len(result)
            else:
                assert isinstance(result, int) and result >= 0

    check()
    # (about 70-120 of the 300 examples check it; before, the claim was checked on almost none)
    assert len(checked) >= 30, f"DIRECT's applicability was checked on {len(checked)} problems only"


# ---- regressions found by the fuzzing above ---------------------------------------------------

def _unaligned(shape, dtype):
    """A writable array whose data starts one byte past an aligned address."""
    n = int(np.prod(shape))
    buf = np.zeros(n * np.dtype(dtype).itemsize + 1, np.uint8)
    return np.frombuffer(buf.data, dtype=dtype, count=n, offset=1).reshape(shape)


def test_unaligned_numpy_inputs_are_copied():
    """np.frombuffer at an odd offset gives unaligned data, which the C API now rejects
    (reading it as floats is undefined): Python inputs are copied to aligned memory."""
    x, w = _unaligned((1, 2, 5, 5), "float32"), _unaligned((3, 2, 3, 3), "float32")
    assert not x.flags.aligned
    x[...] = np.arange(50).reshape(x.shape)
    w[...] = 1
    y = convcore.Convolution().forward(x, w)
    np.testing.assert_allclose(y, conv2d_reference(x, w), rtol=1e-6)
    with pytest.raises(BadParamError, match="out is not aligned"):
        convcore.Convolution().forward(x, w, out=_unaligned((1, 3, 3, 3), "float32"))


def test_empty_batch_still_checks_out():
    """An empty batch computes nothing but out must still be a writable array of x's dtype
    (it was accepted with any dtype, read-only, ...)."""
    x, w = np.ones((0, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    conv = convcore.Convolution()
    assert conv.forward(x, w).shape == (0, 3, 3, 3)
    with pytest.raises(BadParamError, match="dtype float64 does not match"):
        conv.forward(x, w, out=np.empty((0, 3, 3, 3), np.float64))
    ro = np.empty((0, 3, 3, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(BadParamError, match="read-only"):
        conv.forward(x, w, out=ro)
