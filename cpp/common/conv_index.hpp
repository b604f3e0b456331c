// Index math shared by the CPU and CUDA code (host + device inline). One place for the
// formulas every algorithm uses, so a mistake shows up in the CPU tests too.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define CONVCORE_HD __host__ __device__ __forceinline__
#else
#define CONVCORE_HD inline
#endif

namespace convcore {

// Output extent of one spatial axis: floor((in + 2*pad - dil*(k-1) - 1) / stride) + 1.
// May be <= 0 when the dilated filter is larger than the padded input.
CONVCORE_HD int64_t conv_output_size(int64_t in, int64_t pad, int64_t k, int64_t stride,
                                     int64_t dilation) {
    const int64_t span = dilation * (k - 1) + 1;
    const int64_t room = in + 2 * pad - span;
    return room < 0 ? 0 : room / stride + 1;
}

// Input coordinate read by output coordinate `o` at filter tap `t` (may be out of range:
// that is the zero padding).
CONVCORE_HD int64_t conv_input_coord(int64_t o, int64_t t, int64_t pad, int64_t stride,
                                     int64_t dilation) {
    return o * stride - pad + t * dilation;
}

// The inverse of conv_input_coord: the output coordinate in [0, out) that reads input
// coordinate `i` at tap `t`, or -1 when none does (backward data gathers with it).
CONVCORE_HD int64_t conv_output_reading(int64_t i, int64_t t, int64_t pad, int64_t stride, int64_t dilation,
                                        int64_t out) {
    const int64_t u = i + pad - t * dilation;  // = o * stride
    if (u < 0 || u % stride != 0) return -1;
    const int64_t o = u / stride;
    return o < out ? o : -1;
}

// The filter element multiplied at tap `t` of a `k`-wide axis: itself for cross-correlation,
// mirrored for true convolution.
CONVCORE_HD int64_t conv_filter_tap(int64_t t, int64_t k, bool flip) {
    return flip ? k - 1 - t : t;
}

// Range of taps t in [0, k) for which conv_input_coord(o, t) lies inside [0, in).
// Lets inner loops skip the padding instead of testing every tap.
struct TapRange {
    int64_t begin, end;
};
CONVCORE_HD TapRange conv_valid_taps(int64_t o, int64_t in, int64_t k, int64_t pad,
                                     int64_t stride, int64_t dilation) {
    const int64_t base = o * stride - pad;  // input coord of tap 0
    // smallest t with base + t*d >= 0
    int64_t begin = base >= 0 ? 0 : (-base + dilation - 1) / dilation;
    // largest t with base + t*d <= in-1, plus one
    int64_t end = base > in - 1 ? 0 : (in - 1 - base) / dilation + 1;
    if (end > k) end = k;
    if (begin > end) begin = end;
    return {begin, end};
}

// The dual of conv_valid_taps: range of outputs o in [0, out) whose tap `t` reads inside
// [0, in), for loops that run over the outputs of one tap (im2col rows, input packing).
CONVCORE_HD TapRange conv_valid_outputs(int64_t t, int64_t in, int64_t out, int64_t pad,
                                        int64_t stride, int64_t dilation) {
    const int64_t base = t * dilation - pad;  // input coord of output 0
    // smallest o with base + o*stride >= 0
    int64_t begin = base >= 0 ? 0 : (-base + stride - 1) / stride;
    // largest o with base + o*stride <= in-1, plus one
    int64_t end = base > in - 1 ? 0 : (in - 1 - base) / stride + 1;
    if (end > out) end = out;
    if (begin > end) begin = end;
    return {begin, end};
}

// Element offset of (n, c, h, w) under NCHW strides.
CONVCORE_HD int64_t offset4(int64_t n, int64_t c, int64_t h, int64_t w, const int64_t* strides) {
    return n * strides[0] + c * strides[1] + h * strides[2] + w * strides[3];
}

}  // namespace convcore
