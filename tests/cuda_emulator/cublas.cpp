// The cuBLAS stand-in (include/cublas_v2.h): strided-batched GEMMs with reference loops on the
// emulated device. What the documentation makes an error comes back as the real status; what
// would be undefined on a GPU (an operand outside its allocation) aborts; what is not
// implemented (device pointer mode) aborts.
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <complex>
#include <mutex>
#include <set>
#include <type_traits>
#include <vector>

#include "cuda_emulator/engine.hpp"
#include "internal.hpp"

namespace cuda_emulator {
extern std::atomic<long long> g_cublas_handles;  // runtime.cpp: call_counts
}

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
    cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

std::mutex handles_mutex;
std::set<cublasHandle_t>& live_handles() {
    static auto* handles = new std::set<cublasHandle_t>;
    return *handles;
}
bool is_live(cublasHandle_t h) {
    std::lock_guard<std::mutex> lock(handles_mutex);
    return live_handles().count(h) != 0;
}

// Element j of operand x (column-major, leading dimension ld, transposed when op != N).
template <typename T>
T element(const T* x, long long ld, cublasOperation_t op, long long row, long long col) {
    if (op == CUBLAS_OP_N) return x[row + col * ld];
    const T v = x[col + row * ld];
    if constexpr (!std::is_floating_point_v<T>) {
        if (op == CUBLAS_OP_C) return std::conj(v);
    }
    return v;
}

// Aborts unless the rows x cols matrices of all batch entries (leading dimension ld, stride
// between entries) lie inside the device allocation that `base` points into.
void check_footprint(const char* function, const char* operand, const void* base, size_t element_bytes,
                     long long rows, long long cols, long long ld, long long stride, int batch) {
    if (rows <= 0 || cols <= 0 || batch <= 0) return;
    const long long last = (cols - 1) * ld + rows - 1;
    const long long lo = std::min(0LL, (batch - 1) * stride), hi = last + std::max(0LL, (batch - 1) * stride);
    const auto* p = static_cast<const unsigned char*>(base);
    cuda_emulator::Allocation a;
    if (!cuda_emulator::find_allocation(base, &a))
        cuda_emulator::fail("%s: %s (%p) is not in device memory", function, operand, base);
    const unsigned char* first = p + lo * static_cast<long long>(element_bytes);
    const unsigned char* end = p + (hi + 1) * static_cast<long long>(element_bytes);
    if (first < a.base || end > a.base + a.size)
        cuda_emulator::fail("%s: %s spans bytes [%lld, %lld) of its device allocation of %zu bytes "
                            "(%lld x %lld, ld %lld, stride %lld, batch %d)",
                            function, operand, static_cast<long long>(first - a.base),
                            static_cast<long long>(end - a.base), a.size, rows, cols, ld, stride, batch);
}

// T: float, double, std::complex<float> or std::complex<double>; Api: the type in the signature.
template <typename T, typename Api>
cublasStatus_t gemm_strided_batched(const char* function, cublasHandle_t h, cublasOperation_t ta,
                                    cublasOperation_t tb, int m, int n, int k, const Api* alpha_p, const Api* A,
                                    int lda, long long sa, const Api* B, int ldb, long long sb, const Api* beta_p,
                                    Api* C, int ldc, long long sc, int batch) {
    static_assert(sizeof(T) == sizeof(Api));
    cuda_emulator::detail::require_host(function);
    if (!is_live(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const auto valid_op = [](cublasOperation_t op) {
        return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
    };
    if (!valid_op(ta) || !valid_op(tb)) return CUBLAS_STATUS_INVALID_VALUE;
    const long long a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    const long long b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1LL, a_rows) || ldb < std::max(1LL, b_rows) ||
        ldc < std::max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (h->pointer_mode != CUBLAS_POINTER_MODE_HOST)
        cuda_emulator::fail("%s: CUBLAS_POINTER_MODE_DEVICE is not emulated", function);
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    if (!alpha_p || !beta_p) return CUBLAS_STATUS_INVALID_VALUE;
    if (cuda_emulator::find_allocation(alpha_p, nullptr) || cuda_emulator::find_allocation(beta_p, nullptr))
        cuda_emulator::fail("%s: alpha or beta in device memory under CUBLAS_POINTER_MODE_HOST", function);
    const T alpha = *reinterpret_cast<const T*>(alpha_p), beta = *reinterpret_cast<const T*>(beta_p);
    const bool reads_ab = k > 0 && alpha != T(0);
    const cuda_emulator::DeviceMemoryAccess access;
    if (reads_ab) {
        check_footprint(function, "A", A, sizeof(T), a_rows, a_cols, lda, sa, batch);
        check_footprint(function, "B", B, sizeof(T), b_rows, b_cols, ldb, sb, batch);
    }
    check_footprint(function, "C", C, sizeof(T), m, n, ldc, sc, batch);
    const T* a = reinterpret_cast<const T*>(A);
    const T* b = reinterpret_cast<const T*>(B);
    T* c = reinterpret_cast<T*>(C);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::complex<double>>;
    for (long long e = 0; e < batch; ++e) {
        const T* ae = a + e * sa;
        const T* be = b + e * sb;
        T* ce = c + e * sc;
        for (long long j = 0; j < n; ++j) {
            for (long long i = 0; i < m; ++i) {
                Acc sum = 0;
                if (reads_ab)
                    for (long long p = 0; p < k; ++p)
                        sum += Acc(element(ae, lda, ta, i, p)) * Acc(element(be, ldb, tb, p, j));
                T& out = ce[i + j * ldc];
                // beta == 0: C is not read (it may hold NaN).
                out = beta == T(0) ? T(alpha * T(sum)) : T(alpha * T(sum) + beta * out);
            }
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    cuda_emulator::detail::require_host("cublasCreate");
    cuda_emulator::g_cublas_handles.fetch_add(1);
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext;
    std::lock_guard<std::mutex> lock(handles_mutex);
    live_handles().insert(*handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    cuda_emulator::detail::require_host("cublasDestroy");
    {
        std::lock_guard<std::mutex> lock(handles_mutex);
        if (live_handles().erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!cuda_emulator::detail::is_live_stream(stream))
        cuda_emulator::fail("cublasSetStream: %p is not a live stream", static_cast<void*>(stream));
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!is_live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
        case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
        case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long sa,
                                         const float* B, int ldb, long long sb, const float* beta, float* C, int ldc,
                                         long long sc, int batch) {
    return gemm_strided_batched<float>("cublasSgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb,
                                       sb, beta, C, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* A, int lda, long long sa,
                                         const double* B, int ldb, long long sb, const double* beta, double* C,
                                         int ldc, long long sc, int batch) {
    return gemm_strided_batched<double>("cublasDgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb,
                                        sb, beta, C, ldc, sc, batch);
}
cublasStatus_t cublasCgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const cuComplex* alpha, const cuComplex* A, int lda, long long sa,
                                         const cuComplex* B, int ldb, long long sb, const cuComplex* beta,
                                         cuComplex* C, int ldc, long long sc, int batch) {
    return gemm_strided_batched<std::complex<float>>("cublasCgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, lda,
                                                     sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t cublasZgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const cuDoubleComplex* alpha, const cuDoubleComplex* A, int lda,
                                         long long sa, const cuDoubleComplex* B, int ldb, long long sb,
                                         const cuDoubleComplex* beta, cuDoubleComplex* C, int ldc, long long sc,
                                         int batch) {
    return gemm_strided_batched<std::complex<double>>("cublasZgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, lda,
                                                      sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
