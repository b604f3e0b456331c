// Tables of the one list of algorithms (core/algorithms.def), checked against convcore.h's enums.
#include "core/algorithms.hpp"

#include <strings.h>

#include <iterator>
#include <string>

#include "core/api_util.hpp"
#include "core/error.hpp"

namespace convcore {
namespace {

#define CONVCORE_DEVICES_CPU_CUDA true, true
#define CONVCORE_DEVICES_CPU true, false
#define CONVCORE_DEVICES_CUDA false, true

constexpr AlgorithmInfo kForward[] = {
#define FORWARD(NAME, solver, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#define BACKWARD_DATA(...)
#define BACKWARD_FILTER(...)
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};
constexpr AlgorithmInfo kBackwardData[] = {
#define FORWARD(...)
#define BACKWARD_DATA(NAME, how, code, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#define BACKWARD_FILTER(...)
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};
constexpr AlgorithmInfo kBackwardFilter[] = {
#define FORWARD(...)
#define BACKWARD_DATA(...)
#define BACKWARD_FILTER(NAME, how, code, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};

// Each list's line i is the enum value i of its pass, and every enum value has a line.
constexpr int kForwardOrder[] = {
#define FORWARD(NAME, ...) CONVCORE_FWD_ALGO_##NAME,
#define BACKWARD_DATA(...)
#define BACKWARD_FILTER(...)
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};
constexpr int kBackwardDataOrder[] = {
#define FORWARD(...)
#define BACKWARD_DATA(NAME, ...) CONVCORE_BWD_DATA_ALGO_##NAME,
#define BACKWARD_FILTER(...)
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};
constexpr int kBackwardFilterOrder[] = {
#define FORWARD(...)
#define BACKWARD_DATA(...)
#define BACKWARD_FILTER(NAME, ...) CONVCORE_BWD_FILTER_ALGO_##NAME,
#include "core/algorithms.def"
#undef FORWARD
#undef BACKWARD_DATA
#undef BACKWARD_FILTER
};

template <int N>
constexpr bool in_enum_order(const int (&order)[N]) {
    for (int i = 0; i < N; ++i)
        if (order[i] != i) return false;
    return true;
}
static_assert(in_enum_order(kForwardOrder) && std::size(kForwardOrder) == CONVCORE_FWD_ALGO_COUNT,
              "core/algorithms.def: the FORWARD lines must follow convcoreConvolutionFwdAlgo_t, one per value");
static_assert(in_enum_order(kBackwardDataOrder) && std::size(kBackwardDataOrder) == CONVCORE_BWD_DATA_ALGO_COUNT,
              "core/algorithms.def: the BACKWARD_DATA lines must follow convcoreConvolutionBwdDataAlgo_t");
static_assert(in_enum_order(kBackwardFilterOrder) &&
                  std::size(kBackwardFilterOrder) == CONVCORE_BWD_FILTER_ALGO_COUNT,
              "core/algorithms.def: the BACKWARD_FILTER lines must follow convcoreConvolutionBwdFilterAlgo_t");

struct Table {
    const AlgorithmInfo* rows;
    int count;
};

Table table(convcoreConvolutionPass_t pass) {
    switch (api::enum_int(pass)) {
        case CONVCORE_PASS_FORWARD: return {kForward, int(std::size(kForward))};
        case CONVCORE_PASS_BACKWARD_DATA: return {kBackwardData, int(std::size(kBackwardData))};
        case CONVCORE_PASS_BACKWARD_FILTER: return {kBackwardFilter, int(std::size(kBackwardFilter))};
        default: return {nullptr, 0};
    }
}

}  // namespace

const AlgorithmInfo* algorithm_info(convcoreConvolutionPass_t pass, int algo) {
    const Table t = table(pass);
    return algo >= 0 && algo < t.count ? &t.rows[algo] : nullptr;
}

int algorithm_count(convcoreConvolutionPass_t pass) { return table(pass).count; }

int algorithm_by_name(convcoreConvolutionPass_t pass, const char* name) {
    const Table t = table(pass);
    for (int i = 0; i < t.count; ++i)
        if (strcasecmp(name, t.rows[i].name) == 0) return i;
    std::string all;
    for (int i = 0; i < t.count; ++i) all += std::string(i ? ", " : "") + t.rows[i].name;
    throw_bad_param(std::string("unknown algorithm '") + name + "': expected one of " + all);
}

}  // namespace convcore

using convcore::api::enum_int;

convcoreStatus_t convcoreGetAlgorithmInfo(convcoreConvolutionPass_t pass, int algo, convcoreAlgorithmInfo_t* info) {
    return convcore::api::guard([&] {
        convcore::api::require(info, "info");
        const int p = enum_int(pass);
        if (p < CONVCORE_PASS_FORWARD || p > CONVCORE_PASS_BACKWARD_FILTER)
            convcore::throw_bad_param("pass " + std::to_string(p) + " is not a convcoreConvolutionPass_t");
        const convcore::AlgorithmInfo* a = convcore::algorithm_info(pass, algo);
        if (!a)
            convcore::throw_bad_param("algo " + std::to_string(algo) + " is not an algorithm of pass " +
                                      std::to_string(p) + " (0 to " +
                                      std::to_string(convcore::algorithm_count(pass) - 1) + ")");
        *info = {a->name, a->on_cpu, a->on_cuda, a->bound_f32, a->bound_f64,
                 a->deterministic ? CONVCORE_DETERMINISTIC : CONVCORE_NON_DETERMINISTIC};
    });
}
