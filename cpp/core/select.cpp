#include "core/select.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "core/algo_filter.hpp"
#include "core/generated/heuristic_cpu.hpp"

namespace convcore {
namespace {

// CUDA: a simple rule set until GPU measurements exist (from the first CPU measurements:
// IMPLICIT_GEMM before IM2COL_GEMM except with few output positions per image and many
// output channels, where the BLAS GEMM's blocking wins; DIRECT, the reference, last).
double cuda_rule_cost(convcoreConvolutionFwdAlgo_t algo, const ConvProblem& p) {
    const bool few_positions = double(p.p) * double(p.q) < 64 && p.k_per_group() >= 256;
    switch (algo) {
        case CONVCORE_FWD_ALGO_IMPLICIT_GEMM: return few_positions ? 2.0 : 1.0;
        case CONVCORE_FWD_ALGO_IM2COL_GEMM: return few_positions ? 1.0 : 2.0;
        case CONVCORE_FWD_ALGO_DIRECT: return 10.0;
        default: return 5.0;
    }
}

// The features of tools/fit_heuristic.py (FEATURES there), in its order: 1, seven logs of
// sizes, two flags, then the products of the logs (i <= j).
std::array<double, heuristic_cpu::kFeatureCount> heuristic_features(const ConvProblem& p) {
    // Products in double: valid problems may have extents whose int64 product overflows
    // (found by the fuzz corpus under UBSan).
    const auto lg = [](double v) { return std::log(std::max(v, 1.0)); };
    const auto d = [](int64_t v) { return double(v); };
    const double logs[] = {lg(d(p.n)),
                           lg(d(p.p) * d(p.q)),
                           lg((d(p.h) + 2 * d(p.pad_h)) * (d(p.w) + 2 * d(p.pad_w))),
                           lg(d(p.c_per_group())),
                           lg(d(p.k_per_group())),
                           lg(d(p.groups)),
                           lg(d(p.r) * d(p.s))};
    constexpr int kLogs = sizeof(logs) / sizeof(logs[0]);
    std::array<double, heuristic_cpu::kFeatureCount> x{};
    int i = 0;
    x[i++] = 1.0;
    for (double v : logs) x[i++] = v;
    x[i++] = p.unit_stride() ? 0.0 : 1.0;
    x[i++] = p.unit_dilation() ? 0.0 : 1.0;
    x[i++] = p.k_per_group() <= 4 ? 1.0 : 0.0;  // IMPLICIT_GEMM's row path
    x[i++] = p.c_per_group() <= 4 ? 1.0 : 0.0;  // CYCLIC_MINIMAL's GEMM-free path
    for (int a = 0; a < kLogs; ++a)
        for (int b = a; b < kLogs; ++b) x[i++] = logs[a] * logs[b];
    return x;
}
static_assert(heuristic_cpu::kFeatureCount == 1 + 7 + 4 + 7 * 8 / 2,
              "tools/fit_heuristic.py and heuristic_features disagree on the features");

// CPU: the measured model (cpp/core/generated/heuristic_cpu.hpp): predicted relative log time,
// or nullopt for an algorithm the model does not cover.
using Features = std::array<double, heuristic_cpu::kFeatureCount>;

std::optional<double> cpu_model_cost(convcoreConvolutionFwdAlgo_t algo, const Features& x) {
    for (const auto& m : heuristic_cpu::kModels) {
        if (m.algo != algo) continue;
        double cost = 0;
        for (int i = 0; i < heuristic_cpu::kFeatureCount; ++i) cost += m.coef[i] * x[i];
        return cost;
    }
    return std::nullopt;
}

// Where an applicable algorithm goes in the CPU ranking, first to last.
enum class CpuRank {
    Only,      // made only for such problems (MadeFor::Only, core/solver.hpp: DEPTHWISE)
    Model,     // ordered by the model's cost; the first of these is the heuristic's choice
    Unmodelled,  // no model (POINTWISE, or an algorithm added since the last fit): placed right
                 // after the first choice, among the CONVCORE_SELECT_CANDIDATES that auto times
    Reference  // DIRECT, the reference loops: 30-200x slower than the best on the suites
};

// The minimal-multiplication algorithms on 1 x F and F x 1 filters run the 1-D path (cpu/
// bilinear_1d.hpp: half the multiplications of a GEMM for F(4,3), where the model, fitted on 3x3
// runs, expects the 2-D nesting's quarter): not what the model covers.
bool one_dimensional_minimal(convcoreConvolutionFwdAlgo_t algo, const ConvProblem& prob) {
    const bool minimal = algo == CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 || algo == CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3 ||
                         algo == CONVCORE_FWD_ALGO_CYCLIC_MINIMAL;
    return minimal && (prob.r == 1) != (prob.s == 1);
}

CpuRank cpu_rank(const RankedAlgo& r, const ConvProblem& prob, const std::optional<double>& cost) {
    if (r.solver->made_for_problem(run_problem(prob, r.solver->runs_nhwc)) == MadeFor::Only) return CpuRank::Only;
    if (r.algo == CONVCORE_FWD_ALGO_DIRECT) return CpuRank::Reference;
    return cost ? CpuRank::Model : CpuRank::Unmodelled;
}

// The CPU's applicable algorithms, best first (see CpuRank).
std::vector<RankedAlgo> rank_cpu(const std::vector<RankedAlgo>& ok, const ConvProblem& prob) {
    const Features features = heuristic_features(prob);
    std::vector<std::pair<double, RankedAlgo>> by_rank[4];
    for (const RankedAlgo& r : ok) {
        const std::optional<double> cost =
            one_dimensional_minimal(r.algo, prob) ? std::nullopt : cpu_model_cost(r.algo, features);
        by_rank[int(cpu_rank(r, prob, cost))].push_back({cost.value_or(0.0), r});
    }
    auto& model = by_rank[int(CpuRank::Model)];
    std::stable_sort(model.begin(), model.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // Where the 1-D minimal algorithms apply (1 x 2/3 and 2/3 x 1 filters) they are GEMMs with
    // transforms around them: the GEMM lowerings come first, so that auto times them beside the
    // plain GEMM they must beat (the model, fitted mostly on square windows, ranked IM2WIN first
    // for a 3x1 layer of a (2+1)-D network, and no GEMM was timed).
    if (std::any_of(ok.begin(), ok.end(), [&](const RankedAlgo& r) { return one_dimensional_minimal(r.algo, prob); }))
        std::stable_partition(model.begin(), model.end(), [](const auto& e) {
            return e.second.algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM || e.second.algo == CONVCORE_FWD_ALGO_IM2COL_GEMM;
        });
    std::vector<RankedAlgo> ranked;
    for (const auto& e : by_rank[int(CpuRank::Only)]) ranked.push_back(e.second);
    // The first choice: what the model ranks first, unless an Only algorithm came first.
    size_t model_from = 0;
    if (ranked.empty() && !model.empty()) ranked.push_back(model[model_from++].second);
    for (const auto& e : by_rank[int(CpuRank::Unmodelled)]) ranked.push_back(e.second);
    for (size_t i = model_from; i < model.size(); ++i) ranked.push_back(model[i].second);
    for (const auto& e : by_rank[int(CpuRank::Reference)]) ranked.push_back(e.second);
    return ranked;
}

}  // namespace

std::vector<RankedAlgo> rank_algorithms(const ConvProblem& prob) {
    const bool on_cpu = prob.device == CONVCORE_DEVICE_CPU;
    std::vector<RankedAlgo> ok, not_ok;
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i) {
        const auto algo = convcoreConvolutionFwdAlgo_t(i);
        const Solver* s = find_solver(algo, prob.device);
        if (s && !disabled_by_env(algo) && s->why_not(run_problem(prob, s->runs_nhwc)).empty())
            ok.push_back({algo, s});
        else
            not_ok.push_back({algo, nullptr});
    }
    std::vector<RankedAlgo> ranked = ok;
    if (on_cpu) {
        ranked = rank_cpu(ok, prob);
    } else {
        std::stable_sort(ranked.begin(), ranked.end(), [&](const RankedAlgo& a, const RankedAlgo& b) {
            return cuda_rule_cost(a.algo, prob) < cuda_rule_cost(b.algo, prob);
        });
    }
    ranked.insert(ranked.end(), not_ok.begin(), not_ok.end());
    return ranked;
}

}  // namespace convcore
