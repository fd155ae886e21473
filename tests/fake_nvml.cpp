// A stand-in for libnvidia-ml (DROPBENCH_NVML_LIB=<this library>) so that the CPU test test_power can run the
// PowerSampler's thread and window arithmetic without a GPU. It behaves the way the H200's NVML was measured to
// (docs/power.md): the total-energy counter and the instantaneous power reading change only every 100 ms, and an
// energy query costs ~3 ms. The test sets the simulated power with fake_nvml_set(); the counter integrates it.
// Environment: FAKE_NVML_INIT_FAIL=1 (nvmlInit fails), FAKE_NVML_NO_INSTANT=1 (the instantaneous field is not
// supported), FAKE_NVML_NO_ENERGY=1 (the counter is not supported). Device: PCI bus id "fake" only.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace {

constexpr double kUpdate = 0.1;  // s between counter / reading updates

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
bool env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

struct State {
  std::mutex mu;
  double watts = 100, acc_t = 0, acc_j = 0, next_update = 0;
  unsigned long long reasons = 0;
  unsigned sm_mhz = 1980;
  unsigned long long published_mj = 0;  // counter value at the last update
  double published_w = 100;             // power at the last update

  // Integrates the power up to `t`, publishing the counter and the reading at every update boundary crossed.
  void advance(double t) {
    if (acc_t == 0) acc_t = t, next_update = std::floor(t / kUpdate) * kUpdate + kUpdate;
    while (next_update <= t) {
      acc_j += watts * (next_update - acc_t);
      acc_t = next_update;
      published_mj = static_cast<unsigned long long>(acc_j * 1e3);
      published_w = watts;
      next_update += kUpdate;
    }
    acc_j += watts * (t - acc_t);
    acc_t = t;
  }
};
State& state() {
  static State s;
  return s;
}
int dummy_device;

struct FieldValue {  // nvmlFieldValue_t
  unsigned int field_id, scope_id;
  long long timestamp, latency_us;
  int value_type, nvml_return;
  union {
    double d;
    unsigned int ui;
    unsigned long long ull;
  } value;
};

}  // namespace

extern "C" {

// Test control: simulated power (W), clock event reasons and SM clock from now on.
void fake_nvml_set(double watts, unsigned long long reasons, unsigned sm_mhz) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.advance(now());
  s.watts = watts;
  s.reasons = reasons;
  s.sm_mhz = sm_mhz;
}

int nvmlInit_v2() { return env("FAKE_NVML_INIT_FAIL") ? 9 : 0; }  // 9 = NVML_ERROR_DRIVER_NOT_LOADED
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) {
  switch (r) {
    case 3: return "Not Supported";
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
  }
  return "Unknown Error";
}
int nvmlSystemGetDriverVersion(char* buf, unsigned n) {
  std::snprintf(buf, n, "fake-1.0");
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** dev) {
  if (std::strcmp(bus, "fake") != 0) return 6;
  *dev = &dummy_device;
  return 0;
}
int nvmlDeviceGetName(void*, char* buf, unsigned n) {
  std::snprintf(buf, n, "Fake GPU");
  return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetPowerManagementLimitConstraints(void*, unsigned* lo, unsigned* hi) {
  *lo = 200000, *hi = 700000;
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void*, unsigned long long* mj) {
  if (env("FAKE_NVML_NO_ENERGY")) return 3;
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.advance(now());
    *mj = s.published_mj;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the H200's query cost
  return 0;
}
int nvmlDeviceGetFieldValues(void*, int count, FieldValue* v) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.advance(now());
  for (int i = 0; i < count; ++i) {
    if (v[i].field_id != 186 || env("FAKE_NVML_NO_INSTANT")) {
      v[i].nvml_return = 3;
      continue;
    }
    v[i].nvml_return = 0;
    v[i].value_type = 1;  // unsigned int, mW
    v[i].value.ui = static_cast<unsigned>(s.published_w * 1e3);
  }
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.advance(now());
  *mw = static_cast<unsigned>(s.published_w * 1e3);
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int which, unsigned* mhz) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  *mhz = which == 1 ? s.sm_mhz : 2619;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int, unsigned* c) {
  *c = 40;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void*, unsigned long long* r) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  *r = s.reasons;
  return 0;
}

// context.clocks (clock_settings): no nvmlDeviceGetDefaultApplicationsClock, so its figures read null.
int nvmlDeviceGetApplicationsClock(void*, int which, unsigned* mhz) {
  *mhz = which == 1 ? 1755 : 3201;
  return 0;
}
int nvmlDeviceGetMaxClockInfo(void*, int which, unsigned* mhz) {
  *mhz = which == 1 ? 1980 : 3201;
  return 0;
}
int nvmlDeviceGetPowerManagementLimit(void*, unsigned* mw) {
  *mw = 650000;
  return 0;
}
int nvmlDeviceGetPowerManagementDefaultLimit(void*, unsigned* mw) {
  *mw = 700000;
  return 0;
}
int nvmlDeviceGetPersistenceMode(void*, int* mode) {
  *mode = 1;
  return 0;
}

}  // extern "C"
