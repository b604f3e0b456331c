// The nested Winograd F(m x m x m, 3x3x3) (cpu/winograd_3d.hpp has the math): F(m,3) along the
// depth here, as transforms of whole NDHWC planes, around alpha calls of the fused 2-D
// F(m x m, 3x3) (cpu/winograd_nhwc.hpp through winograd_3d::forward), each over every depth
// tile of every image at once.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/generated/winograd_tables.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/winograd_3d.hpp"
#include "cpu/winograd_nhwc.hpp"

namespace convcore {
namespace cpu {
namespace winograd_3d {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Elements rounded up to whole 64-byte lines (each workspace region starts on one).
int64_t lines(int64_t elems, size_t elem) { return ceil_div(elems * int64_t(elem), 64) * 64 / int64_t(elem); }

// The buffers of one call, in elements: the U's, one depth-transformed filter W_i, the X_i of
// every tile and image, the Z_i likewise.
struct Sizes {
    int64_t alpha, tiles, u, wd, xd, z;
    Sizes(const ConvProblem& plane, int64_t m, const Depth& depth)
        : alpha(m + 2),
          tiles(ceil_div(depth.d_out, m)),
          u(winograd_nhwc::u_elems(plane, m, 1)),
          wd(plane.k * plane.c * 9),
          xd(alpha * tiles * plane.n * plane.h * plane.w * plane.c),
          z(alpha * tiles * plane.n * plane.p * plane.q * plane.k) {}
    int64_t u_all(size_t elem) const { return lines(alpha * u, elem); }
    int64_t total(size_t elem) const { return u_all(elem) + lines(wd, elem) + lines(xd, elem) + lines(z, elem); }
};

// The depth transforms, one pass over a chunk of every plane they read and write:
//     out[o][e] = scale * sum_j M[o][j] * in[j][e] (+ beta * out[o][e] when Accumulate)
// for e in [0, len), with M a constexpr table (B^T or A^T of F(m,3)): once unrolled its zero
// entries vanish and its ones are adds. In vectors of VB bytes, compiled per instruction set.
template <typename T, int VB, int O, int A, bool Accumulate, typename Mat>
CONVCORE_GEMM_INLINE void transform_planes(const Mat& M, const T* const* in, T* const* out, int64_t len, T scale,
                                           T beta) {
    typedef T Vec __attribute__((vector_size(VB)));
    constexpr int64_t L = VB / sizeof(T);
    int64_t e = 0;
    for (; e + L <= len; e += L) {
        Vec v[A][1], r[O][1];
        for (int j = 0; j < A; ++j) winograd_nhwc::load_vec<T, VB>(v[j][0], in[j] + e);
        winograd_nhwc::left<O, A, 1>(M, v, r);
        for (int o = 0; o < O; ++o) {
            Vec res = scale * r[o][0];
            if constexpr (Accumulate) {
                Vec old;
                winograd_nhwc::load_vec<T, VB>(old, out[o] + e);
                res += beta * old;
            }
            winograd_nhwc::store_vec<T, VB>(out[o] + e, res);
        }
    }
    for (; e < len; ++e)
        for (int o = 0; o < O; ++o) {
            T acc = T(0);
            for (int j = 0; j < A; ++j) acc += M[o][j] * in[j][e];
            out[o][e] = scale * acc + (Accumulate ? beta * out[o][e] : T(0));
        }
}

// X_i = sum_j B^T[i][j] x_j (alpha planes in and out) and y_o = scale * sum_i A^T[o][i] Z_i
// (+ beta * y_o), for F(m,3) along the depth.
template <typename T>
struct DepthKernels {
    using Fn = void (*)(const T* const*, T* const*, int64_t, T, T);
    Fn input, output, output_accumulate;
};

#define CONVCORE_DEPTH_KERNELS(ISA, ATTR, VB, ACC)                                                               \
    template <typename T, class D>                                                                              \
    ATTR void depth_input_##ISA(const T* const* in, T* const* out, int64_t len, T, T) {                         \
        transform_planes<T, VB, D::alpha, D::alpha, false>(D::template table<T>::BT, in, out, len, T(1), T(0)); \
    }                                                                                                           \
    template <typename T, class D, bool Accumulate>                                                             \
    ATTR void depth_output_##ISA(const T* const* in, T* const* out, int64_t len, T scale, T beta) {             \
        transform_planes<T, VB, D::m, D::alpha, Accumulate>(D::template table<T>::AT, in, out, len, scale, beta); \
    }                                                                                                           \
    template <typename T, class D>                                                                              \
    const DepthKernels<T> depth_kernels_##ISA = {depth_input_##ISA<T, D>, depth_output_##ISA<T, D, false>,      \
                                                 depth_output_##ISA<T, D, true>};
CONVCORE_EACH_ISA(CONVCORE_DEPTH_KERNELS)
#undef CONVCORE_DEPTH_KERNELS

template <typename T, class D>
const DepthKernels<T>& depth_kernels() {
    return for_cpu_isa(depth_kernels_avx512<T, D>, depth_kernels_avx2<T, D>, depth_kernels_baseline<T, D>);
}

constexpr int64_t kChunk = 2048;  // plane elements per task: its alpha + (m+2) rows stay in L2

// f(tile, image, tile * images + image, e0, len) for every depth tile, image and chunk
// [e0, e0 + len) of a plane of `plane` elements, in parallel.
template <class F>
void for_each_chunk(int64_t tiles, int64_t images, int64_t plane, int threads, const F& f) {
    const int64_t chunks = ceil_div(plane, kChunk);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t task = 0; task < tiles * images * chunks; ++task) {
        const int64_t e0 = task % chunks * kChunk, tn = task / chunks;
        f(tn / images, tn % images, tn, e0, std::min(kChunk, plane - e0));
    }
}

template <typename T, class D>
void prepare_t(const ConvProblem& plane, const Context& ctx, const T* w, T* U, T* wd) {
    using Tab = typename D::template table<T>;
    const Sizes s(plane, D::m, Depth{});
    const int64_t kc = plane.k * plane.c;
    for (int i = 0; i < D::alpha; ++i) {
        // W_i = sum_t G[i][t] w[:, :, t] (true convolution: the depth taps mirrored here, R and S
        // by the 2-D transform)
#pragma omp parallel for num_threads(ctx.threads()) schedule(static)
        for (int64_t kci = 0; kci < kc; ++kci)
            for (int rs = 0; rs < 9; ++rs) {
                T acc = T(0);
                for (int t = 0; t < 3; ++t) acc += Tab::G[i][t] * w[(kci * 3 + (plane.flip ? 2 - t : t)) * 9 + rs];
                wd[kci * 9 + rs] = acc;
            }
        prepare(plane, ctx, D::m, 1, wd, U + i * s.u);
    }
}

template <typename T, class D>
void forward_t(const ConvProblem& plane, const Context& ctx, const Depth& depth, const T* x, const T* w,
               const T* U, T* y, double alpha, double beta, T* workspace) {
    constexpr int A = D::alpha, M = D::m;
    const size_t elem = sizeof(T);
    const Sizes s(plane, M, depth);
    T* wd = workspace + s.u_all(elem);
    T* xd = wd + lines(s.wd, elem);
    T* z = xd + lines(s.xd, elem);
    if (!U) {
        prepare_t<T, D>(plane, ctx, w, workspace, wd);
        U = workspace;
    }
    const int64_t images = plane.n, hwc = plane.h * plane.w * plane.c, pqk = plane.p * plane.q * plane.k;
    const int threads = ctx.threads();

    // X_i[tile][n] = sum_j B^T[i][j] x[n, tile * m + j - pad]
    const DepthKernels<T>& kern = depth_kernels<T, D>();
    alignas(64) static const T zeros[kChunk] = {};  // the planes outside the volume
    for_each_chunk(s.tiles, images, hwc, threads, [&](int64_t tile, int64_t n, int64_t tn, int64_t e0, int64_t len) {
        const T* in[A];
        T* out[A];
        for (int j = 0; j < A; ++j) {
            const int64_t d = tile * M + j - depth.pad;
            in[j] = d >= 0 && d < depth.d_in ? x + (n * depth.d_in + d) * hwc + e0 : zeros;
            out[j] = xd + (j * s.tiles * images + tn) * hwc + e0;
        }
        kern.input(in, out, len, T(1), T(0));
    });

    // Z_i = conv2d(X_i, W_i) over tiles x images planes
    ConvProblem batch = plane;
    batch.n = s.tiles * images;
    for (int i = 0; i < A; ++i)
        forward(batch, ctx, M, Depth{}, xd + i * s.tiles * images * hwc, nullptr, U + i * s.u,
                z + i * s.tiles * images * pqk, 1.0, 0.0, nullptr);

    // y[n, tile * m + o] = alpha * sum_i A^T[o][i] Z_i[tile][n] + beta * y
    for_each_chunk(s.tiles, images, pqk, threads, [&](int64_t tile, int64_t n, int64_t tn, int64_t e0, int64_t len) {
        const T* in[A];
        T* out[M];
        T sink[kChunk];  // the output planes of a partial last tile, past the volume
        for (int i = 0; i < A; ++i) in[i] = z + (i * s.tiles * images + tn) * pqk + e0;
        if ((tile + 1) * M > depth.d_out) std::fill(sink, sink + len, T(0));
        for (int o = 0; o < M; ++o)
            out[o] = tile * M + o < depth.d_out ? y + (n * depth.d_out + tile * M + o) * pqk + e0 : sink;
        (beta != 0.0 ? kern.output_accumulate : kern.output)(in, out, len, T(alpha), T(beta));
    });
}

}  // namespace

bool nests(const Depth& depth, int64_t m) {
    if (depth.taps != 3 || depth.stride != 1 || depth.dil != 1 || (m != 2 && m != 4)) return false;
    int64_t per_tap = 0;  // the per-tap form's 2-D plane convolutions: output planes x taps inside
    for (int64_t t = 0; t < 3; ++t) {
        const int64_t offset = t - depth.pad;
        per_tap += std::max<int64_t>(0, std::min(depth.d_out, depth.d_in - offset) - std::max<int64_t>(0, -offset));
    }
    return ceil_div(depth.d_out, m) * (m + 2) < per_tap;
}

size_t nested_filter_bytes(const ConvProblem& plane, int64_t m) {
    return size_t(Sizes(plane, m, Depth{}).u_all(plane.elem_size())) * plane.elem_size();
}

size_t nested_workspace_bytes(const ConvProblem& plane, int64_t m, const Depth& depth) {
    return size_t(Sizes(plane, m, depth).total(plane.elem_size())) * plane.elem_size();
}

void nested_prepare(const ConvProblem& plane, const Context& ctx, int64_t m, const void* w, void* out) {
    std::vector<double> wd(size_t(plane.k * plane.c * 9));  // W_i, one at a time (either type fits)
    if (plane.dtype == CONVCORE_DATA_DOUBLE) {
        const auto* wt = static_cast<const double*>(w);
        auto* u = static_cast<double*>(out);
        m == 2 ? prepare_t<double, winograd::F2x3>(plane, ctx, wt, u, wd.data())
               : prepare_t<double, winograd::F4x3>(plane, ctx, wt, u, wd.data());
    } else {
        const auto* wt = static_cast<const float*>(w);
        auto* u = static_cast<float*>(out);
        auto* wf = reinterpret_cast<float*>(wd.data());
        m == 2 ? prepare_t<float, winograd::F2x3>(plane, ctx, wt, u, wf)
               : prepare_t<float, winograd::F4x3>(plane, ctx, wt, u, wf);
    }
}

void nested_forward(const ConvProblem& plane, const Context& ctx, int64_t m, const Depth& depth, const void* x,
                    const void* w, const void* U, void* y, double alpha, double beta, void* workspace) {
    if (plane.dtype == CONVCORE_DATA_DOUBLE) {
        const auto run = m == 2 ? forward_t<double, winograd::F2x3> : forward_t<double, winograd::F4x3>;
        run(plane, ctx, depth, static_cast<const double*>(x), static_cast<const double*>(w),
            static_cast<const double*>(U), static_cast<double*>(y), alpha, beta, static_cast<double*>(workspace));
    } else {
        const auto run = m == 2 ? forward_t<float, winograd::F2x3> : forward_t<float, winograd::F4x3>;
        run(plane, ctx, depth, static_cast<const float*>(x), static_cast<const float*>(w),
            static_cast<const float*>(U), static_cast<float*>(y), alpha, beta, static_cast<float*>(workspace));
    }
}

}  // namespace winograd_3d
}  // namespace cpu
}  // namespace convcore
