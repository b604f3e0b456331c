// convcoreGetBuildInfo: what this build was compiled with, one "key: value" per line.
#include <cblas.h>
#include <fftw3.h>
#include <omp.h>

#include <sstream>
#include <string>

#include "convcore/convcore.h"
#include "core/build_id.hpp"

extern "C" const char* convcoreGetBuildInfo(void) {
    static const std::string info = [] {
        std::ostringstream o;
        o << "version: " << CONVCORE_VERSION_MAJOR << "." << CONVCORE_VERSION_MINOR << "."
          << CONVCORE_VERSION_PATCH << "\n";
        o << "build id: " << (convcore::library_build_id().empty() ? "none" : convcore::library_build_id()) << "\n";
        o << "compiler: " << __VERSION__ << "\n";
        o << "openmp: " << _OPENMP << " (max threads " << omp_get_max_threads() << ")\n";
        o << "blas: " << openblas_get_config() << ", kernels " << openblas_get_corename() << " ["
          << CONVCORE_BLAS_LIBRARY << "]\n";
        o << "fft: " << fftwf_version << " [" << CONVCORE_FFTW_LIBRARY << "]\n";
#ifdef CONVCORE_WITH_CUDA
        o << "cuda: yes (architectures " << CONVCORE_CUDA_ARCHS << ")\n";
#ifdef CONVCORE_HAVE_CUBLAS
        o << "cublas: yes\n";
#else
        o << "cublas: no\n";
#endif
#ifdef CONVCORE_HAVE_CUFFT
        o << "cufft: yes\n";
#else
        o << "cufft: no\n";
#endif
#else
        o << "cuda: no\n";
#endif
        return o.str();
    }();
    return info.c_str();
}
