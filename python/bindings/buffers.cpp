// Buffers: DLPack tensors as Python objects, the argument checks of x and w, fingerprints of tensors' bytes.
#include "common.hpp"

namespace convcore_py {
namespace {

// One fingerprint (fingerprint.hpp) of the bytes of several CPU tensors given as DLPack capsules,
// each dense (its elements fill one span of memory, in any order of dimensions). None when one is
// not: the caller then cannot tell a change and must not keep anything made from them.
py::object fingerprint_tensors(const py::list& capsules) {
    uint64_t h = convcore::mix64(capsules.size());
    for (const py::handle& c : capsules) {
        const DLPackTensor t(c.cast<py::capsule>());
        if (t.device_type() != kDLCPU) return py::none();
        const std::vector<int64_t> shape = t.shape(), strides = t.strides();
        int64_t span = 1, count = 1;  // the elements the strides reach, and the element count
        for (size_t i = 0; i < shape.size(); ++i) {
            if (strides[i] < 0) return py::none();
            span += (shape[i] - 1) * strides[i];
            count *= shape[i];
        }
        if (count > 0 && span != count) return py::none();  // gaps or overlaps
        const auto span_bytes = t.byte_span();
        h = convcore::mix64(h ^ convcore::fingerprint(t.data(), size_t(span_bytes.second - span_bytes.first)));
    }
    return py::int_(h);
}

}  // namespace

void register_buffers(py::module_& m) {
    m.attr("DLPACK_CPU") = int(kDLCPU);
    m.attr("DLPACK_CUDA") = int(kDLCUDA);

    py::class_<DLPackTensor>(m, "DLPackTensor",
                             "A tensor imported from a DLPack capsule (zero copy; owns it).")
        .def(py::init<py::capsule>(), py::arg("capsule"))
        .def_property_readonly("ndim", &DLPackTensor::ndim)
        .def_property_readonly("shape", [](const DLPackTensor& t) { return py::tuple(py::cast(t.shape())); })
        .def_property_readonly("strides", [](const DLPackTensor& t) { return py::tuple(py::cast(t.strides())); })
        .def_property_readonly("dtype", &DLPackTensor::dtype)
        .def_property_readonly("device", [](const DLPackTensor& t) {
            return py::make_tuple(t.device_type(), t.device_id());
        })
        .def_property_readonly("data_ptr", &DLPackTensor::data_ptr)
        .def_property_readonly("read_only", &DLPackTensor::read_only)
        .def_property_readonly("versioned", &DLPackTensor::versioned)
        .def_property_readonly("is_packed", &DLPackTensor::is_packed)
        .def_property_readonly("has_positive_strides", &DLPackTensor::has_positive_strides);
    m.def("check_inputs", &check_inputs, py::arg("x"), py::arg("w"),
          "Checks ndim, dtype and device of x and w; returns the dtype name.");
    m.def("fingerprint_tensors", &fingerprint_tensors, py::arg("capsules"),
          "One 64-bit fingerprint of the bytes of dense CPU tensors (DLPack capsules), or None.");
}

}  // namespace convcore_py
