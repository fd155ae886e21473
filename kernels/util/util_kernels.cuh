// Small utility kernels used by the harness and the tests: SM clock probe, a spin of known cycle count,
// buffer poisoning.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace dropbench {

// One thread reads (%globaltimer, clock64) before and after spinning `spin_cycles` SM cycles and stores
// [t0_ns, c0, t1_ns, c1] at out[0..3]. Clock (MHz) = (c1 - c0) / (t1 - t0) * 1000.
void launch_clock_probe(unsigned long long* out, long long spin_cycles, cudaStream_t s);
// One thread spins `cycles` SM cycles and stores [t0_ns, c0, t1_ns, c1] like the probe (timer tests).
void launch_spin(unsigned long long* out, long long cycles, cudaStream_t s);
// Fill `bytes` bytes with the repeating 32-bit `pattern` (e.g. 0xFFFFFFFF = NaN for bf16/fp32).
void launch_poison(void* p, size_t bytes, uint32_t pattern, cudaStream_t s);

// Adds to *count the number of set bits of `words` 32-bit words (kind 0), of nonzero bytes (kind 1) or of
// nonzero int32 values (kind 2) among `n` items: the keep count of a mask, to report the rate sampled.
void launch_count_keep(const void* p, uint64_t n, int kind, unsigned long long* count, cudaStream_t s);

// Fill n elements (bf16 when bf16 is true, else fp32) with uniform values in [-1, 1) from a hash of
// (seed, index): fresh, non-zero test/benchmark inputs without a host round trip.
void launch_fill_uniform(void* p, uint64_t n, bool bf16, uint64_t seed, cudaStream_t s);
// The same with standard normal values (Box-Muller): attention inputs drawn as torch.randn draws the peers'.
void launch_fill_normal(void* p, uint64_t n, bool bf16, uint64_t seed, cudaStream_t s);

// Order-independent 64-bit checksum of `bytes` bytes (sum over 8-byte words of a hash of (word, index); a
// tail shorter than 8 bytes is zero-padded): *out = the checksum (overwritten, not added to). Same bytes ->
// same value on any launch geometry.
void launch_checksum(const void* p, size_t bytes, unsigned long long* out, cudaStream_t s);
// *count += number of 4-byte words (and a trailing partial word) in which a and b differ.
void launch_count_diff(const void* a, const void* b, size_t bytes, unsigned long long* count, cudaStream_t s);
// *count += number of whole 4-byte words equal to `pattern` (e.g. a poison left unwritten).
void launch_count_word(const void* p, size_t bytes, uint32_t pattern, unsigned long long* count, cudaStream_t s);

double probe_mhz(const unsigned long long* host4);

}  // namespace dropbench
