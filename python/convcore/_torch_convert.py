"""convcore.torch.convert and refresh: torch.nn's convolutions (and the subclasses that compute as
they do) replaced in place by convcore's, sharing their state, with fuse=True's fusion
(convcore/_torch_fuse.py, _torch_pair.py, _torch_graph_fuse.py)."""

import functools
from typing import Any, Optional, cast

from torch import nn

from ._errors import BadParamError
from ._torch_args import AlgoSpec, _freeze_arg
from ._torch_fuse import _fuse_sequential, _plain_sequential
from ._torch_graph_fuse import _fuse_graph
from ._torch_modules import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                             sharing_state)
from ._torch_pair import _pair_sequential

# What convert() replaces: the exact torch classes, and their convcore classes
CONVERTED: dict = {nn.Conv1d: Conv1d, nn.ConvTranspose1d: ConvTranspose1d, nn.ConvTranspose2d: ConvTranspose2d,
                   nn.Conv3d: Conv3d, nn.ConvTranspose3d: ConvTranspose3d, nn.Conv2d: Conv2d}


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
    fused forwards guarded per call signature and traced at the first call of each
    (convcore/_torch_graph_fuse.py; docs/torch.md): a call the fusion was not made for runs the
    module's own forward.

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
    if isinstance(module, tuple(CONVERTED.values())):
        cast(Any, module).algo = algo
        if isinstance(module, (Conv1d, Conv3d)):
            module.freeze = freeze
        return module
    cls = convcore_class(module)
    if cls is not None and issubclass(cls, Conv2d):
        new = _converted_conv2d(module, algo, cls)
        new.freeze = freeze
        return new
    if cls is not None:
        new = converted(module, algo, cls)
        if isinstance(new, (Conv1d, Conv3d)):
            new.freeze = freeze
        return new
    for name, child in module.named_children():
        new_child = _convert(child, algo, fuse, freeze)
        if new_child is not child:
            setattr(module, name, new_child)
    if fuse and _plain_sequential(module):
        _fuse_sequential(module)
        module = _pair_sequential(module)
    return module


def refresh(module: nn.Module) -> nn.Module:
    """Makes every convcore Conv2d, Conv1d and Conv3d in ``module`` transform its filters again
    at its next call.
    Needed only with ``freeze=True``, after changing weights in a way their version counter does
    not see (``weight.data`` writes, in-place changes to tensors made under inference_mode).
    Returns ``module``."""
    for layer in module.modules():
        if isinstance(layer, (Conv2d, Conv1d, Conv3d)):
            layer.__dict__.pop("_prepared_weight", None)
            layer.__dict__.pop("_folded_filters", None)
            layer.__dict__.pop("_pair_filters", None)
    return module


def _converted_conv2d(conv, algo, cls):
    """A convcore Conv2d (``cls``) sharing the state of ``conv`` (an nn.Conv2d), with nothing fused."""
    new = sharing_state(cls, conv)  # nothing is allocated, nothing is copied
    new.algo = algo
    new.activation = "identity"
    new._has_fused_batch_norm = False
    return new


def convcore_class(module: nn.Module) -> Optional[type]:
    """The convcore class that convert() gives ``module``: CONVERTED's for a torch.nn
    convolution; for a subclass of one that computes as its base (it overrides no method of the
    base but the constructor, e.g. torchvision's Conv3DSimple, which adds a static method), a
    class deriving from both, so the module keeps its own methods and isinstance; None for
    anything else (a subclass with its own forward stays as it is)."""
    cls = type(module)
    if cls in CONVERTED:
        return CONVERTED[cls]
    for base, target in CONVERTED.items():
        if issubclass(cls, base) and not issubclass(cls, target) and _computes_as(cls, base):
            return _converted_subclass(target, cast(Any, cls))
    return None


def _computes_as(cls, base):
    """Whether ``cls`` inherits every method of ``base`` and of its bases up to nn.Module
    (forward, _conv_forward, _output_padding, ...), its constructor aside."""
    for klass in base.__mro__:
        if klass is nn.Module:
            return True
        for name, value in vars(klass).items():
            if callable(value) and name != "__init__" and getattr(cls, name) is not getattr(base, name):
                return False
    return True


@functools.lru_cache(maxsize=None)
def _converted_subclass(target, original):
    """The class of a converted ``original`` (a subclass of a torch.nn convolution): convcore's
    ``target`` first, then ``original`` for its own methods. Pickled by _rebuild_converted."""
    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        return _rebuild_converted, (target, original), self.__getstate__()

    return type(original.__name__, (target, original),
                {"__module__": original.__module__, "__qualname__": original.__qualname__,
                 "__reduce_ex__": __reduce_ex__})


def _rebuild_converted(target, original):
    cls = _converted_subclass(target, original)
    return cls.__new__(cls)


def converted(module, algo, cls=None):
    """A convcore module of ``module``'s class (``cls``: convcore_class's) that shares its whole
    state (sharing_state)."""
    new = sharing_state(cls or convcore_class(module), module)
    new.algo = algo
    return new
