// The one table of solvers. Adding an algorithm: its cpu/<algo>.cpp and cuda/<algo>.cu define
// convcore::cpu::<algo>_solver / convcore::cuda::<algo>_solver, and one line each goes here.
#include "core/backward_via_forward.hpp"
#include "core/solver.hpp"

namespace convcore {
namespace cpu {
extern const Solver direct_solver;
extern const Solver im2col_gemm_solver;
extern const Solver implicit_gemm_solver;
extern const Solver im2win_solver;
extern const Solver fft_solver;
extern const Solver fft_tiling_solver;
extern const Solver poly_hankel_solver;
extern const Solver fine_grained_fft_solver;
extern const Solver cyclic_minimal_solver;
extern const Solver winograd_2x2_3x3_solver;
extern const Solver winograd_4x4_3x3_solver;
}  // namespace cpu
#ifdef CONVCORE_WITH_CUDA
namespace cuda {
extern const Solver direct_solver;
extern const Solver im2col_gemm_solver;
extern const Solver implicit_gemm_solver;
extern const Solver fft_solver;
extern const Solver fft_tiling_solver;
extern const Solver fine_grained_fft_solver;
extern const Solver poly_hankel_solver;
extern const Solver winograd_2x2_3x3_solver;
extern const Solver winograd_4x4_3x3_solver;
extern const Solver cyclic_minimal_solver;
extern const Solver im2win_solver;
}  // namespace cuda
#endif

const std::vector<const Solver*>& all_solvers() {
    static const std::vector<const Solver*> solvers = {
        &cpu::direct_solver,
        &cpu::im2col_gemm_solver,
        &cpu::implicit_gemm_solver,
        &cpu::im2win_solver,
        &cpu::fft_solver,
        &cpu::fft_tiling_solver,
        &cpu::poly_hankel_solver,
        &cpu::fine_grained_fft_solver,
        &cpu::cyclic_minimal_solver,
        &cpu::winograd_2x2_3x3_solver,
        &cpu::winograd_4x4_3x3_solver,
#ifdef CONVCORE_WITH_CUDA
        &cuda::direct_solver,
        &cuda::im2col_gemm_solver,
        &cuda::implicit_gemm_solver,
        &cuda::fft_solver,
        &cuda::fft_tiling_solver,
        &cuda::fine_grained_fft_solver,
        &cuda::poly_hankel_solver,
        &cuda::winograd_2x2_3x3_solver,
        &cuda::winograd_4x4_3x3_solver,
        &cuda::cyclic_minimal_solver,
        &cuda::im2win_solver,
#endif
    };
    return solvers;
}

const Solver* find_solver(convcoreConvolutionFwdAlgo_t algo, convcoreDeviceType_t device) {
    for (const Solver* s : all_solvers())
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
}

// ---- backward passes: the same one-table style ------------------------------------------------
// An algorithm's own backward code is cpu/<algo>_backward.cpp (convcore::cpu::<algo>_bwd_data_solver,
// ..._bwd_filter_solver). An algorithm with a forward solver gets a backward pass by reduction
// to it from one line: via_forward::bwd_data<BWD_ALGO, FWD_ALGO> (core/backward_via_forward.hpp).
namespace cpu {
extern const BwdDataSolver direct_bwd_data_solver;
extern const BwdFilterSolver direct_bwd_filter_solver;
extern const BwdDataSolver im2col_gemm_bwd_data_solver;
extern const BwdFilterSolver im2col_gemm_bwd_filter_solver;
extern const BwdDataSolver implicit_gemm_bwd_data_solver;
extern const BwdFilterSolver implicit_gemm_bwd_filter_solver;
extern const BwdFilterSolver winograd_3x3_2x2_bwd_filter_solver;
}  // namespace cpu
#ifdef CONVCORE_WITH_CUDA
namespace cuda {
extern const BwdDataSolver direct_bwd_data_solver;
extern const BwdFilterSolver direct_bwd_filter_solver;
extern const BwdDataSolver im2col_gemm_bwd_data_solver;
extern const BwdFilterSolver im2col_gemm_bwd_filter_solver;
extern const BwdDataSolver implicit_gemm_bwd_data_solver;
extern const BwdFilterSolver implicit_gemm_bwd_filter_solver;
extern const BwdFilterSolver winograd_3x3_2x2_bwd_filter_solver;
}  // namespace cuda
#endif

const std::vector<const BwdDataSolver*>& all_bwd_data_solvers() {
    static const std::vector<const BwdDataSolver*> solvers = {
        &cpu::direct_bwd_data_solver,
        &cpu::im2col_gemm_bwd_data_solver,
        &cpu::implicit_gemm_bwd_data_solver,
        &via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3>,
        &via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_FFT, CONVCORE_FWD_ALGO_FFT>,
        &via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FFT_TILING>,
        &via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_FINE_GRAINED_FFT, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT>,
        &via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_POLY_HANKEL, CONVCORE_FWD_ALGO_POLY_HANKEL>,
#ifdef CONVCORE_WITH_CUDA
        &cuda::direct_bwd_data_solver,
        &cuda::im2col_gemm_bwd_data_solver,
        &cuda::implicit_gemm_bwd_data_solver,
        &via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_WINOGRAD_2X2_3X3, CONVCORE_FWD_ALGO_WINOGRAD_2X2_3X3>,
        &via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_FFT, CONVCORE_FWD_ALGO_FFT>,
        &via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FFT_TILING>,
        &via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_FINE_GRAINED_FFT, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT>,
        &via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_POLY_HANKEL, CONVCORE_FWD_ALGO_POLY_HANKEL>,
#endif
    };
    return solvers;
}

const std::vector<const BwdFilterSolver*>& all_bwd_filter_solvers() {
    static const std::vector<const BwdFilterSolver*> solvers = {
        &cpu::direct_bwd_filter_solver,
        &cpu::im2col_gemm_bwd_filter_solver,
        &cpu::implicit_gemm_bwd_filter_solver,
        &cpu::winograd_3x3_2x2_bwd_filter_solver,
        &via_forward::bwd_filter<CONVCORE_BWD_FILTER_ALGO_FFT, CONVCORE_FWD_ALGO_FFT>,
        &via_forward::bwd_filter<CONVCORE_BWD_FILTER_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FFT_TILING>,
        &via_forward::bwd_filter<CONVCORE_BWD_FILTER_ALGO_FINE_GRAINED_FFT, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT>,
        &via_forward::bwd_filter<CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL, CONVCORE_FWD_ALGO_POLY_HANKEL>,
#ifdef CONVCORE_WITH_CUDA
        &cuda::direct_bwd_filter_solver,
        &cuda::im2col_gemm_bwd_filter_solver,
        &cuda::implicit_gemm_bwd_filter_solver,
        &cuda::winograd_3x3_2x2_bwd_filter_solver,
        &via_forward::bwd_filter_cuda<CONVCORE_BWD_FILTER_ALGO_FFT, CONVCORE_FWD_ALGO_FFT>,
        &via_forward::bwd_filter_cuda<CONVCORE_BWD_FILTER_ALGO_FFT_TILING, CONVCORE_FWD_ALGO_FFT_TILING>,
        &via_forward::bwd_filter_cuda<CONVCORE_BWD_FILTER_ALGO_FINE_GRAINED_FFT, CONVCORE_FWD_ALGO_FINE_GRAINED_FFT>,
        &via_forward::bwd_filter_cuda<CONVCORE_BWD_FILTER_ALGO_POLY_HANKEL, CONVCORE_FWD_ALGO_POLY_HANKEL>,
#endif
    };
    return solvers;
}

const BwdDataSolver* find_bwd_data_solver(convcoreConvolutionBwdDataAlgo_t algo,
                                          convcoreDeviceType_t device) {
    for (const BwdDataSolver* s : all_bwd_data_solvers())
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
}

const BwdFilterSolver* find_bwd_filter_solver(convcoreConvolutionBwdFilterAlgo_t algo,
                                              convcoreDeviceType_t device) {
    for (const BwdFilterSolver* s : all_bwd_filter_solvers())
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
}

}  // namespace convcore
