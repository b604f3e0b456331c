// FFT_TILING on the CPU: 2D FFT convolution on overlap-save tiles (cuDNN's
// CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING; overlap-save as in Highlander & Rodriguez 2016).
//
// The padded input is cut into Th x Tw tiles that overlap by the dilated filter extent minus
// one (Rd-1 rows, Sd-1 columns); each tile's 2D real FFT (FFTW, in place) times conj of the
// Th x Tw spectrum of each filter, summed over the group's channels (the shared register-tiled
// complex product: per frequency a GEMM over (image-tile) x (filter) x (channel)), gives after
// one inverse FFT an (Th-Rd+1) x (Tw-Sd+1) block of stride-1 outputs that no cyclic wrap
// reaches. The filter spectra are computed once per call at the tile size, which is what makes
// tiling cheaper than the whole-image FFT for small batches and large images: K*C/g transforms
// of Th x Tw instead of Lh x Lw.
//
// The tile size is chosen per axis from {8, 16, ..., 1024} >= the dilated filter extent and the
// whole padded extent (one tile), minimising a cost model of the transforms and the product
// (measured on this machine's FFTW: an r2c/c2r point costs about log2(Th*Tw) times 0.2 of a
// complex multiply-add of the product). Stride > 1 is computed at stride 1 and subsampled;
// dilation places the filter taps dil apart; true convolution mirrors the filter.
//
// Workspace is bounded (independent of N, H and W): all filter spectra plus a chunk of J
// (image, tile) jobs, J chosen so that a chunk's input and output spectra take about 32 MiB
// (at least 1 job). Bytes, Fp = Th*(Tw/2+1) rounded up to 64 bytes / sizeof(T) complex:
//   64 + 2*sizeof(T)*Fp * (K*C/g + J*(C + K)).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/fft_plan_cache.hpp"

namespace convcore {
namespace cpu {

namespace {

using namespace fftc;

constexpr double kChunkBytes = 32.0 * (1 << 20);
constexpr double kFftPointCost = 0.2;  // per point and log2(size), in product cmac units

struct Geometry {
    int64_t rd, sd;      // dilated filter extent
    int64_t ah, aw;      // stride-1 outputs needed: (P-1)*stride + 1 rows / columns
    int64_t th, tw;      // tile (FFT) size
    int64_t oh, ow;      // stride-1 outputs per tile
    int64_t nth, ntw;    // tiles per image
    int64_t f, fp;       // complex numbers per spectrum; rounded up to whole blocks
    int64_t jobs, jb;    // (image, tile) jobs; jobs per chunk
    Carver ws;
    size_t w_off, x_off, y_off;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.rd = p.dil_h * (p.r - 1) + 1;
    g.sd = p.dil_w * (p.s - 1) + 1;
    g.ah = (p.p - 1) * p.stride_h + 1;
    g.aw = (p.q - 1) * p.stride_w + 1;
    // Candidate tile sizes per axis: powers of two covering the filter, and the whole extent.
    auto candidates = [](int64_t filt, int64_t outs, bool even) {
        std::vector<int64_t> c;
        const int64_t whole = good_size(outs + filt - 1, even);
        for (int64_t t = 8; t <= 1024 && t < whole; t *= 2)
            if (t >= filt + 1) c.push_back(t);
        c.push_back(whole);
        return c;
    };
    const double cin = double(p.c), cg = double(p.c_per_group()), k = double(p.k);
    double best = -1;
    for (int64_t th : candidates(g.rd, g.ah, false)) {
        for (int64_t tw : candidates(g.sd, g.aw, true)) {
            const double tiles = double(ceil_div(g.ah, th - g.rd + 1)) * double(ceil_div(g.aw, tw - g.sd + 1));
            const double fp = double(padded<T>(th * (tw / 2 + 1)));
            const double fft = kFftPointCost * double(th * tw) * std::log2(double(th * tw) + 1);
            const double cost = (k * cg + double(p.n) * tiles * (cin + k)) * fft +
                                double(p.n) * tiles * k * cg * fp;
            if (best < 0 || cost < best) {
                best = cost;
                g.th = th;
                g.tw = tw;
            }
        }
    }
    g.oh = g.th - g.rd + 1;
    g.ow = g.tw - g.sd + 1;
    g.nth = ceil_div(g.ah, g.oh);
    g.ntw = ceil_div(g.aw, g.ow);
    g.f = g.th * (g.tw / 2 + 1);
    g.fp = padded<T>(g.f);
    g.jobs = p.n * g.nth * g.ntw;
    const double plane = 2.0 * double(g.fp) * sizeof(T);
    g.jb = std::max<int64_t>(1, std::min<int64_t>(g.jobs, int64_t(kChunkBytes / (double(p.c + p.k) * plane))));
    g.w_off = g.ws.add(double(p.k) * cg * 2.0 * double(g.fp), sizeof(T));
    g.x_off = g.ws.add(double(g.jb) * cin * 2.0 * double(g.fp), sizeof(T));
    g.y_off = g.ws.add(double(g.jb) * k * 2.0 * double(g.fp), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p) : geometry<float>(p);
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT_TILING runs float32 and float64 only";
    const Geometry g = geometry_of(p);
    if (g.ws.overflow() || g.ws.total() > double(kWorkspaceCap))
        return too_big("FFT_TILING", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry_of(p).ws.total()); }

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Geometry g = geometry<T>(p);
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t plane = 2 * g.fp;            // elements of T per spectrum
    const int64_t rs = 2 * (g.tw / 2 + 1);     // row stride of a real tile (in place)
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const int64_t tiles = g.nth * g.ntw;
    const int64_t nblocks = g.fp / block<T>();
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* wsp = reinterpret_cast<T*>(base + g.w_off);
    T* xsp = reinterpret_cast<T*>(base + g.x_off);
    T* ysp = reinterpret_cast<T*>(base + g.y_off);
    const Plan<T> w_plan = get_plan<T>(g.th, g.tw, cg, g.fp);
    const Plan<T> x_plan = get_plan<T>(g.th, g.tw, p.c, g.fp);
    const Plan<T> y_plan = get_plan<T>(g.th, g.tw, p.k, g.fp);
    const T scale = T(a.alpha) / T(double(g.th) * double(g.tw));
    const T beta = T(a.beta);
    const int64_t chunk = std::max<int64_t>(1, nblocks / (4 * int64_t(threads)));

#pragma omp parallel num_threads(threads)
    {
        // filter spectra at the tile size, one batch of C/g planes per filter
#pragma omp for schedule(dynamic, 1)
        for (int64_t k = 0; k < p.k; ++k) {
            T* d0 = wsp + k * cg * plane;
            for (int64_t c = 0; c < cg; ++c) {
                T* d = d0 + c * plane;
                std::memset(d, 0, size_t(plane) * sizeof(T));
                const T* src = w + (k * cg + c) * p.r * p.s;
                for (int64_t r = 0; r < p.r; ++r)
                    for (int64_t s = 0; s < p.s; ++s) {
                        const int64_t fr = p.flip ? p.r - 1 - r : r;
                        const int64_t fs = p.flip ? p.s - 1 - s : s;
                        d[r * p.dil_h * rs + s * p.dil_w] = src[fr * p.s + fs];
                    }
            }
            w_plan.forward(d0);
            for (int64_t c = 0; c < cg; ++c) to_blocks(d0 + c * plane, g.f);
        }

        for (int64_t j0 = 0; j0 < g.jobs; j0 += g.jb) {
            const int64_t jb = std::min(g.jb, g.jobs - j0);
            // input tiles of the chunk's jobs (image, tile row, tile column), all channels
#pragma omp for schedule(dynamic, 1)
            for (int64_t j = 0; j < jb; ++j) {
                const int64_t job = j0 + j, n = job / tiles, t = job % tiles;
                const int64_t a0 = t / g.ntw * g.oh, b0 = t % g.ntw * g.ow;  // tile origin (padded coords)
                // rows / columns of the tile inside x
                const int64_t i_lo = std::max<int64_t>(0, p.pad_h - a0);
                const int64_t i_hi = std::min(g.th, p.pad_h + p.h - a0);
                const int64_t c_lo = std::max<int64_t>(0, p.pad_w - b0);
                const int64_t c_hi = std::min(g.tw, p.pad_w + p.w - b0);
                T* d0 = xsp + j * p.c * plane;
                for (int64_t c = 0; c < p.c; ++c) {
                    T* d = d0 + c * plane;
                    const T* src = x + (n * p.c + c) * hw;
                    for (int64_t i = 0; i < g.th; ++i) {
                        T* row = d + i * rs;
                        if (i < i_lo || i >= i_hi || c_lo >= c_hi) {
                            std::memset(row, 0, size_t(rs) * sizeof(T));
                            continue;
                        }
                        std::memset(row, 0, size_t(c_lo) * sizeof(T));
                        std::memcpy(row + c_lo, src + (a0 + i - p.pad_h) * p.w + (b0 + c_lo - p.pad_w),
                                    size_t(c_hi - c_lo) * sizeof(T));
                        std::memset(row + c_hi, 0, size_t(rs - c_hi) * sizeof(T));
                    }
                }
                x_plan.forward(d0);
                for (int64_t c = 0; c < p.c; ++c) to_blocks(d0 + c * plane, g.f);
            }
            // Y(job, k) = sum_c X(job, c) conj(W(k, c)), per group and frequency block
            for (int64_t grp = 0; grp < p.groups; ++grp) {
                const Product<T> prod{xsp + grp * cg * plane, p.c * plane, plane, 0,
                                      wsp + grp * kg * cg * plane, cg * plane, plane, 0,
                                      ysp + grp * kg * plane, p.k * plane, plane,
                                      jb, kg, cg, 1, true};
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nblocks; b += chunk) product(prod, b, std::min(nblocks, b + chunk));
            }
            // inverse per job (all filters), keep the tile's valid stride-1 outputs that fall
            // on the stride grid
#pragma omp for schedule(dynamic, 1)
            for (int64_t j = 0; j < jb; ++j) {
                const int64_t job = j0 + j, n = job / tiles, t = job % tiles;
                const int64_t a0 = t / g.ntw * g.oh, b0 = t % g.ntw * g.ow;
                T* d0 = ysp + j * p.k * plane;
                for (int64_t k = 0; k < p.k; ++k) from_blocks(d0 + k * plane, g.f);
                y_plan.backward(d0);
                // outputs (i, q) with i*stride_h in [a0, a0 + oh) and below ah, likewise q
                const int64_t i_lo = ceil_div(a0, p.stride_h);
                const int64_t i_hi = std::min(p.p, ceil_div(a0 + g.oh, p.stride_h));
                const int64_t q_lo = ceil_div(b0, p.stride_w);
                const int64_t q_hi = std::min(p.q, ceil_div(b0 + g.ow, p.stride_w));
                for (int64_t k = 0; k < p.k; ++k) {
                    const T* d = d0 + k * plane;
                    T* out = y + (n * p.k + k) * pq;
                    for (int64_t i = i_lo; i < i_hi; ++i) {
                        const T* row = d + (i * p.stride_h - a0) * rs - b0;
                        T* o = out + i * p.q;
                        if (beta == T(0))
                            for (int64_t q = q_lo; q < q_hi; ++q) o[q] = scale * row[q * p.stride_w];
                        else
                            for (int64_t q = q_lo; q < q_hi; ++q) o[q] = scale * row[q * p.stride_w] + beta * o[q];
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

extern const Solver fft_tiling_solver;
const Solver fft_tiling_solver = {CONVCORE_FWD_ALGO_FFT_TILING, CONVCORE_DEVICE_CPU,
                                  /*deterministic=*/true, why_not, workspace_bytes, run};

}  // namespace cpu
}  // namespace convcore
