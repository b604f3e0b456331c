// The structs behind the opaque descriptor handles of the C API, and make_problem, which
// validates a set of descriptors into a ConvProblem.
#pragma once
#include <cstdint>

#include "convcore/convcore.h"
#include "core/problem.hpp"

struct convcoreTensorStruct {
    bool set = false;
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t dims[4] = {0, 0, 0, 0};
    int64_t strides[4] = {0, 0, 0, 0};
};

struct convcoreFilterStruct {
    bool set = false;
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t k = 0, c_per_group = 0, r = 0, s = 0;
    int64_t strides[4] = {0, 0, 0, 0};  // of K, C/groups, R, S
};

struct convcoreConvolutionStruct {
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
