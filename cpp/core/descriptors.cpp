#include "core/descriptors.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "common/conv_index.hpp"
#include "core/api_util.hpp"
#include "core/error.hpp"

namespace convcore {

std::string dims_of(const char* what, int nb_dims) {
    return std::to_string(nb_dims - 2) + "-D " + what + " (nbDims " + std::to_string(nb_dims) + ")";
}

int64_t tensor_extent_bytes(const convcoreTensorStruct* t, size_t elem) {
    const int64_t four = api::extent_bytes(t->dims, t->strides, elem);
    return api::checked_mul(t->d - 1, api::checked_mul(t->d_stride, int64_t(elem), "tensor extent"),
                            "tensor extent") + four;
}

int64_t filter_extent_bytes(const convcoreFilterStruct* f, size_t elem) {
    const int64_t dims[4] = {f->k, f->c_per_group, f->r, f->s};
    const int64_t four = api::extent_bytes(dims, f->strides, elem);
    return api::checked_mul(f->t - 1, api::checked_mul(f->t_stride, int64_t(elem), "filter extent"),
                            "filter extent") + four;
}

namespace {

using api::dtype_name;

// A shape as the caller set it: NxCxW for a 1-D tensor, NxCxHxW for a 2-D one, NxCxDxHxW for 3-D
// (depth: the depth of a 3-D shape).
std::string shape_of(const int64_t d[4], int nb_dims, int64_t depth = 1) {
    std::string s = std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x";
    if (nb_dims == 5) s += std::to_string(depth) + "x";
    if (nb_dims >= 4) s += std::to_string(d[2]) + "x";
    return s + std::to_string(d[3]);
}

template <typename T>
void require_set(const T* desc, const char* name, const char* setter) {
    if (!desc) throw_bad_param(std::string(name) + " is NULL");
    if (!desc->set)
        throw_bad_param(std::string(name) + " was created but never set (call " + setter + ")");
}

}  // namespace

void output_dims(const convcoreTensorStruct* x, const convcoreFilterStruct* w,
                 const convcoreConvolutionStruct* conv, int64_t out[4], int64_t* out_depth) {
    require_set(x, "xDesc", "convcoreSetTensor4dDescriptor");
    require_set(w, "wDesc", "convcoreSetFilter4dDescriptor");
    if (!conv) throw_bad_param("convDesc is NULL");
    // A 1-D descriptor is stored as a 2-D one with H = 1, but mixing the two is a mistake.
    if (w->nb_dims != x->nb_dims)
        throw_bad_param("w: " + dims_of("filter", w->nb_dims) + " does not match x: " +
                        dims_of("tensor", x->nb_dims) + "; set the descriptors of a problem with one dimension count");
    if (conv->spatial_dims + 2 != x->nb_dims)
        throw_bad_param(conv->spatial_dims != 2
                            ? "convDesc: " + std::to_string(conv->spatial_dims) + "-D convolution (arrayLength " +
                                  std::to_string(conv->spatial_dims) + ") does not match x: " +
                                  dims_of("tensor", x->nb_dims)
                            : "convDesc: 2-D convolution (arrayLength 2, convcoreSetConvolution2dDescriptor or never "
                              "set) does not match x: " +
                                  dims_of("tensor", x->nb_dims) +
                                  "; set convDesc with convcoreSetConvolutionNdDescriptor, arrayLength " +
                                  std::to_string(x->nb_dims - 2));
    const int64_t c = x->dims[1], h = x->dims[2], wd = x->dims[3];
    const int64_t g = conv->groups;
    std::ostringstream err;
    if (c % g != 0) {
        err << "x: input channels C=" << c << " are not divisible by groups=" << g;
        throw_bad_param(err.str());
    }
    if (w->c_per_group != c / g) {
        err << "w: C/groups=" << w->c_per_group << " does not match x: C=" << c << " with groups="
            << g << " (expected " << c / g << ")";
        throw_bad_param(err.str());
    }
    if (w->k % g != 0) {
        err << "w: output channels K=" << w->k << " are not divisible by groups=" << g;
        throw_bad_param(err.str());
    }
    // conv_output_size computes dil*(k-1)+1: with a filter size near 2^60 and a dilation near
    // 2^40 that leaves int64, so the empty case (the filter spans more than the padded input,
    // which is < 2^61: sizes are < 2^60 and padding <= 2^40) is decided here first.
    const auto axis_size = [](int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil) {
        int64_t span;
        if (__builtin_mul_overflow(dil, k - 1, &span) || span >= in + 2 * pad) return int64_t(0);
        return conv_output_size(in, pad, k, stride, dil);
    };
    if (x->nb_dims == 5) {  // the depth first: D, T, pad_d, stride_d, dil_d
        const int64_t od = axis_size(x->d, conv->pad_d, w->t, conv->stride_d, conv->dil_d);
        if (od < 1) {
            int64_t span;
            const bool huge = __builtin_mul_overflow(conv->dil_d, w->t - 1, &span) || span == INT64_MAX;
            err << "empty output: the filter depth T=" << w->t << " with dilation " << conv->dil_d << " spans "
                << (huge ? std::string("more than 2^63") : std::to_string(span + 1))
                << " but the padded input depth is " << x->d + 2 * conv->pad_d << " (D=" << x->d << " + 2*pad "
                << conv->pad_d << ")";
            throw_bad_param(err.str());
        }
        if (out_depth) *out_depth = od;
    } else if (out_depth) {
        *out_depth = 1;
    }
    const int64_t p = axis_size(h, conv->pad_h, w->r, conv->stride_h, conv->dil_h);
    const int64_t q = axis_size(wd, conv->pad_w, w->s, conv->stride_w, conv->dil_w);
    if (p < 1 || q < 1) {
        const bool rows = p < 1;
        const int64_t in = rows ? h : wd, pad = rows ? conv->pad_h : conv->pad_w;
        const int64_t kk = rows ? w->r : w->s, dil = rows ? conv->dil_h : conv->dil_w;
        int64_t span;  // may overflow (see axis_size): then say so
        const bool huge = __builtin_mul_overflow(dil, kk - 1, &span) || span == INT64_MAX;
        err << "empty output: the filter " << (rows ? "height R=" : "width S=") << kk
            << " with dilation " << dil << " spans "
            << (huge ? std::string("more than 2^63") : std::to_string(span + 1))
            << " but the padded input " << (rows ? "height" : "width") << " is " << in + 2 * pad
            << " (" << (rows ? "H=" : "W=") << in << " + 2*pad " << pad << ")";
        throw_bad_param(err.str());
    }
    out[0] = x->dims[0];
    out[1] = w->k;
    out[2] = p;
    out[3] = q;
}

ConvProblem make_problem(convcoreDeviceType_t device, const convcoreTensorStruct* x,
                         const convcoreFilterStruct* w, const convcoreConvolutionStruct* conv,
                         const convcoreTensorStruct* y) {
    int64_t out[4];
    output_dims(x, w, conv, out);
    if (x->nb_dims == 5)
        throw_not_supported("this call takes 1-D and 2-D descriptors only; 3-D convolutions run through "
                            "convcoreConvolutionForward, convcoreConvolutionBackwardData/Filter, their queries and plans");
    if (w->dtype != x->dtype)
        throw_bad_param(std::string("w: data type ") + dtype_name(w->dtype) +
                        " does not match x: " + dtype_name(x->dtype));
    ConvProblem p;
    p.device = device;
    p.dtype = x->dtype;
    p.n = x->dims[0];
    p.c = x->dims[1];
    p.h = x->dims[2];
    p.w = x->dims[3];
    p.k = w->k;
    p.r = w->r;
    p.s = w->s;
    for (int i = 0; i < 4; ++i) p.w_strides[i] = w->strides[i];
    p.groups = conv->groups;
    p.pad_h = conv->pad_h;
    p.pad_w = conv->pad_w;
    p.stride_h = conv->stride_h;
    p.stride_w = conv->stride_w;
    p.dil_h = conv->dil_h;
    p.dil_w = conv->dil_w;
    p.flip = conv->mode == CONVCORE_CONVOLUTION;
    p.prepared_filters = conv->prepared_filters;
    p.p = out[2];
    p.q = out[3];
    for (int i = 0; i < 4; ++i) p.x_strides[i] = x->strides[i];
    if (y) {
        require_set(y, "yDesc", "convcoreSetTensor4dDescriptor");
        if (y->dtype != x->dtype)
            throw_bad_param(std::string("y: data type ") + dtype_name(y->dtype) +
                            " does not match x: " + dtype_name(x->dtype));
        if (y->nb_dims != x->nb_dims)
            throw_bad_param("y: " + dims_of("tensor", y->nb_dims) + " does not match x: " +
                            dims_of("tensor", x->nb_dims));
        for (int i = 0; i < 4; ++i) {
            if (y->dims[i] != out[i]) {
                throw_bad_param("y: shape " + shape_of(y->dims, y->nb_dims) + " does not match the output shape " +
                                shape_of(out, x->nb_dims) + " (use " +
                                (x->nb_dims == 4 ? "convcoreGetConvolution2dForwardOutputDim"
                                                 : "convcoreGetConvolutionNdForwardOutputDim") +
                                ")");
            }
        }
        for (int i = 0; i < 4; ++i) p.y_strides[i] = y->strides[i];
    } else {  // no y descriptor (a query): its packed size must still be representable
        int64_t bytes;
        if (__builtin_mul_overflow(p.n, p.k, &bytes) || __builtin_mul_overflow(bytes, p.p, &bytes) ||
            __builtin_mul_overflow(bytes, p.q, &bytes) || __builtin_mul_overflow(bytes, 8, &bytes)) {
            std::ostringstream err;
            err << "the output " << p.n << "x" << p.k << "x" << p.p << "x" << p.q
                << " has more elements than 64-bit sizes can address";
            throw_bad_param(err.str());
        }
        packed_strides(p.n, p.k, p.p, p.q, p.y_strides);
    }
    return p;
}

void transposed_output_dims(const convcoreConvolutionStruct* conv, const convcoreTensorStruct* dy,
                            const convcoreFilterStruct* w, int nb_dims, const int64_t output_padding[],
                            int64_t out[]) {
    if (!out) throw_bad_param("outDims is NULL");
    require_set(dy, "dyDesc", "convcoreSetTensorNdDescriptor");
    require_set(w, "wDesc", "convcoreSetFilterNdDescriptor");
    if (!conv) throw_bad_param("convDesc is NULL");
    if (nb_dims != dy->nb_dims)
        throw_bad_param("nbDims=" + std::to_string(nb_dims) + " does not match dyDesc's " + std::to_string(dy->nb_dims) +
                        " dimensions");
    if (w->nb_dims != dy->nb_dims)
        throw_bad_param("w: " + dims_of("filter", w->nb_dims) + " does not match dy: " + dims_of("tensor", dy->nb_dims));
    if (conv->spatial_dims + 2 != dy->nb_dims)
        throw_bad_param("convDesc: " + std::to_string(conv->spatial_dims) + "-D convolution does not match dy: " +
                        dims_of("tensor", dy->nb_dims));
    if (dy->dims[1] != w->k)
        throw_bad_param("dy: channels " + std::to_string(dy->dims[1]) + " do not match w's K=" + std::to_string(w->k) +
                        " (a transposed convolution's input has the channels of the convolution's output)");
    // The spatial axes, outermost first: (input, filter, pad, stride, dilation).
    struct Axis {
        int64_t in, filter, pad, stride, dil;
    };
    Axis axes[3];
    int count = 0;
    if (nb_dims == 5) axes[count++] = {dy->d, w->t, conv->pad_d, conv->stride_d, conv->dil_d};
    if (nb_dims >= 4) axes[count++] = {dy->dims[2], w->r, conv->pad_h, conv->stride_h, conv->dil_h};
    axes[count++] = {dy->dims[3], w->s, conv->pad_w, conv->stride_w, conv->dil_w};
    out[0] = dy->dims[0];
    out[1] = w->c_per_group * conv->groups;
    for (int i = 0; i < count; ++i) {
        const Axis& a = axes[i];
        const int64_t op = output_padding ? output_padding[i] : 0;
        const int64_t limit = std::max(a.stride, a.dil);
        if (op < 0 || op >= limit)
            throw_bad_param("outputPadding[" + std::to_string(i) + "]=" + std::to_string(op) +
                            " must be >= 0 and smaller than stride or dilation (max " + std::to_string(limit) +
                            "), as PyTorch's ConvTranspose requires");
        // In double first: the sizes are below 2^60, their products may not be.
        const double size = (double(a.in) - 1) * double(a.stride) - 2.0 * double(a.pad) +
                            double(a.dil) * (double(a.filter) - 1) + double(op) + 1;
        if (size < 1)
            throw_bad_param("the transposed convolution's output is empty along spatial axis " + std::to_string(i) +
                            " (input " + std::to_string(a.in) + ", padding " + std::to_string(a.pad) + ")");
        if (size > 9.2e18) throw_bad_param("the transposed convolution's output size overflows int64");
        out[2 + i] = (a.in - 1) * a.stride - 2 * a.pad + a.dil * (a.filter - 1) + op + 1;
    }
}

}  // namespace convcore
