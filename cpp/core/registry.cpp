// The solver registry, generated from the one list of algorithms (convcore/algorithms.def): for each
// line, the solver of each device it names. Adding an algorithm adds nothing here.
#include "core/backward_via_forward.hpp"
#include "core/solver.hpp"

// CONVCORE_ON_<devices>(cpu, cuda): the registry entries of the devices a line names, each
// followed by a comma; the CUDA ones only in a build with CUDA.
#ifdef CONVCORE_WITH_CUDA
#define CONVCORE_IF_CUDA(...) __VA_ARGS__
#else
#define CONVCORE_IF_CUDA(...)
#endif
#define CONVCORE_ON_CPU_CUDA(cpu, cuda) cpu, CONVCORE_IF_CUDA(cuda, )
#define CONVCORE_ON_CPU(cpu, cuda) cpu,
#define CONVCORE_ON_CUDA(cpu, cuda) CONVCORE_IF_CUDA(cuda, )

namespace convcore {

// The solvers each device's files define (declared for both devices; only the listed ones are used).
#define CONVCORE_FORWARD(NAME, value, solver, devices, f32, f64, det) extern const Solver solver##_solver;
#define CONVCORE_BACKWARD_DATA(NAME, value, how, code, devices, f32, f64, det) CONVCORE_DECLARE_DATA_##how(code)
#define CONVCORE_BACKWARD_FILTER(NAME, value, how, code, devices, f32, f64, det) CONVCORE_DECLARE_FILTER_##how(code)
#define CONVCORE_DECLARE_DATA_OWN(solver) extern const BwdDataSolver solver##_bwd_data_solver;
#define CONVCORE_DECLARE_FILTER_OWN(solver) extern const BwdFilterSolver solver##_bwd_filter_solver;
#define CONVCORE_DECLARE_DATA_VIA_FORWARD(fwd)
#define CONVCORE_DECLARE_FILTER_VIA_FORWARD(fwd)
namespace cpu {
#include "convcore/algorithms.def"
}  // namespace cpu
#ifdef CONVCORE_WITH_CUDA
namespace cuda {
#include "convcore/algorithms.def"
}  // namespace cuda
#endif
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER

// The entries of one line. A reduction to a forward solver is a via_forward template instance
// (core/backward_via_forward.hpp), parenthesised for the commas of its arguments.
#define CONVCORE_DATA_OWN(NAME, solver, devices) \
    CONVCORE_ON_##devices(&cpu::solver##_bwd_data_solver, &cuda::solver##_bwd_data_solver)
#define CONVCORE_FILTER_OWN(NAME, solver, devices) \
    CONVCORE_ON_##devices(&cpu::solver##_bwd_filter_solver, &cuda::solver##_bwd_filter_solver)
#define CONVCORE_DATA_VIA_FORWARD(NAME, fwd, devices)                                                 \
    CONVCORE_ON_##devices((&via_forward::bwd_data<CONVCORE_BWD_DATA_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd>), \
                          (&via_forward::bwd_data_cuda<CONVCORE_BWD_DATA_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd>))
#define CONVCORE_FILTER_VIA_FORWARD(NAME, fwd, devices)                                                      \
    CONVCORE_ON_##devices(                                                                                \
        (&via_forward::bwd_filter<CONVCORE_BWD_FILTER_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd>),              \
        (&via_forward::bwd_filter_cuda<CONVCORE_BWD_FILTER_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd>))

const std::vector<const Solver*>& all_solvers() {
    static const std::vector<const Solver*> solvers = {
#define CONVCORE_FORWARD(NAME, value, solver, devices, f32, f64, det) CONVCORE_ON_##devices(&cpu::solver##_solver, &cuda::solver##_solver)
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    };
    return solvers;
}

const std::vector<const BwdDataSolver*>& all_bwd_data_solvers() {
    static const std::vector<const BwdDataSolver*> solvers = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(NAME, value, how, code, devices, f32, f64, det) CONVCORE_DATA_##how(NAME, code, devices)
#define CONVCORE_BACKWARD_FILTER(...)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    };
    return solvers;
}

const std::vector<const BwdFilterSolver*>& all_bwd_filter_solvers() {
    static const std::vector<const BwdFilterSolver*> solvers = {
#define CONVCORE_FORWARD(...)
#define CONVCORE_BACKWARD_DATA(...)
#define CONVCORE_BACKWARD_FILTER(NAME, value, how, code, devices, f32, f64, det) CONVCORE_FILTER_##how(NAME, code, devices)
#include "convcore/algorithms.def"
#undef CONVCORE_FORWARD
#undef CONVCORE_BACKWARD_DATA
#undef CONVCORE_BACKWARD_FILTER
    };
    return solvers;
}

const Solver* find_solver(convcoreConvolutionFwdAlgo_t algo, convcoreDeviceType_t device) {
    for (const Solver* s : all_solvers())
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
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
