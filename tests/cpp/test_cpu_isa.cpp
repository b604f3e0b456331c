// The kernel width the dispatched CPU solvers run (cpu/cpu_isa.hpp): the widest the CPU has,
// capped by CONVCORE_CPU_ISA.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "cpu/cpu_isa.hpp"

using convcore::cpu::CpuIsa;
using convcore::cpu::detect_cpu_isa;

namespace {

// The widest ISA from another source than the library's CPUID queries: the kernel's own list
// of the CPU's flags (/proc/cpuinfo), which has only what the OS enabled too.
std::set<std::string> cpuinfo_flags() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        std::set<std::string> flags;
        for (std::string w; words >> w;) flags.insert(w);
        return flags;
    }
    return {};
}

CpuIsa widest() {
#ifdef CONVCORE_X86_DISPATCH
    const std::set<std::string> flags = cpuinfo_flags();
    EXPECT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
    if (flags.count("avx512f") && flags.count("avx512dq")) return CpuIsa::avx512;
    if (flags.count("avx2") && flags.count("fma")) return CpuIsa::avx2;
#endif
    return CpuIsa::baseline;
}

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
