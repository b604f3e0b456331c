// WINOGRAD_2X2_3X3 and WINOGRAD_4X4_3X3 on CUDA: Lavin & Gray's Algorithm 1 (paper 001,
// Sec. 4, Eqs. 9-13) with F(2x2,3x3) (4x4 input tiles) and F(4x4,3x3) (6x6 input tiles).
//
// With a = m + 2 and the output cut into m x m tiles (common/winograd_tile.hpp), per call:
//   1. filter transform kernel: U[g][xi][k][c] = (G g_kc G^T)[xi]   (one thread per (k, c))
//   2. per block of tiles (all groups at once):
//      a. input transform kernel: V[g][xi][c][t] = (BT d_ct BT^T)[xi]  (one thread per (c, t))
//      b. the multiply stage, ONE cuBLAS strided-batched GEMM over the groups * a^2 positions:
//         M[g][xi] (K/g x T) = U[g][xi] (K/g x C/g) . V[g][xi] (C/g x T)
//      c. output transform kernel: y = AT M AT^T per (k, tile), clipped at the right/bottom
//         edges, blended into y (alpha/beta; beta == 0 never reads y)   (one thread per (k, t))
// Everything runs on the handle's stream, in stream order (V and M are reused by the next
// block only after the previous block's kernels). The per-tile arithmetic is the host/device
// code of common/winograd_tile.hpp, tested on the CPU by tests/cpp/test_winograd_tile.cpp.
// cuBLAS runs in its default math mode (no TF32), so float32 stays float32.
//
// Workspace (elements, exact, depends on the problem only):
//   rnd(a^2 K C/g) + rnd(a^2 C L) + rnd(a^2 K L),  rnd(x) = x rounded up to 32 elements,
//   L = tiles per block rounded up to 8, the block = min(all tiles, max(1024, 256 MiB /
//   (a^2 (C + K) elem))) tiles.
//
// Fused F(2x2,3x3) (Lavin Sec. 5), float32 only, opt-in with the environment variable
// CONVCORE_WINOGRAD_FUSED=1 until a GPU measurement says when it wins: after the same filter
// transform, one kernel per call does the input transform, the 16 products and the output
// transform per block of 32 tiles x 16 output channels in shared memory and registers
// (common/winograd_fused.hpp, whose phases test_winograd_tile runs on the host). Workspace:
// U only, rnd(16 K C/g) elements.
#include <cstdlib>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/blend.hpp"
#include "common/winograd_fused.hpp"
#include "common/winograd_tile.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/grid_limits.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int64_t kBlockBudgetBytes = int64_t(256) << 20;  // V + M of one block of tiles
constexpr int64_t kMinBlockTiles = 1024;
constexpr int64_t kAlignElems = 32;  // workspace regions start on 128-byte boundaries (float)

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

struct Plan {
    int64_t m, a, aa;
    winograd::TileGrid grid;
    int64_t block;  // tiles per block
    int64_t ldt;    // leading dimension of V and M rows: block rounded up to 8
    int64_t u_elems, v_elems, m_elems;  // each rounded up to kAlignElems
};

Plan make_plan(const ConvProblem& p, int64_t m) {
    Plan pl{};
    pl.m = m;
    pl.a = m + 2;
    pl.aa = pl.a * pl.a;
    pl.grid = winograd::tile_grid(m, p.n, p.p, p.q);
    const int64_t per_tile = pl.aa * (p.c + p.k) * int64_t(p.elem_size());
    const int64_t budget = std::max<int64_t>(kMinBlockTiles, kBlockBudgetBytes / std::max<int64_t>(per_tile, 1));
    pl.block = std::max<int64_t>(1, std::min(pl.grid.count, budget));
    pl.ldt = round_up(pl.block, 8);
    pl.u_elems = round_up(pl.aa * p.k * p.c_per_group(), kAlignElems);
    pl.v_elems = round_up(pl.aa * p.c * pl.ldt, kAlignElems);
    pl.m_elems = round_up(pl.aa * p.k * pl.ldt, kAlignElems);
    return pl;
}

// The fused path: WINOGRAD_2X2_3X3, float32, CONVCORE_WINOGRAD_FUSED=1 (read on every call,
// so workspace size and run always agree within one process state).
bool use_fused(const ConvProblem& p, int64_t m) {
    const char* e = std::getenv("CONVCORE_WINOGRAD_FUSED");
    return m == 2 && p.dtype == CONVCORE_DATA_FLOAT && e != nullptr && e[0] == '1';
}

const char* algo_name(int64_t m) { return m == 2 ? "WINOGRAD_2X2_3X3" : "WINOGRAD_4X4_3X3"; }

std::string why_not_m(const ConvProblem& p, int64_t m) {
    const std::string name = algo_name(m);
#if !defined(CONVCORE_HAVE_CUBLAS)
    (void)p;
    return name + " on CUDA needs cuBLAS, which this build did not find (pip install nvidia-cublas)";
#else
    if (const std::string shape = winograd_shape_why_not(name, p); !shape.empty()) return shape;
    const Plan pl = make_plan(p, m);
    if (use_fused(p, m)) {
        if ((pl.grid.count + winograd::kFusedTiles - 1) / winograd::kFusedTiles > INT_MAX)
            return name + " (fused): too many tiles for the grid (" + std::to_string(pl.grid.count) + ")";
        return "";
    }
    // cuBLAS takes int sizes, leading dimensions and batch counts.
    if (p.k_per_group() > INT_MAX || p.c_per_group() > INT_MAX || pl.ldt > INT_MAX ||
        p.groups * pl.aa > INT_MAX)
        return name + ": a GEMM dimension (K/groups=" + std::to_string(p.k_per_group()) +
               ", C/groups=" + std::to_string(p.c_per_group()) + ", tiles per block=" +
               std::to_string(pl.ldt) + ", batch=" + std::to_string(p.groups * pl.aa) +
               ") exceeds cuBLAS's 32-bit interface";
    return "";
#endif
}

size_t workspace_bytes_m(const ConvProblem& p, int64_t m) {
    const Plan pl = make_plan(p, m);
    if (use_fused(p, m)) return size_t(pl.u_elems) * p.elem_size();
    return size_t(pl.u_elems + pl.v_elems + pl.m_elems) * p.elem_size();
}

#if defined(CONVCORE_HAVE_CUBLAS)

constexpr int kThreads = 256;

// Sizes the kernels need, passed by value.
struct Dims {
    int64_t n, c, h, w, k, p, q, cg, kg, pad_h, pad_w;
    winograd::TileGrid grid;
    winograd::WsLayout ws;
    bool flip;
};

// U[g][xi][kl][c] for every (k, c): item = k * cg + c.
template <class F, typename T>
__global__ void filter_transform_kernel(const T* __restrict__ w, T* __restrict__ U, Dims d) {
    constexpr int a = F::alpha;
    const int64_t total = d.k * d.cg;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t k = i / d.cg, c = i % d.cg, g = k / d.kg, kl = k % d.kg;
        T u[a][a];
        winograd::filter_transform<F>(w + i * 9, d.flip, u);
#pragma unroll
        for (int xi = 0; xi < a; ++xi)
#pragma unroll
            for (int nu = 0; nu < a; ++nu) U[d.ws.u(g, xi * a + nu, kl, c)] = u[xi][nu];
    }
}

// V[g][xi][cl][t - t0] for the tiles [t0, t0 + nt): item = c * nt + (t - t0), so consecutive
// threads take consecutive tiles of one channel (coalesced V stores).
template <class F, typename T>
__global__ void input_transform_kernel(const T* __restrict__ x, T* __restrict__ V, Dims d,
                                       int64_t t0, int64_t nt) {
    constexpr int a = F::alpha;
    const int64_t total = d.c * nt;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t c = i / nt, tl = i % nt, g = c / d.cg, cl = c % d.cg;
        const winograd::TilePos tp = winograd::tile_pos(d.grid, t0 + tl);
        T dt[a][a], v[a][a];
        winograd::load_input_tile<F>(x + (tp.n * d.c + c) * d.h * d.w, d.h, d.w, d.pad_h, d.pad_w,
                                     tp.ty, tp.tx, dt);
        winograd::input_transform<F>(dt, v);
#pragma unroll
        for (int xi = 0; xi < a; ++xi)
#pragma unroll
            for (int nu = 0; nu < a; ++nu) V[d.ws.v(g, xi * a + nu, cl, tl)] = v[xi][nu];
    }
}

// y from M[g][xi][kl][t - t0]: item = k * nt + (t - t0).
template <class F, typename T>
__global__ void output_transform_kernel(const T* __restrict__ M, T* __restrict__ y, Dims d,
                                        int64_t t0, int64_t nt, T alpha, T beta) {
    constexpr int a = F::alpha, m = F::m;
    const int64_t total = d.k * nt;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        const int64_t k = i / nt, tl = i % nt, g = k / d.kg, kl = k % d.kg;
        const winograd::TilePos tp = winograd::tile_pos(d.grid, t0 + tl);
        T mm[a][a], yt[m][m];
#pragma unroll
        for (int xi = 0; xi < a; ++xi)
#pragma unroll
            for (int nu = 0; nu < a; ++nu) mm[xi][nu] = M[d.ws.m(g, xi * a + nu, kl, tl)];
        winograd::output_transform<F>(mm, yt);
        const int64_t p0 = tp.ty * m, q0 = tp.tx * m;
        T* yk = y + ((tp.n * d.k + k) * d.p + p0) * d.q + q0;
#pragma unroll
        for (int r = 0; r < m; ++r)
#pragma unroll
            for (int s = 0; s < m; ++s)
                if (p0 + r < d.p && q0 + s < d.q) blend_store(yk + r * d.q + s, yt[r][s], alpha, beta);
    }
}

// The multiply stage: winograd::batched_gemm_args says which column-major GEMM computes M.
void batched_gemm(cublasHandle_t h, const winograd::BatchedGemm& b, const float* U, const float* V,
                  float* M) {
    const float one = 1.0f, zero = 0.0f;
    CONVCORE_CUBLAS_CHECK(cublasSgemmStridedBatched(
        h, CUBLAS_OP_N, CUBLAS_OP_N, int(b.m), int(b.n), int(b.k), &one, V, int(b.lda),
        static_cast<long long>(b.stride_a), U, int(b.ldb), static_cast<long long>(b.stride_b), &zero,
        M, int(b.ldc), static_cast<long long>(b.stride_c), int(b.batch)));
}
void batched_gemm(cublasHandle_t h, const winograd::BatchedGemm& b, const double* U,
                  const double* V, double* M) {
    const double one = 1.0, zero = 0.0;
    CONVCORE_CUBLAS_CHECK(cublasDgemmStridedBatched(
        h, CUBLAS_OP_N, CUBLAS_OP_N, int(b.m), int(b.n), int(b.k), &one, V, int(b.lda),
        static_cast<long long>(b.stride_a), U, int(b.ldb), static_cast<long long>(b.stride_b), &zero,
        M, int(b.ldc), static_cast<long long>(b.stride_c), int(b.batch)));
}

// Fused F(2x2,3x3): one block per (32 tiles, 16 output channels of a group); the phases of
// common/winograd_fused.hpp between barriers.
__global__ void __launch_bounds__(winograd::kFusedThreads)
    fused_f2x3_kernel(const float* __restrict__ x, const float* __restrict__ U, float* __restrict__ y,
                      winograd::FusedDims d, int64_t groups, float alpha, float beta) {
    namespace wg = winograd;
    CONVCORE_SHARED_ALIGNED(16, float[wg::kFusedSmem], smem);
    const int tid = threadIdx.x;
    const int64_t tile0 = int64_t(blockIdx.x) * wg::kFusedTiles;
    for (int64_t gk = blockIdx.y; gk < d.kblocks * groups; gk += gridDim.y) {
        const int64_t g = gk / d.kblocks, k0 = gk % d.kblocks * wg::kFusedK;
        float acc[wg::kFusedAccK][wg::kFusedAccT];
#pragma unroll
        for (int i = 0; i < wg::kFusedAccK; ++i)
#pragma unroll
            for (int j = 0; j < wg::kFusedAccT; ++j) acc[i][j] = 0.0f;
        for (int64_t c0 = 0; c0 < d.cg; c0 += wg::kFusedC) {
            wg::fused_load_chunk(d, x, U, tile0, g, k0, c0, tid, smem);
            __syncthreads();
            wg::fused_multiply(smem, tid, acc);
            __syncthreads();  // before the next chunk overwrites Vs/Us (or Ms aliases them)
        }
        wg::fused_store_acc(smem, tid, acc);
        __syncthreads();
        wg::fused_output(d, smem, tile0, g, k0, tid, y, alpha, beta);
        __syncthreads();  // before the next (g, k0) reuses the buffer
    }
}

void run_fused(const ConvArgs& args) {
    namespace wg = winograd;
    const ConvProblem& p = args.prob;
    const Plan pl = make_plan(p, 2);
    if (pl.grid.count == 0 || p.k == 0) return;
    if (args.x == nullptr || args.w == nullptr || args.y == nullptr || args.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "WINOGRAD_2X2_3X3 (CUDA, fused): null tensor or workspace pointer");
    Dims d{};  // for the filter transform kernel
    d.n = p.n, d.c = p.c, d.h = p.h, d.w = p.w, d.k = p.k, d.p = p.p, d.q = p.q;
    d.cg = p.c_per_group(), d.kg = p.k_per_group(), d.pad_h = p.pad_h, d.pad_w = p.pad_w;
    d.grid = pl.grid;
    d.ws = {pl.aa, d.cg, d.kg, 0};
    d.flip = p.flip;
    wg::FusedDims fd{};
    fd.c = p.c, fd.h = p.h, fd.w = p.w, fd.k = p.k, fd.p = p.p, fd.q = p.q, fd.cg = d.cg, fd.kg = d.kg;
    fd.pad_h = p.pad_h, fd.pad_w = p.pad_w, fd.grid = pl.grid, fd.ws = d.ws;
    fd.kblocks = (d.kg + wg::kFusedK - 1) / wg::kFusedK;

    float* U = static_cast<float*>(args.workspace);
    DeviceGuard guard(args.ctx.device_index);
    const cudaStream_t stream = stream_of(args.ctx);
    CONVCORE_LAUNCH(grid_blocks(args.ctx, p.k * d.cg, kThreads), kThreads, 0, stream,
                    filter_transform_kernel<wg::F2x3, float>)(
        static_cast<const float*>(args.w), U, d);
    CONVCORE_CUDA_CHECK_LAUNCH("winograd filter_transform_kernel");
    const dim3 grid(static_cast<unsigned int>((pl.grid.count + wg::kFusedTiles - 1) / wg::kFusedTiles),
                    static_cast<unsigned int>(std::min<int64_t>(fd.kblocks * p.groups, kMaxGridY)));
    CONVCORE_LAUNCH(grid, wg::kFusedThreads, 0, stream,
                    fused_f2x3_kernel)(static_cast<const float*>(args.x), U,
                                       static_cast<float*>(args.y), fd, p.groups,
                                       float(args.alpha), float(args.beta));
    CONVCORE_CUDA_CHECK_LAUNCH("winograd fused_f2x3_kernel");
}

template <class F, typename T>
void run_typed(const ConvArgs& args) {
    const ConvProblem& p = args.prob;
    const Plan pl = make_plan(p, F::m);
    if (pl.grid.count == 0 || p.k == 0) return;
    if (args.x == nullptr || args.w == nullptr || args.y == nullptr || args.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, std::string(algo_name(F::m)) +
                                                        " (CUDA): null tensor or workspace pointer");
    if (!args.ctx.cuda)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                    std::string(algo_name(F::m)) + " (CUDA): the handle has no CUDA resources");
    Dims d{};
    d.n = p.n, d.c = p.c, d.h = p.h, d.w = p.w, d.k = p.k, d.p = p.p, d.q = p.q;
    d.cg = p.c_per_group(), d.kg = p.k_per_group(), d.pad_h = p.pad_h, d.pad_w = p.pad_w;
    d.grid = pl.grid;
    d.ws = {pl.aa, d.cg, d.kg, pl.ldt};
    d.flip = p.flip;

    const T* x = static_cast<const T*>(args.x);
    const T* w = static_cast<const T*>(args.w);
    T* y = static_cast<T*>(args.y);
    T* U = static_cast<T*>(args.workspace);
    T* V = U + pl.u_elems;
    T* M = V + pl.v_elems;
    const T alpha = T(args.alpha), beta = T(args.beta);

    DeviceGuard guard(args.ctx.device_index);
    const cudaStream_t stream = stream_of(args.ctx);
    cublasHandle_t blas = args.ctx.cuda->cublas(stream);

    CONVCORE_LAUNCH(grid_blocks(args.ctx, p.k * d.cg, kThreads), kThreads, 0, stream,
                    filter_transform_kernel<F, T>)(w, U, d);
    CONVCORE_CUDA_CHECK_LAUNCH("winograd filter_transform_kernel");
    for (int64_t t0 = 0; t0 < pl.grid.count; t0 += pl.block) {
        const int64_t nt = std::min(pl.block, pl.grid.count - t0);
        CONVCORE_LAUNCH(grid_blocks(args.ctx, p.c * nt, kThreads), kThreads, 0, stream,
                        input_transform_kernel<F, T>)(
            x, V, d, t0, nt);
        CONVCORE_CUDA_CHECK_LAUNCH("winograd input_transform_kernel");
        batched_gemm(blas, winograd::batched_gemm_args(d.ws, nt, p.groups), U, V, M);
        CONVCORE_LAUNCH(grid_blocks(args.ctx, p.k * nt, kThreads), kThreads, 0, stream,
                        output_transform_kernel<F, T>)(
            M, y, d, t0, nt, alpha, beta);
        CONVCORE_CUDA_CHECK_LAUNCH("winograd output_transform_kernel");
    }
}

template <class F>
void run_f(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<F, double>(a);
    else
        run_typed<F, float>(a);
}

void run_2(const ConvArgs& a) {
    if (use_fused(a.prob, 2))
        run_fused(a);
    else
        run_f<winograd::F2x3>(a);
}
void run_4(const ConvArgs& a) { run_f<winograd::F4x3>(a); }

#else  // no cuBLAS: why_not refuses every problem, so run is never called

void run_2(const ConvArgs&) {
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "WINOGRAD_2X2_3X3 on CUDA needs cuBLAS");
}
void run_4(const ConvArgs&) {
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "WINOGRAD_4X4_3X3 on CUDA needs cuBLAS");
}

#endif

std::string why_not_2(const ConvProblem& p) { return why_not_m(p, 2); }
std::string why_not_4(const ConvProblem& p) { return why_not_m(p, 4); }
size_t workspace_2(const ConvProblem& p) { return workspace_bytes_m(p, 2); }
size_t workspace_4(const ConvProblem& p) { return workspace_bytes_m(p, 4); }

}  // namespace

extern const Solver winograd_2x2_3x3_solver;
const Solver winograd_2x2_3x3_solver = {.algo = CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not_2, .workspace_bytes = workspace_2,
    .forward = run_2, .made_for = made_for::yes};
extern const Solver winograd_4x4_3x3_solver;
const Solver winograd_4x4_3x3_solver = {.algo = CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not_4, .workspace_bytes = workspace_4,
    .forward = run_4, .made_for = made_for::yes};

}  // namespace cuda
}  // namespace convcore
