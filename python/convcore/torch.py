"""convcore for PyTorch: a drop-in for ``torch.nn.Conv2d`` / ``torch.nn.functional.conv2d``, and for
the 1-D, 3-D and transposed convolutions (Conv1d, Conv3d, ConvTranspose1d/2d/3d and their
functional forms, in convcore/_torch_nd.py: the 2-D convolution with H = 1, one 2-D convolution per
depth tap, and the backward-data pass).

    import convcore.torch
    model = convcore.torch.convert(model)            # every nn.Conv2d now runs on convcore
    y = convcore.torch.conv2d(x, w, b, padding=1)    # functional form, F.conv2d's arguments + algo

The convolution is the custom operator ``torch.ops.convcore.conv2d`` (``torch.library.custom_op``):
its fake (meta) implementation lets ``torch.compile`` trace it, and its autograd formula calls
convcore's backward passes, themselves the custom operators ``convcore::conv2d_backward_data``,
``convcore::conv2d_backward_filter`` and ``convcore::conv2d_backward_bias``. Nothing here computes
a convolution or a gradient with PyTorch's own convolution.

Tensors: float32 or float64 (``SUPPORTED_DTYPES``), on the CPU or a CUDA device (CUDA needs a
convcore built with CUDA). Errors are convcore's, as in ``convcore``'s NumPy API: a bad argument
(a value, a shape, a type, another dtype) raises convcore.BadParamError, which is also a TypeError
and a ValueError, so code written for PyTorch's TypeError catches it; another device raises
convcore.NotSupportedError.

``algo`` names convcore's algorithms: "auto" (the heuristic's choice); "find" (Find's fastest per
pass, timed once per machine and kept in the find-db); one name, used by each pass
that has an algorithm of that name while the others use "auto" ("im2col_gemm" runs all three;
"im2win" has no backward pass of that name, so its gradients use "auto"); or a strict triple
(forward, backward data, backward filter), e.g. ("winograd_4x4_3x3", "winograd_2x2_3x3",
"winograd_3x3_2x2"), each of which must exist for its pass.

Bias, residual and activation run in convcore's fused epilogue
(``y = act(conv(x, w) + bias + residual)``, convcoreConvolutionBiasActivationForward): a Conv2d's
bias always does, and ``convert(model, fuse=True)`` also fuses what follows a Conv2d into it: a
BatchNorm2d (folded into the weights in eval mode, run as PyTorch runs it in training), a residual
add and an ``nn.ReLU``, ``nn.ReLU6`` or ``nn.SiLU`` (see convert). Gradients flow through all of
it: ReLU's and ReLU6's from the output. SiLU's and GELU's need the pre-activation: in eager
training a layer runs the convolution and then PyTorch's activation, which keeps it; the fused
operator (graph captures, conv2d(..., activation=...)) recomputes it in the backward pass.

This module imports torch; ``import convcore`` alone does not.
"""

import builtins
import collections
import copy
import enum
import functools
import inspect
import itertools
import operator
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from . import _api
from ._api import Algo, ConvDesc, Convolution, _output_size, _torch_memory_format
from ._errors import BadParamError, NotSupportedError

__all__ = ["conv2d", "Conv2d", "convert", "refresh", "SUPPORTED_DTYPES", "conv1d", "Conv1d",
           "conv3d", "Conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

# The types of the public signatures: an int or an (h, w) pair (for nn.Conv2d as torch's
# _size_2_t), padding_mode (nn.Conv2d's) and algo= (see the module docstring).
IntOrPair = Union[int, Sequence[int]]
Size2 = Union[int, Tuple[int, int]]
PaddingMode = Literal["zeros", "reflect", "replicate", "circular"]
AlgoSpec = Union[str, enum.Enum, Sequence[Union[str, enum.Enum]]]

# convcore.SUPPORTED_DTYPES (NumPy dtypes) as torch dtypes: torch.float32 and torch.float64.
SUPPORTED_DTYPES: Tuple[torch.dtype, ...] = tuple(getattr(torch, d.name) for d in _api.SUPPORTED_DTYPES)
_SUPPORTED_DEVICES = ("cpu", "cuda")
_FILTERS_CHECKED = _api._C.FILTERS_CHECKED


# ---- arguments -----------------------------------------------------------------------------------

_PASSES = ("forward", "backward data", "backward filter")


def _pass_enums():
    """The algorithm enums of the three passes (None for a build without backward passes)."""
    return (Algo, getattr(_api, "BwdDataAlgo", None), getattr(_api, "BwdFilterAlgo", None))


def _known(name, enum_cls):
    if name == "find":  # Find's fastest, in every pass
        return enum_cls is not None
    return name == "auto" or (enum_cls is not None and name.upper() in enum_cls.__members__)


def _algo_name(algo):
    if isinstance(algo, enum.Enum):  # convcore.Algo, BwdDataAlgo or BwdFilterAlgo
        return algo.name.lower()
    if isinstance(algo, str) and "," not in algo and algo.strip():
        return algo.strip().lower()
    raise BadParamError(f"algo: expected 'auto', an algorithm name or a convcore.Algo, got {algo!r}")


def _algo_spec(algo):
    """The op's ``algo`` string, "name" or "fwd,bwd_data,bwd_filter" (checked by _split_algo)."""
    if isinstance(algo, (tuple, list)):
        if len(algo) != 3:
            raise BadParamError(f"algo: a sequence must name 3 algorithms (forward, backward data, "
                                f"backward filter), got {algo!r}")
        return ",".join(_algo_name(a) for a in algo)
    if isinstance(algo, str) and "," in algo:
        return _algo_spec(algo.split(","))
    return _algo_name(algo)


@functools.lru_cache(maxsize=256)
def _split_algo(spec):
    """(forward, backward data, backward filter) algorithm names from the op's ``algo`` string.

    One name: each pass that has an algorithm of that name uses it, the others "auto" (there
    is no backward IM2WIN, and the Winograd filter gradient is WINOGRAD_3X3_2X2). A triple:
    exactly those, each of which must exist for its pass."""
    parts = [p.strip().lower() for p in spec.split(",")]
    enums = _pass_enums()
    if len(parts) == 3:
        for name, enum_cls, pass_name in zip(parts, enums, _PASSES):
            if not _known(name, enum_cls):
                valid = ["auto"] + ([a.name.lower() for a in enum_cls] if enum_cls else [])
                raise BadParamError(f"algo: unknown algorithm {name!r} for the {pass_name} pass; "
                                    f"valid names: {', '.join(valid)}")
        return tuple(parts)
    if len(parts) == 1:
        name = parts[0]
        names = [name if _known(name, enum_cls) else "auto" for enum_cls in enums]
        if name != "auto" and names == ["auto"] * 3:
            valid = sorted({a.name.lower() for e in enums if e is not None for a in e})
            raise BadParamError(f"algo: unknown algorithm {name!r}; valid names: auto, "
                                f"{', '.join(valid)}")
        return tuple(names)
    raise BadParamError(f"algo: expected one name or 'fwd,bwd_data,bwd_filter', got {spec!r}")


# The activations convert(fuse=True) moves into the epilogue: ReLU and ReLU6 cost a compare
# there, SiLU and GELU a vectorized exp on outputs still in cache (one pass over y fewer than
# PyTorch's op, and no new tensor).
_ACTIVATION_MODULES = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu"}
_GELU_ACTIVATIONS = {"none": "gelu", "tanh": "gelu_tanh"}  # nn.GELU's approximate -> epilogue name
# The activations whose gradient needs the pre-activation (recomputed in the backward pass);
# ReLU's and ReLU6's come from the output.
_READS_PREACTIVATION = ("silu", "gelu", "gelu_tanh")


def _module_activation(m):
    """The epilogue activation the module ``m`` computes of its input, or None."""
    if type(m) is nn.GELU:
        return _GELU_ACTIVATIONS.get(m.approximate)
    return _ACTIVATION_MODULES.get(type(m))


def _activation_name(activation):
    """The epilogue's activation name ("identity", "relu", "relu6", "silu", "gelu",
    "gelu_tanh"), checked."""
    if type(activation) is str and activation in _api.ACTIVATIONS:  # the common case, fast
        return activation
    if activation is None:
        return "identity"
    if isinstance(activation, str) and activation.strip().lower() in _api.ACTIVATIONS:
        return activation.strip().lower()
    raise BadParamError(f"activation: expected one of "
                        f"{', '.join(repr(a) for a in _api.ACTIVATIONS)}, got {activation!r}")


def _check_tensors(fn, x, w, bias):
    """Dtype, device and rank checks: a clear error, never a silent conversion."""
    for name, t in (("input", x), ("weight", w), ("bias", bias)):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise BadParamError(f"{fn}: {name} has dtype {t.dtype}; convcore supports torch.float32 "
                                 f"and torch.float64 (cast with .float() or .double())")
        if t.device.type not in _SUPPORTED_DEVICES:
            raise NotSupportedError(f"{fn}: {name} is on device {t.device}; convcore supports "
                                    f"CPU and CUDA tensors")
    for name, t in (("weight", w), ("bias", bias)):
        if t is not None and t.dtype != x.dtype:
            raise BadParamError(f"{fn}: input has dtype {x.dtype} but {name} has dtype {t.dtype}; "
                                 f"they must be equal")
        if t is not None and t.device != x.device:
            raise BadParamError(f"{fn}: input is on {x.device} but {name} is on {t.device}")
    if x.dim() != 4:
        raise BadParamError(f"{fn}: input must be 4-D (N, C, H, W), got shape {tuple(x.shape)}")
    if w.dim() != 4:
        raise BadParamError(f"{fn}: weight must be 4-D (K, C/groups, R, S), got shape "
                            f"{tuple(w.shape)}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w.shape[0]):
        raise BadParamError(f"{fn}: bias must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


@functools.lru_cache(maxsize=512)
def _convolution(stride, padding, dilation, groups):
    # A Convolution may be shared by threads; caching keeps its per-thread workspace.
    return Convolution(ConvDesc(padding=padding, stride=stride, dilation=dilation, groups=groups))


def _conv_for(stride, padding, dilation, groups):
    return _convolution(tuple(stride), tuple(padding), tuple(dilation), int(groups))


# ---- the custom operators ----------------------------------------------------------------------

def _conv2d_impl(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: List[int],
               padding: List[int], dilation: List[int], groups: int, algo: str,
               activation: str = "identity", residual: Optional[Tensor] = None,
               prepared: bool = False) -> Tensor:
    """y = act(conv(x, w) + bias + residual), computed by convcore's forward with algorithm
    ``algo`` and its fused epilogue (``activation``: one of _api.ACTIVATIONS;
    ``residual``: None or a tensor of the output's shape). ``prepared``: the weights are not
    being trained (the caller recorded no autograd), so the filters transformed for ``algo`` are
    kept between calls for as long as w's bytes stay the same (checked at every call)."""
    if residual is not None and (_shares_memory(residual, x) or _shares_memory(residual, w)):
        # the library reads a residual that is none of its inputs: conv(x) + x adds it after
        unfused = _conv2d_impl(x, w, bias, stride, padding, dilation, groups, algo, "identity", None, prepared)
        return _apply_activation(unfused, residual, _activation_name(activation), owned=True)
    if prepared:
        conv = _convolution_of_weight(w, stride, padding, dilation, groups)
    else:
        conv = _conv_for(stride, padding, dilation, groups)
    fwd_algo = _split_algo(algo)[0]
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    # The short path of CPU tensors (as Conv2d's inference); anything it does not take, or that
    # is wrong, goes through the checks and the general path.
    y = conv._forward_torch_cpu(x, w, fwd_algo, _FILTERS_CHECKED if prepared else _api._C.FILTERS_PER_CALL,
                                bias, _api.ACTIVATIONS.get(activation, -1), residual) \
        if activation in _api.ACTIVATIONS else None
    if y is not None:
        return y
    _check_tensors("convcore::conv2d", x, w, bias)
    if residual is not None:
        _check_residual("convcore::conv2d", x, residual)
    return conv.forward(x, w, algo=fwd_algo, bias=bias, activation=_activation_name(activation),
                        residual=residual, filter_version="check" if prepared else None)


_conv2d_op = torch.library.custom_op("convcore::conv2d", mutates_args=())(_conv2d_impl)
# custom_op's kernel finds the device by walking the arguments (about 4 us a call, paid by every
# convolution of a compiled graph); CPU tensors go straight to the implementation.
_KERNELS = torch.library.Library("convcore", "IMPL")
_KERNELS.impl("conv2d", _conv2d_impl, "CPU")


def _check_residual(fn, x, residual):
    if not isinstance(residual, Tensor):
        raise BadParamError(f"{fn}: residual must be a torch.Tensor, got {type(residual).__name__}")
    if residual.dtype != x.dtype or residual.device != x.device:
        raise BadParamError(f"{fn}: residual is {residual.dtype} on {residual.device} but input is "
                            f"{x.dtype} on {x.device}; they must be equal")


@functools.lru_cache(maxsize=512)
def _weight_convolution(address, shape, stride, padding, dilation, groups):
    return Convolution(ConvDesc(padding=padding, stride=stride, dilation=dilation, groups=groups))


def _convolution_of_weight(w, stride, padding, dilation, groups):
    """A Convolution for the weight at w's address: its plans keep w's transformed filters
    (a graph's frozen weights are prepared once, and layers of one shape do not take turns
    re-transforming theirs). The plans check w's bytes at every call (FILTERS_CHECKED): memory
    reused by another weight is seen."""
    return _weight_convolution(w.data_ptr(), tuple(w.shape), tuple(stride), tuple(padding),
                               tuple(dilation), int(groups))


@_conv2d_op.register_fake
def _conv2d_fake(x, w, bias, stride, padding, dilation, groups, algo, activation="identity",
                 residual=None, prepared=False):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    torch._check(cg * groups == c, lambda: f"convcore::conv2d: input has {c} channels but weight "
                                           f"expects {cg} x {groups} groups")
    p = _output_size(h, padding[0], r, stride[0], dilation[0])
    q = _output_size(wd, padding[1], s, stride[1], dilation[1])
    if residual is not None:
        torch._check(tuple(residual.shape) == (n, k, p, q), lambda: (
            f"convcore::conv2d: residual has shape {tuple(residual.shape)}, the output "
            f"{(n, k, p, q)}"))
    return torch.empty((n, k, p, q), dtype=x.dtype, device=x.device, memory_format=_torch_memory_format(x))


def _pointwise_depthwise_impl(x: Tensor, w_pw: Tensor, b_pw: Optional[Tensor], act_pw: str, w_dw: Tensor,
                              b_dw: Optional[Tensor], act_dw: str, stride: List[int], padding: List[int],
                              dilation: List[int]) -> Tensor:
    """act_dw(dwconv(act_pw(conv1x1(x, w_pw) + b_pw), w_dw) + b_dw), the depthwise convolution
    with ``stride``, ``padding`` and ``dilation``: convcore's fused 1x1 -> depthwise pair, called
    by graphs traced without autograd (_PointwiseDepthwise). Its filters are prepared once per
    pair of weights and checked against their bytes at every call. What the fused pass does not
    take (a layout, a dtype) runs as the two convolutions."""
    pair = _pair_of_weights(w_pw.data_ptr(), tuple(w_pw.shape), w_dw.data_ptr(), tuple(w_dw.shape),
                            tuple(stride), tuple(padding), tuple(dilation))
    y = pair.forward(x, (w_pw, b_pw, act_pw), (w_dw, b_dw, act_dw))
    if y is not None:
        return y
    h = _conv2d_impl(x, w_pw, b_pw, [1, 1], [0, 0], [1, 1], 1, "auto", act_pw, None, True)
    return _conv2d_impl(h, w_dw, b_dw, list(stride), list(padding), list(dilation), w_dw.shape[0], "auto",
                        act_dw, None, True)


_pointwise_depthwise_op = torch.library.custom_op("convcore::pointwise_depthwise", mutates_args=())(
    _pointwise_depthwise_impl)
_KERNELS.impl("pointwise_depthwise", _pointwise_depthwise_impl, "CPU")


@_pointwise_depthwise_op.register_fake
def _pointwise_depthwise_fake(x, w_pw, b_pw, act_pw, w_dw, b_dw, act_dw, stride, padding, dilation):
    n, _, h, wd = x.shape
    k, _, r, s = w_dw.shape
    return torch.empty((n, k, _output_size(h, padding[0], r, stride[0], dilation[0]),
                        _output_size(wd, padding[1], s, stride[1], dilation[1])),
                       dtype=x.dtype, device=x.device, memory_format=_torch_memory_format(x))


class _PairPlan:
    """The binding's fused pair for one pair of weights (their addresses and shapes) and one
    depthwise geometry, with the number that identifies the contents its filters were prepared
    from."""

    def __init__(self, stride, padding, dilation, groups):
        self.impl = _api._C.PointwiseDepthwise(_api._C.ConvParams(
            padding[0], padding[1], stride[0], stride[1], dilation[0], dilation[1], groups, 0))
        self.geometry = (stride, padding, dilation, groups)
        self.version = (None, -1)
        self.lock = threading.Lock()

    def forward(self, x, first, second, version=None):
        """y, or None where the library refuses the call. first, second: (weight, bias,
        activation name) of the 1x1 and the depthwise convolution. version: a number that
        changes with their contents, or None to check their bytes here."""
        if (x.device.type != "cpu" or x.dim() != 4 or x.dtype not in _PAIR_DTYPES
                or not x.is_contiguous(memory_format=torch.channels_last)):
            return None
        tensors = [t for t in (first[0], first[1], second[0], second[1]) if t is not None]
        if any(t.dtype != x.dtype or t.device.type != "cpu" for t in tensors):
            return None
        if version is None:
            key = _tensors_key(tensors, False)
            if key is None:
                return None
            with self.lock:
                if self.version[0] != key:
                    self.version = (key, next(_filter_versions))
                version = self.version[1]
        stride, padding, dilation, _ = self.geometry
        n, _, h, w = x.shape
        r, s = second[0].shape[2:]
        y = torch.empty((n, second[0].shape[0], _output_size(h, padding[0], r, stride[0], dilation[0]),
                         _output_size(w, padding[1], s, stride[1], dilation[1])),
                        dtype=x.dtype, memory_format=torch.channels_last)
        to_dlpack = torch.utils.dlpack.to_dlpack
        try:
            self.impl.forward(
                to_dlpack(x), to_dlpack(y), to_dlpack(first[0]),
                None if first[1] is None else to_dlpack(first[1].contiguous()), _api.ACTIVATIONS[first[2]],
                to_dlpack(second[0]), None if second[1] is None else to_dlpack(second[1].contiguous()),
                _api.ACTIVATIONS[second[2]], version)
        except (NotSupportedError, BadParamError):
            return None
        return y


@functools.lru_cache(maxsize=256)
def _pair_of_weights(pw_address, pw_shape, dw_address, dw_shape, stride, padding, dilation):
    return _PairPlan(stride, padding, dilation, dw_shape[0])


def _backward_method(conv, name):
    method = getattr(conv, name, None)
    if method is None:
        raise NotSupportedError(f"this convcore build has no {name}; convcore.torch needs a "
                                f"convcore with the backward passes to compute gradients")
    return method


@torch.library.custom_op("convcore::conv2d_backward_data", mutates_args=())
def _conv2d_backward_data_op(dy: Tensor, w: Tensor, x_shape: List[int], stride: List[int],
                             padding: List[int], dilation: List[int], groups: int,
                             algo: str) -> Tensor:
    """dx, the gradient of conv(x, w) with respect to x, by convcore's backward data pass."""
    conv = _conv_for(stride, padding, dilation, groups)
    return _backward_method(conv, "backward_data")(dy, w, tuple(x_shape),
                                                   algo=_split_algo(algo)[1])


@_conv2d_backward_data_op.register_fake
def _conv2d_backward_data_fake(dy, w, x_shape, stride, padding, dilation, groups, algo):
    return torch.empty(tuple(x_shape), dtype=dy.dtype, device=dy.device, memory_format=_torch_memory_format(dy))


@torch.library.custom_op("convcore::conv2d_backward_filter", mutates_args=())
def _conv2d_backward_filter_op(x: Tensor, dy: Tensor, w_shape: List[int], stride: List[int],
                               padding: List[int], dilation: List[int], groups: int,
                               algo: str) -> Tensor:
    """dw, the gradient of conv(x, w) with respect to w, by convcore's backward filter pass."""
    conv = _conv_for(stride, padding, dilation, groups)
    return _backward_method(conv, "backward_filter")(x, dy, tuple(w_shape),
                                                     algo=_split_algo(algo)[2])


@_conv2d_backward_filter_op.register_fake
def _conv2d_backward_filter_fake(x, dy, w_shape, stride, padding, dilation, groups, algo):
    return x.new_empty(tuple(w_shape))


@torch.library.custom_op("convcore::conv2d_backward_bias", mutates_args=())
def _conv2d_backward_bias_op(dy: Tensor) -> Tensor:
    """db (shape (K,)): dy summed over batch and positions, by convcore's backward bias pass."""
    return _backward_method(_conv_for((1, 1), (0, 0), (1, 1), 1), "backward_bias")(dy)


@_conv2d_backward_bias_op.register_fake
def _conv2d_backward_bias_fake(dy):
    return dy.new_empty((dy.shape[1],))


def _setup_context(ctx, inputs, output):
    x, w, bias, stride, padding, dilation, groups, algo = inputs[:8]
    activation = _activation_name(inputs[8] if len(inputs) > 8 else "identity")
    residual = inputs[9] if len(inputs) > 9 else None
    needs = getattr(ctx, "needs_input_grad", None) or (True, True)
    # dx needs w, dw needs x: a frozen layer does not keep its input alive. ReLU and ReLU6 take
    # their gradient from the output; SiLU and GELU from the pre-activation, recomputed from x,
    # w, bias and the residual.
    silu = activation in _READS_PREACTIVATION
    ctx.save_for_backward(x if needs[1] or silu else None, w if needs[0] or silu else None,
                          bias if silu else None,
                          output if activation in ("relu", "relu6") else None,
                          residual if silu else None)
    ctx.shapes = (list(x.shape), list(w.shape))
    ctx.has_bias = bias is not None
    ctx.has_residual = residual is not None
    ctx.activation = activation
    ctx.params = (list(stride), list(padding), list(dilation), groups, algo)


def _activation_backward(activation, dy, y, preactivation):
    """The gradient with respect to the pre-activation conv(x, w) + bias, given dy: ReLU's and
    ReLU6's from the output y, SiLU's and GELU's from the pre-activation (``preactivation()``
    recomputes it). The operator's autograd and _Conv2dFunction share it."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(dy, y, 0.0)  # y > 0 exactly where the input was
    if activation == "relu6":
        return torch.ops.aten.hardtanh_backward(dy, y, 0.0, 6.0)  # y in (0, 6): the same set
    if activation == "silu":
        return torch.ops.aten.silu_backward(dy, preactivation())
    if activation in ("gelu", "gelu_tanh"):
        return torch.ops.aten.gelu_backward(dy, preactivation(),
                                            approximate="none" if activation == "gelu" else "tanh")
    return dy


def _conv2d_backward(ctx, dy):
    x, w, bias, y, residual = ctx.saved_tensors
    x_shape, w_shape = ctx.shapes
    dy = _activation_backward(ctx.activation, dy, y, lambda: torch.ops.convcore.conv2d(
        x, w, bias, *ctx.params, "identity", residual))  # the pre-activation
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convcore.conv2d_backward_data(dy, w, x_shape, *ctx.params)
    if ctx.needs_input_grad[1]:
        dw = torch.ops.convcore.conv2d_backward_filter(x, dy, w_shape, *ctx.params)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = torch.ops.convcore.conv2d_backward_bias(dy)
    dz = dy if ctx.has_residual and ctx.needs_input_grad[9] else None
    return dx, dw, db, None, None, None, None, None, None, dz, None


_conv2d_op.register_autograd(_conv2d_backward, setup_context=_setup_context)


def _register_direct_autograd_cpu():
    """The operator's autograd kernel for CPU tensors. custom_op's, which this wraps, reaches the
    implementation through a second dispatch (about 9 us a call) also where nothing records a
    gradient (torch.no_grad, where every convolution of a compiled graph pays it): plain CPU
    tensors with no mode or transform active then call the implementation directly. Anything
    else (a gradient to record, fake or functional tensors while a graph is traced, a dispatch
    mode) goes through custom_op's kernel. Where this torch lacks the function that makes
    custom_op's kernel, custom_op's registration stays as it is."""
    try:
        from torch._library.autograd import make_autograd_impl
        general = make_autograd_impl(_conv2d_op._opoverload, _conv2d_op)
    except (ImportError, AttributeError, TypeError):
        return

    def autograd_cpu(keyset, x, w, bias, *args, **kwargs):
        residual = args[6] if len(args) > 6 else kwargs.get("residual")
        if (_plain_tensors(x, w, bias) and (residual is None or type(residual) is Tensor)
                and not (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (
                    bias is not None and bias.requires_grad) or (residual is not None and residual.requires_grad)))
                and not torch._C._len_torch_dispatch_stack()
                and torch._C._functorch.peek_interpreter_stack() is None):
            return _conv2d_impl(x, w, bias, *args, **kwargs)
        return general(keyset, x, w, bias, *args, **kwargs)

    _KERNELS.impl("conv2d", autograd_cpu, "AutogradCPU", with_keyset=True)


_register_direct_autograd_cpu()


# ---- the functional form -------------------------------------------------------------------------

def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrPair = 1,
           padding: Union[IntOrPair, str] = 0, dilation: IntOrPair = 1, groups: int = 1,
           algo: AlgoSpec = "auto", activation: Optional[str] = "identity") -> Tensor:
    """``torch.nn.functional.conv2d`` computed by convcore (forward and gradients).

    Same arguments, in the same order, plus ``algo`` ("auto", an algorithm name, a convcore.Algo,
    or a (forward, backward data, backward filter) triple) and ``activation`` ("identity", "relu",
    "relu6", "silu", "gelu" (nn.GELU()) or "gelu_tanh" (nn.GELU(approximate="tanh")):
    ``act(conv2d(...) + bias)`` in convcore's fused epilogue). ``padding`` may
    be an int, a pair, "valid" or "same" (stride 1; an odd total padding puts the extra
    row/column at the bottom/right, as PyTorch does). Input N x C x H x W (or unbatched
    C x H x W), float32 or float64."""
    fn = "convcore.torch.conv2d"
    activation = _activation_name(activation)
    if isinstance(input, torch.fx.Proxy) or isinstance(weight, torch.fx.Proxy):
        return _symbolic_conv2d(input, weight, bias, stride, padding, dilation, groups, algo, activation)
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise BadParamError(f"{fn}: input and weight must be torch.Tensors, got "
                             f"{type(input).__name__} and {type(weight).__name__}")
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    _check_tensors(fn, input, weight, bias)
    stride_hw, dilation_hw = _pair(stride), _pair(dilation)
    if isinstance(padding, str):  # convcore pads symmetrically: an odd "same" pads input here
        input, padding = _api._padding_string(fn, padding, input, weight, stride_hw, dilation_hw)
    padding_hw = _pair(padding)
    spec = _algo_spec(algo)
    algos = _split_algo(spec)  # an unknown name fails here, before any work
    route = _route(input, weight, bias)
    if route == _OPERATOR:
        y = _conv2d_op(input, weight, bias, [int(v) for v in stride_hw],
                       [int(v) for v in padding_hw], [int(v) for v in dilation_hw], int(groups),
                       spec, activation, None, _prepared_in_graph())
    elif route == _FUNCTION:
        if bias is not None and not bias.is_contiguous():
            bias = bias.contiguous()
        y = _apply_conv2d(input, weight, bias,
                          _conv_for(stride_hw, padding_hw, dilation_hw, groups),
                          _function_args(spec, activation))
    else:
        # Autograd records nothing (inference): the filters made from this weight are kept
        # between calls while its bytes stay the same (checked at every call), as the
        # operator's prepared calls keep them; convcore.torch.conv1d and Conv1d run here.
        y = _direct_conv2d(input, weight, bias, stride_hw, padding_hw, dilation_hw, groups, algos[0],
                           activation, "check")
    return y.squeeze(0) if unbatched else y


def _direct_conv2d(input, weight, bias, stride, padding, dilation, groups, algo, activation,
                   filter_version):
    """conv2d's route when autograd records nothing, on checked arguments: the Convolution of
    this weight's address, which keeps the filters it made from it while ``filter_version``
    ("check": the weight's bytes, checked at every call; or a frozen layer's version number)
    stays the same."""
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    return _convolution_of_weight(weight, stride, padding, dilation, groups).forward(
        input, weight, algo=algo, bias=bias, activation=activation, filter_version=filter_version)


def _frozen_filter_version(layer, weight):
    """A frozen layer's (freeze=True) filter_version for ``weight``: a number that changes
    whenever the weight is another tensor or its version counter moved (every in-place change
    through autograd-visible ops does: optimizer steps, load_state_dict,
    ``with torch.no_grad(): w.mul_(2)``), or after refresh(). The plan re-transforms the
    filters only then. A tensor made under torch.inference_mode has no version counter: its
    filters are transformed once."""
    try:
        version = weight._version
    except RuntimeError:
        version = 0  # an inference tensor: trusted (freeze's contract), refresh() after writes
    held = layer.__dict__.get("_prepared_weight")
    if held is not None and held[0] is weight and held[1] == version:
        return held[2]
    token = next(_filter_versions)
    layer.__dict__["_prepared_weight"] = (weight, version, token)
    return token


def _symbolic_conv2d(input, weight, bias, stride, padding, dilation, groups, algo, activation):
    """conv2d on torch.fx Proxies (torch.fx.symbolic_trace, torchvision's
    create_feature_extractor, FX quantization): one call of the operator convcore::conv2d in the
    graph. Shapes are unknown here: checks happen when the graph runs. padding="same" and an
    unbatched input need shapes, and are refused."""
    if isinstance(padding, str):
        if padding != "valid":
            raise NotSupportedError(f"convcore.torch.conv2d: padding={padding!r} under torch.fx "
                                    f"symbolic tracing (it needs the weight's shape; pass the "
                                    f"padding as ints)")
        padding = 0
    spec = _algo_spec(algo)
    _split_algo(spec)  # an unknown name fails now
    return torch.ops.convcore.conv2d(input, weight, bias, [int(v) for v in _pair(stride)],
                                     [int(v) for v in _pair(padding)],
                                     [int(v) for v in _pair(dilation)], int(groups), spec, activation)


# How a call runs (_route): convcore called directly (inference), the eager autograd Function
# (training on CPU tensors), or the custom operator (everything else).
_DIRECT, _FUNCTION, _OPERATOR = 0, 1, 2


def _captured():
    """Whether a graph capture, a dispatch mode, a functorch transform or the profiler sees
    the current call (see _route)."""
    return bool(torch.compiler.is_compiling() or torch._C._get_tracing_state() is not None
                or torch._C._len_torch_dispatch_stack()
                or torch._C._functorch.peek_interpreter_stack() is not None
                or torch._C._autograd._profiler_enabled())


def _route(x, w, bias):
    """How a call on these tensors runs.

    - The custom operator when a graph capture records the call (torch.compile, torch.export,
      torch.jit.trace: a call that bypasses the operator is invisible to a capture, which would
      keep its output as a constant), under a dispatch mode (FakeTensorMode, FlopCounterMode, ...),
      a functorch transform or the profiler (which then names convcore's operators), and for
      autograd on other than plain CPU tensors.
    - convcore directly when autograd records nothing (inference, torch.no_grad): the
      operator's dispatch costs tens of microseconds per call, a large share of a small layer.
    - _Conv2dFunction when autograd records the call on plain CPU tensors: the same formulas as
      the operator's autograd, without its dispatch."""
    if _captured():
        return _OPERATOR
    if not torch.is_grad_enabled() or not (x.requires_grad or w.requires_grad or
                                           (bias is not None and bias.requires_grad)):
        return _DIRECT
    if _plain_tensors(x, w, bias) and x.is_cpu and w.is_cpu:
        return _FUNCTION
    return _OPERATOR


_PLAIN_TENSORS = (Tensor, nn.Parameter)


def _plain_tensors(x, w, bias):
    """Whether x, w and bias are plain tensors (no subclass: nothing below autograd to dispatch
    to), the weights maybe Parameters."""
    return (type(x) is Tensor and type(w) in _PLAIN_TENSORS
            and (bias is None or type(bias) in _PLAIN_TENSORS))
_BACKWARD_DATA, _BACKWARD_FILTER = (getattr(_api._C, "BACKWARD_DATA", 1),
                                    getattr(_api._C, "BACKWARD_FILTER", 2))


@functools.lru_cache(maxsize=256)
def _function_args(spec, activation):
    """What _Conv2dFunction needs of the op's ``algo`` string and the activation name:
    (spec, forward algorithm name, activation, its code, backward data and backward filter
    algorithm ids)."""
    fwd, data, filt = _split_algo(spec)
    enums = _pass_enums()
    return (spec, fwd, activation, _api.ACTIVATIONS[activation],
            _api._enum_algo_id(data, enums[1]) if enums[1] else _api._C.ALGO_AUTO,
            _api._enum_algo_id(filt, enums[2]) if enums[2] else _api._C.ALGO_AUTO)


def _epilogue_backward_cpu(activation, dy, a, with_bias):
    """(dv, db) of CPU tensors: dv = dy * act'(a), the gradient of the pre-activation
    conv(x, w) + bias (+ residual), and the bias's gradient (None unless ``with_bias``), in one
    pass over dy (convcoreActivationBackwardBias). ``a``: the output y for relu and relu6, the
    pre-activation for silu and gelu, unused for identity (dv is then dy itself)."""
    if activation in _READS_PREACTIVATION:
        # PyTorch's vectorised exp and erf run SiLU's and GELU's derivatives (convcore's are
        # scalar); then the bias's gradient alone, from it
        dy, activation = _activation_backward(activation, dy, None, lambda: a), "identity"
    identity = activation == "identity"
    if identity and not with_bias:
        return dy, None
    to_dlpack = torch.utils.dlpack.to_dlpack
    dv = dy if identity else torch.empty_like(dy)
    db = dy.new_empty(dy.shape[1]) if with_bias else None
    try:
        dy_c, a_c = to_dlpack(dy), to_dlpack(dy if identity else a)
    except RuntimeError:  # e.g. the negative bit: PyTorch's own ops
        dv = _activation_backward(activation, dy, a, lambda: a)
        return dv, (dv.sum((0, 2, 3)) if with_bias else None)
    _api._C.activation_backward_capsules(_api.ACTIVATIONS[activation], a_c, dy_c, to_dlpack(dv),
                                         None if db is None else to_dlpack(db))
    return dv, db


class _Conv2dFunction(torch.autograd.Function):
    """Eager autograd of y = act(conv(x, w) + bias) on CPU tensors: the formulas of the
    operator's autograd (_conv2d_backward), calling convcore directly. ``conv`` is the
    convcore.Convolution whose plans run the three passes (a Conv2d's own); ``args`` is
    _function_args(spec, activation)."""

    @staticmethod
    def forward(ctx, x, w, bias, conv, args):
        _, fwd_algo, activation, activation_code, _, _ = args
        # DLPack's export (torch.utils.dlpack.to_dlpack) reads tensors that require grad as they
        # are: no detach needed on the short path.
        y = conv._forward_torch_cpu(x, w, fwd_algo, _api._C.FILTERS_PER_CALL, bias, activation_code)
        if y is None:  # what the short path does not take: the checks say what is wrong
            _check_tensors("convcore.torch.conv2d", x, w, bias)
            y = conv.forward(x.detach(), w.detach(), algo=fwd_algo,
                             bias=None if bias is None else bias.detach(), activation=activation)
        needs = ctx.needs_input_grad
        silu = activation in _READS_PREACTIVATION
        ctx.save_for_backward(x if needs[1] or silu else None, w if needs[0] or silu else None,
                              bias if silu else None,
                              y if activation in ("relu", "relu6") else None)
        ctx.conv, ctx.args, ctx.shapes = conv, args, (x.shape, w.shape)
        ctx.memory_format = None if x.is_contiguous() else _torch_memory_format(x)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        x, w, bias, y = ctx.saved_tensors
        conv = ctx.conv
        _, fwd_algo, activation, _, data_algo, filter_algo = ctx.args
        if not dy.is_contiguous() and not dy.is_contiguous(memory_format=torch.channels_last):
            # e.g. y.sum()'s gradient, expanded with stride 0: laid out as x (dx follows dy)
            dy = dy.contiguous(memory_format=ctx.memory_format or torch.contiguous_format)
        needs = ctx.needs_input_grad
        # the epilogue's backward: the pre-activation's gradient and the bias's, in one pass
        preactivation = None
        if activation in _READS_PREACTIVATION:
            preactivation = conv.forward(x.detach(), w.detach(), algo=fwd_algo,
                                         bias=None if bias is None else bias.detach())
        dy, db = _epilogue_backward_cpu(activation, dy, preactivation if y is None else y, needs[2])
        x_shape, w_shape = ctx.shapes
        dx = dw = None
        if needs[0]:
            dx = conv._backward_torch_cpu(_BACKWARD_DATA, dy, w, x_shape, data_algo)
        if needs[1]:
            dw = conv._backward_torch_cpu(_BACKWARD_FILTER, x, dy, w_shape, filter_algo)
        return dx, dw, db, None, None


# Function.apply's C++ part: Function.apply (Python) adds only functorch's handling, and _route
# sends calls under functorch transforms to the operator. Saves ~1.5 us per call.
_apply_conv2d = super(torch.autograd.Function, _Conv2dFunction).apply


def _forward(x, w, bias, stride, padding, dilation, groups, fwd_algo, activation="identity"):
    """y = act(conv(x, w) + bias) by convcore's forward and its fused epilogue (the operator's
    computation)."""
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    return _conv_for(stride, padding, dilation, groups).forward(x, w, algo=fwd_algo, bias=bias,
                                                               activation=activation)


# ---- the module ------------------------------------------------------------------------------------

_OWN_BATCH_NORM = object()  # Conv2d._fused_forward's default bn: the layer's own fused batch norm

_filter_versions = itertools.count()  # Conv2d._filter_version's numbers, unique in the process


class Conv2d(nn.Conv2d):
    """``torch.nn.Conv2d`` computed by convcore: same constructor, parameters and state_dict, plus
    ``algo`` ("auto", an algorithm name, a convcore.Algo, or a (forward, backward data, backward
    filter) triple), ``activation`` ("identity", "relu", "relu6", "silu", "gelu" or "gelu_tanh",
    applied to the output in convcore's fused epilogue with the bias; ``convert(fuse=True)`` sets
    it) and ``freeze``. They are plain attributes: they are not part of the state_dict.

    Weights in inference (no autograd recording): the layer keeps its filters transformed for
    its algorithm (Winograd's U, packed filters, filter spectra) and never runs them older than
    its weights. By default (``freeze=False``) it checks at every call that the weight's bytes
    are still those it transformed (a 64-bit fingerprint, one read of the weight), so every way
    of changing a weight is seen: optimizer steps, load_state_dict, in-place changes under
    no_grad, a new Parameter, ``.data`` writes, ``copy_`` into tensors made under inference_mode.

    ``freeze=True`` skips that read and trusts the weights instead: the filters are transformed
    again only when the weight is another tensor or its version counter moved (optimizer steps,
    load_state_dict, in-place ops on the Parameter). Writes that bypass the version counter
    (``weight.data`` writes, in-place changes to tensors made under torch.inference_mode, writes
    through NumPy or DLPack views) are not seen: call ``convcore.torch.refresh(model)`` after
    them. Training (autograd recording) always reads the weights as they are."""

    # TorchScript compiles a module's properties unless they are listed here; these two are
    # Python-only setters (the scripted forward reads _algo_spec and _activation).
    __jit_unused_properties__ = ["activation", "algo", "last_algo"]
    # the caches of eager calls (a fingerprint may not fit TorchScript's int)
    __jit_ignored_attributes__ = ["_folded_filters", "_prepared_weight", "_pair_filters", "_convcore_conv",
                                  "_last_algo"]
    freeze = False  # trust the weights (see the class docstring); set per layer or by convert()

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size2,
                 stride: Size2 = 1, padding: Union[Size2, str] = 0, dilation: Size2 = 1, groups: int = 1, bias: bool = True,
                 padding_mode: PaddingMode = "zeros", device: Any = None, dtype: Any = None,
                 algo: AlgoSpec = "auto", activation: Optional[str] = "identity",
                 freeze: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
                         device=device, dtype=dtype)
        self.algo = algo
        self.activation = activation
        self.freeze = _freeze_arg(freeze)
        self._has_fused_batch_norm = False

    @property
    def activation(self) -> str:
        return self.__dict__.get("_activation", "identity")

    @activation.setter
    def activation(self, value: Optional[str]) -> None:
        name = _activation_name(value)  # BadParamError for an unknown one
        self.__dict__["_activation"] = name
        self.__dict__["_activation_code"] = _api.ACTIVATIONS[name]

    @property
    def algo(self) -> AlgoSpec:
        return self._algo

    @algo.setter
    def algo(self, value: AlgoSpec) -> None:
        spec = _algo_spec(value)
        self._fwd_algo = _split_algo(spec)[0]  # BadParamError for an unknown name
        self._algo_spec = spec  # the operator's algo string (the scripted forward passes it)
        self._algo = value

    def forward(self, input: Tensor, residual: Optional[Tensor] = None,
                activation: Optional[str] = None) -> Tensor:
        """act(bn(conv(input) + bias) + residual): the convolution, then what convert(fuse=True)
        fused into it: its batch norm (where fused), ``residual`` (a tensor added to the output,
        or None) and ``activation`` (None: the layer's own)."""
        if torch.jit.is_scripting():
            # torch.jit.script compiles this branch only: the operator, with the module's
            # parameters (a padding string needs the shapes of the Python path: refused).
            if isinstance(self.padding, str):
                raise RuntimeError("convcore.torch.Conv2d: torch.jit.script of a layer with "
                                   "padding='same' or 'valid' is not supported; use torch.jit.trace")
            if self._has_fused_batch_norm:
                raise RuntimeError("convcore.torch.Conv2d: torch.jit.script of a layer with a "
                                   "fused batch norm is not supported; use torch.jit.trace")
            padding = [self.padding[0], self.padding[1]]
            if self.padding_mode != "zeros":
                input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
                padding = [0, 0]
            return torch.ops.convcore.conv2d(input, self.weight, self.bias,
                                             [self.stride[0], self.stride[1]], padding,
                                             [self.dilation[0], self.dilation[1]], self.groups,
                                             self._algo_spec,
                                             self._activation if activation is None else activation,
                                             residual)
        if residual is None and activation is None and not self._has_fused_batch_norm:
            return self._conv_forward(input, self.weight, self.bias)
        return self._fused_forward(input, residual, activation)

    _has_fused_batch_norm = False  # set by convert(fuse=True) with _fused_batch_norm

    def _fused_forward(self, input, residual=None, activation=None, bn=_OWN_BATCH_NORM):
        """forward() with a fused batch norm, a residual or an activation given. ``bn``: the
        batch norm applied to the convolution's output, None for none; by default the one
        convert(fuse=True) fused into the layer in its nn.Sequential. In eval mode the batch norm
        is folded into the weights and bias (Ioffe & Szegedy 2015, sec. 3.2: bn is affine in eval,
        y = scale * (conv(x) + b - mean) + beta with scale = gamma / sqrt(var + eps)), and the
        residual and activation run in convcore's epilogue. In training the batch norm runs as
        PyTorch runs it, then the residual and the activation. A residual that shares memory
        with the input or the weight (``conv(x) + x``) is added after the convolution."""
        if bn is _OWN_BATCH_NORM:
            bn = self.__dict__.get("_fused_batch_norm")
        activation = self.activation if activation is None else _activation_name(activation)
        if isinstance(input, torch.fx.Proxy):  # symbolic tracing: one call in the graph
            return _symbolic_fused_forward(self, input, residual, activation, bn)
        if residual is not None and (_shares_memory(residual, input) or _shares_memory(residual, self.weight)):
            y = self._fused_forward(input, None, "identity", bn)
            return _apply_activation(y, residual, activation, owned=True)
        if _keeps_preactivation(activation, input, self.weight, self.bias, residual):
            return _ACTIVATION_FUNCTIONS[activation](self._fused_forward(input, residual, "identity", bn))
        if bn is not None and (bn.training or bn.running_mean is None):
            # the convolution alone, then the batch norm as PyTorch runs it
            y = self._conv_forward(input, self.weight, self.bias, "identity")
            return _apply_activation(_BATCH_NORM_FORWARD(bn, y), residual, activation, owned=True)
        if bn is not None:
            weight, bias, filters = self._folded(bn, input)
        else:
            weight, bias, filters = self.weight, self.bias, None
        if (self.padding_mode == "zeros" and type(self.padding) is tuple
                and isinstance(input, Tensor) and input.dim() == 4):
            route = _route(input, weight, bias)
            if route == _DIRECT:
                conv = self._own_convolution()
                y = conv._forward_torch_cpu(input, weight, self._fwd_algo,
                                            self._filters(weight) if filters is None else filters,
                                            bias, _api.ACTIVATIONS[activation], residual)
                if y is not None:
                    self.__dict__["_last_algo"] = conv
                    return y
            elif route == _OPERATOR and (residual is None or _residual_fits(self, input, residual)):
                return torch.ops.convcore.conv2d(
                    input, weight, bias, list(self.stride), list(self.padding),
                    list(self.dilation), self.groups, self._algo_spec, activation, residual,
                    _prepared_in_graph())
        if residual is None:
            return self._conv_forward(input, weight, bias, activation)
        # Anything else (autograd on CPU tensors, a residual that broadcasts, ...): the
        # convolution and its bias by the plain path, then the residual and the activation.
        y = self._conv_forward(input, weight, bias, "identity")
        return _apply_activation(y, residual, activation, owned=True)

    def _folded(self, bn, input):
        """(weight, bias, filter_version) with ``bn`` folded in. Recorded by autograd, or in a
        graph capture: computed from the tensors at every call. Otherwise kept, and made again
        only when one of the tensors it is made from changed: their bytes' fingerprint (one read
        of the weight, as an unfused layer's check), or with freeze=True their identity, address
        and version counter. The number identifies the folded filters to the plan."""
        tensors = _fold_inputs(self, bn)
        recording = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if recording or _route(input, tensors[0], self.bias) == _OPERATOR:
            weight, bias = _fold_batch_norm(self.weight, self.bias, bn)
            return weight, bias, None
        key = (self.freeze, bn.eps, _tensors_key(tensors, self.freeze))
        held = self.__dict__.get("_folded_filters")
        if held is not None and held[0] == key and key[2] is not None:
            return held[1]
        with torch.no_grad():
            weight, bias = _fold_batch_norm(self.weight, self.bias, bn)
        folded = (weight, bias, next(_filter_versions))
        self.__dict__["_folded_filters"] = (key, folded)
        return folded

    def _own_convolution(self):
        """This layer's own convcore.Convolution: its plans (and the filters they prepared) are
        this layer's, not shared with other layers of the same shape."""
        params = (self.stride, self.padding, self.dilation, self.groups)
        own = self.__dict__.get("_convcore_conv")
        if own is None or own[0] != params:
            padding = cast(Tuple[int, int], self.padding)  # a tuple here: the callers check
            own = (params, Convolution(ConvDesc(padding=padding, stride=self.stride,
                                                dilation=self.dilation, groups=self.groups)))
            self.__dict__["_convcore_conv"] = own
        return own[1]

    def _filters(self, weight):
        """The filter_version this call passes: the checked fingerprint by default, the
        version-counter number with freeze=True."""
        if not self.freeze:
            return _FILTERS_CHECKED
        return self._filter_version(weight)

    def _filter_version(self, weight):
        return _frozen_filter_version(self, weight)

    def __getstate__(self):
        # copy.deepcopy and pickle: the layer's plans stay behind (a copy makes its own).
        state = super().__getstate__()
        state.pop("_convcore_conv", None)
        state.pop("_prepared_weight", None)
        state.pop("_folded_filters", None)
        state.pop("_pair_filters", None)
        if isinstance(state.get("_last_algo"), Convolution):
            state["_last_algo"] = state["_last_algo"].last_algo
        return state

    def extra_repr(self) -> str:
        act = self.activation
        return super().extra_repr() + f", algo={self._algo!r}" + (
            f", activation={act!r}" if act != "identity" else "")

    @property
    def last_algo(self) -> Optional[str]:
        """The forward algorithm the last call ran (what "auto" or "find" chose), or None."""
        last = self.__dict__.get("_last_algo")
        return last.last_algo if isinstance(last, Convolution) else last

    def _conv_forward(self, input, weight, bias, activation=None):
        """The convolution with its bias and activation (the layer's own, or ``activation``)."""
        if activation is None:
            activation = self.__dict__.get("_activation", "identity")
            activation_code = self.__dict__.get("_activation_code", 0)
        else:
            activation_code = _api.ACTIVATIONS[activation]
        if _keeps_preactivation(activation, input, weight, bias):
            return _ACTIVATION_FUNCTIONS[activation](self._conv_forward(input, weight, bias, "identity"))
        if self.padding_mode == "zeros" and type(self.padding) is tuple and isinstance(input, Tensor):
            route = _route(input, weight, bias)
            if route == _DIRECT:
                # Inference, the common case, kept short: each microsecond here is paid per layer.
                conv = self._own_convolution()
                y = conv._forward_torch_cpu(input, weight, self._fwd_algo, self._filters(weight),
                                            bias, activation_code)
                if y is not None:
                    self.__dict__["_last_algo"] = conv  # its last_algo, read when asked
                    return y
                if input.dim() == 4:
                    _check_tensors("convcore.torch.Conv2d", input, weight, bias)
                    conv = _conv_for(self.stride, self.padding, self.dilation, self.groups)
                    y = _forward(input, weight, bias, self.stride, self.padding, self.dilation,
                                 self.groups, self._fwd_algo, activation)
                    self.__dict__["_last_algo"] = conv.last_algo
                    return y
            elif route == _FUNCTION and input.dim() == 4:
                conv = self._own_convolution()
                if bias is not None and not bias.is_contiguous():
                    bias = bias.contiguous()
                y = _apply_conv2d(input, weight, bias, conv,
                                  _function_args(self._algo_spec, activation))
                self.__dict__["_last_algo"] = conv
                return y
        padding = self.padding
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = _pair(0)
        y = conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups,
                   algo=self._algo, activation=activation)
        if isinstance(padding, tuple) and not torch.compiler.is_compiling():
            # the forward algorithm that ran (what "auto" or "find" chose), for benchmarks
            self.__dict__["_last_algo"] = _conv_for(self.stride, padding, self.dilation,
                                                    self.groups).last_algo
        return y


def _keeps_preactivation(activation, *tensors):
    """Whether a layer runs its fused SiLU or GELU as PyTorch's activation after the convolution:
    when autograd records the call. The fused op keeps only y, so its backward would run the
    convolution again for the pre-activation that their gradients read; PyTorch's activation
    keeps its input, as the unfused model does. (torch.jit.trace records the fused op whatever
    the grad mode: its graph must not depend on it.)"""
    return (activation in _READS_PREACTIVATION and torch.is_grad_enabled() and not torch.jit.is_tracing()
            and any(isinstance(t, Tensor) and t.requires_grad for t in tensors))


def _prepared_in_graph():
    """The operator's ``prepared`` for a call a graph capture records: whether the graph runs
    without autograd recording. torch.compile and torch.export keep a graph per grad mode;
    torch.jit.trace's graph runs in either, so it transforms filters per call."""
    return not torch.is_grad_enabled() and torch._C._get_tracing_state() is None


def _symbolic_fused_forward(layer, input, residual, activation, bn):
    """Conv2d._fused_forward as one call_method node of the graph torch.fx traces (its
    training-mode branch stays live)."""
    tracer = input.tracer
    layer_node = tracer.create_proxy("get_attr", tracer.path_of_module(layer), (), {})
    args: Tuple[Any, ...] = (layer_node, input, residual, activation)
    if bn is not layer.__dict__.get("_fused_batch_norm"):
        args += (None if bn is None else tracer.create_proxy("get_attr", tracer.path_of_module(bn), (), {}),)
    return tracer.create_proxy("call_method", "_fused_forward", args, {})


def _shares_memory(a, b):
    """Whether CPU or CUDA tensors ``a`` and ``b`` (not a graph's symbolic or fake values) may
    share memory: the same storage (a conservative answer, as the library's overlap check)."""
    if type(a) is not Tensor or type(b) not in _PLAIN_TENSORS or _captured():
        return False
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != 0


class _FusedBatchNorm2d(nn.BatchNorm2d):
    """A BatchNorm2d that convert(fuse=True) fused into the convcore Conv2d before it: that layer
    applies it (folded into its weights in eval mode), so here it passes its input on. It keeps
    its place, parameters and buffers: the state_dict, train()/eval(), .to() and optimizers see
    the model as it was."""

    def forward(self, input: Tensor) -> Tensor:
        return input


class _FusedBatchNorm3d(nn.BatchNorm3d):
    """A BatchNorm3d that convert(fuse=True) fused into the convcore Conv3d before it, as
    _FusedBatchNorm2d."""

    def forward(self, input: Tensor) -> Tensor:
        return input


class _FusedGroupNorm(nn.GroupNorm):
    """A GroupNorm that convert(fuse=True) fused into the convcore Conv1d or Conv3d before it
    (that layer applies it to its output, see _group_norm_forward), as _FusedBatchNorm2d."""

    def forward(self, input: Tensor) -> Tensor:
        return input


_BATCH_NORM_FORWARD = nn.BatchNorm2d.forward  # (_BatchNorm's: every dimension)
_ACTIVATION_FUNCTIONS = {"relu": F.relu, "relu6": F.relu6, "silu": F.silu,
                         "gelu": lambda y, inplace=False: F.gelu(y),  # (no in-place GELU)
                         "gelu_tanh": lambda y, inplace=False: F.gelu(y, approximate="tanh")}


_IN_PLACE_ACTIVATIONS: Dict[str, Callable[[Tensor], Tensor]] = {
    "relu": torch.relu_, "relu6": lambda y: F.hardtanh_(y, 0.0, 6.0),
    "silu": lambda y: F.silu(y, inplace=True), "gelu": lambda y: torch.ops.aten.gelu_(y),
    "gelu_tanh": lambda y: torch.ops.aten.gelu_(y, approximate="tanh")}


def _group_norm_forward(y, gn, activation):
    """act(gn(y)) for the output y of a layer with a fused group norm ``gn``. Where autograd,
    a capture (_captured: graphs, dispatch modes, functorch, the profiler) or a layout other
    than contiguous or channels-last needs it, PyTorch's group_norm and activation. Otherwise y
    is the layer's own new tensor and is normalized in place, in two passes over it for the
    statistics (each channel's mean, then, with y centred on its group's mean, each channel's
    sum of squares: torch's vectorised reductions, which neither make a temporary of y's size
    nor cancel as E[y^2] - E[y]^2 would) and two for y = y * gamma / sqrt(var + eps) + beta,
    then the activation in place. PyTorch's GroupNorm and activation modules each make a new
    tensor of y's size instead, whose first touches (page faults, with glibc's allocator) can
    cost more than their arithmetic."""
    n, c, g = y.shape[0], y.shape[1], gn.num_groups
    channels_last = y.dim() > 2 and not y.is_contiguous() and y.movedim(1, -1).is_contiguous()
    if (_captured() or y.dim() < 3 or y.numel() == 0
            or (torch.is_grad_enabled() and (y.requires_grad or gn.weight is not None and (
                gn.weight.requires_grad or gn.bias.requires_grad)))
            or not (y.is_contiguous() or channels_last)):
        y = F.group_norm(y, g, gn.weight, gn.bias, gn.eps)
        return _apply_activation(y, None, activation)
    # y as N x C x S (contiguous) or N x S x C (channels-last): reductions over S per channel
    rows, along = (y.movedim(1, -1).reshape(n, -1, c), 1) if channels_last else (y.view(n, c, -1), 2)
    per_group = c // g
    count = rows.shape[along] * per_group
    shape = (n, c) + (1,) * (y.dim() - 2)
    mean = rows.mean(along).view(n, g, per_group).mean(-1)  # N x G
    y.sub_(mean.repeat_interleave(per_group, dim=1).view(shape))
    squares = torch.linalg.vector_norm(rows, dim=along).square().view(n, g, per_group).sum(-1)
    scale = torch.rsqrt(squares / count + gn.eps).repeat_interleave(per_group, dim=1)  # N x C
    if gn.weight is not None:
        y.mul_((scale * gn.weight).view(shape)).add_(gn.bias.view((1, c) + shape[2:]))
    else:
        y.mul_(scale.view(shape))
    fn = _IN_PLACE_ACTIVATIONS.get(activation)
    return y if fn is None else fn(y)


def _apply_activation(y, residual, activation, owned=False):
    """act(y + residual) by PyTorch's own ops (the paths that leave the epilogue out). ``owned``:
    y is the layer's own new tensor (its convolution's or batch norm's output, which nothing
    else holds), so the residual and the activation are applied to it in place, as the
    ``inplace=True`` modules that convert() fused do: a new tensor of y's size would cost a fresh
    allocation per layer and step, whose first touches (page faults) cost more than the op."""
    fn = _ACTIVATION_FUNCTIONS.get(activation)
    if residual is not None:
        if owned and residual.shape == y.shape and residual.dtype == y.dtype:
            y = y.add_(residual)
        else:
            y, owned = y + residual, True
    if fn is None:
        return y
    return fn(y, inplace=True) if owned else fn(y)


def _residual_fits(layer, input, residual):
    """Whether the epilogue can add ``residual``: the output's shape, input's dtype and device
    (a residual that broadcasts is added by PyTorch instead)."""
    if not isinstance(residual, Tensor) or residual.dtype != input.dtype or residual.device != input.device:
        return False
    n, _, h, w = input.shape
    r, s = layer.kernel_size
    return tuple(residual.shape) == (
        n, layer.out_channels, _output_size(h, layer.padding[0], r, layer.stride[0], layer.dilation[0]),
        _output_size(w, layer.padding[1], s, layer.stride[1], layer.dilation[1]))


def _fold_batch_norm(weight, bias, bn):
    """(weight, bias) of conv followed by bn in eval mode: w * scale, (b - mean) * scale + beta
    per output channel, scale = gamma / sqrt(running_var + eps)."""
    scale = torch.rsqrt(bn.running_var + bn.eps)
    if bn.weight is not None:
        scale = scale * bn.weight
    shift = -bn.running_mean * scale if bias is None else (bias - bn.running_mean) * scale
    if bn.bias is not None:
        shift = shift + bn.bias
    folded = weight * scale.to(weight.dtype).reshape((-1,) + (1,) * (weight.dim() - 1))
    channels_last = torch.channels_last if weight.dim() == 4 else torch.channels_last_3d
    if weight.is_contiguous(memory_format=channels_last) and not weight.is_contiguous():
        folded = folded.contiguous(memory_format=channels_last)
    return folded, shift.to(weight.dtype).contiguous()


def _fold_inputs(conv, bn):
    """The tensors a folded batch norm is made from: conv's weight and bias, bn's weight, bias,
    running mean and variance, those that are not None. Read from the modules' registries (each
    attribute read through nn.Module.__getattr__ costs more than the rest of the lookup); a name
    that is not there (a parametrization's property, an attribute set some other way) is read as
    an attribute."""
    found = []
    for module, registry, names in ((conv, conv._parameters, ("weight", "bias")),
                                    (bn, bn._parameters, ("weight", "bias")),
                                    (bn, bn._buffers, ("running_mean", "running_var"))):
        for name in names:
            t = registry[name] if name in registry else getattr(module, name)
            if t is not None:
                found.append(t)
    return found


def _tensors_key(tensors, trusted):
    """What identifies the contents of ``tensors``: with trusted (freeze=True), each one's
    identity, address, dtype and version counter; otherwise one fingerprint of their bytes, None
    when one is not a dense CPU tensor (nothing made from them may then be kept)."""
    if trusted:
        key = []
        for t in tensors:
            try:
                version = t._version
            except RuntimeError:
                version = 0  # an inference tensor: trusted, refresh() after writes
            key.append((id(t), t.data_ptr(), t.dtype, t.shape, version))
        return tuple(key)
    if any(not t.is_cpu for t in tensors):
        return None
    # (to_dlpack exports a tensor that requires grad as it is: no detach needed)
    return _api._C.fingerprint_tensors([torch.utils.dlpack.to_dlpack(t) for t in tensors])


def refresh(module: nn.Module) -> nn.Module:
    """Makes every convcore Conv2d, Conv1d and Conv3d in ``module`` transform its filters again
    at its next call.
    Needed only with ``freeze=True``, after changing weights in a way their version counter does
    not see (``weight.data`` writes, in-place changes to tensors made under inference_mode).
    Returns ``module``."""
    for layer in module.modules():
        if isinstance(layer, (Conv2d, _torch_nd.Conv1d, _torch_nd.Conv3d)):
            layer.__dict__.pop("_prepared_weight", None)
            layer.__dict__.pop("_folded_filters", None)
            layer.__dict__.pop("_pair_filters", None)
    return module


def _freeze_arg(freeze):
    if not isinstance(freeze, bool):
        raise BadParamError(f"freeze: expected a bool, got {freeze!r}")
    return freeze


def convert(module: nn.Module, algo: AlgoSpec = "auto", fuse: bool = False,
            freeze: bool = False) -> nn.Module:
    """Every ``torch.nn.Conv2d`` in ``module`` (recursively) replaced by a ``convcore.torch.Conv2d``
    (and every ``nn.Conv1d``, ``nn.Conv3d`` and ``nn.ConvTranspose1d/2d/3d`` by convcore.torch's
    class of that name) that shares its Parameters, buffers, hooks, training mode, device and dtype; like
    ``torch.nn.SyncBatchNorm.convert_sync_batchnorm``, children are replaced in place and the
    (possibly new) root is returned: use the returned module. Modules already converted get
    ``algo``. A subclass of one of those classes is converted when it overrides none of its
    methods but the constructor (torchvision's Conv3DSimple and Conv3DNoTemporal): it becomes an
    instance of a class derived from convcore's and its own, keeping its methods and isinstance.
    A subclass with a forward (or any other method) of its own may compute something else and is
    left as it is.

    Each converted layer's bias runs in convcore's fused epilogue. ``fuse=True`` fuses what
    follows a Conv2d into it, the way inference engines do, while the model still trains as it
    did (see _fuse_sequential and _fuse_graph):
    - a ``BatchNorm2d`` (with running statistics): in eval mode folded into the convolution's
      weights and bias; in training mode run as PyTorch runs it (a Conv3d takes the
      ``BatchNorm3d`` after it in an nn.Sequential so, and nothing else);
    - a residual add (``conv(x) + identity``, e.g. in ResNet's blocks) and an ``nn.ReLU``,
      ``nn.ReLU6`` or ``nn.SiLU`` (or F.relu, F.relu6, F.silu): in convcore's epilogue.
    Inside an nn.Sequential that runs its items in order the Conv2d takes them over (the batch
    norm becomes a _FusedBatchNorm2d that passes its input on, the activation an
    ``nn.Identity``: neither changes the state_dict). Elsewhere the patterns are found in the
    module's own torch.fx graph, and the module keeps its class, children and state_dict, with
    fused forwards guarded per call signature and traced at the first call of each (the section
    "fusion in a module's own graph, guarded" below; docs/torch.md): a call the fusion was not
    made for runs the module's own forward.

    ``freeze=True`` makes every converted Conv2d, Conv1d and Conv3d trust its weights in
    inference instead of checking them at every call (Conv2d's docstring has the contract;
    ``refresh(model)`` after changing weights behind their version counter). The transposed
    layers have no freeze yet: they check their weights at every call. The default is always right."""
    if not isinstance(fuse, bool):
        raise BadParamError(f"fuse: expected a bool, got {fuse!r}")
    freeze = _freeze_arg(freeze)
    module = _convert(module, algo, fuse, freeze)
    return _fuse_graph(module) if fuse else module


def _convert(module, algo, fuse, freeze):
    if isinstance(module, Conv2d):
        module.algo = algo
        module.freeze = freeze
        return module
    if isinstance(module, tuple(_torch_nd.CONVERTED.values())):
        cast(Any, module).algo = algo
        if isinstance(module, (_torch_nd.Conv1d, _torch_nd.Conv3d)):
            module.freeze = freeze
        return module
    cls = _torch_nd.convcore_class(module)
    if cls is not None and issubclass(cls, Conv2d):
        new = _converted(module, algo, cls)
        new.freeze = freeze
        return new
    if cls is not None:
        converted = _torch_nd.converted(module, algo, cls)
        if isinstance(converted, (_torch_nd.Conv1d, _torch_nd.Conv3d)):
            converted.freeze = freeze
        return converted
    for name, child in module.named_children():
        new_child = _convert(child, algo, fuse, freeze)
        if new_child is not child:
            setattr(module, name, new_child)
    if fuse and _plain_sequential(module):
        _fuse_sequential(module)
        module = _pair_sequential(module)
    return module


def _hooked(module):
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or getattr(module, "_backward_pre_hooks", None))


def _foldable(bn, conv):
    """Whether ``bn`` (what follows ``conv``) is a batch norm the convolution may take over."""
    kind = nn.BatchNorm3d if isinstance(conv, _torch_nd.Conv3d) else nn.BatchNorm2d
    return (type(bn) is kind and not _hooked(bn) and bn.num_features == conv.out_channels
            and bn.track_running_stats and bn.running_mean is not None)


def _fuse_sequential(seq):
    """Fuses into each convcore Conv2d of ``seq`` (with nothing fused yet) the BatchNorm2d that
    follows it, then the ReLU / ReLU6 / SiLU / GELU that follows that; into each Conv1d the
    activation that follows it; into each Conv3d the BatchNorm3d that follows it."""
    names = list(seq._modules)
    for i, name in enumerate(names):
        conv = seq._modules[name]
        if isinstance(conv, (_torch_nd.Conv1d, _torch_nd.Conv3d)) and _fuse_group_norm(seq, names, i):
            continue
        if isinstance(conv, _torch_nd.Conv1d) and conv.activation == "identity" and i + 1 < len(names):
            act = seq._modules[names[i + 1]]
            activation = _module_activation(act)
            if activation is not None and not _hooked(act):
                conv.activation = activation
                seq._modules[names[i + 1]] = nn.Identity()
            continue
        if (isinstance(conv, _torch_nd.Conv3d) and "_fused_batch_norm" not in conv.__dict__
                and i + 1 < len(names) and _foldable(seq._modules[names[i + 1]], conv)):
            # a 3-D layer takes its batch norm only (no fused epilogue in 3-D)
            seq._modules[names[i + 1]] = _fused_batch_norm(conv, seq._modules[names[i + 1]])
        if not isinstance(conv, Conv2d) or conv.activation != "identity" or conv._has_fused_batch_norm:
            continue
        j = i + 1
        if j < len(names) and _foldable(seq._modules[names[j]], conv):
            seq._modules[names[j]] = _fused_batch_norm(conv, seq._modules[names[j]])
            j += 1
        if j < len(names):
            act = seq._modules[names[j]]
            activation = _module_activation(act)
            if activation is not None and not _hooked(act):
                conv.activation = activation
                seq._modules[names[j]] = nn.Identity()


def _fused_group_norm(conv, gn):
    """Makes ``conv`` (a convcore Conv1d or Conv3d) apply ``gn`` to its output; returns the
    _FusedGroupNorm that takes gn's place (its parameters, hooks and state_dict entries)."""
    placeholder = _torch_nd.sharing_state(_FusedGroupNorm, gn)
    conv.__dict__["_fused_group_norm"] = placeholder
    return placeholder


def _fuse_group_norm(seq, names, i):
    """Fuses into the convcore Conv1d or Conv3d ``seq[names[i]]`` the nn.GroupNorm over its
    channels that follows it, then the activation after that; whether it did."""
    conv = seq._modules[names[i]]
    if i + 1 >= len(names) or "_fused_group_norm" in conv.__dict__ or "_fused_batch_norm" in conv.__dict__:
        return False
    gn = seq._modules[names[i + 1]]
    if type(gn) is not nn.GroupNorm or _hooked(gn) or gn.num_channels != conv.out_channels:
        return False
    if isinstance(conv, _torch_nd.Conv1d) and conv.activation != "identity":
        return False
    seq._modules[names[i + 1]] = _fused_group_norm(conv, gn)
    if i + 2 < len(names):
        act = seq._modules[names[i + 2]]
        activation = _module_activation(act)
        if activation is not None and not _hooked(act):
            conv.__dict__["_group_norm_activation"] = activation
            seq._modules[names[i + 2]] = nn.Identity()
    return True


def _fused_batch_norm(conv, bn):
    """Makes ``conv`` apply ``bn``; returns the _FusedBatchNorm2d (3-D: _FusedBatchNorm3d) that
    takes bn's place."""
    kind = _FusedBatchNorm3d if isinstance(bn, nn.BatchNorm3d) else _FusedBatchNorm2d
    placeholder = _torch_nd.sharing_state(kind, bn)
    conv.__dict__["_fused_batch_norm"] = placeholder
    conv.__dict__["_has_fused_batch_norm"] = True
    return placeholder


# ---- fusion in torch.fx graphs ---------------------------------------------------------------

def _last_layer(seq):
    """The last module of ``seq`` that computes something (not a _FusedBatchNorm2d or an
    nn.Identity), and its name."""
    for name in reversed(list(seq._modules)):
        m = seq._modules[name]
        if type(m) not in _PASSING_ON:
            return name, m
    return None, None


def _ends_in_open_conv(seq):
    """Whether ``seq`` (an nn.Sequential without hooks) ends in a convcore Conv2d with no
    activation, directly or in a last nn.Sequential (torchvision's Conv2dNormActivation
    without activation): a residual add after it can run in that layer's epilogue."""
    if _hooked(seq) or type(seq) not in _SEQUENTIALS:
        return False
    _, last = _last_layer(seq)
    if isinstance(last, Conv2d):
        return last.activation == "identity" and not _hooked(last)
    return isinstance(last, nn.Sequential) and _ends_in_open_conv(last)


def _run_sequential(seq, input, residual=None, activation=None):
    """An nn.Sequential's items in order, with what convert(fuse=True) fused across them:
    ``residual`` and ``activation`` passed on to the last layer, and each 1x1 -> depthwise pair
    (_PointwiseDepthwise) run as one where the call allows it."""
    pairs = seq.__dict__.get("_pointwise_depthwise")
    last = None if residual is None and activation is None else _last_layer(seq)[0]
    skip_to = None  # the last item of a pair that ran
    for name, m in seq._modules.items():
        if skip_to is not None:
            skip_to = None if name == skip_to else skip_to
            continue
        pair = pairs.get(name) if pairs else None
        if pair is not None and last not in pair.names:
            y = pair.run(input)
            if y is not None:
                input, skip_to = y, pair.names[-1]
                continue
        input = m(input, residual, activation) if name == last else m(input)
    return input


class _ResidualSequential(nn.Sequential):
    """An nn.Sequential that passes ``residual`` and ``activation`` on to its last layer (a
    convcore Conv2d, or another _ResidualSequential): convert(fuse=True) makes one where a
    residual add follows it (MobileNetV2's ``x + self.conv(x)``). Its 1x1 -> depthwise pairs run
    as _PairSequential's. Called with one input it is the nn.Sequential it was."""

    def forward(self, input, residual=None, activation=None):
        if residual is None and activation is None and "_pointwise_depthwise" not in self.__dict__:
            return super().forward(input)
        return _run_sequential(self, input, residual, activation)


class _PairSequential(nn.Sequential):
    """An nn.Sequential whose 1x1 -> depthwise pairs run as one where the call allows it
    (convert(fuse=True) makes one where it finds a pair): the nn.Sequential it was, faster."""

    def forward(self, input):
        return _run_sequential(self, input)


def _residual_sequential(seq):
    """``seq`` as a _ResidualSequential (its last Sequential too), sharing its modules."""
    new = _torch_nd.sharing_state(_ResidualSequential, seq)
    name, last = _last_layer(new)
    if isinstance(last, nn.Sequential):
        new._modules[name] = _residual_sequential(last)
    return new


# ---- the fused 1x1 -> depthwise pair ---------------------------------------------------------

_PASSING_ON = (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm, nn.Identity)  # what a fused layer leaves in its Sequential
_SEQUENTIALS = (nn.Sequential, _ResidualSequential, _PairSequential)  # what fusion may change


def _single_conv(module):
    """(conv, modules) where ``module`` is a convcore Conv2d, or an nn.Sequential of one Conv2d
    followed by what fusion left of its batch norm and activation (torchvision's
    Conv2dNormActivation after convert(fuse=True)); (None, None) otherwise."""
    if isinstance(module, Conv2d):
        return module, [module]
    if not _plain_sequential(module) or not len(module):
        return None, None
    items = list(module.children())
    if not isinstance(items[0], Conv2d) or any(type(m) not in _PASSING_ON for m in items[1:]):
        return None, None
    return items[0], [module] + items


_SEQUENTIAL_FORWARDS = (nn.Sequential.forward, _ResidualSequential.forward, _PairSequential.forward)


def _plain_sequential(module):
    """An nn.Sequential (or a subclass such as Conv2dNormActivation) that runs its items in
    order: its forward is nn.Sequential's, _ResidualSequential's or _PairSequential's."""
    return isinstance(module, nn.Sequential) and type(module).forward in _SEQUENTIAL_FORWARDS


def _is_pointwise(conv):
    return (conv.kernel_size == (1, 1) and conv.stride == (1, 1) and conv.padding == (0, 0)
            and conv.groups == 1 and conv.padding_mode == "zeros")


def _is_depthwise_of(conv, pw):
    return (conv.in_channels == conv.out_channels == conv.groups == pw.out_channels
            and type(conv.padding) is tuple and conv.padding_mode == "zeros")


def _pair_sequential(seq):
    """Finds in ``seq`` each 1x1 Conv2d (alone or in a Conv2dNormActivation) whose next item is a
    depthwise Conv2d on its output (MobileNetV2's and EfficientNet's expansion then depthwise
    layers) and makes ``seq`` a _PairSequential (or keeps it a _ResidualSequential) that runs each
    such pair as one. Returns the Sequential to use (``seq`` itself when it has none)."""
    if type(seq) not in _SEQUENTIALS:  # a subclass keeps its class
        return seq
    names = list(seq._modules)
    pairs = {}
    for i, name in enumerate(names):
        pw, pw_modules = _single_conv(seq._modules[name])
        if pw is None or not _is_pointwise(pw):
            continue
        j = i + 1
        while j < len(names) and type(seq._modules[names[j]]) in _PASSING_ON:
            j += 1
        dw, dw_modules = _single_conv(seq._modules[names[j]]) if j < len(names) else (None, None)
        if dw is not None and _is_depthwise_of(dw, pw) and not any(n in pairs for n in names[i:j + 1]):
            between = [seq._modules[n] for n in names[i + 1:j]]
            pairs[name] = _PointwiseDepthwise(pw, dw, names[i:j + 1], pw_modules + between + dw_modules)
    if not pairs:
        return seq
    new = seq
    if type(seq) is nn.Sequential:
        new = _torch_nd.sharing_state(_PairSequential, seq)
    new.__dict__["_pointwise_depthwise"] = pairs
    return new


_PAIR_DTYPES = (torch.float32, torch.float64)


class _PointwiseDepthwise:
    """A 1x1 Conv2d and the depthwise Conv2d after it, run as one by convcore's fused pair
    (convcoreCreatePointwiseDepthwisePlan: the 1x1's output stays in cache) where the call is
    inference on a channels_last CPU tensor: nothing records autograd, no module of the pair has
    hooks, and batch norms are folded (eval mode). Eagerly it calls the library directly; in a
    graph torch.compile or torch.export traces without autograd, the operator
    ``convcore::pointwise_depthwise``. Otherwise run() returns None and the layers run one by
    one, as they would unfused (torch.jit.trace too). Each layer's weights are checked as the
    layer checks them (freeze)."""

    def __init__(self, pw, dw, names, modules):
        self.pw, self.dw, self.names, self.modules = pw, dw, names, modules
        self._plan = None  # the _PairPlan, made at the first eager call
        # (the two layers' filter versions, the pair's number)
        self._version: Tuple[Any, int] = (None, -1)

    def __getstate__(self):  # copy.deepcopy and pickle: the binding's object stays behind
        state = dict(self.__dict__)
        state["_plan"], state["_version"] = None, (None, -1)
        return state

    def run(self, x):
        """The pair's output for input ``x``, or None where the layers must run one by one."""
        pw, dw = self.pw, self.dw
        if (torch._C._get_tracing_state() is not None or not isinstance(x, Tensor) or x.dim() != 4
                or x.shape[1] != pw.in_channels or not x.is_contiguous(memory_format=torch.channels_last)
                or any(_hooked(m) for m in self.modules) or _global_hooks()
                or not _is_pointwise(pw) or not _is_depthwise_of(dw, pw)):  # (attributes may change)
            return None
        if torch.compiler.is_compiling():
            return self._in_graph(x)
        if (type(x) is not Tensor or not x.is_cpu or x.dtype not in _PAIR_DTYPES
                or _route(x, pw.weight, pw.bias) != _DIRECT or _route(x, dw.weight, dw.bias) != _DIRECT):
            return None
        first, second = _inference_filters(pw, x), _inference_filters(dw, x)
        if first is None or second is None:
            return None
        versions = (first[2], second[2])
        if self._version[0] != versions:
            self._version = (versions, next(_filter_versions))
        geometry = (dw.stride, dw.padding, dw.dilation, dw.groups)
        if self._plan is None or self._plan.geometry != geometry:
            self._plan = _PairPlan(*geometry)
        y = self._plan.forward(x, (first[0], first[1], pw.activation), (second[0], second[1], dw.activation),
                               self._version[1])
        if y is not None:
            pw.__dict__["_last_algo"] = dw.__dict__["_last_algo"] = "pointwise_depthwise"
        return y

    def _in_graph(self, x):
        """The operator call in a graph traced without autograd (its weights are not trained:
        the operator prepares their filters once), with batch norms folded by torch ops
        (inductor's freezing makes them constants); None with autograd."""
        if torch.is_grad_enabled():
            return None
        args = []
        for layer in (self.pw, self.dw):
            bn = layer.__dict__.get("_fused_batch_norm")
            if bn is not None and (bn.training or bn.running_mean is None):
                return None
            weight, bias = (layer.weight, layer.bias) if bn is None else _fold_batch_norm(layer.weight, layer.bias, bn)
            args.append((weight, bias, layer.activation))
        dw = self.dw
        return torch.ops.convcore.pointwise_depthwise(
            x, args[0][0], args[0][1], args[0][2], args[1][0], args[1][1], args[1][2],
            list(dw.stride), list(dw.padding), list(dw.dilation))


def _global_hooks():
    from torch.nn.modules import module as m
    return bool(m._global_forward_hooks or m._global_forward_pre_hooks)


def _inference_filters(layer, x):
    """(weight, bias, version) with which ``layer`` runs in inference, its batch norm folded in;
    version changes whenever their contents do (as the layer checks them: fingerprints, or with
    freeze=True identity and version counters). None where the layer would not run them so (a
    batch norm in training mode) or cannot tell a change (a tensor not on the CPU)."""
    bn = layer.__dict__.get("_fused_batch_norm")
    if bn is not None:
        if bn.training or bn.running_mean is None:
            return None
        weight, bias, version = layer._folded(bn, x)
        return None if version is None else (weight, bias, version)
    weight, bias = layer.weight, layer.bias
    key = _tensors_key([weight] if bias is None else [weight, bias], layer.freeze)
    if key is None:
        return None
    held = layer.__dict__.get("_pair_filters")
    if held is None or held[0] != key:
        held = layer.__dict__["_pair_filters"] = (key, next(_filter_versions))
    return weight, bias, held[1]


# ---- fusion in a module's own graph, guarded ---------------------------------------------------
#
# Outside nn.Sequentials, convert(fuse=True) finds what follows a Conv2d in a module's forward by
# tracing it with torch.fx. A trace is one path through the forward's Python code, taken with the
# arguments it was traced with, so it stands for a call only when that call would take the same
# path. As torch.compile's guards do, a module's fused forwards are kept per call signature
# (_GraphFusion.key): which arguments are tensors, None or which constants, which tensor arguments
# are the same object, the module's training mode and its plain attributes (flags its forward may
# read). Each is traced at the first call of its signature, with the arguments that are not
# tensors as constants, and a call whose signature has no fused forward runs the module's own.
# A trace that asks what a traced value cannot answer as the tensor would (isinstance, bool, len)
# or changes the module's attributes fails, and its signature runs unfused. In the graph each
# fused chain is one call of _conv_chain (or _sequential_chain), which runs it fused only while
# its modules are still those the fusion was made from and have no hooks, and as written
# otherwise. The modules themselves are not changed: the module's own forward is always right.

_MAX_SIGNATURES = 8  # fused forwards kept per module (torch._dynamo's cache_size_limit)
_CONSTANTS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.memory_format)
_TENSOR, _UNTRACEABLE, _NOT_TRACED = "tensor", object(), object()
_ONE_TENSOR = (_TENSOR,)


def _argument_kind(value):
    """How a call's argument enters a trace: _TENSOR (a placeholder), list or tuple (a placeholder
    of tensors), (type, value) for a constant (the trace specialises on it), or _UNTRACEABLE."""
    if isinstance(value, (Tensor, torch.fx.Proxy)):
        return _TENSOR
    kind = type(value)
    if kind in _CONSTANTS:
        return kind, value
    if kind is tuple and all(type(v) in _CONSTANTS for v in value):
        return kind, value
    if (kind is list or kind is tuple) and all(isinstance(v, Tensor) for v in value):
        return kind
    return _UNTRACEABLE


def _plain_attributes(module):
    """The names of ``module``'s own attributes that hold constants (flags its forward may read)."""
    kinds = {name: _argument_kind(value) for name, value in vars(module).items()
             if name != "training" and not name.startswith("_tensor_constant")}
    return tuple(sorted(name for name, kind in kinds.items() if kind is not _UNTRACEABLE and kind != _TENSOR))


class _GraphFusion:
    """The fused forwards of one module (see above): signature key -> the graph's forward
    function (called with the module as self and the arguments by position), or None for a
    signature that runs unfused."""

    def __init__(self, module, base):
        parameters = list(inspect.signature(base.forward).parameters.values())[1:]
        self.names = tuple(p.name for p in parameters)
        self.defaults = tuple(p.default for p in parameters)
        self.positions = {name: i for i, name in enumerate(self.names)}
        self.attributes = _plain_attributes(module)
        self.attribute_values = operator.itemgetter(*self.attributes) if self.attributes else None
        self.required = sum(d is inspect.Parameter.empty for d in self.defaults)
        self.forwards: Dict[Any, Any] = {}
        self.graphs: Dict[Any, torch.fx.Graph] = {}

    def __getstate__(self):  # pickle: the generated functions are traced again at first call
        state = dict(self.__dict__)
        state["forwards"], state["graphs"] = {}, {}
        return state

    def __deepcopy__(self, memo):  # the forwards take the module as self: a copy shares them
        new = copy.copy(self)
        new.forwards, new.graphs = dict(self.forwards), dict(self.graphs)
        return new

    def key(self, module, args, kwargs):
        """The call's signature, or None where no trace can stand for it."""
        if not kwargs and len(args) == 1 and isinstance(args[0], Tensor) and self.required <= 1:
            kinds: Tuple[Any, ...] = _ONE_TENSOR  # the common call, quickly
        else:
            kinds = self._kinds(args, kwargs)
            if kinds is None:
                return None
        try:
            if not self.attributes:
                attributes: Any = ()
            elif torch.compiler.is_compiling():  # (torch._dynamo traces no itemgetter)
                attributes = tuple(module.__dict__[name] for name in self.attributes)
                attributes = attributes[0] if len(attributes) == 1 else attributes  # as itemgetter's
            else:
                attributes = cast(Callable[[Dict[str, Any]], Any], self.attribute_values)(module.__dict__)
        except KeyError:
            return None
        return module.training, attributes, kinds

    def _kinds(self, args, kwargs):
        if not self.required <= len(args) + len(kwargs) and len(args) <= len(self.names):
            return None
        kinds = tuple(map(_argument_kind, args))
        if kwargs:
            if any(name not in self.positions or self.positions[name] < len(args) for name in kwargs):
                return None
            if any(self.names[i] not in kwargs for i in range(len(args), self.required)):
                return None
            kinds += tuple((name, _argument_kind(value)) for name, value in sorted(kwargs.items()))
        if any(k is _UNTRACEABLE for k in kinds[:len(args)]) or any(k[1] is _UNTRACEABLE for k in kinds[len(args):]):
            return None
        tensors = [a for a in itertools.chain(args, kwargs.values()) if isinstance(a, Tensor)]
        if len(tensors) > 1 and len({id(t) for t in tensors}) < len(tensors):
            return None  # one tensor passed twice: a trace has a placeholder for each
        return kinds

    def arguments(self, args, kwargs):
        """The call's arguments by position (a trace's placeholders keep the order, not the
        names, of the forward's parameters)."""
        if not kwargs:
            return args
        values = list(args) + list(self.defaults[len(args):])
        for name, value in kwargs.items():
            values[self.positions[name]] = value
        return values

    def forward_for(self, module, args, kwargs):
        """The fused forward for this call, or None."""
        key = self.key(module, args, kwargs)
        if key is None:
            return None
        forward = self.forwards.get(key, _NOT_TRACED)
        if forward is _NOT_TRACED:
            if (len(self.forwards) >= _MAX_SIGNATURES or _captured()
                    or any(isinstance(a, torch.fx.Proxy) for a in itertools.chain(args, kwargs.values()))):
                return None  # traced at a later eager call, not inside another capture
            forward, graph = _fused_forward_of(module, self.arguments(args, kwargs), self)
            self.forwards[key] = forward
            if graph is not None:
                self.graphs[key] = graph
        return forward


def _fused_forward_of(module, values, fusion):
    """(forward, graph): the forward function of ``module``'s graph traced for a call with the
    arguments ``values`` (by position; those not given take their defaults), its convolutions
    fused; (None, None) where it does not trace or fuses nothing."""
    concrete = {}
    for i, (name, default) in enumerate(zip(fusion.names, fusion.defaults)):
        value = values[i] if i < len(values) else default
        kind = _argument_kind(value)
        if kind != _TENSOR and kind not in (list, tuple):
            concrete[name] = value
    graph = _trace(module, concrete)
    if graph is None or not _fuse_in_graph(module, graph):
        return None, None
    graph.lint()
    return type(torch.fx.GraphModule(module, graph, class_name=type(module).__name__)).forward, graph


class _FusionTracer(torch.fx.Tracer):
    """Traces one module's own forward: each submodule call is one node (their own control flow,
    e.g. dropout's training flag, stays live), except the fused batch norms, which pass their
    input on."""

    def is_leaf_module(self, m, qualname):
        return type(m) not in (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm)


_builtin_isinstance = builtins.isinstance
_TORCH_FILES = os.path.dirname(torch.__file__) + os.sep  # the tracer's own isinstance calls
_trace_lock = threading.RLock()


def _isinstance_while_tracing(obj, classinfo):
    """builtins.isinstance during _trace: a forward that asks it of a traced value (a Proxy, not
    a tensor) would take another branch than the call does, so the trace stops there."""
    if (_builtin_isinstance(obj, torch.fx.Proxy)
            and not sys._getframe(1).f_code.co_filename.startswith(_TORCH_FILES)):
        raise torch.fx.proxy.TraceError(f"isinstance() of the traced value {obj}")
    return _builtin_isinstance(obj, classinfo)


_torch_is_tensor = torch.is_tensor


def _is_tensor_while_tracing(obj):
    """torch.is_tensor during _trace, as _isinstance_while_tracing."""
    if _builtin_isinstance(obj, torch.fx.Proxy):
        raise torch.fx.proxy.TraceError(f"torch.is_tensor() of the traced value {obj}")
    return _torch_is_tensor(obj)


def _in_place_operator(op):
    def method(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})
    return method


# ``y += r`` on a traced value: recorded as operator.iadd (torch.fx records y + r, which would
# leave alone a tensor the call changes in place, and promote the dtype where the call keeps it)
_IN_PLACE_OPERATORS = {f"__{name}__": _in_place_operator(getattr(operator, name)) for name in (
    "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior", "ixor",
    "ilshift", "irshift")}


def _attribute_state(module):
    return {name: (id(value), len(value) if isinstance(value, (list, dict, set)) else None)
            for name, value in vars(module).items() if not name.startswith("_tensor_constant")}


def _trace(module, concrete):
    """module's own graph (_FusionTracer) for a call with the arguments in ``concrete`` as
    constants, or None where it does not trace or the trace changed the module's attributes."""
    before = _attribute_state(module)
    with _trace_lock:
        builtins.isinstance, torch.is_tensor = _isinstance_while_tracing, cast(Any, _is_tensor_while_tracing)
        for name, method in _IN_PLACE_OPERATORS.items():
            setattr(torch.fx.Proxy, name, method)
        try:
            tracer = _FusionTracer()
            if hasattr(type(module), "_unfused_forward"):  # a guarded module: its own forward
                tracer.traced_func_name = "_unfused_forward"
            graph = tracer.trace(module, concrete_args=concrete or None)
        except Exception:  # noqa: BLE001 - whatever stops symbolic tracing: nothing fused here
            return None
        finally:
            builtins.isinstance, torch.is_tensor = _builtin_isinstance, _torch_is_tensor
            for name in _IN_PLACE_OPERATORS:
                delattr(torch.fx.Proxy, name)
    return graph if _attribute_state(module) == before else None


_ADDS = {operator.add: "add", operator.iadd: "iadd", torch.add: "add"}
_ACTIVATION_CALLS = {F.relu: "relu", torch.relu: "relu", torch.relu_: "relu", F.relu6: "relu6", F.silu: "silu"}


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _activation_node(node, modules):
    """The epilogue activation ``node`` computes of its one input, or None."""
    if node is None:
        return None
    if node.op == "call_module":
        m = modules.get(node.target)
        return None if m is None or _hooked(m) or node.kwargs or len(node.args) != 1 else _module_activation(m)
    if node.op == "call_function" and node.target in _ACTIVATION_CALLS and len(node.args) == 1:
        return _ACTIVATION_CALLS[node.target] if set(node.kwargs) <= {"inplace"} else None
    if node.op == "call_function" and node.target is F.gelu and len(node.args) == 1:
        kwargs = dict(node.kwargs)
        approximate = kwargs.pop("approximate", "none")
        return None if kwargs else _GELU_ACTIVATIONS.get(approximate)
    if node.op == "call_method" and node.target in ("relu", "relu_") and len(node.args) == 1 and not node.kwargs:
        return "relu"
    return None


def _residual_of(node, previous):
    """The other operand when ``node`` is ``previous + other``, ``other + previous`` or
    ``previous += other`` of two values, else None."""
    if (node is None or node.op != "call_function" or node.target not in _ADDS
            or len(node.args) != 2 or node.kwargs):
        return None
    a, b = node.args
    other = b if a is previous else a if b is previous and node.target is not operator.iadd else None
    return other if isinstance(other, torch.fx.Node) and other is not previous else None


def _activation_ok(act, activation):
    return act is None or (not _hooked(act) and _module_activation(act) == activation)


def _run_unfused(y, act, residual, activation, add):
    """The rest of a chain as the module wrote it: ``y + residual`` (or ``y += residual``),
    then the activation (its module, or PyTorch's function)."""
    if add == "iadd":
        y += residual
    elif add == "add":
        y = y + residual
    if activation != "identity":
        y = act(y) if act is not None else _ACTIVATION_FUNCTIONS[activation](y)
    return y


def _conv_chain(conv, bn, act, x, residual, activation, add):
    """``act(bn(conv(x)) + residual)`` where a fused module's graph had ``conv``, its batch norm
    ``bn`` (or None), the add (``add``: "add" or "iadd", None without a residual) and the
    activation (``act``: its module, or None for PyTorch's function): one fused call
    (Conv2d._fused_forward) while they are what the fusion was made from (a convcore Conv2d
    with no activation of its own, a batch norm it may fold, the same activation) and nothing
    hooks them; otherwise the chain as written."""
    if (isinstance(conv, Conv2d) and conv.activation == "identity" and not conv._has_fused_batch_norm
            and not _hooked(conv) and (bn is None or _foldable(bn, conv)) and _activation_ok(act, activation)
            and (residual is None or isinstance(residual, (Tensor, torch.fx.Proxy))) and not _global_hooks()):
        return conv._fused_forward(x, residual, activation, bn)
    y = conv(x)
    return _run_unfused(y if bn is None else bn(y), act, residual, activation, add)


def _sequential_chain(seq, act, x, residual, activation, add):
    """``act(seq(x) + residual)`` where ``seq`` ends in a Conv2d with no activation: the residual
    and activation passed on to that layer (_ResidualSequential) while nothing hooks them,
    otherwise as written."""
    if (type(seq) is _ResidualSequential and _ends_in_open_conv(seq) and _activation_ok(act, activation)
            and isinstance(residual, (Tensor, torch.fx.Proxy)) and not _global_hooks()):
        return seq(x, residual, None if activation == "identity" else activation)
    return _run_unfused(seq(x), act, residual, activation, add)


def _fuse_in_graph(module, graph):
    """Rewrites ``graph`` (module's own, _trace's) so that each convcore Conv2d called once with
    one argument and followed by a batch norm, a residual add and an activation (any of them),
    and each nn.Sequential that ends in such a layer and is followed by a residual add, is one
    _conv_chain / _sequential_chain call. Returns whether it rewrote anything."""
    modules = dict(module.named_modules())
    calls = collections.Counter(n.target for n in graph.nodes if n.op == "call_module")
    fused_any = False
    for node in list(graph.nodes):
        target = modules.get(node.target) if node.op == "call_module" else None
        if target is None or calls[node.target] != 1 or len(node.args) != 1 or node.kwargs:
            continue
        if isinstance(target, nn.Sequential):
            if _ends_in_open_conv(target):
                fused_any |= _fuse_sequential_call(graph, node, module, modules)
            continue
        if (not isinstance(target, Conv2d) or target.activation != "identity"
                or target._has_fused_batch_norm):
            continue
        chain, bn = [node], None
        following = _only_user(node)
        if (following is not None and following.op == "call_module" and calls[following.target] == 1
                and len(following.args) == 1 and not following.kwargs
                and _foldable(modules.get(following.target), target)):
            bn = following
            chain.append(following)
            following = _only_user(following)
        residual = _residual_of(following, chain[-1])
        if residual is node.args[0]:
            residual = None  # conv(x) + x: the library reads no input twice; PyTorch adds it
        add = None
        if residual is not None:
            add = _ADDS[following.target]
            chain.append(following)
            following = _only_user(following)
        activation = _activation_node(following, modules)
        if activation is not None:
            chain.append(following)
        if len(chain) == 1:
            continue
        with graph.inserting_before(chain[-1]):  # where every operand exists
            refs = [None if n is None else graph.get_attr(n.target) for n in
                    (node, bn, following if activation is not None and following.op == "call_module" else None)]
            fused = graph.call_function(_conv_chain, (*refs, node.args[0], residual, activation or "identity", add))
        chain[-1].replace_all_uses_with(fused)
        for n in reversed(chain):
            graph.erase_node(n)
        fused_any = True
    return fused_any


def _fuse_sequential_call(graph, node, module, modules):
    """``seq(x) + residual`` (then an activation) where node calls an nn.Sequential that ends in
    an open Conv2d: one _sequential_chain call, the Sequential a _ResidualSequential (which,
    called with one input, is the nn.Sequential it was). Returns whether it fused."""
    add = _only_user(node)
    residual = _residual_of(add, node)
    if residual is None:
        return False
    chain = [node, add]
    following = _only_user(add)
    activation = _activation_node(following, modules)
    if activation is not None:
        chain.append(following)
    parent, _, name = node.target.rpartition(".")
    parent = modules[parent] if parent else module
    if type(parent._modules[name]) is not _ResidualSequential:
        parent._modules[name] = _residual_sequential(parent._modules[name])
    with graph.inserting_before(chain[-1]):
        act = graph.get_attr(following.target) if activation is not None and following.op == "call_module" else None
        fused = graph.call_function(_sequential_chain, (graph.get_attr(node.target), act, node.args[0], residual,
                                                        activation or "identity", _ADDS[add.target]))
    chain[-1].replace_all_uses_with(fused)
    for n in reversed(chain):
        graph.erase_node(n)
    return True


def _guarded_forward(self, *args, **kwargs):
    """The forward of a module with fused graphs: the one traced for this call's signature,
    else the module's own."""
    fusion = self.__dict__.get("_convcore_fusion")
    forward = None if fusion is None else fusion.forward_for(self, args, kwargs)
    if forward is not None:
        return forward(self, *fusion.arguments(args, kwargs))
    return type(self)._unfused_forward(self, *args, **kwargs)


@functools.lru_cache(maxsize=None)
def _guarded_class(base):
    """``base`` with _guarded_forward: the class a module with fused graphs takes (its own
    methods, isinstance, name and state_dict stay)."""

    def __reduce_ex__(self, protocol):  # pickle finds `base` by name: rebuild the guarded class
        return _rebuild_guarded, (base,), self.__getstate__()

    def __prepare_scriptable__(self):  # TorchScript compiles the module's own forward
        return _torch_nd.sharing_state(base, self)

    @functools.wraps(base.forward)  # its signature: what torch.fx, jit.trace and export read
    def forward(self, *args, **kwargs):
        return _guarded_forward(self, *args, **kwargs)

    return type(base.__name__, (base,), {
        "__module__": base.__module__, "__qualname__": base.__qualname__, "forward": forward,
        "_unfused_forward": base.forward, "__reduce_ex__": __reduce_ex__,
        "__prepare_scriptable__": __prepare_scriptable__})


def _rebuild_guarded(base):
    cls = _guarded_class(base)
    return cls.__new__(cls)


def _fused_graphs(module: nn.Module) -> Dict[str, List[torch.fx.Graph]]:
    """The graphs of each module that convert(fuse=True) fused outside nn.Sequentials (by its
    qualified name; one graph per call signature traced so far), for inspection and tests."""
    found = {}
    for name, m in module.named_modules():
        fusion = m.__dict__.get("_convcore_fusion")
        if fusion is not None:
            found[name] = list(fusion.graphs.values())
    return found


def _traceable_forward(base):
    """Whether ``base.forward`` takes its arguments by position or name only (no *args,
    **kwargs or keyword-only parameters): what _GraphFusion maps a call's arguments to."""
    try:
        parameters = list(inspect.signature(base.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(parameters) and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in parameters)


def _fuse_graph(module):
    """convert(fuse=True)'s fusion outside nn.Sequentials, from the innermost modules out: a
    module whose call with its required arguments (tensors, the others left to their defaults)
    in its current mode fuses something in its graph (_fuse_in_graph) gets the fused forwards,
    guarded (_GraphFusion, _guarded_class); other calls are traced at their first call."""
    for child in module.children():
        _fuse_graph(child)
    if isinstance(module, torch.fx.GraphModule):  # its graph is its forward: fused as it is
        if _fuse_in_graph(module, module.graph):
            module.graph.lint()
            module.recompile()
        return module
    if (isinstance(module, (nn.Sequential, Conv2d)) or "_convcore_fusion" in module.__dict__
            or not _traceable_forward(type(module)) or not any(
                isinstance(c, Conv2d) or (isinstance(c, nn.Sequential) and _ends_in_open_conv(c))
                for c in module.children())):
        return module
    base = type(module)
    fusion = _GraphFusion(module, base)
    required = tuple(torch.empty(0) for _ in range(fusion.required))
    key = fusion.key(module, required, {})
    forward, graph = (None, None) if key is None else _fused_forward_of(module, required, fusion)
    if forward is None:
        return module
    fusion.forwards[key], fusion.graphs[key] = forward, cast(torch.fx.Graph, graph)
    module.__dict__["_convcore_fusion"] = fusion
    module.__class__ = _guarded_class(cast(Any, base))
    return module


def _converted(conv, algo, cls):
    new = _torch_nd.sharing_state(cls, conv)  # nothing is allocated, nothing is copied
    new.algo = algo
    new.activation = "identity"
    new._has_fused_batch_norm = False
    return new


# The 1-D and transposed convolutions (they build on this module's conv2d and operators).
from . import _torch_nd  # noqa: E402
from ._torch_nd import (Conv1d, Conv3d, ConvTranspose1d, ConvTranspose2d,  # noqa: E402
                        ConvTranspose3d, conv1d, conv3d, conv_transpose1d, conv_transpose2d,
                        conv_transpose3d)

_torch_nd.CONVERTED[nn.Conv2d] = Conv2d
