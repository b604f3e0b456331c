#include "core/algo_filter.hpp"

#include <strings.h>

#include <cstdlib>

namespace convcore {

bool disabled_by_env(const char* algo_name) {
    const char* env = std::getenv("CONVCORE_DISABLE_ALGOS");
    if (!env || !algo_name) return false;
    const std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        std::string name = list.substr(start, end - start);
        const size_t first = name.find_first_not_of(" \t");
        const size_t last = name.find_last_not_of(" \t");
        name = first == std::string::npos ? "" : name.substr(first, last - first + 1);
        if (!name.empty() && strcasecmp(name.c_str(), algo_name) == 0) return true;
        start = end + 1;
    }
    return false;
}

std::string disabled_reason(const char* algo_name) {
    return std::string(algo_name) + " is disabled by CONVCORE_DISABLE_ALGOS";
}

}  // namespace convcore
