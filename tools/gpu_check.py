#!/usr/bin/env python3
"""make gpu-check: on a machine with an NVIDIA GPU and no network, build convcore with CUDA for
the GPU found, from what is on the machine plus the Debian packages of make gpu-deps, and run:

    build        unpack the packages, configure (CONVCORE_DEPS_PREFIX), build libconvcore, the
                 Python module, the tests/cpp/test_cuda_* programs and tools/gpu_sanitize_subset.c
    cuda_tests   the test_cuda_* programs (in parallel; a skipped test fails on a GPU machine)
    pytest_gpu   pytest tests/gpu
    sanitizer    compute-sanitizer memcheck and racecheck, side by side, on gpu_sanitize_subset
                 (one small problem per algorithm and pass)
    bench        tools/gpu_bench.py: the layer suites against PyTorch's cuDNN
    resnet50     tools/gpu_e2e.py: resnet50 at batch 32 through convcore.torch against PyTorch

Each stage has a time budget (seconds, --budget NAME=S); a stage may also use what the stages
before it left unused, so the whole run stays within the sum of the budgets. A stage that runs
out of time is stopped and reports what it did not run; a failed stage does not stop the later
ones (those that need the build are not run when it fails). Everything goes into one output
folder: summary.txt and summary.json at its top, device.txt, one folder of logs per stage.
Exit status 0 when every stage passed.

--dry-run (for a machine without a GPU): unpacks, configures and builds as above, then records
each GPU stage's commands with status "dry-run" instead of running them.
"""
import argparse
import datetime
import glob
import io
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Seconds per stage; the sum (470 s) keeps the run under 8 minutes. On an H200 machine's 16 cores
# the build took 111 s, the CUDA tests 34 s, the sanitizers 4 s, pytest 18 s, and the bench did
# 30 of its 73 layers in 95 s (bench/results/gpu-2026-11-26-h200.md).
BUDGETS = {"build": 150, "cuda_tests": 45, "pytest_gpu": 35, "sanitizer": 30, "bench": 170,
           "resnet50": 40}
BENCH_SUITES = ["bench/suites/default.txt", "bench/suites/vgg_gpu.txt", "bench/suites/im2win_gpu.txt",
                "bench/suites/polyhankel_gpu.txt", "bench/suites/pitas_gpu.txt"]
PYTHON_STAGES = ("pytest_gpu", "bench", "resnet50")
# Tests that check the no-GPU path: they skip when a GPU is present.
NO_GPU_TESTS = "CudaDevice.CreateWithoutGpuIsNotSupported:CudaWinogradFamilyNoGpu.*"


# ---- the Debian packages ---------------------------------------------------------------------

def _ar_members(path):
    """(name, bytes) of each member of an ar archive (a .deb)."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise ValueError(f"{path}: not an ar archive")
        while True:
            header = f.read(60)
            if len(header) < 60:
                return
            name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
            data = f.read(size)
            if size % 2:
                f.read(1)
            yield name, data


def unpack_debs(debs_dir, root):
    """Unpacks every .deb of debs_dir into root (as dpkg-deb -x does, in pure Python so that no
    Debian tool is needed). Returns the packages' file names."""
    debs = sorted(glob.glob(os.path.join(debs_dir, "*.deb")))
    if not debs:
        raise FileNotFoundError(f"no .deb files in {debs_dir}: run make gpu-deps on a machine with "
                                "network access first")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for deb in debs:
        data = next((d for n, d in _ar_members(deb) if n.startswith("data.tar")), None)
        if data is None:
            raise ValueError(f"{deb}: no data.tar member")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(root, filter="tar" if hasattr(tarfile, "tar_filter") else None)
    return [os.path.basename(d) for d in debs]


def system_libstdcxx():
    """The libstdc++.so.6 that the dynamic loader gives programs (ldconfig's cache), or None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        name, _, path = line.partition("=>")
        if name.strip().startswith("libstdc++.so.6 ") and "x86-64" in name and os.path.exists(path.strip()):
            return path.strip()
    return None


def link_system_libstdcxx(folder):
    """Makes folder/libstdc++.so point at the system's libstdc++.so.6, for the link's -L. The GPU
    image's compiler (/opt/gcc) links libstdc++ statically; a libconvcore with its own copy of
    the C++ runtime crashed in its first iostream use once Python had loaded the system's
    (std::ostream::_M_insert in convcoreGetBuildInfo). Linking the one the process loads
    anyway gives a single C++ runtime."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    target = system_libstdcxx()
    if target:
        os.symlink(target, os.path.join(folder, "libstdc++.so"))


def deps_library_dirs(root):
    lib = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    return [lib, os.path.join(lib, "openblas-openmp")]


# ---- running commands --------------------------------------------------------------------------

def run_commands(commands, log_dir, deadline, env):
    """Runs commands [(name, argv, cwd)] at once, each logging to log_dir/<name>.log, until
    they end or the deadline passes (then each one left is killed with its process group).
    Returns {name: (status, returncode, seconds)}, status "ok", "failed" or "timed out"."""
    procs, results = {}, {}
    for name, argv, cwd in commands:
        log = open(os.path.join(log_dir, f"{name}.log"), "wb")
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        try:
            procs[name] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd or ROOT,
                                            env=env, start_new_session=True), log, time.monotonic())
        except OSError as e:
            log.write(f"!!! could not start: {e}\n".encode())
            log.close()
            results[name] = ("failed", None, 0.0)
    for name, (proc, log, began) in procs.items():
        try:
            rc = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=5)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            rc, status = None, "timed out"
            log.write(b"\n!!! stopped: the stage's time budget ran out\n")
        log.close()
        results[name] = (status, rc, round(time.monotonic() - began, 1))
    return results


class Stage:
    """A stage: steps run in order, each a list of commands run at once, or a Python function."""

    def __init__(self, name, needs_gpu=True, stop_on_failure=False):
        self.name, self.needs_gpu, self.stop_on_failure = name, needs_gpu, stop_on_failure
        self.steps = []

    def commands(self, *commands):
        """One step of commands (name, argv[, cwd]) run in parallel. argv may be a function of
        the seconds the stage has left (for scripts with their own time limit)."""
        self.steps.append(("commands", [(c[0], c[1], c[2] if len(c) > 2 else None) for c in commands]))
        return self

    def call(self, name, fn):
        self.steps.append(("call", (name, fn)))
        return self


def run_stage(stage, deadline, ctx):
    """Runs the stage's steps until the deadline passes (or, with stop_on_failure, one fails);
    returns its record."""
    log_dir = os.path.join(ctx.out, stage.name)
    os.makedirs(log_dir, exist_ok=True)
    record = {"stage": stage.name, "budget_s": BUDGETS[stage.name],
              "time_allowed_s": round(deadline - time.monotonic(), 1), "steps": [], "not_run": []}
    began = time.monotonic()
    stop = None
    for kind, payload in stage.steps:
        items = payload if kind == "commands" else [payload]
        if stop:
            record["not_run"] += [item[0] for item in items]
            continue
        if kind == "call":
            name, fn = payload
            t0 = time.monotonic()
            try:
                fn()
                status, detail = "ok", None
            except Exception as e:  # noqa: BLE001  (the record says what failed)
                status, detail = "failed", f"{type(e).__name__}: {e}"
            record["steps"].append({"step": name, "status": status, "seconds": round(time.monotonic() - t0, 1),
                                    **({"error": detail} if detail else {})})
            if status != "ok":
                stop = status
            continue
        # (a dry run records the commands as a run that reached the stage on time would run them)
        left = BUDGETS[stage.name] if ctx.dry_run and stage.needs_gpu else deadline - time.monotonic()
        payload = [(name, argv(left) if callable(argv) else argv, cwd) for name, argv, cwd in payload]
        if ctx.dry_run and stage.needs_gpu:
            for name, argv, cwd in payload:
                record["steps"].append({"step": name, "status": "dry-run", "command": shlex.join(argv),
                                        "cwd": os.path.relpath(cwd or ROOT, ROOT)})
            continue
        if time.monotonic() >= deadline:
            record["not_run"] += [name for name, _, _ in payload]
            stop = "timed out"
            continue
        results = run_commands(payload, log_dir, deadline, ctx.env)
        for name, argv, cwd in payload:
            status, rc, seconds = results[name]
            record["steps"].append({"step": name, "status": status, "returncode": rc, "seconds": seconds,
                                    "command": shlex.join(argv), "log": f"{stage.name}/{name}.log"})
            if status == "timed out" or (status != "ok" and stage.stop_on_failure):
                stop = stop or status
    statuses = [s["status"] for s in record["steps"]]
    if "timed out" in statuses or (record["not_run"] and stop == "timed out"):
        record["status"] = "timed out"
    elif "failed" in statuses:
        record["status"] = "failed"
    elif "dry-run" in statuses:
        record["status"] = "dry-run"
    else:
        record["status"] = "ok"
    record["seconds"] = round(time.monotonic() - began, 1)
    return record


# ---- the stages ---------------------------------------------------------------------------------

class Context:
    def __init__(self, args):
        self.args, self.dry_run = args, args.dry_run
        self.out = os.path.abspath(args.out)
        self.build = os.path.abspath(args.build_dir)
        self.deps_root = os.path.join(self.build, "deps-root")
        self.site = os.path.join(self.build, "site")
        self.stdcxx = os.path.join(self.build, "system-libstdcxx")
        self.python = sys.executable
        # The Python module needs this Python's headers; without them the C++ stages still run.
        self.python_headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
        env = dict(os.environ)
        # cmake and ninja of this Python's environment; nvcc and compute-sanitizer of the toolkit.
        path = [os.path.dirname(self.python), "/usr/local/cuda/bin", env.get("PATH", "")]
        env["PATH"] = os.pathsep.join(p for p in path if p)
        # The packages' libraries (libopenblas.so.0 loads libgfortran.so.5 from here too).
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            deps_library_dirs(self.deps_root) + [p for p in [env.get("LD_LIBRARY_PATH")] if p])
        env["PYTHONPATH"] = os.pathsep.join([self.site] + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env = env
        self.cuda_tests = sorted(os.path.splitext(os.path.basename(p))[0]
                                 for p in glob.glob(os.path.join(ROOT, "tests/cpp/test_cuda_*.cpp")))


def query_gpu():
    """[(name, compute capability "9.0", driver, memory)] of nvidia-smi, [] without one."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [tuple(f.strip() for f in line.split(",")) for line in out.stdout.splitlines() if line.strip()]


def cuda_architecture(gpus, requested):
    if requested:
        return requested
    if gpus and len(gpus[0]) > 1 and gpus[0][1].replace(".", "").isdigit():
        return gpus[0][1].replace(".", "")
    return "90"


def make_site(ctx):
    """The Python package as an import path: python/convcore's files and the built module."""
    package = os.path.join(ctx.site, "convcore")
    shutil.rmtree(ctx.site, ignore_errors=True)
    os.makedirs(package)
    for path in glob.glob(os.path.join(ROOT, "python", "convcore", "*.py")):
        os.symlink(path, os.path.join(package, os.path.basename(path)))
    modules = glob.glob(os.path.join(ctx.build, "_convcore*.so"))
    if not modules:
        raise FileNotFoundError(f"no _convcore*.so in {ctx.build}")
    os.symlink(modules[0], os.path.join(package, os.path.basename(modules[0])))


def check_cuda_libraries(ctx):
    """Fails when the configure step found no cuBLAS or cuFFT (from the toolkit or the building
    Python's nvidia-cublas / nvidia-cufft wheels): the build would answer NOT_SUPPORTED for the
    algorithms that use them, and the GPU tests would pass over those algorithms."""
    cache = {}
    with open(os.path.join(ctx.build, "CMakeCache.txt")) as f:
        for line in f:
            name, sep, value = line.strip().partition("=")
            if sep and not name.startswith(("//", "#")):
                cache[name.split(":")[0]] = value
    missing = [lib for lib in ("CUBLAS", "CUFFT")
               if not cache.get(f"CONVCORE_{lib}_LIBRARY") or cache[f"CONVCORE_{lib}_LIBRARY"].endswith("NOTFOUND")]
    if missing:
        raise RuntimeError(f"{' and '.join(missing)} not found for {ctx.python}: the CUDA toolkit or the "
                           "nvidia-cublas / nvidia-cufft wheels of that Python provide them")


def check_libraries(ctx):
    """ldd of libconvcore and the Python module into build/ldd.log; fails when OpenBLAS or FFTW
    resolves outside the unpacked packages, a library is not found, or libstdc++ is not a shared
    library (see link_system_libstdcxx)."""
    lines, bad = [], []
    for lib in glob.glob(os.path.join(ctx.build, "libconvcore.so*"))[:1] + \
            glob.glob(os.path.join(ctx.build, "_convcore*.so")):
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, env=ctx.env).stdout
        lines += [f"$ ldd {lib}", out]
        if "libstdc++.so.6" not in out:
            bad.append(f"{os.path.basename(lib)} has libstdc++ linked in statically (a second C++ runtime "
                       "next to the one Python loads)")
        for line in out.splitlines():
            if "not found" in line:
                bad.append(line.strip())
            elif any(k in line for k in ("libopenblas", "libfftw3", "libgfortran")) and \
                    ctx.deps_root not in line:
                bad.append(line.strip())
    with open(os.path.join(ctx.out, "build", "ldd.log"), "w") as f:
        f.write("\n".join(lines))
    if bad:
        raise RuntimeError("libraries outside the packages or missing: " + "; ".join(bad))


def stages(ctx, arch):
    a = ctx.args
    configure = [
        "cmake", "-S", ROOT, "-B", ctx.build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
        "-DCONVCORE_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}",
        "-DCONVCORE_BUILD_TESTS=ON", f"-DCONVCORE_BUILD_PYTHON={'ON' if ctx.python_headers else 'OFF'}",
        f"-DPython_EXECUTABLE={ctx.python}", f"-DCONVCORE_DEPS_PREFIX={ctx.deps_root}",
        *[f"-DCMAKE_{kind}_LINKER_FLAGS=-L{ctx.stdcxx}" for kind in ("SHARED", "MODULE", "EXE")]]
    nvcc = shutil.which("nvcc", path=ctx.env["PATH"])
    if nvcc:
        configure.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    try:
        import pybind11
        configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
    except ImportError:
        pass
    build = ["cmake", "--build", ctx.build, "-j", str(a.jobs), "--target", "convcore",
             *(["_convcore"] if ctx.python_headers else []), *ctx.cuda_tests]
    subset = os.path.join(ctx.build, "gpu_sanitize_subset")
    compile_subset = ["cc", "-std=c11", "-O1", "-g", "-o", subset, os.path.join(ROOT, "tools/gpu_sanitize_subset.c"),
                      f"-I{ROOT}/cpp/include", f"-L{ctx.build}", "-lconvcore", f"-Wl,-rpath,{ctx.build}", "-lm"]
    result = [
        Stage("build", needs_gpu=False, stop_on_failure=True)
        .call("unpack the packages", lambda: unpack_debs(os.path.join(a.deps, "debs"), ctx.deps_root))
        .call("the system's libstdc++ for the link", lambda: link_system_libstdcxx(ctx.stdcxx))
        .commands(("configure", configure))
        .call("cuBLAS and cuFFT found", lambda: check_cuda_libraries(ctx))
        .commands(("compile", build))
        .commands(("compile_sanitize_subset", compile_subset))
        .call("python package", lambda: make_site(ctx) if ctx.python_headers else None)
        .call("ldd: OpenBLAS and FFTW from the packages", lambda: check_libraries(ctx))
        .commands(*([("import", [ctx.python, "-X", "faulthandler", "-c",
                                 "import convcore; print(convcore.build_info())"])] if ctx.python_headers else [])),
    ]
    tests_dir = os.path.join(ctx.build, "tests", "cpp")
    result.append(Stage("cuda_tests").commands(*[
        (t, ["env", "OMP_WAIT_POLICY=passive", os.path.join(tests_dir, t), f"--gtest_filter=-{NO_GPU_TESTS}",
             f"--gtest_output=xml:{os.path.join(ctx.out, 'cuda_tests', t + '.xml')}"], tests_dir)
        for t in ctx.cuda_tests]))
    result.append(Stage("pytest_gpu").commands(
        ("pytest", [ctx.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/gpu",
                    f"--junitxml={os.path.join(ctx.out, 'pytest_gpu', 'junit.xml')}"])))
    sanitizer = shutil.which("compute-sanitizer", path=ctx.env["PATH"]) or "compute-sanitizer"
    result.append(Stage("sanitizer").commands(  # both at once: each problem is tiny
        ("memcheck", [sanitizer, "--tool", "memcheck", "--error-exitcode", "1", subset]),
        ("racecheck", [sanitizer, "--tool", "racecheck", "--error-exitcode", "1", subset])))
    # The scripts' own time limits leave room to start Python (torch, CUDA) and write the report.
    result.append(Stage("bench").commands(
        ("gpu_bench", lambda left: [
            ctx.python, os.path.join(ROOT, "tools/gpu_bench.py"), "--out", os.path.join(ctx.out, "bench"),
            "--time-limit", f"{max(left - 15, 10):.0f}", *[os.path.join(ROOT, s) for s in BENCH_SUITES]])))
    result.append(Stage("resnet50").commands(
        ("gpu_e2e", lambda left: [
            ctx.python, os.path.join(ROOT, "tools/gpu_e2e.py"), "--model", "resnet50", "--batch", "32",
            "--out", os.path.join(ctx.out, "resnet50"), "--time-limit", f"{max(left - 5, 10):.0f}"])))
    return result


# ---- what each stage found ------------------------------------------------------------------------

def gtest_notes(ctx, record):
    notes, skipped = [], 0
    for t in ctx.cuda_tests:
        path = os.path.join(ctx.out, "cuda_tests", t + ".xml")
        if not os.path.exists(path):
            continue
        suites = ET.parse(path).getroot()
        cases = suites.iter("testcase")
        total = failed = skips = 0
        for case in cases:
            total += 1
            failed += case.find("failure") is not None
            skips += case.get("result") == "skipped" or case.find("skipped") is not None
        skipped += skips
        notes.append(f"{t}: {total} tests, {failed} failed, {skips} skipped")
    if skipped and record["status"] == "ok":
        record["status"] = "failed"
        notes.append(f"{skipped} test(s) skipped (a run on a GPU must skip none)")
    return notes


def junit_notes(path):
    if not os.path.exists(path):
        return []
    counts = {k: 0 for k in ("tests", "failures", "errors", "skipped")}
    for suite in ET.parse(path).getroot().iter("testsuite"):
        for k in counts:
            counts[k] += int(suite.get(k, 0))
    return [", ".join(f"{v} {k}" for k, v in counts.items())]


def log_tail(ctx, stage, step, pattern):
    path = os.path.join(ctx.out, stage, f"{step}.log")
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return [f"{step}: {line.strip()}" for line in f if pattern in line][-3:]


def json_notes(path, fn):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return fn(json.load(f))


def bench_notes(report, record):
    s = report.get("summary")
    if s is None:  # stopped before the end: bench.json holds the layers done so far
        done = sum(x["done"] for x in report["suites"])
        return [f"stopped early: {done} layers done (bench.json has them)"]
    notes = [f"{x['suite']}: {x['done']}/{x['layers']} layers" + (f" ({len(x['not_run'])} not run: time limit)"
                                                                  if x["not_run"] else "")
             for x in report["suites"]]
    if s["geomean_speedup_vs_torch"]:
        notes.append(f"geometric mean speedup of the fastest convcore algorithm vs PyTorch: "
                     f"{s['geomean_speedup_vs_torch']:.2f}x over {s['done']} layers")
    if s["mismatches"]:
        notes.append("MISMATCH against DIRECT: " + ", ".join(s["mismatches"]))
    if s["not_run"] and record["status"] == "ok":
        record["status"] = "incomplete"
    return notes


def e2e_notes(r):
    if not r.get("speedup"):
        return [f"failed: {r.get('failed')}"]
    c = r["contenders"]
    return [f"{r['model']} batch {r['batch']}: PyTorch {c[r['best_pytorch']]['median_ms']:.2f} ms "
            f"({r['best_pytorch']}), convcore {c[r['best_convcore']]['median_ms']:.2f} ms "
            f"({r['best_convcore']}): speedup {r['speedup']:.2f}x; logits "
            + ("ok" if r["correct"] else "MISMATCH")]


def add_notes(ctx, record):
    name = record["stage"]
    if record["status"] == "dry-run":
        return
    if name == "cuda_tests":
        record["notes"] = gtest_notes(ctx, record)
    elif name == "pytest_gpu":
        record["notes"] = junit_notes(os.path.join(ctx.out, name, "junit.xml"))
    elif name == "sanitizer":
        record["notes"] = log_tail(ctx, name, "memcheck", "ERROR SUMMARY") + \
            log_tail(ctx, name, "racecheck", "RACECHECK SUMMARY") + \
            log_tail(ctx, name, "racecheck", "ERROR SUMMARY")
    elif name == "bench":
        record["notes"] = json_notes(os.path.join(ctx.out, "bench", "bench.json"),
                                     lambda r: bench_notes(r, record))
    elif name == "resnet50":
        record["notes"] = json_notes(os.path.join(ctx.out, "resnet50", "e2e.json"), e2e_notes)


# ---- main ----------------------------------------------------------------------------------------

def git_commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def write_device_info(ctx, gpus):
    lines = [f"host: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs",
             f"python: {sys.executable} {platform.python_version()}"]
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run([smi], capture_output=True, text=True, timeout=30)
        lines += ["", "$ nvidia-smi", out.stdout]
    else:
        lines.append("no nvidia-smi")
    nvcc = shutil.which("nvcc", path=ctx.env["PATH"])
    if nvcc:
        lines += ["$ nvcc --version", subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout]
    try:
        out = subprocess.run([ctx.python, "-c", "import torch; print('torch', torch.__version__, 'cuda', "
                              "torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"],
                             capture_output=True, text=True, timeout=60)
        lines.append(out.stdout.strip() or out.stderr.strip()[-500:])
    except (OSError, subprocess.SubprocessError) as e:
        lines.append(f"torch: {e}")
    with open(os.path.join(ctx.out, "device.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def summary_text(summary):
    out = [f"convcore gpu-check {summary['date']}" + ("  (DRY RUN: no GPU command was run)"
                                                      if summary["dry_run"] else ""),
           f"commit: {summary['commit']}",
           f"device: {summary['device']}, built for sm_{summary['cuda_architecture']}",
           f"result: {('DRY RUN OK' if summary['dry_run'] else 'PASS') if summary['passed'] else 'FAIL'} "
           f"in {summary['seconds']} s "
           f"(budget {sum(BUDGETS.values())} s)", ""]
    for r in summary["stages"]:
        out.append(f"{r['stage']:<11} {r['status']:<10} {r['seconds']:6.1f} s of {r['budget_s']} s")
        for s in r["steps"]:
            if s["status"] not in ("ok", "dry-run"):
                out.append(f"    {s['step']}: {s['status']}" + (f" ({s['error']})" if s.get("error") else "")
                           + (f", see {s['log']}" if s.get("log") else ""))
            elif s["status"] == "dry-run":
                out.append(f"    dry-run {s['step']}: {s['command']}")
        if r["not_run"]:
            out.append(f"    not run: {', '.join(r['not_run'])}")
        for note in r.get("notes", []):
            out.append(f"    {note}")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deps", default=os.path.join(ROOT, ".gpu-deps"), help="make gpu-deps' folder")
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "gpu-check-out"), help="output folder")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build", "gpu-check"))
    parser.add_argument("--dry-run", action="store_true", help="build, but only record the GPU stages' commands")
    parser.add_argument("--arch", help="CUDA architecture (default: the first GPU's, else 90)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    parser.add_argument("--budget", action="append", default=[], metavar="STAGE=S",
                        help=f"a stage's seconds (defaults: {BUDGETS})")
    parser.add_argument("--commit", default=os.environ.get("GPU_CHECK_COMMIT"),
                        help="the commit to report (default: git rev-parse HEAD)")
    parser.add_argument("--tar", help="also pack the output folder into this .tar.gz")
    args = parser.parse_args(argv)
    for item in args.budget:
        name, _, seconds = item.partition("=")
        if name not in BUDGETS:
            parser.error(f"--budget: unknown stage {name!r}; stages: {', '.join(BUDGETS)}")
        BUDGETS[name] = float(seconds)

    start = time.monotonic()
    ctx = Context(args)
    shutil.rmtree(ctx.out, ignore_errors=True)
    os.makedirs(ctx.out)
    gpus = query_gpu()
    arch = cuda_architecture(gpus, args.arch)
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "commit": args.commit or git_commit() or "unknown (no git checkout; pass --commit)",
               "device": "; ".join(f"{g[0]} (compute {g[1]}, driver {g[2]}, {g[3]})" if len(g) > 3 else g[0]
                                   for g in gpus) or "no NVIDIA GPU found",
               "cuda_architecture": arch, "python": ctx.python, "python_headers": ctx.python_headers,
               "dry_run": args.dry_run, "budgets_s": dict(BUDGETS),
               "stages": []}
    if not gpus and not args.dry_run:
        print("gpu-check: no NVIDIA GPU found (nvidia-smi); use --dry-run on a machine without one",
              file=sys.stderr)
    write_device_info(ctx, gpus)
    deadline = start
    built = True
    for stage in stages(ctx, arch):
        deadline += BUDGETS[stage.name]
        print(f"== {stage.name} (until {deadline - start:.0f} s)", flush=True)
        no_module = stage.name in PYTHON_STAGES and not ctx.python_headers
        if not built or no_module:
            why = ("the build failed" if not built else
                   f"no Python.h for {ctx.python}: the Python module was not built")
            record = {"stage": stage.name, "budget_s": BUDGETS[stage.name], "status": "not run",
                      "seconds": 0.0, "steps": [], "not_run": [f"all: {why}"]}
        else:
            record = run_stage(stage, deadline, ctx)
            add_notes(ctx, record)
        if stage.name == "build":
            built = record["status"] == "ok"
        summary["stages"].append(record)
        print(f"   {record['status']} in {record['seconds']} s", flush=True)
        summary["seconds"] = round(time.monotonic() - start, 1)
        # A bench that ran out of time for some layers is reported (incomplete), not failed:
        # what it measured stands, and the stages that check correctness decide the result.
        summary["passed"] = bool(gpus or args.dry_run) and all(
            r["status"] in (("ok", "dry-run") if args.dry_run else ("ok", "incomplete")) for r in summary["stages"])
        with open(os.path.join(ctx.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(ctx.out, "summary.txt"), "w") as f:
            f.write(summary_text(summary))
    print()
    print(summary_text(summary), end="")
    if args.tar:
        with tarfile.open(args.tar, "w:gz") as tar:
            tar.add(ctx.out, arcname=os.path.basename(ctx.out))
        print(f"packed into {args.tar}")
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
