/* The C API from C99: convcore.h (with the enums it makes from convcore/algorithms.def) compiles
 * as C, every forward algorithm is declared, and a convolution runs through the handle's plan
 * cache (convcoreConvolutionExecute): chosen by measuring, its filters kept, the handle's
 * workspace, checked against plain loops; a second call finds its plan. Prints one line per
 * algorithm, then the cache's counts. */
#include <math.h>
#include <stdio.h>

#include "convcore/convcore.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        if ((call) != CONVCORE_STATUS_SUCCESS) {                                           \
            fprintf(stderr, "%s: %s\n", #call, convcoreGetLastErrorString());              \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

enum { N = 1, C = 3, H = 9, W = 8, K = 4, R = 3 };

int main(void) {
    int a, i, n, k, p, q, c, r, s;
    static float x[N * C * H * W], w[K * C * R * R], y[N * K * H * W];
    double worst = 0.0;
    convcoreHandle_t handle;
    convcoreTensorDescriptor_t xd, yd;
    convcoreFilterDescriptor_t wd;
    convcoreConvolutionDescriptor_t cd;
    convcoreConvolutionArgs_t args = {0};
    convcorePlanCacheInfo_t info;
    int ran = -1, again = -2;
    for (a = 0; a < CONVCORE_FWD_ALGO_COUNT; ++a) {
        convcoreAlgorithmInfo_t algo_info;
        CHECK(convcoreGetAlgorithmInfo(CONVCORE_PASS_FORWARD, a, &algo_info));
        printf("%s %g\n", algo_info.name, algo_info.errorBoundFloat);
    }
    for (i = 0; i < N * C * H * W; ++i) x[i] = (float)sin(0.7 * i);
    for (i = 0; i < K * C * R * R; ++i) w[i] = (float)cos(1.3 * i);
    CHECK(convcoreCreate(&handle));
    CHECK(convcoreCreateTensorDescriptor(&xd));
    CHECK(convcoreCreateTensorDescriptor(&yd));
    CHECK(convcoreCreateFilterDescriptor(&wd));
    CHECK(convcoreCreateConvolutionDescriptor(&cd));
    CHECK(convcoreSetTensor4dDescriptor(xd, CONVCORE_DATA_FLOAT, N, C, H, W));
    CHECK(convcoreSetTensor4dDescriptor(yd, CONVCORE_DATA_FLOAT, N, K, H, W));
    CHECK(convcoreSetFilter4dDescriptor(wd, CONVCORE_DATA_FLOAT, K, C, R, R));
    CHECK(convcoreSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CONVCORE_CROSS_CORRELATION));
    CHECK(convcoreSetConvolutionFilterProtocol(cd, CONVCORE_FILTERS_PREPARED));
    args.in0 = x;
    args.in1 = w;
    args.out = y;
    args.filterVersion = 1; /* the weights' first contents */
    CHECK(convcoreConvolutionExecute(handle, CONVCORE_PASS_FORWARD, xd, wd, cd, yd, CONVCORE_PLAN_SELECT_MEASURED,
                                     &args, &ran));
    CHECK(convcoreConvolutionExecute(handle, CONVCORE_PASS_FORWARD, xd, wd, cd, yd, CONVCORE_PLAN_SELECT_MEASURED,
                                     &args, &again));
    for (n = 0; n < N; ++n)
        for (k = 0; k < K; ++k)
            for (p = 0; p < H; ++p)
                for (q = 0; q < W; ++q) {
                    double sum = 0.0, err;
                    for (c = 0; c < C; ++c)
                        for (r = 0; r < R; ++r)
                            for (s = 0; s < R; ++s) {
                                const int ih = p - 1 + r, iw = q - 1 + s;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    sum += (double)x[((n * C + c) * H + ih) * W + iw] * w[((k * C + c) * R + r) * R + s];
                            }
                    err = fabs(sum - y[((n * K + k) * H + p) * W + q]);
                    if (err > worst) worst = err;
                }
    CHECK(convcoreGetPlanCacheInfo(handle, &info));
    printf("cached call: %s, max error %.2g, plans %lu, hits %ld, misses %ld\n", convcoreGetFwdAlgoName(ran), worst,
           (unsigned long)info.plans, (long)info.hits, (long)info.misses);
    convcoreDestroyConvolutionDescriptor(cd);
    convcoreDestroyFilterDescriptor(wd);
    convcoreDestroyTensorDescriptor(yd);
    convcoreDestroyTensorDescriptor(xd);
    convcoreDestroy(handle);
    if (worst > 1e-4 || ran != again || info.hits != 1 || info.misses != 1) return 3;
    return CONVCORE_FWD_ALGO_CYCLIC_MINIMAL == 10 && CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL == 7 ? 0 : 2;
}
