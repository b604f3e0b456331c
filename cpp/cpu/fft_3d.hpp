// FFT on whole 3-D volumes: the FFT algorithm's 3-D form in the C API (core/depth_decomposition.cpp),
// with FFTW's rank-3 real transforms (cpu/fft.cpp is the 2-D form; the math is the same with one
// more axis). The padded input volume of each (image, channel) is transformed once at an
// Ld x Lh x Lw size covering the padded input the outputs read; the filter spectra are made per
// call, per block of filters: each depth tap's 2-D spectrum by the direct DFT (FilterDft), then
// the DFT along the depth of the T taps placed dil_d apart,
//     W(fd, fh, fw) = sum_t exp(-2 pi i fd t dil_d / Ld) W_t(fh, fw);
// per frequency the channel sum Y(n, k) = sum_c X(n, c) conj(W(k, c)) (the shared product
// kernels); one inverse per (image, filter), cropped and subsampled at the strides.
// Against the depth decomposition (one 2-D FFT convolution per depth tap) it transforms each input
// volume once instead of each input plane once per tap, and makes N·Ld products per frequency of a
// plane instead of N·D'·T.
//
// Tensors: x and y any strides (N, C, D, H, W order: NCDHW and NDHWC alike, read and written in
// place), w packed K x C/groups x T x R x S. Any padding, stride and dilation, groups.
// A spectrum of the volume is Ld consecutive 2-D spectra of Lh x (Lw/2+1) in the FFT's block
// layout (fft_family.hpp), so a set of S volume spectra is Ld 2-D sets of S spectra.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/context.hpp"
#include "core/problem.hpp"
#include "cpu/winograd_3d.hpp"

namespace convcore {
namespace cpu {
namespace fft_3d {

using winograd_3d::Depth;

// Why the 3-D FFT cannot run the problem, "" when it can. `plane` is one depth plane's 2-D
// problem for all N images (its H/W geometry, channels, groups, mode and type).
std::string why_not(const ConvProblem& plane, const Depth& depth);
size_t workspace_bytes(const ConvProblem& plane, const Depth& depth);
// y = alpha * conv3d(x, w) + beta * y (beta == 0: y never read); strides in elements, N, C, D, H,
// W order.
void forward(const ConvProblem& plane, const Context& ctx, const Depth& depth, const void* x,
             const int64_t x_strides[5], const void* w, void* y, const int64_t y_strides[5], double alpha,
             double beta, void* workspace);

}  // namespace fft_3d
}  // namespace cpu
}  // namespace convcore
