// CPU: the overlap energy bound and energy-delay arithmetic (hand-computed answers), the power window's
// arithmetic on synthetic readings, the no-NVML path, and the sampler's thread end to end against a stand-in
// NVML library (tests/fake_nvml.cpp: counter and readings updated every 100 ms, 3 ms per counter query).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "src/core/energy.hpp"
#include "src/core/power.hpp"

using namespace dropbench;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------------------------------------------
// Energy bound

// The FP8 example on the H200: T_g 1126 µs at 695 W, T_r 938 µs at 414 W, cap 700 W, static 80 W.
//   E_g_dyn = (695 - 80) W * 1126 µs = 615 * 1126e-6 J = 0.692490 J
//   E_r_dyn = (414 - 80) W *  938 µs = 334 *  938e-6 J = 0.313292 J
//   energy term = (0.692490 + 0.313292) J / (700 - 80) W = 1.005782 / 620 s = 1622.229 µs
//   T_min = max(1126, 938, 1622.229) µs = 1622.229 µs: the energy term binds
//   serial = 1126 + 938 = 2064 µs; max hidden = (2064 - 1622.229) / 938 = 441.771 / 938 = 0.470971
TEST(EnergyBound, Fp8ExampleWithStaticPower) {
  const EnergyBound b = energy_bound({1126e-6, 695, 938e-6, 414, 700, 80});
  ASSERT_TRUE(b.computable) << b.why_not;
  EXPECT_TRUE(b.why_not.empty());
  EXPECT_TRUE(b.note.empty()) << b.note;
  EXPECT_NEAR(b.gemm_dyn_j, 0.692490, 1e-9);
  EXPECT_NEAR(b.rng_dyn_j, 0.313292, 1e-9);
  EXPECT_NEAR(b.energy_s * 1e6, 1622.229, 1e-3);
  EXPECT_NEAR(b.t_min_s * 1e6, 1622.229, 1e-3);
  EXPECT_NEAR(b.serial_s * 1e6, 2064.0, 1e-9);
  EXPECT_NEAR(b.max_hidden, 0.470971, 1e-6);
  EXPECT_EQ(b.binds, BoundTerm::Energy);
  EXPECT_STREQ(bound_term_name(b.binds), "energy");
}

// The same with static power 0, i.e. every joule counted against the cap (the "~42 %"):
//   (695 * 1126e-6 + 414 * 938e-6) J / 700 W = (0.782570 + 0.388332) / 700 s = 1.170902 / 700 s = 1672.717 µs
//   max hidden = (2064 - 1672.717) / 938 = 391.283 / 938 = 0.417146
// Counting static power once for the overlapped interval (above) leaves more room: 47 % instead of 42 %.
TEST(EnergyBound, Fp8ExampleWithoutStaticPower) {
  const EnergyBound b = energy_bound({1126e-6, 695, 938e-6, 414, 700, 0});
  ASSERT_TRUE(b.computable) << b.why_not;
  EXPECT_NEAR(b.t_min_s * 1e6, 1672.717, 1e-3);
  EXPECT_NEAR(b.max_hidden, 0.417146, 1e-6);
  EXPECT_EQ(b.binds, BoundTerm::Energy);
}

// Low-power kernels: the longer kernel's own time binds and everything of the shorter one can be hidden.
//   GEMM 1000 µs at 300 W, RNG 500 µs at 200 W, cap 700, static 100:
//   energy term = (200 * 1e-3 + 100 * 0.5e-3) J / 600 W = 0.25 / 600 s = 416.667 µs < 1000 µs -> gemm binds,
//   max hidden = (1500 - 1000) / 500 = 1
TEST(EnergyBound, TimeBindsWhenPowerIsLow) {
  EnergyBound b = energy_bound({1000e-6, 300, 500e-6, 200, 700, 100});
  ASSERT_TRUE(b.computable);
  EXPECT_NEAR(b.energy_s * 1e6, 416.667, 1e-3);
  EXPECT_NEAR(b.t_min_s, 1000e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b.max_hidden, 1.0);
  EXPECT_EQ(b.binds, BoundTerm::Gemm);
  // RNG the longer one: GEMM 400 µs at 300 W, RNG 600 µs at 200 W: (200*0.4e-3 + 100*0.6e-3)/600 = 233.3 µs.
  b = energy_bound({400e-6, 300, 600e-6, 200, 700, 100});
  ASSERT_TRUE(b.computable);
  EXPECT_NEAR(b.energy_s * 1e6, 233.333, 1e-3);
  EXPECT_EQ(b.binds, BoundTerm::Rng);
  EXPECT_NEAR(b.t_min_s, 600e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b.max_hidden, 1.0);  // (1000 - 600) / 400
}

// Both kernels at the cap with no static power: T_min = T_g + T_r exactly, nothing can be hidden.
TEST(EnergyBound, BothAtTheCapHideNothing) {
  const EnergyBound b = energy_bound({1e-3, 700, 0.5e-3, 700, 700, 0});
  ASSERT_TRUE(b.computable);
  EXPECT_NEAR(b.t_min_s, 1.5e-3, 1e-15);
  EXPECT_NEAR(b.max_hidden, 0.0, 1e-12);
  EXPECT_EQ(b.binds, BoundTerm::Energy);
}

TEST(EnergyBound, OddPowersAreNotedAndClamped) {
  // Above the cap (800 W each, cap 700): energy term (0.8 + 0.8) mJ... = 1.6 J*1e-3 / 700 W = 2285.7 µs > the
  // serial 2000 µs; the hidden share would be negative and is clamped to 0.
  EnergyBound b = energy_bound({1e-3, 800, 1e-3, 800, 700, 0});
  ASSERT_TRUE(b.computable);
  EXPECT_NEAR(b.energy_s * 1e6, 2285.714, 1e-3);
  EXPECT_DOUBLE_EQ(b.max_hidden, 0.0);
  EXPECT_NE(b.note.find("gemm_w (800 W) is above cap_w"), std::string::npos) << b.note;
  EXPECT_NE(b.note.find("rng_w (800 W) is above cap_w"), std::string::npos) << b.note;
  // Below static power: its dynamic energy is 0, not negative. GEMM 1 ms at 600 W, RNG 1 ms at 50 W, static 80:
  // (520 * 1e-3 + 0) J / 620 W = 838.7 µs < 1 ms -> the GEMM's time binds.
  b = energy_bound({1e-3, 600, 1e-3, 50, 700, 80});
  ASSERT_TRUE(b.computable);
  EXPECT_DOUBLE_EQ(b.rng_dyn_j, 0.0);
  EXPECT_NEAR(b.energy_s * 1e6, 838.710, 1e-3);
  EXPECT_EQ(b.binds, BoundTerm::Gemm);
  EXPECT_NE(b.note.find("rng_w (50 W) is below static_w (80 W)"), std::string::npos) << b.note;
}

TEST(EnergyBound, BadInputsAreNotComputable) {
  const EnergyBoundInputs good{1126e-6, 695, 938e-6, 414, 700, 80};
  struct Case {
    EnergyBoundInputs in;
    const char* says;
  };
  auto with = [&](auto field, double v) {
    EnergyBoundInputs in = good;
    in.*field = v;
    return in;
  };
  const Case cases[] = {
      {with(&EnergyBoundInputs::gemm_s, kNan), "gemm_s must be a positive number (got nan)"},
      {with(&EnergyBoundInputs::gemm_s, 0), "gemm_s must be a positive number (got 0)"},
      {with(&EnergyBoundInputs::gemm_w, -5), "gemm_w must be a positive number (got -5)"},
      {with(&EnergyBoundInputs::rng_s, -1e-3), "rng_s must be a positive number"},
      {with(&EnergyBoundInputs::rng_w, INFINITY), "rng_w must be a positive number (got inf)"},
      {with(&EnergyBoundInputs::cap_w, 0), "cap_w must be a positive number (got 0)"},
      {with(&EnergyBoundInputs::cap_w, kNan), "cap_w must be a positive number (got nan)"},
      {with(&EnergyBoundInputs::static_w, -1), "static_w must be a number >= 0 (got -1)"},
      {with(&EnergyBoundInputs::static_w, kNan), "static_w must be a number >= 0 (got nan)"},
      {with(&EnergyBoundInputs::static_w, 700), "cap_w (700 W) must exceed static_w (700 W)"},
  };
  for (const Case& c : cases) {
    const EnergyBound b = energy_bound(c.in);
    EXPECT_FALSE(b.computable) << c.says;
    EXPECT_NE(b.why_not.find(c.says), std::string::npos) << "got: " << b.why_not;
    EXPECT_TRUE(std::isnan(b.t_min_s));
    EXPECT_TRUE(std::isnan(b.max_hidden));
    EXPECT_EQ(b.binds, BoundTerm::None);
    const auto j = to_json(b);
    EXPECT_FALSE(j["computable"].get<bool>());
    EXPECT_TRUE(j["max_hidden"].is_null());
    EXPECT_EQ(j["binds"], "");
  }
}

TEST(EnergyBound, Json) {
  const auto j = to_json(energy_bound({1126e-6, 695, 938e-6, 414, 700, 80}));
  EXPECT_TRUE(j["computable"].get<bool>());
  EXPECT_FALSE(j.contains("why_not"));
  EXPECT_EQ(j["binds"], "energy");
  EXPECT_NEAR(j["max_hidden"].get<double>(), 0.470971, 1e-6);
  EXPECT_NEAR(j["t_min_s"].get<double>(), 1622.229e-6, 1e-9);
  EXPECT_EQ(j["inputs"]["cap_w"], 700.0);
  EXPECT_EQ(j["inputs"]["static_w"], 80.0);
  for (const char* k : {"energy_s", "serial_s", "gemm_dyn_j", "rng_dyn_j"}) EXPECT_TRUE(j[k].is_number()) << k;
}

// 0.5 J over 2 ms: E*T = 1e-3 J s, E*T^2 = 2e-6 J s^2.
TEST(EnergyDelay, Products) {
  EnergyDelay d = energy_delay(0.5, 2e-3);
  EXPECT_DOUBLE_EQ(d.edp_js, 1e-3);
  EXPECT_DOUBLE_EQ(d.ed2p_js2, 2e-6);
  const auto j = to_json(d);
  EXPECT_DOUBLE_EQ(j["edp_js"].get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(j["energy_j"].get<double>(), 0.5);
  for (auto [e, s] : {std::pair{kNan, 1e-3}, std::pair{-1.0, 1e-3}, std::pair{0.5, 0.0}, std::pair{0.5, kNan}}) {
    d = energy_delay(e, s);
    EXPECT_TRUE(std::isnan(d.edp_js)) << e << " " << s;
    EXPECT_TRUE(std::isnan(d.ed2p_js2));
    EXPECT_TRUE(to_json(d)["edp_js"].is_null());
  }
  EXPECT_DOUBLE_EQ(energy_delay(0.0, 1e-3).edp_js, 0.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Window arithmetic on synthetic readings

// Readings every 5 ms over [10, 12) s at 300 W instantaneous; the counter changes every 100 ms from 10.05 s on,
// by 40 J each (400 W: the two sources disagree on purpose, to show which one a window used). SM 1500 MHz,
// memory 2619 MHz, temperature rising 50 -> ~70 C. Reasons: SW power cap (0x4) on readings 0-99, HW power brake
// (0x80) on 100-119, SW thermal (0x20) on 120-139, HW slowdown (0x8) on 140-159, nothing after.
struct Synthetic {
  std::deque<PowerReading> readings;
  std::deque<CounterChange> changes;
  Synthetic() {
    for (int i = 0; i < 400; ++i) {
      PowerReading r;
      r.t = 10.0 + 0.005 * i;
      r.w = 300;
      r.sm_mhz = 1500;
      r.mem_mhz = 2619;
      r.temp_c = 50 + i * 0.05;
      r.reasons = i < 100 ? 0x4 : i < 120 ? 0x80 : i < 140 ? 0x20 : i < 160 ? 0x8 : 0;
      r.reasons_known = true;
      readings.push_back(r);
    }
    for (int k = 0; k < 20; ++k) changes.push_back({10.05 + 0.1 * k, 1e6 + 40000.0 * k});
  }
};

TEST(PowerWindow, CounterChangesGiveTheEnergy) {
  const Synthetic s;
  // [10, 11]: changes at 10.05 ... 10.95 (10 of them): 9 * 40 J over 0.9 s = 400 W; energy 400 W * 1 s.
  const PowerWindow w = power_window(s.readings, s.changes, 10.0, 11.0);
  ASSERT_TRUE(w.measured) << w.note;
  EXPECT_EQ(w.energy_source, "counter");
  EXPECT_EQ(w.counter_changes, 10u);
  EXPECT_NEAR(w.mean_w, 400.0, 1e-6);
  EXPECT_NEAR(w.energy_j, 400.0, 1e-6);
  EXPECT_DOUBLE_EQ(w.seconds, 1.0);
  EXPECT_EQ(w.readings, 201u);  // 10.000, 10.005, ..., 11.000
  EXPECT_DOUBLE_EQ(w.mean_instant_w, 300.0);
  EXPECT_DOUBLE_EQ(w.max_w, 300.0);
  EXPECT_DOUBLE_EQ(w.mean_sm_mhz, 1500.0);
  EXPECT_DOUBLE_EQ(w.mean_mem_mhz, 2619.0);
  EXPECT_NEAR(w.max_temp_c, 60.0, 1e-9);  // reading 200
  // Of the 201 readings, 120 have the power cap or the brake, 20 thermal, 20 HW slowdown.
  EXPECT_NEAR(w.capped_share, 120.0 / 201, 1e-12);
  EXPECT_NEAR(w.thermal_share, 20.0 / 201, 1e-12);
  EXPECT_NEAR(w.hw_slowdown_share, 20.0 / 201, 1e-12);
  EXPECT_TRUE(w.note.empty()) << w.note;
  // 201 readings -> 200 buckets (the last holds two), times relative to t0, increasing.
  ASSERT_EQ(w.timeline.t_s.size(), kPowerTimelinePoints);
  ASSERT_EQ(w.timeline.w.size(), kPowerTimelinePoints);
  ASSERT_EQ(w.timeline.sm_mhz.size(), kPowerTimelinePoints);
  EXPECT_NEAR(w.timeline.t_s.front(), 0.0, 1e-9);
  EXPECT_NEAR(w.timeline.t_s.back(), 0.9975, 1e-9);  // the last bucket: readings 199 and 200
  for (size_t i = 1; i < w.timeline.t_s.size(); ++i) EXPECT_GT(w.timeline.t_s[i], w.timeline.t_s[i - 1]);
  EXPECT_DOUBLE_EQ(w.timeline.w[17], 300.0);
}

TEST(PowerWindow, FewerThanTwoChangesFallBackToTheInstantReadings) {
  const Synthetic s;
  // [10.2, 10.28]: one change (10.25) -> instant: 300 W * 0.08 s = 24 J, from 17 readings.
  const PowerWindow w = power_window(s.readings, s.changes, 10.2, 10.28);
  ASSERT_TRUE(w.measured);
  EXPECT_EQ(w.energy_source, "instant");
  EXPECT_EQ(w.counter_changes, 1u);
  EXPECT_EQ(w.readings, 17u);
  EXPECT_NEAR(w.energy_j, 24.0, 1e-9);
  EXPECT_NE(w.note.find("1 energy-counter change(s) in the 0.080 s window"), std::string::npos) << w.note;
  EXPECT_EQ(w.timeline.t_s.size(), 17u);  // fewer readings than points: one per reading
  // A counter that went backwards (driver reloaded) is not used either.
  std::deque<CounterChange> back = {{10.25, 5e6}, {10.35, 1e3}};
  const PowerWindow b = power_window(s.readings, back, 10.2, 10.4);
  EXPECT_EQ(b.energy_source, "instant");
  EXPECT_NE(b.note.find("went backwards"), std::string::npos) << b.note;
}

TEST(PowerWindow, NothingToMeasure) {
  const Synthetic s;
  for (auto [t0, t1] : {std::pair{20.0, 21.0}, std::pair{11.0, 11.0}, std::pair{11.0, 10.0}, std::pair{kNan, 11.0}}) {
    const PowerWindow w = power_window(s.readings, s.changes, t0, t1);
    EXPECT_FALSE(w.measured) << t0 << " " << t1;
    EXPECT_EQ(w.energy_source, "");
    EXPECT_TRUE(std::isnan(w.energy_j));
    EXPECT_FALSE(w.note.empty());
    const auto j = to_json(w);
    EXPECT_FALSE(j["measured"].get<bool>());
    EXPECT_TRUE(j["energy_j"].is_null());
    EXPECT_TRUE(j["timeline"]["t_s"].empty());
  }
  EXPECT_NE(power_window(s.readings, s.changes, 20.0, 21.0).note.find("no readings in the 1.000 s window"),
            std::string::npos);
  // Readings without power (every power query failed): not measured either.
  std::deque<PowerReading> r = s.readings;
  for (PowerReading& x : r) x.w = kNan;
  const PowerWindow w = power_window(r, {}, 10.0, 11.0);
  EXPECT_FALSE(w.measured);
  EXPECT_EQ(w.note, "no power readings in the window");
  // Unknown reasons: the shares are NaN (null), not 0.
  std::deque<PowerReading> u = s.readings;
  for (PowerReading& x : u) x.reasons_known = false;
  EXPECT_TRUE(std::isnan(power_window(u, s.changes, 10.0, 11.0).capped_share));
}

TEST(PowerWindow, Json) {
  const Synthetic s;
  const auto j = to_json(power_window(s.readings, s.changes, 10.0, 11.0));
  const char* keys[] = {"measured",   "energy_source", "window_s",     "energy_j",      "mean_w",
                        "mean_instant_w", "max_w",     "mean_sm_mhz",  "mean_mem_mhz",  "max_temp_c",
                        "capped_share", "thermal_share", "hw_slowdown_share", "readings", "counter_changes",
                        "timeline"};
  for (const char* k : keys) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_FALSE(j.contains("note"));
  EXPECT_EQ(j["energy_source"], "counter");
  EXPECT_DOUBLE_EQ(j["energy_j"].get<double>(), 400.0);
  EXPECT_EQ(j["timeline"]["t_s"].size(), kPowerTimelinePoints);
  EXPECT_EQ(j["timeline"]["w"][0], 300.0);
  EXPECT_EQ(j["timeline"]["sm_mhz"][0], 1500.0);
}

// ---------------------------------------------------------------------------------------------------------------
// No NVML, and the sampler against the stand-in library

struct EnvVar {
  std::string name;
  EnvVar(const char* n, const std::string& v) : name(n) { setenv(n, v.c_str(), 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

TEST(PowerSampler, NoNvmlLibrary) {
  EnvVar lib("DROPBENCH_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
  std::string why;
  // No NVML: no CUDA call is made either, so this holds on machines without a GPU.
  EXPECT_EQ(PowerSampler::open(0, &why), nullptr);
  EXPECT_NE(why.find("NVML not found"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_EQ(PowerSampler::open(0, nullptr), nullptr);  // no reason asked for
  const auto ctx = power_context(nullptr, why);
  EXPECT_FALSE(ctx["measured"].get<bool>());
  EXPECT_EQ(ctx["why_not"], why);
  EXPECT_EQ(power_context(nullptr, "")["why_not"], "power sampler not started");
}

TEST(PowerSampler, LibraryWithoutNvmlSymbols) {
  EnvVar lib("DROPBENCH_NVML_LIB", "libm.so.6");
  std::string why;
  EXPECT_EQ(PowerSampler::open(0, &why), nullptr);
  EXPECT_NE(why.find("libm.so.6 lacks nvmlInit_v2"), std::string::npos) << why;
}

using SetFn = void (*)(double, unsigned long long, unsigned);

SetFn fake_control() {
  // The same path as DROPBENCH_NVML_LIB: dlopen returns the instance the sampler loaded.
  void* h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  return h ? reinterpret_cast<SetFn>(dlsym(h, "fake_nvml_set")) : nullptr;
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST(PowerSampler, FakeNvmlFailures) {
  EnvVar lib("DROPBENCH_NVML_LIB", FAKE_NVML_PATH);
  std::string why;
  EXPECT_EQ(PowerSampler::open_pci("0000:00:00.0", &why), nullptr);
  EXPECT_NE(why.find("NVML has no device at PCI bus id 0000:00:00.0: Not Found (6)"), std::string::npos) << why;
  {
    EnvVar fail("FAKE_NVML_INIT_FAIL", "1");
    EXPECT_EQ(PowerSampler::open_pci("fake", &why), nullptr);
    EXPECT_EQ(why, "nvmlInit: Driver Not Loaded (9)");
  }
}

// 100 W idle, then 400 W with the SW power cap reason at 1500 MHz for 1.2 s: the window's energy comes from the
// counter and matches 400 W * its length; the idle window before it reads 100 W.
TEST(PowerSampler, FakeNvmlEndToEnd) {
  EnvVar lib("DROPBENCH_NVML_LIB", FAKE_NVML_PATH);
  const SetFn set = fake_control();
  ASSERT_NE(set, nullptr) << dlerror();
  set(100, 0, 1980);
  std::string why;
  auto s = PowerSampler::open_pci("fake", &why);
  ASSERT_NE(s, nullptr) << why;
  EXPECT_DOUBLE_EQ(s->cap_w(), 700.0);
  const double idle0 = PowerSampler::now();
  sleep_s(0.7);  // the counter's update interval is learned
  const double t0 = PowerSampler::now();
  set(400, 0x4, 1500);
  sleep_s(1.2);
  set(100, 0, 1980);
  const double t1 = PowerSampler::now();
  sleep_s(0.05);

  const PowerWindow idle = s->window(idle0 + 0.15, t0);
  const PowerWindow w = s->window(t0, t1);
  const auto info = s->info();
  std::printf("fake NVML: idle %.2f W; busy %.2f W from %zu changes (instantaneous %.2f W), %.3f J over %.3f s, "
              "%zu readings; %s counter queries, update interval %s ms\n",
              idle.mean_w, w.mean_w, w.counter_changes, w.mean_instant_w, w.energy_j, w.seconds, w.readings,
              info["energy_queries"].dump().c_str(), info["counter_update_interval_ms"].dump().c_str());
  ASSERT_TRUE(idle.measured) << idle.note;
  EXPECT_EQ(idle.energy_source, "counter");
  EXPECT_NEAR(idle.mean_w, 100.0, 5.0);

  ASSERT_TRUE(w.measured) << w.note;
  EXPECT_EQ(w.energy_source, "counter");
  EXPECT_GE(w.counter_changes, 8u);
  EXPECT_DOUBLE_EQ(w.seconds, t1 - t0);
  EXPECT_NEAR(w.mean_w, 400.0, 20.0);
  EXPECT_NEAR(w.energy_j, 400.0 * w.seconds, 0.05 * 400.0 * w.seconds);
  // The reading lags a step by up to one update (100 ms) of 1.2 s: its mean is a little lower.
  EXPECT_GT(w.mean_instant_w, 340.0);
  EXPECT_LE(w.mean_instant_w, 400.0);
  EXPECT_DOUBLE_EQ(w.max_w, 400.0);
  EXPECT_GT(w.readings, 50u);
  EXPECT_GT(w.capped_share, 0.9);
  EXPECT_DOUBLE_EQ(w.thermal_share, 0.0);
  EXPECT_GT(w.mean_sm_mhz, 1450.0);
  EXPECT_LT(w.mean_sm_mhz, 1600.0);
  EXPECT_DOUBLE_EQ(w.max_temp_c, 40.0);
  EXPECT_EQ(w.timeline.t_s.size(), std::min(w.readings, kPowerTimelinePoints));

  EXPECT_EQ(info["library"], FAKE_NVML_PATH);
  EXPECT_EQ(info["device"], "Fake GPU");
  EXPECT_EQ(info["driver"], "fake-1.0");
  EXPECT_EQ(info["pci_bus_id"], "fake");
  EXPECT_FALSE(info.contains("cuda_device"));
  EXPECT_EQ(info["cap_w"], 700.0);
  EXPECT_EQ(info["cap_constraints_w"][0], 200.0);
  EXPECT_EQ(info["power_reading"], "NVML_FI_DEV_POWER_INSTANT");
  EXPECT_TRUE(info["energy_counter"].get<bool>());
  EXPECT_GT(info["energy_query_ms"].get<double>(), 2.5);
  EXPECT_NEAR(info["counter_update_interval_ms"].get<double>(), 100.0, 20.0);
  EXPECT_EQ(info["errors"], 0u);
  // Adaptive polling: far fewer counter queries than ticks (every tick would be ~2 s / 5 ms = 400).
  EXPECT_LT(info["energy_queries"].get<size_t>(), 300u);
  const auto ctx = power_context(s.get(), "");
  EXPECT_TRUE(ctx["measured"].get<bool>());
  EXPECT_EQ(ctx["cap_w"], 700.0);
  EXPECT_FALSE(ctx.contains("why_not"));
}

// Without the counter, energy comes from the readings; without the instantaneous field, from the averaged one.
TEST(PowerSampler, FakeNvmlWithoutCounterOrInstantField) {
  EnvVar lib("DROPBENCH_NVML_LIB", FAKE_NVML_PATH);
  const SetFn set = fake_control();
  ASSERT_NE(set, nullptr);
  set(250, 0, 1980);
  sleep_s(0.15);  // the fake publishes the new power at its next 100 ms update
  {
    EnvVar no("FAKE_NVML_NO_ENERGY", "1");
    std::string why;
    auto s = PowerSampler::open_pci("fake", &why);
    ASSERT_NE(s, nullptr) << why;
    EXPECT_FALSE(s->info()["energy_counter"].get<bool>());
    const double t0 = PowerSampler::now();
    sleep_s(0.4);
    const PowerWindow w = s->window(t0, PowerSampler::now());
    ASSERT_TRUE(w.measured);
    EXPECT_EQ(w.energy_source, "instant");
    EXPECT_DOUBLE_EQ(w.mean_w, 250.0);
    EXPECT_NEAR(w.energy_j, 250.0 * w.seconds, 1e-9);
    EXPECT_NE(w.note.find("no energy counter"), std::string::npos) << w.note;
  }
  {
    EnvVar no("FAKE_NVML_NO_INSTANT", "1");
    std::string why;
    auto s = PowerSampler::open_pci("fake", &why);
    ASSERT_NE(s, nullptr) << why;
    EXPECT_EQ(s->info()["power_reading"], "nvmlDeviceGetPowerUsage (averaged)");
    const double t0 = PowerSampler::now();
    sleep_s(0.1);
    const PowerWindow w = s->window(t0, PowerSampler::now());
    EXPECT_TRUE(w.measured);
    EXPECT_DOUBLE_EQ(w.max_w, 250.0);
  }
}

}  // namespace

// context.clocks carries the clock and power settings NVML gives (application / max clocks, power limits,
// persistence, the clock event reasons), through the sampler's loader; a figure NVML lacks is null, and without
// NVML (or a device) every figure is null and the reason is said. The stand-in has no default application clocks.
TEST(ClockSettings, FromTheStandInNvml) {
  EnvVar lib("DROPBENCH_NVML_LIB", FAKE_NVML_PATH);
  const SetFn set = fake_control();
  ASSERT_NE(set, nullptr) << dlerror();
  set(100, 0x2 | 0x4, 1755);
  const auto j = dropbench::clock_settings_pci("fake");
  EXPECT_EQ(j["nvml"], true);
  EXPECT_EQ(j["applications_sm_mhz"], 1755);
  EXPECT_EQ(j["applications_mem_mhz"], 3201);
  EXPECT_TRUE(j["default_applications_sm_mhz"].is_null());
  EXPECT_EQ(j["max_sm_mhz"], 1980);
  EXPECT_DOUBLE_EQ(j["power_limit_w"].get<double>(), 650.0);
  EXPECT_DOUBLE_EQ(j["default_power_limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(j["enforced_power_limit_w"].get<double>(), 700.0);
  EXPECT_EQ(j["persistence_mode"], true);
  EXPECT_EQ(j["clock_event_reasons"], "0x6");
  EXPECT_EQ(j["applications_clocks_setting"], true);
  set(100, 0, 1980);
}

TEST(ClockSettings, WithoutNvmlEveryFigureIsNull) {
  EnvVar lib("DROPBENCH_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
  const auto j = dropbench::clock_settings_pci("0000:00:00.0");
  EXPECT_EQ(j["nvml"], false);
  EXPECT_NE(j["why_not"].get<std::string>().find("NVML not found"), std::string::npos) << j.dump();
  for (const char* k : {"applications_sm_mhz", "max_sm_mhz", "power_limit_w", "persistence_mode",
                        "applications_clocks_setting"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_null()) << k;
  }
  // The stand-in has no device at this bus id: the same nulls, and why.
  EnvVar fake("DROPBENCH_NVML_LIB", FAKE_NVML_PATH);
  const auto k = dropbench::clock_settings_pci("0000:00:00.0");
  EXPECT_EQ(k["nvml"], false);
  EXPECT_TRUE(k["max_sm_mhz"].is_null());
  EXPECT_NE(k["why_not"].get<std::string>().find("no device at PCI bus id"), std::string::npos) << k.dump();
}
