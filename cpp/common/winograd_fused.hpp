// The fused F(2x2,3x3) kernel of cuda/winograd.cu (Lavin & Gray, Sec. 5): per thread block, a
// block of kFusedTiles tiles x kFusedK output channels of one group; the input transform, the
// a^2 = 16 small matrix products (over chunks of kFusedC channels) and the output transform
// all happen in shared memory and registers, so V and M never go to global memory (only U,
// the transformed filter, does). Written as the kernel's phases between barriers, each a
// host/device function of (thread id, shared buffer), so tests/cpp/test_winograd_tile.cpp runs
// the block on the host phase by phase (every thread of a phase, then the next phase), exactly
// as the GPU runs it between __syncthreads().
//
// Shared buffer (kFusedSmem elements): during the channel loop Vs[16][kFusedC][kFusedTiles]
// then Us[16][kFusedC][kFusedK]; after the loop Ms[16][kFusedK][kFusedTiles] over the same
// memory. Thread tid multiplies for xi = tid / 16 a 4 (channels k) x 8 (tiles) register tile.
#pragma once
#include <cstdint>

#include "common/blend.hpp"
#include "common/winograd_tile.hpp"

namespace convcore {
namespace winograd {

constexpr int kFusedThreads = 256;
constexpr int kFusedTiles = 32, kFusedK = 16, kFusedC = 8;
constexpr int kFusedAccK = 4, kFusedAccT = 8;  // register tile per thread
constexpr int kFusedVs = 16 * kFusedC * kFusedTiles;  // 4096
constexpr int kFusedUs = 16 * kFusedC * kFusedK;      // 2048
constexpr int kFusedMs = 16 * kFusedK * kFusedTiles;  // 8192
constexpr int kFusedSmem = kFusedMs;
static_assert(kFusedVs + kFusedUs <= kFusedSmem, "the loop's tiles fit the buffer");
static_assert(kFusedThreads == 16 * (kFusedK / kFusedAccK) * (kFusedTiles / kFusedAccT), "one register tile per thread");
static_assert(kFusedThreads == kFusedTiles * kFusedC, "one input tile per thread per chunk");

struct FusedDims {
    int64_t c, h, w, k, p, q, cg, kg, pad_h, pad_w;
    TileGrid grid;  // m = 2
    WsLayout ws;    // U's layout (ldt unused)
    int64_t kblocks;  // ceil(K/g / kFusedK)
};

// Phase 1 (per chunk of channels c0 .. c0 + kFusedC - 1): thread tid transforms the input tile
// tile0 + tid % 32 of channel c0 + tid / 32 into Vs, and copies 8 values of U into Us (zeros
// past the last tile, channel or output channel).
template <typename T>
CONVCORE_HD void fused_load_chunk(const FusedDims& d, const T* x, const T* U, int64_t tile0, int64_t g,
                                  int64_t k0, int64_t c0, int tid, T* smem) {
    T* Vs = smem;
    T* Us = smem + kFusedVs;
    const int tl = tid % kFusedTiles, cl = tid / kFusedTiles;
    const int64_t t = tile0 + tl, c = c0 + cl;
    T v[4][4];
    if (t < d.grid.count && c < d.cg) {
        const TilePos tp = tile_pos(d.grid, t);
        T dt[4][4];
        load_input_tile<F2x3>(x + (tp.n * d.c + g * d.cg + c) * d.h * d.w, d.h, d.w, d.pad_h, d.pad_w,
                              tp.ty, tp.tx, dt);
        input_transform<F2x3>(dt, v);
    } else {
        CONVCORE_UNROLL
        for (int i = 0; i < 4; ++i)
            CONVCORE_UNROLL
            for (int j = 0; j < 4; ++j) v[i][j] = T(0);
    }
    CONVCORE_UNROLL
    for (int xi = 0; xi < 16; ++xi) Vs[(xi * kFusedC + cl) * kFusedTiles + tl] = v[xi / 4][xi % 4];
    // Us[xi][c][k] from U[g][xi][k][c]: e runs with c fastest (U's contiguous direction).
    CONVCORE_UNROLL
    for (int i = 0; i < kFusedUs / kFusedThreads; ++i) {
        const int e = tid * (kFusedUs / kFusedThreads) + i;
        const int ucl = e % kFusedC, ukl = e / kFusedC % kFusedK, xi = e / (kFusedC * kFusedK);
        const int64_t k = k0 + ukl, cc = c0 + ucl;
        Us[(xi * kFusedC + ucl) * kFusedK + ukl] = k < d.kg && cc < d.cg ? U[d.ws.u(g, xi, k, cc)] : T(0);
    }
}

// Phase 2: acc[i][j] += sum_c Us[xi][c][k + i] * Vs[xi][c][t + j] for the thread's xi, k, t.
template <typename T>
CONVCORE_HD void fused_multiply(const T* smem, int tid, T (&acc)[kFusedAccK][kFusedAccT]) {
    const T* Vs = smem;
    const T* Us = smem + kFusedVs;
    const int xi = tid / 16, sub = tid % 16;
    const int kb = sub / (kFusedTiles / kFusedAccT) * kFusedAccK, tb = sub % (kFusedTiles / kFusedAccT) * kFusedAccT;
    CONVCORE_UNROLL
    for (int c = 0; c < kFusedC; ++c) {
        T u[kFusedAccK], v[kFusedAccT];
        CONVCORE_UNROLL
        for (int i = 0; i < kFusedAccK; ++i) u[i] = Us[(xi * kFusedC + c) * kFusedK + kb + i];
        CONVCORE_UNROLL
        for (int j = 0; j < kFusedAccT; ++j) v[j] = Vs[(xi * kFusedC + c) * kFusedTiles + tb + j];
        CONVCORE_UNROLL
        for (int i = 0; i < kFusedAccK; ++i)
            CONVCORE_UNROLL
            for (int j = 0; j < kFusedAccT; ++j) acc[i][j] += u[i] * v[j];
    }
}

// Phase 3 (after the loop): the register tiles into Ms[xi][k][t].
template <typename T>
CONVCORE_HD void fused_store_acc(T* smem, int tid, const T (&acc)[kFusedAccK][kFusedAccT]) {
    const int xi = tid / 16, sub = tid % 16;
    const int kb = sub / (kFusedTiles / kFusedAccT) * kFusedAccK, tb = sub % (kFusedTiles / kFusedAccT) * kFusedAccT;
    CONVCORE_UNROLL
    for (int i = 0; i < kFusedAccK; ++i)
        CONVCORE_UNROLL
        for (int j = 0; j < kFusedAccT; ++j) smem[(xi * kFusedK + kb + i) * kFusedTiles + tb + j] = acc[i][j];
}

// Phase 4: output transform of two (k, tile) pairs per thread, clipped and blended into y.
template <typename T>
CONVCORE_HD void fused_output(const FusedDims& d, const T* smem, int64_t tile0, int64_t g, int64_t k0, int tid,
                              T* y, T alpha, T beta) {
    for (int pair = tid; pair < kFusedK * kFusedTiles; pair += kFusedThreads) {
        const int kl = pair / kFusedTiles, tl = pair % kFusedTiles;
        const int64_t k = k0 + kl, t = tile0 + tl;
        if (k >= d.kg || t >= d.grid.count) continue;
        T mm[4][4], yt[2][2];
        CONVCORE_UNROLL
        for (int xi = 0; xi < 16; ++xi) mm[xi / 4][xi % 4] = smem[(xi * kFusedK + kl) * kFusedTiles + tl];
        output_transform<F2x3>(mm, yt);
        const TilePos tp = tile_pos(d.grid, t);
        const int64_t p0 = tp.ty * 2, q0 = tp.tx * 2;
        T* yk = y + ((tp.n * d.k + g * d.kg + k) * d.p + p0) * d.q + q0;
        CONVCORE_UNROLL
        for (int r = 0; r < 2; ++r)
            CONVCORE_UNROLL
            for (int s = 0; s < 2; ++s)
                if (p0 + r < d.p && q0 + s < d.q) blend_store(yk + r * d.q + s, yt[r][s], alpha, beta);
    }
}

}  // namespace winograd
}  // namespace convcore
