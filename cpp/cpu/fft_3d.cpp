// The 3-D FFT convolution: see fft_3d.hpp (and cpu/fft.cpp, its 2-D form, for the block layout
// and the direct filter DFT).
//
// Schedule. (1) The input spectra X(n, c), one rank-3 r2c per volume. (2) Each depth tap's 2-D
// filter spectra W_t(k, c) (FilterDft). (3) Per task (a block of filters and a panel of the 2-D
// frequencies, the block's T tap panels held in L2), a few depth frequencies at a time: their
// panels of W(fd) = sum_t tw[fd][t] W_t in a per-thread buffer, then at once the products
// Y(fd)(n, k) = sum_c X(fd)(n, c) conj(W(fd)(k, c)): the full filter spectra (Ld/T times W_t's
// size) are never stored, and each is made once per call and used by every image. (4) One c2r
// per (image, filter), cropped and subsampled at the strides.
//
// Workspace (bytes, T = float or double, F2 = Lh*(Lw/2+1) rounded up to 64 bytes / sizeof(T)
// complex numbers): 64 + 2*sizeof(T)*F2*(Ld*N*C + T*K*C/g + Ld*N*K) (X, W_t and Y) + FilterDft's
// tables + the depth twiddles (2*Ld*T elements).
#include "cpu/fft_3d.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fft_geometry.hpp"
#include "cpu/cpu_isa.hpp"
#include "cpu/fft_family.hpp"

namespace convcore {
namespace cpu {
namespace fft_3d {

namespace {

using namespace fftc;

constexpr int64_t kDepthBatch = 4;  // depth frequencies whose W(fd) one pass over the tap spectra makes


struct Geometry {
    int64_t du, hu, wu;  // padded-input depths / rows / columns the outputs read
    int64_t ld, lh, lw;  // FFT size
    int64_t f2;          // complex numbers per 2-D slice of a spectrum
    int64_t m;           // the filter DFT's split (Layout)
    Carver ws;
    size_t x_off = 0, w_off = 0, y_off = 0, t_off = 0, z_off = 0;
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
    g.w_off = g.ws.add(double(dp.taps) * lay.set_elems(double(p.k) * double(p.c_per_group())), sizeof(T));
    g.y_off = g.ws.add(double(g.ld) * lay.set_elems(double(p.n) * double(p.k)), sizeof(T));
    g.t_off = g.ws.add(dft.table_elems(), sizeof(T));
    g.z_off = g.ws.add(2.0 * double(g.ld) * double(dp.taps), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p, const Depth& dp) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p, dp) : geometry<float>(p, dp);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVCORE_FFT3D_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CONVCORE_FFT3D_CLONES
#endif

// The DFT along the depth of T tap runs of 2-D spectra (`tstride` apart) into Ld runs (`ostride`
// apart): out_fd = sum_t tw[fd][t] * in_t over elements [0, len), block by block (B real parts,
// then B imaginary parts: one 64-byte vector each; the runs are 64-byte aligned). A block's T
// inputs stay in cache while its Ld outputs are made.
template <typename T>
inline __attribute__((always_inline)) void depth_dft_body(const T* in, int64_t tstride, int64_t taps, const T* tw,
                                                          int64_t ld, T* out, int64_t ostride, int64_t len) {
    constexpr int64_t B = block<T>();
    typedef T V __attribute__((vector_size(64)));  // one block's real (or imaginary) parts
    static_assert(sizeof(V) == B * sizeof(T), "a block is 64 bytes");
    for (int64_t e = 0; e < len; e += 2 * B)
        for (int64_t fd = 0; fd < ld; ++fd) {
            const T* z = tw + 2 * fd * taps;
            V re = {}, im = {};
            for (int64_t t = 0; t < taps; ++t) {
                const V* a = reinterpret_cast<const V*>(in + t * tstride + e);  // 64-byte aligned
                re += z[2 * t] * a[0] - z[2 * t + 1] * a[1];
                im += z[2 * t] * a[1] + z[2 * t + 1] * a[0];
            }
            V* o = reinterpret_cast<V*>(out + fd * ostride + e);
            o[0] = re;
            o[1] = im;
        }
}
CONVCORE_FFT3D_CLONES void depth_dft(const float* in, int64_t tstride, int64_t taps, const float* tw, int64_t ld,
                                     float* out, int64_t ostride, int64_t len) {
    depth_dft_body(in, tstride, taps, tw, ld, out, ostride, len);
}
CONVCORE_FFT3D_CLONES void depth_dft(const double* in, int64_t tstride, int64_t taps, const double* tw, int64_t ld,
                                     double* out, int64_t ostride, int64_t len) {
    depth_dft_body(in, tstride, taps, tw, ld, out, ostride, len);
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
    // Sets of 2-D spectra (fft_family.hpp's Layout): X Ld sets of [n][c], W_t T sets of [k][c],
    // Y Ld sets of [n][k]; each a panel stride (..p) and a set size (..set) apart.
    T* xsp = reinterpret_cast<T*>(base + g.x_off);
    T* wsp = reinterpret_cast<T*>(base + g.w_off);
    T* ysp = reinterpret_cast<T*>(base + g.y_off);
    const int64_t xp = p.n * p.c * PU, xset = lay.np * xp;
    const int64_t wp = p.k * cg * PU, wset = lay.np * wp;
    const int64_t yp = p.n * p.k * PU, yset = lay.np * yp;
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
    constexpr int64_t kDftFilters = 16;  // filters per FilterDft call
    const int64_t dft_chunks = (p.k * cg + kDftFilters - 1) / kDftFilters;
    // filters per task of (3): their panels of the T tap spectra and of kDepthBatch W(fd) in half
    // of L2 (the tap panels are read Ld / kDepthBatch times), at most a group
    const double panel_bytes = double(cache_bytes(2, 512 << 10)) / 2;
    const int64_t kb = std::max<int64_t>(
        1, std::min<int64_t>(kg, int64_t(panel_bytes / (double((taps + kDepthBatch) * cg * PU) * sizeof(T)))));
    const int64_t nkb = (kg + kb - 1) / kb;

#pragma omp parallel num_threads(threads)
    {
        T* d = scratch<T>(size_t(g.ld * slice));
        // 1. input spectra X(n, c)
#pragma omp for schedule(dynamic, 1) nowait
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
                if (xs[4] == 1)
                    std::memcpy(row + j0, in + j0, size_t(j1 - j0) * sizeof(T));
                else
                    for (int64_t j = j0; j < j1; ++j) row[j] = in[j * xs[4]];
                std::memset(row + j1, 0, size_t(rs - j1) * sizeof(T));
            }
            plan.forward(d);
            for (int64_t fd = 0; fd < g.ld; ++fd) scatter_blocks(d + fd * slice, lay, xsp + fd * xset + nc * PU, xp);
        }
        // 2. each depth tap's 2-D filter spectra W_t(k, c) (position t holds tap T-1-t in true
        // convolution; FilterDft mirrors R and S)
        T* gathered = scratch<T>(size_t(kDftFilters * rs_taps), 2);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < taps * dft_chunks; ++task) {
            const int64_t t = task / dft_chunks, i0 = task % dft_chunks * kDftFilters;
            const int64_t count = std::min(kDftFilters, p.k * cg - i0), tap = p.flip ? taps - 1 - t : t;
            for (int64_t i = 0; i < count; ++i)
                std::memcpy(gathered + i * rs_taps, w + ((i0 + i) * taps + tap) * rs_taps, size_t(rs_taps) * sizeof(T));
            dft.run(gathered, count, p.flip, lay, wsp + t * wset + i0 * PU, PU, wp);
        }
        // 3. per (group, filter block, panel), kDepthBatch depth frequencies at a time: their
        // W(fd) of the block's panel (each block of the T tap panels read once for all of them),
        // then Y(fd)(n, k) = sum_c X(fd)(n, c) conj(W(fd)(k, c)) on each
        const int64_t wb = kb * cg * PU;  // one W(fd) panel of a block
        T* wfd = scratch<T>(size_t(kDepthBatch * wb), 3);
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < p.groups * nkb * lay.np; ++task) {
            const int64_t ch = task % lay.np, grp = task / lay.np / nkb, k0 = task / lay.np % nkb * kb;
            const int64_t kt = std::min(kb, kg - k0), kbase = grp * kg + k0;
            for (int64_t fd0 = 0; fd0 < g.ld; fd0 += kDepthBatch) {
                const int64_t nf = std::min(kDepthBatch, g.ld - fd0);
                depth_dft(wsp + ch * wp + kbase * cg * PU, wset, taps, tw + 2 * fd0 * taps, nf, wfd, wb, kt * cg * PU);
                for (int64_t fd = fd0; fd < fd0 + nf; ++fd) {
                    const Product<T> prod{xsp + fd * xset + ch * xp + grp * cg * PU, p.c * PU, PU, 0, BL,
                                          wfd + (fd - fd0) * wb, cg * PU, PU, 0, BL,
                                          ysp + fd * yset + ch * yp + kbase * PU, p.k * PU, PU, BL,
                                          p.n, kt, cg, 1, true};
                    product(prod, 0, lay.panel_blocks(ch));
                }
            }
        }
        // 4. inverse, crop (and subsample at the strides), blend
#pragma omp for schedule(dynamic, 1)
        for (int64_t nk = 0; nk < p.n * p.k; ++nk) {
            for (int64_t fd = 0; fd < g.ld; ++fd) gather_blocks(ysp + fd * yset + nk * PU, lay, yp, d + fd * slice);
            plan.backward(d);
            T* out = y + nk / p.k * ys[0] + nk % p.k * ys[1];
            for (int64_t od = 0; od < dp.d_out; ++od)
                for (int64_t i = 0; i < p.p; ++i) {
                    const T* row = d + (od * dp.stride * g.lh + i * p.stride_h) * rs;
                    T* o = out + od * ys[2] + i * ys[3];
                    if (ys[4] == 1) {
                        store_row(o, row, p.q, p.stride_w, scale, beta);
                    } else if (beta == T(0)) {
                        for (int64_t j = 0; j < p.q; ++j) o[j * ys[4]] = scale * row[j * p.stride_w];
                    } else {
                        for (int64_t j = 0; j < p.q; ++j) o[j * ys[4]] = scale * row[j * p.stride_w] + beta * o[j * ys[4]];
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
