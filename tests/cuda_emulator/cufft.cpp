// The cuFFT stand-in (include/cufft.h): 1-D and 2-D real-to-complex and complex-to-real plans
// in cuFFT's advanced layout, computed with reference DFT loops on the emulated device.
// Documented errors come back as the real result codes; what would be undefined on a GPU (data
// outside its allocation, a missing, small or overlapping work area, two transforms writing one
// element) aborts, and so does anything not implemented (complex-to-complex, rank 3).
// C2R and Z2D overwrite their input with NaN afterwards, as the real library may.
#include <cufft.h>

#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_emulator/engine.hpp"
#include "internal.hpp"

namespace cuda_emulator {
extern std::atomic<long long> g_cufft_plans;  // runtime.cpp: call_counts
}

namespace {

using cuda_emulator::fail;
using Complex = std::complex<double>;

struct Plan {
    bool made = false;
    bool auto_allocate = true;
    int rank = 0;
    long long n[2] = {1, 1};
    long long in_embed[2] = {1, 1}, out_embed[2] = {1, 1};
    long long istride = 1, idist = 1, ostride = 1, odist = 1, batch = 1;
    cufftType type = CUFFT_R2C;
    size_t work_size = 0;
    void* work_area = nullptr;
    void* own_work = nullptr;  // allocated by the plan under auto-allocation
    cudaStream_t stream = nullptr;
};

std::mutex plans_mutex;
std::map<cufftHandle, Plan>& plans() {
    static auto* p = new std::map<cufftHandle, Plan>;
    return *p;
}
cufftHandle next_handle = 1;

// The plan of handle h, or null (under plans_mutex).
Plan* find_plan(cufftHandle h) {
    auto it = plans().find(h);
    return it == plans().end() ? nullptr : &it->second;
}

bool is_forward(cufftType t) { return t == CUFFT_R2C || t == CUFFT_D2Z; }
const char* type_name(cufftType t) {
    switch (t) {
        case CUFFT_R2C: return "R2C";
        case CUFFT_C2R: return "C2R";
        case CUFFT_D2Z: return "D2Z";
        case CUFFT_Z2D: return "Z2D";
        case CUFFT_C2C: return "C2C";
        case CUFFT_Z2Z: return "Z2Z";
    }
    return "unknown";
}

// A transform as rows x columns (one row for rank 1); the last dimension is halved in the spectrum.
long long rows(const Plan& p) { return p.rank == 2 ? p.n[0] : 1; }
long long half_cols(const Plan& p) { return p.n[p.rank - 1] / 2 + 1; }

// One side (input or output) of a plan's layout.
struct Side {
    long long dims[2];  // rows x columns: the real plane, or the half spectrum
    const long long* embed;
    long long stride, dist;
    size_t element_bytes;
    size_t real_bytes;  // the alignment the data needs
    long long index(const Plan& p, long long b, long long i0, long long i1) const {
        return b * dist + (p.rank == 2 ? i0 * embed[1] + i1 : i1) * stride;
    }
    long long last_index(const Plan& p) const { return index(p, p.batch - 1, dims[0] - 1, dims[1] - 1); }
};

Side input_side(const Plan& p, size_t real_bytes) {
    const bool fwd = is_forward(p.type);
    return Side{{rows(p), fwd ? p.n[p.rank - 1] : half_cols(p)}, p.in_embed, p.istride, p.idist,
                fwd ? real_bytes : 2 * real_bytes, real_bytes};
}
Side output_side(const Plan& p, size_t real_bytes) {
    const bool fwd = is_forward(p.type);
    return Side{{rows(p), fwd ? half_cols(p) : p.n[p.rank - 1]}, p.out_embed, p.ostride, p.odist,
                fwd ? 2 * real_bytes : real_bytes, real_bytes};
}

// The byte range of a side's footprint from base; aborts unless it lies in one device allocation.
std::pair<const unsigned char*, const unsigned char*> check_footprint(const char* function, const char* what,
                                                                      const Plan& p, const Side& s,
                                                                      const void* base) {
    cuda_emulator::Allocation a;
    if (!cuda_emulator::find_allocation(base, &a)) fail("%s: the %s (%p) is not in device memory", function, what, base);
    if (reinterpret_cast<uintptr_t>(base) % s.real_bytes != 0)
        fail("%s: the %s (%p) is not aligned to its element type", function, what, base);
    const auto* first = static_cast<const unsigned char*>(base);
    const auto* end = first + (s.last_index(p) + 1) * static_cast<long long>(s.element_bytes);
    if (end > a.base + a.size)
        fail("%s: the %s spans %lld bytes from offset %lld of its device allocation of %zu bytes (batch %lld, "
             "stride %lld, distance %lld)",
             function, what, static_cast<long long>(end - first), static_cast<long long>(first - a.base), a.size,
             p.batch, s.stride, s.dist);
    return {first, end};
}

// The n-th roots of unity e^(sign 2 pi i m / n), m = 0..n-1: the DFT's twiddle of indices j and
// k is the root (j k mod n).
class Twiddles {
   public:
    Twiddles(long long n, int sign) : n_(n), roots_(size_t(n)) {
        for (long long m = 0; m < n; ++m) {
            const double angle = sign * 2.0 * M_PI * static_cast<double>(m) / static_cast<double>(n);
            roots_[size_t(m)] = {std::cos(angle), std::sin(angle)};
        }
    }
    Complex operator()(long long j, long long k) const { return roots_[size_t(j * k % n_)]; }

   private:
    long long n_;
    std::vector<Complex> roots_;
};

// One transform: the dense real plane <-> the dense half spectrum (row-major, last dim halved).
void forward_dft(const Plan& p, const std::vector<double>& x, std::vector<Complex>& X) {
    const long long n0 = p.rank == 2 ? p.n[0] : 1, n1 = p.n[p.rank - 1], h1 = n1 / 2 + 1;
    const Twiddles twiddle0(n0, -1), twiddle1(n1, -1);
    std::vector<Complex> rows(n0 * h1);
    for (long long a = 0; a < n0; ++a)
        for (long long k1 = 0; k1 < h1; ++k1) {
            Complex s = 0;
            for (long long b = 0; b < n1; ++b) s += x[a * n1 + b] * twiddle1(k1, b);
            rows[a * h1 + k1] = s;
        }
    for (long long k0 = 0; k0 < n0; ++k0)
        for (long long k1 = 0; k1 < h1; ++k1) {
            Complex s = 0;
            for (long long a = 0; a < n0; ++a) s += rows[a * h1 + k1] * twiddle0(k0, a);
            X[k0 * h1 + k1] = s;
        }
}

void inverse_dft(const Plan& p, const std::vector<Complex>& X, std::vector<double>& x) {
    const long long n0 = p.rank == 2 ? p.n[0] : 1, n1 = p.n[p.rank - 1], h1 = n1 / 2 + 1;
    const Twiddles twiddle0(n0, 1), twiddle1(n1, 1);
    std::vector<Complex> cols(n0 * h1);
    for (long long a = 0; a < n0; ++a)
        for (long long k1 = 0; k1 < h1; ++k1) {
            Complex s = 0;
            for (long long k0 = 0; k0 < n0; ++k0) s += X[k0 * h1 + k1] * twiddle0(k0, a);
            cols[a * h1 + k1] = s;
        }
    // The last dimension as a Hermitian signal: the missing half is the conjugate mirror.
    for (long long a = 0; a < n0; ++a)
        for (long long b = 0; b < n1; ++b) {
            double s = cols[a * h1].real();
            for (long long k1 = 1; k1 < h1; ++k1) {
                const double weight = (n1 % 2 == 0 && k1 == n1 / 2) ? 1.0 : 2.0;
                s += weight * (cols[a * h1 + k1] * twiddle1(k1, b)).real();
            }
            x[a * n1 + b] = s;
        }
}

template <typename Real>
cufftResult exec(const char* function, cufftHandle h, cufftType type, void* in, void* out) {
    cuda_emulator::detail::require_host(function);
    std::lock_guard<std::mutex> lock(plans_mutex);
    Plan* found = find_plan(h);
    if (!found || !found->made) return CUFFT_INVALID_PLAN;
    const Plan& p = *found;
    if (p.type != type) return CUFFT_INVALID_VALUE;
    if (!in || !out) return CUFFT_INVALID_VALUE;
    const cuda_emulator::DeviceMemoryAccess access;
    const Side is = input_side(p, sizeof(Real)), os = output_side(p, sizeof(Real));
    const auto in_range = check_footprint(function, "input", p, is, in);
    const auto out_range = check_footprint(function, "output", p, os, out);
    if (p.work_size > 0) {
        if (!p.work_area)
            fail("%s: the plan needs a work area of %zu bytes and none is set (cufftSetWorkArea)", function,
                 p.work_size);
        cuda_emulator::Allocation a;
        auto* w = static_cast<unsigned char*>(p.work_area);
        if (!cuda_emulator::find_allocation(w, &a) || w + p.work_size > a.base + a.size)
            fail("%s: the work area %p does not hold the plan's %zu bytes in one device allocation", function,
                 p.work_area, p.work_size);
        for (const auto& [first, end] : {in_range, out_range})
            if (w < end && first < w + p.work_size)
                fail("%s: the work area overlaps the %s", function, first == in_range.first ? "input" : "output");
        std::memset(w, 0xFF, p.work_size);  // the library's scratch: garbage afterwards
    }
    const bool fwd = is_forward(type);
    const long long n0 = p.rank == 2 ? p.n[0] : 1, n1 = p.n[p.rank - 1], h1 = n1 / 2 + 1;
    const long long real_points = n0 * n1, half_points = n0 * h1;
    using C = std::complex<Real>;
    // Read every transform's input first (in-place plans), then compute and write.
    std::vector<std::vector<double>> reals(p.batch, std::vector<double>(real_points));
    std::vector<std::vector<Complex>> spectra(p.batch, std::vector<Complex>(half_points));
    for (long long b = 0; b < p.batch; ++b)
        for (long long i0 = 0; i0 < n0; ++i0)
            for (long long i1 = 0; i1 < (fwd ? n1 : h1); ++i1) {
                const long long at = is.index(p, b, i0, i1);
                if (fwd)
                    reals[b][i0 * n1 + i1] = static_cast<const Real*>(in)[at];
                else
                    spectra[b][i0 * h1 + i1] = Complex(static_cast<const C*>(in)[at]);
            }
    if (!fwd)  // C2R / Z2D destroy their input
        for (long long b = 0; b < p.batch; ++b)
            for (long long i0 = 0; i0 < n0; ++i0)
                for (long long i1 = 0; i1 < h1; ++i1)
                    static_cast<C*>(in)[is.index(p, b, i0, i1)] = C(NAN, NAN);
    std::vector<bool> written(os.last_index(p) + 1);
    for (long long b = 0; b < p.batch; ++b) {
        if (fwd)
            forward_dft(p, reals[b], spectra[b]);
        else
            inverse_dft(p, spectra[b], reals[b]);
        for (long long i0 = 0; i0 < n0; ++i0)
            for (long long i1 = 0; i1 < (fwd ? h1 : n1); ++i1) {
                const long long at = os.index(p, b, i0, i1);
                if (written[at])
                    fail("%s: two transforms write output element %lld (stride %lld, distance %lld)", function, at,
                         os.stride, os.dist);
                written[at] = true;
                if (fwd)
                    static_cast<C*>(out)[at] = C(spectra[b][i0 * h1 + i1]);
                else
                    static_cast<Real*>(out)[at] = static_cast<Real>(reals[b][i0 * n1 + i1]);
            }
    }
    return CUFFT_SUCCESS;
}

}  // namespace

cufftResult cufftCreate(cufftHandle* handle) {
    cuda_emulator::detail::require_host("cufftCreate");
    if (!handle) return CUFFT_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(plans_mutex);
    *handle = next_handle++;
    plans()[*handle] = Plan{};
    return CUFFT_SUCCESS;
}

cufftResult cufftDestroy(cufftHandle handle) {
    cuda_emulator::detail::require_host("cufftDestroy");
    void* own_work = nullptr;
    {
        std::lock_guard<std::mutex> lock(plans_mutex);
        Plan* p = find_plan(handle);
        if (!p) return CUFFT_INVALID_PLAN;
        own_work = p->own_work;
        plans().erase(handle);
    }
    if (own_work) (void)cudaFree(own_work);
    return CUFFT_SUCCESS;
}

cufftResult cufftSetAutoAllocation(cufftHandle handle, int auto_allocate) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    Plan* p = find_plan(handle);
    if (!p) return CUFFT_INVALID_PLAN;
    if (p->made) fail("cufftSetAutoAllocation: must come before the plan is made");
    p->auto_allocate = auto_allocate != 0;
    return CUFFT_SUCCESS;
}

cufftResult cufftMakePlanMany64(cufftHandle handle, int rank, long long int* n, long long int* inembed,
                                long long int istride, long long int idist, long long int* onembed,
                                long long int ostride, long long int odist, cufftType type, long long int batch,
                                size_t* workSize) {
    cuda_emulator::detail::require_host("cufftMakePlanMany64");
    cuda_emulator::g_cufft_plans.fetch_add(1);
    std::unique_lock<std::mutex> lock(plans_mutex);
    Plan* found = find_plan(handle);
    if (!found) return CUFFT_INVALID_PLAN;
    if (found->made) fail("cufftMakePlanMany64: the handle already has a plan");
    if (type == CUFFT_C2C || type == CUFFT_Z2Z) fail("cufftMakePlanMany64: %s plans are not emulated", type_name(type));
    if (type != CUFFT_R2C && type != CUFFT_C2R && type != CUFFT_D2Z && type != CUFFT_Z2D) return CUFFT_INVALID_TYPE;
    if (rank != 1 && rank != 2) {
        if (rank == 3) fail("cufftMakePlanMany64: rank-3 plans are not emulated");
        return CUFFT_INVALID_SIZE;
    }
    if (!n) return CUFFT_INVALID_VALUE;
    for (int i = 0; i < rank; ++i)
        if (n[i] < 1) return CUFFT_INVALID_SIZE;
    if (batch < 1) return CUFFT_INVALID_SIZE;
    if ((inembed == nullptr) != (onembed == nullptr))
        fail("cufftMakePlanMany64: one of inembed and onembed is null (cuFFT then ignores both)");
    Plan p = *found;
    p.rank = rank;
    p.type = type;
    p.batch = batch;
    for (int i = 0; i < rank; ++i) p.n[i] = n[i];
    // Basic layout (null embeds): dense transforms, strides and distances ignored.
    const bool fwd = is_forward(type);
    const long long half_last = n[rank - 1] / 2 + 1;
    long long real_dims[2] = {p.n[0], p.n[1]}, half_dims[2] = {p.n[0], p.n[1]};
    half_dims[rank - 1] = half_last;
    const long long* in_dims = fwd ? real_dims : half_dims;
    const long long* out_dims = fwd ? half_dims : real_dims;
    if (!inembed) {
        std::memcpy(p.in_embed, in_dims, sizeof(p.in_embed));
        std::memcpy(p.out_embed, out_dims, sizeof(p.out_embed));
        p.istride = p.ostride = 1;
        p.idist = in_dims[0] * (rank == 2 ? in_dims[1] : 1);
        p.odist = out_dims[0] * (rank == 2 ? out_dims[1] : 1);
    } else {
        for (int i = 0; i < rank; ++i) {
            p.in_embed[i] = inembed[i];
            p.out_embed[i] = onembed[i];
        }
        // Rows shorter than the transform's rows would make its elements overlap.
        for (int i = 1; i < rank; ++i)
            if (p.in_embed[i] < in_dims[i] || p.out_embed[i] < out_dims[i])
                fail("cufftMakePlanMany64: embed[%d] (in %lld, out %lld) below the transform's extent "
                     "(in %lld, out %lld)",
                     i, p.in_embed[i], p.out_embed[i], in_dims[i], out_dims[i]);
        if (istride < 1 || ostride < 1 || idist < 0 || odist < 0)
            fail("cufftMakePlanMany64: strides below 1 or negative distances are not emulated");
        p.istride = istride;
        p.idist = idist;
        p.ostride = ostride;
        p.odist = odist;
    }
    // The work size: one complex spectrum per transform (a real plan's size differs).
    const size_t real_bytes = type == CUFFT_R2C || type == CUFFT_C2R ? sizeof(float) : sizeof(double);
    p.work_size = size_t(batch) * size_t(half_dims[0] * (rank == 2 ? half_dims[1] : 1)) * 2 * real_bytes;
    if (workSize) *workSize = p.work_size;
    if (p.auto_allocate) {
        lock.unlock();
        void* work = nullptr;
        if (cudaMalloc(&work, p.work_size) != cudaSuccess) return CUFFT_ALLOC_FAILED;
        lock.lock();
        found = find_plan(handle);
        if (!found) fail("cufftMakePlanMany64: the handle was destroyed meanwhile");
        p.own_work = p.work_area = work;
    }
    p.made = true;
    *found = p;
    return CUFFT_SUCCESS;
}

cufftResult cufftSetWorkArea(cufftHandle handle, void* workArea) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    Plan* p = find_plan(handle);
    if (!p) return CUFFT_INVALID_PLAN;
    p->work_area = workArea;
    return CUFFT_SUCCESS;
}

cufftResult cufftSetStream(cufftHandle handle, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    Plan* p = find_plan(handle);
    if (!p) return CUFFT_INVALID_PLAN;
    if (!cuda_emulator::detail::is_live_stream(stream))
        fail("cufftSetStream: %p is not a live stream", static_cast<void*>(stream));
    p->stream = stream;
    return CUFFT_SUCCESS;
}

cufftResult cufftExecR2C(cufftHandle plan, cufftReal* idata, cufftComplex* odata) {
    return exec<float>("cufftExecR2C", plan, CUFFT_R2C, idata, odata);
}
cufftResult cufftExecC2R(cufftHandle plan, cufftComplex* idata, cufftReal* odata) {
    return exec<float>("cufftExecC2R", plan, CUFFT_C2R, idata, odata);
}
cufftResult cufftExecD2Z(cufftHandle plan, cufftDoubleReal* idata, cufftDoubleComplex* odata) {
    return exec<double>("cufftExecD2Z", plan, CUFFT_D2Z, idata, odata);
}
cufftResult cufftExecZ2D(cufftHandle plan, cufftDoubleComplex* idata, cufftDoubleReal* odata) {
    return exec<double>("cufftExecZ2D", plan, CUFFT_Z2D, idata, odata);
}
