// FINE_GRAINED_FFT on the CPU: the fine-grained FFT convolution of Zhang, Li, Xu, Li & Jiang
// (Electronics 2024, extending PACT'20; paper 003). The im2col matrix is doubly block Hankel
// (Section 4.5): its blocks are Hankel matrices built from single input rows, so each block
// times a filter row is a 1D convolution, computed through a circulant embedding and 1D FFTs
// (Sections 5.1-5.2, Eq. 7-8), and the block products are summed in the frequency domain before
// one inverse transform per output row (Section 5.3):
//
//   1. input transform: one real FFT of length L per padded input row (Step 1);
//   2. kernel transform: one real FFT of length L per filter row (Step 2);
//   3. per output row p of filter k:  Y(p, k) = sum_c sum_r X(c, p*stride + r*dil) * conj(W(k, c, r))
//      over the L/2+1 Hermitian half-spectrum (Step 3; Section 5.4). The paper multiplies
//      element-wise per Hankel block; here the (c, r) reduction runs inside the shared
//      register-tiled complex product kernel, tiles of 8 filters x 1 row or 4 x 2;
//   4. one inverse FFT of length L per output row; its first Q entries (every stride-th) are the
//      outputs (Step 4).
//
// L is the smallest even 2^a 3^b 5^c 7^d >= Wu (the padded-input columns the outputs read),
// not the paper's NextPowerTwo(2Q): conj(W) turns the cyclic product into a cross-correlation
// whose first Q entries read columns q + s*dil <= Wu - 1 < L, so no wrap reaches them, and
// the circulant only needs to hold one row. Row stride and row dilation are exact (only the
// needed rows are multiplied); column stride is computed at stride 1 and subsampled; column
// dilation places the filter taps dil apart. True convolution mirrors the filter. Gauss's
// 3-multiplication complex product (Section 5.4) is not used: with FMA units, 4 FMAs beat
// 3 multiplies + 5 additions.
//
// Images go in chunks of NB (input and output row spectra of about 32 MiB). Workspace (bytes,
// Fp = L/2+1 rounded up to 64 bytes / sizeof(T) complex numbers, R = filter rows):
//   64 + 2*sizeof(T)*Fp * (K*C/g*R + NB*(C*Hu + K*P)).
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

constexpr double kChunkBytes = 32.0 * (1 << 20);
constexpr int64_t KT = 16;  // filters per task
constexpr int64_t PT = 8;   // output rows per task

struct Geometry {
    int64_t sd;      // dilated filter width
    int64_t hu, wu;  // padded-input rows / columns the outputs read
    int64_t len;     // row FFT length L
    int64_t f, fp;   // complex numbers per row spectrum; rounded up to whole blocks
    int64_t nb;      // images per chunk
    Carver ws;
    size_t w_off, x_off, y_off, t_off;
};

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.sd = fftg::dilated_extent(p.s, p.dil_w);
    g.hu = fftg::used_extent(p.p, p.stride_h, p.r, p.dil_h);
    g.wu = fftg::used_extent(p.q, p.stride_w, p.s, p.dil_w);
    g.len = good_size(g.wu, true);
    g.f = g.len / 2 + 1;
    g.fp = padded<T>(g.f);
    const double row = 2.0 * double(g.fp) * sizeof(T);
    const double per_image = (double(p.c) * double(g.hu) + double(p.k) * double(p.p)) * row;
    g.nb = std::max<int64_t>(1, std::min<int64_t>(p.n, int64_t(kChunkBytes / per_image)));
    const Layout<T> lay(g.f);
    g.w_off = g.ws.add(lay.set_elems(double(p.k) * double(p.c_per_group()) * double(p.r)), sizeof(T));
    g.x_off = g.ws.add(lay.set_elems(double(g.nb) * double(p.c) * double(g.hu)), sizeof(T));
    g.y_off = g.ws.add(lay.set_elems(double(g.nb) * double(p.k) * double(p.p)), sizeof(T));
    g.t_off = g.ws.add(FilterDft<T>(g.len, 0, 1, p.s, 1, p.dil_w).table_elems(), sizeof(T));
    return g;
}

Geometry geometry_of(const ConvProblem& p) {
    return p.dtype == CONVCORE_DATA_DOUBLE ? geometry<double>(p) : geometry<float>(p);
}

std::string why_not(const ConvProblem& p) {
    if (p.dtype != CONVCORE_DATA_FLOAT && p.dtype != CONVCORE_DATA_DOUBLE)
        return "FINE_GRAINED_FFT runs float32 and float64 only";
    const Geometry g = geometry_of(p);
    if (g.ws.overflow() || g.ws.total() > double(kWorkspaceCap))
        return too_big("FINE_GRAINED_FFT", g.ws.total());
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
    const int64_t PU = lay.pu;              // elements of T per row spectrum per panel
    const int64_t row = 2 * g.fp;           // elements of T per row in the scratch
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* wsp = reinterpret_cast<T*>(base + g.w_off);  // panels of [k][c in group][filter row]
    T* xsp = reinterpret_cast<T*>(base + g.x_off);  // panels of [image in chunk][c][input row]
    T* ysp = reinterpret_cast<T*>(base + g.y_off);  // panels of [image in chunk][k][output row]
    FilterDft<T> dft(g.len, 0, 1, p.s, 1, p.dil_w);
    dft.init(reinterpret_cast<T*>(base + g.t_off));
    const Plan<T> in_plan = get_plan<T>(g.len, 0, g.hu, g.fp);
    const Plan<T> out_plan = get_plan<T>(g.len, 0, std::min<int64_t>(PT, p.p), g.fp);
    const Plan<T> out_tail = get_plan<T>(g.len, 0, p.p % PT ? p.p % PT : 1, g.fp);
    const T scale = T(a.alpha) / T(g.len);
    const T beta = T(a.beta);
    const int64_t j0 = std::min(p.pad_w, g.wu), j1 = std::min(g.wu, p.pad_w + p.w);  // x columns
    const int64_t ktiles = (kg + KT - 1) / KT, ptiles = (p.p + PT - 1) / PT;
    const int64_t w_rows = p.k * cg * p.r;
    constexpr int64_t KC = 8;  // filters (k, c) per kernel-transform task

#pragma omp parallel num_threads(threads)
    {
        T* d = scratch<T>(size_t(std::max(g.hu, PT) * row));
        // kernel transform: the spectrum of each filter row by the direct DFT (taps dil apart;
        // true convolution mirrors the rows' order and each row)
#pragma omp for schedule(dynamic, 1)
        for (int64_t kc0 = 0; kc0 < p.k * cg; kc0 += KC) {
            for (int64_t kc = kc0; kc < std::min(kc0 + KC, p.k * cg); ++kc) {
                T* first = wsp + (kc * p.r + (p.flip ? p.r - 1 : 0)) * PU;
                dft.run(w + kc * p.r * p.s, p.r, p.flip, lay, first, p.flip ? -PU : PU, w_rows * PU);
            }
        }

        for (int64_t n0 = 0; n0 < p.n; n0 += g.nb) {
            const int64_t nb = std::min(g.nb, p.n - n0);
            const int64_t xp = nb * p.c * g.hu * PU, yp = nb * p.k * p.p * PU;  // panel strides
            // input transform: one FFT per padded input row
#pragma omp for schedule(dynamic, 1)
            for (int64_t nc = 0; nc < nb * p.c; ++nc) {
                const T* src = x + (n0 * p.c + nc) * hw;
                for (int64_t i = 0; i < g.hu; ++i) {
                    T* rr = d + i * row;
                    const int64_t ih = i - p.pad_h;
                    if (ih < 0 || ih >= p.h || j1 <= j0) {
                        std::memset(rr, 0, size_t(2 * g.f) * sizeof(T));
                        continue;
                    }
                    std::memset(rr, 0, size_t(j0) * sizeof(T));
                    std::memcpy(rr + j0, src + ih * p.w, size_t(j1 - j0) * sizeof(T));
                    std::memset(rr + j1, 0, size_t(2 * g.f - j1) * sizeof(T));
                }
                in_plan.forward(d);
                for (int64_t i = 0; i < g.hu; ++i)
                    scatter_blocks(d + i * row, lay, xsp + (nc * g.hu + i) * PU, xp);
            }
            // per task (image, group, KT filters, PT output rows): the (c, r) reduction in the
            // frequency domain, then the rows' inverse FFTs, crop and blend
#pragma omp for schedule(dynamic, 1) collapse(2)
            for (int64_t ng = 0; ng < nb * p.groups; ++ng) {
                for (int64_t t = 0; t < ktiles * ptiles; ++t) {
                    const int64_t nn = ng / p.groups, grp = ng % p.groups;
                    const int64_t k0 = t / ptiles * KT, p0 = t % ptiles * PT;
                    const int64_t kt = std::min(KT, kg - k0), pt = std::min(PT, p.p - p0);
                    const int64_t kbase = grp * kg + k0;
                    const int64_t yrow0 = (nn * p.k + kbase) * p.p + p0;  // row (k0, p0) of Y
                    for (int64_t ch = 0; ch < lay.np; ++ch) {
                        const Product<T> prod{
                            // row p0 * stride_h + r * dil_h for output row p0 + i, filter row r
                            xsp + ch * xp + ((nn * p.c + grp * cg) * g.hu + fftg::fg_input_row(p0, 0, p.stride_h, p.dil_h)) * PU,
                            p.stride_h * PU, g.hu * PU, p.dil_h * PU, BL,
                            wsp + ch * w_rows * PU + kbase * cg * p.r * PU, cg * p.r * PU, p.r * PU, PU, BL,
                            ysp + ch * yp + yrow0 * PU, PU, p.p * PU, BL,
                            pt, kt, cg, p.r, true};
                        product(prod, 0, lay.panel_blocks(ch));
                    }
                    const Plan<T>& inv = pt == PT || pt == p.p ? out_plan : out_tail;
                    for (int64_t k = 0; k < kt; ++k) {
                        for (int64_t i = 0; i < pt; ++i)
                            gather_blocks(ysp + (yrow0 + k * p.p + i) * PU, lay, yp, d + i * row);
                        inv.backward(d);
                        T* out = y + ((n0 + nn) * p.k + kbase + k) * pq + p0 * p.q;
                        for (int64_t i = 0; i < pt; ++i) {
                            const T* rr = d + i * row;
                            T* o = out + i * p.q;
                            store_row(o, rr, p.q, p.stride_w, scale, beta);
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

extern const Solver fine_grained_fft_solver;
const Solver fine_grained_fft_solver = {.algo = CONVCORE_FWD_ALGO_FINE_GRAINED_FFT,
    .device = CONVCORE_DEVICE_CPU, .why_not = why_not, .workspace_bytes = workspace_bytes,
    .forward = run, .made_for = made_for::large_filters};

}  // namespace cpu
}  // namespace convcore
