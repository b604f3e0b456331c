// Selection and probes: output shapes, the rankings and workspace sizes of every pass, Find, and
// the benchmark's machine probe.
#include <map>

#include "common.hpp"

namespace convcore_py {
namespace {

// ---- the shape-level queries ----------------------------------------------------------------

std::vector<int64_t> output_shape(const std::vector<int64_t>& x_shape,
                                  const std::vector<int64_t>& w_shape, const ConvParams& p) {
    Descriptors d;
    require_4d(x_shape, "x", "NCHW");
    require_4d(w_shape, "w", "K x C/groups x R x S");
    d.set_conv(p);
    d.set_x(x_shape, CONVCORE_DATA_FLOAT);
    d.set_w(w_shape, CONVCORE_DATA_FLOAT);
    return d.set_y(CONVCORE_DATA_FLOAT);
}

// A transposed convolution's output shape (convcoreGetConvolutionNdTransposedOutputDim: PyTorch's
// output padding, checked by the core) for an input of dy_shape (N, K, spatial...) and filters of
// w_shape; padding, stride, dilation and output_padding: one value per spatial axis.
std::vector<int64_t> transposed_output_shape(const std::vector<int64_t>& dy_shape, const std::vector<int64_t>& w_shape,
                                             const std::vector<int64_t>& padding, const std::vector<int64_t>& stride,
                                             const std::vector<int64_t>& dilation, int64_t groups,
                                             const std::vector<int64_t>& output_padding) {
    const int nb = int(dy_shape.size());
    const size_t sp = dy_shape.size() < 2 ? 0 : dy_shape.size() - 2;
    if (w_shape.size() != dy_shape.size())
        bad_param("w: expected " + std::to_string(nb) + " dimensions (as x), got shape " + shape_str(w_shape));
    for (const auto* v : {&padding, &stride, &dilation, &output_padding})
        if (v->size() != sp) bad_param("expected one padding, stride, dilation and output_padding per spatial axis");
    convcore::TensorDesc dy;
    convcore::FilterDesc w;
    convcore::ConvDesc conv;
    std::vector<int64_t> packed(dy_shape.size(), 1);
    for (int i = nb - 2; i >= 0; --i) packed[size_t(i)] = packed[size_t(i) + 1] * std::max<int64_t>(dy_shape[size_t(i) + 1], 1);
    check(convcoreSetTensorNdDescriptor(dy, CONVCORE_DATA_FLOAT, nb, dy_shape.data(), packed.data()), "x: ");
    check(convcoreSetFilterNdDescriptor(w, CONVCORE_DATA_FLOAT, CONVCORE_TENSOR_NCHW, nb, w_shape.data()), "w: ");
    check(convcoreSetConvolutionNdDescriptor(conv, int(sp), padding.data(), stride.data(), dilation.data(),
                                             CONVCORE_CROSS_CORRELATION));
    wrapped("groups: ", [&] { conv.set_groups(groups); });
    std::vector<int64_t> out(dy_shape.size());
    check(convcoreGetConvolutionNdTransposedOutputDim(conv, dy, w, nb, output_padding.data(), out.data()));
    return out;
}

// One row of the heuristic ranking.
struct AlgoPerf {
    int algo;
    bool supported;
    size_t workspace;
    bool deterministic;
};

std::vector<AlgoPerf> rank(convcoreHandle_t h, const Descriptors& d) {
    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int count = 0;
    check(convcoreGetConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, CONVCORE_FWD_ALGO_COUNT,
                                                 &count, perf));
    std::vector<AlgoPerf> out;
    for (int i = 0; i < count; ++i)
        out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                       perf[i].determinism == CONVCORE_DETERMINISTIC});
    return out;
}

std::vector<AlgoPerf> rank_algos(const std::vector<int64_t>& x_shape,
                                 const std::vector<int64_t>& w_shape, const ConvParams& p,
                                 int device_type, int device_index, const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    return rank(handle_for(device_type, device_index), d);
}

size_t workspace_size(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
                      const ConvParams& p, int algo, int device_type, int device_index,
                      const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    size_t bytes = 0;
    check_algo_call(convcoreGetConvolutionForwardWorkspaceSize(handle_for(device_type, device_index),
                                                               d.x, d.w, d.conv, d.y,
                                                               convcoreConvolutionFwdAlgo_t(algo), &bytes),
                    algo);
    return bytes;
}


// Ranking and workspace size of a backward direction, for a problem given by shapes.
std::vector<AlgoPerf> rank_bwd_algos(const std::vector<int64_t>& x_shape,
                                     const std::vector<int64_t>& w_shape, const ConvParams& p,
                                     int direction, int device_type, int device_index,
                                     const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    convcoreHandle_t h = handle_for(device_type, device_index);
    std::vector<AlgoPerf> out;
    if (direction == BACKWARD_DATA) {
        convcoreConvolutionBwdDataAlgoPerf_t perf[CONVCORE_BWD_DATA_ALGO_COUNT];
        int count = 0;
        check(convcoreGetConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x,
                                                          CONVCORE_BWD_DATA_ALGO_COUNT, &count, perf));
        for (int i = 0; i < count; ++i)
            out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                           perf[i].determinism == CONVCORE_DETERMINISTIC});
    } else {
        convcoreConvolutionBwdFilterAlgoPerf_t perf[CONVCORE_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        check(convcoreGetConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w,
                                                            CONVCORE_BWD_FILTER_ALGO_COUNT, &count, perf));
        for (int i = 0; i < count; ++i)
            out.push_back({int(perf[i].algo), perf[i].status == CONVCORE_STATUS_SUCCESS, perf[i].memory,
                           perf[i].determinism == CONVCORE_DETERMINISTIC});
    }
    return out;
}

size_t workspace_size_bwd(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
                          const ConvParams& p, int algo, int direction, int device_type,
                          int device_index, const std::string& dtype) {
    const convcoreDataType_t t = data_type_of(dtype);
    Descriptors d;
    set_from_shapes(d, x_shape, w_shape, p, t);
    convcoreHandle_t h = handle_for(device_type, device_index);
    size_t bytes = 0;
    if (direction == BACKWARD_DATA)
        check_bwd(convcoreGetConvolutionBackwardDataWorkspaceSize(
                      h, d.w, d.y, d.conv, d.x, convcoreConvolutionBwdDataAlgo_t(algo), &bytes),
                  direction, algo);
    else
        check_bwd(convcoreGetConvolutionBackwardFilterWorkspaceSize(
                      h, d.x, d.y, d.conv, d.w, convcoreConvolutionBwdFilterAlgo_t(algo), &bytes),
                  direction, algo);
    return bytes;
}


std::vector<std::string> bwd_algo_names(int direction) {
    std::vector<std::string> names;
    if (direction == BACKWARD_DATA)
        for (int i = 0; i < CONVCORE_BWD_DATA_ALGO_COUNT; ++i)
            names.push_back(convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t(i)));
    else if (direction == BACKWARD_FILTER)
        for (int i = 0; i < CONVCORE_BWD_FILTER_ALGO_COUNT; ++i)
            names.push_back(convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t(i)));
    else
        bad_param("direction: expected 1 (backward data) or 2 (backward filter)");
    return names;
}


// A machine diagnostic for `convcore bench`: the round trip, in ns, of a cache line handed back
// and forth between OpenMP threads 0 and 1 (best of 3 runs of up to 20000 trips, each cut off
// after 20 ms); 0 where fewer than 2 CPUs or threads are available. Tens of ns while the two
// CPUs share an L3, hundreds while they sit on different L3 domains, which doubles the time of
// code whose threads hand data to each other (bench/results/cpu-2026-11-23-s6.md).
double cache_line_round_trip_ns() {
    py::gil_scoped_release release;
    return convcore_cache_line_round_trip_ns(3, 20.0);
}


// ---- Find ------------------------------------------------------------------------------------

// Convolution.find: Find on the caller's x and w (out is scratch), with a workspace of the
// largest size that an algorithm within `workspace_limit` (-1: no limit) needs.
// [(algo, status, time_ms, workspace_bytes, deterministic)], fastest first, failures last.
py::list find(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
              int64_t workspace_limit, bool deterministic, uintptr_t stream, bool prepared) {
    Descriptors d;
    set_forward_descriptors(d, x, w, y, p);
    if (prepared) check(convcoreSetConvolutionFilterProtocol(d.conv, CONVCORE_FILTERS_PREPARED));
    const bool on_cuda = x.device_type() == kDLCUDA;
    convcoreHandle_t h = handle_on(x, stream);
    const size_t limit = workspace_limit < 0 ? SIZE_MAX : size_t(workspace_limit);
    size_t bytes = 0;
    for (const AlgoPerf& a : rank(h, d))
        if (a.supported && a.workspace <= limit) bytes = std::max(bytes, a.workspace);

    convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT];
    int count = 0;
    check(convcoreSetDeterministicOnly(h, deterministic ? 1 : 0));
    const convcoreStatus_t status = with_workspace(h, on_cuda, bytes, [&](void* ws, size_t n) {
        return convcoreFindConvolutionForwardAlgorithmEx(h, d.x, x.data(), d.w, w.data(), d.conv, d.y,
                                                         y.data(), CONVCORE_FWD_ALGO_COUNT, &count, perf,
                                                         ws, n);
    });
    const std::string reason = convcoreGetLastErrorString();
    convcoreSetDeterministicOnly(h, 0);  // the handle is this thread's, shared with other calls
    if (status != CONVCORE_STATUS_SUCCESS) throw StatusError(status, "find: " + reason);
    py::list out;
    for (int i = 0; i < count; ++i)
        out.append(py::make_tuple(int(perf[i].algo), int(perf[i].status), double(perf[i].time),
                                  perf[i].memory, perf[i].determinism == CONVCORE_DETERMINISTIC,
                                  double(perf[i].timePerCall), double(perf[i].timePrepared)));
    return out;
}

// The find-db's records of a caller's choice (convcoreStoreChoiceTimes): the Python layer's
// 3-D schedules. `device_type`/`device_index` as rank_algos'.
void store_choice_times(int device_type, int device_index, const std::string& direction,
                        const std::string& problem, const std::map<std::string, double>& times_ms) {
    std::vector<const char*> options;
    std::vector<float> times;
    for (const auto& kv : times_ms) {
        options.push_back(kv.first.c_str());
        times.push_back(float(kv.second));
    }
    check(convcoreStoreChoiceTimes(handle_for(device_type, device_index), direction.c_str(), problem.c_str(),
                                   int(options.size()), options.data(), times.data()));
}

std::string fastest_choice(int device_type, int device_index, const std::string& direction,
                           const std::string& problem) {
    char option[256];
    check(convcoreGetFastestChoice(handle_for(device_type, device_index), direction.c_str(), problem.c_str(),
                                   option, sizeof option));
    return option;
}

py::tuple find_stats() {
    int64_t timed = 0, hits = 0;
    check(convcoreGetFindStats(&timed, &hits));
    return py::make_tuple(timed, hits);
}

}  // namespace

void register_selection(py::module_& m) {
    m.def("cache_line_round_trip_ns", &cache_line_round_trip_ns,
          "Diagnostic for the bench: a cache line's round trip between two threads, in ns.");

    m.def("output_shape", &output_shape, py::arg("x_shape"), py::arg("w_shape"), py::arg("params"));
    m.def("transposed_output_shape", &transposed_output_shape, py::arg("x_shape"), py::arg("w_shape"),
          py::arg("padding"), py::arg("stride"), py::arg("dilation"), py::arg("groups"), py::arg("output_padding"),
          "The output shape of a transposed convolution (PyTorch's output padding, checked by the core).");
    m.def("rank_algos",
          [](const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const ConvParams& p,
             int device_type, int device_index, const std::string& dtype) {
              py::list out;
              for (const AlgoPerf& a : rank_algos(xs, ws, p, device_type, device_index, dtype))
                  out.append(py::make_tuple(a.algo, a.supported, a.workspace, a.deterministic));
              return out;
          },
          py::arg("x_shape"), py::arg("w_shape"), py::arg("params"), py::arg("device_type"),
          py::arg("device_index"), py::arg("dtype"),
          "The heuristic ranking: [(algo, supported, workspace_bytes, deterministic)], "
          "supported ones first, best first.");
    m.def("workspace_size", &workspace_size, py::arg("x_shape"), py::arg("w_shape"),
          py::arg("params"), py::arg("algo"), py::arg("device_type"), py::arg("device_index"),
          py::arg("dtype"));
    m.attr("ALGO_AUTO") = kAlgoAuto;
    m.attr("ALGO_FIND") = kAlgoFind;
    m.attr("SELECT_CANDIDATES") = CONVCORE_SELECT_CANDIDATES;
    m.def("find", &find, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("params"),
          py::arg("workspace_limit"), py::arg("deterministic"), py::arg("stream"), py::arg("prepared") = false,
          "FindEx on x and w (y: scratch): [(algo, status, time_ms, workspace, deterministic, "
          "time_per_call_ms, time_prepared_ms)], fastest first for the protocol (prepared filters or per call).");
    m.def("find_stats", &find_stats, "(timed_runs, db_hits) of Find in this process.");
    m.def("store_choice_times", &store_choice_times, py::arg("device_type"), py::arg("device_index"),
          py::arg("direction"), py::arg("problem"), py::arg("times_ms"),
          "Keeps {option: ms} of a choice between ways of running a problem in the find-db.");
    m.def("fastest_choice", &fastest_choice, py::arg("device_type"), py::arg("device_index"),
          py::arg("direction"), py::arg("problem"),
          "The fastest option the find-db holds for the choice, \"\" when none.");
    m.def("clear_find_cache",
          [] {
              check(convcoreClearFindCache());
              ++g_plan_generation;
          },
          "Forget the in-process cache of find results (the find-db file is read again) and the "
          "plans made from them.");
    m.def("bwd_algo_names", &bwd_algo_names, py::arg("direction"),
          "Backward algorithm names of a direction (1: data, 2: filter) in enum order.");
    m.def("rank_bwd_algos",
          [](const std::vector<int64_t>& xs, const std::vector<int64_t>& ws, const ConvParams& p,
             int direction, int device_type, int device_index, const std::string& dtype) {
              py::list out;
              for (const AlgoPerf& a : rank_bwd_algos(xs, ws, p, direction, device_type, device_index, dtype))
                  out.append(py::make_tuple(a.algo, a.supported, a.workspace, a.deterministic));
              return out;
          },
          py::arg("x_shape"), py::arg("w_shape"), py::arg("params"), py::arg("direction"),
          py::arg("device_type"), py::arg("device_index"), py::arg("dtype"));
    m.def("workspace_size_bwd", &workspace_size_bwd, py::arg("x_shape"), py::arg("w_shape"),
          py::arg("params"), py::arg("algo"), py::arg("direction"), py::arg("device_type"),
          py::arg("device_index"), py::arg("dtype"));
}

}  // namespace convcore_py
