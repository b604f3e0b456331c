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
// spectra are consumed by the product while still in cache. For the same reason a plan keeps no
// filter spectra between calls (Solver::prepare_filter): all of them are 2*Fp/(R*S) times the
// filters (about 32x for 3x3 taps in a 16x16 plane), to be read from memory on every call,
// where a block's direct DFT writes them into the cache. Workspace (bytes, T = float or
// double, Fp = Lh*(Lw/2+1) rounded up to 64 bytes / sizeof(T) complex numbers):
//   64 + 2*sizeof(T)*Fp * (N*C + KB*C/g + N*KB).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/solver.hpp"
#include "common/fft_geometry.hpp"
#include "cpu/fft_family.hpp"

namespace convcore {
namespace cpu {

namespace {

using namespace fftc;

constexpr double kFilterBlockBytes = 2.0 * (1 << 20);  // a task's filter spectra (per thread)
constexpr double kOutputBlockBytes = 2.0 * (1 << 20);  // a task's output spectra (per thread)

struct Geometry {
    int64_t rd, sd;  // dilated filter extent
    int64_t hu, wu;  // padded-input rows / columns the outputs read
    int64_t lh, lw;  // FFT size
    int64_t f, fp;   // complex numbers per spectrum; rounded up to whole blocks
    int64_t m;       // the filter DFT's split (Layout)
    Carver ws;
    size_t x_off, t_off;
};

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.rd = fftg::dilated_extent(p.r, p.dil_h);
    g.sd = fftg::dilated_extent(p.s, p.dil_w);
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.wu = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    // An image past any workspace cap: say so (why_not) before the sizes below leave int64.
    // One plane of it is a lower bound of the workspace.
    if (double(g.hu) * double(g.wu) > double(kWorkspaceCap)) {
        g.ws.add(double(g.hu) * double(g.wu), sizeof(T));
        return g;
    }
    // Lw: the cheapest size for FFTW. Lh: the cheapest by the cost model, among that and the
    // sizes that let the filter DFT split its column frequencies 2 or 4 ways.
    g.lw = good_size(g.wu, true);
    {
        const double cg = double(p.c_per_group());
        double best = -1;
        for (int64_t lh : {good_size(g.hu), good_size_multiple(g.hu, 2 * block<T>()),
                           good_size_multiple(g.hu, 4 * block<T>())}) {
            if (lh <= 0) continue;
            const int64_t split = lh % (4 * block<T>()) == 0 ? 4 : lh % (2 * block<T>()) == 0 ? 2 : 1;
            const double fp = double(padded<T>(lh * (g.lw / 2 + 1)));
            const double pts = double(lh) * double(g.lw);
            const double fft = kFftCost * pts * std::log2(pts + 1) * (size_weight(lh) + size_weight(g.lw)) / 2;
            const double cost = double(p.k) * cg * kDftCost * fp * (double(p.r) / double(split) + 1.0) +
                                double(p.n) * double(p.c + p.k) * fft +
                                double(p.n) * double(p.k) * cg * fp * kProductCost;
            if (best < 0 || cost < best) {
                best = cost;
                g.lh = lh;
            }
        }
    }
    g.f = g.lh * (g.lw / 2 + 1);
    g.fp = padded<T>(g.f);
    const FilterDft<T> dft(g.lh, g.lw, p.r, p.s, p.dil_h, p.dil_w);
    g.m = dft.split();
    const Layout<T> lay(g.f, g.m);
    g.x_off = g.ws.add(lay.set_elems(double(p.n) * double(p.c)), sizeof(T));
    g.t_off = g.ws.add(dft.table_elems(), sizeof(T));
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
    constexpr int64_t BL = 2 * block<T>();       // elements of T per block
    const Layout<T> lay(g.f, g.m);
    const int64_t PU = lay.pu;                   // elements of T per spectrum per panel
    const int64_t rs = 2 * (g.lw / 2 + 1);       // row stride of a real plane (in place)
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* xs = reinterpret_cast<T*>(base + g.x_off);  // panels of [n][c]
    const int64_t xp = p.n * p.c * PU;             // its panel stride
    FilterDft<T> dft(g.lh, g.lw, p.r, p.s, p.dil_h, p.dil_w);
    dft.init(reinterpret_cast<T*>(base + g.t_off));
    const Plan<T> plan = get_plan<T>(g.lh, g.lw, 1, g.fp);
    const T scale = T(a.alpha) / T(double(g.lh) * double(g.lw));
    const T beta = T(a.beta);
    // A task: KB filters of a group (their spectra in a per-thread block of at most
    // kFilterBlockBytes, at least two tasks per thread when the filters allow), then NB images
    // at a time (their output spectra in a per-thread block of at most kOutputBlockBytes).
    const double spec = lay.set_elems(1.0) * sizeof(T);
    const int64_t kb = std::max<int64_t>(
        1, std::min({kg, int64_t(kFilterBlockBytes / (double(cg) * spec)),
                     (kg * p.groups + 2 * threads - 1) / (2 * threads)}));
    const int64_t nkb = (kg + kb - 1) / kb;
    const int64_t nb = std::max<int64_t>(1, std::min<int64_t>(p.n, int64_t(kOutputBlockBytes / (double(kb) * spec))));

#pragma omp parallel num_threads(threads)
    {
        T* d = scratch<T>(size_t(2 * g.fp));
        // 1. input spectra X(n, c)
#pragma omp for schedule(dynamic, 1)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
            const T* src = x + nc * hw;
            const int64_t j0 = std::min(p.pad_w, g.wu);  // first column inside x
            const int64_t j1 = std::min(g.wu, p.pad_w + p.w);
            for (int64_t i = 0; i < g.lh; ++i) {
                T* row = d + i * rs;
                const int64_t ih = i - p.pad_h;
                if (i >= g.hu || ih < 0 || ih >= p.h || j1 <= j0) {
                    std::memset(row, 0, size_t(rs) * sizeof(T));
                    continue;
                }
                std::memset(row, 0, size_t(j0) * sizeof(T));
                std::memcpy(row + j0, src + ih * p.w, size_t(j1 - j0) * sizeof(T));
                std::memset(row + j1, 0, size_t(rs - j1) * sizeof(T));
            }
            plan.forward(d);
            scatter_blocks(d, lay, xs + nc * PU, xp);
        }

        // 2. per task (group, KB filters), no barrier until the end:
        T* ws = scratch<T>(size_t(lay.set_elems(double(kb * cg))), 2);  // panels of [k][c]
        T* ys = scratch<T>(size_t(lay.set_elems(double(nb * kb))), 3);  // panels of [n][k]
        const int64_t wp = kb * cg * PU, yp = nb * kb * PU;             // their panel strides
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < p.groups * nkb; ++t) {
            const int64_t grp = t / nkb, k0 = t % nkb * kb, kt = std::min(kb, kg - k0);
            const int64_t kbase = grp * kg + k0;
            // the filter spectra W(k, c), by the direct DFT (taps dil apart, mirrored for true
            // convolution)
            dft.run(w + kbase * cg * p.r * p.s, kt * cg, p.flip, lay, ws, PU, wp);
            for (int64_t n0 = 0; n0 < p.n; n0 += nb) {
                const int64_t nt = std::min(nb, p.n - n0);
                // Y(n, k) = sum_c X(n, c) conj(W(k, c)), panel by panel
                for (int64_t ch = 0; ch < lay.np; ++ch) {
                    const Product<T> prod{xs + ch * xp + (n0 * p.c + grp * cg) * PU, p.c * PU, PU, 0, BL,
                                          ws + ch * wp, cg * PU, PU, 0, BL,
                                          ys + ch * yp, kb * PU, PU, BL,
                                          nt, kt, cg, 1, true};
                    product(prod, 0, lay.panel_blocks(ch));
                }
                // inverse, crop (and subsample for stride > 1), blend
                for (int64_t nk = 0; nk < nt * kt; ++nk) {
                    const int64_t n = nk / kt, kk = nk % kt;
                    gather_blocks(ys + (n * kb + kk) * PU, lay, yp, d);
                    plan.backward(d);
                    T* out = y + ((n0 + n) * p.k + kbase + kk) * pq;
                    for (int64_t i = 0; i < p.p; ++i)
                        store_row(out + i * p.q, d + i * p.stride_h * rs, p.q, p.stride_w, scale, beta);
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
const Solver fft_solver = {.algo = CONVCORE_FWD_ALGO_FFT, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .made_for = made_for::large_filters};

}  // namespace cpu
}  // namespace convcore
