// Which of a solver's x86 kernels to run: the widest instruction set this CPU has, capped by the
// environment variable CONVCORE_CPU_ISA=avx2|baseline (so the narrower kernels can be tested and
// timed on a wider machine). Decided once per process. The solvers with hand-vectorised kernels
// in several widths use it (IM2WIN, IMPLICIT_GEMM forward and backward, CYCLIC_MINIMAL, the FFT
// family's products, DEPTHWISE forward, POINTWISE); Winograd's transforms are compiled per width by GCC's target_clones, which
// picks by the CPU alone.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CONVCORE_X86_DISPATCH 1
#endif

namespace convcore {
namespace cpu {

enum class CpuIsa { baseline, avx2, avx512 };

inline CpuIsa detect_cpu_isa() {
#ifdef CONVCORE_X86_DISPATCH
    const char* cap = std::getenv("CONVCORE_CPU_ISA");
    const bool to_avx2 = cap && std::strcmp(cap, "avx2") == 0, to_baseline = cap && std::strcmp(cap, "baseline") == 0;
    if (!to_avx2 && !to_baseline && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        return CpuIsa::avx512;
    if (!to_baseline && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
#endif
    return CpuIsa::baseline;
}

inline CpuIsa cpu_isa() {
    static const CpuIsa isa = detect_cpu_isa();
    return isa;
}

// The one of three kernels (or kernel tables) for cpu_isa().
template <typename K>
const K& for_cpu_isa(const K& avx512, const K& avx2, const K& baseline) {
    switch (cpu_isa()) {
        case CpuIsa::avx512: return avx512;
        case CpuIsa::avx2: return avx2;
        default: return baseline;
    }
}

// This machine's data cache of `level` (1 or 2) in bytes, or `fallback` where the system does
// not say.
inline int64_t cache_bytes(int level, int64_t fallback) {
    static const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    const long v = level == 1 ? l1 : l2;
    return v > 0 ? int64_t(v) : fallback;
}

}  // namespace cpu
}  // namespace convcore

// Kernel sets compiled once per instruction set: CONVCORE_EACH_ISA(KERNELS) expands
// KERNELS(name, attribute, vector bytes, accumulator vectors) for baseline (SSE2), avx2 and
// avx512, whose sets for_cpu_isa then picks from. Without x86 dispatch the avx2 and avx512 sets
// are baseline code too (for_cpu_isa never picks them there).
#ifdef CONVCORE_X86_DISPATCH
#define CONVCORE_EACH_ISA(KERNELS)                                 \
    KERNELS(baseline, , 16, 8)                                     \
    KERNELS(avx2, __attribute__((target("avx2,fma"))), 32, 8)      \
    KERNELS(avx512, __attribute__((target("avx512f,avx512dq,fma"))), 64, 16)
#else
#define CONVCORE_EACH_ISA(KERNELS) KERNELS(baseline, , 16, 8) KERNELS(avx2, , 16, 8) KERNELS(avx512, , 16, 8)
#endif
