// The one list of algorithms (convcore/algorithms.def) as tables per pass: names, devices, error
// bounds, determinism. The C API's names and convcoreGetAlgorithmInfo read them.
#pragma once
#include "convcore/convcore.h"

namespace convcore {

struct AlgorithmInfo {
    const char* name;  // the enum's suffix, e.g. "WINOGRAD_4X4_3X3"
    bool on_cpu, on_cuda;
    double bound_f32, bound_f64;  // ||out - ref|| / ||ref|| against the float64 reference
    bool deterministic;
};

// The pass's algorithm `algo` (its enum value); nullptr when algo is out of range.
const AlgorithmInfo* algorithm_info(convcoreConvolutionPass_t pass, int algo);
int algorithm_count(convcoreConvolutionPass_t pass);
// The algorithm's name ("DIRECT", ...), nullptr when algo is out of range: what
// convcoreGet{Fwd,BwdData,BwdFilter}AlgoName return, for the core's own use.
inline const char* algo_name(convcoreConvolutionPass_t pass, int algo) {
    const AlgorithmInfo* info = algorithm_info(pass, algo);
    return info ? info->name : nullptr;
}
// The pass's enum value of a name (case-insensitive); throws BAD_PARAM listing the valid names.
int algorithm_by_name(convcoreConvolutionPass_t pass, const char* name);

}  // namespace convcore
