// The NHWC GEMM's task kernels (cpu/nhwc_gemm.hpp), instantiated once for POINTWISE and
// IMPLICIT_GEMM: for float and double, for each instruction set (CONVCORE_EACH_ISA), and for two
// kinds of stores (PlainStores, FusedStores). They are the library's largest instantiations (each
// entry inlines every blocking and group path), so they live in this one file, and each is
// instantiated as few times as the speed that matters needs: the compile time of every build
// and sanitizer build of the CI grows with it.
#include "cpu/nhwc_gemm.hpp"

#include "common/epilogue.hpp"

namespace convcore {
namespace cpu {
namespace nhwc_gemm {
namespace {

// The activations FusedStores applies in registers (compares only); any other (SiLU) is applied
// by apply_activation to a task's outputs once its stores are done, while they are in cache.
bool stores_activate(convcoreActivationMode_t act) {
    return act == CONVCORE_ACTIVATION_IDENTITY || act == CONVCORE_ACTIVATION_RELU || act == CONVCORE_ACTIVATION_RELU6;
}

// The part of the epilogue the stores apply: all of it but an activation they leave.
template <typename T>
Stores<T> stores_part(Stores<T> s) {
    if (!stores_activate(s.e.act)) s.e.act = CONVCORE_ACTIVATION_IDENTITY;
    return s;
}

// act (one the stores leave) on y's channels [c0, c1) of pixels [p0, p1) (K channels per
// pixel): SiLU and GELU in the kernel's vectors of VB bytes, any other value by value.
template <typename T, int VB>
CONVCORE_GEMM_INLINE void apply_activation(T* y, int64_t k, int64_t p0, int64_t p1, int64_t c0, int64_t c1,
                                           convcoreActivationMode_t act) {
    if (!epilogue::reads_preactivation(act)) {
        for (int64_t pix = p0; pix < p1; ++pix)
            for (int64_t c = c0; c < c1; ++c) y[pix * k + c] = epilogue::activate(y[pix * k + c], act);
        return;
    }
    if (c0 == 0 && c1 == k) return epilogue_store::exp_activation_span<T, VB>(y + p0 * k, (p1 - p0) * k, act);
    for (int64_t pix = p0; pix < p1; ++pix) epilogue_store::exp_activation_span<T, VB>(y + pix * k + c0, c1 - c0, act);
}

// Each entry runs its kernel with PlainStores (float only: float64 is not worth a second copy of
// every kernel) or FusedStores, then any activation the stores leave: a grouped task's outputs
// are channels g*Kg + [k0, k1) of groups [g0, g1), a panel task's its panels' columns
// [j0*NR, j1*NR) (at most K).
template <typename T>
constexpr bool kPlainStores = sizeof(T) == 4;

#define CONVCORE_NHWC_GEMM_KERNELS(ISA, ATTR, VB, ACC)                                                                 \
    template <typename T>                                                                                              \
    ATTR void task_##ISA(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, int64_t g0,              \
                         int64_t g1, int64_t p0, int64_t p1, int64_t k0, int64_t k1, const Stores<T>& s,               \
                         const T** rows) {                                                                             \
        if constexpr (kPlainStores<T>) {                                                                               \
            if (!s.fused()) {                                                                                          \
                const PlainStores<T> plain{s.e.alpha, s.e.beta};                                                       \
                return task<T, VB, ACC>(p, x, wt, zeros, y, g0, g1, p0, p1, k0, k1, plain, rows);                      \
            }                                                                                                          \
        }                                                                                                              \
        task<T, VB, ACC>(p, x, wt, zeros, y, g0, g1, p0, p1, k0, k1, FusedStores<T>{stores_part(s)}, rows);            \
        if (!stores_activate(s.e.act))                                                                                 \
            for (int64_t g = g0; g < g1; ++g)                                                                          \
                apply_activation<T, VB>(y, p.k, p0, p1, g * p.k_per_group() + k0, g * p.k_per_group() + k1, s.e.act);         \
    }                                                                                                                  \
    template <typename T>                                                                                              \
    ATTR void panel_task_##ISA(const ConvProblem& p, const T* x, const T* wt, const T* zeros, T* y, int64_t p0,        \
                               int64_t p1, int64_t j0, int64_t j1, int64_t kc, int64_t mc, const Stores<T>& s,         \
                               T* a_block, T* sink, const T** rows) {                                                  \
        if constexpr (kPlainStores<T>) {                                                                               \
            if (!s.fused()) {                                                                                          \
                const PlainStores<T> plain{s.e.alpha, s.e.beta};                                                       \
                return panel_task<T, VB, ACC>(p, x, wt, zeros, y, p0, p1, j0, j1, kc, mc, plain, a_block, sink, rows); \
            }                                                                                                          \
        }                                                                                                              \
        panel_task<T, VB, ACC>(p, x, wt, zeros, y, p0, p1, j0, j1, kc, mc, FusedStores<T>{stores_part(s)}, a_block,    \
                               sink, rows);                                                                            \
        constexpr int64_t NR = kPanelVectors * (VB / sizeof(T));                                                       \
        if (!stores_activate(s.e.act)) apply_activation<T, VB>(y, p.k, p0, p1, j0 * NR, std::min(p.k, j1 * NR), s.e.act);     \
    }                                                                                                                  \
    template <typename T>                                                                                              \
    const Kernels<T> kernels_##ISA = {task_##ISA<T>, panel_task_##ISA<T>};
CONVCORE_EACH_ISA(CONVCORE_NHWC_GEMM_KERNELS)

}  // namespace

template <typename T>
const Kernels<T>& kernels() {
    return for_cpu_isa(kernels_avx512<T>, kernels_avx2<T>, kernels_baseline<T>);
}
template const Kernels<float>& kernels<float>();
template const Kernels<double>& kernels<double>();

}  // namespace nhwc_gemm
}  // namespace cpu
}  // namespace convcore
