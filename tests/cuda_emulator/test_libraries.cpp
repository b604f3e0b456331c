// The cuBLAS and cuFFT stand-ins: results against naive loops in the layouts convcore uses, the
// documented error codes, and the contract violations that abort.
#include <gtest/gtest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

namespace {

template <typename T>
struct Device {
    T* ptr = nullptr;
    size_t count = 0;
    explicit Device(size_t n) : count(n) { EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess); }
    explicit Device(const std::vector<T>& host) : Device(host.size()) { upload(host); }
    ~Device() { EXPECT_EQ(cudaFree(ptr), cudaSuccess); }
    void upload(const std::vector<T>& host) {
        EXPECT_EQ(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    std::vector<T> to_host() const {
        std::vector<T> host(count);
        EXPECT_EQ(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return host;
    }
};

template <typename T>
std::vector<T> random_values(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<T> v(n);
    for (auto& x : v) {
        if constexpr (std::is_floating_point_v<T>)
            x = T(u(rng));
        else
            x = T{decltype(x.x)(u(rng)), decltype(x.x)(u(rng))};
    }
    return v;
}

// ---- cuBLAS ---------------------------------------------------------------------------------------
struct Handle {
    cublasHandle_t h = nullptr;
    Handle() { EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS); }
    ~Handle() { EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS); }
};

std::complex<double> as_std(cuComplex v) { return {v.x, v.y}; }
std::complex<double> as_std(cuDoubleComplex v) { return {v.x, v.y}; }
double as_std(float v) { return v; }
double as_std(double v) { return v; }

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const float* alpha, const float* A, int lda, long long sa, const float* B, int ldb, long long sb,
                    const float* beta, float* C, int ldc, long long sc, int batch) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const double* alpha, const double* A, int lda, long long sa, const double* B, int ldb,
                    long long sb, const double* beta, double* C, int ldc, long long sc, int batch) {
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const cuComplex* alpha, const cuComplex* A, int lda, long long sa, const cuComplex* B, int ldb,
                    long long sb, const cuComplex* beta, cuComplex* C, int ldc, long long sc, int batch) {
    return cublasCgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const cuDoubleComplex* alpha, const cuDoubleComplex* A, int lda, long long sa,
                    const cuDoubleComplex* B, int ldb, long long sb, const cuDoubleComplex* beta, cuDoubleComplex* C,
                    int ldc, long long sc, int batch) {
    return cublasZgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

template <typename T>
T scalar(double v) {
    if constexpr (std::is_floating_point_v<T>)
        return T(v);
    else
        return T{decltype(T{}.x)(v), decltype(T{}.x)(0.25 * v)};
}

template <typename T>
class CublasStandIn : public ::testing::Test {};
using GemmTypes = ::testing::Types<float, double, cuComplex, cuDoubleComplex>;
TYPED_TEST_SUITE(CublasStandIn, GemmTypes);

// Every op pair, padded leading dimensions, strided batches; beta 0 on a NaN-filled C (never
// read) and beta != 0.
TYPED_TEST(CublasStandIn, StridedBatchedGemmMatchesNaiveLoops) {
    using T = TypeParam;
    using V = decltype(as_std(T{}));
    const int m = 5, n = 4, k = 3, batch = 3;
    const bool complex = !std::is_floating_point_v<T>;
    Handle handle;
    for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
        for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T})
            for (double beta_value : {0.0, 0.5}) {
                const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
                const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
                const int lda = a_rows + 1, ldb = b_rows + 2, ldc = m + 1;
                const long long sa = lda * a_cols + 3, sb = ldb * b_cols, sc = ldc * n + 1;
                const auto a = random_values<T>(sa * batch, 1), b = random_values<T>(sb * batch, 2);
                const auto c0 = random_values<T>(sc * batch, 3);
                Device<T> da(a), db(b), dc(sc * batch);  // dc: NaN (0xFF bytes) until written
                if (beta_value != 0) dc.upload(c0);
                const T alpha = scalar<T>(1.5), beta = scalar<T>(beta_value);
                ASSERT_EQ(gemm(handle.h, ta, tb, m, n, k, &alpha, da.ptr, lda, sa, db.ptr, ldb, sb, &beta, dc.ptr,
                               ldc, sc, batch),
                          CUBLAS_STATUS_SUCCESS);
                const auto c = dc.to_host();
                const auto op = [&](cublasOperation_t o, const T* x, int ld, int r, int col) {
                    const V v = o == CUBLAS_OP_N ? as_std(x[r + col * ld]) : as_std(x[col + r * ld]);
                    if constexpr (!std::is_floating_point_v<V>)
                        if (o == CUBLAS_OP_C) return std::conj(v);
                    return v;
                };
                for (int e = 0; e < batch; ++e)
                    for (int j = 0; j < n; ++j)
                        for (int i = 0; i < m; ++i) {
                            V sum = 0;
                            for (int p = 0; p < k; ++p)
                                sum += op(ta, a.data() + e * sa, lda, i, p) * op(tb, b.data() + e * sb, ldb, p, j);
                            V expected = as_std(alpha) * sum;
                            if (beta_value != 0) expected += as_std(beta) * as_std(c0[e * sc + i + j * ldc]);
                            const double tol = sizeof(T) / (complex ? 2 : 1) == 4 ? 1e-5 : 1e-12;
                            EXPECT_NEAR(std::abs(as_std(c[e * sc + i + j * ldc]) - expected), 0, tol)
                                << "batch " << e << " (" << i << ", " << j << ") ops " << ta << tb;
                        }
                // beta 0: the padding between C's columns stays as cudaMalloc left it (NaN).
                if (beta_value == 0) EXPECT_NE(as_std(c[m]), as_std(c[m]));
            }
}

TEST(CublasStandIn, InvalidValuesAreReturned) {
    Handle handle;
    Device<float> a(64), b(64), c(64);
    const float one = 1, zero = 0;
    const auto call = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc, int batch) {
        return cublasSgemmStridedBatched(handle.h, ta, CUBLAS_OP_N, m, n, k, &one, a.ptr, lda, 0, b.ptr, ldb, 0,
                                         &zero, c.ptr, ldc, 0, batch);
    };
    EXPECT_EQ(call(CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, 1), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(call(CUBLAS_OP_N, -1, 2, 2, 2, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(call(CUBLAS_OP_N, 2, -1, 2, 2, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(call(CUBLAS_OP_N, 2, 2, -1, 2, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(call(CUBLAS_OP_N, 2, 2, 2, 2, 2, 2, -1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(call(CUBLAS_OP_N, 3, 2, 2, 2, 3, 3, 1), CUBLAS_STATUS_INVALID_VALUE);  // lda < m
    EXPECT_EQ(call(CUBLAS_OP_T, 3, 2, 2, 1, 3, 3, 1), CUBLAS_STATUS_INVALID_VALUE);  // lda < k
    EXPECT_EQ(call(CUBLAS_OP_N, 2, 2, 3, 2, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
    EXPECT_EQ(call(CUBLAS_OP_N, 3, 2, 2, 3, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
    EXPECT_EQ(call(CUBLAS_OP_N, 0, 2, 2, 0, 2, 0, 1), CUBLAS_STATUS_INVALID_VALUE);  // ld < 1
    EXPECT_EQ(call(CUBLAS_OP_N, 0, 2, 2, 1, 2, 1, 1), CUBLAS_STATUS_SUCCESS);        // empty: nothing read
    EXPECT_EQ(call(static_cast<cublasOperation_t>(3), 2, 2, 2, 2, 2, 2, 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
    cublasHandle_t destroyed = nullptr;
    ASSERT_EQ(cublasCreate(&destroyed), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasDestroy(destroyed), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetStream(destroyed, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
}

class LibraryStandInDeathTest : public ::testing::Test {
   protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(LibraryStandInDeathTest, GemmOperandOutsideItsAllocation) {
    Handle handle;
    Device<float> a(16), b(16), c(16);
    const float one = 1, zero = 0;
    std::vector<float> host(16);
    // 4 x 4 fits; a second batch entry (stride 16) does not.
    EXPECT_DEATH((void)cublasSgemmStridedBatched(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.ptr, 4, 16,
                                                 b.ptr, 4, 0, &zero, c.ptr, 4, 0, 2),
                 "A spans bytes \\[0, 128\\) of its device allocation of 64 bytes");
    EXPECT_DEATH((void)cublasSgemmStridedBatched(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.ptr, 4, 0,
                                                 b.ptr, 4, 0, &zero, c.ptr, 5, 0, 1),
                 "C spans");
    EXPECT_DEATH((void)cublasSgemmStridedBatched(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, host.data(), 4,
                                                 0, b.ptr, 4, 0, &zero, c.ptr, 4, 0, 1),
                 "A .* is not in device memory");
    EXPECT_DEATH(
        {
            (void)cublasSetPointerMode(handle.h, CUBLAS_POINTER_MODE_DEVICE);
            (void)cublasSgemmStridedBatched(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.ptr, 4, 0, b.ptr, 4,
                                            0, &zero, c.ptr, 4, 0, 1);
        },
        "CUBLAS_POINTER_MODE_DEVICE is not emulated");
}

// ---- cuFFT ----------------------------------------------------------------------------------------
struct FftPlan {
    cufftHandle h = 0;
    size_t work = 0;
    FftPlan(int rank, std::vector<long long> n, std::vector<long long> in_embed, long long istride, long long idist,
            std::vector<long long> out_embed, long long ostride, long long odist, cufftType type, long long batch,
            bool auto_allocate = false) {
        EXPECT_EQ(cufftCreate(&h), CUFFT_SUCCESS);
        EXPECT_EQ(cufftSetAutoAllocation(h, auto_allocate), CUFFT_SUCCESS);
        EXPECT_EQ(cufftMakePlanMany64(h, rank, n.data(), in_embed.data(), istride, idist, out_embed.data(), ostride,
                                      odist, type, batch, &work),
                  CUFFT_SUCCESS);
    }
    ~FftPlan() { EXPECT_EQ(cufftDestroy(h), CUFFT_SUCCESS); }
};

std::complex<double> dft_bin(const std::vector<double>& x, long long n0, long long n1, long long k0, long long k1) {
    std::complex<double> s = 0;
    for (long long a = 0; a < n0; ++a)
        for (long long b = 0; b < n1; ++b)
            s += x[a * n1 + b] * std::polar(1.0, -2 * M_PI * (double(k0 * a) / n0 + double(k1 * b) / n1));
    return s;
}

cufftResult cufftExecR2C_or_D2Z(cufftHandle h, float* in, cufftComplex* out) { return cufftExecR2C(h, in, out); }
cufftResult cufftExecR2C_or_D2Z(cufftHandle h, double* in, cufftDoubleComplex* out) { return cufftExecD2Z(h, in, out); }
cufftResult cufftExecC2R_or_Z2D(cufftHandle h, cufftComplex* in, float* out) { return cufftExecC2R(h, in, out); }
cufftResult cufftExecC2R_or_Z2D(cufftHandle h, cufftDoubleComplex* in, double* out) { return cufftExecZ2D(h, in, out); }

// convcore's frequency-major layout: R2C writes frequency f of transform b at f * batch + b;
// C2R reads it back and returns n0 * n1 times the input.
template <typename Real>
void check_round_trip(int rank, long long n0, long long n1) {
    using C = std::conditional_t<sizeof(Real) == 4, cufftComplex, cufftDoubleComplex>;
    const cufftType fwd = sizeof(Real) == 4 ? CUFFT_R2C : CUFFT_D2Z, inv = sizeof(Real) == 4 ? CUFFT_C2R : CUFFT_Z2D;
    const long long batch = 3, rows = rank == 2 ? n0 : 1, cols = rank == 2 ? n1 : n0, half = cols / 2 + 1;
    const long long points = rows * cols, spectrum = rows * half;
    std::vector<long long> n = {n0, n1}, real_embed = {n0, n1}, cplx_embed = {rank == 2 ? n0 : n0 / 2 + 1, n1 / 2 + 1};
    FftPlan forward(rank, n, real_embed, 1, points, cplx_embed, batch, 1, fwd, batch);
    FftPlan inverse(rank, n, cplx_embed, batch, 1, real_embed, 1, points, inv, batch);
    ASSERT_GT(forward.work, 0u);
    const auto x = random_values<Real>(points * batch, 4);
    Device<Real> dx(x), dy(points * batch);
    Device<C> spec(spectrum * batch);
    Device<unsigned char> work(std::max(forward.work, inverse.work));
    ASSERT_EQ(cufftSetWorkArea(forward.h, work.ptr), CUFFT_SUCCESS);
    ASSERT_EQ(cufftSetWorkArea(inverse.h, work.ptr), CUFFT_SUCCESS);
    ASSERT_EQ(cufftExecR2C_or_D2Z(forward.h, dx.ptr, spec.ptr), CUFFT_SUCCESS);
    const auto s = spec.to_host();
    const double tol = sizeof(Real) == 4 ? 1e-4 : 1e-10;
    for (long long b = 0; b < batch; ++b) {
        const std::vector<double> xb(x.begin() + b * points, x.begin() + (b + 1) * points);
        for (long long f = 0; f < spectrum; ++f) {
            const auto expected = dft_bin(xb, rows, cols, f / half, f % half);
            EXPECT_NEAR(s[f * batch + b].x, expected.real(), tol * points);
            EXPECT_NEAR(s[f * batch + b].y, expected.imag(), tol * points);
        }
    }
    ASSERT_EQ(cufftExecC2R_or_Z2D(inverse.h, spec.ptr, dy.ptr), CUFFT_SUCCESS);
    const auto y = dy.to_host();
    for (long long i = 0; i < points * batch; ++i) EXPECT_NEAR(y[i], x[i] * points, tol * points) << i;
    // The complex-to-real transform destroyed its input.
    for (const C& v : spec.to_host()) EXPECT_TRUE(std::isnan(v.x));
}

TEST(CufftStandIn, RoundTripsInFrequencyMajorLayout) {
    check_round_trip<float>(1, 8, 1);
    check_round_trip<float>(1, 7, 1);
    check_round_trip<float>(2, 6, 5);
    check_round_trip<double>(1, 9, 1);
    check_round_trip<double>(2, 4, 8);
}

TEST(CufftStandIn, DocumentedErrorsAreReturned) {
    cufftHandle h = 0;
    ASSERT_EQ(cufftCreate(&h), CUFFT_SUCCESS);
    size_t work = 0;
    long long n[2] = {0, 4}, embed[2] = {4, 4};
    EXPECT_EQ(cufftMakePlanMany64(h, 1, n, embed, 1, 4, embed, 1, 3, CUFFT_R2C, 1, &work), CUFFT_INVALID_SIZE);
    n[0] = 4;
    EXPECT_EQ(cufftMakePlanMany64(h, 1, n, embed, 1, 4, embed, 1, 3, CUFFT_R2C, 0, &work), CUFFT_INVALID_SIZE);
    EXPECT_EQ(cufftMakePlanMany64(h, 1, n, embed, 1, 4, embed, 1, 3, static_cast<cufftType>(1), 1, &work),
              CUFFT_INVALID_TYPE);
    EXPECT_EQ(cufftExecR2C(h, nullptr, nullptr), CUFFT_INVALID_PLAN);  // no plan made yet
    EXPECT_EQ(cufftDestroy(h), CUFFT_SUCCESS);
    EXPECT_EQ(cufftDestroy(h), CUFFT_INVALID_PLAN);
    EXPECT_EQ(cufftSetStream(12345, nullptr), CUFFT_INVALID_PLAN);
}

TEST_F(LibraryStandInDeathTest, FftContractViolations) {
    std::vector<long long> n = {8, 1}, real = {8, 1}, cplx = {5, 1};
    Device<float> x(8 * 2);
    Device<cufftComplex> y(5 * 2);
    {
        FftPlan p(1, n, real, 1, 8, cplx, 1, 5, CUFFT_R2C, 2);
        EXPECT_DEATH((void)cufftExecR2C(p.h, x.ptr, y.ptr), "none is set");
        Device<unsigned char> small(p.work - 1);
        ASSERT_EQ(cufftSetWorkArea(p.h, small.ptr), CUFFT_SUCCESS);
        EXPECT_DEATH((void)cufftExecR2C(p.h, x.ptr, y.ptr), "does not hold the plan's");
        Device<unsigned char> both(p.work + 8 * 2 * sizeof(float));
        ASSERT_EQ(cufftSetWorkArea(p.h, both.ptr), CUFFT_SUCCESS);
        EXPECT_DEATH((void)cufftExecR2C(p.h, reinterpret_cast<float*>(both.ptr + p.work - 4), y.ptr),
                     "overlaps the input");
    }
    {
        FftPlan p(1, n, real, 1, 8, cplx, 1, 5, CUFFT_R2C, 3, /*auto_allocate=*/true);  // 3 transforms, room for 2
        EXPECT_DEATH((void)cufftExecR2C(p.h, x.ptr, y.ptr), "the input spans 96 bytes");
    }
    {
        FftPlan p(1, n, real, 1, 8, cplx, 1, 4, CUFFT_R2C, 2, true);  // odist 4 < 5 bins
        EXPECT_DEATH((void)cufftExecR2C(p.h, x.ptr, y.ptr), "two transforms write output element 4");
    }
    cufftHandle h = 0;
    ASSERT_EQ(cufftCreate(&h), CUFFT_SUCCESS);
    size_t work = 0;
    EXPECT_DEATH((void)cufftMakePlanMany64(h, 1, n.data(), real.data(), 1, 8, real.data(), 1, 8, CUFFT_C2C, 1, &work),
                 "C2C plans are not emulated");
    long long n2[2] = {4, 6}, short_rows[2] = {4, 3}, e[2] = {4, 6};
    EXPECT_DEATH((void)cufftMakePlanMany64(h, 2, n2, e, 1, 24, short_rows, 1, 12, CUFFT_R2C, 1, &work),
                 "embed\\[1\\]");
    EXPECT_EQ(cufftDestroy(h), CUFFT_SUCCESS);
}

}  // namespace
