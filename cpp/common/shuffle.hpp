// A two-vector lane shuffle with a mask vector, for GCC/Clang vector types: GCC's
// __builtin_shuffle(a, b, m). Clang has no such form (its __builtin_shufflevector wants the
// lanes as constant arguments), so there it is spelled out lane by lane; with constant masks
// clang folds the loop into one shuffle. Lane l of the result is a[m[l]] when m[l] < lanes,
// else b[m[l] - lanes].
#pragma once

namespace convcore {

// Always inlined, so the "vector passed without AVX changes the ABI" note does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
template <typename V, typename M>
inline __attribute__((always_inline)) V shuffle2(V a, V b, M m) {
#if defined(__clang__)
    constexpr int L = int(sizeof(V) / sizeof(a[0]));
    V r;
    for (int l = 0; l < L; ++l) r[l] = m[l] < L ? a[m[l]] : b[m[l] - L];
    return r;
#else
    return __builtin_shuffle(a, b, m);
#endif
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace convcore
