"""Argument parsing of convcore's Python API: the types of its public signatures, and the checks
and conversions of padding, stride, dilation, groups, shapes, scalars, dtypes, devices,
activations and filter versions (each error a BadParamError that names the argument)."""

import enum
import math
import operator
from typing import Any, Sequence, Tuple, Union

import numpy as np

from . import _convcore as _C
from ._errors import BadParamError


# The types of the public signatures. Arrays are NumPy arrays or any object with __dlpack__
# (PyTorch, CuPy, JAX, ...): Any, since no protocol type covers what DLPack producers return.
Array = Any
IntPair = Union[int, Tuple[int, int], Sequence[int]]  # an int, or an (h, w) pair
Shape = Sequence[int]
AlgoArg = Union[str, enum.Enum]  # a member of the direction's enum, its name, "auto" or "find"
DTypeArg = Any  # "float32", "float64", a NumPy dtype or scalar type, a torch.dtype
DeviceArg = Any  # "cpu", "cuda", "cuda:<index>" or a torch.device

# The dtypes convcore computes in, as NumPy dtypes (they compare equal to their names:
# np.dtype("float32") == "float32"). convcore.torch.SUPPORTED_DTYPES holds the same two as
# torch dtypes.
SUPPORTED_DTYPES: Tuple[np.dtype, ...] = (np.dtype(np.float32), np.dtype(np.float64))
_SUPPORTED_DTYPE_NAMES = tuple(d.name for d in SUPPORTED_DTYPES)
_NATIVE_FLOAT_DTYPES = SUPPORTED_DTYPES  # (native byte order: a ">f4" array is not among them)
MODES = {"cross_correlation": _C.CROSS_CORRELATION, "convolution": _C.CONVOLUTION}
_MAX_PARAM = 2 ** 40  # the C API's limit on padding, stride and dilation

# The fused epilogue's activations (convcoreActivationMode_t): "gelu" is GELU's erf form (PyTorch's
# nn.GELU()), "gelu_tanh" its tanh approximation (nn.GELU(approximate="tanh")).
ACTIVATIONS = {"identity": 0, "relu": 1, "relu6": 2, "silu": 3, "gelu": 4, "gelu_tanh": 5}


def _activation_arg(activation):
    code = ACTIVATIONS.get(activation) if type(activation) is str else None  # the common case, fast
    if code is not None:
        return code
    if activation is None:
        return 0
    if isinstance(activation, str) and activation.strip().lower() in ACTIVATIONS:
        return ACTIVATIONS[activation.strip().lower()]
    raise BadParamError(f"activation: expected one of {', '.join(repr(a) for a in ACTIVATIONS)}, "
                        f"got {activation!r}")


def _int_arg(name, value, minimum):
    if isinstance(value, bool):
        raise BadParamError(f"{name}: expected an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise BadParamError(f"{name}: expected an int or a pair of ints, got {value!r}") from None
    if v < minimum:
        raise BadParamError(f"{name}: must be >= {minimum}, got {v}")
    if v > _MAX_PARAM:
        raise BadParamError(f"{name}: must be <= 2**40, got {v}")
    return v


def _pair_arg(name, value, minimum):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise BadParamError(f"{name}: expected an int or a pair of ints, got {value!r}")
        return (_int_arg(name, value[0], minimum), _int_arg(name, value[1], minimum))
    v = _int_arg(name, value, minimum)
    return (v, v)


def _spatial_dims_arg(spatial_dims, **values):
    """1, 2 or 3: ``spatial_dims``, else the length of the sequences among ``values`` (which
    must agree), else 2."""
    lengths = {}
    for name, value in values.items():
        if isinstance(value, (tuple, list)):
            if not 1 <= len(value) <= 3:
                raise BadParamError(f"{name}: expected an int or 1 to 3 ints (one per spatial "
                                    f"dimension), got {value!r}")
            lengths[name] = len(value)
    if spatial_dims is None:
        if len(set(lengths.values())) > 1:
            raise BadParamError("padding, stride and dilation give different numbers of spatial "
                                "dimensions (" + ", ".join(f"{k}: {v}" for k, v in lengths.items())
                                + "): give one value per dimension")
        spatial_dims = next(iter(lengths.values()), 2)
    if spatial_dims not in (1, 2, 3) or isinstance(spatial_dims, bool):
        raise BadParamError(f"spatial_dims: expected 1, 2 or 3, got {spatial_dims!r}")
    return spatial_dims


def _dims_arg(name, value, minimum, dims):
    """A tuple of ``dims`` ints from an int or a sequence of ``dims`` ints."""
    if dims == 2:
        return _pair_arg(name, value, minimum)
    if isinstance(value, (tuple, list)):
        if len(value) != dims:
            raise BadParamError(f"{name}: expected an int or {dims} ints, got {value!r}")
        return tuple(_int_arg(name, v, minimum) for v in value)
    return (_int_arg(name, value, minimum),) * dims


def _scalar_arg(name, value):
    if type(value) is float and math.isfinite(value):  # the common case, fast
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise BadParamError(f"{name}: expected a real number, got {value!r}") from None
    if not np.isfinite(v):
        raise BadParamError(f"{name}: must be finite, got {v}")
    return v


def _shape_arg(name: str, shape: Any) -> Tuple[int, ...]:
    if hasattr(shape, "shape") and not isinstance(shape, (tuple, list)):
        shape = shape.shape  # an array was passed: use its shape
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise BadParamError(f"{name}: expected a sequence of ints, got {shape!r}") from None
    if any(not -2 ** 63 <= d < 2 ** 63 for d in dims):
        raise BadParamError(f"{name}: sizes must fit in 64 bits, got {dims}")
    return dims


def _dtype_arg(dtype):
    if isinstance(dtype, str):
        name = dtype
    else:
        name = str(dtype).replace("torch.", "")
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name in ("float", "float32", "f4", "single"):
        return "float32"
    if name in ("double", "float64", "f8"):
        return "float64"
    raise BadParamError(f"dtype: {dtype!r} is not supported; convcore supports float32 and float64")


def _device_arg(device):
    """(C device type, index) from "cpu", "cuda", "cuda:1" or a torch.device."""
    text = str(device).strip().lower()
    if text == "cpu":
        return _C.DEVICE_CPU, 0
    if text == "cuda":
        return _C.DEVICE_CUDA, 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return _C.DEVICE_CUDA, int(text[5:])
    raise BadParamError(f"device: expected 'cpu', 'cuda' or 'cuda:<index>', got {device!r}")


def _filter_version_arg(filter_version):
    """The bindings' filter_version code: FILTERS_PER_CALL, FILTERS_CHECKED or a number >= 0."""
    if filter_version is None:
        return _C.FILTERS_PER_CALL
    if isinstance(filter_version, str):
        if filter_version == "check":
            return _C.FILTERS_CHECKED
        raise BadParamError(f"filter_version: expected None, 'check' or an int >= 0, got {filter_version!r}")
    return _int_arg("filter_version", filter_version, 0)
