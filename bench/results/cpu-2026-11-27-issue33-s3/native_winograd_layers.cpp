// NHWC Winograd F(4x4,3x3) plans with prepared filters: 2-D layers with C >= 256, and the native
// 3-D layers of r3d_18. Min of 7 runs.
#include <chrono>
#include <cstdio>
#include <vector>
#include "convcore/convcore.h"
#include "convcore/convcore.hpp"
struct L { int64_t c, d, h, k; };
int main() {
    convcore::Handle h;
    const L layers[] = {{512, 1, 7, 512}, {256, 1, 14, 256}, {512, 1, 14, 512}, {64, 16, 56, 64}, {128, 8, 28, 128}, {256, 4, 14, 256}, {512, 2, 7, 512}};
    for (const L& l : layers) {
        const bool three = l.d > 1;
        const int nb = three ? 5 : 4;
        int64_t xd[5] = {1, l.c, l.d, l.h, l.h}, yd[5] = {1, l.k, l.d, l.h, l.h}, wd[5] = {l.k, l.c, 3, 3, 3};
        if (!three) { xd[2] = l.h; yd[2] = l.h; wd[2] = 3; }
        const int64_t pad[3] = {1, 1, 1}, one3[3] = {1, 1, 1};
        std::vector<float> x(l.c * l.d * l.h * l.h, 0.5f), w(l.k * l.c * 27, 0.01f), y(l.k * l.d * l.h * l.h);
        convcore::TensorDesc xD, yD; convcore::FilterDesc wD; convcore::ConvDesc cD;
        convcore::check(convcoreSetTensorNdDescriptorEx(xD, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, nb, xd));
        convcore::check(convcoreSetTensorNdDescriptorEx(yD, CONVCORE_TENSOR_NHWC, CONVCORE_DATA_FLOAT, nb, yd));
        convcore::check(convcoreSetFilterNdDescriptor(wD, CONVCORE_DATA_FLOAT, CONVCORE_TENSOR_NCHW, nb, wd));
        convcore::check(convcoreSetConvolutionNdDescriptor(cD, nb - 2, pad, one3, one3, CONVCORE_CROSS_CORRELATION));
        convcore::Plan p(h, CONVCORE_PASS_FORWARD, xD, wD, cD, yD, CONVCORE_FWD_ALGO_WINOGRAD_4X4_3X3);
        size_t prep = 0; convcore::check(convcorePrepareConvolutionPlanFilters(p, w.data(), &prep));
        std::vector<char> ws(p.workspace_size());
        const float a = 1, b = 0;
        double best = 1e9;
        for (int rep = 0; rep < 8; ++rep) {
            auto t0 = std::chrono::steady_clock::now();
            p.execute(&a, x.data(), w.data(), &b, y.data(), ws.data(), ws.size());
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (rep > 0 && ms < best) best = ms;
        }
        std::printf("%s C=%ld D=%ld H=%ld K=%ld: %.2f ms\n", three ? "3-D" : "2-D", l.c, l.d, l.h, l.k, best);
    }
}
