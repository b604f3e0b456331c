// The C API: argument checks, then the registry. Every entry point runs inside guard(), which
// turns a thrown convcore::Error into its status code and the per-thread reason string.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <string>

#include "convcore/convcore.h"
#include "core/algorithms.hpp"
#include "core/api_util.hpp"
#include "core/depth_decomposition.hpp"
#include "core/descriptors.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/plan_cache.hpp"
#include "core/select.hpp"
#include "core/selection.hpp"
#include "core/solver.hpp"

using namespace convcore;
using namespace convcore::api;

namespace {

// Enum parameters are taken by reference and read with enum_int (see api_util.hpp).
void check_dtype(const convcoreDataType_t& t) {
    const int v = enum_int(t);
    if (v != CONVCORE_DATA_FLOAT && v != CONVCORE_DATA_DOUBLE)
        throw_bad_param("dataType " + std::to_string(v) +
                        " is not CONVCORE_DATA_FLOAT or CONVCORE_DATA_DOUBLE");
}

void check_format(const convcoreTensorFormat_t& format) {
    const int v = enum_int(format);
    if (v != CONVCORE_TENSOR_NCHW && v != CONVCORE_TENSOR_NHWC)
        throw_bad_param("format " + std::to_string(v) + " is not CONVCORE_TENSOR_NCHW or CONVCORE_TENSOR_NHWC");
}

void check_positive(const char* what, const char* name, int64_t v) {
    if (v < 1) throw_bad_param(std::string(what) + ": " + name + "=" + std::to_string(v) + " must be >= 1");
}

size_t plan_workspace(const ConvProblem& prob, const Solver& s) {
    const ConvProblem run = run_problem(prob, s.runs_nhwc);
    return workspace_with_staging(prob, run, CONVCORE_PASS_FORWARD, s.workspace_bytes(run));
}

void create_handle(convcoreHandle_t* handle, const convcoreDeviceType_t& device, int deviceIndex);

// The descriptor setters' bodies (the Ex forms); the other forms compute strides and call them.
void set_tensor_ex(convcoreTensorDescriptor_t desc, const convcoreDataType_t& dataType, int64_t n, int64_t c,
                   int64_t h, int64_t w, int64_t nStride, int64_t cStride, int64_t hStride, int64_t wStride) {
    require(desc, "desc");
    check_dtype(dataType);
    const int64_t dims[4] = {n, c, h, w};
    const int64_t strides[4] = {nStride, cStride, hStride, wStride};
    const char* dim_names[4] = {"n", "c", "h", "w"};
    const char* stride_names[4] = {"nStride", "cStride", "hStride", "wStride"};
    for (int i = 0; i < 4; ++i) check_positive("tensor descriptor", dim_names[i], dims[i]);
    for (int i = 0; i < 4; ++i) check_positive("tensor descriptor", stride_names[i], strides[i]);
    checked_mul(checked_mul(checked_mul(n, c, "n*c*h*w"), h, "n*c*h*w"), w, "n*c*h*w");
    extent_bytes(dims, strides, 8);
    desc->dtype = dataType;
    std::copy(dims, dims + 4, desc->dims);
    std::copy(strides, strides + 4, desc->strides);
    desc->nb_dims = 4;  // the Nd setters set 3 for a 1-D tensor afterwards (5 and the depth for 3-D)
    desc->d = 1;
    desc->d_stride = 0;
    desc->set = true;
}

// Packed in `format` (checked positive sizes): the body of convcoreSetTensor4dDescriptorWithFormat
// and of convcoreSetTensorNdDescriptorEx.
void set_tensor_with_format(convcoreTensorDescriptor_t desc, const convcoreTensorFormat_t& format,
                            const convcoreDataType_t& dataType, int64_t n, int64_t c, int64_t h, int64_t w) {
    checked_mul(checked_mul(checked_mul(n, c, "n*c*h*w"), h, "n*c*h*w"), w, "n*c*h*w");
    int64_t st[4];
    if (enum_int(format) == CONVCORE_TENSOR_NCHW)
        packed_strides(n, c, h, w, st);
    else
        packed_nhwc_strides(n, c, h, w, st);
    set_tensor_ex(desc, dataType, n, c, h, w, st[0], st[1], st[2], st[3]);
}

// Packed KRSC strides (a filter in CONVCORE_TENSOR_NHWC), in K, C/groups, R, S order.
void krsc_strides(int64_t cPerGroup, int64_t r, int64_t s, int64_t out[4]) {
    out[0] = r * s * cPerGroup, out[1] = 1, out[2] = s * cPerGroup, out[3] = cPerGroup;
}

void set_filter_ex(convcoreFilterDescriptor_t desc, const convcoreDataType_t& dataType, int64_t k,
                   int64_t cPerGroup, int64_t r, int64_t s, int64_t kStride, int64_t cStride, int64_t rStride,
                   int64_t sStride) {
    require(desc, "desc");
    check_dtype(dataType);
    const int64_t dims[4] = {k, cPerGroup, r, s};
    const int64_t strides[4] = {kStride, cStride, rStride, sStride};
    const char* dim_names[4] = {"k", "cPerGroup", "r", "s"};
    const char* stride_names[4] = {"kStride", "cStride", "rStride", "sStride"};
    for (int i = 0; i < 4; ++i) check_positive("filter descriptor", dim_names[i], dims[i]);
    for (int i = 0; i < 4; ++i) check_positive("filter descriptor", stride_names[i], strides[i]);
    checked_mul(checked_mul(checked_mul(checked_mul(k, cPerGroup, "k*c*r*s"), r, "k*c*r*s"), s, "k*c*r*s"), 8,
                "filter bytes");
    extent_bytes(dims, strides, 8);
    desc->dtype = dataType;
    desc->k = k;
    desc->c_per_group = cPerGroup;
    desc->r = r;
    desc->s = s;
    std::copy(strides, strides + 4, desc->strides);
    // The format the strides are packed in, for convcoreGetFilterNdDescriptor (NCHW where both fit).
    int64_t kcrs[4], krsc[4];
    packed_strides(k, cPerGroup, r, s, kcrs);
    krsc_strides(cPerGroup, r, s, krsc);
    desc->format = same_layout(dims, strides, kcrs)   ? int(CONVCORE_TENSOR_NCHW)
                   : same_layout(dims, strides, krsc) ? int(CONVCORE_TENSOR_NHWC)
                                                      : -1;
    desc->nb_dims = 4;  // the Nd setter sets 3 for a 1-D filter afterwards (5 and the depth for 3-D)
    desc->t = 1;
    desc->t_stride = 0;
    desc->set = true;
}

void set_filter_with_format(convcoreFilterDescriptor_t desc, const convcoreTensorFormat_t& format,
                            const convcoreDataType_t& dataType, int64_t k, int64_t cPerGroup, int64_t r, int64_t s) {
    require(desc, "desc");
    check_format(format);
    check_dtype(dataType);
    check_positive("filter descriptor", "k", k);
    check_positive("filter descriptor", "cPerGroup", cPerGroup);
    check_positive("filter descriptor", "r", r);
    check_positive("filter descriptor", "s", s);
    checked_mul(checked_mul(checked_mul(checked_mul(k, cPerGroup, "k*c*r*s"), r, "k*c*r*s"), s, "k*c*r*s"), 8,
                "filter bytes");
    int64_t st[4];  // of K, C/groups, R, S
    if (enum_int(format) == CONVCORE_TENSOR_NHWC)
        krsc_strides(cPerGroup, r, s, st);
    else
        packed_strides(k, cPerGroup, r, s, st);
    set_filter_ex(desc, dataType, k, cPerGroup, r, s, st[0], st[1], st[2], st[3]);
    desc->format = enum_int(format);  // the one set, where the strides fit both (unit axes)
}

// The body of convcoreSetConvolution2dDescriptor; the Nd setter sets spatial_dims afterwards.
void set_convolution_2d(convcoreConvolutionDescriptor_t desc, int64_t padH, int64_t padW, int64_t strideH,
                        int64_t strideW, int64_t dilationH, int64_t dilationW, const convcoreConvolutionMode_t& mode) {
    require(desc, "desc");
    if (padH < 0 || padW < 0)
        throw_bad_param("padding (" + std::to_string(padH) + ", " + std::to_string(padW) + ") must be >= 0");
    check_positive("convolution descriptor", "strideH", strideH);
    check_positive("convolution descriptor", "strideW", strideW);
    check_positive("convolution descriptor", "dilationH", dilationH);
    check_positive("convolution descriptor", "dilationW", dilationW);
    // Keep index arithmetic far from overflow: 2^40 is beyond any tensor that fits in memory.
    constexpr int64_t kMax = int64_t(1) << 40;
    if (padH > kMax || padW > kMax || strideH > kMax || strideW > kMax || dilationH > kMax || dilationW > kMax)
        throw_bad_param("padding, stride and dilation must be <= 2^40");
    if (enum_int(mode) != CONVCORE_CROSS_CORRELATION && enum_int(mode) != CONVCORE_CONVOLUTION)
        throw_bad_param("mode " + std::to_string(enum_int(mode)) +
                        " is not CONVCORE_CROSS_CORRELATION or CONVCORE_CONVOLUTION");
    desc->pad_h = padH;
    desc->pad_w = padW;
    desc->stride_h = strideH;
    desc->stride_w = strideW;
    desc->dil_h = dilationH;
    desc->dil_w = dilationW;
    desc->mode = mode;
    desc->pad_d = 0;
    desc->stride_d = 1;
    desc->dil_d = 1;
    desc->spatial_dims = 2;
}

// ---- the Nd descriptors' checks ----
// The spatial dimension count of an nbDims (offset 2: N and C come first) or arrayLength
// (offset 0) argument: 1, 2 or 3; the rest BAD_PARAM.
int spatial_dims_of(int value, int offset, const char* name) {
    if (value < offset + 1 || value > offset + 3)
        throw_bad_param(std::string(name) + "=" + std::to_string(value) + " must be " + std::to_string(offset + 1) +
                        " (1-D), " + std::to_string(offset + 2) + " (2-D) or " + std::to_string(offset + 3) +
                        " (3-D)");
    return value - offset;
}

// A 3-D tensor N x C x D x H x W with strides (all checked >= 1): the 2-D fields for N, C, H, W
// and the depth beside them. Everything is checked before the descriptor changes.
void set_tensor_3d(convcoreTensorDescriptor_t desc, const convcoreDataType_t& dataType, const int64_t dims[5],
                   const int64_t strides[5]) {
    checked_mul(checked_mul(checked_mul(checked_mul(dims[0], dims[1], "n*c*d*h*w"), dims[2], "n*c*d*h*w"), dims[3],
                            "n*c*d*h*w"),
                dims[4], "n*c*d*h*w");
    convcoreTensorStruct probe;
    const int64_t four[4] = {dims[0], dims[1], dims[3], dims[4]}, four_st[4] = {strides[0], strides[1], strides[3],
                                                                               strides[4]};
    std::copy(four, four + 4, probe.dims);
    std::copy(four_st, four_st + 4, probe.strides);
    probe.d = dims[2];
    probe.d_stride = strides[2];
    tensor_extent_bytes(&probe, 8);  // BAD_PARAM when the extent leaves int64
    set_tensor_ex(desc, dataType, dims[0], dims[1], dims[3], dims[4], strides[0], strides[1], strides[3], strides[4]);
    desc->d = dims[2];
    desc->d_stride = strides[2];
    desc->nb_dims = 5;
}

// Packed NCDHW or NDHWC strides of an N x C x D x H x W tensor, in N, C, D, H, W order.
void packed_strides_3d(const convcoreTensorFormat_t& format, const int64_t d[5], int64_t st[5]) {
    const int64_t c = d[1], depth = d[2], h = d[3], w = d[4];
    if (enum_int(format) == CONVCORE_TENSOR_NHWC) {
        st[1] = 1, st[4] = c, st[3] = w * c, st[2] = h * w * c, st[0] = depth * h * w * c;
    } else {
        st[4] = 1, st[3] = w, st[2] = h * w, st[1] = depth * h * w, st[0] = c * depth * h * w;
    }
}

// Every values[i], i < count, at least `least` (BAD_PARAM naming the array, index and value).
void check_array(const char* what, const char* name, const int64_t* values, int count, int64_t least) {
    require(values, name);
    for (int i = 0; i < count; ++i)
        if (values[i] < least)
            throw_bad_param(std::string(what) + ": " + name + "[" + std::to_string(i) + "]=" +
                            std::to_string(values[i]) + " must be >= " + std::to_string(least));
}

// An Nd descriptor's arrays from the stored N, C, H, W values and the depth: a 1-D one skips H,
// a 3-D one puts the depth before H. Returns the count (nb_dims).
int nd_values(int nb_dims, const int64_t four[4], int64_t depth, int64_t out[5]) {
    if (nb_dims == 3) {
        out[0] = four[0], out[1] = four[1], out[2] = four[3];
    } else if (nb_dims == 5) {
        out[0] = four[0], out[1] = four[1], out[2] = depth, out[3] = four[2], out[4] = four[3];
    } else {
        std::copy(four, four + 4, out);
    }
    return nb_dims;
}

// The 4d/2d getters answer 1-D and 2-D descriptors; a 3-D one has no 4-D form.
void require_not_3d(bool is_3d, const char* what, const char* nd_getter) {
    if (is_3d) throw_bad_param(std::string(what) + " is 3-D; use " + nd_getter);
}

// The number of entries an Nd getter writes: min(requested, count); BAD_PARAM when requested < 0.
int entries_written(int requested, int count, const char* name) {
    if (requested < 0) throw_bad_param(std::string(name) + "=" + std::to_string(requested) + " must be >= 0");
    return std::min(requested, count);
}

#ifndef CONVCORE_WITH_CUDA
[[noreturn]] void no_cuda() {
    throw_not_supported("convcore was built without CUDA support (nvcc was not found at build time)");
}
#endif

}  // namespace

namespace convcore {
namespace api {

void* device_alloc(const Context& ctx, size_t bytes) {
    if (bytes == 0) return nullptr;
    if (ctx.device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
        return cuda::malloc(ctx, bytes);
#endif
    }
    if (bytes > SIZE_MAX - kAlign) throw Error(CONVCORE_STATUS_ALLOC_FAILED, "convcoreMalloc: size too large");
    void* p = std::aligned_alloc(kAlign, align_up(bytes));
    if (!p)
        throw Error(CONVCORE_STATUS_ALLOC_FAILED,
                    "convcoreMalloc: could not allocate " + std::to_string(bytes) + " host bytes");
    return p;
}

void device_free(const Context& ctx, void* ptr) {
    if (!ptr) return;
    if (ctx.device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
        cuda::free(ctx, ptr);
        return;
#endif
    }
    std::free(ptr);
}

void copy_to_device(const Context& ctx, void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    if (ctx.device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
        cuda::memcpy_to_device(ctx, dst, src, bytes);
        return;
#endif
    }
    std::memcpy(dst, src, bytes);
}

ConvProblem forward_problem(convcoreHandle_t handle, convcoreTensorDescriptor_t x, convcoreFilterDescriptor_t w,
                            convcoreConvolutionDescriptor_t conv, convcoreTensorDescriptor_t y,
                            depth::DepthProblem* depth) {
    require(handle, "handle");
    if (depth::is_3d(x)) {
        depth::DepthProblem prob = depth::make_depth_problem(handle->device, x, w, conv, y);
        ConvProblem representative = prob.representative();
        if (depth) *depth = std::move(prob);
        return representative;
    }
    return make_problem(handle->device, x, w, conv, y);
}

}  // namespace api

std::vector<Ranked> forward_ranking(const ConvProblem& prob) {
    return ranked_rows(rank_algorithms(prob), prob,
                       [](const ConvProblem& p, const auto& solver) { return plan_workspace(p, solver); });
}

}  // namespace convcore

int convcoreContext::threads() const { return num_threads > 0 ? num_threads : omp_get_max_threads(); }

extern "C" {

size_t convcoreGetVersion(void) { return CONVCORE_VERSION; }

const char* convcoreGetStatusName(convcoreStatus_t status) {
    switch (enum_int(status)) {
        case CONVCORE_STATUS_SUCCESS: return "CONVCORE_STATUS_SUCCESS";
        case CONVCORE_STATUS_BAD_PARAM: return "CONVCORE_STATUS_BAD_PARAM";
        case CONVCORE_STATUS_NOT_SUPPORTED: return "CONVCORE_STATUS_NOT_SUPPORTED";
        case CONVCORE_STATUS_ALLOC_FAILED: return "CONVCORE_STATUS_ALLOC_FAILED";
        case CONVCORE_STATUS_EXECUTION_FAILED: return "CONVCORE_STATUS_EXECUTION_FAILED";
        case CONVCORE_STATUS_INTERNAL_ERROR: return "CONVCORE_STATUS_INTERNAL_ERROR";
    }
    return "CONVCORE_STATUS_UNKNOWN";
}

const char* convcoreGetLastErrorString(void) { return last_error; }

convcoreStatus_t convcoreGetCudaDeviceCount(int* count) {
    return guard([&] {
        require(count, "count");
#ifdef CONVCORE_WITH_CUDA
        *count = cuda::device_count();
#else
        *count = 0;
#endif
    });
}

// ---- handle ----
convcoreStatus_t convcoreCreate(convcoreHandle_t* handle) {
    return guard([&] { create_handle(handle, CONVCORE_DEVICE_CPU, 0); });
}

convcoreStatus_t convcoreCreateForDevice(convcoreHandle_t* handle, convcoreDeviceType_t device,
                                         int deviceIndex) {
    return guard([&] { create_handle(handle, device, deviceIndex); });
}

}  // extern "C"

namespace {

void create_handle(convcoreHandle_t* handle, const convcoreDeviceType_t& device, int deviceIndex) {
    {
        require(handle, "handle");
        *handle = nullptr;
        if (enum_int(device) != CONVCORE_DEVICE_CPU && enum_int(device) != CONVCORE_DEVICE_CUDA)
            throw_bad_param("device " + std::to_string(enum_int(device)) +
                            " is not CONVCORE_DEVICE_CPU or CONVCORE_DEVICE_CUDA");
        auto ctx = std::make_unique<convcoreContext>();
        ctx->device = device;
        if (device == CONVCORE_DEVICE_CUDA) {
            if (deviceIndex < 0)
                throw_bad_param("deviceIndex=" + std::to_string(deviceIndex) + " must be >= 0");
            ctx->device_index = deviceIndex;
#ifdef CONVCORE_WITH_CUDA
            cuda::init_context(*ctx);
#else
            no_cuda();
#endif
        }
        init_handle_caches(*ctx);
        *handle = ctx.release();
    }
}

}  // namespace

extern "C" {

convcoreStatus_t convcoreDestroy(convcoreHandle_t handle) {
    return guard([&] { delete handle; });
}

convcoreStatus_t convcoreGetDevice(convcoreHandle_t handle, convcoreDeviceType_t* device,
                                   int* deviceIndex) {
    return guard([&] {
        require(handle, "handle");
        if (device) *device = handle->device;
        if (deviceIndex) *deviceIndex = handle->device_index;
    });
}

convcoreStatus_t convcoreSetStream(convcoreHandle_t handle, void* stream) {
    return guard([&] {
        require(handle, "handle");
        if (handle->device != CONVCORE_DEVICE_CUDA)
            throw_bad_param("convcoreSetStream: the handle is a CPU handle; streams belong to CUDA handles");
        handle->stream = stream;
    });
}

convcoreStatus_t convcoreGetStream(convcoreHandle_t handle, void** stream) {
    return guard([&] {
        require(handle, "handle");
        require(stream, "stream");
        *stream = handle->stream;
    });
}

convcoreStatus_t convcoreSetNumThreads(convcoreHandle_t handle, int numThreads) {
    return guard([&] {
        require(handle, "handle");
        if (numThreads < 0)
            throw_bad_param("numThreads=" + std::to_string(numThreads) + " must be >= 0 (0: OpenMP's default)");
        handle->num_threads = numThreads;
    });
}

// ---- tensor descriptors ----
convcoreStatus_t convcoreCreateTensorDescriptor(convcoreTensorDescriptor_t* desc) {
    return guard([&] {
        require(desc, "desc");
        *desc = new convcoreTensorStruct();
    });
}

convcoreStatus_t convcoreDestroyTensorDescriptor(convcoreTensorDescriptor_t desc) {
    return guard([&] { delete desc; });
}

convcoreStatus_t convcoreSetTensor4dDescriptor(convcoreTensorDescriptor_t desc,
                                               convcoreDataType_t dataType, int64_t n, int64_t c,
                                               int64_t h, int64_t w) {
    // Validate the sizes before computing packed strides from them.
    return guard([&] {
        require(desc, "desc");
        check_dtype(dataType);  // before passing dataType on (see enum_int)
        check_positive("tensor descriptor", "n", n);
        check_positive("tensor descriptor", "c", c);
        check_positive("tensor descriptor", "h", h);
        check_positive("tensor descriptor", "w", w);
        int64_t st[4];
        checked_mul(checked_mul(checked_mul(n, c, "n*c*h*w"), h, "n*c*h*w"), w, "n*c*h*w");
        packed_strides(n, c, h, w, st);
        set_tensor_ex(desc, dataType, n, c, h, w, st[0], st[1], st[2], st[3]);
    });
}

convcoreStatus_t convcoreSetTensor4dDescriptorWithFormat(convcoreTensorDescriptor_t desc, convcoreTensorFormat_t format,
                                                         convcoreDataType_t dataType, int64_t n, int64_t c, int64_t h,
                                                         int64_t w) {
    return guard([&] {
        require(desc, "desc");
        check_format(format);
        check_dtype(dataType);  // before passing dataType on (see enum_int)
        check_positive("tensor descriptor", "n", n);
        check_positive("tensor descriptor", "c", c);
        check_positive("tensor descriptor", "h", h);
        check_positive("tensor descriptor", "w", w);
        set_tensor_with_format(desc, format, dataType, n, c, h, w);
    });
}

convcoreStatus_t convcoreSetTensor4dDescriptorEx(convcoreTensorDescriptor_t desc,
                                                 convcoreDataType_t dataType, int64_t n, int64_t c,
                                                 int64_t h, int64_t w, int64_t nStride,
                                                 int64_t cStride, int64_t hStride, int64_t wStride) {
    return guard([&] { set_tensor_ex(desc, dataType, n, c, h, w, nStride, cStride, hStride, wStride); });
}

convcoreStatus_t convcoreGetTensor4dDescriptor(convcoreTensorDescriptor_t desc,
                                               convcoreDataType_t* dataType, int64_t* n, int64_t* c,
                                               int64_t* h, int64_t* w, int64_t* nStride,
                                               int64_t* cStride, int64_t* hStride, int64_t* wStride) {
    return guard([&] {
        require(desc, "desc");
        if (!desc->set) throw_bad_param("desc was created but never set");
        require_not_3d(desc->nb_dims == 5, "desc (a tensor of nbDims 5)", "convcoreGetTensorNdDescriptor");
        if (dataType) *dataType = desc->dtype;
        int64_t* outs[8] = {n, c, h, w, nStride, cStride, hStride, wStride};
        for (int i = 0; i < 4; ++i) {
            if (outs[i]) *outs[i] = desc->dims[i];
            if (outs[i + 4]) *outs[i + 4] = desc->strides[i];
        }
    });
}

// ---- filter descriptors ----
convcoreStatus_t convcoreCreateFilterDescriptor(convcoreFilterDescriptor_t* desc) {
    return guard([&] {
        require(desc, "desc");
        *desc = new convcoreFilterStruct();
    });
}

convcoreStatus_t convcoreDestroyFilterDescriptor(convcoreFilterDescriptor_t desc) {
    return guard([&] { delete desc; });
}

convcoreStatus_t convcoreSetFilter4dDescriptorEx(convcoreFilterDescriptor_t desc, convcoreDataType_t dataType,
                                                 int64_t k, int64_t cPerGroup, int64_t r, int64_t s, int64_t kStride,
                                                 int64_t cStride, int64_t rStride, int64_t sStride) {
    return guard([&] { set_filter_ex(desc, dataType, k, cPerGroup, r, s, kStride, cStride, rStride, sStride); });
}

convcoreStatus_t convcoreSetFilter4dDescriptorWithFormat(convcoreFilterDescriptor_t desc, convcoreTensorFormat_t format,
                                                         convcoreDataType_t dataType, int64_t k, int64_t cPerGroup,
                                                         int64_t r, int64_t s) {
    return guard([&] { set_filter_with_format(desc, format, dataType, k, cPerGroup, r, s); });
}

convcoreStatus_t convcoreSetFilter4dDescriptor(convcoreFilterDescriptor_t desc, convcoreDataType_t dataType, int64_t k,
                                               int64_t cPerGroup, int64_t r, int64_t s) {
    return guard([&] { set_filter_with_format(desc, CONVCORE_TENSOR_NCHW, dataType, k, cPerGroup, r, s); });
}

convcoreStatus_t convcoreGetFilter4dDescriptor(convcoreFilterDescriptor_t desc,
                                               convcoreDataType_t* dataType, int64_t* k,
                                               int64_t* cPerGroup, int64_t* r, int64_t* s) {
    return guard([&] {
        require(desc, "desc");
        if (!desc->set) throw_bad_param("desc was created but never set");
        require_not_3d(desc->nb_dims == 5, "desc (a filter of nbDims 5)", "convcoreGetFilterNdDescriptor");
        if (dataType) *dataType = desc->dtype;
        if (k) *k = desc->k;
        if (cPerGroup) *cPerGroup = desc->c_per_group;
        if (r) *r = desc->r;
        if (s) *s = desc->s;
    });
}

// ---- convolution descriptors ----
convcoreStatus_t convcoreCreateConvolutionDescriptor(convcoreConvolutionDescriptor_t* desc) {
    return guard([&] {
        require(desc, "desc");
        *desc = new convcoreConvolutionStruct();
    });
}

convcoreStatus_t convcoreDestroyConvolutionDescriptor(convcoreConvolutionDescriptor_t desc) {
    return guard([&] { delete desc; });
}

convcoreStatus_t convcoreSetConvolution2dDescriptor(convcoreConvolutionDescriptor_t desc,
                                                    int64_t padH, int64_t padW, int64_t strideH,
                                                    int64_t strideW, int64_t dilationH,
                                                    int64_t dilationW, convcoreConvolutionMode_t mode) {
    return guard([&] { set_convolution_2d(desc, padH, padW, strideH, strideW, dilationH, dilationW, mode); });
}

convcoreStatus_t convcoreGetConvolution2dDescriptor(convcoreConvolutionDescriptor_t desc,
                                                    int64_t* padH, int64_t* padW, int64_t* strideH,
                                                    int64_t* strideW, int64_t* dilationH,
                                                    int64_t* dilationW, convcoreConvolutionMode_t* mode) {
    return guard([&] {
        require(desc, "desc");
        require_not_3d(desc->spatial_dims == 3, "desc (a convolution of arrayLength 3)", "convcoreGetConvolutionNdDescriptor");
        if (padH) *padH = desc->pad_h;
        if (padW) *padW = desc->pad_w;
        if (strideH) *strideH = desc->stride_h;
        if (strideW) *strideW = desc->stride_w;
        if (dilationH) *dilationH = desc->dil_h;
        if (dilationW) *dilationW = desc->dil_w;
        if (mode) *mode = desc->mode;
    });
}

convcoreStatus_t convcoreSetConvolutionGroupCount(convcoreConvolutionDescriptor_t desc, int64_t groups) {
    return guard([&] {
        require(desc, "desc");
        check_positive("convolution descriptor", "groups", groups);
        desc->groups = groups;
    });
}

convcoreStatus_t convcoreGetConvolutionGroupCount(convcoreConvolutionDescriptor_t desc, int64_t* groups) {
    return guard([&] {
        require(desc, "desc");
        require(groups, "groups");
        *groups = desc->groups;
    });
}

convcoreStatus_t convcoreSetConvolutionFilterProtocol(convcoreConvolutionDescriptor_t desc,
                                                      convcoreFilterProtocol_t protocol) {
    return guard([&] {
        require(desc, "desc");
        const int v = enum_int(protocol);
        if (v != CONVCORE_FILTERS_PER_CALL && v != CONVCORE_FILTERS_PREPARED)
            throw_bad_param("protocol " + std::to_string(v) +
                            " is not CONVCORE_FILTERS_PER_CALL or CONVCORE_FILTERS_PREPARED");
        desc->prepared_filters = v == CONVCORE_FILTERS_PREPARED;
    });
}

convcoreStatus_t convcoreGetConvolutionFilterProtocol(convcoreConvolutionDescriptor_t desc,
                                                      convcoreFilterProtocol_t* protocol) {
    return guard([&] {
        require(desc, "desc");
        require(protocol, "protocol");
        *protocol = desc->prepared_filters ? CONVCORE_FILTERS_PREPARED : CONVCORE_FILTERS_PER_CALL;
    });
}

convcoreStatus_t convcoreGetConvolution2dForwardOutputDim(convcoreConvolutionDescriptor_t convDesc,
                                                          convcoreTensorDescriptor_t xDesc,
                                                          convcoreFilterDescriptor_t wDesc, int64_t* n,
                                                          int64_t* c, int64_t* h, int64_t* w) {
    return guard([&] {
        require(n, "n");
        require(c, "c");
        require(h, "h");
        require(w, "w");
        int64_t out[4];
        output_dims(xDesc, wDesc, convDesc, out);
        require_not_3d(xDesc->nb_dims == 5, "the problem (xDesc: nbDims 5)", "convcoreGetConvolutionNdForwardOutputDim");
        *n = out[0];
        *c = out[1];
        *h = out[2];
        *w = out[3];
    });
}

// ---- Nd descriptors: 1-D stored as 2-D with H = 1, 2-D as the 4d calls, 3-D with its depth ----
convcoreStatus_t convcoreSetTensorNdDescriptor(convcoreTensorDescriptor_t desc, convcoreDataType_t dataType, int nbDims,
                                               const int64_t dims[], const int64_t strides[]) {
    return guard([&] {
        require(desc, "desc");
        const int sp = spatial_dims_of(nbDims, 2, "nbDims");
        check_dtype(dataType);
        check_array("tensor descriptor", "dims", dims, nbDims, 1);
        check_array("tensor descriptor", "strides", strides, nbDims, 1);
        if (sp == 3) return set_tensor_3d(desc, dataType, dims, strides);
        if (sp == 2)
            return set_tensor_ex(desc, dataType, dims[0], dims[1], dims[2], dims[3], strides[0], strides[1],
                                 strides[2], strides[3]);
        // H = 1 is never stepped: any stride would do; W * wStride is what packing would give.
        const int64_t h_stride = checked_mul(dims[2], strides[2], "tensor extent");
        set_tensor_ex(desc, dataType, dims[0], dims[1], 1, dims[2], strides[0], strides[1], h_stride, strides[2]);
        desc->nb_dims = 3;
    });
}

convcoreStatus_t convcoreSetTensorNdDescriptorEx(convcoreTensorDescriptor_t desc, convcoreTensorFormat_t format,
                                                 convcoreDataType_t dataType, int nbDims, const int64_t dims[]) {
    return guard([&] {
        require(desc, "desc");
        const int sp = spatial_dims_of(nbDims, 2, "nbDims");
        check_format(format);
        check_dtype(dataType);
        check_array("tensor descriptor", "dims", dims, nbDims, 1);
        if (sp == 3) {
            checked_mul(checked_mul(checked_mul(checked_mul(dims[0], dims[1], "n*c*d*h*w"), dims[2], "n*c*d*h*w"),
                                    dims[3], "n*c*d*h*w"),
                        dims[4], "n*c*d*h*w");
            int64_t st[5];
            packed_strides_3d(format, dims, st);
            return set_tensor_3d(desc, dataType, dims, st);
        }
        set_tensor_with_format(desc, format, dataType, dims[0], dims[1], sp == 1 ? 1 : dims[2], dims[nbDims - 1]);
        desc->nb_dims = nbDims;
    });
}

convcoreStatus_t convcoreGetTensorNdDescriptor(convcoreTensorDescriptor_t desc, int nbDimsRequested,
                                               convcoreDataType_t* dataType, int* nbDims, int64_t dims[],
                                               int64_t strides[]) {
    return guard([&] {
        require(desc, "desc");
        if (!desc->set) throw_bad_param("desc was created but never set");
        const int count = entries_written(nbDimsRequested, desc->nb_dims, "nbDimsRequested");
        if (dataType) *dataType = desc->dtype;
        if (nbDims) *nbDims = desc->nb_dims;
        int64_t all_dims[5], all_strides[5];
        nd_values(desc->nb_dims, desc->dims, desc->d, all_dims);
        nd_values(desc->nb_dims, desc->strides, desc->d_stride, all_strides);
        for (int i = 0; i < count; ++i) {
            if (dims) dims[i] = all_dims[i];
            if (strides) strides[i] = all_strides[i];
        }
    });
}

convcoreStatus_t convcoreSetFilterNdDescriptor(convcoreFilterDescriptor_t desc, convcoreDataType_t dataType,
                                               convcoreTensorFormat_t format, int nbDims, const int64_t filterDims[]) {
    return guard([&] {
        require(desc, "desc");
        const int sp = spatial_dims_of(nbDims, 2, "nbDims");
        check_format(format);
        check_dtype(dataType);
        check_array("filter descriptor", "filterDims", filterDims, nbDims, 1);
        if (sp == 3) {  // K x C/g x T x R x S: KCTRS (NCHW) or KTRSC (NHWC) packed
            const int64_t k = filterDims[0], cg = filterDims[1], t = filterDims[2], r = filterDims[3],
                          s = filterDims[4];
            checked_mul(checked_mul(checked_mul(checked_mul(checked_mul(k, cg, "k*c*t*r*s"), t, "k*c*t*r*s"), r,
                                                "k*c*t*r*s"),
                                    s, "k*c*t*r*s"),
                        8, "filter bytes");
            const bool nhwc = enum_int(format) == CONVCORE_TENSOR_NHWC;
            int64_t st[4], t_stride;  // st: of K, C/groups, R, S
            if (nhwc) {
                st[1] = 1, st[3] = cg, st[2] = s * cg, t_stride = r * s * cg, st[0] = t * r * s * cg;
            } else {
                st[3] = 1, st[2] = s, t_stride = r * s, st[1] = t * r * s, st[0] = cg * t * r * s;
            }
            set_filter_ex(desc, dataType, k, cg, r, s, st[0], st[1], st[2], st[3]);
            desc->t = t;
            desc->t_stride = t_stride;
            desc->format = enum_int(format);
            desc->nb_dims = 5;
            return;
        }
        set_filter_with_format(desc, format, dataType, filterDims[0], filterDims[1], sp == 1 ? 1 : filterDims[2],
                               filterDims[nbDims - 1]);
        desc->nb_dims = nbDims;
    });
}

convcoreStatus_t convcoreGetFilterNdDescriptor(convcoreFilterDescriptor_t desc, int nbDimsRequested,
                                               convcoreDataType_t* dataType, convcoreTensorFormat_t* format,
                                               int* nbDims, int64_t filterDims[]) {
    return guard([&] {
        require(desc, "desc");
        if (!desc->set) throw_bad_param("desc was created but never set");
        const int count = entries_written(nbDimsRequested, desc->nb_dims, "nbDimsRequested");
        if (format && desc->format < 0)
            throw_bad_param("desc: the filter's strides (convcoreSetFilter4dDescriptorEx) are packed in neither "
                            "format; pass format = NULL");
        if (dataType) *dataType = desc->dtype;
        if (format) *format = convcoreTensorFormat_t(desc->format);
        if (nbDims) *nbDims = desc->nb_dims;
        const int64_t four[4] = {desc->k, desc->c_per_group, desc->r, desc->s};
        int64_t all[5];
        nd_values(desc->nb_dims, four, desc->t, all);
        for (int i = 0; i < count && filterDims; ++i) filterDims[i] = all[i];
    });
}

convcoreStatus_t convcoreSetConvolutionNdDescriptor(convcoreConvolutionDescriptor_t desc, int arrayLength,
                                                    const int64_t pads[], const int64_t strides[],
                                                    const int64_t dilations[], convcoreConvolutionMode_t mode) {
    return guard([&] {
        require(desc, "desc");
        const int sp = spatial_dims_of(arrayLength, 0, "arrayLength");
        check_array("convolution descriptor", "pads", pads, arrayLength, 0);
        check_array("convolution descriptor", "strides", strides, arrayLength, 1);
        check_array("convolution descriptor", "dilations", dilations, arrayLength, 1);
        if (sp == 3) {
            constexpr int64_t kMax = int64_t(1) << 40;  // as set_convolution_2d's bound
            if (pads[0] > kMax || strides[0] > kMax || dilations[0] > kMax)
                throw_bad_param("padding, stride and dilation must be <= 2^40");
            set_convolution_2d(desc, pads[1], pads[2], strides[1], strides[2], dilations[1], dilations[2], mode);
            desc->pad_d = pads[0];
            desc->stride_d = strides[0];
            desc->dil_d = dilations[0];
            desc->spatial_dims = 3;
            return;
        }
        if (sp == 2)
            return set_convolution_2d(desc, pads[0], pads[1], strides[0], strides[1], dilations[0], dilations[1],
                                      mode);
        set_convolution_2d(desc, 0, pads[0], 1, strides[0], 1, dilations[0], mode);
        desc->spatial_dims = 1;
    });
}

convcoreStatus_t convcoreGetConvolutionNdDescriptor(convcoreConvolutionDescriptor_t desc, int arrayLengthRequested,
                                                    int* arrayLength, int64_t pads[], int64_t strides[],
                                                    int64_t dilations[], convcoreConvolutionMode_t* mode) {
    return guard([&] {
        require(desc, "desc");
        const int count = entries_written(arrayLengthRequested, desc->spatial_dims, "arrayLengthRequested");
        if (arrayLength) *arrayLength = desc->spatial_dims;
        if (mode) *mode = desc->mode;
        // The last arrayLength of (D, H, W).
        const int64_t p[3] = {desc->pad_d, desc->pad_h, desc->pad_w},
                      st[3] = {desc->stride_d, desc->stride_h, desc->stride_w},
                      d[3] = {desc->dil_d, desc->dil_h, desc->dil_w};
        const int first = 3 - desc->spatial_dims;
        for (int i = 0; i < count; ++i) {
            if (pads) pads[i] = p[first + i];
            if (strides) strides[i] = st[first + i];
            if (dilations) dilations[i] = d[first + i];
        }
    });
}

convcoreStatus_t convcoreGetConvolutionNdForwardOutputDim(convcoreConvolutionDescriptor_t convDesc,
                                                          convcoreTensorDescriptor_t xDesc,
                                                          convcoreFilterDescriptor_t wDesc, int nbDims,
                                                          int64_t outDims[]) {
    return guard([&] {
        require(outDims, "outDims");
        spatial_dims_of(nbDims, 2, "nbDims");
        int64_t out[4], depth = 1;
        output_dims(xDesc, wDesc, convDesc, out, &depth);  // also: the descriptors' dimension counts agree
        if (nbDims != xDesc->nb_dims)
            throw_bad_param("nbDims=" + std::to_string(nbDims) + " does not match xDesc's " +
                            std::to_string(xDesc->nb_dims) + " dimensions");
        nd_values(nbDims, out, depth, outDims);
    });
}

convcoreStatus_t convcoreGetConvolutionNdTransposedOutputDim(convcoreConvolutionDescriptor_t convDesc,
                                                             convcoreTensorDescriptor_t dyDesc,
                                                             convcoreFilterDescriptor_t wDesc, int nbDims,
                                                             const int64_t outputPadding[], int64_t outDims[]) {
    return guard([&] { transposed_output_dims(convDesc, dyDesc, wDesc, nbDims, outputPadding, outDims); });
}

// ---- algorithms ----
const char* convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t algo) {
    const AlgorithmInfo* info = algorithm_info(CONVCORE_PASS_FORWARD, enum_int(algo));
    return info ? info->name : nullptr;
}

convcoreStatus_t convcoreGetFwdAlgoByName(const char* name, convcoreConvolutionFwdAlgo_t* algo) {
    return guard([&] {
        require(name, "name");
        require(algo, "algo");
        *algo = convcoreConvolutionFwdAlgo_t(algorithm_by_name(CONVCORE_PASS_FORWARD, name));
    });
}

convcoreStatus_t convcoreGetConvolutionForwardWorkspaceSize(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
    convcoreConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
    return guard([&] {
        require(sizeInBytes, "sizeInBytes");
        *sizeInBytes = 0;
        if (depth::is_3d(xDesc)) {  // the largest of its 2-D problems' workspaces
            *sizeInBytes =
                make_plan(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc, convDesc, yDesc, enum_int(algo)).workspace_bytes();
            return;
        }
        const ConvProblem prob = forward_problem(handle, xDesc, wDesc, convDesc, yDesc);
        *sizeInBytes = plan_workspace(prob, solver_for(CONVCORE_PASS_FORWARD, prob, enum_int(algo)));
    });
}

convcoreStatus_t convcoreGetConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc, int requestedAlgoCount,
    int* returnedAlgoCount, convcoreConvolutionFwdAlgoPerf_t* perfResults) {
    return guard([&] {
        require(returnedAlgoCount, "returnedAlgoCount");
        require(perfResults, "perfResults");
        *returnedAlgoCount = 0;
        if (requestedAlgoCount < 1)
            throw_bad_param("requestedAlgoCount=" + std::to_string(requestedAlgoCount) + " must be >= 1");
        const std::vector<Ranked> ranked =
            descriptor_ranking(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc, convDesc, yDesc);
        const int count = std::min<int>(requestedAlgoCount, int(ranked.size()));
        for (int i = 0; i < count; ++i) {
            convcoreConvolutionFwdAlgoPerf_t perf{};
            perf.algo = convcoreConvolutionFwdAlgo_t(ranked[i].algo);
            perf.status = ranked[i].status;
            perf.time = perf.timePerCall = perf.timePrepared = -1.0f;
            perf.memory = ranked[i].memory;
            perf.determinism = ranked[i].determinism;
            perfResults[i] = perf;
        }
        *returnedAlgoCount = count;
    });
}

convcoreStatus_t convcoreConvolutionForward(convcoreHandle_t handle, const void* alpha,
                                            convcoreTensorDescriptor_t xDesc, const void* x,
                                            convcoreFilterDescriptor_t wDesc, const void* w,
                                            convcoreConvolutionDescriptor_t convDesc,
                                            convcoreConvolutionFwdAlgo_t algo, void* workspace,
                                            size_t workSpaceSizeInBytes, const void* beta,
                                            convcoreTensorDescriptor_t yDesc, void* y) {
    return guard([&] {
        require(yDesc, "yDesc");
        execute_cached(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc, convDesc, yDesc, enum_int(algo),
                       descriptor_args(alpha, beta, x, w, y, workspace, workSpaceSizeInBytes), true);
    });
}

}  // extern "C"

namespace {

// The checks of convcoreConvolutionBiasActivationForward's z and bias descriptors against y's.
void check_epilogue_descriptors(convcoreTensorDescriptor_t yDesc, convcoreTensorDescriptor_t zDesc, const void* z,
                                convcoreTensorDescriptor_t biasDesc, const void* bias) {
    const convcoreTensorStruct& yd = *yDesc;
    if (!yd.set) return;  // make_problem names it
    const auto dtype_name = [](convcoreDataType_t t) {
        return std::string(t == CONVCORE_DATA_DOUBLE ? "CONVCORE_DATA_DOUBLE" : "CONVCORE_DATA_FLOAT");
    };
    const auto dims_str = [](const int64_t d[4]) {
        return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + "x" +
               std::to_string(d[3]);
    };
    const auto shape = [&](const convcoreTensorStruct& t) {  // NxCxHxW, NxCxDxHxW for 3-D
        if (t.nb_dims != 5) return dims_str(t.dims);
        return std::to_string(t.dims[0]) + "x" + std::to_string(t.dims[1]) + "x" + std::to_string(t.d) + "x" +
               std::to_string(t.dims[2]) + "x" + std::to_string(t.dims[3]);
    };
    if (z) {
        require(zDesc, "zDesc (z is given)");
        if (!zDesc->set) throw_bad_param("zDesc was created but never set");
        if (zDesc->dtype != yd.dtype)
            throw_bad_param("zDesc: data type " + dtype_name(zDesc->dtype) + " does not match y's " +
                            dtype_name(yd.dtype));
        if (!std::equal(zDesc->dims, zDesc->dims + 4, yd.dims) || zDesc->nb_dims != yd.nb_dims || zDesc->d != yd.d)
            throw_bad_param("zDesc: dims " + shape(*zDesc) + " do not match y's " + shape(yd));
        if (!same_layout(yd.dims, zDesc->strides, yd.strides) || (yd.d > 1 && zDesc->d_stride != yd.d_stride))
            throw_bad_param("zDesc: strides " + dims_str(zDesc->strides) + " differ from y's " +
                            dims_str(yd.strides) + " (z must be laid out as y)");
    }
    if (bias) {
        require(biasDesc, "biasDesc (bias is given)");
        if (!biasDesc->set) throw_bad_param("biasDesc was created but never set");
        if (biasDesc->dtype != yd.dtype)
            throw_bad_param("biasDesc: data type " + dtype_name(biasDesc->dtype) + " does not match y's " +
                            dtype_name(yd.dtype));
        const int64_t* d = biasDesc->dims;
        if (d[0] != 1 || d[1] != yd.dims[1] || d[2] != 1 || d[3] != 1 || biasDesc->d != 1)
            throw_bad_param("biasDesc: dims " + dims_str(d) + " must be 1x" + std::to_string(yd.dims[1]) +
                            "x1x1 (one value per output channel K=" + std::to_string(yd.dims[1]) + ")");
        if (d[1] > 1 && biasDesc->strides[1] != 1)
            throw_bad_param("biasDesc: cStride=" + std::to_string(biasDesc->strides[1]) +
                            " must be 1 (K contiguous values)");
    }
}

}  // namespace

extern "C" {

convcoreStatus_t convcoreConvolutionBiasActivationForward(
    convcoreHandle_t handle, const void* alpha1, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionFwdAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes, const void* alpha2,
    convcoreTensorDescriptor_t zDesc, const void* z, convcoreTensorDescriptor_t biasDesc, const void* bias,
    convcoreActivationMode_t activationMode, convcoreTensorDescriptor_t yDesc, void* y) {
    return guard([&] {
        require(yDesc, "yDesc");
        check_epilogue_descriptors(yDesc, zDesc, z, biasDesc, bias);
        require(alpha1, "alpha1");
        if (z) require(alpha2, "alpha2 (z is given)");
        check_activation(activationMode, "activationMode");
        const float zero_f = 0.0f;  // beta: the epilogue never reads y (any width reads as 0)
        const double zero_d = 0.0;
        const void* zero = yDesc->dtype == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&zero_d) : &zero_f;
        convcoreConvolutionArgs_t args = descriptor_args(alpha1, zero, x, w, y, workspace, workSpaceSizeInBytes);
        args.z = z;
        args.alpha2 = alpha2;
        args.bias = bias;
        args.activation = activationMode;
        execute_cached(handle, CONVCORE_PASS_FORWARD, xDesc, wDesc, convDesc, yDesc, enum_int(algo), args, true);
    });
}

// ---- memory ----
convcoreStatus_t convcoreMalloc(convcoreHandle_t handle, void** ptr, size_t bytes) {
    return guard([&] {
        require(handle, "handle");
        require(ptr, "ptr");
        *ptr = nullptr;
        *ptr = device_alloc(*handle, bytes);
    });
}

convcoreStatus_t convcoreFree(convcoreHandle_t handle, void* ptr) {
    return guard([&] {
        require(handle, "handle");
        device_free(*handle, ptr);
    });
}

convcoreStatus_t convcoreMemcpyToDevice(convcoreHandle_t handle, void* dst, const void* src, size_t bytes) {
    return guard([&] {
        require(handle, "handle");
        if (bytes == 0) return;
        require(dst, "dst");
        require(src, "src");
        copy_to_device(*handle, dst, src, bytes);
    });
}

convcoreStatus_t convcoreMemcpyToHost(convcoreHandle_t handle, void* dst, const void* src, size_t bytes) {
    return guard([&] {
        require(handle, "handle");
        if (bytes == 0) return;
        require(dst, "dst");
        require(src, "src");
        if (handle->device == CONVCORE_DEVICE_CUDA) {
#ifdef CONVCORE_WITH_CUDA
            cuda::memcpy_to_host(*handle, dst, src, bytes);
            return;
#endif
        }
        std::memcpy(dst, src, bytes);
    });
}

convcoreStatus_t convcoreSynchronize(convcoreHandle_t handle) {
    return guard([&] {
        require(handle, "handle");
#ifdef CONVCORE_WITH_CUDA
        if (handle->device == CONVCORE_DEVICE_CUDA) cuda::synchronize(*handle);
#endif
    });
}

}  // extern "C"
