// convcore — thin C++ wrappers over the C API: RAII descriptors and handles, and an
// exception (convcore::Exception) carrying the status and the reason.
//
//   convcore::Handle h;                                   // CPU
//   convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 3, 224, 224);
//   convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 64, 3, 3, 3);
//   convcore::ConvDesc conv(1, 1);                        // padding 1, stride 1
//   auto [n, k, p, q] = conv.output_dims(x, w);
//   convcore::Plan plan(h, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_PLAN_SELECT_MEASURED);
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "convcore/convcore.h"

namespace convcore {

class Exception : public std::runtime_error {
   public:
    Exception(convcoreStatus_t status, const std::string& reason)
        : std::runtime_error(std::string(convcoreGetStatusName(status)) + ": " + reason),
          status_(status) {}
    convcoreStatus_t status() const { return status_; }

   private:
    convcoreStatus_t status_;
};

inline void check(convcoreStatus_t status) {
    if (status != CONVCORE_STATUS_SUCCESS) throw Exception(status, convcoreGetLastErrorString());
}

class Handle {
   public:
    explicit Handle(convcoreDeviceType_t device = CONVCORE_DEVICE_CPU, int index = 0) {
        check(convcoreCreateForDevice(&h_, device, index));
    }
    ~Handle() { convcoreDestroy(h_); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    operator convcoreHandle_t() const { return h_; }

   private:
    convcoreHandle_t h_ = nullptr;
};

class TensorDesc {
   public:
    // A descriptor to set later (set, set_strided).
    TensorDesc() { check(convcoreCreateTensorDescriptor(&d_)); }
    TensorDesc(convcoreDataType_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
        check(convcoreCreateTensorDescriptor(&d_));
        set(t, n, c, h, w);
    }
    // Packed in `format` (CONVCORE_TENSOR_NCHW or CONVCORE_TENSOR_NHWC); dimensions N, C, H, W.
    TensorDesc(convcoreTensorFormat_t format, convcoreDataType_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
        check(convcoreCreateTensorDescriptor(&d_));
        check(convcoreSetTensor4dDescriptorWithFormat(d_, format, t, n, c, h, w));
    }
    ~TensorDesc() { convcoreDestroyTensorDescriptor(d_); }
    TensorDesc(const TensorDesc&) = delete;
    TensorDesc& operator=(const TensorDesc&) = delete;
    void set(convcoreDataType_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
        check(convcoreSetTensor4dDescriptor(d_, t, n, c, h, w));
    }
    void set_strided(convcoreDataType_t t, std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
        check(convcoreSetTensor4dDescriptorEx(d_, t, dims[0], dims[1], dims[2], dims[3], strides[0],
                                              strides[1], strides[2], strides[3]));
    }
    operator convcoreTensorDescriptor_t() const { return d_; }

   private:
    convcoreTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
   public:
    // A descriptor to set later (set, set_strided).
    FilterDesc() { check(convcoreCreateFilterDescriptor(&d_)); }
    FilterDesc(convcoreDataType_t t, int64_t k, int64_t c_per_group, int64_t r, int64_t s) {
        check(convcoreCreateFilterDescriptor(&d_));
        check(convcoreSetFilter4dDescriptor(d_, t, k, c_per_group, r, s));
    }
    // Packed KCRS (CONVCORE_TENSOR_NCHW) or KRSC (CONVCORE_TENSOR_NHWC).
    FilterDesc(convcoreTensorFormat_t format, convcoreDataType_t t, int64_t k, int64_t c_per_group, int64_t r,
               int64_t s) {
        check(convcoreCreateFilterDescriptor(&d_));
        check(convcoreSetFilter4dDescriptorWithFormat(d_, format, t, k, c_per_group, r, s));
    }
    ~FilterDesc() { convcoreDestroyFilterDescriptor(d_); }
    FilterDesc(const FilterDesc&) = delete;
    FilterDesc& operator=(const FilterDesc&) = delete;
    void set(convcoreDataType_t t, int64_t k, int64_t c_per_group, int64_t r, int64_t s) {
        check(convcoreSetFilter4dDescriptor(d_, t, k, c_per_group, r, s));
    }
    // Any positive strides (KCRS, KRSC, ...): the library packs the filter where it needs to.
    void set_strided(convcoreDataType_t t, std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
        check(convcoreSetFilter4dDescriptorEx(d_, t, dims[0], dims[1], dims[2], dims[3], strides[0], strides[1],
                                              strides[2], strides[3]));
    }
    operator convcoreFilterDescriptor_t() const { return d_; }

   private:
    convcoreFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
   public:
    ConvDesc(int64_t pad = 0, int64_t stride = 1, int64_t dilation = 1, int64_t groups = 1,
             convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION) {
        check(convcoreCreateConvolutionDescriptor(&d_));
        set(pad, pad, stride, stride, dilation, dilation, mode);
        check(convcoreSetConvolutionGroupCount(d_, groups));
    }
    ~ConvDesc() { convcoreDestroyConvolutionDescriptor(d_); }
    ConvDesc(const ConvDesc&) = delete;
    ConvDesc& operator=(const ConvDesc&) = delete;
    void set(int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w, int64_t dil_h,
             int64_t dil_w, convcoreConvolutionMode_t mode = CONVCORE_CROSS_CORRELATION) {
        check(convcoreSetConvolution2dDescriptor(d_, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, mode));
    }
    void set_groups(int64_t groups) { check(convcoreSetConvolutionGroupCount(d_, groups)); }
    // How the caller runs the forward filters, for selection (convcoreSetConvolutionFilterProtocol).
    void set_filter_protocol(convcoreFilterProtocol_t protocol) {
        check(convcoreSetConvolutionFilterProtocol(d_, protocol));
    }
    std::array<int64_t, 4> output_dims(const TensorDesc& x, const FilterDesc& w) const {
        std::array<int64_t, 4> o{};
        check(convcoreGetConvolution2dForwardOutputDim(d_, x, w, &o[0], &o[1], &o[2], &o[3]));
        return o;
    }
    operator convcoreConvolutionDescriptor_t() const { return d_; }

   private:
    convcoreConvolutionDescriptor_t d_ = nullptr;
};

// A convolution plan (convcore.h, "plans"): validated once, run many times.
//   convcore::Plan fwd(h, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_PLAN_SELECT_MEASURED);
//   std::vector<char> ws(fwd.workspace_size());
//   fwd.execute(&one, x_data, w_data, &zero, y_data, ws.data(), ws.size());
class Plan {
   public:
    Plan(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t x,
         convcoreFilterDescriptor_t w, convcoreConvolutionDescriptor_t conv, convcoreTensorDescriptor_t y, int algo) {
        check(convcoreCreateConvolutionPlan(handle, pass, x, w, conv, y, algo, &p_));
    }
    ~Plan() { convcoreDestroyConvolutionPlan(p_); }
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    Plan(Plan&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
    Plan& operator=(Plan&& other) noexcept {
        if (this != &other) {
            convcoreDestroyConvolutionPlan(p_);
            p_ = other.p_;
            other.p_ = nullptr;
        }
        return *this;
    }
    int algorithm() const {
        int algo = 0;
        check(convcoreGetConvolutionPlanAlgorithm(p_, &algo));
        return algo;
    }
    size_t workspace_size() const {
        size_t bytes = 0;
        check(convcoreGetConvolutionPlanWorkspaceSize(p_, &bytes));
        return bytes;
    }
    // out = alpha * pass(in0, in1) + beta * out (see convcoreExecuteConvolutionPlan).
    void execute(const void* alpha, const void* in0, const void* in1, const void* beta, void* out,
                 void* workspace = nullptr, size_t workspace_bytes = 0) const {
        check(convcoreExecuteConvolutionPlan(p_, alpha, in0, in1, beta, out, workspace, workspace_bytes));
    }
    // y = act(alpha1 * conv(x, w) + alpha2 * z + bias) (see convcoreExecuteConvolutionPlanBiasActivation).
    void execute_bias_activation(const void* alpha1, const void* x, const void* w, const void* alpha2, const void* z,
                                 const void* bias, convcoreActivationMode_t activation, void* y,
                                 void* workspace = nullptr, size_t workspace_bytes = 0) const {
        check(convcoreExecuteConvolutionPlanBiasActivation(p_, alpha1, x, w, alpha2, z, bias, activation, y,
                                                           workspace, workspace_bytes));
    }
    operator convcoreConvolutionPlan_t() const { return p_; }

   private:
    convcoreConvolutionPlan_t p_ = nullptr;
};

// One pass through the handle's plan cache (convcore.h, "the handle's plan cache"): the plan,
// the filters it keeps and the workspace are the handle's. Returns the algorithm that ran.
//   convcoreConvolutionArgs_t args{};
//   args.in0 = x_data; args.in1 = w_data; args.out = y_data;
//   convcore::execute(h, CONVCORE_PASS_FORWARD, x, w, conv, y, CONVCORE_PLAN_SELECT_MEASURED, args);
inline int execute(convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t x,
                   convcoreFilterDescriptor_t w, convcoreConvolutionDescriptor_t conv, convcoreTensorDescriptor_t y,
                   int algo, const convcoreConvolutionArgs_t& args) {
    int ran = 0;
    check(convcoreConvolutionExecute(handle, pass, x, w, conv, y, algo, &args, &ran));
    return ran;
}

}  // namespace convcore
