// The GEMM of a convolution on NHWC tensors, read in place (no im2col buffer), shared by
// POINTWISE (1x1) and IMPLICIT_GEMM's NHWC path (any filter):
//   Y[pixel][g*Kg + k] = sum over taps t = (r, s) and c < Cg of X[pixel at tap t][g*Cg + c] * Wt[g][t][c][k]
// A's rows are the output pixels: for each tap, the Cg channels of the input pixel it reads
// (contiguous in NHWC), or a zero row where it reads the padding. Wt is the filter transposed to
// [group][tap][c][k] (taps in correlation order; rows padded to whole vectors), made once per
// filter. A register block is MR pixels x NV vectors of output channels; vectors narrower than
// the machine's serve groups with few output channels (ResNeXt's 4, RegNet's 8).
// One group with at least two vectors of output channels runs as a cache-blocked GEMM instead
// where the filter is 1x1 or the reduction is long (the "panel" path, as Goto's GEMM and BLIS):
// Wt is prepared as column panels of two vectors [panel][tap*C + c][2 vectors]; A is read in
// place (1x1, stride 1, no padding) or copied per block of pixels into an L2-sized buffer, with
// a row stride that keeps rows out of each other's L1 sets; see panel_blocking.
#pragma once
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/conv_index.hpp"
#include "common/shuffle.hpp"
#include "core/problem.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/epilogue_store.hpp"  // defines CONVCORE_GEMM_INLINE
#include "cpu/scratch.hpp"

namespace convcore {
namespace cpu {
namespace nhwc_gemm {

// thread_vector sites
struct PanelBlocks;
struct PanelRows;
struct PixelRows;

inline int64_t isa_lanes(size_t elem) {
    switch (cpu_isa()) {
        case CpuIsa::avx512: return int64_t(64 / elem);
        case CpuIsa::avx2: return int64_t(32 / elem);
        default: return int64_t(16 / elem);
    }
}

using cpu::cache_bytes;

// The panel path: one group with at least a panel of output channels, and either a 1x1 filter
// (the copy of A is a plain copy of its rows), a reduction (taps x C) so long that a register
// block's A rows (12 of them) take more than half of L1 (the other half holds the filter rows
// they meet; past it reading them in place stops paying: ResNet's 64 -> 128 3x3/2 at 56x56 ran
// ~5% faster copied), or fewer
// input channels than a vector (a stem: in place the kernel's inner loop would run C < a
// vector's lanes per tap; copied, the taps of a filter row are one run of S*C values). Its
// panels are two vectors (of the machine's width) of output channels.
constexpr int kPanelVectors = 2;
inline int64_t panel_cols(const ConvProblem& p) { return kPanelVectors * isa_lanes(p.elem_size()); }
inline bool panel_path(const ConvProblem& p) {
    const int64_t a_rows_bytes = product_or_minus1({12, p.r, p.s, p.c, int64_t(p.elem_size())});
    return p.groups == 1 && p.k >= panel_cols(p) &&
           (p.is_1x1() || a_rows_bytes < 0 || a_rows_bytes > cache_bytes(1, 32 << 10) / 2 ||
            p.c < isa_lanes(p.elem_size()));
}
inline int64_t panel_count(const ConvProblem& p) { return (p.k + panel_cols(p) - 1) / panel_cols(p); }

// Wt's rows hold Kg values padded to whole 64-byte vectors of float32 (16 values), so a
// kernel's vector loads never leave them.
constexpr int64_t kRowPad = 16;
inline int64_t wt_row(const ConvProblem& p) { return (p.k_per_group() + kRowPad - 1) / kRowPad * kRowPad; }
inline size_t wt_bytes(const ConvProblem& p) {
    if (panel_path(p)) return size_t(panel_count(p) * panel_cols(p) * p.r * p.s * p.c) * p.elem_size();
    return size_t(p.groups * p.r * p.s * p.c_per_group() * wt_row(p)) * p.elem_size();
}
// The NHWC GEMM's buffers (Wt, the zero row, a task's 12 * R * S row pointers) can be counted:
// solvers run NHWC only then.
inline bool sizes_fit(const ConvProblem& p) {
    return product_or_minus1({p.groups, p.r, p.s, p.c_per_group(), wt_row(p), int64_t(p.elem_size())}) >= 0 &&
           product_or_minus1({panel_count(p), panel_cols(p), p.r, p.s, p.c, int64_t(p.elem_size())}) >= 0 &&
           product_or_minus1({12, p.r, p.s, int64_t(sizeof(void*))}) >= 0;
}

// Groups with as many output as input channels, KC of them, a few times fewer than a vector's
// lanes (ResNeXt's 4 and 8, RegNet's 8): G = lanes / KC whole groups share one vector, lane
// gl*KC + j holding output channel j of group gl. The number of groups per vector, or 0 where
// this does not apply. `lanes`: the vector width this process's kernels use. The groups past the
// last whole vector of them (packed_groups) run one per vector.
inline int64_t groups_per_vector(const ConvProblem& p, int64_t lanes) {
    const int64_t kc = p.k_per_group();
    if (p.c_per_group() != kc || (kc != 2 && kc != 4 && kc != 8) || lanes % kc != 0) return 0;
    return p.groups >= lanes / kc ? lanes / kc : 0;
}
inline int64_t packed_groups(const ConvProblem& p, int64_t gv) { return gv ? p.groups / gv * gv : 0; }
// Wt: for the packed groups (groups_per_vector), [group block][tap][d][lane] with lane gl*KC + j
// output channel j of group gl and d the rotation: the weight of input channel (j + d) % KC (a
// kernel multiplies it by the input vector rotated by d within each group's KC lanes); after them, and for every group otherwise, [group][tap][c][k]
// with rows of wt_row values.
// On the panel path: [panel][tap][c][column], columns past K zero. A task makes one panel's
// rows of a block of cb channels: what it reads of w (nr filters' runs of cb x R x S values)
// stays in L1 while its rows gather from it, not streamed from memory once per tap.
template <typename T>
void make_wt(const ConvProblem& p, const T* w, T* wt, int threads = 1) {
    if (panel_path(p)) {
        const int64_t nr = panel_cols(p), taps = p.r * p.s, cb = 16, blocks = (p.c + cb - 1) / cb;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
        for (int64_t jp = 0; jp < panel_count(p); ++jp)
            for (int64_t b = 0; b < blocks; ++b) {
                T* panel = wt + jp * taps * p.c * nr;
                const int64_t c0 = b * cb, c1 = std::min(p.c, c0 + cb);
                const int64_t columns = std::min(nr, p.k - jp * nr);
                for (int64_t c = c0; c < c1; ++c)
                    for (int64_t fr = 0; fr < p.r; ++fr)
                        for (int64_t fs = 0; fs < p.s; ++fs) {
                            const int64_t r = conv_filter_tap(fr, p.r, p.flip), s = conv_filter_tap(fs, p.s, p.flip);
                            const T* src = w + ((jp * nr * p.c + c) * p.r + fr) * p.s + fs;  // filter jp * nr
                            T* d = panel + ((r * p.s + s) * p.c + c) * nr;
                            for (int64_t j = 0; j < columns; ++j) d[j] = src[j * p.c * taps];
                            for (int64_t j = columns; j < nr; ++j) d[j] = T(0);
                        }
            }
        return;
    }
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), row = wt_row(p);
    const int64_t gv = groups_per_vector(p, isa_lanes(sizeof(T))), packed = packed_groups(p, gv);
    if (gv) {
        const int64_t lanes = gv * kg;
        for (int64_t g = 0; g < packed; ++g)
            for (int64_t r = 0; r < p.r; ++r)
                for (int64_t s = 0; s < p.s; ++s)
                    for (int64_t d = 0; d < cg; ++d)
                        for (int64_t j = 0; j < kg; ++j) {
                            const int64_t fr = conv_filter_tap(r, p.r, p.flip), fs = conv_filter_tap(s, p.s, p.flip);
                            const int64_t c = (j + d) % kg;
                            wt[(((g / gv * p.r + r) * p.s + s) * cg + d) * lanes + g % gv * kg + j] =
                                w[(((g * kg + j) * cg + c) * p.r + fr) * p.s + fs];
                        }
        wt += packed * p.r * p.s * cg * kg;
    }
    for (int64_t g = packed; g < p.groups; ++g)
        for (int64_t r = 0; r < p.r; ++r)
            for (int64_t s = 0; s < p.s; ++s)
                for (int64_t c = 0; c < cg; ++c) {
                    T* d = wt + ((((g - packed) * p.r + r) * p.s + s) * cg + c) * row;
                    const int64_t fr = conv_filter_tap(r, p.r, p.flip), fs = conv_filter_tap(s, p.s, p.flip);
                    for (int64_t k = 0; k < row; ++k)
                        d[k] = k < kg ? w[(((g * kg + k) * cg + c) * p.r + fr) * p.s + fs] : T(0);
                }
}

// How a task stores its outputs: y = alpha * acc + beta * y, and where the fused epilogue is
// given (fused()), y = act(alpha * acc + beta * y + alpha2 * z + bias[k]) (epilogue_store). A
// store's pixel and channel come from its address in y (K channels per pixel); stores outside
// y (a block's rows past its last pixel, into a sink) take no epilogue.
template <typename T>
struct Stores {
    epilogue_store::Out<T> e;
    const T* y = nullptr;
    int64_t y_size = 0, k = 1;
    bool fused() const { return e.z || e.bias || e.act != CONVCORE_ACTIVATION_IDENTITY; }
    // The same stores with beta replaced and, unless `last`, without the epilogue (a chunk of the
    // reduction that later chunks add to).
    Stores chunk(T beta, bool last) const {
        Stores c = *this;
        c.e.beta = beta;
        if (!last) c.e.z = nullptr, c.e.bias = nullptr, c.e.act = CONVCORE_ACTIVATION_IDENTITY;
        return c;
    }
};

// The kernels are compiled for two kinds of stores (cpu/nhwc_gemm.cpp picks one per task), so
// that a plain convolution's stores carry no epilogue code: PlainStores (alpha, beta) and
// FusedStores (the epilogue with identity, ReLU or ReLU6; SiLU, whose exp is a call, is applied
// to each task's outputs after its stores).
template <typename T>
struct PlainStores {
    static constexpr bool kEpilogue = false;
    T alpha, beta;
    PlainStores chunk(T b, bool) const { return {alpha, b}; }
};
template <typename T>
struct FusedStores {
    static constexpr bool kEpilogue = true;
    Stores<T> s;
    FusedStores chunk(T b, bool last) const { return {s.chunk(b, last)}; }
};

// The Stores of a run whose output is y (n*p*q pixels of K channels): the epilogue's residual
// when it is y itself becomes beta (y is read before it is written, as beta's y is).
template <typename T>
Stores<T> stores_of(const ConvProblem& p, epilogue_store::Out<T> e, const T* y) {
    if (e.z == y) e.beta = e.alpha2, e.z = nullptr;
    return Stores<T>{e, y, p.n * p.p * p.q * p.k, p.k};
}

// The output channel of the store at `out` (in y: its offset modulo K), for the epilogue's bias;
// 0 where the stores have no epilogue. Found once per block of stores (a division).
template <typename T, class St>
CONVCORE_GEMM_INLINE int64_t channel_of(const St& st, const T* out) {
    if constexpr (St::kEpilogue) {
        if (st.s.fused() && out >= st.s.y && out < st.s.y + st.s.y_size) return (out - st.s.y) % st.s.k;
    }
    return 0;
}

// out[0, cols) (cols <= the vector's lanes) from one vector of accumulators; `ch`: out[0]'s
// channel (channel_of).
template <typename T, int VB, typename V, class St>
CONVCORE_GEMM_INLINE void store_vector(const St& st, V acc, T* out, int64_t cols, int64_t ch) {
    constexpr int L = VB / sizeof(T);
    T alpha, beta;
    if constexpr (St::kEpilogue) {
        const Stores<T>& s = st.s;
        if (s.fused() && out >= s.y && out < s.y + s.y_size) {
            epilogue_store::store<T, VB, V, false>(s.e, acc, const_cast<T*>(s.y), out - s.y, ch, cols);
            return;
        }
        alpha = s.e.alpha, beta = s.e.beta;
    } else {
        alpha = st.alpha, beta = st.beta;
    }
    V o = alpha * acc;
    if (cols >= L) {
        if (beta != T(0)) {
            V prev;
            __builtin_memcpy(&prev, out, VB);
            o += beta * prev;
        }
        __builtin_memcpy(out, &o, VB);
    } else {
        T lanes[L];
        __builtin_memcpy(lanes, &o, VB);
        for (int64_t j = 0; j < cols; ++j) out[j] = beta == T(0) ? lanes[j] : lanes[j] + beta * out[j];
    }
}

template <typename T>
T beta_of(const PlainStores<T>& s) { return s.beta; }
template <typename T>
T beta_of(const FusedStores<T>& s) { return s.s.e.beta; }

// c[i][0, cols) from acc[i] for MR rows of NV vectors (store_vector).
template <typename T, int VB, int MR, int NV, typename V, class St>
CONVCORE_GEMM_INLINE void store(const V (&acc)[MR][NV], T* const* c, int64_t cols, const St& s) {
    constexpr int L = VB / sizeof(T);
    const int64_t ch = channel_of(s, c[0]);  // the same for every row: they are pixels
    for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NV; ++v) {
            const int64_t j0 = int64_t(v) * L;
            if (j0 >= cols) break;
            store_vector<T, VB>(s, acc[i][v], c[i] + j0, std::min<int64_t>(L, cols - j0), ch + j0);
        }
}

// C rows [i] (MR of them) x columns [0, NV vectors) = alpha * sum over taps t and l < len of
// A(i, t)[l] * B[t*len + l][columns] + beta * C, with A(i, t) = a[i*taps + t] + a_off; only the
// first `cols` columns are stored. B's rows are ldb apart and hold NV whole vectors from b.
template <typename T, int VB, int MR, int NV, class St>
CONVCORE_GEMM_INLINE void micro(const T* const* a, int64_t a_off, int64_t taps, int64_t len, const T* b, int64_t ldb,
                                T* const* c, int64_t cols, const St& s) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int64_t t = 0; t < taps; ++t) {
        const T* at[MR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) at[i] = a[i * taps + t] + a_off;
        const T* bt = b + t * len * ldb;
        for (int64_t l = 0; l < len; ++l) {
            V bv[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], bt + l * ldb + v * L, VB);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                const T ai = at[i][l];
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
            }
        }
    }
    store<T, VB, MR, NV>(acc, c, cols, s);
}

// An output pixel's (n, oh, ow), stepped through the flattened N*P*Q pixels without divisions
// (a 64-bit division takes 40-90 cycles: three per pixel cost as much as the products of a
// pixel with few channels).
struct PixelAt {
    int64_t n, oh, ow;
    PixelAt(const ConvProblem& p, int64_t pix) : n(pix / (p.p * p.q)), oh(pix / p.q % p.p), ow(pix % p.q) {}
    void next(const ConvProblem& p) {
        if (++ow == p.q) {
            ow = 0;
            if (++oh == p.p) oh = 0, ++n;
        }
    }
};

// The A rows of output pixel `at` for group 0 (group g's are g*Cg further): for each tap, the
// input pixel it reads, or `zeros` (C of them) in the padding.
template <typename T>
CONVCORE_GEMM_INLINE void pixel_rows(const ConvProblem& p, const T* x, const T* zeros, const PixelAt& at,
                                     const T** rows) {
    const int64_t ow = at.ow, oh = at.oh, n = at.n;
    const T* xn = x + n * p.h * p.w * p.c;
    for (int64_t r = 0; r < p.r; ++r) {
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        for (int64_t s = 0; s < p.s; ++s) {
            const int64_t iw = conv_input_coord(ow, s, p.pad_w, p.stride_w, p.dil_w);
            rows[r * p.s + s] = ih < 0 || ih >= p.h || iw < 0 || iw >= p.w ? zeros : xn + (ih * p.w + iw) * p.c;
        }
    }
}

// Output channels [k0, k0 + NV vectors) of group g (the first `cols` stored) for MR pixels whose
// A rows are `rows` (MR x taps); wt holds group g_base's rows first.
template <typename T, int VB, int MR, int NV, class St>
CONVCORE_GEMM_INLINE void block(const ConvProblem& p, const T* const* rows, const T* wt, int64_t g_base, T* y,
                                int64_t g, int64_t pix, int64_t k0, int64_t cols, const St& s) {
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), taps = p.r * p.s;
    T* c[MR];
    for (int i = 0; i < MR; ++i) c[i] = y + (pix + i) * p.k + g * kg + k0;
    micro<T, VB, MR, NV>(rows, g * cg, taps, cg, wt + (g - g_base) * taps * cg * wt_row(p) + k0, wt_row(p), c, cols,
                         s);
}

// The pixels [p0, p1) x groups [g0, g1) x each group's output channels [k_begin, k_end)
// (k_begin a multiple of the vector), in vectors of VB bytes: blocks of MR pixels (their A rows
// found once for all the groups) x 2 or 1 vectors of channels. `rows` holds MR * R * S pointers
// (MR <= 12); wt starts with group g_base's rows.
template <typename T, int VB, int kAcc, bool kOneVector, class St>
CONVCORE_GEMM_INLINE void pixels(const ConvProblem& p, const T* x, const T* wt, int64_t g_base, const T* zeros, T* y,
                                 int64_t g0, int64_t g1, int64_t p0, int64_t p1, int64_t k_begin, int64_t k_end,
                                 const St& s, const T** rows) {
    constexpr int L = VB / sizeof(T);
    // One vector of channels per block (kOneVector: the group's channels fit one) leaves room for
    // twice the pixels.
    constexpr int MR = kOneVector ? (kAcc > 12 ? 12 : kAcc) : (kAcc / 2 > 12 ? 12 : kAcc / 2);
    const int64_t taps = p.r * p.s, kg = p.k_per_group();
    PixelAt at(p, p0);
    for (int64_t pix = p0; pix < p1; pix += MR) {
        const int64_t m = std::min<int64_t>(MR, p1 - pix);
        for (int64_t i = 0; i < m; ++i, at.next(p)) pixel_rows(p, x, zeros, at, rows + i * taps);
        for (int64_t g = g0; g < g1; ++g) {
            int64_t k0 = k_begin;
            for (; !kOneVector && (k0 + 2 * L <= k_end || (k0 + L < k_end && k_end == kg)); k0 += 2 * L) {
                const int64_t cols = std::min<int64_t>(2 * L, k_end - k0);
                if (m == MR)
                    block<T, VB, MR, 2>(p, rows, wt, g_base, y, g, pix, k0, cols, s);
                else
                    for (int64_t i = 0; i < m; ++i)
                        block<T, VB, 1, 2>(p, rows + i * taps, wt, g_base, y, g, pix + i, k0, cols, s);
            }
            for (; k0 < k_end; k0 += L) {
                const int64_t cols = std::min<int64_t>(L, k_end - k0);
                if (m == MR)
                    block<T, VB, MR, 1>(p, rows, wt, g_base, y, g, pix, k0, cols, s);
                else
                    for (int64_t i = 0; i < m; ++i)
                        block<T, VB, 1, 1>(p, rows + i * taps, wt, g_base, y, g, pix + i, k0, cols, s);
            }
        }
    }
}

// Groups packed G = L / KC to a vector (groups_per_vector): MR pixels x one vector of G groups'
// output channels. Per pixel and tap one vector load brings the G groups' input channels (KC
// each, contiguous); rotated by d within each group (lane gl*KC + j takes element gl*KC +
// (j + d) % KC) it meets Wt's row d, so the KC rotations cover every (input, output) channel
// pair of the groups.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // always inlined into its instruction set's entry
#endif
template <typename T, int VB, int KC, int MR, class St>
CONVCORE_GEMM_INLINE void group_micro(const T* const* a, int64_t a_off, int64_t taps, const T* b, T* const* c,
                                      const St& s) {
    typedef T V __attribute__((vector_size(VB)));
    typedef std::conditional_t<sizeof(T) == 8, int64_t, int32_t> I;
    typedef I M __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    M masks[KC];
    for (int ch = 0; ch < KC; ++ch)
        for (int lane = 0; lane < L; ++lane) masks[ch][lane] = I(lane / KC * KC + (lane % KC + ch) % KC);
    V acc[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) acc[i] = V{};
    for (int64_t t = 0; t < taps; ++t) {
        V xv[MR];
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) __builtin_memcpy(&xv[i], a[i * taps + t] + a_off, VB);
        const T* bt = b + t * KC * L;
#pragma GCC unroll 8
        for (int ch = 0; ch < KC; ++ch) {
            V bv;
            __builtin_memcpy(&bv, bt + ch * L, VB);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) acc[i] += shuffle2(xv[i], xv[i], masks[ch]) * bv;
        }
    }
    const int64_t ch0 = channel_of(s, c[0]);  // the same for every row: they are pixels
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) store_vector<T, VB>(s, acc[i], c[i], L, ch0);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// a[m[l]] for every lane l of a float vector, with a mask known only at run time: one vpermps
// where the vector is 32 or 64 bytes (only the AVX2 and AVX-512 kernels have those). In asm
// because an intrinsic would need its instruction set's attribute on every function between it
// and the kernel's entry, and clang spells a run-time shuffle2 lane by lane, through memory.
template <int VB, typename V, typename M>
CONVCORE_GEMM_INLINE V permute(V a, M m) {
    static_assert(sizeof(a[0]) == 4, "float lanes");
#ifdef CONVCORE_X86_DISPATCH
    if constexpr (VB == 64 || VB == 32) {
        V r;
        asm("vpermps {%1, %2, %0|%0, %2, %1}" : "=v"(r) : "v"(a), "v"(m));
        return r;
    }
#endif
    return shuffle2(a, a, m);
}

// Packed groups along an output row (unit dilation along w, stride SW, S taps): PB consecutive
// output pixels from (n, oh, ow), none of whose taps reads the left or right padding, x one
// vector of groups from input channel c0. Per filter row and rotation d, each of the SW * (PB -
// 1) + S input vectors the pixels read is loaded and rotated once and fed to every (pixel, tap)
// that reads it (pixel i, tap s read column SW * i + s): a rotation per ceil(S / SW) FMAs
// instead of one per FMA.
template <typename T, int VB, int KC, int PB, int S, int SW, class St>
CONVCORE_GEMM_INLINE void group_sliding(const ConvProblem& p, const T* x, const T* b, T* y, int64_t n, int64_t oh,
                                        int64_t ow, int64_t c0, const TapRange& rr, const St& s) {
    typedef T V __attribute__((vector_size(VB)));
    typedef std::conditional_t<sizeof(T) == 8, int64_t, int32_t> I;
    typedef I M __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    M masks[KC];
    for (int d = 0; d < KC; ++d)
        for (int lane = 0; lane < L; ++lane) masks[d][lane] = I(lane / KC * KC + (lane % KC + d) % KC);
    V acc[PB];
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i) acc[i] = V{};
    for (int64_t r = rr.begin; r < rr.end; ++r) {
        const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
        const T* xr = x + ((n * p.h + ih) * p.w + ow * SW - p.pad_w) * p.c + c0;
#pragma GCC unroll 1
        for (int d = 0; d < KC; ++d) {
            M mask = masks[d];
            asm("" : "+x"(mask));  // loaded once per d
            V wv[S];
#pragma GCC unroll 8
            for (int s = 0; s < S; ++s) __builtin_memcpy(&wv[s], b + ((r * S + s) * KC + d) * L, VB);
            const T* xs = xr;
            const int64_t c = p.c;
#pragma GCC unroll 64
            for (int j = 0; j < SW * (PB - 1) + S; ++j, xs += c) {
                V xv;
                __builtin_memcpy(&xv, xs, VB);
                xv = permute<VB>(xv, mask);
                asm("" : "+x"(xv));  // one rotation in a register, not redone per FMA
#pragma GCC unroll 8
                for (int s = 0; s < S; ++s) {
                    const int i = (j - s) / SW;  // the pixel whose tap s reads column j, if any
                    if (j >= s && (j - s) % SW == 0 && i < PB) acc[i] += wv[s] * xv;
                }
            }
        }
    }
    T* yo = y + ((n * p.p + oh) * p.q + ow) * p.k + c0;
#pragma GCC unroll 16
    for (int i = 0; i < PB; ++i) store_vector<T, VB>(s, acc[i], yo + i * p.k, L, c0);
}

// Where group_sliding applies: 3 taps along w at stride 1 or 2, unit dilation.
inline int group_sliding_kind(const ConvProblem& p) {
    if (p.dil_w != 1 || p.stride_w > 2 || p.s != 3) return 0;
    return int(p.s * 10 + p.stride_w);
}
// Pixels per group_sliding block: its accumulators, S weights, an input vector and a mask in
// the registers (2 * acc vectors of them), at most 16.
constexpr int group_sliding_pixels(int acc_vectors, int s) {
    return 2 * acc_vectors - s - 2 < 16 ? 2 * acc_vectors - s - 2 : 16;
}

// The pixels [p0, p1) x groups [g0, g1) (whole vectors of groups) with groups packed per vector:
// runs of an output row's interior in blocks of PB pixels (group_sliding), every other pixel in
// blocks of up to MR (group_micro, over the pixels' tap rows).
template <typename T, int VB, int kAcc, int KC, int S, int SW, class St>
CONVCORE_GEMM_INLINE void group_pixels_s(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y,
                                         int64_t g0, int64_t g1, int64_t p0, int64_t p1, const St& s,
                                         const T** rows) {
    constexpr int L = VB / sizeof(T), G = L / KC, MR = kAcc / 2 > 12 ? 12 : kAcc / 2;
    constexpr int PB = S ? group_sliding_pixels(kAcc, S) : 1;
    const int64_t taps = p.r * p.s;
    // Interior columns: those whose S taps all read inside the row.
    const int64_t last = p.w - 1 + p.pad_w - (p.s - 1) * p.dil_w;
    const int64_t begin = std::min(p.q, (p.pad_w + p.stride_w - 1) / p.stride_w);
    const int64_t end = last < 0 ? begin : std::max(begin, std::min(p.q, last / p.stride_w + 1));
    for (int64_t pix = p0; pix < p1;) {
        const int64_t ow = pix % p.q;
        if (S && ow >= begin && ow + PB <= end && pix + PB <= p1) {
            const int64_t oh = pix / p.q % p.p, n = pix / (p.p * p.q);
            const TapRange rr = conv_valid_taps(oh, p.h, p.r, p.pad_h, p.stride_h, p.dil_h);
            for (int64_t g = g0; g < g1; g += G)
                if constexpr (S != 0)
                    group_sliding<T, VB, KC, PB, S, SW>(p, x, wt + g / G * taps * KC * L, y, n, oh, ow, g * KC, rr,
                                                        s);
            pix += PB;
            continue;
        }
        // Up to MR pixels, stopping where a sliding block can start.
        int64_t m = std::min<int64_t>(MR, p1 - pix);
        if (S && ow < begin) m = std::min(m, begin - ow);
        if (S && ow >= end) m = std::min(m, p.q - ow + begin);  // to the next row's interior
        PixelAt at(p, pix);
        for (int64_t i = 0; i < m; ++i, at.next(p)) pixel_rows(p, x, zeros, at, rows + i * taps);
        for (int64_t g = g0; g < g1; g += G) {
            const T* b = wt + g / G * taps * KC * L;
            T* c[MR];
            for (int64_t i = 0; i < m; ++i) c[i] = y + (pix + i) * p.k + g * KC;
            if (m == MR)
                group_micro<T, VB, KC, MR>(rows, g * KC, taps, b, c, s);
            else
                for (int64_t i = 0; i < m; ++i) group_micro<T, VB, KC, 1>(rows + i * taps, g * KC, taps, b, c + i, s);
        }
        pix += m;
    }
}

// Only float's AVX2 and AVX-512 kernels have group_sliding: it is the largest code here, and
// float64 and the SSE2 fallback are not worth its compile time.
template <typename T, int VB, int kAcc, int KC, class St>
CONVCORE_GEMM_INLINE void group_pixels(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y,
                                       int64_t g0, int64_t g1, int64_t p0, int64_t p1, const St& s,
                                       const T** rows) {
    if constexpr (sizeof(T) == 4 && VB >= 32) {
        switch (group_sliding_kind(p)) {
            case 31: return group_pixels_s<T, VB, kAcc, KC, 3, 1>(p, x, wt, zeros, y, g0, g1, p0, p1, s, rows);
            case 32: return group_pixels_s<T, VB, kAcc, KC, 3, 2>(p, x, wt, zeros, y, g0, g1, p0, p1, s, rows);
        }
    }
    group_pixels_s<T, VB, kAcc, KC, 0, 1>(p, x, wt, zeros, y, g0, g1, p0, p1, s, rows);
}

// Groups [g0, g1) one at a time, with the narrowest vector (of VB, VB/2, VB/4 bytes; at least
// 16) that holds a group's output channels, so that few channels per group do not leave most
// lanes idle. wt starts with group g_base's rows.
template <typename T, int VB, int kAcc, class St>
CONVCORE_GEMM_INLINE void group_by_group(const ConvProblem& p, const T* x, const T* wt, int64_t g_base,
                                         const T* zeros, T* y, int64_t g0, int64_t g1, int64_t p0, int64_t p1,
                                         int64_t k0, int64_t k1, const St& s, const T** rows) {
    const int64_t bytes = p.k_per_group() * int64_t(sizeof(T));
    if (VB >= 64 && bytes <= VB / 4)
        pixels<T, (VB >= 64 ? VB / 4 : VB), kAcc, true>(p, x, wt, g_base, zeros, y, g0, g1, p0, p1, k0, k1, s, rows);
    else if (VB >= 32 && bytes <= VB / 2)
        pixels<T, (VB >= 32 ? VB / 2 : VB), kAcc, true>(p, x, wt, g_base, zeros, y, g0, g1, p0, p1, k0, k1, s, rows);
    else if (bytes <= VB)
        pixels<T, VB, kAcc, true>(p, x, wt, g_base, zeros, y, g0, g1, p0, p1, k0, k1, s, rows);
    else
        pixels<T, VB, kAcc, false>(p, x, wt, g_base, zeros, y, g0, g1, p0, p1, k0, k1, s, rows);
}

// One task: pixels [p0, p1) x groups [g0, g1) x channels [k0, k1) of each: the packed groups
// (groups_per_vector) a vector of them at a time, the others group by group.
template <typename T, int VB, int kAcc, class St>
CONVCORE_GEMM_INLINE void task(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, int64_t g0,
                               int64_t g1, int64_t p0, int64_t p1, int64_t k0, int64_t k1, const St& s,
                               const T** rows) {
    constexpr int L = VB / sizeof(T);
    const int64_t gv = groups_per_vector(p, L), packed = packed_groups(p, gv), kg = p.k_per_group();
    const int64_t g_mid = std::max(g0, std::min(g1, packed));
    if (g0 < g_mid) {
        switch (kg) {
            case 2: group_pixels<T, VB, kAcc, 2>(p, x, wt, zeros, y, g0, g_mid, p0, p1, s, rows); break;
            case 4:
                group_pixels<T, VB, kAcc, (L >= 4 ? 4 : 2)>(p, x, wt, zeros, y, g0, g_mid, p0, p1, s, rows);
                break;
            default:
                group_pixels<T, VB, kAcc, (L >= 8 ? 8 : 2)>(p, x, wt, zeros, y, g0, g_mid, p0, p1, s, rows);
        }
    }
    if (g_mid < g1)  // after the packed groups' blocks come the rest's rows
        group_by_group<T, VB, kAcc>(p, x, wt + packed * p.r * p.s * p.c_per_group() * kg, packed, zeros, y, g_mid, g1,
                                    p0, p1, k0, k1, s, rows);
}

// The panel path reads A in place where a 1x1 filter with unit stride and no padding makes the
// pixels' rows of x the GEMM's rows, unless their stride is a multiple of 2 KiB (then rows
// share L1 sets: x86 L1 caches repeat their sets every 4 KiB). Otherwise it copies them.
inline bool rows_share_sets(int64_t row_bytes) { return row_bytes % 2048 == 0; }
inline bool panel_a_in_place(const ConvProblem& p) {
    return p.is_1x1() && p.unit_stride() && p.pad_h == 0 && p.pad_w == 0 && !rows_share_sets(p.c * int64_t(p.elem_size()));
}
// The row stride of copied A rows of `len` values: one cache line more where `len` alone would
// make them share L1 sets.
inline int64_t copied_row_stride(int64_t len, size_t elem) {
    return rows_share_sets(len * int64_t(elem)) ? len + 64 / int64_t(elem) : len;
}

// On the panel path with few input channels (a stem: panel_path's last case) and unit dilation
// along w, the S taps of a filter row read S consecutive input pixels: one run of S*C values
// that x holds contiguously. The kernel then reads A in place, R runs per pixel (Wt's rows
// [tap*C + c] are [r][s*C + c] already); a run that crosses the left or right edge, or a row
// in the padding, is copied with its zeros into the task's buffer.
inline bool panel_row_runs(const ConvProblem& p) {
    return p.dil_w == 1 && !p.is_1x1() && p.c < isa_lanes(p.elem_size()) &&
           12 * p.r * p.s * p.c * int64_t(p.elem_size()) <= cache_bytes(1, 32 << 10);
}

// MR pixels of one output row, none of whose runs crosses an edge: pixel i's run of filter row
// `tap` is row[tap] + i * step. The addresses come from a few registers, not MR pointers per
// tap (which the compiler keeps on the stack: a load per broadcast). Taps in the padding (rows
// of zeros for every pixel of the block) are not passed: `taps` lists the others.
template <typename T, int VB, int MR, int NV, class St>
CONVCORE_GEMM_INLINE void micro_runs(const T* const* row, const int64_t* taps, int64_t ntaps, int64_t step,
                                     int64_t len, const T* b, int64_t ldb, T* const* c, int64_t cols, const St& s) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int64_t t = 0; t < ntaps; ++t) {
        const T* a = row[taps[t]];
        const T* bt = b + taps[t] * len * ldb;
        for (int64_t l = 0; l < len; ++l) {
            V bv[NV];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], bt + l * ldb + v * L, VB);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                const T ai = a[i * step + l];
#pragma GCC unroll 16
                for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
            }
        }
    }
    store<T, VB, MR, NV>(acc, c, cols, s);
}

template <typename T, int VB, int kAcc, class St>
CONVCORE_GEMM_INLINE void row_run_task(const ConvProblem& p, const T* x, const T* wt, T* y, int64_t p0, int64_t p1,
                                       int64_t j0, int64_t j1, const St& s, T* edges, T* sink, const T** rows) {
    constexpr int NV = kPanelVectors, L = VB / sizeof(T), NR = NV * L, MR = kAcc * 3 / 2 / NV;
    const int64_t run = p.s * p.c, reduction = p.r * run;
    T* c[MR];
    int64_t ow0 = p0 % p.q, oh0 = p0 / p.q % p.p, n0 = p0 / (p.p * p.q);  // of pix, kept without divisions
    for (int64_t pix = p0; pix < p1; pix += MR) {
        const int64_t m = std::min<int64_t>(MR, p1 - pix);
        const int64_t ow_first = ow0, oh_first = oh0, n_first = n0;
        const int64_t iw_first = ow_first * p.stride_w - p.pad_w, iw_last = iw_first + (MR - 1) * p.stride_w;
        if (m == MR && ow_first + MR <= p.q && iw_first >= 0 && iw_last + p.s <= p.w && p.r <= 16) {
            // One output row, no run across an edge: the block's runs are a fixed step apart.
            const T* row[16];
            int64_t taps[16], ntaps = 0;
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t ih = conv_input_coord(oh_first, r, p.pad_h, p.stride_h, p.dil_h);
                row[r] = x + ((n_first * p.h + ih) * p.w + iw_first) * p.c;
                if (ih >= 0 && ih < p.h) taps[ntaps++] = r;
            }
            for (int64_t jp = j0; jp < j1; ++jp) {
                const int64_t cols = std::min<int64_t>(NR, p.k - jp * NR);
                for (int i = 0; i < MR; ++i) c[i] = y + (pix + i) * p.k + jp * NR;
                const T* b = wt + jp * reduction * NR;
                if (cols <= L)
                    micro_runs<T, VB, MR, 1>(row, taps, ntaps, p.stride_w * p.c, run, b, NR, c, cols, s);
                else
                    micro_runs<T, VB, MR, NV>(row, taps, ntaps, p.stride_w * p.c, run, b, NR, c, cols, s);
            }
            if ((ow0 += MR) == p.q) {
                ow0 = 0;
                if (++oh0 == p.p) oh0 = 0, ++n0;
            }
            continue;
        }
        int64_t ow = ow0, oh = oh0, n = n0;
        for (int64_t i = 0; i < MR; ++i) {
            if (i >= m) ow = ow_first, oh = oh_first, n = n_first;  // rows past the last pixel repeat the first
            const int64_t iw0 = ow * p.stride_w - p.pad_w;
            for (int64_t r = 0; r < p.r; ++r) {
                const int64_t ih = conv_input_coord(oh, r, p.pad_h, p.stride_h, p.dil_h);
                const T* src = x + ((n * p.h + ih) * p.w + iw0) * p.c;
                if (ih >= 0 && ih < p.h && iw0 >= 0 && iw0 + p.s <= p.w) {
                    rows[i * p.r + r] = src;
                    continue;
                }
                T* d = edges + (i * p.r + r) * run;
                for (int64_t s = 0; s < p.s; ++s) {
                    const bool inside = ih >= 0 && ih < p.h && iw0 + s >= 0 && iw0 + s < p.w;
                    for (int64_t ch = 0; ch < p.c; ++ch) d[s * p.c + ch] = inside ? src[s * p.c + ch] : T(0);
                }
                rows[i * p.r + r] = d;
            }
            if (++ow == p.q) {
                ow = 0;
                if (++oh == p.p) oh = 0, ++n;
            }
            if (i + 1 == m) ow0 = ow, oh0 = oh, n0 = n;  // the next block's first pixel
        }
        for (int64_t jp = j0; jp < j1; ++jp) {
            const int64_t cols = std::min<int64_t>(NR, p.k - jp * NR);
            for (int i = 0; i < MR; ++i) c[i] = i < m ? y + (pix + i) * p.k + jp * NR : sink;
            const T* b = wt + jp * reduction * NR;
            if (cols <= L)
                micro<T, VB, MR, 1>(rows, 0, p.r, run, b, NR, c, cols, s);
            else
                micro<T, VB, MR, NV>(rows, 0, p.r, run, b, NR, c, cols, s);
        }
    }
}

// MB pixels from `pix` (m of them real; the rest repeat the first row into `sink`) x the
// columns [0, cols) of panel b (NV vectors, or one when the columns fit one).
template <typename T, int VB, int MB, int NV, class St>
CONVCORE_GEMM_INLINE void panel_block(const T* a0, int64_t lda, int64_t m, int64_t len, const T* b, T* y0,
                                      int64_t ldy, int64_t cols, const St& s, T* sink) {
    constexpr int L = VB / sizeof(T);
    const T* a[MB];
    T* c[MB];
    for (int i = 0; i < MB; ++i) {
        a[i] = a0 + (i < m ? i : 0) * lda;
        c[i] = i < m ? y0 + i * ldy : sink;
    }
    if (cols <= L)
        micro<T, VB, MB, 1>(a, 0, 1, len, b, NV * L, c, cols, s);
    else
        micro<T, VB, MB, NV>(a, 0, 1, len, b, NV * L, c, cols, s);
}

// The panel path's task: pixels [p0, p1) x panels [j0, j1), mc pixels at a time. Per chunk of
// kc of the reduction (tap, c), those pixels' A rows are read in place (panel_a_in_place) or
// copied into `a_block` (rows of kc, found tap by tap: an im2col of the block); then each
// panel's B micro-panel (kc x 2 vectors) meets every MR pixels of the block, reused from L2.
// Later chunks add to y (beta 1). `rows` holds R*S pointers; `sink` (2 vectors) takes the rows
// of a last, partial block of pixels that do not exist.
template <typename T, int VB, int kAcc, class St>
CONVCORE_GEMM_INLINE void panel_task(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y,
                                     int64_t p0, int64_t p1, int64_t j0, int64_t j1, int64_t kc, int64_t mc, const St& s, T* a_block, T* sink, const T** rows) {
    constexpr int NV = kPanelVectors, NR = NV * (VB / sizeof(T)), MR = kAcc * 3 / 2 / NV;  // 1.5x kAcc accumulators
    if (panel_row_runs(p)) {
        row_run_task<T, VB, kAcc>(p, x, wt, y, p0, p1, j0, j1, s, a_block, sink, rows);
        return;
    }
    const int64_t taps = p.r * p.s, reduction = taps * p.c;
    const bool in_place = panel_a_in_place(p);
    for (int64_t pb = p0; pb < p1; pb += mc) {
        const int64_t pe = std::min(p1, pb + mc);
        for (int64_t q0 = 0; q0 < reduction; q0 += kc) {
            const int64_t len = std::min(kc, reduction - q0);
            const T* a = x + pb * p.c + q0;
            int64_t lda = p.c;
            if (!in_place) {
                lda = copied_row_stride(len, sizeof(T));
                const int64_t t0 = q0 / p.c, c0 = q0 % p.c;  // the chunk's first (tap, channel)
                PixelAt at(p, pb);
                for (int64_t pix = pb; pix < pe; ++pix, at.next(p)) {
                    pixel_rows(p, x, zeros, at, rows);
                    T* d = a_block + (pix - pb) * lda;
                    for (int64_t q = q0, t = t0, c = c0; q < q0 + len;) {  // the chunk's pieces: runs of taps
                        int64_t te = t + 1;  // taps whose pixels follow each other in x make one run
                        while (te < taps && rows[te] == rows[te - 1] + p.c && rows[te] != zeros) ++te;
                        const int64_t n = std::min(q0 + len - q, te * p.c - q);
                        std::memcpy(d + (q - q0), rows[t] + c, size_t(n) * sizeof(T));
                        q += n;
                        for (c += n; c >= p.c; c -= p.c) ++t;  // (t, c) of q
                    }
                }
                a = a_block;
            }
            // The first chunk blends with beta, later ones add to it; the last applies the epilogue.
            const St sc = s.chunk(q0 == 0 ? beta_of(s) : T(1), q0 + len == reduction);
            for (int64_t jp = j0; jp < j1; ++jp) {
                const T* b = wt + (jp * reduction + q0) * NR;
                const int64_t cols = std::min<int64_t>(NR, p.k - jp * NR);
                for (int64_t pix = pb; pix < pe; pix += MR) {
                    const int64_t m = std::min<int64_t>(MR, pe - pix);
                    const T* ap = a + (pix - pb) * lda;
                    T* yp = y + pix * p.k + jp * NR;
                    if (m > MR / 2)
                        panel_block<T, VB, MR, NV>(ap, lda, m, len, b, yp, p.k, cols, sc, sink);
                    else if (m > 2)  // a last block of half the pixels or fewer
                        panel_block<T, VB, MR / 2, NV>(ap, lda, m, len, b, yp, p.k, cols, sc, sink);
                    else  // one or two pixels (a squeeze-excitation's 1x1 on a 1x1 map, a last pixel)
                        panel_block<T, VB, 2, NV>(ap, lda, m, len, b, yp, p.k, cols, sc, sink);
                }
            }
        }
    }
}

// A task of the grouped path: up to kPixelsPerTask output pixels by about kChannelsPerTask
// output channels (a part of one group's, or several whole groups): its A rows stay in cache
// while Wt's panel is reused across them, and a small map still makes a task per thread.
constexpr int64_t kPixelsPerTask = 96, kChannelsPerTask = 64;

template <typename T>
struct Kernels {
    void (*task)(const ConvProblem&, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, const Stores<T>&, const T**);
    void (*panel_task)(const ConvProblem&, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, const Stores<T>&, T*, T*, const T**);
};

// The task kernels compiled for the machine's instruction set (cpu/nhwc_gemm.cpp, the one file
// that instantiates them for float and double, for every instruction set).
template <typename T>
const Kernels<T>& kernels();

// The panel path's blocking: the reduction whole, or in chunks of kc when a B micro-panel
// (kc x 2 vectors) would exceed a quarter of L2; A blocks of mc pixels x kc in half of L2. The
// pixels (in blocks of 12) or the panels are split evenly over the threads, whichever leaves
// the threads' shares of 12-pixel x panel blocks more even.
struct PanelBlocking {
    int64_t kc, mc, pixel_tasks, pixels_per_task, panel_tasks, panels_per_task;
};
inline PanelBlocking panel_blocking(const ConvProblem& p, int threads) {
    constexpr int64_t kBlockRows = 12;  // a multiple of every instruction set's MR
    const int64_t elem = int64_t(p.elem_size()), nr = panel_cols(p), panels = panel_count(p);
    const int64_t reduction = p.r * p.s * p.c, pixels = p.n * p.p * p.q, l2 = cache_bytes(2, 512 << 10);
    const int64_t kc_max = std::max<int64_t>(256, l2 / (4 * nr * elem));
    const int64_t chunks = (reduction + kc_max - 1) / kc_max, kc = (reduction + chunks - 1) / chunks;
    const int64_t mc = std::max<int64_t>(kBlockRows, l2 / (2 * kc * elem) / kBlockRows * kBlockRows);
    const int64_t blocks = (pixels + kBlockRows - 1) / kBlockRows, t = std::max(1, threads);
    const int64_t by_pixels = (blocks + t - 1) / t * panels, by_panels = blocks * ((panels + t - 1) / t);
    int64_t pixel_tasks = std::min(blocks, t), panel_tasks = 1;
    if (by_panels < by_pixels) pixel_tasks = 1, panel_tasks = std::min(panels, t);
    const int64_t per_pixel_task = (blocks + pixel_tasks - 1) / pixel_tasks * kBlockRows;
    const int64_t per_panel_task = (panels + panel_tasks - 1) / panel_tasks;
    return {kc,
            std::min(mc, per_pixel_task),
            (pixels + per_pixel_task - 1) / per_pixel_task,
            per_pixel_task,
            (panels + per_panel_task - 1) / per_panel_task,
            per_panel_task};
}

// y = alpha * conv(x, w) + beta * y on NHWC x and y, with the fused epilogue where `s` has one
// (stores_of); Wt made by make_wt, `zeros` at least C zeros.
template <typename T>
void run(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, const Stores<T>& s, int threads) {
    const Kernels<T>& kernels = nhwc_gemm::kernels<T>();
    const int64_t pixels = p.n * p.p * p.q, kg = p.k_per_group();
    if (panel_path(p)) {
        const PanelBlocking b = panel_blocking(p, threads);
        // A's block (row runs: the copied runs at the edges), a sink row; row pointers (row runs:
        // 12 pixels x R).
        const int64_t a_block_size = panel_row_runs(p)  ? 12 * p.r * p.s * p.c
                                     : panel_a_in_place(p) ? 0
                                                          : b.mc * copied_row_stride(b.kc, p.elem_size());
        const size_t per_thread = size_t(a_block_size + panel_cols(p));
        std::vector<T>& blocks = thread_vector<T, PanelBlocks>(per_thread * size_t(threads));
        const size_t pointers = size_t(std::max(p.r * p.s, 12 * p.r));
        std::vector<const T*>& row_pointers = thread_vector<const T*, PanelRows>(pointers * size_t(threads));
#pragma omp parallel num_threads(threads)
        {
            const int thread = omp_get_thread_num();
            T* a_block = blocks.data() + per_thread * size_t(thread);
            const T** rows = row_pointers.data() + pointers * size_t(thread);
#pragma omp for collapse(2) schedule(static)
            for (int64_t tp = 0; tp < b.pixel_tasks; ++tp)
                for (int64_t tj = 0; tj < b.panel_tasks; ++tj)
                    kernels.panel_task(p, x, wt, zeros, y, tp * b.pixels_per_task,
                                       std::min(pixels, (tp + 1) * b.pixels_per_task), tj * b.panels_per_task,
                                       std::min(panel_count(p), (tj + 1) * b.panels_per_task), b.kc, b.mc, s, a_block, a_block + a_block_size, rows);
        }
        return;
    }
    const int64_t pixel_tasks = (pixels + kPixelsPerTask - 1) / kPixelsPerTask;
    const int64_t per_task = std::max<int64_t>(1, kChannelsPerTask / kg);  // groups per task
    const int64_t group_tasks = (p.groups + per_task - 1) / per_task;
    const int64_t channel_tasks = (kg + kChannelsPerTask - 1) / kChannelsPerTask;
    const size_t per_thread = size_t(12 * p.r * p.s);
    std::vector<const T*>& row_pointers = thread_vector<const T*, PixelRows>(per_thread * size_t(threads));
#pragma omp parallel num_threads(threads)
    {
        const T** rows = row_pointers.data() + per_thread * size_t(omp_get_thread_num());
#pragma omp for collapse(3) schedule(static)
        for (int64_t tp = 0; tp < pixel_tasks; ++tp)
            for (int64_t tg = 0; tg < group_tasks; ++tg)
                for (int64_t tk = 0; tk < channel_tasks; ++tk)
                    kernels.task(p, x, wt, zeros, y, tg * per_task, std::min(p.groups, (tg + 1) * per_task),
                                 tp * kPixelsPerTask, std::min(pixels, (tp + 1) * kPixelsPerTask),
                                 tk * kChannelsPerTask, std::min(kg, (tk + 1) * kChannelsPerTask), s, rows);
    }
}

// The solvers' prepared filter (Wt) by dtype.
inline void prepare_wt(const ConvProblem& p, const void* w, void* out, int threads = 1) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        make_wt(p, static_cast<const double*>(w), static_cast<double*>(out), threads);
    else
        make_wt(p, static_cast<const float*>(w), static_cast<float*>(out), threads);
}

}  // namespace nhwc_gemm
}  // namespace cpu
}  // namespace convcore
