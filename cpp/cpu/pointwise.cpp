// POINTWISE on the CPU: 1x1 convolutions (any stride, padding and groups) as a GEMM per group
// with no packing of the activations, in NHWC and NCHW natively:
//   NHWC: Y[pixel][k] = sum_c X[pixel][c] * Wt[c][k]   (Wt = W^T, made once per filter)
//   NCHW: Y[k][pixel] = sum_c W[k][c] * X[c][pixel]
// Both are C = A * B with A's rows read in place (pixels of x, or filters) and B read in
// vectors along its rows (Wt's, or x's planes); one register-blocked kernel (cpu/nhwc_gemm.hpp,
// whose NHWC GEMM IMPLICIT_GEMM shares) serves both. BLAS
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
#include "cpu/nhwc_gemm.hpp"


namespace convcore {
namespace cpu {
namespace {

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "POINTWISE runs float32 and float64 only";
    if (!p.is_1x1())
        return "POINTWISE needs a 1x1 filter, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
    if (product_or_minus1({p.n, p.c, p.p, p.q, int64_t(p.elem_size())}) < 0)
        return "POINTWISE: the input pixels its outputs read (N*C*P*Q) are too many to count in 64 bits";
    return "";
}

// NHWC with one group and at most kDotChannels output channels (a segmentation head's 1x1 to 2
// classes): each output is a dot product of the pixel's C input channels and a filter row, in
// vectors along C (dot_pixels). The NHWC GEMM vectorises along K instead, which leaves all but K
// lanes of its narrowest vector (4 floats) idle and spends a broadcast and an FMA per input
// channel and pixel.
constexpr int64_t kDotChannels = 4;
bool nhwc_dot(const ConvProblem& p) { return p.nhwc && p.groups == 1 && p.k <= kDotChannels; }

bool runs_nhwc(const ConvProblem& p) { return nhwc_gemm::sizes_fit(p); }
// The NHWC GEMM applies the epilogue in its stores (nhwc_gemm::Stores); NCHW leaves it to the core.
bool fuses_epilogue(const ConvProblem& p) { return p.nhwc; }

// NCHW reads x's planes in place when every output reads the input pixel at its own position
// (stride 1, no padding); otherwise the pixels the outputs read are gathered first (N x C x P x Q).
bool nchw_in_place(const ConvProblem& p) { return p.unit_stride() && p.pad_h == 0 && p.pad_w == 0; }

size_t round64(size_t b) { return (b + 63) / 64 * 64; }

size_t workspace_bytes(const ConvProblem& p) {
    if (nhwc_dot(p)) return 0;  // w read as it is
    if (p.nhwc)  // Wt, and one zero row that padded pixels read
        return round64(nhwc_gemm::wt_bytes(p)) + size_t(p.c) * p.elem_size();
    return nchw_in_place(p) ? 0 : size_t(p.n * p.c * p.p * p.q) * p.elem_size();
}

// NCHW: NV vectors of output pixels from xq / yq for the output channels [k_begin, k_end), MR at a
// time.
template <typename T, int VB, int kAcc, int NV>
CONVCORE_GEMM_INLINE void nchw_vectors(const ConvProblem& p, const T* xq, int64_t ldb, const T* wg, T* yq,
                                     int64_t k_begin, int64_t k_end, T alpha, T beta) {
    constexpr int L = VB / sizeof(T), MR = kAcc / NV > 8 ? 8 : kAcc / NV;
    const int64_t cg = p.c_per_group(), pq = p.p * p.q;
    const nhwc_gemm::PlainStores<T> s{alpha, beta};
    int64_t k = k_begin;
    for (; k + MR <= k_end; k += MR) {
        const T* a[MR];
        T* c[MR];
        for (int i = 0; i < MR; ++i) a[i] = wg + (k + i) * cg, c[i] = yq + (k + i) * pq;
        nhwc_gemm::micro<T, VB, MR, NV>(a, 0, 1, cg, xq, ldb, c, NV * L, s);
    }
    for (; k < k_end; ++k) {
        const T* a[1] = {wg + k * cg};
        T* c[1] = {yq + k * pq};
        nhwc_gemm::micro<T, VB, 1, NV>(a, 0, 1, cg, xq, ldb, c, NV * L, s);
    }
}

// NCHW: image n, group g, output pixels [q0, q1) of the plane and the group's output channels
// [k_begin, k_end): rows of A are the filters, B the input planes (ldb apart). Whole vectors of
// pixels; the last few one at a time.
template <typename T, int VB, int kAcc>
CONVCORE_GEMM_INLINE void nchw_pixels(const ConvProblem& p, const T* xg, int64_t ldb, const T* wg, T* yg, int64_t q0,
                                    int64_t q1, int64_t k_begin, int64_t k_end, T alpha, T beta) {
    constexpr int L = VB / sizeof(T);
    const int64_t cg = p.c_per_group(), pq = p.p * p.q;
    int64_t q = q0;
    for (; q + 2 * L <= q1; q += 2 * L)
        nchw_vectors<T, VB, kAcc, 2>(p, xg + q, ldb, wg, yg + q, k_begin, k_end, alpha, beta);
    for (; q + L <= q1; q += L) nchw_vectors<T, VB, kAcc, 1>(p, xg + q, ldb, wg, yg + q, k_begin, k_end, alpha, beta);
    for (; q < q1; ++q)  // less than a vector left: one output pixel at a time
        for (int64_t k = k_begin; k < k_end; ++k) {
            T acc = 0;
            for (int64_t c = 0; c < cg; ++c) acc += wg[k * cg + c] * xg[c * ldb + q];
            T* out = yg + k * pq + q;
            *out = beta == T(0) ? alpha * acc : alpha * acc + beta * *out;
        }
}

// The sum of a vector's lanes as a tree of halves (the upper half added to the lower), in
// registers: log2(L) adds, not a chain of L through memory.
template <typename T, int VB, typename V>
CONVCORE_GEMM_INLINE T lane_sum(V v) {
    if constexpr (VB == int(sizeof(T))) {
        return v[0];
    } else {
        typedef T H __attribute__((vector_size(VB / 2)));
        H lo, hi;
        __builtin_memcpy(&lo, &v, VB / 2);
        __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + VB / 2, VB / 2);
        return lane_sum<T, VB / 2>(lo + hi);
    }
}

// The dot path: output pixels [p0, p1), a pixel's C input channels read once for its KN filters
// (w K x C as given: KCRS with R = S = 1), each output one horizontal sum; the epilogue as the
// NHWC GEMM's stores apply it.
template <typename T, int VB, int KN>
CONVCORE_GEMM_INLINE void dot_pixels(const ConvProblem& p, const T* x, const T* w, T* y, int64_t p0, int64_t p1,
                                     const epilogue_store::Out<T>& e) {
    typedef T V __attribute__((vector_size(VB)));
    typedef T Out4 __attribute__((vector_size(4 * sizeof(T))));  // a pixel's outputs (KN <= 4)
    constexpr int L = VB / sizeof(T);
    const int64_t c = p.c;
    nhwc_gemm::PixelAt at(p, p0);  // pix's, stepped without divisions
    for (int64_t pix = p0; pix < p1; ++pix, at.next(p)) {
        const int64_t ih = conv_input_coord(at.oh, 0, p.pad_h, p.stride_h, 1);
        const int64_t iw = conv_input_coord(at.ow, 0, p.pad_w, p.stride_w, 1);
        // the input pixel, or none in the padding (every product 0)
        const T* xp = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w ? x + ((at.n * p.h + ih) * p.w + iw) * c : nullptr;
        Out4 out{};
        if (xp) {
            V acc[KN] = {};
            int64_t ch = 0;
            for (; ch + L <= c; ch += L) {
                V xv, wv;
                __builtin_memcpy(&xv, xp + ch, VB);
#pragma GCC unroll 4
                for (int k = 0; k < KN; ++k) __builtin_memcpy(&wv, w + k * c + ch, VB), acc[k] += xv * wv;
            }
#pragma GCC unroll 4
            for (int k = 0; k < KN; ++k) {
                T sum = lane_sum<T, VB>(acc[k]);
                for (int64_t r = ch; r < c; ++r) sum += xp[r] * w[k * c + r];
                out[k] = sum;
            }
        }
        epilogue_store::store<T, int(4 * sizeof(T)), Out4>(e, out, y, pix * KN, 0, KN);
    }
}

template <typename T>
struct Kernels {
    void (*nchw)(const ConvProblem&, const T*, int64_t, const T*, T*, int64_t, int64_t, int64_t, int64_t, T, T);
    void (*dot)(const ConvProblem&, const T*, const T*, T*, int64_t, int64_t, const epilogue_store::Out<T>&);
};

// VB: vector bytes; ACC: accumulator vectors kept in registers (of 32 or 16).
#define CONVCORE_PW_KERNELS(ISA, ATTR, VB, ACC)                                                              \
    template <typename T>                                                                                    \
    ATTR void nchw_##ISA(const ConvProblem& p, const T* xg, int64_t ldb, const T* wg, T* yg, int64_t q0,    \
                         int64_t q1, int64_t k0, int64_t k1, T alpha, T beta) {                              \
        nchw_pixels<T, VB, ACC>(p, xg, ldb, wg, yg, q0, q1, k0, k1, alpha, beta);                            \
    }                                                                                                        \
    template <typename T>                                                                                    \
    ATTR void dot_##ISA(const ConvProblem& p, const T* x, const T* w, T* y, int64_t p0, int64_t p1,         \
                        const epilogue_store::Out<T>& e) {                                                   \
        switch (p.k) {                                                                                       \
            case 1: return dot_pixels<T, VB, 1>(p, x, w, y, p0, p1, e);                                      \
            case 2: return dot_pixels<T, VB, 2>(p, x, w, y, p0, p1, e);                                      \
            case 3: return dot_pixels<T, VB, 3>(p, x, w, y, p0, p1, e);                                      \
            default: return dot_pixels<T, VB, kDotChannels>(p, x, w, y, p0, p1, e);                          \
        }                                                                                                    \
    }                                                                                                        \
    template <typename T>                                                                                    \
    constexpr Kernels<T> kernels_##ISA = {nchw_##ISA<T>, dot_##ISA<T>};
CONVCORE_EACH_ISA(CONVCORE_PW_KERNELS)

// An NCHW task: up to kPixelsPerTask output pixels by kChannelsPerTask output channels of one
// group (as nhwc_gemm's tasks).
using nhwc_gemm::kChannelsPerTask;
using nhwc_gemm::kPixelsPerTask;

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
    if (nhwc_dot(p)) {  // blocks of pixels, a task each
        const int64_t pixels = p.n * p.p * p.q, tasks = (pixels + kPixelsPerTask - 1) / kPixelsPerTask;
        const epilogue_store::Out<T> e = epilogue_store::out_of<T>(a);
#pragma omp parallel for num_threads(a.ctx.threads()) schedule(static)
        for (int64_t t = 0; t < tasks; ++t)
            kern.dot(p, x, w, y, t * kPixelsPerTask, std::min(pixels, (t + 1) * kPixelsPerTask), e);
        return;
    }
    if (p.nhwc) {
        const T* wt = static_cast<const T*>(a.prepared_filter);
        if (!wt) {
            nhwc_gemm::make_wt(p, w, reinterpret_cast<T*>(ws), a.ctx.threads());
            wt = reinterpret_cast<const T*>(ws);
        }
        T* zeros = reinterpret_cast<T*>(ws + round64(nhwc_gemm::wt_bytes(p)));
        std::fill(zeros, zeros + p.c, T(0));
        nhwc_gemm::run(p, x, wt, zeros, y, nhwc_gemm::stores_of(p, epilogue_store::out_of<T>(a), y), a.ctx.threads());
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
    const int64_t pixel_tasks = (pq + kPixelsPerTask - 1) / kPixelsPerTask;
    const int64_t channel_tasks = (kg + kChannelsPerTask - 1) / kChannelsPerTask;
#pragma omp parallel for collapse(3) num_threads(a.ctx.threads()) schedule(static)
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t g = 0; g < p.groups; ++g)
            for (int64_t t = 0; t < pixel_tasks * channel_tasks; ++t) {
                const int64_t tp = t / channel_tasks, tk = t % channel_tasks;
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
size_t prepared_filter_bytes(const ConvProblem& p) { return p.nhwc && !nhwc_dot(p) ? nhwc_gemm::wt_bytes(p) : 0; }

void prepare_filter(const ConvProblem& p, const Context&, const void* w, void* out) { nhwc_gemm::prepare_wt(p, w, out); }

}  // namespace

extern const Solver pointwise_solver;
const Solver pointwise_solver = {.algo = CONVCORE_FWD_ALGO_POINTWISE, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run, .runs_nhwc = runs_nhwc,
    .prepared_filter_bytes = prepared_filter_bytes, .prepare_filter = prepare_filter,
    .fuses_epilogue = fuses_epilogue, .made_for = made_for::yes};

}  // namespace cpu
}  // namespace convcore
