// FINE_GRAINED_FFT on CUDA: the fine-grained FFT convolution of Zhang, Li, Xu, Li & Jiang
// (Electronics 2024, paper 003), the method of cpu/fine_grained_fft.cpp on cuFFT:
//   1. input transform: one 1D R2C of length L per padded input row (Step 1), batched;
//   2. kernel transform: one 1D R2C of length L per filter row (Step 2; taps dil apart, rows and
//      taps mirrored for true convolution: common/fft_geometry.hpp's fg_filter_row);
//   3. per output row p of filter k (Step 3, Section 5.3):
//        Y(p, k) = sum_c sum_r X(c, p*stride_h + r*dil_h) * conj(W(k, c, r))
//      over the L/2+1 frequencies, in a custom kernel: one thread per (frequency, image, output
//      row, 4 filters), loads coalesced along the frequencies. Not a GEMM: the input row a
//      product reads depends on (p, r) (the Hankel structure of Section 4.5), so a GEMM would
//      need the rows duplicated R/stride_h times first;
//   4. one 1D C2R per output row (Step 4); its entries q * stride_w are the outputs, scaled by
//      alpha/L and blended.
// L is the smallest even 2^a 3^b 5^c 7^d >= Wu (as on the CPU, not the paper's
// NextPowerTwo(2Q): conj(W) makes the cyclic product a cross-correlation whose first Q entries
// no wrap reaches). Row stride and dilation are exact; column stride is computed at stride 1 and
// subsampled; float32 and float64.
//
// Workspace (bytes; F = L/2+1, NB images per chunk (a chunk's row spectra and rows about 256 MiB,
// at least 1; the last chunk is padded with empty images), each section 256-byte aligned,
// T = float or double, R = filter rows):
//   2*sizeof(T)*F*(K*C/g*R + NB*C*Hu + NB*K*P) + sizeof(T)*L*max(NB*C*Hu, NB*K*P, K*C/g*R)
//   + the largest cuFFT work area of the three plans + 256 (to align the caller's base)
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/fft_family.hpp"

#if defined(CONVCORE_CUDA_FFT_FAMILY)
#include <algorithm>

#include "common/blend.hpp"
#include "common/fft_geometry.hpp"
#include "core/fft_sizes.hpp"
#endif

namespace convcore {
namespace cuda {

namespace {

#if defined(CONVCORE_CUDA_FFT_FAMILY)

constexpr double kCap = double(fft::kWorkspaceCap);
constexpr double kChunkBytes = 256.0 * (1 << 20);
constexpr int kFilters = 4;  // filters per thread of the product kernel

struct Geometry {
    int64_t hu, wu;    // padded-input rows / columns the outputs read
    int64_t len, f;    // row FFT length L; L/2+1
    int64_t nb;        // images per chunk
    int64_t wrows;     // filter rows: K*C/g*R
    fftg::Sections ws;
    size_t w_off = 0, x_off = 0, y_off = 0, a_off = 0, work_off = 0, work_bytes = 0;
    bool fits = true;
};

FftPlanKey x_key(const Geometry& g, const ConvProblem& p, bool dbl) {
    return forward_dense(1, g.len, 0, g.nb * p.c * g.hu, dbl);
}
FftPlanKey w_key(const Geometry& g, bool dbl) { return forward_dense(1, g.len, 0, g.wrows, dbl); }
FftPlanKey y_key(const Geometry& g, const ConvProblem& p, bool dbl) {
    return inverse_dense(1, g.len, 0, g.nb * p.k * p.p, dbl);
}

Geometry geometry(const ConvProblem& p, bool with_work) {
    Geometry g;
    const size_t t = p.elem_size();
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.wu = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    g.wrows = p.k * p.c_per_group() * p.r;
    if (double(g.wu) > kCap) {  // before the sizes below leave int64
        g.ws.add(double(g.wu), t);
        g.fits = false;
        return g;
    }
    g.len = fft::good_size(g.wu, true);
    g.f = g.len / 2 + 1;
    const double in_rows = double(p.c) * double(g.hu), out_rows = double(p.k) * double(p.p);
    const double per_image = 2.0 * t * double(g.f) * (in_rows + out_rows) + t * double(g.len) * std::max(in_rows, out_rows);
    g.nb = std::max<int64_t>(1, std::min<int64_t>(p.n, int64_t(kChunkBytes / per_image)));
    g.w_off = g.ws.add(double(g.f) * double(g.wrows), 2 * t);
    g.x_off = g.ws.add(double(g.f) * double(g.nb) * in_rows, 2 * t);
    g.y_off = g.ws.add(double(g.f) * double(g.nb) * out_rows, 2 * t);
    g.a_off = g.ws.add(double(g.len) * std::max({double(g.nb) * in_rows, double(g.nb) * out_rows, double(g.wrows)}), t);
    g.fits = !g.ws.overflow && g.ws.total() <= kCap;
    if (!g.fits || !with_work || p.n == 0) return g;
    const bool dbl = p.dtype == CONVCORE_DATA_DOUBLE;
    g.work_bytes = std::max({fft_work_bytes(x_key(g, p, dbl)), fft_work_bytes(w_key(g, dbl)),
                             fft_work_bytes(y_key(g, p, dbl))});
    g.work_off = g.ws.add(double(g.work_bytes), 1);
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FINE_GRAINED_FFT runs float32 and float64 only";
    const Geometry g = geometry(p, false);
    if (!g.fits) return fft::too_big("FINE_GRAINED_FFT", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry(p, true).ws.with_slack()); }

// The kernels: grid-stride loops over common/fft_geometry.hpp's element functions.
template <typename T>
struct InputRows {
    const T* x;
    T* rows;
    fftg::ImageShape im;
    int64_t c, hu, wu, len, n0, n;
    __device__ void operator()(int64_t e) const { rows[e] = fftg::fg_input_elem(x, im, c, hu, wu, len, n0, n, e); }
};

template <typename T>
struct FilterRows {
    const T* w;
    T* rows;
    fftg::FilterShape fs;
    int64_t len;
    __device__ void operator()(int64_t e) const { rows[e] = fftg::fg_filter_elem(w, fs, len, e); }
};

template <typename C>
struct RowProduct {
    const C* x;
    const C* w;
    C* y;
    fftg::FgProduct sh;
    __device__ void operator()(int64_t e) const { fftg::fg_row_product<kFilters>(x, w, y, sh, e); }
};

template <typename T>
struct RowOutputs {
    const T* rows;
    T* y;
    int64_t k, p, q, stride_w, len, n0, n;
    T alpha, beta;  // alpha already divided by L
    __device__ void operator()(int64_t e) const {
        int64_t src = 0;
        const int64_t dst = fftg::fg_output_target(e, k, p, q, stride_w, len, n0, n, &src);
        if (dst >= 0) blend_store(y + dst, rows[src], alpha, beta);
    }
};

template <typename T>
void run_typed(const ConvArgs& a) {
    using C = typename complex_of<T>::type;
    const ConvProblem& p = a.prob;
    const Geometry g = geometry(p, true);
    const bool dbl = sizeof(T) == 8;
    char* base = fftg::aligned_base(a.workspace);  // 256-byte aligned (with_slack)
    C* wsp = reinterpret_cast<C*>(base + g.w_off);
    C* xs = reinterpret_cast<C*>(base + g.x_off);
    C* ys = reinterpret_cast<C*>(base + g.y_off);
    T* rows = reinterpret_cast<T*>(base + g.a_off);
    void* work = g.work_bytes ? base + g.work_off : nullptr;
    FftPlanCache& plans = plan_cache(a.ctx);
    const cudaStream_t stream = stream_of(a.ctx);
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t kblocks = (kg + kFilters - 1) / kFilters;

    for_each(a.ctx, g.wrows * g.len,
             FilterRows<T>{static_cast<const T*>(a.w), rows, filter_shape(p), g.len},
             "FINE_GRAINED_FFT filter rows");
    plans.exec(w_key(g, dbl), stream, work, g.work_bytes, rows, wsp);
    const T alpha = T(a.alpha / double(g.len));
    for (int64_t n0 = 0; n0 < p.n; n0 += g.nb) {
        for_each(a.ctx, g.nb * p.c * g.hu * g.len,
                 InputRows<T>{static_cast<const T*>(a.x), rows, image_shape(p), p.c, g.hu, g.wu, g.len, n0, p.n},
                 "FINE_GRAINED_FFT input rows");
        plans.exec(x_key(g, p, dbl), stream, work, g.work_bytes, rows, xs);
        for_each(a.ctx, g.nb * p.groups * kblocks * p.p * g.f,
                 RowProduct<C>{xs, wsp, ys, {g.f, p.c, p.k, cg, kg, p.r, p.p, g.hu, p.stride_h, p.dil_h, kblocks}},
                 "FINE_GRAINED_FFT row products");
        plans.exec(y_key(g, p, dbl), stream, work, g.work_bytes, ys, rows);
        for_each(a.ctx, g.nb * p.k * p.p * p.q,
                 RowOutputs<T>{rows, static_cast<T*>(a.y), p.k, p.p, p.q, p.stride_w, g.len, n0, p.n, alpha,
                               T(a.beta)},
                 "FINE_GRAINED_FFT outputs");
    }
}

void run(const ConvArgs& a) {
    if (a.prob.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FINE_GRAINED_FFT (CUDA): null tensor or workspace pointer");
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

#else  // built without cuFFT or cuBLAS

std::string why_not(const ConvProblem&) {
    return "FINE_GRAINED_FFT on CUDA needs cuFFT and cuBLAS, which this build did not find";
}
size_t workspace_bytes(const ConvProblem&) { return 0; }
void run(const ConvArgs&) { throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FINE_GRAINED_FFT on CUDA: built without cuFFT"); }

#endif

}  // namespace

extern const Solver fine_grained_fft_solver;
const Solver fine_grained_fft_solver = {.algo = CONVCORE_FWD_ALGO_FINE_GRAINED_FFT,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .made_for = made_for::large_filters};

}  // namespace cuda
}  // namespace convcore
