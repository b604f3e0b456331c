# GENERATED FILE: do not edit by hand. Written by tools/gen_algo_enums.py from
# cpp/include/convcore/algorithms.def; rerun it after changing that file
# (tests/python/test_algo_enums.py fails while this file is stale).
"""The algorithm enums as type checkers see them. At run time convcore._enums builds them
from the compiled library's list, which is made from the same .def."""

import enum


class Algo(enum.Enum):
    """The forward algorithms (convcoreConvolutionFwdAlgo_t)."""

    DIRECT = 0
    IM2COL_GEMM = 1
    IMPLICIT_GEMM = 2
    IM2WIN = 3
    WINOGRAD_2X2_3X3 = 4
    WINOGRAD_4X4_3X3 = 5
    FFT = 6
    FFT_TILING = 7
    FINE_GRAINED_FFT = 8
    POLY_HANKEL = 9
    CYCLIC_MINIMAL = 10
    DEPTHWISE = 11
    POINTWISE = 12


class BwdDataAlgo(enum.Enum):
    """The backward-data algorithms (convcoreConvolutionBwdDataAlgo_t)."""

    DIRECT = 0
    IM2COL_GEMM = 1
    IMPLICIT_GEMM = 2
    WINOGRAD_2X2_3X3 = 3
    FFT = 4
    FFT_TILING = 5
    FINE_GRAINED_FFT = 6
    POLY_HANKEL = 7
    DEPTHWISE = 8
    POINTWISE = 9
    WINOGRAD_4X4_3X3 = 10


class BwdFilterAlgo(enum.Enum):
    """The backward-filter algorithms (convcoreConvolutionBwdFilterAlgo_t)."""

    DIRECT = 0
    IM2COL_GEMM = 1
    IMPLICIT_GEMM = 2
    WINOGRAD_3X3_2X2 = 3
    FFT = 4
    FFT_TILING = 5
    FINE_GRAINED_FFT = 6
    POLY_HANKEL = 7
    DEPTHWISE = 8
    POINTWISE = 9
