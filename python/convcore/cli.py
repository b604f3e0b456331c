"""The ``convcore`` command: ``convcore info`` and ``convcore bench``.

``convcore bench`` times every applicable algorithm on a suite of layers (and PyTorch's conv2d
in the same run when torch is importable), after checking each algorithm's output against
DIRECT. Each algorithm keeps its transformed filters across the timed runs (``filter_version``),
as a layer of a network does in inference; ``--filters per-call`` transforms them at every call
instead, as a NumPy caller does. Problems are written benchdnn-style, one per line, then an optional name:

    mb1ic64ih56iw56oc64kh3kw3ph1pw1sh1sw1dh1dw1g1 resnet:res2_3x3

Omitted fields take defaults: mb1 g1 sh1 ph0 dh1, iw = ih, kw = kh, sw = sh, pw = ph, dw = dh.
Unlike benchdnn, dilation is PyTorch's (dh1 = no dilation). ``oh``/``ow``, when given, are
checked against the computed output size. ``#`` starts a comment.

With --model NAME[,NAME...] it times whole torchvision networks instead (random weights):
PyTorch in NCHW and channels_last against the model converted with convcore.torch.convert,
end to end and per conv layer (python/convcore/model_bench.py). --reps, --threads, --warmup,
--json and --plot then apply to the networks; --write-suite FILE writes their conv layers as a
suite for --suite.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import convcore
from convcore.bench_suite import DEFAULT_SUITE, BenchProblem, parse_problem, parse_suite
from convcore.bench_timing import (SPLIT_NS, STEAL_WARN, CpuTimer, CudaTimer, cpu_model_name,
                                   cudnn_as_competitor, import_torch, openblas_coretype,
                                   round_trip_ns, single_threaded_numpy_blas, steal_ms_per_cpu,
                                   steal_since, time_interleaved, worst_round_trip,
                                   worst_steal_share)

WITHIN = 1.10  # the selection target: auto within 10% of the fastest algorithm
# Relative error vs DIRECT above which a result is reported as a MISMATCH: twice the bound the
# library declares for the algorithm (DIRECT itself carries rounding error), and at least this
# floor (float32, float64), since the suite's layers sum more terms than the tests' problems.
MISMATCH_FLOOR = (1e-4, 1e-10)


def _mismatch_bound(algo: str, dtype: str) -> float:
    """The MISMATCH bound of a convcore algorithm, or of PyTorch's conv2d (algo "torch")."""
    floor = MISMATCH_FLOOR[0 if dtype == "float32" else 1]
    if algo == "torch":
        return floor
    return max(2 * convcore.algorithm_info(algo).error_bound(dtype), floor)


def _relative_error(y: Any, ref: Any) -> float:
    # Sums of squares, not np.linalg.norm: that calls NumPy's own OpenBLAS, whose idle threads
    # then spin on the cores the timed runs need (see bench_timing.single_threaded_numpy_blas).
    y, ref = np.asarray(y, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    norm = math.sqrt(float(np.sum(ref * ref)))
    return math.sqrt(float(np.sum((y - ref) ** 2))) / (norm if norm > 0 else 1.0)


def _split_layers(results: List[Dict[str, Any]]) -> List[Tuple[str, float]]:
    """[(layer, its largest round trip in ns)] above SPLIT_NS."""
    out = {}
    for r in results:
        worst = worst_round_trip(r.get("round_trip_ns"))
        if worst is not None and worst > SPLIT_NS:
            out[r["layer"]] = worst
    return list(out.items())


def _stolen_layers(results: List[Dict[str, Any]]) -> List[Tuple[str, float]]:
    """[(layer, its worst CPU's stolen share of the timing)] above STEAL_WARN."""
    out = {}
    for r in results:
        share = worst_steal_share(r.get("steal"))
        if share is not None and share > STEAL_WARN:
            out[r["layer"]] = share
    return sorted(out.items(), key=lambda kv: -kv[1])


def _retime_auto(rows: Dict[str, Dict[str, Any]], auto_algo: str,
                 contenders: Dict[str, Callable[[], Any]], reps: int, timer: Any) -> None:
    """When auto's choice is not the fastest algorithm of the first round, time the two again,
    head to head (interleaved, `reps` each), and record the verdict in auto's row as
    "retime". The fastest of ten noisy medians is biased low (it is the fastest partly because
    its noise was favourable: the winner's curse); a second, independent measurement of the
    two is not. It is taken whether the first round put auto within 10% or not, so it can
    turn a pass into a miss as well as the reverse. Run to run, the fastest algorithm changes
    on a fifth to a third of the layers here (bench/results)."""
    auto_row = rows[auto_algo]
    best = min((r for name, r in rows.items() if not name.startswith("torch") and "median_ms" in r),
               key=lambda r: r["median_ms"])["algo"]
    if best == auto_algo:
        return
    times = time_interleaved({auto_algo: contenders[auto_algo], best: contenders[best]}, reps, timer)
    auto_ms, best_ms = statistics.median(times[auto_algo]), statistics.median(times[best])
    auto_row["retime"] = {"fastest": best, "auto_ms": auto_ms, "fastest_ms": best_ms,
                          "ratio": auto_ms / best_ms}


def bench_problem(problem: BenchProblem, args: argparse.Namespace, torch: Any,
                  log: Callable[[str], None]) -> List[Dict[str, Any]]:
    """Results (one dict per contender) for one layer."""
    dtype = args.dtype
    on_cuda = args.device != "cpu"
    conv = convcore.Convolution(problem.desc())
    applicable = conv.applicable_algos(problem.x_shape, problem.w_shape, device=args.device,
                                       dtype=dtype)
    algos = applicable if args.algos is None else [a for a in args.algos if a in applicable]
    skipped = [] if args.algos is None else [a for a in args.algos if a not in applicable]

    rng = np.random.default_rng(0)
    x: Any = rng.uniform(-1, 1, problem.x_shape).astype(dtype)  # NumPy, or torch on CUDA
    w: Any = rng.uniform(-1, 1, problem.w_shape).astype(dtype)
    new_out: Callable[[], Any]
    to_numpy: Callable[[Any], Any]
    y_shape = conv.output_shape(problem.x_shape, problem.w_shape)
    nhwc = getattr(args, "layout", "nchw") == "nhwc"  # convcore's x and y; w stays KCRS
    if on_cuda:
        fmt = torch.channels_last if nhwc else torch.contiguous_format
        x, w = torch.from_numpy(x).to(args.device).contiguous(memory_format=fmt), torch.from_numpy(w).to(args.device)
        new_out = lambda: torch.empty(y_shape, dtype=x.dtype, device=x.device, memory_format=fmt)  # noqa: E731
        to_numpy = lambda t: t.cpu().numpy()  # noqa: E731
    elif nhwc:  # NHWC arrays seen as N x C x H x W views
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        n, k, p, q = y_shape
        new_out = lambda: np.empty((n, p, q, k), dtype).transpose(0, 3, 1, 2)  # noqa: E731
        to_numpy = np.asarray
    else:
        new_out = lambda: np.empty(y_shape, dtype)  # noqa: E731
        to_numpy = np.asarray

    # What algo="auto" runs: on its first call it times the heuristic's top candidates on these
    # inputs (the find-db keeps the decision across processes).
    # --filters: prepared (the plan keeps each algorithm's transformed filters, as a network in
    # inference runs) or per-call (transformed at every call, as a NumPy caller without
    # filter_version runs). auto is asked with the same protocol: it selects by its times.
    filter_version = None if getattr(args, "filters", "prepared") == "per-call" else 0
    auto_choice = None
    if applicable:
        conv.forward(x, w, algo="auto", out=new_out(), filter_version=filter_version)
        auto_choice = conv.last_algo

    # Correctness first: every algorithm against DIRECT, once.
    reference = to_numpy(conv.forward(x, w, algo="direct", out=new_out()))
    contenders: Dict[str, Callable[[], Any]] = {}
    rows: Dict[str, Dict[str, Any]] = {}
    for algo in algos:
        out = new_out()
        row: Dict[str, Any] = {"layer": problem.label, "problem": problem.descriptor(), "algo": algo,
               "auto": algo == auto_choice, "flops": problem.flops(), "workspace_bytes": conv.workspace_size(
                   problem.x_shape, problem.w_shape, algo, device=args.device, dtype=dtype)}
        err = _relative_error(to_numpy(conv.forward(x, w, algo=algo, out=out)), reference)
        row["rel_error_vs_direct"] = err
        row["check"] = "ok" if err <= _mismatch_bound(algo, dtype) else "MISMATCH"
        if row["check"] != "ok":
            log(f"!!! MISMATCH: {algo} on {problem.label}: relative error {err:.3g} vs DIRECT "
                f"(bound {_mismatch_bound(algo, dtype):g})")
        def run_convcore(a: str = algo, o: Any = out) -> Any:
            return conv.forward(x, w, algo=a, out=o, filter_version=filter_version)
        contenders[algo] = run_convcore
        rows[algo] = row
    for algo in skipped:
        rows[algo] = {"layer": problem.label, "problem": problem.descriptor(), "algo": algo,
                      "flops": problem.flops(), "check": "not applicable"}

    if torch is not None:
        xt = x if on_cuda else torch.from_numpy(np.ascontiguousarray(x))
        wt = w if on_cuda else torch.from_numpy(w)
        kwargs = dict(stride=(problem.sh, problem.sw), padding=(problem.ph, problem.pw),
                      dilation=(problem.dh, problem.dw), groups=problem.g)
        f = torch.nn.functional.conv2d
        with torch.no_grad():
            err = _relative_error(to_numpy(f(xt, wt, **kwargs)), reference)
        rows["torch"] = {"layer": problem.label, "problem": problem.descriptor(), "algo": "torch",
                         "flops": problem.flops(), "workspace_bytes": None,
                         "rel_error_vs_direct": err,
                         "check": "ok" if err <= _mismatch_bound("torch", dtype) else "MISMATCH"}

        def run_torch():
            with torch.no_grad():
                f(xt, wt, **kwargs)
        contenders["torch"] = run_torch
        # PyTorch's other memory format: channels_last is often the faster one on the CPU.
        x_cl = xt.contiguous(memory_format=torch.channels_last)
        w_cl = wt.contiguous(memory_format=torch.channels_last)
        rows["torch_cl"] = dict(rows["torch"], algo="torch_cl")

        def run_torch_channels_last():
            with torch.no_grad():
                f(x_cl, w_cl, **kwargs)
        contenders["torch_cl"] = run_torch_channels_last

    # Warm-up, then interleaved reps (the starting contender rotates), median per contender;
    # the timer prepares the caches before every timed run (--cache).
    cache = getattr(args, "cache", "warm")
    timer = CudaTimer(torch, cache) if on_cuda else CpuTimer(getattr(args, "cpu_time", False), cache, torch)
    names = list(contenders)
    for _ in range(args.warmup):
        for name in names:
            contenders[name]()
    round_trip0 = round_trip_ns() if not on_cuda else None
    steal0, wall0 = steal_ms_per_cpu(), time.perf_counter()
    times = time_interleaved(contenders, args.reps, timer)
    steal = steal_since(steal0, (time.perf_counter() - wall0) * 1e3)
    round_trip = None if round_trip0 is None else [round_trip0, round_trip_ns()]
    for name in names:
        row = rows[name]
        row["steal"] = steal
        row["round_trip_ns"] = round_trip
        row["times_ms"] = times[name]
        row["median_ms"] = statistics.median(times[name])
        row["gflops"] = problem.flops() / (row["median_ms"] * 1e6)
    timed = [rows[a] for a in algos]
    best = min((r["median_ms"] for r in timed), default=None)
    # The competitor is PyTorch in its faster memory format on this layer.
    torch_ms = min((rows[t]["median_ms"] for t in ("torch", "torch_cl") if t in rows), default=None)
    for row in rows.values():
        if "median_ms" in row:
            row["ratio_to_best"] = row["median_ms"] / best if best else None
            row["ratio_to_torch"] = row["median_ms"] / torch_ms if torch_ms else None
    if getattr(args, "retime", True) and auto_choice in times and timed:
        _retime_auto(rows, auto_choice, contenders, args.reps, timer)
    ordered = sorted((r for r in rows.values() if "median_ms" in r), key=lambda r: r["median_ms"])
    return ordered + [r for r in rows.values() if "median_ms" not in r]


# ---- output ---------------------------------------------------------------------------------------

def _bytes(n: Optional[float]) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _ratio(r: Optional[float]) -> str:
    return "-" if r is None else f"{r:.2f}"


def format_table(results: List[Dict[str, Any]], with_torch: bool) -> str:
    headers = ["layer", "algorithm", "auto", "time ms", "GFLOP/s", "workspace", "t/best"]
    if with_torch:
        headers.append("t/torch")
    headers.append("check")
    lines = []
    for r in results:
        if "median_ms" not in r:
            cells = [r["layer"], r["algo"], "", "-", "-", "-", "-"] + (["-"] if with_torch else [])
        else:
            cells = [r["layer"], r["algo"], "<- auto" if r.get("auto") else "",
                     f"{r['median_ms']:.3f}", f"{r['gflops']:.1f}",
                     _bytes(r["workspace_bytes"]),
                     "-" if r["algo"].startswith("torch") else _ratio(r["ratio_to_best"])]
            if with_torch:
                cells.append(_ratio(r["ratio_to_torch"]))
        check = r["check"]
        cells.append(check if check in ("ok", "not applicable") else f"!!! {check} "
                     f"(rel. error {r['rel_error_vs_direct']:.2g})")
        lines.append(cells)
    widths = [max([len(h)] + [len(c[i]) for c in lines]) for i, h in enumerate(headers)]
    numeric = {3, 4, 5, 6, 7} if with_torch else {3, 4, 5, 6}

    def fmt(cells):
        return "  ".join(c.rjust(wd) if i in numeric else c.ljust(wd)
                         for i, (c, wd) in enumerate(zip(cells, widths))).rstrip()
    out = [fmt(headers), fmt(["-" * wd for wd in widths])]
    previous = None
    for cells in lines:
        if previous is not None and cells[0] != previous:
            out.append("")
        previous = cells[0]
        out.append(fmt(cells))
    return "\n".join(out)


def auto_verdict(auto_row: Dict[str, Any]) -> float:
    """auto's time over the fastest algorithm's on its layer: the head-to-head re-timing when
    there was one (_retime_auto: auto was not the first round's fastest), else the first
    round's t/best (1.0)."""
    retime = auto_row.get("retime")
    return retime["ratio"] if retime else auto_row["ratio_to_best"]


def auto_summary(results: List[Dict[str, Any]]) -> Tuple[int, int, List[Tuple[Any, ...]], int]:
    """(layers where auto's choice is within 10% of the fastest algorithm, layers where auto's
    choice was timed, [(layer, auto's algo, first-round t/best, fastest algo, head-to-head
    ratio or None)] for the misses, layers within 10% in the first round alone)."""
    layers: Dict[str, List[Dict[str, Any]]] = {}
    for r in results:
        if "median_ms" in r and not r["algo"].startswith("torch"):
            layers.setdefault(r["layer"], []).append(r)
    within, misses, timed, first_round = 0, [], 0, 0
    for layer, rows in layers.items():
        auto = [r for r in rows if r.get("auto")]
        if not auto:
            continue
        timed += 1
        first_round += auto[0]["ratio_to_best"] <= WITHIN
        if auto_verdict(auto[0]) <= WITHIN:
            within += 1
        else:
            best = min(rows, key=lambda r: r["median_ms"])
            retime = auto[0].get("retime")
            misses.append((layer, auto[0]["algo"], auto[0]["ratio_to_best"], best["algo"],
                           retime["ratio"] if retime else None))
    return within, timed, misses, first_round


# ---- commands ------------------------------------------------------------------------------------

def cmd_info(args: argparse.Namespace) -> int:
    print(f"convcore {convcore.__version__}")
    print(f"package: {convcore.cmake_prefix_path()}")
    print("build:")
    for key, value in convcore.build_info().items():
        print(f"  {key}: {value}")
    count = convcore.cuda_device_count()
    print(f"GPUs visible: {count}")
    torch = import_torch()
    if count and torch is not None and torch.cuda.is_available():
        for i in range(min(count, torch.cuda.device_count())):
            print(f"  cuda:{i}: {torch.cuda.get_device_name(i)}")
    print(f"torch: {torch.__version__ if torch is not None else 'not installed'}")
    return 0


def _print_auto_summary(results: List[Dict[str, Any]]) -> Tuple[int, int, int]:
    within, timed, misses, first_round = auto_summary(results)
    retimed = any("retime" in r for r in results)
    print(f"\nauto within 10% of best on {within}/{timed} layers" +
          (f" ({first_round}/{timed} in the first round; where auto was not the fastest, the two "
           "were re-timed head to head)"
           if retimed else "") + (
        "" if not misses else ": missed " + "; ".join(
            f"{layer} (auto {algo} at {ratio:.2f}x, fastest {best}"
            + (f", head to head {again:.2f}x)" if again is not None else ")")
            for layer, algo, ratio, best, again in misses)))
    return within, timed, first_round


def _plot(results: List[Dict[str, Any]], directory: str, device: str) -> None:
    from convcore import plot
    for path in plot.plot_results(results, directory, device):
        print(f"plot written to {path}")


def _replot(args: argparse.Namespace) -> int:
    """--from-json: the table, the auto summary and the plots of a saved run; times nothing."""
    with open(args.from_json) as f:
        saved = json.load(f)
    results = saved["results"]
    if not any("auto" in r for r in results):
        # Saved before the auto column: mark what this build's heuristic picks.
        print("(auto: this build's heuristic, on the saved timings)")
        device, dtype = saved.get("device", "cpu"), saved.get("dtype", "float32")
        for r in results:
            p = parse_problem(r["problem"])
            ranked = convcore.Convolution(p.desc()).applicable_algos(p.x_shape, p.w_shape,
                                                                     device=device, dtype=dtype)
            r["auto"] = bool(ranked) and r["algo"] == ranked[0]
    print(format_table(results, any(r["algo"] == "torch" for r in results)))
    _print_auto_summary(results)
    if args.plot:
        clock = saved.get("clock", "wall")
        _plot(results, args.plot, saved.get("device", "cpu") + ("" if clock == "wall" else
                                                                  ", CPU time"))
    return 0


MODEL_OPTIONS = ("batch", "size", "train", "algo", "write_suite", "time_limit")


def blas_line() -> str:
    """The OpenBLAS build and kernels convcore runs with, and who chose them: an environment
    that pins OPENBLAS_CORETYPE (e.g. to Haswell) halves the GEMM-based algorithms' speed on an
    AVX-512 CPU, so every benchmark says which it had."""
    blas = convcore.build_info().get("blas", "?")
    coretype = openblas_coretype()
    if convcore.openblas_coretype_chosen:
        how = " (kernels chosen by convcore for this AVX-512 CPU)"
    elif coretype:
        how = f" (kernels pinned by the environment: OPENBLAS_CORETYPE={coretype})"
    else:
        how = ""
    return f"BLAS: {blas}{how}"


def _cmd_model(args: argparse.Namespace) -> int:
    """`convcore bench --model ...`: the options of the layer suite are refused, the others go
    to convcore.model_bench (imported here only: it needs torch and torchvision)."""
    from convcore import model_bench
    names = [n.strip() for n in args.model.split(",") if n.strip()]
    if names != ["list"]:
        for option, given in (("--suite", args.suite), ("--from-json", args.from_json),
                              ("--algos", args.algos), ("--cpu-time", args.cpu_time),
                              ("--no-torch", args.no_torch),
                              ("--device", args.device != "cpu"),
                              ("--dtype", args.dtype != "float32")):
            if given:
                raise ValueError(f"{option} is an option of the layer suite, not of --model "
                                 "(the model benchmark runs float32 on the CPU)")
        print(blas_line(), flush=True)
    return model_bench.command(
        names, batch=args.batch or 1, size=args.size or 224, train=args.train, reps=args.reps,
        warmup=args.warmup, threads=args.threads or None, algo=args.algo or "auto",
        time_limit=args.time_limit, engines=args.engines, fuse=not args.no_fuse,
        freeze=args.freeze, suite_path=args.write_suite, json_path=args.json,
        plot_dir=args.plot)


def cmd_bench(args: argparse.Namespace) -> int:
    if args.model:
        return _cmd_model(args)
    given = [f"--{o.replace('_', '-')}" for o in MODEL_OPTIONS if getattr(args, o, None)]
    if given:
        raise ValueError(f"{', '.join(given)}: only with --model")
    if args.reps is None:
        args.reps = 10
    if args.plot:
        from convcore import plot
        plot._pyplot()  # fail before timing anything when matplotlib is missing
    if args.from_json:
        return _replot(args)
    if args.suite:
        with open(args.suite) as f:
            problems = parse_suite(f.read(), args.suite)
    else:
        problems = parse_suite(DEFAULT_SUITE, "default suite")
    if args.algos is not None:
        args.algos = [a.strip().lower() for a in args.algos.split(",") if a.strip()]
        valid = [a.name.lower() for a in convcore.Algo]
        unknown = [a for a in args.algos if a not in valid]
        if unknown:
            raise ValueError(f"--algos: unknown {', '.join(unknown)}; valid: {', '.join(valid)}")
    torch = None if args.no_torch else import_torch()
    single_threaded_numpy_blas()
    if args.cpu_time and args.device != "cpu":
        raise ValueError("--cpu-time is for --device cpu (CUDA runs are timed with CUDA events)")
    if args.device != "cpu":
        if torch is None or not torch.cuda.is_available():
            raise ValueError(f"--device {args.device} needs PyTorch with CUDA (for buffers and timing)")
        if convcore.cuda_device_count() == 0:
            raise ValueError(f"--device {args.device}: this convcore build sees no CUDA device")
        cudnn_as_competitor(torch)
    if args.threads:
        convcore.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    print(f"convcore {convcore.__version__} bench: {len(problems)} layers, device {args.device}, "
          f"{args.dtype}, {args.reps} reps (median{', CPU time' if args.cpu_time else ''}), "
          f"{args.cache} cache, threads {args.threads or 'default'}, convcore in "
          f"{getattr(args, 'layout', 'nchw').upper()}, "
          f"torch {torch.__version__ if torch is not None else 'not timed'} (NCHW and channels_last; "
          f"ratios against the faster), CPU: {cpu_model_name()}", flush=True)
    if args.device == "cpu":
        print(blas_line(), flush=True)
    results = []
    for problem in problems:
        if args.verbose:
            log(f"  {problem.label}: {problem.descriptor()}")
        results.extend(bench_problem(problem, args, torch, log))
    print(format_table(results, torch is not None))
    print("\nGFLOP/s: 2*N*K*(C/g)*R*S*P*Q / median time. t/best: time / the fastest convcore "
          "algorithm on the layer." + (" t/torch: time / torch conv2d (< 1: faster than torch)."
                                       if torch is not None else ""))
    within, timed, first_round = _print_auto_summary(results)
    split = _split_layers(results)
    if split:
        print(f"\nthe CPUs did not share a cache (a cache line's round trip between two threads "
              f"above {SPLIT_NS} ns) around the timing of {len(split)} layer(s), whose "
              "multi-threaded times may be off: " + ", ".join(f"{layer} ({ns:.0f} ns)" for layer, ns in split))
    stolen = _stolen_layers(results)
    if stolen:
        print(f"\nthe hypervisor took more than {STEAL_WARN:.0%} of a CPU during the timing of "
              f"{len(stolen)} layer(s), whose times may be off: "
              + ", ".join(f"{layer} ({share:.0%})" for layer, share in stolen))
    mismatches = [r for r in results if r["check"] == "MISMATCH"]
    if mismatches:
        print(f"\n!!! {len(mismatches)} MISMATCH(ES) against DIRECT: "
              + ", ".join(f"{r['algo']} on {r['layer']}" for r in mismatches))
    if args.json:
        report = {
            "convcore_version": convcore.__version__,
            "build_info": convcore.build_info(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "machine": platform.machine(), "cpu": cpu_model_name(),
            "cpu_count": os.cpu_count(),
            "device": args.device, "dtype": args.dtype, "layout": getattr(args, "layout", "nchw"),
            "threads": args.threads, "reps": args.reps,
            "clock": "process CPU time" if args.cpu_time else "wall", "cache": args.cache,
            "openblas_coretype": openblas_coretype(),
            "openblas_coretype_chosen_by_convcore": bool(convcore.openblas_coretype_chosen),
            "warmup": args.warmup,
            "filters": ("transformed at every call (per-call)" if getattr(args, "filters", "prepared") == "per-call" else
                        "prepared once per algorithm (the plan keeps them), as a network runs"),
            "torch_version": torch.__version__ if torch is not None else None,
            "suite": [asdict(p) for p in problems],
            "auto_within_10pct": {"within": within, "layers": timed, "first_round": first_round},
            "results": results,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=lambda v: None if isinstance(v, float) and
                      not math.isfinite(v) else v)
        print(f"results written to {args.json}")
    if args.plot:
        _plot(results, args.plot, args.device + (", CPU time" if args.cpu_time else ""))
    return 1 if mismatches else 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convcore", description="convcore convolution library")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="version, build options (BLAS, FFT, CUDA), visible GPUs")
    info.set_defaults(func=cmd_info)
    bench = sub.add_parser(
        "bench", help="time every applicable algorithm on a suite of layers",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("--suite", metavar="FILE", help="problem file (default: the built-in suite, "
                       "bench/suites/default.txt)")
    bench.add_argument("--algos", metavar="A,B", help="comma-separated algorithms to time "
                       "(default: every applicable one)")
    bench.add_argument("--reps", type=_positive_int, default=None,
                       help="timed runs per contender, interleaved (default 10; with --model: "
                       "rounds per network, default 20, fewer past --time-limit)")
    bench.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1; "
                       "with --model at least 2)")
    bench.add_argument("--threads", type=int, default=0, help="CPU threads for convcore and torch "
                       "(default: OpenMP's / torch's default; with --model: all cores)")
    bench.add_argument("--cpu-time", action="store_true", help="CPU: time with the process's CPU "
                       "time instead of the wall clock, steadier when other jobs share the cores "
                       "(use with --threads 1: it adds up the threads' time)")
    bench.add_argument("--cache", choices=["cold", "warm"], default="warm",
                       help="warm (default, how a layer runs in a network: its input was just "
                       "written): run the contender once untimed right before each timed run; "
                       "cold: flush the caches (CPU: the L3; GPU: the L2) before each timed run")
    bench.add_argument("--filters", choices=["prepared", "per-call"], default="prepared",
                       help="prepared (default): each algorithm keeps its transformed filters "
                            "across calls, as a network in inference; per-call: transformed at "
                            "every call, as a NumPy call without filter_version. auto selects "
                            "for the same protocol")
    bench.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    bench.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw",
                       help="convcore's x and y in the suite: packed NCHW (default) or NHWC (channels_last); "
                            "PyTorch runs both layouts either way")
    bench.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    bench.add_argument("--no-torch", action="store_true", help="do not time torch conv2d")
    bench.add_argument("--json", metavar="PATH", help="also write the results as JSON (with "
                       "--model: the networks' results, per layer, and the machine)")
    bench.add_argument("--plot", metavar="DIR", help="also draw the suite's sweeps as PNGs in DIR "
                       "(time against input size, against kernel size, crossover map; with --model: "
                       "one chart per network, end to end and per conv layer; needs matplotlib)")
    bench.add_argument("--from-json", metavar="PATH", help="time nothing: print and --plot the "
                       "results saved by an earlier --json")
    bench.add_argument("--no-retime", dest="retime", action="store_false", help="do not time "
                       "auto's choice and the fastest algorithm again, head to head, where the "
                       "first round's fastest is not auto's choice")
    bench.add_argument("-v", "--verbose", action="store_true", help="log each layer as it starts")
    model = bench.add_argument_group("whole networks (--model)")
    model.add_argument("--model", metavar="NAME[,NAME...]", help="time torchvision classification "
                       "networks end to end and per conv layer instead of the suite (e.g. "
                       "resnet18,resnet50,mobilenet_v2; also the video networks r3d_18, mc3_18, "
                       "r2plus1d_18, a 3-D U-Net unet3d and wav2vec 2.0's Conv1d feature "
                       "extractor wav2vec2_fe, each on its own input; `--model list` prints the "
                       "names; needs torchvision)")
    model.add_argument("--batch", type=_positive_int, help="batch size (default 1)")
    model.add_argument("--size", type=_positive_int, help="input height and width (default 224)")
    model.add_argument("--train", action="store_true", help="time a training step (forward, "
                       "cross-entropy loss, backward) instead of inference, and per conv layer "
                       "its forward, backward data and backward filter")
    model.add_argument("--no-fuse", action="store_true", help="convert without fuse=True "
                       "(by default batch norms are folded into the convolutions and residual "
                       "adds and activations run in their epilogue)")
    model.add_argument("--freeze", action="store_true", help="convert with freeze=True (layers "
                       "trust their weights' version counters instead of checking the weights' "
                       "bytes at every call, as the engines trust theirs)")
    model.add_argument("--engines", metavar="LIST", help="inference engines timed too, "
                       "comma-separated: torch.compile, onnxruntime, openvino, convcore-compile "
                       "(convcore inside torch.compile), all (the default in inference) or none")
    model.add_argument("--algo", help="convcore.torch.convert's algo: auto (default), find, or "
                       "an algorithm name")
    model.add_argument("--time-limit", type=float, metavar="S", help="stop a network's "
                       "end-to-end timing after S seconds, once 5 rounds are done (default 20)")
    model.add_argument("--write-suite", metavar="FILE", help="also write the networks' distinct "
                       "conv layers as a --suite file")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, convcore.Error) as e:
        print(f"convcore {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
