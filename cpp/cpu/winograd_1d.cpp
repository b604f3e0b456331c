// F(m,3) along W for a 1x3 filter (along H for a 3x1 one): Lavin & Gray's Algorithm 1 in one dimension, run by the 1-D
// bilinear path (cpu/bilinear_1d.hpp) with the generated tables (tools/gen_winograd.py):
// - stride 1: F(2,3) / F(4,3), a = m + 2 multiplications per m outputs against 3m (F(4,3): 1.5 per
//   output against 3, half the multiplications of the direct sum);
// - stride 2: the polyphase split (the decomposable Winograd method: Huang et al., "DWM: A
//   Decomposable Winograd Method for Convolution Acceleration", AAAI 2020). y_t = w0 x_{2t} +
//   w1 x_{2t+1} + w2 x_{2t+2}: the even inputs e_i = x_{2i} meet the 2-tap filter (w0, w2), by
//   F(m,2) in m + 1 multiplications; the odd inputs o_t = x_{2t+1} meet w1 alone, m more. a = 2m + 1
//   per m outputs against 3m: 1.2x fewer for F(2,2), 1.33x for F(4,2). tools/gen_winograd.py
//   composes these tables (F2x3s2, F4x3s2) and verifies them exactly.
#include "cpu/winograd_1d.hpp"

#include "common/generated/winograd_tables.hpp"
#include "cpu/bilinear_1d.hpp"

namespace convcore {
namespace cpu {
namespace winograd_1d {
namespace {

// F(m,3) (at stride 1 or 2) as bilinear_1d's algorithm: out = AT [(G g) (.) (BT d)], a products,
// n inputs per tile.
template <class F>
struct Row {
    static constexpr int a = F::alpha, m = F::m, taps = F::r, stride = F::stride, n = (m - 1) * stride + taps;
    template <typename T>
    static constexpr T bt(int xi, int i) { return F::template table<T>::BT[xi][i]; }
    template <typename T>
    static constexpr T g(int xi, int j) { return F::template table<T>::G[xi][j]; }
    template <typename T>
    static constexpr T at(int i, int xi) { return F::template table<T>::AT[i][xi]; }
};

// The stride along the tiles (W, or H for a 3x1 filter).
int64_t stride_of(const ConvProblem& p) { return bilinear_1d::row_problem(p).stride_w; }
bool strided(const ConvProblem& p) { return stride_of(p) == 2; }
// Multiplications per tile.
int products(const ConvProblem& p, int m) { return strided(p) ? 2 * m + 1 : m + 2; }

const char* algorithm(const ConvProblem& p, int m) {
    if (strided(p)) return m == 2 ? "F(2,2) on the even inputs of stride 2" : "F(4,2) on the even inputs of stride 2";
    return m == 2 ? "F(2,3)" : "F(4,3)";
}

// f(Alg{}) with the algorithm that runs p for m.
template <class Fn>
void with_algorithm(const ConvProblem& p, int m, Fn&& f) {
    if (strided(p))
        m == 2 ? f(Row<winograd::F2x3s2>{}) : f(Row<winograd::F4x3s2>{});
    else
        m == 2 ? f(Row<winograd::F2x3>{}) : f(Row<winograd::F4x3>{});
}

}  // namespace

bool takes(const ConvProblem& p) { return (p.r == 1 && p.s == 3) || (p.r == 3 && p.s == 1); }

std::string why_not(const std::string& name, const ConvProblem& p, int m) {
    return bilinear_1d::why_not(name, algorithm(p, m), p, m, products(p, m), 2);
}

size_t workspace_bytes(const ConvProblem& p, int m) { return bilinear_1d::workspace_bytes(p, m, products(p, m)); }

size_t prepared_bytes(const ConvProblem& p, int m) {
    return size_t(bilinear_1d::u_elems(p, products(p, m))) * p.elem_size();
}

void prepare(const ConvProblem& p, const Context& ctx, const void* w, void* out, int m) {
    with_algorithm(p, m, [&](auto alg) {
        using Alg = decltype(alg);
        if (p.dtype == CONVCORE_DATA_DOUBLE)
            bilinear_1d::filter_transform<Alg>(p, static_cast<const double*>(w), static_cast<double*>(out), ctx.threads());
        else
            bilinear_1d::filter_transform<Alg>(p, static_cast<const float*>(w), static_cast<float*>(out), ctx.threads());
    });
}

void run(const ConvArgs& args, int m) {
    with_algorithm(args.prob, m, [&](auto alg) {
        using Alg = decltype(alg);
        args.prob.dtype == CONVCORE_DATA_DOUBLE ? bilinear_1d::run<Alg, double>(args) : bilinear_1d::run<Alg, float>(args);
    });
}

}  // namespace winograd_1d
}  // namespace cpu
}  // namespace convcore
