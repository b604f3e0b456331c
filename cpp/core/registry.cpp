// The solver registry, generated from the one list of algorithms (convcore/algorithms.def): for each
// line, the solver of each device it names. Adding an algorithm adds nothing here.
#include <string>

#include "core/algorithms.hpp"
#include "core/backward_via_forward.hpp"
#include "core/error.hpp"
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
#define CONVCORE_DECLARE_DATA_OWN(solver) extern const Solver solver##_bwd_data_solver;
#define CONVCORE_DECLARE_FILTER_OWN(solver) extern const Solver solver##_bwd_filter_solver;
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
    CONVCORE_ON_##devices(                                                                                \
        (&via_forward::data_solver<CONVCORE_BWD_DATA_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd, CONVCORE_DEVICE_CPU>), \
        (&via_forward::data_solver<CONVCORE_BWD_DATA_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd, CONVCORE_DEVICE_CUDA>))
#define CONVCORE_FILTER_VIA_FORWARD(NAME, fwd, devices)                                                      \
    CONVCORE_ON_##devices(                                                                                \
        (&via_forward::filter_solver<CONVCORE_BWD_FILTER_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd, CONVCORE_DEVICE_CPU>), \
        (&via_forward::filter_solver<CONVCORE_BWD_FILTER_ALGO_##NAME, CONVCORE_FWD_ALGO_##fwd, CONVCORE_DEVICE_CUDA>))

namespace {

const std::vector<const Solver*>& forward_solvers() {
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

const std::vector<const Solver*>& bwd_data_solvers() {
    static const std::vector<const Solver*> solvers = {
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

const std::vector<const Solver*>& bwd_filter_solvers() {
    static const std::vector<const Solver*> solvers = {
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

// Each pass's list, checked once before its first use: a solver states its pass's run and no
// other, the two functions every solver has, only the capabilities its pass has (preparing
// filters and fusing the epilogue are the forward pass's), both halves of filter preparation or
// neither, and no (algorithm, device) twice. A mistake is INTERNAL_ERROR naming the solver.
const std::vector<const Solver*>& checked(convcoreConvolutionPass_t pass, const std::vector<const Solver*>& list) {
    for (size_t i = 0; i < list.size(); ++i) {
        const Solver& s = *list[i];
        const char* name = algo_name(pass, s.algo);
        const std::string who = std::string("solver ") + (name ? name : std::to_string(s.algo)) +
                                (s.device == CONVCORE_DEVICE_CUDA ? " (CUDA)" : " (CPU)") + " of pass " +
                                std::to_string(int(pass)) + ": ";
        const int runs = (s.forward != nullptr) + (s.backward_data != nullptr) + (s.backward_filter != nullptr);
        const bool forward = pass == CONVCORE_PASS_FORWARD;
        std::string wrong;
        if (!name) wrong = "its algo is not in algorithms.def";
        else if (runs != 1 || s.pass() != pass) wrong = "it must set exactly the run of its pass";
        else if (!s.why_not || !s.workspace_bytes) wrong = "why_not and workspace_bytes are required";
        else if (!forward && (s.prepared_filter_bytes || s.prepare_filter || s.fuses_epilogue))
            wrong = "prepared filters and the fused epilogue are forward capabilities";
        else if (!s.prepared_filter_bytes != !s.prepare_filter)
            wrong = "prepared_filter_bytes and prepare_filter go together";
        for (size_t j = 0; j < i && wrong.empty(); ++j)
            if (list[j]->algo == s.algo && list[j]->device == s.device) wrong = "registered twice";
        if (!wrong.empty()) throw Error(CONVCORE_STATUS_INTERNAL_ERROR, who + wrong);
    }
    return list;
}

}  // namespace

const std::vector<const Solver*>& all_solvers(convcoreConvolutionPass_t pass) {
    static const auto& forward = checked(CONVCORE_PASS_FORWARD, forward_solvers());
    static const auto& data = checked(CONVCORE_PASS_BACKWARD_DATA, bwd_data_solvers());
    static const auto& filter = checked(CONVCORE_PASS_BACKWARD_FILTER, bwd_filter_solvers());
    switch (pass) {
        case CONVCORE_PASS_BACKWARD_DATA: return data;
        case CONVCORE_PASS_BACKWARD_FILTER: return filter;
        default: return forward;
    }
}

const Solver* find_solver(convcoreConvolutionPass_t pass, int algo, convcoreDeviceType_t device) {
    for (const Solver* s : all_solvers(pass))
        if (s->algo == algo && s->device == device) return s;
    return nullptr;
}

bool Solver::deterministic() const { return algorithm_info(pass(), algo)->deterministic; }

}  // namespace convcore
