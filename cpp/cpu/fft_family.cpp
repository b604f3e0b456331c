// The engine the CPU FFT family shares: see fft_family.hpp.
#include "cpu/fft_family.hpp"
#include "cpu/scratch.hpp"

#include <fftw3.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/shuffle.hpp"
#include "core/error.hpp"
#include "cpu/cpu_isa.hpp"


namespace convcore {
namespace cpu {
namespace fftc {

size_t Carver::add(double count, size_t elem) {
    const double bytes = count * double(elem);
    const size_t at = end_;
    wanted_ += (bytes + 63) / 64 * 64;
    if (overflow_ || bytes > double(kWorkspaceCap) * 4) {  // far past any cap: stop counting
        overflow_ = true;
        return at;
    }
    end_ += (size_t(bytes) + 63) / 64 * 64;
    return at;
}

// ---- FFTW plans ---------------------------------------------------------------------------

namespace {

// thread_vector sites
struct RowRoots;
struct ColumnRoots;

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

namespace {

// `howmany` in-place real transforms of rank 1-3 (sizes n[0 .. rank)), consecutive ones `dist`
// complex numbers apart; cached per shape.
template <typename T>
Plan<T> plan_of(int rank, const int64_t (&n)[3], int64_t howmany, int64_t dist) {
    using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t>;
    static std::map<Key, std::shared_ptr<typename Plan<T>::Impl>> cache;
    const Key key{rank, n[0], n[1], n[2], howmany, dist};
    int64_t points = 1, half = 1;  // real points; complex numbers of the half spectrum
    for (int i = 0; i < rank; ++i) {
        points *= n[i];
        half *= i == rank - 1 ? n[i] / 2 + 1 : n[i];
    }
    if (std::any_of(n, n + rank, [](int64_t v) { return v < 1; }) || howmany < 1 || dist < half ||
        points > INT32_MAX || 2 * dist * howmany > INT32_MAX)
        throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FFT size out of FFTW's 32-bit range");
    // Declared before the lock: plans released here (evicted, or on an error) are destroyed
    // after it is unlocked (~Impl takes the planner mutex).
    std::map<Key, std::shared_ptr<typename Plan<T>::Impl>> evicted;
    std::shared_ptr<typename Plan<T>::Impl> impl;  // made after the lookup: a hit allocates nothing
    std::lock_guard<std::mutex> lock(planner_mutex());
    auto it = cache.find(key);
    if (it != cache.end()) return Plan<T>(it->second);
    if (cache.size() >= 256) evicted.swap(cache);  // plans in use live on in their holders
    impl = std::make_shared<typename Plan<T>::Impl>();

    // Plan on scratch arrays of the same (64-byte) alignment as the planes the solvers use.
    const size_t bytes = size_t(2 * dist * howmany) * sizeof(T);
    T* buf = static_cast<T*>(Api<T>::alloc(bytes));
    if (!buf) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "FFTW plan scratch allocation failed");
    auto* cbuf = reinterpret_cast<typename Api<T>::cpx*>(buf);
    const unsigned flags = planner_flags();
    // In place: the real rows are padded to 2 * (n/2 + 1) along the last axis.
    int sizes[3], rembed[3], cembed[3];
    for (int i = 0; i < rank; ++i) sizes[i] = rembed[i] = cembed[i] = int(n[i]);
    rembed[rank - 1] = int(2 * (n[rank - 1] / 2 + 1));
    cembed[rank - 1] = int(n[rank - 1] / 2 + 1);
    impl->fwd = Api<T>::r2c(rank, sizes, int(howmany), buf, rembed, int(2 * dist), cbuf, cembed, int(dist), flags);
    impl->bwd = Api<T>::c2r(rank, sizes, int(howmany), cbuf, cembed, int(dist), buf, rembed, int(2 * dist),
                            flags | FFTW_DESTROY_INPUT);
    Api<T>::release(buf);
    if (!impl->fwd || !impl->bwd)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "FFTW could not plan a transform");
    cache.emplace(key, impl);
    return Plan<T>(impl);
}

}  // namespace

template <typename T>
Plan<T> get_plan(int64_t n0, int64_t n1, int64_t howmany, int64_t dist) {
    if (n1 < 0) throw Error(CONVCORE_STATUS_NOT_SUPPORTED, "FFT size out of FFTW's 32-bit range");
    const int64_t n[3] = {n0, n1, 0};
    return plan_of<T>(n1 > 0 ? 2 : 1, n, howmany, dist);
}

template <typename T>
Plan<T> get_plan_3d(int64_t n0, int64_t n1, int64_t n2) {
    const int64_t n[3] = {n0, n1, n2};
    return plan_of<T>(3, n, 1, n0 * n1 * (n2 / 2 + 1));
}

template class Plan<float>;
template class Plan<double>;
template Plan<float> get_plan<float>(int64_t, int64_t, int64_t, int64_t);
template Plan<double> get_plan<double>(int64_t, int64_t, int64_t, int64_t);
template Plan<float> get_plan_3d<float>(int64_t, int64_t, int64_t);
template Plan<double> get_plan_3d<double>(int64_t, int64_t, int64_t);

// ---- scratch ------------------------------------------------------------------------------

namespace {
struct ScratchBuf {
    void* p = nullptr;
    size_t bytes = 0;
    ~ScratchBuf() { std::free(p); }
    void* get(size_t need) {
        if (need > bytes) {
            std::free(p);
            bytes = (need + 4095) / 4096 * 4096;
            p = std::aligned_alloc(64, bytes);
            if (!p) {
                bytes = 0;
                throw Error(CONVCORE_STATUS_ALLOC_FAILED, "FFT scratch allocation failed");
            }
        }
        return p;
    }
};
}  // namespace

template <typename T>
T* scratch(size_t count, int slot) {
    thread_local ScratchBuf bufs[4];
    return static_cast<T*>(bufs[slot & 3].get(count * sizeof(T)));
}
template float* scratch<float>(size_t, int);
template double* scratch<double>(size_t, int);

// ---- layout conversion --------------------------------------------------------------------

// The shuffles below are always inlined into their instruction set's kernels: the "vector
// passed without AVX changes the ABI" note does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace {

// One full block: 2B interleaved values <-> B real parts then B imaginary parts, with
// VB-byte vector shuffles.
template <typename T, int VB>
inline __attribute__((always_inline)) void split_block(const T* __restrict s, T* __restrict blk) {
    constexpr int L = VB / int(sizeof(T));
    constexpr int64_t B = block<T>();
    typedef T V __attribute__((vector_size(VB)));
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
    typedef I M __attribute__((vector_size(VB)));
    M even, odd;
    for (int j = 0; j < L; ++j) {
        even[j] = I(2 * j);
        odd[j] = I(2 * j + 1);
    }
    for (int64_t j = 0; j < B; j += L) {
        V a, b;
        __builtin_memcpy(&a, s + 2 * j, VB);
        __builtin_memcpy(&b, s + 2 * j + L, VB);
        const V re = shuffle2(a, b, even), im = shuffle2(a, b, odd);
        __builtin_memcpy(blk + j, &re, VB);
        __builtin_memcpy(blk + B + j, &im, VB);
    }
}

template <typename T, int VB>
inline __attribute__((always_inline)) void join_block(const T* __restrict blk, T* __restrict d) {
    constexpr int L = VB / int(sizeof(T));
    constexpr int64_t B = block<T>();
    typedef T V __attribute__((vector_size(VB)));
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
    typedef I M __attribute__((vector_size(VB)));
    M lo, hi;  // interleave re (lanes 0..L) and im (lanes L..2L)
    for (int j = 0; j < L; ++j) {
        lo[j] = I(j / 2 + (j % 2) * L);
        hi[j] = I(L / 2 + j / 2 + (j % 2) * L);
    }
    for (int64_t j = 0; j < B; j += L) {
        V re, im;
        __builtin_memcpy(&re, blk + j, VB);
        __builtin_memcpy(&im, blk + B + j, VB);
        const V a = shuffle2(re, im, lo), b = shuffle2(re, im, hi);
        __builtin_memcpy(d + 2 * j, &a, VB);
        __builtin_memcpy(d + 2 * j + L, &b, VB);
    }
}

template <typename T, int VB>
inline __attribute__((always_inline)) void scatter_impl(const T* src, const Layout<T>& lay, T* dst,
                                                        int64_t pstride) {
    constexpr int64_t B = block<T>();
    const int64_t f = lay.f;
    for (int64_t b0 = 0, j = 0; b0 < f; b0 += B, ++j) {
        const int64_t sp = lay.stored(j);
        T* __restrict blk = dst + (sp / lay.pb) * pstride + (sp % lay.pb) * 2 * B;
        const T* __restrict s = src + 2 * b0;
        if (b0 + B <= f) {
            split_block<T, VB>(s, blk);
        } else {
            const int64_t n = f - b0;
            for (int64_t i = 0; i < B; ++i) {
                blk[i] = i < n ? s[2 * i] : T(0);
                blk[B + i] = i < n ? s[2 * i + 1] : T(0);
            }
        }
    }
}

template <typename T, int VB>
inline __attribute__((always_inline)) void gather_impl(const T* src, const Layout<T>& lay,
                                                       int64_t pstride, T* dst) {
    constexpr int64_t B = block<T>();
    const int64_t f = lay.f;
    for (int64_t b0 = 0, j = 0; b0 < f; b0 += B, ++j) {
        const int64_t sp = lay.stored(j);
        const T* __restrict blk = src + (sp / lay.pb) * pstride + (sp % lay.pb) * 2 * B;
        T* __restrict d = dst + 2 * b0;
        if (b0 + B <= f) {
            join_block<T, VB>(blk, d);
        } else {
            for (int64_t i = 0; i < f - b0; ++i) {
                d[2 * i] = blk[i];
                d[2 * i + 1] = blk[B + i];
            }
        }
    }
}

}  // namespace


// ---- kernels ------------------------------------------------------------------------------

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
CONVCORE_ALWAYS_INLINE void tile(const Product<T>& p, int64_t b, int64_t u, int64_t i, int64_t k) {
    micro<T, VB, MI, MK, CONJ>(p.x + b * p.x_b + u + i * p.x_i, p.x_i, p.x_c, p.x_r,
                               p.w + b * p.w_b + u + k * p.w_k, p.w_k, p.w_c, p.w_r, p.nc, p.nr,
                               p.y + b * p.y_b + u + i * p.y_i + k * p.y_k, p.y_i, p.y_k);
}

// Tiles: MI = 1 x MK up to KW filters; 2 x up to KW/2; or, for a single filter, up to KW x 1.
template <typename T, int VB, int KW, bool CONJ>
CONVCORE_ALWAYS_INLINE void blocks(const Product<T>& p, int64_t b0, int64_t b1) {
    constexpr int64_t H = block<T>();
    constexpr int64_t L = VB / int64_t(sizeof(T));  // lanes per vector
    for (int64_t b = b0; b < b1; ++b) {
        for (int64_t u = 0; u < H; u += L) {
            if (p.nk == 1) {
                int64_t i = 0;
                for (; i + KW <= p.ni; i += KW) tile<T, VB, KW, 1, CONJ>(p, b, u, i, 0);
                switch (p.ni - i) {
                    case 7: tile<T, VB, 7, 1, CONJ>(p, b, u, i, 0); break;
                    case 6: tile<T, VB, 6, 1, CONJ>(p, b, u, i, 0); break;
                    case 5: tile<T, VB, 5, 1, CONJ>(p, b, u, i, 0); break;
                    case 4: tile<T, VB, 4, 1, CONJ>(p, b, u, i, 0); break;
                    case 3: tile<T, VB, 3, 1, CONJ>(p, b, u, i, 0); break;
                    case 2: tile<T, VB, 2, 1, CONJ>(p, b, u, i, 0); break;
                    case 1: tile<T, VB, 1, 1, CONJ>(p, b, u, i, 0); break;
                    default: break;
                }
                continue;
            }
            constexpr int K2 = KW / 2;
            int64_t k = 0;
            if (p.ni == 1) {
                for (; k + KW <= p.nk; k += KW) tile<T, VB, 1, KW, CONJ>(p, b, u, 0, k);
            } else {
                for (; k + K2 <= p.nk; k += K2) {
                    int64_t i = 0;
                    for (; i + 2 <= p.ni; i += 2) tile<T, VB, 2, K2, CONJ>(p, b, u, i, k);
                    if (i < p.ni) tile<T, VB, 1, K2, CONJ>(p, b, u, i, k);
                }
            }
            // the remaining < K2 (or < KW) filters, one row at a time
            for (int64_t i = 0; i < p.ni; ++i) {
                int64_t kk = k;
                for (; kk + 4 <= p.nk; kk += 4) tile<T, VB, 1, 4, CONJ>(p, b, u, i, kk);
                switch (p.nk - kk) {
                    case 3: tile<T, VB, 1, 3, CONJ>(p, b, u, i, kk); break;
                    case 2: tile<T, VB, 1, 2, CONJ>(p, b, u, i, kk); break;
                    case 1: tile<T, VB, 1, 1, CONJ>(p, b, u, i, kk); break;
                    default: break;
                }
            }
        }
    }
}

// The column pass of the direct filter DFT for PG filters at once. With the Lh column
// frequencies split M ways (fh = t + q*Lh/M; the natural blocks of q > 0 are those of q = 0
// shifted by q*nb/M, since Lh/M * fw is a multiple of B), for each block b in [u0, u1) of the
// first nb/M (stored at b*M + q, see Layout):
//   S_p,rho[b] = sum_{r : r*dil_h = rho mod M} E[b][r] * Text_p[r][fw0(b) ...],
//   W_p[b + q*nb/M] = sum_rho (e^{-2 pi i / M})^(q*rho) * S_p,rho[b]   (a radix-M butterfly),
// fw0(b) = (b*B) mod fw, Text_p the filters' row spectra, extended cyclically so that a block
// of consecutive frequencies (which may wrap to the next row of the half spectrum) is one
// unaligned load.
template <typename T, int VB, int PG, int M>
CONVCORE_ALWAYS_INLINE void dft_columns(const T* e, const T* text, int64_t tstride,
                                        const int64_t* rlist, const int64_t* rcount, int64_t wext,
                                        int64_t fw, int64_t u0, int64_t u1, int64_t sp0, int64_t pb,
                                        T* const* dst, int64_t pstride) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int64_t B = block<T>();
    constexpr int64_t L = VB / int64_t(sizeof(T));
    int64_t r_count = 0;
    for (int q = 0; q < M; ++q) r_count += rcount[q];
    int64_t fw0 = u0 * B % fw;
    for (int64_t b = u0; b < u1; ++b) {
        const T* eb = e + b * r_count * 2 * B;
        for (int64_t u = 0; u < B; u += L) {
            V sr[PG][M], si[PG][M];
#pragma GCC unroll 8
            for (int p = 0; p < PG; ++p)
#pragma GCC unroll 4
                for (int q = 0; q < M; ++q) sr[p][q] = si[p][q] = V{};
            const int64_t* rl = rlist;
#pragma GCC unroll 4
            for (int q = 0; q < M; ++q) {
                for (int64_t j = 0; j < rcount[q]; ++j) {
                    const int64_t r = rl[j];
                    V er, ei;
                    __builtin_memcpy(&er, eb + r * 2 * B + u, VB);
                    __builtin_memcpy(&ei, eb + r * 2 * B + B + u, VB);
                    const T* tr = text + r * 2 * wext + fw0 + u;
#pragma GCC unroll 8
                    for (int p = 0; p < PG; ++p) {
                        V a, c;
                        __builtin_memcpy(&a, tr + p * tstride, VB);
                        __builtin_memcpy(&c, tr + p * tstride + wext, VB);
                        sr[p][q] += er * a;
                        sr[p][q] -= ei * c;
                        si[p][q] += er * c;
                        si[p][q] += ei * a;
                    }
                }
                rl += rcount[q];
            }
#pragma GCC unroll 8
            for (int p = 0; p < PG; ++p) {
                V wr[M], wi[M];
                if (M == 1) {
                    wr[0] = sr[p][0];
                    wi[0] = si[p][0];
                } else if (M == 2) {
                    wr[0] = sr[p][0] + sr[p][M - 1];
                    wi[0] = si[p][0] + si[p][M - 1];
                    wr[M - 1] = sr[p][0] - sr[p][M - 1];
                    wi[M - 1] = si[p][0] - si[p][M - 1];
                } else {  // M == 4: W_q = sum_rho (-i)^(q rho) S_rho
                    const V ar = sr[p][0] + sr[p][2 % M], ai = si[p][0] + si[p][2 % M];
                    const V br = sr[p][0] - sr[p][2 % M], bi = si[p][0] - si[p][2 % M];
                    const V cr = sr[p][1 % M] + sr[p][3 % M], ci = si[p][1 % M] + si[p][3 % M];
                    const V dr = sr[p][1 % M] - sr[p][3 % M], di = si[p][1 % M] - si[p][3 % M];
                    wr[0] = ar + cr;
                    wi[0] = ai + ci;
                    wr[2 % M] = ar - cr;
                    wi[2 % M] = ai - ci;
                    wr[1 % M] = br + di;  // b - i d
                    wi[1 % M] = bi - dr;
                    wr[3 % M] = br - di;  // b + i d
                    wi[3 % M] = bi + dr;
                }
#pragma GCC unroll 4
                for (int q = 0; q < M; ++q) {
                    const int64_t sp = b * M + q - sp0;  // stored position, from the first panel
                    T* o = dst[p] + (sp / pb) * pstride + (sp % pb) * 2 * B + u;
                    __builtin_memcpy(o, &wr[q], VB);
                    __builtin_memcpy(o + B, &wi[q], VB);
                }
            }
        }
        fw0 += B;
        while (fw0 >= fw) fw0 -= fw;
    }
}

// The row pass for PG filters at once: Text_p[r][j] = sum_s tap_p(r, s) * D[s][j], j < width
// (real taps; tap pointers step by `ds` along s). With `direct` (rank 1: one row, Lh = 1) the
// row spectrum is the output, written as the blocks of a set (pb blocks per panel, panels
// pstride apart) instead.
template <typename T, int VB, int PG>
CONVCORE_ALWAYS_INLINE void dft_rows(const T* const* tap0, int64_t ds, int64_t s_count,
                                     const T* d, int64_t wext, int64_t width, T* const* out,
                                     int64_t pb, int64_t pstride, bool direct) {
    typedef T V __attribute__((vector_size(VB)));
    constexpr int64_t B = block<T>();
    constexpr int64_t L = VB / int64_t(sizeof(T));
    for (int64_t j = 0; j < width; j += L) {
        V re[PG], im[PG];
#pragma GCC unroll 8
        for (int p = 0; p < PG; ++p) re[p] = im[p] = V{};
        for (int64_t s = 0; s < s_count; ++s) {
            V dr, di;
            __builtin_memcpy(&dr, d + s * 2 * wext + j, VB);
            __builtin_memcpy(&di, d + s * 2 * wext + wext + j, VB);
#pragma GCC unroll 8
            for (int p = 0; p < PG; ++p) {
                const V t = V{} + tap0[p][s * ds];
                re[p] += t * dr;
                im[p] += t * di;
            }
        }
        const int64_t b = j / B;
#pragma GCC unroll 8
        for (int p = 0; p < PG; ++p) {
            T* o = direct ? out[p] + (b / pb) * pstride + (b % pb) * 2 * B + j % B : out[p] + j;
            const int64_t ioff = direct ? B : wext;
            __builtin_memcpy(o, &re[p], VB);
            __builtin_memcpy(o + ioff, &im[p], VB);
        }
    }
}

struct DftArgs {
    // common
    int64_t count;  // filters
    int64_t r, s, wext, fw;
    const void* d;  // row twiddles
    // rows: taps in, text or (direct) blocks out
    const void* taps;
    bool flip, direct;
    void* text;     // text + i * r * 2 * wext
    // columns: text in, blocks out
    const void* e;
    int64_t m;
    const int64_t *rlist, *rcount;
    int64_t u0, u1, sp0, pb;
    void* dst;      // filter i's blocks at dst + i * istride (+ panels pstride apart)
    int64_t istride, pstride;
};

template <typename T, int VB, int PG>
CONVCORE_ALWAYS_INLINE void rows_group(const DftArgs& a, int64_t i0) {
    const T* taps = static_cast<const T*>(a.taps);
    const T* d = static_cast<const T*>(a.d);
    if (a.direct) {  // one row: its spectrum is the output
        const T* t0[PG];
        T* outs[PG];
        for (int p = 0; p < PG; ++p) {
            t0[p] = taps + (i0 + p) * a.s + (a.flip ? a.s - 1 : 0);
            outs[p] = static_cast<T*>(a.dst) + (i0 + p) * a.istride;
        }
        dft_rows<T, VB, PG>(t0, a.flip ? -1 : 1, a.s, d, a.wext, a.u1 * block<T>(), outs, a.pb, a.pstride, true);
        return;
    }
    T* text = static_cast<T*>(a.text);
    for (int64_t r = 0; r < a.r; ++r) {
        const T* t0[PG];
        T* rows[PG];
        for (int p = 0; p < PG; ++p) {
            const T* f = taps + (i0 + p) * a.r * a.s;
            t0[p] = a.flip ? f + (a.r - 1 - r) * a.s + a.s - 1 : f + r * a.s;
            rows[p] = text + (i0 + p) * a.r * 2 * a.wext + r * 2 * a.wext;
        }
        dft_rows<T, VB, PG>(t0, a.flip ? -1 : 1, a.s, d, a.wext, a.wext, rows, 0, 0, false);
    }
}

template <typename T, int VB>
CONVCORE_ALWAYS_INLINE void dft_rows_all(const DftArgs& a) {
    constexpr int PG = 4;
    int64_t i0 = 0;
    for (; i0 + PG <= a.count; i0 += PG) rows_group<T, VB, PG>(a, i0);
    switch (a.count - i0) {
        case 3: rows_group<T, VB, 3>(a, i0); break;
        case 2: rows_group<T, VB, 2>(a, i0); break;
        case 1: rows_group<T, VB, 1>(a, i0); break;
        default: break;
    }
}

template <typename T, int VB, int PG, int M>
CONVCORE_ALWAYS_INLINE void cols_group(const DftArgs& a, int64_t i0) {
    const int64_t tstride = a.r * 2 * a.wext;
    T* outs[PG];
    for (int p = 0; p < PG; ++p) outs[p] = static_cast<T*>(a.dst) + (i0 + p) * a.istride;
    dft_columns<T, VB, PG, M>(static_cast<const T*>(a.e), static_cast<const T*>(a.text) + i0 * tstride,
                              tstride, a.rlist, a.rcount, a.wext, a.fw, a.u0, a.u1, a.sp0, a.pb, outs,
                              a.pstride);
}

// PG filters per group: 4, or 2 with the 4-way split (2*PG*M accumulators).
template <typename T, int VB, int M>
CONVCORE_ALWAYS_INLINE void dft_cols_m(const DftArgs& a) {
    constexpr int PG = M == 4 ? 2 : 4;
    int64_t i0 = 0;
    for (; i0 + PG <= a.count; i0 += PG) cols_group<T, VB, PG, M>(a, i0);
    switch (a.count - i0) {
        case 3: cols_group<T, VB, 3, M>(a, i0); break;
        case 2: cols_group<T, VB, 2, M>(a, i0); break;
        case 1: cols_group<T, VB, 1, M>(a, i0); break;
        default: break;
    }
}

template <typename T, int VB>
CONVCORE_ALWAYS_INLINE void dft_cols_all(const DftArgs& a) {
    if (a.m == 4)
        dft_cols_m<T, VB, 4>(a);
    else if (a.m == 2)
        dft_cols_m<T, VB, 2>(a);
    else
        dft_cols_m<T, VB, 1>(a);
}

template <typename T>
using ProductFn = void (*)(const Product<T>&, int64_t, int64_t);
using DftFn = void (*)(const DftArgs&);

template <typename T>
using ScatterFn = void (*)(const T*, const Layout<T>&, T*, int64_t);
template <typename T>
using GatherFn = void (*)(const T*, const Layout<T>&, int64_t, T*);

struct Kernels {
    ProductFn<float> f32;
    ProductFn<double> f64;
    DftFn rows32, rows64, cols32, cols64;
    ScatterFn<float> sc32;
    ScatterFn<double> sc64;
    GatherFn<float> ga32;
    GatherFn<double> ga64;
    const char* name;
};

#define CONVCORE_FFT_KERNELS(NAME, ATTR, VB, KW)                                      \
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
    ATTR void NAME##_rows32(const DftArgs& a) { dft_rows_all<float, VB>(a); }         \
    ATTR void NAME##_rows64(const DftArgs& a) { dft_rows_all<double, VB>(a); }        \
    ATTR void NAME##_cols32(const DftArgs& a) { dft_cols_all<float, VB>(a); }         \
    ATTR void NAME##_cols64(const DftArgs& a) { dft_cols_all<double, VB>(a); }        \
    ATTR void NAME##_sc32(const float* s, const Layout<float>& l, float* d, int64_t ps) {     \
        scatter_impl<float, VB>(s, l, d, ps);                                                 \
    }                                                                                         \
    ATTR void NAME##_sc64(const double* s, const Layout<double>& l, double* d, int64_t ps) {  \
        scatter_impl<double, VB>(s, l, d, ps);                                                \
    }                                                                                         \
    ATTR void NAME##_ga32(const float* s, const Layout<float>& l, int64_t ps, float* d) {     \
        gather_impl<float, VB>(s, l, ps, d);                                                  \
    }                                                                                         \
    ATTR void NAME##_ga64(const double* s, const Layout<double>& l, int64_t ps, double* d) {  \
        gather_impl<double, VB>(s, l, ps, d);                                                 \
    }                                                                                         \
    const Kernels NAME = {NAME##_f32,   NAME##_f64,    NAME##_rows32, NAME##_rows64,       \
                          NAME##_cols32, NAME##_cols64, NAME##_sc32,  NAME##_sc64,         \
                          NAME##_ga32,  NAME##_ga64,   #NAME};

// Registers: 2*MI*MK accumulators + 2*MI X + 2 W vectors: 8 filters x 1 (20 of 32 zmm) or
// 2 x 4 (26) on AVX-512; 4 x 1 or 2 x 2 (12-14 of 16) below it.
CONVCORE_FFT_KERNELS(baseline, , 16, 4)
#ifdef CONVCORE_X86_DISPATCH
CONVCORE_FFT_KERNELS(avx2, __attribute__((target("avx2,fma"))), 32, 4)
CONVCORE_FFT_KERNELS(avx512, __attribute__((target("avx512f,fma"))), 64, 8)
#endif

const Kernels& pick() {
#ifdef CONVCORE_X86_DISPATCH
    return for_cpu_isa(avx512, avx2, baseline);
#else
    return baseline;
#endif
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

template <>
void scatter_blocks<float>(const float* src, const Layout<float>& lay, float* dst, int64_t pstride) {
    kernels().sc32(src, lay, dst, pstride);
}
template <>
void scatter_blocks<double>(const double* src, const Layout<double>& lay, double* dst, int64_t pstride) {
    kernels().sc64(src, lay, dst, pstride);
}
template <>
void gather_blocks<float>(const float* src, const Layout<float>& lay, int64_t pstride, float* dst) {
    kernels().ga32(src, lay, pstride, dst);
}
template <>
void gather_blocks<double>(const double* src, const Layout<double>& lay, int64_t pstride, double* dst) {
    kernels().ga64(src, lay, pstride, dst);
}

// ---- direct filter spectra ------------------------------------------------------------------

template <typename T>
FilterDft<T>::FilterDft(int64_t lh, int64_t lw, int64_t r, int64_t s, int64_t dil_h, int64_t dil_w)
    : lh_(lw > 0 ? lh : 1), lw_(lw > 0 ? lw : lh), r_(r), s_(s), dh_(dil_h), dw_(dil_w) {
    constexpr int64_t B = block<T>();
    fw_ = lw_ / 2 + 1;
    f_ = lh_ * fw_;
    nb_ = padded<T>(f_) / B;
    wext_ = padded<T>(fw_ + B);
    // The M-way split needs Lh/M rows of the half spectrum to fill whole blocks.
    m_ = lh_ % (4 * B) == 0 ? 4 : lh_ % (2 * B) == 0 ? 2 : 1;
}

template <typename T>
double FilterDft<T>::table_elems() const {
    return double(nb_ / m_) * double(r_) * 2.0 * double(block<T>()) + double(s_) * 2.0 * double(wext_) +
           double(r_) * double(sizeof(int64_t)) / double(sizeof(T));
}

template <typename T>
void FilterDft<T>::init(T* tables) {
    constexpr int64_t B = block<T>();
    e_ = tables;
    d_ = tables + nb_ / m_ * r_ * 2 * B;
    rlist_ = reinterpret_cast<int64_t*>(d_ + s_ * 2 * wext_);  // 64-byte aligned: wext_ is whole blocks
    int64_t listed = 0;
    for (int64_t q = 0; q < 4; ++q) rcount_[q] = 0;
    for (int64_t q = 0; q < m_; ++q)
        for (int64_t i = 0; i < r_; ++i)
            if (i * dh_ % m_ == q) {
                rlist_[listed++] = i;
                ++rcount_[q];
            }
    const double two_pi = 6.283185307179586476925286766559;
    // exp(-2 pi i m / n) for m < n, in double, then rounded to T
    auto root = [&](int64_t m, int64_t n, T* re, T* im) {
        const double a = two_pi * double(m) / double(n);
        *re = T(std::cos(a));
        *im = T(-std::sin(a));
    };
    std::vector<T>& rh = thread_vector<T, RowRoots>(size_t(2 * lh_));
    std::vector<T>& rw = thread_vector<T, ColumnRoots>(size_t(2 * lw_));
    for (int64_t m = 0; m < lh_; ++m) root(m, lh_, &rh[2 * m], &rh[2 * m + 1]);
    for (int64_t m = 0; m < lw_; ++m) root(m, lw_, &rw[2 * m], &rw[2 * m + 1]);
    for (int64_t b = 0; b < nb_ / m_; ++b)
        for (int64_t r = 0; r < r_; ++r)
            for (int64_t l = 0; l < B; ++l) {
                const int64_t f = b * B + l;
                T* e = e_ + (b * r_ + r) * 2 * B + l;
                if (f >= f_) {
                    e[0] = e[B] = T(0);
                    continue;
                }
                const int64_t m = (f / fw_) * (r * dh_ % lh_) % lh_;
                e[0] = rh[2 * m];
                e[B] = rh[2 * m + 1];
            }
    for (int64_t s = 0; s < s_; ++s)
        for (int64_t j = 0; j < wext_; ++j) {
            const int64_t m = (j % fw_) * (s * dw_ % lw_) % lw_;
            const bool zero = lh_ == 1 && r_ == 1 && j >= fw_;  // rank 1: zero padding lanes
            d_[s * 2 * wext_ + j] = zero ? T(0) : rw[2 * m];
            d_[s * 2 * wext_ + wext_ + j] = zero ? T(0) : rw[2 * m + 1];
        }
}

namespace {
template <typename T>
void call_rows(const DftArgs& a) {
    if (sizeof(T) == 4)
        kernels().rows32(a);
    else
        kernels().rows64(a);
}
template <typename T>
void call_cols(const DftArgs& a) {
    if (sizeof(T) == 4)
        kernels().cols32(a);
    else
        kernels().cols64(a);
}
}  // namespace

template <typename T>
void FilterDft<T>::rows(const T* taps, int64_t count, bool flip, T* text) const {
    DftArgs a{};
    a.count = count, a.r = r_, a.s = s_, a.wext = wext_, a.fw = fw_, a.d = d_;
    a.taps = taps, a.flip = flip, a.direct = false, a.text = text;
    call_rows<T>(a);
}

template <typename T>
void FilterDft<T>::run(const T* taps, int64_t count, bool flip, const Layout<T>& lay, T* dst,
                       int64_t istride, int64_t pstride) const {
    DftArgs a{};
    a.r = r_, a.s = s_, a.wext = wext_, a.fw = fw_, a.d = d_, a.flip = flip;
    a.e = e_, a.m = m_, a.rlist = rlist_, a.rcount = rcount_;
    a.u0 = 0, a.u1 = nb_ / m_, a.sp0 = 0, a.pb = lay.pb, a.pstride = pstride;
    if (lh_ == 1 && r_ == 1) {  // rank 1: the row spectrum is the output
        a.count = count, a.taps = taps, a.direct = true, a.dst = dst, a.istride = istride;
        a.u1 = nb_;
        call_rows<T>(a);
        return;
    }
    constexpr int64_t G = 16;  // filters per pass through the scratch
    T* text = scratch<T>(size_t(G * text_elems()), 1);
    for (int64_t i0 = 0; i0 < count; i0 += G) {
        const int64_t g = std::min(G, count - i0);
        rows(taps + i0 * r_ * s_, g, flip, text);
        a.count = g, a.text = text, a.dst = dst + i0 * istride, a.istride = istride;
        call_cols<T>(a);
    }
}

template class FilterDft<float>;
template class FilterDft<double>;

}  // namespace fftc
}  // namespace cpu
}  // namespace convcore
