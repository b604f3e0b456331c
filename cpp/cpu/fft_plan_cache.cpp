// Shared helpers of the CPU FFT family: see fft_plan_cache.hpp.
#include "cpu/fft_plan_cache.hpp"

#include <fftw3.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.hpp"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVCORE_X86_DISPATCH 1
#endif

namespace convcore {
namespace cpu {
namespace fftc {

// ---- sizes ------------------------------------------------------------------------------

int64_t good_size(int64_t n, bool even) {
    if (n < 1) n = 1;
    for (int64_t m = n;; ++m) {
        if (even && (m & 1)) continue;
        int64_t r = m;
        for (int64_t f : {2, 3, 5, 7})
            while (r % f == 0) r /= f;
        if (r == 1) return m;
    }
}

std::string too_big(const char* algo, double bytes) {
    char buf[192];
    std::snprintf(buf, sizeof buf,
                  "%s would need %.1f GB of workspace for this problem (the cap is 4 GiB)", algo,
                  bytes / 1e9);
    return buf;
}

size_t Carver::add(double count, size_t elem) {
    const double bytes = count * double(elem);
    const size_t at = end_;
    if (overflow_ || bytes > double(kWorkspaceCap) * 4) {  // far past any cap: stop counting
        overflow_ = true;
        return at;
    }
    end_ += (size_t(bytes) + 63) / 64 * 64;
    return at;
}

// ---- FFTW plans ---------------------------------------------------------------------------

namespace {

template <typename T>
struct Api;
template <>
struct Api<float> {
    using plan_t = fftwf_plan;
    using cpx = fftwf_complex;
    static void* alloc(size_t b) { return fftwf_malloc(b); }
    static void release(void* p) { fftwf_free(p); }
    static plan_t r2c(int rank, const int* n, int howmany, float* in, const int* inembed,
                      int idist, cpx* out, const int* onembed, int odist, unsigned flags) {
        return fftwf_plan_many_dft_r2c(rank, n, howmany, in, inembed, 1, idist, out, onembed, 1,
                                       odist, flags);
    }
    static plan_t c2r(int rank, const int* n, int howmany, cpx* in, const int* inembed,
                      int idist, float* out, const int* onembed, int odist, unsigned flags) {
        return fftwf_plan_many_dft_c2r(rank, n, howmany, in, inembed, 1, idist, out, onembed, 1,
                                       odist, flags);
    }
    static void fwd(plan_t p, float* d) { fftwf_execute_dft_r2c(p, d, reinterpret_cast<cpx*>(d)); }
    static void bwd(plan_t p, float* d) { fftwf_execute_dft_c2r(p, reinterpret_cast<cpx*>(d), d); }
    static void destroy(plan_t p) { fftwf_destroy_plan(p); }
};
template <>
struct Api<double> {
    using plan_t = fftw_plan;
    using cpx = fftw_complex;
    static void* alloc(size_t b) { return fftw_malloc(b); }
    static void release(void* p) { fftw_free(p); }
    static plan_t r2c(int rank, const int* n, int howmany, double* in, const int* inembed,
                      int idist, cpx* out, const int* onembed, int odist, unsigned flags) {
        return fftw_plan_many_dft_r2c(rank, n, howmany, in, inembed, 1, idist, out, onembed, 1,
                                      odist, flags);
    }
    static plan_t c2r(int rank, const int* n, int howmany, cpx* in, const int* inembed,
                      int idist, double* out, const int* onembed, int odist, unsigned flags) {
        return fftw_plan_many_dft_c2r(rank, n, howmany, in, inembed, 1, idist, out, onembed, 1,
                                      odist, flags);
    }
    static void fwd(plan_t p, double* d) { fftw_execute_dft_r2c(p, d, reinterpret_cast<cpx*>(d)); }
    static void bwd(plan_t p, double* d) { fftw_execute_dft_c2r(p, reinterpret_cast<cpx*>(d), d); }
    static void destroy(plan_t p) { fftw_destroy_plan(p); }
};

// One mutex for every call into FFTW's planner (fftw and fftwf alike).
std::mutex& planner_mutex() {
    static std::mutex m;
    return m;
}

unsigned planner_flags() {
    static const unsigned flags = [] {
        const char* env = std::getenv("CONVCORE_FFTW_PLANNER");
        return env && std::strcmp(env, "measure") == 0 ? unsigned(FFTW_MEASURE)
                                                       : unsigned(FFTW_ESTIMATE);
    }();
    return flags;
}

}  // namespace

template <typename T>
struct Plan<T>::Impl {
    typename Api<T>::plan_t fwd = nullptr, bwd = nullptr;
    ~Impl() {
        std::lock_guard<std::mutex> lock(planner_mutex());
        if (fwd) Api<T>::destroy(fwd);
        if (bwd) Api<T>::destroy(bwd);
    }
};

template <typename T>
void Plan<T>::forward(T* data) const {
    Api<T>::fwd(impl_->fwd, data);
}
template <typename T>
void Plan<T>::backward(T* data) const {
    Api<T>::bwd(impl_->bwd, data);
}

template <typename T>
Plan<T> get_plan(int64_t n0, int64_t n1, int64_t howmany, int64_t dist) {
    using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
    static std::map<Key, std::shared_ptr<typename Plan<T>::Impl>> cache;
    const Key key{n0, n1, howmany, dist};
    const int64_t half = (n1 > 0 ? n0 * (n1 / 2 + 1) : n0 / 2 + 1);
    if (n0 < 1 || n1 < 0 || howmany < 1 || dist < half || n0 * std::max<int64_t>(n1, 1) > INT32_MAX ||
        2 * dist * howmany > INT32_MAX)
        throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FFT size out of FFTW's 32-bit range");
    // Declared before the lock: plans released here (evicted, or on an error) are destroyed
    // after it is unlocked (~Impl takes the planner mutex).
    std::map<Key, std::shared_ptr<typename Plan<T>::Impl>> evicted;
    auto impl = std::make_shared<typename Plan<T>::Impl>();
    std::lock_guard<std::mutex> lock(planner_mutex());
    auto it = cache.find(key);
    if (it != cache.end()) return Plan<T>(it->second);
    if (cache.size() >= 256) evicted.swap(cache);  // plans in use live on in their holders

    // Plan on scratch arrays of the same (64-byte) alignment as the planes the solvers use.
    const size_t bytes = size_t(2 * dist * howmany) * sizeof(T);
    T* buf = static_cast<T*>(Api<T>::alloc(bytes));
    if (!buf) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "FFTW plan scratch allocation failed");
    auto* cbuf = reinterpret_cast<typename Api<T>::cpx*>(buf);
    const unsigned flags = planner_flags();
    if (n1 > 0) {
        const int n[2] = {int(n0), int(n1)};
        const int rembed[2] = {int(n0), int(2 * (n1 / 2 + 1))};
        const int cembed[2] = {int(n0), int(n1 / 2 + 1)};
        impl->fwd = Api<T>::r2c(2, n, int(howmany), buf, rembed, int(2 * dist), cbuf, cembed,
                                int(dist), flags);
        impl->bwd = Api<T>::c2r(2, n, int(howmany), cbuf, cembed, int(dist), buf, rembed,
                                int(2 * dist), flags | FFTW_DESTROY_INPUT);
    } else {
        const int n[1] = {int(n0)};
        impl->fwd = Api<T>::r2c(1, n, int(howmany), buf, nullptr, int(2 * dist), cbuf, nullptr,
                                int(dist), flags);
        impl->bwd = Api<T>::c2r(1, n, int(howmany), cbuf, nullptr, int(dist), buf, nullptr,
                                int(2 * dist), flags | FFTW_DESTROY_INPUT);
    }
    Api<T>::release(buf);
    if (!impl->fwd || !impl->bwd)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FFTW could not plan a transform");
    cache.emplace(key, impl);
    return Plan<T>(impl);
}

template class Plan<float>;
template class Plan<double>;
template Plan<float> get_plan<float>(int64_t, int64_t, int64_t, int64_t);
template Plan<double> get_plan<double>(int64_t, int64_t, int64_t, int64_t);

// ---- layout conversion --------------------------------------------------------------------

template <typename T>
void to_blocks(T* data, int64_t f) {
    constexpr int64_t B = block<T>();
    T tmp[2 * B];
    for (int64_t b0 = 0; b0 < f; b0 += B) {
        T* blk = data + 2 * b0;
        const int64_t n = std::min(B, f - b0);
        std::memcpy(tmp, blk, size_t(2 * n) * sizeof(T));
        for (int64_t j = 0; j < n; ++j) {
            blk[j] = tmp[2 * j];
            blk[B + j] = tmp[2 * j + 1];
        }
        for (int64_t j = n; j < B; ++j) blk[j] = blk[B + j] = T(0);
    }
}

template <typename T>
void from_blocks(T* data, int64_t f) {
    constexpr int64_t B = block<T>();
    T tmp[2 * B];
    for (int64_t b0 = 0; b0 < f; b0 += B) {
        T* blk = data + 2 * b0;
        const int64_t n = std::min(B, f - b0);
        std::memcpy(tmp, blk, size_t(2 * B) * sizeof(T));
        for (int64_t j = 0; j < n; ++j) {
            blk[2 * j] = tmp[j];
            blk[2 * j + 1] = tmp[B + j];
        }
    }
}

template void to_blocks<float>(float*, int64_t);
template void to_blocks<double>(double*, int64_t);
template void from_blocks<float>(float*, int64_t);
template void from_blocks<double>(double*, int64_t);

// ---- the product kernels ------------------------------------------------------------------

namespace {

#define CONVCORE_ALWAYS_INLINE inline __attribute__((always_inline))

// Y(i, k) for i < MI, k < MK on one VB-byte vector of one block: the 2*MI*MK accumulators
// (real, imaginary) stay in registers through the whole reduction.
template <typename T, int VB, int MI, int MK, bool CONJ>
CONVCORE_ALWAYS_INLINE void micro(const T* __restrict x, int64_t x_i, int64_t x_c, int64_t x_r,
                                  const T* __restrict w, int64_t w_k, int64_t w_c, int64_t w_r,
                                  int64_t nc, int64_t nr, T* __restrict y, int64_t y_i,
                                  int64_t y_k) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int64_t H = block<T>();  // the imaginary half of a block
    V re[MI][MK], im[MI][MK];
#pragma GCC unroll 8
    for (int i = 0; i < MI; ++i)
#pragma GCC unroll 8
        for (int k = 0; k < MK; ++k) re[i][k] = im[i][k] = V{};
    for (int64_t c = 0; c < nc; ++c) {
        const T* xc = x + c * x_c;
        const T* wc = w + c * w_c;
        for (int64_t r = 0; r < nr; ++r) {
            const T* xr = xc + r * x_r;
            const T* wr = wc + r * w_r;
            V a[MI], b[MI];
#pragma GCC unroll 8
            for (int i = 0; i < MI; ++i) {
                __builtin_memcpy(&a[i], xr + i * x_i, VB);
                __builtin_memcpy(&b[i], xr + i * x_i + H, VB);
            }
#pragma GCC unroll 8
            for (int k = 0; k < MK; ++k) {
                V u, v;
                __builtin_memcpy(&u, wr + k * w_k, VB);
                __builtin_memcpy(&v, wr + k * w_k + H, VB);
#pragma GCC unroll 8
                for (int i = 0; i < MI; ++i) {
                    if (CONJ) {  // (a + ib)(u - iv) = (au + bv) + i(bu - av)
                        re[i][k] += a[i] * u;
                        re[i][k] += b[i] * v;
                        im[i][k] += b[i] * u;
                        im[i][k] -= a[i] * v;
                    } else {  // (a + ib)(u + iv) = (au - bv) + i(bu + av)
                        re[i][k] += a[i] * u;
                        re[i][k] -= b[i] * v;
                        im[i][k] += b[i] * u;
                        im[i][k] += a[i] * v;
                    }
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MI; ++i)
#pragma GCC unroll 8
        for (int k = 0; k < MK; ++k) {
            __builtin_memcpy(y + i * y_i + k * y_k, &re[i][k], VB);
            __builtin_memcpy(y + i * y_i + k * y_k + H, &im[i][k], VB);
        }
}

template <typename T, int VB, int MI, int MK, bool CONJ>
CONVCORE_ALWAYS_INLINE void tile(const Product<T>& p, int64_t off, int64_t i, int64_t k) {
    micro<T, VB, MI, MK, CONJ>(p.x + off + i * p.x_i, p.x_i, p.x_c, p.x_r, p.w + off + k * p.w_k,
                               p.w_k, p.w_c, p.w_r, p.nc, p.nr, p.y + off + i * p.y_i + k * p.y_k,
                               p.y_i, p.y_k);
}

// Tiles: MI = 1 x MK up to KW filters; 2 x up to KW/2; or, for a single filter, up to KW x 1.
template <typename T, int VB, int KW, bool CONJ>
CONVCORE_ALWAYS_INLINE void blocks(const Product<T>& p, int64_t b0, int64_t b1) {
    constexpr int64_t H = block<T>();
    constexpr int64_t L = VB / int64_t(sizeof(T));  // lanes per vector
    for (int64_t b = b0; b < b1; ++b) {
        for (int64_t u = 0; u < H; u += L) {
            const int64_t off = b * 2 * H + u;
            if (p.nk == 1) {
                int64_t i = 0;
                for (; i + KW <= p.ni; i += KW) tile<T, VB, KW, 1, CONJ>(p, off, i, 0);
                switch (p.ni - i) {
                    case 7: tile<T, VB, 7, 1, CONJ>(p, off, i, 0); break;
                    case 6: tile<T, VB, 6, 1, CONJ>(p, off, i, 0); break;
                    case 5: tile<T, VB, 5, 1, CONJ>(p, off, i, 0); break;
                    case 4: tile<T, VB, 4, 1, CONJ>(p, off, i, 0); break;
                    case 3: tile<T, VB, 3, 1, CONJ>(p, off, i, 0); break;
                    case 2: tile<T, VB, 2, 1, CONJ>(p, off, i, 0); break;
                    case 1: tile<T, VB, 1, 1, CONJ>(p, off, i, 0); break;
                    default: break;
                }
                continue;
            }
            constexpr int K2 = KW / 2;
            int64_t k = 0;
            if (p.ni == 1) {
                for (; k + KW <= p.nk; k += KW) tile<T, VB, 1, KW, CONJ>(p, off, 0, k);
            } else {
                for (; k + K2 <= p.nk; k += K2) {
                    int64_t i = 0;
                    for (; i + 2 <= p.ni; i += 2) tile<T, VB, 2, K2, CONJ>(p, off, i, k);
                    if (i < p.ni) tile<T, VB, 1, K2, CONJ>(p, off, i, k);
                }
            }
            // the remaining < K2 (or < KW) filters, one row at a time
            for (int64_t i = 0; i < p.ni; ++i) {
                int64_t kk = k;
                for (; kk + 4 <= p.nk; kk += 4) tile<T, VB, 1, 4, CONJ>(p, off, i, kk);
                switch (p.nk - kk) {
                    case 3: tile<T, VB, 1, 3, CONJ>(p, off, i, kk); break;
                    case 2: tile<T, VB, 1, 2, CONJ>(p, off, i, kk); break;
                    case 1: tile<T, VB, 1, 1, CONJ>(p, off, i, kk); break;
                    default: break;
                }
            }
        }
    }
}

template <typename T>
using ProductFn = void (*)(const Product<T>&, int64_t, int64_t);

struct Kernels {
    ProductFn<float> f32;
    ProductFn<double> f64;
    const char* name;
};

#define CONVCORE_PRODUCT_KERNELS(NAME, ATTR, VB, KW)                                  \
    ATTR void NAME##_f32(const Product<float>& p, int64_t b0, int64_t b1) {           \
        if (p.conj_w)                                                                 \
            blocks<float, VB, KW, true>(p, b0, b1);                                   \
        else                                                                          \
            blocks<float, VB, KW, false>(p, b0, b1);                                  \
    }                                                                                 \
    ATTR void NAME##_f64(const Product<double>& p, int64_t b0, int64_t b1) {          \
        if (p.conj_w)                                                                 \
            blocks<double, VB, KW, true>(p, b0, b1);                                  \
        else                                                                          \
            blocks<double, VB, KW, false>(p, b0, b1);                                 \
    }                                                                                 \
    const Kernels NAME = {NAME##_f32, NAME##_f64, #NAME};

// Registers: 2*MI*MK accumulators + 2*MI X + 2 W vectors: 8 filters x 1 (20 of 32 zmm) or
// 2 x 4 (26) on AVX-512; 4 x 1 or 2 x 2 (12-14 of 16) below it.
CONVCORE_PRODUCT_KERNELS(baseline, , 16, 4)
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_PRODUCT_KERNELS(avx2, __attribute__((target("avx2,fma"))), 32, 4)
CONVCORE_PRODUCT_KERNELS(avx512, __attribute__((target("avx512f,fma"))), 64, 8)
#endif

const Kernels& pick() {
#ifdef CONVCORE_X86_DISPATCH
    const char* env = std::getenv("CONVCORE_CPU_ISA");
    const std::string cap = env ? env : "";
    if (cap != "avx2" && cap != "baseline" && __builtin_cpu_supports("avx512f")) return avx512;
    if (cap != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return avx2;
#endif
    return baseline;
}

const Kernels& kernels() {
    static const Kernels& k = pick();
    return k;
}

}  // namespace

template <>
void product<float>(const Product<float>& p, int64_t b0, int64_t b1) {
    kernels().f32(p, b0, b1);
}
template <>
void product<double>(const Product<double>& p, int64_t b0, int64_t b1) {
    kernels().f64(p, b0, b1);
}

const char* product_isa() { return kernels().name; }

}  // namespace fftc
}  // namespace cpu
}  // namespace convcore
