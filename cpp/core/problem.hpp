// A validated forward-convolution problem: every size, the output shape, the layouts.
// Built once per call from the descriptors (make_problem), handed to every solver.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "convcore/convcore.h"

namespace convcore {

struct ConvProblem {
    convcoreDeviceType_t device = CONVCORE_DEVICE_CPU;
    convcoreDataType_t dtype = CONVCORE_DATA_FLOAT;
    int64_t n = 0, c = 0, h = 0, w = 0;  // input x: N x C x H x W
    int64_t k = 0, r = 0, s = 0;         // filter w: K x C/groups x R x S
    int64_t groups = 1;
    int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
    bool flip = false;                   // true convolution (CONVCORE_CONVOLUTION)
    int64_t p = 0, q = 0;                // output y: N x K x P x Q
    int64_t x_strides[4] = {0, 0, 0, 0}; // element strides of x (N, C, H, W)
    int64_t y_strides[4] = {0, 0, 0, 0}; // element strides of y
    int64_t w_strides[4] = {0, 0, 0, 0}; // element strides of w (K, C/groups, R, S)
    // Set only in the problem a solver runs (run_problem): x and y are packed NHWC, not NCHW.
    bool nhwc = false;
    // The caller prepares the forward filters once (the convolution descriptor's
    // CONVCORE_FILTERS_PREPARED): selection judges forward algorithms by their prepared-filter
    // times. Changes no run; not part of key() nor of the find-db's problem string.
    bool prepared_filters = false;

    int64_t c_per_group() const { return c / groups; }
    int64_t k_per_group() const { return k / groups; }
    size_t elem_size() const { return dtype == CONVCORE_DATA_DOUBLE ? 8 : 4; }
    int64_t x_elems() const { return n * c * h * w; }
    int64_t w_elems() const { return k * c_per_group() * r * s; }
    int64_t y_elems() const { return n * k * p * q; }
    bool x_packed() const;
    bool y_packed() const;
    bool w_packed() const;
    // x and y (dx and dy in the backward passes) both packed NHWC: N x H x W x C.
    bool activations_nhwc() const;
    bool is_1x1() const { return r == 1 && s == 1; }
    bool unit_stride() const { return stride_h == 1 && stride_w == 1; }
    bool unit_dilation() const { return dil_h == 1 && dil_w == 1; }
    // Multiply-adds times two: 2*N*K*(C/g)*R*S*P*Q.
    double flops() const;
    // Compact benchdnn-style key, e.g. "g1mb1ic3ih224iw224oc64kh3kw3sh1sw1ph1pw1dh1dw1_f32_xcorr".
    std::string key() const;
    // The same problem with packed NCHW strides for x and y and packed KCRS ones for w.
    ConvProblem packed() const;
    // The same with packed NHWC strides for x and y instead (nhwc set).
    ConvProblem packed_nhwc() const;
};

// The problem a solver runs: x and y (dx, dy) packed NHWC when the caller's are and the solver
// runs this problem in NHWC natively (runs_nhwc, asked with the packed NCHW problem; null: the
// solver runs NCHW only), otherwise packed NCHW; w always packed KCRS. The core stages every
// tensor whose layout differs from this problem's (core/plan.cpp).
ConvProblem run_problem(const ConvProblem& prob, bool (*runs_nhwc)(const ConvProblem&));

// Why the Winograd family (forward F(m x m, 3x3) and the F(3x3, 2x2) filter gradient, CPU and
// CUDA) refuses p, "" when its shape rules hold: float32/float64, a 3x3 filter, stride 1,
// dilation 1. `name` starts the reason.
std::string winograd_shape_why_not(const std::string& name, const ConvProblem& p);

// The product of the factors (all >= 0) when it fits in int64, else -1: for buffer sizes that a
// problem's valid extents can still make too large to count.
int64_t product_or_minus1(std::initializer_list<int64_t> factors);

// Packed NCHW strides of an N x C x H x W tensor, and packed NHWC ones (still in N, C, H, W order).
void packed_strides(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out[4]);
void packed_nhwc_strides(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out[4]);
// Whether strides lay out an N x C x H x W tensor packed NHWC (size-1 axes: any stride).
bool is_packed_nhwc(const int64_t dims[4], const int64_t strides[4]);
// The same elements at the same offsets: the strides agree on every axis longer than 1.
bool same_layout(const int64_t dims[4], const int64_t a[4], const int64_t b[4]);

}  // namespace convcore
