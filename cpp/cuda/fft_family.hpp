// Shared pieces of the CUDA FFT family (cuda/fft.cu, fft_tiling.cu, fine_grained_fft.cu,
// poly_hankel.cu):
//
//  * FftPlanCache: the handle's cuFFT plans (DeviceResources::fft_plans()), keyed by the
//    transform's whole layout (rank, sizes, strides, type, batch), made once with
//    cufftSetAutoAllocation(0) and destroyed with the handle. exec() binds the plan to the
//    call's stream (cufftSetStream) and to a work area carved from convcore's workspace
//    (cufftSetWorkArea) under the plan's own mutex, so threads sharing a handle may run the
//    same plan: the set-stream / set-work-area / launch sequence is atomic per plan; the
//    transform itself runs asynchronously on the stream.
//  * fft_work_bytes: the exact work-area size of a plan (cuFFT's cufftMakePlanMany64 answer,
//    memoized per device and key), for workspace_bytes(), which has no handle.
//  * spectral_gemm: the frequency-domain channel reduction as one cuBLAS strided-batched complex
//    GEMM per group, batched over the frequencies; grouped problems with fewer than 8 channels
//    per group (depthwise and the like) use one custom kernel instead (fftg::grouped_product).
#pragma once
#if defined(CONVCORE_HAVE_CUFFT) && defined(CONVCORE_HAVE_CUBLAS)
#define CONVCORE_CUDA_FFT_FAMILY 1
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/fft_geometry.hpp"
#include "core/context.hpp"
#include "core/problem.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

// One batched real<->complex transform in cuFFT's advanced layout. Rank 1 uses n[0] only.
// Forward (R2C / D2Z): real input, half-spectrum output; inverse (C2R / Z2D): the reverse,
// unnormalised, overwriting its input.
struct FftPlanKey {
    int rank = 1;
    long long n[2] = {1, 1};
    long long istride = 1, idist = 1, ostride = 1, odist = 1;
    long long batch = 1;
    cufftType type = CUFFT_R2C;

    bool forward() const { return type == CUFFT_R2C || type == CUFFT_D2Z; }
    // Complex numbers per transform of the half spectrum: n[0] x (n[1]/2+1) (rank 2),
    // n[0]/2+1 (rank 1).
    long long spectrum() const { return rank == 2 ? n[0] * (n[1] / 2 + 1) : n[0] / 2 + 1; }
    bool operator<(const FftPlanKey& o) const {
        return std::tie(rank, n[0], n[1], istride, idist, ostride, odist, batch, type) <
               std::tie(o.rank, o.n[0], o.n[1], o.istride, o.idist, o.ostride, o.odist, o.batch, o.type);
    }
};

// `batch` transforms of real planes stored one after another (dense n[0] x n[1] or n[0]) into
// spectra interleaved frequency-major: frequency f of transform b at f * batch + b (the layout
// spectral_gemm reads). `dbl`: double precision.
FftPlanKey forward_to_freq_major(int rank, long long n0, long long n1, long long batch, bool dbl);
// The inverse of that: frequency-major spectra -> dense real planes.
FftPlanKey inverse_from_freq_major(int rank, long long n0, long long n1, long long batch, bool dbl);
// `batch` dense real rows (planes) -> dense spectra, one after another (spectrum() apart).
FftPlanKey forward_dense(int rank, long long n0, long long n1, long long batch, bool dbl);
FftPlanKey inverse_dense(int rank, long long n0, long long n1, long long batch, bool dbl);

class FftPlanCache {
   public:
    explicit FftPlanCache(int device) : device_(device) {}
    ~FftPlanCache();
    FftPlanCache(const FftPlanCache&) = delete;
    FftPlanCache& operator=(const FftPlanCache&) = delete;

    // Runs the transform of `key` from `in` to `out` (out of place) on `stream`, with `work`
    // (at least fft_work_bytes(key) bytes, 256-byte aligned) as cuFFT's work area.
    void exec(const FftPlanKey& key, cudaStream_t stream, void* work, size_t work_bytes, void* in,
              void* out);

   private:
    struct Entry {
        cufftHandle plan = 0;
        size_t work = 0;
        std::mutex mutex;  // one user of the plan at a time (stream and work area are per plan)
    };
    Entry& entry(const FftPlanKey& key);

    int device_;
    std::mutex mutex_;
    std::map<FftPlanKey, std::unique_ptr<Entry>> plans_;
};

// Work-area bytes of the plan of `key` on the calling thread's current device.
size_t fft_work_bytes(const FftPlanKey& key);

// The handle's plan cache.
FftPlanCache& plan_cache(const Context& ctx);

// Y = op(W) X per frequency and group, batched over `freqs` frequencies, with the frequency-
// major layouts the transforms above produce (element counts per frequency: X cols*c, W k*cg,
// Y cols*k):
//   Y[f][col][g*kg + kk] = sum_{cc < cg} X[f][col][g*cg + cc] * op(W[f][g*kg + kk][cc]),
// op = conj (cross-correlation) or identity. T = float (cuComplex) or double (cuDoubleComplex).
// Every size must fit in int (the solvers' why_not checks gemm_fits).
template <typename T>
void spectral_gemm(const Context& ctx, bool conj, long long freqs, long long cols, long long c,
                   long long k, long long groups, const void* x, const void* w, void* y);
bool gemm_fits(long long freqs, long long cols, long long c, long long k);

// The problem's input plane and filter, for common/fft_geometry.hpp's element functions.
inline fftg::ImageShape image_shape(const ConvProblem& p) { return {p.h, p.w, p.pad_h, p.pad_w}; }
inline fftg::FilterShape filter_shape(const ConvProblem& p) { return {p.r, p.s, p.dil_h, p.dil_w, p.flip}; }

// The complex type of T's precision.
template <typename T>
struct complex_of;
template <>
struct complex_of<float> {
    using type = cufftComplex;
};
template <>
struct complex_of<double> {
    using type = cufftDoubleComplex;
};

#if defined(__CUDACC__) || defined(CONVCORE_CUDA_EMULATOR)
// Element-wise kernels: f(e) for every e < total, a grid-stride loop (64-bit indices). F is a
// functor with a __device__ operator()(int64_t).
template <typename F>
__global__ void for_each_kernel(int64_t total, F f) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) f(e);
}
template <typename F>
void for_each(const Context& ctx, int64_t total, const F& f, const char* name) {
    if (total <= 0) return;
    constexpr int threads = 256;
    CONVCORE_LAUNCH(grid_blocks(ctx, total, threads), threads, 0, stream_of(ctx), for_each_kernel)(total, f);
    CONVCORE_CUDA_CHECK_LAUNCH(name);
}
#endif

}  // namespace cuda
}  // namespace convcore
#endif
