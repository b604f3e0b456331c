// A 64-bit fingerprint of a buffer's bytes: how the plan cache tells, at every call whose filters
// carry no version (core/plan_cache.hpp), whether the filters it prepared still match the caller's
// weights (convcore.torch's default; the weights may have been changed in ways no version counter
// sees: `.data` writes, tensors made under torch.inference_mode).
//
// 32 lanes of 32-bit words; each lane folds its words with acc = rotl(acc, 5) + word. Each step
// is a bijection of acc for a fixed word and of the word for a fixed acc, so a change of any
// single word always changes the lane, and the rotation makes the order of the words count
// (a swap changes it too). Several changes cancel only by chance (about 2^-64 once the 32
// lanes are mixed into 64 bits). The loop is plain C++ that compilers vectorize (-O3) for the
// baseline ISA (SSE2) and any wider one; 32 independent lanes keep it at memory bandwidth (16
// left it at half that on Zen 3). Buffers of 256 KiB and more are cut into 256 KiB chunks
// hashed by OpenMP threads and combined in order, so the value does not depend on the thread
// count.
#pragma once

#include <omp.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace convcore {

inline uint64_t mix64(uint64_t z) {  // SplitMix64's finalizer (Steele, Lea, Flood 2014)
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint64_t fingerprint_chunk(const unsigned char* p, size_t n, uint64_t seed) {
    constexpr size_t kLanes = 32;
    uint32_t acc[kLanes];
    for (size_t l = 0; l < kLanes; ++l) acc[l] = uint32_t(mix64(seed + l));
    const size_t blocks = n / (4 * kLanes);
    for (size_t b = 0; b < blocks; ++b) {
        uint32_t word[kLanes];
        std::memcpy(word, p + b * 4 * kLanes, sizeof word);  // any alignment
        for (size_t l = 0; l < kLanes; ++l) acc[l] = ((acc[l] << 5) | (acc[l] >> 27)) + word[l];
    }
    uint64_t h = mix64(seed ^ n);
    for (size_t i = blocks * 4 * kLanes; i < n; ++i) h = mix64(h ^ p[i]);  // the tail, byte by byte
    for (size_t l = 0; l < kLanes; ++l) h = mix64(h ^ acc[l]);
    return h;
}

inline uint64_t fingerprint(const void* data, size_t bytes) {
    constexpr size_t kChunk = size_t(1) << 18;
    const auto* p = static_cast<const unsigned char*>(data);
    if (bytes < kChunk) return fingerprint_chunk(p, bytes, 0);
    // In groups of up to kGroup chunks on the stack: no allocation (a cached call allocates nothing).
    constexpr int64_t kGroup = 256;
    const int64_t chunks = int64_t((bytes + kChunk - 1) / kChunk);
    uint64_t h = mix64(bytes);
    for (int64_t first = 0; first < chunks; first += kGroup) {
        const int64_t count = chunks - first < kGroup ? chunks - first : kGroup;
        uint64_t parts[kGroup];
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; ++i) {
            const size_t begin = size_t(first + i) * kChunk;
            const size_t n = bytes - begin < kChunk ? bytes - begin : kChunk;
            parts[i] = fingerprint_chunk(p + begin, n, uint64_t(first + i) + 1);
        }
        for (int64_t i = 0; i < count; ++i) h = mix64(h ^ parts[i]);
    }
    return h;
}

}  // namespace convcore
