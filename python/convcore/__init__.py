"""convcore: convolution algorithms (classic and from recent papers) behind a cuDNN-style API.

    import convcore
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    y = conv.forward(x, w)                      # NumPy arrays or DLPack tensors (PyTorch, ...)
    conv.applicable_algos(x.shape, w.shape)     # ['im2col_gemm', 'implicit_gemm', 'direct', ...]
    y = conv.forward(x, w, algo="im2col_gemm")  # or convcore.Algo.IM2COL_GEMM
"""

import os as _os


def _pick_openblas_kernels():
    """Debian's OpenBLAS 0.3.21 does not recognise recent AVX-512 CPUs (e.g. AMD Zen 5) and falls
    back to its Haswell (AVX2) kernels at about half the speed. OpenBLAS reads OPENBLAS_CORETYPE
    once, when libconvcore loads it, so choose here: SkylakeX kernels when the CPU has the
    AVX-512 subsets they use. A value the user set is left alone."""
    if "OPENBLAS_CORETYPE" in _os.environ:
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= set(flags):
        _os.environ["OPENBLAS_CORETYPE"] = "SKYLAKEX"
        return "SKYLAKEX"


# The OpenBLAS kernels convcore chose (None: the environment's OPENBLAS_CORETYPE, or
# OpenBLAS's own detection, decided).
openblas_coretype_chosen = _pick_openblas_kernels()

from ._errors import BadParamError, Error, ExecutionError, NotSupportedError  # noqa: E402
from . import _convcore, _errors

_errors.register(_convcore)

from ._api import (  # noqa: E402  (the error classes must be registered first)
    Algo,
    AlgorithmInfo,
    BwdDataAlgo,
    BwdFilterAlgo,
    ConvDesc,
    Convolution,
    FindResult,
    algorithm_info,
    build_info,
    clear_find_cache,
    cmake_prefix_path,
    conv2d,
    cuda_device_count,
    find_stats,
    set_num_threads,
)

__version__ = _convcore.version()

__all__ = [
    "Algo", "BwdDataAlgo", "BwdFilterAlgo", "AlgorithmInfo", "algorithm_info", "ConvDesc",
    "Convolution", "FindResult", "conv2d",
    "find_stats", "clear_find_cache",
    "Error", "BadParamError", "NotSupportedError", "ExecutionError",
    "build_info", "cuda_device_count", "cmake_prefix_path", "set_num_threads", "__version__",
]
