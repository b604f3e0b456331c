"""``convcore bench --model NAME[,NAME...]``: does a network run faster on convcore?

Each torchvision classification model (random weights, float32) runs end to end in one process
as four contenders, interleaved with a rotating start order:

    pytorch nchw            the model as built
    pytorch channels_last   model and input in torch.channels_last
    convcore nchw           a copy converted with convcore.torch.convert(copy, algo=algo, fuse=fuse)
                            (fuse, the default: a ReLU that directly follows a Conv2d in an
                            nn.Sequential runs in the convolution's epilogue, as a user runs it)
    convcore channels_last  the same converted copy, fed a channels_last input

speedup = the best PyTorch layout's time / the best convcore layout's time (> 1: convcore is
faster). Then a per-layer table, convcore's best layout against PyTorch's, interleaved and not
used for the end-to-end numbers: in inference from separate passes with hooks on every conv
module (the time from its forward pre-hook to its forward hook); in training from standalone
calls of each conv layer's forward, backward data and backward filter on random tensors of its
shapes (_bench_train_layers), with totals per pass.

    from convcore import model_bench
    result = model_bench.run(["resnet18"], batch=1, size=224)
    print(model_bench.format_model(result["models"][0]))

torchvision is a benchmark dependency only: this module is not imported by ``import convcore``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import difflib
import gc
import glob
import importlib.util
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

import convcore
import convcore.torch as convcore_torch
from convcore.bench_networks import NETWORKS, channels_last, model_channels_last
from convcore.bench_suite import BenchProblem
from convcore.bench_timing import (SPLIT_NS, STEAL_WARN, CpuTimer, cpu_model_name,
                                   openblas_coretype, round_trip_ns, single_threaded_numpy_blas,
                                   steal_ms_per_cpu, steal_since, stopwatch, time_rounds,
                                   worst_round_trip, worst_steal_share)

CONTENDERS = ("pytorch nchw", "pytorch channels_last", "convcore nchw", "convcore channels_last")
# The inference engines CPU users deploy, timed with the contenders above (inference only):
# their name in results -> the --engines name. Each runs in the layout it is fastest in:
# torch.compile's (inductor with freezing) and convcore's compiled model take channels_last
# input; ONNX Runtime and OpenVINO take the NCHW array and choose their own layouts.
ENGINES = {"torch.compile channels_last": "torch.compile", "onnxruntime": "onnxruntime",
           "openvino": "openvino", "convcore torch.compile channels_last": "convcore-compile"}
# convcore's relative L2 error vs PyTorch NCHW is flagged above max(ERROR_BOUND, LAYOUT_FACTOR x
# PyTorch's own channels_last vs NCHW difference): training gradients through batch norm over few
# values differ by 1e-2 between PyTorch's two layouts already (googlenet, batch 2, 96x96).
ERROR_BOUND = 1e-3
LAYOUT_FACTOR = 4
DEFAULT_REPS = 20
MIN_REPS = 5  # timed rounds before the time limit may stop the timing
DEFAULT_TIME_LIMIT = 20.0  # seconds of end-to-end timing per model
LAYER_REPS = 10  # hooked passes per side (training: rounds per layer), at most
MIN_LAYER_REPS = 3  # passes (rounds) before the time limit (half the end-to-end one) may stop them
TRAIN_PASSES = ("forward", "backward_data", "backward_filter")  # backward_filter: dw, and db
WARMUP = 2
COMMON_MODELS = ("resnet18", "resnet50", "mobilenet_v2", "vgg16", "efficientnet_b0")

_TORCHVISION_SCHEMAS = {
    "torchvision::nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "torchvision::qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


# ---- torchvision and the models ------------------------------------------------------------------

def _has_schema(qualified_name):
    try:
        torch._C._get_schema(qualified_name, "")
        return True
    except RuntimeError:
        return False


def import_torchvision() -> Any:
    """``torchvision.models``, also where torchvision's C++ ops do not load.

    The torchvision wheel on PyPI is built against CUDA torch; with the CPU torch its ops
    library fails to load, and its import then fails registering fake kernels for
    torchvision::nms and torchvision::qnms ("operator torchvision::nms does not exist"). The
    ops library is loaded first, as torchvision would; where that fails, the two schemas are
    defined (without kernels: the classification models do not call them)."""
    if "torchvision.models" in sys.modules:
        return sys.modules["torchvision.models"]
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        raise ImportError(f"the model benchmark needs torchvision, which is not installed: "
                          f"pip install the torchvision release that matches torch "
                          f"{torch.__version__} (`make venv` does)")
    for directory in spec.submodule_search_locations or []:
        for path in glob.glob(os.path.join(directory, "_C*.so")) + glob.glob(
                os.path.join(directory, "_C*.pyd")):
            try:
                torch.ops.load_library(path)
            except (OSError, ImportError, RuntimeError):
                pass
    for name, schema in _TORCHVISION_SCHEMAS.items():
        if not _has_schema(name):
            torch.library.define(name, schema)
    try:
        import torchvision.models
    except Exception as e:
        raise ImportError(f"importing torchvision failed: {type(e).__name__}: {e}") from e
    return torchvision.models


def model_names() -> List[str]:
    """torchvision's classification models, then the 1-D, 3-D and transposed convolutions'
    networks (bench_networks.NETWORKS: torchvision's video models, a 3-D U-Net, wav2vec 2.0's
    feature extractor)."""
    models = import_torchvision()
    return models.list_models(module=models) + list(NETWORKS)


def check_model_names(names: Sequence[str]) -> None:
    valid = model_names()
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"unknown model {name!r}{hint}; torchvision's classification models "
                             f"include {', '.join(COMMON_MODELS)} ({len(valid)} in all: "
                             f"`convcore bench --model list` prints them)")


def build_model(name: str, seed: int = 0) -> nn.Module:
    """torchvision's ``name`` (or bench_networks') with random weights (seeded), float32, in eval
    mode."""
    check_model_names([name])
    models = import_torchvision()
    torch.manual_seed(seed)
    if name in NETWORKS:
        return NETWORKS[name][0](models).float().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # googlenet's, inception_v3's weight init
        return models.get_model(name, weights=None).float().eval()


# The conv modules that BenchProblem (a 2-D convolution) does not describe: their per-layer rows
# in inference are NdLayers.
_ND_CONVS = (nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def _conv_modules(model, types=(nn.Conv2d,) + _ND_CONVS):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, types)]


class NdLayer:
    """A 1-D or 3-D convolution, or a transposed one, as a per-layer row describes it: its
    benchdnn-style descriptor (depth fields id/kd/pd/sd/dd; a transposed layer starts with
    "deconv:", its ic/id/ih/iw those of its input) and its FLOPs."""

    def __init__(self, module: Any, x_shape: Tuple[int, ...], y_shape: Tuple[int, ...]):
        self.transposed = isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d,
                                              nn.ConvTranspose3d))
        self.x_shape, self.y_shape = tuple(x_shape), tuple(y_shape)
        self.kernel, self.stride = tuple(module.kernel_size), tuple(module.stride)
        self.padding, self.dilation = _padding(module), tuple(module.dilation)
        self.oc, self.groups = module.out_channels, module.groups

    def descriptor(self) -> str:
        axes = "dhw"[3 - len(self.kernel):]
        fields = [f"mb{self.x_shape[0]}ic{self.x_shape[1]}"]
        fields += [f"i{a}{n}" for a, n in zip(axes, self.x_shape[2:])]
        fields.append(f"oc{self.oc}")
        for prefix, values in (("k", self.kernel), ("p", self.padding), ("s", self.stride),
                               ("d", self.dilation)):
            fields += [f"{prefix}{a}{n}" for a, n in zip(axes, values)]
        return ("deconv:" if self.transposed else "") + "".join(fields) + f"g{self.groups}"

    def flops(self) -> float:
        # every (input, output, tap) product of the convolution: a transposed one's taps meet
        # each input point, a convolution's each output point
        points = self.x_shape[2:] if self.transposed else self.y_shape[2:]
        taps = 1
        for n in tuple(self.kernel) + tuple(points):
            taps *= n
        return 2.0 * self.x_shape[0] * self.oc * (self.x_shape[1] // self.groups) * taps


def _padding(conv):
    if conv.padding == "valid":
        return (0, 0)
    if conv.padding == "same":
        return tuple(d * (k - 1) // 2 for d, k in zip(conv.dilation, conv.kernel_size))
    return tuple(conv.padding)


# {module name: (input shape, output shape)}
_Shapes = Dict[str, Tuple[Tuple[int, ...], Tuple[int, ...]]]


def _conv_shapes(model: nn.Module, x: torch.Tensor,
                 types: Tuple[type, ...]) -> Tuple[List[Tuple[str, Any]], _Shapes]:
    """(the conv modules of `types`, the shapes of the first call of each that a forward pass
    on x runs)."""
    convs = _conv_modules(model, types)
    shapes: _Shapes = {}

    def recorder(name):
        def hook(module, args, output):
            shapes.setdefault(name, (tuple(args[0].shape), tuple(output.shape)))
        return hook
    handles = [m.register_forward_hook(recorder(name)) for name, m in convs]
    try:
        with torch.inference_mode():
            model(x)
    except RuntimeError as e:
        raise ValueError(f"{type(model).__name__} does not run on an input of shape "
                         f"{tuple(x.shape)}: {e}") from None
    finally:
        for h in handles:
            h.remove()
    return convs, shapes


def conv_problems(model: nn.Module, x: torch.Tensor) -> List[Tuple[str, BenchProblem]]:
    """[(module name, BenchProblem)] for every conv module that a forward pass on x runs, in
    the order of model.named_modules()."""
    convs, shapes = _conv_shapes(model, x, (nn.Conv2d,))
    problems = []
    for name, m in convs:
        if name not in shapes or len(shapes[name][0]) != 4:
            continue
        n, c, h, w = shapes[name][0]
        ph, pw = _padding(m)
        problems.append((name, BenchProblem(
            mb=n, ic=c, ih=h, iw=w, oc=m.out_channels, kh=m.kernel_size[0], kw=m.kernel_size[1],
            sh=m.stride[0], sw=m.stride[1], ph=ph, pw=pw, dh=m.dilation[0], dw=m.dilation[1],
            g=m.groups, name=name)))
    return problems


def nd_layers(model: nn.Module, x: torch.Tensor) -> List[Tuple[str, NdLayer]]:
    """[(module name, NdLayer)] for every 1-D, 3-D or transposed conv module that a forward pass
    on x runs (their first call), in the order of model.named_modules()."""
    convs, shapes = _conv_shapes(model, x, _ND_CONVS)
    return [(name, NdLayer(m, *shapes[name])) for name, m in convs if name in shapes]


def _input(batch, size, seed, name=None):
    """The model's input: batch x 3 x size x size for the image classifiers; for
    bench_networks' models their own input shape (size does not apply)."""
    shape = (3, size, size) if name not in NETWORKS else NETWORKS[name][1]
    return torch.randn(batch, *shape, generator=torch.Generator().manual_seed(seed))


def _classifies(name):
    """Whether the model's output is one class score vector per example (cross-entropy)."""
    return name not in NETWORKS or NETWORKS[name][2]


def _logits(output):
    """The logits of a model's output (inception_v3 and googlenet return a tuple in training)."""
    if isinstance(output, torch.Tensor):
        return output
    return output.logits if hasattr(output, "logits") else output[0]


def suite_text(models: Sequence[str], batch: int = 1, size: int = 224, seed: int = 0) -> str:
    """A suite file (`convcore bench --suite`) of the models' conv layers: one line per distinct
    problem, named after its first layer ("resnet18:layer1.0.conv1")."""
    check_model_names(models)
    lines = [f"# conv layers of {', '.join(models)} (batch {batch}, {size}x{size}), written by "
             f"`convcore bench --model ... --write-suite`",
             "# one line per distinct problem, named after the first layer that has it"]
    seen: Dict[str, List[Any]] = {}  # descriptor -> [label, count]
    for name in models:
        model = build_model(name, seed)
        for layer, problem in conv_problems(model, _input(batch, size, seed, name)):
            key = problem.descriptor()
            if key in seen:
                seen[key][1] += 1
            else:
                seen[key] = [f"{name}:{layer}", 1]
    width = max(len(key) for key in seen) if seen else 0
    for key, (label, count) in seen.items():
        lines.append(f"{key.ljust(width)}  {label}" + (f"  # {count} layers" if count > 1 else ""))
    return "\n".join(lines) + "\n"


def write_suite(path: str, models: Sequence[str], batch: int = 1, size: int = 224,
                seed: int = 0) -> int:
    """Writes suite_text(...) to path; returns the number of problems written."""
    text = suite_text(models, batch, size, seed)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


# ---- timing --------------------------------------------------------------------------------------

class _Status:
    """A progress line on stderr, rewritten with '\\r' on a terminal; elsewhere only the stage
    messages, as plain lines (or through ``log`` when one is given)."""

    def __init__(self, log=None):
        self.log_fn = log
        self.tty = log is None and sys.stderr.isatty()
        self.width = 0

    def progress(self, text):
        if self.tty:
            sys.stderr.write("\r" + text.ljust(self.width))
            sys.stderr.flush()
            self.width = len(text)

    def stage(self, text):
        if self.tty:
            self.progress(text)
        elif self.log_fn is not None:
            self.log_fn(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def clear(self):
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


def _progress(status: _Status, what: str, reps: int) -> Callable[[int, float], None]:
    """time_rounds' on_round: the progress line of a timing ("<what> rep 3/20 (4 s)")."""
    return lambda rep, elapsed: status.progress(f"{what} rep {rep + 1}/{reps} ({elapsed:.0f} s)")


class LayerClock:
    """Per-pass time of each conv module of a model: from the end of its forward pre-hook to
    its forward hook (summed when a module runs more than once in a pass)."""

    def __init__(self, model):
        self.modules = dict(_conv_modules(model))
        self.passes, self.networks = [], []
        self.current, self.started = {}, {}
        self.handles = []
        for name, m in self.modules.items():
            self.handles.append(m.register_forward_pre_hook(self._pre_hook(name)))
            self.handles.append(m.register_forward_hook(self._hook(name)))

    def _pre_hook(self, name):
        def hook(module, args):
            self.started[name] = time.perf_counter()
        return hook

    def _hook(self, name):
        def hook(module, args, output):
            ms = (time.perf_counter() - self.started.pop(name)) * 1e3
            self.current[name] = self.current.get(name, 0.0) + ms
        return hook

    def timed_pass(self, fn):
        """Runs fn (one forward pass), records its layers; returns the pass's time in ms."""
        self.current = {}
        start = time.perf_counter()
        fn()
        ms = (time.perf_counter() - start) * 1e3
        self.passes.append(self.current)
        self.networks.append(ms)
        return ms

    def layer_ms(self, name):
        return statistics.median(p.get(name, 0.0) for p in self.passes)

    def network_ms(self):
        return statistics.median(self.networks)

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def _relative_error(y, ref):
    y, ref = y.detach().double(), ref.detach().double()
    norm = torch.linalg.vector_norm(ref).item()
    return torch.linalg.vector_norm(y - ref).item() / (norm if norm > 0 else 1.0)


def _train_step(model, x, labels):
    """One step: cross-entropy against labels, or (labels None: a model that does not classify)
    the mean square of the output."""
    model.zero_grad(set_to_none=True)
    logits = _logits(model(x))
    loss = F.cross_entropy(logits, labels) if labels is not None else logits.square().mean()
    loss.backward()
    return logits


def _train_outputs(model, x, labels, seed):
    """The logits and all parameter gradients of one training step (dropout seeded)."""
    torch.manual_seed(seed)
    logits = _train_step(model, x, labels).detach()
    grads = [p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]
    return logits, torch.cat(grads) if grads else torch.zeros(0)


# ---- inference engines ---------------------------------------------------------------------------

def engine_names(spec: Optional[str]) -> List[str]:
    """The ENGINES result names that --engines ``spec`` ("all", "none" or a comma-separated
    list of their --engines names) selects."""
    if spec in (None, "", "none"):
        return []
    if spec == "all":
        return list(ENGINES)
    wanted = [w.strip() for w in spec.split(",") if w.strip()]
    by_option = {option: name for name, option in ENGINES.items()}
    for w in wanted:
        if w not in by_option:
            raise ValueError(f"--engines: unknown engine {w!r}; choose from "
                             f"{', '.join(by_option)}, all or none")
    return [by_option[w] for w in wanted]


@contextlib.contextmanager
def _inductor_freezing():
    import torch._inductor.config as inductor_config
    with inductor_config.patch(freezing=True):
        yield


def _compiled(model, x):
    """torch.compile(model) with inductor's freezing (weights as constants: batch norms folded,
    weights prepacked), compiled by a first call under inference_mode."""
    compiled = torch.compile(model)
    with _inductor_freezing(), torch.inference_mode():
        compiled(x)
    return lambda: compiled(x)


def onnx_bytes(model: nn.Module, x: torch.Tensor) -> bytes:
    """The ONNX model of ``model`` on input ``x`` (the legacy exporter, opset 17)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (typed as a path; the legacy exporter writes to a file object as well)
        torch.onnx.export(model, (x,), buffer, dynamo=False, opset_version=17)  # type: ignore[arg-type]
    return buffer.getvalue()


def onnxruntime_options(threads: int) -> Any:
    """ONNX Runtime's session options for the benchmark: ``threads`` intra-op threads, every
    graph optimization, and threads that sleep between runs, as the other contenders' do
    (spinning ones would take the cores from the contender timed next)."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _onnxruntime(model, x, threads):
    try:
        import onnxruntime
    except ImportError:
        raise _Missing("onnxruntime is not installed (pip install onnxruntime)") from None
    session = onnxruntime.InferenceSession(onnx_bytes(model, x), onnxruntime_options(threads),
                                           providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x.numpy()}
    return lambda: torch.from_numpy(session.run(None, feed)[0])


def _openvino(model, x, threads):
    try:
        import openvino
    except ImportError:
        raise _Missing("openvino is not installed (pip install openvino)") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = openvino.convert_model(model, example_input=x)
    compiled = openvino.Core().compile_model(converted, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads})
    request, output, array = compiled.create_infer_request(), compiled.output(0), x.numpy()
    return lambda: torch.from_numpy(request.infer([array])[output])


class _Missing(Exception):
    """An engine that is not installed."""


def _build_engine(name, model, x, algo, threads, freeze=False):
    """A function that runs ``model`` (eval mode) on ``x`` in engine ``name`` and returns its
    output as a torch tensor. "channels_last": the input's rank's channels-last memory
    (bench_networks.channels_last: 4-D, 5-D, or N x L x C for a 1-D signal)."""
    x_last = channels_last(x)
    if name == "torch.compile channels_last":
        return _compiled(model_channels_last(copy.deepcopy(model), x.dim()), x_last)
    if name == "convcore torch.compile channels_last":
        return _compiled(convcore_torch.convert(copy.deepcopy(model), algo=algo, fuse=True,
                                                freeze=freeze), x_last)
    if name == "onnxruntime":
        return _onnxruntime(model, x, threads)
    if name == "openvino":
        return _openvino(model, x, threads)
    raise ValueError(f"unknown engine {name!r}")


# ---- one model -----------------------------------------------------------------------------------

def _summary(times):
    return {"times_ms": times, "min_ms": min(times), "median_ms": statistics.median(times)}


def _best(contenders, prefix, key):
    names = [n for n in contenders if n.startswith(prefix)]
    return min(names, key=lambda n: contenders[n][key]) if names else None


def bench_model(name: str, batch: int = 1, size: int = 224, train: bool = False,
                reps: int = DEFAULT_REPS, algo: str = "auto", warmup: int = WARMUP,
                time_limit: float = DEFAULT_TIME_LIMIT, layer_reps: int = LAYER_REPS,
                seed: int = 0, status: Optional[_Status] = None, fuse: bool = True,
                engines: Sequence[str] = (), threads: Optional[int] = None,
                freeze: bool = False) -> Dict[str, Any]:
    """The result dict of one model (see run())."""
    status = status or _Status()
    min_reps = min(MIN_REPS, reps)
    mode = "train" if train else "inference"
    status.stage(f"{name}: building ({mode}, batch {batch}, {size}x{size}, algo {algo})")
    model = build_model(name, seed)
    x = _input(batch, size, seed, name)
    problems = conv_problems(model, x)
    nd_problems = nd_layers(model, x)  # timed per layer in inference only
    models = {
        "pytorch nchw": model,
        # channels_last_3d for 5-D inputs, N x L x C memory for 1-D ones (bench_networks)
        "pytorch channels_last": model_channels_last(copy.deepcopy(model), x.dim()),
        "convcore nchw": convcore_torch.convert(copy.deepcopy(model), algo=algo, fuse=fuse,
                                                freeze=freeze),
    }
    models["convcore channels_last"] = models["convcore nchw"]
    fallback = _fall_back_to_auto(models["convcore nchw"], problems, algo, train)
    inputs = {n: channels_last(x) if n.endswith("channels_last") else x for n in CONTENDERS}
    result = {"model": name, "mode": mode, "batch": batch, "size": size,
              "input_shape": list(x.shape), "algo": algo, "fuse": fuse,
              "freeze": freeze,
              "parameters": sum(p.numel() for p in model.parameters()),
              "conv_layers": len(problems) + len(nd_problems), "warmup": warmup, "algo_fallback": fallback,
              "failed": {}}

    if train:
        labels = None
        if _classifies(name):
            with torch.inference_mode():
                classes = _logits(model(x)).shape[1]
            labels = torch.randint(0, classes, (batch,), generator=torch.Generator().manual_seed(seed))
        for m in models.values():
            m.train()
        steps = {n: (lambda m=models[n], i=inputs[n]: _train_step(m, i, labels))
                 for n in CONTENDERS}
    else:
        steps = {n: (lambda m=models[n], i=inputs[n]: m(i)) for n in CONTENDERS}
        for engine in engines:
            status.stage(f"{name}: building {engine}")
            try:
                steps[engine] = _build_engine(engine, model, x, algo, threads or default_threads(),
                                              freeze)
            except _Missing as e:
                result["failed"][engine] = f"missing: {e}"
            except Exception as e:  # noqa: BLE001 - an engine's own failure is reported, never hidden
                result["failed"][engine] = f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    result["contender_names"] = list(CONTENDERS) + ([] if train else list(engines))
    grad_mode = torch.enable_grad() if train else torch.inference_mode()

    with grad_mode:
        # Correctness, once: against PyTorch NCHW (training: the logits and every parameter's
        # gradient of one step, dropout seeded alike).
        status.stage(f"{name}: checking outputs")
        outputs = {}
        for n in steps:
            try:
                outputs[n] = (_train_outputs(models[n], inputs[n], labels, seed) if train
                              else (_logits(steps[n]()),))
            except (RuntimeError, convcore.Error) as e:
                if n.startswith("pytorch"):
                    raise ValueError(f"{name} fails in PyTorch ({n}) at batch {batch}, size "
                                     f"{size}x{size}: {e}") from None
                result["failed"][n] = f"{type(e).__name__}: {e}"
        if all(n in result["failed"] for n in ("convcore nchw", "convcore channels_last")):
            raise ValueError(f"{name}: convcore fails in both layouts: "
                             + "; ".join(f"{n}: {msg}" for n, msg in result["failed"].items()))
        timed = {n: steps[n] for n in result["contender_names"] if n in outputs}
        reference = outputs["pytorch nchw"]
        result["rel_error"] = {n: max(_relative_error(a, b) for a, b in zip(outputs[n], reference))
                               for n in timed if n != "pytorch nchw"}
        result["error_bound"] = max(ERROR_BOUND, LAYOUT_FACTOR * result["rel_error"].get(
            "pytorch channels_last", 0.0))
        result["correct"] = all(e <= result["error_bound"] for n, e in result["rel_error"].items()
                                if n.startswith("convcore"))
        # An engine's own error is reported (it is not convcore's correctness).
        result["engines_correct"] = {n: result["rel_error"][n] <= result["error_bound"]
                                     for n in engines if n in result["rel_error"]}
        del outputs, reference

        status.stage(f"{name}: warm-up ({warmup} runs each)")
        for _ in range(warmup):
            for fn in timed.values():
                fn()
        status.stage(f"{name}: end to end, up to {reps} rounds")
        # A shared VM's state, before and after: a cache line's round trip between the two
        # threads (bench_timing.SPLIT_NS: the vCPUs on different L3 domains) and the
        # hypervisor's steal.
        round_trip0 = round_trip_ns()
        steal0, wall0 = steal_ms_per_cpu(), time.perf_counter()
        times = time_rounds({n: stopwatch(fn) for n, fn in timed.items()}, reps, time_limit,
                            min_reps, _progress(status, f"{name}: end-to-end", reps))
        result["round_trip_ns"] = [round_trip0, round_trip_ns()]
        result["steal"] = steal_since(steal0, (time.perf_counter() - wall0) * 1e3)
        result["reps"] = len(times["pytorch nchw"])
        result["contenders"] = {n: _summary(t) for n, t in times.items()}
        contenders = result["contenders"]
        eager = {n: c for n, c in contenders.items() if n in CONTENDERS}
        best_torch = result["best_pytorch"] = _best(eager, "pytorch", "median_ms")
        best_cc = result["best_convcore"] = _best(eager, "convcore", "median_ms")
        result["speedup"] = contenders[best_torch]["median_ms"] / contenders[best_cc]["median_ms"]
        result["speedup_min"] = (contenders[_best(eager, "pytorch", "min_ms")]["min_ms"]
                                 / contenders[_best(eager, "convcore", "min_ms")]["min_ms"])
        if engines:
            # Against the best engine: every contender that is not convcore's, convcore's best
            # way (eager or compiled).
            others = {n: c for n, c in contenders.items() if not n.startswith("convcore")}
            ours = {n: c for n, c in contenders.items() if n.startswith("convcore")}
            best_engine = result["best_engine"] = min(others, key=lambda n: others[n]["median_ms"])
            best_ours = result["best_convcore_any"] = min(ours, key=lambda n: ours[n]["median_ms"])
            result["speedup_vs_best_engine"] = (others[best_engine]["median_ms"]
                                                / ours[best_ours]["median_ms"])

        if train and layer_reps > 0:
            result.update(_bench_train_layers(name, problems, models[best_cc], inputs[best_cc],
                                              _layout(best_cc), _layout(best_torch), layer_reps,
                                              time_limit / 2, status, seed))
        elif layer_reps > 0:
            result.update(_bench_layers(name, problems + nd_problems, models[best_cc],
                                        inputs[best_cc],
                                        models[best_torch], inputs[best_torch], layer_reps,
                                        time_limit / 2, status))
    status.clear()
    return result


def _fall_back_to_auto(model, problems, algo, train):
    """With one algorithm name, the layers (or, in training, passes) it cannot run use "auto"
    instead; returns the names of the layers concerned."""
    if not isinstance(algo, str) or "," in algo or algo.lower() in ("auto", "find"):
        return []
    algo = algo.lower()
    modules = dict(model.named_modules())
    directions = ("forward", "backward_data", "backward_filter") if train else ("forward",)
    fallback = []
    for layer, problem in problems:
        module = modules[layer]
        if not isinstance(module, convcore_torch.Conv2d):
            continue
        conv = convcore.Convolution(problem.desc())
        passes = [algo if algo in conv.applicable_algos(problem.x_shape, problem.w_shape,
                                                        direction=d) else "auto"
                  for d in directions]
        if algo not in passes:
            module.algo = "auto"
            fallback.append(layer)
        elif train and "auto" in passes:
            module.algo = ",".join(passes)
    return fallback


def _bench_layers(name, problems, cc_model, cc_input, torch_model, torch_input, reps, time_limit,
                  status):
    """The per-layer rows from hooked passes, convcore and PyTorch interleaved."""
    status.stage(f"{name}: per layer, up to {reps} hooked passes each")
    clocks = {"convcore": LayerClock(cc_model), "pytorch": LayerClock(torch_model)}
    passes = {"convcore": lambda: clocks["convcore"].timed_pass(lambda: cc_model(cc_input)),
              "pytorch": lambda: clocks["pytorch"].timed_pass(lambda: torch_model(torch_input))}
    try:
        time_rounds(passes, reps, time_limit, min(MIN_LAYER_REPS, reps),
                    _progress(status, f"{name}: per-layer", reps))
    finally:
        for clock in clocks.values():
            clock.remove()
    cc_network, torch_network = clocks["convcore"].network_ms(), clocks["pytorch"].network_ms()
    cc_modules = dict(_conv_modules(cc_model))
    rows = []
    for layer, problem in problems:
        cc_ms, torch_ms = clocks["convcore"].layer_ms(layer), clocks["pytorch"].layer_ms(layer)
        module = cc_modules.get(layer)
        if isinstance(module, convcore_torch.Conv2d):
            algo = getattr(module, "last_algo", None) or "?"
            algo = algo.name.lower() if hasattr(algo, "name") else str(algo)
        elif isinstance(problem, NdLayer) and hasattr(module, "algo"):
            # the layer's setting: what auto chose is not exposed
            algo = f"{getattr(module, 'algo')} (nd)"
        else:
            algo = "pytorch"  # a Conv2d subclass that convert() leaves alone
        rows.append({"layer": layer, "problem": problem.descriptor(), "algo": algo,
                     "convcore_ms": cc_ms, "pytorch_ms": torch_ms,
                     "speedup": torch_ms / cc_ms if cc_ms > 0 else None,
                     "loss_ms": cc_ms - torch_ms,
                     "share_pct": 100.0 * cc_ms / cc_network if cc_network > 0 else None,
                     "gflops": problem.flops() / (cc_ms * 1e6) if cc_ms > 0 else None})
    return {"layer_reps": len(clocks["convcore"].networks), "layers": rows, "totals": {
        "convcore_conv_ms": sum(r["convcore_ms"] for r in rows), "convcore_network_ms": cc_network,
        "pytorch_conv_ms": sum(r["pytorch_ms"] for r in rows), "pytorch_network_ms": torch_network}}


# ---- per layer in training -----------------------------------------------------------------------

def _layout(contender):
    """"nchw" or "channels_last": the layout of a contender ("convcore channels_last")."""
    return contender.split()[1]


def _in_layout(t, layout):
    return t.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else t


def _layers_computing_dx(model, x):
    """The conv modules whose input requires grad in a training step: the others (the first
    layer, fed the image) compute no backward data."""
    needed: Dict[str, bool] = {}

    def recorder(name):
        def hook(module, args):
            needed[name] = needed.get(name, False) or args[0].requires_grad
        return hook
    convs = _conv_modules(model)
    handles = [m.register_forward_pre_hook(recorder(name)) for name, m in convs]
    try:
        with torch.enable_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return {name for name, required in needed.items() if required}


def _pytorch_passes(problem, x, w, bias, dy):
    """PyTorch's three passes of a layer: F.conv2d, and aten.convolution_backward (what its
    autograd calls) for dx alone and for dw (and db) alone."""
    stride, padding = [problem.sh, problem.sw], [problem.ph, problem.pw]
    dilation = [problem.dh, problem.dw]
    bias_sizes = None if bias is None else [bias.shape[0]]

    def backward(mask):
        return torch.ops.aten.convolution_backward(dy, x, w, bias_sizes, stride, padding, dilation,
                                                   False, [0, 0], problem.g, mask)
    return {"forward": lambda: F.conv2d(x, w, bias, stride, padding, dilation, problem.g),
            "backward_data": lambda: backward([True, False, False]),
            "backward_filter": lambda: backward([False, True, bias is not None])}


def _backward_algo(conv, direction, a, b, shape, algo_id):
    """The name of the algorithm conv's plan runs for a backward pass (what "auto" chose): one
    call of the binding that Convolution._backward_torch_cpu calls, which returns it."""
    data = direction == convcore_torch._BACKWARD_DATA
    # the output as _backward_torch_cpu makes it: dx in dy's layout, dw packed
    out = torch.empty(shape, memory_format=convcore._api._torch_memory_format(a) if data
                      else torch.contiguous_format)
    to_dlpack = torch.utils.dlpack.to_dlpack
    ran = convcore._convcore.backward_capsules(direction, to_dlpack(a), to_dlpack(b),
                                               to_dlpack(out), conv.desc._params, algo_id,
                                               conv._problems())
    return (convcore.BwdDataAlgo if data else convcore.BwdFilterAlgo)(ran).name.lower()


def _convcore_passes(module, problem, x, w, bias, dy):
    """({pass: fn}, {pass: algorithm name}): convcore's three passes of a converted layer as its
    autograd runs them in training (_Conv2dFunction: the layer's own Convolution, whose plans
    hold what "auto" chose in the end-to-end steps, and the layer's algo per pass); the
    convolution alone with its bias (a fused activation or batch norm is not part of it). A
    Conv2d subclass that convert() leaves alone runs PyTorch's passes ("pytorch")."""
    if not isinstance(module, convcore_torch.Conv2d):
        return _pytorch_passes(problem, x, w, bias, dy), dict.fromkeys(TRAIN_PASSES, "pytorch")
    if module.padding_mode == "zeros" and isinstance(module.padding, tuple):
        conv = module._own_convolution()
    else:
        conv = convcore.Convolution(problem.desc())
    _, fwd_algo, _, _, data_algo, filter_algo = convcore_torch._function_args(module._algo_spec,
                                                                              "identity")
    data, filt = convcore_torch._BACKWARD_DATA, convcore_torch._BACKWARD_FILTER
    x_shape, w_shape = tuple(x.shape), tuple(w.shape)

    def forward():
        y = conv._forward_torch_cpu(x, w, fwd_algo, convcore._convcore.FILTERS_PER_CALL, bias, 0)
        return y if y is not None else conv.forward(x, w, algo=fwd_algo, bias=bias)

    def backward_filter():
        if bias is None:
            return conv._backward_torch_cpu(filt, x, dy, w_shape, filter_algo)
        return conv._backward_filter_bias_torch_cpu(x, dy, w_shape, filter_algo)
    forward()
    algos = {"forward": conv.last_algo or "?",
             "backward_data": _backward_algo(conv, data, dy, w, x_shape, data_algo),
             "backward_filter": _backward_algo(conv, filt, x, dy, w_shape, filter_algo)}
    passes = {"forward": forward,
              "backward_data": lambda: conv._backward_torch_cpu(data, dy, w, x_shape, data_algo),
              "backward_filter": backward_filter}
    return passes, algos


def _bench_train_layers(name, problems, cc_model, cc_input, cc_layout, torch_layout, reps,
                        time_limit, status, seed):
    """The per-layer rows of training, one per conv layer and pass (forward, backward data,
    backward filter with the bias's gradient), and their totals per pass."""
    status.stage(f"{name}: per layer and training pass, up to {reps} rounds each")
    cc_modules = dict(_conv_modules(cc_model))
    computing_dx = _layers_computing_dx(cc_model, cc_input)
    generator = torch.Generator().manual_seed(seed)
    rows, rounds = [], []
    # time_rounds collects garbage before each round: 0.1 s with torchvision's objects, paid per
    # layer and round here, unless the objects that exist now are left out of collections
    gc.freeze()
    try:
        with torch.no_grad():
            for number, (layer, problem) in enumerate(problems, 1):
                status.progress(f"{name}: training passes, layer {number}/{len(problems)} {layer}")
                layer_rows, layer_rounds = _time_train_layer(
                    layer, problem, cc_modules.get(layer), cc_layout, torch_layout, reps,
                    time_limit / len(problems), generator)
                for r in layer_rows:
                    r["in_step"] = r["pass"] != "backward_data" or layer in computing_dx
                rows += layer_rows
                rounds.append(layer_rounds)
    finally:
        gc.unfreeze()
    return {"train_layer_reps": min(rounds) if rounds else 0, "train_layers": rows,
            "train_totals": train_totals(rows)}


def _time_train_layer(layer, problem, module, cc_layout, torch_layout, reps, time_limit,
                      generator):
    """(rows, rounds) of one layer: random x, w and dy of its shapes, x and dy in each side's
    best layout (PyTorch's w too, as its channels_last model holds it); the six calls (two sides,
    three passes) timed in rounds, interleaved, each run once untimed right before (warm), up to
    ``reps`` rounds or ``time_limit`` seconds. ``module``: the converted model's layer (None
    when it has none of that name: PyTorch's passes on both sides)."""
    y_shape = (problem.mb, problem.oc) + problem.output_hw()
    x, w, dy = (torch.randn(shape, generator=generator)
                for shape in (problem.x_shape, problem.w_shape, y_shape))
    bias = (torch.randn(problem.oc, generator=generator)
            if getattr(module, "bias", None) is not None else None)
    cc_passes, algos = _convcore_passes(module, problem, _in_layout(x, cc_layout), w, bias,
                                        _in_layout(dy, cc_layout))
    torch_passes = _pytorch_passes(problem, _in_layout(x, torch_layout),
                                   _in_layout(w, torch_layout), bias, _in_layout(dy, torch_layout))
    timer = CpuTimer()  # wall clock, warm
    calls = {}
    for p in TRAIN_PASSES:
        calls[f"convcore {p}"] = lambda fn=cc_passes[p]: timer.time_ms(fn)
        calls[f"pytorch {p}"] = lambda fn=torch_passes[p]: timer.time_ms(fn)
    times = time_rounds(calls, reps, time_limit, min(MIN_LAYER_REPS, reps))
    flops = problem.flops()
    rows = []
    for p in TRAIN_PASSES:
        cc, pt = times[f"convcore {p}"], times[f"pytorch {p}"]
        cc_ms, pt_ms = statistics.median(cc), statistics.median(pt)
        rows.append({"layer": layer, "problem": problem.descriptor(), "pass": p, "algo": algos[p],
                     "bias": bias is not None, "convcore_ms": cc_ms, "convcore_min_ms": min(cc),
                     "pytorch_ms": pt_ms, "pytorch_min_ms": min(pt), "speedup": pt_ms / cc_ms,
                     "loss_ms": cc_ms - pt_ms, "convcore_gflops": flops / (cc_ms * 1e6),
                     "pytorch_gflops": flops / (pt_ms * 1e6)})
    return rows, len(times["convcore forward"])


def train_totals(rows: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per pass and over all three ("all"): the sums of the layers' medians, convcore's and
    PyTorch's, their ratio (speedup) and difference (loss_ms). Rows a training step does not
    run (in_step false: the first layer's backward data) are left out."""
    totals = {}
    for p in TRAIN_PASSES + ("all",):
        chosen = [r for r in rows if r["in_step"] and p in (r["pass"], "all")]
        cc, pt = sum(r["convcore_ms"] for r in chosen), sum(r["pytorch_ms"] for r in chosen)
        totals[p] = {"convcore_ms": cc, "pytorch_ms": pt, "speedup": pt / cc if cc > 0 else None,
                     "loss_ms": cc - pt, "layers": len(chosen)}
    return totals


# ---- all models ----------------------------------------------------------------------------------

def _source_dir():
    """The convcore source tree: the one this file lies in, or the one pip installed from."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if os.path.isfile(os.path.join(root, "python", "convcore", "model_bench.py")):
        return root
    try:
        from importlib import metadata
        url = json.loads(metadata.distribution("convcore").read_text("direct_url.json") or "{}")
    except (ImportError, OSError, ValueError):
        return None
    path = url.get("url", "")
    if path.startswith("file://") and os.path.isdir(path[len("file://"):]):
        return path[len("file://"):]
    return None


def _git_commit():
    directory = _source_dir()
    if directory is None:
        return None
    try:
        out = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def protocol(reps: int, warmup: int, time_limit: float, layer_reps: int, train: bool,
             engines: Sequence[str] = ()) -> str:
    step = "one training step (forward, cross-entropy loss, backward)" if train else \
        "one forward pass under torch.inference_mode()"
    text = (f"end to end: {step}; {warmup} untimed runs of each contender, then up to {reps} "
            f"rounds (stopping after {time_limit:g} s once {min(MIN_REPS, reps)} are done), each "
            f"running the contenders once, interleaved with a rotating start order; wall clock "
            f"(time.perf_counter), no garbage collection inside a round; min and median per "
            f"contender; speedup = best PyTorch layout's median / best convcore layout's median. "
            f"Correctness: relative L2 error vs PyTorch NCHW"
            + (" (logits and every parameter gradient of one step, dropout seeded alike)" if train
               else "") + f", flagged above {ERROR_BOUND:g} or {LAYOUT_FACTOR} times PyTorch's "
            f"own channels_last vs NCHW difference, whichever is larger.")
    if engines and not train:
        text += (" Engines, timed in the same rounds: " + ", ".join(engines) + " (torch.compile "
                 "with inductor's freezing, compiled by a first call under inference_mode; ONNX "
                 "Runtime's CPU provider on the legacy torch.onnx export, opset 17, all graph "
                 "optimizations; OpenVINO's CPU plugin, f32 precision hint, latency mode; each "
                 "with this run's thread count; ONNX Runtime's threads do not spin between runs); speedup against the best engine = the best "
                 "median of every contender that is not convcore's / convcore's best median, "
                 "eager or compiled.")
    if not train and layer_reps:
        text += (f" Per layer: separate passes with a forward pre-hook and a forward hook on "
                 f"every conv module, convcore (its best layout) and PyTorch (its best layout) "
                 f"interleaved, up to {layer_reps} passes each (stopping after "
                 f"{time_limit / 2:g} s once {min(MIN_LAYER_REPS, layer_reps)} are done), median "
                 f"per layer; share = the layer's median / the median hooked pass.")
    if train and layer_reps:
        text += (f" Per layer and training pass: each conv layer's forward (with its bias; a "
                 f"fused activation or batch norm is not part of it), backward data (dx) and "
                 f"backward filter (dw, and db with a bias) as standalone calls on random x, w "
                 f"and dy of its shapes, convcore in its best layout (the converted layer's own "
                 f"Convolution and plans, called as its autograd calls them, with the algorithm "
                 f"per pass that auto chose in the end-to-end steps) against PyTorch in its best "
                 f"layout (F.conv2d; aten.convolution_backward with output_mask for dx alone and "
                 f"for dw and db); each call run once untimed right before it is timed (warm), "
                 f"the layer's six calls interleaved in rounds with a rotating start order, up "
                 f"to {layer_reps} rounds per layer (stopping once "
                 f"{min(MIN_LAYER_REPS, layer_reps)} are done and the layer's share of "
                 f"{time_limit / 2:g} s, split evenly over the layers, has passed); median and "
                 f"min per pass; speedup = PyTorch's median / convcore's; GFLOP/s = "
                 f"2*N*K*(C/g)*R*S*P*Q / time for every pass; totals per pass = the sums of the "
                 f"layers' medians, without the backward data of layers whose input needs no "
                 f"gradient (a training step skips it).")
    return text


def sgemm_peak_gflops(n: int = 2048, reps: int = 5) -> float:
    """The machine's float32 GEMM speed, the peak the training table's GFLOP/s compare with:
    torch.matmul of two n x n matrices on the threads torch uses, the best of ``reps`` timed
    calls after an untimed one."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best / 1e9


def run(models: Union[str, Sequence[str]], batch: int = 1, size: int = 224, train: bool = False,
        reps: int = DEFAULT_REPS, algo: str = "auto", threads: Optional[int] = None,
        warmup: int = WARMUP, time_limit: float = DEFAULT_TIME_LIMIT,
        layer_reps: int = LAYER_REPS, seed: int = 0, log: Optional[Callable[[str], None]] = None,
        on_result: Optional[Callable[[Dict[str, Any]], None]] = None, fuse: bool = True,
        engines: Sequence[str] = (), freeze: bool = False) -> Dict[str, Any]:
    """Benchmarks each model (a torchvision classification name) end to end and per conv layer.

    threads: for both torch.set_num_threads and convcore.set_num_threads (default: every core
    this process may use). log: a function for the stage messages (default: stderr, with a
    progress line on a terminal). on_result: called with each model's result when it is done.
    fuse: convert with fuse=True (batch norms folded, residual adds and activations in the
    epilogue; the per-layer table's convcore times then include what was fused).
    freeze: convert with freeze=True (the layers trust their weights' version counters instead
    of checking their bytes at every call, as the engines trust theirs).
    engines: ENGINES names timed too in inference (engine_names("all") gives them all); a
    missing or failing one is reported in "failed", and the result gets "best_engine" and
    "speedup_vs_best_engine" (the best non-convcore contender / convcore's best, eager or
    compiled).
    Returns {"machine": {...}, "protocol": str, "models": [one dict per model]}; each model's
    dict has "contenders" ({name: times_ms, min_ms, median_ms}), "best_pytorch",
    "best_convcore", "speedup", "rel_error", "correct", and in inference "layers" (one row per
    conv layer: layer, problem, algo, convcore_ms, pytorch_ms, speedup, loss_ms, share_pct,
    gflops) and "totals"; in training "train_layers" (one row per conv layer and pass of
    TRAIN_PASSES: layer, problem, pass, algo, bias, in_step, convcore_ms, convcore_min_ms,
    pytorch_ms, pytorch_min_ms, speedup, loss_ms, convcore_gflops, pytorch_gflops),
    "train_totals" (train_totals()) and "train_layer_reps". A model that fails has "error"
    instead."""
    if isinstance(models, str):
        models = [models]
    if not models:
        raise ValueError("no model given")
    for what, value in (("batch", batch), ("size", size), ("reps", reps),
                        ("threads", threads or 1)):
        if int(value) < 1:
            raise ValueError(f"{what} must be >= 1, got {value}")
    check_model_names(models)
    convcore_torch.Conv2d(1, 1, 1, algo=algo)  # an unknown algorithm fails here, before timing
    threads = threads or default_threads()
    torch.set_num_threads(threads)
    convcore.set_num_threads(threads)
    single_threaded_numpy_blas()
    import torchvision
    report: Dict[str, Any] = {
        "machine": {"cpu": cpu_model_name(), "cpu_count": os.cpu_count(), "threads": threads,
                    "host": platform.node(), "python": platform.python_version(),
                    "torch_version": torch.__version__,
                    "torchvision_version": torchvision.__version__,
                    "convcore_version": convcore.__version__,
                    "blas": convcore.build_info().get("blas"),
                    "openblas_coretype": openblas_coretype(),
                    "git_commit": _git_commit(),
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds")},
        "protocol": protocol(reps, warmup, time_limit, layer_reps, train, engines),
        "models": [],
    }
    if train:  # the per-layer GFLOP/s of the training table, against this
        report["machine"]["sgemm_gflops"] = sgemm_peak_gflops()
    status = _Status(log)
    for name in models:
        try:
            result = bench_model(name, batch, size, train, reps, algo, warmup, time_limit,
                                 layer_reps, seed, status, fuse, () if train else tuple(engines),
                                 threads, freeze)
        except ValueError as e:
            result = {"model": name, "mode": "train" if train else "inference", "batch": batch,
                      "size": size, "algo": algo, "error": str(e)}
        if train:
            result["sgemm_gflops"] = report["machine"]["sgemm_gflops"]
        status.clear()
        report["models"].append(result)
        if on_result is not None:
            on_result(result)
    return report


# ---- output --------------------------------------------------------------------------------------

def _table(headers, rows, numeric):
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def format_model(result: Dict[str, Any], top: int = 10) -> str:
    """The report of one model: end-to-end times, correctness, the per-layer table."""
    shape = result.get("input_shape")
    size = ("input " + "x".join(map(str, shape[1:])) if shape and len(shape) != 4
            else f"{result['size']}x{result['size']}")
    head = (f"{result['model']}: {result['mode']}, batch {result['batch']}, "
            f"{size}, convcore algo {result['algo']}"
            f"{', fused' if result.get('fuse') else ''}{', frozen' if result.get('freeze') else ''}")
    if "error" in result:
        return f"{head}\n!!! {result['error']}"
    out = [head + f", {result['parameters'] / 1e6:.1f}M parameters, {result['conv_layers']} conv "
           f"layers, {result['reps']} rounds"]
    contenders = result["contenders"]
    rows = []
    for n in result.get("contender_names", CONTENDERS):
        if n in contenders:
            c = contenders[n]
            marks = [label for key, label in (("best_pytorch", "best PyTorch"),
                                              ("best_convcore", "best convcore"),
                                              ("best_engine", "best engine"))
                     if result.get(key) == n]
            rows.append([n, f"{c['min_ms']:.3f}", f"{c['median_ms']:.3f}",
                         ("<- " + ", ".join(marks)) if marks else ""])
        else:
            failure = result["failed"].get(n, "?")
            rows.append([n, "-", "-", failure if failure.startswith(("missing", "failed"))
                         else "failed: " + failure])
    out += _table(["contender", "min ms", "median ms", ""], rows, {1, 2})
    if result["algo_fallback"]:
        out.append(f"{result['algo']} cannot run {len(result['algo_fallback'])} conv layers, which "
                   f"use auto: {', '.join(result['algo_fallback'])}")
    out.append(f"speedup (best PyTorch / best convcore): {result['speedup']:.2f}x median, "
               f"{result['speedup_min']:.2f}x min  (> 1: convcore is faster)")
    if "speedup_vs_best_engine" in result:
        out.append(f"speedup against the best engine ({result['best_engine']} / "
                   f"{result['best_convcore_any']}): {result['speedup_vs_best_engine']:.2f}x median")
    errors = ", ".join(f"{n} {e:.2g}" for n, e in result["rel_error"].items())
    what = "outputs and gradients" if result["mode"] == "train" else "outputs"
    out.append(f"correctness ({what} vs pytorch nchw, relative L2 error): {errors} -> "
               + ("ok" if result["correct"] else "!!! convcore above")
               + f" (bound {result['error_bound']:.2g})")
    round_trip = worst_round_trip(result.get("round_trip_ns"))
    if round_trip is not None and round_trip > SPLIT_NS:
        out.append(f"!!! the CPUs did not share a cache around the end-to-end timing (a cache "
                   f"line's round trip {round_trip:.0f} ns > {SPLIT_NS} ns): "
                   f"multi-threaded times may be off")
    stolen = worst_steal_share(result.get("steal"))
    if stolen is not None and stolen > STEAL_WARN:
        out.append(f"!!! the hypervisor took {stolen:.0%} of a "
                   f"CPU during the end-to-end timing: times may be off")
    if result.get("layers"):
        out.append("")
        out += format_layers(result, top)
    if result.get("train_layers"):
        out.append("")
        out += format_train_layers(result, top)
    return "\n".join(out)


def format_layers(result: Dict[str, Any], top: int = 10) -> List[str]:
    layers = sorted(result["layers"], key=lambda r: -r["loss_ms"])
    totals = result["totals"]
    out = [f"per conv layer (median of {result['layer_reps']} hooked passes; convcore "
           f"{result['best_convcore'].split()[1]} vs PyTorch {result['best_pytorch'].split()[1]}), "
           "sorted by the time convcore loses:"]
    rows = [[r["layer"], r["problem"], r["algo"], f"{r['convcore_ms']:.3f}",
             f"{r['pytorch_ms']:.3f}",
             f"{r['speedup']:.2f}" if r["speedup"] else "-", f"{r['loss_ms']:+.3f}",
             f"{r['share_pct']:.1f}" if r["share_pct"] is not None else "-",
             f"{r['gflops']:.1f}" if r["gflops"] else "-"] for r in layers]
    out += _table(["layer", "problem", "algo", "convcore ms", "pytorch ms", "speedup", "loss ms",
                   "share %", "GFLOP/s"], rows, {3, 4, 5, 6, 7, 8})

    def share(side):
        conv, network = totals[f"{side}_conv_ms"], totals[f"{side}_network_ms"]
        if not network:
            return "-"
        return f"{conv:.3f} ms of {network:.3f} ms ({100 * conv / network:.0f}%)"
    out.append(f"conv layers: convcore {share('convcore')}; PyTorch {share('pytorch')} "
               "(network time of the hooked passes)")
    losses = [r for r in layers[:top] if r["loss_ms"] > 0]
    if losses:
        out.append(f"top {len(losses)} losses: " + "; ".join(
            f"{r['layer']} +{r['loss_ms']:.3f} ms ({r['algo']}, {r['speedup']:.2f}x)"
            for r in losses))
    else:
        out.append("convcore loses time on no conv layer")
    return out


PASS_LABELS = {"forward": "forward", "backward_data": "backward data",
               "backward_filter": "backward filter", "all": "all three"}


def format_train_layers(result: Dict[str, Any], top: int = 10) -> List[str]:
    """The training table: the ``top`` (layer, pass) rows where convcore's speedup is lowest,
    then the totals per pass."""
    rows = sorted(result["train_layers"], key=lambda r: r["speedup"])
    totals = result["train_totals"]
    shown = rows[:top]
    out = [f"per conv layer and training pass (standalone calls on random tensors, median of >= "
           f"{result['train_layer_reps']} interleaved rounds; convcore "
           f"{_layout(result['best_convcore'])} vs PyTorch {_layout(result['best_pytorch'])}), "
           f"the {len(shown)} of {len(rows)} with the lowest speedup:"]
    peak = result.get("sgemm_gflops")
    cells = [[r["layer"], PASS_LABELS[r["pass"]] + ("" if r["in_step"] else "*"), r["problem"],
              r["algo"], f"{r['convcore_ms']:.3f}", f"{r['pytorch_ms']:.3f}",
              f"{r['speedup']:.2f}", f"{r['loss_ms']:+.3f}", f"{r['convcore_gflops']:.1f}",
              f"{r['pytorch_gflops']:.1f}",
              f"{100 * r['convcore_gflops'] / peak:.0f}" if peak else "-"] for r in shown]
    out += _table(["layer", "pass", "problem", "algo", "convcore ms", "pytorch ms", "speedup",
                   "loss ms", "convcore GFLOP/s", "pytorch GFLOP/s", "convcore % of sgemm"], cells,
                  {4, 5, 6, 7, 8, 9, 10})
    if peak:
        out.append(f"sgemm: {peak:.1f} GFLOP/s (torch.matmul 2048x2048 float32, best of 5; "
                   f"Winograd and FFT passes can exceed it: their GFLOP/s count direct "
                   f"convolution's multiply-adds)")
    if any(not r["in_step"] for r in shown):
        out.append("* not run in a training step (the layer's input needs no gradient); not in "
                   "the totals")
    out.append("per pass, the sum of the layers' medians:")
    cells = [[PASS_LABELS[p], str(t["layers"]), f"{t['convcore_ms']:.3f}",
              f"{t['pytorch_ms']:.3f}", f"{t['speedup']:.2f}" if t["speedup"] else "-",
              f"{t['loss_ms']:+.3f}"] for p, t in totals.items()]
    out += _table(["pass", "layers", "convcore ms", "pytorch ms", "speedup", "loss ms"], cells,
                  {1, 2, 3, 4, 5})
    timed = [p for p in TRAIN_PASSES if totals[p]["speedup"]]
    if timed:
        worst = min(timed, key=lambda p: totals[p]["speedup"])
        out.append(f"convcore's weakest pass against PyTorch: {PASS_LABELS[worst]} "
                   f"({totals[worst]['speedup']:.2f}x, {totals[worst]['loss_ms']:+.3f} ms)")
    shares = []
    for side, label in (("convcore", "convcore"), ("pytorch", "PyTorch")):
        conv_ms = totals["all"][f"{side}_ms"]
        step_ms = result["contenders"][result[f"best_{side}"]]["median_ms"]
        shares.append(f"{conv_ms:.3f} ms of {label}'s {step_ms:.3f} ms training step "
                      f"({100 * conv_ms / step_ms:.0f}%)")
    out.append("the conv passes sum to " + "; ".join(shares))
    return out


def plot_model(result: Dict[str, Any], directory: str) -> str:
    """One PNG per model: the end-to-end times (min and median per contender) and, where
    measured, convcore's and PyTorch's time per conv layer. Returns the path."""
    from convcore.plot import _pyplot
    plt = _pyplot()
    layers = result.get("layers") or []
    contenders = result["contenders"]
    names = [n for n in result.get("contender_names", CONTENDERS) if n in contenders]
    rows = 2 if layers else 1
    height_layers = max(3.0, 0.18 * len(layers))
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3.0 + (height_layers if layers else 0)),
                             gridspec_kw={"height_ratios": [3.0, height_layers] if layers else [1]},
                             squeeze=False)
    ax = axes[0][0]
    pos = range(len(names))
    colors = ["tab:orange" if n.startswith("pytorch") else "tab:blue" for n in names]
    medians = [contenders[n]["median_ms"] for n in names]
    ax.barh([p + 0.2 for p in pos], medians, 0.4, color=colors)
    ax.barh([p - 0.2 for p in pos], [contenders[n]["min_ms"] for n in names], 0.4, color=colors,
            alpha=0.4)
    for p, ms in zip(pos, medians):
        ax.text(ms, p + 0.2, f" {ms:.2f}", va="center", fontsize=8)
    ax.set_yticks(list(pos), names)
    ax.invert_yaxis()
    ax.set_xlabel("ms per " + ("training step" if result["mode"] == "train" else "forward pass")
                  + " (dark: median, light: min)")
    ax.set_title(f"{result['model']} ({result['mode']}, batch {result['batch']}, "
                 f"{result['size']}x{result['size']}): speedup {result['speedup']:.2f}x "
                 f"(best PyTorch / best convcore, median)")
    if layers:
        ax = axes[1][0]
        pos = range(len(layers))
        ax.barh([p - 0.2 for p in pos], [r["convcore_ms"] for r in layers], 0.4,
                label=f"convcore ({result['best_convcore'].split()[1]})", color="tab:blue")
        ax.barh([p + 0.2 for p in pos], [r["pytorch_ms"] for r in layers], 0.4,
                label=f"PyTorch ({result['best_pytorch'].split()[1]})", color="tab:orange")
        ax.set_yticks(list(pos), [r["layer"] for r in layers], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel("ms per conv layer (median of the hooked passes)")
        ax.legend(loc="lower right")
    fig.tight_layout()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{result['model']}" + ("-train" if result["mode"] == "train"
                                                           else "") + ".png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---- the command ---------------------------------------------------------------------------------

def command(names: List[str], *, batch: int = 1, size: int = 224, train: bool = False,
            reps: Optional[int] = None, warmup: int = WARMUP, threads: Optional[int] = None,
            algo: str = "auto", time_limit: Optional[float] = None, engines: Optional[str] = None,
            fuse: bool = True, freeze: bool = False, suite_path: Optional[str] = None,
            json_path: Optional[str] = None, plot_dir: Optional[str] = None) -> int:
    """`convcore bench --model NAME[,NAME...]` (convcore.cli parses its options): times the
    models, prints each one's report, writes the --json report, the --write-suite suite
    (``suite_path``) and the --plot charts; returns the exit status (1 when a model failed or
    convcore's results were wrong). ``names == ["list"]`` prints the model names. A missing
    dependency (torchvision, matplotlib, an engine asked for) raises ValueError."""
    try:
        if names == ["list"]:
            print("\n".join(model_names()))
            return 0
        if plot_dir:
            from convcore.plot import _pyplot
            _pyplot()  # fail before timing anything when matplotlib is missing
        check_model_names(names)
        if suite_path:
            count = write_suite(suite_path, names, batch, size)
            print(f"suite of {count} conv layers written to {suite_path}", flush=True)
        reps = reps or DEFAULT_REPS
        time_limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
        warmup = max(WARMUP, warmup)

        def show(result: Dict[str, Any]) -> None:
            print(format_model(result) + "\n", flush=True)
        engine_list = engine_names("all" if engines is None else engines)
        if train and engines not in (None, "none"):
            raise ValueError("--engines: the engines are timed in inference only (not with --train)")
        report = run(names, batch=batch, size=size, train=train, reps=reps, algo=algo,
                     threads=threads, warmup=warmup, time_limit=time_limit, on_result=show,
                     fuse=fuse, engines=engine_list, freeze=freeze)
    except ImportError as e:
        raise ValueError(str(e)) from None
    machine = report["machine"]
    print(f"{machine['cpu']}, threads {machine['threads']}, torch {machine['torch_version']}, "
          f"convcore {machine['convcore_version']}\nprotocol: {report['protocol']}")
    if json_path:
        os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)
        print(f"results written to {json_path}")
    if plot_dir:
        for result in report["models"]:
            if "error" not in result:
                print(f"plot written to {plot_model(result, plot_dir)}")
    failed = [r for r in report["models"] if "error" in r or not r["correct"]]
    return 1 if failed else 0
