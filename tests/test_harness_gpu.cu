// GPU: the harness's timer against a spin kernel of known cycle count, the clock probe, phases, and the
// stopping rules.
#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_LT(mhz, 1.1 * h.max_clock_mhz());
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

TEST(HarnessGpu, ColdFlushMakesRereadsSlower) {
  DB_REQUIRE_GPU();
  // A 24 MiB read-only pass fits the L2 (50 MiB): warm re-reads hit L2, cold ones go to HBM. (A 16 MiB copy was
  // not enough: its 32 MiB of reads and writes ran at ~2.2 TB/s either way and the two medians once came out
  // 1 % apart the wrong way on the H200.)
  const size_t bytes = 24u << 20;
  DeviceBuffer a(bytes), sum(sizeof(unsigned long long));
  DB_CUDA(cudaMemset(a.get(), 0x5a, bytes));
  MeasureSettings m;
  m.min_samples = 30;
  m.min_time = 0;
  m.max_noise = 1;
  auto run = [&](bool cold) {
    m.cold = cold;
    Harness h(m, false);
    return h.measure([&](Sample& s) {
      s.phase("read", [&] { launch_checksum(a.get(), bytes, sum.get<unsigned long long>(), s.stream); });
    }).total.median;
  };
  const double warm = run(false), cold = run(true);
  EXPECT_GT(cold, warm);
}
