// Stand-in for cuComplex.h (tests/cuda_emulator): the complex types of cuBLAS and cuFFT, with
// the layout of the real ones (float2 / double2), and the helpers convcore uses.
#pragma once
#include <cuda_runtime.h>

typedef float2 cuFloatComplex;
typedef cuFloatComplex cuComplex;
typedef double2 cuDoubleComplex;

inline cuFloatComplex make_cuFloatComplex(float r, float i) { return cuFloatComplex{r, i}; }
inline cuComplex make_cuComplex(float r, float i) { return cuComplex{r, i}; }
inline cuDoubleComplex make_cuDoubleComplex(double r, double i) { return cuDoubleComplex{r, i}; }
inline float cuCrealf(cuFloatComplex z) { return z.x; }
inline float cuCimagf(cuFloatComplex z) { return z.y; }
inline double cuCreal(cuDoubleComplex z) { return z.x; }
inline double cuCimag(cuDoubleComplex z) { return z.y; }
