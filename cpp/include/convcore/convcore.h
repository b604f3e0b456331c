/*
 * convcore — convolution library, public C API.
 *
 * Modelled on cuDNN's legacy descriptor API:
 *   handle (bound to the CPU or one CUDA device, with a stream)
 *   -> tensor / filter / convolution descriptors
 *   -> output-dimension query, per-algorithm workspace query, heuristic ranking (Get)
 *   -> forward with alpha/beta blending.
 *
 * Every call returns a convcoreStatus_t. On failure, convcoreGetLastErrorString() returns
 * the reason (per thread), for example
 *   "x: input channels C=3 do not match w: C/groups=4 with groups=1".
 * BAD_PARAM means the arguments are wrong; NOT_SUPPORTED means they are valid but the chosen
 * algorithm (or device) cannot run the problem.
 *
 * Sizes are int64_t: tensors may hold more than 2^31 elements.
 */
#ifndef CONVCORE_CONVCORE_H
#define CONVCORE_CONVCORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CONVCORE_API __declspec(dllexport)
#else
#define CONVCORE_API __attribute__((visibility("default")))
#endif

#define CONVCORE_VERSION_MAJOR 0
#define CONVCORE_VERSION_MINOR 1
#define CONVCORE_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define CONVCORE_VERSION (CONVCORE_VERSION_MAJOR * 10000 + CONVCORE_VERSION_MINOR * 100 + CONVCORE_VERSION_PATCH)

typedef enum {
    CONVCORE_STATUS_SUCCESS = 0,
    CONVCORE_STATUS_BAD_PARAM = 1,        /* invalid argument: null pointer, bad size, mismatch */
    CONVCORE_STATUS_NOT_SUPPORTED = 2,    /* valid problem that this algorithm/device cannot run */
    CONVCORE_STATUS_ALLOC_FAILED = 3,     /* host or device memory allocation failed */
    CONVCORE_STATUS_EXECUTION_FAILED = 4, /* a CUDA / cuBLAS / cuFFT call failed (message carried) */
    CONVCORE_STATUS_INTERNAL_ERROR = 5    /* a bug in convcore */
} convcoreStatus_t;

typedef enum {
    CONVCORE_DEVICE_CPU = 0,
    CONVCORE_DEVICE_CUDA = 1
} convcoreDeviceType_t;

typedef enum {
    CONVCORE_DATA_FLOAT = 0,  /* float32: every device */
    CONVCORE_DATA_DOUBLE = 1  /* float64: the CPU (and CUDA DIRECT) */
} convcoreDataType_t;

/* The activation of the fused epilogue (convcoreConvolutionBiasActivationForward):
 * y = act(alpha1 * conv(x, w) + alpha2 * z + bias). */
typedef enum {
    CONVCORE_ACTIVATION_IDENTITY = 0, /* act(v) = v */
    CONVCORE_ACTIVATION_RELU = 1,     /* max(v, 0) */
    CONVCORE_ACTIVATION_RELU6 = 2,    /* min(max(v, 0), 6) */
    CONVCORE_ACTIVATION_SILU = 3,     /* v / (1 + exp(-v)) */
    CONVCORE_ACTIVATION_GELU = 4,     /* v * Phi(v) = v * erfc(-v / sqrt(2)) / 2: PyTorch's nn.GELU() */
    CONVCORE_ACTIVATION_GELU_TANH = 5 /* v / (1 + exp(-2 z)), z = sqrt(2 / pi) (v + 0.044715 v^3): its
                                         tanh approximation, nn.GELU(approximate="tanh") */
} convcoreActivationMode_t;

typedef enum {
    CONVCORE_CROSS_CORRELATION = 0, /* what every framework calls conv (the default) */
    CONVCORE_CONVOLUTION = 1        /* true convolution: the filter is flipped in both axes */
} convcoreConvolutionMode_t;

/* Forward algorithms, CONVCORE_FWD_ALGO_<NAME>: the CONVCORE_FORWARD lines of
 * convcore/algorithms.def, the library's one list of algorithms, which states each one's enum
 * value, limits, devices and error bound (convcoreGetAlgorithmInfo reads it at run time).
 * A problem outside an algorithm's limits gets NOT_SUPPORTED with the reason. docs/algorithms.md
 * has the details. */
typedef enum {
#define CONVCORE_FORWARD(NAME, value, ...) CONVCORE_FWD_ALGO_##NAME = value,
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    CONVCORE_FWD_ALGO_COUNT  /* the number of algorithms: their values are 0 .. COUNT - 1 */
} convcoreConvolutionFwdAlgo_t;

typedef enum {
    CONVCORE_NON_DETERMINISTIC = 0,
    CONVCORE_DETERMINISTIC = 1
} convcoreDeterminism_t;

/* One entry of a ranking (convcoreGetConvolutionForwardAlgorithm, convcoreFind...).
 * Find times each forward algorithm both ways a caller can run it (see convcoreFilterProtocol_t):
 *   timePerCall   the filters transformed by every run: convcoreConvolutionForward, and a plan
 *                 executed without prepared filters;
 *   timePrepared  the filters prepared once (convcorePrepareConvolutionPlanFilters, not timed):
 *                 a plan with prepared filters, inference's steady state.
 * They are the same number for an algorithm with nothing to prepare for the problem. time is the
 * one of the two that the convolution descriptor's filter protocol names (timePerCall by
 * default), the one Find sorts by. All three are milliseconds, -1 when nothing was timed (Get, or
 * a failed Find entry). timePerCall and timePrepared were added after time: code written before
 * them compiles and reads time as before. */
typedef struct {
    convcoreConvolutionFwdAlgo_t algo;
    convcoreStatus_t status;   /* SUCCESS: the algorithm can run the problem; else NOT_SUPPORTED */
    float time;                /* ms for the descriptor's filter protocol (timePerCall or timePrepared) */
    size_t memory;             /* workspace bytes (0 when NOT_SUPPORTED; with ALLOC_FAILED from Find, what it needs) */
    convcoreDeterminism_t determinism;
    float timePerCall;         /* ms, the filters transformed by every run */
    float timePrepared;        /* ms, the filters prepared once */
} convcoreConvolutionFwdAlgoPerf_t;

typedef struct convcoreContext* convcoreHandle_t;
typedef struct convcoreTensorStruct* convcoreTensorDescriptor_t;
typedef struct convcoreFilterStruct* convcoreFilterDescriptor_t;
typedef struct convcoreConvolutionStruct* convcoreConvolutionDescriptor_t;

/* ---- library information ---- */
CONVCORE_API size_t convcoreGetVersion(void);
CONVCORE_API const char* convcoreGetStatusName(convcoreStatus_t status);
/* The reason for the last failed call on this thread ("" when the last call succeeded). */
CONVCORE_API const char* convcoreGetLastErrorString(void);
/* One line per build option: "cuda: yes (sm_90)", "blas: OpenBLAS 0.3.21 (openmp)", ... */
CONVCORE_API const char* convcoreGetBuildInfo(void);
/* Number of CUDA devices visible; 0 when CUDA was not compiled in or no driver/GPU. */
CONVCORE_API convcoreStatus_t convcoreGetCudaDeviceCount(int* count);

/* ---- handle ---- */
/* A CPU handle. */
CONVCORE_API convcoreStatus_t convcoreCreate(convcoreHandle_t* handle);
/* A handle for a device; deviceIndex is ignored for the CPU. CUDA handles start on the
 * default stream of that device. */
CONVCORE_API convcoreStatus_t convcoreCreateForDevice(convcoreHandle_t* handle,
                                                      convcoreDeviceType_t device,
                                                      int deviceIndex);
CONVCORE_API convcoreStatus_t convcoreDestroy(convcoreHandle_t handle);
CONVCORE_API convcoreStatus_t convcoreGetDevice(convcoreHandle_t handle,
                                                convcoreDeviceType_t* device, int* deviceIndex);
/* stream is a cudaStream_t (NULL: the default stream). BAD_PARAM on a CPU handle. */
CONVCORE_API convcoreStatus_t convcoreSetStream(convcoreHandle_t handle, void* stream);
CONVCORE_API convcoreStatus_t convcoreGetStream(convcoreHandle_t handle, void** stream);
/* CPU threads used by this handle's calls (0: OpenMP's default). */
CONVCORE_API convcoreStatus_t convcoreSetNumThreads(convcoreHandle_t handle, int numThreads);

/* Memory layouts of packed tensors, as cuDNN's tensor formats. For filters, NCHW means
 * K x C/groups x R x S (KCRS) and NHWC means K x R x S x C/groups (KRSC). With the Nd
 * descriptors each names its family: NCHW is NCW / NCHW / NCDHW (filters K C/g (D) (H) W), NHWC
 * is NWC / NHWC / NDHWC (filters K (D) (H) W C/g). */
typedef enum {
    CONVCORE_TENSOR_NCHW = 0,
    CONVCORE_TENSOR_NHWC = 1
} convcoreTensorFormat_t;

/* ---- tensor descriptors: 4-D, dimensions always given as N, C, H, W ---- */
CONVCORE_API convcoreStatus_t convcoreCreateTensorDescriptor(convcoreTensorDescriptor_t* desc);
CONVCORE_API convcoreStatus_t convcoreDestroyTensorDescriptor(convcoreTensorDescriptor_t desc);
/* Packed NCHW. */
CONVCORE_API convcoreStatus_t convcoreSetTensor4dDescriptor(convcoreTensorDescriptor_t desc,
                                                            convcoreDataType_t dataType,
                                                            int64_t n, int64_t c, int64_t h, int64_t w);
/* Packed in `format`: NCHW as above, NHWC with strides (H*W*C, 1, W*C, C). */
CONVCORE_API convcoreStatus_t convcoreSetTensor4dDescriptorWithFormat(convcoreTensorDescriptor_t desc,
                                                                      convcoreTensorFormat_t format,
                                                                      convcoreDataType_t dataType, int64_t n,
                                                                      int64_t c, int64_t h, int64_t w);
/* Explicit strides, in elements; must be positive (no overlapping or broadcast outputs). */
CONVCORE_API convcoreStatus_t convcoreSetTensor4dDescriptorEx(
    convcoreTensorDescriptor_t desc, convcoreDataType_t dataType, int64_t n, int64_t c, int64_t h,
    int64_t w, int64_t nStride, int64_t cStride, int64_t hStride, int64_t wStride);
CONVCORE_API convcoreStatus_t convcoreGetTensor4dDescriptor(
    convcoreTensorDescriptor_t desc, convcoreDataType_t* dataType, int64_t* n, int64_t* c,
    int64_t* h, int64_t* w, int64_t* nStride, int64_t* cStride, int64_t* hStride, int64_t* wStride);

/* ---- filter descriptors: K x (C/groups) x R x S ----
 * Packed KCRS (convcoreSetFilter4dDescriptor), packed in a format (KRSC for NHWC), or with
 * explicit strides. The algorithms run on packed KCRS filters: any other layout is converted
 * through the workspace, which the workspace queries count. */
CONVCORE_API convcoreStatus_t convcoreCreateFilterDescriptor(convcoreFilterDescriptor_t* desc);
CONVCORE_API convcoreStatus_t convcoreDestroyFilterDescriptor(convcoreFilterDescriptor_t desc);
CONVCORE_API convcoreStatus_t convcoreSetFilter4dDescriptor(convcoreFilterDescriptor_t desc,
                                                            convcoreDataType_t dataType,
                                                            int64_t k, int64_t cPerGroup,
                                                            int64_t r, int64_t s);
CONVCORE_API convcoreStatus_t convcoreSetFilter4dDescriptorWithFormat(convcoreFilterDescriptor_t desc,
                                                                      convcoreTensorFormat_t format,
                                                                      convcoreDataType_t dataType, int64_t k,
                                                                      int64_t cPerGroup, int64_t r, int64_t s);
/* Explicit strides of the K, C/groups, R and S axes, in elements; must be positive, and a
 * filter gradient's (dw's) must not make elements overlap. */
CONVCORE_API convcoreStatus_t convcoreSetFilter4dDescriptorEx(convcoreFilterDescriptor_t desc,
                                                              convcoreDataType_t dataType, int64_t k,
                                                              int64_t cPerGroup, int64_t r, int64_t s,
                                                              int64_t kStride, int64_t cStride,
                                                              int64_t rStride, int64_t sStride);
CONVCORE_API convcoreStatus_t convcoreGetFilter4dDescriptor(convcoreFilterDescriptor_t desc,
                                                            convcoreDataType_t* dataType,
                                                            int64_t* k, int64_t* cPerGroup,
                                                            int64_t* r, int64_t* s);

/* ---- convolution descriptors ---- */
/* A new descriptor is: padding 0, stride 1, dilation 1, 1 group, cross-correlation. */
CONVCORE_API convcoreStatus_t convcoreCreateConvolutionDescriptor(convcoreConvolutionDescriptor_t* desc);
CONVCORE_API convcoreStatus_t convcoreDestroyConvolutionDescriptor(convcoreConvolutionDescriptor_t desc);
CONVCORE_API convcoreStatus_t convcoreSetConvolution2dDescriptor(
    convcoreConvolutionDescriptor_t desc, int64_t padH, int64_t padW, int64_t strideH,
    int64_t strideW, int64_t dilationH, int64_t dilationW, convcoreConvolutionMode_t mode);
CONVCORE_API convcoreStatus_t convcoreGetConvolution2dDescriptor(
    convcoreConvolutionDescriptor_t desc, int64_t* padH, int64_t* padW, int64_t* strideH,
    int64_t* strideW, int64_t* dilationH, int64_t* dilationW, convcoreConvolutionMode_t* mode);
CONVCORE_API convcoreStatus_t convcoreSetConvolutionGroupCount(convcoreConvolutionDescriptor_t desc,
                                                               int64_t groups);
CONVCORE_API convcoreStatus_t convcoreGetConvolutionGroupCount(convcoreConvolutionDescriptor_t desc,
                                                               int64_t* groups);

/* How the caller runs the forward filters, which decides the time that selection judges a forward
 * algorithm by (Find's sort order and `time`, Select, and the CONVCORE_PLAN_SELECT_* values of
 * convcoreCreateConvolutionPlan). Like cuDNN's reorder type, a property of the convolution:
 *   CONVCORE_FILTERS_PER_CALL  (the default) every call transforms the filters for its algorithm
 *                              (Winograd's U, packed filters, filter spectra):
 *                              convcoreConvolutionForward, a plan executed without prepared filters.
 *   CONVCORE_FILTERS_PREPARED  the caller prepares the filters once per weight value
 *                              (convcorePrepareConvolutionPlanFilters) and runs them many times:
 *                              inference with fixed weights.
 * It changes no result and no run, only which algorithm is fastest for the caller. The backward
 * passes have no prepared filters: they ignore it. */
typedef enum {
    CONVCORE_FILTERS_PER_CALL = 0,
    CONVCORE_FILTERS_PREPARED = 1
} convcoreFilterProtocol_t;
CONVCORE_API convcoreStatus_t convcoreSetConvolutionFilterProtocol(convcoreConvolutionDescriptor_t desc,
                                                                   convcoreFilterProtocol_t protocol);
CONVCORE_API convcoreStatus_t convcoreGetConvolutionFilterProtocol(convcoreConvolutionDescriptor_t desc,
                                                                   convcoreFilterProtocol_t* protocol);

/* Output dimensions of the forward convolution of x by w. */
CONVCORE_API convcoreStatus_t convcoreGetConvolution2dForwardOutputDim(
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t xDesc,
    convcoreFilterDescriptor_t wDesc, int64_t* n, int64_t* c, int64_t* h, int64_t* w);

/* ---- Nd descriptors (cuDNN's Nd calls): 1, 2 or 3 spatial dimensions ----
 * nbDims counts every dimension of a tensor or filter: 3 for 1-D (N, C, W; filters K, C/groups, S),
 * 4 for 2-D (N, C, H, W; K, C/groups, R, S), 5 for 3-D (N, C, D, H, W; K, C/groups, T, R, S). A
 * convolution's arrayLength counts its spatial dimensions: 1, 2 or 3. Arrays are in that order.
 *   1-D is the 2-D problem with H = 1: a 1-D tensor is stored as N x C x 1 x W, a 1-D filter as
 *       K x C/groups x 1 x S, a 1-D convolution as padding (0, p), stride (1, s), dilation (1, d).
 *       Every algorithm, workspace query, Get, Find, Select, plan and backward pass takes it as that
 *       2-D problem (an algorithm's limits apply to it: a 3x3-only algorithm refuses it). The 4d
 *       getters work on 1-D descriptors and answer H = 1 (R = 1; padding 0, stride 1, dilation 1).
 *   2-D (nbDims 4, arrayLength 2) is the same as the 4d / 2d calls.
 *   3-D (nbDims 5, arrayLength 3; NCDHW / NDHWC tensors, KCTRS / KTRSC filters) runs as 2-D
 *       convolutions over depth ranges: for each image and filter depth tap, one 2-D call whose
 *       batch is the output depths that tap reaches (docs/c_api.md). So every 2-D algorithm runs
 *       it with its 2-D limits (a 3x3-only algorithm needs R = S = 3, any T), on both devices, in
 *       the three passes, with alpha/beta as in 2-D. Workspace queries answer the largest of the
 *       2-D problems' workspaces; Get, Select, Find and the find-db answer for the 2-D problem with
 *       the largest batch (its find-db key is that 2-D problem's). Plans take 3-D descriptors (they
 *       hold the 2-D plans; convcorePrepareConvolutionPlanFilters prepares nothing for them, 0
 *       bytes). Exception: WINOGRAD_2X2_3X3 / 4X4_3X3 run a CPU forward problem with T x 3 x 3
 *       filters, one group, at least a vector of channels, NDHWC x and y and a packed KCTRS w
 *       natively (each plane and output tile transformed once, the taps summed in the GEMMs);
 *       its workspace is the transformed filters' size and its plans prepare them. The fused epilogue (convcoreConvolutionBiasActivationForward) is applied after the
 *       whole sum; convcoreConvolutionBackwardBias sums a 5-D dy over N, D, H and W. The 4d/2d
 *       getters and convcoreGetConvolution2dForwardOutputDim answer BAD_PARAM for 3-D descriptors;
 *       the fused 1x1 -> depthwise pair is 2-D only (NOT_SUPPORTED).
 * In the setters, other counts, NULL arrays, sizes or strides < 1 and padding < 0 are BAD_PARAM
 * naming the argument and value (e.g. "tensor descriptor: dims[2]=0 must be >= 1").
 * The descriptors of one problem must have one dimension count: x, y (dx, dy) and w (dw) the
 * same nbDims, and the convolution arrayLength = nbDims - 2. Descriptors set by the 4d and 2d
 * calls count as 2-D, and so does a convolution descriptor never set; descriptors of different
 * counts (a 1-D tensor with a 2-D filter, a 3-D tensor with a 2-D convolution, ...) are BAD_PARAM
 * naming the one that differs. Each
 * descriptor remembers the count it was last set with: the Nd getters answer what was set. */

/* dims: N, C, spatial... (nbDims of them); strides in elements, the same order, >= 1. */
CONVCORE_API convcoreStatus_t convcoreSetTensorNdDescriptor(convcoreTensorDescriptor_t desc,
                                                            convcoreDataType_t dataType, int nbDims,
                                                            const int64_t dims[], const int64_t strides[]);
/* Packed in `format`: CONVCORE_TENSOR_NCHW for NCW / NCHW / NCDHW, CONVCORE_TENSOR_NHWC for
 * NWC / NHWC / NDHWC;
 * dims in N, C, spatial... order whatever the format. */
CONVCORE_API convcoreStatus_t convcoreSetTensorNdDescriptorEx(convcoreTensorDescriptor_t desc,
                                                              convcoreTensorFormat_t format,
                                                              convcoreDataType_t dataType, int nbDims,
                                                              const int64_t dims[]);
/* Writes the first min(nbDimsRequested, *nbDims) dims and strides; *nbDims is the count set
 * (3, 4 or 5; 4 for a descriptor set by the 4d calls). Any output may be NULL. */
CONVCORE_API convcoreStatus_t convcoreGetTensorNdDescriptor(convcoreTensorDescriptor_t desc,
                                                            int nbDimsRequested, convcoreDataType_t* dataType,
                                                            int* nbDims, int64_t dims[], int64_t strides[]);
/* filterDims: K, C/groups, spatial... (nbDims of them), packed in `format` (KCS / KCRS / KCTRS
 * for CONVCORE_TENSOR_NCHW, KSC / KRSC / KTRSC for CONVCORE_TENSOR_NHWC). */
CONVCORE_API convcoreStatus_t convcoreSetFilterNdDescriptor(convcoreFilterDescriptor_t desc,
                                                            convcoreDataType_t dataType,
                                                            convcoreTensorFormat_t format, int nbDims,
                                                            const int64_t filterDims[]);
/* As cudnnGetFilterNdDescriptor: the first min(nbDimsRequested, *nbDims) filter dims, the count
 * set, and the format the filter is packed in (the one set; for convcoreSetFilter4dDescriptorEx,
 * the one its strides match, NCHW where both do). A filter whose explicit strides match neither
 * format is BAD_PARAM unless format is NULL. Any output may be NULL. */
CONVCORE_API convcoreStatus_t convcoreGetFilterNdDescriptor(convcoreFilterDescriptor_t desc,
                                                            int nbDimsRequested, convcoreDataType_t* dataType,
                                                            convcoreTensorFormat_t* format, int* nbDims,
                                                            int64_t filterDims[]);
/* arrayLength spatial dimensions (1, 2 or 3; D, H, W order): pads >= 0, strides and dilations >= 1, each <= 2^40.
 * The group count and filter protocol are kept (convcoreSetConvolutionGroupCount). */
CONVCORE_API convcoreStatus_t convcoreSetConvolutionNdDescriptor(convcoreConvolutionDescriptor_t desc,
                                                                 int arrayLength, const int64_t pads[],
                                                                 const int64_t strides[],
                                                                 const int64_t dilations[],
                                                                 convcoreConvolutionMode_t mode);
/* The first min(arrayLengthRequested, *arrayLength) values; *arrayLength is the count set (2 for
 * a descriptor set by convcoreSetConvolution2dDescriptor or never set). Any output may be NULL. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionNdDescriptor(convcoreConvolutionDescriptor_t desc,
                                                                 int arrayLengthRequested, int* arrayLength,
                                                                 int64_t pads[], int64_t strides[],
                                                                 int64_t dilations[],
                                                                 convcoreConvolutionMode_t* mode);
/* The output's nbDims dims (N, K, spatial...); nbDims must be xDesc's. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionNdForwardOutputDim(convcoreConvolutionDescriptor_t convDesc,
                                                                       convcoreTensorDescriptor_t xDesc,
                                                                       convcoreFilterDescriptor_t wDesc, int nbDims,
                                                                       int64_t outDims[]);

/* Transposed convolution (PyTorch's ConvTranspose1d/2d/3d, a "deconvolution") is, as in cuDNN,
 * the backward-data pass of the convolution it transposes: its input is that convolution's dy
 * (dyDesc: N x K x spatial...), its filters w (K x C/groups x ...), its output dx. This gives dx's
 * nbDims dims (N, C, spatial...) with PyTorch's output padding:
 *   out[i] = (in[i] - 1) * stride[i] - 2 * pad[i] + dilation[i] * (filter[i] - 1) + outputPadding[i] + 1,
 * the extra rows and columns that a strided convolution's input may have and its output does not
 * show. BAD_PARAM (naming it) for outputPadding[i] < 0 or >= max(stride[i], dilation[i])
 * (PyTorch's rule), for dyDesc's channels other than w's K, and for an empty output.
 * outputPadding has nbDims - 2 values (the spatial axes, outermost first); NULL means zeros.
 * Run it with convcoreConvolutionBackwardData, a backward-data plan, or convcoreConvolutionExecute
 * (CONVCORE_PASS_BACKWARD_DATA) on dxDesc = these dims. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionNdTransposedOutputDim(convcoreConvolutionDescriptor_t convDesc,
                                                                          convcoreTensorDescriptor_t dyDesc,
                                                                          convcoreFilterDescriptor_t wDesc, int nbDims,
                                                                          const int64_t outputPadding[],
                                                                          int64_t outDims[]);

/* ---- forward algorithms ---- */
/* "DIRECT", "IM2COL_GEMM", ...; NULL for a value outside the enum. */
CONVCORE_API const char* convcoreGetFwdAlgoName(convcoreConvolutionFwdAlgo_t algo);
/* The inverse of convcoreGetFwdAlgoName (case-insensitive). */
CONVCORE_API convcoreStatus_t convcoreGetFwdAlgoByName(const char* name,
                                                       convcoreConvolutionFwdAlgo_t* algo);

/* Workspace bytes `algo` needs for this problem on this handle's device. NOT_SUPPORTED (with
 * the reason) when the algorithm cannot run the problem: this is also the applicability test. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionForwardWorkspaceSize(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
    convcoreConvolutionFwdAlgo_t algo, size_t* sizeInBytes);

/* cuDNN's Get: ranks every algorithm for this problem by a heuristic, running nothing.
 * Writes min(requestedAlgoCount, CONVCORE_FWD_ALGO_COUNT) entries: the applicable algorithms
 * first (status SUCCESS, best first), then the others (status NOT_SUPPORTED). */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionFwdAlgoPerf_t* perfResults);

/* y = alpha * conv(x, w) + beta * y.
 * alpha and beta point to host values: float for float32 tensors, double for float64.
 * beta == 0: y is only written, never read (it may hold NaN).
 * x, w, y, workspace are host pointers on a CPU handle and device pointers on a CUDA handle
 * (the work is queued on the handle's stream). workspace may be NULL when the size is 0;
 * a workspace smaller than the query's answer is BAD_PARAM. y must not overlap x or w, and
 * y's strides must not make two of its elements overlap. x, w, y and workspace must be aligned
 * to the element size (4 or 8 bytes; no more is needed): BAD_PARAM otherwise. */
CONVCORE_API convcoreStatus_t convcoreConvolutionForward(
    convcoreHandle_t handle, const void* alpha, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionFwdAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreTensorDescriptor_t yDesc, void* y);

/* The fused epilogue (cuDNN's cudnnConvolutionBiasActivationForward):
 *   y = act(alpha1 * conv(x, w) + alpha2 * z + bias)
 * with act = activationMode (a convcoreActivationMode_t). The convolution's arguments, workspace
 * (convcoreGetConvolutionForwardWorkspaceSize; the epilogue needs none) and rules are those of
 * convcoreConvolutionForward; y is only written (never read, except as z).
 *   z        NULL (no residual) or a residual input described by zDesc: y's data type, dims and
 *            layout (the same strides). z may be y itself (the residual added in place); otherwise
 *            it must not overlap y. z must not overlap x or w. zDesc is ignored when z is NULL.
 *   alpha2   a host value like alpha1, read only when z is not NULL (may be NULL then).
 *   bias     NULL or K values, one per output channel, described by biasDesc: a 1 x K x 1 x 1
 *            tensor of y's data type with cStride 1 (contiguous). It must not overlap y.
 *            biasDesc is ignored when bias is NULL.
 * Algorithms that fuse the epilogue apply it while the outputs are in registers; for the others
 * the library applies it in one pass over y after the convolution. BAD_PARAM (with the reason)
 * for a wrong zDesc or biasDesc, an unknown activationMode, or overlapping buffers. */
CONVCORE_API convcoreStatus_t convcoreConvolutionBiasActivationForward(
    convcoreHandle_t handle, const void* alpha1, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionFwdAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* alpha2, convcoreTensorDescriptor_t zDesc, const void* z,
    convcoreTensorDescriptor_t biasDesc, const void* bias, convcoreActivationMode_t activationMode,
    convcoreTensorDescriptor_t yDesc, void* y);

/* ---- Find: timed selection with a persistent find-db (cuDNN's Find / FindEx) ----
 * Find times every algorithm that may run the problem and returns all CONVCORE_FWD_ALGO_COUNT
 * algorithms (min(requestedAlgoCount, COUNT) entries): the ones that ran (status SUCCESS)
 * sorted by time, fastest first, then the others in enum order with their status:
 *   NOT_SUPPORTED  the algorithm cannot run the problem, is disabled by CONVCORE_DISABLE_ALGOS,
 *                  or is not deterministic while the handle asks for deterministic algorithms;
 *   ALLOC_FAILED   its workspace (in `memory`) is more than the handle's workspace limit (Find)
 *                  or the workspace given (FindEx), or could not be allocated;
 *   other          the run failed (the status of the run; time is -1).
 * A time is the median of up to 5 rounds after a warm-up run (the algorithms interleaved), in ms (CUDA
 * handles: CUDA events on the handle's stream); after 2 rounds an algorithm whose place in the
 * order is settled (its runs and the fastest one's do not overlap) is not run again. A forward
 * algorithm that prepares filters for the problem is timed both ways, interleaved with the
 * others: as a plan executed without prepared filters (timePerCall: what
 * convcoreConvolutionForward costs) and as a plan whose filters are prepared
 * once, outside the timed runs (timePrepared); the sort order and `time` follow the convolution
 * descriptor's filter protocol (convcoreSetConvolutionFilterProtocol). The backward passes have
 * one time. The results go into the find-db (both times), and Find consults the
 * db first: an algorithm already timed for this problem, device and library version is
 * not timed again, so the second run of a program times nothing.
 * The find-db is a text file, by default $XDG_CACHE_HOME/convcore/find-db.txt (else
 * ~/.cache/convcore/find-db.txt); the environment variable CONVCORE_FIND_DB=<path> moves it,
 * CONVCORE_FIND_DB=off disables it (results are then kept in this process only). Concurrent
 * processes may share it (writes take a lock and replace the file atomically); a corrupt
 * file is ignored and rewritten. docs/find.md ("The find-db") has the format.
 * CONVCORE_DISABLE_ALGOS=fft,poly_hankel (names, case-insensitive, every direction) removes
 * algorithms from Get, Find and the Python API's "auto" and "find"; an algorithm passed by
 * name to convcoreConvolutionForward still runs. */

/* Workspace limit for convcoreFindConvolutionForwardAlgorithm on this handle (bytes;
 * SIZE_MAX, the default, means none). FindEx uses the workspace it is given instead. */
CONVCORE_API convcoreStatus_t convcoreSetFindWorkspaceLimit(convcoreHandle_t handle, size_t bytes);
/* deterministicOnly != 0: Find and FindEx on this handle skip non-deterministic algorithms
 * (status NOT_SUPPORTED). Default 0. */
CONVCORE_API convcoreStatus_t convcoreSetDeterministicOnly(convcoreHandle_t handle, int deterministicOnly);

/* Find on buffers it allocates itself (on the handle's device, filled with random values). */
CONVCORE_API convcoreStatus_t convcoreFindConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionFwdAlgoPerf_t* perfResults);

/* Find on the caller's buffers: x and w are read, y is overwritten (scratch: its contents
 * afterwards are unspecified), workspace (workspaceSizeInBytes bytes, may be NULL when 0) is
 * the most any algorithm may use. Same rules for the buffers as convcoreConvolutionForward. */
CONVCORE_API convcoreStatus_t convcoreFindConvolutionForwardAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionFwdAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes);

/* ---- Select: the algorithm to run, chosen once per problem ----
 * How the algorithm is chosen:
 *   CONVCORE_SELECT_HEURISTIC  Get's first applicable algorithm; times nothing.
 *   CONVCORE_SELECT_MEASURED   "auto": the heuristic's first CONVCORE_SELECT_CANDIDATES
 *                              applicable algorithms (and any others the find-db already knows
 *                              for this problem, and every algorithm made for it: the general
 *                              lowerings IM2COL_GEMM, IMPLICIT_GEMM and IM2WIN, DEPTHWISE,
 *                              POINTWISE, Winograd on its filters, the FFT family on filters of
 *                              25+ taps, ...; docs/find.md) timed once per machine through the
 *                              find-db, the fastest kept. On the CPU a timed run starts with the
 *                              weights out of the caches, as a network's layer finds them. DIRECT, the reference loops, is not timed beside
 *                              another algorithm that runs the problem (on a network's layer it
 *                              takes seconds). A heuristic fitted to one machine ranks well but not
 *                              exactly on another; timing its few best guesses on this machine
 *                              corrects the order at the cost of a few runs on first use.
 *   CONVCORE_SELECT_FIND       every eligible algorithm timed (Find), the fastest kept.
 * The environment variable CONVCORE_AUTO=heuristic turns MEASURED into HEURISTIC (runs that
 * must not time anything). Timing uses the buffers given (x and w read; y overwritten, its
 * contents afterwards unspecified); any of them may be NULL, and Select then times on random
 * buffers of its own. Workspaces are allocated by Select (the handle's Find workspace limit
 * applies), and CONVCORE_DISABLE_ALGOS and deterministic-only apply as in Find.
 * Forward algorithms are judged by the time of the convolution descriptor's filter protocol
 * (convcoreSetConvolutionFilterProtocol): per call by default, prepared filters when the caller
 * prepares them.
 * The decision is cached in the process, in one cache shared by Select and plan creation, under
 * one key: the pass, the problem (sizes, strides of x, w and y, data type, mode), the device and
 * its threads, the handle's Find settings (workspace limit, deterministic-only), the select mode,
 * the filter protocol and the algorithms CONVCORE_DISABLE_ALGOS disables. A repeated call costs a
 * hash lookup. The cache is bounded: beyond CONVCORE_SELECT_CACHE_CAPACITY decisions the least
 * recently used one is dropped (a dropped decision is made again from the find-db, without
 * timing anything). convcoreClearFindCache forgets it. */
typedef enum {
    CONVCORE_SELECT_HEURISTIC = 0,
    CONVCORE_SELECT_MEASURED = 1,
    CONVCORE_SELECT_FIND = 2
} convcoreSelectMode_t;
#define CONVCORE_SELECT_CANDIDATES 3
#define CONVCORE_SELECT_CACHE_CAPACITY 4096

CONVCORE_API convcoreStatus_t convcoreSelectConvolutionForwardAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreFilterDescriptor_t wDesc, const void* w, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, void* y, convcoreSelectMode_t mode,
    convcoreConvolutionFwdAlgo_t* algo);

/* Process-wide counters since the library was loaded: timedRuns, the number of
 * (problem, algorithm) pairs Find has timed; dbHits, the number of Find calls answered from
 * the find-db or the in-process cache without timing anything. Either pointer may be NULL. */
CONVCORE_API convcoreStatus_t convcoreGetFindStats(int64_t* timedRuns, int64_t* dbHits);
/* Forgets the in-process cache of find results (the next Find reads the find-db file again)
 * and Select's cached decisions. */
CONVCORE_API convcoreStatus_t convcoreClearFindCache(void);
/* The number of decisions Select's cache holds now (at most CONVCORE_SELECT_CACHE_CAPACITY). */
CONVCORE_API convcoreStatus_t convcoreGetSelectCacheSize(size_t* entries);

/* The find-db for choices made above this API: a caller that chooses between ways of running a
 * problem by timing them (convcore's Python layer: its schedules of 3-D convolutions) keeps the
 * times beside Find's, so that the next process times nothing. `direction` names the kind of
 * choice ("nd_forward", ...; not Find's own "fwd", "bwd_data" or "bwd_filter"), `problem` the
 * problem and each option one way; none may be empty or hold a tab or a line break. The records
 * are keyed as Find's: by this build and the handle's device and threads, so another build or
 * thread count times again. Storing an option's time again replaces it.
 * convcoreStoreChoiceTimes stores the times (ms, finite and >= 0) of `count` options.
 * convcoreGetFastestChoice copies the fastest option stored into `option` (`capacity` bytes,
 * with the terminating NUL; BAD_PARAM when it does not fit), or "" when none is stored. */
CONVCORE_API convcoreStatus_t convcoreStoreChoiceTimes(convcoreHandle_t handle, const char* direction,
                                                       const char* problem, int count,
                                                       const char* const* options, const float* timesMs);
CONVCORE_API convcoreStatus_t convcoreGetFastestChoice(convcoreHandle_t handle, const char* direction,
                                                       const char* problem, char* option, size_t capacity);

/* ---- device memory (CUDA handles; on a CPU handle these are aligned host allocations) ---- */
CONVCORE_API convcoreStatus_t convcoreMalloc(convcoreHandle_t handle, void** ptr, size_t bytes);
CONVCORE_API convcoreStatus_t convcoreFree(convcoreHandle_t handle, void* ptr);
/* Copies between host and the handle's device (ordered on the handle's stream, then waits). */
CONVCORE_API convcoreStatus_t convcoreMemcpyToDevice(convcoreHandle_t handle, void* dst,
                                                     const void* src, size_t bytes);
CONVCORE_API convcoreStatus_t convcoreMemcpyToHost(convcoreHandle_t handle, void* dst,
                                                   const void* src, size_t bytes);
/* Waits until the work queued on the handle's stream is done (no-op on the CPU). */
CONVCORE_API convcoreStatus_t convcoreSynchronize(convcoreHandle_t handle);

/* ==== backward passes (training): dx, dw and the bias gradient ==================================
 * The forward problem is y = conv(x, w); dy is the gradient of the loss with respect to y.
 *   backward data:   dx = alpha * conv_data_grad(w, dy) + beta * dx
 *   backward filter: dw = alpha * conv_filter_grad(x, dy) + beta * dw
 *   backward bias:   db = alpha * sum over n, p, q of dy + beta * db  (db: 1 x K x 1 x 1)
 * The descriptors are those of the forward problem (dx has the shape of x, dw of w, dy of y)
 * and follow the same rules: beta == 0 never reads the output; dy, dx and x may be strided
 * (the core stages them through extra workspace); a workspace smaller than the query's answer
 * is BAD_PARAM; NOT_SUPPORTED comes with the reason. In the true-convolution mode the filter
 * is flipped, so its gradients are too. docs/algorithms.md ("Backward passes") has the details
 * and error bounds. */

/* Backward-data algorithms (dx from w and dy), CONVCORE_BWD_DATA_ALGO_<NAME>: the
 * CONVCORE_BACKWARD_DATA lines of convcore/algorithms.def. */
typedef enum {
#define CONVCORE_BACKWARD_DATA(NAME, value, ...) CONVCORE_BWD_DATA_ALGO_##NAME = value,
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    CONVCORE_BWD_DATA_ALGO_COUNT  /* the number of algorithms: their values are 0 .. COUNT - 1 */
} convcoreConvolutionBwdDataAlgo_t;

/* Backward-filter algorithms (dw from x and dy), CONVCORE_BWD_FILTER_ALGO_<NAME>: the
 * CONVCORE_BACKWARD_FILTER lines of convcore/algorithms.def. */
typedef enum {
#define CONVCORE_BACKWARD_FILTER(NAME, value, ...) CONVCORE_BWD_FILTER_ALGO_##NAME = value,
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    CONVCORE_BWD_FILTER_ALGO_COUNT  /* the number of algorithms: their values are 0 .. COUNT - 1 */
} convcoreConvolutionBwdFilterAlgo_t;

/* One entry of a backward ranking (same fields as convcoreConvolutionFwdAlgoPerf_t). */
typedef struct {
    convcoreConvolutionBwdDataAlgo_t algo;
    convcoreStatus_t status;   /* SUCCESS: the algorithm can run the problem; else NOT_SUPPORTED */
    float time;                /* milliseconds; -1 when nothing was timed (Get, or a failed Find entry) */
    size_t memory;             /* workspace bytes (0 when NOT_SUPPORTED; with ALLOC_FAILED from Find, what it needs) */
    convcoreDeterminism_t determinism;
} convcoreConvolutionBwdDataAlgoPerf_t;

typedef struct {
    convcoreConvolutionBwdFilterAlgo_t algo;
    convcoreStatus_t status;
    float time;
    size_t memory;
    convcoreDeterminism_t determinism;
} convcoreConvolutionBwdFilterAlgoPerf_t;

/* "DIRECT", "IM2COL_GEMM", ...; NULL for a value outside the enum. */
CONVCORE_API const char* convcoreGetBwdDataAlgoName(convcoreConvolutionBwdDataAlgo_t algo);
CONVCORE_API const char* convcoreGetBwdFilterAlgoName(convcoreConvolutionBwdFilterAlgo_t algo);
/* The inverses (case-insensitive). */
CONVCORE_API convcoreStatus_t convcoreGetBwdDataAlgoByName(const char* name,
                                                           convcoreConvolutionBwdDataAlgo_t* algo);
CONVCORE_API convcoreStatus_t convcoreGetBwdFilterAlgoByName(const char* name,
                                                             convcoreConvolutionBwdFilterAlgo_t* algo);

/* Workspace bytes; NOT_SUPPORTED (with the reason) when the algorithm cannot run the problem. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionBackwardDataWorkspaceSize(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc,
    convcoreConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes);
CONVCORE_API convcoreStatus_t convcoreGetConvolutionBackwardFilterWorkspaceSize(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc,
    convcoreConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes);

/* Heuristic rankings, running nothing (as convcoreGetConvolutionForwardAlgorithm). */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdDataAlgoPerf_t* perfResults);
CONVCORE_API convcoreStatus_t convcoreGetConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdFilterAlgoPerf_t* perfResults);

/* Find and FindEx for the backward passes: as convcoreFindConvolutionForwardAlgorithm[Ex]
 * (timed, sorted, the same statuses, the same find-db, workspace limit, deterministic-only and
 * CONVCORE_DISABLE_ALGOS). In FindEx the inputs (w and dy; x and dy) are only read and the
 * output (dx; dw) is scratch. */
CONVCORE_API convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t dxDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdDataAlgoPerf_t* perfResults);
CONVCORE_API convcoreStatus_t convcoreFindConvolutionBackwardDataAlgorithmEx(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdDataAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes);
CONVCORE_API convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreTensorDescriptor_t dyDesc,
    convcoreConvolutionDescriptor_t convDesc, convcoreFilterDescriptor_t dwDesc,
    int requestedAlgoCount, int* returnedAlgoCount, convcoreConvolutionBwdFilterAlgoPerf_t* perfResults);
CONVCORE_API convcoreStatus_t convcoreFindConvolutionBackwardFilterAlgorithmEx(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, int requestedAlgoCount, int* returnedAlgoCount,
    convcoreConvolutionBwdFilterAlgoPerf_t* perfResults, void* workspace, size_t workspaceSizeInBytes);

/* Select for the backward passes (see convcoreSelectConvolutionForwardAlgorithm): the inputs
 * (w and dy; x and dy) are only read, the output (dx; dw) is overwritten; any may be NULL. */
CONVCORE_API convcoreStatus_t convcoreSelectConvolutionBackwardDataAlgorithm(
    convcoreHandle_t handle, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t dxDesc, void* dx, convcoreSelectMode_t mode,
    convcoreConvolutionBwdDataAlgo_t* algo);
CONVCORE_API convcoreStatus_t convcoreSelectConvolutionBackwardFilterAlgorithm(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreFilterDescriptor_t dwDesc, void* dw, convcoreSelectMode_t mode,
    convcoreConvolutionBwdFilterAlgo_t* algo);

/* dx = alpha * (gradient of conv(x, w) with respect to x, given dy) + beta * dx.
 * alpha/beta as in convcoreConvolutionForward. dx must not overlap w or dy. */
CONVCORE_API convcoreStatus_t convcoreConvolutionBackwardData(
    convcoreHandle_t handle, const void* alpha, convcoreFilterDescriptor_t wDesc, const void* w,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionBwdDataAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreTensorDescriptor_t dxDesc, void* dx);

/* dw = alpha * (gradient of conv(x, w) with respect to w, given dy) + beta * dw.
 * dw is packed K x C/groups x R x S and must not overlap x or dy. */
CONVCORE_API convcoreStatus_t convcoreConvolutionBackwardFilter(
    convcoreHandle_t handle, const void* alpha, convcoreTensorDescriptor_t xDesc, const void* x,
    convcoreTensorDescriptor_t dyDesc, const void* dy, convcoreConvolutionDescriptor_t convDesc,
    convcoreConvolutionBwdFilterAlgo_t algo, void* workspace, size_t workSpaceSizeInBytes,
    const void* beta, convcoreFilterDescriptor_t dwDesc, void* dw);

/* db = alpha * sum_{n,p,q} dy[n,k,p,q] + beta * db, accumulated in double. dbDesc is a
 * 1 x K x 1 x 1 tensor (any positive cStride) of dy's data type. No workspace. */
CONVCORE_API convcoreStatus_t convcoreConvolutionBackwardBias(
    convcoreHandle_t handle, const void* alpha, convcoreTensorDescriptor_t dyDesc, const void* dy,
    const void* beta, convcoreTensorDescriptor_t dbDesc, void* db);

/* The backward of the fused epilogue where its activation and bias meet, in one pass over dy.
 * With v = alpha1 * conv(x, w) + alpha2 * z + bias the pre-activation and y = act(v) the output
 * (convcoreConvolutionBiasActivationForward):
 *   dv = dy * act'(v), elementwise: the gradient of v, so of conv(x, w) (feed it to the backward
 *        data and filter passes) and of z (times alpha2);
 *   db = alpha * sum_{n,p,q} dv[n,k,p,q] + beta * db, accumulated in double, when db is given.
 * act' is read from y for RELU (1 where y > 0) and RELU6 (1 where 0 < y < 6), from v for SILU
 * (s * (1 + v * (1 - s)), s = 1 / (1 + exp(-v))), GELU (Phi(v) + v * phi(v), phi the normal
 * density) and GELU_TANH (PyTorch's gelu_backward formula); IDENTITY reads neither (dv = dy). The tensor
 * that mode does not read may be NULL. y, v, dy and dv are 4-D tensors of one shape and data
 * type, any strides; dv may be dy itself (same pointer and strides: in place) and must not
 * overlap the others otherwise. dbDesc and db may both be NULL (no bias gradient); dbDesc is
 * then as in convcoreConvolutionBackwardBias. alpha and beta apply to db only. No workspace. */
CONVCORE_API convcoreStatus_t convcoreActivationBackwardBias(
    convcoreHandle_t handle, convcoreActivationMode_t mode, convcoreTensorDescriptor_t yDesc, const void* y,
    convcoreTensorDescriptor_t vDesc, const void* v, convcoreTensorDescriptor_t dyDesc, const void* dy,
    convcoreTensorDescriptor_t dvDesc, void* dv, const void* alpha, const void* beta,
    convcoreTensorDescriptor_t dbDesc, void* db);
/* ==== end of backward passes ==================================================================== */

/* ==== plans ======================================================================================
 * A plan is one pass of a convolution on fixed descriptors, validated and bound to one algorithm
 * once, then run many times with only the data pointers (cuDNN's execution plans, oneDNN's
 * primitives). The descriptors are copied at creation: changing or destroying them afterwards
 * does not change the plan. The handle must outlive the plan; the plan runs on the handle's
 * stream and threads. The descriptor-style calls (convcoreConvolutionForward, ...BackwardData,
 * ...BackwardFilter) are a plan built and executed in one call.
 * Threads: executing one plan from several threads at once is safe when each call has its own
 * output and workspace and the handle's own rules allow it (a CPU handle does; a CUDA handle
 * orders the calls on its stream). Destroying a plan while it executes is not. */
typedef struct convcoreConvolutionPlanStruct* convcoreConvolutionPlan_t;

typedef enum {
    CONVCORE_PASS_FORWARD = 0,         /* y = alpha * conv(x, w) + beta * y */
    CONVCORE_PASS_BACKWARD_DATA = 1,   /* dx = alpha * grad_x(w, dy) + beta * dx */
    CONVCORE_PASS_BACKWARD_FILTER = 2  /* dw = alpha * grad_w(x, dy) + beta * dw */
} convcoreConvolutionPass_t;

/* algo values that choose the algorithm at creation, as convcoreSelect...Algorithm does in the
 * matching mode (timing, where the mode times, on buffers the library allocates). A forward
 * plan is chosen for the way it will run: set CONVCORE_FILTERS_PREPARED on convDesc
 * (convcoreSetConvolutionFilterProtocol) for a plan whose filters will be prepared
 * (convcorePrepareConvolutionPlanFilters); the default, CONVCORE_FILTERS_PER_CALL, chooses for a
 * plan executed without them. These values are the C encoding of the select modes at plan
 * creation: they map one to one to CONVCORE_SELECT_HEURISTIC, _MEASURED and _FIND. */
#define CONVCORE_PLAN_SELECT_HEURISTIC (-1)
#define CONVCORE_PLAN_SELECT_MEASURED (-2)
#define CONVCORE_PLAN_SELECT_FIND (-3)

/* xDesc, wDesc, yDesc describe x, w, y (forward), dx, w, dy (backward data) or x, dw, dy
 * (backward filter). algo is the pass's algorithm (a convcoreConvolutionFwdAlgo_t,
 * convcoreConvolutionBwdDataAlgo_t or convcoreConvolutionBwdFilterAlgo_t value) or one of the
 * CONVCORE_PLAN_SELECT_* values. Fails as the pass's descriptor-style call would (BAD_PARAM,
 * NOT_SUPPORTED with the algorithm's reason); *plan is NULL then. */
CONVCORE_API convcoreStatus_t convcoreCreateConvolutionPlan(
    convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
    convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc,
    convcoreTensorDescriptor_t yDesc, int algo, convcoreConvolutionPlan_t* plan);
CONVCORE_API convcoreStatus_t convcoreDestroyConvolutionPlan(convcoreConvolutionPlan_t plan);
/* The algorithm the plan runs (the pass's enum value), and its exact workspace size. */
CONVCORE_API convcoreStatus_t convcoreGetConvolutionPlanAlgorithm(convcoreConvolutionPlan_t plan, int* algo);
CONVCORE_API convcoreStatus_t convcoreGetConvolutionPlanWorkspaceSize(convcoreConvolutionPlan_t plan,
                                                                      size_t* sizeInBytes);
/* out = alpha * pass(in0, in1) + beta * out, with the rules of the pass's descriptor-style call:
 *   forward:          in0 = x,  in1 = w,  out = y
 *   backward data:    in0 = dy, in1 = w,  out = dx
 *   backward filter:  in0 = x,  in1 = dy, out = dw
 * workspace: at least convcoreGetConvolutionPlanWorkspaceSize bytes (NULL when that is 0). */
CONVCORE_API convcoreStatus_t convcoreExecuteConvolutionPlan(convcoreConvolutionPlan_t plan, const void* alpha,
                                                             const void* in0, const void* in1, const void* beta,
                                                             void* out, void* workspace,
                                                             size_t workspaceSizeInBytes);
/* A forward plan with the fused epilogue of convcoreConvolutionBiasActivationForward:
 *   y = act(alpha1 * conv(x, w) + alpha2 * z + bias).
 * z: NULL or a tensor laid out as the plan's y (its yDesc), possibly y itself; bias: NULL or
 * K contiguous values of y's data type; alpha2 is read only when z is not NULL. The other rules
 * are those of convcoreExecuteConvolutionPlan and of convcoreConvolutionBiasActivationForward.
 * BAD_PARAM for a plan of another pass. */
CONVCORE_API convcoreStatus_t convcoreExecuteConvolutionPlanBiasActivation(
    convcoreConvolutionPlan_t plan, const void* alpha1, const void* x, const void* w, const void* alpha2,
    const void* z, const void* bias, convcoreActivationMode_t activationMode, void* y, void* workspace,
    size_t workspaceSizeInBytes);
/* Prepares the filters w for the plan's algorithm once (on the CPU: Winograd's transformed
 * filters U, IM2WIN's packed filter), kept in the plan: later executions whose in1 is this same
 * pointer w use them instead of transforming w on every call. For inference, where the weights
 * do not change. The caller
 * promises that the contents of w do not change while the plan uses them: after changing them,
 * call this again (the "filters changed" call), or pass another pointer, which transforms per
 * call as usual. Each call drops what an earlier one kept. Algorithms with nothing to prepare
 * (and backward passes, and CUDA handles for now) keep nothing and succeed with
 * *preparedBytes = 0; preparedBytes may be NULL. Not concurrent with executions of the plan. */
CONVCORE_API convcoreStatus_t convcorePrepareConvolutionPlanFilters(convcoreConvolutionPlan_t plan, const void* w,
                                                                    size_t* preparedBytes);
/* ==== end of plans ============================================================================== */

/* ==== the handle's plan cache, prepared filters and workspace ====================================
 * What a framework keeps between calls, kept by the handle (oneDNN's primitive cache, with cuDNN's
 * descriptors): convcoreConvolutionExecute runs one pass of a convolution given by descriptors
 * through the handle's cache of plans. The first call of a problem validates the descriptors,
 * chooses the algorithm (for algo < 0) and makes its plan; a later call with equal descriptors
 * and algo finds the plan (a lookup of their values: the descriptors may be other objects, set
 * again, or changed and set back) and runs it with the data pointers only.
 *
 * The cache holds at most its capacity of plans, dropping the least recently used one first
 * (default 1024, or the environment variable CONVCORE_PLAN_CACHE_CAPACITY read when the handle is
 * created; convcoreSetPlanCacheCapacity changes it, 0 keeps nothing). convcoreClearFindCache also
 * drops the plans every handle chose by measuring or finding. The descriptor-style calls
 * (convcoreConvolutionForward, ...BiasActivationForward, ...BackwardData, ...BackwardFilter) run
 * through the same cache, without keeping filters.
 *
 * Prepared filters. With CONVCORE_FILTERS_PREPARED on convDesc, a forward plan whose algorithm
 * transforms its filters (on the CPU: the Winograd family's U, IM2WIN's packed filter, the
 * native 3-D Winograd's U) keeps them per filter pointer (in1), so that several layers of one
 * shape, each with its own weights, share one plan. Whether kept filters are still those of in1
 * is told by filterVersion:
 *   0 (CONVCORE_FILTER_VERSION_CHECKED)  the core fingerprints in1's bytes at every call and
 *                                        prepares them again when they changed: always right,
 *                                        for one read of the filters per call;
 *   > 0                                  the caller's number for in1's contents: the core
 *                                        prepares them again when the number or the pointer
 *                                        changes, and trusts them otherwise (bump it after
 *                                        every change; a number identifies one content).
 * With CONVCORE_FILTERS_PER_CALL (the default) nothing is kept and filterVersion is ignored.
 *
 * Workspace. args->workspace NULL: the handle's own workspace, allocated when a plan first needs
 * more than it has and kept until the handle is destroyed (on a CUDA handle, device memory used
 * in the handle's stream order). Several threads executing on one CPU handle each get a buffer
 * of their own. A caller may pass its own workspace instead (at least the plan's
 * convcoreGetConvolutionPlanWorkspaceSize; convcoreGetConvolution*WorkspaceSize tell it).
 * After a warm-up call, a repeated call allocates nothing (convcoreGetPlanCacheInfo counts it).
 * Threads: as the plans' rules (convcore.h, "plans"); the cache itself is safe to share. */
#define CONVCORE_FILTER_VERSION_CHECKED 0

/* The operands of convcoreConvolutionExecute. Zero-initialise it ({0} in C) and set what the call
 * uses: a zeroed field means "absent" (alpha NULL: 1; beta NULL: 0; z, bias NULL: none; activation
 * 0: CONVCORE_ACTIVATION_IDENTITY; filterVersion 0: checked; workspace NULL: the handle's).
 * Scalars are of the data type's width (double for CONVCORE_DATA_DOUBLE, else float).
 *   forward:          in0 = x,  in1 = w,  out = y   out = act(alpha * conv(x, w) + alpha2 * z + bias)
 *                                                                + beta * out
 *   backward data:    in0 = dy, in1 = w,  out = dx  out = alpha * grad_x(w, dy) + beta * out
 *   backward filter:  in0 = x,  in1 = dy, out = dw  out = alpha * grad_w(x, dy) + beta * out
 * The epilogue (z, alpha2, bias, activation: convcoreConvolutionBiasActivationForward's rules;
 * z is laid out as y, bias is K contiguous values) is for the forward pass only, and with it beta
 * must be absent or 0 (pass z = out and alpha2 to add out). */
typedef struct {
    const void* alpha;
    const void* beta;
    const void* in0;
    const void* in1;
    void* out;
    const void* z;
    const void* alpha2;
    const void* bias;
    convcoreActivationMode_t activation;
    int64_t filterVersion;
    void* workspace;
    size_t workspaceSizeInBytes;
} convcoreConvolutionArgs_t;

/* One pass through the handle's plan cache. xDesc, wDesc, convDesc, yDesc and algo as
 * convcoreCreateConvolutionPlan's (algo a CONVCORE_PLAN_SELECT_* value chooses on the first call,
 * timing on the call's buffers where the mode times: in0 and in1, and out when beta is 0 and z
 * is not out). *algoRun (may be NULL): the pass's algorithm that ran. Fails as the plan's creation
 * or execution would (BAD_PARAM naming the argument, NOT_SUPPORTED with the algorithm's reason). */
CONVCORE_API convcoreStatus_t convcoreConvolutionExecute(
    convcoreHandle_t handle, convcoreConvolutionPass_t pass, convcoreTensorDescriptor_t xDesc,
    convcoreFilterDescriptor_t wDesc, convcoreConvolutionDescriptor_t convDesc, convcoreTensorDescriptor_t yDesc,
    int algo, const convcoreConvolutionArgs_t* args, int* algoRun);

typedef struct {
    size_t capacity;              /* plans kept at most */
    size_t plans;                 /* plans kept now */
    int64_t hits;                 /* calls that found their plan */
    int64_t misses;               /* calls that made one */
    int64_t filterPreparations;   /* filters transformed and kept (per pointer and version) */
    size_t preparedFilterBytes;   /* bytes of the filters kept now */
    size_t workspaceBytes;        /* the handle's workspace, all its buffers */
    int64_t workspaceAllocations; /* times the handle allocated workspace */
} convcorePlanCacheInfo_t;

CONVCORE_API convcoreStatus_t convcoreSetPlanCacheCapacity(convcoreHandle_t handle, size_t capacity);
/* The most bytes of prepared filters the handle keeps (default 2 GiB, or the environment variable
 * CONVCORE_PREPARED_FILTER_BYTES): beyond it the least recently used filters of any plan are
 * dropped, and prepared again when their layer next runs. */
CONVCORE_API convcoreStatus_t convcoreSetPreparedFilterLimit(convcoreHandle_t handle, size_t bytes);
CONVCORE_API convcoreStatus_t convcoreGetPlanCacheInfo(convcoreHandle_t handle, convcorePlanCacheInfo_t* info);
/* Drops every plan and every kept filter (the workspace stays; the counters keep counting). */
CONVCORE_API convcoreStatus_t convcoreClearPlanCache(convcoreHandle_t handle);
/* ==== end of the plan cache ===================================================================== */

/* ==== a 1x1 convolution with a depthwise convolution fused after it ===============================
 * y = actDw(dwconv(actPw(conv1x1(x, wPw) + biasPw), wDw) + biasDw), computed together (oneDNN's
 * depthwise post-op, dnnl::post_ops::append_dw): the 1x1 convolution's output, MobileNet's and
 * EfficientNet's expanded tensor, is made a few rows at a time into a buffer that stays in cache
 * and never written to memory. CPU handles, packed NHWC x and y, packed K x C x R x S filters.
 *   xDesc      x: N x C x H x W, packed NHWC (CONVCORE_TENSOR_NHWC);
 *   wPwDesc    the 1x1 filters, K x C x 1 x 1: stride 1, no padding, one group;
 *   wDwDesc    the depthwise filters, K x 1 x R x S;
 *   dwConvDesc the depthwise convolution's padding, stride, dilation and mode, with K groups;
 *   yDesc      y: N x K x P x Q as dwConvDesc makes it, packed NHWC.
 * BAD_PARAM for descriptors that do not fit together (named), NOT_SUPPORTED (with the reason) for
 * a CUDA handle or other layouts. The plan keeps the descriptors; no workspace (its row buffers,
 * a few rows of the 1x1's output per thread, are its own). */
typedef struct convcorePointwiseDepthwisePlanStruct* convcorePointwiseDepthwisePlan_t;
CONVCORE_API convcoreStatus_t convcoreCreatePointwiseDepthwisePlan(
    convcoreHandle_t handle, convcoreTensorDescriptor_t xDesc, convcoreFilterDescriptor_t wPwDesc,
    convcoreFilterDescriptor_t wDwDesc, convcoreConvolutionDescriptor_t dwConvDesc,
    convcoreTensorDescriptor_t yDesc, convcorePointwiseDepthwisePlan_t* plan);
CONVCORE_API convcoreStatus_t convcoreDestroyPointwiseDepthwisePlan(convcorePointwiseDepthwisePlan_t plan);
/* Prepares both filters once (the 1x1's packed panels, the depthwise taps), kept in the plan:
 * executions with these same wPw and wDw pointers use them, as convcorePrepareConvolutionPlanFilters
 * (the same promise: call again after changing their contents). */
CONVCORE_API convcoreStatus_t convcorePreparePointwiseDepthwisePlanFilters(convcorePointwiseDepthwisePlan_t plan,
                                                                           const void* wPw, const void* wDw);
/* biasPw, biasDw: NULL or K contiguous values of y's data type. y must not overlap any input. */
CONVCORE_API convcoreStatus_t convcoreExecutePointwiseDepthwisePlan(
    convcorePointwiseDepthwisePlan_t plan, const void* x, const void* wPw, const void* biasPw,
    convcoreActivationMode_t actPw, const void* wDw, const void* biasDw, convcoreActivationMode_t actDw, void* y);
/* ==== end of the fused 1x1 -> depthwise pair ===================================================== */

/* ==== what convcore declares about each algorithm =================================================
 * convcore/algorithms.def declares every algorithm of every pass; this reads it. */
typedef struct {
    const char* name;                  /* as convcoreGet{Fwd,BwdData,BwdFilter}AlgoName */
    int onCpu;                         /* 1 when the algorithm runs on the CPU */
    int onCuda;                        /* 1 when it runs on CUDA devices (in a build with CUDA) */
    double errorBoundFloat;            /* ||out - ref|| / ||ref|| against a float64 reference on */
    double errorBoundDouble;           /* random data, that convcore's tests hold it to (float32, */
                                       /* float64); docs/algorithms.md has the measurements */
    convcoreDeterminism_t determinism; /* the same bits for the same inputs on every run */
} convcoreAlgorithmInfo_t;

/* algo: the pass's enum value. BAD_PARAM for an unknown pass or algo, or a NULL info. */
CONVCORE_API convcoreStatus_t convcoreGetAlgorithmInfo(convcoreConvolutionPass_t pass, int algo,
                                                       convcoreAlgorithmInfo_t* info);
/* ==== end of algorithm information ============================================================== */

#ifdef __cplusplus
}
#endif

#endif /* CONVCORE_CONVCORE_H */
