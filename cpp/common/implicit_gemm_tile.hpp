// The block-tile algorithm of the IMPLICIT_GEMM CUDA kernel (cuda/implicit_gemm_kernel.cuh),
// written as host/device functions of one thread (`tid`) so that tests/cpp/test_gemm_gather.cpp
// can run the kernel's exact code on the host, all 256 threads of a block one after the other
// between the two barriers, and compare with the float64 reference.
//
// A block owns a kRows x kCols tile of one group's GEMM *out(grp, m, j) = sum_d a(m, d) b(d, j)
// (operand policies: common/implicit_gemm_ops.hpp) and walks the depth in steps of kStep:
//   stage():    each thread loads kRows*kStep/kThreads elements of A (consecutive threads
//               along d: contiguous filter rows) and kCols*kStep/kThreads of B (consecutive
//               threads along j: contiguous output positions) into shared memory;
//   multiply(): each thread accumulates a kMicro x kMicro register micro-tile, rows
//               ty + kRowThreads*i and columns tx + kColThreads*j (shared reads are broadcasts
//               for A and conflict-free for B; the stores of store() are coalesced);
//   store():    alpha/beta blend of the micro-tile (beta == 0 never reads the output).
#pragma once
#include <cstdint>
#include <vector>

#include "common/blend.hpp"

#if defined(__CUDACC__)
#define CONVCORE_UNROLL _Pragma("unroll")
#else
#define CONVCORE_UNROLL
#endif

namespace convcore {
namespace implicit_gemm_tile {

constexpr int kRows = 64;     // rows m per block tile
constexpr int kCols = 64;     // columns j per block tile
constexpr int kStep = 16;     // depth per shared-memory stage
constexpr int kThreads = 256;
constexpr int kMicro = 4;     // kMicro x kMicro outputs per thread
constexpr int kRowThreads = kRows / kMicro, kColThreads = kCols / kMicro;
static_assert(kThreads == kRowThreads * kColThreads, "one micro-tile per thread");
static_assert(kRows * kStep % kThreads == 0 && kCols * kStep % kThreads == 0, "even loads");
static_assert(kThreads % kCols == 0, "a thread's B column is fixed");

template <typename T>
struct Shared {
    T a[kStep][kRows + 1];  // +1: the transposed stores hit distinct banks
    T b[kStep][kCols];
};

template <typename T>
struct Accumulator {
    T v[kMicro][kMicro];
};

struct Tile {
    int64_t m0, j0, grp;
};

template <typename Ops>
CONVCORE_HD int64_t tile_count(const Ops& ops, int64_t groups) {
    return (ops.cols() + kCols - 1) / kCols * ((ops.rows() + kRows - 1) / kRows) * groups;
}

template <typename Ops>
CONVCORE_HD Tile tile_at(const Ops& ops, int64_t tile) {
    const int64_t col_tiles = (ops.cols() + kCols - 1) / kCols;
    const int64_t row_tiles = (ops.rows() + kRows - 1) / kRows;
    return {tile / col_tiles % row_tiles * kRows, tile % col_tiles * kCols,
            tile / (col_tiles * row_tiles)};
}

// The B column thread `tid` loads at every depth step (valid only when *ok).
template <typename Ops>
CONVCORE_HD typename Ops::Column thread_column(const Ops& ops, Tile t, int tid, bool* ok) {
    const int64_t j = t.j0 + tid % kCols;
    *ok = j < ops.cols();
    return ops.column(t.grp, *ok ? j : 0);
}

template <typename T>
CONVCORE_HD void clear(Accumulator<T>& acc) {
    CONVCORE_UNROLL
    for (int i = 0; i < kMicro; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < kMicro; ++j) acc.v[i][j] = T(0);
}

template <typename T, typename Ops>
CONVCORE_HD void stage(const Ops& ops, Tile t, int64_t d0, int tid,
                       const typename Ops::Column& column, bool column_ok, Shared<T>& sh) {
    const int64_t rows = ops.rows(), depth = ops.depth();
    CONVCORE_UNROLL
    for (int s = 0; s < kRows * kStep / kThreads; ++s) {
        const int i = tid + s * kThreads, m = i / kStep, kk = i % kStep;
        sh.a[kk][m] = t.m0 + m < rows && d0 + kk < depth ? ops.a(t.grp, t.m0 + m, d0 + kk) : T(0);
    }
    const int jj = tid % kCols;
    CONVCORE_UNROLL
    for (int s = 0; s < kCols * kStep / kThreads; ++s) {
        const int kk = tid / kCols + s * (kThreads / kCols);
        sh.b[kk][jj] = column_ok && d0 + kk < depth ? ops.b(column, d0 + kk) : T(0);
    }
}

template <typename T>
CONVCORE_HD void multiply(const Shared<T>& sh, int tid, Accumulator<T>& acc) {
    const int tx = tid % kColThreads, ty = tid / kColThreads;
    CONVCORE_UNROLL
    for (int kk = 0; kk < kStep; ++kk) {
        T av[kMicro], bv[kMicro];
        CONVCORE_UNROLL
        for (int i = 0; i < kMicro; ++i) av[i] = sh.a[kk][ty + i * kRowThreads];
        CONVCORE_UNROLL
        for (int j = 0; j < kMicro; ++j) bv[j] = sh.b[kk][tx + j * kColThreads];
        CONVCORE_UNROLL
        for (int i = 0; i < kMicro; ++i)
            CONVCORE_UNROLL
            for (int j = 0; j < kMicro; ++j) acc.v[i][j] += av[i] * bv[j];
    }
}

template <typename T, typename Ops>
CONVCORE_HD void store(const Ops& ops, Tile t, int tid, const Accumulator<T>& acc, T alpha,
                       T beta) {
    const int tx = tid % kColThreads, ty = tid / kColThreads;
    CONVCORE_UNROLL
    for (int i = 0; i < kMicro; ++i) {
        const int64_t m = t.m0 + ty + i * kRowThreads;
        if (m >= ops.rows()) continue;
        CONVCORE_UNROLL
        for (int j = 0; j < kMicro; ++j) {
            const int64_t jc = t.j0 + tx + j * kColThreads;
            if (jc < ops.cols()) blend_store(ops.out(t.grp, m, jc), acc.v[i][j], alpha, beta);
        }
    }
}

// The whole kernel on the host: every tile, every thread, the barriers as phase boundaries.
template <typename T, typename Ops>
void run_on_host(const Ops& ops, int64_t groups, T alpha, T beta) {
    Shared<T> sh;
    std::vector<Accumulator<T>> acc(kThreads);
    std::vector<typename Ops::Column> column(kThreads);
    bool ok[kThreads];
    for (int64_t tile = 0; tile < tile_count(ops, groups); ++tile) {
        const Tile t = tile_at(ops, tile);
        for (int tid = 0; tid < kThreads; ++tid) {
            column[tid] = thread_column(ops, t, tid, &ok[tid]);
            clear(acc[tid]);
        }
        for (int64_t d0 = 0; d0 < ops.depth(); d0 += kStep) {
            for (int tid = 0; tid < kThreads; ++tid) stage(ops, t, d0, tid, column[tid], ok[tid], sh);
            for (int tid = 0; tid < kThreads; ++tid) multiply(sh, tid, acc[tid]);
        }
        for (int tid = 0; tid < kThreads; ++tid) store(ops, t, tid, acc[tid], alpha, beta);
    }
}

}  // namespace implicit_gemm_tile
}  // namespace convcore
