"""convcore's exceptions, one per kind of error, the same in convcore and convcore.torch (one per
group of C status codes, convcoreStatus_t).

A bad argument, whatever its kind (a wrong value, shape, type or dtype), raises BadParamError.
BadParamError is also a ValueError and a TypeError, so that code written for NumPy (which raises
ValueError for bad values) or for PyTorch (TypeError for a wrong dtype or type) catches it as it
catches theirs."""

from types import ModuleType
from typing import Dict, Type


class Error(RuntimeError):
    """Base class of every error convcore raises."""


class BadParamError(Error, ValueError, TypeError):
    """Invalid arguments (CONVCORE_STATUS_BAD_PARAM): a wrong shape, value, type or dtype. Also a
    ValueError and a TypeError (what NumPy and PyTorch raise for those)."""


class NotSupportedError(Error):
    """A valid problem that the chosen algorithm or device cannot run (CONVCORE_STATUS_NOT_SUPPORTED)."""


class ExecutionError(Error):
    """The library failed while running: allocation, CUDA/cuBLAS/cuFFT or an internal error
    (CONVCORE_STATUS_ALLOC_FAILED, _EXECUTION_FAILED, _INTERNAL_ERROR)."""


def register(bindings: ModuleType) -> None:
    """Tells the C++ bindings which class to raise for each status code."""
    classes: Dict[int, Type[Error]] = {
        bindings.STATUS_BAD_PARAM: BadParamError,
        bindings.STATUS_NOT_SUPPORTED: NotSupportedError,
        bindings.STATUS_ALLOC_FAILED: ExecutionError,
        bindings.STATUS_EXECUTION_FAILED: ExecutionError,
        bindings.STATUS_INTERNAL_ERROR: ExecutionError,
    }
    bindings._set_error_classes(classes)
