// The mma.sync kernels' shared-memory tile layout and their per-lane ldmatrix addressing (both attention
// directions): a tile of rb-byte rows whose 16-byte chunk j of row r sits at chunk j ^ (r % 8) (with 128-byte rows
// and a 1024-aligned base, also TMA's 128-byte swizzle), so ldmatrix reads of 8 rows hit 8 distinct bank groups.
#pragma once
#include <cstdint>

namespace dropbench {
namespace attn {

// Per-lane row offsets. Lane l supplies the row address of 8x8 matrix l/8. "A" pattern (an m16k16 A fragment, or a
// B operand read transposed): row (l%8) + 8*((l/8)%2), chunk l/16; "B" pattern (a B operand read as stored): row
// (l%8) + 8*(l/16), chunk (l/8)%2; both with the chunk XOR-ed by the row's low bits.
__device__ __forceinline__ uint32_t off_a(int lane, int rb) {
  const int x = lane & 7;
  return static_cast<uint32_t>((x + (((lane >> 3) & 1) << 3)) * rb + (((lane >> 4) ^ x) << 4));
}
__device__ __forceinline__ uint32_t off_b(int lane, int rb) {
  const int x = lane & 7;
  return static_cast<uint32_t>((x + ((lane >> 4) << 3)) * rb + ((((lane >> 3) & 1) ^ x) << 4));
}

// The same two offsets for the calling thread (lane threadIdx.x % 32), in one function: the forward's. The front end
// simplifies each function on its own before inlining it, and the form it reaches there decides ptxas's spills in the
// forward's mode-mask instances at dH 128. With the lane read from threadIdx.x and both formulas in one function they
// spill as with the offsets written in the kernel; with off_a / off_b (an int lane, one function per pattern) they
// spill elsewhere and run 1-2 % slower on an H100. The backward keeps off_a / off_b: this form changes its SASS (the
// main kernel at dH 128 spills). tests/test_attention_gpu.cu checks that both give the same offsets for every lane.
struct LdsmOffsets {
  uint32_t a, b;
};
__device__ __forceinline__ LdsmOffsets ldsm_offsets(int rb) {
  const int lane = static_cast<int>(threadIdx.x) & 31, x = lane & 7;
  return {static_cast<uint32_t>((x + (((lane >> 3) & 1) << 3)) * rb + (((lane >> 4) ^ x) << 4)),
          static_cast<uint32_t>((x + ((lane >> 4) << 3)) * rb + ((((lane >> 3) & 1) ^ x) << 4))};
}

// The chunk pair kk (compile-time) of an A / B-pattern base: chunk 2*kk + bit of row r sits at ((2*kk) ^ (bit ^
// (r%8))), so bit 3 of the chunk is untouched (+128 bytes for kk >= 4) and bits 1..2 are an XOR of (kk%4)*32 into
// the byte offset, which never carries into the row part since every tile base is 128-byte aligned.
__device__ __forceinline__ uint32_t at(uint32_t base, int kk) {
  return (base ^ static_cast<uint32_t>((kk & 3) * 32)) + (kk >> 2) * 128;
}

}  // namespace attn
}  // namespace dropbench
