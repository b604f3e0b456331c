// WINOGRAD_3X3_2X2 backward filter on CUDA (paper 001, Lavin & Gray section 4.2): the 3x3
// filter gradient with Winograd's F(3x3,2x2), the GPU twin of cpu/winograd_backward.cpp (whose
// header explains the math). COMPILED ONLY: no GPU was available when it was written, so this
// file has never run; its per-tile arithmetic, workspace layout and GEMM arguments are the
// host/device code of common/winograd_filter_grad.hpp, which
// tests/cpp/test_winograd_filter_grad_tile.cpp runs on the host against a float64 reference.
// tests/cpp/test_cuda_backward.cpp and tests/gpu/test_gpu_algorithms.py run this solver on a
// GPU machine (they loop over every CUDA-registered algorithm; they skip without a GPU).
//
// dy is cut into 2x2 tiles (winograd::tile_grid with m = 2 over N x P x Q). Per block of tiles,
// all groups at once, on the handle's stream (U, V and the block's M are reused by the next
// block only after the previous block's kernels, in stream order):
//   a. dy transform kernel:    U[g][xi][kl][t] = (G g_kt G^T)[xi]     (one thread per (k, t))
//   b. input transform kernel: V[g][xi][cl][t] = (BT d_ct BT^T)[xi]   (one thread per (c, t))
//   c. ONE cuBLAS strided-batched GEMM over the groups * 16 transform points:
//        M[g][xi] (K/g x C/g) = U[g][xi] (K/g x T) . V[g][xi]^T (T x C/g)
//      (column-major arguments: winograd::fgrad::gemm_args).
// Cross-block accumulation is in float64, as on the CPU: float32 writes the block's M in float
// (cuBLAS beta = 0) and a kernel adds it into a float64 M (the first block overwrites it);
// float64 accumulates with cuBLAS beta = 1 directly into M (beta = 0 for the first block).
// So the float32 rounding error grows with the tiles of ONE block (cuBLAS's float sums over at
// most `block` tiles), not with N * ceil(P/2) * ceil(Q/2); the blocks' sums add exactly enough
// in double. Then an output kernel per (k, c): dw = alpha * AT M AT^T + beta * dw, computed in
// double and rounded once, taps mirrored in the true-convolution mode; beta == 0 never reads dw.
// No atomics: deterministic (cuBLAS in its default math mode: no TF32).
//
// Workspace (exact, depends on the problem only), B = tiles per block = min(N*ceil(P/2)*ceil(Q/2),
// max(256, 64 MiB / (16 (C + K) elem))), L = B rounded up to 8, rnd(x) = x rounded up to 32:
//   float32: (rnd(16 K L) + rnd(16 C L) + rnd(16 K C/g)) * 4 + 16 K (C/g) * 8 bytes
//   float64: (rnd(16 K L) + rnd(16 C L)) * 8 + 16 K (C/g) * 8 bytes
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/blend.hpp"
#include "common/winograd_filter_grad.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/gemm_util.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

namespace fg = winograd::fgrad;

constexpr int64_t kBlockBudgetBytes = int64_t(64) << 20;  // U + V of one block of tiles
constexpr int64_t kMinBlockTiles = 256;
constexpr int64_t kAlignElems = 32;  // regions start on 128-byte boundaries (float)

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

struct Plan {
    winograd::TileGrid grid;
    int64_t block;                 // tiles per block (0 when there are none)
    int64_t ldt;                   // row length of U and V: block rounded up to 8
    int64_t u_elems, v_elems;      // each rounded up to kAlignElems
    int64_t mb_elems;              // the block's M in T (float32 only), rounded up
    int64_t m_doubles;             // the float64 M: 16 K C/g
    size_t bytes(size_t elem) const {
        return size_t(u_elems + v_elems + mb_elems) * elem + size_t(m_doubles) * sizeof(double);
    }
};

Plan make_plan(const ConvProblem& p) {
    Plan pl{};
    pl.grid = fg::grid(p.n, p.p, p.q);
    const int64_t per_tile = fg::kXi * (p.c + p.k) * int64_t(p.elem_size());
    const int64_t budget = std::max<int64_t>(kMinBlockTiles, kBlockBudgetBytes / std::max<int64_t>(per_tile, 1));
    pl.block = std::min(pl.grid.count, budget);
    pl.ldt = round_up(pl.block, 8);
    pl.u_elems = round_up(fg::kXi * p.k * pl.ldt, kAlignElems);
    pl.v_elems = round_up(fg::kXi * p.c * pl.ldt, kAlignElems);
    const int64_t m_elems = fg::kXi * p.k * p.c_per_group();
    pl.mb_elems = p.dtype == CONVCORE_DATA_DOUBLE ? 0 : round_up(m_elems, kAlignElems);
    pl.m_doubles = m_elems;
    return pl;
}

std::string why_not(const ConvProblem& p) {
    const std::string name = "WINOGRAD_3X3_2X2";
#if !defined(CONVCORE_HAVE_CUBLAS)
    (void)p;
    return name + " on CUDA needs cuBLAS, which this build did not find (pip install nvidia-cublas)";
#else
    if (const std::string shape = winograd_shape_why_not(name, p); !shape.empty()) return shape;
    // cuBLAS takes int sizes, leading dimensions and batch counts.
    const Plan pl = make_plan(p);
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX || pl.ldt > INT_MAX ||
        p.groups * fg::kXi > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", C/groups=" + std::to_string(p.c_per_group()) + ", tiles per block=" +
               std::to_string(pl.ldt) + ", batch=" + std::to_string(p.groups * fg::kXi) +
               ") exceeds cuBLAS's 32-bit interface";
    return "";
#endif
}

size_t workspace_bytes(const ConvProblem& p) { return make_plan(p).bytes(p.elem_size()); }

#if defined(CONVCORE_HAVE_CUBLAS)

constexpr int kThreads = 256;

// Sizes the kernels need, passed by value.
struct Dims {
    int64_t c, h, w, k, p, q, cg, kg, pad_h, pad_w;
    winograd::TileGrid grid;
    fg::Layout ws;
};

// U[g][xi][kl][t - t0] for the tiles [t0, t0 + nt): item = k * nt + (t - t0), so consecutive
// threads take consecutive tiles of one output channel (coalesced U stores).
template <typename T>
__global__ void dy_transform_kernel(const T* __restrict__ dy, T* __restrict__ U, Dims d, int64_t t0,
                                    int64_t nt) {
    const int64_t total = d.k * nt;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t k = i / nt, tl = i % nt, g = k / d.kg, kl = k % d.kg;
        const winograd::TilePos tp = winograd::tile_pos(d.grid, t0 + tl);
        T gt[4], u[fg::kA][fg::kA];
        fg::load_dy_tile(dy + (tp.n * d.k + k) * d.p * d.q, d.p, d.q, tp.ty, tp.tx, gt);
        fg::dy_transform(gt, u);
#pragma unroll
        for (int xi = 0; xi < fg::kA; ++xi)
#pragma unroll
            for (int nu = 0; nu < fg::kA; ++nu) U[d.ws.u(g, xi * fg::kA + nu, kl, tl)] = u[xi][nu];
    }
}

// V[g][xi][cl][t - t0]: item = c * nt + (t - t0).
template <typename T>
__global__ void x_transform_kernel(const T* __restrict__ x, T* __restrict__ V, Dims d, int64_t t0,
                                   int64_t nt) {
    const int64_t total = d.c * nt;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t c = i / nt, tl = i % nt, g = c / d.cg, cl = c % d.cg;
        const winograd::TilePos tp = winograd::tile_pos(d.grid, t0 + tl);
        T dt[fg::kA][fg::kA], v[fg::kA][fg::kA];
        fg::load_x_tile(x + (tp.n * d.c + c) * d.h * d.w, d.h, d.w, d.pad_h, d.pad_w, tp.ty, tp.tx, dt);
        fg::x_transform(dt, v);
#pragma unroll
        for (int xi = 0; xi < fg::kA; ++xi)
#pragma unroll
            for (int nu = 0; nu < fg::kA; ++nu) V[d.ws.v(g, xi * fg::kA + nu, cl, tl)] = v[xi][nu];
    }
}

// M (float64) += the block's M (float32); the first block overwrites.
__global__ void accumulate_kernel(const float* __restrict__ Mb, double* __restrict__ M, int64_t count,
                                  bool first) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
        fg::accumulate(M[i], Mb[i], first);
}

// dw[k][c] from M[g][xi][kl][cl]: item = k * (C/g) + c, the index of dw's 3x3 slice.
template <typename T>
__global__ void output_kernel(const double* __restrict__ M, T* dw, Dims d, bool flip, T alpha, T beta) {
    const int64_t total = d.k * d.cg;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t k = i / d.cg, c = i % d.cg, g = k / d.kg, kl = k % d.kg;
        double mm[fg::kA][fg::kA];
#pragma unroll
        for (int xi = 0; xi < fg::kA; ++xi)
#pragma unroll
            for (int nu = 0; nu < fg::kA; ++nu) mm[xi][nu] = M[d.ws.m(g, xi * fg::kA + nu, kl, c)];
        fg::store_dw(mm, dw + i * 9, flip, alpha, beta);
    }
}

// The multiply stage, C = op(A) B with op(A) = A^T as fg::gemm_args says.
template <typename T>
void grad_gemm(cublasHandle_t h, const fg::GradGemm& b, const T* U, const T* V, T* M, T beta) {
    gemm_batched(h, CUBLAS_OP_T, CUBLAS_OP_N, b.m, b.n, b.k, T(1), V, b.lda, b.stride_a, U, b.ldb,
                 b.stride_b, beta, M, b.ldc, b.stride_c, b.batch);
}

template <typename T>
void run_typed(const BwdFilterArgs& args) {
    const ConvProblem& p = args.prob;
    const Plan pl = make_plan(p);
    T* dw = static_cast<T*>(args.dw);
    const T alpha = T(args.alpha), beta = T(args.beta);
    if (dw == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "WINOGRAD_3X3_2X2 backward filter (CUDA): null dw");
    if (!args.ctx.cuda)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                    "WINOGRAD_3X3_2X2 backward filter (CUDA): the handle has no CUDA resources");
    DeviceGuard guard(args.ctx.device_index);
    const cudaStream_t stream = stream_of(args.ctx);
    if (pl.grid.count == 0) {  // an empty sum (no image or no output): dw = beta * dw
        scale_by_beta(args.ctx, dw, p.w_elems(), beta);
        return;
    }
    if (args.x == nullptr || args.dy == nullptr || args.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                    "WINOGRAD_3X3_2X2 backward filter (CUDA): null tensor or workspace pointer");
    Dims d{};
    d.c = p.c, d.h = p.h, d.w = p.w, d.k = p.k, d.p = p.p, d.q = p.q;
    d.cg = p.c_per_group(), d.kg = p.k_per_group(), d.pad_h = p.pad_h, d.pad_w = p.pad_w;
    d.grid = pl.grid;
    d.ws = {d.cg, d.kg, pl.ldt};

    const T* x = static_cast<const T*>(args.x);
    const T* dy = static_cast<const T*>(args.dy);
    T* U = static_cast<T*>(args.workspace);
    T* V = U + pl.u_elems;
    T* Mb = V + pl.v_elems;  // float32 only (mb_elems == 0 for float64)
    double* M = reinterpret_cast<double*>(Mb + pl.mb_elems);
    cublasHandle_t blas = args.ctx.cuda->cublas(stream);

    for (int64_t t0 = 0; t0 < pl.grid.count; t0 += pl.block) {
        const int64_t nt = std::min(pl.block, pl.grid.count - t0);
        const bool first = t0 == 0;
        CONVCORE_LAUNCH(grid_blocks(args.ctx, p.k * nt, kThreads), kThreads, 0, stream,
                        dy_transform_kernel<T>)(dy, U, d, t0, nt);
        CONVCORE_CUDA_CHECK_LAUNCH("winograd_backward dy_transform_kernel");
        CONVCORE_LAUNCH(grid_blocks(args.ctx, p.c * nt, kThreads), kThreads, 0, stream,
                        x_transform_kernel<T>)(x, V, d, t0, nt);
        CONVCORE_CUDA_CHECK_LAUNCH("winograd_backward x_transform_kernel");
        const fg::GradGemm gemm = fg::gemm_args(d.ws, nt, p.groups);
        if constexpr (sizeof(T) == sizeof(double)) {
            grad_gemm<double>(blas, gemm, U, V, M, first ? 0.0 : 1.0);
        } else {
            grad_gemm<float>(blas, gemm, U, V, Mb, 0.0f);
            CONVCORE_LAUNCH(grid_blocks(args.ctx, pl.m_doubles, kThreads), kThreads, 0, stream,
                            accumulate_kernel)(
                Mb, M, pl.m_doubles, first);
            CONVCORE_CUDA_CHECK_LAUNCH("winograd_backward accumulate_kernel");
        }
    }
    CONVCORE_LAUNCH(grid_blocks(args.ctx, p.k * d.cg, kThreads), kThreads, 0, stream,
                    output_kernel<T>)(M, dw, d, p.flip,
                                      alpha, beta);
    CONVCORE_CUDA_CHECK_LAUNCH("winograd_backward output_kernel");
}

void run(const BwdFilterArgs& a) {
    if (a.prob.w_elems() == 0) return;
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

#else  // no cuBLAS: why_not refuses every problem, so run is never called

void run(const BwdFilterArgs&) {
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "WINOGRAD_3X3_2X2 backward filter on CUDA needs cuBLAS");
}

#endif

}  // namespace

extern const Solver winograd_3x3_2x2_bwd_filter_solver;
const Solver winograd_3x3_2x2_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_WINOGRAD_3X3_2X2,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run, .made_for = made_for::yes};

}  // namespace cuda
}  // namespace convcore
