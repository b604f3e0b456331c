"""The NumPy-level API in 1 and 3 spatial dimensions (ConvDesc(spatial_dims=...)): every pass
against the float64 reference (reference.convnd_reference), alpha and beta, mode "convolution",
the algorithms that serve each, and the errors."""

import numpy as np
import pytest

import convcore
from reference import CLASSIC_ALGOS, convnd_reference, relative_error

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-10  # float64

# (x shape, w shape, padding, stride, dilation, groups)
PROBLEMS = [
    ((2, 4, 13), (6, 2, 3), (1,), (2,), (2,), 2),
    ((1, 3, 9), (5, 3, 1), (0,), (1,), (1,), 1),                 # 1 x 1
    ((3, 2, 7), (4, 2, 9), (4,), (1,), (1,), 1),                 # filter longer than the input
    ((2, 4, 6, 5, 7), (6, 2, 3, 3, 2), (1, 0, 1), (2, 1, 2), (1, 2, 1), 2),
    ((1, 3, 5, 6, 6), (4, 3, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),   # 3x3x3 stride 1
    ((1, 2, 4, 4, 4), (3, 2, 5, 1, 1), (2, 0, 0), (3, 1, 1), (1, 1, 1), 1),   # taps on padding only
    ((2, 4, 5, 4, 6), (4, 1, 3, 3, 3), (1, 1, 1), (1, 2, 1), (2, 1, 1), 4),   # depthwise
]


def ids(p):
    return f"{len(p[0]) - 2}d_x{'x'.join(map(str, p[0]))}_w{'x'.join(map(str, p[1]))}_g{p[5]}"


def arrays(problem, seed=0):
    rng = np.random.default_rng(seed)
    x_shape, w_shape = problem[:2]
    return rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, w_shape)


SCHEDULES = ["auto", "taps", "stacked"]  # 3-D: convcore/_nd.py's schedules


def with_schedule(conv, schedule):
    if conv._nd is not None and conv.desc.spatial_dims == 3:
        conv._nd.schedule = schedule
    return conv


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", PROBLEMS, ids=ids)
def test_every_pass_matches_the_reference(problem, mode, schedule):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    if x.ndim == 3 and schedule != "auto":
        pytest.skip("1-D has one schedule")
    conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                              groups=groups, mode=mode), schedule)
    assert conv.desc.spatial_dims == x.ndim - 2
    y_ref, backward_data, backward_filter = convnd_reference(x, w, padding, stride, dilation,
                                                             groups, mode)
    assert conv.output_shape(x.shape, w.shape) == y_ref.shape
    dy = np.random.default_rng(1).uniform(-1, 1, y_ref.shape)
    for algo in ("auto",) + CLASSIC_ALGOS:
        assert relative_error(conv.forward(x, w, algo=algo), y_ref) <= TOL
        assert relative_error(conv.backward_data(dy, w, x.shape, algo=algo), backward_data(dy)) <= TOL
        assert relative_error(conv.backward_filter(x, dy, w.shape, algo=algo), backward_filter(dy)) <= TOL
    sum_axes = (0,) + tuple(range(2, dy.ndim))
    assert relative_error(conv.backward_bias(dy), dy.sum(axis=sum_axes)) <= TOL


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("problem", [PROBLEMS[0], PROBLEMS[3]], ids=ids)
def test_alpha_beta_and_out(problem, schedule):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                              groups=groups), schedule)
    y_ref, backward_data, backward_filter = convnd_reference(x, w, padding, stride, dilation, groups)
    dy = np.random.default_rng(1).uniform(-1, 1, y_ref.shape)
    out = np.random.default_rng(2).uniform(-1, 1, y_ref.shape)
    expected = 0.5 * y_ref + 2.0 * out
    assert conv.forward(x, w, out=out, alpha=0.5, beta=2.0) is out
    assert relative_error(out, expected) <= TOL
    dx = np.full(x.shape, np.nan)  # beta == 0 never reads out
    conv.backward_data(dy, w, x.shape, out=dx)
    assert relative_error(dx, backward_data(dy)) <= TOL
    dw = np.ones(w.shape)
    conv.backward_filter(x, dy, w.shape, out=dw, alpha=2.0, beta=-1.0)
    assert relative_error(dw, 2.0 * backward_filter(dy) - 1.0) <= TOL


# The "native" schedule: one C API call on the 5-D arrays, which runs the C API's 3-D Winograd
# (cpu/winograd_3d.hpp) for T x 3 x 3 filters with enough channels (17: past a vector, odd), and
# its decomposition with fewer (3).
NATIVE_PROBLEMS = [
    ((2, 17, 5, 7, 6), (19, 17, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((1, 17, 6, 5, 9), (8, 17, 2, 3, 3), (2, 0, 1), (2, 1, 1), (2, 1, 1)),
    ((1, 3, 4, 5, 5), (4, 3, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ((1, 16, 7, 6, 5), (17, 16, 3, 3, 3), (2, 0, 2), (1, 1, 1), (1, 1, 1)),
]


@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", NATIVE_PROBLEMS, ids=lambda p: "x" + "x".join(map(str, p[0])))
def test_native_schedule_matches_the_reference(problem, mode):
    x_shape, w_shape, padding, stride, dilation = problem
    rng = np.random.default_rng(4)
    x, w = rng.uniform(-1, 1, x_shape), rng.uniform(-1, 1, w_shape)
    y_ref = convnd_reference(x, w, padding, stride, dilation, 1, mode)[0]
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                                  mode=mode), "native")
        xd, wd = x.astype(dtype), w.astype(dtype)
        channels_last = np.ascontiguousarray(xd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
        for algo in ("auto", "winograd_4x4_3x3", "winograd_2x2_3x3"):
            for inputs, filter_version in ((xd, None), (channels_last, "check"), (channels_last, 7)):
                assert relative_error(conv.forward(inputs, wd, algo=algo, filter_version=filter_version),
                                      y_ref) <= tol
        out = rng.uniform(-1, 1, y_ref.shape).astype(dtype)
        expected = 0.5 * y_ref + 2.0 * out
        conv.forward(xd, wd, out=out, alpha=0.5, beta=2.0, bias=np.ones(w_shape[0], dtype))
        assert relative_error(out, expected + 0.5) <= tol
        # a kept filter (filter_version "check") follows a change of w in place
        kept = wd.copy()
        conv.forward(channels_last, kept, filter_version="check")
        kept *= -1
        assert relative_error(conv.forward(channels_last, kept, filter_version="check"), -y_ref) <= tol
        if stride != (1, 1, 1):
            continue
        # backward data, stride 1: the forward Winograd of dy by w transposed (C x K), mirrored
        dy = rng.uniform(-1, 1, y_ref.shape)
        dx_ref = convnd_reference(x, w, padding, stride, dilation, 1, mode)[1](dy)
        dyd = dy.astype(dtype)
        dy_last = np.ascontiguousarray(dyd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
        for algo in ("auto", "winograd_4x4_3x3", "winograd_2x2_3x3"):
            for grad in (dyd, dy_last):
                assert relative_error(conv.backward_data(grad, wd, x_shape, algo=algo), dx_ref) <= tol
        dx = rng.uniform(-1, 1, x_shape).astype(dtype)
        expected = 2.0 * dx_ref - dx
        conv.backward_data(dy_last, wd, x_shape, out=dx, alpha=2.0, beta=-1.0)
        assert relative_error(dx, expected) <= tol


# The "native" schedule with algo "fft": the C API's 3-D FFT (cpu/fft_3d.hpp) on 5-D arrays in
# either memory order; any plane filter, padding, stride, dilation and groups forward, backward
# data with stride 1 and one group (dilation too).
FFT_PROBLEMS = [
    ((2, 3, 7, 6, 5), (4, 3, 5, 3, 5), (2, 1, 2), (1, 1, 1), (1, 1, 1), 1),
    ((1, 4, 9, 7, 8), (6, 2, 3, 3, 3), (1, 1, 1), (2, 1, 3), (2, 1, 1), 2),
    ((1, 2, 6, 5, 4), (3, 2, 3, 2, 3), (4, 1, 2), (1, 1, 1), (2, 2, 1), 1),
]


@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", FFT_PROBLEMS, ids=ids)
def test_native_fft_matches_the_reference(problem, mode):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    y_ref, backward_data, _ = convnd_reference(x, w, padding, stride, dilation, groups, mode)
    dy = np.random.default_rng(5).uniform(-1, 1, y_ref.shape)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                                  groups=groups, mode=mode), "native")
        xd, wd, dyd = x.astype(dtype), w.astype(dtype), dy.astype(dtype)
        for a in (xd, np.ascontiguousarray(xd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)):
            assert relative_error(conv.forward(a, wd, algo="fft"), y_ref) <= tol
        out = np.random.default_rng(6).uniform(-1, 1, y_ref.shape).astype(dtype)
        expected = 0.5 * y_ref + 2.0 * out
        conv.forward(xd, wd, algo="fft", out=out, alpha=0.5, beta=2.0)
        assert relative_error(out, expected) <= tol
        if stride != (1, 1, 1) or groups != 1:
            with pytest.raises(convcore.NotSupportedError, match="native"):
                conv.backward_data(dyd, wd, x.shape, algo="fft")
            continue
        dy_last = np.ascontiguousarray(dyd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
        for grad in (dyd, dy_last):
            assert relative_error(conv.backward_data(grad, wd, x.shape, algo="fft"),
                                  backward_data(dy)) <= tol


# The "native" schedule with algo "cyclic_minimal": the C API's CYCLIC_MINIMAL nested over the
# depth (cpu/cyclic_minimal_3d.hpp), 2 or 3 depth taps over enough output depths, on 5-D arrays in
# either memory order; groups. It is a forward algorithm: backward data has no native schedule.
CYCLIC_PROBLEMS = [
    ((1, 3, 8, 6, 5), (4, 3, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
    ((2, 4, 9, 5, 7), (6, 2, 2, 2, 2), (0, 1, 0), (1, 1, 1), (1, 1, 1), 2),
]


@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", CYCLIC_PROBLEMS, ids=ids)
def test_native_cyclic_matches_the_reference(problem, mode):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    y_ref, _, _ = convnd_reference(x, w, padding, stride, dilation, groups, mode)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                                  groups=groups, mode=mode), "native")
        xd, wd = x.astype(dtype), w.astype(dtype)
        for a in (xd, np.ascontiguousarray(xd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)):
            assert relative_error(conv.forward(a, wd, algo="cyclic_minimal"), y_ref) <= tol
        out = np.random.default_rng(6).uniform(-1, 1, y_ref.shape).astype(dtype)
        expected = 0.5 * y_ref + 2.0 * out
        conv.forward(xd, wd, algo="cyclic_minimal", out=out, alpha=0.5, beta=2.0)
        assert relative_error(out, expected) <= tol
        with pytest.raises(convcore.NotSupportedError, match="native"):
            conv.backward_data(y_ref.astype(dtype), wd, x.shape, algo="cyclic_minimal")


# The "native" schedule's backward data where the outputs' windows are disjoint (in every axis a
# stride of at least the filter size): IM2COL_GEMM's GEMM and scatter (cpu/im2col_gemm_nd.hpp),
# for algo "auto" and "im2col_gemm". ConvTranspose3d(k=2, s=2)'s problem with an uncovered last
# plane, row and column; 1x1x1 stride 2 with groups; a stride above the filter with padding.
DISJOINT_PROBLEMS = [
    ((2, 3, 7, 6, 5), (4, 3, 2, 2, 2), (0, 0, 0), (2, 2, 2), (1, 1, 1), 1),
    ((1, 4, 5, 7, 6), (6, 2, 1, 1, 1), (0, 0, 0), (2, 2, 2), (1, 1, 1), 2),
    ((1, 2, 8, 7, 9), (3, 2, 2, 3, 1), (1, 1, 0), (3, 3, 2), (1, 1, 2), 1),
]


@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", DISJOINT_PROBLEMS, ids=ids)
def test_native_disjoint_backward_data_matches_the_reference(problem, mode):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    y_ref, backward_data, _ = convnd_reference(x, w, padding, stride, dilation, groups, mode)
    dy = np.random.default_rng(5).uniform(-1, 1, y_ref.shape)
    dx_ref = backward_data(dy)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                                  groups=groups, mode=mode), "native")
        wd, dyd = w.astype(dtype), dy.astype(dtype)
        for algo in ("auto", "im2col_gemm"):
            for a in (dyd, np.ascontiguousarray(dyd.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)):
                assert relative_error(conv.backward_data(a, wd, x.shape, algo=algo), dx_ref) <= tol
        out = np.random.default_rng(6).uniform(-1, 1, x.shape).astype(dtype)
        expected = 0.5 * dx_ref + 2.0 * out
        conv.backward_data(dyd, wd, x.shape, algo="im2col_gemm", out=out, alpha=0.5, beta=2.0)
        assert relative_error(out, expected) <= tol
        with pytest.raises(convcore.NotSupportedError, match="native"):
            conv.backward_data(dyd, wd, x.shape, algo="direct")


# The "native" schedule's backward filter: the 3-D IM2COL_GEMM (cpu/im2col_gemm_nd.hpp) for algo
# "auto" and "im2col_gemm", on any windows (overlapping, strided, dilated, grouped, disjoint), x
# and dy in either memory order, out packed or not (then the gradient is added into it).
@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", FFT_PROBLEMS + DISJOINT_PROBLEMS, ids=ids)
def test_native_backward_filter_matches_the_reference(problem, mode):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    y_ref, _, backward_filter = convnd_reference(x, w, padding, stride, dilation, groups, mode)
    dy = np.random.default_rng(5).uniform(-1, 1, y_ref.shape)
    dw_ref = backward_filter(dy)
    last = (0, 2, 3, 4, 1)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                                  groups=groups, mode=mode), "native")
        xd, dyd = x.astype(dtype), dy.astype(dtype)
        for algo in ("auto", "im2col_gemm"):
            for a, b in ((xd, dyd), (np.ascontiguousarray(xd.transpose(last)).transpose(0, 4, 1, 2, 3),
                                     np.ascontiguousarray(dyd.transpose(last)).transpose(0, 4, 1, 2, 3))):
                assert relative_error(conv.backward_filter(a, b, w.shape, algo=algo), dw_ref) <= tol
        for out in (np.random.default_rng(6).uniform(-1, 1, w.shape).astype(dtype),
                    np.asfortranarray(np.random.default_rng(7).uniform(-1, 1, w.shape).astype(dtype))):
            expected = 0.5 * dw_ref + 2.0 * out
            conv.backward_filter(xd, dyd, w.shape, algo="im2col_gemm", out=out, alpha=0.5, beta=2.0)
            assert relative_error(out, expected) <= tol
        with pytest.raises(convcore.NotSupportedError, match="native"):
            conv.backward_filter(xd, dyd, w.shape, algo="direct")


# The "merged" schedule: T x 1 x 1 filters, stride 1 and padding 0 in H and W, as the 2-D problem
# on N x C x D x (H*W) (every pass).
MERGED_PROBLEMS = [
    ((1, 2, 4, 4, 4), (3, 2, 5, 1, 1), (2, 0, 0), (3, 1, 1), (1, 1, 1), 1),
    ((2, 4, 7, 3, 5), (6, 2, 3, 1, 1), (2, 0, 0), (2, 1, 1), (2, 1, 1), 2),
    ((1, 3, 5, 2, 3), (4, 3, 3, 1, 1), (1, 0, 0), (1, 1, 1), (1, 3, 2), 1),
]


@pytest.mark.parametrize("mode", ["cross_correlation", "convolution"])
@pytest.mark.parametrize("problem", MERGED_PROBLEMS, ids=ids)
def test_merged_schedule_matches_the_reference(problem, mode):
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                              groups=groups, mode=mode), "merged")
    y_ref, backward_data, backward_filter = convnd_reference(x, w, padding, stride, dilation,
                                                             groups, mode)
    dy = np.random.default_rng(1).uniform(-1, 1, y_ref.shape)
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
    for algo in ("auto",) + CLASSIC_ALGOS:
        for inputs, filter_version in ((x, None), (channels_last, "check")):
            assert relative_error(conv.forward(inputs, w, algo=algo, filter_version=filter_version),
                                  y_ref) <= TOL
        assert relative_error(conv.backward_data(dy, w, x.shape, algo=algo), backward_data(dy)) <= TOL
        assert relative_error(conv.backward_filter(x, dy, w.shape, algo=algo), backward_filter(dy)) <= TOL
    out = np.random.default_rng(2).uniform(-1, 1, y_ref.shape)
    expected = 0.5 * y_ref + 2.0 * out
    conv.forward(x, w, out=out, alpha=0.5, beta=2.0)
    assert relative_error(out, expected) <= TOL
    dx = np.random.default_rng(3).uniform(-1, 1, x.shape)
    expected = 2.0 * backward_data(dy) - dx
    conv.backward_data(dy, w, x.shape, out=dx, alpha=2.0, beta=-1.0)
    assert relative_error(dx, expected) <= TOL
    dw = np.ones(w.shape)
    conv.backward_filter(x, dy, w.shape, out=dw, alpha=2.0, beta=-1.0)
    assert relative_error(dw, 2.0 * backward_filter(dy) - 1.0) <= TOL
    planes = with_schedule(convcore.Convolution(padding=1, spatial_dims=3), "merged")
    with pytest.raises(convcore.NotSupportedError, match="merged"):  # 3 x 3 planes
        planes.forward(np.ones((1, 2, 4, 4, 4)), np.ones((3, 2, 3, 3, 3)))


def test_native_schedule_only_where_it_applies():
    x, w = arrays(PROBLEMS[3])  # groups 2, 3 x 2 planes, stride 2 in W
    conv = with_schedule(convcore.Convolution(padding=(1, 0, 1), stride=(2, 1, 2), dilation=(1, 2, 1),
                                              groups=2), "native")
    with pytest.raises(convcore.NotSupportedError, match="native"):
        conv.forward(x, w, algo="direct")
    # ... where "auto" is the 3-D IM2COL_GEMM (no Winograd for these planes)
    y_ref = convnd_reference(x, w, (1, 0, 1), (2, 1, 2), (1, 2, 1), 2)[0]
    assert relative_error(conv.forward(x, w), y_ref) <= TOL
    x, w = arrays(PROBLEMS[4])
    conv = with_schedule(convcore.Convolution(padding=1, spatial_dims=3), "native")
    dy = np.ones(conv.output_shape(x.shape, w.shape))
    with pytest.raises(convcore.NotSupportedError, match="native"):  # IM2COL_GEMM's only
        conv.backward_filter(x, dy, w.shape, algo="implicit_gemm")
    with pytest.raises(convcore.NotSupportedError, match="native"):
        conv.forward(x, w, algo="implicit_gemm")
    strided = with_schedule(convcore.Convolution(padding=1, stride=(2, 1, 1)), "native")
    dy = np.ones(strided.output_shape(x.shape, w.shape))
    with pytest.raises(convcore.NotSupportedError, match="native"):  # backward data: stride 1 only
        strided.backward_data(dy, w, x.shape)


def test_minimal_algorithms_serve_3x3x3_and_1d_with_3_taps():
    x, w = arrays(PROBLEMS[4])
    conv = convcore.Convolution(padding=1, spatial_dims=3)
    assert "winograd_4x4_3x3" in conv.applicable_algos(x.shape, w.shape)
    y_ref = convnd_reference(x, w, (1, 1, 1), (1, 1, 1), (1, 1, 1))[0]
    assert relative_error(conv.forward(x, w, algo="winograd_4x4_3x3"), y_ref) <= 1e-9
    x1, w1 = arrays(PROBLEMS[0])
    conv1 = convcore.Convolution(padding=(1,), stride=(2,), dilation=(2,), groups=2)
    assert "winograd_2x2_3x3" not in conv1.applicable_algos(x1.shape, w1.shape)
    with pytest.raises(convcore.NotSupportedError):
        conv1.forward(x1, w1, algo="winograd_2x2_3x3")
    assert conv1.workspace_size(x1.shape, w1.shape, "im2col_gemm") > 0
    # 1-D, 3 taps, stride 1: F(2,3), F(4,3) and the 4-point cyclic convolution along the signal,
    # both layouts, and backward data
    rng = np.random.default_rng(3)
    for length, padding, groups in ((1, 1, 1), (13, 0, 1), (29, 2, 2), (40, 1, 3)):
        x, w = rng.uniform(-1, 1, (2, 6, length)), rng.uniform(-1, 1, (12, 6 // groups, 3))
        if length + 2 * padding < 3:
            continue
        conv = convcore.Convolution(padding=(padding,), groups=groups, mode="convolution")
        y_ref, backward_data, _ = convnd_reference(x, w, (padding,), (1,), (1,), groups, "convolution")
        dy = rng.uniform(-1, 1, y_ref.shape)
        for algo in ("winograd_2x2_3x3", "winograd_4x4_3x3", "cyclic_minimal"):
            assert algo in conv.applicable_algos(x.shape, w.shape)
            assert relative_error(conv.forward(x, w, algo=algo), y_ref) <= 1e-12
            channels_last = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
            assert relative_error(conv.forward(channels_last, w, algo=algo), y_ref) <= 1e-12
            if algo != "cyclic_minimal":  # (no backward pass of its own)
                assert relative_error(conv.backward_data(dy, w, x.shape, algo=algo),
                                      backward_data(dy)) <= 1e-12


def test_errors_name_the_argument():
    with pytest.raises(convcore.BadParamError, match="different numbers of spatial dimensions"):
        convcore.ConvDesc(padding=(1, 1, 1), stride=(1, 1))
    with pytest.raises(convcore.BadParamError, match="spatial_dims"):
        convcore.ConvDesc(spatial_dims=4)
    with pytest.raises(convcore.BadParamError, match="padding"):
        convcore.ConvDesc(padding=(1, 2), spatial_dims=3)
    conv = convcore.Convolution(padding=1, spatial_dims=3)
    x, w = arrays(PROBLEMS[4])
    with pytest.raises(convcore.BadParamError, match="x: expected 5 sizes"):
        conv.forward(x[0], w)
    with pytest.raises(convcore.NotSupportedError, match="epilogue"):
        conv.forward(x, w, activation="relu")
    with pytest.raises(convcore.NotSupportedError, match="find"):
        conv.find(x, w)
    with pytest.raises(convcore.BadParamError, match="dy: expected shape"):
        conv.backward_data(np.zeros((1, 4, 2, 2, 2)), w, x.shape)
    with pytest.raises(convcore.BadParamError, match="output depth"):
        convcore.Convolution(spatial_dims=3).output_shape((1, 3, 2, 6, 6), (4, 3, 3, 3, 3))


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("problem", [PROBLEMS[3], PROBLEMS[4]], ids=ids)
def test_3d_outputs_in_channels_last_memory(problem, schedule):
    """x, dy and out in N x D x H x W x C memory run in place; beta = 0 never reads out."""
    x, w = arrays(problem)
    _, _, padding, stride, dilation, groups = problem
    conv = with_schedule(convcore.Convolution(padding=padding, stride=stride, dilation=dilation,
                                              groups=groups), schedule)
    y_ref, backward_data, _ = convnd_reference(x, w, padding, stride, dilation, groups)

    def ndhwc(shape, fill):
        n, c, d, h, wd = shape
        return np.full((n, d, h, wd, c), fill).transpose(0, 4, 1, 2, 3)
    x_cl = ndhwc(x.shape, 0.0)
    x_cl[...] = x
    out = ndhwc(y_ref.shape, np.nan)
    assert conv.forward(x_cl, w, out=out) is out and relative_error(out, y_ref) <= TOL
    out[...] = 1.0
    conv.forward(x_cl, w, out=out, alpha=2.0, beta=0.5)
    assert relative_error(out, 2.0 * y_ref + 0.5) <= TOL
    dy = ndhwc(y_ref.shape, 0.0)
    dy[...] = np.random.default_rng(1).uniform(-1, 1, y_ref.shape)
    dx = ndhwc(x.shape, np.nan)
    conv.backward_data(dy, w, x.shape, out=dx)
    assert relative_error(dx, backward_data(np.ascontiguousarray(dy))) <= TOL


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_3d_forward_keeps_its_filters_while_w_stays_the_same(schedule):
    """With a filter_version the 3-D forward keeps the filters it makes from w (a 2-D
    Convolution per tap, or one for the stacked filter) and makes them again when w's bytes
    ("check") or the caller's number change."""
    problem = PROBLEMS[4]  # 3x3x3, stride 1: every tap reaches an output depth
    x, w = arrays(problem)
    conv = with_schedule(convcore.Convolution(padding=(1, 1, 1)), schedule)

    def reference():
        return convnd_reference(x, w, (1, 1, 1), (1, 1, 1), (1, 1, 1), 1, "cross_correlation")[0]

    for algo in ("auto", "direct", "winograd_4x4_3x3"):
        conv._nd._kept = {}
        assert relative_error(conv.forward(x, w, algo=algo, filter_version="check"), reference()) <= TOL
        kept = conv._nd._kept
        assert relative_error(conv.forward(x, w, algo=algo, filter_version="check"), reference()) <= TOL
        assert conv._nd._kept is kept  # nothing made again
        if schedule != "auto":
            assert len(kept["planes"]) == (1 if schedule == "stacked" else 3)
        w *= -2  # in place: the fingerprint changes
        assert relative_error(conv.forward(x, w, algo=algo, filter_version="check"), reference()) <= TOL
        assert conv._nd._kept is not kept
        assert relative_error(conv.forward(x, w, algo=algo, filter_version=7), reference()) <= TOL
        w += 1  # the caller's number names the contents: a new number after a change
        assert relative_error(conv.forward(x, w, algo=algo, filter_version=8), reference()) <= TOL
        assert relative_error(conv.forward(x, w, algo=algo), reference()) <= TOL  # per call


def test_auto_leaves_out_the_schedules_an_explicit_algo_cannot_run():
    # T x 1 x 1 filters: "taps" and "stacked" run 1 x 1 planes, which no Winograd takes; "merged"
    # runs the T x 1 filter over N x C x D x (H*W), which the CPU Winograd takes along D
    x, w = arrays(((1, 4, 7, 3, 5), (3, 4, 3, 1, 1)))
    y_ref = convnd_reference(x, w, (1, 0, 0), (1, 1, 1), (1, 1, 1))[0]
    conv = convcore.Convolution(padding=(1, 0, 0), spatial_dims=3)
    for _ in range(2):  # on first sight (timed) and after
        assert relative_error(conv.forward(x, w, algo="winograd_4x4_3x3"), y_ref) <= 1e-9
    chosen = [v for k, v in conv._nd._chosen.items() if k[0] == "forward" and "WINOGRAD_4X4_3X3" in str(k).upper()]
    assert chosen == ["merged"]
    planes = convcore.Convolution(padding=1, spatial_dims=3)
    with pytest.raises(convcore.NotSupportedError, match="winograd|Winograd|WINOGRAD"):  # no schedule can
        planes.forward(np.ones((1, 2, 4, 5, 5)), np.ones((3, 2, 3, 5, 5)), algo="winograd_4x4_3x3")


def test_auto_times_the_schedules_once_and_keeps_the_fastest():
    x, w = arrays(PROBLEMS[3])
    conv = convcore.Convolution(padding=(1, 0, 1), stride=(2, 1, 2), dilation=(1, 2, 1), groups=2)
    conv.forward(x, w)
    conv.forward(x, w)
    chosen = {k: v for k, v in conv._nd._chosen.items() if k[0] == "forward" and k[1] == x.shape
              and k[4] == "auto" and "/ndhwc" not in k[3]}
    assert len(chosen) == 1 and list(chosen.values())[0] in ("taps", "stacked", "native")
    # another Convolution of the same geometry (convcore.torch makes one per weight) times
    # nothing again: the choice is shared
    other = convcore.Convolution(padding=(1, 0, 1), stride=(2, 1, 2), dilation=(1, 2, 1), groups=2)
    assert other._nd._chosen is conv._nd._chosen


def test_auto_keeps_its_schedule_choice_in_the_find_db(tmp_path, monkeypatch):
    """auto's schedule times go into the find-db (convcoreStoreChoiceTimes), keyed with the
    layout: a later process (here, with the in-process choices forgotten) takes the fastest
    stored one and times nothing."""
    db = tmp_path / "find-db.txt"
    monkeypatch.setenv("CONVCORE_FIND_DB", str(db))
    convcore.clear_find_cache()
    x, w = arrays(PROBLEMS[4])
    x_ndhwc = x.transpose(0, 2, 3, 4, 1).copy().transpose(0, 4, 1, 2, 3)
    y_ref = convnd_reference(x, w, (1, 1, 1), (1, 1, 1), (1, 1, 1))[0]
    conv = convcore.Convolution(padding=1, spatial_dims=3)
    conv._nd._chosen.clear()  # other tests' choices, made on another db
    for a in (x, x_ndhwc):
        assert relative_error(conv.forward(a, w), y_ref) <= TOL
    stored = [line.split("\t") for line in db.read_text().splitlines() if "\tnd_schedule_forward\t" in line]
    problems = {f[3] for f in stored}
    assert len(problems) == 2 and sum("/ndhwc_" in p for p in problems) == 1, problems
    assert {f[4] for f in stored} >= {"taps", "stacked"}

    def timed(*args, **kwargs):
        raise AssertionError("timed the schedules again")

    monkeypatch.setattr(type(conv._nd), "_timed_schedule", timed)
    conv._nd._chosen.clear()
    for a in (x, x_ndhwc):
        assert relative_error(conv.forward(a, w), y_ref) <= TOL
    for fastest in ("taps", "stacked"):  # the db's fastest is taken
        text = "".join(
            "\t".join(f[:6] + ["0.001", "0.001"] if f[4] == fastest else f[:6] + ["1000", "1000"]) + "\n"
            if "\tnd_schedule_forward\t" in line and len(f := line.split("\t")) == 8 else line + "\n"
            for line in db.read_text().splitlines())
        db.write_text(text)
        convcore.clear_find_cache()
        conv._nd._chosen.clear()
        assert relative_error(conv.forward(x, w), y_ref) <= TOL
        assert set(conv._nd._chosen.values()) == {fastest}
    convcore.clear_find_cache()
    conv._nd._chosen.clear()
