// Transform sizes and the workspace cap of the FFT family, on every device (the CPU solvers in
// cpu/, the CUDA ones in cuda/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace convcore {
namespace fft {

// A size m >= n of the form 2^a 3^b 5^c 7^d (even when `even`), chosen in [n, 2n] to
// minimise m * log2(m) weighted by how well FFTW_ESTIMATE plans it (powers of two best; factors
// 3, 5 and above all 7 cost extra; measured with FFTW 3.3.10).
int64_t good_size(int64_t n, bool even = false);
// The smallest size >= n that good_size would consider and that is a multiple of `multiple`
// (0 when there is none up to 2n + 2).
int64_t good_size_multiple(int64_t n, int64_t multiple);
// Estimated FFTW_ESTIMATE time of a transform of m points relative to a power of two (>= 1).
double size_weight(int64_t m);

// Above this many bytes of workspace the FFT solvers say NOT_SUPPORTED.
constexpr size_t kWorkspaceCap = size_t(4) << 30;  // 4 GiB
// "<ALGO> would need 12.3 GB of workspace for this problem (the cap is 4 GiB)".
std::string too_big(const char* algo, double bytes);

}  // namespace fft
}  // namespace convcore
