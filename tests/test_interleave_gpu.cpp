// GPU: the harness's interleaved groups (src/core/harness.hpp): the variants share their rounds, each keeps its
// own samples and phases, sequential mode pairs nothing, and an interrupt ends a group between samples.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>

#include "gpu_guard.hpp"
#include "kernels/util/util_kernels.cuh"
#include "src/core/device_buffer.hpp"
#include "src/core/harness.hpp"
#include "src/core/interrupt.hpp"

using namespace dropbench;

namespace {

MeasureSettings quick() {
  MeasureSettings m;
  m.min_samples = 12;
  m.max_samples = 40;
  m.min_time = 0;
  m.max_noise = 1;  // stop at min_samples
  m.warmup = 1;
  m.throttle = 0;   // keep every sample
  return m;
}

size_t finite(const std::vector<double>& x) {
  size_t n = 0;
  for (double v : x) n += std::isfinite(v) ? 1 : 0;
  return n;
}

}  // namespace

TEST(InterleaveGpu, VariantsShareRoundsAndKeepTheirOwnSamples) {
  DB_REQUIRE_GPU();
  Harness h(quick(), false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  auto spin = [&](long long cycles, const char* phase) {
    return [&buf, cycles, phase](Sample& s) {
      s.phase(phase, [&] { launch_spin(buf.get<unsigned long long>(), cycles, s.stream); });
    };
  };
  const std::vector<Measurement> ms =
      h.measure_group({{"short", spin(2'000'000, "a")}, {"long", spin(8'000'000, "b")}});
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].series.group, ms[1].series.group);
  EXPECT_EQ(ms[0].series.x.size(), ms[1].series.x.size());  // one sample each per round
  EXPECT_EQ(ms[0].series.x.size(), 12u);
  for (const Measurement& m : ms) {
    EXPECT_EQ(m.total.samples, finite(m.series.x));
    EXPECT_EQ(m.total.samples + m.total.discarded, m.series.x.size());
    ASSERT_EQ(m.phases.size(), 1u);
    EXPECT_TRUE(m.total.median_ci.valid);
    EXPECT_LE(m.total.median_ci.low, m.total.median);
    EXPECT_GE(m.total.median_ci.high, m.total.median);
  }
  EXPECT_EQ(ms[0].phases[0].first, "a");
  EXPECT_EQ(ms[1].phases[0].first, "b");
  // Each variant's samples are its own: 4x the cycles cannot time like 1x.
  EXPECT_GT(ms[1].total.median, 2 * ms[0].total.median);
  // The next group pairs with nothing of this one.
  const Measurement next = h.measure(spin(2'000'000, "a"));
  EXPECT_NE(next.series.group, ms[0].series.group);
}

TEST(InterleaveGpu, SequentialModeGivesEveryVariantItsOwnGroup) {
  DB_REQUIRE_GPU();
  MeasureSettings m = quick();
  m.interleave = false;
  Harness h(m, false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  auto body = [&](Sample& s) { launch_spin(buf.get<unsigned long long>(), 1'000'000, s.stream); };
  const std::vector<Measurement> ms = h.measure_group({{"x", body}, {"y", body}});
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_NE(ms[0].series.group, ms[1].series.group);
  EXPECT_EQ(ms[0].total.samples, 12u);
  EXPECT_EQ(ms[1].total.samples, 12u);
}

// measure.repeats: K independent repeats of the whole group, each to its own stopping rule; the series hold them
// one after another (repeat_rounds), the stats carry each repeat's median, keep_series copies the rounds out.
TEST(InterleaveGpu, RepeatsMeasureTheGroupKTimes) {
  DB_REQUIRE_GPU();
  MeasureSettings m = quick();
  m.repeats = 3;
  m.repeat_gap = 0.1;
  m.keep_series = true;
  Harness h(m, false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  auto body = [&](Sample& s) { launch_spin(buf.get<unsigned long long>(), 1'000'000, s.stream); };
  const std::vector<Measurement> ms = h.measure_group({{"x", body}, {"y", body}});
  ASSERT_EQ(ms.size(), 2u);
  for (const Measurement& r : ms) {
    EXPECT_EQ(r.series.repeat_rounds, (std::vector<size_t>{12, 12, 12}));
    EXPECT_EQ(r.series.x.size(), 36u);
    EXPECT_EQ(r.series.clock_mhz.size(), 36u);
    EXPECT_EQ(r.total.samples, 36u);
    EXPECT_EQ(r.total.median_ci.repeat_values.size(), 3u);
    EXPECT_LE(r.total.median_ci.low, r.total.median_ci.within_low);
    EXPECT_GE(r.total.median_ci.high, r.total.median_ci.within_high);
    EXPECT_EQ(r.total.series_s.size(), 36u);
    EXPECT_EQ(r.total.series_repeat_rounds, r.series.repeat_rounds);
    EXPECT_GE(r.seconds_spent, 0.2);  // two gaps of 0.1 s idled
  }
  EXPECT_TRUE(bootstrap_ratio(ms[0].series, ms[1].series).has_repeats());
}

TEST(InterleaveGpu, InterruptEndsTheGroupBetweenSamples) {
  DB_REQUIRE_GPU();
  Harness h(quick(), false);
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  int runs = 0;
  auto body = [&](Sample& s) {
    ++runs;
    launch_spin(buf.get<unsigned long long>(), 1'000'000, s.stream);
    if (runs == 5) request_interrupt(SIGINT);
  };
  try {
    h.measure_group({{"x", body}, {"y", body}});
    ADD_FAILURE() << "no Interrupted thrown";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signal, SIGINT);
  }
  clear_interrupt();
  EXPECT_LE(runs, 2 + 2 + 2);  // warm-up (1 each) + at most the round in flight
}

TEST(InterleaveGpu, DryRunCallsEveryBodyOnce) {
  Harness h(quick(), true);
  int a = 0, b = 0;
  const auto ms = h.measure_group({{"a", [&](Sample& s) { a += s.dry(); }}, {"b", [&](Sample& s) { b += s.dry(); }}});
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(ms[0].total.samples, 0u);
}
