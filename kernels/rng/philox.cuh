// Philox4x32-R (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), usable from host and
// device. R is a template parameter so each round count is its own fully unrolled code path.
// Matches Random123's known-answer vectors (tests/test_philox.cpp).
#pragma once
#include <cstdint>

#include "kernels/common/host_device.hpp"

namespace dropbench {

struct u32x4 {
  uint32_t x, y, z, w;
};

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3)-1)
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

DB_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

// A round's 32x32 -> 64 product a * m as its high and low words, the same bits in every policy. MulHiLo: mul.hi and
// mul.lo (host and device). Device only: MulWide, one mul.wide as inline PTX (the attention hooks), and MulWide64, one
// 64-bit C++ product (the RNG tile kernel's rounds); ptxas schedules the two differently, and each kernel keeps the
// SASS it was tuned with.
struct Product {
  uint32_t hi, lo;
};
struct MulHiLo {
  DB_HD static Product mul(uint32_t a, uint32_t m) {
    const uint32_t hi = mulhi32(m, a), lo = m * a;
    return Product{hi, lo};
  }
};
#if defined(__CUDACC__)
// One mul.wide.u32 per product: ptxas then emits one IMAD.WIDE.U32, where from mul.hi + mul.lo it sometimes emits
// IMAD.HI.U32 + IMAD (two instructions) once the surrounding code changes.
struct MulWide {
  __device__ __forceinline__ static Product mul(uint32_t a, uint32_t m) {
    uint64_t r;
    asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(a), "r"(m));
    const uint32_t lo = static_cast<uint32_t>(r), hi = static_cast<uint32_t>(r >> 32);
    return Product{hi, lo};
  }
};
struct MulWide64 {
  __device__ __forceinline__ static Product mul(uint32_t a, uint32_t m) {
    const uint64_t p = static_cast<uint64_t>(m) * a;
    return Product{static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
  }
};
#endif

// One Philox round: two 32x32->64 multiplies, then a Feistel-like permute/xor with the round key.
template <class Mul = MulHiLo>
DB_HD u32x4 philox_round_with(u32x4 c, uint32_t k0, uint32_t k1) {
  const Product p0 = Mul::mul(c.x, kPhiloxM0);
  const Product p1 = Mul::mul(c.z, kPhiloxM1);
  return u32x4{p1.hi ^ c.y ^ k0, p1.lo, p0.hi ^ c.w ^ k1, p0.lo};
}
DB_HD u32x4 philox_round(u32x4 c, uint32_t k0, uint32_t k1) { return philox_round_with<MulHiLo>(c, k0, k1); }

// Philox4x32-R: R rounds, the key bumped by the Weyl constants between rounds (not before the first).
template <int R, class Mul = MulHiLo>
DB_HD u32x4 philox4x32(u32x4 ctr, uint32_t k0, uint32_t k1) {
  static_assert(R >= 1 && R <= 16, "Philox rounds out of range");
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < R; ++r) {
    ctr = philox_round_with<Mul>(ctr, k0 + static_cast<uint32_t>(r) * kPhiloxW0, k1 + static_cast<uint32_t>(r) * kPhiloxW1);
  }
  return ctr;
}

// Run-time round count (host tools, `dropbench philox`): dispatches to the template.
inline u32x4 philox4x32_rt(int rounds, u32x4 ctr, uint32_t k0, uint32_t k1) {
  u32x4 out = ctr;
  for (int r = 0; r < rounds; ++r) out = philox_round(out, k0 + r * kPhiloxW0, k1 + r * kPhiloxW1);
  return out;
}

}  // namespace dropbench
