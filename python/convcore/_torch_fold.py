"""Batch norm and group norm applied by the convolution before them (convert(fuse=True)): a batch
norm in eval mode folded into the convolution's weights and bias, what identifies the tensors it
is folded from (so the folded filters are kept while they stay the same), and a group norm and
activation applied to a layer's own output in place."""

from typing import Callable, Dict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _convcore as _C
from ._torch_ops import _apply_activation, _captured


_BATCH_NORM_FORWARD = nn.BatchNorm2d.forward  # (_BatchNorm's: every dimension)
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
    return _C.fingerprint_tensors([torch.utils.dlpack.to_dlpack(t) for t in tensors])
