// Tables of the one list of algorithms (convcore/algorithms.def), checked against convcore.h's enums.
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
#define CONVCORE_FORWARD(NAME, value, solver, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};
constexpr AlgorithmInfo kBackwardData[] = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(NAME, value, how, code, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};
constexpr AlgorithmInfo kBackwardFilter[] = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(NAME, value, how, code, devices, f32, f64, det) {#NAME, CONVCORE_DEVICES_##devices, f32, f64, det},
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};

// Line i of each pass has the value i (so that the tables above are indexed by the enum).
constexpr int kForwardOrder[] = {
#define CONVCORE_FORWARD(NAME, ...) CONVCORE_FWD_ALGO_##NAME,
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};
constexpr int kBackwardDataOrder[] = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(NAME, ...) CONVCORE_BWD_DATA_ALGO_##NAME,
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};
constexpr int kBackwardFilterOrder[] = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(NAME, ...) CONVCORE_BWD_FILTER_ALGO_##NAME,
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
};

template <int N>
constexpr bool in_enum_order(const int (&order)[N]) {
    for (int i = 0; i < N; ++i)
        if (order[i] != i) return false;
    return true;
}
static_assert(in_enum_order(kForwardOrder) && std::size(kForwardOrder) == CONVCORE_FWD_ALGO_COUNT,
              "convcore/algorithms.def: the CONVCORE_FORWARD lines must have the values 0, 1, 2, ... in order");
static_assert(in_enum_order(kBackwardDataOrder) && std::size(kBackwardDataOrder) == CONVCORE_BWD_DATA_ALGO_COUNT,
              "convcore/algorithms.def: the CONVCORE_BACKWARD_DATA lines must have the values 0, 1, 2, ... in order");
static_assert(in_enum_order(kBackwardFilterOrder) &&
                  std::size(kBackwardFilterOrder) == CONVCORE_BWD_FILTER_ALGO_COUNT,
              "convcore/algorithms.def: the CONVCORE_BACKWARD_FILTER lines must have the values 0, 1, 2, ... in order");

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
