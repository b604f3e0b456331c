// The tiled GEMM kernel of IMPLICIT_GEMM on CUDA (forward in cuda/implicit_gemm.cu, both
// backward passes in cuda/implicit_gemm_backward.cu). The operands are never materialised:
// an operand policy `Ops` (common/implicit_gemm_ops.hpp) gives each element,
//   *ops.out(grp, m, j) = alpha * sum_d ops.a(grp, m, d) * ops.b(ops.column(grp, j), d) + beta * *out.
// A block of 256 threads owns a 64 (rows m) x 64 (columns j) tile of one group and walks the
// depth in steps of 16: it stages the 64 x 16 slice of A and the 16 x 64 slice of B in shared
// memory, then each thread accumulates a 4 x 4 register micro-tile (rows ty + 16i, columns
// tx + 16j: broadcast / conflict-free shared reads, coalesced stores). A thread loads one fixed
// column of B, so its Column (the gather's origin) is computed once per tile. Accumulation is
// in the data type (float for float32, as cuDNN does); the summation order per output is fixed
// (deterministic). Tiles are walked by a grid-stride loop (any number of groups/tiles).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/blend.hpp"
#include "core/context.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace implicit_gemm_tiles {
constexpr int kRows = 64;     // rows m per block tile
constexpr int kCols = 64;     // columns j per block tile
constexpr int kStep = 16;     // depth per shared-memory stage
constexpr int kThreads = 256;
constexpr int kMicro = 4;     // kMicro x kMicro outputs per thread
constexpr int kRowThreads = kRows / kMicro, kColThreads = kCols / kMicro;
static_assert(kThreads == kRowThreads * kColThreads, "one micro-tile per thread");
static_assert(kRows * kStep % kThreads == 0 && kCols * kStep % kThreads == 0, "even loads");
static_assert(kThreads % kCols == 0, "a thread's B column is fixed");
}  // namespace implicit_gemm_tiles

template <typename T, typename Ops>
__global__ void __launch_bounds__(implicit_gemm_tiles::kThreads)
    implicit_gemm_kernel(Ops ops, int64_t groups, T alpha, T beta) {
    using namespace implicit_gemm_tiles;
    __shared__ T as[kStep][kRows + 1];  // +1: the transposed stores hit distinct banks
    __shared__ T bs[kStep][kCols];
    const int tid = threadIdx.x, tx = tid % kColThreads, ty = tid / kColThreads;
    const int64_t rows = ops.rows(), cols = ops.cols(), depth = ops.depth();
    const int64_t col_tiles = (cols + kCols - 1) / kCols;
    const int64_t row_tiles = (rows + kRows - 1) / kRows;
    const int64_t tiles = col_tiles * row_tiles * groups;

    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t j0 = tile % col_tiles * kCols;
        const int64_t m0 = tile / col_tiles % row_tiles * kRows;
        const int64_t grp = tile / (col_tiles * row_tiles);

        const int jj = tid % kCols;  // this thread's B column, the same at every depth step
        const bool col_ok = j0 + jj < cols;
        const typename Ops::Column column = ops.column(grp, col_ok ? j0 + jj : 0);

        T acc[kMicro][kMicro];
#pragma unroll
        for (int i = 0; i < kMicro; ++i)
#pragma unroll
            for (int j = 0; j < kMicro; ++j) acc[i][j] = T(0);

        for (int64_t d0 = 0; d0 < depth; d0 += kStep) {
#pragma unroll
            for (int t = 0; t < kRows * kStep / kThreads; ++t) {
                const int i = tid + t * kThreads, m = i / kStep, kk = i % kStep;
                as[kk][m] = m0 + m < rows && d0 + kk < depth ? ops.a(grp, m0 + m, d0 + kk) : T(0);
            }
#pragma unroll
            for (int t = 0; t < kCols * kStep / kThreads; ++t) {
                const int kk = tid / kCols + t * (kThreads / kCols);
                bs[kk][jj] = col_ok && d0 + kk < depth ? ops.b(column, d0 + kk) : T(0);
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kStep; ++kk) {
                T av[kMicro], bv[kMicro];
#pragma unroll
                for (int i = 0; i < kMicro; ++i) av[i] = as[kk][ty + i * kRowThreads];
#pragma unroll
                for (int j = 0; j < kMicro; ++j) bv[j] = bs[kk][tx + j * kColThreads];
#pragma unroll
                for (int i = 0; i < kMicro; ++i)
#pragma unroll
                    for (int j = 0; j < kMicro; ++j) acc[i][j] += av[i] * bv[j];
            }
            __syncthreads();
        }

#pragma unroll
        for (int i = 0; i < kMicro; ++i) {
            const int64_t m = m0 + ty + i * kRowThreads;
            if (m >= rows) continue;
#pragma unroll
            for (int j = 0; j < kMicro; ++j) {
                const int64_t jc = j0 + tx + j * kColThreads;
                if (jc < cols) blend_store(ops.out(grp, m, jc), acc[i][j], alpha, beta);
            }
        }
    }
}

// Queues the kernel on the handle's stream: one tile per block, up to a few waves of the device.
template <typename T, typename Ops>
void launch_implicit_gemm(const Context& ctx, const Ops& ops, int64_t groups, T alpha, T beta) {
    using namespace implicit_gemm_tiles;
    const int64_t tiles = (ops.cols() + kCols - 1) / kCols * ((ops.rows() + kRows - 1) / kRows) * groups;
    if (tiles == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, tiles * kThreads, kThreads);
    implicit_gemm_kernel<T, Ops><<<blocks, kThreads, 0, stream_of(ctx)>>>(ops, groups, alpha, beta);
    CONVCORE_CUDA_CHECK_LAUNCH("implicit_gemm_kernel");
}

}  // namespace cuda
}  // namespace convcore
