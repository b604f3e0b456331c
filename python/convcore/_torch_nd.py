"""convcore.torch's 1-D and transposed convolutions: Conv1d, ConvTranspose1d, ConvTranspose2d and
their functional forms conv1d, conv_transpose1d, conv_transpose2d (imported into convcore.torch).

A 1-D convolution is the 2-D one with H = 1 (an N x C x L input is viewed as N x C x 1 x L, a
K x C/g x S filter as K x C/g x 1 x S): every 2-D algorithm and pass serves it, through
convcore.torch.conv2d and its routes (direct, eager autograd, operator).

A transposed convolution is the backward-data pass of the convolution it transposes (cuDNN's and
PyTorch's own construction): ConvTranspose's weight (C_in, C_out/g, R, S) is exactly the weight
of the convolution from C_out to C_in channels, and its output (N, C_out, H_out, W_out) is that
convolution's input, H_out = (H - 1) * stride - 2 * padding + dilation * (R - 1) + output_padding + 1.
Its gradients are the convolution's other two passes (the operator convcore::conv_transpose2d):
  d input  = conv2d(d output, weight)                        (the forward pass)
  d weight = backward_filter(input = d output, dy = input)   (the backward filter pass)
  d bias   = d output summed over N, H, W.
"""

from typing import Any, List, Literal, Optional, Sequence, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _api
from . import torch as _ct
from ._errors import BadParamError

IntOrSeq = Union[int, Sequence[int]]
Size1 = Union[int, Tuple[int]]  # nn.Conv1d's _size_1_t


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
           algo: _ct.AlgoSpec = "auto", activation: Optional[str] = "identity") -> Tensor:
    """``torch.nn.functional.conv1d`` computed by convcore (forward and gradients): the same
    arguments, plus ``algo`` and ``activation`` as convcore.torch.conv2d. Input N x C x L (or
    unbatched C x L), weight K x C/groups x S. An input laid out N x L x C (strides (L*C, 1, C))
    gives an output laid out the same way: the 2-D passes see channels_last."""
    fn = "convcore.torch.conv1d"
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
    y = _ct.conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, s), pad, (1, d), groups,
                   algo=algo, activation=activation)
    return y.squeeze(-2)


class Conv1d(nn.Conv1d):
    """``torch.nn.Conv1d`` computed by convcore: the same constructor, parameters and state_dict,
    plus ``algo`` (as convcore.torch.Conv2d's; a plain attribute, not in the state_dict)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size1, stride: Size1 = 1,
                 padding: Union[Size1, str] = 0, dilation: Size1 = 1, groups: int = 1,
                 bias: bool = True, padding_mode: _ct.PaddingMode = "zeros", device: Any = None,
                 dtype: Any = None, algo: _ct.AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype)
        self.algo = algo

    @property
    def algo(self) -> _ct.AlgoSpec:
        return self._algo

    @algo.setter
    def algo(self, value: _ct.AlgoSpec) -> None:
        _ct._split_algo(_ct._algo_spec(value))  # an unknown name fails here
        self._algo = value

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding: Union[IntOrSeq, str] = 0
        else:
            padding = self.padding
        return conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation,
                      self.groups, algo=self._algo)


# ---- transposed: the backward-data pass ----------------------------------------------------------

def _transposed_spec(algo):
    """The operator's algo string, in the passes of the convolution being transposed.

    One name: each pass that has an algorithm of that name uses it (as conv2d's). A triple names
    the transposed convolution's own passes: (its forward, a backward-data algorithm; its input
    gradient, a forward algorithm; its weight gradient, a backward-filter algorithm), which are
    the convolution's (backward data, forward, backward filter)."""
    spec = _ct._algo_spec(algo)
    parts = spec.split(",")
    if len(parts) == 3:
        spec = ",".join((parts[1], parts[0], parts[2]))
    _ct._split_algo(spec)  # an unknown name fails here, naming its pass
    return spec


def _transposed_output_shape(fn, x, w, stride, padding, output_padding, dilation, groups):
    """(N, C_out, H_out, W_out) of the transposed convolution, after the checks PyTorch makes."""
    n, c, h, wd = x.shape
    cin, cout_g, r, s = w.shape
    if groups < 1 or cin % groups:
        raise BadParamError(f"{fn}: groups={groups} must be positive and divide the weight's "
                            f"first dimension (input channels) {cin}")
    if c != cin:
        raise BadParamError(f"{fn}: input has {c} channels but weight has shape {tuple(w.shape)} "
                            f"(C_in, C_out/groups, R, S): C_in must be {c}")
    for name, values, least in (("stride", stride, 1), ("dilation", dilation, 1),
                                ("padding", padding, 0), ("output_padding", output_padding, 0)):
        if min(values) < least:
            raise BadParamError(f"{fn}: {name} must be >= {least}, got {tuple(values)}")
    for i in range(2):
        if output_padding[i] >= max(stride[i], dilation[i]):
            raise BadParamError(f"{fn}: output_padding {tuple(output_padding)} must be smaller "
                                f"than stride {tuple(stride)} or dilation {tuple(dilation)} "
                                f"in each dimension")
    out = [(size - 1) * st - 2 * p + dl * (k - 1) + op + 1
           for size, st, p, dl, k, op in zip((h, wd), stride, padding, dilation, (r, s), output_padding)]
    if min(out) < 1:
        raise BadParamError(f"{fn}: the output would be {out[0]} x {out[1]} (input {h} x {wd}, "
                            f"kernel {r} x {s}, stride {tuple(stride)}, padding {tuple(padding)}, "
                            f"dilation {tuple(dilation)}): it must be at least 1 x 1")
    return (n, cout_g * groups, out[0], out[1])


def _padded_to_conv_output(x, shape, w_shape, stride, padding, dilation):
    """x with zeros appended along H and W up to the size of conv(output): PyTorch allows an
    output_padding up to max(stride, dilation) - 1, and one of stride or more adds output rows
    whose convolution has an extra row, which the transposed input does not have (its value
    there is 0). Otherwise x itself."""
    extra = [_api._output_size(size, p, k, st, dl) - have for size, p, k, st, dl, have in
             zip(shape[2:], padding, w_shape[2:], stride, dilation, x.shape[2:])]
    if max(extra) <= 0:
        return x
    return F.pad(x, (0, extra[1], 0, extra[0]))


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
    _ct._check_tensors(fn, x, w, None)
    shape = _transposed_output_shape(fn, x, w, stride, padding, output_padding, dilation, groups)
    if bias is not None:
        _check_bias(fn, x, bias, shape[1])
    conv = _ct._conv_for(stride, padding, dilation, groups)
    x = _padded_to_conv_output(x, shape, w.shape, stride, padding, dilation)
    if x.is_cpu:
        _, _, _, _, data_algo, _ = _ct._function_args(algo, "identity")
        y = conv._backward_torch_cpu(_ct._BACKWARD_DATA, x, w, shape, data_algo)
    else:
        y = conv.backward_data(x, w, shape, algo=_ct._split_algo(algo)[1])
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
    out = [(size - 1) * st - 2 * p + dl * (k - 1) + op + 1
           for size, st, p, dl, k, op in zip((h, wd), stride, padding, dilation, (r, s), output_padding)]
    return torch.empty((n, cout_g * groups, out[0], out[1]), dtype=x.dtype, device=x.device,
                       memory_format=_api._torch_memory_format(x))


def _transposed_setup_context(ctx, inputs, output):
    x, w, bias, stride, padding, output_padding, dilation, groups, algo = inputs
    needs = getattr(ctx, "needs_input_grad", None) or (True, True, True)
    # d input needs w, d weight needs x
    ctx.save_for_backward(x if needs[1] else None, w if needs[0] else None)
    ctx.w_shape = list(w.shape)
    ctx.x_size = tuple(x.shape[2:])
    ctx.has_bias = bias is not None
    ctx.params = (list(stride), list(padding), list(dilation), groups, algo)


def _conv_transpose2d_backward(ctx, dy):
    x, w = ctx.saved_tensors
    if not dy.is_contiguous() and not dy.is_contiguous(memory_format=torch.channels_last):
        dy = dy.contiguous()  # e.g. an expanded gradient of y.sum()
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.convcore.conv2d(dy, w, None, *ctx.params)
        h, wd = ctx.x_size
        if dx.shape[2] != h or dx.shape[3] != wd:  # x was padded (_padded_to_conv_output)
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
                     algo: _ct.AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv_transpose2d`` computed by convcore: the same arguments in the
    same order, plus ``algo`` (one name, or the triple of this function's own passes: its
    forward, a backward-data algorithm; its input's gradient, a forward algorithm; its weight's
    gradient, a backward-filter algorithm). Input N x C_in x H x W (or unbatched), weight
    C_in x C_out/groups x R x S. A channels_last input gives a channels_last output."""
    fn = "convcore.torch.conv_transpose2d"
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    _ct._check_tensors(fn, input, weight, None)
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
                     algo: _ct.AlgoSpec = "auto") -> Tensor:
    """``torch.nn.functional.conv_transpose1d`` computed by convcore: conv_transpose2d with
    H = 1. Input N x C_in x L (or unbatched C_in x L), weight C_in x C_out/groups x S."""
    fn = "convcore.torch.conv_transpose1d"
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise BadParamError(f"{fn}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if input.dim() not in (2, 3):
        raise BadParamError(f"{fn}: input must be 3-D (N, C, L) or 2-D (C, L), got shape "
                            f"{tuple(input.shape)}")
    if weight.dim() != 3:
        raise BadParamError(f"{fn}: weight must be 3-D (C_in, C_out/groups, S), got shape "
                            f"{tuple(weight.shape)}")
    one = [_ints(name, value, 1, fn)[0] for name, value in
           (("stride", stride), ("padding", padding), ("output_padding", output_padding),
            ("dilation", dilation))]
    y = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, one[0]),
                         (0, one[1]), (0, one[2]), groups, (1, one[3]), algo=algo)
    return y.squeeze(-2)


class _TransposedAlgo:
    """The ``algo`` attribute of the transposed modules (checked when set)."""

    @property
    def algo(self) -> _ct.AlgoSpec:
        return self._algo

    @algo.setter
    def algo(self, value: _ct.AlgoSpec) -> None:
        _transposed_spec(value)  # an unknown name fails here
        self._algo = value


class ConvTranspose2d(_TransposedAlgo, nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` computed by convcore: the same constructor, parameters,
    state_dict and ``forward(input, output_size=None)``, plus ``algo`` (conv_transpose2d's)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: _ct.Size2,
                 stride: _ct.Size2 = 1, padding: _ct.Size2 = 0, output_padding: _ct.Size2 = 0,
                 groups: int = 1, bias: bool = True, dilation: _ct.Size2 = 1,
                 padding_mode: Literal["zeros"] = "zeros", device: Any = None, dtype: Any = None,
                 algo: _ct.AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, device, dtype)
        self.algo = algo

    def forward(self, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for ConvTranspose2d")
        padding = cast(Tuple[int, ...], self.padding)  # never a string in a transposed module
        output_padding = self._output_padding(input, output_size, list(self.stride),
                                              list(padding), list(self.kernel_size), 2,
                                              list(self.dilation))
        return conv_transpose2d(input, self.weight, self.bias, self.stride, padding,
                                output_padding, self.groups, self.dilation, algo=self._algo)


class ConvTranspose1d(_TransposedAlgo, nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` computed by convcore: the same constructor, parameters,
    state_dict and ``forward(input, output_size=None)``, plus ``algo`` (conv_transpose2d's)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size1, stride: Size1 = 1,
                 padding: Size1 = 0, output_padding: Size1 = 0, groups: int = 1, bias: bool = True,
                 dilation: Size1 = 1, padding_mode: Literal["zeros"] = "zeros", device: Any = None,
                 dtype: Any = None, algo: _ct.AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, device, dtype)
        self.algo = algo

    def forward(self, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for ConvTranspose1d")
        padding = cast(Tuple[int, ...], self.padding)  # never a string in a transposed module
        output_padding = self._output_padding(input, output_size, list(self.stride),
                                              list(padding), list(self.kernel_size), 1,
                                              list(self.dilation))
        return conv_transpose1d(input, self.weight, self.bias, self.stride, padding,
                                output_padding, self.groups, self.dilation, algo=self._algo)


# convert(): the exact torch classes this module replaces, and their convcore classes
CONVERTED: dict = {nn.Conv1d: Conv1d, nn.ConvTranspose1d: ConvTranspose1d,
                   nn.ConvTranspose2d: ConvTranspose2d}


def converted(module, algo):
    """A convcore module of ``module``'s class that shares its whole state (parameters, buffers,
    hooks, mode): nothing is allocated, nothing copied."""
    cls = CONVERTED[type(module)]
    new = cls.__new__(cls)
    for key, value in module.__dict__.items():
        new.__dict__[key] = value.copy() if isinstance(value, dict) else value
    new.algo = algo
    return new

