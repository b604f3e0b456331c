"""Arrays in and out of the bindings: the DLPack import of inputs (in place where possible) and
of outputs, devices and CUDA streams, and new outputs of the input's kind (NumPy, PyTorch,
CuPy)."""

import sys

import numpy as np

from . import _convcore as _C
from ._args import _NATIVE_FLOAT_DTYPES, _SUPPORTED_DTYPE_NAMES
from ._errors import BadParamError, NotSupportedError
from ._library import build_info, cuda_device_count


def _torch_module():
    return sys.modules.get("torch")  # a torch tensor can only exist once torch is imported


def _is_torch_tensor(obj):
    torch = _torch_module()
    return torch is not None and isinstance(obj, torch.Tensor)


def _dlpack_device(obj, name):
    """(DLPack device type, device index) of ``obj``."""
    if isinstance(obj, np.ndarray):
        return (_C.DLPACK_CPU, 0)
    if _is_torch_tensor(obj) and obj.device.type == "cpu":  # fast: torch's __dlpack_device__ is slow
        return (_C.DLPACK_CPU, 0)
    if not hasattr(obj, "__dlpack__"):
        raise BadParamError(
            f"{name}: expected a NumPy array or an object with __dlpack__ (a PyTorch tensor, ...), "
            f"got {type(obj).__name__}")
    if not hasattr(obj, "__dlpack_device__"):
        return (_C.DLPACK_CPU, 0)
    try:
        dev_type, dev_id = obj.__dlpack_device__()
        return (int(dev_type), int(dev_id))
    except Exception as e:  # noqa: BLE001  (e.g. a torch tensor on the meta device)
        raise BadParamError(f"{name}: cannot tell its device through DLPack: {e}") from None


def _export(obj, name, dlpack_stream):
    """Calls obj.__dlpack__ per the protocol (DLPack 1.0 first) and imports the capsule."""
    kwargs = {} if dlpack_stream is None else {"stream": dlpack_stream}
    try:
        if dlpack_stream is None and _is_torch_tensor(obj) and obj.device.type == "cpu":
            # torch.utils.dlpack.to_dlpack: the same tensor, without Tensor.__dlpack__'s few
            # microseconds of Python checks (callers detach inputs and resolve conj/neg bits).
            return _C.DLPackTensor(_torch_module().utils.dlpack.to_dlpack(obj))
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # a producer older than DLPack 1.0
            capsule = obj.__dlpack__(**kwargs)
        return _C.DLPackTensor(capsule)
    except (BufferError, RuntimeError, ValueError, TypeError) as e:
        raise BadParamError(f"{name}: cannot be read through DLPack: {e}") from None


def _check_numpy_dtype(arr, name):
    if arr.dtype.name not in _SUPPORTED_DTYPE_NAMES:
        raise BadParamError(
            f"{name}: dtype {arr.dtype} is not supported; convcore supports float32 and float64")


def _contiguous_copy(obj, name):
    """A packed copy of an input that cannot be read in place."""
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj)
    if _is_torch_tensor(obj):
        return obj.contiguous()
    if _dlpack_device(obj, name)[0] == _C.DLPACK_CPU:
        return np.ascontiguousarray(np.from_dlpack(obj))
    raise BadParamError(f"{name}: must be contiguous (no copy is made for this type of GPU array)")


def _import_input(obj, name, dlpack_stream):
    """The DLPackTensor of an input: in place when possible, else of a packed copy."""
    if type(obj) is np.ndarray and obj.dtype in _NATIVE_FLOAT_DTYPES:
        flags = obj.flags
        if flags.c_contiguous and flags.aligned and flags.writeable:  # the common case, fast
            return _export(obj, name, dlpack_stream)
    if isinstance(obj, np.ndarray):
        _check_numpy_dtype(obj, name)
        if not obj.dtype.isnative:
            obj = obj.astype(obj.dtype.newbyteorder("="))
        if not obj.flags.aligned:  # e.g. np.frombuffer at an odd offset: the C API needs
            obj = obj.copy()       # element-aligned data
    elif _is_torch_tensor(obj):
        if obj.requires_grad:
            obj = obj.detach()
        if obj.is_conj():
            obj = obj.resolve_conj()
        if obj.is_neg():
            obj = obj.resolve_neg()
    try:
        tensor = _export(obj, name, dlpack_stream)
    except BadParamError:
        if not isinstance(obj, np.ndarray):
            raise
        obj = obj.copy()  # e.g. an old NumPy that cannot export read-only arrays
        tensor = _export(obj, name, dlpack_stream)
    if tensor.ndim == 4 and not tensor.has_positive_strides:
        tensor = _export(_contiguous_copy(obj, name), name, dlpack_stream)
    return tensor


def _import_output(out, dlpack_stream):
    if type(out) is np.ndarray and out.dtype in _NATIVE_FLOAT_DTYPES and out.flags.writeable:
        return _export(out, "out", dlpack_stream)  # the common case, fast
    if isinstance(out, np.ndarray):
        if not out.flags.writeable:
            raise BadParamError("out: the array is read-only")
        _check_numpy_dtype(out, "out")
        if not out.dtype.isnative:
            raise BadParamError(f"out: byte order of dtype {out.dtype} is not native")
    elif _is_torch_tensor(out):
        if out.requires_grad:
            raise BadParamError("out: the tensor requires grad; convcore cannot write it in place "
                                "(pass out=tensor.detach() or use convcore.torch for autograd)")
    elif not hasattr(out, "__dlpack__"):
        raise BadParamError(f"out: expected a NumPy array or an object with __dlpack__, "
                            f"got {type(out).__name__}")
    return _export(out, "out", dlpack_stream)


def _is_cupy_array(obj):
    return type(obj).__module__.split(".")[0] == "cupy"


def _torch_memory_format(t):
    """torch.channels_last for a 4-D tensor laid out NHWC (and not NCHW-contiguous too, as a
    tensor with one channel or one pixel is), else torch.contiguous_format."""
    torch = _torch_module()
    if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    return torch.contiguous_format


def _allocate_output(x, shape, dtype, device, follow_layout=False):
    """A new output of the producer's kind: a torch tensor, a CuPy array on x's device, or a
    NumPy array (both CUDA kinds export __dlpack__, so torch/cupy.from_dlpack take them
    without a copy). follow_layout: a torch output takes x's memory format (PyTorch's rule for
    a convolution's output and input gradient: channels_last in, channels_last out)."""
    if _is_torch_tensor(x):
        fmt = _torch_memory_format(x) if follow_layout else _torch_module().contiguous_format
        return _torch_module().empty(shape, dtype=x.dtype, device=x.device, memory_format=fmt)
    if device[0] == _C.DLPACK_CPU:
        return np.empty(shape, dtype=dtype)
    if _is_cupy_array(x):
        import cupy
        with cupy.cuda.Device(device[1]):
            return cupy.empty(shape, dtype=dtype)
    raise NotSupportedError(f"convcore allocates CUDA outputs for PyTorch and CuPy inputs only "
                            f"(x is a {type(x).__module__}.{type(x).__name__}); pass out=")


def _cuda_streams(x, device):
    """(stream for __dlpack__, stream convcore runs on) for a CUDA input, per the DLPack protocol:
    the producer's current stream for torch tensors and CuPy arrays, else the legacy default
    stream."""
    stream = 0
    if _is_torch_tensor(x):
        stream = _torch_module().cuda.current_stream(x.device).cuda_stream
    elif _is_cupy_array(x):
        import cupy
        with cupy.cuda.Device(device[1]):
            stream = cupy.cuda.get_current_stream().ptr
    if cuda_device_count() <= device[1]:
        raise NotSupportedError(
            f"x is on cuda:{device[1]} but convcore sees {cuda_device_count()} CUDA device(s) "
            f"(build info: cuda: {build_info().get('cuda', 'unknown')})")
    # In __dlpack__, 0 is ambiguous and not allowed; 1 names the legacy default stream.
    return (stream if stream != 0 else 1), stream


def _in_layout_of(residual, out):
    """residual, copied into out's layout when it has another (the epilogue reads it as out)."""
    if _is_torch_tensor(residual) and _is_torch_tensor(out) and residual.dim() == 4:
        fmt = _torch_memory_format(out)
        if not residual.is_contiguous(memory_format=fmt):
            return residual.contiguous(memory_format=fmt)
    elif isinstance(residual, np.ndarray) and isinstance(out, np.ndarray):
        if out.flags.c_contiguous and not residual.flags.c_contiguous:
            return np.ascontiguousarray(residual)
    return residual


def _device_name(device):
    dev_type, dev_id = device
    if dev_type == _C.DLPACK_CPU:
        return "cpu"
    if dev_type == _C.DLPACK_CUDA:
        return f"cuda:{dev_id}"
    return f"DLPack device type {dev_type} index {dev_id}"
