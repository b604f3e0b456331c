// What the core asks of a device backend besides running solvers: memory, copies, and the
// strided tensor copies that let every solver see packed NCHW tensors.
// CPU: cpu/tensor_ops.cpp. CUDA: cuda/context.cu + cuda/tensor_ops.cu (only with CONVCORE_WITH_CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/problem.hpp"
#include "core/solver.hpp"  // Epilogue

namespace convcore {

// A 4-D view: sizes and element strides (N, C, H, W order).
struct Strided4d {
    int64_t dims[4];
    int64_t strides[4];
};

// The epilogue's backward where its activation and bias meet (convcoreActivationBackwardBias):
// dv = epilogue::activation_grad(dy, y, v, act) over the views (one shape; y or v null where act
// does not read it; dv null: not written, or dy itself: in place) and, where db is not null,
// db[k * db_stride] = alpha * sum of dv[., k, ., .] + beta * db[k * db_stride], summed in double
// (beta == 0: db never read).
struct ActivationBackward {
    convcoreActivationMode_t act;
    const void* y;
    Strided4d y_view;
    const void* v;
    Strided4d v_view;
    const void* dy;
    Strided4d dy_view;
    void* dv;
    Strided4d dv_view;
    void* db;
    int64_t db_stride;
    double alpha, beta;
};

namespace depth {
struct DepthProblem;  // core/depth_decomposition.hpp
struct DepthPlan;
}  // namespace depth

namespace cpu {
// The native 3-D forms of the depth decomposition (core/depth_decomposition.hpp says which and
// when; cpu/native_3d.cpp runs them).
namespace native_3d {
// When a native form runs `algo`'s pass on the 3-D problem, fills depth's native fields (the
// form, its plane and axis, workspace, prepared and transposed bytes) and returns true. rep: the
// representative 2-D problem.
bool plan(const depth::DepthProblem& prob, const ConvProblem& rep, convcoreConvolutionPass_t pass, int algo,
          depth::DepthPlan& depth);
// out = alpha * pass(in0, in1) + beta * out by depth's native form (the API's argument order; the
// tensors checked); U: the prepared filters of prepare, or null (then transformed in the workspace).
void run(const depth::DepthPlan& depth, convcoreConvolutionPass_t pass, const Context& ctx, const void* in0,
         const void* in1, const void* U, void* out, double alpha, double beta, void* workspace);
// The 3-D Winograd's transformed filters (depth.prepared_bytes into `out`, 64-byte aligned).
void prepare(const depth::DepthPlan& depth, const Context& ctx, const void* w, void* out);
}  // namespace native_3d

// Writes back and drops the cache lines of [p, p + bytes) from every cache level (x86's
// clflush; nothing elsewhere): Find times a run with its weights out of the caches.
void evict_from_caches(const void* p, size_t bytes);

// The kernels' instruction set, "avx512", "avx2" or "baseline" (cpu/cpu_isa.hpp; CONVCORE_CPU_ISA
// may lower it): part of the find-db's device string, as other code is timed.
const char* isa_name();

// The fused 1x1 -> depthwise pair (convcore.h's pointwise-depthwise plan; cpu/pointwise_depthwise.hpp
// says how it runs). pw: the 1x1 problem, dw: the depthwise problem on its output, both with
// packed NHWC activations and packed KCRS filters.
namespace pointwise_depthwise {
// Empty when the pair can run fused, else why not.
std::string why_not(const ConvProblem& pw, const ConvProblem& dw);
// Bytes of the prepared filters of both convolutions, made by prepare (64-byte aligned `prepared`).
size_t prepared_bytes(const ConvProblem& pw, const ConvProblem& dw);
void prepare(const ConvProblem& pw, const ConvProblem& dw, const void* w_pw, const void* w_dw, void* prepared);
// y = act_dw(dwconv(act_pw(conv1x1(x, w_pw) + bias_pw), w_dw) + bias_dw) in pw's dtype: each
// epilogue's bias and activation (no residual).
void run(const ConvProblem& pw, const ConvProblem& dw, const void* x, const void* prepared, const Epilogue& e_pw,
         const Epilogue& e_dw, void* y, int threads);
}  // namespace pointwise_depthwise

void activation_backward_bias(const Context& ctx, size_t elem, const ActivationBackward& a);
// dst[i] = src[i] for every index of the view (dtype element size `elem`: 4 or 8).
void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                  void* dst, const Strided4d& dst_view);
// dst = alpha * src + beta * dst over the view (beta == 0: dst never read).
void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                   void* dst, const Strided4d& dst_view, double alpha, double beta);
// dst = beta * dst over the view; beta == 0 writes zeros without reading dst (NaN stays out).
void scale_strided(const Context& ctx, size_t elem, void* dst, const Strided4d& view, double beta);
// The fused epilogue applied after a convolution wrote v into y:
// y = act(v + e.alpha2 * z + bias[c]) over the view, in one pass. e.z (or null) has y's view; it
// may be y itself. c is the view's second axis (K); bias (or null) holds K contiguous values.
void apply_epilogue(const Context& ctx, size_t elem, void* y, const Strided4d& y_view, const Epilogue& e);
}  // namespace cpu

namespace cuda {
// Number of visible CUDA devices; 0 when there is no driver or GPU (never throws).
int device_count();
// Binds ctx to ctx.device_index (BAD_PARAM when out of range) and creates its resources.
void init_context(Context& ctx);
void* malloc(const Context& ctx, size_t bytes);  // ALLOC_FAILED with the CUDA message
void free(const Context& ctx, void* ptr);
void memcpy_to_device(const Context& ctx, void* dst, const void* src, size_t bytes);
void memcpy_to_host(const Context& ctx, void* dst, const void* src, size_t bytes);
void synchronize(const Context& ctx);
// Same contracts as the cpu:: versions, queued on ctx's stream.
void copy_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                  void* dst, const Strided4d& dst_view);
void blend_strided(const Context& ctx, size_t elem, const void* src, const Strided4d& src_view,
                   void* dst, const Strided4d& dst_view, double alpha, double beta);
void scale_strided(const Context& ctx, size_t elem, void* dst, const Strided4d& view, double beta);
void apply_epilogue(const Context& ctx, size_t elem, void* y, const Strided4d& y_view, const Epilogue& e);
void activation_backward_bias(const Context& ctx, size_t elem, const ActivationBackward& a);
// "NVIDIA H100 80GB HBM3 (sm_90)" for the info command; "" when unavailable.
const char* device_name(int index);
}  // namespace cuda

}  // namespace convcore
