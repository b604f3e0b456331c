// FFT_TILING on CUDA: 2D FFT convolution on overlap-save tiles (cuDNN's
// CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING), the method of cpu/fft_tiling.cpp on cuFFT:
// the padded input is cut into Th x Tw tiles that overlap by the dilated filter extent minus one
// (common/fft_geometry.hpp: tile_grid, tile_row0/col0); per chunk of (image, tile) jobs
//   1. every (job, channel) tile is copied out of the padded input (a gather kernel) and
//      transformed (batched 2D R2C, frequency-major);
//   2. per frequency and group Y(job, k) = sum_c X(job, c) conj(W(k, c)): one cuBLAS
//      strided-batched complex GEMM per group over the Th*(Tw/2+1) frequencies (cuBLAS rather than
//      a custom kernel for the reason cuda/fft.cu gives), with W the spectra of the filters placed
//      in a Th x Tw plane, computed once per call;
//   3. one batched C2R per (job, filter); each tile's (Th-Rd+1) x (Tw-Sd+1) stride-1 outputs
//      that fall on the stride grid are scaled by alpha/(Th*Tw), blended and written (the tiles
//      partition the stride-1 outputs: every output is written once).
// The tile size is fixed per axis (fftg::gpu_tile_size): 32, or the smallest power of two >= 2x the
// dilated filter extent, or the whole extent when that is smaller; not the CPU's cost model (that
// one models FFTW and the CPU's filter DFT). Stride > 1 is computed at stride 1 and subsampled,
// refused past 64x the outputs as on the CPU; dilation places the taps dil apart; true
// convolution mirrors the filter; float32 and float64.
//
// Workspace (bytes; F = Th*(Tw/2+1), J jobs per chunk (input and output spectra and planes of a
// chunk about 256 MiB, at least 1 job; the last chunk is padded with empty jobs), each section
// 256-byte aligned, T = float or double):
//   2*sizeof(T)*F*(K*C/g + J*C + J*K) + sizeof(T)*Th*Tw*max(J*C, J*K, K*C/g)
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

struct Geometry {
    int64_t rd, sd;    // dilated filter extent
    int64_t ah, aw;    // stride-1 outputs needed
    fftg::TileGrid tg;
    int64_t f;         // complex numbers per tile spectrum
    int64_t jobs, jb;  // (image, tile) jobs; jobs per chunk
    int64_t kc;        // (filter, channel) planes
    fftg::Sections ws;
    size_t w_off = 0, x_off = 0, y_off = 0, a_off = 0, work_off = 0, work_bytes = 0;
    bool fits = true;
};

FftPlanKey x_key(const Geometry& g, int64_t c, bool dbl) {
    return forward_to_freq_major(2, g.tg.th, g.tg.tw, g.jb * c, dbl);
}
FftPlanKey w_key(const Geometry& g, bool dbl) { return forward_to_freq_major(2, g.tg.th, g.tg.tw, g.kc, dbl); }
FftPlanKey y_key(const Geometry& g, int64_t k, bool dbl) {
    return inverse_from_freq_major(2, g.tg.th, g.tg.tw, g.jb * k, dbl);
}

Geometry geometry(const ConvProblem& p, bool with_work) {
    Geometry g;
    const size_t t = p.elem_size();
    g.rd = fftg::dilated_extent(p.r, p.dil_h);
    g.sd = fftg::dilated_extent(p.s, p.dil_w);
    g.ah = fftg::stride1_outputs(p.p, p.stride_h);
    g.aw = fftg::stride1_outputs(p.q, p.stride_w);
    g.kc = p.k * p.c_per_group();
    // A tile past any cap (a huge filter span): say so before the sizes below leave int64.
    if (double(g.rd) * double(g.sd) > kCap) {
        g.ws.add(double(g.rd) * double(g.sd), t);
        g.fits = false;
        return g;
    }
    const int64_t th = fftg::gpu_tile_size(g.rd, fft::good_size(g.ah + g.rd - 1));
    const int64_t tw = fftg::gpu_tile_size(g.sd, fft::good_size(g.aw + g.sd - 1, true));
    g.tg = fftg::tile_grid(th, tw, g.rd, g.sd, g.ah, g.aw);
    g.f = th * (tw / 2 + 1);
    g.jobs = p.n * g.tg.nth * g.tg.ntw;
    const double area = double(th) * double(tw);
    const double per_job = 2.0 * t * double(g.f) * double(p.c + p.k) + t * area * double(std::max(p.c, p.k));
    g.jb = std::max<int64_t>(1, std::min<int64_t>(g.jobs, int64_t(kChunkBytes / per_job)));
    g.w_off = g.ws.add(double(g.f) * double(g.kc), 2 * t);
    g.x_off = g.ws.add(double(g.f) * double(g.jb) * double(p.c), 2 * t);
    g.y_off = g.ws.add(double(g.f) * double(g.jb) * double(p.k), 2 * t);
    g.a_off = g.ws.add(area * double(std::max({g.jb * p.c, g.jb * p.k, g.kc})), t);
    g.fits = !g.ws.overflow && g.ws.total() <= kCap && gemm_fits(g.f, g.jb, p.c, p.k);
    if (!g.fits || !with_work || p.n == 0) return g;
    const bool dbl = p.dtype == CONVCORE_DATA_DOUBLE;
    g.work_bytes = std::max({fft_work_bytes(x_key(g, p.c, dbl)), fft_work_bytes(w_key(g, dbl)),
                             fft_work_bytes(y_key(g, p.k, dbl))});
    g.work_off = g.ws.add(double(g.work_bytes), 1);
    return g;
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT_TILING runs float32 and float64 only";
    // It computes every stride-1 output of the region the outputs span (as on the CPU).
    const double stride1 = (double(p.p - 1) * double(p.stride_h) + 1.0) * (double(p.q - 1) * double(p.stride_w) + 1.0);
    if (stride1 > 64.0 * double(p.p) * double(p.q))
        return "FFT_TILING computes every stride-1 output: with stride " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w) + " that is " +
               std::to_string(int64_t(stride1 / (double(p.p) * double(p.q)))) +
               " times the outputs (the limit is 64)";
    const Geometry g = geometry(p, false);
    if (!g.fits) return fft::too_big("FFT_TILING", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry(p, true).ws.with_slack()); }

// The kernels: grid-stride loops over common/fft_geometry.hpp's element functions.
template <typename T>
struct TileInputs {
    const T* x;
    T* planes;
    fftg::ImageShape im;
    int64_t c;
    fftg::TileChunk ch;
    __device__ void operator()(int64_t e) const { planes[e] = fftg::tile_input_elem(x, im, c, ch, e); }
};

template <typename T>
struct FilterPlanes {
    const T* w;
    T* planes;
    fftg::FilterShape fs;
    int64_t th, tw;
    __device__ void operator()(int64_t e) const { planes[e] = fftg::filter_plane_elem(w, fs, th, tw, e); }
};

template <typename T>
struct TileOutputs {
    const T* planes;
    T* y;
    fftg::TileChunk ch;
    int64_t k, p, q, stride_h, stride_w;
    T alpha, beta;  // alpha already divided by Th*Tw
    __device__ void operator()(int64_t e) const {
        int64_t src = 0;
        const int64_t dst = fftg::tile_output_target(e, ch, k, p, q, stride_h, stride_w, &src);
        if (dst >= 0) blend_store(y + dst, planes[src], alpha, beta);
    }
};

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Geometry g = geometry(p, true);
    const bool dbl = sizeof(T) == 8;
    char* base = fftg::aligned_base(a.workspace);  // 256-byte aligned (with_slack)
    void* wsp = base + g.w_off;
    void* xs = base + g.x_off;
    void* ys = base + g.y_off;
    T* planes = reinterpret_cast<T*>(base + g.a_off);
    void* work = g.work_bytes ? base + g.work_off : nullptr;
    FftPlanCache& plans = plan_cache(a.ctx);
    const cudaStream_t stream = stream_of(a.ctx);
    const int64_t th = g.tg.th, tw = g.tg.tw;

    // the filter spectra at the tile size, once
    for_each(a.ctx, g.kc * th * tw,
             FilterPlanes<T>{static_cast<const T*>(a.w), planes, filter_shape(p), th, tw},
             "FFT_TILING filter planes");
    plans.exec(w_key(g, dbl), stream, work, g.work_bytes, planes, wsp);
    const T alpha = T(a.alpha / (double(th) * double(tw)));
    for (int64_t j0 = 0; j0 < g.jobs; j0 += g.jb) {
        for_each(a.ctx, g.jb * p.c * th * tw,
                 TileInputs<T>{static_cast<const T*>(a.x), planes, image_shape(p), p.c, {g.tg, j0, g.jobs}},
                 "FFT_TILING input tiles");
        plans.exec(x_key(g, p.c, dbl), stream, work, g.work_bytes, planes, xs);
        spectral_gemm<T>(a.ctx, /*conj=*/true, g.f, g.jb, p.c, p.k, p.groups, xs, wsp, ys);
        plans.exec(y_key(g, p.k, dbl), stream, work, g.work_bytes, ys, planes);
        for_each(a.ctx, g.jb * p.k * g.tg.oh * g.tg.ow,
                 TileOutputs<T>{planes, static_cast<T*>(a.y), {g.tg, j0, g.jobs}, p.k, p.p, p.q, p.stride_h, p.stride_w,
                                alpha, T(a.beta)},
                 "FFT_TILING outputs");
    }
}

void run(const ConvArgs& a) {
    if (a.prob.y_elems() == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr || a.workspace == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FFT_TILING (CUDA): null tensor or workspace pointer");
    DeviceGuard guard(a.ctx.device_index);
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

#else  // built without cuFFT or cuBLAS

std::string why_not(const ConvProblem&) {
    return "FFT_TILING on CUDA needs cuFFT and cuBLAS, which this build did not find";
}
size_t workspace_bytes(const ConvProblem&) { return 0; }
void run(const ConvArgs&) { throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FFT_TILING on CUDA: built without cuFFT"); }

#endif

}  // namespace

extern const Solver fft_tiling_solver;
const Solver fft_tiling_solver = {.algo = CONVCORE_FWD_ALGO_FFT_TILING, .device = CONVCORE_DEVICE_CUDA,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .made_for = made_for::large_filters};

}  // namespace cuda
}  // namespace convcore
