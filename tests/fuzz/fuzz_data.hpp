// Byte reader of the fuzz target: reads the input front to back, returns zeros once it is
// used up (so every input, even an empty one, decodes to a case; zeros decode to the plainest
// choices).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace convcore_fuzz {

class Data {
   public:
    Data(const uint8_t* data, size_t size) : p_(data), left_(size) {}
    uint8_t u8() {
        if (!left_) return 0;
        --left_;
        return *p_++;
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = (v << 8) | u8();
        return v;
    }
    int64_t i64() {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | u8();
        int64_t r;
        std::memcpy(&r, &v, sizeof r);
        return r;
    }
    // 0 <= value < n (n >= 1)
    int pick(int n) {
        if (n <= 1) return 0;
        return n <= 256 ? int(u8() % unsigned(n)) : int(u32() % unsigned(n));
    }

   private:
    const uint8_t* p_;
    size_t left_;
};

}  // namespace convcore_fuzz
