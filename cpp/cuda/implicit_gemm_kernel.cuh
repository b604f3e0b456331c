// The tiled GEMM kernel of IMPLICIT_GEMM on CUDA (forward in cuda/implicit_gemm.cu, both
// backward passes in cuda/implicit_gemm_backward.cu). The operands are never materialised:
// an operand policy `Ops` (common/implicit_gemm_ops.hpp) gives each element,
//   *ops.out(grp, m, j) = alpha * sum_d ops.a(grp, m, d) * ops.b(ops.column(grp, j), d) + beta * *out.
// The block-tile algorithm (64 x 64 tiles, 16-deep shared-memory stages, 4 x 4 register
// micro-tiles per thread, 256 threads) is common/implicit_gemm_tile.hpp's: this kernel is its
// stage / multiply / store steps with the barriers between them, and a grid-stride loop over
// the tiles (any number of groups and tiles). tests/cpp/test_gemm_gather.cpp runs the same
// steps on the host. Accumulation is in the data type (float for float32, as cuDNN does); the
// summation order per output is fixed (deterministic).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/implicit_gemm_tile.hpp"
#include "core/context.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

template <typename T, typename Ops>
__global__ void __launch_bounds__(implicit_gemm_tile::kThreads)
    implicit_gemm_kernel(Ops ops, int64_t groups, T alpha, T beta) {
    using namespace implicit_gemm_tile;
    CONVCORE_SHARED(Shared<T>, sh);
    const int tid = threadIdx.x;
    const int64_t tiles = tile_count(ops, groups);
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const Tile t = tile_at(ops, tile);
        bool column_ok = false;
        const typename Ops::Column column = thread_column(ops, t, tid, &column_ok);
        Accumulator<T> acc;
        clear(acc);
        for (int64_t d0 = 0; d0 < ops.depth(); d0 += kStep) {
            stage(ops, t, d0, tid, column, column_ok, sh);
            __syncthreads();
            multiply(sh, tid, acc);
            __syncthreads();
        }
        store(ops, t, tid, acc, alpha, beta);
    }
}

// Queues the kernel on the handle's stream: one tile per block, up to a few waves of the device.
template <typename T, typename Ops>
void launch_implicit_gemm(const Context& ctx, const Ops& ops, int64_t groups, T alpha, T beta) {
    using namespace implicit_gemm_tile;
    const int64_t tiles = tile_count(ops, groups);
    if (tiles == 0) return;
    DeviceGuard guard(ctx.device_index);
    const unsigned int blocks = grid_blocks(ctx, tiles * kThreads, kThreads);
    CONVCORE_LAUNCH(blocks, kThreads, 0, stream_of(ctx),
                    implicit_gemm_kernel<T, Ops>)(ops, groups, alpha, beta);
    CONVCORE_CUDA_CHECK_LAUNCH("implicit_gemm_kernel");
}

}  // namespace cuda
}  // namespace convcore
