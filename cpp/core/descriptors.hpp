// The structs behind the opaque descriptor handles of the C API, and make_problem, which
// validates a set of descriptors into a ConvProblem.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "convcore/convcore.h"
#include "core/problem.hpp"

// A 1-D descriptor (set by an Nd call with nbDims 3, or arrayLength 1) is stored as the 2-D one
// with H = 1 (R = 1; padding 0, stride 1, dilation 1 along H), so every 2-D algorithm runs it. A
// 3-D one (nbDims 5, arrayLength 3) keeps the 2-D fields for H and W and its depth beside them
// (d / d_stride, t / t_stride, pad_d / stride_d / dil_d); the 3-D passes run as 2-D convolutions
// over depth ranges (core/depth_decomposition.hpp). Every descriptor remembers its dimension
// count for the Nd getters and for make_problem, which does not let counts mix. The 4d/2d setters
// make a descriptor 2-D again (depth 1).
struct convcoreTensorStruct {
    bool set = false;
    int nb_dims = 4;  // 3: N, C, W (stored as N, C, 1, W); 4: N, C, H, W; 5: N, C, D, H, W
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t dims[4] = {0, 0, 0, 0};     // N, C, H, W (a 3-D tensor's depth is d)
    int64_t strides[4] = {0, 0, 0, 0};  // of N, C, H, W
    int64_t d = 1, d_stride = 0;        // depth and its stride: 3-D only (1, 0 otherwise)
};

struct convcoreFilterStruct {
    bool set = false;
    // 3: K, C/groups, S (stored as K, C/groups, 1, S); 4: K, C/groups, R, S; 5: K, C/groups, T, R, S
    int nb_dims = 4;
    int format = CONVCORE_TENSOR_NCHW;  // the format its strides are packed in; -1: neither
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t k = 0, c_per_group = 0, r = 0, s = 0;
    int64_t strides[4] = {0, 0, 0, 0};  // of K, C/groups, R, S
    int64_t t = 1, t_stride = 0;        // filter depth and its stride: 3-D only (1, 0 otherwise)
};

struct convcoreConvolutionStruct {
    // 1: set with arrayLength 1 (the H values are 0, 1, 1); 2: the rest; 3: arrayLength 3
    int spatial_dims = 2;
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    int64_t pad_d = 0, stride_d = 1, dil_d = 1;  // depth: 3-D only (0, 1, 1 otherwise)
    int64_t groups = 1;
    convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION;
    bool prepared_filters = false;  // convcoreSetConvolutionFilterProtocol: CONVCORE_FILTERS_PREPARED
};

namespace convcore {

// Validates x, w and the convolution (and y when non-null) into a problem for `device`.
// Throws Error(BAD_PARAM) naming the argument and value at fault. 2-D (and 1-D) only: valid 3-D
// descriptors are NOT_SUPPORTED here; the 3-D passes take them through
// depth::make_depth_problem (core/depth_decomposition.hpp), which builds its 2-D problems with this.
ConvProblem make_problem(convcoreDeviceType_t device, const convcoreTensorStruct* x,
                         const convcoreFilterStruct* w, const convcoreConvolutionStruct* conv,
                         const convcoreTensorStruct* y);

// Output dims (n, k, p, q) of x conv w; throws BAD_PARAM when empty or inconsistent (the
// descriptors' dimension counts included). For 3-D descriptors *out_depth (when not null) is the
// output depth, checked non-empty as the other axes.
void output_dims(const convcoreTensorStruct* x, const convcoreFilterStruct* w,
                 const convcoreConvolutionStruct* conv, int64_t out[4], int64_t* out_depth = nullptr);

// "1-D tensor (nbDims 3)", "3-D filter (nbDims 5)": for reasons naming mixed dimension counts.
std::string dims_of(const char* what, int nb_dims);

// convcoreGetConvolutionNdTransposedOutputDim: dx's dims of the transposed convolution whose input
// is dy (PyTorch's output padding, checked by its rule).
void transposed_output_dims(const convcoreConvolutionStruct* conv, const convcoreTensorStruct* dy,
                            const convcoreFilterStruct* w, int nb_dims, const int64_t output_padding[],
                            int64_t out[]);

// Bytes one past the last element of a tensor descriptor's elements (its depth included).
int64_t tensor_extent_bytes(const convcoreTensorStruct* t, size_t elem);
int64_t filter_extent_bytes(const convcoreFilterStruct* f, size_t elem);

}  // namespace convcore
