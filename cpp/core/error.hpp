// Internal errors: thrown anywhere inside convcore, turned into a status code and a
// per-thread reason string at the C API boundary (core/api.cpp).
#pragma once
#include <stdexcept>
#include <string>

#include "convcore/convcore.h"

namespace convcore {

class Error : public std::runtime_error {
   public:
    Error(convcoreStatus_t status, const std::string& reason)
        : std::runtime_error(reason), status_(status) {}
    convcoreStatus_t status() const { return status_; }

   private:
    convcoreStatus_t status_;
};

[[noreturn]] inline void throw_bad_param(const std::string& reason) {
    throw Error(CONVCORE_STATUS_BAD_PARAM, reason);
}
[[noreturn]] inline void throw_not_supported(const std::string& reason) {
    throw Error(CONVCORE_STATUS_NOT_SUPPORTED, reason);
}

}  // namespace convcore
