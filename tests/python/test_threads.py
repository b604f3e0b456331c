"""Thread safety in Python (docs/thread_safety.md): one Convolution object shared by many
threads at once, each with its own inputs, shapes and algorithms, every result checked against
the float64 reference. The bindings release the GIL during the C call, so the threads really
run convcore concurrently (each on its own per-thread handle and workspace)."""

import threading

import numpy as np
import pytest

import convcore
from reference import conv2d_reference, error_bound, relative_error

THREADS = 12
ROUNDS = 6


def test_many_threads_share_one_convolution():
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    algos = conv.applicable_algos((1, 4, 12, 12), (6, 4, 3, 3))
    assert "direct" in algos and len(algos) >= 3
    barrier = threading.Barrier(THREADS)
    failures = []

    def work(t):
        rng = np.random.default_rng(t)
        barrier.wait()  # start together
        for i in range(ROUNDS):
            # different batch and image sizes per thread and round: the per-thread workspace
            # grows and shrinks while other threads run
            n, h, w = 1 + (t + i) % 3, 6 + (t * 3 + i) % 9, 5 + (t + 2 * i) % 11
            dtype = "float32" if (t + i) % 2 else "float64"
            x = rng.uniform(-1, 1, (n, 4, h, w)).astype(dtype)
            wt = rng.uniform(-1, 1, (6, 4, 3, 3)).astype(dtype)
            names = conv.applicable_algos(x.shape, wt.shape, dtype=dtype)
            algo = names[(t + i) % len(names)]
            out = np.empty(conv.output_shape(x.shape, wt.shape), dtype) if i % 2 else None
            y = conv.forward(x, wt, algo=algo, out=out)
            err = relative_error(y, conv2d_reference(x, wt, padding=(1, 1)))
            if not err <= error_bound(algo, dtype):
                failures.append(f"thread {t} round {i} {algo} {dtype} {x.shape}: error {err:.2e}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures, "\n".join(failures)


def test_errors_in_one_thread_do_not_leak_into_another():
    """A failing call on one thread (its typed error and message) while others succeed."""
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    barrier = threading.Barrier(8)
    results = [None] * 8

    def work(t):
        barrier.wait()
        for _ in range(20):
            if t % 2:
                try:
                    conv.forward(np.ones((1, 3, 5, 5), np.float32), np.ones((4, 2, 3, 3), np.float32))
                    results[t] = "no error"
                    return
                except convcore.BadParamError as e:
                    if "C/groups=2 does not match x: C=3" not in str(e):
                        results[t] = f"wrong message: {e}"
                        return
            else:
                y = conv.forward(np.ones((1, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32))
                if y[0, 0, 2, 2] != 27.0:
                    results[t] = f"wrong value {y[0, 0, 2, 2]}"
                    return
        results[t] = "ok"

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == ["ok"] * 8


def test_threads_with_torch_tensors():
    torch = pytest.importorskip("torch")
    conv = convcore.Convolution(convcore.ConvDesc(padding=1, stride=2))
    failures = []

    def work(t):
        g = torch.Generator().manual_seed(t)
        for i in range(4):
            x = torch.rand(2, 3, 9 + t % 4, 8, generator=g, dtype=torch.float32)
            w = torch.rand(5, 3, 3, 3, generator=g, dtype=torch.float32)
            y = conv.forward(x, w, algo=["direct", "im2col_gemm", "implicit_gemm"][(t + i) % 3])
            expected = torch.nn.functional.conv2d(x, w, padding=1, stride=2)
            if not torch.allclose(y, expected, rtol=1e-4, atol=1e-5):
                failures.append(f"thread {t} round {i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures
