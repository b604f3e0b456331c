"""Convolution.find, algo="find", the find-db and the selection switches: sorted
results with every algorithm's status, the workspace limit, deterministic-only,
CONVCORE_DISABLE_ALGOS, corrupt db files, several processes writing one db at once, and the
second run of a program timing nothing. No timed assertions: timings only order results."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import convcore
from reference import conv2d_reference, error_bound, relative_error

HEADER = "convcore-find-db 3"


@pytest.fixture
def db(tmp_path, monkeypatch):
    """A fresh find-db file for this test (in a directory that does not exist yet)."""
    path = tmp_path / "cache" / "find-db.txt"
    monkeypatch.setenv("CONVCORE_FIND_DB", str(path))
    monkeypatch.delenv("CONVCORE_DISABLE_ALGOS", raising=False)
    convcore.clear_find_cache()
    yield path
    convcore.clear_find_cache()


def _problem(seed=0, dtype=np.float32, c=4, k=5, h=11, w=9, r=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c, r, r)).astype(dtype)
    return x, wt


def _check_sorted(results):
    assert sorted(r.algo.value for r in results) == [a.value for a in convcore.Algo]
    ran = [r for r in results if r.status == "success"]
    assert results[:len(ran)] == ran, "successes first"
    assert [r.time_ms for r in ran] == sorted(r.time_ms for r in ran)
    assert all(r.time_ms >= 0 for r in ran)
    rest = results[len(ran):]
    assert all(r.time_ms is None for r in rest)
    assert [r.algo.value for r in rest] == sorted(r.algo.value for r in rest), "failures in enum order"
    return ran


def test_find_sorted_with_every_status(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    before = convcore.find_stats()
    results = conv.find(x, w)
    ran = _check_sorted(results)
    applicable = conv.applicable_algos(x.shape, w.shape)
    assert sorted(r.name for r in ran) == sorted(applicable)
    assert len(applicable) >= 8
    for r in results:
        assert isinstance(r, convcore.FindResult) and isinstance(r.algo, convcore.Algo)
        assert r.status in ("success", "not_supported")
        if r.status == "success":
            assert r.workspace == conv.workspace_size(x.shape, w.shape, r.algo)
            assert r.deterministic is True
    assert convcore.find_stats()["timed_runs"] - before["timed_runs"] == len(ran)
    assert repr(results[0]).startswith("FindResult(")
    # x and w are only read
    x2, w2 = _problem()
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(w, w2)


@pytest.mark.parametrize("filters", ["per-call", "prepared"])
def test_find_gives_both_times_and_orders_by_the_callers(db, filters):
    """Each result has the per-call and the prepared-filter time; time_ms and the order are those
    of the caller's protocol; algorithms with nothing to prepare have one time in both; auto and
    algo="find" choose by the same protocol as forward's filter_version says."""
    conv = convcore.Convolution(padding=1)
    x, w = _problem(c=8, k=8, h=12, w=12)
    ran = _check_sorted(conv.find(x, w, filters=filters))
    for r in ran:
        assert r.time_per_call_ms >= 0 and r.time_prepared_ms >= 0
        assert r.time_ms == (r.time_prepared_ms if filters == "prepared" else r.time_per_call_ms)
        if r.name in ("direct", "im2col_gemm", "implicit_gemm"):  # nothing to prepare
            assert r.time_per_call_ms == r.time_prepared_ms
    version = 0 if filters == "prepared" else None
    conv.forward(x, w, algo="find", filter_version=version)
    assert conv.last_algo == ran[0].name
    with pytest.raises(convcore.BadParamError, match="filters"):
        conv.find(x, w, filters="cached")


def test_not_supported_algorithms_are_listed(db):
    conv = convcore.Convolution(padding=2, stride=2)
    x, w = _problem(r=5, h=16, w=16)
    results = conv.find(x, w)
    _check_sorted(results)
    status = {r.name: r.status for r in results}
    assert status["winograd_4x4_3x3"] == "not_supported"
    assert status["direct"] == "success"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_algo_find_is_finds_best_and_correct(db, dtype):
    conv = convcore.Convolution(padding=1)
    x, w = _problem(seed=3, dtype=dtype)
    best = conv.find(x, w)[0]
    y = conv.forward(x, w, algo="find")
    ref = conv2d_reference(x, w, padding=(1, 1))
    assert relative_error(y, ref) <= error_bound(best.name, dtype)
    # the same algorithm as Find's best (deterministic: identical bits)
    np.testing.assert_array_equal(y, conv.forward(x, w, algo=best.algo))
    assert conv.last_algo == best.name
    # the decision is cached in the process: a repeated call neither times nor reads the db
    before = convcore.find_stats()
    conv.forward(x, w, algo="FIND")
    after = convcore.find_stats()
    assert after == before and conv.last_algo == best.name
    # a new process (the caches cleared) answers from the db
    convcore.clear_find_cache()
    conv.forward(x, w, algo="find")
    assert convcore.find_stats() == {"timed_runs": before["timed_runs"], "db_hits": before["db_hits"] + 1}


def test_backward_algo_find(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem(seed=5, dtype=np.float64)
    dy = np.random.default_rng(6).standard_normal(conv.output_shape(x.shape, w.shape))
    before = convcore.find_stats()
    dx = conv.backward_data(dy, w, x.shape, algo="find")
    dw = conv.backward_filter(x, dy, w.shape, algo="find")
    timed = convcore.find_stats()["timed_runs"] - before["timed_runs"]
    assert timed >= 8  # both passes timed their algorithms
    # against DIRECT in float64 (every backward algorithm's float64 bound is <= 1e-10)
    assert relative_error(dx, conv.backward_data(dy, w, x.shape, algo="direct")) < 1e-9
    assert relative_error(dw, conv.backward_filter(x, dy, w.shape, algo="direct")) < 1e-9
    conv.backward_data(dy, w, x.shape, algo="find")
    conv.backward_filter(x, dy, w.shape, algo="find")
    assert convcore.find_stats()["timed_runs"] - before["timed_runs"] == timed
    text = db.read_text()
    assert "\tbwd_data\t" in text and "\tbwd_filter\t" in text


def test_auto_does_not_time_the_reference_beside_other_algorithms(db, monkeypatch):
    """DIRECT (the reference loops) is among the first three applicable algorithms of a stride-2
    layer's backward passes, which have three; "auto" times the other two and not it (on a
    network's layer DIRECT takes seconds), "find" times all three. A problem only DIRECT runs
    still runs under "auto"."""
    conv = convcore.Convolution(padding=1, stride=2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 15, 15)).astype(np.float32)
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    dy = rng.standard_normal(conv.output_shape(x.shape, w.shape)).astype(np.float32)
    for direction in ("backward_data", "backward_filter"):
        assert "direct" in conv.applicable_algos(x.shape, w.shape, direction=direction)[:3]
    dx = conv.backward_data(dy, w, x.shape)
    dw = conv.backward_filter(x, dy, w.shape)
    timed = [line.split("\t")[4] for line in db.read_text().splitlines()[2:]]
    assert len(timed) == 4 and "DIRECT" not in timed, timed
    assert relative_error(dx, conv.backward_data(dy, w, x.shape, algo="direct")) < 1e-5
    assert relative_error(dw, conv.backward_filter(x, dy, w.shape, algo="direct")) < 1e-5
    conv.backward_data(dy, w, x.shape, algo="find")
    assert "\tbwd_data\t" in db.read_text() and "DIRECT" in db.read_text()
    monkeypatch.setenv("CONVCORE_DISABLE_ALGOS", "im2col_gemm,implicit_gemm")
    convcore.clear_find_cache()
    assert relative_error(conv.backward_data(dy, w, x.shape), dx) < 1e-5


def test_workspace_limit(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    full = {r.name: r for r in conv.find(x, w)}
    largest = max(r.workspace for r in full.values() if r.status == "success")
    assert largest > 0
    for limit in (0, largest // 2):
        limited = conv.find(x, w, workspace_limit=limit)
        _check_sorted(limited)
        over = 0
        for r in limited:
            f = full[r.name]
            if f.status != "success":
                assert r.status == f.status
            elif f.workspace > limit:
                over += 1
                assert r.status == "alloc_failed" and r.workspace == f.workspace
            else:
                assert r.status == "success"
        assert over >= 1
        assert any(r.status == "success" for r in limited)  # DIRECT needs none


def test_deterministic_only(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    results = conv.find(x, w, deterministic=True)
    _check_sorted(results)
    assert all(r.deterministic for r in results if r.status == "success")
    # every CPU algorithm is deterministic: none is filtered out here
    assert sum(r.status == "success" for r in results) == len(conv.applicable_algos(x.shape, w.shape))


def test_disable_algos_env(db, monkeypatch):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    assert {"fft", "poly_hankel"} <= set(conv.applicable_algos(x.shape, w.shape))
    monkeypatch.setenv("CONVCORE_DISABLE_ALGOS", "FFT,poly_hankel")
    applicable = conv.applicable_algos(x.shape, w.shape)
    assert "fft" not in applicable and "poly_hankel" not in applicable and "fft_tiling" in applicable
    status = {r.name: r.status for r in conv.find(x, w)}
    assert status["fft"] == status["poly_hankel"] == "not_supported"
    assert status["fft_tiling"] == "success"
    assert "fft" not in conv.applicable_algos(x.shape, w.shape, direction="backward_data")
    # named explicitly, it still runs
    y = conv.forward(x, w, algo="fft")
    assert relative_error(y, conv2d_reference(x, w, padding=(1, 1))) <= error_bound("fft", np.float32)


def test_db_file_round_trip(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    first = conv.find(x, w)
    lines = db.read_text().splitlines()
    assert lines[0] == HEADER
    rows = [line.split("\t") for line in lines[1:] if not line.startswith("#")]
    assert all(len(row) == 8 for row in rows)  # ..., status, time_ms, time_prepared_ms
    problem = "mb1ic4ih11iw9oc5kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr"
    mine = {row[4]: row for row in rows if row[3] == problem}
    assert set(mine) == {r.algo.name for r in first if r.status == "success"}
    build_id = convcore.build_info()["build id"]
    assert build_id != "none"  # linked with --build-id: a rebuilt library re-times
    version = f"{convcore.__version__}+{build_id[:16]}"
    assert all(row[0] == version and row[2] == "fwd" and row[5] == "SUCCESS"
               for row in mine.values())
    convcore.clear_find_cache()
    before = convcore.find_stats()
    again = conv.find(x, w)
    assert convcore.find_stats()["timed_runs"] == before["timed_runs"]
    assert [r.algo for r in again] == [r.algo for r in first]
    timed = [r.time_ms for r in first if r.time_ms is not None]
    assert [r.time_ms for r in again if r.time_ms is not None] == pytest.approx(timed, rel=1e-3)
    assert [r.time_ms is None for r in again] == [r.time_ms is None for r in first]


@pytest.mark.parametrize("garbage", [b"\x00\xff\xfe\n\t\t", b"convcore-find-db 0\nold\tformat\n",
                                     b"convcore-find-db 3\n1\t2\t3\t4\tDIRECT\tSUCCESS\tNaN\t1\nhalf\tline",
                                     b"convcore-find-db 2\n1\t2\t3\t4\tDIRECT\tSUCCESS\t0.5\n"])
def test_corrupt_db_is_ignored_and_rewritten(db, garbage):
    db.parent.mkdir(parents=True)
    db.write_bytes(garbage)
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    before = convcore.find_stats()
    _check_sorted(conv.find(x, w))
    assert convcore.find_stats()["timed_runs"] > before["timed_runs"]
    text = db.read_text()
    assert text.startswith(HEADER + "\n")
    assert "\tDIRECT\tSUCCESS\t" in text and "half\tline" not in text and "NaN" not in text


def test_db_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVCORE_FIND_DB", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    convcore.clear_find_cache()
    conv = convcore.Convolution(padding=1)
    _check_sorted(conv.find(*_problem()))
    assert list(tmp_path.iterdir()) == []
    convcore.clear_find_cache()


def test_default_location_is_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("CONVCORE_FIND_DB", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    convcore.clear_find_cache()
    convcore.Convolution(padding=1).find(*_problem())
    assert (tmp_path / "xdg" / "convcore" / "find-db.txt").read_text().startswith(HEADER)
    convcore.clear_find_cache()


def test_bad_arguments(db):
    conv = convcore.Convolution(padding=1)
    x, w = _problem()
    with pytest.raises(convcore.BadParamError, match="workspace_limit"):
        conv.find(x, w, workspace_limit=-1)
    with pytest.raises(convcore.BadParamError, match="deterministic"):
        conv.find(x, w, deterministic="yes")
    with pytest.raises(convcore.BadParamError, match="find"):
        conv.workspace_size(x.shape, w.shape, "find")
    with pytest.raises(convcore.BadParamError, match="dtype"):
        conv.find(x, w.astype(np.float64))
    with pytest.raises(convcore.BadParamError):
        conv.find(x[:, :3], w)


# ---- several processes -------------------------------------------------------------------------

PROGRAM = textwrap.dedent("""
    import json, sys
    import numpy as np
    import convcore
    shapes = json.loads(sys.argv[1])
    for c, k, h in shapes:
        rng = np.random.default_rng(c * 1000 + k * 10 + h)
        x = rng.standard_normal((1, c, h, h)).astype(np.float32)
        w = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
        conv = convcore.Convolution(padding=1)
        conv.find(x, w)
        conv.forward(x, w, algo="find")
    print(json.dumps(convcore.find_stats()))
""")


def _run(tmp_path, db, shapes, **env_vars):
    script = tmp_path / "prog.py"
    if not script.exists():  # written once: rewriting it under a starting process empties it
        script.write_text(PROGRAM)
    env = dict(os.environ, CONVCORE_FIND_DB=str(db), OMP_NUM_THREADS="1")
    for name, value in env_vars.items():  # None: unset
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env.pop("CONVCORE_DISABLE_ALGOS", None)
    return subprocess.Popen([sys.executable, str(script), json.dumps(shapes)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stats(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_second_run_of_a_program_times_nothing(tmp_path, db):
    shapes = [[4, 5, 12], [3, 8, 9], [6, 6, 7]]
    first = _stats(_run(tmp_path, db, shapes))
    assert first["timed_runs"] > 0
    second = _stats(_run(tmp_path, db, shapes))
    assert second["timed_runs"] == 0
    assert second["db_hits"] == 2 * len(shapes)  # find() and forward(algo="find") per shape


def test_the_kernels_instruction_set_is_in_the_key(tmp_path, db):
    """CONVCORE_CPU_ISA=baseline runs other kernels than the CPU's own: their times are kept apart."""
    def devices():
        return {line.split("\t")[1] for line in db.read_text().splitlines()[1:] if not line.startswith("#")}

    shapes = [[4, 5, 12]]
    assert _stats(_run(tmp_path, db, shapes, CONVCORE_CPU_ISA=None))["timed_runs"] > 0
    (native,) = devices()
    model, isa = native.removesuffix(" x1 threads").rsplit(" ", 1)
    assert native.startswith("cpu:") and isa in ("avx512", "avx2", "baseline")
    if isa == "baseline":
        pytest.skip("this CPU's kernels are the baseline ones")
    assert _stats(_run(tmp_path, db, shapes, CONVCORE_CPU_ISA="baseline"))["timed_runs"] > 0
    assert devices() == {native, f"{model} baseline x1 threads"}


def test_concurrent_writers_lose_nothing(tmp_path, db):
    workers = [[[2 + i, 3, 8 + j]] for i in range(3) for j in range(2)]  # 6 processes, 1 shape each
    procs = [_run(tmp_path, db, shapes) for shapes in workers]
    for p in procs:
        assert _stats(p)["timed_runs"] > 0
    lines = db.read_text().splitlines()
    assert lines[0] == HEADER
    rows = [line.split("\t") for line in lines[1:] if not line.startswith("#")]
    assert all(len(row) == 8 for row in rows)  # ..., status, time_ms, time_prepared_ms
    problems = {row[3] for row in rows}
    for [[c, k, h]] in workers:
        assert f"mb1ic{c}ih{h}iw{h}oc{k}kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr" in problems
    assert not [p for p in db.parent.iterdir() if ".tmp." in p.name], "temporary files left"
    # every entry of every process is there: one process with all the shapes times nothing
    everything = [shape for shapes in workers for shape in shapes]
    assert _stats(_run(tmp_path, db, everything))["timed_runs"] == 0


def test_torch_conv2d_algo_find(db, torch):
    import convcore.torch as cct
    x = torch.randn(1, 4, 10, 10, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    y = cct.conv2d(x, w, None, padding=1, algo="find")
    y.square().sum().backward()
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref = torch.nn.functional.conv2d(xr, wr, padding=1)
    ref.square().sum().backward()
    for got, want in ((y, ref), (x.grad, xr.grad), (w.grad, wr.grad)):
        assert float((got - want).detach().norm() / want.detach().norm()) < 1e-10
    text = db.read_text()
    assert all(f"\t{d}\t" in text for d in ("fwd", "bwd_data", "bwd_filter"))
