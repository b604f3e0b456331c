"""What the loaded library was built with, and the process-wide settings and caches: build_info,
cuda_device_count, cmake_prefix_path, set_num_threads, Find's statistics and in-process cache,
and the plan cache."""

import os
from typing import Dict

from . import _convcore as _C
from ._args import _int_arg
from ._errors import BadParamError


def build_info() -> Dict[str, str]:
    """What this build was compiled with (convcoreGetBuildInfo), as a dict: version, compiler,
    openmp, blas, fft, cuda, ..."""
    info = {}
    for line in _C.build_info().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def cuda_device_count() -> int:
    """CUDA devices visible to convcore; 0 without the CUDA backend or without a GPU."""
    return _C.cuda_device_count()


def cmake_prefix_path() -> str:
    """The installed package directory: add it to CMAKE_PREFIX_PATH so that
    ``find_package(convcore)`` finds lib/cmake/convcore/convcoreConfig.cmake."""
    return os.path.dirname(os.path.abspath(__file__))


def set_num_threads(n: int) -> None:
    """CPU threads used by convcore calls made from the calling Python thread (0: OpenMP's
    default, usually every core)."""
    _C.set_num_threads(_int_arg("n", n, 0))


def find_stats() -> Dict[str, int]:
    """What Find did in this process: {"timed_runs": (problem, algorithm) pairs timed,
    "db_hits": Find calls answered from the find-db or the in-process cache, timing nothing}."""
    timed, hits = _C.find_stats()
    return {"timed_runs": timed, "db_hits": hits}


def clear_find_cache() -> None:
    """Forgets the in-process cache of Find results: the next Find reads the find-db again."""
    _C.clear_find_cache()


def plan_cache_info() -> Dict[str, int]:
    """The plan cache of this thread's CPU handle, where convcore keeps every call's plan, the
    filters it prepared and its workspace: capacity, plans, hits, misses, filter_preparations,
    prepared_filter_bytes, workspace_bytes, workspace_allocations (convcoreGetPlanCacheInfo)."""
    return dict(_C.plan_cache_info())


def clear_plan_cache() -> None:
    """Drops the plans and kept filters of this thread's CPU handle (they are made again on use)."""
    _C.clear_plan_cache()


def set_plan_cache_capacity(capacity: int) -> None:
    """The most plans this thread's CPU handle keeps (default 1024, or the environment variable
    CONVCORE_PLAN_CACHE_CAPACITY); the least recently used go first, 0 keeps none."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise BadParamError(f"capacity: expected an int >= 0, got {capacity!r}")
    _C.set_plan_cache_capacity(capacity)
