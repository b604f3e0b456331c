// The one table of solvers. Adding an algorithm: its cpu/<algo>.cpp and cuda/<algo>.cu define
// convcore::cpu::<algo>_solver / convcore::cuda::<algo>_solver, and one line each goes here.
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
#endif
    };
    return solvers;
}

const Solver* find_solver(convcoreConvolutionFwdAlgo_t algo, convcoreDeviceType_t device) {
    for (const Solver* s : all_solvers())
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
}

}  // namespace convcore
