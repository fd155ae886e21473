// GPU: the harness's timer against a spin kernel of known cycle count, the clock probe, phases, and the
// stopping rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <string>
#include <vector>

#include "src/core/device_buffer.hpp"
#include "gpu_guard.hpp"
#include "src/core/harness.hpp"
#include "kernels/util/util_kernels.cuh"

using namespace dropbench;

TEST(HarnessGpu, ClockProbeNearMaxClock) {
  DB_REQUIRE_GPU();
  MeasureSettings m;
  Harness h(m, false);
  // Warm the GPU so clocks ramp up, then probe.
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  launch_spin(buf.get<unsigned long long>(), 200'000'000, h.stream());
  const double mhz = h.probe_clock_mhz();
  EXPECT_GT(mhz, 0.3 * h.max_clock_mhz());
  // The SM clock cannot pass its maximum: above it by more than the two clock64 reads' jitter is a timer error.
  EXPECT_LT(mhz, 1.01 * h.max_clock_mhz());
}

TEST(HarnessGpu, EventTimeMatchesSpinCycles) {
  DB_REQUIRE_GPU();
  MeasureSettings m;
  m.min_samples = 5;
  m.min_time = 0;
  m.max_noise = 1;
  m.warmup = 1;
  Harness h(m, false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  const long long cycles = 20'000'000;  // ~10 ms at 2 GHz
  const Measurement r = h.measure([&](Sample& s) {
    s.phase("spin", [&] { launch_spin(buf.get<unsigned long long>(), cycles, s.stream); });
  });
  ASSERT_GE(r.total.samples, 5u);
  ASSERT_EQ(r.phases.size(), 1u);
  EXPECT_EQ(r.phases[0].first, "spin");
  unsigned long long t[4];
  DB_CUDA(cudaMemcpy(t, buf.get(), sizeof t, cudaMemcpyDeviceToHost));
  const double spin_s = (t[2] - t[0]) * 1e-9;       // %globaltimer inside the kernel
  const double expect_s = cycles / (probe_mhz(t) * 1e6);
  EXPECT_NEAR(spin_s, expect_s, 0.02 * expect_s);
  // Events around the sample: the spin plus launch overhead (< 50 us).
  EXPECT_GT(r.total.median, spin_s * 0.98);
  EXPECT_LT(r.total.median, spin_s * 1.02 + 50e-6);
  EXPECT_LE(r.phases[0].second.median, r.total.median * 1.0001);
  EXPECT_GT(r.total.mean_clock_mhz, 0);
}

TEST(HarnessGpu, StopsOnNoiseAfterMinSamplesAndTime) {
  DB_REQUIRE_GPU();
  MeasureSettings m;
  m.min_samples = 20;
  m.max_samples = 50;
  m.min_time = 0;
  m.max_noise = 1.0;  // any noise is fine: must stop at exactly min_samples
  m.warmup = 0;
  Harness h(m, false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  const Measurement r = h.measure([&](Sample& s) {
    s.phase("spin", [&] { launch_spin(buf.get<unsigned long long>(), 10000, s.stream); });
  });
  EXPECT_EQ(r.total.samples + r.total.discarded, 20u);
  m.max_noise = 1e-9;  // unreachable: stops at max_samples
  Harness h2(m, false);
  const Measurement r2 = h2.measure([&](Sample& s) {
    s.phase("spin", [&] { launch_spin(buf.get<unsigned long long>(), 10000, s.stream); });
  });
  EXPECT_EQ(r2.total.samples, 50u);
}

namespace {

// One thread follows a chain of indices through `steps` cache lines (a random order over lines spread across
// the buffer), each load through the L2 only (ld.global.cg): its time is `steps` dependent L2 or HBM latencies,
// ~1 ms warm, several times that after a flush, far above launch overhead and clock ramps.
__global__ void chase_kernel(const uint32_t* __restrict__ next, int steps, uint32_t* out) {
  uint32_t i = 0;
  for (int s = 0; s < steps; ++s) i = __ldcg(next + i);
  *out = i;
}

}  // namespace

TEST(HarnessGpu, ColdFlushMakesRereadsSlower) {
  DB_REQUIRE_GPU();
  // What the test checks is that measure.cold evicts the data a sample reads. A streaming read of a few us would
  // not show it: there the flush's side effects on clocks and the launch overhead decide (cold can read faster
  // than warm). A dependent chain of 8192 loads over 1 MiB of lines (resident in the L2 when warm, surely evicted
  // by the harness's 2 x L2 flush) measures the eviction itself.
  constexpr int kLines = 8192, kStride = 12;  // every 12th 128-byte line of a 12 MiB buffer
  constexpr int kWordsPerLine = 32;
  std::vector<uint32_t> host(static_cast<size_t>(kLines) * kStride * kWordsPerLine, 0);
  std::vector<uint32_t> order(kLines);
  for (int i = 0; i < kLines; ++i) order[i] = static_cast<uint32_t>(i);
  uint64_t z = 0x243f6a8885a308d3ull;  // fixed-seed shuffle, so the chain defeats any stride prefetch
  for (int i = kLines - 1; i > 0; --i) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(order[i], order[static_cast<int>((z >> 33) % static_cast<uint64_t>(i + 1))]);
  }
  auto word = [&](uint32_t line) { return line * kStride * kWordsPerLine; };
  for (int i = 0; i < kLines; ++i) host[word(order[i])] = word(order[(i + 1) % kLines]);
  DeviceBuffer a(host.size() * sizeof(uint32_t)), out(sizeof(uint32_t));
  DB_CUDA(cudaMemcpy(a.get(), host.data(), host.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  MeasureSettings m;
  m.min_samples = 20;
  m.max_samples = 20;
  m.min_time = 0;
  m.max_noise = 1;
  m.throttle = 0;  // the relation is what is tested: keep every sample
  auto run = [&](bool cold) {
    m.cold = cold;
    Harness h(m, false);
    return h.measure([&](Sample& s) {
      s.phase("chase", [&] {
        chase_kernel<<<1, 1, 0, s.stream>>>(a.get<uint32_t>(), kLines, out.get<uint32_t>());
        DB_CUDA(cudaGetLastError());
      });
    }).total.median;
  };
  // Warm and cold alternate over 5 rounds, so drift hits both alike; the median of the ratios must show the
  // eviction (expected ~2-3x: HBM against L2 latency), with a margin no clock effect reaches.
  std::vector<double> ratios;
  for (int r = 0; r < 5; ++r) {
    const double warm = run(false), cold = run(true);
    ASSERT_GT(warm, 0);
    ratios.push_back(cold / warm);
  }
  uint32_t end = 0;
  DB_CUDA(cudaMemcpy(&end, out.get(), sizeof(end), cudaMemcpyDeviceToHost));
  EXPECT_EQ(end, 0u);  // the chain is one cycle through all 8192 lines: 8192 steps end where they began
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  std::string all;
  for (double x : ratios) all += std::to_string(x) + " ";
  EXPECT_GT(sorted[sorted.size() / 2], 1.3) << "cold/warm median ratios per round: " << all;
}
