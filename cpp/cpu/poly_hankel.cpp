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
#include "cpu/fft_plan_cache.hpp"

namespace convcore {
namespace cpu {

namespace {

using namespace fftc;

constexpr double kFilterBlockBytes = 8.0 * (1 << 20);

struct Geometry {
    int64_t kh, kw;  // dilated filter extent
    int64_t hu, iw;  // padded-input rows / columns (the row stride) the outputs read
    int64_t len;     // cyclic length L
    int64_t f, fp;   // complex numbers per spectrum; rounded up to whole blocks
    int64_t kb;      // filters per block
    Carver ws;
    size_t x_off, w_off, y_off;
};

template <typename T>
Geometry geometry(const ConvProblem& p) {
    Geometry g;
    g.kh = p.dil_h * (p.r - 1) + 1;
    g.kw = p.dil_w * (p.s - 1) + 1;
    g.hu = (p.p - 1) * p.stride_h + g.kh;
    g.iw = (p.q - 1) * p.stride_w + g.kw;
    g.len = good_size(g.hu * g.iw, true);
    g.f = g.len / 2 + 1;
    g.fp = padded<T>(g.f);
    const double per_filter = double(p.c_per_group()) * 2.0 * double(g.fp) * sizeof(T);
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
    const int64_t plane = 2 * g.fp;  // elements of T per spectrum
    const int64_t hw = p.h * p.w, pq = p.p * p.q;
    const int64_t nblocks = g.fp / block<T>();
    const T* x = static_cast<const T*>(a.x);
    const T* w = static_cast<const T*>(a.w);
    T* y = static_cast<T*>(a.y);
    char* base = aligned_base(a.workspace);
    T* xs = reinterpret_cast<T*>(base + g.x_off);
    T* ws = reinterpret_cast<T*>(base + g.w_off);
    T* ys = reinterpret_cast<T*>(base + g.y_off);
    const Plan<T> plan = get_plan<T>(g.len, 0, 1, g.fp);
    const T scale = T(a.alpha) / T(g.len);
    const T beta = T(a.beta);
    const int64_t chunk = std::max<int64_t>(1, nblocks / (4 * int64_t(threads)));
    const int64_t j0 = std::min(p.pad_w, g.iw), j1 = std::min(g.iw, p.pad_w + p.w);  // x columns

#pragma omp parallel num_threads(threads)
    {
        // 1. A(t) per (image, channel): the padded plane flattened with row stride Iw (Eq. 10)
#pragma omp for schedule(dynamic, 1)
        for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
            T* d = xs + nc * plane;
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
            to_blocks(d, g.f);
        }

        for (int64_t grp = 0; grp < p.groups; ++grp) {
            for (int64_t k0 = 0; k0 < kg; k0 += g.kb) {
                const int64_t kb = std::min(g.kb, kg - k0);
                const int64_t kbase = grp * kg + k0;
                // 2. U(t) per (filter, channel) from the reversed (dilated) filter, Eq. 11
                //    corrected: u[i][j] -> t^(Iw*(Kh-1-i) + Kw-1-j)
#pragma omp for schedule(dynamic, 1)
                for (int64_t kc = 0; kc < kb * cg; ++kc) {
                    T* d = ws + kc * plane;
                    std::memset(d, 0, size_t(2 * g.f) * sizeof(T));
                    const T* src = w + (kbase * cg + kc) * p.r * p.s;
                    for (int64_t r = 0; r < p.r; ++r)
                        for (int64_t s = 0; s < p.s; ++s) {
                            const int64_t fr = p.flip ? p.r - 1 - r : r;
                            const int64_t fs = p.flip ? p.s - 1 - s : s;
                            const int64_t i = r * p.dil_h, j = s * p.dil_w;
                            d[g.iw * (g.kh - 1 - i) + (g.kw - 1 - j)] = src[fr * p.s + fs];
                        }
                    plan.forward(d);
                    to_blocks(d, g.f);
                }
                // 3. sum over channels of A_c(t) U_kc(t), per frequency block
                Product<T> prod{xs + grp * cg * plane, p.c * plane, plane, 0,
                                ws, cg * plane, plane, 0,
                                ys, kb * plane, plane,
                                p.n, kb, cg, 1, false};
#pragma omp for schedule(dynamic, 1)
                for (int64_t b = 0; b < nblocks; b += chunk) product(prod, b, std::min(nblocks, b + chunk));
                // 4. inverse; d[i][j] = p[Iw*(i + Kh-1) + j + Kw-1] (Eq. 12), subsampled for stride
#pragma omp for schedule(dynamic, 1)
                for (int64_t nk = 0; nk < p.n * kb; ++nk) {
                    T* d = ys + nk * plane;
                    from_blocks(d, g.f);
                    plan.backward(d);
                    const int64_t n = nk / kb, k = kbase + nk % kb;
                    T* out = y + (n * p.k + k) * pq;
                    for (int64_t i = 0; i < p.p; ++i) {
                        const T* row = d + g.iw * (i * p.stride_h + g.kh - 1) + g.kw - 1;
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

extern const Solver poly_hankel_solver;
const Solver poly_hankel_solver = {CONVCORE_FWD_ALGO_POLY_HANKEL, CONVCORE_DEVICE_CPU,
                                   /*deterministic=*/true, why_not, workspace_bytes, run};

}  // namespace cpu
}  // namespace convcore
