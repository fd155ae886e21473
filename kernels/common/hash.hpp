// splitmix64's finaliser, the one 64-bit mixing function of dropbench's non-Philox randomness: the bootstrap's
// resampling draws and the harness's round order (host), the fill and checksum kernels and the QKV GEMM's test
// inputs (device). Header-only, host and device.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace dropbench {

DB_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace dropbench
