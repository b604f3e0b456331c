// Shared pieces of the CUDA FFT family: the per-handle cuFFT plan cache, exact work-area sizes,
// and the frequency-domain channel reduction on cuBLAS. See cuda/fft_family.hpp.
#include "cuda/fft_family.hpp"

#if defined(CONVCORE_CUDA_FFT_FAMILY)
#include <climits>
#include <string>

#include "core/error.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

cufftType inverse_type(bool dbl) { return dbl ? CUFFT_Z2D : CUFFT_C2R; }
cufftType forward_type(bool dbl) { return dbl ? CUFFT_D2Z : CUFFT_R2C; }

FftPlanKey base_key(int rank, long long n0, long long n1, long long batch, cufftType type) {
    FftPlanKey k;
    k.rank = rank;
    k.n[0] = n0;
    k.n[1] = rank == 2 ? n1 : 1;
    k.batch = batch;
    k.type = type;
    return k;
}

long long real_points(const FftPlanKey& k) { return k.rank == 2 ? k.n[0] * k.n[1] : k.n[0]; }

// A plan made with cuFFT's work-area allocation off; its work size through `work`. Destroys the
// handle and throws on failure.
cufftHandle make_plan(const FftPlanKey& k, size_t* work) {
    cufftHandle h = 0;
    CONVCORE_CUFFT_CHECK(cufftCreate(&h));
    // Embeddings: the dense real plane and the dense half spectrum of one transform; strides
    // and distances place the transforms (cuFFT's advanced layout).
    long long real_embed[2] = {k.n[0], k.n[1]};
    long long cplx_embed[2] = {k.rank == 2 ? k.n[0] : k.n[0] / 2 + 1, k.n[1] / 2 + 1};
    long long* in_embed = k.forward() ? real_embed : cplx_embed;
    long long* out_embed = k.forward() ? cplx_embed : real_embed;
    long long n[2] = {k.n[0], k.n[1]};
    cufftResult r = cufftSetAutoAllocation(h, 0);
    if (r == CUFFT_SUCCESS)
        r = cufftMakePlanMany64(h, k.rank, n, in_embed, k.istride, k.idist, out_embed, k.ostride,
                                k.odist, k.type, k.batch, work);
    if (r != CUFFT_SUCCESS) {
        (void)cufftDestroy(h);
        detail::throw_cufft(r, "cufftMakePlanMany64(" + std::to_string(k.rank) + "-D, " +
                                   std::to_string(k.n[0]) + (k.rank == 2 ? "x" + std::to_string(k.n[1]) : "") +
                                   ", batch " + std::to_string(k.batch) + ")");
    }
    return h;
}

}  // namespace

FftPlanKey forward_to_freq_major(int rank, long long n0, long long n1, long long batch, bool dbl) {
    FftPlanKey k = base_key(rank, n0, n1, batch, forward_type(dbl));
    k.istride = 1;
    k.idist = real_points(k);
    k.ostride = batch;  // frequency f of transform b at f * batch + b
    k.odist = 1;
    return k;
}

FftPlanKey inverse_from_freq_major(int rank, long long n0, long long n1, long long batch, bool dbl) {
    FftPlanKey k = base_key(rank, n0, n1, batch, inverse_type(dbl));
    k.istride = batch;
    k.idist = 1;
    k.ostride = 1;
    k.odist = real_points(k);
    return k;
}

FftPlanKey forward_dense(int rank, long long n0, long long n1, long long batch, bool dbl) {
    FftPlanKey k = base_key(rank, n0, n1, batch, forward_type(dbl));
    k.idist = real_points(k);
    k.odist = k.spectrum();
    return k;
}

FftPlanKey inverse_dense(int rank, long long n0, long long n1, long long batch, bool dbl) {
    FftPlanKey k = base_key(rank, n0, n1, batch, inverse_type(dbl));
    k.idist = k.spectrum();
    k.odist = real_points(k);
    return k;
}

// ---- plan cache ---------------------------------------------------------------------------------

FftPlanCache::~FftPlanCache() {
    int previous = 0;
    const bool have_previous = cudaGetDevice(&previous) == cudaSuccess;
    if (have_previous && previous != device_) (void)cudaSetDevice(device_);
    for (auto& kv : plans_) (void)cufftDestroy(kv.second->plan);  // destructors do not throw
    if (have_previous && previous != device_) (void)cudaSetDevice(previous);
}

FftPlanCache::Entry& FftPlanCache::entry(const FftPlanKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    auto e = std::make_unique<Entry>();
    DeviceGuard guard(device_);
    e->plan = make_plan(key, &e->work);
    Entry& ref = *e;
    plans_.emplace(key, std::move(e));
    return ref;
}

void FftPlanCache::exec(const FftPlanKey& key, cudaStream_t stream, void* work, size_t work_bytes,
                        void* in, void* out) {
    Entry& e = entry(key);
    if (e.work > work_bytes)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR,
                    "cuFFT plan needs " + std::to_string(e.work) + " bytes of work area, the workspace has " +
                        std::to_string(work_bytes) + " (sizes differ between the devices of one process?)");
    std::lock_guard<std::mutex> lock(e.mutex);
    CONVCORE_CUFFT_CHECK(cufftSetStream(e.plan, stream));
    CONVCORE_CUFFT_CHECK(cufftSetWorkArea(e.plan, e.work > 0 ? work : nullptr));
    switch (key.type) {
        case CUFFT_R2C:
            CONVCORE_CUFFT_CHECK(cufftExecR2C(e.plan, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)));
            break;
        case CUFFT_C2R:
            CONVCORE_CUFFT_CHECK(cufftExecC2R(e.plan, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)));
            break;
        case CUFFT_D2Z:
            CONVCORE_CUFFT_CHECK(cufftExecD2Z(e.plan, static_cast<cufftDoubleReal*>(in),
                                              static_cast<cufftDoubleComplex*>(out)));
            break;
        case CUFFT_Z2D:
            CONVCORE_CUFFT_CHECK(cufftExecZ2D(e.plan, static_cast<cufftDoubleComplex*>(in),
                                              static_cast<cufftDoubleReal*>(out)));
            break;
        default:
            throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FftPlanCache: complex-to-complex plans are not used");
    }
}

size_t fft_work_bytes(const FftPlanKey& key) {
    static std::mutex mutex;
    static std::map<std::pair<int, FftPlanKey>, size_t> sizes;
    int device = 0;
    CONVCORE_CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex);
    const auto id = std::make_pair(device, key);
    auto it = sizes.find(id);
    if (it != sizes.end()) return it->second;
    size_t work = 0;
    const cufftHandle h = make_plan(key, &work);
    (void)cufftDestroy(h);
    sizes.emplace(id, work);
    return work;
}

FftPlanCache& DeviceResources::fft_plans() {
    std::lock_guard<std::mutex> lock(fft_mutex_);
    if (!fft_plans_) fft_plans_ = std::make_shared<FftPlanCache>(device);
    return *fft_plans_;
}

FftPlanCache& plan_cache(const Context& ctx) {
    if (!ctx.cuda) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "CUDA handle without device resources");
    return ctx.cuda->fft_plans();
}

// ---- the channel reduction -------------------------------------------------------------------------

bool gemm_fits(long long freqs, long long cols, long long c, long long k) {
    return freqs <= INT_MAX && cols <= INT_MAX && c <= INT_MAX && k <= INT_MAX;
}

namespace {
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, int m, int n, int kk, const float*,
                            const void* a, int lda, long long sa, const void* b, int ldb, long long sb,
                            void* c, int ldc, long long sc, int batch) {
    const cuComplex one = make_cuComplex(1.f, 0.f), zero = make_cuComplex(0.f, 0.f);
    return cublasCgemmStridedBatched(h, ta, CUBLAS_OP_N, m, n, kk, &one, static_cast<const cuComplex*>(a), lda, sa,
                                     static_cast<const cuComplex*>(b), ldb, sb, &zero,
                                     static_cast<cuComplex*>(c), ldc, sc, batch);
}
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, int m, int n, int kk, const double*,
                            const void* a, int lda, long long sa, const void* b, int ldb, long long sb,
                            void* c, int ldc, long long sc, int batch) {
    const cuDoubleComplex one = make_cuDoubleComplex(1.0, 0.0), zero = make_cuDoubleComplex(0.0, 0.0);
    return cublasZgemmStridedBatched(h, ta, CUBLAS_OP_N, m, n, kk, &one,
                                     static_cast<const cuDoubleComplex*>(a), lda, sa,
                                     static_cast<const cuDoubleComplex*>(b), ldb, sb, &zero,
                                     static_cast<cuDoubleComplex*>(c), ldc, sc, batch);
}

template <typename C>
struct GroupedProduct {
    const C* x;
    const C* w;
    C* y;
    int64_t cols, c, k, groups;
    bool conj;
    __device__ void operator()(int64_t e) const { fftg::grouped_product(x, w, y, cols, c, k, groups, conj, e); }
};

// Below this reduction length, grouped problems (depthwise and the like) use GroupedProduct:
// one kernel for all groups instead of one cuBLAS call per group of a degenerate GEMM (a guess,
// not yet measured on a GPU).
constexpr long long kSmallGroupReduction = 8;

}  // namespace

template <typename T>
void spectral_gemm(const Context& ctx, bool conj, long long freqs, long long cols, long long c,
                   long long k, long long groups, const void* x, const void* w, void* y) {
    if (!gemm_fits(freqs, cols, c, k))
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "spectral_gemm: a size passes INT_MAX");
    const long long cg = c / groups, kg = k / groups;
    if (groups > 1 && cg < kSmallGroupReduction) {
        using C = typename complex_of<T>::type;
        for_each(ctx, int64_t(freqs) * cols * k,
                 GroupedProduct<C>{static_cast<const C*>(x), static_cast<const C*>(w), static_cast<C*>(y), cols, c, k,
                                   groups, conj},
                 "FFT family grouped product");
        return;
    }
    const size_t cplx = 2 * sizeof(T);
    cublasHandle_t h = ctx.cuda->cublas(stream_of(ctx));
    // The handle's cuBLAS handle is shared: state what this call relies on (alpha and beta on
    // the host; no TF32 in the complex GEMM).
    CONVCORE_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    CONVCORE_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    // Column-major view per frequency: A = W (cg x k, lda cg), B = X (c x cols, ldb c),
    // C = Y (k x cols, ldc k); group g takes rows g*cg of B, columns g*kg of A, rows g*kg of C.
    for (long long g = 0; g < groups; ++g) {
        const char* a = static_cast<const char*>(w) + size_t(g * kg * cg) * cplx;
        const char* b = static_cast<const char*>(x) + size_t(g * cg) * cplx;
        char* cc = static_cast<char*>(y) + size_t(g * kg) * cplx;
        CONVCORE_CUBLAS_CHECK(gemm_batched(h, conj ? CUBLAS_OP_C : CUBLAS_OP_T, int(kg), int(cols), int(cg),
                                           static_cast<const T*>(nullptr), a, int(cg), k * cg, b, int(c),
                                           cols * c, cc, int(k), cols * k, int(freqs)));
    }
}

template void spectral_gemm<float>(const Context&, bool, long long, long long, long long, long long,
                                   long long, const void*, const void*, void*);
template void spectral_gemm<double>(const Context&, bool, long long, long long, long long, long long,
                                    long long, const void*, const void*, void*);

}  // namespace cuda
}  // namespace convcore
#endif
