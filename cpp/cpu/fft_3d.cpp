// The 3-D FFT convolution: see fft_3d.hpp (and cpu/fft.cpp, its 2-D form, for the block layout,
// the task split and why the filter spectra are made per call by the direct DFT).
//
// Workspace (bytes, T = float or double, F2 = Lh*(Lw/2+1) rounded up to 64 bytes / sizeof(T)
// complex numbers): 64 + 2*sizeof(T)*Ld*F2*N*C (the input spectra) + FilterDft's tables + the
// depth twiddles (2*Ld*T elements).
#include "cpu/fft_3d.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fft_geometry.hpp"
#include "cpu/fft_family.hpp"

namespace convcore {
namespace cpu {
namespace fft_3d {

namespace {

using namespace fftc;

constexpr double kFilterBlockBytes = 2.0 * (1 << 20);  // a task's filter spectra (per thread)
constexpr double kOutputBlockBytes = 2.0 * (1 << 20);  // a task's output spectra (per thread)

struct Geometry {
    int64_t du, hu, wu;  // padded-input depths / rows / columns the outputs read
    int64_t ld, lh, lw;  // FFT size
    int64_t f2;          // complex numbers per 2-D slice of a spectrum
    int64_t m;           // the filter DFT's split (Layout)
    Carver ws;
    size_t x_off = 0, t_off = 0, z_off = 0;
};

template <typename T>
Geometry geometry(const ConvProblem& p, const Depth& dp) {
    Geometry g;
    g.du = fftg::used_extent(dp.d_out, dp.stride, dp.taps, dp.dil);
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.wu = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    // A volume past any workspace cap: say so before the sizes below leave int64.
    if (double(g.du) * double(g.hu) * double(g.wu) > double(kWorkspaceCap)) {
        g.ws.add(double(g.du) * double(g.hu) * double(g.wu), sizeof(T));
        return g;
    }
    g.ld = good_size(g.du);
    g.lh = good_size(g.hu);
    g.lw = good_size(g.wu, true);
    g.f2 = g.lh * (g.lw / 2 + 1);
    const FilterDft<T> dft(g.lh, g.lw, p.r, p.s, p.dil_h, p.dil_w);
    g.m = dft.split();
    const Layout<T> lay(g.f2, g.m);
    g.x_off = g.ws.add(double(g.ld) * lay.set_elems(double(p.n) * double(p.c)), sizeof(T));
    g.t_off = g.ws.add(dft.table_elems(), sizeof(T));
    g.z_off = g.ws.add(2.0 * double(g.ld) * double(dp.taps), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p, const Depth& dp) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p, dp) : geometry<float>(p, dp);
}

// Elements [0, len) of each panel of a set of 2-D spectra (panels `pstride` apart), block by
// block: out = sum_t tw_t * in_t, the T tap sets `tstride` apart (complex: blocks of B real parts,
// then B imaginary parts).
template <typename T>
void depth_dft(const T* in, int64_t tstride, int64_t taps, const T* tw, T* out, int64_t panels, int64_t pstride,
               int64_t len) {
    constexpr int64_t B = block<T>();
    for (int64_t ch = 0; ch < panels; ++ch)
        for (int64_t e = ch * pstride; e < ch * pstride + len; e += 2 * B) {
            T re[B], im[B];
            for (int64_t j = 0; j < B; ++j) re[j] = im[j] = T(0);
            for (int64_t t = 0; t < taps; ++t) {
                const T c = tw[2 * t], s = tw[2 * t + 1];
                const T* a = in + t * tstride + e;
                for (int64_t j = 0; j < B; ++j) {
                    re[j] += c * a[j] - s * a[B + j];
                    im[j] += c * a[B + j] + s * a[j];
                }
            }
            std::memcpy(out + e, re, sizeof(re));
            std::memcpy(out + e + B, im, sizeof(im));
        }
}

template <typename T>
void run_typed(const ConvProblem& p, const Context& ctx, const Depth& dp, const T* x, const int64_t xs[5],
               const T* w, T* y, const int64_t ys[5], double alpha, double beta_d, void* workspace) {
    const Geometry g = geometry<T>(p, dp);
    const int threads = ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group(), taps = dp.taps, rs_taps = p.r * p.s;
    constexpr int64_t BL = 2 * block<T>();
    const Layout<T> lay(g.f2, g.m);
    const int64_t PU = lay.pu;
    const int64_t rs = 2 * (g.lw / 2 + 1);  // row stride of a real volume (in place)
    const int64_t slice = 2 * g.f2;         // elements of T per depth slice (= g.lh * rs)
    char* base = aligned_base(workspace);
    T* xsp = reinterpret_cast<T*>(base + g.x_off);  // Ld 2-D sets of [n][c]
    const int64_t xp = p.n * p.c * PU, xset = lay.np * xp;
    FilterDft<T> dft(g.lh, g.lw, p.r, p.s, p.dil_h, p.dil_w);
    dft.init(reinterpret_cast<T*>(base + g.t_off));
    // tw[fd][t] = exp(-2 pi i fd t dil_d / Ld): tap t sits at depth t * dil_d of the volume
    T* tw = reinterpret_cast<T*>(base + g.z_off);
    for (int64_t fd = 0; fd < g.ld; ++fd)
        for (int64_t t = 0; t < taps; ++t) {
            const double angle = 2.0 * M_PI * double(fd * t * dp.dil % g.ld) / double(g.ld);
            tw[2 * (fd * taps + t)] = T(std::cos(angle));
            tw[2 * (fd * taps + t) + 1] = T(-std::sin(angle));
        }
    const Plan<T> plan = get_plan_3d<T>(g.ld, g.lh, g.lw);
    const T scale = T(alpha) / T(double(g.ld) * double(g.lh) * double(g.lw));
    const T beta = T(beta_d);
    const int64_t d_in = dp.d_in, j0 = std::min(p.pad_w, g.wu), j1 = std::min(g.wu, p.pad_w + p.w);
    // Tasks as in cpu/fft.cpp: KB filters of a group, then NB images at a time.
    const double spec = double(g.ld) * lay.set_elems(1.0) * sizeof(T);
    const int64_t kb = std::max<int64_t>(
        1, std::min({kg, int64_t(kFilterBlockBytes / (double(cg) * spec)),
                     (kg * p.groups + 2 * threads - 1) / (2 * threads)}));
    const int64_t nkb = (kg + kb - 1) / kb;
    const int64_t nb = std::max<int64_t>(1, std::min<int64_t>(p.n, int64_t(kOutputBlockBytes / (double(kb) * spec))));

#pragma omp parallel num_threads(threads)
    {
        T* d = scratch<T>(size_t(g.ld * slice));
        // 1. input spectra X(n, c)
#pragma omp for schedule(dynamic, 1)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
            const T* src = x + nc / p.c * xs[0] + nc % p.c * xs[1];
            for (int64_t i = 0; i < g.ld * g.lh; ++i) {
                T* row = d + i * rs;
                const int64_t id = i / g.lh, ih = i % g.lh;  // padded coordinates
                const int64_t sd = id - dp.pad, sh = ih - p.pad_h;
                if (id >= g.du || sd < 0 || sd >= d_in || ih >= g.hu || sh < 0 || sh >= p.h || j1 <= j0) {
                    std::memset(row, 0, size_t(rs) * sizeof(T));
                    continue;
                }
                const T* in = src + sd * xs[2] + sh * xs[3] - p.pad_w * xs[4];
                std::memset(row, 0, size_t(j0) * sizeof(T));
                for (int64_t j = j0; j < j1; ++j) row[j] = in[j * xs[4]];
                std::memset(row + j1, 0, size_t(rs - j1) * sizeof(T));
            }
            plan.forward(d);
            for (int64_t fd = 0; fd < g.ld; ++fd) scatter_blocks(d + fd * slice, lay, xsp + fd * xset + nc * PU, xp);
        }

        // 2. per task (group, KB filters), no barrier until the end:
        const int64_t wp = kb * cg * PU, wset = lay.np * wp;  // a block's 2-D set: panel stride, size
        const int64_t yp = nb * kb * PU, yset = lay.np * yp;
        // the Ld depth slices of the block's spectra, then each tap's 2-D spectra, then one tap's
        // filters gathered for FilterDft
        T* wsp = scratch<T>(size_t((g.ld + taps) * wset + kb * cg * rs_taps), 2);
        T* tap_spectra = wsp + g.ld * wset;
        T* tap_filters = tap_spectra + taps * wset;
        T* ysp = scratch<T>(size_t(g.ld * yset), 3);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < p.groups * nkb; ++task) {
            const int64_t grp = task / nkb, k0 = task % nkb * kb, kt = std::min(kb, kg - k0);
            const int64_t kbase = grp * kg + k0;
            // the filter spectra W(k, c): each depth tap's 2-D spectra (position t holds tap
            // T-1-t in true convolution), then the DFT along the depth
            for (int64_t t = 0; t < taps; ++t) {
                const int64_t tap = p.flip ? taps - 1 - t : t;
                for (int64_t i = 0; i < kt * cg; ++i)
                    std::memcpy(tap_filters + i * rs_taps, w + ((kbase * cg + i) * taps + tap) * rs_taps,
                                size_t(rs_taps) * sizeof(T));
                dft.run(tap_filters, kt * cg, p.flip, lay, tap_spectra + t * wset, PU, wp);
            }
            for (int64_t fd = 0; fd < g.ld; ++fd)
                depth_dft(tap_spectra, wset, taps, tw + 2 * fd * taps, wsp + fd * wset, lay.np, wp, kt * cg * PU);
            for (int64_t n0 = 0; n0 < p.n; n0 += nb) {
                const int64_t nt = std::min(nb, p.n - n0);
                // Y(n, k) = sum_c X(n, c) conj(W(k, c)), slice by slice, panel by panel
                for (int64_t fd = 0; fd < g.ld; ++fd)
                    for (int64_t ch = 0; ch < lay.np; ++ch) {
                        const Product<T> prod{xsp + fd * xset + ch * xp + (n0 * p.c + grp * cg) * PU, p.c * PU, PU, 0, BL,
                                              wsp + fd * wset + ch * wp, cg * PU, PU, 0, BL,
                                              ysp + fd * yset + ch * yp, kb * PU, PU, BL,
                                              nt, kt, cg, 1, true};
                        product(prod, 0, lay.panel_blocks(ch));
                    }
                // inverse, crop (and subsample at the strides), blend
                for (int64_t nk = 0; nk < nt * kt; ++nk) {
                    const int64_t n = nk / kt, kk = nk % kt;
                    for (int64_t fd = 0; fd < g.ld; ++fd) gather_blocks(ysp + fd * yset + (n * kb + kk) * PU, lay, yp, d + fd * slice);
                    plan.backward(d);
                    T* out = y + (n0 + n) * ys[0] + (kbase + kk) * ys[1];
                    for (int64_t od = 0; od < dp.d_out; ++od)
                        for (int64_t i = 0; i < p.p; ++i) {
                            const T* row = d + (od * dp.stride * g.lh + i * p.stride_h) * rs;
                            T* o = out + od * ys[2] + i * ys[3];
                            if (ys[4] == 1) {
                                store_row(o, row, p.q, p.stride_w, scale, beta);
                            } else if (beta == T(0)) {
                                for (int64_t j = 0; j < p.q; ++j) o[j * ys[4]] = scale * row[j * p.stride_w];
                            } else {
                                for (int64_t j = 0; j < p.q; ++j)
                                    o[j * ys[4]] = scale * row[j * p.stride_w] + beta * o[j * ys[4]];
                            }
                        }
                }
            }
        }
    }
}

}  // namespace

std::string why_not(const ConvProblem& p, const Depth& depth) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FFT runs float32 and float64 only";
    const Geometry g = geometry_of(p, depth);
    if (g.ws.overflow() || g.ws.total() > double(kWorkspaceCap)) return too_big("FFT", g.ws.total());
    if (double(g.ld) * double(g.lh) * double(g.lw) > 2147483647.0)
        return "FFT: a transform volume past FFTW's 32-bit sizes";
    return "";
}

size_t workspace_bytes(const ConvProblem& p, const Depth& depth) { return size_t(geometry_of(p, depth).ws.total()); }

void forward(const ConvProblem& p, const Context& ctx, const Depth& depth, const void* x, const int64_t x_strides[5],
             const void* w, void* y, const int64_t y_strides[5], double alpha, double beta, void* workspace) {
    if (p.dtype == CONVCORE_DATA_DOUBLE)
        run_typed(p, ctx, depth, static_cast<const double*>(x), x_strides, static_cast<const double*>(w),
                  static_cast<double*>(y), y_strides, alpha, beta, workspace);
    else
        run_typed(p, ctx, depth, static_cast<const float*>(x), x_strides, static_cast<const float*>(w),
                  static_cast<float*>(y), y_strides, alpha, beta, workspace);
}

}  // namespace fft_3d
}  // namespace cpu
}  // namespace convcore
