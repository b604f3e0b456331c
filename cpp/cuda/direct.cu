// DIRECT on CUDA: the reference loops, one thread per output element. Supports every problem
// (any stride, padding, dilation, group count, both modes; float32 and float64) and uses the
// same index helpers as the CPU reference (common/conv_index.hpp), so both agree by
// construction; it accumulates in float64 like the CPU reference. Not fast; it is what the
// other CUDA solvers are checked against.
#include <cuda_runtime.h>

#include <string>

#include "common/blend.hpp"
#include "common/conv_index.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cuda/check.hpp"
#include "cuda/resources.hpp"

namespace convcore {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// Sizes the kernel needs, passed by value (one struct, not twenty arguments).
struct DirectShape {
    int64_t n, c, h, w;
    int64_t k, r, s;
    int64_t cpg, kpg;  // channels and filters per group
    int64_t p, q;
    int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flip;
};

template <typename T>
__global__ void direct_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                  T* __restrict__ y, DirectShape sh, T alpha, T beta,
                                  int64_t total) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += step) {
        // i = ((n * K + k) * P + p) * Q + q: y is packed NCHW.
        int64_t t = i;
        const int64_t oq = t % sh.q;
        t /= sh.q;
        const int64_t op = t % sh.p;
        t /= sh.p;
        const int64_t ok = t % sh.k;
        const int64_t on = t / sh.k;
        const int64_t g = ok / sh.kpg;

        const TapRange rr = conv_valid_taps(op, sh.h, sh.r, sh.pad_h, sh.stride_h, sh.dil_h);
        const TapRange sr = conv_valid_taps(oq, sh.w, sh.s, sh.pad_w, sh.stride_w, sh.dil_w);

        const T* xg = x + (on * sh.c + g * sh.cpg) * sh.h * sh.w;  // x[n, g*cpg, 0, 0]
        const T* wk = w + ok * sh.cpg * sh.r * sh.s;               // w[k, 0, 0, 0]
        double acc = 0.0;  // float64 accumulation, as the CPU reference does
        for (int64_t c = 0; c < sh.cpg; ++c) {
            const T* xc = xg + c * sh.h * sh.w;
            const T* wc = wk + c * sh.r * sh.s;
            for (int64_t tr = rr.begin; tr < rr.end; ++tr) {
                const int64_t ih = conv_input_coord(op, tr, sh.pad_h, sh.stride_h, sh.dil_h);
                const T* xrow = xc + ih * sh.w;
                const T* wrow = wc + conv_filter_tap(tr, sh.r, sh.flip) * sh.s;
                for (int64_t ts = sr.begin; ts < sr.end; ++ts) {
                    const int64_t iw = conv_input_coord(oq, ts, sh.pad_w, sh.stride_w, sh.dil_w);
                    acc += double(xrow[iw]) * double(wrow[conv_filter_tap(ts, sh.s, sh.flip)]);
                }
            }
        }
        blend_store(y + i, T(acc), alpha, beta);
    }
}

std::string why_not(const ConvProblem& prob) {
    if (prob.dtype != CONVCORE_DATA_FLOAT && prob.dtype != CONVCORE_DATA_DOUBLE)
        return "DIRECT on CUDA supports float32 and float64 only";
    return "";
}

size_t workspace_bytes(const ConvProblem&) { return 0; }

void run(const ConvArgs& a) {
    const ConvProblem& pb = a.prob;
    const int64_t total = pb.y_elems();
    if (total == 0) return;
    if (a.x == nullptr || a.w == nullptr || a.y == nullptr)
        throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "DIRECT (CUDA): null tensor pointer");

    DirectShape sh;
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

    DeviceGuard guard(a.ctx.device_index);
    const unsigned int blocks = grid_blocks(a.ctx, total, kThreads);
    const cudaStream_t stream = stream_of(a.ctx);
    if (pb.dtype == CONVCORE_DATA_DOUBLE) {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_fwd_kernel<double>)(
            static_cast<const double*>(a.x), static_cast<const double*>(a.w),
            static_cast<double*>(a.y), sh, a.alpha, a.beta, total);
    } else {
        CONVCORE_LAUNCH(blocks, kThreads, 0, stream, direct_fwd_kernel<float>)(
            static_cast<const float*>(a.x), static_cast<const float*>(a.w),
            static_cast<float*>(a.y), sh, static_cast<float>(a.alpha),
            static_cast<float>(a.beta), total);
    }
    CONVCORE_CUDA_CHECK_LAUNCH("direct_fwd_kernel");
}

}  // namespace

extern const Solver direct_solver;
const Solver direct_solver = {.algo = CONVCORE_FWD_ALGO_DIRECT, .device = CONVCORE_DEVICE_CUDA,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run};

}  // namespace cuda
}  // namespace convcore
