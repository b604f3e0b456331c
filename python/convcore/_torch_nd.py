"""convcore.torch's 1-D, 3-D and transposed convolutions as functions and PyTorch operators:
conv1d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d (imported into
convcore.torch; their modules are in convcore/_torch_modules.py).

A 1-D convolution is the 2-D one with H = 1 (an N x C x L input is viewed as N x C x 1 x L, a
K x C/g x S filter as K x C/g x 1 x S): every 2-D algorithm and pass serves it, through
convcore.torch.conv2d and its routes (direct, eager autograd, operator).

A 3-D convolution is one 2-D convolution per image and filter tap in depth, accumulated
(convcore/_nd.py).

A transposed convolution is the backward-data pass of the convolution it transposes (cuDNN's and
PyTorch's own construction): ConvTranspose's weight (C_in, C_out/g, R, S) is exactly the weight
of the convolution from C_out to C_in channels, and its output (N, C_out, H_out, W_out) is that
convolution's input (convcore/_shapes.py's transposed_output_size). Its gradients are the
convolution's other two passes (the operator convcore::conv_transpose2d):
  d input  = conv2d(d output, weight)                        (the forward pass)
  d weight = backward_filter(input = d output, dy = input)   (the backward filter pass)
  d bias   = d output summed over N, H, W.
"""

import functools
from typing import List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from ._api import ConvDesc, Convolution
from ._dlpack import _torch_memory_format
from ._errors import BadParamError, NotSupportedError
from ._shapes import output_size, output_sizes, transposed_output_sizes
from ._torch_args import AlgoSpec, _algo_spec, _check_tensor_types, _check_tensors, _split_algo
from ._torch_ops import _BACKWARD_DATA, _conv_for, _function_args, _prepared_in_graph, conv2d


IntOrSeq = Union[int, Sequence[int]]


def _symbolic(*tensors):
    """Whether torch.fx symbolic tracing passes Proxies (shapes unknown: the call is recorded
    as it is, and checked when the graph runs)."""
    return any(isinstance(t, torch.fx.Proxy) for t in tensors)


def _ints(name, value, count, fn):
    """A tuple of ``count`` ints from an int or a sequence of ``count`` ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (int(value),) * count
    if (isinstance(value, (tuple, list)) and len(value) == count
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        return tuple(int(v) for v in value)
    raise BadParamError(f"{fn}: {name} must be an int or {count} ints, got {value!r}")


# ---- 1-D: the 2-D convolution with H = 1 ---------------------------------------------------------

def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1,
           padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1, groups: int = 1,
           algo: AlgoSpec = "auto", activation: Optional[str] = "identity") -> Tensor:
    """``torch.nn.functional.conv1d`` computed by convcore (forward and gradients): the same
    arguments, plus ``algo`` and ``activation`` as convcore.torch.conv2d. Input N x C x L (or
    unbatched C x L), weight K x C/groups x S. An input laid out N x L x C (strides (L*C, 1, C))
    gives an output laid out the same way: the 2-D passes see channels_last."""
    fn = "convcore.torch.conv1d"
    if _symbolic(input, weight):
        (s,), (d,) = _ints("stride", stride, 1, fn), _ints("dilation", dilation, 1, fn)
        pad = padding if isinstance(padding, str) else (0, _ints("padding", padding, 1, fn)[0])
        return conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, s), pad, (1, d),
                      groups, algo=algo, activation=activation).squeeze(-2)
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if input.dim() not in (2, 3):
        raise BadParamError(f"{fn}: input must be 3-D (N, C, L) or 2-D (C, L), got shape "
                            f"{tuple(input.shape)}")
    if weight.dim() != 3:
        raise BadParamError(f"{fn}: weight must be 3-D (K, C/groups, S), got shape "
                            f"{tuple(weight.shape)}")
    (s,), (d,) = _ints("stride", stride, 1, fn), _ints("dilation", dilation, 1, fn)
    pad = padding if isinstance(padding, str) else (0, _ints("padding", padding, 1, fn)[0])
    y = conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, s), pad, (1, d), groups,
               algo=algo, activation=activation)
    return y.squeeze(-2)


# ---- transposed: the backward-data pass ----------------------------------------------------------

def _transposed_spec(algo):
    """The operator's algo string, in the passes of the convolution being transposed.

    One name: each pass that has an algorithm of that name uses it (as conv2d's). A triple names
    the transposed convolution's own passes: (its forward, a backward-data algorithm; its input
    gradient, a forward algorithm; its weight gradient, a backward-filter algorithm), which are
    the convolution's (backward data, forward, backward filter)."""
    spec = _algo_spec(algo)
    parts = spec.split(",")
    if len(parts) == 3:
        spec = ",".join((parts[1], parts[0], parts[2]))
    _split_algo(spec)  # an unknown name fails here, naming its pass
    return spec


def _transposed_output_shape(fn, x, w, stride, padding, output_padding, dilation, groups):
    """(N, C_out, spatial...) of the transposed convolution, after the checks PyTorch makes."""
    cin, cout_g = w.shape[0], w.shape[1]
    if groups < 1 or cin % groups:
        raise BadParamError(f"{fn}: groups={groups} must be positive and divide the weight's "
                            f"first dimension (input channels) {cin}")
    if x.shape[1] != cin:
        raise BadParamError(f"{fn}: input has {x.shape[1]} channels but weight has shape "
                            f"{tuple(w.shape)} (C_in, C_out/groups, kernel...): C_in must be "
                            f"{x.shape[1]}")
    for name, values, least in (("stride", stride, 1), ("dilation", dilation, 1),
                                ("padding", padding, 0), ("output_padding", output_padding, 0)):
        if min(values) < least:
            raise BadParamError(f"{fn}: {name} must be >= {least}, got {tuple(values)}")
    for op, st, dl in zip(output_padding, stride, dilation):
        if op >= max(st, dl):
            raise BadParamError(f"{fn}: output_padding {tuple(output_padding)} must be smaller "
                                f"than stride {tuple(stride)} or dilation {tuple(dilation)} "
                                f"in each dimension")
    out = transposed_output_sizes(x.shape[2:], padding, w.shape[2:], stride, dilation, output_padding)
    if min(out) < 1:
        raise BadParamError(f"{fn}: the output would be {' x '.join(map(str, out))} (input "
                            f"{tuple(x.shape[2:])}, kernel {tuple(w.shape[2:])}, stride "
                            f"{tuple(stride)}, padding {tuple(padding)}, dilation "
                            f"{tuple(dilation)}): every size must be at least 1")
    return (x.shape[0], cout_g * groups, *out)


def _padded_to_conv_output(x, shape, w_shape, stride, padding, dilation):
    """x with zeros appended along each spatial dimension up to the size of conv(output):
    PyTorch allows an output_padding up to max(stride, dilation) - 1, and one of stride or more
    adds output rows whose convolution has an extra row, which the transposed input does not
    have (its value there is 0). Otherwise x itself."""
    extra = [output_size(size, p, k, st, dl) - have for size, p, k, st, dl, have in
             zip(shape[2:], padding, w_shape[2:], stride, dilation, x.shape[2:])]
    if max(extra) <= 0:
        return x
    pads: List[int] = []
    for e in reversed(extra):  # F.pad's order: the last dimension first
        pads += [0, max(e, 0)]
    return F.pad(x, pads)


def _check_bias(fn, x, bias, channels):
    """The transposed convolution's bias: one value per output channel (C_out = weight's second
    dimension times groups), of the input's dtype and device."""
    if not isinstance(bias, Tensor):
        raise BadParamError(f"{fn}: bias must be a torch.Tensor, got {type(bias).__name__}")
    if bias.dtype != x.dtype or bias.device != x.device:
        raise BadParamError(f"{fn}: input is {x.dtype} on {x.device} but bias is {bias.dtype} on "
                            f"{bias.device}; they must be equal")
    if bias.dim() != 1 or bias.shape[0] != channels:
        raise BadParamError(f"{fn}: bias must have shape ({channels},), got {tuple(bias.shape)}")


def _conv_transpose2d_impl(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: List[int],
                           padding: List[int], output_padding: List[int], dilation: List[int],
                           groups: int, algo: str) -> Tensor:
    """The transposed convolution: convcore's backward-data pass of conv(., w), plus the bias.
    ``algo`` is in the convolution's passes (_transposed_spec)."""
    fn = "convcore::conv_transpose2d"
    _check_tensors(fn, x, w, None)
    shape = _transposed_output_shape(fn, x, w, stride, padding, output_padding, dilation, groups)
    if bias is not None:
        _check_bias(fn, x, bias, shape[1])
    conv = _conv_for(stride, padding, dilation, groups)
    x = _padded_to_conv_output(x, shape, w.shape, stride, padding, dilation)
    if x.is_cpu:
        _, _, _, _, data_algo, _ = _function_args(algo, "identity")
        y = conv._backward_torch_cpu(_BACKWARD_DATA, x, w, shape, data_algo)
    else:
        y = conv.backward_data(x, w, shape, algo=_split_algo(algo)[1])
    if bias is not None:
        y.add_(bias.view(1, -1, 1, 1))
    return y


_conv_transpose2d_op = torch.library.custom_op("convcore::conv_transpose2d", mutates_args=())(
    _conv_transpose2d_impl)


@_conv_transpose2d_op.register_fake
def _conv_transpose2d_fake(x, w, bias, stride, padding, output_padding, dilation, groups, algo):
    n, _, h, wd = x.shape
    cin, cout_g, r, s = w.shape
    torch._check(x.shape[1] == cin, lambda: f"convcore::conv_transpose2d: input has {x.shape[1]} "
                                            f"channels but the weight expects {cin}")
    out = transposed_output_sizes((h, wd), padding, (r, s), stride, dilation, output_padding)
    return torch.empty((n, cout_g * groups, out[0], out[1]), dtype=x.dtype, device=x.device,
                       memory_format=_torch_memory_format(x))


def _transposed_setup_context(ctx, inputs, output):
    x, w, bias, stride, padding, output_padding, dilation, groups, algo = inputs
    needs = getattr(ctx, "needs_input_grad", None) or (True, True, True)
    # d input needs w, d weight needs x
    ctx.save_for_backward(x if needs[1] else None, w if needs[0] else None)
    ctx.w_shape = list(w.shape)
    ctx.x_size = tuple(x.shape[2:])
    ctx.has_bias = bias is not None
    ctx.params = (list(stride), list(padding), list(dilation), groups, algo)  # the convolution's


def _conv_transpose2d_backward(ctx, dy):
    x, w = ctx.saved_tensors
    if not dy.is_contiguous() and not dy.is_contiguous(memory_format=torch.channels_last):
        dy = dy.contiguous()  # e.g. an expanded gradient of y.sum()
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convcore.conv2d(dy, w, None, *ctx.params)
        h, wd = ctx.x_size
        if tuple(dx.shape[2:]) != ctx.x_size:  # x was padded (_padded_to_conv_output)
            dx = dx[:, :, :h, :wd]
    if ctx.needs_input_grad[1]:
        stride, padding, dilation = ctx.params[:3]
        x = _padded_to_conv_output(x, dy.shape, ctx.w_shape, stride, padding, dilation)
        dw = torch.ops.convcore.conv2d_backward_filter(dy, x, ctx.w_shape, *ctx.params)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = torch.ops.convcore.conv2d_backward_bias(dy)
    return dx, dw, db, None, None, None, None, None, None


_conv_transpose2d_op.register_autograd(_conv_transpose2d_backward,
                                       setup_context=_transposed_setup_context)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1,
                     algo: AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv_transpose2d`` computed by convcore: the same arguments in the
    same order, plus ``algo`` (one name, or the triple of this function's own passes: its
    forward, a backward-data algorithm; its input's gradient, a forward algorithm; its weight's
    gradient, a backward-filter algorithm). Input N x C_in x H x W (or unbatched), weight
    C_in x C_out/groups x R x S. A channels_last input gives a channels_last output."""
    fn = "convcore.torch.conv_transpose2d"
    if _symbolic(input, weight):
        return torch.ops.convcore.conv_transpose2d(input, weight, bias, *[
            list(_ints(name, value, 2, fn)) for name, value in
            (("stride", stride), ("padding", padding), ("output_padding", output_padding),
             ("dilation", dilation))], groups, _transposed_spec(algo))
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    _check_tensors(fn, input, weight, None)
    if not isinstance(groups, int) or isinstance(groups, bool):
        raise BadParamError(f"{fn}: groups must be an int, got {groups!r}")
    args = [list(_ints(name, value, 2, fn)) for name, value in
            (("stride", stride), ("padding", padding), ("output_padding", output_padding),
             ("dilation", dilation))]
    stride_, padding_, output_padding_, dilation_ = args
    shape = _transposed_output_shape(fn, input, weight, stride_, padding_, output_padding_,
                                     dilation_, groups)  # the checks, now
    if bias is not None:
        _check_bias(fn, input, bias, shape[1])
    y = _conv_transpose2d_op(input, weight, bias, stride_, padding_, output_padding_, dilation_,
                             groups, _transposed_spec(algo))
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1,
                     algo: AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv_transpose1d`` computed by convcore: conv_transpose2d with
    H = 1. Input N x C_in x L (or unbatched C_in x L), weight C_in x C_out/groups x S."""
    fn = "convcore.torch.conv_transpose1d"
    symbolic = _symbolic(input, weight)
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor) and not symbolic:
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not symbolic and input.dim() not in (2, 3):
        raise BadParamError(f"{fn}: input must be 3-D (N, C, L) or 2-D (C, L), got shape "
                            f"{tuple(input.shape)}")
    if not symbolic and weight.dim() != 3:
        raise BadParamError(f"{fn}: weight must be 3-D (C_in, C_out/groups, S), got shape "
                            f"{tuple(weight.shape)}")
    one = [_ints(name, value, 1, fn)[0] for name, value in
           (("stride", stride), ("padding", padding), ("output_padding", output_padding),
            ("dilation", dilation))]
    y = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, one[0]),
                         (0, one[1]), (0, one[2]), groups, (1, one[3]), algo=algo)
    return y.squeeze(-2)


# ---- 3-D: one 2-D convolution per filter tap in depth ------------------------------------------
#
# convcore's 3-D Convolution (convcore/_nd.py): one 2-D call per image and depth tap, accumulated
# into the output's depth slices (views: channels_last_3d slices are 2-D NHWC batches), so every
# 2-D algorithm serves each 3-D pass.


@functools.lru_cache(maxsize=512)
def _conv3d_for(stride, padding, dilation, groups):
    return Convolution(ConvDesc(padding=padding, stride=stride, dilation=dilation,
                                groups=groups, spatial_dims=3))


@functools.lru_cache(maxsize=512)
def _weight_conv3d(address, shape, stride, padding, dilation, groups):
    """A 3-D Convolution for the weight at ``address``: it keeps the filters it makes from that
    weight between calls (checked against the weight's bytes at every call), as conv2d's
    prepared calls do."""
    return Convolution(ConvDesc(padding=padding, stride=stride, dilation=dilation,
                                groups=groups, spatial_dims=3))


def _check_3d(fn, x, w, bias, stride, padding, dilation, groups):
    _check_tensor_types(fn, x, w, bias)
    if x.dim() != 5:
        raise BadParamError(f"{fn}: input must be 5-D (N, C, D, H, W), got shape {tuple(x.shape)}")
    if w.dim() != 5:
        raise BadParamError(f"{fn}: weight must be 5-D, got shape {tuple(w.shape)}")
    for name, values, least in (("stride", stride, 1), ("dilation", dilation, 1), ("padding", padding, 0)):
        if min(values) < least:
            raise BadParamError(f"{fn}: {name} must be >= {least}, got {tuple(values)}")
    if groups < 1:
        raise BadParamError(f"{fn}: groups must be positive, got {groups}")


def _memory_format_3d(t):
    return (torch.channels_last_3d if not t.is_contiguous() and t.is_contiguous(
        memory_format=torch.channels_last_3d) else torch.contiguous_format)


def _conv3d_impl(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: List[int],
                 padding: List[int], dilation: List[int], groups: int, algo: str,
                 prepared: bool = False) -> Tensor:
    """y = conv3d(x, w) + bias: one 2-D forward per image and depth tap, accumulated.
    ``prepared``: the weights are not being trained (the caller recorded no autograd), so what
    the pass makes from w (its taps' transformed filters) is kept between calls while w's bytes
    stay the same (checked at every call)."""
    fn = "convcore::conv3d"
    _check_3d(fn, x, w, bias, stride, padding, dilation, groups)
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise BadParamError(f"{fn}: input has {x.shape[1]} channels but weight {tuple(w.shape)} "
                            f"with groups={groups} expects {w.shape[1] * groups}")
    out = output_sizes(x.shape[2:], padding, w.shape[2:], stride, dilation)
    if min(out) < 1:
        raise BadParamError(f"{fn}: the output would be {out} for input {tuple(x.shape[2:])}, "
                            f"weight {tuple(w.shape[2:])}: every size must be at least 1")
    return _conv3d_run(x, w, bias, stride, padding, dilation, groups, _split_algo(algo)[0],
                       "check" if prepared else None)


def _conv3d_run(x, w, bias, stride, padding, dilation, groups, algo, filter_version):
    """conv3d on checked arguments. filter_version None: filters made per call; otherwise (a
    frozen layer's number, or "check": the weight's bytes) the Convolution of the weight's
    address keeps them while it stays the same."""
    if filter_version is not None:
        conv = _weight_conv3d(w.data_ptr(), tuple(w.shape), tuple(stride), tuple(padding),
                              tuple(dilation), groups)
    else:
        conv = _conv3d_for(tuple(stride), tuple(padding), tuple(dilation), groups)
    return conv.forward(x, w, algo=algo, bias=bias, filter_version=filter_version)


def _conv3d_backward_data_impl(dy: Tensor, w: Tensor, x_shape: List[int], stride: List[int],
                               padding: List[int], dilation: List[int], groups: int,
                               algo: str) -> Tensor:
    """dx of conv3d: one 2-D backward-data pass per image and depth tap, accumulated."""
    return _conv3d_for(tuple(stride), tuple(padding), tuple(dilation), groups).backward_data(
        dy, w, tuple(x_shape), algo=_split_algo(algo)[1])


def _conv3d_backward_filter_impl(x: Tensor, dy: Tensor, w_shape: List[int], stride: List[int],
                                 padding: List[int], dilation: List[int], groups: int,
                                 algo: str) -> Tensor:
    """dw of conv3d: one 2-D backward-filter pass per image and depth tap, accumulated into the
    tap's slice of dw."""
    return _conv3d_for(tuple(stride), tuple(padding), tuple(dilation), groups).backward_filter(
        x, dy, tuple(w_shape), algo=_split_algo(algo)[2])


def _conv3d_params(inputs):
    return [list(v) for v in inputs[3:6]] + list(inputs[6:8])


_conv3d_op = torch.library.custom_op("convcore::conv3d", mutates_args=())(_conv3d_impl)
_conv3d_backward_data_op = torch.library.custom_op("convcore::conv3d_backward_data", mutates_args=())(
    _conv3d_backward_data_impl)
_conv3d_backward_filter_op = torch.library.custom_op("convcore::conv3d_backward_filter",
                                                     mutates_args=())(_conv3d_backward_filter_impl)


@_conv3d_op.register_fake
def _conv3d_fake(x, w, bias, stride, padding, dilation, groups, algo, prepared=False):
    torch._check(x.shape[1] == w.shape[1] * groups, lambda: (
        f"convcore::conv3d: input has {x.shape[1]} channels but the weight expects "
        f"{w.shape[1] * groups}"))
    out = output_sizes(x.shape[2:], padding, w.shape[2:], stride, dilation)
    return torch.empty((x.shape[0], w.shape[0]) + out, dtype=x.dtype, device=x.device,
                       memory_format=_memory_format_3d(x))


@_conv3d_backward_data_op.register_fake
def _conv3d_backward_data_fake(dy, w, x_shape, stride, padding, dilation, groups, algo):
    return torch.empty(tuple(x_shape), dtype=dy.dtype, device=dy.device,
                       memory_format=_memory_format_3d(dy))


@_conv3d_backward_filter_op.register_fake
def _conv3d_backward_filter_fake(x, dy, w_shape, stride, padding, dilation, groups, algo):
    return x.new_empty(tuple(w_shape))


def _conv3d_setup_context(ctx, inputs, output):
    x, w, bias = inputs[:3]
    needs = getattr(ctx, "needs_input_grad", None) or (True, True, True)
    ctx.save_for_backward(x if needs[1] else None, w if needs[0] else None)
    ctx.shapes = (list(x.shape), list(w.shape))
    ctx.has_bias = bias is not None
    ctx.params = _conv3d_params(inputs)


def _contiguous_gradient(dy):
    if not dy.is_contiguous() and not dy.is_contiguous(memory_format=torch.channels_last_3d):
        dy = dy.contiguous()  # e.g. an expanded gradient of y.sum()
    return dy


def _bias_gradient_3d(dy):
    """db of a 3-D layer: convcore's bias pass on dy seen as N x K x (D*H*W) x 1 (a view in
    either memory format)."""
    return torch.ops.convcore.conv2d_backward_bias(dy.reshape(dy.shape[0], dy.shape[1], -1, 1))


def _conv3d_backward(ctx, dy):
    x, w = ctx.saved_tensors
    dy = _contiguous_gradient(dy)
    x_shape, w_shape = ctx.shapes
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convcore.conv3d_backward_data(dy, w, x_shape, *ctx.params)
    if ctx.needs_input_grad[1]:
        dw = torch.ops.convcore.conv3d_backward_filter(x, dy, w_shape, *ctx.params)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = _bias_gradient_3d(dy)
    return dx, dw, db, None, None, None, None, None, None


_conv3d_op.register_autograd(_conv3d_backward, setup_context=_conv3d_setup_context)


def conv3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1,
           padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1, groups: int = 1,
           algo: AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv3d`` computed by convcore: the same arguments, plus ``algo``
    (as conv2d's: the 2-D algorithm each depth tap runs). Input N x C x D x H x W (or unbatched
    C x D x H x W), weight K x C/groups x T x R x S. A channels_last_3d input gives a
    channels_last_3d output. Runs one 2-D convolution per image and depth tap
    (convcore/_nd.py)."""
    fn = "convcore.torch.conv3d"
    if _symbolic(input, weight):
        if isinstance(padding, str) and padding != "valid":
            raise NotSupportedError(f"{fn}: padding={padding!r} under torch.fx symbolic tracing "
                                    f"(it needs the weight's shape; pass the padding as ints)")
        return torch.ops.convcore.conv3d(input, weight, bias, *[
            list(_ints(name, value, 3, fn)) for name, value in
            (("stride", stride), ("padding", 0 if padding == "valid" else padding),
             ("dilation", dilation))], groups, _algo_spec(algo))
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    unbatched = input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    if not isinstance(groups, int) or isinstance(groups, bool):
        raise BadParamError(f"{fn}: groups must be an int, got {groups!r}")
    stride3, dilation3 = _ints("stride", stride, 3, fn), _ints("dilation", dilation, 3, fn)
    if isinstance(padding, str):
        input, padding3 = _padding_string_3d(fn, padding, input, weight, stride3, dilation3)
    else:
        padding3 = _ints("padding", padding, 3, fn)
    _check_3d(fn, input, weight, bias, stride3, padding3, dilation3, groups)
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        raise BadParamError(f"{fn}: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    y = _conv3d_op(input, weight, bias, list(stride3), list(padding3), list(dilation3), groups,
                   _algo_spec(algo), _prepared_in_graph())
    return y.squeeze(0) if unbatched else y


def _padding_string_3d(fn, padding, x, w, stride, dilation):
    """padding="valid" or "same" (stride 1) as ints; an odd total padding puts the extra plane at
    the end, as PyTorch does, by padding x here."""
    if padding == "valid":
        return x, (0, 0, 0)
    if padding != "same":
        raise BadParamError(f"{fn}: padding must be 'valid', 'same' or ints, got {padding!r}")
    if any(s != 1 for s in stride):
        raise BadParamError(f"{fn}: padding='same' needs stride 1, got stride {tuple(stride)}")
    if not isinstance(w, Tensor) or w.dim() != 5:
        raise BadParamError(f"{fn}: weight must be 5-D, got {getattr(w, 'shape', w)}")
    totals = [d * (k - 1) for d, k in zip(dilation, w.shape[2:])]
    extra = [t % 2 for t in totals]
    if any(extra):  # F.pad's order: last dimension first
        x = F.pad(x, (0, extra[2], 0, extra[1], 0, extra[0]))
    return x, tuple(t // 2 for t in totals)


def _conv_transpose3d_impl(x: Tensor, w: Tensor, bias: Optional[Tensor], stride: List[int],
                           padding: List[int], output_padding: List[int], dilation: List[int],
                           groups: int, algo: str) -> Tensor:
    """The 3-D transposed convolution: conv3d's backward-data pass, plus the bias. ``algo`` is
    in the convolution's passes (_transposed_spec)."""
    fn = "convcore::conv_transpose3d"
    _check_3d(fn, x, w, None, stride, padding, dilation, groups)
    shape = _transposed_output_shape(fn, x, w, stride, padding, output_padding, dilation, groups)
    if bias is not None:
        _check_bias(fn, x, bias, shape[1])
    x = _padded_to_conv_output(x, shape, w.shape, stride, padding, dilation)
    y = _conv3d_backward_data_impl(x, w, list(shape), stride, padding, dilation, groups, algo)
    if bias is not None:
        y.add_(bias.view(1, -1, 1, 1, 1))
    return y


_conv_transpose3d_op = torch.library.custom_op("convcore::conv_transpose3d", mutates_args=())(
    _conv_transpose3d_impl)


@_conv_transpose3d_op.register_fake
def _conv_transpose3d_fake(x, w, bias, stride, padding, output_padding, dilation, groups, algo):
    torch._check(x.shape[1] == w.shape[0], lambda: f"convcore::conv_transpose3d: input has "
                                                   f"{x.shape[1]} channels but the weight expects {w.shape[0]}")
    out = transposed_output_sizes(x.shape[2:], padding, w.shape[2:], stride, dilation, output_padding)
    return torch.empty((x.shape[0], w.shape[1] * groups, *out), dtype=x.dtype, device=x.device,
                       memory_format=_memory_format_3d(x))


def _conv_transpose3d_backward(ctx, dy):
    x, w = ctx.saved_tensors
    dy = _contiguous_gradient(dy)
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convcore.conv3d(dy, w, None, *ctx.params)
        if tuple(dx.shape[2:]) != ctx.x_size:  # x was padded (_padded_to_conv_output)
            dx = dx[(slice(None), slice(None)) + tuple(slice(0, s) for s in ctx.x_size)]
    if ctx.needs_input_grad[1]:
        stride, padding, dilation = ctx.params[:3]
        x = _padded_to_conv_output(x, dy.shape, ctx.w_shape, stride, padding, dilation)
        dw = torch.ops.convcore.conv3d_backward_filter(dy, x, ctx.w_shape, *ctx.params)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = _bias_gradient_3d(dy)
    return dx, dw, db, None, None, None, None, None, None


_conv_transpose3d_op.register_autograd(_conv_transpose3d_backward,
                                       setup_context=_transposed_setup_context)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1,
                     algo: AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv_transpose3d`` computed by convcore (conv3d's backward-data
    pass): the same arguments, plus ``algo`` as conv_transpose2d's. Input N x C_in x D x H x W (or
    unbatched), weight C_in x C_out/groups x T x R x S. A channels_last_3d input gives a
    channels_last_3d output."""
    fn = "convcore.torch.conv_transpose3d"
    if _symbolic(input, weight):
        return torch.ops.convcore.conv_transpose3d(input, weight, bias, *[
            list(_ints(name, value, 3, fn)) for name, value in
            (("stride", stride), ("padding", padding), ("output_padding", output_padding),
             ("dilation", dilation))], groups, _transposed_spec(algo))
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    unbatched = input.dim() == 4
    if unbatched:
        input = input.unsqueeze(0)
    if not isinstance(groups, int) or isinstance(groups, bool):
        raise BadParamError(f"{fn}: groups must be an int, got {groups!r}")
    stride3, padding3, output_padding3, dilation3 = [
        list(_ints(name, value, 3, fn)) for name, value in
        (("stride", stride), ("padding", padding), ("output_padding", output_padding),
         ("dilation", dilation))]
    _check_3d(fn, input, weight, None, stride3, padding3, dilation3, groups)
    shape = _transposed_output_shape(fn, input, weight, stride3, padding3, output_padding3,
                                     dilation3, groups)
    if bias is not None:
        _check_bias(fn, input, bias, shape[1])
    y = _conv_transpose3d_op(input, weight, bias, stride3, padding3, output_padding3, dilation3,
                             groups, _transposed_spec(algo))
    return y.squeeze(0) if unbatched else y
