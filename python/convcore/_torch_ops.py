"""convcore.torch's 2-D convolution as PyTorch operators: the custom operators
``convcore::conv2d`` and its backward passes ``convcore::conv2d_backward_data``,
``convcore::conv2d_backward_filter`` and ``convcore::conv2d_backward_bias`` (their fake kernels
let torch.compile and torch.export trace them), the one autograd formula of
y = act(conv(x, w) + bias + residual) that both the operator's autograd and the eager
_Conv2dFunction run, and conv2d with its routes (convcore called directly in inference,
_Conv2dFunction for eager training on CPU tensors, the operator for everything else)."""

import functools
import itertools
from typing import List, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from . import _convcore as _C
from ._api import ConvDesc, Convolution, _padding_string
from ._args import ACTIVATIONS
from ._dlpack import _torch_memory_format
from ._enums import _enum_algo_id
from ._errors import BadParamError, NotSupportedError
from ._shapes import output_size
from ._torch_args import (_READS_PREACTIVATION, AlgoSpec, IntOrPair, _activation_name, _algo_spec,
                          _check_residual, _check_tensors, _pass_enums, _split_algo)


_FILTERS_CHECKED = _C.FILTERS_CHECKED


@functools.lru_cache(maxsize=512)
def _convolution(stride, padding, dilation, groups):
    # A Convolution may be shared by threads; caching keeps its per-thread workspace.
    return Convolution(ConvDesc(padding=padding, stride=stride, dilation=dilation, groups=groups))


def _conv_for(stride, padding, dilation, groups):
    return _convolution(tuple(stride), tuple(padding), tuple(dilation), int(groups))


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


# ---- the custom operators --------------------------------------------------------------------------

def _conv2d_impl(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: List[int],
               padding: List[int], dilation: List[int], groups: int, algo: str,
               activation: str = "identity", residual: Optional[Tensor] = None,
               prepared: bool = False) -> Tensor:
    """y = act(conv(x, w) + bias + residual), computed by convcore's forward with algorithm
    ``algo`` and its fused epilogue (``activation``: one of ACTIVATIONS;
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
    y = conv._forward_torch_cpu(x, w, fwd_algo, _FILTERS_CHECKED if prepared else _C.FILTERS_PER_CALL,
                                bias, ACTIVATIONS.get(activation, -1), residual) \
        if activation in ACTIVATIONS else None
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


@_conv2d_op.register_fake
def _conv2d_fake(x, w, bias, stride, padding, dilation, groups, algo, activation="identity",
                 residual=None, prepared=False):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    torch._check(cg * groups == c, lambda: f"convcore::conv2d: input has {c} channels but weight "
                                           f"expects {cg} x {groups} groups")
    p = output_size(h, padding[0], r, stride[0], dilation[0])
    q = output_size(wd, padding[1], s, stride[1], dilation[1])
    if residual is not None:
        torch._check(tuple(residual.shape) == (n, k, p, q), lambda: (
            f"convcore::conv2d: residual has shape {tuple(residual.shape)}, the output "
            f"{(n, k, p, q)}"))
    return torch.empty((n, k, p, q), dtype=x.dtype, device=x.device, memory_format=_torch_memory_format(x))


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


# ---- autograd: one formula, run by the operator and by _Conv2dFunction -----------------------------

def _activation_backward(activation, dy, a):
    """dy * act'(a): the gradient with respect to the pre-activation conv(x, w) + bias (+ residual),
    given the gradient dy of the output, by PyTorch's ops. ``a``: the output y for ReLU and ReLU6
    (their derivative is the same function of it), the pre-activation for SiLU and GELU, unused
    for the identity."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(dy, a, 0.0)  # y > 0 exactly where the input was
    if activation == "relu6":
        return torch.ops.aten.hardtanh_backward(dy, a, 0.0, 6.0)  # y in (0, 6): the same set
    if activation == "silu":
        return torch.ops.aten.silu_backward(dy, a)
    if activation in ("gelu", "gelu_tanh"):
        return torch.ops.aten.gelu_backward(dy, a, approximate="none" if activation == "gelu" else "tanh")
    return dy


def _epilogue_backward_cpu(activation, dy, a, with_bias):
    """(dv, db) of CPU tensors: dv = dy * act'(a), the gradient of the pre-activation
    conv(x, w) + bias (+ residual), and the bias's gradient (None unless ``with_bias``), in one
    pass over dy (convcoreActivationBackwardBias). ``a``: the output y for relu and relu6, the
    pre-activation for silu and gelu, unused for identity (dv is then dy itself)."""
    if activation in _READS_PREACTIVATION:
        # PyTorch's vectorised exp and erf run SiLU's and GELU's derivatives (convcore's are
        # scalar); then the bias's gradient alone, from it
        dy, activation = _activation_backward(activation, dy, a), "identity"
    identity = activation == "identity"
    if identity and not with_bias:
        return dy, None
    to_dlpack = torch.utils.dlpack.to_dlpack
    dv = dy if identity else torch.empty_like(dy)
    db = dy.new_empty(dy.shape[1]) if with_bias else None
    try:
        dy_c, a_c = to_dlpack(dy), to_dlpack(dy if identity else a)
    except RuntimeError:  # e.g. the negative bit: PyTorch's own ops
        dv = _activation_backward(activation, dy, a)
        return dv, (dv.sum((0, 2, 3)) if with_bias else None)
    _C.activation_backward_capsules(ACTIVATIONS[activation], a_c, dy_c, to_dlpack(dv),
                                    None if db is None else to_dlpack(db))
    return dv, db


_BACKWARD_DATA, _BACKWARD_FILTER = getattr(_C, "BACKWARD_DATA", 1), getattr(_C, "BACKWARD_FILTER", 2)


def _conv2d_gradients(passes, ctx, needs, dy, x, w, bias, y, residual, activation):
    """The autograd formula of y = act(conv(x, w) + bias + residual), the one that both the
    operator's autograd (_conv2d_backward) and _Conv2dFunction run: (dx, dw, db, dv) for the
    gradient dy of y, where dv = dy * act'(.) is the gradient of the pre-activation (and the
    residual's). ``needs``: whether dx, dw and db are wanted (those that are not are None).
    ``passes`` runs the passes: _OperatorPasses (convcore's operators, which a graph capture
    records) or _DirectPasses (the CPU calls of ctx's Convolution); ``ctx`` holds what they need.
    ``y``: the output, saved for ReLU and ReLU6 (their derivative reads it); SiLU's and GELU's
    read the pre-activation, computed again here from x, w, bias and the residual."""
    a = y
    if activation in _READS_PREACTIVATION:
        a = passes.preactivation(ctx, x, w, bias, residual)
    dv, db = passes.epilogue_backward(activation, dy, a, needs[2])
    x_shape, w_shape = ctx.shapes
    dx = passes.backward_data(ctx, dv, w, x_shape) if needs[0] else None
    dw = passes.backward_filter(ctx, x, dv, w_shape) if needs[1] else None
    return dx, dw, db, dv


class _OperatorPasses:
    """_conv2d_gradients's passes for the operator's autograd: convcore's backward operators, with
    the operator's arguments (ctx.params: stride, padding, dilation, groups, algo)."""

    @staticmethod
    def preactivation(ctx, x, w, bias, residual):
        return torch.ops.convcore.conv2d(x, w, bias, *ctx.params, "identity", residual)

    @staticmethod
    def epilogue_backward(activation, dy, a, with_bias):
        dv = _activation_backward(activation, dy, a)
        return dv, (torch.ops.convcore.conv2d_backward_bias(dv) if with_bias else None)

    @staticmethod
    def backward_data(ctx, dv, w, x_shape):
        return torch.ops.convcore.conv2d_backward_data(dv, w, x_shape, *ctx.params)

    @staticmethod
    def backward_filter(ctx, x, dv, w_shape):
        return torch.ops.convcore.conv2d_backward_filter(x, dv, w_shape, *ctx.params)


class _DirectPasses:
    """_conv2d_gradients's passes for _Conv2dFunction: the CPU calls of its Convolution
    (ctx.conv), with the algorithms of ctx.args (_function_args)."""

    @staticmethod
    def preactivation(ctx, x, w, bias, residual):
        return ctx.conv.forward(x.detach(), w.detach(), algo=ctx.args[1],
                                bias=None if bias is None else bias.detach())

    epilogue_backward = staticmethod(_epilogue_backward_cpu)

    @staticmethod
    def backward_data(ctx, dv, w, x_shape):
        return ctx.conv._backward_torch_cpu(_BACKWARD_DATA, dv, w, x_shape, ctx.args[4])

    @staticmethod
    def backward_filter(ctx, x, dv, w_shape):
        return ctx.conv._backward_torch_cpu(_BACKWARD_FILTER, x, dv, w_shape, ctx.args[5])


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


def _conv2d_backward(ctx, dy):
    """The operator's autograd: _conv2d_gradients by convcore's operators."""
    x, w, bias, y, residual = ctx.saved_tensors
    needs = ctx.needs_input_grad
    dx, dw, db, dv = _conv2d_gradients(_OperatorPasses, ctx, (needs[0], needs[1], ctx.has_bias and needs[2]),
                                       dy, x, w, bias, y, residual, ctx.activation)
    return dx, dw, db, None, None, None, None, None, None, dv if ctx.has_residual and needs[9] else None, None


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


@functools.lru_cache(maxsize=256)
def _function_args(spec, activation):
    """What _Conv2dFunction needs of the op's ``algo`` string and the activation name:
    (spec, forward algorithm name, activation, its code, backward data and backward filter
    algorithm ids)."""
    fwd, data, filt = _split_algo(spec)
    enums = _pass_enums()
    return (spec, fwd, activation, ACTIVATIONS[activation],
            _enum_algo_id(data, enums[1]) if enums[1] else _C.ALGO_AUTO,
            _enum_algo_id(filt, enums[2]) if enums[2] else _C.ALGO_AUTO)


class _Conv2dFunction(torch.autograd.Function):
    """Eager autograd of y = act(conv(x, w) + bias) on CPU tensors: the operator's formula
    (_conv2d_gradients), calling convcore directly (_DirectPasses). ``conv`` is the
    convcore.Convolution whose plans run the three passes (a Conv2d's own); ``args`` is
    _function_args(spec, activation)."""

    @staticmethod
    def forward(ctx, x, w, bias, conv, args):
        _, fwd_algo, activation, activation_code, _, _ = args
        # DLPack's export (torch.utils.dlpack.to_dlpack) reads tensors that require grad as they
        # are: no detach needed on the short path.
        y = conv._forward_torch_cpu(x, w, fwd_algo, _C.FILTERS_PER_CALL, bias, activation_code)
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
        if not dy.is_contiguous() and not dy.is_contiguous(memory_format=torch.channels_last):
            # e.g. y.sum()'s gradient, expanded with stride 0: laid out as x (dx follows dy)
            dy = dy.contiguous(memory_format=ctx.memory_format or torch.contiguous_format)
        dx, dw, db, _ = _conv2d_gradients(_DirectPasses, ctx, ctx.needs_input_grad, dy, x, w, bias, y, None,
                                          ctx.args[2])
        return dx, dw, db, None, None


# Function.apply's C++ part: Function.apply (Python) adds only functorch's handling, and _route
# sends calls under functorch transforms to the operator. Saves ~1.5 us per call.
_apply_conv2d = super(torch.autograd.Function, _Conv2dFunction).apply


# ---- routes ----------------------------------------------------------------------------------------

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


def _shares_memory(a, b):
    """Whether CPU or CUDA tensors ``a`` and ``b`` (not a graph's symbolic or fake values) may
    share memory: the same storage (a conservative answer, as the library's overlap check)."""
    if type(a) is not Tensor or type(b) not in _PLAIN_TENSORS or _captured():
        return False
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != 0


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


# ---- the functional form ---------------------------------------------------------------------------

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
        input, padding = _padding_string(fn, padding, input, weight, stride_hw, dilation_hw)
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


def _forward(x, w, bias, stride, padding, dilation, groups, fwd_algo, activation="identity"):
    """y = act(conv(x, w) + bias) by convcore's forward and its fused epilogue (the operator's
    computation)."""
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    return _conv_for(stride, padding, dilation, groups).forward(x, w, algo=fwd_algo, bias=bias,
                                                               activation=activation)


_filter_versions = itertools.count()  # Conv2d._filter_version's numbers, unique in the process


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


# ---- the epilogue by PyTorch's ops -----------------------------------------------------------------

_ACTIVATION_FUNCTIONS = {"relu": F.relu, "relu6": F.relu6, "silu": F.silu,
                         "gelu": lambda y, inplace=False: F.gelu(y),  # (no in-place GELU)
                         "gelu_tanh": lambda y, inplace=False: F.gelu(y, approximate="tanh")}


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
