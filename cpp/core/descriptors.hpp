// The structs behind the opaque descriptor handles of the C API, and make_problem, which
// validates a set of descriptors into a ConvProblem.
#pragma once
#include <cstdint>

#include "convcore/convcore.h"
#include "core/problem.hpp"

// A 1-D descriptor (set by an Nd call with nbDims 3, or arrayLength 1) is stored as the 2-D one
// with H = 1 (R = 1; padding 0, stride 1, dilation 1 along H), so every 2-D algorithm runs it; it
// remembers its dimension count for the Nd getters and for make_problem, which does not let 1-D
// and 2-D descriptors mix.
struct convcoreTensorStruct {
    bool set = false;
    int nb_dims = 4;  // 3: N, C, W (stored as N, C, 1, W); 4: N, C, H, W
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t dims[4] = {0, 0, 0, 0};
    int64_t strides[4] = {0, 0, 0, 0};
};

struct convcoreFilterStruct {
    bool set = false;
    int nb_dims = 4;  // 3: K, C/groups, S (stored as K, C/groups, 1, S); 4: K, C/groups, R, S
    int format = CONVCORE_TENSOR_NCHW;  // the format its strides are packed in; -1: neither
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t k = 0, c_per_group = 0, r = 0, s = 0;
    int64_t strides[4] = {0, 0, 0, 0};  // of K, C/groups, R, S
};

struct convcoreConvolutionStruct {
    int spatial_dims = 2;  // 1: set with arrayLength 1 (the H values are 0, 1, 1); 2: the rest
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    int64_t groups = 1;
    convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION;
    bool prepared_filters = false;  // convcoreSetConvolutionFilterProtocol: CONVCORE_FILTERS_PREPARED
};

namespace convcore {

// Validates x, w and the convolution (and y when non-null) into a problem for `device`.
// Throws Error(BAD_PARAM) naming the argument and value at fault.
ConvProblem make_problem(convcoreDeviceType_t device, const convcoreTensorStruct* x,
                         const convcoreFilterStruct* w, const convcoreConvolutionStruct* conv,
                         const convcoreTensorStruct* y);

// Output dims (n, k, p, q) of x conv w; throws BAD_PARAM when empty or inconsistent.
void output_dims(const convcoreTensorStruct* x, const convcoreFilterStruct* w,
                 const convcoreConvolutionStruct* conv, int64_t out[4]);

}  // namespace convcore
