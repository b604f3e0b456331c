"""convcore.torch's modules: Conv2d, Conv1d, Conv3d, ConvTranspose1d, ConvTranspose2d and
ConvTranspose3d, drop-ins for torch.nn's (the same constructors, parameters and state_dict, plus
``algo``, ``activation`` and ``freeze``), which keep their filters prepared in inference and
apply what convert(fuse=True) fused into them; and sharing_state, which makes one module of
another's state."""

from typing import Any, List, Literal, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from ._api import ConvDesc, Convolution
from ._args import ACTIVATIONS
from ._errors import BadParamError, NotSupportedError
from ._shapes import output_size, output_sizes
from ._torch_args import (AlgoSpec, PaddingMode, Size2, _activation_name, _algo_spec, _check_tensors,
                          _freeze_arg, _split_algo)
from ._torch_fold import (_BATCH_NORM_FORWARD, _fold_batch_norm, _fold_inputs, _group_norm_forward,
                          _tensors_key)
from ._torch_nd import (IntOrSeq, _check_3d, _conv3d_run, _transposed_spec, conv1d,
                        conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d)
from ._torch_ops import (_ACTIVATION_FUNCTIONS, _DIRECT, _FILTERS_CHECKED, _FUNCTION, _OPERATOR,
                         _apply_activation, _apply_conv2d, _conv_for, _direct_conv2d, _filter_versions,
                         _forward, _frozen_filter_version, _function_args, _keeps_preactivation,
                         _prepared_in_graph, _route, _shares_memory, conv2d)


Size1 = Union[int, Tuple[int]]  # nn.Conv1d's _size_1_t
Size3 = Union[int, Tuple[int, int, int]]  # nn.Conv3d's _size_3_t


# ---- Conv2d -----------------------------------------------------------------------------------

_OWN_BATCH_NORM = object()  # Conv2d._fused_forward's default bn: the layer's own fused batch norm


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
        self.__dict__["_activation_code"] = ACTIVATIONS[name]

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
                                            bias, ACTIVATIONS[activation], residual)
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
            activation_code = ACTIVATIONS[activation]
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


def _symbolic_fused_forward(layer, input, residual, activation, bn):
    """Conv2d._fused_forward as one call_method node of the graph torch.fx traces (its
    training-mode branch stays live)."""
    tracer = input.tracer
    layer_node = tracer.create_proxy("get_attr", tracer.path_of_module(layer), (), {})
    args: Tuple[Any, ...] = (layer_node, input, residual, activation)
    if bn is not layer.__dict__.get("_fused_batch_norm"):
        args += (None if bn is None else tracer.create_proxy("get_attr", tracer.path_of_module(bn), (), {}),)
    return tracer.create_proxy("call_method", "_fused_forward", args, {})


def _residual_fits(layer, input, residual):
    """Whether the epilogue can add ``residual``: the output's shape, input's dtype and device
    (a residual that broadcasts is added by PyTorch instead)."""
    if not isinstance(residual, Tensor) or residual.dtype != input.dtype or residual.device != input.device:
        return False
    n, _, h, w = input.shape
    r, s = layer.kernel_size
    return tuple(residual.shape) == (
        n, layer.out_channels, output_size(h, layer.padding[0], r, layer.stride[0], layer.dilation[0]),
        output_size(w, layer.padding[1], s, layer.stride[1], layer.dilation[1]))


# ---- Conv1d, Conv3d and the transposed modules ------------------------------------------------

class _AlgoAttribute:
    """The modules' ``algo`` attribute, checked when set (an unknown name fails there), and their
    refusal of torch.jit.script (their forward calls Python functions TorchScript cannot compile;
    torch.jit.trace and torch.compile record the operators)."""

    def __prepare_scriptable__(self) -> Any:
        raise NotSupportedError(f"convcore.torch.{type(self).__name__}: torch.jit.script is not "
                                f"supported; use torch.jit.trace, torch.compile or torch.export")

    @staticmethod
    def _check_algo(value: AlgoSpec) -> None:
        _split_algo(_algo_spec(value))

    @property
    def algo(self) -> AlgoSpec:
        return self._algo

    @algo.setter
    def algo(self, value: AlgoSpec) -> None:
        self._check_algo(value)
        self._algo = value


class _PaddedForward(_AlgoAttribute):
    """forward() of Conv1d and Conv3d: a padding mode other than zeros by F.pad, as PyTorch's
    modules do, then the functional form (``_functional``), with the fused activation where the
    layer has one (Conv1d's ``activation``); with freeze=True in inference, the layer's direct
    route (_frozen_forward)."""

    freeze = False  # trust the weights in inference (convcore.torch.Conv2d's contract)

    def forward(self: Any, input: Tensor) -> Tensor:
        if "_fused_group_norm" in self.__dict__:
            return self._traced_or(input, "_group_norm_forward")
        return self._padded_forward(input, self.weight, self.bias)

    def _traced_or(self: Any, input: Tensor, method: str) -> Tensor:
        """self.<method>(input); under torch.fx's symbolic trace one call_method node of it, whose
        own branches (autograd, the mode) stay live."""
        if isinstance(input, torch.fx.Proxy):
            tracer = input.tracer
            layer = tracer.create_proxy("get_attr", tracer.path_of_module(self), (), {})
            return tracer.create_proxy("call_method", method, (layer, input), {})
        return getattr(self, method)(input)

    def _group_norm_forward(self: Any, input: Tensor) -> Tensor:
        """act(gn(conv(input))) with the group norm and activation convert(fuse=True) fused
        into this layer (_torch_fold._group_norm_forward)."""
        y = self._padded_forward(input, self.weight, self.bias)
        return _group_norm_forward(y, self.__dict__["_fused_group_norm"],
                                   self.__dict__.get("_group_norm_activation", "identity"))

    def _padded_forward(self: Any, input: Tensor, weight: Tensor, bias: Optional[Tensor],
                        trusted: bool = False) -> Tensor:
        # With freeze=True, a call autograd does not record (no graph capture either) runs the
        # layer's direct route with its version number of the weight instead of reading the
        # weight's bytes (Conv2d's freeze); so does a weight the layer made and checked itself
        # (``trusted``: the folded batch norm's); every other call, and a padding that is not
        # plain numbers, the functional form.
        if ((self.freeze or trusted) and self.padding_mode == "zeros" and not isinstance(self.padding, str)
                and isinstance(input, Tensor) and input.dim() == weight.dim()
                and _route(input, weight, bias) == _DIRECT):
            return self._frozen_forward(input, weight, bias)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding: Union[IntOrSeq, str] = 0
        else:
            padding = self.padding
        activation = self.__dict__.get("_activation", "identity")
        if _keeps_preactivation(activation, input, weight, bias):
            y = self._functional(input, weight, bias, self.stride, padding, self.dilation,
                                 self.groups, algo=self._algo)
            return _ACTIVATION_FUNCTIONS[activation](y)
        if activation != "identity":
            return self._functional(input, weight, bias, self.stride, padding, self.dilation,
                                    self.groups, algo=self._algo, activation=activation)
        return self._functional(input, weight, bias, self.stride, padding, self.dilation,
                                self.groups, algo=self._algo)


class Conv1d(_PaddedForward, nn.Conv1d):
    """``torch.nn.Conv1d`` computed by convcore: the same constructor, parameters and state_dict,
    plus ``algo`` and ``activation`` (as convcore.torch.Conv2d's: plain attributes, not in the
    state_dict; ``convert(fuse=True)`` sets the activation from the nn.ReLU, nn.ReLU6, nn.SiLU or
    nn.GELU that follows the layer in an nn.Sequential). convert(fuse=True) also fuses an
    nn.GroupNorm that follows it, and the activation after that (wav2vec2's first layer: Conv1d,
    GroupNorm, GELU): in inference they run on the layer's output in place (_group_norm_forward)."""

    _functional = staticmethod(conv1d)

    @property
    def activation(self) -> str:
        return self.__dict__.get("_activation", "identity")

    @activation.setter
    def activation(self, value: Optional[str]) -> None:
        self.__dict__["_activation"] = _activation_name(value)

    def extra_repr(self) -> str:
        act = self.activation
        return super().extra_repr() + (f", activation={act!r}" if act != "identity" else "") + (
            ", freeze=True" if self.freeze else "")

    def __getstate__(self) -> Any:
        state = super().__getstate__()
        state.pop("_prepared_weight", None)  # copies make their own
        return state

    def _frozen_forward(self, input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        x4, w4 = input.unsqueeze(-2), weight.unsqueeze(2)
        _check_tensors("convcore.torch.Conv1d", x4, w4, bias)
        return _direct_conv2d(x4, w4, bias, (1, self.stride[0]),
                              (0, self.padding[0]), (1, self.dilation[0]), self.groups,
                              _split_algo(_algo_spec(self._algo))[0], self.activation,
                              _frozen_filter_version(self, weight)).squeeze(-2)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size1, stride: Size1 = 1,
                 padding: Union[Size1, str] = 0, dilation: Size1 = 1, groups: int = 1,
                 bias: bool = True, padding_mode: PaddingMode = "zeros", device: Any = None,
                 dtype: Any = None, algo: AlgoSpec = "auto", freeze: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype)
        self.algo = algo
        self.freeze = _freeze_arg(freeze)


class Conv3d(_PaddedForward, nn.Conv3d):
    """``torch.nn.Conv3d`` computed by convcore: the same constructor, parameters and state_dict,
    plus ``algo`` (conv3d's; a plain attribute, not in the state_dict). convert(fuse=True) fuses
    the BatchNorm3d that follows it into it (_fused_batch_norm), as Conv2d's, or the GroupNorm and
    activation that follow it (_group_norm_forward), as Conv1d's."""

    _functional = staticmethod(conv3d)

    def forward(self, input: Tensor) -> Tensor:
        if "_fused_batch_norm" in self.__dict__:
            return self._traced_or(input, "_batch_norm_forward")
        return super().forward(input)

    def _batch_norm_forward(self, input: Tensor) -> Tensor:
        """bn(conv(input)) with the fused batch norm: in training mode (or without running
        statistics) the convolution, then the batch norm as PyTorch runs it; in eval mode the
        batch norm folded into the weights and bias (Ioffe & Szegedy 2015, sec. 3.2: bn is
        affine in eval mode)."""
        bn = self.__dict__["_fused_batch_norm"]
        if bn.training or bn.running_mean is None:
            return _BATCH_NORM_FORWARD(bn, self._padded_forward(input, self.weight, self.bias))
        weight, bias = self._folded(bn, input)
        # (the folded tensors are this layer's own, made again whenever the tensors they come
        # from change: their version number identifies them, as a frozen layer's weight)
        return self._padded_forward(input, weight, bias, trusted=True)

    def _folded(self, bn: nn.Module, input: Tensor) -> Tuple[Tensor, Tensor]:
        """(weight, bias) with ``bn`` folded in: recorded by autograd or a graph capture, made at
        every call; otherwise kept while the fingerprint of the tensors they are made from stays
        the same (so the folded weight keeps its address, and conv3d its prepared filters)."""
        tensors = _fold_inputs(self, bn)
        if _route(input, tensors[0], self.bias) != _DIRECT or any(
                t.requires_grad for t in tensors) and torch.is_grad_enabled():
            return _fold_batch_norm(self.weight, self.bias, bn)
        key = (bn.eps, _tensors_key(tensors, self.freeze))
        held = self.__dict__.get("_folded_filters")
        if held is not None and held[0] == key and key[1] is not None:
            return held[1]
        with torch.no_grad():
            folded = _fold_batch_norm(self.weight, self.bias, bn)
        self.__dict__["_folded_filters"] = (key, folded)
        return folded

    def _frozen_forward(self, input: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
        fn = "convcore.torch.Conv3d"
        _check_3d(fn, input, weight, bias, self.stride, self.padding, self.dilation, self.groups)
        if input.shape[1] != weight.shape[1] * self.groups:
            raise BadParamError(f"{fn}: input has {input.shape[1]} channels but weight "
                                f"{tuple(weight.shape)} with groups={self.groups} expects "
                                f"{weight.shape[1] * self.groups}")
        out = output_sizes(input.shape[2:], self.padding, weight.shape[2:], self.stride, self.dilation)
        if min(out) < 1:
            raise BadParamError(f"{fn}: the output would be {out} for input {tuple(input.shape[2:])}")
        return _conv3d_run(input, weight, bias, self.stride, self.padding, self.dilation, self.groups,
                           _split_algo(_algo_spec(self._algo))[0],
                           _frozen_filter_version(self, weight))

    def __getstate__(self) -> Any:
        state = super().__getstate__()
        state.pop("_folded_filters", None)  # copies make their own
        state.pop("_prepared_weight", None)
        return state

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size3, stride: Size3 = 1,
                 padding: Union[Size3, str] = 0, dilation: Size3 = 1, groups: int = 1,
                 bias: bool = True, padding_mode: PaddingMode = "zeros", device: Any = None,
                 dtype: Any = None, algo: AlgoSpec = "auto", freeze: bool = False) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype)
        self.algo = algo
        self.freeze = _freeze_arg(freeze)


class _TransposedForward(_AlgoAttribute):
    """The transposed modules' ``algo`` (_transposed_spec's) and forward(input, output_size):
    nn.ConvTranspose*d's output padding, then the functional form (``_functional``)."""

    @staticmethod
    def _check_algo(value: AlgoSpec) -> None:
        _transposed_spec(value)

    def forward(self: Any, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for {type(self).__name__}")
        padding = cast(Tuple[int, ...], self.padding)  # never a string in a transposed module
        output_padding = self._output_padding(input, output_size, list(self.stride),
                                              list(padding), list(self.kernel_size),
                                              len(self.kernel_size), list(self.dilation))
        return self._functional(input, self.weight, self.bias, self.stride, padding,
                                output_padding, self.groups, self.dilation, algo=self._algo)


class ConvTranspose1d(_TransposedForward, nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` computed by convcore: the same constructor, parameters,
    state_dict and ``forward(input, output_size=None)``, plus ``algo`` (conv_transpose2d's)."""

    _functional = staticmethod(conv_transpose1d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size1, stride: Size1 = 1,
                 padding: Size1 = 0, output_padding: Size1 = 0, groups: int = 1, bias: bool = True,
                 dilation: Size1 = 1, padding_mode: Literal["zeros"] = "zeros", device: Any = None,
                 dtype: Any = None, algo: AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, device, dtype)
        self.algo = algo


class ConvTranspose2d(_TransposedForward, nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` computed by convcore: the same constructor, parameters,
    state_dict and ``forward(input, output_size=None)``, plus ``algo`` (conv_transpose2d's)."""

    _functional = staticmethod(conv_transpose2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size2,
                 stride: Size2 = 1, padding: Size2 = 0, output_padding: Size2 = 0,
                 groups: int = 1, bias: bool = True, dilation: Size2 = 1,
                 padding_mode: Literal["zeros"] = "zeros", device: Any = None, dtype: Any = None,
                 algo: AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, device, dtype)
        self.algo = algo


class ConvTranspose3d(_TransposedForward, nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` computed by convcore: the same constructor, parameters,
    state_dict and ``forward(input, output_size=None)``, plus ``algo`` (conv_transpose3d's)."""

    _functional = staticmethod(conv_transpose3d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Size3, stride: Size3 = 1,
                 padding: Size3 = 0, output_padding: Size3 = 0, groups: int = 1, bias: bool = True,
                 dilation: Size3 = 1, padding_mode: Literal["zeros"] = "zeros", device: Any = None,
                 dtype: Any = None, algo: AlgoSpec = "auto") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                         groups, bias, dilation, padding_mode, device, dtype)
        self.algo = algo


def sharing_state(cls, module):
    """A ``cls`` instance that shares ``module``'s whole state (parameters, buffers, hooks, mode;
    its own copies of the dicts that hold them): nothing is allocated, nothing copied."""
    new = cls.__new__(cls)
    for key, value in module.__dict__.items():
        new.__dict__[key] = value.copy() if isinstance(value, dict) else value
    return new
