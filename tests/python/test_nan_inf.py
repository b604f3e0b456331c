"""NaN and Inf in x or w propagate as in torch.nn.functional.conv2d: the same NaN
positions and the same infinities with the same signs, for DIRECT, IM2COL_GEMM, IMPLICIT_GEMM
(and IM2WIN), float32 and float64.

The zero padding counts: an Inf or NaN weight makes every output whose window overlaps the
padding NaN (0 * Inf), as a GEMM over the im2col matrix gives, and as PyTorch's float64 CPU
path gives. PyTorch's float32 CPU path is not consistent there: for some shapes (a 5x5 stride-2
layer, depthwise layers) its oneDNN kernels skip the padding and give Inf instead. So specials
in w are compared with PyTorch in float64 (the same inputs, exactly widened); specials in x,
which never meet the padding, with PyTorch in the tensors' own dtype. What the FFT, Winograd and
cyclic algorithms do instead is in docs/algorithms.md ("NaN and Inf"), checked loosely at the
end."""

import zlib

import numpy as np
import pytest

import convcore
from reference import Problem

torch = pytest.importorskip("torch")

# The direct summations: every forward algorithm that algorithms.def holds to float32's 1e-5,
# but DEPTHWISE and POINTWISE, which run only their own layers and treat the padding their own
# way (test_pointwise_and_depthwise_specials below).
ALGOS = [a.name.lower() for a in convcore.Algo
         if convcore.algorithm_info(a).error_bound_float32 <= 1e-5 and a.name not in ("DEPTHWISE", "POINTWISE")]

PROBLEMS = [
    Problem(1, 3, 8, 8, 4, 3, 3, padding=(1, 1)),
    Problem(2, 4, 9, 7, 5, 3, 3),
    Problem(1, 8, 6, 6, 8, 1, 1),
    Problem(1, 3, 11, 10, 4, 5, 5, padding=(2, 2), stride=(2, 2)),
    Problem(2, 6, 10, 10, 6, 3, 3, padding=(1, 1), groups=6),
    Problem(1, 8, 9, 9, 12, 3, 3, padding=(1, 1), groups=4),
    Problem(1, 4, 12, 12, 4, 3, 3, padding=(2, 2), dilation=(2, 2)),
    Problem(1, 3, 7, 9, 2, 2, 4, padding=(1, 0), mode="convolution"),
    Problem(1, 2, 4, 4, 3, 3, 3, padding=(3, 3)),
]

SPECIALS = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf}


def torch_conv(p, x, w, dtype=None):
    if dtype is not None:
        x, w = x.astype(dtype), w.astype(dtype)
    wt = torch.from_numpy(w.copy())
    if p.mode == "convolution":
        wt = torch.flip(wt, dims=(2, 3))
    return torch.nn.functional.conv2d(torch.from_numpy(x), wt, padding=p.padding, stride=p.stride,
                                      dilation=p.dilation, groups=p.groups).numpy()


def poison(rng, a, value, count=2):
    a = a.copy()
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, size=min(count, flat.size), replace=False)] = value
    return a


def assert_same_specials(y, expected, what):
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(np.isposinf(y), np.isposinf(expected), err_msg=f"{what}: +Inf")
    np.testing.assert_array_equal(np.isneginf(y), np.isneginf(expected), err_msg=f"{what}: -Inf")
    finite = np.isfinite(expected)
    np.testing.assert_allclose(y[finite], expected[finite], rtol=1e-4, atol=1e-4, err_msg=what)


def test_torch_float32_skips_the_padding_for_some_shapes():
    """Why specials in w are compared with PyTorch's float64 path: its float32 path gives Inf
    where float64 (and the im2col GEMM) give NaN (on this machine's oneDNN; it depends on the
    CPU, hence a skip, not a failure, where they agree)."""
    p = PROBLEMS[4]  # depthwise
    x, w = p.inputs("float32")
    w[1, 0, 0, 0] = np.inf
    f32, f64 = torch_conv(p, x, w), torch_conv(p, x, w, "float64")
    if np.isnan(f64).sum() == np.isnan(f32).sum():
        pytest.skip("PyTorch's float32 and float64 paths agree on this machine")
    assert np.isnan(f64).sum() > np.isnan(f32).sum()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("where", ["x", "w", "both"])
@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("algo", ALGOS)
def test_specials_propagate_like_torch(algo, special, where, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{algo} {special} {where} {dtype}".encode()))
    conv_failures = []
    for i, p in enumerate(PROBLEMS):
        x, w = p.inputs(dtype, seed=i)
        if where in ("x", "both"):
            x = poison(rng, x, SPECIALS[special])
        if where in ("w", "both"):
            w = poison(rng, w, SPECIALS[special], count=1)
        expected = torch_conv(p, x, w, None if where == "x" else "float64")
        y = convcore.Convolution(**p.desc_kwargs()).forward(x, w, algo=algo)
        try:
            assert_same_specials(y, expected, f"{algo} {p} {special} in {where}")
        except AssertionError as e:
            conv_failures.append(str(e))
    assert not conv_failures, "\n".join(conv_failures)


def test_y_is_not_read_when_beta_is_zero():
    """beta == 0: NaN or Inf already in out does not leak into the result."""
    p = PROBLEMS[0]
    x, w = p.inputs("float32")
    for algo in convcore.Convolution(**p.desc_kwargs()).applicable_algos(p.x_shape, p.w_shape):
        out = np.full((1, 4, 8, 8), np.nan, np.float32)
        out[0, 0, 0, 0] = np.inf
        y = convcore.Convolution(**p.desc_kwargs()).forward(x, w, algo=algo, out=out)
        assert np.isfinite(y).all(), algo


# The transforms (Winograd, the FFT family, cyclic): the rest of the forward algorithms.
TRANSFORMS = [a.name.lower() for a in convcore.Algo if convcore.algorithm_info(a).error_bound_float32 > 1e-5]


@pytest.mark.parametrize("algo", TRANSFORMS)
def test_transform_algorithms_spread_nan_at_least_as_far(algo):
    """The transform algorithms (docs/algorithms.md): a NaN in x reaches at least the outputs
    that PyTorch makes NaN (no NaN is lost), possibly more (a tile, a row, the whole image)."""
    p = Problem(1, 2, 12, 12, 3, 3, 3, padding=(1, 1))
    x, w = p.inputs("float32")
    x[0, 1, 5, 6] = np.nan
    conv = convcore.Convolution(**p.desc_kwargs())
    if algo not in conv.applicable_algos(p.x_shape, p.w_shape):
        pytest.skip(f"{algo} does not apply")
    y = conv.forward(x, w, algo=algo)
    expected = torch_conv(p, x, w)
    assert np.isnan(y[np.isnan(expected)]).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("special", list(SPECIALS))
def test_pointwise_and_depthwise_specials(special, dtype):
    """POINTWISE multiplies the padding like a GEMM: specials as PyTorch's float64 path.
    DEPTHWISE skips the padding (as PyTorch's float32 oneDNN kernels do): specials in x exactly
    as PyTorch; a special weight makes the same outputs non-finite, but Inf rather than NaN
    where the window overlaps the padding."""
    rng = np.random.default_rng(zlib.crc32(f"{special} {dtype}".encode()))
    cases = [("pointwise", p) for p in PROBLEMS if p.w_shape[2:] == (1, 1)]
    cases += [("pointwise", Problem(1, 4, 6, 6, 5, 1, 1, padding=(1, 1), stride=(2, 2)))]
    cases += [("depthwise", p) for p in PROBLEMS if p.groups == p.x_shape[1]]
    cases += [("depthwise", Problem(1, 4, 9, 8, 8, 5, 5, padding=(2, 2), groups=4))]
    for algo, p in cases:
        x, w = p.inputs(dtype, seed=1)
        conv = convcore.Convolution(**p.desc_kwargs())
        xs = poison(rng, x, SPECIALS[special])
        assert_same_specials(conv.forward(xs, w, algo=algo), torch_conv(p, xs, w), f"{algo} {p} x")
        ws = poison(rng, w, SPECIALS[special], count=1)
        y, expected = conv.forward(x, ws, algo=algo), torch_conv(p, x, ws, "float64")
        if algo == "pointwise":
            assert_same_specials(y, expected, f"{algo} {p} w")
        else:
            np.testing.assert_array_equal(np.isfinite(y), np.isfinite(expected), err_msg=f"{algo} {p} w")
            assert not np.isnan(y[~np.isnan(expected)]).any(), f"{algo} {p} w: a NaN PyTorch does not have"
