"""convcore's exceptions, one per group of C status codes (convcoreStatus_t)."""


class Error(RuntimeError):
    """Base class of every error convcore raises."""


class BadParamError(Error, ValueError):
    """Invalid arguments (CONVCORE_STATUS_BAD_PARAM): a wrong shape, dtype or value."""


class NotSupportedError(Error):
    """A valid problem that the chosen algorithm or device cannot run (CONVCORE_STATUS_NOT_SUPPORTED)."""


class ExecutionError(Error):
    """The library failed while running: allocation, CUDA/cuBLAS/cuFFT or an internal error
    (CONVCORE_STATUS_ALLOC_FAILED, _EXECUTION_FAILED, _INTERNAL_ERROR)."""


def register(bindings):
    """Tells the C++ bindings which class to raise for each status code."""
    bindings._set_error_classes({
        bindings.STATUS_BAD_PARAM: BadParamError,
        bindings.STATUS_NOT_SUPPORTED: NotSupportedError,
        bindings.STATUS_ALLOC_FAILED: ExecutionError,
        bindings.STATUS_EXECUTION_FAILED: ExecutionError,
        bindings.STATUS_INTERNAL_ERROR: ExecutionError,
    })
