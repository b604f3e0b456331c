"""``python -m convcore.model_sweep``: does ``convcore.torch.convert`` compute what PyTorch computes
on the networks people take from other libraries?

Every CNN of timm's families (``FAMILIES``), five MONAI 3-D segmentation networks and wav2vec
2.0's 1-D feature extractor (torchaudio's, or convcore.bench_networks' copy where torchaudio does
not import) is built with random weights; every batch norm gets random running statistics and
affine parameters, and every parameter left constant by its initialisation (zero biases, layer
scales of 1e-6, zero-initialised last batch norms) random values, so no layer computes an
identity or a zero that would hide a wrong convolution. In eval mode, the model as built is the
reference; each mode converts a deep copy and compares its output by the relative L2 error
``||y - ref|| / ||ref||`` over all output tensors:

    convert          convert(model, fuse=False), under torch.no_grad
    fuse             convert(model, fuse=True), under torch.no_grad
    inference_mode   convert(model, fuse=True), under torch.inference_mode
    autograd         convert(model, fuse=False): the gradients of a random projection of the
                     output with respect to the input and to every parameter
    autograd_fuse    the same with fuse=True

The reference is always the float64 model on an NCHW input. ``--dtype float32`` and
``--channels-last`` run the converted model (and PyTorch, to measure its own error) in that type
or layout; in float64 NCHW PyTorch's own error is that of its channels_last run. The bound is
``max(BOUNDS[dtype], LAYOUT_FACTOR x PyTorch's own error)``: a deep network with random weights
can amplify rounding so much that PyTorch's two layouts disagree by far more than BOUNDS.

Outcome per (model, mode): ok; wrong (an error above the bound: silently wrong); raised (convcore
raised where PyTorch runs the model); skipped (the model cannot be built, or PyTorch itself
cannot run it, with why). A summary.md and sweep.json go to ``--out``, rewritten after every
model, so a run that dies leaves what it had and names the model it was on.

timm, MONAI and torchaudio are test dependencies only; ``import convcore`` never imports this
module.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import fnmatch
import importlib
import json
import os
import platform
import sys
import time
import warnings
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

import convcore
import convcore.torch as convcore_torch
from convcore.bench_networks import Wav2Vec2FeatureExtractor, channels_last, model_channels_last
from convcore.bench_timing import cpu_model_name
from convcore.model_bench import _git_commit, default_threads, import_torchvision

# timm's CNN families: a model is swept when its name starts with one of these prefixes. Attention
# and MLP families (ViTs, Swin, CoAtNet, MaxViT, halo/bot/lambda nets, EdgeNeXt, ...) are left out:
# their convolutions are a stem at most.
FAMILIES: Tuple[str, ...] = (
    # ResNet and its variants (resnet also covers resnetv2, resnetrs, resnetaa, resnetblur and
    # byobnet's resnet32ts/33ts/51q/61q)
    "resnet", "resnext", "wide_resnet", "seresnet", "seresnext", "ecaresnet", "ecaresnext",
    "gcresnet", "gcresnext", "skresnet", "skresnext", "res2net", "res2next", "resnest", "tresnet",
    "legacy_seresnet", "legacy_seresnext", "legacy_senet", "senet", "bat_resnext", "gernet",
    "eca_resnet", "eca_resnext", "test_resnet", "test_byobnet",
    # CSP / darknet
    "cspresnet", "cspresnext", "cspdarknet", "cs3", "darknet", "sedarknet", "cspnext",
    # RegNet (regnetx, regnety, regnetz, regnetv)
    "regnet",
    # EfficientNet and the mobile families of timm's efficientnet.py / mobilenetv3.py
    "efficientnet", "tf_efficientnet", "gc_efficientnet", "test_efficientnet", "mobilenetv1",
    "mobilenetv2", "mobilenetv3", "mobilenetv4", "tf_mobilenetv3", "mobilenet_edgetpu", "mixnet",
    "tf_mixnet", "mnasnet", "semnasnet", "spnasnet", "fbnet", "lcnet", "hardcorenas", "tinynet",
    "ghostnet", "repghostnet", "rexnet",
    # re-parameterisable and fast mobile backbones
    "repvgg", "mobileone", "fastvit", "fasternet", "starnet", "repvit", "efficientvit", "hgnet",
    # multi-branch and densely connected nets
    "dla", "dpn", "hrnet", "densenet", "rdnet", "vovnet", "ese_vovnet", "eca_vovnet", "selecsls",
    "inception", "xception", "legacy_xception", "vgg",
    # normalizer-free nets
    "nf_", "nfnet", "dm_nfnet", "eca_nfnet", "test_nfnet",
    # ConvNeXt and other all-convolution designs
    "convnext", "test_convnext", "convmixer", "mambaout",
)

# The MONAI 3-D segmentation networks, small (a few channels per level), on 32^3 volumes of one
# channel: name -> keyword arguments of monai.networks.nets.<class>.
MONAI_NETS: Dict[str, Dict[str, Any]] = {
    "monai.UNet": dict(spatial_dims=3, in_channels=1, out_channels=2, channels=(4, 8, 16),
                       strides=(2, 2), num_res_units=1),
    "monai.SegResNet": dict(spatial_dims=3, in_channels=1, out_channels=2, init_filters=8),
    "monai.BasicUNet": dict(spatial_dims=3, in_channels=1, out_channels=2,
                            features=(4, 4, 8, 16, 32, 4)),
    "monai.DynUNet": dict(spatial_dims=3, in_channels=1, out_channels=2, kernel_size=(3, 3, 3, 3),
                          strides=(1, 2, 2, 2), upsample_kernel_size=(2, 2, 2),
                          filters=(4, 8, 16, 32), norm_name="batch"),
    "monai.AttentionUnet": dict(spatial_dims=3, in_channels=1, out_channels=2, channels=(4, 8, 16),
                                strides=(2, 2)),
}
MONAI_INPUT = (1, 32, 32, 32)
WAV2VEC2 = "torchaudio.wav2vec2_fe"
WAV2VEC2_SAMPLES = 4000  # 0.25 s of 16 kHz audio: 12 feature frames
EXTRA_MODELS: Tuple[str, ...] = tuple(MONAI_NETS) + (WAV2VEC2,)

# The fixed test sample (tests/python/test_model_sweep.py, --sample): small timm models that build,
# convert and run twice in about a second each at 64x64 in float64 on 2 cores, one or more per
# family, with the DLA and FastViT nets whose branches once came out wrong; then the extras.
SAMPLE: Tuple[str, ...] = (
    "resnet18", "resnet26d", "resnetv2_18", "resnext26ts", "seresnext26d_32x4d",
    "ecaresnet26t", "skresnet18", "res2net50_14w_8s", "res2next50", "resnest14d", "gernet_s",
    "cspresnet50", "cspdarknet53", "cs3darknet_s", "regnetx_002", "regnety_002", "regnetz_005",
    "efficientnet_b0", "tf_efficientnet_lite0", "mobilenetv2_050", "mobilenetv3_small_050",
    "mobilenetv4_conv_small_035", "mixnet_s", "tf_mixnet_s", "mnasnet_050", "lcnet_050",
    "tinynet_e", "ghostnet_050", "repghostnet_050", "rexnet_100", "repvgg_a0", "mobileone_s0",
    "fastvit_t8", "fastvit_sa12", "starnet_s050", "dla34", "dla46_c", "dla60_res2net",
    "dla60_res2next", "dla102x", "dpn48b", "hrnet_w18_small", "densenet121", "vovnet39a",
    "selecsls42b", "nf_resnet26", "convnext_atto", "test_convnext", "test_nfnet",
) + EXTRA_MODELS

MODES: Dict[str, Tuple[bool, str]] = {  # name -> (fuse, what runs)
    "convert": (False, "no_grad"),
    "fuse": (True, "no_grad"),
    "inference_mode": (True, "inference_mode"),
    "autograd": (False, "autograd"),
    "autograd_fuse": (True, "autograd"),
}
DEFAULT_MODES = ("convert", "fuse")
BOUNDS = {torch.float64: 1e-10, torch.float32: 1e-4}
LAYOUT_FACTOR = 4
# A network whose own error (PyTorch in another layout) passes AMPLIFYING[dtype] amplifies
# rounding by 10^4 or more: convcore's algorithms round differently from PyTorch's direct
# GEMM (Winograd and FFT up to about 100x in float64, docs/algorithms.md), so its bound is
# AMPLIFIED_FACTOR x that error, and where that reaches UNVERIFIABLE a whole-network
# comparison cannot tell rounding from a wrong result: the model is skipped, with why.
AMPLIFYING = {torch.float64: 1e-12, torch.float32: 1e-3}
AMPLIFIED_FACTOR = 100
UNVERIFIABLE = 1e-2
OUTCOMES = ("ok", "wrong", "raised", "skipped")
DEFAULT_SIZE = 64
DEFAULT_BATCH = 2
# Models above this many parameters are skipped: a check holds two or three float64 copies
# (24 bytes a parameter), which for timm's largest (regnety_2560, convnext_xxlarge) passes the
# memory of a small machine.
DEFAULT_MAX_PARAMS = 300_000_000


# ---- the models ----------------------------------------------------------------------------------

def import_timm() -> Any:
    """timm, imported after torchvision (convcore.model_bench.import_torchvision: timm imports
    torchvision, whose C++ ops do not load with the CPU torch)."""
    import_torchvision()
    return importlib.import_module("timm")


def timm_models() -> List[str]:
    """timm's models of FAMILIES, in timm's order."""
    timm = import_timm()
    return [name for name in timm.list_models() if name.startswith(FAMILIES)]


def all_models() -> List[str]:
    """What a full sweep runs: timm's CNNs, then EXTRA_MODELS."""
    return timm_models() + list(EXTRA_MODELS)


def select_models(patterns: Optional[str] = None, sample: bool = False,
                  limit: Optional[int] = None) -> List[str]:
    """The models a run sweeps: SAMPLE, or those of all_models() that a comma list of names or
    glob patterns matches (an exact timm name outside FAMILIES counts too), or all of them;
    at most ``limit``."""
    if sample:
        names = list(SAMPLE)
    elif patterns:
        names = []
        candidates = None
        for pattern in (p.strip() for p in patterns.split(",") if p.strip()):
            if pattern in SAMPLE or pattern in EXTRA_MODELS:
                found = [pattern]
            else:
                candidates = candidates if candidates is not None else all_models()
                found = fnmatch.filter(candidates, pattern)
                if not found and pattern in import_timm().list_models():
                    found = [pattern]
            if not found:
                raise ValueError(f"no model matches {pattern!r} (`--list` prints the names)")
            names += [n for n in found if n not in names]
    else:
        names = all_models()
    return names[:limit] if limit is not None else names


class _FirstOutput(nn.Module):
    """The first output of a module that returns (features, lengths), as torchaudio's
    FeatureExtractor does, so it is called as model(x)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x, None)[0]


def wav2vec2_feature_extractor() -> Tuple[nn.Module, Tuple[int, ...], str]:
    """wav2vec 2.0 base's feature extractor, its input shape at batch 1 and where it came from:
    torchaudio's (input N x L), or where torchaudio does not import, convcore.bench_networks'
    copy (input N x 1 x L), with torchaudio's error."""
    try:
        torchaudio = importlib.import_module("torchaudio")
        components = importlib.import_module("torchaudio.models.wav2vec2.components")
    except Exception as e:  # torchaudio's C++ extension is built for one torch release
        source = f"convcore.bench_networks (torchaudio does not import: {_one_line(e)})"
        return Wav2Vec2FeatureExtractor(), (1, WAV2VEC2_SAMPLES), source
    shapes = [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2
    extractor = components._get_feature_extractor("group_norm", shapes, bias=False)
    return _FirstOutput(extractor), (WAV2VEC2_SAMPLES,), f"torchaudio {torchaudio.__version__}"


def build(name: str) -> Tuple[nn.Module, Dict[str, Any], str]:
    """The model ``name`` with initial random weights (float32, eval mode), its input
    configuration (timm's pretrained_cfg keys input_size, min_input_size, fixed_input_size) and
    where it came from."""
    if name in MONAI_NETS:
        monai = importlib.import_module("monai")
        nets = importlib.import_module("monai.networks.nets")
        model = getattr(nets, name.split(".", 1)[1])(**MONAI_NETS[name])
        return model.eval(), {"input_size": MONAI_INPUT, "fixed_input_size": True}, \
            f"monai {monai.__version__}"
    if name == WAV2VEC2:
        model, shape, source = wav2vec2_feature_extractor()
        return model.eval(), {"input_size": shape, "fixed_input_size": True}, source
    timm = import_timm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = timm.create_model(name, pretrained=False)
    return model.eval(), dict(getattr(model, "pretrained_cfg", None) or {}), \
        f"timm {timm.__version__}"


def input_shapes(cfg: Dict[str, Any], size: int) -> List[Tuple[int, ...]]:
    """The input shapes (batch 1) to try, smallest first: ``size`` and ``2 * size`` square with
    the model's input channels, then its min_input_size and its default input_size where larger;
    only the default one where the model takes no other."""
    default = tuple(cfg.get("input_size") or (3, 224, 224))
    if cfg.get("fixed_input_size") or len(default) != 3:
        return [default]
    shapes = [(default[0], size, size), (default[0], 2 * size, 2 * size)]
    for key in ("min_input_size", "input_size"):
        if cfg.get(key):
            shapes.append(tuple(cfg[key]))
    shapes = sorted(set(shapes), key=lambda s: (s[1] * s[2], s))
    return [s for s in shapes if s[1] * s[2] <= default[1] * default[2]]


def _constant(t: torch.Tensor) -> bool:
    return t.numel() > 0 and bool((t == t.reshape(-1)[0]).all())


def randomize_(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Takes every normalisation and every constant parameter far from what it was initialised to:
    batch norms (every module with running_mean and running_var) get means N(0, 0.2^2), variances
    U(0.5, 2), scales U(0.5, 1.5) and shifts N(0, 0.2^2); a parameter whose elements are all
    equal (zero biases, layer scales, skip gains) gets c + N(0, 0.2^2), with c its value if
    |c| >= 0.1, else 0; a constant weight of two or more dimensions N(0, 1 / fan_in)."""
    def normal(t, std):
        return torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t) * std

    def uniform(t, low, high):
        return (torch.rand(t.shape, generator=generator, dtype=torch.float64) * (high - low)
                + low).to(t)

    with torch.no_grad():
        for module in model.modules():
            mean, var = getattr(module, "running_mean", None), getattr(module, "running_var", None)
            if isinstance(mean, torch.Tensor) and isinstance(var, torch.Tensor):
                mean.copy_(normal(mean, 0.2))
                var.copy_(uniform(var, 0.5, 2.0))
                weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
                if isinstance(weight, torch.Tensor):
                    weight.copy_(uniform(weight, 0.5, 1.5))
                if isinstance(bias, torch.Tensor):
                    bias.copy_(normal(bias, 0.2))
        for p in model.parameters():
            if not p.is_floating_point() or not _constant(p):
                continue
            if p.dim() >= 2:
                p.copy_(normal(p, (p.numel() // p.shape[0]) ** -0.5))
            else:
                c = float(p.reshape(-1)[0])
                p.copy_(normal(p, 0.2) + (c if abs(c) >= 0.1 else 0.0))
    return model


def calibrate_batch_norms_(model: nn.Module, x: torch.Tensor) -> None:
    """Sets every batch norm's running statistics to those of its input on ``x`` (one pass with
    the batch norms, and only they, in training mode, cumulative averages), keeping the random
    scales and shifts. Random statistics can let a deep network's activations grow layer after
    layer until rounding is amplified beyond any bound (timm's ecaresnet269d: PyTorch's own two
    layouts 0.3 apart in float64); calibrated ones keep them nearer unit scale, as trained
    networks have them (small batches' statistics can do worse: check_model keeps whichever
    amplifies less), while the folded statistics stay far from the identity."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
             and m.track_running_stats and m.running_mean is not None]
    if not norms:
        return
    saved = [(m, m.momentum, m.training) for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    try:
        with torch.no_grad():
            model(x)
    finally:
        for m, momentum, training in saved:
            m.momentum, m.training = momentum, training


def _sensitivity(model: nn.Module, x: torch.Tensor, out: Sequence[torch.Tensor]) -> float:
    """PyTorch's own relative error on ``model``'s output ``out`` for input ``x`` when it runs in
    the other memory layout: how much the network amplifies a change of summation order."""
    other, other_x = _in_layout(copy.deepcopy(model), x, x.is_contiguous())
    try:
        with torch.no_grad():
            return relative_error(flatten(other(other_x)), out)
    except Exception:  # noqa: BLE001 - a model that runs in one layout only
        return 0.0


def _seed(name: str, seed: int) -> int:
    return zlib.crc32(name.encode()) + seed


# ---- comparing outputs ---------------------------------------------------------------------------

def flatten(output: Any) -> List[torch.Tensor]:
    """The tensors of a model's output (a tensor, or lists, tuples and dicts of them; None and
    other values are left out), in order."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        return [t for v in output.values() for t in flatten(v)]
    if isinstance(output, (list, tuple)):
        return [t for v in output for t in flatten(v)]
    return []


def relative_error(ys: Sequence[torch.Tensor], refs: Sequence[torch.Tensor]) -> float:
    """||y - ref|| / ||ref|| over all tensors together, in float64 (||y - ref|| where ref is all
    zeros); inf where the structure or a shape differs."""
    if len(ys) != len(refs) or any(y.shape != r.shape for y, r in zip(ys, refs)):
        return float("inf")
    if not refs:
        return 0.0
    diff = sum(float((y.detach().double() - r.detach().double()).pow(2).sum())
               for y, r in zip(ys, refs))
    norm = sum(float(r.detach().double().pow(2).sum()) for r in refs)
    return (diff / norm) ** 0.5 if norm > 0 else diff ** 0.5


def _structure(ys, refs):
    return (f"{len(ys)} output tensors of shapes {[tuple(y.shape) for y in ys]}, PyTorch's "
            f"{len(refs)} of {[tuple(r.shape) for r in refs]}")


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _projection(refs: Sequence[torch.Tensor], seed: int) -> List[torch.Tensor]:
    """Fixed random weights, one per output element: the autograd modes' loss is
    sum(output * weights), whose gradient reaches every output element differently."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(r.shape, generator=generator, dtype=torch.float64) for r in refs]


def gradients(model: nn.Module, x: torch.Tensor,
              projection: Sequence[torch.Tensor]) -> Tuple[List[torch.Tensor], Dict[str, Any]]:
    """The output, and the gradients of sum(output * projection) with respect to the input
    ("input") and to every parameter that gets one (by name)."""
    x = x.detach().clone().requires_grad_(True)
    for p in model.parameters():
        p.grad = None
    outputs = flatten(model(x))
    loss = sum((y.double() * w).sum() for y, w in zip(outputs, projection))
    loss.backward()  # type: ignore[union-attr]
    grads = {"input": x.grad}
    for name, p in model.named_parameters():
        if p.grad is not None:
            grads[name], p.grad = p.grad, None
    return [y.detach() for y in outputs], grads


def _gradient_error(grads, ref_grads):
    """The larger relative error of the input's gradient and of all parameters' gradients
    together, and what differs; a parameter that has a gradient on one side only is inf."""
    missing = sorted(set(ref_grads) ^ set(grads))
    if missing:
        return float("inf"), f"gradients of {', '.join(missing[:5])} on one side only"
    names = [n for n in ref_grads if n != "input"]
    dx = relative_error([grads["input"]], [ref_grads["input"]])
    dw = relative_error([grads[n] for n in names], [ref_grads[n] for n in names])
    worst = max(names, key=lambda n: relative_error([grads[n]], [ref_grads[n]]), default=None)
    where = f", worst {worst}" if worst is not None and dw > 0 else ""
    return max(dx, dw), f"input {dx:.2e}, parameters {dw:.2e}{where}"


# ---- one model -----------------------------------------------------------------------------------

def _convs(model: nn.Module) -> Tuple[int, int]:
    """(convolution modules, those of them that are convcore's)."""
    convcore_types = (convcore_torch.Conv2d, convcore_torch.Conv1d, convcore_torch.Conv3d,
                      convcore_torch.ConvTranspose1d, convcore_torch.ConvTranspose2d,
                      convcore_torch.ConvTranspose3d)
    convs = [m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)]
    return len(convs), sum(isinstance(m, convcore_types) for m in convs)


def _in_layout(model, x, use_channels_last):
    if not use_channels_last:
        return model, x
    return model_channels_last(model, x.dim()), channels_last(x)


def check_model(name: str, modes: Sequence[str] = DEFAULT_MODES,
                dtype: torch.dtype = torch.float64, use_channels_last: bool = False,
                size: int = DEFAULT_SIZE, batch: int = DEFAULT_BATCH, seed: int = 0,
                max_params: Optional[int] = DEFAULT_MAX_PARAMS, sensitivity: bool = True) -> Dict[str, Any]:
    """One model through ``modes``: its source, input shape, parameter and convolution counts,
    PyTorch's own error in this dtype and layout, and per mode its outcome (OUTCOMES), relative
    error, bound, reason (for all but ok), the converted model's convcore layers and seconds."""
    start = time.perf_counter()
    record: Dict[str, Any] = {"model": name, "results": {}}

    def skip_all(reason):
        record["results"] = {m: {"outcome": "skipped", "reason": reason} for m in modes}
        record["seconds"] = time.perf_counter() - start
        return record

    torch.manual_seed(_seed(name, seed))
    try:
        model, cfg, record["source"] = build(name)
    except Exception as e:
        return skip_all(f"cannot be built: {_one_line(e)}")
    record["params"] = sum(p.numel() for p in model.parameters())
    if max_params and record["params"] > max_params:
        return skip_all(f"{record['params'] / 1e6:.0f} M parameters, above the limit of "
                        f"{max_params / 1e6:.0f} M (--max-params)")
    randomize_(model, torch.Generator().manual_seed(_seed(name, seed)))
    record["convs"] = _convs(model)[0]
    model = model.double()

    ref_out, failures = None, []
    generator = torch.Generator().manual_seed(_seed(name, seed) + 1)
    for shape in input_shapes(cfg, size):
        x64 = torch.randn((batch,) + tuple(shape), generator=generator, dtype=torch.float64)
        try:
            with torch.no_grad():
                ref_out = flatten(model(x64))
            break
        except Exception as e:
            failures.append(f"{'x'.join(map(str, shape))}: {_one_line(e)}")
    if ref_out is None:
        return skip_all("PyTorch cannot run it: " + "; ".join(failures))
    amplification = (_sensitivity(model, x64, ref_out) if sensitivity and all(
        bool(torch.isfinite(r).all()) for r in ref_out) else 0.0)
    if amplification > AMPLIFYING[torch.float64]:
        # it amplifies rounding: with the batch norms calibrated, where that amplifies less
        saved = copy.deepcopy(model.state_dict())
        try:
            calibrate_batch_norms_(model, torch.randn(x64.shape, generator=generator, dtype=torch.float64))
            with torch.no_grad():
                calibrated = flatten(model(x64))
            if _sensitivity(model, x64, calibrated) < amplification:
                ref_out, record["batch_norms"] = calibrated, "calibrated"
            else:
                model.load_state_dict(saved)
        except Exception:  # noqa: BLE001 - a model whose batch norms cannot train: as it was
            model.load_state_dict(saved)
    if not all(bool(torch.isfinite(r).all()) for r in ref_out):
        return skip_all("PyTorch's float64 output is not finite")
    record["input_shape"] = list(x64.shape)
    if failures:
        record["smaller_inputs_failed"] = failures

    base = model if dtype == torch.float64 else copy.deepcopy(model).to(dtype)
    base, x = _in_layout(base, x64.to(dtype), use_channels_last)
    # PyTorch's own error: the PyTorch model in the type and layout the converted one runs in,
    # or (float64 NCHW, where that is the reference itself) in the other layout: another
    # summation order of the same arithmetic. Deep networks with random weights can amplify
    # rounding by many orders of magnitude (timm's ecaresnet269d: 0.3 between PyTorch's own
    # layouts in float64); the bound follows what PyTorch itself cannot pin down.
    # (sensitivity=False: float64 NCHW against BOUNDS alone, for networks known to be well
    # conditioned, as the test sample's)
    own, own_x = (base, x) if base is not model else _in_layout(copy.deepcopy(model), x64, not use_channels_last)
    measure_own = sensitivity or base is not model
    record["pytorch_error"] = 0.0
    grad_bound = BOUNDS[dtype]
    try:
        if measure_own:
            with torch.no_grad():
                record["pytorch_error"] = relative_error(flatten(own(own_x)), ref_out)
        if any(MODES[m][1] == "autograd" for m in modes):
            projection = _projection(ref_out, _seed(name, seed) + 2)
            _, ref_grads = gradients(model, x64, projection)
            if measure_own:
                _, own_grads = gradients(own, own_x, projection)
                record["pytorch_grad_error"] = _gradient_error(own_grads, ref_grads)[0]
                grad_bound = max(grad_bound, LAYOUT_FACTOR * record["pytorch_grad_error"])
    except Exception as e:
        return skip_all(f"PyTorch cannot run it in this type, layout or mode: {_one_line(e)}")
    own_error = record["pytorch_error"]
    factor = AMPLIFIED_FACTOR if own_error > AMPLIFYING[dtype] else LAYOUT_FACTOR
    bound = max(BOUNDS[dtype], factor * own_error)
    grad_bound = max(grad_bound, factor * record.get("pytorch_grad_error", 0.0))
    if bound >= UNVERIFIABLE:
        return skip_all(f"ill-conditioned with random weights: PyTorch's own error is {own_error:.1e} "
                        f"(another layout), so a whole-network comparison cannot tell rounding from "
                        f"a wrong result")

    for mode in modes:
        fuse, how = MODES[mode]
        mode_start = time.perf_counter()
        result: Dict[str, Any] = {}
        record["results"][mode] = result
        stage = "convert"
        try:
            converted = convcore_torch.convert(copy.deepcopy(base), fuse=fuse)
            result["convcore_convs"] = _convs(converted)[1]
            stage = "forward" if how != "autograd" else "forward/backward"
            if how == "autograd":
                ys, grads = gradients(converted, x, projection)
            else:
                context = torch.inference_mode() if how == "inference_mode" else torch.no_grad()
                with context:
                    ys = flatten(converted(x))
        except Exception as e:
            result.update(outcome="raised", reason=f"{stage}: {_one_line(e)}",
                          seconds=time.perf_counter() - mode_start)
            continue
        del converted
        error, limit = relative_error(ys, ref_out), bound
        reason = _structure(ys, ref_out) if error == float("inf") else f"output {error:.2e}"
        if how == "autograd" and error <= bound:  # the output is right: then its gradients
            result["output_error"] = error
            (error, reason), limit = _gradient_error(grads, ref_grads), grad_bound
        result.update(error=error, bound=limit)
        if error <= limit:  # False for nan
            result["outcome"] = "ok"
        else:
            result.update(outcome="wrong", reason=f"{reason} > bound {limit:.0e}")
        result["seconds"] = time.perf_counter() - mode_start
    record["seconds"] = time.perf_counter() - start
    return record


# ---- a run ---------------------------------------------------------------------------------------

def _version(module_name):
    try:
        return getattr(importlib.import_module(module_name), "__version__", "unknown")
    except Exception as e:
        return f"not importable ({_one_line(e)})"


def environment(threads: int) -> Dict[str, Any]:
    """The machine, the library versions and the commit a run's results belong to."""
    versions = {"convcore": convcore.__version__, "torch": torch.__version__,
                "python": platform.python_version()}
    try:
        versions["timm"] = import_timm().__version__
    except Exception as e:
        versions["timm"] = f"not importable ({_one_line(e)})"
    versions["monai"] = _version("monai")
    versions["torchaudio"] = _version("torchaudio")
    return {"cpu": cpu_model_name(), "threads": threads, "commit": _git_commit(),
            "platform": platform.platform(), "versions": versions}


def summarize(records: Sequence[Dict[str, Any]], modes: Sequence[str]) -> Dict[str, Any]:
    """Per-outcome counts (all modes, and per mode) and the list of every result that is not
    ok."""
    counts = {o: 0 for o in OUTCOMES}
    per_mode = {m: {o: 0 for o in OUTCOMES} for m in modes}
    failures = []
    for record in records:
        for mode, result in record["results"].items():
            counts[result["outcome"]] += 1
            per_mode[mode][result["outcome"]] += 1
            if result["outcome"] != "ok":
                failures.append({"model": record["model"], "mode": mode,
                                 "outcome": result["outcome"], "error": result.get("error"),
                                 "reason": result.get("reason", "")})
    return {"counts": counts, "counts_per_mode": per_mode, "failures": failures}


def _error_text(error):
    return "" if error is None else f"{error:.1e}"


def markdown(run: Dict[str, Any]) -> str:
    """The run as markdown: what ran where, the counts, every failure, every skip, and a row
    per model."""
    env, settings = run["environment"], run["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    lines = [f"# convcore.torch.convert against PyTorch: model sweep ({run['date']})", "",
             f"- command: `{run['command']}`",
             f"- CPU: {env['cpu']}, {env['threads']} threads; commit {env['commit']}",
             f"- {versions}",
             f"- {settings['dtype']}, {'channels_last' if settings['channels_last'] else 'NCHW'}, "
             f"batch {settings['batch']}, {settings['size']}x{settings['size']} (or the model's "
             f"minimum / fixed size); reference: the PyTorch model in float64, NCHW; bound "
             f"max({BOUNDS[getattr(torch, settings['dtype'])]:.0e}, {LAYOUT_FACTOR} x PyTorch's "
             f"own error)",
             f"- models whose bound PyTorch's own error raised above "
             f"{BOUNDS[getattr(torch, settings['dtype'])]:.0e} (they amplify rounding; bound "
             f"{AMPLIFIED_FACTOR} x their own error past {AMPLIFYING[getattr(torch, settings['dtype'])]:.0e}): "
             + (", ".join(f"{r['model']} ({r['pytorch_error']:.1e})" for r in run["models"]
                          if LAYOUT_FACTOR * (r.get("pytorch_error") or 0.0)
                          > BOUNDS[getattr(torch, settings["dtype"])]) or "none"),
             f"- models tried: {len(run['models'])}"
             + (f" (stopped while on {run['in_progress']})" if run.get("in_progress") else ""),
             "", "| mode | " + " | ".join(OUTCOMES) + " |", "| --- |" + " ---: |" * len(OUTCOMES)]
    for mode, counts in run["counts_per_mode"].items():
        lines.append(f"| {mode} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
    lines.append("| all | " + " | ".join(str(run["counts"][o]) for o in OUTCOMES) + " |")
    failures = [f for f in run["failures"] if f["outcome"] in ("wrong", "raised")]
    skipped = [f for f in run["failures"] if f["outcome"] == "skipped"]
    if failures:
        lines += ["", "## Failures (wrong: silently wrong output; raised: convcore raised)", "",
                  "| model | mode | outcome | error | reason |", "| --- | --- | --- | ---: | --- |"]
        lines += [f"| {f['model']} | {f['mode']} | **{f['outcome']}** | {_error_text(f['error'])}"
                  f" | {f['reason'].replace('|', '/')} |" for f in failures]
    if skipped:
        lines += ["", "## Skipped (too large for this machine, PyTorch cannot build or run the model, "
                  "or it amplifies rounding past what a whole-network check can tell)", "",
                  "| model | reason |", "| --- | --- |"]
        seen = set()
        for f in skipped:
            if f["model"] not in seen:
                seen.add(f["model"])
                lines.append(f"| {f['model']} | {f['reason'].replace('|', '/')} |")
    modes = settings["modes"]
    lines += ["", "## Models", "",
              "| model | source | input | convs (convcore) | PyTorch's own | " + " | ".join(modes) + " | s |",
              "| --- | --- | --- | ---: | ---: |" + " --- |" * len(modes) + " ---: |"]
    for r in run["models"]:
        cells = []
        for m in modes:
            res = r["results"].get(m, {})
            outcome = res.get("outcome", "")
            cells.append(f"{outcome} {_error_text(res.get('error'))}".strip())
        converted = max((res.get("convcore_convs", 0) for res in r["results"].values()), default=0)
        shape = "x".join(map(str, r.get("input_shape", [])))
        lines.append(f"| {r['model']} | {r.get('source', '')} | {shape} | {r.get('convs', '')} "
                     f"({converted}) | {_error_text(r.get('pytorch_error'))} | " + " | ".join(cells)
                     + f" | {r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def _write(out: str, run: Dict[str, Any]) -> None:
    run.update(summarize(run["models"], run["settings"]["modes"]))
    for filename, text in (("sweep.json", json.dumps(run, indent=1) + "\n"),
                           ("summary.md", markdown(run))):
        path = os.path.join(out, filename)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def _line(record: Dict[str, Any]) -> str:
    parts = []
    for mode, result in record["results"].items():
        text = f"{mode} {result['outcome']}"
        if result.get("error") is not None:
            text += f" {result['error']:.1e}"
        if result["outcome"] != "ok":
            text += f" ({result.get('reason', '')})"
        parts.append(text)
    converted = max((r.get("convcore_convs", 0) for r in record["results"].values()), default=0)
    convs = f"{converted}/{record['convs']} convs" if "convs" in record else ""
    return f"{record['model']:28s} {record['seconds']:6.1f} s  {convs:13s} " + "; ".join(parts)


def sweep(names: Sequence[str], out: str, modes: Sequence[str] = DEFAULT_MODES,
          dtype: torch.dtype = torch.float64, use_channels_last: bool = False,
          size: int = DEFAULT_SIZE, batch: int = DEFAULT_BATCH, threads: Optional[int] = None,
          max_params: Optional[int] = DEFAULT_MAX_PARAMS, command: str = "",
          log: Callable[[str], None] = print) -> Dict[str, Any]:
    """check_model on every name in turn, one line each through ``log``; the run (the
    environment, settings, per-model records, counts and failures) is returned and written to
    ``out`` after every model."""
    threads = threads or default_threads()
    torch.set_num_threads(threads)
    convcore.set_num_threads(threads)
    os.makedirs(out, exist_ok=True)
    run: Dict[str, Any] = {
        "date": datetime.date.today().isoformat(), "command": command,
        "environment": environment(threads),
        "settings": {"modes": list(modes), "dtype": str(dtype).replace("torch.", ""),
                     "channels_last": use_channels_last, "size": size, "batch": batch,
                     "max_params": max_params},
        "models": []}
    for name in names:
        run["in_progress"] = name
        _write(out, run)
        record = check_model(name, modes, dtype, use_channels_last, size, batch,
                             max_params=max_params)
        run["models"].append(record)
        log(_line(record))
        run["in_progress"] = None
    _write(out, run)
    counts = run["counts"]
    log(f"{len(names)} models, {len(names) * len(modes)} (model, mode) checks: "
        + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES) + f"; results in {out}")
    return run


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m convcore.model_sweep",
        description="convcore.torch.convert against PyTorch on timm's CNNs, MONAI's 3-D "
                    "networks and wav2vec 2.0's feature extractor. Exit status 1 if any "
                    "model came out wrong or raised.")
    parser.add_argument("--out", help="directory for summary.md and sweep.json")
    parser.add_argument("--models", help="comma list of names or glob patterns (default: all)")
    parser.add_argument("--sample", action="store_true", help="the fixed test sample (SAMPLE)")
    parser.add_argument("--limit", type=int, help="at most this many models")
    parser.add_argument("--list", action="store_true", help="print the selected names and stop")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--channels-last", action="store_true",
                        help="the converted model and its input in channels-last memory")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help=f"comma list of {', '.join(MODES)} (default: %(default)s)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help="image height and width (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--threads", type=int, help="torch and convcore threads (default: all "
                                                    "cores)")
    parser.add_argument("--max-params", type=float, default=DEFAULT_MAX_PARAMS,
                        help="skip models with more parameters (default: %(default).0e; 0: no "
                             "limit)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown {', '.join(unknown) or '(none)'}; "
                     f"choose from {', '.join(MODES)}")
    try:
        names = select_models(args.models, args.sample, args.limit)
    except ValueError as e:
        parser.error(str(e))
    if args.list:
        print("\n".join(names))
        return 0
    if not args.out:
        parser.error("--out DIR is required")
    command = "python -m convcore.model_sweep " + " ".join(
        sys.argv[1:] if argv is None else argv)
    run = sweep(names, args.out, modes, getattr(torch, args.dtype), args.channels_last,
                args.size, args.batch, args.threads, int(args.max_params), command,
                _print_flushed)
    return 1 if run["counts"]["wrong"] or run["counts"]["raised"] else 0


def _print_flushed(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
