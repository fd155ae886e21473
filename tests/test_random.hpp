// Shared by the GPU tests that draw fresh random inputs: a new seed on every call, and bf16 bits to float.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstring>

#include "kernels/common/hash.hpp"

namespace dropbench_test {

// A new seed every call (clock and a counter, mixed): inputs differ from run to run; tests print the seed with
// every result so a failure can be replayed.
inline uint64_t fresh_seed() {
  static uint64_t counter = 0;
  uint64_t z = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) +
               0x9e3779b97f4a7c15ULL * ++counter;
  return dropbench::mix64(z);
}

inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace dropbench_test
