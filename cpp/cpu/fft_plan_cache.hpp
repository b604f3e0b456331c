// Shared helpers of the CPU FFT family (FFT, FFT_TILING, FINE_GRAINED_FFT, POLY_HANKEL):
//
//  * FFTW plans cached per shape. FFTW's planner is not thread-safe, so planning (and plan
//    destruction) happens under one mutex; executing a plan on new arrays
//    (fftw_execute_dft_r2c / _c2r) is thread-safe and is what the solvers do, from many
//    OpenMP threads at once. Plans are made with FFTW_ESTIMATE: planning costs microseconds,
//    so a new shape never stalls a call (FFTW_MEASURE took 0.1-1.7 s per shape here and its
//    plans were not measurably faster on this machine's FFTW build, which has SSE2/AVX
//    codelets only). Every transform is in place on 64-byte-aligned planes carved from the
//    caller's workspace, so FFTW never allocates during a call.
//  * The spectrum layout the products work on: a plane of F complex values is stored as
//    blocks of B complex numbers (B = 64 bytes / sizeof(T): 16 floats, 8 doubles), each block
//    holding B real parts then B imaginary parts ("block-split"), padded to Fp = roundup(F, B)
//    with zeros. FFTW writes interleaved complex; to_blocks / from_blocks convert in place.
//  * The frequency-domain product, a complex "GEMM" over a reduction index:
//      Y(i, k) = sum_{c < nc} sum_{r < nr} X(i, c, r) * op(W(k, c, r)),  op = conj or identity,
//    per frequency, on block-split spectra, with register-tiled micro-kernels compiled for
//    AVX-512, AVX2+FMA and baseline SSE2 (the widest the CPU runs; CONVCORE_CPU_ISA=avx2 or
//    baseline caps it, as for IMPLICIT_GEMM).
//  * FFT sizes (2^a 3^b 5^c 7^d), workspace carving with 64-byte alignment of every section
//    (the caller's base may be only 16-byte aligned: the solvers ask for 64 bytes of slack and
//    align the base themselves), and the workspace cap.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace convcore {
namespace cpu {
namespace fftc {

// ---- sizes ------------------------------------------------------------------------------

// Smallest m >= n of the form 2^a 3^b 5^c 7^d (even when `even`).
int64_t good_size(int64_t n, bool even = false);

// Complex numbers per block of the block-split layout.
template <typename T>
constexpr int64_t block() {
    return int64_t(64 / sizeof(T));
}
// F rounded up to whole blocks.
template <typename T>
constexpr int64_t padded(int64_t f) {
    return (f + block<T>() - 1) / block<T>() * block<T>();
}

// Above this many bytes of workspace the FFT solvers say NOT_SUPPORTED.
constexpr size_t kWorkspaceCap = size_t(4) << 30;  // 4 GiB
// "<ALGO> would need 12.3 GB of workspace for this problem (the cap is 4 GiB)".
std::string too_big(const char* algo, double bytes);

// Carves 64-byte-aligned sections; total() includes 64 bytes of slack for aligning the base.
class Carver {
   public:
    // Reserves `count` elements of `elem` bytes; returns the section's offset from the base.
    size_t add(double count, size_t elem);
    double total() const { return double(end_) + 64.0; }
    bool overflow() const { return overflow_; }

   private:
    size_t end_ = 0;
    bool overflow_ = false;
};
// The 64-byte-aligned base of a workspace sized by Carver::total().
inline char* aligned_base(void* ws) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ws);
    return reinterpret_cast<char*>((p + 63) & ~uintptr_t(63));
}

// ---- FFTW plans ---------------------------------------------------------------------------

// `howmany` in-place real transforms of rank 1 (n1 == 0: length n0) or rank 2 (n0 x n1),
// consecutive transforms `dist` complex numbers apart (dist >= the transform's n/2+1 layout).
// Forward: real -> half spectrum (r2c). Backward: half spectrum -> real (c2r, unnormalised,
// destroys its input).
template <typename T>
class Plan {
   public:
    struct Impl;
    explicit Plan(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
    // In place on data (64-byte aligned, dist * howmany complex numbers).
    void forward(T* data) const;
    void backward(T* data) const;

   private:
    std::shared_ptr<Impl> impl_;
};
template <typename T>
Plan<T> get_plan(int64_t n0, int64_t n1, int64_t howmany, int64_t dist);

// Interleaved complex (FFTW's output, f complex numbers) -> block-split, zero-padded to
// padded<T>(f) complex; and back. In place.
template <typename T>
void to_blocks(T* data, int64_t f);
template <typename T>
void from_blocks(T* data, int64_t f);

// ---- the frequency-domain product ---------------------------------------------------------

// Offsets (in elements of T) between consecutive spectra along each index; a spectrum is
// block-split, and block b of it starts b * 2 * block<T>() elements in.
template <typename T>
struct Product {
    const T* x;
    int64_t x_i, x_c, x_r;
    const T* w;
    int64_t w_k, w_c, w_r;
    T* y;
    int64_t y_i, y_k;
    int64_t ni, nk, nc, nr;
    bool conj_w;  // multiply by conj(W) (cross-correlation) instead of W
};
// Blocks [b0, b1) of every Y(i, k) of the product (overwritten).
template <typename T>
void product(const Product<T>& p, int64_t b0, int64_t b1);

// The instruction set the product kernels use ("avx512", "avx2" or "baseline").
const char* product_isa();

}  // namespace fftc
}  // namespace cpu
}  // namespace convcore
