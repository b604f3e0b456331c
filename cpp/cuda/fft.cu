// FFT on CUDA: whole-image 2D FFTs on cuFFT (the convolution theorem; cuDNN's
// CUDNN_CONVOLUTION_FWD_ALGO_FFT), the same method as cpu/fft.cpp (see there and
// docs/algorithms.md):
//   1. the Hu x Wu padded-input plane of every (image, channel) in a zero Lh x Lw plane, and every
//      (filter, channel)'s taps placed dil apart in another (mirrored for true convolution):
//      element-wise kernels over common/fft_geometry.hpp's padded_input / filter_plane;
//   2. batched R2C transforms written frequency-major (frequency f of plane b at f * B + b);
//   3. per frequency and group Y(n, k) = sum_c X(n, c) conj(W(k, c)): one cuBLAS strided-batched
//      complex GEMM (Kg x N x Cg) per group, batched over the Lh*(Lw/2+1) frequencies.
//      cuBLAS rather than a custom kernel: with the channels as the reduction, each frequency is
//      a small dense GEMM that cuBLAS's batched kernels run near the memory bound, which a
//      hand-written product (one complex multiply-add per 16 bytes read) would reach at best.
//      Grouped problems with C/g < 8 (depthwise ...), where the per-group GEMMs degenerate, use
//      one custom kernel for all groups instead (fftg::grouped_product);
//   4. one batched C2R per (image, filter), then a kernel reads output (i, j) at
//      (i * stride_h, j * stride_w) of its plane, scales by alpha/(Lh*Lw) and blends.
// Stride > 1 is computed at stride 1 and subsampled; any padding, dilation, groups, both modes,
// float32 and float64. Lh = good_size(Hu), Lw = good_size(Wu, even) (cpu/fft_family.hpp:
// 2^a 3^b 5^c 7^d sizes, all fast on cuFFT).
//
// Workspace (bytes; F = Lh*(Lw/2+1), each section 256-byte aligned, T = float or double):
//   2*sizeof(T)*F*(N*C + K*C/g + N*K)          spectra X, W, Y
//   + sizeof(T)*Lh*Lw*max(N*C, K*C/g, N*K)      real planes (input, filter and output in turn)
//   + the largest cuFFT work area of the three plans (cufftMakePlanMany64's exact size)
//   + 256 (to align the caller's base)
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

struct Geometry {
    int64_t hu, wu, lh, lw, f;
    int64_t nc, kc, nk;  // planes: (image, channel), (filter, channel), (image, filter)
    fftg::Sections ws;
    size_t x_off = 0, w_off = 0, y_off = 0, a_off = 0, work_off = 0, work_bytes = 0;
    bool fits = true;  // every size fits cuFFT / cuBLAS and the cap
};

FftPlanKey x_key(const Geometry& g, bool dbl) { return forward_to_freq_major(2, g.lh, g.lw, g.nc, dbl); }
FftPlanKey w_key(const Geometry& g, bool dbl) { return forward_to_freq_major(2, g.lh, g.lw, g.kc, dbl); }
FftPlanKey y_key(const Geometry& g, bool dbl) { return inverse_from_freq_major(2, g.lh, g.lw, g.nk, dbl); }

// with_work: also ask cuFFT for the work areas (makes plans: only for supported problems).
Geometry geometry(const ConvProblem& p, bool with_work) {
    Geometry g;
    const size_t t = p.elem_size();
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.wu = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    g.nc = p.n * p.c;
    g.kc = p.k * p.c_per_group();
    g.nk = p.n * p.k;
    if (double(g.hu) * double(g.wu) > kCap) {  // before the sizes below leave int64
        g.ws.add(double(g.hu) * double(g.wu), t);
        g.fits = false;
        return g;
    }
    g.lh = fft::good_size(g.hu);
    g.lw = fft::good_size(g.wu, true);
    g.f = g.lh * (g.lw / 2 + 1);
    g.x_off = g.ws.add(double(g.f) * double(g.nc), 2 * t);
    g.w_off = g.ws.add(double(g.f) * double(g.kc), 2 * t);
    g.y_off = g.ws.add(double(g.f) * double(g.nk), 2 * t);
    g.a_off = g.ws.add(double(g.lh) * double(g.lw) * double(std::max({g.nc, g.kc, g.nk})), t);
    g.fits = !g.ws.overflow && g.ws.total() <= kCap && gemm_fits(g.f, p.n, p.c, p.k);
    if (!g.fits || !with_work || p.n == 0) return g;
    const bool dbl = p.dtype == CONVCORE_DATA_DOUBLE;
    g.work_bytes = std::max({fft_work_bytes(x_key(g, dbl)), fft_work_bytes(w_key(g, dbl)),
                             fft_work_bytes(y_key(g, dbl))});
    g.work_off = g.ws.add(double(g.work_bytes), 1);
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT runs float32 and float64 only";
    const Geometry g = geometry(p, false);
    if (!g.fits) return fft::too_big("FFT", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry(p, true).ws.with_slack()); }

// The kernels: grid-stride loops over common/fft_geometry.hpp's element functions.
template <typename T>
struct InputPlanes {
    const T* x;
    T* planes;
    fftg::ImageShape im;
    int64_t hu, wu, lh, lw;
    __device__ void operator()(int64_t e) const { planes[e] = fftg::fft_input_elem(x, im, hu, wu, lh, lw, e); }
};

template <typename T>
struct FilterPlanes {
    const T* w;
    T* planes;
    fftg::FilterShape fs;
    int64_t lh, lw;
    __device__ void operator()(int64_t e) const { planes[e] = fftg::filter_plane_elem(w, fs, lh, lw, e); }
};

template <typename T>
struct CropOutputs {
    const T* planes;
    T* y;
    int64_t p, q, stride_h, stride_w, lh, lw;
    T alpha, beta;  // alpha already divided by Lh*Lw (cuFFT's inverse is unnormalised)
    __device__ void operator()(int64_t e) const {
        blend_store(y + e, planes[fftg::fft_output_source(e, p, q, stride_h, stride_w, lh, lw)], alpha, beta);
    }
};

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Geometry g = geometry(p, true);
    const bool dbl = sizeof(T) == 8;
    char* base = fftg::aligned_base(a.workspace);  // 256-byte aligned (with_slack)
    void* xs = base + g.x_off;
    void* wsp = base + g.w_off;
    void* ys = base + g.y_off;
    T* planes = reinterpret_cast<T*>(base + g.a_off);
    void* work = g.work_bytes ? base + g.work_off : nullptr;
    FftPlanCache& plans = plan_cache(a.ctx);
    const cudaStream_t stream = stream_of(a.ctx);

    for_each(a.ctx, g.nc * g.lh * g.lw,
             InputPlanes<T>{static_cast<const T*>(a.x), planes, image_shape(p), g.hu, g.wu, g.lh, g.lw},
             "FFT input planes");
    plans.exec(x_key(g, dbl), stream, work, g.work_bytes, planes, xs);
    for_each(a.ctx, g.kc * g.lh * g.lw,
             FilterPlanes<T>{static_cast<const T*>(a.w), planes, filter_shape(p), g.lh, g.lw},
             "FFT filter planes");
    plans.exec(w_key(g, dbl), stream, work, g.work_bytes, planes, wsp);
    spectral_gemm<T>(a.ctx, /*conj=*/true, g.f, p.n, p.c, p.k, p.groups, xs, wsp, ys);
    plans.exec(y_key(g, dbl), stream, work, g.work_bytes, ys, planes);
    const T alpha = T(a.alpha / (double(g.lh) * double(g.lw)));
    for_each(a.ctx, p.y_elems(),
             CropOutputs<T>{planes, static_cast<T*>(a.y), p.p, p.q, p.stride_h, p.stride_w, g.lh, g.lw, alpha,
                            T(a.beta)},
             "FFT outputs");
}

void run(const ConvArgs& a) {
    if (a.prob.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FFT (CUDA): null tensor or workspace pointer");
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

#else  // built without cuFFT or cuBLAS

std::string why_not(const ConvProblem&) {
    return "FFT on CUDA needs cuFFT and cuBLAS, which this build did not find";
}
size_t workspace_bytes(const ConvProblem&) { return 0; }
void run(const ConvArgs&) { throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FFT on CUDA: built without cuFFT"); }

#endif

}  // namespace

extern const Solver fft_solver;
const Solver fft_solver = {.algo = CONVCORE_FWD_ALGO_FFT, .device = CONVCORE_DEVICE_CUDA,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .made_for = made_for::large_filters};

}  // namespace cuda
}  // namespace convcore
