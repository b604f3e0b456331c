// The nested Winograd F(m x m x m, 3x3x3) (cpu/winograd_3d.hpp has the math): the fused NHWC
// schedule of cpu/winograd_nhwc.hpp with cube tiles, Tile<F, F, F> (F(m,3) on all three axes; at
// stride 2 in the planes, its stride-2 form on H and W). Its own translation unit: the cube's
// unrolled transforms are large, and this keeps winograd.cpp's compile time apart.
#include <omp.h>

#include <cstdint>
#include <vector>

#include "cpu/cpu_isa.hpp"
#include "cpu/winograd_3d.hpp"
#include "cpu/winograd_nhwc.hpp"

namespace convcore {
namespace cpu {
namespace {

CONVCORE_EACH_ISA(CONVCORE_WINOGRAD_NHWC_KERNELS)

// The cube's U for input channel c: U = G_D (G_H g G_W^T) per filter k (8x the weight's size for
// F(4x4x4), made again at every training step), in vectors of VB bytes along k. w's 27 taps of
// every k are first copied tap-major into wt (27 rows of panels * nr, mirrored for true
// convolution, zero past K); then each vector of consecutive k goes through the three axes'
// G and lands in U's panel rows [xi][panel][c][nr].
template <typename T, int VB, class F>
CONVCORE_GEMM_INLINE void cube_u(const ConvProblem& p, const T* w, T* U, int64_t c, T* wt) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T), ad = F::D::alpha, ah = F::H::alpha, aw = F::W::alpha;
    constexpr int rd = F::D::r, rh = F::H::r, rw = F::W::r, taps = rd * rh * rw, plane_points = ah * aw;
    using TabD = typename F::D::template table<T>;
    using TabH = typename F::H::template table<T>;
    using TabW = typename F::W::template table<T>;
    const int64_t nr = nhwc_gemm::panel_cols(p), panels = nhwc_gemm::panel_count(p), kp = panels * nr;
    for (int64_t k = 0; k < kp; ++k) {
        const T* g = w + (k * p.c + c) * taps;
        for (int l = 0; l < taps; ++l) wt[l * kp + k] = k < p.k ? g[p.flip ? taps - 1 - l : l] : T(0);
    }
    for (int64_t k0 = 0; k0 < kp; k0 += L) {
        Vec g[rd][rh][rw], gw[rd][rh][aw], gh[rd][plane_points], u[ad][plane_points];
        for (int l = 0; l < taps; ++l)
            winograd_nhwc::load_vec<T, VB>(g[l / (rh * rw)][l / rw % rh][l % rw], wt + l * kp + k0);
        for (int a = 0; a < rd; ++a) {
            winograd_nhwc::right<rh, rw, aw>(TabW::G, g[a], gw[a]);
            winograd_nhwc::left<ah, rh, aw>(TabH::G, gw[a], reinterpret_cast<Vec(&)[ah][aw]>(gh[a]));
        }
        winograd_nhwc::left<ad, rd, plane_points>(TabD::G, gh, u);
        T* dst = U + (k0 / nr * p.c + c) * nr + k0 % nr;  // [0][panel][c][lane]
        for (int q = 0; q < ad; ++q)
            for (int xi = 0; xi < plane_points; ++xi)
                winograd_nhwc::store_vec<T, VB>(dst + (q * plane_points + xi) * panels * p.c * nr, u[q][xi]);
    }
}

#define CONVCORE_CUBE_U_KERNELS(ISA, ATTR, VB, ACC)                                                  \
    template <typename T, class F>                                                                   \
    ATTR void cube_u_##ISA(const ConvProblem& p, const T* w, T* U, int64_t c, T* wt) {               \
        cube_u<T, VB, F>(p, w, U, c, wt);                                                            \
    }
CONVCORE_EACH_ISA(CONVCORE_CUBE_U_KERNELS)
#undef CONVCORE_CUBE_U_KERNELS

// The cube's whole U (winograd_nhwc::u_elems(p, m, 1, true) elements), the channels in parallel.
template <typename T, class Tl>
void prepare_cube(const ConvProblem& p, const T* w, T* U, int threads) {
    using Fn = void (*)(const ConvProblem&, const T*, T*, int64_t, T*);
    const Fn make = for_cpu_isa<Fn>(cube_u_avx512<T, Tl>, cube_u_avx2<T, Tl>, cube_u_baseline<T, Tl>);
    constexpr int64_t taps = Tl::D::r * Tl::H::r * Tl::W::r;
    const size_t wt_elems = size_t(taps * nhwc_gemm::panel_count(p) * nhwc_gemm::panel_cols(p));
#pragma omp parallel num_threads(threads)
    {
        std::vector<T> wt(wt_elems);
#pragma omp for schedule(static)
        for (int64_t c = 0; c < p.c; ++c) make(p, w, U, c, wt.data());
    }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// fn(Tile) with the cube that runs `plane` (stride 1x1 or 2x2 in the planes) for F(m,3) = F.
template <class F, class Fn>
void with_cube(const ConvProblem& plane, Fn&& fn) {
    using winograd_nhwc::Tile;
    using S = winograd_nhwc::AtStride2<F>;
    plane.stride_h == 2 ? fn(Tile<S, S, F>{}) : fn(Tile<F, F, F>{});
}
template <class Fn>
void with_cube(const ConvProblem& plane, int64_t m, Fn&& fn) {
    m == 2 ? with_cube<winograd::F2x3>(plane, fn) : with_cube<winograd::F4x3>(plane, fn);
}

}  // namespace

namespace winograd_3d {

bool nests(const Depth& depth, int64_t m) {
    if (depth.taps != 3 || depth.stride != 1 || depth.dil != 1 || (m != 2 && m != 4)) return false;
    int64_t per_tap = 0;  // the per-tap form's plane tiles: output planes x taps inside the volume
    for (int64_t t = 0; t < 3; ++t) {
        const int64_t offset = t - depth.pad;
        per_tap += std::max<int64_t>(0, std::min(depth.d_out, depth.d_in - offset) - std::max<int64_t>(0, -offset));
    }
    return ceil_div(depth.d_out, m) * (m + 2) < per_tap;  // the cube's, in its transformed points
}

size_t nested_filter_bytes(const ConvProblem& plane, int64_t m) {
    return size_t(winograd_nhwc::u_elems(plane, m, 1, /*cube=*/true)) * plane.elem_size();
}

void nested_prepare(const ConvProblem& plane, const Context& ctx, int64_t m, const void* w, void* out) {
    with_cube(plane, m, [&](auto tile) {
        using Tl = decltype(tile);
        if (plane.dtype == CONVCORE_DATA_DOUBLE)
            prepare_cube<double, Tl>(plane, static_cast<const double*>(w), static_cast<double*>(out), ctx.threads());
        else
            prepare_cube<float, Tl>(plane, static_cast<const float*>(w), static_cast<float*>(out), ctx.threads());
    });
}

namespace {
template <typename T, class Tl>
void run_cube(const ConvArgs& a, const Depth& depth) {
    const T* U = static_cast<const T*>(a.prepared_filter);
    if (!U) {  // made into the workspace
        prepare_cube<T, Tl>(a.prob, static_cast<const T*>(a.w), static_cast<T*>(a.workspace), a.ctx.threads());
        U = static_cast<const T*>(a.workspace);
    }
    const winograd_nhwc::TaskFn<T> task = for_cpu_isa<winograd_nhwc::TaskFn<T>>(
        winograd_nhwc_task_avx512<T, Tl>, winograd_nhwc_task_avx2<T, Tl>, winograd_nhwc_task_baseline<T, Tl>);
    winograd_nhwc::run<T, Tl>(a, U, nullptr, task, depth);
}
}  // namespace

void nested_forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
                    const void* w, const void* U, void* y, double alpha, double beta, void* workspace) {
    const ConvArgs a{plane, ctx, x, w, y, alpha, beta, workspace, U};
    with_cube(plane, m, [&](auto tile) {
        using Tl = decltype(tile);
        plane.dtype == CONVCORE_DATA_DOUBLE ? run_cube<double, Tl>(a, depth) : run_cube<float, Tl>(a, depth);
    });
}

}  // namespace winograd_3d
}  // namespace cpu
}  // namespace convcore
