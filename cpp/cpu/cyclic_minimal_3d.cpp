// CYCLIC_MINIMAL nested over the depth (cpu/cyclic_minimal_3d.hpp has the math): the 4-point
// cyclic convolution's depth transforms on whole planes, around 5 calls of the 2-D CYCLIC_MINIMAL
// solver, each over every depth tile of every image at once (packed NCHW batches).
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/generated/cyclic_tables.hpp"
#include "core/error.hpp"
#include "core/solver.hpp"
#include "cpu/cyclic_minimal_3d.hpp"

namespace convcore {
namespace cpu {
namespace cyclic_3d {
namespace {

constexpr int kProducts = cyclic::C4F3Row::M;  // 5: 1 + 1 + 3 (mod z - 1, z + 1, z^2 + 1)
static_assert(cyclic::C4F2Row::M == kProducts && cyclic::C4F3Row::N == 4 && cyclic::C4F2Row::N == 4,
              "tables changed");
constexpr int kInputs = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Elements rounded up to whole 64-byte lines (each workspace region starts on one).
int64_t lines(int64_t elems, size_t elem) { return ceil_div(elems * int64_t(elem), 64) * 64 / int64_t(elem); }

// Output planes per depth tile: 4 - T + 1.
int64_t outputs(const Depth& depth) { return kInputs - depth.taps + 1; }

// The 2-D problem the 5 products run: every depth tile of every image, packed NCHW.
ConvProblem batch_of(const ConvProblem& plane, const Depth& depth) {
    ConvProblem b = plane.packed();
    b.nhwc = false;
    b.n = plane.n * ceil_div(depth.d_out, outputs(depth));
    return b.packed();
}

const Solver& plane_solver() {
    const Solver* s = find_solver(CONVCORE_FWD_ALGO_CYCLIC_MINIMAL, CONVCORE_DEVICE_CPU);
    if (!s) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, "CYCLIC_MINIMAL 3-D: no CPU 2-D solver");
    return *s;
}

// The workspace, in elements: the W_i, X_i and Z_i of the 5 products, then the 2-D solver's.
struct Sizes {
    int64_t w, x, z, solver;
    Sizes(const ConvProblem& plane, const Depth& depth) {
        const ConvProblem b = batch_of(plane, depth);
        const size_t elem = plane.elem_size();
        w = lines(b.w_elems(), elem);
        x = lines(b.x_elems(), elem);
        z = lines(b.y_elems(), elem);
        solver = lines(int64_t(ceil_div(int64_t(plane_solver().workspace_bytes(b)), int64_t(elem))), elem);
    }
    int64_t total() const { return kProducts * (w + x + z) + solver; }
};

// The depth tables of T taps as T values: A (5 x 4), B (5 x T), C (O x 5); zero past T and O.
template <typename T>
struct DepthTables {
    T a[kProducts][kInputs] = {}, b[kProducts][3] = {}, c[3][kProducts] = {};
    explicit DepthTables(int64_t taps) { taps == 3 ? fill<cyclic::C4F3Row>() : fill<cyclic::C4F2Row>(); }
    template <class Tab>
    void fill() {
        for (int i = 0; i < kProducts; ++i) {
            for (int j = 0; j < kInputs; ++j) a[i][j] = T(Tab::A[i][j]);
            for (int t = 0; t < Tab::F; ++t) b[i][t] = Tab::template b<T>(i, t);
            for (int o = 0; o < Tab::O; ++o) c[o][i] = T(Tab::C[o][i]);
        }
    }
};

template <typename T>
void forward_t(const ConvProblem& plane, const Context& ctx, const Depth& depth, const T* x, const int64_t xs[5],
               const T* w, T* y, const int64_t ys[5], double alpha_d, double beta_d, T* ws) {
    const DepthTables<T> tab(depth.taps);
    const ConvProblem b = batch_of(plane, depth);
    const Sizes s(plane, depth);
    const int64_t images = plane.n, o_per_tile = outputs(depth), tiles = ceil_div(depth.d_out, o_per_tile);
    const int64_t cg = plane.c_per_group(), rs = plane.r * plane.s, hw = plane.h * plane.w, pq = plane.p * plane.q;
    T* wd = ws;                          // W_i: 5 x K x C/g x R x S
    T* xd = wd + kProducts * s.w;        // X_i: 5 x (tiles * N) x C x H x W
    T* zd = xd + kProducts * s.x;        // Z_i: 5 x (tiles * N) x K x P x Q
    T* solver_ws = zd + kProducts * s.z;
    const int threads = ctx.threads();

    // W_i = sum_t B[i][t] w[:, :, t] (true convolution: the depth taps mirrored here, R and S by
    // the 2-D solver)
    const int64_t kc = plane.k * cg;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t kci = 0; kci < kc; ++kci)
        for (int i = 0; i < kProducts; ++i)
            for (int64_t e = 0; e < rs; ++e) {
                T acc = T(0);
                for (int64_t t = 0; t < depth.taps; ++t)
                    acc += tab.b[i][t] * w[(kci * depth.taps + (plane.flip ? depth.taps - 1 - t : t)) * rs + e];
                wd[i * s.w + kci * rs + e] = acc;
            }

    // X_i[tile * N + n][c] = sum_j A[i][j] x[n, c, tile * O + j - pad]
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t task = 0; task < tiles * images * plane.c; ++task) {
        const int64_t c = task % plane.c, bn = task / plane.c, tile = bn / images, n = bn % images;
        const T* in[kInputs];
        for (int j = 0; j < kInputs; ++j) {
            const int64_t d = tile * o_per_tile + j - depth.pad;
            in[j] = d >= 0 && d < depth.d_in ? x + n * xs[0] + c * xs[1] + d * xs[2] : nullptr;
        }
        for (int64_t h = 0; h < plane.h; ++h)
            for (int64_t v = 0; v < plane.w; ++v) {
                T d[kInputs];
                const int64_t at = h * xs[3] + v * xs[4];
                for (int j = 0; j < kInputs; ++j) d[j] = in[j] ? in[j][at] : T(0);
                const int64_t out = (bn * plane.c + c) * hw + h * plane.w + v;
                for (int i = 0; i < kProducts; ++i) {
                    T acc = T(0);
                    for (int j = 0; j < kInputs; ++j) acc += tab.a[i][j] * d[j];
                    xd[i * s.x + out] = acc;
                }
            }
    }

    // Z_i = conv2d(X_i, W_i) by the 2-D CYCLIC_MINIMAL
    const Solver& solver = plane_solver();
    for (int i = 0; i < kProducts; ++i)
        solver.run(ConvArgs{b, ctx, xd + i * s.x, wd + i * s.w, zd + i * s.z, 1.0, 0.0,
                            s.solver > 0 ? solver_ws : nullptr});

    // y[n, k, tile * O + o] = alpha * sum_i C[o][i] Z_i[tile * N + n][k] + beta * y
    const T alpha = T(alpha_d), beta = T(beta_d);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t task = 0; task < tiles * images * plane.k; ++task) {
        const int64_t k = task % plane.k, bn = task / plane.k, tile = bn / images, n = bn % images;
        const int64_t z0 = (bn * plane.k + k) * pq;
        for (int64_t o = 0; o < o_per_tile && tile * o_per_tile + o < depth.d_out; ++o) {
            T* out = y + n * ys[0] + k * ys[1] + (tile * o_per_tile + o) * ys[2];
            for (int64_t h = 0; h < plane.p; ++h)
                for (int64_t v = 0; v < plane.q; ++v) {
                    T acc = T(0);
                    for (int i = 0; i < kProducts; ++i) acc += tab.c[o][i] * zd[i * s.z + z0 + h * plane.q + v];
                    T& dst = out[h * ys[3] + v * ys[4]];
                    dst = beta == T(0) ? alpha * acc : alpha * acc + beta * dst;
                }
        }
    }
}

}  // namespace

std::string why_not(const ConvProblem& plane, const Depth& depth) {
    const std::string name = "CYCLIC_MINIMAL (3-D, nested over the depth)";
    if (depth.taps != 2 && depth.taps != 3)
        return name + " needs 2 or 3 depth taps (the 4-point cyclic convolution along the depth), got " +
               std::to_string(depth.taps);
    if (depth.stride != 1 || depth.dil != 1)
        return name + " needs depth stride and dilation 1, got " + std::to_string(depth.stride) + " and " +
               std::to_string(depth.dil);
    const int64_t tiles = ceil_div(depth.d_out, outputs(depth));
    if (product_or_minus1({kProducts, plane.n, tiles, std::max(plane.c * plane.h * plane.w, plane.k * plane.p * plane.q),
                           int64_t(plane.elem_size())}) < 0)
        return name + ": its transformed planes are too many to count in 64 bits";
    return plane_solver().why_not(batch_of(plane, depth));
}

bool nests(const Depth& depth) {
    if (depth.taps != 2 && depth.taps != 3) return false;
    int64_t per_tap = 0;  // the per-tap form's 2-D convolutions: output planes x taps inside
    for (int64_t t = 0; t < depth.taps; ++t) {
        const int64_t offset = t * depth.dil - depth.pad;
        per_tap += std::max<int64_t>(0, std::min(depth.d_out, depth.d_in - offset) - std::max<int64_t>(0, -offset));
    }
    return ceil_div(depth.d_out, outputs(depth)) * kProducts < per_tap;
}

size_t workspace_bytes(const ConvProblem& plane, const Depth& depth) {
    return size_t(Sizes(plane, depth).total()) * plane.elem_size();
}

void forward(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* x,
             const int64_t x_strides[5], const void* w, void* y, const int64_t y_strides[5], double alpha,
             double beta, void* workspace) {
    if (plane.dtype == CONVCORE_DATA_DOUBLE)
        forward_t(plane, ctx, depth, static_cast<const double*>(x), x_strides, static_cast<const double*>(w),
                  static_cast<double*>(y), y_strides, alpha, beta, static_cast<double*>(workspace));
    else
        forward_t(plane, ctx, depth, static_cast<const float*>(x), x_strides, static_cast<const float*>(w),
                  static_cast<float*>(y), y_strides, alpha, beta, static_cast<float*>(workspace));
}

}  // namespace cyclic_3d
}  // namespace cpu
}  // namespace convcore
