// Helpers of the C API tests: the descriptors of a reference Shape, and Find's counters.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>

#include "convcore/convcore.hpp"
#include "reference.hpp"

namespace convcore_test {

// x, y, w and the convolution descriptor of a problem, packed NCHW.
struct Descs {
    convcore::TensorDesc x, y;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    Descs(const Shape& p, convcoreDataType_t dt)
        : x(dt, p.n, p.c, p.h, p.w), y(dt, p.n, p.k, p.out_h(), p.out_w()), w(dt, p.k, p.c / p.groups, p.r, p.s) {
        conv.set(p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w,
                 p.flip ? CONVCORE_CONVOLUTION : CONVCORE_CROSS_CORRELATION);
        conv.set_groups(p.groups);
    }
};

// convcoreGetFindStats' counters: (problem, algorithm) pairs timed, Find calls answered untimed.
inline int64_t timed_runs() {
    int64_t t = -1;
    EXPECT_EQ(convcoreGetFindStats(&t, nullptr), CONVCORE_STATUS_SUCCESS);
    return t;
}
inline int64_t db_hits() {
    int64_t h = -1;
    EXPECT_EQ(convcoreGetFindStats(nullptr, &h), CONVCORE_STATUS_SUCCESS);
    return h;
}

}  // namespace convcore_test
