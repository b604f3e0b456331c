// IM2WIN on CUDA (paper 002, Lu et al., "Im2win: an efficient convolution paradigm on GPU"):
// the window-order transform (Sec. 3.1, Eq. 2) and a tiled GEMM-like kernel with the paper's
// optimisations (Sec. 3.3, Algorithm 3): block tiling, a register micro-kernel (outer
// products), 16-byte vector loads of the packed filter, double-buffered shared memory and
// prefetching of the next tile into registers while the current one is computed.
//
// Index math (strip layout, window addressing, filter taps) is common/im2win_index.hpp, shared
// with cpu/im2win.cpp and tested on the host by tests/cpp/test_im2win_index.cpp. Per call:
//   1. pack kernel: wpk[g][j][kp] = filter element j = (s, c, r) of output channel k of group
//      g (flipped for true convolution); zero for k >= K/g (kp = K/g rounded up to BM) and
//      j >= S*(C/g)*R (rows rounded up to BK), so tile loads need no bounds tests and are
//      aligned 16-byte vectors;
//   2. per band of output rows (of all images; as many as fit kBandBytes):
//      a. transform kernel: the band's strips, one thread per element (coalesced stores);
//      b. compute kernel: y[k][pos] = sum_j wpk[j][k] * window(pos)[j] for the band's output
//         positions pos (flattened over rows and columns), one BM x BN (output channels x
//         positions) tile per thread block, BK window elements at a time, each thread a TM x TN
//         register tile; alpha/beta blend (beta == 0 never reads y).
// Supports everything the CPU solver does: any stride, padding, dilation, groups, both modes,
// float32 and float64. Workspace (elements): rnd32(B*C*Wp*R) + g*ceil(S*(C/g)*R / BK)*BK*
// ceil((K/g)/BM)*BM, B = clamp(kBandBytes / (C*Wp*R*elem), 1, N*P).
// The window loads are scalar: a window starts at q*stride_w*(C/g)*R, which is 16-byte aligned
// only for some shapes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/blend.hpp"
#include "common/im2win_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/grid_limits.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int BM = 64, BN = 64, BK = 16;   // block tile: output channels x positions x window elements
constexpr int TM = 4, TN = 4;              // register tile per thread
constexpr int kGemmThreads = (BM / TM) * (BN / TN);  // 256
constexpr int BS_LD = BN + 4;              // padded rows of the window tile (fewer bank conflicts)
constexpr int kThreads = 256;              // transform and pack kernels
constexpr int64_t kBandBytes = int64_t(256) << 20;
constexpr int64_t kAlignElems = 32;
static_assert(BK * BM == 4 * kGemmThreads && BK * BN == 4 * kGemmThreads, "4 loads per thread per tile");

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

struct Geometry {
    int64_t wp, crs, win_len, len_pad, kp, kblocks;
    int64_t row_elems;  // strip elements of one output row, all groups: C*Wp*R
    int64_t band;       // output rows per band
    int64_t win_elems, filt_elems;
};

Geometry geometry(const ConvProblem& p) {
    Geometry g{};
    g.wp = im2win::strip_cols(p.q, p.s, p.stride_w, p.dil_w);
    g.crs = p.c_per_group() * p.r;
    g.win_len = p.s * g.crs;
    g.len_pad = round_up(g.win_len, BK);
    g.kp = round_up(p.k_per_group(), BM);
    g.kblocks = g.kp / BM;
    g.row_elems = p.c * g.wp * p.r;
    g.band = std::clamp<int64_t>(kBandBytes / std::max<int64_t>(1, g.row_elems * int64_t(p.elem_size())), 1,
                                 std::max<int64_t>(1, p.n * p.p));
    g.win_elems = round_up(g.band * g.row_elems, kAlignElems);
    g.filt_elems = p.groups * g.len_pad * g.kp;
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "IM2WIN runs float32 and float64 only";
    // Sizes in double first: geometry()'s int64 products overflow for absurd shapes.
    const double es = double(p.elem_size());
    const double wp = double(p.q - 1) * double(p.stride_w) + double(p.s - 1) * double(p.dil_w) + 1;
    const double row = double(p.c) * wp * double(p.r) * es;
    const double filt = double(p.groups) * (double(p.s) * double(p.c_per_group()) * double(p.r) + BK) *
                        (double(p.k_per_group()) + BM) * es;
    if (double(kBandBytes) + row + filt > 0x1p62)
        return "IM2WIN: its workspace (a band of window rows and the packed filter) would exceed "
               "2^62 bytes for this problem";
    const Geometry g = geometry(p);
    if (g.band * p.q / BN + 1 > int64_t(0x7fffffff))
        return "IM2WIN on CUDA: one output row has too many positions for the grid (" +
               std::to_string(p.q) + ")";
    return "";
}

size_t workspace_bytes(const ConvProblem& p) {
    const Geometry g = geometry(p);
    return size_t(g.win_elems + g.filt_elems) * p.elem_size();
}

// ---- kernels ----------------------------------------------------------------------------------

template <typename T>
__global__ void pack_filter_kernel(const T* __restrict__ w, T* __restrict__ wpk, int64_t total,
                                   int64_t kg, int64_t kp, int64_t cg, int64_t r, int64_t s,
                                   int64_t win_len, int64_t len_pad, bool flip) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
        const int64_t k = e % kp, j = e / kp % len_pad, g = e / (kp * len_pad);
        T v = T(0);
        if (k < kg && j < win_len) v = w[(g * kg + k) * cg * r * s + im2win::filter_elem(j, cg, r, s, flip)];
        wpk[e] = v;
    }
}

template <typename T>
__global__ void im2win_transform_kernel(const T* __restrict__ x, T* __restrict__ win, im2win::StripDims d,
                                        int64_t gr0, int64_t total) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
        const int64_t src = im2win::strip_source(d, gr0, e);
        win[e] = src >= 0 ? x[src] : T(0);
    }
}

struct GemmDims {
    int64_t npos;  // output positions of the band: rows * Q
    int64_t p, q, k, kg, groups, kblocks;
    int64_t wp, crs, win_len, len_pad, kp, stride_w, dil_w;
    int64_t gr0;  // first output row of the band
};

// Four consecutive packed filter values (16-byte aligned by construction) into registers.
__device__ __forceinline__ void load4(const float* p, float (&r)[4]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
}
__device__ __forceinline__ void load4(const double* p, double (&r)[4]) {
    const double2 a = *reinterpret_cast<const double2*>(p);
    const double2 b = *reinterpret_cast<const double2*>(p + 2);
    r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}

template <typename T>
__global__ void __launch_bounds__(kGemmThreads)
    im2win_gemm_kernel(const T* __restrict__ win, const T* __restrict__ wpk, T* __restrict__ y,
                       GemmDims d, T alpha, T beta) {
    CONVCORE_SHARED_ALIGNED(16, T[2][BK][BM], As);
    CONVCORE_SHARED_ALIGNED(16, T[2][BK][BS_LD], Bs);
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);  // register tile: positions tx*TN.., channels ty*TM..
    const int a_j = tid / (BM / 4), a_k = tid % (BM / 4) * 4;  // filter tile load: row a_j, 4 channels
    const int b_j = tid % BK, b_pos = tid / BK;                 // window tile load: element b_j of 4 positions
    constexpr int kPosStride = kGemmThreads / BK;               // 16: b_pos + i * 16, i < 4
    const int64_t pos0 = int64_t(blockIdx.x) * BN;

    for (int64_t gk = blockIdx.y; gk < d.kblocks * d.groups; gk += gridDim.y) {
        const int64_t g = gk / d.kblocks, k0 = gk % d.kblocks * BM;
        const T* A = wpk + g * d.len_pad * d.kp + k0;
        int64_t wstart[4];  // window starts of this thread's 4 load positions (-1: past the band)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int64_t pos = pos0 + b_pos + i * kPosStride;
            wstart[i] = pos < d.npos ? im2win::window_start(pos / d.q, g, pos % d.q, d.groups, d.wp, d.crs, d.stride_w)
                                     : -1;
        }
        T a_reg[4], b_reg[4];
        auto load_tile = [&](int64_t j0) {  // global -> registers (the prefetch)
            load4(A + (j0 + a_j) * d.kp + a_k, a_reg);
            const int64_t j = j0 + b_j;
            const int64_t off = j < d.win_len ? im2win::window_elem(j, d.crs, d.dil_w) : 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) b_reg[i] = wstart[i] >= 0 && j < d.win_len ? win[wstart[i] + off] : T(0);
        };
        auto store_tile = [&](int buf) {  // registers -> shared memory
#pragma unroll
            for (int i = 0; i < 4; ++i) As[buf][a_j][a_k + i] = a_reg[i];
#pragma unroll
            for (int i = 0; i < 4; ++i) Bs[buf][b_j][b_pos + i * kPosStride] = b_reg[i];
        };

        T acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int jj = 0; jj < TN; ++jj) acc[i][jj] = T(0);

        load_tile(0);
        store_tile(0);
        __syncthreads();
        for (int64_t j0 = 0; j0 < d.len_pad; j0 += BK) {
            const int cur = int(j0 / BK) & 1;
            const bool more = j0 + BK < d.len_pad;
            if (more) load_tile(j0 + BK);  // in flight while the tile below is computed
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                T a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = As[cur][kk][ty * TM + i];
#pragma unroll
                for (int jj = 0; jj < TN; ++jj) b[jj] = Bs[cur][kk][tx * TN + jj];
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int jj = 0; jj < TN; ++jj) acc[i][jj] += a[i] * b[jj];
            }
            // The other buffer was last read before the previous iteration's barrier.
            if (more) store_tile(cur ^ 1);
            __syncthreads();
        }

#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int64_t pos = pos0 + tx * TN + jj;
            if (pos >= d.npos) continue;
            const int64_t gr = d.gr0 + pos / d.q, n = gr / d.p, op = gr % d.p, oq = pos % d.q;
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int64_t k = k0 + ty * TM + i;
                if (k < d.kg)
                    blend_store(y + ((n * d.k + g * d.kg + k) * d.p + op) * d.q + oq, acc[i][jj], alpha, beta);
            }
        }
    }
}

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    if (p.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "IM2WIN (CUDA): null tensor or workspace pointer");
    const Geometry gm = geometry(p);
    T* win = static_cast<T*>(a.workspace);
    T* wpk = win + gm.win_elems;
    DeviceGuard guard(a.ctx.device_index);
    const cudaStream_t stream = stream_of(a.ctx);

    CONVCORE_LAUNCH(grid_blocks(a.ctx, gm.filt_elems, kThreads), kThreads, 0, stream, pack_filter_kernel<T>)(
        static_cast<const T*>(a.w), wpk, gm.filt_elems, p.k_per_group(), gm.kp, p.c_per_group(), p.r,
        p.s, gm.win_len, gm.len_pad, p.flip);
    CONVCORE_CUDA_CHECK_LAUNCH("im2win pack_filter_kernel");

    const im2win::StripDims sd{p.c, p.h, p.w, p.p, p.c_per_group(), p.r, p.groups,
                               p.pad_h, p.pad_w, p.stride_h, p.dil_h, gm.wp};
    GemmDims gd{};
    gd.p = p.p, gd.q = p.q, gd.k = p.k, gd.kg = p.k_per_group(), gd.groups = p.groups;
    gd.kblocks = gm.kblocks, gd.wp = gm.wp, gd.crs = gm.crs, gd.win_len = gm.win_len;
    gd.len_pad = gm.len_pad, gd.kp = gm.kp, gd.stride_w = p.stride_w, gd.dil_w = p.dil_w;
    const int64_t total_rows = p.n * p.p;
    for (int64_t gr0 = 0; gr0 < total_rows; gr0 += gm.band) {
        const int64_t rows = std::min(gm.band, total_rows - gr0);
        const int64_t elems = rows * gm.row_elems;
        CONVCORE_LAUNCH(grid_blocks(a.ctx, elems, kThreads), kThreads, 0, stream, im2win_transform_kernel<T>)(
            static_cast<const T*>(a.x), win, sd, gr0, elems);
        CONVCORE_CUDA_CHECK_LAUNCH("im2win_transform_kernel");
        gd.npos = rows * p.q;
        gd.gr0 = gr0;
        const dim3 grid(static_cast<unsigned int>((gd.npos + BN - 1) / BN),
                        static_cast<unsigned int>(std::min<int64_t>(gm.kblocks * p.groups, kMaxGridY)));
        CONVCORE_LAUNCH(grid, kGemmThreads, 0, stream,
                        im2win_gemm_kernel<T>)(win, wpk, static_cast<T*>(a.y), gd,
                                               T(a.alpha), T(a.beta));
        CONVCORE_CUDA_CHECK_LAUNCH("im2win_gemm_kernel");
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

}  // namespace

extern const Solver im2win_solver;
const Solver im2win_solver = {.algo = CONVCORE_FWD_ALGO_IM2WIN, .device = CONVCORE_DEVICE_CUDA,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run, .made_for = made_for::general};

}  // namespace cuda
}  // namespace convcore
