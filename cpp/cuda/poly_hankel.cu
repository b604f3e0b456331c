// POLY_HANKEL on CUDA: PolyHankel (Xu, Zhang, Cheng & Li, CGO'25, paper 000) on cuFFT, the same
// method as cpu/poly_hankel.cpp (see there and docs/algorithms.md):
//   1. A(t) per (image, channel): the Hu x Iw padded-input plane flattened with row stride
//      Iw = Wu (Eq. 10), zero up to L; U(t) per (filter, channel) from the reversed dilated filter,
//      u[i][j] -> t^(Iw*(Kh-1-i) + Kw-1-j) (Eq. 11 corrected; design.md's pitfall): element-wise
//      kernels over common/fft_geometry.hpp's poly_input_coeff / poly_filter_coeff;
//   2. one batched 1D R2C of length L per polynomial, written frequency-major;
//   3. per frequency and group the channel sum Y(n, k) = sum_c A_c U_kc (Section 3.2): one cuBLAS
//      strided-batched complex GEMM per group over the L/2+1 frequencies (no conjugation: U is
//      already reversed). cuBLAS rather than a custom kernel for the reason cuda/fft.cu gives;
//   4. one batched C2R per (image, filter); the outputs are the coefficients
//      d[i][j] = p[Iw*(i + Kh-1) + j + Kw-1] (Eq. 12) at the stride-1 positions
//      (i * stride_h, j * stride_w), scaled by alpha/L and blended.
// L is the smallest even 2^a 3^b 5^c 7^d >= Hu*Iw (good_size): a cyclic product of any length
// >= Hu*Iw is exact at the output coefficients (the wrapped terms land below the first output
// index), so no padding beyond the spatial padding is needed.
//
// Workspace (bytes; F = L/2+1, each section 256-byte aligned, T = float or double):
//   2*sizeof(T)*F*(N*C + K*C/g + N*K) + sizeof(T)*L*max(N*C, K*C/g, N*K)
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

struct Geometry {
    int64_t kh, kw;    // dilated filter extent
    int64_t hu, iw;    // padded-input rows and columns (the row stride) the outputs read
    int64_t len, f;    // cyclic length L; L/2+1
    int64_t nc, kc, nk;  // planes: (image, channel), (filter, channel), (image, filter)
    fftg::Sections ws;
    size_t x_off = 0, w_off = 0, y_off = 0, a_off = 0, work_off = 0, work_bytes = 0;
    bool fits = true;  // every size fits cuFFT / cuBLAS and the cap
};

FftPlanKey x_key(const Geometry& g, bool dbl) { return forward_to_freq_major(1, g.len, 0, g.nc, dbl); }
FftPlanKey w_key(const Geometry& g, bool dbl) { return forward_to_freq_major(1, g.len, 0, g.kc, dbl); }
FftPlanKey y_key(const Geometry& g, bool dbl) { return inverse_from_freq_major(1, g.len, 0, g.nk, dbl); }

// with_work: also ask cuFFT for the work areas (makes plans: only for supported problems).
Geometry geometry(const ConvProblem& p, bool with_work) {
    Geometry g;
    const size_t t = p.elem_size();
    g.kh = fftg::dilated_extent(p.r, p.dil_h);
    g.kw = fftg::dilated_extent(p.s, p.dil_w);
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.iw = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    g.nc = p.n * p.c;
    g.kc = p.k * p.c_per_group();
    g.nk = p.n * p.k;
    if (double(g.hu) * double(g.iw) > kCap) {  // before the sizes below leave int64
        g.ws.add(double(g.hu) * double(g.iw), t);
        g.fits = false;
        return g;
    }
    g.len = fft::good_size(g.hu * g.iw, true);
    g.f = g.len / 2 + 1;
    g.x_off = g.ws.add(double(g.f) * double(g.nc), 2 * t);
    g.w_off = g.ws.add(double(g.f) * double(g.kc), 2 * t);
    g.y_off = g.ws.add(double(g.f) * double(g.nk), 2 * t);
    g.a_off = g.ws.add(double(g.len) * double(std::max({g.nc, g.kc, g.nk})), t);
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
        return "POLY_HANKEL runs float32 and float64 only";
    const Geometry g = geometry(p, false);
    if (!g.fits) return fft::too_big("POLY_HANKEL", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry(p, true).ws.with_slack()); }

// The kernels: grid-stride loops over common/fft_geometry.hpp's element functions.
template <typename T>
struct InputPolys {
    const T* x;
    T* polys;
    fftg::ImageShape im;
    int64_t hu, iw, len;
    __device__ void operator()(int64_t e) const { polys[e] = fftg::poly_input_elem(x, im, hu, iw, len, e); }
};

template <typename T>
struct FilterPolys {
    const T* w;
    T* polys;
    fftg::FilterShape fs;
    int64_t iw, len;
    __device__ void operator()(int64_t e) const { polys[e] = fftg::poly_filter_elem(w, fs, iw, len, e); }
};

template <typename T>
struct ReadOutputs {
    const T* polys;
    T* y;
    int64_t p, q, stride_h, stride_w, iw, kh, kw, len;
    T alpha, beta;  // alpha already divided by L (cuFFT's inverse is unnormalised)
    __device__ void operator()(int64_t e) const {
        blend_store(y + e, polys[fftg::poly_output_source(e, p, q, stride_h, stride_w, iw, kh, kw, len)], alpha, beta);
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
    T* planes = reinterpret_cast<T*>(base + g.a_off);  // polynomials of length L
    void* work = g.work_bytes ? base + g.work_off : nullptr;
    FftPlanCache& plans = plan_cache(a.ctx);
    const cudaStream_t stream = stream_of(a.ctx);

    for_each(a.ctx, g.nc * g.len,
             InputPolys<T>{static_cast<const T*>(a.x), planes, image_shape(p), g.hu, g.iw, g.len},
             "POLY_HANKEL input polynomials");
    plans.exec(x_key(g, dbl), stream, work, g.work_bytes, planes, xs);
    for_each(a.ctx, g.kc * g.len,
             FilterPolys<T>{static_cast<const T*>(a.w), planes, filter_shape(p), g.iw, g.len},
             "POLY_HANKEL filter polynomials");
    plans.exec(w_key(g, dbl), stream, work, g.work_bytes, planes, wsp);
    spectral_gemm<T>(a.ctx, /*conj=*/false, g.f, p.n, p.c, p.k, p.groups, xs, wsp, ys);
    plans.exec(y_key(g, dbl), stream, work, g.work_bytes, ys, planes);
    const T alpha = T(a.alpha / double(g.len));
    for_each(a.ctx, p.y_elems(),
             ReadOutputs<T>{planes, static_cast<T*>(a.y), p.p, p.q, p.stride_h, p.stride_w, g.iw, g.kh, g.kw,
                            g.len, alpha, T(a.beta)},
             "POLY_HANKEL outputs");
}

void run(const ConvArgs& a) {
    if (a.prob.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "POLY_HANKEL (CUDA): null tensor or workspace pointer");
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

#else  // built without cuFFT or cuBLAS

std::string why_not(const ConvProblem&) {
    return "POLY_HANKEL on CUDA needs cuFFT and cuBLAS, which this build did not find";
}
size_t workspace_bytes(const ConvProblem&) { return 0; }
void run(const ConvArgs&) { throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "POLY_HANKEL on CUDA: built without cuFFT"); }

#endif

}  // namespace

extern const Solver poly_hankel_solver;
const Solver poly_hankel_solver = {.algo = CONVCORE_FWD_ALGO_POLY_HANKEL,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .made_for = made_for::large_filters};

}  // namespace cuda
}  // namespace convcore
