"""convcore.torch's arguments: the types of its public signatures, the ``algo`` specs (one name, or
a triple of the three passes' algorithms), the epilogue's activation names, and the checks of
tensors' dtypes, devices and ranks (each error a convcore error naming the argument)."""

import enum
import functools
from typing import Literal, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from . import _args, _enums
from ._args import ACTIVATIONS
from ._enums import Algo
from ._errors import BadParamError, NotSupportedError


# The types of the public signatures: an int or an (h, w) pair (for nn.Conv2d as torch's
# _size_2_t), padding_mode (nn.Conv2d's) and algo= (see convcore.torch's docstring).
IntOrPair = Union[int, Sequence[int]]
Size2 = Union[int, Tuple[int, int]]
PaddingMode = Literal["zeros", "reflect", "replicate", "circular"]
AlgoSpec = Union[str, enum.Enum, Sequence[Union[str, enum.Enum]]]

# convcore.SUPPORTED_DTYPES (NumPy dtypes) as torch dtypes: torch.float32 and torch.float64.
SUPPORTED_DTYPES: Tuple[torch.dtype, ...] = tuple(getattr(torch, d.name) for d in _args.SUPPORTED_DTYPES)
_SUPPORTED_DEVICES = ("cpu", "cuda")


# ---- algorithms ------------------------------------------------------------------------------------

_PASSES = ("forward", "backward data", "backward filter")


def _pass_enums():
    """The algorithm enums of the three passes (None for a build without backward passes)."""
    return (Algo, getattr(_enums, "BwdDataAlgo", None), getattr(_enums, "BwdFilterAlgo", None))


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


# ---- activations ---------------------------------------------------------------------------------

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
    if type(activation) is str and activation in ACTIVATIONS:  # the common case, fast
        return activation
    if activation is None:
        return "identity"
    if isinstance(activation, str) and activation.strip().lower() in ACTIVATIONS:
        return activation.strip().lower()
    raise BadParamError(f"activation: expected one of "
                        f"{', '.join(repr(a) for a in ACTIVATIONS)}, got {activation!r}")


# ---- tensors -------------------------------------------------------------------------------------

def _check_tensor_types(fn, x, w, bias):
    """Each of input, weight and bias (or None) a tensor of a supported dtype on a supported
    device, all of one dtype and on one device."""
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


def _check_tensors(fn, x, w, bias):
    """Dtype, device and rank checks of a 2-D call: a clear error, never a silent conversion."""
    _check_tensor_types(fn, x, w, bias)
    if x.dim() != 4:
        raise BadParamError(f"{fn}: input must be 4-D (N, C, H, W), got shape {tuple(x.shape)}")
    if w.dim() != 4:
        raise BadParamError(f"{fn}: weight must be 4-D (K, C/groups, R, S), got shape "
                            f"{tuple(w.shape)}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w.shape[0]):
        raise BadParamError(f"{fn}: bias must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


def _check_residual(fn, x, residual):
    if not isinstance(residual, Tensor):
        raise BadParamError(f"{fn}: residual must be a torch.Tensor, got {type(residual).__name__}")
    if residual.dtype != x.dtype or residual.device != x.device:
        raise BadParamError(f"{fn}: residual is {residual.dtype} on {residual.device} but input is "
                            f"{x.dtype} on {x.device}; they must be equal")


def _freeze_arg(freeze):
    if not isinstance(freeze, bool):
        raise BadParamError(f"freeze: expected a bool, got {freeze!r}")
    return freeze
