// CYCLIC_MINIMAL on CUDA: Pitas' minimal-multiplication 4x4 cyclic convolution (paper 004; 22
// multiplications per 4x4 tile) with overlap-save tiles, for 3x3 filters (2x2 outputs per
// tile). Two kernels on the handle's stream:
//   1. filter transform: U[k][c][0..22) = B vec(g_kc) (float64 arithmetic), one thread per (k, c);
//   2. one thread per (image, group, block of KT output channels (4 float / 2 double; 1 when
//      K/g == 1), tile): for each input
//      channel of the group, the 4x4 input tile's 22 operands (58 additions) times the KT
//      filters' 22 values, accumulated in registers; then the output transform (46 additions)
//      and the blend into y. Neighbouring threads take neighbouring tiles of the same filters,
//      so the U reads of a warp are broadcasts. No GEMM: this is the GEMM-free "fused" path of
//      the CPU solver for every channel count (on a GPU the input transform is recomputed per
//      block of KT filters instead of being stored).
// The per-thread body is cyclic::tile_item in common/cyclic_tile.hpp, run on the host by
// tests/cpp/test_cyclic_tile.cpp. Workspace: 22*K*(C/g) elements (U).
// The 2x2-filter variant (C4F2) of the CPU solver is not built here (compile time); such
// problems are NOT_SUPPORTED on CUDA with that reason.
#include <cuda_runtime.h>

#include <string>

#include "common/cyclic_tile.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

using Tab = cyclic::C4F3;
constexpr int kThreads = 128;

// Output channels per thread: 4 x 22 float accumulators, 2 x 22 double ones (registers);
// 1 when the groups have one output channel (Pitas' single filter, depthwise layers), where
// the wider blocks would only add unused products and registers.
template <typename T>
constexpr int kt_of() {
    return sizeof(T) == 8 ? 2 : 4;
}
int kt_for(const ConvProblem& p, int kt_default) { return p.k_per_group() == 1 ? 1 : kt_default; }

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "CYCLIC_MINIMAL runs float32 and float64 only";
    if (p.r != 3 || p.s != 3)
        return "CYCLIC_MINIMAL on CUDA needs a 3x3 filter, got " + std::to_string(p.r) + "x" +
               std::to_string(p.s) + " (the 2x2-filter variant is CPU-only)";
    if (!p.unit_stride())
        return "CYCLIC_MINIMAL needs stride 1, got " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w) + " (overlap-save tiles produce every output)";
    if (!p.unit_dilation())
        return "CYCLIC_MINIMAL needs dilation 1, got " + std::to_string(p.dil_h) + "x" +
               std::to_string(p.dil_w);
    return "";
}

size_t workspace_bytes(const ConvProblem& p) {
    return size_t(Tab::M) * size_t(p.k) * size_t(p.c_per_group()) * p.elem_size();
}

template <typename T>
__global__ void cyclic_filter_kernel(const T* __restrict__ w, T* __restrict__ U, int64_t total,
                                     bool flip) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        T u[Tab::M];
        cyclic::filter_transform<Tab>(w + i * 9, flip, u);  // i = k * C/g + c: U[k][c][m]
#pragma unroll
        for (int m = 0; m < Tab::M; ++m) U[i * Tab::M + m] = u[m];
    }
}

template <typename T, int KT>
__global__ void __launch_bounds__(kThreads) cyclic_tile_kernel(const T* __restrict__ x,
                                                               const T* __restrict__ U,
                                                               T* __restrict__ y, cyclic::Dims d,
                                                               T alpha, T beta) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < d.items; i += step)
        cyclic::tile_item<Tab, KT>(d, x, U, y, i, alpha, beta);
}

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const int kt = kt_for(p, kt_of<T>());
    const cyclic::Dims d = cyclic::make_dims<Tab>(p.n, p.c, p.h, p.w, p.k, p.p, p.q, p.groups,
                                                  p.pad_h, p.pad_w, kt);
    if (d.items == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "CYCLIC_MINIMAL (CUDA): null tensor or workspace pointer");
    T* U = static_cast<T*>(a.workspace);
    DeviceGuard guard(a.ctx.device_index);
    const cudaStream_t stream = stream_of(a.ctx);
    const int64_t filters = p.k * d.cg;
    CONVCORE_LAUNCH(grid_blocks(a.ctx, filters, kThreads), kThreads, 0, stream, cyclic_filter_kernel<T>)(
        static_cast<const T*>(a.w), U, filters, p.flip);
    CONVCORE_CUDA_CHECK_LAUNCH("cyclic_filter_kernel");
    const unsigned int blocks = grid_blocks(a.ctx, d.items, kThreads);
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (kt == 1)
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream,
                        cyclic_tile_kernel<T, 1>)(x, U, y, d, T(a.alpha), T(a.beta));
    else
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream,
                        cyclic_tile_kernel<T, kt_of<T>()>)(x, U, y, d, T(a.alpha), T(a.beta));
    CONVCORE_CUDA_CHECK_LAUNCH("cyclic_tile_kernel");
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

}  // namespace

extern const Solver cyclic_minimal_solver;
const Solver cyclic_minimal_solver = {.algo = CONVCORE_FWD_ALGO_CYCLIC_MINIMAL,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run};

}  // namespace cuda
}  // namespace convcore
