// Runs one small convolution through the installed library and checks one output value.
#include <convcore/convcore.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    try {
        convcore::Handle handle;
        convcore::TensorDesc x(CONVCORE_DATA_FLOAT, 1, 2, 5, 5);
        convcore::FilterDesc w(CONVCORE_DATA_FLOAT, 3, 2, 3, 3);
        convcore::ConvDesc conv(1, 1);
        const auto out = conv.output_dims(x, w);
        convcore::TensorDesc y(CONVCORE_DATA_FLOAT, out[0], out[1], out[2], out[3]);
        std::vector<float> xs(50, 1.0f), ws(54, 1.0f), ys(size_t(out[1] * out[2] * out[3]), 0.0f);
        const float alpha = 1, beta = 0;
        convcore::check(convcoreConvolutionForward(handle, &alpha, x, xs.data(), w, ws.data(), conv,
                                                   CONVCORE_FWD_ALGO_DIRECT, nullptr, 0, &beta, y,
                                                   ys.data()));
        // Centre of a 5x5 all-ones image, 2 channels, 3x3 all-ones filter: 18.
        const float centre = ys[size_t(2 * out[3] + 2)];
        std::printf("convcore %zu: output %ldx%ldx%ldx%ld, centre %.1f\n", convcoreGetVersion(),
                    long(out[0]), long(out[1]), long(out[2]), long(out[3]), centre);
        return std::fabs(centre - 18.0f) < 1e-5f ? 0 : 1;
    } catch (const convcore::Exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
