// The device's Philox ceiling: a compute-only kernel that runs Philox4x32-R calls in a register loop and nothing
// else, so its calls/s is what the integer pipes allow (on the H200 the half-rate IMAD.WIDE: 14 per Philox-7
// call). `dropbench rng` measures it beside every mask point (variant `ceiling`, same R, same number of calls)
// and reports each layout's elements/s as a fraction of it (docs/rng-scheme.md, "The Philox ceiling").
//
// Thread g of the launch makes calls i = 0 .. calls_per_thread-1 with counter (i ^ g, g, i ^ g, seed_hi ^ g) and key
// (seed_lo, seed_hi): both multiplied words change every call, so no round can be hoisted out of the loop. The four
// output words of every call are XORed into one accumulator and the thread stores it once (out[g]): nothing is
// dead code, and the result can be checked on the host (philox_ceiling_host_word).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/common/dispatch.cuh"

namespace dropbench {

struct PhiloxCeilingParams {
  int rounds = kDefaultRounds;    // kPhiloxRounds
  uint64_t seed = 0;
  uint32_t calls_per_thread = 0;  // >= 1
  int grid = 0;                   // blocks; 0 = as many as are resident on all SMs at once
  int block = 256;                // threads per block (multiple of 32, <= 1024)
  uint32_t* out = nullptr;        // grid * block words (philox_ceiling_threads)
};

// Blocks of the launch (p.grid, or the resident-block count of the device for grid 0).
int philox_ceiling_grid(const PhiloxCeilingParams& p);
// Threads (= words written).
uint64_t philox_ceiling_threads(const PhiloxCeilingParams& p);
// Philox calls the launch makes (threads x calls_per_thread).
uint64_t philox_ceiling_calls(const PhiloxCeilingParams& p);
// calls_per_thread so that the launch makes at least `calls` calls (at least 1).
uint32_t philox_ceiling_calls_per_thread(const PhiloxCeilingParams& p, uint64_t calls);
void launch_philox_ceiling(const PhiloxCeilingParams& p, cudaStream_t s);

// What thread g stores (host computation through philox4x32_rt, for tests).
uint32_t philox_ceiling_host_word(int rounds, uint64_t seed, uint32_t g, uint32_t calls_per_thread);

}  // namespace dropbench
