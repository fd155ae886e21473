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

double probe_mhz(const unsigned long long* host4);

}  // namespace dropbench
