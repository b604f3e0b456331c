// POINTWISE on the CPU: 1x1 convolutions (any stride, padding and groups) as a GEMM per group
// with no packing of the activations, in NHWC and NCHW natively:
//   NHWC: Y[pixel][k] = sum_c X[pixel][c] * Wt[c][k]   (Wt = W^T, made once per filter)
//   NCHW: Y[k][pixel] = sum_c W[k][c] * X[c][pixel]
// Both are C = A * B with A's rows read in place (pixels of x, or filters) and B read in
// vectors along its rows (Wt's, or x's planes); one register-blocked kernel serves both. BLAS
// (IM2COL_GEMM) packs both operands first, which costs more than the product when the channel
// counts are small (MobileNet's and EfficientNet's early layers): "auto" times the two.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/conv_index.hpp"
#include "core/solver.hpp"
#include "cpu/cpu_isa.hpp"

#define CONVCORE_PW_INLINE inline __attribute__((always_inline))

namespace convcore {
namespace cpu {
namespace {

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "POINTWISE runs float32 and float64 only";
    if (!p.is_1x1())
        return "POINTWISE needs a 1x1 filter, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
    return "";
}

bool runs_nhwc(const ConvProblem&) { return true; }

// NHWC: Wt per group as Cg rows of Kg values, each row padded with zeros to `wt_row` (a whole
// number of the widest vectors), so the kernel's vector loads never leave it.
constexpr int64_t kMaxLanes = 16;  // 64-byte vectors of float32
int64_t wt_row(const ConvProblem& p) { return (p.k_per_group() + kMaxLanes - 1) / kMaxLanes * kMaxLanes; }
size_t wt_bytes(const ConvProblem& p) { return size_t(p.groups * p.c_per_group() * wt_row(p)) * p.elem_size(); }

// NCHW reads x's planes in place when every output reads the input pixel at its own position
// (stride 1, no padding); otherwise the pixels the outputs read are gathered first (N x C x P x Q).
bool nchw_in_place(const ConvProblem& p) { return p.unit_stride() && p.pad_h == 0 && p.pad_w == 0; }

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

size_t workspace_bytes(const ConvProblem& p) {
    if (p.nhwc)  // Wt, and one zero row that padded pixels read
        return round64(wt_bytes(p)) + size_t(p.c_per_group()) * p.elem_size();
    return nchw_in_place(p) ? 0 : size_t(p.n * p.c * p.p * p.q) * p.elem_size();
}

template <typename T>
void make_wt(const ConvProblem& p, const T* w, T* wt) {
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), row = wt_row(p);
    for (int64_t g = 0; g < p.groups; ++g)
        for (int64_t c = 0; c < cg; ++c) {
            T* d = wt + (g * cg + c) * row;
            for (int64_t k = 0; k < row; ++k) d[k] = k < kg ? w[(g * kg + k) * cg + c] : T(0);
        }
}

// C rows [i] (MR of them) x columns [0, NV vectors) = alpha * sum over l < len of A[i][l] *
// B[l][columns] + beta * C; only the first `cols` columns are stored. B's rows are ldb apart and
// hold NV whole vectors from b.
template <typename T, int VB, int MR, int NV>
CONVCORE_PW_INLINE void micro(const T* const* a, const T* b, int64_t ldb, int64_t len, T* const* c, int64_t cols,
                              T alpha, T beta) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int L = VB / sizeof(T);
    V acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int64_t l = 0; l < len; ++l) {
        V bv[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], b + l * ldb + v * L, VB);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const T ai = a[i][l];
#pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
        }
    }
    for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NV; ++v) {
            const int64_t j0 = int64_t(v) * L;
            if (j0 >= cols) break;
            V o = alpha * acc[i][v];
            T* out = c[i] + j0;
            if (cols - j0 >= L) {
                if (beta != T(0)) {
                    V prev;
                    __builtin_memcpy(&prev, out, VB);
                    o += beta * prev;
                }
                __builtin_memcpy(out, &o, VB);
            } else {
                T lanes[L];
                __builtin_memcpy(lanes, &o, VB);
                for (int64_t j = 0; j < cols - j0; ++j) out[j] = beta == T(0) ? lanes[j] : lanes[j] + beta * out[j];
            }
        }
}

// NHWC: the pixels [p0, p1) of the flattened N*P*Q outputs, group g, the group's output channels
// [k_begin, k_end) (k_begin a multiple of the vector). Rows of A are the pixels' input channel
// vectors (the zero row for a pixel that reads the padding), B is Wt.
// The input channels of output pixel `pix` (flattened N*P*Q) in group g: its input pixel's, or
// the zero row where it reads the padding.
template <typename T>
CONVCORE_PW_INLINE const T* nhwc_row(const ConvProblem& p, const T* x, const T* zeros, int64_t g, int64_t pix) {
    const int64_t ow = pix % p.q, oh = pix / p.q % p.p, n = pix / (p.p * p.q);
    const int64_t ih = conv_input_coord(oh, 0, p.pad_h, p.stride_h, 1), iw = conv_input_coord(ow, 0, p.pad_w, p.stride_w, 1);
    if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) return zeros;
    return x + ((n * p.h + ih) * p.w + iw) * p.c + g * p.c_per_group();
}

// NHWC, output channels [k0, k0 + NV vectors) of group g (only the first `cols` stored) for the
// pixels [p0, p1): MR pixels at a time.
template <typename T, int VB, int kAcc, int NV>
CONVCORE_PW_INLINE void nhwc_columns(const ConvProblem& p, const T* x, const T* b, const T* zeros, T* y, int64_t g,
                                     int64_t p0, int64_t p1, int64_t k0, int64_t cols, T alpha, T beta) {
    constexpr int MR = kAcc / NV > 12 ? 12 : kAcc / NV;
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), ldb = wt_row(p);
    int64_t pix = p0;
    for (; pix + MR <= p1; pix += MR) {
        const T* a[MR];
        T* c[MR];
        for (int i = 0; i < MR; ++i) a[i] = nhwc_row(p, x, zeros, g, pix + i), c[i] = y + (pix + i) * p.k + g * kg + k0;
        micro<T, VB, MR, NV>(a, b + k0, ldb, cg, c, cols, alpha, beta);
    }
    for (; pix < p1; ++pix) {
        const T* a[1] = {nhwc_row(p, x, zeros, g, pix)};
        T* c[1] = {y + pix * p.k + g * kg + k0};
        micro<T, VB, 1, NV>(a, b + k0, ldb, cg, c, cols, alpha, beta);
    }
}

// NHWC: the pixels [p0, p1) of the flattened N*P*Q outputs, group g, the group's output channels
// [k_begin, k_end) (k_begin a multiple of the vector). Rows of A are the pixels' input channel
// vectors, B is Wt.
template <typename T, int VB, int kAcc>
CONVCORE_PW_INLINE void nhwc_pixels(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, int64_t g,
                                    int64_t p0, int64_t p1, int64_t k_begin, int64_t k_end, T alpha, T beta) {
    constexpr int L = VB / sizeof(T);
    const int64_t kg = p.k_per_group();
    const T* b = wt + g * p.c_per_group() * wt_row(p);
    int64_t k0 = k_begin;
    for (; k0 + 2 * L <= k_end || (k0 + L < k_end && k_end == kg); k0 += 2 * L)
        nhwc_columns<T, VB, kAcc, 2>(p, x, b, zeros, y, g, p0, p1, k0, std::min<int64_t>(2 * L, k_end - k0), alpha,
                                     beta);
    for (; k0 < k_end; k0 += L)
        nhwc_columns<T, VB, kAcc, 1>(p, x, b, zeros, y, g, p0, p1, k0, std::min<int64_t>(L, k_end - k0), alpha,
                                     beta);
}

// NCHW: NV vectors of output pixels from xq / yq for the output channels [k_begin, k_end), MR at a
// time.
template <typename T, int VB, int kAcc, int NV>
CONVCORE_PW_INLINE void nchw_vectors(const ConvProblem& p, const T* xq, int64_t ldb, const T* wg, T* yq,
                                     int64_t k_begin, int64_t k_end, T alpha, T beta) {
    constexpr int L = VB / sizeof(T), MR = kAcc / NV > 8 ? 8 : kAcc / NV;
    const int64_t cg = p.c_per_group(), pq = p.p * p.q;
    int64_t k = k_begin;
    for (; k + MR <= k_end; k += MR) {
        const T* a[MR];
        T* c[MR];
        for (int i = 0; i < MR; ++i) a[i] = wg + (k + i) * cg, c[i] = yq + (k + i) * pq;
        micro<T, VB, MR, NV>(a, xq, ldb, cg, c, NV * L, alpha, beta);
    }
    for (; k < k_end; ++k) {
        const T* a[1] = {wg + k * cg};
        T* c[1] = {yq + k * pq};
        micro<T, VB, 1, NV>(a, xq, ldb, cg, c, NV * L, alpha, beta);
    }
}

// NCHW: image n, group g, output pixels [q0, q1) of the plane and the group's output channels
// [k_begin, k_end): rows of A are the filters, B the input planes (ldb apart). Whole vectors of
// pixels; the last few one at a time.
template <typename T, int VB, int kAcc>
CONVCORE_PW_INLINE void nchw_pixels(const ConvProblem& p, const T* xg, int64_t ldb, const T* wg, T* yg, int64_t q0,
                                    int64_t q1, int64_t k_begin, int64_t k_end, T alpha, T beta) {
    constexpr int L = VB / sizeof(T);
    const int64_t cg = p.c_per_group(), pq = p.p * p.q;
    int64_t q = q0;
    for (; q + 2 * L <= q1; q += 2 * L) nchw_vectors<T, VB, kAcc, 2>(p, xg + q, ldb, wg, yg + q, k_begin, k_end, alpha, beta);
    for (; q + L <= q1; q += L) nchw_vectors<T, VB, kAcc, 1>(p, xg + q, ldb, wg, yg + q, k_begin, k_end, alpha, beta);
    for (; q < q1; ++q)  // less than a vector left: one output pixel at a time
        for (int64_t k = k_begin; k < k_end; ++k) {
            T acc = 0;
            for (int64_t c = 0; c < cg; ++c) acc += wg[k * cg + c] * xg[c * ldb + q];
            T* out = yg + k * pq + q;
            *out = beta == T(0) ? alpha * acc : alpha * acc + beta * *out;
        }
}

template <typename T>
struct Kernels {
    void (*nhwc)(const ConvProblem&, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t,
                 T, T);
    void (*nchw)(const ConvProblem&, const T*, int64_t, const T*, T*, int64_t, int64_t, int64_t, int64_t, T, T);
};

// VB: vector bytes; ACC: accumulator vectors kept in registers (of 32 or 16).
#define CONVCORE_PW_KERNELS(ISA, ATTR, VB, ACC)                                                              \
    template <typename T>                                                                                    \
    ATTR void nhwc_##ISA(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, int64_t g,    \
                         int64_t p0, int64_t p1, int64_t k0, int64_t k1, T alpha, T beta) {                  \
        nhwc_pixels<T, VB, ACC>(p, x, wt, zeros, y, g, p0, p1, k0, k1, alpha, beta);                         \
    }                                                                                                        \
    template <typename T>                                                                                    \
    ATTR void nchw_##ISA(const ConvProblem& p, const T* xg, int64_t ldb, const T* wg, T* yg, int64_t q0,    \
                         int64_t q1, int64_t k0, int64_t k1, T alpha, T beta) {                              \
        nchw_pixels<T, VB, ACC>(p, xg, ldb, wg, yg, q0, q1, k0, k1, alpha, beta);                            \
    }                                                                                                        \
    template <typename T>                                                                                    \
    constexpr Kernels<T> kernels_##ISA = {nhwc_##ISA<T>, nchw_##ISA<T>};
CONVCORE_PW_KERNELS(baseline, , 16, 8)
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_PW_KERNELS(avx2, __attribute__((target("avx2,fma"))), 32, 8)
CONVCORE_PW_KERNELS(avx512, __attribute__((target("avx512f,avx512dq,fma"))), 64, 16)
#else
template <typename T>
constexpr Kernels<T> kernels_avx2 = kernels_baseline<T>;
template <typename T>
constexpr Kernels<T> kernels_avx512 = kernels_baseline<T>;
#endif

// A task: up to kPixelsPerTask output pixels by kChannelsPerTask output channels of one group,
// enough that a task's A rows (or B columns) stay in cache while the other operand's panel is
// reused across them, and small enough that a small map still makes a task per thread.
constexpr int64_t kPixelsPerTask = 96, kChannelsPerTask = 64;

struct Tasks {
    int64_t pixels, channels;  // chunks of each
    int64_t count() const { return pixels * channels; }
};
Tasks tasks_of(int64_t pixels, int64_t kg) {
    return {(pixels + kPixelsPerTask - 1) / kPixelsPerTask, (kg + kChannelsPerTask - 1) / kChannelsPerTask};
}

template <typename T>
void run_t(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Kernels<T>& kern = for_cpu_isa(kernels_avx512<T>, kernels_avx2<T>, kernels_baseline<T>);
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* ws = static_cast<char*>(a.workspace);
    const T alpha = T(a.alpha), beta = T(a.beta);
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), pq = p.p * p.q;
    if (p.nhwc) {
        const T* wt = static_cast<const T*>(a.prepared_filter);
        if (!wt) {
            make_wt(p, w, reinterpret_cast<T*>(ws));
            wt = reinterpret_cast<const T*>(ws);
        }
        T* zeros = reinterpret_cast<T*>(ws + round64(wt_bytes(p)));
        std::fill(zeros, zeros + cg, T(0));
        const int64_t pixels = p.n * pq;
        const Tasks tasks = tasks_of(pixels, kg);
#pragma omp parallel for collapse(2) num_threads(a.ctx.threads()) schedule(static)
        for (int64_t t = 0; t < tasks.count(); ++t)
            for (int64_t g = 0; g < p.groups; ++g) {
                const int64_t tp = t / tasks.channels, tk = t % tasks.channels;
                kern.nhwc(p, x, wt, zeros, y, g, tp * kPixelsPerTask, std::min(pixels, (tp + 1) * kPixelsPerTask),
                          tk * kChannelsPerTask, std::min(kg, (tk + 1) * kChannelsPerTask), alpha, beta);
            }
        return;
    }
    const T* xs = x;
    int64_t ldb = p.h * p.w;
    if (!nchw_in_place(p)) {  // gather the input pixel each output reads (zero in the padding)
        T* g = reinterpret_cast<T*>(ws);
#pragma omp parallel for collapse(2) num_threads(a.ctx.threads()) schedule(static)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc)
            for (int64_t oh = 0; oh < p.p; ++oh) {
                const int64_t ih = conv_input_coord(oh, 0, p.pad_h, p.stride_h, 1);
                T* d = g + (nc * p.p + oh) * p.q;
                for (int64_t ow = 0; ow < p.q; ++ow) {
                    const int64_t iw = conv_input_coord(ow, 0, p.pad_w, p.stride_w, 1);
                    d[ow] = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w ? x[(nc * p.h + ih) * p.w + iw] : T(0);
                }
            }
        xs = g;
        ldb = pq;
    }
    const Tasks tasks = tasks_of(pq, kg);
#pragma omp parallel for collapse(3) num_threads(a.ctx.threads()) schedule(static)
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t g = 0; g < p.groups; ++g)
            for (int64_t t = 0; t < tasks.count(); ++t) {
                const int64_t tp = t / tasks.channels, tk = t % tasks.channels;
                kern.nchw(p, xs + (n * p.c + g * cg) * ldb, ldb, w + g * kg * cg, y + (n * p.k + g * kg) * pq,
                          tp * kPixelsPerTask, std::min(pq, (tp + 1) * kPixelsPerTask), tk * kChannelsPerTask,
                          std::min(kg, (tk + 1) * kChannelsPerTask), alpha, beta);
            }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_t<double>(a);
    else
        run_t<float>(a);
}

// A plan prepares Wt for NHWC.
size_t prepared_filter_bytes(const ConvProblem& p) { return p.nhwc ? wt_bytes(p) : 0; }

void prepare_filter(const ConvProblem& p, const Context&, const void* w, void* out) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        make_wt(p, static_cast<const double*>(w), static_cast<double*>(out));
    else
        make_wt(p, static_cast<const float*>(w), static_cast<float*>(out));
}

}  // namespace

extern const Solver pointwise_solver;
const Solver pointwise_solver = {CONVCORE_FWD_ALGO_POINTWISE, CONVCORE_DEVICE_CPU, /*deterministic=*/true,
                                 why_not, workspace_bytes, run, prepared_filter_bytes, prepare_filter, runs_nhwc};

}  // namespace cpu
}  // namespace convcore
