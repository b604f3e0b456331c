// The emulated CUDA device's engine and runtime: kernels written as CUDA kernels, launched with
// CONVCORE_LAUNCH (cpp/cuda/launch.hpp), checked on the host.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "cuda/launch.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_WITH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_WITH_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TEST_WITH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_WITH_TSAN 1
#endif
#endif

namespace {

// ---- helpers -------------------------------------------------------------------------------------
template <typename T>
struct DeviceBuffer {
    T* ptr = nullptr;
    size_t count = 0;
    explicit DeviceBuffer(size_t n) : count(n) { EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess); }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
        EXPECT_EQ(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ~DeviceBuffer() { EXPECT_EQ(cudaFree(ptr), cudaSuccess); }
    std::vector<T> to_host() const {
        std::vector<T> host(count);
        EXPECT_EQ(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return host;
    }
};

// What convcore's grid_blocks does: enough blocks for n threads, capped at a few waves.
unsigned int grid_blocks(int64_t n, int threads) {
    cudaDeviceProp prop{};
    EXPECT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    const int64_t cap = int64_t(prop.multiProcessorCount) * (prop.maxThreadsPerMultiProcessor / threads) * 4;
    return unsigned(std::max<int64_t>(1, std::min((n + threads - 1) / threads, cap)));
}

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// ---- kernels ---------------------------------------------------------------------------------------
// Block-wide tree reduction with a barrier inside the loop (direct_backward.cu's block_sum).
template <int kThreads>
__global__ void block_sum_kernel(const double* __restrict__ x, double* __restrict__ sums) {
    CONVCORE_SHARED(double[kThreads], partial);
    partial[threadIdx.x] = x[blockIdx.x * kThreads + threadIdx.x];
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// A grid-stride loop: y = 2x, and how many elements the writing thread had done before.
__global__ void grid_stride_kernel(const float* x, float* y, int* round, int64_t n) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    int r = 0;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step, ++r) {
        y[i] = 2 * x[i];
        round[i] = r;
    }
}

// Reads shared memory before writing it: sees what the block started with.
__global__ void shared_before_write_kernel(float* seen) {
    CONVCORE_SHARED_ALIGNED(16, float[128], scratch);
    seen[blockIdx.x * blockDim.x + threadIdx.x] = scratch[threadIdx.x];
    __syncthreads();
    scratch[threadIdx.x] = 1.0f;  // a later block on this worker must not see it
}

__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x < 32) __syncthreads();  // half the block skips the barrier
    out[threadIdx.x] = 1;
}

__global__ void uneven_barrier_count_kernel(int* out) {
    for (unsigned i = 0; i <= threadIdx.x % 2; ++i) __syncthreads();  // 1 or 2 barriers
    out[threadIdx.x] = 1;
}

__global__ void fill_kernel(int* out, int value) {
    const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    out[block * blockDim.x + threadIdx.x] = value;
}

__global__ void write_unless_null_kernel(int* out) {
    if (out) out[threadIdx.x] = 1;
}

__global__ void index_kernel(unsigned* out) {
    const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    out[block * (blockDim.x * blockDim.y * blockDim.z) + thread] = block * 1000 + thread;
}

// A template-id with a comma, as several convcore launches have.
template <typename T, int kScale>
__global__ void scale_kernel(T* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] *= kScale;
}

// Deduced template arguments, as fft_family.hpp's for_each_kernel<<<...>>>(total, f).
template <typename F>
__global__ void for_each_kernel(int64_t total, F f) {
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) f(e);
}
struct Iota {
    int64_t* out;
    __device__ void operator()(int64_t e) const { out[e] = e; }
};

// Records the order in which blocks start, and the OS thread that ran each.
constexpr int kOrderBlocks = 64;
std::atomic<int> g_next_slot{0};
std::thread::id g_slot_worker[kOrderBlocks];
__global__ void block_order_kernel(int* order) {
    if (threadIdx.x == 0) {
        const int slot = g_next_slot++;
        order[slot] = int(blockIdx.x);
        g_slot_worker[slot] = std::this_thread::get_id();
        std::this_thread::sleep_for(std::chrono::microseconds(100));  // gives the other worker a turn
    }
}

__global__ void too_much_shared_kernel(float* out) {
    CONVCORE_SHARED(float[13 * 1024], big);  // 52 KiB
    big[threadIdx.x] = 0.0f;
    out[threadIdx.x] = big[threadIdx.x];
}

// ---- tests ------------------------------------------------------------------------------------------
TEST(CudaEmulator, DeviceReportsSmallSmCount) {
    int count = 0;
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    EXPECT_EQ(count, 1);
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT_EQ(prop.multiProcessorCount, 2);
    EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
    EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024);
    EXPECT_GT(prop.totalGlobalMem, 0u);
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
}

TEST(CudaEmulator, AllocationsAre256ByteAlignedAndStartAsNaN) {
    std::vector<void*> ptrs;
    for (size_t bytes : {1, 3, 100, 257, 4096, 1 << 20}) {
        void* p = nullptr;
        ASSERT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes << " bytes";
        ptrs.push_back(p);
    }
    float host[4];
    ASSERT_EQ(cudaMemcpy(host, ptrs[2], sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float v : host) EXPECT_EQ(bits_of(v), 0xFFFFFFFFu);
    for (void* p : ptrs) EXPECT_EQ(cudaFree(p), cudaSuccess);

    void* empty = reinterpret_cast<void*>(1);
    EXPECT_EQ(cudaMalloc(&empty, 0), cudaSuccess);
    EXPECT_EQ(empty, nullptr);
    EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
    int host_int = 0;
    EXPECT_EQ(cudaFree(&host_int), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    void* huge = nullptr;
    EXPECT_EQ(cudaMalloc(&huge, size_t(1) << 50), cudaErrorMemoryAllocation);
    EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
}

class BlockReduction : public ::testing::TestWithParam<int> {};

template <int kThreads>
void check_block_sums() {
    constexpr int kBlocks = 6;
    std::vector<double> x(kBlocks * kThreads);
    for (size_t i = 0; i < x.size(); ++i) x[i] = double(i % 97) - 40.0;  // exact in any order
    DeviceBuffer<double> dx(x), sums(kBlocks);
    CONVCORE_LAUNCH(kBlocks, kThreads, 0, nullptr, block_sum_kernel<kThreads>)(dx.ptr, sums.ptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<double> got = sums.to_host();
    for (int b = 0; b < kBlocks; ++b) {
        const double want = std::accumulate(x.begin() + b * kThreads, x.begin() + (b + 1) * kThreads, 0.0);
        EXPECT_EQ(got[b], want) << "block " << b;
    }
}

TEST_P(BlockReduction, BarrierInsideLoop) {
    if (GetParam() == 256)
        check_block_sums<256>();
    else
        check_block_sums<1024>();
}
INSTANTIATE_TEST_SUITE_P(CudaEmulator, BlockReduction, ::testing::Values(256, 1024));

TEST(CudaEmulator, GridStrideLoopLoops) {
    constexpr int kThreads = 256;
    constexpr int64_t n = 100000;
    const unsigned blocks = grid_blocks(n, kThreads);
    EXPECT_LT(int64_t(blocks) * kThreads, n) << "the small SM count should cap the grid below n threads";
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = float(i % 1000);
    DeviceBuffer<float> dx(x), dy(n);
    DeviceBuffer<int> round(n);
    CONVCORE_LAUNCH(blocks, kThreads, 0, nullptr, grid_stride_kernel)(dx.ptr, dy.ptr, round.ptr, n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<float> y = dy.to_host();
    const std::vector<int> r = round.to_host();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 2 * x[i]) << i;
    EXPECT_GE(*std::max_element(r.begin(), r.end()), 2);
}

TEST(CudaEmulator, SharedMemoryIsPoisonedAtEachBlockStart) {
    constexpr int kThreads = 128, kBlocks = 16;
    DeviceBuffer<float> seen(kThreads * kBlocks);
    for (int launch = 0; launch < 2; ++launch) {
        CONVCORE_LAUNCH(kBlocks, kThreads, 0, nullptr, shared_before_write_kernel)(seen.ptr);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        for (float v : seen.to_host()) {
            EXPECT_TRUE(std::isnan(v));
            EXPECT_EQ(bits_of(v), 0xFFFFFFFFu);
        }
    }
}

TEST(CudaEmulator, IndicesOf3dGridsAndBlocks) {
    const dim3 grid(3, 4, 2), block(8, 4, 2);
    const unsigned total = 3 * 4 * 2 * 8 * 4 * 2;
    DeviceBuffer<unsigned> out(total);
    CONVCORE_LAUNCH(grid, block, 0, nullptr, index_kernel)(out.ptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<unsigned> got = out.to_host();
    for (unsigned i = 0; i < total; ++i) EXPECT_EQ(got[i], i / 64 * 1000 + i % 64) << i;
}

TEST(CudaEmulator, TemplateKernelsWithCommasAndDeducedArguments) {
    constexpr int n = 1000;
    std::vector<float> y(n, 1.5f);
    DeviceBuffer<float> dy(y);
    CONVCORE_LAUNCH(grid_blocks(n, 128), 128, 0, nullptr, scale_kernel<float, 3>)(dy.ptr, n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (float v : dy.to_host()) EXPECT_EQ(v, 4.5f);

    DeviceBuffer<int64_t> iota(n);
    CONVCORE_LAUNCH(grid_blocks(n, 256), 256, 0, nullptr, for_each_kernel)(int64_t(n), Iota{iota.ptr});
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<int64_t> got = iota.to_host();
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], i);
}

TEST(CudaEmulator, BlocksRunShuffledOnTwoWorkers) {
    DeviceBuffer<int> order(kOrderBlocks);
    std::set<std::thread::id> workers;
    int shuffled = 0;  // launches in which a worker took its blocks out of index order
    for (int launch = 0; launch < 4; ++launch) {
        g_next_slot = 0;
        CONVCORE_LAUNCH(kOrderBlocks, 32, 0, nullptr, block_order_kernel)(order.ptr);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        std::vector<int> got = order.to_host();
        std::map<std::thread::id, std::vector<int>> per_worker;
        for (int slot = 0; slot < kOrderBlocks; ++slot) per_worker[g_slot_worker[slot]].push_back(got[slot]);
        bool out_of_order = false;
        for (const auto& [id, blocks] : per_worker) {
            workers.insert(id);
            out_of_order |= !std::is_sorted(blocks.begin(), blocks.end());
        }
        shuffled += out_of_order;
        std::vector<int> identity(kOrderBlocks);
        std::iota(identity.begin(), identity.end(), 0);
        std::sort(got.begin(), got.end());
        EXPECT_EQ(got, identity) << "every block runs exactly once";
    }
    EXPECT_GT(shuffled, 0);
    EXPECT_EQ(workers.size(), 2u);
    EXPECT_EQ(workers.count(std::this_thread::get_id()), 0u) << "blocks run on worker threads";
}

TEST(CudaEmulator, InvalidLaunchesAreRejectedAsOnAGpu) {
    DeviceBuffer<int> out(64);
    const std::vector<int> untouched = out.to_host();
    const auto rejected = [&](dim3 grid, dim3 block, size_t shared, cudaError_t expected) {
        CONVCORE_LAUNCH(grid, block, shared, nullptr, fill_kernel)(out.ptr, 7);
        EXPECT_EQ(cudaPeekAtLastError(), expected);
        EXPECT_EQ(cudaGetLastError(), expected);
        EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError resets the error";
        EXPECT_EQ(out.to_host(), untouched) << "a rejected kernel does not run";
    };
    rejected(1, 2048, 0, cudaErrorInvalidConfiguration);
    rejected(1, dim3(32, 32, 2), 0, cudaErrorInvalidConfiguration);
    rejected(1, dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration);
    rejected(dim3(1, 70000), 1, 0, cudaErrorInvalidConfiguration);
    rejected(dim3(1, 1, 70000), 1, 0, cudaErrorInvalidConfiguration);
    rejected(0, 64, 0, cudaErrorInvalidConfiguration);
    rejected(1, 64, 64 * 1024, cudaErrorInvalidValue);

    // The limits themselves are fine (1-thread blocks: a quick run).
    DeviceBuffer<int> wide(65535);
    CONVCORE_LAUNCH(dim3(1, 65535), 1, 0, nullptr, fill_kernel)(wide.ptr, 3);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    CONVCORE_LAUNCH(1, 1024, 0, nullptr, write_unless_null_kernel)(static_cast<int*>(nullptr));
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "1024 threads and a null pointer argument are fine";
}

TEST(CudaEmulator, StreamsAndEvents) {
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaEvent_t start = nullptr, stop = nullptr;
    ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
    float ms = -1;
    EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle) << "not recorded yet";
    DeviceBuffer<int> out(256);
    ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
    CONVCORE_LAUNCH(2, 128, 0, stream, fill_kernel)(out.ptr, 5);
    ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    EXPECT_GE(ms, 0.0f);
    std::vector<int> host(256);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), out.ptr, 256 * sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (int v : host) EXPECT_EQ(v, 5);
    EXPECT_EQ(cudaEventDestroy(start), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(stop), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    // A destroyed stream is an invalid handle, for copies and launches alike.
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorInvalidResourceHandle);
    CONVCORE_LAUNCH(1, 32, 0, stream, fill_kernel)(out.ptr, 1);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

// ---- what aborts ------------------------------------------------------------------------------------
// The death tests re-run the test binary for the statement (no fork of a process with threads).
class CudaEmulatorDeathTest : public ::testing::Test {
   protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(CudaEmulatorDeathTest, DivergentBarrierIsReported) {
    DeviceBuffer<int> out(64);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 64, 0, nullptr, divergent_barrier_kernel)(out.ptr),
                 "divergent barrier in kernel 'divergent_barrier_kernel'.*exited after 0 __syncthreads");
    EXPECT_DEATH(CONVCORE_LAUNCH(3, 64, 0, nullptr, uneven_barrier_count_kernel)(out.ptr),
                 "divergent barrier in kernel 'uneven_barrier_count_kernel'.*exited after 1 __syncthreads.* "
                 "waits at __syncthreads\\(\\) number 2");
}

TEST_F(CudaEmulatorDeathTest, HostPointerArgumentFaults) {
    std::vector<int> host(64);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 64, 0, nullptr, fill_kernel)(host.data(), 1),
                 "kernel 'fill_kernel': argument 1 is the pointer .* neither null nor inside a live device allocation");
    int* freed = nullptr;
    ASSERT_EQ(cudaMalloc(&freed, 64 * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaFree(freed), cudaSuccess);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 64, 0, nullptr, fill_kernel)(freed, 1), "argument 1 .* live device allocation");
}

TEST_F(CudaEmulatorDeathTest, CopyDirectionMustMatchThePointers) {
    DeviceBuffer<float> d(16);
    std::vector<float> h(16), h2(16);
    EXPECT_DEATH(cudaMemcpy(h.data(), h2.data(), 64, cudaMemcpyHostToDevice), "dst is host memory");
    EXPECT_DEATH(cudaMemcpy(h.data(), d.ptr, 128, cudaMemcpyDeviceToHost), "src range .* overruns");
}

TEST_F(CudaEmulatorDeathTest, StaticSharedMemoryOver48KiB) {
    DeviceBuffer<float> out(32);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 32, 0, nullptr, too_much_shared_kernel)(out.ptr),
                 "too_much_shared_kernel.*53248 bytes of static __shared__ memory");
}

TEST_F(CudaEmulatorDeathTest, SyncthreadsOutsideAKernel) {
    EXPECT_DEATH(__syncthreads(), "__syncthreads\\(\\) called outside a kernel");
}

#if defined(TEST_WITH_ASAN)
__global__ void shared_overflow_kernel(float* out) {
    CONVCORE_SHARED(float[64], small);
    float* p = small;     // through a pointer, which UBSan's array-bounds check does not see
    p[threadIdx.x] = 1.0f;  // 128 threads: the upper half writes past the array
    out[threadIdx.x] = p[threadIdx.x];
}

__global__ void out_of_bounds_kernel(float* y) {
    y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;  // no bounds check
}

TEST_F(CudaEmulatorDeathTest, HostDereferenceOfDevicePointerIsCaught) {
    DeviceBuffer<float> d(16);
    volatile float* p = d.ptr;
    EXPECT_DEATH(p[3] = 1.0f, "AddressSanitizer: use-after-poison");
    EXPECT_DEATH((void)p[0], "AddressSanitizer: use-after-poison");
}

TEST_F(CudaEmulatorDeathTest, KernelOutOfBoundsIsCaught) {
    DeviceBuffer<float> y(100);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 128, 0, nullptr, out_of_bounds_kernel)(y.ptr),
                 "AddressSanitizer: heap-buffer-overflow");
}

TEST_F(CudaEmulatorDeathTest, SharedMemoryOutOfBoundsIsCaught) {
    DeviceBuffer<float> out(128);
    EXPECT_DEATH(CONVCORE_LAUNCH(1, 128, 0, nullptr, shared_overflow_kernel)(out.ptr),
                 "AddressSanitizer: use-after-poison");
}
#endif

#if defined(TEST_WITH_TSAN)
// Each block reverses its 64 elements through shared memory; without the barrier a thread reads
// a slot that another thread of its block writes, unordered.
template <bool kBarrier>
__global__ void reverse_kernel(const float* x, float* y) {
    CONVCORE_SHARED(float[64], slots);
    const unsigned base = blockIdx.x * 64;
    slots[threadIdx.x] = x[base + threadIdx.x];
    if (kBarrier) __syncthreads();
    y[base + threadIdx.x] = slots[63 - threadIdx.x];
}

// Every block writes element 0 (a grid-wide reduction that forgot its atomics); thread 0 waits,
// so that both workers take blocks.
__global__ void every_block_writes_one_element_kernel(float* y) {
    if (threadIdx.x != 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    y[0] += float(blockIdx.x);
}

TEST(CudaEmulatorTsan, BarriersOrderTheThreadsOfABlock) {
    std::vector<float> x(8 * 64);
    std::iota(x.begin(), x.end(), 0.0f);
    DeviceBuffer<float> dx(x), dy(x.size());
    CONVCORE_LAUNCH(8, 64, 0, nullptr, reverse_kernel<true>)(dx.ptr, dy.ptr);
    const std::vector<float> y = dy.to_host();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i / 64 * 64 + 63 - i % 64]) << i;
}

// ThreadSanitizer's exit status when it reported something (its default exitcode).
constexpr int kTsanExitCode = 66;

TEST_F(CudaEmulatorDeathTest, MissingBarrierIsADataRace) {
    DeviceBuffer<float> x(64), y(64);
    EXPECT_EXIT((CONVCORE_LAUNCH(1, 64, 0, nullptr, reverse_kernel<false>)(x.ptr, y.ptr), std::exit(0)),
                ::testing::ExitedWithCode(kTsanExitCode), "ThreadSanitizer: data race.*reverse_kernel");
}

// The tree reduction of block_sum_kernel with its barrier inside the loop missing: the race is
// after the first barrier.
__global__ void reduction_missing_inner_barrier_kernel(const double* x, double* sums) {
    CONVCORE_SHARED(double[256], partial);
    partial[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2)
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

TEST_F(CudaEmulatorDeathTest, MissingBarrierAfterABarrierIsADataRace) {
    DeviceBuffer<double> x(std::vector<double>(256, 1.0)), sums(1);
    EXPECT_EXIT((CONVCORE_LAUNCH(1, 256, 0, nullptr, reduction_missing_inner_barrier_kernel)(x.ptr, sums.ptr),
                 std::exit(0)),
                ::testing::ExitedWithCode(kTsanExitCode),
                "ThreadSanitizer: data race.*reduction_missing_inner_barrier_kernel");
}

TEST_F(CudaEmulatorDeathTest, TwoBlocksWritingOneElementIsADataRace) {
    DeviceBuffer<float> y(1);
    EXPECT_EXIT((CONVCORE_LAUNCH(16, 32, 0, nullptr, every_block_writes_one_element_kernel)(y.ptr), std::exit(0)),
                ::testing::ExitedWithCode(kTsanExitCode),
                "ThreadSanitizer: data race.*every_block_writes_one_element_kernel");
}
#endif

}  // namespace
