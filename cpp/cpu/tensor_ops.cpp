// Strided 4-D copies on the CPU: how the core packs strided x and unpacks strided y.
#include <cstdint>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "core/device.hpp"

namespace convcore {
namespace cpu {
namespace {

// Calls f(src_offset, dst_offset) for every element, parallel over the three outer axes.
template <typename F>
void for_each_element(const Context& ctx, const Strided4d& s, const Strided4d& d, F f) {
    const int64_t outer = s.dims[0] * s.dims[1] * s.dims[2];
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
    for (int64_t i = 0; i < outer; ++i) {
        const int64_t h = i % s.dims[2], c = (i / s.dims[2]) % s.dims[1], n = i / (s.dims[2] * s.dims[1]);
        const int64_t so = offset4(n, c, h, 0, s.strides), dof = offset4(n, c, h, 0, d.strides);
        for (int64_t w = 0; w < s.dims[3]; ++w) f(so + w * s.strides[3], dof + w * d.strides[3]);
    }
}

template <typename T>
void copy_t(const Context& ctx, const T* src, const Strided4d& sv, T* dst, const Strided4d& dv) {
    for_each_element(ctx, sv, dv, [&](int64_t so, int64_t dof) { dst[dof] = src[so]; });
}

template <typename T>
void blend_t(const Context& ctx, const T* src, const Strided4d& sv, T* dst, const Strided4d& dv,
             T alpha, T beta) {
    for_each_element(ctx, sv, dv,
                     [&](int64_t so, int64_t dof) { blend_store(dst + dof, src[so], alpha, beta); });
}

}  // namespace

void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv, void* dst,
                  const Strided4d& dv) {
    if (elem == 8)
        copy_t(ctx, static_cast<const double*>(src), sv, static_cast<double*>(dst), dv);
    else
        copy_t(ctx, static_cast<const float*>(src), sv, static_cast<float*>(dst), dv);
}

void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& sv, void* dst,
                   const Strided4d& dv, double alpha, double beta) {
    if (elem == 8)
        blend_t(ctx, static_cast<const double*>(src), sv, static_cast<double*>(dst), dv, alpha, beta);
    else
        blend_t(ctx, static_cast<const float*>(src), sv, static_cast<float*>(dst), dv, float(alpha),
                float(beta));
}

}  // namespace cpu
}  // namespace convcore
