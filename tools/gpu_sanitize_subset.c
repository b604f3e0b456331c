/* One small problem per algorithm and pass, for compute-sanitizer (make gpu-check): each pass's
 * algorithms in turn run the first problem below that they support (float32, NCHW), once, and
 * their output is compared with DIRECT's on the same problem. The problems are tiny so that
 * racecheck stays quick.
 *   gpu_sanitize_subset [cpu|cuda]      (default cuda; cpu checks the program itself)
 * Exit status: 0 when every run succeeded and matched DIRECT, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convcore/convcore.h"

typedef struct {
    const char* name;
    int64_t n, c, h, w, k, r, s, pad, stride, groups;
} Problem;

static const Problem kProblems[] = {
    {"3x3 pad 1", 2, 4, 9, 10, 4, 3, 3, 1, 1, 1},
    {"1x1", 2, 4, 9, 10, 4, 1, 1, 0, 1, 1},
    {"depthwise 3x3", 2, 4, 9, 10, 4, 3, 3, 1, 1, 4},
    {"5x5 stride 2 pad 2", 2, 4, 11, 10, 4, 5, 5, 2, 2, 1},
};
#define PROBLEM_COUNT ((int)(sizeof(kProblems) / sizeof(kProblems[0])))

static int failures = 0;

#define CHECK(call)                                                                            \
    do {                                                                                       \
        convcoreStatus_t st_ = (call);                                                         \
        if (st_ != CONVCORE_STATUS_SUCCESS) {                                                  \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                 \
                    convcoreGetStatusName(st_), convcoreGetLastErrorString());                 \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const char* algo_name(convcoreConvolutionPass_t pass, int algo) {
    if (pass == CONVCORE_PASS_FORWARD) return convcoreGetFwdAlgoName((convcoreConvolutionFwdAlgo_t)algo);
    if (pass == CONVCORE_PASS_BACKWARD_DATA)
        return convcoreGetBwdDataAlgoName((convcoreConvolutionBwdDataAlgo_t)algo);
    return convcoreGetBwdFilterAlgoName((convcoreConvolutionBwdFilterAlgo_t)algo);
}

static int algo_count(convcoreConvolutionPass_t pass) {
    if (pass == CONVCORE_PASS_FORWARD) return CONVCORE_FWD_ALGO_COUNT;
    if (pass == CONVCORE_PASS_BACKWARD_DATA) return CONVCORE_BWD_DATA_ALGO_COUNT;
    return CONVCORE_BWD_FILTER_ALGO_COUNT;
}

typedef struct {
    convcoreTensorDescriptor_t x, y;
    convcoreFilterDescriptor_t w;
    convcoreConvolutionDescriptor_t conv;
    size_t x_count, w_count, y_count;
} Descriptors;

static void make_descriptors(const Problem* p, Descriptors* d) {
    CHECK(convcoreCreateTensorDescriptor(&d->x));
    CHECK(convcoreCreateTensorDescriptor(&d->y));
    CHECK(convcoreCreateFilterDescriptor(&d->w));
    CHECK(convcoreCreateConvolutionDescriptor(&d->conv));
    CHECK(convcoreSetTensor4dDescriptor(d->x, CONVCORE_DATA_FLOAT, p->n, p->c, p->h, p->w));
    CHECK(convcoreSetFilter4dDescriptor(d->w, CONVCORE_DATA_FLOAT, p->k, p->c / p->groups, p->r, p->s));
    CHECK(convcoreSetConvolution2dDescriptor(d->conv, p->pad, p->pad, p->stride, p->stride, 1, 1,
                                             CONVCORE_CROSS_CORRELATION));
    CHECK(convcoreSetConvolutionGroupCount(d->conv, p->groups));
    int64_t n, k, oh, ow;
    CHECK(convcoreGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &k, &oh, &ow));
    CHECK(convcoreSetTensor4dDescriptor(d->y, CONVCORE_DATA_FLOAT, n, k, oh, ow));
    d->x_count = (size_t)(p->n * p->c * p->h * p->w);
    d->w_count = (size_t)(p->k * (p->c / p->groups) * p->r * p->s);
    d->y_count = (size_t)(n * k * oh * ow);
}

static void free_descriptors(Descriptors* d) {
    convcoreDestroyTensorDescriptor(d->x);
    convcoreDestroyTensorDescriptor(d->y);
    convcoreDestroyFilterDescriptor(d->w);
    convcoreDestroyConvolutionDescriptor(d->conv);
}

static void* device_copy(convcoreHandle_t h, const float* v, size_t count) {
    void* ptr = NULL;
    CHECK(convcoreMalloc(h, &ptr, count * sizeof(float)));
    CHECK(convcoreMemcpyToDevice(h, ptr, v, count * sizeof(float)));
    return ptr;
}

static float* random_values(size_t count, unsigned* seed) {
    float* v = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; ++i) {
        *seed = *seed * 1664525u + 1013904223u;
        v[i] = (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
    return v;
}

/* Runs `algo` of `pass` on problem p into a fresh output; returns the output (host) or NULL
 * when the algorithm does not support the problem. */
static float* run(convcoreHandle_t h, convcoreConvolutionPass_t pass, int algo, const Descriptors* d,
                  const void* in0, const void* in1, size_t out_count) {
    convcoreConvolutionPlan_t plan = NULL;
    convcoreStatus_t st = convcoreCreateConvolutionPlan(h, pass, d->x, d->w, d->conv, d->y, algo, &plan);
    if (st == CONVCORE_STATUS_NOT_SUPPORTED) return NULL;
    CHECK(st);
    size_t ws_bytes = 0;
    CHECK(convcoreGetConvolutionPlanWorkspaceSize(plan, &ws_bytes));
    void *ws = NULL, *out = NULL;
    if (ws_bytes) CHECK(convcoreMalloc(h, &ws, ws_bytes));
    float* zeros = calloc(out_count, sizeof(float));
    out = device_copy(h, zeros, out_count);
    const float alpha = 1.0f, beta = 0.0f;
    CHECK(convcoreExecuteConvolutionPlan(plan, &alpha, in0, in1, &beta, out, ws, ws_bytes));
    CHECK(convcoreSynchronize(h));
    CHECK(convcoreMemcpyToHost(h, zeros, out, out_count * sizeof(float)));
    CHECK(convcoreDestroyConvolutionPlan(plan));
    if (ws) convcoreFree(h, ws);
    convcoreFree(h, out);
    return zeros;
}

static double relative_error(const float* a, const float* ref, size_t count) {
    double num = 0, den = 0;
    for (size_t i = 0; i < count; ++i) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
}

int main(int argc, char** argv) {
    const int cuda = argc < 2 || strcmp(argv[1], "cpu") != 0;
    convcoreHandle_t h = NULL;
    if (cuda) {
        int count = 0;
        CHECK(convcoreGetCudaDeviceCount(&count));
        if (count == 0) {
            fprintf(stderr, "no CUDA device visible to convcore\n");
            return 1;
        }
        CHECK(convcoreCreateForDevice(&h, CONVCORE_DEVICE_CUDA, 0));
    } else {
        CHECK(convcoreCreate(&h));
    }
    printf("convcore on %s: one problem per algorithm and pass\n", cuda ? "cuda:0" : "cpu");
    const convcoreConvolutionPass_t passes[] = {CONVCORE_PASS_FORWARD, CONVCORE_PASS_BACKWARD_DATA,
                                                CONVCORE_PASS_BACKWARD_FILTER};
    const char* pass_names[] = {"forward", "backward data", "backward filter"};
    int ran = 0;
    for (int pi = 0; pi < 3; ++pi) {
        const convcoreConvolutionPass_t pass = passes[pi];
        for (int algo = 0; algo < algo_count(pass); ++algo) {
            int done = 0;
            for (int q = 0; q < PROBLEM_COUNT && !done; ++q) {
                Descriptors d;
                make_descriptors(&kProblems[q], &d);
                unsigned seed = 12345u + (unsigned)q;
                float* hx = random_values(d.x_count, &seed);
                float* hw = random_values(d.w_count, &seed);
                float* hy = random_values(d.y_count, &seed);
                void* x = device_copy(h, hx, d.x_count);
                void* w = device_copy(h, hw, d.w_count);
                void* y = device_copy(h, hy, d.y_count);
                const void* in0 = pass == CONVCORE_PASS_BACKWARD_DATA ? y : x;
                const void* in1 = pass == CONVCORE_PASS_BACKWARD_FILTER ? y : w;
                const size_t out_count = pass == CONVCORE_PASS_FORWARD ? d.y_count
                                         : pass == CONVCORE_PASS_BACKWARD_DATA ? d.x_count : d.w_count;
                float* out = run(h, pass, algo, &d, in0, in1, out_count);
                if (out) {
                    float* ref = run(h, pass, 0, &d, in0, in1, out_count);  /* DIRECT */
                    const double err = relative_error(out, ref, out_count);
                    const int ok = err <= 1e-3;
                    printf("%-16s %-18s %-20s rel. error vs DIRECT %.2g %s\n", pass_names[pi],
                           algo_name(pass, algo), kProblems[q].name, err, ok ? "ok" : "MISMATCH");
                    failures += !ok;
                    ++ran;
                    done = 1;
                    free(ref);
                    free(out);
                }
                convcoreFree(h, x);
                convcoreFree(h, w);
                convcoreFree(h, y);
                free(hx);
                free(hw);
                free(hy);
                free_descriptors(&d);
            }
            if (!done) printf("%-16s %-18s not supported on this device\n", pass_names[pi], algo_name(pass, algo));
        }
    }
    convcoreDestroy(h);
    printf("%d runs, %d mismatch(es)\n", ran, failures);
    return failures ? 1 : 0;
}
