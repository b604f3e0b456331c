// libFuzzer target for the C API: random bytes -> descriptors, pointers, workspace,
// data and algorithm -> every call of the forward path. What it asserts:
//   * every call returns a defined convcoreStatus_t, never INTERNAL_ERROR, and a reason string
//     on failure; no crash, hang or out-of-bounds access (ASan + UBSan);
//   * an independent model of the validation rules (below) agrees with the status: a valid,
//     cheap problem is run; an invalid one is BAD_PARAM (or NOT_SUPPORTED for the algorithm);
//   * DIRECT, IM2COL_GEMM and IMPLICIT_GEMM run every valid problem; every SUCCESS on finite
//     data matches a float64 reference computed here (with the strides, alpha and beta),
//     y prefilled with NaN when beta == 0 (y must not be read).
// Inputs: negative, zero and huge sizes; padding larger than the filter; stride 0; groups
// that do not divide; mismatched shapes and dtypes; unset and NULL descriptors; NULL
// pointers; too-small and misaligned workspaces; misaligned and strided buffers; aliasing
// outputs; NaN, Inf, -0 and denormal data; garbage enum values.
//
// Sizes are capped so each case costs well under a millisecond: tensors of at most
// kMaxElems elements and kMaxMacs multiply-adds are run, bigger ones only go through the
// validation and query calls.
//
// After the 2-D case, the bytes it left decode to a 3-D one through the Nd descriptors
// (run_case_3d): its own model, every layout and algorithm against a float64 3-D reference.
//
// Built twice: with clang -fsanitize=fuzzer,address,undefined (make fuzz), and without
// libFuzzer as tests/cpp/test_fuzz_corpus.cpp, which replays tests/fuzz/corpus in ctest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "convcore/convcore.h"
#include "fuzz_data.hpp"

namespace convcore_fuzz {

constexpr int64_t kMaxElems = int64_t(1) << 14;  // per buffer, when a case is run
constexpr double kMaxMacs = 3e5;
constexpr size_t kMaxWorkspace = size_t(64) << 20;
constexpr int64_t kMaxParam = int64_t(1) << 40;  // the C API's limit on pad/stride/dilation

// Counters for the final report (make fuzz prints them at exit).
struct Stats {
    uint64_t cases = 0, ran = 0, success = 0, bad_param = 0, not_supported = 0, alloc_failed = 0;
    ~Stats() {
        if (std::getenv("CONVCORE_FUZZ_STATS"))
            std::fprintf(stderr,
                         "convcore fuzz: %llu cases, %llu forward calls run (%llu succeeded, "
                         "%llu BAD_PARAM, %llu NOT_SUPPORTED, %llu ALLOC_FAILED)\n",
                         (unsigned long long)cases, (unsigned long long)ran,
                         (unsigned long long)success, (unsigned long long)bad_param,
                         (unsigned long long)not_supported, (unsigned long long)alloc_failed);
    }
};
static Stats stats;

[[noreturn]] void fail(const char* what, const std::string& detail) {
    std::fprintf(stderr, "FUZZ FAILURE: %s\n  %s\n  last error: '%s'\n", what, detail.c_str(),
                 convcoreGetLastErrorString());
    std::abort();
}

// Every status is one of the enum; INTERNAL_ERROR is a bug; a failure carries a reason.
convcoreStatus_t checked(convcoreStatus_t st, const char* call) {
    if (int(st) < 0 || int(st) > int(CONVCORE_STATUS_INTERNAL_ERROR))
        fail("undefined status", std::string(call) + " returned " + std::to_string(int(st)));
    if (st == CONVCORE_STATUS_INTERNAL_ERROR) fail("INTERNAL_ERROR", call);
    if (st != CONVCORE_STATUS_SUCCESS && convcoreGetLastErrorString()[0] == '\0')
        fail("failure without a reason", call);
    if (st == CONVCORE_STATUS_SUCCESS && convcoreGetLastErrorString()[0] != '\0')
        fail("success with a stale reason", call);
    return st;
}
#define CALL(expr) checked((expr), #expr)

// ---- the case: what the bytes decode to -----------------------------------------------------

struct TensorCase {
    enum Kind { UNSET, PACKED, STRIDED, NULL_DESC } kind = PACKED;
    int dtype = 0;
    int64_t dims[4] = {1, 1, 1, 1};
    int64_t strides[4] = {1, 1, 1, 1};
};

struct FilterCase {
    bool set = true, null_desc = false;
    int dtype = 0;
    int64_t k = 1, c = 1, r = 1, s = 1;
};

struct ConvCase {
    bool null_desc = false;
    int64_t pad[2] = {0, 0}, stride[2] = {1, 1}, dil[2] = {1, 1}, groups = 1;
    int mode = 0;
};

// A size: mostly small, sometimes an edge value.
int64_t size_value(Data& d, int64_t small_max) {
    switch (d.pick(24)) {
        case 0: return 0;
        case 1: return -1;
        case 2: return std::numeric_limits<int64_t>::min();
        case 3: return std::numeric_limits<int64_t>::max();
        case 4: return int64_t(1) << 31;
        case 5: return (int64_t(1) << 31) + 1;
        case 6: return (int64_t(1) << 32) - 1;
        case 7: return kMaxParam;
        case 8: return kMaxParam + 1;
        case 9: return int64_t(1) << 62;
        case 10: return d.i64();
        case 11: return int64_t(d.u8()) + 1;
        default: return 1 + d.pick(int(small_max));
    }
}

// Strides for dims: packed, packed with gaps, transposed (NHWC), or arbitrary.
void pick_strides(Data& d, const int64_t dims[4], int64_t st[4]) {
    const int mode = d.pick(6);
    auto mul = [](int64_t a, int64_t b) {
        int64_t r;
        return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
    };
    if (mode <= 1) {  // packed, maybe with per-axis gaps
        int64_t s = 1 + (mode == 1 ? d.pick(3) : 0);
        for (int i = 3; i >= 0; --i) {
            st[i] = s;
            s = mul(s, dims[i] > 0 ? dims[i] : 1);
            const int gap = mode == 1 ? d.pick(3) : 0;
            if (s <= std::numeric_limits<int64_t>::max() - gap) s += gap;
        }
    } else if (mode == 2) {  // NHWC
        st[1] = 1;
        st[3] = mul(dims[1] > 0 ? dims[1] : 1, 1);
        st[2] = mul(st[3], dims[3] > 0 ? dims[3] : 1);
        st[0] = mul(st[2], dims[2] > 0 ? dims[2] : 1);
    } else {  // arbitrary: overlapping, zero, negative, huge
        for (int i = 0; i < 4; ++i) {
            st[i] = size_value(d, 40);
            if (d.pick(8) == 0 && st[i] > std::numeric_limits<int64_t>::min() + 2) st[i] -= 2;
        }
    }
}

void pick_tensor(Data& d, TensorCase& t, const int64_t* like_dims) {
    const int k = d.pick(40);
    t.kind = k == 0 ? TensorCase::UNSET : k == 1 ? TensorCase::NULL_DESC
             : k < 22 ? TensorCase::PACKED : TensorCase::STRIDED;
    t.dtype = d.pick(20) == 0 ? int(d.i64() % 5) : d.pick(4) == 0 ? 1 : 0;
    for (int i = 0; i < 4; ++i)
        t.dims[i] = like_dims && d.pick(10) != 0 ? like_dims[i] : size_value(d, i == 0 ? 3 : 12);
    pick_strides(d, t.dims, t.strides);
}

// ---- the model of the validation rules (independent of the library's code) -----------------

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

bool tensor_valid(const TensorCase& t) {
    if (t.kind == TensorCase::UNSET || t.kind == TensorCase::NULL_DESC) return false;
    if (t.dtype != 0 && t.dtype != 1) return false;
    int64_t n = 1;
    for (int i = 0; i < 4; ++i) {
        if (t.dims[i] < 1 || t.strides[i] < 1) return false;
        if (!mul_ok(n, t.dims[i], &n)) return false;
    }
    int64_t last = 0;
    for (int i = 0; i < 4; ++i) {
        int64_t term;
        if (!mul_ok(t.dims[i] - 1, t.strides[i], &term) || !add_ok(last, term, &last)) return false;
    }
    int64_t bytes;
    return add_ok(last, 1, &last) && mul_ok(last, 8, &bytes);
}

// Elements one past the last of a strided tensor (valid tensors only).
int64_t extent(const int64_t dims[4], const int64_t st[4]) {
    int64_t last = 0;
    for (int i = 0; i < 4; ++i) last += (dims[i] - 1) * st[i];
    return last + 1;
}

bool filter_valid(const FilterCase& f) {
    if (!f.set || f.null_desc || (f.dtype != 0 && f.dtype != 1)) return false;
    if (f.k < 1 || f.c < 1 || f.r < 1 || f.s < 1) return false;
    int64_t e;
    return mul_ok(f.k, f.c, &e) && mul_ok(e, f.r, &e) && mul_ok(e, f.s, &e) && mul_ok(e, 8, &e);
}

bool conv_valid(const ConvCase& c) {
    if (c.null_desc) return false;
    for (int i = 0; i < 2; ++i) {
        if (c.pad[i] < 0 || c.stride[i] < 1 || c.dil[i] < 1) return false;
        if (c.pad[i] > kMaxParam || c.stride[i] > kMaxParam || c.dil[i] > kMaxParam) return false;
    }
    return c.groups >= 1 && (c.mode == 0 || c.mode == 1);
}

// Output extent of one axis in 128-bit arithmetic; <= 0 when empty.
__int128 out_size(int64_t in, int64_t pad, int64_t k, int64_t stride, int64_t dil) {
    const __int128 room = __int128(in) + 2 * __int128(pad) - __int128(dil) * (k - 1) - 1;
    if (room < 0) return 0;
    return room / stride + 1;
}

// Output dims when x, w and conv are consistent (the convcoreGetConvolution2dForwardOutputDim
// contract); false otherwise.
bool output_dims(const TensorCase& x, const FilterCase& f, const ConvCase& c, int64_t out[4]) {
    if (!tensor_valid(x) || !filter_valid(f) || !conv_valid(c)) return false;
    const int64_t ch = x.dims[1], g = c.groups;
    if (ch % g != 0 || f.c != ch / g || f.k % g != 0) return false;
    const __int128 p = out_size(x.dims[2], c.pad[0], f.r, c.stride[0], c.dil[0]);
    const __int128 q = out_size(x.dims[3], c.pad[1], f.s, c.stride[1], c.dil[1]);
    if (p < 1 || q < 1) return false;
    // p and q cannot exceed the padded input: they fit in int64 (pad <= 2^40).
    out[0] = x.dims[0];
    out[1] = f.k;
    out[2] = int64_t(p);
    out[3] = int64_t(q);
    return true;
}

// ---- data --------------------------------------------------------------------------------

struct Buffer {  // exactly `bytes` usable at ptr: ASan flags any access past them
    void* base = nullptr;
    void* ptr = nullptr;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { std::free(base); }
    // ptr = a 64-byte-aligned address + misalign
    void alloc(size_t bytes, size_t misalign) {
        if (posix_memalign(&base, 64, misalign + bytes + (bytes == 0)) != 0) fail("out of memory", "");
        ptr = static_cast<char*>(base) + misalign;
    }
};

double value(Data& d, bool* finite) {
    switch (d.pick(64)) {
        case 0: *finite = false; return std::numeric_limits<double>::quiet_NaN();
        case 1: *finite = false; return std::numeric_limits<double>::infinity();
        case 2: *finite = false; return -std::numeric_limits<double>::infinity();
        case 3: return -0.0;
        case 4: return 1e-40;  // a float32 denormal
        default: return double(int(d.pick(9)) - 4) * 0.5;  // exact in every algorithm's math
    }
}

template <typename T>
void fill(Data& d, T* p, int64_t elems, bool* finite) {
    const bool special = d.pick(6) == 0;  // most cases: plain small values only
    const uint32_t seed = d.u32();
    uint32_t s = seed | 1;
    for (int64_t i = 0; i < elems; ++i) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        if (special && s % 97 == 0) {
            bool f = true;
            p[i] = T(value(d, &f));
            *finite = *finite && f;
        } else {
            p[i] = T(double(int(s % 9) - 4) * 0.5);
        }
    }
}

// ---- one case -----------------------------------------------------------------------------

struct Descs {
    convcoreTensorDescriptor_t x = nullptr, y = nullptr;
    convcoreFilterDescriptor_t w = nullptr;
    convcoreConvolutionDescriptor_t conv = nullptr;
    Descs() {
        CALL(convcoreCreateTensorDescriptor(&x));
        CALL(convcoreCreateTensorDescriptor(&y));
        CALL(convcoreCreateFilterDescriptor(&w));
        CALL(convcoreCreateConvolutionDescriptor(&conv));
    }
    ~Descs() {
        convcoreDestroyTensorDescriptor(x);
        convcoreDestroyTensorDescriptor(y);
        convcoreDestroyFilterDescriptor(w);
        convcoreDestroyConvolutionDescriptor(conv);
    }
};

// Sets a tensor descriptor; returns whether the library accepted it, checking the model.
bool set_tensor(convcoreTensorDescriptor_t desc, TensorCase& t) {
    if (t.kind == TensorCase::UNSET || t.kind == TensorCase::NULL_DESC) return false;
    convcoreStatus_t st;
    if (t.kind == TensorCase::PACKED) {
        st = CALL(convcoreSetTensor4dDescriptor(desc, convcoreDataType_t(t.dtype), t.dims[0],
                                                t.dims[1], t.dims[2], t.dims[3]));
        // the model of a packed tensor: its packed strides (when they fit)
        int64_t s = 1;
        bool fits = true;
        for (int i = 3; i >= 0; --i) {
            t.strides[i] = s;
            if (t.dims[i] > 0) fits = fits && mul_ok(s, t.dims[i], &s);
        }
        if (!fits) t.strides[0] = -1;  // cannot be described: invalid
    } else {
        st = CALL(convcoreSetTensor4dDescriptorEx(desc, convcoreDataType_t(t.dtype), t.dims[0],
                                                  t.dims[1], t.dims[2], t.dims[3], t.strides[0],
                                                  t.strides[1], t.strides[2], t.strides[3]));
    }
    const bool ok = st == CONVCORE_STATUS_SUCCESS;
    if (ok != tensor_valid(t))
        fail("tensor descriptor validation disagrees with the model",
             "accepted=" + std::to_string(ok) + " dims " + std::to_string(t.dims[0]) + "," +
                 std::to_string(t.dims[1]) + "," + std::to_string(t.dims[2]) + "," +
                 std::to_string(t.dims[3]) + " strides " + std::to_string(t.strides[0]) + "," +
                 std::to_string(t.strides[1]) + "," + std::to_string(t.strides[2]) + "," +
                 std::to_string(t.strides[3]) + " dtype " + std::to_string(t.dtype));
    if (!ok) t.kind = TensorCase::UNSET;  // a rejected set leaves the descriptor unset
    return ok;
}

// y's elements are distinct memory locations (an output may not alias itself): taken
// innermost first, each axis's stride passes the last offset the axes inside it reach.
bool distinct_elements(const int64_t dims[4], const int64_t st[4]) {
    int idx[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j)
            if (st[idx[j]] < st[idx[i]]) std::swap(idx[i], idx[j]);
    int64_t span = 1;
    for (int i = 0; i < 4; ++i) {
        const int a = idx[i];
        if (dims[a] == 1) continue;
        if (st[a] < span) return false;
        span += st[a] * (dims[a] - 1);
    }
    return true;
}

template <typename T>
void reference(const TensorCase& x, const T* xd, const FilterCase& f, const T* wd,
               const ConvCase& c, const int64_t out[4], double alpha, double beta,
               const std::vector<double>& y0, const int64_t yst[4], std::vector<double>& ref,
               std::vector<double>& bound) {
    const int64_t cg = f.c, kg = f.k / c.groups;
    for (int64_t n = 0; n < out[0]; ++n)
        for (int64_t k = 0; k < out[1]; ++k)
            for (int64_t i = 0; i < out[2]; ++i)
                for (int64_t j = 0; j < out[3]; ++j) {
                    double acc = 0, mag = 0;
                    for (int64_t ci = 0; ci < cg; ++ci)
                        for (int64_t r = 0; r < f.r; ++r)
                            for (int64_t s = 0; s < f.s; ++s) {
                                const int64_t ih = i * c.stride[0] - c.pad[0] + r * c.dil[0];
                                const int64_t iw = j * c.stride[1] - c.pad[1] + s * c.dil[1];
                                if (ih < 0 || ih >= x.dims[2] || iw < 0 || iw >= x.dims[3]) continue;
                                const int64_t fr = c.mode ? f.r - 1 - r : r;
                                const int64_t fs = c.mode ? f.s - 1 - s : s;
                                const int64_t cin = (k / kg) * cg + ci;
                                const double xv = double(xd[n * x.strides[0] + cin * x.strides[1] +
                                                            ih * x.strides[2] + iw * x.strides[3]]);
                                const double wv = double(wd[((k * cg + ci) * f.r + fr) * f.s + fs]);
                                acc += xv * wv;
                                mag += std::fabs(xv * wv);
                            }
                    const int64_t o = n * yst[0] + k * yst[1] + i * yst[2] + j * yst[3];
                    const double prev = beta == 0 ? 0.0 : beta * y0[size_t(o)];
                    ref[size_t(o)] = alpha * acc + prev;
                    bound[size_t(o)] = std::fabs(alpha) * mag + std::fabs(prev);
                }
}

template <typename T>
void compare(int algo, const std::vector<double>& ref, const std::vector<double>& bound,
             double scale, const T* y, const std::vector<char>& is_output) {
    // Error allowed per output, relative to the magnitudes sum |alpha x w| + |beta y0|: the
    // direct summations round per output; the transforms (FFT, Winograd, cyclic) spread their
    // rounding over the whole output, so they get a share of `scale` as well: the largest
    // output magnitude the data allow, |alpha| max|x| max|w| C/g R S (outputs that only see
    // padding are 0 but get FFT round-off from the rest of the image).
    // Both are far above float32 rounding and far below an indexing mistake.
    // The direct summations are the algorithms algorithms.def holds to float32's 1e-5.
    convcoreAlgorithmInfo_t info{};
    const bool exact = convcoreGetAlgorithmInfo(CONVCORE_PASS_FORWARD, algo, &info) == CONVCORE_STATUS_SUCCESS &&
                       info.errorBoundFloat <= 1e-5;
    const bool f32 = sizeof(T) == 4;
    const double own = exact ? (f32 ? 1e-5 : 1e-12) : (f32 ? 2e-3 : 1e-9);
    const double spread = exact ? 0.0 : (f32 ? 1e-4 : 1e-11);
    double max_bound = scale;
    for (size_t i = 0; i < ref.size(); ++i)
        if (is_output[i]) max_bound = std::max(max_bound, bound[i]);
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!is_output[i]) continue;
        const double got = double(y[i]);
        if (!(std::fabs(got - ref[i]) <= own * bound[i] + spread * max_bound + 1e-30))
            fail("wrong result",
                 std::string(convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t(algo))) + ": y[" +
                     std::to_string(i) + "] = " + std::to_string(got) + ", expected " +
                     std::to_string(ref[i]) + " (magnitude " + std::to_string(bound[i]) +
                     ", largest " + std::to_string(max_bound) + ")");
    }
}

convcoreHandle_t fuzz_handle() {
    static convcoreHandle_t handle = [] {
        convcoreHandle_t h = nullptr;
        if (convcoreCreate(&h) != CONVCORE_STATUS_SUCCESS) fail("convcoreCreate", "");
        return h;
    }();
    return handle;
}

void run_case(Data& d) {
    ++stats.cases;
    convcoreHandle_t handle = fuzz_handle();
    CALL(convcoreSetNumThreads(handle, d.pick(3)));
    const bool null_handle = d.pick(40) == 0;
    convcoreHandle_t h = null_handle ? nullptr : handle;

    Descs D;
    TensorCase x;
    FilterCase f;
    ConvCase c;
    pick_tensor(d, x, nullptr);
    // groups: usually a divisor of C (1, C, or another), else anything
    const bool consistent = d.pick(4) != 0;
    const int64_t ch = x.dims[1];
    if (consistent && ch >= 1 && ch <= 64) {
        switch (d.pick(3)) {
            case 0: c.groups = 1; break;
            case 1: c.groups = ch; break;  // depthwise
            default: {
                int64_t g = 1 + d.pick(int(ch));
                while (ch % g) --g;
                c.groups = g;
            }
        }
    } else {
        c.groups = d.pick(3) == 0 ? size_value(d, 4) : 1 + d.pick(3);
    }
    f.set = d.pick(40) != 0;
    f.null_desc = d.pick(40) == 0;
    f.dtype = d.pick(30) == 0 ? int(d.i64() % 5) : d.pick(12) == 0 ? 1 - x.dtype : x.dtype;
    f.k = consistent && c.groups >= 1 && c.groups <= 64 ? c.groups * (1 + d.pick(4))
                                                          : size_value(d, 8);
    f.c = consistent && c.groups >= 1 && ch >= 1 && ch % c.groups == 0 ? ch / c.groups
                                                                       : size_value(d, 8);
    f.r = size_value(d, 6);
    f.s = size_value(d, 6);
    c.null_desc = d.pick(40) == 0;
    for (int i = 0; i < 2; ++i) {
        c.pad[i] = d.pick(3) == 0 ? size_value(d, 10) : d.pick(4);
        c.stride[i] = d.pick(3) == 0 ? size_value(d, 5) : 1 + d.pick(3);
        c.dil[i] = d.pick(3) == 0 ? size_value(d, 4) : 1 + (d.pick(4) == 0);
    }
    c.mode = d.pick(30) == 0 ? int(d.i64() % 4) : d.pick(2);

    if (std::getenv("CONVCORE_FUZZ_VERBOSE"))  // to read what a crashing input decodes to
        std::fprintf(stderr,
                     "case: x %lld,%lld,%lld,%lld strides %lld,%lld,%lld,%lld dtype %d kind %d | "
                     "w %lld,%lld,%lld,%lld dtype %d | pad %lld,%lld stride %lld,%lld dil "
                     "%lld,%lld groups %lld mode %d\n",
                     (long long)x.dims[0], (long long)x.dims[1], (long long)x.dims[2],
                     (long long)x.dims[3], (long long)x.strides[0], (long long)x.strides[1],
                     (long long)x.strides[2], (long long)x.strides[3], x.dtype, int(x.kind),
                     (long long)f.k, (long long)f.c, (long long)f.r, (long long)f.s, f.dtype,
                     (long long)c.pad[0], (long long)c.pad[1], (long long)c.stride[0],
                     (long long)c.stride[1], (long long)c.dil[0], (long long)c.dil[1],
                     (long long)c.groups, c.mode);
    // descriptors
    set_tensor(D.x, x);
    if (f.set && !f.null_desc) {
        const convcoreStatus_t st = CALL(convcoreSetFilter4dDescriptor(
            D.w, convcoreDataType_t(f.dtype), f.k, f.c, f.r, f.s));
        if ((st == CONVCORE_STATUS_SUCCESS) != filter_valid(f))
            fail("filter descriptor validation disagrees with the model", "");
        if (st != CONVCORE_STATUS_SUCCESS) f.set = false;
    }
    if (!c.null_desc) {
        const convcoreStatus_t st = CALL(convcoreSetConvolution2dDescriptor(
            D.conv, c.pad[0], c.pad[1], c.stride[0], c.stride[1], c.dil[0], c.dil[1],
            convcoreConvolutionMode_t(c.mode)));
        ConvCase only_params = c;
        only_params.groups = 1;
        if ((st == CONVCORE_STATUS_SUCCESS) != conv_valid(only_params))
            fail("convolution descriptor validation disagrees with the model", "");
        if (st != CONVCORE_STATUS_SUCCESS) {  // the descriptor keeps its defaults
            c.pad[0] = c.pad[1] = 0;
            c.stride[0] = c.stride[1] = c.dil[0] = c.dil[1] = 1;
            c.mode = 0;
        }
        const convcoreStatus_t gs = CALL(convcoreSetConvolutionGroupCount(D.conv, c.groups));
        if ((gs == CONVCORE_STATUS_SUCCESS) != (c.groups >= 1))
            fail("group count validation disagrees with the model", "");
        if (gs != CONVCORE_STATUS_SUCCESS) c.groups = 1;
    }
    auto xd = x.kind == TensorCase::NULL_DESC ? nullptr : D.x;
    auto wd = f.null_desc ? nullptr : D.w;
    auto cd = c.null_desc ? nullptr : D.conv;

    // output dims
    int64_t out[4] = {0, 0, 0, 0};
    const bool dims_ok = output_dims(x, f, c, out);
    {
        int64_t o[4] = {-7, -7, -7, -7};
        const bool null_out = d.pick(30) == 0;
        const convcoreStatus_t st = CALL(convcoreGetConvolution2dForwardOutputDim(
            cd, xd, wd, &o[0], &o[1], null_out ? nullptr : &o[2], &o[3]));
        const bool expect = dims_ok && !null_out;
        if ((st == CONVCORE_STATUS_SUCCESS) != expect)
            fail("output dims disagree with the model",
                 "library status " + std::to_string(int(st)) + ", model " + std::to_string(expect));
        if (expect)
            for (int i = 0; i < 4; ++i)
                if (o[i] != out[i])
                    fail("output dims differ from the model",
                         "axis " + std::to_string(i) + ": " + std::to_string(o[i]) + " vs " +
                             std::to_string(out[i]));
    }

    // y: the output shape (usually) or something else
    TensorCase y;
    pick_tensor(d, y, dims_ok ? out : nullptr);
    if (d.pick(6) != 0) y.dtype = x.dtype;
    set_tensor(D.y, y);
    auto yd = y.kind == TensorCase::NULL_DESC ? nullptr : D.y;
    const bool y_ok = tensor_valid(y) && dims_ok && y.dtype == x.dtype &&
                      std::equal(out, out + 4, y.dims);
    const bool problem_ok = dims_ok && f.dtype == x.dtype && y_ok && h != nullptr;
    // The queries (ranking, workspace size) also take a NULL yDesc: a packed output is assumed.
    const bool query_ok =
        problem_ok || (dims_ok && f.dtype == x.dtype && h != nullptr &&
                       y.kind == TensorCase::NULL_DESC && [&] {
                           int64_t e = 1;  // that output's size must be representable
                           for (int i = 0; i < 4; ++i)
                               if (!mul_ok(e, out[i], &e)) return false;
                           return mul_ok(e, 8, &e);
                       }());

    // the heuristic ranking
    {
        convcoreConvolutionFwdAlgoPerf_t perf[CONVCORE_FWD_ALGO_COUNT + 2];
        int returned = -1;
        const int requested = d.pick(8) == 0 ? int(d.i64() % 40) : CONVCORE_FWD_ALGO_COUNT;
        const convcoreStatus_t st = CALL(convcoreGetConvolutionForwardAlgorithm(
            h, xd, wd, cd, yd, std::min(requested, CONVCORE_FWD_ALGO_COUNT + 2), &returned, perf));
        const bool expect = query_ok && requested >= 1;
        if ((st == CONVCORE_STATUS_SUCCESS) != expect)
            fail("ranking status disagrees with the model", std::to_string(int(st)));
        if (expect) {
            if (returned != std::min(requested, int(CONVCORE_FWD_ALGO_COUNT)))
                fail("ranking count", std::to_string(returned));
            bool direct_ok = false;
            for (int i = 0; i < returned; ++i) {
                if (int(perf[i].algo) < 0 || int(perf[i].algo) >= CONVCORE_FWD_ALGO_COUNT)
                    fail("ranking: algo out of range", "");
                if (perf[i].status != CONVCORE_STATUS_SUCCESS &&
                    perf[i].status != CONVCORE_STATUS_NOT_SUPPORTED)
                    fail("ranking: bad status", "");
                if (perf[i].algo == CONVCORE_FWD_ALGO_DIRECT)
                    direct_ok = perf[i].status == CONVCORE_STATUS_SUCCESS;
            }
            if (returned == CONVCORE_FWD_ALGO_COUNT && !direct_ok)
                fail("ranking: DIRECT not applicable to a valid problem", "");
        }
    }

    // algorithm and workspace query
    const int algo = d.pick(16) == 0 ? int(d.i64() % 20) : d.pick(CONVCORE_FWD_ALGO_COUNT);
    const bool algo_ok = algo >= 0 && algo < CONVCORE_FWD_ALGO_COUNT;
    const bool classic = algo == CONVCORE_FWD_ALGO_DIRECT || algo == CONVCORE_FWD_ALGO_IM2COL_GEMM ||
                         algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_bytes = 0;
    bool supported = false;
    {
        const convcoreStatus_t st = CALL(convcoreGetConvolutionForwardWorkspaceSize(
            h, xd, wd, cd, yd, convcoreConvolutionFwdAlgo_t(algo), &ws_bytes));
        if (query_ok && algo_ok) {
            if (st != CONVCORE_STATUS_SUCCESS && st != CONVCORE_STATUS_NOT_SUPPORTED)
                fail("workspace query of a valid problem", std::to_string(int(st)));
        } else if (st == CONVCORE_STATUS_SUCCESS) {
            fail("workspace query accepted an invalid problem", "");
        }
        supported = st == CONVCORE_STATUS_SUCCESS;
    }

    // run it when cheap
    if (!problem_ok || !tensor_valid(x)) return;
    const int64_t x_ext = extent(x.dims, x.strides), y_ext = extent(y.dims, y.strides);
    const int64_t w_elems = f.k * f.c * f.r * f.s;
    if (x_ext > kMaxElems || y_ext > kMaxElems || w_elems > kMaxElems) return;
    const double macs = double(out[0]) * out[1] * out[2] * out[3] * f.c * f.r * f.s;
    if (macs > kMaxMacs) return;
    if (supported && ws_bytes > kMaxWorkspace) return;
    if (classic && algo_ok && !supported) {
        // IM2COL_GEMM's BLAS has 32-bit dimensions; within the caps it must run
        fail("a classic algorithm said NOT_SUPPORTED", convcoreGetLastErrorString());
    }

    const size_t elem = x.dtype == 1 ? 8 : 4;
    // misalignment: 0, a whole element (breaks 16/64-byte assumptions), or a byte (invalid)
    auto misalign = [&](bool for_ws) -> size_t {
        switch (d.pick(12)) {
            case 0: return elem;
            case 1: return 16;
            case 2: return for_ws ? 8 : elem * 3;
            case 3: return d.pick(20) == 0 ? 1 + d.pick(3) : 0;
            default: return 0;
        }
    };
    const size_t mx = misalign(false), mw = misalign(false), my = misalign(false);
    const bool aligned = mx % elem == 0 && mw % elem == 0 && my % elem == 0;
    Buffer bx, bw, by, bws;
    bx.alloc(size_t(x_ext) * elem, mx);
    bw.alloc(size_t(w_elems) * elem, mw);
    by.alloc(size_t(y_ext) * elem, my);
    // workspace: the query's size, or too small / NULL / larger / misaligned
    size_t give = ws_bytes;
    bool ws_null = false;
    switch (d.pick(10)) {
        case 0: give = ws_bytes ? ws_bytes - 1 - d.pick(int(std::min<size_t>(ws_bytes, 64))) : 0; break;
        case 1: ws_null = true; break;
        case 2: give = ws_bytes + d.pick(256); break;
        default: break;
    }
    const size_t mws = misalign(true);
    if (!ws_null) bws.alloc(give, mws);
    bool ws_ok = ws_bytes == 0 || (give >= ws_bytes && !ws_null);

    bool finite = true;
    double alpha = 1, beta = 0;
    switch (d.pick(8)) {
        case 0: alpha = 0.5, beta = 0.25; break;
        case 1: alpha = -2, beta = 1; break;
        case 2: {
            bool fa = true, fb = true;
            alpha = value(d, &fa), beta = value(d, &fb);
            finite = fa && fb;
            break;
        }
        default: break;
    }
    std::vector<double> y0(size_t(y_ext), 0.0);
    std::vector<char> is_output(size_t(y_ext), 0);
    for (int64_t n = 0; n < out[0]; ++n)
        for (int64_t k = 0; k < out[1]; ++k)
            for (int64_t i = 0; i < out[2]; ++i)
                for (int64_t j = 0; j < out[3]; ++j)
                    is_output[size_t(n * y.strides[0] + k * y.strides[1] + i * y.strides[2] +
                                     j * y.strides[3])] = 1;
    auto fill_all = [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        if (aligned) {
            fill(d, static_cast<T*>(bx.ptr), x_ext, &finite);
            fill(d, static_cast<T*>(bw.ptr), w_elems, &finite);
            T* yp = static_cast<T*>(by.ptr);
            if (beta == 0) {
                for (int64_t i = 0; i < y_ext; ++i) yp[i] = std::numeric_limits<T>::quiet_NaN();
            } else {
                fill(d, yp, y_ext, &finite);
            }
            for (int64_t i = 0; i < y_ext; ++i) y0[size_t(i)] = double(yp[i]);
        }
    };
    if (elem == 8) fill_all(static_cast<double*>(nullptr));
    else fill_all(static_cast<float*>(nullptr));

    // pointers: NULL, aliasing, or the buffers
    const float alpha_f = float(alpha), beta_f = float(beta);
    const void* alpha_p = elem == 8 ? static_cast<const void*>(&alpha) : &alpha_f;
    const void* beta_p = elem == 8 ? static_cast<const void*>(&beta) : &beta_f;
    const void* xp = bx.ptr;
    const void* wp = bw.ptr;
    void* yp = by.ptr;
    bool ptrs_ok = true;
    switch (d.pick(24)) {
        case 0: xp = nullptr, ptrs_ok = false; break;
        case 1: wp = nullptr, ptrs_ok = false; break;
        case 2: yp = nullptr, ptrs_ok = false; break;
        case 3: alpha_p = nullptr, ptrs_ok = false; break;
        case 4: beta_p = nullptr, ptrs_ok = false; break;
        case 5: yp = const_cast<void*>(xp), ptrs_ok = false; break;  // y aliases x
        case 6: yp = const_cast<void*>(wp), ptrs_ok = false; break;  // y aliases w
        default: break;
    }
    const bool y_distinct = distinct_elements(y.dims, y.strides);
    const bool ws_aligned = ws_bytes == 0 || mws % elem == 0;  // checked only when one is needed
    const bool expect_ok = supported && ws_ok && ptrs_ok && aligned && ws_aligned && y_distinct;

    ++stats.ran;
    const convcoreStatus_t st = CALL(convcoreConvolutionForward(
        h, alpha_p, xd, xp, wd, wp, cd, convcoreConvolutionFwdAlgo_t(algo),
        ws_null ? nullptr : bws.ptr, give, beta_p, yd, yp));
    if (std::getenv("CONVCORE_FUZZ_VERBOSE"))
        std::fprintf(stderr, "forward: algo %d -> %s\n", algo, convcoreGetStatusName(st));
    switch (st) {
        case CONVCORE_STATUS_SUCCESS: ++stats.success; break;
        case CONVCORE_STATUS_BAD_PARAM: ++stats.bad_param; break;
        case CONVCORE_STATUS_NOT_SUPPORTED: ++stats.not_supported; break;
        case CONVCORE_STATUS_ALLOC_FAILED: ++stats.alloc_failed; break;
        default: break;
    }
    if (st == CONVCORE_STATUS_SUCCESS && !expect_ok)
        fail("forward accepted invalid arguments",
             "supported=" + std::to_string(supported) + " ws_ok=" + std::to_string(ws_ok) +
                 " ptrs_ok=" + std::to_string(ptrs_ok) + " aligned=" + std::to_string(aligned) +
                 " ws_aligned=" + std::to_string(ws_aligned) +
                 " y_distinct=" + std::to_string(y_distinct));
    if (st != CONVCORE_STATUS_SUCCESS && expect_ok)
        fail("forward rejected a valid call", convcoreGetStatusName(st));
    if (st != CONVCORE_STATUS_SUCCESS || !finite) return;

    // compare with the float64 reference
    std::vector<double> ref(size_t(y_ext), 0.0), bound(size_t(y_ext), 0.0);
    auto max_abs = [](const auto* p, int64_t n) {
        double m = 0;
        for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double(p[i])));
        return m;
    };
    const double scale =
        std::fabs(alpha) * double(f.c * f.r * f.s) *
        (elem == 8 ? max_abs(static_cast<const double*>(bx.ptr), x_ext) *
                         max_abs(static_cast<const double*>(bw.ptr), w_elems)
                   : max_abs(static_cast<const float*>(bx.ptr), x_ext) *
                         max_abs(static_cast<const float*>(bw.ptr), w_elems));
    if (elem == 8) {
        reference(x, static_cast<const double*>(bx.ptr), f, static_cast<const double*>(bw.ptr), c,
                  out, alpha, beta, y0, y.strides, ref, bound);
        compare(algo, ref, bound, scale, static_cast<const double*>(by.ptr), is_output);
    } else {
        reference(x, static_cast<const float*>(bx.ptr), f, static_cast<const float*>(bw.ptr), c,
                  out, double(alpha_f), double(beta_f), y0, y.strides, ref, bound);
        compare(algo, ref, bound, scale, static_cast<const float*>(by.ptr), is_output);
    }
}


// ---- a 3-D case (the Nd descriptors), from the bytes the 2-D case left ----------------------
// Sizes are small and the odd values are plainly invalid ones (0, -1, 2^40 + 1 for a parameter),
// so the model is exact: a valid problem must run with DIRECT, IM2COL_GEMM and IMPLICIT_GEMM
// and every SUCCESS of any algorithm must match the float64 reference (x and y packed NCDHW or
// NDHWC, or strided with gaps; the filter KCTRS or KTRSC); an invalid one never succeeds.

int64_t small_or_invalid(Data& d, int64_t lo, int64_t span) {
    switch (d.pick(20)) {
        case 0: return 0;
        case 1: return -1;
        default: return lo + d.pick(int(span));
    }
}

void run_case_3d(Data& d) {
    ++stats.cases;
    convcoreHandle_t h = fuzz_handle();
    CALL(convcoreSetNumThreads(h, d.pick(3)));
    const int dtype = d.pick(24) == 0 ? 2 + d.pick(3) : d.pick(4) == 0 ? 1 : 0;
    const size_t elem = dtype == 1 ? 8 : 4;
    int64_t xd[5] = {1 + d.pick(2), small_or_invalid(d, 1, 6), small_or_invalid(d, 1, 6),
                     small_or_invalid(d, 1, 7), small_or_invalid(d, 1, 7)};
    int64_t groups = 1;
    if (xd[1] >= 1) {
        groups = d.pick(3) == 0 ? 1 + d.pick(int(xd[1])) : 1;
        if (d.pick(10) != 0) while (xd[1] % groups) --groups;
    }
    if (d.pick(30) == 0) groups = small_or_invalid(d, 1, 3);
    const bool filter_cl = d.pick(2) == 1;
    int64_t wd[5] = {groups >= 1 ? groups * (1 + d.pick(3)) : 1,
                     groups >= 1 && xd[1] >= 1 && d.pick(20) != 0 ? xd[1] / groups : small_or_invalid(d, 1, 4),
                     small_or_invalid(d, 1, 4), small_or_invalid(d, 1, 4), small_or_invalid(d, 1, 4)};
    int64_t pad[3], stride[3], dil[3];
    for (int i = 0; i < 3; ++i) {
        pad[i] = d.pick(20) == 0 ? (d.pick(2) ? -1 : kMaxParam + 1) : d.pick(4);
        stride[i] = d.pick(20) == 0 ? (d.pick(2) ? 0 : kMaxParam + 1) : 1 + d.pick(3);
        dil[i] = d.pick(20) == 0 ? 0 : 1 + (d.pick(4) == 0);
    }
    const int mode = d.pick(30) == 0 ? 2 + d.pick(3) : d.pick(2);
    // x's memory: packed NCDHW (0) or NDHWC (1) by the Ex call, or those orders with gaps (2, 3)
    const int x_layout = d.pick(4);

    // the model
    const bool dtype_ok = dtype == 0 || dtype == 1;
    const bool x_ok = dtype_ok && std::all_of(xd, xd + 5, [](int64_t v) { return v >= 1; });
    const bool w_ok = dtype_ok && std::all_of(wd, wd + 5, [](int64_t v) { return v >= 1; });
    bool conv_ok = mode == 0 || mode == 1;
    for (int i = 0; i < 3; ++i)
        conv_ok = conv_ok && pad[i] >= 0 && pad[i] <= kMaxParam && stride[i] >= 1 && stride[i] <= kMaxParam &&
                  dil[i] >= 1;
    int64_t yd[5] = {xd[0], wd[0], 0, 0, 0};
    bool dims_ok = x_ok && w_ok && conv_ok && groups >= 1 && xd[1] % groups == 0 && wd[1] == xd[1] / groups &&
                   wd[0] % groups == 0;
    for (int i = 0; i < 3 && dims_ok; ++i) {
        yd[2 + i] = int64_t(out_size(xd[2 + i], pad[i], wd[2 + i], stride[i], dil[i]));
        dims_ok = yd[2 + i] >= 1;
    }

    // strides of a 5-D tensor in NCDHW (cl false) or NDHWC order, with `gap` extra elements per axis
    const auto strides_of = [](const int64_t dims[5], bool cl, int64_t gap, int64_t st[5]) {
        const int order[5] = {4, 3, 2, 1, 0}, order_cl[5] = {1, 4, 3, 2, 0};  // innermost first
        int64_t s = 1;
        for (int i = 0; i < 5; ++i) {
            const int a = cl ? order_cl[i] : order[i];
            st[a] = s;
            s = s * std::max<int64_t>(dims[a], 1) + gap;
        }
    };
    Descs D;
    int64_t xs[5], ys[5];
    const bool x_cl = x_layout % 2 == 1;
    const int64_t x_gap = x_layout >= 2 ? 1 + d.pick(2) : 0;
    strides_of(xd, x_cl, x_gap, xs);
    const convcoreTensorFormat_t x_format = x_cl ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW;
    const convcoreStatus_t xs_st =
        x_layout < 2 ? CALL(convcoreSetTensorNdDescriptorEx(D.x, x_format, convcoreDataType_t(dtype), 5, xd))
                     : CALL(convcoreSetTensorNdDescriptor(D.x, convcoreDataType_t(dtype), 5, xd, xs));
    if ((xs_st == CONVCORE_STATUS_SUCCESS) != x_ok) fail("3-D tensor descriptor disagrees with the model", "");
    const convcoreStatus_t ws_st = CALL(convcoreSetFilterNdDescriptor(
        D.w, convcoreDataType_t(dtype), filter_cl ? CONVCORE_TENSOR_NHWC : CONVCORE_TENSOR_NCHW, 5, wd));
    if ((ws_st == CONVCORE_STATUS_SUCCESS) != w_ok) fail("3-D filter descriptor disagrees with the model", "");
    const convcoreStatus_t cs_st =
        CALL(convcoreSetConvolutionNdDescriptor(D.conv, 3, pad, stride, dil, convcoreConvolutionMode_t(mode)));
    if ((cs_st == CONVCORE_STATUS_SUCCESS) != conv_ok) fail("3-D convolution descriptor disagrees with the model", "");
    if ((CALL(convcoreSetConvolutionGroupCount(D.conv, groups)) == CONVCORE_STATUS_SUCCESS) != (groups >= 1))
        fail("group count validation disagrees with the model", "");
    if (groups < 1) {  // the descriptor keeps one group
        groups = 1;
        dims_ok = x_ok && w_ok && conv_ok && wd[1] == xd[1];
        for (int i = 0; i < 3 && dims_ok; ++i) {
            yd[2 + i] = int64_t(out_size(xd[2 + i], pad[i], wd[2 + i], stride[i], dil[i]));
            dims_ok = yd[2 + i] >= 1;
        }
    }
    {
        int64_t o[5] = {-7, -7, -7, -7, -7};
        const convcoreStatus_t st = CALL(convcoreGetConvolutionNdForwardOutputDim(D.conv, D.x, D.w, 5, o));
        if ((st == CONVCORE_STATUS_SUCCESS) != dims_ok) fail("3-D output dims disagree with the model", "");
        if (dims_ok && !std::equal(o, o + 5, yd)) fail("3-D output dims differ from the model", "");
    }
    if (!dims_ok) return;
    // y: the output (usually in x's layout), or a wrong shape
    const bool y_right = d.pick(12) != 0;
    int64_t y_dims[5];
    std::copy(yd, yd + 5, y_dims);
    if (!y_right) y_dims[1 + d.pick(4)] += 1;
    const bool y_cl = d.pick(4) == 0 ? !x_cl : x_cl;
    strides_of(y_dims, y_cl, x_layout >= 2 ? d.pick(2) : 0, ys);
    if (CALL(convcoreSetTensorNdDescriptor(D.y, convcoreDataType_t(dtype), 5, y_dims, ys)) != CONVCORE_STATUS_SUCCESS)
        fail("3-D output descriptor rejected", "");

    const int algo = d.pick(CONVCORE_FWD_ALGO_COUNT);
    const bool classic = algo == CONVCORE_FWD_ALGO_DIRECT || algo == CONVCORE_FWD_ALGO_IM2COL_GEMM ||
                         algo == CONVCORE_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_bytes = 0;
    const convcoreStatus_t qs = CALL(convcoreGetConvolutionForwardWorkspaceSize(
        h, D.x, D.w, D.conv, D.y, convcoreConvolutionFwdAlgo_t(algo), &ws_bytes));
    if (qs == CONVCORE_STATUS_SUCCESS && !y_right) fail("3-D workspace query accepted a wrong y", "");
    if (!y_right) return;
    if (qs != CONVCORE_STATUS_SUCCESS && qs != CONVCORE_STATUS_NOT_SUPPORTED)
        fail("3-D workspace query of a valid problem", convcoreGetStatusName(qs));
    if (classic && qs != CONVCORE_STATUS_SUCCESS) fail("a classic algorithm said NOT_SUPPORTED in 3-D", "");
    if (qs != CONVCORE_STATUS_SUCCESS || ws_bytes > kMaxWorkspace) return;

    // run it
    const auto extent5 = [](const int64_t dims[5], const int64_t st[5]) {
        int64_t e = 1;
        for (int i = 0; i < 5; ++i) e += (dims[i] - 1) * st[i];
        return e;
    };
    const int64_t cg = wd[1], kg = wd[0] / groups, x_ext = extent5(xd, xs), y_ext = extent5(yd, ys);
    const int64_t w_elems = wd[0] * wd[1] * wd[2] * wd[3] * wd[4];
    Buffer bx, bw, by, bws;
    bx.alloc(size_t(x_ext) * elem, 0);
    bw.alloc(size_t(w_elems) * elem, 0);
    by.alloc(size_t(y_ext) * elem, 0);
    bws.alloc(ws_bytes, 0);
    bool finite = true;
    const double alpha = d.pick(3) == 0 ? -1.5 : 1.0, beta = d.pick(3) == 0 ? 0.5 : 0.0;
    std::vector<double> y0(size_t(y_ext), 0.0), ref(size_t(y_ext), 0.0), bound(size_t(y_ext), 0.0);
    std::vector<char> is_output(size_t(y_ext), 0);
    const auto run = [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        T* x = static_cast<T*>(bx.ptr);
        T* w = static_cast<T*>(bw.ptr);
        T* y = static_cast<T*>(by.ptr);
        fill(d, x, x_ext, &finite);
        fill(d, w, w_elems, &finite);
        if (beta == 0)
            std::fill(y, y + y_ext, std::numeric_limits<T>::quiet_NaN());
        else
            fill(d, y, y_ext, &finite);
        for (int64_t i = 0; i < y_ext; ++i) y0[size_t(i)] = double(y[i]);
        const T a = T(alpha), b = T(beta);
        ++stats.ran;
        const convcoreStatus_t st = CALL(convcoreConvolutionForward(h, &a, D.x, x, D.w, w, D.conv,
                                                                    convcoreConvolutionFwdAlgo_t(algo), bws.ptr,
                                                                    ws_bytes, &b, D.y, y));
        if (st != CONVCORE_STATUS_SUCCESS) fail("3-D forward rejected a valid call", convcoreGetStatusName(st));
        ++stats.success;
        if (!finite) return;
        // the float64 reference: w packed K x C/g x T x R x S, or K x T x R x S x C/g
        double max_x = 0, max_w = 0;
        for (int64_t i = 0; i < x_ext; ++i) max_x = std::max(max_x, std::fabs(double(x[i])));
        for (int64_t i = 0; i < w_elems; ++i) max_w = std::max(max_w, std::fabs(double(w[i])));
        int64_t o[5];
        for (o[0] = 0; o[0] < yd[0]; ++o[0])
            for (o[1] = 0; o[1] < yd[1]; ++o[1])
                for (o[2] = 0; o[2] < yd[2]; ++o[2])
                    for (o[3] = 0; o[3] < yd[3]; ++o[3])
                        for (o[4] = 0; o[4] < yd[4]; ++o[4]) {
                            double acc = 0, mag = 0;
                            for (int64_t ci = 0; ci < cg; ++ci)
                                for (int64_t t = 0; t < wd[2]; ++t)
                                    for (int64_t r = 0; r < wd[3]; ++r)
                                        for (int64_t s = 0; s < wd[4]; ++s) {
                                            const int64_t tap[3] = {t, r, s};
                                            int64_t at = o[0] * xs[0] + ((o[1] / kg) * cg + ci) * xs[1];
                                            bool inside = true;
                                            for (int i = 0; i < 3; ++i) {
                                                const int64_t v = o[2 + i] * stride[i] - pad[i] + tap[i] * dil[i];
                                                inside = inside && v >= 0 && v < xd[2 + i];
                                                at += v * xs[2 + i];
                                            }
                                            if (!inside) continue;
                                            const int64_t ft = mode ? wd[2] - 1 - t : t, fr = mode ? wd[3] - 1 - r : r,
                                                          fs = mode ? wd[4] - 1 - s : s;
                                            const int64_t wi = filter_cl
                                                                   ? (((o[1] * wd[2] + ft) * wd[3] + fr) * wd[4] + fs) * cg + ci
                                                                   : (((o[1] * cg + ci) * wd[2] + ft) * wd[3] + fr) * wd[4] + fs;
                                            acc += double(x[at]) * double(w[wi]);
                                            mag += std::fabs(double(x[at]) * double(w[wi]));
                                        }
                            int64_t yi = 0;
                            for (int i = 0; i < 5; ++i) yi += o[i] * ys[i];
                            const double prev = beta == 0 ? 0.0 : double(b) * y0[size_t(yi)];
                            ref[size_t(yi)] = double(a) * acc + prev;
                            bound[size_t(yi)] = std::fabs(double(a)) * mag + std::fabs(prev);
                            is_output[size_t(yi)] = 1;
                        }
        compare(algo, ref, bound, std::fabs(alpha) * double(cg * wd[2] * wd[3] * wd[4]) * max_x * max_w, y,
                is_output);
    };
    const double macs = double(yd[0] * yd[1] * yd[2] * yd[3] * yd[4]) * double(cg * wd[2] * wd[3] * wd[4]);
    if (x_ext > kMaxElems || y_ext > kMaxElems || macs > kMaxMacs) return;
    if (elem == 8)
        run(static_cast<double*>(nullptr));
    else
        run(static_cast<float*>(nullptr));
}

}  // namespace convcore_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    convcore_fuzz::Data d(data, size);
    convcore_fuzz::run_case(d);
    convcore_fuzz::run_case_3d(d);  // from the bytes the 2-D case left (zeros past the end)
    return 0;
}
