"""convert(fuse=True)'s 1x1 -> depthwise pairs: a 1x1 Conv2d and the depthwise Conv2d after it
(MobileNetV2's and EfficientNet's expansion then depthwise layers) run as one by convcore's
fused pair (the 1x1's output stays in cache), eagerly or as the operator
``convcore::pointwise_depthwise`` in a graph traced without autograd."""

import functools
import threading
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor, nn

from . import _convcore as _C
from ._args import ACTIVATIONS
from ._dlpack import _torch_memory_format
from ._errors import BadParamError, NotSupportedError
from ._shapes import output_size
from ._torch_fold import _fold_batch_norm, _tensors_key
from ._torch_fuse import (_PASSING_ON, _SEQUENTIALS, _PairSequential, _global_hooks, _hooked,
                          _plain_sequential)
from ._torch_modules import Conv2d, sharing_state
from ._torch_ops import _DIRECT, _KERNELS, _conv2d_impl, _filter_versions, _route


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
    return torch.empty((n, k, output_size(h, padding[0], r, stride[0], dilation[0]),
                        output_size(wd, padding[1], s, stride[1], dilation[1])),
                       dtype=x.dtype, device=x.device, memory_format=_torch_memory_format(x))


_PAIR_DTYPES = (torch.float32, torch.float64)


class _PairPlan:
    """The binding's fused pair for one pair of weights (their addresses and shapes) and one
    depthwise geometry, with the number that identifies the contents its filters were prepared
    from."""

    def __init__(self, stride, padding, dilation, groups):
        self.impl = _C.PointwiseDepthwise(_C.ConvParams(
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
        y = torch.empty((n, second[0].shape[0], output_size(h, padding[0], r, stride[0], dilation[0]),
                         output_size(w, padding[1], s, stride[1], dilation[1])),
                        dtype=x.dtype, memory_format=torch.channels_last)
        to_dlpack = torch.utils.dlpack.to_dlpack
        try:
            self.impl.forward(
                to_dlpack(x), to_dlpack(y), to_dlpack(first[0]),
                None if first[1] is None else to_dlpack(first[1].contiguous()), ACTIVATIONS[first[2]],
                to_dlpack(second[0]), None if second[1] is None else to_dlpack(second[1].contiguous()),
                ACTIVATIONS[second[2]], version)
        except (NotSupportedError, BadParamError):
            return None
        return y


@functools.lru_cache(maxsize=256)
def _pair_of_weights(pw_address, pw_shape, dw_address, dw_shape, stride, padding, dilation):
    return _PairPlan(stride, padding, dilation, dw_shape[0])


def _is_pointwise(conv):
    return (conv.kernel_size == (1, 1) and conv.stride == (1, 1) and conv.padding == (0, 0)
            and conv.groups == 1 and conv.padding_mode == "zeros")


def _is_depthwise_of(conv, pw):
    return (conv.in_channels == conv.out_channels == conv.groups == pw.out_channels
            and type(conv.padding) is tuple and conv.padding_mode == "zeros")


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
        new = sharing_state(_PairSequential, seq)
    new.__dict__["_pointwise_depthwise"] = pairs
    return new


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
