"""The algorithms of each pass as enums made from the compiled library's own list (Algo,
BwdDataAlgo, BwdFilterAlgo), their names and C ids, and what the library declares about each
(algorithm_info)."""

import collections
import enum
from typing import TYPE_CHECKING, Any, List

import numpy as np

from . import _convcore as _C
from ._args import AlgoArg, DTypeArg
from ._errors import BadParamError


def _algo_enum(name: str, names: List[str]) -> Any:
    """An enum of the compiled library's algorithms of one pass, in C enum order."""
    return enum.Enum(name, [(n, i) for i, n in enumerate(names)], module=__name__, qualname=name)


# The enums come from the compiled library's list (made from algorithms.def), so they always match
# the library this module runs on. Type checkers see _algorithms.pyi instead: the same members,
# generated from algorithms.def by tools/gen_algo_enums.py (tests/python/test_algo_enums.py
# checks that the two agree).
if TYPE_CHECKING:
    from ._algorithms import Algo as Algo, BwdDataAlgo as BwdDataAlgo, BwdFilterAlgo as BwdFilterAlgo
else:
    Algo = _algo_enum("Algo", _C.algo_names())
    BwdDataAlgo = _algo_enum("BwdDataAlgo", _C.bwd_algo_names(_C.BACKWARD_DATA))
    BwdFilterAlgo = _algo_enum("BwdFilterAlgo", _C.bwd_algo_names(_C.BACKWARD_FILTER))


Algo.__doc__ = """The forward algorithms; members mirror the C enum convcoreConvolutionFwdAlgo_t.

``algo=`` accepts a member (``Algo.IM2COL_GEMM``) or its name as a string, case-insensitive
(``"im2col_gemm"``), or ``"auto"`` for the heuristic's first applicable choice. Convolution.forward
also takes ``"find"``: the fastest by Find (timed once per machine, kept in the find-db)."""


def _algo_names_lower():
    return [a.name.lower() for a in Algo]


def _algo_id(algo):
    """The C enum value for ``algo``; _C.ALGO_AUTO for "auto", _C.ALGO_FIND for "find" (the C
    API's CONVCORE_PLAN_SELECT_MEASURED and _FIND)."""
    algo_id = _ALGO_IDS.get(algo) if type(algo) is str else None  # the common case, fast
    if algo_id is not None:
        return algo_id
    if isinstance(algo, Algo):
        return algo.value
    if isinstance(algo, str):
        key = algo.strip().upper()
        if key == "AUTO":
            return _C.ALGO_AUTO
        if key == "FIND":
            return _C.ALGO_FIND
        if key in Algo.__members__:
            return Algo[key].value
    valid = ", ".join(["auto", "find"] + _algo_names_lower())
    raise BadParamError(f"algo: unknown algorithm {algo!r}; valid names: {valid}")


# Exact spellings -> ids, for the per-call fast path of _algo_id.
_ALGO_IDS = {"auto": _C.ALGO_AUTO, "AUTO": _C.ALGO_AUTO, "find": _C.ALGO_FIND, "FIND": _C.ALGO_FIND,
             **{a.name: a.value for a in Algo}, **{a.name.lower(): a.value for a in Algo}}
BwdDataAlgo.__doc__ = """The backward-data algorithms (dx from w and dy); members mirror the C enum
convcoreConvolutionBwdDataAlgo_t. ``algo=`` of Convolution.backward_data accepts a member, its name
as a string (case-insensitive), ``"auto"`` or ``"find"`` (Find's fastest)."""
BwdFilterAlgo.__doc__ = """The backward-filter algorithms (dw from x and dy); members mirror the C
enum convcoreConvolutionBwdFilterAlgo_t. ``algo=`` of Convolution.backward_filter accepts a member,
its name as a string (case-insensitive), ``"auto"`` or ``"find"`` (Find's fastest)."""

# direction= of applicable_algos / workspace_size: (enum, C direction code; 0 is forward).
_DIRECTIONS = {"forward": (Algo, 0), "backward_data": (BwdDataAlgo, _C.BACKWARD_DATA),
               "backward_filter": (BwdFilterAlgo, _C.BACKWARD_FILTER)}


def _direction_arg(direction):
    if isinstance(direction, str) and direction in _DIRECTIONS:
        return _DIRECTIONS[direction]
    raise BadParamError(f"direction: expected 'forward', 'backward_data' or 'backward_filter', "
                        f"got {direction!r}")


def _enum_algo_id(algo, enum_cls):
    """The C enum value of ``algo`` in ``enum_cls`` (a member of that enum, a member of another
    direction's enum with the same name, or a name); _C.ALGO_AUTO for "auto", _C.ALGO_FIND for
    "find"."""
    if isinstance(algo, enum_cls):
        return algo.value
    if isinstance(algo, enum.Enum) and algo.name in enum_cls.__members__:
        return enum_cls[algo.name].value
    if isinstance(algo, str):
        key = algo.strip().upper()
        if key == "AUTO":
            return _C.ALGO_AUTO
        if key == "FIND":
            return _C.ALGO_FIND
        if key in enum_cls.__members__:
            return enum_cls[key].value
    valid = ", ".join(["auto", "find"] + [a.name.lower() for a in enum_cls])
    raise BadParamError(f"algo: unknown {enum_cls.__name__} algorithm {algo!r}; valid names: {valid}")


def _algo_for(enum_cls, algo_id):
    """The algo= argument for a C algorithm id (ALGO_AUTO "auto", ALGO_FIND "find")."""
    return "auto" if algo_id == _C.ALGO_AUTO else "find" if algo_id == _C.ALGO_FIND else enum_cls(algo_id)


class AlgorithmInfo(collections.namedtuple(
        "AlgorithmInfo", "name direction on_cpu on_cuda error_bound_float32 error_bound_float64 deterministic")):
    """What convcore declares about one algorithm of one direction (the library's one list of
    algorithms): the devices it runs on, the relative error ||out - ref|| / ||ref|| against a
    float64 reference that convcore's tests hold it to, per dtype, and whether it is deterministic."""

    name: str
    direction: str
    on_cpu: bool
    on_cuda: bool
    error_bound_float32: float
    error_bound_float64: float
    deterministic: bool

    def error_bound(self, dtype: DTypeArg) -> float:
        """The bound for ``dtype`` ("float32", "float64" or a NumPy dtype)."""
        return self.error_bound_float64 if np.dtype(dtype) == np.float64 else self.error_bound_float32


def algorithm_info(algo: AlgoArg, direction: str = "forward") -> AlgorithmInfo:
    """The AlgorithmInfo of ``algo`` (a name or enum member) in ``direction`` ("forward",
    "backward_data" or "backward_filter")."""
    enum_cls, code = _direction_arg(direction)
    algo_id = _enum_algo_id(algo, enum_cls)
    if algo_id < 0:
        raise BadParamError(f"algo: {algo!r} chooses an algorithm; name one")
    name, on_cpu, on_cuda, f32, f64, deterministic = _C.algorithm_info(code, algo_id)
    return AlgorithmInfo(name.lower(), direction, on_cpu, on_cuda, f32, f64, deterministic)
