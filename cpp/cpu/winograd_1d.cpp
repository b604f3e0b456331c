// F(m,3) along W for a 1x3 filter (along H for a 3x1 one): Lavin & Gray's Algorithm 1 in one dimension, run by the 1-D
// bilinear path (cpu/bilinear_1d.hpp) with the generated F(2,3) / F(4,3) tables
// (tools/gen_winograd.py): a = m + 2 multiplications per m outputs against 3m (F(4,3): 1.5 per
// output against 3, half the multiplications of the direct sum).
#include "cpu/winograd_1d.hpp"

#include "common/generated/winograd_tables.hpp"
#include "cpu/bilinear_1d.hpp"

namespace convcore {
namespace cpu {
namespace winograd_1d {
namespace {

// F(m,3) as bilinear_1d's algorithm: out = AT [(G g) (.) (BT d)], a = n = m + 2.
template <class F>
struct Row {
    static constexpr int n = F::alpha, a = F::alpha, m = F::m, taps = 3;
    template <typename T>
    static constexpr T bt(int xi, int i) { return F::template table<T>::BT[xi][i]; }
    template <typename T>
    static constexpr T g(int xi, int j) { return F::template table<T>::G[xi][j]; }
    template <typename T>
    static constexpr T at(int i, int xi) { return F::template table<T>::AT[i][xi]; }
};

using Row2 = Row<winograd::F2x3>;
using Row4 = Row<winograd::F4x3>;

const char* algorithm(int m) { return m == 2 ? "F(2,3)" : "F(4,3)"; }

}  // namespace

bool takes(const ConvProblem& p) { return (p.r == 1 && p.s == 3) || (p.r == 3 && p.s == 1); }

std::string why_not(const std::string& name, const ConvProblem& p, int m) {
    return bilinear_1d::why_not(name, algorithm(m), p, m, m + 2);
}

size_t workspace_bytes(const ConvProblem& p, int m) { return bilinear_1d::workspace_bytes(p, m, m + 2); }

size_t prepared_bytes(const ConvProblem& p, int m) { return size_t(bilinear_1d::u_elems(p, m + 2)) * p.elem_size(); }

void prepare(const ConvProblem& p, const Context& ctx, const void* w, void* out, int m) {
    const bool f64 = p.dtype == CONVCORE_DATA_DOUBLE;
    if (m == 2 && f64)
        bilinear_1d::filter_transform<Row2>(p, static_cast<const double*>(w), static_cast<double*>(out), ctx.threads());
    else if (m == 2)
        bilinear_1d::filter_transform<Row2>(p, static_cast<const float*>(w), static_cast<float*>(out), ctx.threads());
    else if (f64)
        bilinear_1d::filter_transform<Row4>(p, static_cast<const double*>(w), static_cast<double*>(out), ctx.threads());
    else
        bilinear_1d::filter_transform<Row4>(p, static_cast<const float*>(w), static_cast<float*>(out), ctx.threads());
}

void run(const ConvArgs& args, int m) {
    const bool f64 = args.prob.dtype == CONVCORE_DATA_DOUBLE;
    if (m == 2 && f64)
        bilinear_1d::run<Row2, double>(args);
    else if (m == 2)
        bilinear_1d::run<Row2, float>(args);
    else if (f64)
        bilinear_1d::run<Row4, double>(args);
    else
        bilinear_1d::run<Row4, float>(args);
}

}  // namespace winograd_1d
}  // namespace cpu
}  // namespace convcore
