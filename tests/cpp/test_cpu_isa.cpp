// The kernel width the dispatched CPU solvers run (cpu/cpu_isa.hpp): the widest the CPU has,
// capped by CONVCORE_CPU_ISA.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cpu/cpu_isa.hpp"

using convcore::cpu::CpuIsa;
using convcore::cpu::detect_cpu_isa;

namespace {

#ifdef CONVCORE_X86_DISPATCH
CpuIsa widest() {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return CpuIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::avx2;
    return CpuIsa::baseline;
}
#else
CpuIsa widest() { return CpuIsa::baseline; }
#endif

TEST(CpuIsa, TheCapLowersTheWidthNeverRaisesIt) {
    const char* saved = std::getenv("CONVCORE_CPU_ISA");
    unsetenv("CONVCORE_CPU_ISA");
    EXPECT_EQ(detect_cpu_isa(), widest());
    setenv("CONVCORE_CPU_ISA", "baseline", 1);
    EXPECT_EQ(detect_cpu_isa(), CpuIsa::baseline);
    setenv("CONVCORE_CPU_ISA", "avx2", 1);
    EXPECT_EQ(detect_cpu_isa(), widest() == CpuIsa::baseline ? CpuIsa::baseline : CpuIsa::avx2);
    setenv("CONVCORE_CPU_ISA", "something else", 1);  // not a cap
    EXPECT_EQ(detect_cpu_isa(), widest());
    if (saved)
        setenv("CONVCORE_CPU_ISA", saved, 1);
    else
        unsetenv("CONVCORE_CPU_ISA");
}

TEST(CpuIsa, PicksTheKernelOfTheWidth) {
    const int avx512 = 512, avx2 = 256, baseline = 128;
    const int& chosen = convcore::cpu::for_cpu_isa(avx512, avx2, baseline);
    switch (convcore::cpu::cpu_isa()) {
        case CpuIsa::avx512: EXPECT_EQ(&chosen, &avx512); break;
        case CpuIsa::avx2: EXPECT_EQ(&chosen, &avx2); break;
        case CpuIsa::baseline: EXPECT_EQ(&chosen, &baseline); break;
    }
}

}  // namespace
