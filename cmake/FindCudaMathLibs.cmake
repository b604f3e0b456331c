# cuBLAS and cuFFT: from the CUDA toolkit when it has them, else from the nvidia-cublas /
# nvidia-cufft wheels of the Python that builds us (their libraries are versioned only:
# libcublas.so.13, libcufft.so.12, so find_library is given the full file names).
set(_convcore_cuda_hints ${CUDAToolkit_LIBRARY_DIR})
set(_convcore_cuda_inc_hints ${CUDAToolkit_INCLUDE_DIRS})
find_package(Python 3.9 COMPONENTS Interpreter QUIET)
if(Python_EXECUTABLE)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import nvidia, os; print(';'.join(os.path.join(p, 'cu13') for p in nvidia.__path__))"
    OUTPUT_VARIABLE _convcore_wheel_roots OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  foreach(root ${_convcore_wheel_roots})
    list(APPEND _convcore_cuda_hints ${root}/lib)
    list(APPEND _convcore_cuda_inc_hints ${root}/include)
  endforeach()
endif()
find_library(CONVCORE_CUBLAS_LIBRARY NAMES cublas libcublas.so.13 libcublas.so.12 HINTS ${_convcore_cuda_hints})
find_path(CONVCORE_CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${_convcore_cuda_inc_hints})
find_library(CONVCORE_CUFFT_LIBRARY NAMES cufft libcufft.so.12 libcufft.so.11 HINTS ${_convcore_cuda_hints})
find_path(CONVCORE_CUFFT_INCLUDE_DIR cufft.h HINTS ${_convcore_cuda_inc_hints})
foreach(lib CUBLAS CUFFT)
  if(NOT CONVCORE_${lib}_LIBRARY OR NOT CONVCORE_${lib}_INCLUDE_DIR)
    message(STATUS "convcore: ${lib} not found (pip install nvidia-cublas nvidia-cufft); "
                   "the algorithms that need it will answer NOT_SUPPORTED on CUDA")
    unset(CONVCORE_${lib}_LIBRARY CACHE)
    set(CONVCORE_${lib}_LIBRARY "")
  endif()
endforeach()
