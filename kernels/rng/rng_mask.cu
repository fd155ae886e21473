#include "kernels/rng/rng_mask.cuh"

#include <iterator>
#include <mutex>

#include <stdexcept>

#include "kernels/common/check.hpp"
#include "kernels/common/device.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace {

// One row strip (bh, r16) per block iteration; warp w produces tiles c64 = w, w + warps, ... of the strip,
// one keep word per lane. Consecutive lanes write consecutive words: one 128-byte store per tile. Strips are
// those of the window `win` (all of them for the whole matrix); strip s of the window is stored at word
// s * cols64 * 32, the MaskWindow layout. (Threshold widths 16 and 32; 8-bit masks take tile8_ranges.)
template <int R, int TW>
__device__ __forceinline__ void tile_strips(uint32_t* __restrict__ out, const MaskGeometry& geo, const MaskWindow& win,
                                            uint64_t seed, uint32_t offset, uint32_t drop) {
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const uint32_t wrows16 = win.rows16, cols64 = geo.cols64();
  const uint64_t strips = static_cast<uint64_t>(geo.bh) * wrows16;
  for (uint64_t s = blockIdx.x; s < strips; s += gridDim.x) {
    const uint32_t bh = static_cast<uint32_t>(s / wrows16), r16 = win.r16_begin + static_cast<uint32_t>(s % wrows16);
    const uint32_t n = geo.tiles_in_strip(r16);
    uint32_t* strip_out = out + s * cols64 * kWordsPerTile + lane;
#pragma unroll 2
    for (uint32_t c64 = warp; c64 < n; c64 += warps) {
      strip_out[c64 * kWordsPerTile] = attn_keep_word<R, TW>(seed, offset, drop, bh, r16 * cols64 + c64, lane);
    }
  }
}

// ---- 8-bit tile masks: the fast path (docs/rng-scheme.md, "The RNG kernel"), tile8_ranges ----
// The same bits as attn_keep_word<R, 8>, with less work per Philox call:
//  * Rounds 1-3 of the counter (32k + lane, t, bh, offset) are mostly constant: only t changes from tile to tile,
//    so round 1 needs no multiply, round 2 one multiply shared by all calls of a thread's tile (M0 * x1), round 3
//    one per call; the products that depend on (k, lane) or bh alone are made once per thread or per strip. R7:
//    9.25 IMAD.WIDE per call instead of 14.
//  * A thread makes the two keep words 2s, 2s+1 of a tile (4 calls) and stores them as one 8-byte vector; a
//    half-warp writes a whole tile (128 bytes).
//  * Each warp walks a contiguous range of tiles (row strip major), two per step, so the work is split evenly
//    to one tile and the per-strip products are redone only when the range enters the next strip.
//  * The byte compare + bit placement is 4 instructions per output word instead of 6 (tw8_keep_word).

// One 32x32->64 product of rounds 2 and 3 (hoisted below) as (lo, hi), through the rounds' own MulWide64: written as
// mulhi + mullo, ptxas at times split it into IMAD.HI + IMAD, two FMA-pipe instructions instead of one IMAD.WIDE.
__device__ __forceinline__ uint2 mul_wide(uint32_t m, uint32_t x) {
  const Product p = MulWide64::mul(x, m);
  return make_uint2(p.lo, p.hi);
}

// Keep word of one lane from the 8 output words o[4k + q] of its two calls: bit 8f + 4k + q = [byte f of o[4k+q] >=
// drop] (tile_call_bits<8>). Per word: the low 7 bits of each byte plus y7 carry into bit 7 (no carry leaves a
// byte), OR (drop <= 128) / AND (drop > 128) the byte's own bit 7 gives [byte >= drop] in bit 7, and a shift-add
// cascade moves word i's flags to bit i of each byte (flags never overlap, so + is |).
//   drop <= 128: y7 = (128 - drop) * 0x01010101   ([b >= d] = b7 | [b_lo + 128 - d >= 128])
//   drop >  128: y7 = (256 - drop) * 0x01010101   ([b >= d] = b7 & [b_lo + 256 - d >= 128])
// `one` is 1, passed at run time: the add then stays an IMAD (the FMA pipe, which the Philox multiplies leave
// room on) instead of an ALU add, the ALU being this kernel's busiest pipe.
template <bool kHigh>
__device__ __forceinline__ uint32_t tw8_keep_word(const u32x4& a, const u32x4& b, uint32_t y7, uint32_t one) {
  const uint32_t o[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t low = (o[i] & 0x7f7f7f7fu) * one + y7;
    const uint32_t c = (kHigh ? (o[i] & low) : (o[i] | low)) & 0x80808080u;
    acc = i == 0 ? c : c + (acc >> 1);
  }
  return acc;
}

// The round keys (seed_lo + r W0, seed_hi + r W1), made on the host: as kernel parameters they stay in the
// constant bank and are read by the LOP3s directly (computed in the kernel, ptxas kept re-adding them per tile).
struct RoundKeys {
  uint32_t k0[16], k1[16];
};

RoundKeys round_keys(uint64_t seed) {
  RoundKeys k;
  for (int r = 0; r < 16; ++r) {
    k.k0[r] = seed_lo(seed) + static_cast<uint32_t>(r) * kPhiloxW0;
    k.k1[r] = seed_hi(seed) + static_cast<uint32_t>(r) * kPhiloxW1;
  }
  return k;
}

template <int R, bool kHigh>
__device__ __forceinline__ void tile8_ranges(uint32_t* __restrict__ out, const MaskGeometry& geo, const MaskWindow& win,
                                             const RoundKeys& keys, uint32_t offset, uint32_t y7, uint32_t one) {
  static_assert(R >= 3 && R <= 16, "the round-1..3 shortcut needs R >= 3");
  const uint32_t k0 = keys.k0[0], k1 = keys.k1[0];
  const uint32_t sub = threadIdx.x & 15;  // words 2 sub, 2 sub + 1 of every tile of this half-warp
  // Calls j = 2 * word + k of a tile: c0 = 32 k + lane. Per thread: w1k = lo(M0 c0) ^ key1[1] (round 2's z),
  // y2k = lo(M1 z1) ^ key0[2] (round 3's x), h1 = hi(M1 z1) (round 2's x with the strip's lo(M1 bh)).
  uint32_t w1k[4], y2k[4], h1[4], qh[4], ql[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t c0 = 32u * (j & 1) + 2u * sub + (j >> 1);
    const uint32_t z1 = mulhi32(kPhiloxM0, c0) ^ offset ^ k1;
    w1k[j] = (kPhiloxM0 * c0) ^ keys.k1[1];
    h1[j] = mulhi32(kPhiloxM1, z1);
    y2k[j] = (kPhiloxM1 * z1) ^ keys.k0[2];
  }
  const uint32_t cols64 = geo.cols64(), wrows16 = win.rows16;
  // Ranges per WARP (uniform): its two half-warps take tiles c and c + 1 of each step, so they stay converged (ranges
  // per half-warp cross strips at different steps, and the warp runs both halves' paths one after the other). The
  // ranges split the GENERATED tiles evenly: with causal masks a strip of the top rows has one tile and one of the
  // bottom rows cols64, so equal ranges of all tiles give the bottom strips' warps about twice the mean work. Window
  // strips before r are gen_before(r) tiles (MaskGeometry::tiles_before); a warp finds its first strip by bisection.
  const uint32_t p0 = static_cast<uint32_t>(geo.tiles_before(win.r16_begin));
  auto gen_before = [&](uint32_t r) { return static_cast<uint32_t>(geo.tiles_before(win.r16_begin + r)) - p0; };
  const uint64_t per_bh = gen_before(wrows16), tiles = static_cast<uint64_t>(geo.bh) * per_bh;
  const uint32_t half = (threadIdx.x >> 4) & 1;
  const uint64_t wp = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const uint64_t wps = (static_cast<uint64_t>(gridDim.x) * blockDim.x) >> 5;
  const uint64_t t_begin = tiles * wp / wps, t_end = tiles * (wp + 1) / wps;
  if (t_begin >= t_end) return;
  const uint64_t bh0 = t_begin / per_bh;
  const uint32_t rem = static_cast<uint32_t>(t_begin - bh0 * per_bh);
  uint32_t lo = 0, hi = wrows16;  // the last window strip r with gen_before(r) <= rem
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (gen_before(mid) <= rem) lo = mid;
    else hi = mid;
  }
  uint64_t s = bh0 * wrows16 + lo;
  uint32_t c = rem - gen_before(lo);
  uint32_t left = static_cast<uint32_t>(t_end - t_begin);
  for (;;) {
    // Strip s: its products, then its tiles c .. min(n, c + left) - 1.
    const uint32_t bh = static_cast<uint32_t>(s / wrows16);
    const uint32_t r16 = win.r16_begin + static_cast<uint32_t>(s - static_cast<uint64_t>(bh) * wrows16);
    const uint32_t n = geo.tiles_in_strip(r16);
    const uint32_t a = mulhi32(kPhiloxM1, bh) ^ k0;  // round 1: x1 = t ^ a
    const uint32_t b = (kPhiloxM1 * bh) ^ keys.k0[1];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t x2 = h1[j] ^ b;  // round 2's x: constant along the strip
      qh[j] = mulhi32(kPhiloxM0, x2) ^ keys.k1[2];
      ql[j] = kPhiloxM0 * x2;
    }
    const uint32_t stop = n < c + left ? n : c + left;
    left -= stop - c;  // generated tiles only (c < n: a range starts inside a strip's generated tiles)
    // Steps of two tiles (warp-uniform count); this half-warp's tiles are c + half, c + half + 2, ... < stop.
    const uint32_t steps = stop > c ? (stop - c + 1) / 2 : 0, mine = stop > c + half ? (stop - c - half + 1) / 2 : 0;
    uint2* dst = reinterpret_cast<uint2*>(out + (s * cols64 + c + half) * kWordsPerTile) + sub;
    uint32_t t = r16 * cols64 + c + half;
    for (uint32_t i = 0; i < steps; ++i, t += 2, dst += kWordsPerTile) {
      const uint2 p = mul_wide(kPhiloxM0, t ^ a);  // round 2's product: (lo, hi)
      u32x4 o[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint2 q = mul_wide(kPhiloxM1, p.y ^ w1k[j]);  // round 3's varying product
        u32x4 v{q.y ^ y2k[j], q.x, qh[j] ^ p.x, ql[j]};     // after round 3
#pragma unroll
        for (int r = 3; r < R; ++r) v = philox_round_with<MulWide64>(v, keys.k0[r], keys.k1[r]);
        o[j] = v;
      }
      const uint2 words = make_uint2(tw8_keep_word<kHigh>(o[0], o[1], y7, one), tw8_keep_word<kHigh>(o[2], o[3], y7, one));
      if (i < mine) *dst = words;  // odd tile count: the last step's second half-warp idles
    }
    if (left == 0) break;
    ++s;
    c = 0;
  }
}

// The static schedule's kernel (one name for every R and TW, as the profile's kernel table expects): 8-bit masks
// take tile8_ranges (the drop > 128 regime is a second copy of its loop behind one uniform branch), 16 and 32 bits
// tile_strips. keys: round_keys(seed); y7 and one: tw8_keep_word's (8 bits only).
// (8 bits: at most 48 registers, the count the separate kernel of each regime had: 5 blocks per SM; with both
// regimes in one kernel ptxas took 55 and 4 blocks.)
template <int R, int TW>
__global__ void __launch_bounds__(256, TW == 8 ? 5 : 1) rng_tile_kernel(uint32_t* __restrict__ out, MaskGeometry geo,
                                                                       MaskWindow win, const __grid_constant__ RoundKeys keys,
                                                                       uint32_t offset, uint32_t drop, uint32_t y7,
                                                                       uint32_t one) {
  if constexpr (TW == 8) {
    if (drop > 128) tile8_ranges<R, true>(out, geo, win, keys, offset, y7, one);
    else tile8_ranges<R, false>(out, geo, win, keys, offset, y7, one);
  } else {
    tile_strips<R, TW>(out, geo, win, (static_cast<uint64_t>(keys.k1[0]) << 32) | keys.k0[0], offset, drop);
  }
}

// The strip loop of the Coresident and Steal schedules: each warp takes whole strips from work[0] (one
// atomicAdd per strip, broadcast by shuffle) and writes every tile of it. Returns the strips it did.
template <int R, int TW, int UNROLL>
__device__ __forceinline__ uint32_t steal_strips(uint32_t* __restrict__ out, const MaskGeometry& geo,
                                                           const MaskWindow& win, uint64_t seed, uint32_t offset,
                                                           uint32_t drop, unsigned long long* work) {
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t wrows16 = win.rows16, cols64 = geo.cols64();
  const uint64_t strips = static_cast<uint64_t>(geo.bh) * wrows16;
  uint32_t done = 0;
  for (;;) {
    unsigned long long s = 0;
    if (lane == 0) s = atomicAdd(work, 1ull);
    s = __shfl_sync(0xffffffffu, s, 0);
    if (s >= strips) break;
    const uint32_t bh = static_cast<uint32_t>(s / wrows16);
    const uint32_t r16 = win.r16_begin + static_cast<uint32_t>(s - static_cast<uint64_t>(bh) * wrows16);
    const uint32_t n = geo.tiles_in_strip(r16), t0 = r16 * cols64;
    uint32_t* strip_out = out + s * cols64 * kWordsPerTile + lane;
#pragma unroll UNROLL
    for (uint32_t c64 = 0; c64 < n; ++c64)
      strip_out[c64 * kWordsPerTile] = attn_keep_word<R, TW>(seed, offset, drop, bh, t0 + c64, lane);
    ++done;
  }
  return done;
}

// Coresident: at most 32 registers per thread and no shared memory, so a 32-thread block needs 1024
// registers and fits beside a GEMM CTA that leaves that much of the register file. Records the SMs it ran on.
template <int R, int TW>
__global__ void __maxnreg__(32) rng_tile_coresident_kernel(uint32_t* __restrict__ out, MaskGeometry geo,
                                                           MaskWindow win, uint64_t seed, uint32_t offset,
                                                           uint32_t drop, unsigned long long* work) {
  if (threadIdx.x == 0) {
    const uint32_t smid = ptx::smid();
    if (smid < 256) atomicOr(&work[2 + smid / 64], 1ull << (smid % 64));
    atomicAdd(&work[6], 1ull);
  }
  const uint32_t done = steal_strips<R, TW, 1>(out, geo, win, seed, offset, drop, work);
  if ((threadIdx.x & 31) == 0 && done) atomicAdd(&work[1], static_cast<unsigned long long>(done));
}

template <int R, int TW>
__global__ void __launch_bounds__(1024) rng_tile_steal_kernel(uint32_t* __restrict__ out, MaskGeometry geo,
                                                              MaskWindow win, uint64_t seed, uint32_t offset,
                                                              uint32_t drop, unsigned long long* work) {
  steal_strips<R, TW, 2>(out, geo, win, seed, offset, drop, work);
}

// Flat layouts. Bits: thread t writes keep word t (elements [32t, 32t + 32)). U8 / I32: a warp owns chunks of
// 1024 elements; lane l generates word l of the chunk, then the chunk is stored as lane-consecutive 16-byte
// vectors (fully coalesced), each lane fetching the bits of its vector from the owning lane by a shuffle.
template <int R, int TW>
__global__ void __launch_bounds__(256) rng_bits_kernel(uint32_t* __restrict__ out, uint64_t n, uint64_t seed,
                                                       uint32_t offset, uint32_t drop) {
  const uint64_t words = (n + 31) / 32;
  for (uint64_t w = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; w < words; w += uint64_t(gridDim.x) * blockDim.x)
    out[w] = flat_keep_word<R, TW>(seed, offset, drop, w);
}

template <int R, int TW, MaskLayout L>
__global__ void __launch_bounds__(256) rng_wide_kernel(void* __restrict__ out, uint64_t n, uint64_t seed,
                                                       uint32_t offset, uint32_t drop) {
  constexpr int kChunk = 1024;
  constexpr int kPerVec = L == MaskLayout::U8 ? 16 : 4;  // elements per 16-byte store
  const int lane = threadIdx.x & 31;
  const uint64_t chunks = (n + kChunk - 1) / kChunk;
  const uint64_t warp = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) >> 5;
  const uint64_t warps = (uint64_t(gridDim.x) * blockDim.x) >> 5;
  for (uint64_t c = warp; c < chunks; c += warps) {
    const uint32_t word = flat_keep_word<R, TW>(seed, offset, drop, c * 32 + lane);
    const uint64_t base = c * kChunk;
    if (base + kChunk <= n) {
#pragma unroll
      for (int j = 0; j < kChunk / kPerVec / 32; ++j) {
        const int v = j * 32 + lane;
        const uint32_t bits = __shfl_sync(0xffffffffu, word, (v * kPerVec) >> 5) >> ((v * kPerVec) & 31);
        if constexpr (L == MaskLayout::U8) {
          uint32_t q[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint32_t nib = (bits >> (4 * k)) & 0xFu;  // 4 bits -> 4 bytes of 0x00 / 0x01
            q[k] = (nib & 1u) | ((nib & 2u) << 7) | ((nib & 4u) << 14) | ((nib & 8u) << 21);
          }
          reinterpret_cast<uint4*>(static_cast<uint8_t*>(out) + base)[v] = make_uint4(q[0], q[1], q[2], q[3]);
        } else {
          reinterpret_cast<int4*>(static_cast<int32_t*>(out) + base)[v] =
              make_int4(bits & 1, (bits >> 1) & 1, (bits >> 2) & 1, (bits >> 3) & 1);
        }
      }
    } else {
      for (int i = lane; i < kChunk; i += 32) {
        const uint32_t bit = (__shfl_sync(0xffffffffu, word, i >> 5) >> (i & 31)) & 1u;
        if (base + i < n) {
          if constexpr (L == MaskLayout::U8) static_cast<uint8_t*>(out)[base + i] = static_cast<uint8_t>(bit);
          else static_cast<int32_t*>(out)[base + i] = static_cast<int32_t>(bit);
        }
      }
    }
  }
}

// One full wave of resident blocks (the occupancy calculator's count for this kernel: with more blocks than fit at
// once, the last partial wave runs at lower occupancy); grid-stride loops do the rest.
int default_grid(int block, const void* kernel) {
  int per_sm = 0;
  DB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
  return current_device_sms() * (per_sm > 0 ? per_sm : 1);
}

template <int R, int TW>
void launch_tile(const RngMaskParams& p, cudaStream_t s) {
  const MaskWindow win = rng_mask_window(p);
  const uint64_t strips = static_cast<uint64_t>(p.geo.bh) * win.rows16;
  if (strips == 0) return;
  auto* out = static_cast<uint32_t*>(p.out);
  switch (p.schedule) {
    case RngSchedule::Static: {
      int grid = p.grid > 0 ? p.grid : default_grid(p.block, reinterpret_cast<const void*>(rng_tile_kernel<R, TW>));
      // 16 / 32 bits: a block per strip; 8 bits: tile ranges per warp (empty ranges return at once)
      if (TW != 8 && static_cast<uint64_t>(grid) > strips) grid = static_cast<int>(strips);
      const uint32_t y7 = (p.drop > 128 ? 256u - p.drop : 128u - p.drop) * 0x01010101u;
      rng_tile_kernel<R, TW><<<grid, p.block, 0, s>>>(out, p.geo, win, round_keys(p.seed), p.offset, p.drop, y7, 1u);
      break;
    }
    case RngSchedule::Coresident: {
      const int grid = p.grid > 0 ? p.grid : current_device_sms();
      // Without shared memory the SM would run this kernel with a small shared-memory carveout, and a GEMM CTA
      // needing ~190 KiB could not start beside it until the SM drained: ask for the largest carveout, so the
      // SM's split already fits the GEMM (measured with lab/gemm_wgmma/: without it the GEMM waited for
      // the RNG to finish; with it both ran on all 132 SMs; results/h200/gemm/wgmma/).
      static std::once_flag carveout;
      std::call_once(carveout, [] {
        DB_CUDA(cudaFuncSetAttribute(rng_tile_coresident_kernel<R, TW>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     static_cast<int>(cudaSharedmemCarveoutMaxShared)));
      });
      rng_tile_coresident_kernel<R, TW><<<grid, p.block, 0, s>>>(out, p.geo, win, p.seed, p.offset, p.drop, p.work);
      break;
    }
    case RngSchedule::Steal: {
      const int grid = p.grid > 0 ? p.grid : current_device_sms() * (2048 / p.block);
      if (p.reserve_smem > 48 * 1024)
        DB_CUDA(cudaFuncSetAttribute(rng_tile_steal_kernel<R, TW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(p.reserve_smem)));
      rng_tile_steal_kernel<R, TW><<<grid, p.block, p.reserve_smem, s>>>(out, p.geo, win, p.seed, p.offset, p.drop,
                                                                        p.work);
      break;
    }
  }
}

template <int R, int TW>
void launch_rt(const RngMaskParams& p, cudaStream_t s) {
  const int block = p.block;
  auto grid = [&](const void* k) { return p.grid > 0 ? p.grid : default_grid(block, k); };
  switch (p.layout) {
    case MaskLayout::Tile:
      launch_tile<R, TW>(p, s);
      break;
    case MaskLayout::Bits: {
      const auto k = rng_bits_kernel<R, TW>;
      k<<<grid(reinterpret_cast<const void*>(k)), block, 0, s>>>(static_cast<uint32_t*>(p.out), p.elements, p.seed,
                                                                  p.offset, p.drop);
      break;
    }
    case MaskLayout::U8: {
      const auto k = rng_wide_kernel<R, TW, MaskLayout::U8>;
      k<<<grid(reinterpret_cast<const void*>(k)), block, 0, s>>>(p.out, p.elements, p.seed, p.offset, p.drop);
      break;
    }
    case MaskLayout::I32: {
      const auto k = rng_wide_kernel<R, TW, MaskLayout::I32>;
      k<<<grid(reinterpret_cast<const void*>(k)), block, 0, s>>>(p.out, p.elements, p.seed, p.offset, p.drop);
      break;
    }
  }
  DB_CUDA_LAUNCH();
}

}  // namespace

MaskLayout parse_mask_layout(const std::string& s) {
  std::string allowed;
  for (size_t i = 0; i < std::size(kMaskLayoutNames); ++i) {
    if (s == kMaskLayoutNames[i]) return static_cast<MaskLayout>(i);
    allowed += (i ? ", " : "") + std::string(kMaskLayoutNames[i]);
  }
  throw UsageError("layout: '" + s + "' is not a mask layout (allowed: " + allowed + ")");
}

const char* mask_layout_name(MaskLayout l) {
  const auto i = static_cast<size_t>(l);
  return i < std::size(kMaskLayoutNames) ? kMaskLayoutNames[i] : "?";
}

const char* rng_schedule_name(RngSchedule s) {
  switch (s) {
    case RngSchedule::Static: return "static";
    case RngSchedule::Coresident: return "coresident";
    case RngSchedule::Steal: return "steal";
  }
  return "?";
}

MaskWindow rng_mask_window(const RngMaskParams& p) { return mask_window(p.geo, p.row_begin, p.rows); }

size_t mask_bytes(const RngMaskParams& p) {
  switch (p.layout) {
    case MaskLayout::Tile: return rng_mask_window(p).bytes(p.geo);
    case MaskLayout::Bits: return (p.elements + 31) / 32 * 4;
    case MaskLayout::U8: return p.elements;
    case MaskLayout::I32: return p.elements * 4;
  }
  return 0;
}

uint64_t mask_elements_generated(const RngMaskParams& p) {
  return p.layout == MaskLayout::Tile ? rng_mask_window(p).generated_elements(p.geo) : p.elements;
}

void launch_rng_mask(const RngMaskParams& p, cudaStream_t s) {
  // (Literal messages only: string arithmetic here would make this object define std::string members that
  // unrelated test binaries then pull from the kernels archive.)
  const int max_block = p.schedule == RngSchedule::Static ? 256 : 1024;
  if (p.block <= 0 || p.block % 32 || p.block > max_block)
    throw UsageError("rng block size must be a multiple of 32 in [32, 256] (static schedule) or [32, 1024] "
                     "(coresident, steal)");
  if (p.layout != MaskLayout::Tile && (p.row_begin != 0 || p.rows != 0 || p.schedule != RngSchedule::Static))
    throw UsageError("rng: row windows and the coresident / steal schedules need the tile layout");
  if (p.layout == MaskLayout::Tile && p.row_begin % kTileRows != 0)
    throw UsageError("rng: row_begin must be a multiple of 16");
  if (p.schedule != RngSchedule::Static && p.work == nullptr)
    throw UsageError("rng: the coresident and steal schedules need a work counter");
  if (p.schedule != RngSchedule::Steal && p.reserve_smem != 0)
    throw UsageError("rng: reserve_smem is for the steal schedule only");
  with_rounds_tw(p.rounds, p.threshold_bits, "rng", [&](auto r, auto tw) { launch_rt<r(), tw()>(p, s); });
}

}  // namespace dropbench
