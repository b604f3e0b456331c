"""Every applicable algorithm against an independent float64 NumPy reference."""

import threading
import zlib

import numpy as np
import pytest

import convcore
from convcore import _api
from reference import (CLASSIC_ALGOS, PROBLEMS, Problem, conv2d_reference, error_bound,
                       relative_error)

DTYPES = [np.float32, np.float64]
SOME_PROBLEMS = PROBLEMS[::3]  # the variants (torch, strides, out=, blending) on a subset


def _preparations():
    """Filters the core has prepared and kept on this thread's CPU handle (its plan cache). A test
    that counts them starts with convcore.clear_plan_cache(): filters another test kept for the
    same bytes at the same address are rightly reused."""
    return convcore.plan_cache_info()["filter_preparations"]


def pid(p):
    return str(p)


def applicable_algos(conv, problem, dtype):
    """applicable_algos, which must include the classic algorithms (they support everything)."""
    algos = conv.applicable_algos(problem.x_shape, problem.w_shape, dtype=np.dtype(dtype).name)
    missing = [a for a in CLASSIC_ALGOS if a not in algos]
    assert not missing, f"applicable_algos for {problem} is {algos}: {missing} missing"
    assert len(set(algos)) == len(algos), algos
    return algos


def assert_all_close(results, ref, dtype, context):
    """results: {algo: output}. Fails listing every algorithm over its bound."""
    failures = []
    for algo, y in results.items():
        y = np.asarray(y)
        assert y.dtype == np.dtype(dtype), (algo, y.dtype)
        assert y.shape == ref.shape, (algo, y.shape, ref.shape)
        err = relative_error(y, ref)
        if not err <= error_bound(algo, dtype):  # also catches NaN
            failures.append(f"{algo}: relative error {err:.3g} > {error_bound(algo, dtype):g}")
    assert not failures, f"{context}: " + "; ".join(failures)


# ---- the reference itself ------------------------------------------------------------------------

@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_reference_agrees_with_torch(problem, torch):
    """Validates the NumPy reference against PyTorch in float64 (independent implementations)."""
    x, w = problem.inputs(np.float64, seed=1)
    wt = torch.from_numpy(w.copy())
    if problem.mode == "convolution":
        wt = torch.flip(wt, dims=(2, 3))
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), wt, padding=problem.padding,
                                          stride=problem.stride, dilation=problem.dilation,
                                          groups=problem.groups).numpy()
    np.testing.assert_allclose(problem.reference(x, w), expected, rtol=1e-12, atol=1e-12)


# ---- every algorithm, NumPy inputs ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", PROBLEMS, ids=pid)
def test_every_algorithm_matches_reference(problem, dtype):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(dtype, seed=zlib.crc32(str(problem).encode()))
    ref = problem.reference(x, w)
    assert conv.output_shape(x.shape, w.shape) == ref.shape
    results = {a: conv.forward(x, w, algo=a) for a in applicable_algos(conv, problem, dtype)}
    for y in results.values():
        assert isinstance(y, np.ndarray)
    assert_all_close(results, ref, dtype, problem)


@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_auto_with_the_heuristic_switch_runs_its_first_choice(problem, monkeypatch):
    monkeypatch.setenv("CONVCORE_AUTO", "heuristic")
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(np.float32)
    first = conv.applicable_algos(x.shape, w.shape)[0]
    y = conv.forward(x, w)  # algo="auto"
    np.testing.assert_array_equal(y, conv.forward(x, w, algo=first))
    assert conv.workspace_size(x.shape, w.shape, "auto") == conv.workspace_size(x.shape, w.shape, first)
    assert_all_close({first: y}, problem.reference(x, w), np.float32, problem)


@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_auto_times_the_top_candidates_and_the_made_for_once(problem, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVCORE_FIND_DB", str(tmp_path / "find-db.txt"))
    convcore.clear_find_cache()
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(np.float32)
    top = conv.applicable_algos(x.shape, w.shape)[:convcore._convcore.SELECT_CANDIDATES]
    before = convcore.find_stats()["timed_runs"]
    y = conv.forward(x, w)  # algo="auto"
    chosen = conv.last_algo
    # What was timed, as the find-db holds it: the heuristic's first candidates, and the
    # algorithms made for the problem whatever their rank (docs/find.md); the fastest runs.
    db = (tmp_path / "find-db.txt").read_text()
    timed = {a for a in conv.applicable_algos(x.shape, w.shape) if f"\t{a.upper()}\tSUCCESS" in db}
    assert set(top) <= timed and chosen in timed, (top, timed, chosen)
    assert convcore.find_stats()["timed_runs"] - before == len(timed)
    np.testing.assert_array_equal(y, conv.forward(x, w, algo=chosen))
    assert_all_close({chosen: y}, problem.reference(x, w), np.float32, problem)
    # the decision is kept: a repeated call times nothing and runs the same algorithm
    timed = convcore.find_stats()["timed_runs"]
    np.testing.assert_array_equal(conv.forward(x, w), y)
    assert conv.last_algo == chosen and convcore.find_stats()["timed_runs"] == timed
    # beta != 0: timing must not clobber the output being blended into
    convcore.clear_find_cache()
    out = np.ones_like(y)
    conv.forward(x, w, out=out, beta=1.0)
    np.testing.assert_allclose(out, y + 1, rtol=1e-5, atol=1e-5)
    convcore.clear_find_cache()


# ---- PyTorch inputs --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_torch_tensors_in_torch_tensor_out(problem, dtype, torch):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(dtype, seed=3)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w).requires_grad_(True)
    results = {}
    for a in applicable_algos(conv, problem, dtype):
        y = conv.forward(xt, wt, algo=a)
        assert isinstance(y, torch.Tensor) and y.dtype == xt.dtype and y.device == xt.device
        results[a] = y.numpy()
    assert_all_close(results, problem.reference(x, w), dtype, problem)


def test_torch_cpu_tensor_is_read_in_place(torch):
    """The binding reads the producer's own data pointer (no copy) for contiguous and for
    positively strided tensors."""
    x = torch.randn(2, 3, 8, 8)
    tensor = _api._import_input(x, "x", None)
    assert tensor.data_ptr == x.data_ptr()
    assert tensor.shape == (2, 3, 8, 8) and tensor.dtype == "float32"
    sliced = torch.randn(2, 3, 8, 16)[..., ::2]
    assert _api._import_input(sliced, "x", None).data_ptr == sliced.data_ptr()
    channels_last = x.to(memory_format=torch.channels_last)
    tensor = _api._import_input(channels_last, "x", None)
    assert tensor.data_ptr == channels_last.data_ptr()
    assert tensor.strides == channels_last.stride()


def test_numpy_array_is_read_in_place():
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert _api._import_input(x, "x", None).data_ptr == x.ctypes.data
    x.flags.writeable = False  # read-only inputs are fine (DLPack 1.0 read-only flag)
    tensor = _api._import_input(x, "x", None)
    assert tensor.data_ptr == x.ctypes.data and tensor.read_only


def test_torch_out_is_written_in_place(torch):
    p = Problem(2, 4, 9, 9, 6, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**p.desc_kwargs()))
    x, w = p.inputs(np.float32)
    out = torch.full(conv.output_shape(x.shape, w.shape), float("nan"))
    out = out.to(memory_format=torch.channels_last)  # strided output
    pointer = out.data_ptr()
    y = conv.forward(torch.from_numpy(x), torch.from_numpy(w), out=out)
    assert y is out and out.data_ptr() == pointer
    assert_all_close({"direct": out.numpy()}, p.reference(x, w), np.float32, p)


# ---- non-contiguous inputs and outputs -----------------------------------------------------------------

def strided_views(a):
    """The same values as `a` in other memory layouts: sliced, transposed, reversed."""
    n, c, h, w = a.shape
    sliced = np.empty((n, c + 1, h, 2 * w), a.dtype)
    sliced[:, :c, :, ::2] = a
    channels_last = np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    reversed_rows = np.ascontiguousarray(a[:, :, ::-1])[:, :, ::-1]  # negative stride
    return {"sliced": sliced[:, :c, :, ::2], "channels_last": channels_last,
            "negative_stride": reversed_rows}


@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_non_contiguous_inputs(problem):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(np.float64, seed=5)
    ref = problem.reference(x, w)
    algos = applicable_algos(conv, problem, np.float64)
    for layout, xv in strided_views(x).items():
        for w_layout, wv in strided_views(w).items():
            results = {a: conv.forward(xv, wv, algo=a) for a in algos}
            assert_all_close(results, ref, np.float64, f"{problem} x {layout}, w {w_layout}")


@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_non_contiguous_torch_inputs(problem, torch):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(np.float32, seed=6)
    xt = torch.from_numpy(x).to(memory_format=torch.channels_last)
    wt = torch.from_numpy(np.ascontiguousarray(w.transpose(1, 0, 2, 3))).transpose(0, 1)
    results = {a: conv.forward(xt, wt, algo=a).numpy() for a in applicable_algos(conv, problem, np.float32)}
    assert_all_close(results, problem.reference(x, w), np.float32, problem)


@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_strided_out(problem):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(np.float32, seed=7)
    n, k, p, q = conv.output_shape(x.shape, w.shape)
    results = {}
    for a in applicable_algos(conv, problem, np.float32):
        base = np.full((n, k, p, 2 * q + 1), np.nan, np.float32)
        out = base[:, :, :, 1::2]
        assert conv.forward(x, w, algo=a, out=out) is out
        assert np.isnan(base[:, :, :, ::2]).all(), f"{a} wrote outside out"
        results[a] = out
    assert_all_close(results, problem.reference(x, w), np.float32, problem)


# ---- out=, alpha and beta -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", SOME_PROBLEMS, ids=pid)
def test_out_alpha_beta(problem, dtype):
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(dtype, seed=8)
    ref = problem.reference(x, w)
    y0 = np.random.default_rng(9).uniform(-1, 1, ref.shape).astype(dtype)
    plain, scaled, blended = {}, {}, {}
    for a in applicable_algos(conv, problem, dtype):
        # beta == 0: out is never read, so NaN in it must not leak into the result.
        out = np.full(ref.shape, np.nan, dtype)
        assert conv.forward(x, w, algo=a, out=out) is out
        plain[a] = out
        out = np.full(ref.shape, np.nan, dtype)
        scaled[a] = conv.forward(x, w, algo=a, out=out, alpha=-2.5, beta=0.0)
        out = y0.copy()
        blended[a] = conv.forward(x, w, algo=a, out=out, alpha=2.0, beta=0.5)
    assert_all_close(plain, ref, dtype, f"{problem} out=")
    assert_all_close(scaled, -2.5 * ref, dtype, f"{problem} alpha=-2.5")
    assert_all_close(blended, 2.0 * ref + 0.5 * y0.astype(np.float64), dtype,
                     f"{problem} alpha=2 beta=0.5")


# ---- other producers and corner cases ---------------------------------------------------------------

class LegacyProducer:
    """A DLPack producer from before DLPack 1.0: no max_version, a "dltensor" capsule."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_other_dlpack_producers_give_numpy():
    p = Problem(1, 3, 10, 10, 4, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**p.desc_kwargs()))
    x, w = p.inputs(np.float32)
    legacy = LegacyProducer(x)
    tensor = _api._import_input(legacy, "x", None)
    assert not tensor.versioned and tensor.data_ptr == x.ctypes.data
    y = conv.forward(legacy, LegacyProducer(w))
    assert type(y) is np.ndarray
    assert_all_close({conv.last_algo: y}, p.reference(x, w), np.float32, p)


def test_read_only_and_non_native_inputs():
    p = Problem(1, 2, 7, 7, 3, 3, 3)
    conv = convcore.Convolution(convcore.ConvDesc())
    x, w = p.inputs(np.float64)
    x_ro = x.copy()
    x_ro.flags.writeable = False
    w_big_endian = w.astype(">f8")
    y = conv.forward(x_ro, w_big_endian, algo="direct")
    assert_all_close({"direct": y}, p.reference(x, w), np.float64, p)


def test_empty_batch(torch):
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    x, w = np.zeros((0, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32)
    assert conv.output_shape(x.shape, w.shape) == (0, 4, 5, 5)
    assert conv.forward(x, w).shape == (0, 4, 5, 5)
    y = conv.forward(torch.from_numpy(x), torch.from_numpy(w))
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == (0, 4, 5, 5)


def test_algo_enum_and_names_are_interchangeable():
    p = Problem(1, 3, 9, 9, 4, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**p.desc_kwargs()))
    x, w = p.inputs(np.float64)
    by_enum = conv.forward(x, w, algo=convcore.Algo.IM2COL_GEMM)
    by_name = conv.forward(x, w, algo="IM2col_Gemm")
    np.testing.assert_array_equal(by_enum, by_name)
    assert [a.name for a in convcore.Algo][:3] == ["DIRECT", "IM2COL_GEMM", "IMPLICIT_GEMM"]
    assert convcore.Algo.CYCLIC_MINIMAL.value == 10
    for name in conv.applicable_algos(x.shape, w.shape):
        assert convcore.Algo[name.upper()].name.lower() == name


def test_conv2d_shortcut_and_convolution_kwargs():
    p = Problem(2, 4, 8, 8, 4, 3, 3, padding=(1, 1), stride=(2, 2), groups=2)
    x, w = p.inputs(np.float64)
    y = convcore.conv2d(x, w, padding=1, stride=2, groups=2)
    y2 = convcore.Convolution(padding=1, stride=2, groups=2)(x, w)
    np.testing.assert_array_equal(y, y2)
    assert_all_close({"direct": y}, p.reference(x, w), np.float64, p)


def test_conv2d_takes_f_conv2d_arguments():
    """convcore.conv2d(input, weight, bias, stride, padding, dilation, groups), F.conv2d's order,
    with bias added per output channel (the fused epilogue), into out= too."""
    p = Problem(2, 4, 9, 8, 6, 3, 2, padding=(1, 2), stride=(2, 1), dilation=(1, 2), groups=2)
    x, w = p.inputs(np.float64)
    b = np.linspace(-1.0, 2.0, 6)
    ref = p.reference(x, w) + b[None, :, None, None]
    y = convcore.conv2d(x, w, b, (2, 1), (1, 2), (1, 2), 2, algo="im2col_gemm")
    assert_all_close({"im2col_gemm": y}, ref, np.float64, p)
    out = np.full(y.shape, np.nan)
    assert convcore.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2,
                           algo="direct", out=out) is out
    assert_all_close({"direct": out}, ref, np.float64, p)
    with pytest.raises(convcore.BadParamError, match="bias"):
        convcore.conv2d(x, w, b[:5], (2, 1), (1, 2), (1, 2), 2)


def test_threads_share_one_convolution():
    p = Problem(2, 8, 16, 16, 8, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**p.desc_kwargs()))
    inputs = [p.inputs(np.float32, seed=s) for s in range(8)]
    refs = [p.reference(x, w) for x, w in inputs]
    algos = conv.applicable_algos(p.x_shape, p.w_shape)
    errors = []

    def work(i):
        try:
            for rep in range(10):
                algo = algos[(i + rep) % len(algos)]
                x, w = inputs[(i + rep) % len(inputs)]
                y = conv.forward(x, w, algo=algo)
                err = relative_error(y, refs[(i + rep) % len(inputs)])
                if err > error_bound(algo, np.float32):
                    errors.append(f"thread {i} {algo}: {err}")
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_reference_matches_definition_on_a_tiny_case():
    """A hand-checkable case for the reference: 1 channel, 2x2 filter, stride 1."""
    x = np.arange(9, dtype=np.float64).reshape(1, 1, 3, 3)
    w = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    expected = np.array([[[[0 + 2 + 9 + 16, 1 + 4 + 12 + 20], [3 + 8 + 18 + 28, 4 + 10 + 21 + 32]]]])
    np.testing.assert_array_equal(conv2d_reference(x, w), expected)
    flipped = np.array([[[[4 * 0 + 3 * 1 + 2 * 3 + 1 * 4]]]])
    np.testing.assert_array_equal(conv2d_reference(x[:, :, :2, :2], w, mode="convolution"), flipped)


def test_dlpack_capsules_are_released(torch):
    """The binding owns each consumed capsule and calls its deleter: no reference is left on
    the producer's arrays after forward returns."""
    import sys
    p = Problem(1, 3, 8, 8, 4, 3, 3, padding=(1, 1))
    conv = convcore.Convolution(convcore.ConvDesc(**p.desc_kwargs()))
    x, w = p.inputs(np.float32)
    out = np.empty(conv.output_shape(x.shape, w.shape), np.float32)
    xt, wt = torch.from_numpy(x.copy()), torch.from_numpy(w.copy())
    before = [sys.getrefcount(a) for a in (x, w, out, xt, wt)]
    for _ in range(20):
        conv.forward(x, w, out=out)
        conv.forward(xt, wt)
        conv.forward(LegacyProducer(x), w)
    assert [sys.getrefcount(a) for a in (x, w, out, xt, wt)] == before


def test_plans_are_made_once_per_problem():
    """A Convolution keeps one plan per problem (shapes, strides, dtype, algo): repeated calls
    reuse it, a new shape, layout or algorithm makes another, each result is right, and
    clear_find_cache() drops plans chosen from the find results."""
    rng = np.random.default_rng(3)
    conv = convcore.Convolution(padding=1)
    x = rng.standard_normal((2, 4, 9, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    plans = conv._problems()
    for _ in range(3):
        y = conv.forward(x, w, algo="im2col_gemm")
    assert plans.count == 1
    ref = conv2d_reference(x, w, padding=(1, 1))
    assert relative_error(y, ref) <= error_bound("im2col_gemm", np.float32)
    conv.forward(x, w, algo="auto")
    assert plans.count == 2
    strided = rng.standard_normal((2, 4, 9, 14)).astype(np.float32)[..., ::2]  # another layout
    y = conv.forward(strided, w, algo="im2col_gemm")
    assert plans.count == 3
    assert relative_error(y, conv2d_reference(strided, w, padding=(1, 1))) <= error_bound("im2col_gemm", np.float32)
    small = x[:1, :, :5, :5].copy()
    y = conv.forward(small, w, algo="im2col_gemm")
    assert plans.count == 4
    assert relative_error(y, conv2d_reference(small, w, padding=(1, 1))) <= error_bound("im2col_gemm", np.float32)
    # a cached problem still checks what its key does not hold: a read-only or wrong out
    out = np.empty((2, 6, 9, 7), np.float32)
    out.setflags(write=False)
    with pytest.raises(convcore.BadParamError, match="out"):
        conv.forward(x, w, algo="im2col_gemm", out=out)
    with pytest.raises(convcore.BadParamError, match="out: expected shape"):
        conv.forward(x, w, algo="im2col_gemm", out=np.empty((2, 6, 9, 8), np.float32))
    convcore.clear_find_cache()
    conv.forward(x, w, algo="im2col_gemm")
    assert plans.count == 1
    for h in range(5, 5 + 70):  # a bounded cache
        conv.forward(x[:1, :, :h % 9 + 1, :], w, algo="direct" if h % 2 else "im2col_gemm")
    assert plans.count <= 64


def test_filter_version_keeps_the_transformed_filters():
    """forward(..., filter_version=v): the plan transforms w once and reuses it while w's memory
    and v stay the same; a new v (after changing w in place) transforms it again; each result
    matches the reference of w at the time. Without it nothing is kept."""
    rng = np.random.default_rng(5)
    conv = convcore.Convolution(padding=1)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    convcore.clear_plan_cache()
    base = _preparations()
    bound = error_bound("winograd_4x4_3x3", np.float32)
    for _ in range(3):
        y = conv.forward(x, w, algo="winograd_4x4_3x3")
    assert _preparations() - base == 0
    for _ in range(3):
        y = conv.forward(x, w, algo="winograd_4x4_3x3", filter_version=0)
        assert relative_error(y, conv2d_reference(x, w, padding=(1, 1))) <= bound
    assert _preparations() - base == 1
    w *= -2  # the same memory, new contents: the caller gives a new version
    y = conv.forward(x, w, algo="winograd_4x4_3x3", filter_version=1)
    assert _preparations() - base == 2
    assert relative_error(y, conv2d_reference(x, w, padding=(1, 1))) <= bound
    for bad in (-1, 1.5, True):
        with pytest.raises(convcore.BadParamError, match="filter_version"):
            conv.forward(x, w, filter_version=bad)


def test_each_thread_has_its_own_plans():
    conv = convcore.Convolution(padding=1)
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    conv.forward(x, w, algo="direct")
    seen = []
    thread = threading.Thread(target=lambda: (conv.forward(x, w, algo="direct"),
                                              seen.append(conv._problems())))
    thread.start()
    thread.join()
    assert seen[0] is not conv._problems() and seen[0].count == 1


@pytest.mark.parametrize("direction, enum_cls", [("forward", convcore.Algo),
                                                 ("backward_data", convcore.BwdDataAlgo),
                                                 ("backward_filter", convcore.BwdFilterAlgo)])
def test_algorithm_info_declares_every_algorithm(direction, enum_cls):
    for member in enum_cls:
        info = convcore.algorithm_info(member, direction)
        assert info == convcore.algorithm_info(member.name.lower(), direction)
        assert info.name == member.name.lower() and info.direction == direction
        assert info.on_cpu and isinstance(info.deterministic, bool)
        assert 0 < info.error_bound("float64") < info.error_bound(np.float32) <= 1e-3
    with pytest.raises(convcore.BadParamError, match="algo: unknown"):
        convcore.algorithm_info("no_such_algorithm", direction)
    with pytest.raises(convcore.BadParamError, match="chooses an algorithm"):
        convcore.algorithm_info("auto", direction)
    with pytest.raises(convcore.BadParamError, match="direction"):
        convcore.algorithm_info("direct", "sideways")


NHWC_PROBLEMS = [
    Problem(1, 16, 9, 8, 16, 3, 3, padding=(1, 1), groups=4),                   # 4 per group: packed groups
    Problem(2, 16, 7, 7, 16, 3, 3, padding=(1, 1), stride=(2, 2), groups=8),    # 2 per group
    Problem(1, 32, 6, 9, 32, 3, 3, padding=(2, 2), dilation=(2, 2), groups=4),  # 8 per group
    Problem(1, 24, 7, 7, 24, 3, 3, padding=(1, 1), groups=3),                   # 8 per group, an odd count
    Problem(1, 12, 8, 8, 36, 1, 1, groups=3),                                   # pointwise, grouped
    Problem(1, 8, 10, 9, 16, 3, 3, padding=(1, 1), groups=8, mode="convolution"),  # depthwise, m = 2
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("problem", NHWC_PROBLEMS, ids=pid)
def test_nhwc_arrays_every_algorithm(problem, dtype):
    """x and out as NHWC NumPy arrays (N x C x H x W views of N x H x W x C memory): the
    algorithms that run NHWC natively (DEPTHWISE, POINTWISE, IM2COL_GEMM, IMPLICIT_GEMM) and the
    converted ones, float32 and float64, against the float64 reference."""
    conv = convcore.Convolution(convcore.ConvDesc(**problem.desc_kwargs()))
    x, w = problem.inputs(dtype, seed=7)
    ref = conv2d_reference(x.astype(np.float64), w.astype(np.float64), **problem.desc_kwargs())
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    n, k, p, q = ref.shape
    results = {}
    for algo in applicable_algos(conv, problem, dtype):
        out = np.empty((n, p, q, k), dtype).transpose(0, 3, 1, 2)
        assert conv.forward(x_nhwc, w, algo=algo, out=out) is out
        results[algo] = out
    assert_all_close(results, ref, dtype, str(problem))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algo,filter_version", [("auto", None), ("im2col_gemm", None),
                                                 ("winograd_2x2_3x3", "check"), ("winograd_2x2_3x3", 3)])
def test_numpy_call_takes_the_short_path_once_its_plan_exists(dtype, algo, filter_version):
    """A repeated NumPy call runs its plan in one C++ call (_C.forward_array): its key must be the
    one the general path made the plan under. Else every call would take the general path."""
    from convcore import _api
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 7)).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    conv = convcore.Convolution(padding=1)
    algo_id, version = _api._ALGO_IDS[algo], _api._filter_version_arg(filter_version)
    short = lambda: _api._C.forward_array(x, w, conv.desc._params, algo_id, conv._problems(), version)  # noqa: E731
    assert short() is None  # no plan yet
    y = conv.forward(x, w, algo=algo, filter_version=filter_version)
    got = short()
    assert got is not None and got[0].dtype == dtype and np.array_equal(got[0], y)
    assert convcore.Algo(got[1]).name.lower() == conv.last_algo
    assert conv._problems().count == 1
    assert _api._C.forward_array(x[:, :, :, :5], w, conv.desc._params, algo_id, conv._problems(), version) is None


def test_plan_cache_drops_the_least_recently_used_plan():
    """A Convolution keeps at most 64 plans per thread; beyond that the least recently used goes,
    and a plan in use stays (its call still takes the short path)."""
    from convcore import _api
    rng = np.random.default_rng(0)
    conv = convcore.Convolution(padding=1)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    hot = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    short = lambda x: _api._C.forward_array(x, w, conv.desc._params, 1, conv._problems(), -1)  # noqa: E731
    conv.forward(hot, w, algo="im2col_gemm")
    for size in range(6, 6 + 80):
        conv.forward(rng.standard_normal((1, 2, size, 5)).astype(np.float32), w, algo="im2col_gemm")
        assert short(hot) is not None  # used: kept
    assert conv._problems().count == 64
    first_cold = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    assert short(first_cold) is None  # the least recently used: dropped
