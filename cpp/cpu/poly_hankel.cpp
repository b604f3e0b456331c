// POLY_HANKEL on the CPU: PolyHankel (Xu, Zhang, Cheng & Li, CGO'25, paper 000), convolution as
// one 1D polynomial product per (image, channel) solved with FFTs (FFTW, real-to-complex).
//
// The padded input plane (Hu x Wu: the padded-input rows and columns the outputs read) is
// flattened with row stride Iw = Wu into the coefficients of A(t) (Eq. 10). The filter
// polynomial comes from the reversed filter (Section 2.2, Eq. 11 corrected):
//   U(t) = sum_{i,j} u[i][j] t^(Iw*(Kh-1-i) + (Kw-1-j)),
// and the outputs are the coefficients d[i][j] = p[Iw*(i + Kh-1) + j + Kw-1] of
// P(t) = A(t) U(t) (Eq. 12). The paper's Eq. 11 as printed, t^(-Iw*i - j + Iw*Kh - Oh - 1), is
// off by one (and names Oh where Ow belongs); tests/cpp/test_fft_family.cpp checks both by
// exact polynomial products. A cyclic product of any length L >= Hu*Wu is exact at the
// output coefficients: wrapped-around terms land below the first output index
// Iw*(Kh-1) + Kw-1, and the last output index is Hu*Wu - 1. So, unlike the paper's Eq. 14
// (linear product, both operands zero-padded to N+M-1), no padding beyond the spatial padding
// is needed, and L is the smallest even 2^a 3^b 5^c 7^d >= Hu*Wu.
//
// Channels (Section 3.2): one FFT per (image, channel) and per (filter, channel); the products
// are summed over the channels of the group in the frequency domain (the shared register-tiled
// complex product, L/2+1 Hermitian half-spectrum) and one inverse FFT per (image, filter)
// gives the outputs. Kh x Kw is the dilated filter (taps dil apart); true convolution mirrors
// the taps; stride > 1 is computed at stride 1 and subsampled. The output positions j in
// [Ow, Iw) of every row of P(t) are computed and discarded, as in the paper.
//
// Filters go in blocks of KB (an ~8 MiB slab of filter spectra). Workspace (bytes,
// Fp = L/2+1 rounded up to 64 bytes / sizeof(T) complex numbers):
//   64 + 2*sizeof(T)*Fp * (N*C + KB*C/g + N*KB).
#include <omp.h>

#include <algorithm>
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
    int64_t kh, kw;  // dilated filter extent
    int64_t hu, iw;  // padded-input rows / columns (the row stride) the outputs read
    int64_t len;     // cyclic length L
    int64_t f, fp;   // complex numbers per spectrum; rounded up to whole blocks
    Carver ws;
    size_t x_off;
};

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.kh = fftg::dilated_extent(p.r, p.dil_h);
    g.kw = fftg::dilated_extent(p.s, p.dil_w);
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.iw = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    // An image past any workspace cap: say so (why_not) before the sizes below leave int64.
    // One plane of it is a lower bound of the workspace.
    if (double(g.hu) * double(g.iw) > double(kWorkspaceCap)) {
        g.ws.add(double(g.hu) * double(g.iw), sizeof(T));
        return g;
    }
    g.len = good_size(g.hu * g.iw, true);
    g.f = g.len / 2 + 1;
    g.fp = padded<T>(g.f);
    const Layout<T> lay(g.f);
    g.x_off = g.ws.add(lay.set_elems(double(p.n) * double(p.c)), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p) : geometry<float>(p);
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "POLY_HANKEL runs float32 and float64 only";
    const Geometry g = geometry_of(p);
    if (g.ws.overflow() || g.ws.total() > double(kWorkspaceCap))
        return too_big("POLY_HANKEL", g.ws.total());
    return "";
}

size_t workspace_bytes(const ConvProblem& p) { return size_t(geometry_of(p).ws.total()); }

template <typename T>
void run_typed(const ConvArgs& a) {
    const ConvProblem& p = a.prob;
    const Geometry g = geometry<T>(p);
    const int threads = a.ctx.threads();
    const int64_t cg = p.c_per_group(), kg = p.k_per_group();
    constexpr int64_t BL = 2 * block<T>();  // elements of T per block
    const Layout<T> lay(g.f);
    const int64_t PU = lay.pu;              // elements of T per spectrum per panel
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* xs = reinterpret_cast<T*>(base + g.x_off);  // panels of [n][c]
    const int64_t xp = p.n * p.c * PU;             // its panel stride
    const Plan<T> plan = get_plan<T>(g.len, 0, 1, g.fp);
    const T scale = T(a.alpha) / T(g.len);
    const T beta = T(a.beta);
    const int64_t j0 = std::min(p.pad_w, g.iw), j1 = std::min(g.iw, p.pad_w + p.w);  // x columns
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
        // 1. A(t) per (image, channel): the padded plane flattened with row stride Iw (Eq. 10)
#pragma omp for schedule(dynamic, 1)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
            const T* src = x + nc * hw;
            for (int64_t i = 0; i < g.hu; ++i) {
                T* row = d + i * g.iw;
                const int64_t ih = i - p.pad_h;
                if (ih < 0 || ih >= p.h || j1 <= j0) {
                    std::memset(row, 0, size_t(g.iw) * sizeof(T));
                    continue;
                }
                std::memset(row, 0, size_t(j0) * sizeof(T));
                std::memcpy(row + j0, src + ih * p.w, size_t(j1 - j0) * sizeof(T));
                std::memset(row + j1, 0, size_t(g.iw - j1) * sizeof(T));
            }
            std::memset(d + g.hu * g.iw, 0, size_t(2 * g.f - g.hu * g.iw) * sizeof(T));
            plan.forward(d);
            scatter_blocks(d, lay, xs + nc * PU, xp);
        }

        // 2. per task (group, KB filters), no barrier until the end
        T* ws = scratch<T>(size_t(lay.set_elems(double(kb * cg))), 2);  // panels of [k][c]
        T* ys = scratch<T>(size_t(lay.set_elems(double(nb * kb))), 3);  // panels of [n][k]
        const int64_t wp = kb * cg * PU, yp = nb * kb * PU;             // their panel strides
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < p.groups * nkb; ++t) {
            const int64_t grp = t / nkb, k0 = t % nkb * kb, kt = std::min(kb, kg - k0);
            const int64_t kbase = grp * kg + k0;
            // U(t) per (filter, channel) from the reversed (dilated) filter, Eq. 11 corrected:
            // u[i][j] -> t^(Iw*(Kh-1-i) + Kw-1-j)
            for (int64_t kc = 0; kc < kt * cg; ++kc) {
                std::memset(d, 0, size_t(2 * g.f) * sizeof(T));
                const T* src = w + (kbase * cg + kc) * p.r * p.s;
                for (int64_t r = 0; r < p.r; ++r)
                    for (int64_t s = 0; s < p.s; ++s) {
                        const int64_t fr = p.flip ? p.r - 1 - r : r;
                        const int64_t fs = p.flip ? p.s - 1 - s : s;
                        const int64_t i = r * p.dil_h, j = s * p.dil_w;
                        d[fftg::poly_filter_exponent(g.iw, g.kh, g.kw, i, j)] = src[fr * p.s + fs];
                    }
                plan.forward(d);
                scatter_blocks(d, lay, ws + kc * PU, wp);
            }
            for (int64_t n0 = 0; n0 < p.n; n0 += nb) {
                const int64_t nt = std::min(nb, p.n - n0);
                // 3. sum over channels of A_c(t) U_kc(t), panel by panel
                for (int64_t ch = 0; ch < lay.np; ++ch) {
                    const Product<T> prod{xs + ch * xp + (n0 * p.c + grp * cg) * PU, p.c * PU, PU, 0, BL,
                                          ws + ch * wp, cg * PU, PU, 0, BL,
                                          ys + ch * yp, kb * PU, PU, BL,
                                          nt, kt, cg, 1, false};
                    product(prod, 0, lay.panel_blocks(ch));
                }
                // 4. inverse; d[i][j] = p[Iw*(i + Kh-1) + j + Kw-1] (Eq. 12), subsampled for stride
                for (int64_t nk = 0; nk < nt * kt; ++nk) {
                    const int64_t n = nk / kt, kk = nk % kt;
                    gather_blocks(ys + (n * kb + kk) * PU, lay, yp, d);
                    plan.backward(d);
                    T* out = y + ((n0 + n) * p.k + kbase + kk) * pq;
                    for (int64_t i = 0; i < p.p; ++i)
                        store_row(out + i * p.q, d + fftg::poly_output_index(g.iw, g.kh, g.kw, i * p.stride_h, 0),
                                  p.q, p.stride_w, scale, beta);
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

extern const Solver poly_hankel_solver;
const Solver poly_hankel_solver = {.algo = CONVCORE_FWD_ALGO_POLY_HANKEL, .device = CONVCORE_DEVICE_CPU,
    .why_not = why_not, .workspace_bytes = workspace_bytes, .forward = run,
    .made_for = made_for::large_filters};

}  // namespace cpu
}  // namespace convcore
