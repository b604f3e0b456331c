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
// (fitted on one AMD EPYC Zen 5 core with Debian's FFTW: an r2c/c2r point costs about
// log2(Th*Tw) times 0.2 of a complex multiply-add of the product, plus a fixed cost per tile
// transform). Stride > 1 is computed at stride 1 and subsampled; dilation places the filter
// taps dil apart; true convolution mirrors the filter.
//
// Workspace is bounded (independent of N, H and W): all filter spectra plus a chunk of J
// (image, tile) jobs, J chosen so that a chunk's input and output spectra take about 32 MiB
// (at least 1 job). Bytes, Fp = Th*(Tw/2+1) rounded up to 64 bytes / sizeof(T) complex:
//   64 + 2*sizeof(T)*Fp * (K*C/g + J*(C + K)).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/solver.hpp"
#include "common/fft_geometry.hpp"
#include "cpu/fft_family.hpp"

namespace convcore {
namespace cpu {

namespace {

using namespace fftc;

constexpr double kChunkBytes = 32.0 * (1 << 20);
constexpr double kFilterBlockBytes = 2.0 * (1 << 20);  // a task's filter spectra (per thread)
constexpr double kOutputBlockBytes = 2.0 * (1 << 20);  // a task's output spectra (per thread)

struct Geometry {
    int64_t rd, sd;      // dilated filter extent
    int64_t ah, aw;      // stride-1 outputs needed: (P-1)*stride + 1 rows / columns
    int64_t th, tw;      // tile (FFT) size
    int64_t oh, ow;      // stride-1 outputs per tile
    int64_t nth, ntw;    // tiles per image
    int64_t f, fp;       // complex numbers per spectrum; rounded up to whole blocks
    int64_t jobs, jb;    // (image, tile) jobs; jobs per chunk
    int64_t m;           // the filter DFT's split (Layout)
    Carver ws;
    size_t x_off, t_off;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.rd = fftg::dilated_extent(p.r, p.dil_h);
    g.sd = fftg::dilated_extent(p.s, p.dil_w);
    g.ah = fftg::stride1_outputs(p.p, p.stride_h);
    g.aw = fftg::stride1_outputs(p.q, p.stride_w);
    // Candidate tile sizes per axis: powers of two covering the filter, and the whole extent.
    struct Candidates {  // at most 8 powers of two and the whole extent
        int64_t v[9];
        int n = 0;
        const int64_t* begin() const { return v; }
        const int64_t* end() const { return v + n; }
    };
    auto candidates = [](int64_t filt, int64_t outs, bool even) {
        Candidates c;
        const int64_t whole = good_size(outs + filt - 1, even);
        for (int64_t t = 8; t <= 1024 && t < whole; t *= 2)
            if (t >= filt + 1) c.v[c.n++] = t;
        c.v[c.n++] = whole;
        return c;
    };
    const double cin = double(p.c), cg = double(p.c_per_group()), k = double(p.k);
    double best = -1;
    for (int64_t th : candidates(g.rd, g.ah, false)) {
        for (int64_t tw : candidates(g.sd, g.aw, true)) {
            const double tiles = double(ceil_div(g.ah, th - g.rd + 1)) * double(ceil_div(g.aw, tw - g.sd + 1));
            // in double: th * tw leaves int64 for whole-image tiles of huge images (exact below 2^53)
            const double area = double(th) * double(tw);
            const double fp = std::ceil(double(th) * double(tw / 2 + 1) / double(block<T>())) *
                              double(block<T>());  // padded<T>(th * (tw / 2 + 1))
            const double fft = kFftCost * area * std::log2(area + 1) *
                               (size_weight(th) + size_weight(tw)) / 2;
            const int64_t split = th % (4 * block<T>()) == 0 ? 4 : th % (2 * block<T>()) == 0 ? 2 : 1;
            const double cost = k * cg * kDftCost * fp * (double(p.r) / double(split) + 1.0) +
                                double(p.n) * tiles * (cin + k) * (fft + kFftCallCost) +
                                double(p.n) * tiles * k * cg * fp * kProductCost;
            if (best < 0 || cost < best) {
                best = cost;
                g.th = th;
                g.tw = tw;
            }
        }
    }
    // A tile past any workspace cap (a huge image or filter span): say so (why_not) before the
    // sizes below leave int64.
    if (double(g.th) * double(g.tw) > double(kWorkspaceCap)) {
        g.ws.add(double(g.th) * double(g.tw / 2 + 1) * 2.0, sizeof(T));
        return g;
    }
    const fftg::TileGrid tg = fftg::tile_grid(g.th, g.tw, g.rd, g.sd, g.ah, g.aw);
    g.oh = tg.oh;
    g.ow = tg.ow;
    g.nth = tg.nth;
    g.ntw = tg.ntw;
    g.f = g.th * (g.tw / 2 + 1);
    g.fp = padded<T>(g.f);
    g.jobs = p.n * g.nth * g.ntw;
    const FilterDft<T> dft(g.th, g.tw, p.r, p.s, p.dil_h, p.dil_w);
    g.m = dft.split();
    const Layout<T> lay(g.f, g.m);
    const double plane = 2.0 * double(g.fp) * sizeof(T);
    g.jb = std::max<int64_t>(1, std::min<int64_t>(g.jobs, int64_t(kChunkBytes / (cin * plane))));
    g.x_off = g.ws.add(lay.set_elems(double(g.jb) * cin), sizeof(T));
    g.t_off = g.ws.add(dft.table_elems(), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p) : geometry<float>(p);
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT_TILING runs float32 and float64 only";
    // It computes every stride-1 output of the region the outputs span: refuse strides that
    // make that more than 64 times the outputs (stride 2^31 on a 2-column output would be
    // 2^31 columns of tiles for 2 outputs: hours).
    const double stride1 = (double(p.p - 1) * double(p.stride_h) + 1.0) *
                           (double(p.q - 1) * double(p.stride_w) + 1.0);
    if (stride1 > 64.0 * double(p.p) * double(p.q)) {
        // The ratio as a double: it may pass 2^63 (found by fuzzing), where an int64 cast is undefined.
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.3g", stride1 / (double(p.p) * double(p.q)));
        return "FFT_TILING computes every stride-1 output: with stride " + std::to_string(p.stride_h) + "x" +
               std::to_string(p.stride_w) + " that is " + ratio + " times the outputs (the limit is 64)";
    }
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
    constexpr int64_t BL = 2 * block<T>();     // elements of T per block
    const Layout<T> lay(g.f, g.m);
    const int64_t PU = lay.pu;                 // elements of T per spectrum per panel
    const int64_t rs = 2 * (g.tw / 2 + 1);     // row stride of a real tile (in place)
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const int64_t tiles = g.nth * g.ntw;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* xsp = reinterpret_cast<T*>(base + g.x_off);  // panels of [job in chunk][c]
    FilterDft<T> dft(g.th, g.tw, p.r, p.s, p.dil_h, p.dil_w);
    dft.init(reinterpret_cast<T*>(base + g.t_off));
    const Plan<T> plan = get_plan<T>(g.th, g.tw, 1, g.fp);
    const T scale = T(a.alpha) / T(double(g.th) * double(g.tw));
    const T beta = T(a.beta);
    // A task: KB filters of a group (their spectra in a per-thread block of at most
    // kFilterBlockBytes, at least two tasks per thread when the filters allow), then JS jobs at
    // a time (their output spectra in a per-thread block of at most kOutputBlockBytes).
    const double spec = lay.set_elems(1.0) * sizeof(T);
    const int64_t kb = std::max<int64_t>(
        1, std::min({kg, int64_t(kFilterBlockBytes / (double(cg) * spec)),
                     (kg * p.groups + 2 * threads - 1) / (2 * threads)}));
    const int64_t nkb = (kg + kb - 1) / kb;
    const int64_t js = std::max<int64_t>(1, std::min<int64_t>(g.jb, int64_t(kOutputBlockBytes / (double(kb) * spec))));

#pragma omp parallel num_threads(threads)
    {
        T* d = scratch<T>(size_t(2 * g.fp));
        T* ws = scratch<T>(size_t(lay.set_elems(double(kb * cg))), 2);  // panels of [k][c]
        T* ys = scratch<T>(size_t(lay.set_elems(double(js * kb))), 3);  // panels of [job][k]
        const int64_t wp = kb * cg * PU, yp = js * kb * PU;             // their panel strides
        for (int64_t j0 = 0; j0 < g.jobs; j0 += g.jb) {
            const int64_t jb = std::min(g.jb, g.jobs - j0);
            const int64_t xp = jb * p.c * PU;  // panel stride of the chunk's input spectra
            // input tiles of the chunk's jobs (image, tile row, tile column), per channel
#pragma omp for schedule(dynamic, 1)
            for (int64_t jc = 0; jc < jb * p.c; ++jc) {
                const int64_t job = j0 + jc / p.c, c = jc % p.c, n = job / tiles, t = job % tiles;
                const fftg::TileGrid tg = fftg::tile_grid(g.th, g.tw, g.rd, g.sd, g.ah, g.aw);
                const int64_t a0 = fftg::tile_row0(tg, t), b0 = fftg::tile_col0(tg, t);  // tile origin (padded coords)
                // rows / columns of the tile inside x
                const int64_t i_lo = std::max<int64_t>(0, p.pad_h - a0);
                const int64_t i_hi = std::min(g.th, p.pad_h + p.h - a0);
                const int64_t c_lo = std::max<int64_t>(0, p.pad_w - b0);
                const int64_t c_hi = std::min(g.tw, p.pad_w + p.w - b0);
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
                plan.forward(d);
                scatter_blocks(d, lay, xsp + jc * PU, xp);
            }
            // per task (group, KB filters), no barrier until the end of the chunk
#pragma omp for schedule(dynamic, 1)
            for (int64_t tk = 0; tk < p.groups * nkb; ++tk) {
                const int64_t grp = tk / nkb, k0 = tk % nkb * kb, kt = std::min(kb, kg - k0);
                const int64_t kbase = grp * kg + k0;
                // the filter spectra at the tile size, by the direct DFT
                dft.run(w + kbase * cg * p.r * p.s, kt * cg, p.flip, lay, ws, PU, wp);
                for (int64_t s0 = 0; s0 < jb; s0 += js) {
                    const int64_t st = std::min(js, jb - s0);
                    // Y(job, k) = sum_c X(job, c) conj(W(k, c)), panel by panel
                    for (int64_t ch = 0; ch < lay.np; ++ch) {
                        const Product<T> prod{xsp + ch * xp + (s0 * p.c + grp * cg) * PU, p.c * PU, PU, 0, BL,
                                              ws + ch * wp, cg * PU, PU, 0, BL,
                                              ys + ch * yp, kb * PU, PU, BL,
                                              st, kt, cg, 1, true};
                        product(prod, 0, lay.panel_blocks(ch));
                    }
                    // inverse per (job, filter); keep the tile's valid stride-1 outputs that
                    // fall on the stride grid
                    for (int64_t jk = 0; jk < st * kt; ++jk) {
                        const int64_t j = jk / kt, kk = jk % kt;
                        const int64_t job = j0 + s0 + j, n = job / tiles, t = job % tiles;
                        const fftg::TileGrid tg = fftg::tile_grid(g.th, g.tw, g.rd, g.sd, g.ah, g.aw);
                        const int64_t a0 = fftg::tile_row0(tg, t), b0 = fftg::tile_col0(tg, t);
                        gather_blocks(ys + (j * kb + kk) * PU, lay, yp, d);
                        plan.backward(d);
                        // outputs (i, q) with i*stride_h in [a0, a0 + oh), likewise q
                        const TapRange rows = fftg::tile_outputs(a0, g.oh, p.stride_h, p.p);
                        const TapRange cols = fftg::tile_outputs(b0, g.ow, p.stride_w, p.q);
                        const int64_t i_lo = rows.begin, i_hi = rows.end, q_lo = cols.begin, q_hi = cols.end;
                        T* out = y + (n * p.k + kbase + kk) * pq;
                        for (int64_t i = i_lo; i < i_hi; ++i) {
                            const T* row = d + (i * p.stride_h - a0) * rs - b0;
                            store_row(out + i * p.q + q_lo, row + q_lo * p.stride_w, q_hi - q_lo, p.stride_w,
                                      scale, beta);
                        }
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
const Solver fft_tiling_solver = {.algo = CONVCORE_FWD_ALGO_FFT_TILING, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .made_for = made_for::large_filters};

}  // namespace cpu
}  // namespace convcore
