// DEPTHWISE's pieces shared by its forward and backward solvers (cpu/depthwise.cpp,
// cpu/depthwise_backward.cpp).
//
// A depthwise convolution has one input channel per group (C/groups == 1), so output channel k
// reads input channel c = k / m only, with m = K / C the channel multiplier. Each output is a
// sum of R*S products: no reduction over channels, nothing for a GEMM to block. The kernels
// therefore run over channels in NHWC (the same tap for consecutive channels is contiguous in
// x, y and the transposed taps) and along the width in NCHW (consecutive outputs of one tap
// read consecutive inputs), and keep the few input rows a row of outputs needs in cache, so each
// input element comes from memory once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/conv_index.hpp"
#include "core/problem.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/epilogue_store.hpp"

namespace convcore {
namespace cpu {
namespace depthwise {

// The NCHW kernels copy an input plane, padded to their register blocks of output rows and
// columns, into a per-thread buffer of stride_w phases of rows x cols (cpu/depthwise.cpp). The
// extent for blocks of `row_block` rows and `col_block` columns; false where it cannot be
// counted in 64 bits.
inline bool plane_extent(const ConvProblem& p, int64_t row_block, int64_t col_block, int64_t* rows, int64_t* cols) {
    const int64_t out_rows = (p.p + row_block - 1) / row_block * row_block;
    const int64_t out_cols = (p.q + col_block - 1) / col_block * col_block;
    const int64_t row_span = product_or_minus1({out_rows - 1, p.stride_h});
    const int64_t row_taps = product_or_minus1({p.r - 1, p.dil_h}), col_taps = product_or_minus1({p.s - 1, p.dil_w});
    return row_span >= 0 && row_taps >= 0 && col_taps >= 0 && !__builtin_add_overflow(row_span, row_taps + 1, rows) &&
           !__builtin_add_overflow(out_cols, col_taps / p.stride_w, cols);
}

// The largest register block (8 rows x 2 vectors of 16 floats; the others divide it) makes
// the largest plane. With ordinary padding, stride and dilation that is a few times the input
// and output planes; huge ones (all zeros to copy) are refused rather than allocated: past 16
// times the two planes plus 64 Ki elements.
constexpr int64_t kMaxRowBlock = 8, kMaxColBlock = 32;
inline bool plane_fits(const ConvProblem& p) {
    int64_t rows = 0, cols = 0;
    if (!plane_extent(p, kMaxRowBlock, kMaxColBlock, &rows, &cols)) return false;
    const int64_t buffer = product_or_minus1({rows, cols, p.stride_w});
    const int64_t planes = product_or_minus1({p.h, p.w}), outputs = product_or_minus1({p.p, p.q});
    if (buffer < 0 || planes < 0 || outputs < 0) return false;
    return double(buffer) <= 16.0 * (double(planes) + double(outputs)) + 65536.0;
}

inline std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "DEPTHWISE runs float32 and float64 only";
    if (p.c_per_group() != 1)
        return "DEPTHWISE needs one input channel per group (groups == C), got C=" + std::to_string(p.c) +
               " in " + std::to_string(p.groups) + " groups";
    if (!plane_fits(p))
        return "DEPTHWISE: the padding, stride or dilation would make the padded copy of each input plane more "
               "than 16 times the input and output planes";
    return "";
}

// Both layouts natively.
inline bool runs_nhwc(const ConvProblem&) { return true; }

// The taps of output channel k in the order the kernels read them: correlation order (the filter
// mirrored for true convolution), as [k][r][s] for NCHW and [r][s][k] for NHWC. NCHW
// cross-correlation reads w itself and needs none.
inline bool needs_taps(const ConvProblem& p) { return p.nhwc || p.flip; }
inline size_t taps_bytes(const ConvProblem& p) {
    return needs_taps(p) ? size_t(p.k * p.r * p.s) * p.elem_size() : 0;
}

template <typename T>
void make_taps(const ConvProblem& p, const T* w, T* taps) {
    for (int64_t k = 0; k < p.k; ++k)
        for (int64_t r = 0; r < p.r; ++r)
            for (int64_t s = 0; s < p.s; ++s) {
                const T v = w[(k * p.r + conv_filter_tap(r, p.r, p.flip)) * p.s + conv_filter_tap(s, p.s, p.flip)];
                taps[p.nhwc ? (r * p.s + s) * p.k + k : (k * p.r + r) * p.s + s] = v;
            }
}

// The taps for a run: the prepared ones, w itself, or made in `scratch`.
template <typename T>
const T* taps_for(const ConvProblem& p, const void* w, const void* prepared, void* scratch) {
    if (prepared) return static_cast<const T*>(prepared);
    if (!needs_taps(p)) return static_cast<const T*>(w);
    make_taps(p, static_cast<const T*>(w), static_cast<T*>(scratch));
    return static_cast<const T*>(scratch);
}

// Channels one NHWC step handles together: a few vector registers of accumulators.
constexpr int64_t kChannelBlock = 64;

// Output rows [oh0, oh1) of image n of an NHWC problem, channels [k_begin, k_end) (k_begin a
// multiple of a vector's lanes; every channel when K != C), by the NHWC kernels of this
// machine's instruction set, with the taps [r][s][k] (make_taps) and the epilogue e in the
// stores (the solver's per-row work; cpu/pointwise_depthwise.cpp runs it on rows it made).
template <typename T>
void nhwc_rows(const ConvProblem& p, const T* x, const T* taps, T* y, const epilogue_store::Out<T>& e, int64_t n,
               int64_t oh0, int64_t oh1, int64_t k_begin, int64_t k_end);

}  // namespace depthwise
}  // namespace cpu
}  // namespace convcore

// The kernels are templates inlined into one entry per instruction set (CONVCORE_EACH_ISA),
// chosen at run time by cpu_isa(); the OpenMP loops stay outside, in the solvers.
#define CONVCORE_DW_INLINE inline __attribute__((always_inline))

namespace convcore {
namespace cpu {
namespace depthwise {

}  // namespace depthwise
}  // namespace cpu
}  // namespace convcore
