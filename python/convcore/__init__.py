"""convcore: convolution algorithms (classic and from recent papers) behind a cuDNN-style API.

    import convcore
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    y = conv.forward(x, w)                      # NumPy arrays or DLPack tensors (PyTorch, ...)
    conv.applicable_algos(x.shape, w.shape)     # ['im2col_gemm', 'implicit_gemm', 'direct', ...]
    y = conv.forward(x, w, algo="im2col_gemm")  # or convcore.Algo.IM2COL_GEMM
"""

from ._errors import BadParamError, Error, ExecutionError, NotSupportedError
from . import _convcore, _errors

_errors.register(_convcore)

from ._api import (  # noqa: E402  (the error classes must be registered first)
    Algo,
    BwdDataAlgo,
    BwdFilterAlgo,
    ConvDesc,
    Convolution,
    build_info,
    cmake_prefix_path,
    conv2d,
    cuda_device_count,
    set_num_threads,
)

__version__ = _convcore.version()

__all__ = [
    "Algo", "BwdDataAlgo", "BwdFilterAlgo", "ConvDesc", "Convolution", "conv2d",
    "Error", "BadParamError", "NotSupportedError", "ExecutionError",
    "build_info", "cuda_device_count", "cmake_prefix_path", "set_num_threads", "__version__",
]
