#include "core/problem.hpp"

#include <sstream>

namespace convcore {

void packed_strides(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out[4]) {
    (void)n;
    out[3] = 1;
    out[2] = w;
    out[1] = h * w;
    out[0] = c * h * w;
}

int64_t product_or_minus1(std::initializer_list<int64_t> factors) {
    int64_t r = 1;
    for (int64_t f : factors)
        if (__builtin_mul_overflow(r, f, &r)) return -1;
    return r;
}

void packed_nhwc_strides(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out[4]) {
    (void)n;
    out[1] = 1;
    out[3] = c;
    out[2] = w * c;
    out[0] = h * w * c;
}

bool same_layout(const int64_t dims[4], const int64_t a[4], const int64_t b[4]) {
    for (int i = 0; i < 4; ++i)
        if (dims[i] > 1 && a[i] != b[i]) return false;  // size-1 axes: any stride
    return true;
}

static bool is_packed(const int64_t dims[4], const int64_t strides[4]) {
    int64_t expect[4];
    packed_strides(dims[0], dims[1], dims[2], dims[3], expect);
    return same_layout(dims, strides, expect);
}

bool is_packed_nhwc(const int64_t dims[4], const int64_t strides[4]) {
    int64_t expect[4];
    packed_nhwc_strides(dims[0], dims[1], dims[2], dims[3], expect);
    return same_layout(dims, strides, expect);
}

// Each image packed NHWC (H x W x C), the images at any distance: a batch of depth planes read
// with a depth stride, or images taken from a larger batch.
static bool images_packed_nhwc(const int64_t dims[4], const int64_t strides[4]) {
    const int64_t image[4] = {1, dims[1], dims[2], dims[3]};
    return is_packed_nhwc(image, strides);
}

bool ConvProblem::x_packed() const {
    const int64_t dims[4] = {n, c, h, w};
    return is_packed(dims, x_strides);
}

bool ConvProblem::y_packed() const {
    const int64_t dims[4] = {n, k, p, q};
    return is_packed(dims, y_strides);
}

bool ConvProblem::w_packed() const {
    const int64_t dims[4] = {k, c_per_group(), r, s};
    return is_packed(dims, w_strides);
}

bool ConvProblem::activations_nhwc() const {
    const int64_t xd[4] = {n, c, h, w}, yd[4] = {n, k, p, q};
    return is_packed_nhwc(xd, x_strides) && is_packed_nhwc(yd, y_strides);
}

double ConvProblem::flops() const {
    return 2.0 * double(n) * double(k) * double(c_per_group()) * double(r) * double(s) *
           double(p) * double(q);
}

std::string ConvProblem::key() const {
    std::ostringstream o;
    o << "g" << groups << "mb" << n << "ic" << c << "ih" << h << "iw" << w << "oc" << k << "kh"
      << r << "kw" << s << "sh" << stride_h << "sw" << stride_w << "ph" << pad_h << "pw" << pad_w
      << "dh" << dil_h << "dw" << dil_w << (dtype == CONVCORE_DATA_DOUBLE ? "_f64" : "_f32")
      << (flip ? "_conv" : "_xcorr");
    return o.str();
}

ConvProblem ConvProblem::packed() const {
    ConvProblem out = *this;
    packed_strides(n, c, h, w, out.x_strides);
    packed_strides(n, k, p, q, out.y_strides);
    packed_strides(k, c_per_group(), r, s, out.w_strides);
    out.nhwc = false;
    return out;
}

ConvProblem ConvProblem::packed_nhwc() const {
    ConvProblem out = packed();
    packed_nhwc_strides(n, c, h, w, out.x_strides);
    packed_nhwc_strides(n, k, p, q, out.y_strides);
    out.nhwc = true;
    return out;
}

ConvProblem run_problem(const ConvProblem& prob, bool (*runs_nhwc)(const ConvProblem&)) {
    ConvProblem out = prob.packed();
    // Packed NCHW tensors stay NCHW; so do ones packed both ways (with unit axes), unless each
    // image's output is one pixel (a squeeze-excitation's 1x1 on a 1x1 map): NCHW's output planes
    // would be one value wide, while NHWC's pixel rows are the channels, a matrix-vector product.
    const bool both_ways = prob.x_packed() && prob.y_packed();
    // Images packed NHWC at any distance run NHWC too: staging them is a copy of whole pixels,
    // where an NCHW run would transpose x in and y out.
    const int64_t xd[4] = {prob.n, prob.c, prob.h, prob.w}, yd[4] = {prob.n, prob.k, prob.p, prob.q};
    const bool nhwc_images = images_packed_nhwc(xd, prob.x_strides) && images_packed_nhwc(yd, prob.y_strides);
    if (!runs_nhwc || (both_ways && prob.p * prob.q != 1) || !nhwc_images || !runs_nhwc(out))
        return out;
    return prob.packed_nhwc();
}

std::string winograd_shape_why_not(const std::string& name, const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return name + " runs float32 and float64 only";
    if (p.r != 3 || p.s != 3)
        return name + " needs a 3x3 filter, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
    if (!p.unit_stride())
        return name + " needs stride 1, got stride " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w);
    if (!p.unit_dilation())
        return name + " needs dilation 1, got dilation " + std::to_string(p.dil_h) + "x" +
               std::to_string(p.dil_w);
    return "";
}

}  // namespace convcore
