"""How convcore's benchmarks time, and what they record about the machine while they do: the one
timing module of ``convcore bench`` (convcore.cli, a suite of layers) and ``convcore bench --model``
(convcore.model_bench, whole networks), and of the scripts in tools/ and bench/.

- the clocks: CpuTimer (wall or process CPU time, warm or cold caches) and CudaTimer (CUDA events);
- the interleaved loops: time_interleaved (reps of every contender, the starting one rotating)
  and time_rounds (the same, with a time limit, for whole networks);
- a shared VM's noise, recorded around a timing: the hypervisor's steal (steal_ms_per_cpu,
  steal_since, STEAL_WARN) and a cache line's round trip between two threads (round_trip_ns,
  SPLIT_NS);
- the machine and the competitors' settings: cpu_model_name, openblas_coretype,
  single_threaded_numpy_blas, import_torch, cudnn_as_competitor.

It imports neither convcore.cli nor convcore.model_bench (nor torch: callers pass it).
"""

from __future__ import annotations

import gc
import os
import platform
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

import convcore

__all__ = ["CpuTimer", "CudaTimer", "time_interleaved", "time_rounds", "stopwatch",
           "steal_ms_per_cpu", "steal_since", "worst_steal_share", "STEAL_WARN",
           "round_trip_ns", "worst_round_trip", "SPLIT_NS", "cpu_model_name", "openblas_coretype",
           "single_threaded_numpy_blas", "import_torch", "cudnn_as_competitor"]


# ---- the machine -------------------------------------------------------------------------------

def cpu_model_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def openblas_coretype() -> Optional[str]:
    """The OPENBLAS_CORETYPE that OpenBLAS was loaded with: convcore's choice
    (convcore.openblas_coretype_chosen, set only while libconvcore loaded), else the
    environment's, else None (OpenBLAS's own detection). build_info()["blas"] names the kernels
    in use."""
    return convcore.openblas_coretype_chosen or os.environ.get("OPENBLAS_CORETYPE")


def import_torch() -> Any:
    """torch, or None when it is not installed."""
    try:
        import torch
        return torch
    except ImportError:
        return None


def single_threaded_numpy_blas() -> None:
    """NumPy's wheels bundle their own OpenBLAS (scipy-openblas) with a thread pool whose idle
    threads busy-wait after every call: measured, they took 16% of a bench process's samples,
    competing with the timed runs for this machine's 2 cores. The bench needs none of it."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "scipy_openblas" in line}
    except OSError:
        return
    for path in paths:
        try:
            import ctypes
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.argtypes = [ctypes.c_int]
                    fn(1)
                    break
        except OSError:
            pass


def cudnn_as_competitor(torch: Any) -> None:
    """PyTorch's GPU settings for the benchmarks against cuDNN: cudnn.benchmark on (cuDNN's
    fastest algorithm per shape), TF32 off (float32 arithmetic, as convcore's)."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


# ---- clocks --------------------------------------------------------------------------------------

def _l3_cache_bytes() -> int:
    """The last-level cache size of CPU 0 from sysfs (the largest level listed), else 64 MiB."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
            digits = text.rstrip("KkMmGg")
            if digits.isdigit():
                best = max(best, int(digits) * scale)
    except OSError:
        pass
    return best or 64 << 20


_FLUSH_BUFFER: List[np.ndarray] = []


def _flush_buffer() -> np.ndarray:
    """Twice the last-level cache, allocated once per process (not once per layer: the kernel
    would zero 64 MiB of new pages for every layer)."""
    if not _FLUSH_BUFFER:
        _FLUSH_BUFFER.append(np.zeros(2 * _l3_cache_bytes() // 8, np.float64))
    return _FLUSH_BUFFER[0]


def _thread_pool_waker(torch: Any) -> Callable[[], None]:
    """A function that wakes the OpenMP worker threads (convcore's, and PyTorch's when it is
    timed), touching 256 KiB at most (the flush has just written 64 MiB).

    The cache flush is one Python thread writing 64 MiB for several milliseconds: long enough
    for idle OpenMP workers to stop spinning and sleep, and waking them costs the next parallel
    region 0.1-0.2 ms (measured on a 512x512 3x3 layer: IMPLICIT_GEMM 0.29-0.47 ms median after
    the flush alone, 0.14-0.23 ms with the pool woken first). In a network the previous layer
    has just run and the workers are awake; only the caches are cold. So after the flush,
    untimed, a tiny convolution and (when PyTorch is timed) a small parallel PyTorch operation
    run; both libraries usually share one libgomp, and each wakes its own pool when not."""
    conv = convcore.Convolution()
    x, w = np.zeros((1, 1, 16, 64), np.float32), np.zeros((1, 1, 3, 3), np.float32)
    y = np.empty(conv.output_shape(x.shape, w.shape), np.float32)
    t = torch.zeros(1 << 16) if torch is not None else None  # two of PyTorch's parallel grains

    def wake() -> None:
        conv.forward(x, w, algo="implicit_gemm", out=y)
        if t is not None:
            t.mul_(1.0)
    return wake


class CpuTimer:
    """Wall-clock time, or with ``cpu_time`` the process's CPU time (all threads): robust to
    other jobs sharing the cores, but it counts spinning threads and ignores idle ones.

    ``cache`` says what the caches hold when a timed run starts (untimed preparation):
      warm  (the default) the contender runs once untimed right before, so its operands and
            workspace are cached, as in a network, where the previous layer has just written
            the input (and a network of a few MB stays in the L2/L3 between calls).
      cold  a buffer of twice the last-level cache is written first, so every contender starts
            with its operands in memory (the GPU mode flushes the L2 the same way). It evicts
            the L3 and the flushing core's L2. Then the OpenMP workers, asleep after the flush,
            are woken (_thread_pool_waker), untimed. This flatters algorithms whose own
            workspace traffic is large: use it as a bound, not as the network's state.
    Either way a contender's time no longer depends on which contender ran before it."""

    def __init__(self, cpu_time: bool = False, cache: str = "warm", torch: Any = None) -> None:
        self.clock: Callable[[], float] = time.process_time if cpu_time else time.perf_counter
        self.cache = cache
        self.flush_buffer: Any = _flush_buffer() if cache == "cold" else None
        self.wake: Any = _thread_pool_waker(torch) if cache == "cold" else None
        self.flushes = 0

    def time_ms(self, fn: Callable[[], Any]) -> float:
        if self.cache == "cold":
            self.flushes += 1
            self.flush_buffer.fill(float(self.flushes))
            self.wake()
        else:
            fn()
        start = self.clock()
        fn()
        return (self.clock() - start) * 1e3


class CudaTimer:
    """CUDA events on the current torch stream. With ``cache="cold"`` the L2 is
    flushed before each rep by writing a buffer of twice its size (every rep starts
    cold, as a layer of a network does, not with the previous rep's operands cached); with
    "warm" (the default) the contender runs once untimed right before instead."""

    def __init__(self, torch: Any, cache: str = "warm") -> None:
        self.torch = torch
        self.cache = cache
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or 64 << 20  # 50 MB on an H100
        self.flush_buffer = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def time_ms(self, fn: Callable[[], Any]) -> float:
        cuda = self.torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        if self.cache == "cold":
            self.flush_buffer.zero_()  # queued before `start`: not timed
        else:
            fn()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))


# ---- interleaved timing ------------------------------------------------------------------------------

def time_interleaved(contenders: Mapping[str, Callable[[], Any]], reps: int,
                     timer: Any) -> Dict[str, List[float]]:
    """{name: [reps times in ms]}: the contenders in turn, the starting one rotating each rep,
    each timed by ``timer.time_ms`` (a CpuTimer or CudaTimer). No garbage collection inside the
    loop (as timeit does)."""
    names = list(contenders)
    times: Dict[str, List[float]] = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for rep in range(reps):
            for i in range(len(names)):
                name = names[(rep + i) % len(names)]
                times[name].append(timer.time_ms(contenders[name]))
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


def time_rounds(contenders: Mapping[str, Callable[[], float]], reps: int, time_limit: float,
                min_reps: int,
                on_round: Optional[Callable[[int, float], None]] = None) -> Dict[str, List[float]]:
    """{name: [ms per round]}: each round runs every contender once, the starting one rotating;
    each contender returns its own time in ms (see stopwatch). Stops after `reps` rounds, or
    earlier once `min_reps` rounds are done and `time_limit` seconds have passed. A collection
    before each round and none inside one. on_round(rep, seconds so far) is called as each round
    starts (progress)."""
    names = list(contenders)
    times: Dict[str, List[float]] = {name: [] for name in names}
    start = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    try:
        for rep in range(reps):
            elapsed = time.perf_counter() - start
            if rep >= min_reps and elapsed > time_limit:
                break
            if on_round is not None:
                on_round(rep, elapsed)
            gc.collect()
            gc.disable()
            for i in range(len(names)):
                name = names[(rep + i) % len(names)]
                times[name].append(contenders[name]())
            if gc_was_enabled:
                gc.enable()
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


def stopwatch(fn: Callable[[], Any]) -> Callable[[], float]:
    """fn, returning its wall-clock time in ms instead (for time_rounds)."""
    def timed() -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    return timed


# ---- a shared VM's noise -------------------------------------------------------------------------

STEAL_WARN = 0.02  # a CPU lost more than 2% of a timing to the hypervisor

# A cache line's round trip between two threads, in ns: ~50-90 while two vCPUs share an L3,
# ~330-700 while the host has put them on different L3 domains, which doubles the 2-thread time
# of code whose threads hand data to each other (Winograd, OpenBLAS's threaded GEMM) and leaves
# PyTorch's oneDNN alone (bench/results/cpu-2026-11-23-s6.md). bench/compare_runs.py uses the
# same threshold.
SPLIT_NS = 200


def steal_ms_per_cpu() -> Optional[List[float]]:
    """Milliseconds the hypervisor has taken from each CPU since boot ("steal" in /proc/stat),
    or None where that is not known (not Linux)."""
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu") and line[3].isdigit()]
        tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        return [int(fields[8]) * tick_ms for fields in lines]
    except (OSError, IndexError, ValueError, AttributeError):
        return None


def steal_since(before: Optional[List[float]], wall_ms: float) -> Optional[Dict[str, Any]]:
    """{"wall_ms", "steal_ms": [per CPU]} for a timing that started at ``before``
    (steal_ms_per_cpu()) and lasted ``wall_ms``, or None. On a shared VM a CPU whose time the
    hypervisor takes stalls the threads waiting for it: a timing with much steal has
    untrustworthy multi-threaded times (the benchmarks' reports name such timings)."""
    after = steal_ms_per_cpu()
    if before is None or after is None or len(before) != len(after):
        return None
    return {"wall_ms": wall_ms, "steal_ms": [a - b for a, b in zip(after, before)]}


def worst_steal_share(steal: Optional[Mapping[str, Any]]) -> Optional[float]:
    """The largest share of a timing (steal_since's record) that the hypervisor took from one
    CPU, or None when unknown; above STEAL_WARN the timing's times may be off."""
    if not steal or not steal["wall_ms"] > 0 or not steal["steal_ms"]:
        return None
    return float(max(steal["steal_ms"]) / steal["wall_ms"])


def round_trip_ns() -> Optional[float]:
    """A cache line's round trip between two threads now, in ns (convcore's diagnostic,
    measured before and after a timing), or None on one CPU or without the diagnostic."""
    fn = getattr(convcore._convcore, "cache_line_round_trip_ns", None)
    return fn() if fn is not None and (os.cpu_count() or 1) >= 2 else None


def worst_round_trip(round_trips: Optional[Sequence[Optional[float]]]) -> Optional[float]:
    """The largest of the round trips recorded around a timing (None and 0 ignored), or None;
    above SPLIT_NS the CPUs did not share a cache and multi-threaded times may be off."""
    values = [v for v in (round_trips or []) if v]
    return max(values) if values else None
