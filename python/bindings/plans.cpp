// Plans: every call that runs through the handle's plan cache (forward with its
// epilogue, the NumPy fast path, the backward passes, the fused 1x1 -> depthwise pair).
#include "common.hpp"
#include "common/conv_index.hpp"  // the core's output-size formula
#include "core/fingerprint.hpp"     // mix64
#include "core/lru_map.hpp"

namespace convcore_py {
namespace {

// A problem this Convolution has seen on this thread: its descriptors, validated with the
// caller's argument names, and its algorithm (chosen by Select for "auto" and "find"). This is
// what a C caller keeps; the plan, its prepared filters and the workspace are the core's (the
// handle's plan cache: convcoreConvolutionExecute).
struct KnownProblem {
    Descriptors d;
    int algo = 0;
};

// What identifies a problem: the pass, the requested algorithm, the convolution parameters and
// each tensor's dtype, device, shape and strides. Equal keys mean equal descriptors, so a call
// whose key is known was validated when it was first seen.
using ProblemKey = std::vector<int64_t>;
struct ProblemKeyHash {
    size_t operator()(const ProblemKey& key) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
        for (int64_t v : key) h = (h ^ uint64_t(v)) * 1099511628211ull;
        return size_t(h);
    }
};

// A key's first values: the pass, the requested algorithm, whether the filters are kept between
// calls, and the convolution's parameters (run_plan and forward_array's short path must agree).
inline ProblemKey problem_key(convcoreConvolutionPass_t pass, int algo, int64_t keeps_prepared, const ConvParams& p) {
    return ProblemKey{int64_t(pass), algo, keeps_prepared, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h,
                      p.dil_w, p.groups, p.mode, p.pad_d, p.stride_d, p.dil_d};
}

// The problems of one Convolution in one thread (convcore.Convolution keeps one per thread), at
// most kMaxProblems, the least recently used dropped first. clear_find_cache forgets them (their
// algorithms were chosen from the find results).
class KnownProblems {
   public:
    static constexpr size_t kMaxProblems = 64;
    KnownProblems() = default;
    KnownProblems(const KnownProblems&) = delete;
    KnownProblems& operator=(const KnownProblems&) = delete;

    // Call with the GIL held (it orders the map's users). A hit becomes the most recently used.
    std::shared_ptr<const KnownProblem> find(const ProblemKey& key) {
        const uint64_t generation = g_plan_generation.load(std::memory_order_relaxed);
        if (generation != generation_) {
            problems_.clear();
            generation_ = generation;
        }
        const std::shared_ptr<const KnownProblem>* found = problems_.find(key);
        return found ? *found : nullptr;
    }
    void insert(const ProblemKey& key, std::shared_ptr<const KnownProblem> problem) {
        problems_.insert(key, std::move(problem));
    }
    size_t count() const { return problems_.size(); }
    // The core's filter version for the caller's filter_version: a caller's numbers are its own
    // (as they were when each Convolution kept its plans), so they are made distinct per
    // Convolution and thread; kFiltersChecked and kFiltersPerCall are the core's 0 (checked).
    int64_t core_filter_version(int64_t filter_version) const {
        if (filter_version < 0) return CONVCORE_FILTER_VERSION_CHECKED;
        return 1 + int64_t(convcore::mix64(serial_ ^ convcore::mix64(uint64_t(filter_version))) >> 2);
    }

   private:
    static inline std::atomic<uint64_t> next_serial_{1};
    const uint64_t serial_ = next_serial_.fetch_add(1);
    convcore::LruMap<ProblemKey, std::shared_ptr<const KnownProblem>, ProblemKeyHash> problems_{kMaxProblems};
    uint64_t generation_ = 0;
};

// The fused epilogue of a forward call: out = act(alpha * conv(x, w) + alpha2 * residual + bias).
struct ForwardEpilogue {
    const DLPackTensor* bias = nullptr;
    const DLPackTensor* residual = nullptr;
    double alpha2 = 1.0;
    int activation = CONVCORE_ACTIVATION_IDENTITY;
    bool any() const { return bias || residual || activation != CONVCORE_ACTIVATION_IDENTITY; }
};

// The buffers of one execution.
struct PlanOperands {
    const void* in0;
    const void* in1;
    void* out;
    bool fused = false;  // the forward pass with its epilogue: bias, activation, residual
    double alpha2 = 0.0;
    const void* residual = nullptr;
    const void* bias = nullptr;
    int activation = CONVCORE_ACTIVATION_IDENTITY;
};

// out = alpha * pass(in0, in1) + beta * out (or the forward pass with its epilogue) through the
// handle's plan cache (convcoreConvolutionExecute), with the GIL released: the core keeps the
// plan, the workspace, and the filters it prepares (filter_version >= 0: the caller's number for
// the contents of in1; kFiltersChecked: the core checks their bytes; kFiltersPerCall: none kept).
convcoreStatus_t execute_known(const KnownProblem& known, convcoreConvolutionPass_t pass, convcoreHandle_t h,
                               bool is_double, const PlanOperands& op, double alpha, double beta,
                               int64_t core_filter_version) {
    const float alpha_f = float(alpha), beta_f = float(beta), alpha2_f = float(op.alpha2);
    convcoreConvolutionArgs_t args{};
    args.alpha = is_double ? static_cast<const void*>(&alpha) : &alpha_f;
    args.beta = is_double ? static_cast<const void*>(&beta) : &beta_f;
    args.in0 = op.in0;
    args.in1 = op.in1;
    args.out = op.out;
    if (op.fused) {
        args.beta = nullptr;
        args.z = op.residual;
        args.alpha2 = is_double ? static_cast<const void*>(&op.alpha2) : &alpha2_f;
        args.bias = op.bias;
        args.activation = convcoreActivationMode_t(op.activation);
    }
    args.filterVersion = core_filter_version;
    py::gil_scoped_release release;
    return convcoreConvolutionExecute(h, pass, known.d.x, known.d.w, known.d.conv, known.d.y, known.algo, &args,
                                      nullptr);
}

// Runs one pass: out = alpha * pass(in0, in1) + beta * out (convcoreConvolutionExecute's
// operands). On the first call of a problem, `describe(d, h)` validates the tensors (naming the
// user's arguments), fills the descriptors and returns the algorithm (running Select with the
// data for "auto" and "find"). `check_status(status, algo)` turns a failed status into the pass's
// exception. filter_version as in execute_known. Returns the algorithm that ran.
template <typename Describe, typename CheckStatus>
int run_plan(convcoreConvolutionPass_t pass, const DLPackTensor& in0, const char* in0_name,
             const DLPackTensor& in1, const char* in1_name, const DLPackTensor& out, const ConvParams& p,
             int algo, double alpha, double beta, KnownProblems& problems, uintptr_t stream,
             int64_t filter_version, Describe describe, CheckStatus check_status,
             const ForwardEpilogue* epilogue = nullptr) {
    if (out.read_only()) bad_param("out: the array is read-only");
    // What the descriptors cannot know ahead: where the buffers are (before Select, which may time on out).
    check_aligned(in0, in0_name);
    check_aligned(in1, in1_name);
    check_aligned(out, "out");
    if (out.overlaps(in0)) bad_param(std::string("out overlaps ") + in0_name + ": the output must be a separate buffer");
    if (out.overlaps(in1)) bad_param(std::string("out overlaps ") + in1_name + ": the output must be a separate buffer");
    const int64_t keeps_prepared = filter_version == kFiltersPerCall ? 0 : 1;
    ProblemKey key = problem_key(pass, algo, keeps_prepared, p);
    for (const DLPackTensor* t : {&in0, &in1, &out}) t->append_layout(key);
    if (epilogue && epilogue->any())  // the layouts of its operands (checked once, by describe)
        for (const DLPackTensor* t : {epilogue->bias, epilogue->residual}) t ? t->append_layout(key) : key.push_back(-1);
    convcoreHandle_t h = handle_on(in0, stream);
    std::shared_ptr<const KnownProblem> known = problems.find(key);
    if (!known) {
        auto made = std::make_shared<KnownProblem>();
        made->algo = describe(made->d, h);
        known = made;
        problems.insert(key, known);
    }
    const bool fused = epilogue && epilogue->any();
    PlanOperands ops{in0.data(), in1.data(), out.data()};
    if (fused) {
        ops.fused = true;
        ops.alpha2 = epilogue->alpha2;
        ops.residual = epilogue->residual ? epilogue->residual->data() : nullptr;
        ops.bias = epilogue->bias ? epilogue->bias->data() : nullptr;
        ops.activation = epilogue->activation;
    }
    check_status(execute_known(*known, pass, h, in0.is_float(64), ops, alpha, beta,
                               problems.core_filter_version(filter_version)),
                 known->algo);
    return known->algo;
}

// y = alpha * conv(x, w) + beta * y with algorithm `algo` (-1: "auto", -2: "find"; both
// through convcoreSelectConvolutionForwardAlgorithm). `stream` is the CUDA stream to run on
// (ignored on the CPU); filter_version as in run_plan. Returns the algorithm used.
// The checks of the epilogue's operands that their layouts decide (shape, dtype, device,
// strides), with the Python argument names: made once per plan (run_plan's key holds the
// operands' layouts).
void check_epilogue_layout(const ForwardEpilogue& e, const DLPackTensor& x, const DLPackTensor& y) {
    const auto same_device = [&](const DLPackTensor& t) {
        return t.device_type() == x.device_type() && t.device_id() == x.device_id();
    };
    if (e.bias) {
        const DLPackTensor& b = *e.bias;
        const int64_t k = y.shape()[1];
        if (b.shape() != std::vector<int64_t>{k})
            bad_param("bias: expected shape (" + std::to_string(k) + ",) (one value per output channel), got " +
                      shape_str(b.shape()));
        if (b.dtype() != x.dtype()) bad_param("bias: dtype " + b.dtype() + " does not match x: dtype " + x.dtype());
        if (!same_device(b)) bad_param("bias is not on the device of x");
        if (k > 1 && b.strides()[0] != 1) bad_param("bias: must be contiguous");
    }
    if (e.residual) {
        const DLPackTensor& z = *e.residual;
        if (z.shape() != y.shape())
            bad_param("residual: expected shape " + shape_str(y.shape()) + " (the output's), got " + shape_str(z.shape()));
        if (z.dtype() != x.dtype())
            bad_param("residual: dtype " + z.dtype() + " does not match x: dtype " + x.dtype());
        if (!same_device(z)) bad_param("residual is not on the device of x");
        const auto zs = z.strides(), ys = y.strides(), dims = y.shape();
        for (size_t i = 0; i < dims.size(); ++i)
            if (dims[i] > 1 && zs[i] != ys[i])
                bad_param("residual: strides " + shape_str(zs) + " differ from out's " + shape_str(ys) +
                          " (it must be laid out as out)");
    }
}

// The checks of every call with an epilogue: its scalars and where its operands lie.
void check_epilogue_call(const ForwardEpilogue& e, const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y,
                         double beta) {
    if (e.activation < CONVCORE_ACTIVATION_IDENTITY || e.activation > CONVCORE_ACTIVATION_GELU_TANH)
        bad_param("activation: unknown activation code " + std::to_string(e.activation));
    if (e.any() && beta != 0.0)
        bad_param("beta: the epilogue (bias, activation, residual) computes out without reading it; pass "
                  "residual=out, alpha2=beta to add it");
    if (e.bias) {
        check_aligned(*e.bias, "bias");
        if (e.bias->overlaps(y)) bad_param("bias overlaps out: the output must be a separate buffer");
    }
    if (e.residual) {
        const DLPackTensor& z = *e.residual;
        check_aligned(z, "residual");
        if (z.overlaps(x)) bad_param("residual overlaps x: it must not share memory with the input");
        if (z.overlaps(w)) bad_param("residual overlaps w: it must not share memory with the filters");
        if (z.data() != y.data() && z.overlaps(y))
            bad_param("residual overlaps out without being out: pass residual=out to add it in place, or a separate "
                      "buffer");
    }
}

int forward(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
            int algo, double alpha, double beta, KnownProblems& problems, uintptr_t stream, int64_t filter_version,
            const DLPackTensor* bias, int activation, const DLPackTensor* residual, double alpha2) {
    const ForwardEpilogue epilogue{bias, residual, alpha2, activation};
    check_epilogue_call(epilogue, x, w, y, beta);
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        set_forward_descriptors(d, x, w, y, p);
        check_epilogue_layout(epilogue, x, y);
        // Select for the way this call runs: filters kept between calls (a filter_version or
        // "check"), or transformed at every call.
        if (filter_version != kFiltersPerCall)
            check(convcoreSetConvolutionFilterProtocol(d.conv, CONVCORE_FILTERS_PREPARED));
        if (algo >= 0) return algo;
        // Timing may overwrite y: it is given as scratch only when its contents are not blended
        // and it is not the residual.
        void* scratch = beta == 0.0 && !(residual && residual->overlaps(y)) ? y.data() : nullptr;
        convcoreConvolutionFwdAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionForwardAlgorithm(h, d.x, x.data(), d.w, w.data(), d.conv, d.y,
                                                             scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_FORWARD, x, "x", w, "w", y, p, algo, alpha, beta, problems, stream,
                    filter_version, describe, check_algo_call, &epilogue);
}

// The descriptors of a 3-D call on 5-D arrays whose dtypes and devices were checked: `in_` (x, or
// dx for backward data) and out_ (y, or dy) any strides, w packed K x C/groups x T x R x S; out_
// must be the convolution's output shape (named `out_name`). p's depth fields hold the depth axis.
void describe_3d(Descriptors& d, const DLPackTensor& in_, const char* in_name, const DLPackTensor& w,
                 const DLPackTensor& out_, const char* out_name, const ConvParams& p) {
    for (const auto& [t, name] : {std::pair<const DLPackTensor*, const char*>{&in_, in_name}, {&w, "w"}, {&out_, out_name}})
        if (t->ndim() != 5) bad_param(std::string(name) + ": expected a 5-D array, got shape " + shape_str(t->shape()));
    if (!w.is_packed()) bad_param("w: must be packed K x C/groups x T x R x S");
    const convcoreDataType_t t = data_type_of(w.dtype());
    const auto is = in_.shape(), ist = in_.strides_for_c(), ws = w.shape(), os = out_.shape(), ost = out_.strides_for_c();
    check(convcoreSetTensorNdDescriptor(d.x, t, 5, is.data(), ist.data()), std::string(in_name) + ": ");
    check(convcoreSetFilterNdDescriptor(d.w, t, CONVCORE_TENSOR_NCHW, 5, ws.data()), "w: ");
    const int64_t pads[3] = {p.pad_d, p.pad_h, p.pad_w}, strides[3] = {p.stride_d, p.stride_h, p.stride_w},
                  dils[3] = {p.dil_d, p.dil_h, p.dil_w};
    check(convcoreSetConvolutionNdDescriptor(d.conv, 3, pads, strides, dils, convcoreConvolutionMode_t(p.mode)));
    wrapped("groups: ", [&] { d.conv.set_groups(p.groups); });
    std::vector<int64_t> expect(5);
    check(convcoreGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 5, expect.data()));
    if (os != expect)
        bad_param(std::string(out_name) + ": expected shape " + shape_str(expect) + " (the output of this convolution), got " +
                  shape_str(os));
    check(convcoreSetTensorNdDescriptor(d.y, t, 5, os.data(), ost.data()), std::string(out_name) + ": ");
}

// p with the depth axis of a 3-D call: depth = (padding, stride, dilation).
ConvParams with_depth(const ConvParams& p, const std::vector<int64_t>& depth) {
    if (depth.size() != 3) bad_param("depth: expected (padding, stride, dilation)");
    ConvParams p3 = p;
    p3.pad_d = depth[0], p3.stride_d = depth[1], p3.dil_d = depth[2];
    return p3;
}

// The 3-D forward pass in one C API call on 5-D descriptors: what runs the C API's native 3-D
// Winograd (cpu/winograd_3d.hpp), whose plan keeps its transformed filters as a 2-D plan does
// (filter_version as in run_plan), and its 3-D FFT; algo >= 0: convcore/_nd.py chooses.
int forward_3d(const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
               int algo, double alpha, double beta, KnownProblems& problems, int64_t filter_version) {
    if (algo < 0) bad_param("algo: a 3-D call through one plan names its algorithm");
    auto describe = [&](Descriptors& d, convcoreHandle_t) {
        check_forward_tensors(x, w, y);
        describe_3d(d, x, "x", w, y, "out", p);
        if (filter_version != kFiltersPerCall)
            check(convcoreSetConvolutionFilterProtocol(d.conv, CONVCORE_FILTERS_PREPARED));
        return algo;
    };
    return run_plan(CONVCORE_PASS_FORWARD, x, "x", w, "w", y, p, algo, alpha, beta, problems, 0, filter_version,
                    describe, check_algo_call);
}

// dx = alpha * grad_x(dy, w) + beta * dx on 5-D arrays in one C API call, with backward-data
// algorithm `algo` (convcore/_nd.py's "native" schedule: the C API's native 3-D Winograd or FFT).
int backward_data_3d(const DLPackTensor& dy, const DLPackTensor& w, const DLPackTensor& dx, const ConvParams& p,
                     int algo, double alpha, double beta, KnownProblems& problems) {
    if (algo < 0) bad_param("algo: a 3-D call through one plan names its algorithm");
    auto describe = [&](Descriptors& d, convcoreHandle_t) {
        check_forward_tensors(dy, w, dx, "dy");
        describe_3d(d, dx, "out", w, dy, "dy", p);
        return algo;
    };
    return run_plan(CONVCORE_PASS_BACKWARD_DATA, dy, "dy", w, "w", dx, p, algo, alpha, beta, problems, 0, -1, describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_DATA, a); });
}

// dw = alpha * grad_w(x, dy) + beta * dw on 5-D arrays in one C API call, with backward-filter
// algorithm `algo` (convcore/_nd.py's "native" schedule: the C API's native 3-D IM2COL_GEMM); dw
// packed K x C/groups x T x R x S.
int backward_filter_3d(const DLPackTensor& x, const DLPackTensor& dy, const DLPackTensor& dw, const ConvParams& p,
                       int algo, double alpha, double beta, KnownProblems& problems) {
    if (algo < 0) bad_param("algo: a 3-D call through one plan names its algorithm");
    auto describe = [&](Descriptors& d, convcoreHandle_t) {
        const std::string dtype = check_input_types(x, x, "x");
        if (dy.dtype() != dtype) bad_param("dy: dtype " + dy.dtype() + " does not match x: dtype " + dtype);
        if (dy.device_type() != x.device_type() || dy.device_id() != x.device_id())
            bad_param("dy is not on the device of x");
        check_output(dw, x, dtype, "x", 5);
        if (!x.has_positive_strides()) bad_param("x: strides must be positive");
        if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
        describe_3d(d, x, "x", dw, dy, "dy", p);  // dw as the filter: packed K x C/groups x T x R x S
        return algo;
    };
    return run_plan(CONVCORE_PASS_BACKWARD_FILTER, x, "x", dy, "dy", dw, p, algo, alpha, beta, problems, 0, -1, describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_FILTER, a); });
}

// convcore.torch's inference and training forward, kept short: forward() on DLPack capsules
// (torch.utils.dlpack.to_dlpack's), without making a Python DLPackTensor of each. bias and residual
// are capsules or None.
int forward_capsules(py::capsule x, py::capsule w, py::capsule y, const py::object& bias, const ConvParams& p,
                     int algo, KnownProblems& problems, int64_t filter_version, int activation,
                     const py::object& residual) {
    const DLPackTensor xt(x), wt(w), yt(y);
    std::optional<DLPackTensor> bt, zt;
    if (!bias.is_none()) bt.emplace(bias.cast<py::capsule>());
    if (!residual.is_none()) zt.emplace(residual.cast<py::capsule>());
    return forward(xt, wt, yt, p, algo, 1.0, 0.0, problems, 0, filter_version, bt ? &*bt : nullptr, activation,
                   zt ? &*zt : nullptr, 1.0);
}


// The fused 1x1 -> depthwise pair (convcoreCreatePointwiseDepthwisePlan) for convcore.torch's
// inference: a plan per input shape and data type, its filters prepared again whenever the
// caller's filter_version (a number that changes with the filters' contents) or their addresses
// change. Callers from several threads take turns (the plan and its prepared filters are shared).
class PointwiseDepthwise {
   public:
    explicit PointwiseDepthwise(const ConvParams& dw) : dw_(dw) {}
    ~PointwiseDepthwise() {
        if (plan_) convcoreDestroyPointwiseDepthwisePlan(plan_);
    }
    PointwiseDepthwise(const PointwiseDepthwise&) = delete;
    PointwiseDepthwise& operator=(const PointwiseDepthwise&) = delete;

    // y = the pair of x: CPU tensors as DLPack capsules, x and y packed NHWC, the filters packed
    // K x C x R x S, the biases K values or None. StatusError (NotSupportedError, BadParamError)
    // when the library refuses them.
    void forward(py::capsule x, py::capsule y, py::capsule w_pw, const py::object& b_pw, int act_pw,
                 py::capsule w_dw, const py::object& b_dw, int act_dw, int64_t filter_version) {
        const DLPackTensor xt(x), yt(y), wpt(w_pw), wdt(w_dw);
        std::optional<DLPackTensor> bpt, bdt;
        if (!b_pw.is_none()) bpt.emplace(b_pw.cast<py::capsule>());
        if (!b_dw.is_none()) bdt.emplace(b_dw.cast<py::capsule>());
        for (const DLPackTensor* t : {&xt, &yt, &wpt, &wdt, bpt ? &*bpt : &xt, bdt ? &*bdt : &xt})
            if (t->device_type() != kDLCPU || t->ndim() < 1) not_supported("the fused 1x1 -> depthwise pair takes CPU tensors");
        if (xt.ndim() != 4 || yt.ndim() != 4 || wpt.ndim() != 4 || wdt.ndim() != 4)
            bad_param("the fused 1x1 -> depthwise pair takes 4-D x, y and filters");
        const bool f64 = xt.is_float(64);
        if (!f64 && !xt.is_float(32)) not_supported("the fused 1x1 -> depthwise pair runs float32 and float64 only");
        for (const DLPackTensor* t : {&yt, &wpt, &wdt, bpt ? &*bpt : &xt, bdt ? &*bdt : &xt})
            if (!t->is_float(f64 ? 64 : 32)) bad_param("the fused 1x1 -> depthwise pair: every tensor must have x's dtype");
        if (!wpt.is_packed() || !wdt.is_packed() || (bpt && !bpt->is_packed()) || (bdt && !bdt->is_packed()))
            bad_param("the fused 1x1 -> depthwise pair takes contiguous filters and biases");
        std::vector<int64_t> key = {f64};
        xt.append_layout(key);
        yt.append_layout(key);
        const auto ws = wpt.shape(), ds = wdt.shape();
        key.insert(key.end(), ws.begin(), ws.end());
        key.insert(key.end(), ds.begin(), ds.end());
        const convcoreDataType_t dtype = f64 ? CONVCORE_DATA_DOUBLE : CONVCORE_DATA_FLOAT;
        py::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!plan_ || key != key_) {
            if (plan_) convcoreDestroyPointwiseDepthwisePlan(plan_);
            plan_ = nullptr;
            prepared_version_ = kFiltersPerCall;
            convcore::TensorDesc xd, yd;
            convcore::FilterDesc wpd, wdd;
            convcore::ConvDesc conv;
            const auto xs = xt.shape(), xst = xt.strides_for_c(), ys = yt.shape(), yst = yt.strides_for_c();
            wrapped("x: ", [&] { xd.set_strided(dtype, {xs[0], xs[1], xs[2], xs[3]}, {xst[0], xst[1], xst[2], xst[3]}); });
            wrapped("y: ", [&] { yd.set_strided(dtype, {ys[0], ys[1], ys[2], ys[3]}, {yst[0], yst[1], yst[2], yst[3]}); });
            wrapped("w_pw: ", [&] { wpd.set(dtype, ws[0], ws[1], ws[2], ws[3]); });
            wrapped("w_dw: ", [&] { wdd.set(dtype, ds[0], ds[1], ds[2], ds[3]); });
            wrapped("", [&] {
                conv.set(dw_.pad_h, dw_.pad_w, dw_.stride_h, dw_.stride_w, dw_.dil_h, dw_.dil_w,
                         convcoreConvolutionMode_t(dw_.mode));
                conv.set_groups(dw_.groups);
            });
            check(convcoreCreatePointwiseDepthwisePlan(cpu_handle(), xd, wpd, wdd, conv, yd, &plan_));
            key_ = key;
        }
        if (filter_version == kFiltersPerCall || filter_version != prepared_version_ ||
            wpt.data() != prepared_pw_ || wdt.data() != prepared_dw_) {
            prepared_version_ = kFiltersPerCall;
            if (filter_version != kFiltersPerCall) {
                check(convcorePreparePointwiseDepthwisePlanFilters(plan_, wpt.data(), wdt.data()));
                prepared_version_ = filter_version;
                prepared_pw_ = wpt.data(), prepared_dw_ = wdt.data();
            }
        }
        check(convcoreExecutePointwiseDepthwisePlan(plan_, xt.data(), wpt.data(), bpt ? bpt->data() : nullptr,
                                                    convcoreActivationMode_t(act_pw), wdt.data(),
                                                    bdt ? bdt->data() : nullptr, convcoreActivationMode_t(act_dw),
                                                    yt.data()));
    }

   private:
    ConvParams dw_;
    std::mutex mutex_;
    convcorePointwiseDepthwisePlan_t plan_ = nullptr;
    std::vector<int64_t> key_;
    int64_t prepared_version_ = kFiltersPerCall;
    const void* prepared_pw_ = nullptr;
    const void* prepared_dw_ = nullptr;
};


// The common NumPy call, kept short: y = conv(x, w) of C-contiguous, aligned float arrays into a
// new array, through the plan an earlier call of the same problem made. The key is built as
// run_plan builds it from the arrays' DLPack export (dtype, device, shape and element strides of
// x, w and the packed output), so equal keys mean the same problem, validated when its plan was
// made. None when there is no such plan or the arrays are anything else: the general path then
// checks them, makes the plan or says what is wrong. Returns (y, algorithm that ran).
py::object forward_array(const py::handle& x_obj, const py::handle& w_obj, const ConvParams& p, int algo,
                         KnownProblems& problems, int64_t filter_version) {
    if (!py::isinstance<py::array>(x_obj) || !py::isinstance<py::array>(w_obj)) return py::none();
    const auto x = py::reinterpret_borrow<py::array>(x_obj), w = py::reinterpret_borrow<py::array>(w_obj);
    constexpr int kPackedAligned = py::array::c_style | 0x0100;  // NPY_ARRAY_ALIGNED
    const py::dtype dtype = x.dtype();
    const py::ssize_t itemsize = dtype.itemsize();
    if (x.ndim() != 4 || w.ndim() != 4 || dtype.kind() != 'f' || (itemsize != 4 && itemsize != 8) ||
        dtype.byteorder() != '=' || (!dtype.is(w.dtype()) && !dtype.equal(w.dtype())) ||
        (x.flags() & kPackedAligned) != kPackedAligned || (w.flags() & kPackedAligned) != kPackedAligned)
        return py::none();
    const int64_t n = x.shape(0), k = w.shape(0);
    const int64_t out_h = convcore::conv_output_size(x.shape(2), p.pad_h, w.shape(2), p.stride_h, p.dil_h);
    const int64_t out_w = convcore::conv_output_size(x.shape(3), p.pad_w, w.shape(3), p.stride_w, p.dil_w);
    if (n < 1 || k < 1 || out_h < 1 || out_w < 1) return py::none();
    const int64_t keeps_prepared = filter_version == kFiltersPerCall ? 0 : 1;
    ProblemKey key = problem_key(CONVCORE_PASS_FORWARD, algo, keeps_prepared, p);
    const int64_t dtype_code = int64_t(kDLFloat) << 32 | int64_t(itemsize * 8) << 16 | 1;
    const int64_t device_code = int64_t(kDLCPU) << 32;
    for (const py::array* a : {&x, &w}) {
        key.insert(key.end(), {dtype_code, device_code, 4});
        for (int i = 3; i >= 0; --i) key.insert(key.end(), {int64_t(a->shape(i)), int64_t(a->strides(i) / itemsize)});
    }
    const int64_t y_shape[4] = {n, k, out_h, out_w};
    key.insert(key.end(), {dtype_code, device_code, 4});
    for (int i = 3, stride = 1; i >= 0; stride *= int(y_shape[i]), --i) key.insert(key.end(), {y_shape[i], stride});
    std::shared_ptr<const KnownProblem> known = problems.find(key);
    if (!known) return py::none();
    py::array y(dtype, std::vector<py::ssize_t>(y_shape, y_shape + 4));
    const PlanOperands ops{x.data(), w.data(), y.mutable_data()};
    check_algo_call(execute_known(*known, CONVCORE_PASS_FORWARD, cpu_handle(), itemsize == 8, ops, 1.0, 0.0,
                                  problems.core_filter_version(filter_version)),
                    known->algo);
    return py::make_tuple(std::move(y), known->algo);
}

// dx = alpha * grad_x(w, dy) + beta * dx with backward-data algorithm `algo` (-1: "auto",
// -2: "find"). Returns the algorithm used.
int backward_data(const DLPackTensor& dy, const DLPackTensor& w, const DLPackTensor& dx,
                  const ConvParams& p, int algo, double alpha, double beta, KnownProblems& problems,
                  uintptr_t stream) {
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        const std::string dtype = check_pair(dy, "dy", w, "w");
        const convcoreDataType_t t = data_type_of(dtype);
        check_output(dx, dy, dtype, "dy");
        if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
        if (!w.has_positive_strides()) bad_param("w: strides must be positive");
        d.set_conv(p);
        set_tensor(d.x, dx.shape(), dx.strides_for_c(), t, "out: ");
        d.set_w(w, t, "w");
        check_dy_shape(d, dy, dx.shape());
        set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
        if (algo >= 0) return algo;
        void* scratch = beta == 0.0 ? dx.data() : nullptr;
        convcoreConvolutionBwdDataAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionBackwardDataAlgorithm(h, d.w, w.data(), d.y, dy.data(), d.conv, d.x,
                                                                  scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_BACKWARD_DATA, dy, "dy", w, "w", dx, p, algo, alpha, beta, problems, stream, -1,
                    describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_DATA, a); });
}

// dw = alpha * grad_w(x, dy) + beta * dw with backward-filter algorithm `algo` (-1: auto,
// -2: Find's).
int backward_filter(const DLPackTensor& x, const DLPackTensor& dy, const DLPackTensor& dw,
                    const ConvParams& p, int algo, double alpha, double beta, KnownProblems& problems,
                    uintptr_t stream) {
    auto describe = [&](Descriptors& d, convcoreHandle_t h) {
        const std::string dtype = check_pair(x, "x", dy, "dy");
        const convcoreDataType_t t = data_type_of(dtype);
        check_output(dw, x, dtype, "x");
        if (!x.has_positive_strides()) bad_param("x: strides must be positive");
        if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
        d.set_conv(p);
        set_tensor(d.x, x.shape(), x.strides_for_c(), t, "x: ");
        d.set_w(dw, t, "out");
        check_dy_shape(d, dy, x.shape());
        set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
        if (algo >= 0) return algo;
        void* scratch = beta == 0.0 ? dw.data() : nullptr;
        convcoreConvolutionBwdFilterAlgo_t chosen{};
        run_select(algo, [&](convcoreSelectMode_t mode) {
            return convcoreSelectConvolutionBackwardFilterAlgorithm(h, d.x, x.data(), d.y, dy.data(), d.conv, d.w,
                                                                    scratch, mode, &chosen);
        });
        return int(chosen);
    };
    return run_plan(CONVCORE_PASS_BACKWARD_FILTER, x, "x", dy, "dy", dw, p, algo, alpha, beta, problems, stream, -1,
                    describe,
                    [](convcoreStatus_t status, int a) { check_bwd(status, BACKWARD_FILTER, a); });
}

// db (K,) = alpha * sum of dy over n, p, q + beta * db.
void backward_bias(const DLPackTensor& dy, const DLPackTensor& db, double alpha, double beta,
                   uintptr_t stream) {
    const std::string dtype = check_pair(dy, "dy", dy, "dy");
    const convcoreDataType_t t = data_type_of(dtype);
    check_output(db, dy, dtype, "dy", 1);
    if (!dy.has_positive_strides()) bad_param("dy: strides must be positive");
    const int64_t k = dy.shape()[1];
    if (db.shape()[0] != k)
        bad_param("out: expected shape (" + std::to_string(k) + ",) (one value per channel of dy), got " +
                  shape_str(db.shape()));
    check_aligned(dy, "dy");
    check_aligned(db, "out");
    if (db.overlaps(dy)) bad_param("out overlaps dy: the output must be a separate buffer");
    Descriptors d;
    set_tensor(d.y, dy.shape(), dy.strides_for_c(), t, "dy: ");
    const int64_t st = db.strides_for_c()[0];
    check(convcoreSetTensor4dDescriptorEx(d.x, t, 1, k, 1, 1, k * st, st, 1, 1), "out: ");
    convcoreHandle_t h = handle_on(dy, stream);
    const float alpha_f = float(alpha), beta_f = float(beta);
    const void* alpha_p = t == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&alpha) : &alpha_f;
    const void* beta_p = t == CONVCORE_DATA_DOUBLE ? static_cast<const void*>(&beta) : &beta_f;
    convcoreStatus_t status;
    {
        py::gil_scoped_release release;
        status = convcoreConvolutionBackwardBias(h, alpha_p, d.y, dy.data(), beta_p, d.x, db.data());
    }
    check(status);
}

// convcoreActivationBackwardBias on DLPack capsules (convcore.torch's eager autograd): dv = dy *
// act'(a), a being y for RELU and RELU6 and the pre-activation v for SILU, GELU and GELU_TANH
// (IDENTITY: unused), and
// db (a capsule, or None) = the sum of dv per channel. dy, a and dv have one shape; dv is the
// caller's new tensor.
void activation_backward_capsules(int activation, py::capsule a, py::capsule dy, py::capsule dv,
                                  const py::object& db) {
    const DLPackTensor at(a), dyt(dy), dvt(dv);
    const std::string dtype = check_pair(dyt, "dy", at, "y");
    check_output(dvt, dyt, dtype, "dy");
    const convcoreDataType_t t = data_type_of(dtype);
    if (!dyt.has_positive_strides() || !at.has_positive_strides()) bad_param("dy, y: strides must be positive");
    const auto act = convcoreActivationMode_t(activation);
    const bool reads_v = act == CONVCORE_ACTIVATION_SILU || act == CONVCORE_ACTIVATION_GELU ||
                      act == CONVCORE_ACTIVATION_GELU_TANH;  // reads the pre-activation v
    convcore::TensorDesc dy_d, a_d, dv_d, db_d;
    set_tensor(dy_d, dyt.shape(), dyt.strides_for_c(), t, "dy: ");
    set_tensor(a_d, at.shape(), at.strides_for_c(), t, reads_v ? "v: " : "y: ");
    set_tensor(dv_d, dvt.shape(), dvt.strides_for_c(), t, "dv: ");
    void* db_data = nullptr;
    convcoreTensorDescriptor_t db_desc = nullptr;
    if (!db.is_none()) {
        const DLPackTensor dbt(db.cast<py::capsule>());
        check_output(dbt, dyt, dtype, "dy", 1);
        const int64_t k = dyt.shape()[1], st = dbt.strides_for_c()[0];
        check(convcoreSetTensor4dDescriptorEx(db_d, t, 1, k, 1, 1, k * st, st, 1, 1), "db: ");
        db_data = dbt.data();
        db_desc = db_d;
    }
    const double one = 1.0, zero = 0.0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const bool f64 = t == CONVCORE_DATA_DOUBLE;
    convcoreHandle_t h = handle_on(dyt, 0);
    const convcoreTensorDescriptor_t a_desc = a_d;
    convcoreStatus_t status;
    {
        py::gil_scoped_release release;
        status = convcoreActivationBackwardBias(h, act, reads_v ? nullptr : a_desc, reads_v ? nullptr : at.data(),
                                                reads_v ? a_desc : nullptr, reads_v ? at.data() : nullptr, dy_d, dyt.data(),
                                                dv_d, dvt.data(), f64 ? static_cast<const void*>(&one) : &one_f,
                                                f64 ? static_cast<const void*>(&zero) : &zero_f, db_desc, db_data);
    }
    check(status);
}

// convcore.torch's eager autograd, kept short: the backward passes on DLPack capsules (direction
// BACKWARD_DATA: a = dy, b = w, out = dx; BACKWARD_FILTER: a = x, b = dy, out = dw; alpha 1,
// beta 0), without making a Python DLPackTensor of each.
// With bias_out (BACKWARD_FILTER only), the bias gradient of dy too.
int backward_capsules(int direction, py::capsule a, py::capsule b, py::capsule out, const ConvParams& p, int algo,
                      KnownProblems& problems, const py::object& bias_out) {
    const DLPackTensor at(a), bt(b), ot(out);
    if (direction == BACKWARD_DATA) return backward_data(at, bt, ot, p, algo, 1.0, 0.0, problems, 0);
    if (direction != BACKWARD_FILTER) bad_param("direction: expected 1 (backward data) or 2 (backward filter)");
    const int ran = backward_filter(at, bt, ot, p, algo, 1.0, 0.0, problems, 0);
    if (!bias_out.is_none()) backward_bias(bt, DLPackTensor(bias_out.cast<py::capsule>()), 1.0, 0.0, 0);
    return ran;
}

}  // namespace

void register_plans(py::module_& m) {

    py::class_<KnownProblems>(m, "KnownProblems",
                              "The problems one Convolution has seen on one thread: their descriptors and "
                              "algorithms (the plans are the core's).")
        .def(py::init<>())
        .def_property_readonly("count", &KnownProblems::count);
    m.def("plan_cache_info",
          [] {
              convcorePlanCacheInfo_t info{};
              check(convcoreGetPlanCacheInfo(cpu_handle(), &info));
              py::dict d;
              d["capacity"] = info.capacity;
              d["plans"] = info.plans;
              d["hits"] = info.hits;
              d["misses"] = info.misses;
              d["filter_preparations"] = info.filterPreparations;
              d["prepared_filter_bytes"] = info.preparedFilterBytes;
              d["workspace_bytes"] = info.workspaceBytes;
              d["workspace_allocations"] = info.workspaceAllocations;
              return d;
          },
          "The plan cache of this thread's CPU handle (convcoreGetPlanCacheInfo) as a dict.");
    m.def("clear_plan_cache", [] { check(convcoreClearPlanCache(cpu_handle())); },
          "Drops the plans and kept filters of this thread's CPU handle (convcoreClearPlanCache).");
    m.def("set_plan_cache_capacity", [](size_t capacity) { check(convcoreSetPlanCacheCapacity(cpu_handle(), capacity)); },
          py::arg("capacity"), "The most plans this thread's CPU handle keeps (convcoreSetPlanCacheCapacity).");
    m.def("forward_3d",
          [](const DLPackTensor& x, const DLPackTensor& w, const DLPackTensor& y, const ConvParams& p,
             const std::vector<int64_t>& depth, int algo, double alpha, double beta, KnownProblems& problems,
             int64_t filter_version) {
              return forward_3d(x, w, y, with_depth(p, depth), algo, alpha, beta, problems, filter_version);
          },
          py::arg("x"), py::arg("w"), py::arg("y"), py::arg("params"), py::arg("depth"), py::arg("algo"),
          py::arg("alpha"), py::arg("beta"), py::arg("cache"), py::arg("filter_version"),
          "y = alpha * conv3d(x, w) + beta * y on 5-D arrays in one C API call; depth = (padding, stride, "
          "dilation) of the depth axis; w packed; algo >= 0.");
    m.def("backward_data_3d",
          [](const DLPackTensor& dy, const DLPackTensor& w, const DLPackTensor& dx, const ConvParams& p,
             const std::vector<int64_t>& depth, int algo, double alpha, double beta, KnownProblems& problems) {
              return backward_data_3d(dy, w, dx, with_depth(p, depth), algo, alpha, beta, problems);
          },
          py::arg("dy"), py::arg("w"), py::arg("dx"), py::arg("params"), py::arg("depth"), py::arg("algo"),
          py::arg("alpha"), py::arg("beta"), py::arg("cache"),
          "dx = alpha * conv3d_backward_data(dy, w) + beta * dx on 5-D arrays in one C API call; depth = "
          "(padding, stride, dilation) of the depth axis; w packed; algo >= 0 (a backward-data algorithm).");
    m.def("backward_filter_3d",
          [](const DLPackTensor& x, const DLPackTensor& dy, const DLPackTensor& dw, const ConvParams& p,
             const std::vector<int64_t>& depth, int algo, double alpha, double beta, KnownProblems& problems) {
              return backward_filter_3d(x, dy, dw, with_depth(p, depth), algo, alpha, beta, problems);
          },
          py::arg("x"), py::arg("dy"), py::arg("dw"), py::arg("params"), py::arg("depth"), py::arg("algo"),
          py::arg("alpha"), py::arg("beta"), py::arg("cache"),
          "dw = alpha * conv3d_backward_filter(x, dy) + beta * dw on 5-D arrays in one C API call; depth = "
          "(padding, stride, dilation) of the depth axis; dw packed; algo >= 0 (a backward-filter algorithm).");
    m.def("forward_capsules", &forward_capsules, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("bias"),
          py::arg("params"), py::arg("algo"), py::arg("plans"), py::arg("filter_version"), py::arg("activation"),
          py::arg("residual") = py::none(),
          "forward() of CPU tensors given as DLPack capsules (alpha 1, beta 0).");
    py::class_<PointwiseDepthwise>(m, "PointwiseDepthwise",
                                   "The fused 1x1 -> depthwise pair of convcore.torch's inference.")
        .def(py::init<const ConvParams&>(), py::arg("depthwise_params"))
        .def("forward", &PointwiseDepthwise::forward, py::arg("x"), py::arg("y"), py::arg("w_pw"), py::arg("b_pw"),
             py::arg("act_pw"), py::arg("w_dw"), py::arg("b_dw"), py::arg("act_dw"), py::arg("filter_version"),
             "y = act_dw(dwconv(act_pw(conv1x1(x, w_pw) + b_pw), w_dw) + b_dw) of CPU tensors (DLPack capsules), "
             "x and y packed NHWC; the filters prepared again when filter_version changes (FILTERS_PER_CALL: every call).");
    m.def("forward_array", &forward_array, py::arg("x"), py::arg("w"), py::arg("params"), py::arg("algo"),
          py::arg("plans"), py::arg("filter_version"),
          "(y, algo) of a NumPy call whose plan exists, or None (the general path then runs).");
    m.def("forward", &forward, py::arg("x"), py::arg("w"), py::arg("y"), py::arg("params"),
          py::arg("algo"), py::arg("alpha"), py::arg("beta"), py::arg("plans"),
          py::arg("stream"), py::arg("filter_version") = -1, py::arg("bias") = nullptr,
          py::arg("activation") = 0, py::arg("residual") = nullptr, py::arg("alpha2") = 1.0,
          "The forward pass; with bias, activation or residual the fused epilogue "
          "(convcoreConvolutionExecute, through the handle's plan cache).");
    m.attr("FILTERS_PER_CALL") = kFiltersPerCall;
    m.attr("FILTERS_CHECKED") = kFiltersChecked;
    m.def("backward_data", &backward_data, py::arg("dy"), py::arg("w"), py::arg("dx"),
          py::arg("params"), py::arg("algo"), py::arg("alpha"), py::arg("beta"),
          py::arg("plans"), py::arg("stream"));
    m.def("backward_filter", &backward_filter, py::arg("x"), py::arg("dy"), py::arg("dw"),
          py::arg("params"), py::arg("algo"), py::arg("alpha"), py::arg("beta"),
          py::arg("plans"), py::arg("stream"));
    m.def("backward_capsules", &backward_capsules, py::arg("direction"), py::arg("a"), py::arg("b"),
          py::arg("out"), py::arg("params"), py::arg("algo"), py::arg("plans"), py::arg("bias_out") = py::none());
    m.def("activation_backward_capsules", &activation_backward_capsules, py::arg("activation"), py::arg("a"),
          py::arg("dy"), py::arg("dv"), py::arg("db") = py::none(),
          "dv = dy * act'(a) and db (or None) = its sum per channel, in one pass "
          "(convcoreActivationBackwardBias; a: y for relu/relu6, the pre-activation for silu/gelu/gelu_tanh).");
    m.def("backward_bias", &backward_bias, py::arg("dy"), py::arg("db"), py::arg("alpha"),
          py::arg("beta"), py::arg("stream"));
}

}  // namespace convcore_py
