// The environment switch that removes algorithms from every selection: Get (and so the Python
// API's "auto"), Find and the find-db. CONVCORE_DISABLE_ALGOS=fft,poly_hankel lists algorithm
// names, case-insensitive; a name removes the algorithm of that name in every direction
// (forward, backward data, backward filter). Unknown names are ignored. An algorithm passed by
// name to a run call (convcoreConvolutionForward, ...) still runs: this only filters selection.
#pragma once
#include <string>

#include "convcore/convcore.h"
#include "core/algorithms.hpp"

namespace convcore {

// True when CONVCORE_DISABLE_ALGOS names `algo_name` (read at every call: cheap, and tests
// may change the variable while the process runs).
bool disabled_by_env(const char* algo_name);

inline bool disabled_by_env(convcoreConvolutionFwdAlgo_t algo) {
    return disabled_by_env(algo_name(CONVCORE_PASS_FORWARD, algo));
}
inline bool disabled_by_env(convcoreConvolutionBwdDataAlgo_t algo) {
    return disabled_by_env(algo_name(CONVCORE_PASS_BACKWARD_DATA, algo));
}
inline bool disabled_by_env(convcoreConvolutionBwdFilterAlgo_t algo) {
    return disabled_by_env(algo_name(CONVCORE_PASS_BACKWARD_FILTER, algo));
}

// The reason given for a disabled algorithm.
std::string disabled_reason(const char* algo_name);

}  // namespace convcore
