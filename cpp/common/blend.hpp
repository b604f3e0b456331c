// The cuDNN output rule shared by every algorithm: y = alpha * acc + beta * y, where
// beta == 0 never reads y (so NaN/garbage in y does not leak into the result).
#pragma once
#include "common/conv_index.hpp"

namespace convcore {

template <typename T>
CONVCORE_HD void blend_store(T* y, T acc, T alpha, T beta) {
    *y = beta == T(0) ? alpha * acc : alpha * acc + beta * *y;
}

}  // namespace convcore
