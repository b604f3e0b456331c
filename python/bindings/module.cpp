// _convcore: thin pybind11 bindings over the public C API (convcore/convcore.h only). Argument
// parsing, output allocation and the user-facing API are in Python (convcore/_api.py, _args.py,
// _dlpack.py); the
// bindings' files are listed in common.hpp.
#include "common.hpp"

namespace convcore_py {
void register_buffers(py::module_& m);
void register_plans(py::module_& m);
void register_selection(py::module_& m);

namespace {

// ---- library information --------------------------------------------------------------------

int cuda_device_count() {
    int count = 0;
    check(convcoreGetCudaDeviceCount(&count));
    return count;
}

std::vector<std::string> algo_names() {
    std::vector<std::string> names;
    for (int i = 0; i < CONVCORE_FWD_ALGO_COUNT; ++i)
        names.push_back(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(i)));
    return names;
}

int algo_by_name(const std::string& name) {
    convcoreConvolutionFwdAlgo_t algo;
    check(convcoreGetFwdAlgoByName(name.c_str(), &algo), "algo: ");
    return int(algo);
}

void set_num_threads(int n) { check(convcoreSetNumThreads(cpu_handle(), n), "threads: "); }

}  // namespace
}  // namespace convcore_py

using namespace convcore_py;

PYBIND11_MODULE(_convcore, m) {    m.doc() = "convcore C API bindings (internal; use the convcore package)";

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const StatusError& e) {
            const int s = int(e.status);
            PyObject* cls = (s >= 0 && s <= 5 && g_error_classes[s]) ? g_error_classes[s]
                                                                     : PyExc_RuntimeError;
            PyErr_SetString(cls, e.what());
        } catch (const convcore::Exception& e) {  // a wrapper call outside wrapped()
            const int s = int(e.status());
            PyObject* cls = (s >= 0 && s <= 5 && g_error_classes[s]) ? g_error_classes[s]
                                                                     : PyExc_RuntimeError;
            PyErr_SetString(cls, e.what());
        }
    });

    m.def("_set_error_classes", &set_error_classes,
          "Register the Python exception class per convcoreStatus_t value.");

    m.attr("STATUS_BAD_PARAM") = int(CONVCORE_STATUS_BAD_PARAM);
    m.attr("STATUS_NOT_SUPPORTED") = int(CONVCORE_STATUS_NOT_SUPPORTED);
    m.attr("STATUS_ALLOC_FAILED") = int(CONVCORE_STATUS_ALLOC_FAILED);
    m.attr("STATUS_EXECUTION_FAILED") = int(CONVCORE_STATUS_EXECUTION_FAILED);
    m.attr("STATUS_INTERNAL_ERROR") = int(CONVCORE_STATUS_INTERNAL_ERROR);
    m.attr("DEVICE_CPU") = int(CONVCORE_DEVICE_CPU);
    m.attr("DEVICE_CUDA") = int(CONVCORE_DEVICE_CUDA);
    m.attr("CROSS_CORRELATION") = int(CONVCORE_CROSS_CORRELATION);
    m.attr("CONVOLUTION") = int(CONVCORE_CONVOLUTION);

    m.def("version", [] {
        const size_t v = convcoreGetVersion();
        return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100);
    });
    m.def("build_info", [] { return std::string(convcoreGetBuildInfo()); });
    m.def("cuda_device_count", &cuda_device_count);
    m.def("algo_names", &algo_names, "Algorithm names in enum order (uppercase, as the C API).");
    m.def(
        "algorithm_info",
        [](int pass, int algo) {
            convcoreAlgorithmInfo_t info{};
            check(convcoreGetAlgorithmInfo(convcoreConvolutionPass_t(pass), algo, &info), "algo: ");
            return py::make_tuple(std::string(info.name), info.onCpu != 0, info.onCuda != 0,
                                  info.errorBoundFloat, info.errorBoundDouble,
                                  info.determinism == CONVCORE_DETERMINISTIC);
        },
        py::arg("pass"), py::arg("algo"),
        "(name, on_cpu, on_cuda, error_bound_float32, error_bound_float64, deterministic) of an algorithm.");
    m.def("algo_by_name", &algo_by_name, py::arg("name"));
    m.def("set_num_threads", &set_num_threads, py::arg("n"),
          "CPU threads for this Python thread's convcore calls (0: OpenMP's default).");

    py::class_<ConvParams>(m, "ConvParams")
        .def(py::init([](int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w,
                         int64_t dil_h, int64_t dil_w, int64_t groups, int mode) {
                 return ConvParams{pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, mode};
             }),
             py::arg("pad_h"), py::arg("pad_w"), py::arg("stride_h"), py::arg("stride_w"),
             py::arg("dil_h"), py::arg("dil_w"), py::arg("groups"), py::arg("mode"));

    // ---- backward passes ----
    m.attr("BACKWARD_DATA") = int(BACKWARD_DATA);
    m.attr("BACKWARD_FILTER") = int(BACKWARD_FILTER);

    register_buffers(m);
    register_plans(m);
    register_selection(m);
}
