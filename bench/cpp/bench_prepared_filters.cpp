// What a plan's prepared filters save per call: Winograd forward on ResNet/VGG 3x3 layers
// (batch 1, float32, warm buffers), executed through a plan with the filters transformed in
// each call ("per_call") and prepared once (convcorePrepareConvolutionPlanFilters, "prepared").
//
//   build/bench/bench/cpp/bench_prepared_filters --benchmark_enable_random_interleaving=true \
//       --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "convcore/convcore.hpp"

namespace {

struct Layer {
    int64_t c, k, hw;
};
const Layer kLayers[] = {{64, 64, 56}, {128, 128, 28}, {256, 256, 14}, {512, 512, 7}, {256, 256, 56}};

void BM_WinogradForward(benchmark::State& state) {
    const Layer& l = kLayers[state.range(0)];
    const auto algo = state.range(1) == 2 ? CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3 : CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3;
    const bool prepared = state.range(2) != 0;
    convcore::Handle h;
    convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, l.c, l.hw, l.hw), y(CONVCORE_DATA_FLOAT, 1, l.k, l.hw, l.hw);
    convcore::FilterDesc w(CONVCORE_DATA_FLOAT, l.k, l.c, 3, 3);
    convcore::ConvDesc conv(1);
    convcore::Plan plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, algo);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> xv(size_t(l.c * l.hw * l.hw)), wv(size_t(l.k * l.c * 9)), yv(size_t(l.k * l.hw * l.hw));
    for (float& v : xv) v = u(rng);
    for (float& v : wv) v = u(rng);
    std::vector<char> ws(plan.workspace_size() + 64);
    void* ws_aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) / 64 * 64);
    size_t bytes = 0;
    if (prepared) convcore::check(convcorePrepareConvolutionPlanFilters(plan, wv.data(), &bytes));
    const float one = 1, zero = 0;
    for (auto _ : state) plan.execute(&one, xv.data(), wv.data(), &zero, yv.data(), ws_aligned, plan.workspace_size());
    state.counters["prepared_MB"] = double(bytes) / 1e6;
    state.SetLabel(std::string(convcoreGetFwdAlgoName(algo)) + " " + std::to_string(l.c) + "->" +
                   std::to_string(l.k) + " @" + std::to_string(l.hw) + (prepared ? " prepared" : " per_call"));
}

BENCHMARK(BM_WinogradForward)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {2, 4}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
