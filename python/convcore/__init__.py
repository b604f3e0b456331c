"""convcore: convolution algorithms (classic and from recent papers) behind a cuDNN-style API.

    import convcore
    conv = convcore.Convolution(convcore.ConvDesc(padding=1))
    y = conv.forward(x, w)                      # NumPy arrays or DLPack tensors (PyTorch, ...)
    conv.applicable_algos(x.shape, w.shape)     # ['im2col_gemm', 'implicit_gemm', 'direct', ...]
    y = conv.forward(x, w, algo="im2col_gemm")  # or convcore.Algo.IM2COL_GEMM
    y = convcore.conv2d(x, w, b, padding=1)     # torch.nn.functional.conv2d's arguments
"""

import os as _os
from typing import Optional as _Optional

_SKYLAKEX_FLAGS = frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"})


def _openblas_kernels_for_this_cpu() -> _Optional[str]:
    """Debian's OpenBLAS 0.3.21 does not recognise recent AVX-512 CPUs (e.g. AMD Zen 5) and falls
    back to its Haswell (AVX2) kernels at about half the speed. The OpenBLAS kernels to ask for
    instead: "SKYLAKEX" when the CPU has the AVX-512 subsets they use and OPENBLAS_CORETYPE is
    not set (a value the user set is left alone), else None."""
    if "OPENBLAS_CORETYPE" in _os.environ:
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    return "SKYLAKEX" if _SKYLAKEX_FLAGS <= set(flags) else None


def _load_extension(coretype: _Optional[str]) -> None:
    """Imports the bindings (which load libconvcore and its OpenBLAS). OpenBLAS reads
    OPENBLAS_CORETYPE once, when it is loaded: with ``coretype`` it is set for that moment only,
    and the environment is left as it was (no process-wide side effect, none for subprocesses)."""
    if coretype is None:
        from . import _convcore  # noqa: F401
        return
    _os.environ["OPENBLAS_CORETYPE"] = coretype
    try:
        from . import _convcore  # noqa: F401,F811
    finally:
        del _os.environ["OPENBLAS_CORETYPE"]


# The OpenBLAS kernels convcore chose ("SKYLAKEX"), or None: the environment's OPENBLAS_CORETYPE
# or OpenBLAS's own detection decided. build_info()["blas"] names the kernels in use.
openblas_coretype_chosen: _Optional[str] = _openblas_kernels_for_this_cpu()
_load_extension(openblas_coretype_chosen)

from . import _convcore  # noqa: E402  (loaded above, with the kernels chosen)
from ._errors import BadParamError, Error, ExecutionError, NotSupportedError  # noqa: E402
from . import _errors  # noqa: E402

_errors.register(_convcore)

from ._args import SUPPORTED_DTYPES  # noqa: E402  (the error classes must be registered first)
from ._enums import Algo, AlgorithmInfo, BwdDataAlgo, BwdFilterAlgo, algorithm_info  # noqa: E402
from ._library import (  # noqa: E402
    build_info,
    clear_find_cache,
    clear_plan_cache,
    cmake_prefix_path,
    cuda_device_count,
    find_stats,
    plan_cache_info,
    set_num_threads,
    set_plan_cache_capacity,
)
from ._api import ConvDesc, Convolution, FindResult, conv2d  # noqa: E402

__version__: str = _convcore.version()

__all__ = [
    "Algo", "BwdDataAlgo", "BwdFilterAlgo", "AlgorithmInfo", "algorithm_info", "ConvDesc",
    "Convolution", "FindResult", "conv2d", "SUPPORTED_DTYPES",
    "find_stats", "clear_find_cache", "plan_cache_info", "set_plan_cache_capacity", "clear_plan_cache",
    "Error", "BadParamError", "NotSupportedError", "ExecutionError",
    "build_info", "cuda_device_count", "cmake_prefix_path", "set_num_threads", "__version__",
]
