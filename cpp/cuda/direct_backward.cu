// DIRECT backward passes on CUDA and the bias gradient: the reference loops of
// cpu/direct_backward.cpp with the same index helpers (common/conv_index.hpp), accumulating in
// float64. Every problem (any stride, padding, dilation, group count, both modes; float32 and
// float64). Deterministic: backward data has one thread per dx element; backward filter a group
// of threads per dw element and the bias gradient a block per channel, each sum reduced through
// shared memory in a fixed order that depends on the problem only. Not fast; it is what faster
// CUDA backward solvers are checked against.
#include <cuda_runtime.h>

#include <string>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "common/epilogue.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int kThreads = 256;

struct Shape {
    int64_t n, c, h, w;
    int64_t k, r, s;
    int64_t cpg, kpg;
    int64_t p, q;
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flip;
};

Shape shape_of(const ConvProblem& pb) {
    Shape sh;
    sh.n = pb.n;
    sh.c = pb.c;
    sh.h = pb.h;
    sh.w = pb.w;
    sh.k = pb.k;
    sh.r = pb.r;
    sh.s = pb.s;
    sh.cpg = pb.c_per_group();
    sh.kpg = pb.k_per_group();
    sh.p = pb.p;
    sh.q = pb.q;
    sh.pad_h = pb.pad_h;
    sh.pad_w = pb.pad_w;
    sh.stride_h = pb.stride_h;
    sh.stride_w = pb.stride_w;
    sh.dil_h = pb.dil_h;
    sh.dil_w = pb.dil_w;
    sh.flip = pb.flip;
    return sh;
}

template <typename T>
__global__ void direct_bwd_data_kernel(const T* __restrict__ w, const T* __restrict__ dy,
                                       T* __restrict__ dx, Shape sh, T alpha, T beta, int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
        // i = ((n * C + c) * H + h) * W + w: dx is packed NCHW.
        int64_t t = i;
        const int64_t iw = t % sh.w;
        t /= sh.w;
        const int64_t ih = t % sh.h;
        t /= sh.h;
        const int64_t c = t % sh.c;
        const int64_t n = t / sh.c;
        const int64_t g = c / sh.cpg, cl = c % sh.cpg;
        double acc = 0.0;
        for (int64_t r = 0; r < sh.r; ++r) {
            const int64_t oh = conv_output_reading(ih, r, sh.pad_h, sh.stride_h, sh.dil_h, sh.p);
            if (oh < 0) continue;
            const int64_t fr = conv_filter_tap(r, sh.r, sh.flip);
            for (int64_t s = 0; s < sh.s; ++s) {
                const int64_t ow = conv_output_reading(iw, s, sh.pad_w, sh.stride_w, sh.dil_w, sh.q);
                if (ow < 0) continue;
                const int64_t fs = conv_filter_tap(s, sh.s, sh.flip);
                for (int64_t k = g * sh.kpg; k < (g + 1) * sh.kpg; ++k)
                    acc += double(dy[((n * sh.k + k) * sh.p + oh) * sh.q + ow]) *
                           double(w[((k * sh.cpg + cl) * sh.r + fr) * sh.s + fs]);
            }
        }
        blend_store(dx + i, T(acc), alpha, beta);
    }
}

// Adds the partial sums of each group of `lanes` consecutive threads (a power of two) in a fixed
// tree order; the group's first thread gets the group's total.
__device__ double group_sum(double v, double* shared, unsigned lanes) {
    shared[threadIdx.x] = v;
    __syncthreads();
    const unsigned lane = threadIdx.x % lanes;
    for (unsigned half = lanes / 2; half > 0; half /= 2) {
        if (lane < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    return shared[threadIdx.x];
}

// A group of `lanes` threads per dw element (k, c, r', s'), kThreads / lanes elements per block at
// a time; a group's threads stride over the element's (n, p, q).
template <typename T>
__global__ void direct_bwd_filter_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                         T* __restrict__ dw, Shape sh, T alpha, T beta, int64_t total,
                                         unsigned lanes) {
    CONVCORE_SHARED(double[kThreads], shared);
    const int64_t per_block = blockDim.x / lanes;
    const unsigned lane = threadIdx.x % lanes;
    for (int64_t first = blockIdx.x * per_block; first < total; first += gridDim.x * per_block) {
        const int64_t e = first + threadIdx.x / lanes;
        double acc = 0.0;
        if (e < total) {
            int64_t t = e;
            const int64_t fs = t % sh.s;
            t /= sh.s;
            const int64_t fr = t % sh.r;
            t /= sh.r;
            const int64_t c = t % sh.cpg;
            const int64_t k = t / sh.cpg;
            const int64_t g = k / sh.kpg;
            const int64_t r = conv_filter_tap(fr, sh.r, sh.flip), s = conv_filter_tap(fs, sh.s, sh.flip);
            const TapRange pr = conv_valid_outputs(r, sh.h, sh.p, sh.pad_h, sh.stride_h, sh.dil_h);
            const TapRange qr = conv_valid_outputs(s, sh.w, sh.q, sh.pad_w, sh.stride_w, sh.dil_w);
            const int64_t pn = pr.end - pr.begin, qn = qr.end - qr.begin;
            const int64_t count = sh.n * pn * qn;
            for (int64_t j = lane; j < count; j += lanes) {
                const int64_t oq = qr.begin + j % qn, op = pr.begin + j / qn % pn, n = j / (qn * pn);
                const int64_t ih = conv_input_coord(op, r, sh.pad_h, sh.stride_h, sh.dil_h);
                const int64_t iw = conv_input_coord(oq, s, sh.pad_w, sh.stride_w, sh.dil_w);
                acc += double(dy[((n * sh.k + k) * sh.p + op) * sh.q + oq]) *
                       double(x[((n * sh.c + g * sh.cpg + c) * sh.h + ih) * sh.w + iw]);
            }
        }
        const double sum = group_sum(acc, shared, lanes);
        if (lane == 0 && e < total) blend_store(dw + e, T(sum), alpha, beta);
        __syncthreads();
    }
}

// The strides of activation_backward_kernel's tensors (dy's dims).
struct ActivationViews {
    int64_t n, k, p, q;
    int64_t dy[4], y[4], v[4], dv[4];
};

// The epilogue's backward (cuda::activation_backward_bias): one block per channel k, whose threads
// write dv = activation_grad(dy, y, v) (dv not null: the caller passes null for IDENTITY in place)
// and sum it into db[k] (db not null). Any strides; y or v null where act does not read them.
template <typename T>
__global__ void activation_backward_kernel(const T* __restrict__ dy, const T* __restrict__ y, const T* __restrict__ v,
                                           T* dv, ActivationViews s, convcoreActivationMode_t act, T* __restrict__ db,
                                           int64_t db_stride, T alpha, T beta) {
    CONVCORE_SHARED(double[kThreads], shared);
    const int64_t terms = s.n * s.p * s.q;
    for (int64_t kk = blockIdx.x; kk < s.k; kk += gridDim.x) {
        double acc = 0.0;
        for (int64_t j = threadIdx.x; j < terms; j += blockDim.x) {
            const int64_t oq = j % s.q, op = j / s.q % s.p, on = j / (s.q * s.p);
            const T g = epilogue::activation_grad<T>(dy[offset4(on, kk, op, oq, s.dy)],
                                                     y ? y[offset4(on, kk, op, oq, s.y)] : T(0),
                                                     v ? v[offset4(on, kk, op, oq, s.v)] : T(0), act);
            if (dv) dv[offset4(on, kk, op, oq, s.dv)] = g;
            acc += double(g);
        }
        if (db) {
            const double sum = group_sum(acc, shared, blockDim.x);
            if (threadIdx.x == 0) blend_store(db + kk * db_stride, T(sum), alpha, beta);
            __syncthreads();
        }
    }
}

std::string why_not(const ConvProblem& prob) {
    if (prob.dtype != CONVCORE_DATA_FLOAT && prob.dtype != CONVCORE_DATA_DOUBLE)
        return "DIRECT on CUDA supports float32 and float64 only";
    return "";
}

size_t workspace_bytes(const ConvProblem&) { return 0; }

// Threads of the bias gradient's blocks (one block per channel, summing up to `terms` terms):
// the largest power of two not above it, between a warp and kThreads, so a small image does
// not leave most of a block idle at every barrier.
unsigned int reduction_threads(int64_t terms) {
    unsigned int threads = 32;
    while (threads < unsigned(kThreads) && int64_t(threads) * 2 <= terms) threads *= 2;
    return threads;
}

// Threads per dw element summing up to `terms` terms: a power of two, at most kThreads, with
// about 8 terms or more each (the fewer threads share a sum, the fewer barriers it costs).
unsigned int filter_lanes(int64_t terms) {
    unsigned int lanes = 1;
    while (lanes < unsigned(kThreads) && int64_t(lanes) * 2 * 8 <= terms) lanes *= 2;
    return lanes;
}

unsigned int block_count(int64_t items) {
    constexpr int64_t kMaxBlocks = int64_t(1) << 20;
    return static_cast<unsigned int>(items < 1 ? 1 : (items < kMaxBlocks ? items : kMaxBlocks));
}

void run_data(const BwdDataArgs& a) {
    const ConvProblem& pb = a.prob;
    const int64_t total = pb.x_elems();
    if (total == 0) return;
    const Shape sh = shape_of(pb);
    DeviceGuard guard(a.ctx.device_index);
    const unsigned int blocks = grid_blocks(a.ctx, total, kThreads);
    const cudaStream_t stream = stream_of(a.ctx);
    if (pb.dtype == CONVCORE_DATA_DOUBLE)
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_bwd_data_kernel<double>)(
            static_cast<const double*>(a.w), static_cast<const double*>(a.dy), static_cast<double*>(a.dx),
            sh, a.alpha, a.beta, total);
    else
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_bwd_data_kernel<float>)(
            static_cast<const float*>(a.w), static_cast<const float*>(a.dy), static_cast<float*>(a.dx), sh,
            static_cast<float>(a.alpha), static_cast<float>(a.beta), total);
    CONVCORE_CUDA_CHECK_LAUNCH("direct_bwd_data_kernel");
}

void run_filter(const BwdFilterArgs& a) {
    const ConvProblem& pb = a.prob;
    const int64_t total = pb.w_elems();
    if (total == 0) return;
    const Shape sh = shape_of(pb);
    DeviceGuard guard(a.ctx.device_index);
    const cudaStream_t stream = stream_of(a.ctx);
    // A tap sums at most every (n, p, q); the lanes, and so the summation order, depend on the
    // problem only (deterministic).
    const unsigned int lanes = filter_lanes(sh.n * sh.p * sh.q);
    const int64_t per_block = kThreads / lanes;
    const unsigned int blocks = block_count((total + per_block - 1) / per_block);
    if (pb.dtype == CONVCORE_DATA_DOUBLE)
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_bwd_filter_kernel<double>)(
            static_cast<const double*>(a.x), static_cast<const double*>(a.dy), static_cast<double*>(a.dw),
            sh, a.alpha, a.beta, total, lanes);
    else
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_bwd_filter_kernel<float>)(
            static_cast<const float*>(a.x), static_cast<const float*>(a.dy), static_cast<float*>(a.dw), sh,
            static_cast<float>(a.alpha), static_cast<float>(a.beta), total, lanes);
    CONVCORE_CUDA_CHECK_LAUNCH("direct_bwd_filter_kernel");
}

}  // namespace

// The epilogue's backward and the bias gradient on a CUDA handle (core/device.hpp), in one kernel.
void activation_backward_bias(const Context& ctx, size_t elem, const ActivationBackward& a) {
    DeviceGuard guard(ctx.device_index);
    const cudaStream_t stream = stream_of(ctx);
    // IDENTITY in place (dv is dy, same strides: the API allows no other overlap) has nothing to
    // write: dv = dy already. The kernel then only sums db, as on the CPU.
    void* dv = a.dv && !(a.act == CONVCORE_ACTIVATION_IDENTITY && a.dv == a.dy) ? a.dv : nullptr;
    ActivationViews s{};
    const int64_t* dims = a.dy_view.dims;
    s.n = dims[0], s.k = dims[1], s.p = dims[2], s.q = dims[3];
    for (int i = 0; i < 4; ++i) {
        s.dy[i] = a.dy_view.strides[i];
        s.y[i] = a.y ? a.y_view.strides[i] : 0;
        s.v[i] = a.v ? a.v_view.strides[i] : 0;
        s.dv[i] = dv ? a.dv_view.strides[i] : 0;
    }
    if (s.k == 0 || (!a.db && (!dv || s.n * s.p * s.q == 0))) return;
    const unsigned int blocks = block_count(s.k);
    const unsigned int threads = reduction_threads(s.n * s.p * s.q);
    if (elem == 8)
        CONVCORE_LAUNCH(blocks, threads, 0, stream, activation_backward_kernel<double>)(
            static_cast<const double*>(a.dy), static_cast<const double*>(a.y), static_cast<const double*>(a.v),
            static_cast<double*>(dv), s, a.act, static_cast<double*>(a.db), a.db_stride, a.alpha, a.beta);
    else
        CONVCORE_LAUNCH(blocks, threads, 0, stream, activation_backward_kernel<float>)(
            static_cast<const float*>(a.dy), static_cast<const float*>(a.y), static_cast<const float*>(a.v),
            static_cast<float*>(dv), s, a.act, static_cast<float*>(a.db), a.db_stride, static_cast<float>(a.alpha),
            static_cast<float>(a.beta));
    CONVCORE_CUDA_CHECK_LAUNCH("activation_backward_kernel");
}

extern const Solver direct_bwd_data_solver;
const Solver direct_bwd_data_solver = {.algo = CONVCORE_BWD_DATA_ALGO_DIRECT,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_data = run_data};
extern const Solver direct_bwd_filter_solver;
const Solver direct_bwd_filter_solver = {.algo = CONVCORE_BWD_FILTER_ALGO_DIRECT,
    .device = CONVCORE_DEVICE_CUDA, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .backward_filter = run_filter};

}  // namespace cuda
}  // namespace convcore
