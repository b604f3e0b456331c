#include "core/find_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <limits>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/build_id.hpp"
#include "core/device.hpp"

namespace convcore {
namespace find_db {
namespace {

// Format 3 added the prepared-filter time; files of formats 1 and 2 are ignored (and rewritten).
constexpr const char* kHeader = "convcore-find-db 3";
constexpr int kFields = 8;  // version, device, direction, problem, algorithm, status, time, prepared time

const char* status_word(convcoreStatus_t s) {
    switch (s) {
        case CONVCORE_STATUS_SUCCESS: return "SUCCESS";
        case CONVCORE_STATUS_BAD_PARAM: return "BAD_PARAM";
        case CONVCORE_STATUS_NOT_SUPPORTED: return "NOT_SUPPORTED";
        case CONVCORE_STATUS_ALLOC_FAILED: return "ALLOC_FAILED";
        case CONVCORE_STATUS_EXECUTION_FAILED: return "EXECUTION_FAILED";
        case CONVCORE_STATUS_INTERNAL_ERROR: return "INTERNAL_ERROR";
    }
    return "";
}

bool parse_status(const std::string& word, convcoreStatus_t* out) {
    for (int i = 0; i <= CONVCORE_STATUS_INTERNAL_ERROR; ++i) {
        if (word == status_word(convcoreStatus_t(i))) {
            *out = convcoreStatus_t(i);
            return true;
        }
    }
    return false;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> fields;
    size_t start = 0;
    for (;;) {
        const size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) return fields;
        start = tab + 1;
    }
}

// Tabs and line breaks would break the line format (a GPU name could hold anything).
std::string one_field(std::string s) {
    for (char& ch : s)
        if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
    return s;
}

using Db = std::unordered_map<std::string, Records>;  // key -> results

// Reads a db file into `db` (entries there are overwritten by the file's). A missing,
// unreadable or foreign file (wrong header) adds nothing; malformed lines are skipped.
void read_file(const std::string& file, Db& db) {
    std::ifstream in(file, std::ios::binary);
    std::string line;
    if (!in || !std::getline(in, line) || line != kHeader) return;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const std::vector<std::string> f = split_tabs(line);
        if (int(f.size()) != kFields) continue;
        bool empty_field = false;
        for (const std::string& s : f) empty_field = empty_field || s.empty();
        if (empty_field) continue;
        Record rec;
        if (!parse_status(f[5], &rec.status)) continue;
        const auto parse_time = [](const std::string& text, double* out) {
            char* end = nullptr;
            errno = 0;
            *out = std::strtod(text.c_str(), &end);
            return errno == 0 && end == text.c_str() + text.size() && std::isfinite(*out);
        };
        if (!parse_time(f[6], &rec.time_ms) || !parse_time(f[7], &rec.time_prepared_ms)) continue;
        if (rec.status == CONVCORE_STATUS_SUCCESS && (rec.time_ms < 0 || rec.time_prepared_ms < 0)) continue;
        db[f[0] + '\t' + f[1] + '\t' + f[2] + '\t' + f[3]][f[4]] = rec;
    }
}

void make_parent_dirs(const std::string& file) {
    for (size_t slash = file.find('/', 1); slash != std::string::npos; slash = file.find('/', slash + 1))
        ::mkdir(file.substr(0, slash).c_str(), 0755);  // EEXIST and failures: the open says
}

// Read-merge-write of the file under an exclusive flock on "<file>.lock", replacing the file
// by rename(2) of a finished temporary file in the same directory: a reader sees the old file
// or the new one, never half of one, and two writers never drop each other's entries.
// Returns the merged db (what the file holds now), or the file's old contents plus `add`
// when the file could not be written.
Db merge_into_file(const std::string& file, const std::string& key, const Records& add) {
    Db db;
    make_parent_dirs(file);
    const int lock_fd = ::open((file + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd >= 0) {
        while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
    read_file(file, db);
    for (const auto& kv : add) db[key][kv.first] = kv.second;

    std::string tmp = file + ".tmp.XXXXXX";
    const int fd = ::mkstemp(&tmp[0]);
    if (fd >= 0) {
        std::ostringstream out;
        // Times round-trip exactly: a rounded time could tie two close algorithms and change
        // Find's order once the db is read back.
        out << std::setprecision(std::numeric_limits<double>::max_digits10);
        out << kHeader << "\n";
        out << "# version\tdevice\tdirection\tproblem\talgorithm\tstatus\ttime_ms\ttime_prepared_ms\n";
        for (const auto& entry : db)
            for (const auto& rec : entry.second)
                out << entry.first << '\t' << rec.first << '\t' << status_word(rec.second.status)
                    << '\t' << rec.second.time_ms << '\t' << rec.second.time_prepared_ms << '\n';
        const std::string text = out.str();
        size_t written = 0;
        while (written < text.size()) {
            const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            written += size_t(n);
        }
        const bool ok = written == text.size() && ::fsync(fd) == 0;
        ::close(fd);
        if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
    }
    if (lock_fd >= 0) ::close(lock_fd);  // releases the flock
    return db;
}

// The in-process cache, for the db file it was loaded from.
struct Cache {
    std::mutex mutex;
    bool loaded = false;
    std::string file;  // "" when the db is off
    Db db;

    // Call with mutex held: (re)loads when the db's location changed (CONVCORE_FIND_DB).
    void sync_location() {
        const std::string now = path();
        if (loaded && now == file) return;
        db.clear();
        file = now;
        loaded = true;
        if (!file.empty()) read_file(file, db);
    }
};

Cache& cache() {
    static Cache* c = new Cache();  // never destroyed: usable from other static destructors
    return *c;
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos) {
                const size_t start = line.find_first_not_of(" \t", colon + 1);
                if (start != std::string::npos) return line.substr(start);
            }
        }
    }
    return "unknown CPU";
}

}  // namespace

// "" for a packed NCHW tensor, "nhwc" for a packed NHWC one, else "s<strides>": a run on
// strided tensors stages them, which changes the algorithms' times, so it is kept apart.
static std::string layout_tag(int64_t n, int64_t c, int64_t h, int64_t w, const int64_t strides[4]) {
    int64_t nchw[4];
    packed_strides(n, c, h, w, nchw);
    if (std::equal(strides, strides + 4, nchw)) return "";
    const int64_t nhwc[4] = {h * w * c, 1, w * c, c};
    if (std::equal(strides, strides + 4, nhwc)) return "nhwc";
    std::ostringstream o;
    o << "s" << strides[0] << "." << strides[1] << "." << strides[2] << "." << strides[3];
    return o.str();
}

std::string problem_string(const ConvProblem& p) {
    std::ostringstream o;
    o << "mb" << p.n << "ic" << p.c << "ih" << p.h << "iw" << p.w << "oc" << p.k << "kh" << p.r
      << "kw" << p.s << "ph" << p.pad_h << "pw" << p.pad_w << "sh" << p.stride_h << "sw"
      << p.stride_w << "dh" << p.dil_h << "dw" << p.dil_w << "g" << p.groups
      << (p.dtype == CONVCORE_DATA_DOUBLE ? "_f64" : "_f32") << (p.flip ? "_conv" : "_xcorr");
    const std::string x = layout_tag(p.n, p.c, p.h, p.w, p.x_strides);
    const std::string y = layout_tag(p.n, p.k, p.p, p.q, p.y_strides);
    if (!x.empty() || !y.empty()) o << "_x" << (x.empty() ? "nchw" : x) << "_y" << (y.empty() ? "nchw" : y);
    // w: "" packed KCRS, "krsc" packed K x R x S x C/groups (the NHWC filter format), else strides.
    const int64_t cg = p.c_per_group();
    const std::string w = layout_tag(p.k, cg, p.r, p.s, p.w_strides);
    if (!w.empty()) o << "_w" << (w == "nhwc" ? "krsc" : w);
    return o.str();
}

std::string device_string(const Context& ctx) {
#ifdef CONVCORE_WITH_CUDA
    if (ctx.device == CONVCORE_DEVICE_CUDA)
        return one_field(std::string("cuda:") + cuda::device_name(ctx.device_index));
#endif
    // The kernels' instruction set too: CONVCORE_CPU_ISA=avx2 on an AVX-512 CPU times other code.
    static const std::string model = one_field(cpu_model_name()) + " " + cpu::isa_name();
    return "cpu:" + model + " x" + std::to_string(ctx.threads()) + " threads";
}

std::string make_key(const Context& ctx, const char* direction, const ConvProblem& prob) {
    return make_key(ctx, std::string(direction), problem_string(prob));
}

std::string make_key(const Context& ctx, const std::string& direction, const std::string& problem) {
    // The version and this build's ID (its first 8 bytes): the version stays the same while the
    // solvers change from build to build, and an older build's times would choose for this one.
    static const std::string version = [] {
        std::string v = std::to_string(CONVCORE_VERSION_MAJOR) + "." + std::to_string(CONVCORE_VERSION_MINOR) +
                        "." + std::to_string(CONVCORE_VERSION_PATCH);
        const std::string& id = library_build_id();
        return id.empty() ? v : v + "+" + id.substr(0, 16);
    }();
    return version + '\t' + device_string(ctx) + '\t' + direction + '\t' + problem;
}

std::string path() {
    const char* env = std::getenv("CONVCORE_FIND_DB");
    if (env && *env) {
        if (std::string(env) == "off" || std::string(env) == "OFF") return "";
        return env;
    }
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && *xdg == '/') return std::string(xdg) + "/convcore/find-db.txt";
    const char* home = std::getenv("HOME");
    if (home && *home) return std::string(home) + "/.cache/convcore/find-db.txt";
    return "";  // nowhere to keep it: this process only
}

Records lookup(const std::string& key, bool refresh) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.sync_location();
    if (refresh && !c.file.empty()) read_file(c.file, c.db);
    const auto it = c.db.find(key);
    return it == c.db.end() ? Records{} : it->second;
}

void store(const std::string& key, const Records& records) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.sync_location();
    if (c.file.empty()) {
        for (const auto& kv : records) c.db[key][kv.first] = kv.second;
        return;
    }
    for (auto& entry : merge_into_file(c.file, key, records))
        for (auto& rec : entry.second) c.db[entry.first][rec.first] = rec.second;
}

void clear_cache() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.db.clear();
    c.loaded = false;
}

}  // namespace find_db
}  // namespace convcore
