// The find-db: Find's timings, kept per (library build, device, direction, problem) in a
// user cache file so that a shape is timed once per machine, not once per process, with a
// thread-safe in-process cache in front of it. The file format is in docs/find.md ("The
// find-db"); one line per algorithm result, with its two times (per call, prepared filters):
//   convcore-find-db 3                                   <- header (format version)
//   0.1.0+<build id><TAB>cpu:<model> x2 threads<TAB>fwd<TAB>mb1ic64ih56iw56oc64kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr<TAB>WINOGRAD_4X4_3X3<TAB>SUCCESS<TAB>0.8125<TAB>0.5
// A file with another header (an older format) is ignored, and rewritten at the next store.
#pragma once
#include <map>
#include <string>

#include "convcore/convcore.h"
#include "core/context.hpp"
#include "core/problem.hpp"

namespace convcore {
namespace find_db {

// One algorithm's result: SUCCESS with its times, or the status its run failed with (times -1).
// time_ms: the filters transformed by every run; time_prepared_ms: the filters prepared once
// (equal to time_ms for an algorithm with nothing to prepare, and in the backward passes).
struct Record {
    convcoreStatus_t status = CONVCORE_STATUS_SUCCESS;
    double time_ms = -1.0;
    double time_prepared_ms = -1.0;
};
using Records = std::map<std::string, Record>;  // algorithm name -> result

// The problem in benchdnn's style (the bench suites' strings, every field spelled out) plus
// dtype and mode: "mb1ic64ih56iw56oc64kh3kw3ph1pw1sh1sw1dh1dw1g1_f32_xcorr", and the layouts of
// x and y unless both are packed NCHW ("..._xnhwc_ynchw", "..._xs<strides>_ynchw"), then w's
// unless it is packed KCRS ("..._wkrsc", "..._ws<strides>"): staging a tensor changes the times.
std::string problem_string(const ConvProblem& prob);
// "cpu:<CPU model name> x<threads> threads" or "cuda:<GPU name (sm_XX)>".
std::string device_string(const Context& ctx);
// The db key: version, device (on the CPU: its model, the kernels' instruction set and the
// threads), direction ("fwd", "bwd_data", "bwd_filter") and problem.
std::string make_key(const Context& ctx, const char* direction, const ConvProblem& prob);
// The same with the problem's own string (a caller's choice: convcoreStoreChoiceTimes).
std::string make_key(const Context& ctx, const std::string& direction, const std::string& problem);

// The db file ("" when CONVCORE_FIND_DB=off).
std::string path();

// The results known for `key`. refresh: read the file again first (another process may have
// added results since this process last read it).
Records lookup(const std::string& key, bool refresh);
// Adds results for `key` to the in-process cache and the file (locked read-merge-write,
// atomic replace). Failing to write the file (read-only directory, ...) is not an error:
// the results stay in this process.
void store(const std::string& key, const Records& records);
// Forgets the in-process cache.
void clear_cache();

}  // namespace find_db
}  // namespace convcore
