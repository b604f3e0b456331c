// FFT on the CPU: whole-image 2D FFTs (FFTW, real-to-complex), the classic "convolution
// theorem" algorithm (Mathieu, Henaff & LeCun 2014; cuDNN's CUDNN_CONVOLUTION_FWD_ALGO_FFT).
//
// The padded input plane of each (image, channel) and the zero-padded filter of each
// (filter, channel) are transformed once at an Lh x Lw size (the smallest 2^a 3^b 5^c 7^d
// sizes covering the padded input rows and columns that the outputs read); per frequency the
// channel sum Y(n, k) = sum_c X(n, c) * conj(W(k, c)) is a small complex GEMM (the shared
// register-tiled product kernels, only the Lh x (Lw/2+1) Hermitian half-spectrum); one
// inverse c2r per (image, filter); the outputs are cropped from it. conj(W) makes the cyclic
// product a cross-correlation whose first P x Q entries are the outputs: an output at (a, b)
// reads rows a .. a + dil*(R-1) <= Hu-1 < Lh, so no cyclic wrap reaches it. True convolution
// mirrors the filter taps when they are placed.
//
// Stride > 1 is computed at stride 1 and subsampled (the outputs at multiples of the stride
// are read from the inverse transform), so it costs what the stride-1 problem does. Dilation
// is supported by placing the filter taps dil apart (a zero-inserted filter): FFT cost does not
// depend on the filter's extent.
//
// Filters are processed in blocks of KB (an ~8 MiB slab of filter spectra), so that a block's
// spectra are consumed by the product while still in cache. Workspace (bytes, T = float or
// double, Fp = Lh*(Lw/2+1) rounded up to 64 bytes / sizeof(T) complex numbers):
//   64 + 2*sizeof(T)*Fp * (N*C + KB*C/g + N*KB).
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/fft_plan_cache.hpp"

namespace convcore {
namespace cpu {

namespace {

using namespace fftc;

constexpr double kFilterBlockBytes = 8.0 * (1 << 20);

struct Geometry {
    int64_t rd, sd;  // dilated filter extent
    int64_t hu, wu;  // padded-input rows / columns the outputs read
    int64_t lh, lw;  // FFT size
    int64_t f, fp;   // complex numbers per spectrum; rounded up to whole blocks
    int64_t kb;      // filters per block
    Carver ws;
    size_t x_off, w_off, y_off;
};

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.rd = p.dil_h * (p.r - 1) + 1;
    g.sd = p.dil_w * (p.s - 1) + 1;
    g.hu = (p.p - 1) * p.stride_h + g.rd;
    g.wu = (p.q - 1) * p.stride_w + g.sd;
    g.lh = good_size(g.hu);
    g.lw = good_size(g.wu, true);
    g.f = g.lh * (g.lw / 2 + 1);
    g.fp = padded<T>(g.f);
    const double plane = 2.0 * double(g.fp) * sizeof(T);
    const double per_filter = double(p.c_per_group()) * plane;
    g.kb = std::max<int64_t>(1, std::min<int64_t>(p.k_per_group(), int64_t(kFilterBlockBytes / per_filter)));
    g.x_off = g.ws.add(double(p.n) * double(p.c) * 2.0 * double(g.fp), sizeof(T));
    g.w_off = g.ws.add(double(g.kb) * double(p.c_per_group()) * 2.0 * double(g.fp), sizeof(T));
    g.y_off = g.ws.add(double(p.n) * double(g.kb) * 2.0 * double(g.fp), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p) : geometry<float>(p);
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT runs float32 and float64 only";
    const Geometry g = geometry_of(p);
    if (g.ws.overflow() || g.ws.total() > double(kWorkspaceCap)) return too_big("FFT", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry_of(p).ws.total()); }

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Geometry g = geometry<T>(p);
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t plane = 2 * g.fp;              // elements of T per spectrum
    const int64_t rs = 2 * (g.lw / 2 + 1);       // row stride of a real plane (in place)
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const int64_t nblocks = g.fp / block<T>();
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* xs = reinterpret_cast<T*>(base + g.x_off);
    T* ws = reinterpret_cast<T*>(base + g.w_off);
    T* ys = reinterpret_cast<T*>(base + g.y_off);
    const Plan<T> plan = get_plan<T>(g.lh, g.lw, 1, g.fp);
    const T scale = T(a.alpha) / T(double(g.lh) * double(g.lw));
    const T beta = T(a.beta);
    // Product tasks: a few per thread, in whole blocks.
    const int64_t chunk = std::max<int64_t>(1, nblocks / (4 * int64_t(threads)));

#pragma omp parallel num_threads(threads)
    {
        // 1. input spectra X(n, c)
#pragma omp for schedule(dynamic, 1)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
            T* d = xs + nc * plane;
            const T* src = x + nc * hw;
            for (int64_t i = 0; i < g.lh; ++i) {
                T* row = d + i * rs;
                const int64_t ih = i - p.pad_h;
                if (i >= g.hu || ih < 0 || ih >= p.h) {
                    std::memset(row, 0, size_t(rs) * sizeof(T));
                    continue;
                }
                const int64_t j0 = std::min(p.pad_w, g.wu);  // first column inside x
                const int64_t j1 = std::min(g.wu, p.pad_w + p.w);
                std::memset(row, 0, size_t(j0) * sizeof(T));
                if (j1 > j0) std::memcpy(row + j0, src + ih * p.w, size_t(j1 - j0) * sizeof(T));
                std::memset(row + std::max(j0, j1), 0, size_t(rs - std::max(j0, j1)) * sizeof(T));
            }
            plan.forward(d);
            to_blocks(d, g.f);
        }

        for (int64_t grp = 0; grp < p.groups; ++grp) {
            for (int64_t k0 = 0; k0 < kg; k0 += g.kb) {
                const int64_t kb = std::min(g.kb, kg - k0);
                const int64_t kbase = grp * kg + k0;
                // 2. filter spectra W(k, c) of the block (taps dil apart; mirrored for true
                //    convolution)
#pragma omp for schedule(dynamic, 1)
                for (int64_t kc = 0; kc < kb * cg; ++kc) {
                    T* d = ws + kc * plane;
                    std::memset(d, 0, size_t(plane) * sizeof(T));
                    const T* src = w + (kbase * cg + kc) * p.r * p.s;
                    for (int64_t r = 0; r < p.r; ++r)
                        for (int64_t s = 0; s < p.s; ++s) {
                            const int64_t fr = p.flip ? p.r - 1 - r : r;
                            const int64_t fs = p.flip ? p.s - 1 - s : s;
                            d[r * p.dil_h * rs + s * p.dil_w] = src[fr * p.s + fs];
                        }
                    plan.forward(d);
                    to_blocks(d, g.f);
                }
                // 3. Y(n, k) = sum_c X(n, c) conj(W(k, c)), per frequency block
                Product<T> prod{xs + grp * cg * plane, p.c * plane, plane, 0,
                                ws, cg * plane, plane, 0,
                                ys, kb * plane, plane,
                                p.n, kb, cg, 1, true};
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nblocks; b += chunk) product(prod, b, std::min(nblocks, b + chunk));
                // 4. inverse, crop (and subsample for stride > 1), blend
#pragma omp for schedule(dynamic, 1)
                for (int64_t nk = 0; nk < p.n * kb; ++nk) {
                    T* d = ys + nk * plane;
                    from_blocks(d, g.f);
                    plan.backward(d);
                    const int64_t n = nk / kb, k = kbase + nk % kb;
                    T* out = y + (n * p.k + k) * pq;
                    for (int64_t i = 0; i < p.p; ++i) {
                        const T* row = d + i * p.stride_h * rs;
                        T* o = out + i * p.q;
                        if (beta == T(0))
                            for (int64_t j = 0; j < p.q; ++j) o[j] = scale * row[j * p.stride_w];
                        else
                            for (int64_t j = 0; j < p.q; ++j) o[j] = scale * row[j * p.stride_w] + beta * o[j];
                    }
                }
            }
        }
    }
}

void run(const ConvArgs& a) {
    if (a.prob.dtype == CONVCORE_DATA_DOUBLE)
        run_typed<double>(a);
    else
        run_typed<float>(a);
}

}  // namespace

extern const Solver fft_solver;
const Solver fft_solver = {CONVCORE_FWD_ALGO_FFT, CONVCORE_DEVICE_CPU, /*deterministic=*/true,
                           why_not, workspace_bytes, run};

}  // namespace cpu
}  // namespace convcore
