// PowerSampler: NVML loaded with dlopen (no link-time dependency), a polling thread, and the window arithmetic.
#include "src/core/power.hpp"
#include "src/core/bootstrap.hpp"  // finite_median
#include "src/core/stats.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/dl.hpp"

namespace dropbench {

using ojson = nlohmann::ordered_json;

namespace {

// ---- The few NVML declarations used, as nvml.h defines them (the toolkit here ships no nvml.h; the ABI of
// these has been stable across drivers). ----
namespace nvml {
using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;
using Device = struct nvmlDevice_st*;
constexpr int kClockSm = 1;    // NVML_CLOCK_SM
constexpr int kClockMem = 2;   // NVML_CLOCK_MEM
constexpr int kTempGpu = 0;    // NVML_TEMPERATURE_GPU
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT (mW)
union Value {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};
struct FieldValue {  // nvmlFieldValue_t
  unsigned int field_id;
  unsigned int scope_id;  // 0 = the GPU (not the module) for the power fields
  long long timestamp;
  long long latency_us;
  int value_type;         // nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ull, 4 sll, 5 int, 6 ushort
  Return nvml_return;
  Value value;
};
// Clock event reason bits (nvmlClocksEventReasons, formerly ...ThrottleReasons).
constexpr uint64_t kAppClocksSetting = 0x2;
constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40, kHwPowerBrake = 0x80;
}  // namespace nvml

struct NvmlApi {
  void* lib = nullptr;
  std::string lib_name;
  nvml::Return (*init)() = nullptr;
  nvml::Return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml::Return) = nullptr;
  nvml::Return (*driver_version)(char*, unsigned) = nullptr;
  nvml::Return (*handle_by_pci)(const char*, nvml::Device*) = nullptr;
  nvml::Return (*name)(nvml::Device, char*, unsigned) = nullptr;
  nvml::Return (*enforced_limit)(nvml::Device, unsigned*) = nullptr;  // mW
  nvml::Return (*limit_constraints)(nvml::Device, unsigned*, unsigned*) = nullptr;
  nvml::Return (*total_energy)(nvml::Device, unsigned long long*) = nullptr;  // mJ
  nvml::Return (*field_values)(nvml::Device, int, nvml::FieldValue*) = nullptr;
  nvml::Return (*power_usage)(nvml::Device, unsigned*) = nullptr;  // mW, averaged
  nvml::Return (*clock)(nvml::Device, int, unsigned*) = nullptr;    // MHz
  nvml::Return (*temperature)(nvml::Device, int, unsigned*) = nullptr;
  nvml::Return (*reasons)(nvml::Device, unsigned long long*) = nullptr;
  // Settings for context.clocks (clock_settings); optional, so a driver without one still samples power.
  nvml::Return (*app_clock)(nvml::Device, int, unsigned*) = nullptr;          // MHz
  nvml::Return (*default_app_clock)(nvml::Device, int, unsigned*) = nullptr;  // MHz
  nvml::Return (*max_clock)(nvml::Device, int, unsigned*) = nullptr;          // MHz
  nvml::Return (*limit)(nvml::Device, unsigned*) = nullptr;                   // mW, as set
  nvml::Return (*default_limit)(nvml::Device, unsigned*) = nullptr;           // mW
  nvml::Return (*persistence)(nvml::Device, int*) = nullptr;                  // nvmlEnableState_t

  std::string error(nvml::Return r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? fmt::format("{} ({})", s, r) : fmt::format("NVML error {}", r);
  }
};

// Loads the library and its symbols; false with *why set when the library or a required symbol is missing.
bool load_nvml(NvmlApi& api, std::string* why) {
  std::vector<std::string> names;
  if (const char* env = std::getenv("DROPBENCH_NVML_LIB"); env && *env)
    names.push_back(env);
  else
    names = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  std::string tried;
  // Never dlclose'd: unloading NVML buys nothing and the library does not promise to clean up after itself.
  api.lib = dlopen_first(names, &tried, &api.lib_name);
  if (!api.lib) {
    *why = "NVML not found (tried " + tried + "; the driver's libnvidia-ml, or DROPBENCH_NVML_LIB=/path)";
    return false;
  }
  auto sym = [&](auto& fn, const char* s) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, s));
    return fn != nullptr;
  };
  std::string missing;
  for (auto [ok, s] : {std::pair{sym(api.init, "nvmlInit_v2"), "nvmlInit_v2"},
                       std::pair{sym(api.shutdown, "nvmlShutdown"), "nvmlShutdown"},
                       std::pair{sym(api.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2"),
                                 "nvmlDeviceGetHandleByPciBusId_v2"}})
    if (!ok) missing += (missing.empty() ? "" : ", ") + std::string(s);
  sym(api.error_string, "nvmlErrorString");
  sym(api.driver_version, "nvmlSystemGetDriverVersion");
  sym(api.name, "nvmlDeviceGetName");
  sym(api.enforced_limit, "nvmlDeviceGetEnforcedPowerLimit");
  sym(api.limit_constraints, "nvmlDeviceGetPowerManagementLimitConstraints");
  sym(api.total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  sym(api.field_values, "nvmlDeviceGetFieldValues");
  sym(api.power_usage, "nvmlDeviceGetPowerUsage");
  sym(api.clock, "nvmlDeviceGetClockInfo");
  sym(api.temperature, "nvmlDeviceGetTemperature");
  // Renamed in driver 535; the old name stays exported for older drivers.
  if (!sym(api.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    sym(api.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  sym(api.app_clock, "nvmlDeviceGetApplicationsClock");
  sym(api.default_app_clock, "nvmlDeviceGetDefaultApplicationsClock");
  sym(api.max_clock, "nvmlDeviceGetMaxClockInfo");
  sym(api.limit, "nvmlDeviceGetPowerManagementLimit");
  sym(api.default_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
  sym(api.persistence, "nvmlDeviceGetPersistenceMode");
  if (!api.field_values && !api.power_usage)
    missing += (missing.empty() ? "" : ", ") + std::string("nvmlDeviceGetFieldValues and nvmlDeviceGetPowerUsage");
  if (!missing.empty()) {
    *why = api.lib_name + " lacks " + missing;
    return false;
  }
  return true;
}

double field_as_double(const nvml::FieldValue& f) {
  switch (f.value_type) {
    case 0: return f.value.d;
    case 1: return f.value.ui;
    case 2: return static_cast<double>(f.value.ul);
    case 3: return static_cast<double>(f.value.ull);
    case 4: return static_cast<double>(f.value.sll);
    case 5: return f.value.si;
    case 6: return f.value.us;
  }
  return PowerWindow::nan;
}

constexpr double kPollInterval = 0.005;         // fast readings: every 5 ms (a set is 5 queries of tens of µs)
constexpr double kReadingRetention = 600.0;     // fast readings kept (s): ~120k readings, a few MB
constexpr double kChangeRetention = 4 * 3600.0; // counter changes kept (s): ~10 per second, a few MB
constexpr size_t kIntervalHistory = 9;          // counter change intervals the update interval is learned from

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

struct PowerSampler::Impl {
  NvmlApi api;
  bool nvml_inited = false;
  nvml::Device dev = nullptr;
  int cuda_device = -1;  // -1: opened by PCI bus id (open_pci)
  std::string pci_bus_id, device_name, driver;
  double cap_w = PowerWindow::nan, cap_min_w = PowerWindow::nan, cap_max_w = PowerWindow::nan;
  bool instant_field = false;   // NVML_FI_DEV_POWER_INSTANT works; else nvmlDeviceGetPowerUsage (averaged)
  bool counter = false;         // the total-energy counter works
  double energy_query_s = PowerWindow::nan;  // cost of one counter query (median at open)

  // Thread state. The thread alone writes last_*; the deques and counts are shared under mu.
  std::thread thread;
  std::atomic<bool> stop{false};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  mutable std::mutex mu;
  std::deque<PowerReading> readings;
  std::deque<CounterChange> changes;
  std::deque<double> intervals;      // recent gaps between counter changes (s)
  double update_interval = 0;        // their median; 0 until three changes were seen
  size_t total_readings = 0, total_changes = 0, energy_queries = 0, errors = 0;
  std::string last_error;
  double dropped_before = -std::numeric_limits<double>::infinity();  // readings older than this were dropped

  bool have_energy = false;
  unsigned long long last_mj = 0;
  double last_query_mid = 0, last_query_end = 0, last_change_t = 0;

  ~Impl() {
    if (thread.joinable()) {
      {
        std::lock_guard<std::mutex> lk(stop_mu);
        stop = true;
      }
      stop_cv.notify_all();
      thread.join();
    }
    if (nvml_inited) api.shutdown();
  }

  void fail(const char* what, nvml::Return r) {
    std::lock_guard<std::mutex> lk(mu);
    ++errors;
    last_error = fmt::format("{}: {}", what, api.error(r));
  }

  // Instantaneous power (W), or NaN.
  double power_w() {
    if (instant_field) {
      nvml::FieldValue f{};
      f.field_id = nvml::kFieldPowerInstant;
      const nvml::Return r = api.field_values(dev, 1, &f);
      if (r == nvml::kSuccess && f.nvml_return == nvml::kSuccess) return field_as_double(f) * 1e-3;
      fail("NVML_FI_DEV_POWER_INSTANT", r != nvml::kSuccess ? r : f.nvml_return);
      return PowerWindow::nan;
    }
    unsigned mw = 0;
    const nvml::Return r = api.power_usage(dev, &mw);
    if (r == nvml::kSuccess) return mw * 1e-3;
    fail("nvmlDeviceGetPowerUsage", r);
    return PowerWindow::nan;
  }

  double clock_mhz(int which) {
    unsigned v = 0;
    return api.clock && api.clock(dev, which, &v) == nvml::kSuccess ? static_cast<double>(v) : PowerWindow::nan;
  }

  void poll_fast() {
    PowerReading r;
    const double a = now();
    r.w = power_w();
    const double b = now();
    r.t = 0.5 * (a + b);
    r.sm_mhz = clock_mhz(nvml::kClockSm);
    r.mem_mhz = clock_mhz(nvml::kClockMem);
    unsigned temp = 0;
    if (api.temperature && api.temperature(dev, nvml::kTempGpu, &temp) == nvml::kSuccess) r.temp_c = temp;
    unsigned long long bits = 0;
    if (api.reasons && api.reasons(dev, &bits) == nvml::kSuccess) {
      r.reasons = bits;
      r.reasons_known = true;
    }
    std::lock_guard<std::mutex> lk(mu);
    readings.push_back(r);
    ++total_readings;
    while (!readings.empty() && readings.front().t < r.t - kReadingRetention) {
      dropped_before = readings.front().t;
      readings.pop_front();
    }
  }

  // The counter changes every ~100 ms but a query costs ~3 ms: poll it every tick only while a change is due
  // (from 85% of the learned interval on), and every quarter interval otherwise, so that a faster cadence is
  // still noticed. Until the interval is learned, every tick.
  bool energy_due(double t) const {
    if (!counter) return false;
    if (update_interval <= 0) return true;
    const double since = t - last_change_t;
    if (since >= 0.85 * update_interval && since <= 3 * update_interval) return true;
    return t - last_query_end >= 0.25 * update_interval;
  }

  void poll_energy() {
    unsigned long long mj = 0;
    const double a = now();
    const nvml::Return r = api.total_energy(dev, &mj);
    const double b = now();
    if (r != nvml::kSuccess) return fail("nvmlDeviceGetTotalEnergyConsumption", r);
    const double mid = 0.5 * (a + b);
    std::lock_guard<std::mutex> lk(mu);
    ++energy_queries;
    if (have_energy && mj != last_mj) {
      // The new value appeared between the previous query and this one: take the middle (error <= half the gap).
      const double t = 0.5 * (last_query_mid + mid);
      if (total_changes > 0) {
        intervals.push_back(t - last_change_t);
        if (intervals.size() > kIntervalHistory) intervals.pop_front();
        if (intervals.size() >= 2) update_interval = finite_median(std::vector<double>(intervals.begin(), intervals.end()));
      }
      changes.push_back({t, static_cast<double>(mj)});
      ++total_changes;
      last_change_t = t;
      while (!changes.empty() && changes.front().t < t - kChangeRetention) changes.pop_front();
    }
    have_energy = true;
    last_mj = mj;
    last_query_mid = mid;
    last_query_end = b;
  }

  void run() {
    double next = now();
    while (!stop) {
      poll_fast();
      if (energy_due(now())) poll_energy();
      // A fixed tick; after a stall (a slow query, a descheduled thread) the schedule restarts, no burst.
      next = std::max(next + kPollInterval, now());
      std::unique_lock<std::mutex> lk(stop_mu);
      stop_cv.wait_until(lk, std::chrono::steady_clock::time_point(std::chrono::duration_cast<
                                 std::chrono::steady_clock::duration>(std::chrono::duration<double>(next))),
                         [this] { return stop.load(); });
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------

double PowerSampler::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

PowerSampler::PowerSampler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PowerSampler::~PowerSampler() = default;

namespace {
// Loads NVML and initialises it; nullptr with *why set when it cannot.
std::unique_ptr<PowerSampler::Impl> load_and_init(std::string* why) {
  auto impl = std::make_unique<PowerSampler::Impl>();
  if (!load_nvml(impl->api, why)) return nullptr;
  if (const nvml::Return r = impl->api.init(); r != nvml::kSuccess) {
    *why = "nvmlInit: " + impl->api.error(r);
    return nullptr;
  }
  impl->nvml_inited = true;
  return impl;
}
}  // namespace

std::unique_ptr<PowerSampler> PowerSampler::open(int cuda_device, std::string* why_not) {
  std::string why;
  // NVML first: without it no CUDA call is made, so the no-NVML path needs no GPU.
  auto impl = load_and_init(&why);
  if (!impl) {
    if (why_not) *why_not = why;
    return nullptr;
  }
  // CUDA and NVML number devices differently (CUDA_VISIBLE_DEVICES, ordering): the PCI bus id is common to both.
  char bus[64] = {};
  DB_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device));
  impl->cuda_device = cuda_device;
  return attach(std::move(impl), bus, why_not);
}

std::unique_ptr<PowerSampler> PowerSampler::open_pci(const std::string& pci_bus_id, std::string* why_not) {
  std::string why;
  auto impl = load_and_init(&why);
  if (!impl) {
    if (why_not) *why_not = why;
    return nullptr;
  }
  return attach(std::move(impl), pci_bus_id, why_not);
}

std::unique_ptr<PowerSampler> PowerSampler::attach(std::unique_ptr<Impl> impl, const std::string& bus,
                                                   std::string* why_not) {
  auto fail = [&](std::string w) -> std::unique_ptr<PowerSampler> {
    if (why_not) *why_not = std::move(w);
    return nullptr;
  };
  NvmlApi& api = impl->api;
  impl->pci_bus_id = bus;
  if (const nvml::Return r = api.handle_by_pci(bus.c_str(), &impl->dev); r != nvml::kSuccess)
    return fail(fmt::format("NVML has no device at PCI bus id {}{}: {}", bus,
                            impl->cuda_device >= 0 ? fmt::format(" (CUDA device {})", impl->cuda_device) : "",
                            api.error(r)));

  // A power reading is required; the instantaneous field is preferred (nvmlDeviceGetPowerUsage is a ~1 s average).
  std::string power_why;
  if (api.field_values) {
    impl->instant_field = true;
    nvml::FieldValue f{};
    f.field_id = nvml::kFieldPowerInstant;
    const nvml::Return r = api.field_values(impl->dev, 1, &f);
    if (r != nvml::kSuccess || f.nvml_return != nvml::kSuccess) {
      impl->instant_field = false;
      power_why = "NVML_FI_DEV_POWER_INSTANT: " + api.error(r != nvml::kSuccess ? r : f.nvml_return);
    }
  }
  if (!impl->instant_field) {
    unsigned mw = 0;
    const nvml::Return r = api.power_usage ? api.power_usage(impl->dev, &mw) : -1;
    if (r != nvml::kSuccess)
      return fail(fmt::format("no power readings for the device at {}: {}{}", bus,
                              power_why.empty() ? "" : power_why + "; ",
                              api.power_usage ? "nvmlDeviceGetPowerUsage: " + api.error(r)
                                              : "no nvmlDeviceGetPowerUsage"));
  }
  if (api.total_energy) {
    std::vector<double> cost;
    unsigned long long mj = 0;
    impl->counter = true;
    for (int i = 0; i < 3 && impl->counter; ++i) {
      const double a = now();
      impl->counter = api.total_energy(impl->dev, &mj) == nvml::kSuccess;
      cost.push_back(now() - a);
    }
    if (impl->counter) impl->energy_query_s = finite_median(cost);
  }
  char text[256] = {};
  if (api.name && api.name(impl->dev, text, sizeof text) == nvml::kSuccess) impl->device_name = text;
  text[0] = 0;
  if (api.driver_version && api.driver_version(text, sizeof text) == nvml::kSuccess) impl->driver = text;
  unsigned mw = 0, lo = 0, hi = 0;
  if (api.enforced_limit && api.enforced_limit(impl->dev, &mw) == nvml::kSuccess) impl->cap_w = mw * 1e-3;
  if (api.limit_constraints && api.limit_constraints(impl->dev, &lo, &hi) == nvml::kSuccess) {
    impl->cap_min_w = lo * 1e-3;
    impl->cap_max_w = hi * 1e-3;
  }
  Impl* p = impl.get();
  impl->thread = std::thread([p] { p->run(); });
  return std::unique_ptr<PowerSampler>(new PowerSampler(std::move(impl)));
}

PowerWindow PowerSampler::window(double t0, double t1) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  PowerWindow w = power_window(impl_->readings, impl_->changes, t0, t1);
  if (t0 < impl_->dropped_before && w.measured) {
    const std::string n = fmt::format("readings older than {:.0f} s were dropped: the clock, temperature and reason "
                                      "figures cover the window's last part only", kReadingRetention);
    w.note = w.note.empty() ? n : w.note + "; " + n;
  }
  if (!impl_->counter && w.measured && w.note.empty())
    w.note = "no energy counter on this device: energy from the power readings";
  return w;
}

double PowerSampler::cap_w() const { return impl_->cap_w; }

ojson PowerSampler::info() const {
  const Impl& m = *impl_;
  ojson j;
  j["library"] = m.api.lib_name;
  j["driver"] = m.driver;
  j["device"] = m.device_name;
  if (m.cuda_device >= 0) j["cuda_device"] = m.cuda_device;
  j["pci_bus_id"] = m.pci_bus_id;
  j["cap_w"] = number_or_null(m.cap_w);
  j["cap_constraints_w"] = {number_or_null(m.cap_min_w), number_or_null(m.cap_max_w)};
  j["power_reading"] = m.instant_field ? "NVML_FI_DEV_POWER_INSTANT" : "nvmlDeviceGetPowerUsage (averaged)";
  j["energy_counter"] = m.counter;
  j["poll_interval_ms"] = kPollInterval * 1e3;
  j["energy_query_ms"] = number_or_null(m.energy_query_s * 1e3);
  std::lock_guard<std::mutex> lk(m.mu);
  j["counter_update_interval_ms"] = number_or_null(m.update_interval > 0 ? m.update_interval * 1e3 : PowerWindow::nan);
  j["readings"] = m.total_readings;
  j["counter_changes"] = m.total_changes;
  j["energy_queries"] = m.energy_queries;
  j["errors"] = m.errors;
  if (!m.last_error.empty()) j["last_error"] = m.last_error;
  return j;
}

namespace {

// The figures clock_settings() writes, every one null: what a report says where NVML cannot tell.
ojson null_settings() {
  ojson j;
  for (const char* k : {"applications_sm_mhz", "applications_mem_mhz", "default_applications_sm_mhz",
                        "default_applications_mem_mhz", "max_sm_mhz", "max_mem_mhz", "power_limit_w",
                        "default_power_limit_w", "enforced_power_limit_w", "persistence_mode", "clock_event_reasons",
                        "applications_clocks_setting"})
    j[k] = nullptr;
  return j;
}

}  // namespace

ojson clock_settings_pci(const std::string& pci_bus_id) {
  ojson j = null_settings();
  std::string why;
  auto impl = load_and_init(&why);
  nvml::Device dev = nullptr;
  if (impl) {
    if (const nvml::Return r = impl->api.handle_by_pci(pci_bus_id.c_str(), &dev); r != nvml::kSuccess)
      why = fmt::format("NVML has no device at PCI bus id {}: {}", pci_bus_id, impl->api.error(r));
  }
  if (!impl || !dev) {
    j["nvml"] = false;
    j["why_not"] = why;
    return j;
  }
  const NvmlApi& api = impl->api;
  auto mhz = [&](nvml::Return (*fn)(nvml::Device, int, unsigned*), int which) -> ojson {
    unsigned v = 0;
    return fn && fn(dev, which, &v) == nvml::kSuccess ? ojson(v) : ojson(nullptr);
  };
  auto watts = [&](nvml::Return (*fn)(nvml::Device, unsigned*)) -> ojson {
    unsigned mw = 0;
    return fn && fn(dev, &mw) == nvml::kSuccess ? ojson(mw * 1e-3) : ojson(nullptr);
  };
  j["nvml"] = true;
  j["applications_sm_mhz"] = mhz(api.app_clock, nvml::kClockSm);
  j["applications_mem_mhz"] = mhz(api.app_clock, nvml::kClockMem);
  j["default_applications_sm_mhz"] = mhz(api.default_app_clock, nvml::kClockSm);
  j["default_applications_mem_mhz"] = mhz(api.default_app_clock, nvml::kClockMem);
  j["max_sm_mhz"] = mhz(api.max_clock, nvml::kClockSm);
  j["max_mem_mhz"] = mhz(api.max_clock, nvml::kClockMem);
  j["power_limit_w"] = watts(api.limit);
  j["default_power_limit_w"] = watts(api.default_limit);
  j["enforced_power_limit_w"] = watts(api.enforced_limit);
  int mode = 0;
  if (api.persistence && api.persistence(dev, &mode) == nvml::kSuccess) j["persistence_mode"] = mode != 0;
  unsigned long long bits = 0;
  if (api.reasons && api.reasons(dev, &bits) == nvml::kSuccess) {
    j["clock_event_reasons"] = fmt::format("0x{:x}", bits);
    // 0x2: the clocks are held by the applications-clocks setting (nvidia-smi -ac) or a clock lock.
    j["applications_clocks_setting"] = (bits & nvml::kAppClocksSetting) != 0;
  }
  return j;
}

ojson clock_settings(int cuda_device) {
  char bus[64] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
    cudaGetLastError();
    ojson j = null_settings();
    j["nvml"] = false;
    j["why_not"] = fmt::format("no PCI bus id for CUDA device {}", cuda_device);
    return j;
  }
  return clock_settings_pci(bus);
}

ojson power_context(const PowerSampler* sampler, const std::string& why_not) {
  ojson j;
  j["measured"] = sampler != nullptr;
  if (sampler) {
    const ojson info = sampler->info();  // named: items() of a temporary would dangle in the loop
    for (auto& [k, v] : info.items()) j[k] = v;
  } else {
    j["why_not"] = why_not.empty() ? "power sampler not started" : why_not;
  }
  return j;
}

// ---------------------------------------------------------------------------------------------------------------

namespace {

// The readings' means and maxima (power, clocks, temperature) and the shares of them whose throttle reasons say
// power cap, thermal or hardware slowdown.
void summarise_readings(const std::vector<const PowerReading*>& sel, PowerWindow& w) {
  double sw = 0, ssm = 0, smem = 0;
  size_t nw = 0, nsm = 0, nmem = 0, nreasons = 0, ncap = 0, ntherm = 0, nslow = 0;
  for (const PowerReading* r : sel) {
    if (std::isfinite(r->w)) {
      sw += r->w, ++nw;
      w.max_w = std::isfinite(w.max_w) ? std::max(w.max_w, r->w) : r->w;
    }
    if (std::isfinite(r->sm_mhz)) ssm += r->sm_mhz, ++nsm;
    if (std::isfinite(r->mem_mhz)) smem += r->mem_mhz, ++nmem;
    if (std::isfinite(r->temp_c))
      w.max_temp_c = std::isfinite(w.max_temp_c) ? std::max(w.max_temp_c, r->temp_c) : r->temp_c;
    if (r->reasons_known) {
      ++nreasons;
      ncap += (r->reasons & (nvml::kSwPowerCap | nvml::kHwPowerBrake)) != 0;
      ntherm += (r->reasons & (nvml::kSwThermal | nvml::kHwThermal)) != 0;
      nslow += (r->reasons & nvml::kHwSlowdown) != 0;
    }
  }
  if (nw) w.mean_instant_w = sw / nw;
  if (nsm) w.mean_sm_mhz = ssm / nsm;
  if (nmem) w.mean_mem_mhz = smem / nmem;
  if (nreasons) {
    w.capped_share = static_cast<double>(ncap) / nreasons;
    w.thermal_share = static_cast<double>(ntherm) / nreasons;
    w.hw_slowdown_share = static_cast<double>(nslow) / nreasons;
  }
}

// The window's mean power: from the energy counter's first and last change inside it, else from the
// instantaneous readings (w.mean_instant_w, when there are any). Why the counter was not used ("" when it was).
std::string window_energy(const std::deque<CounterChange>& changes, double t0, double t1, PowerWindow& w) {
  auto in = [&](double t) { return t >= t0 && t <= t1; };
  const CounterChange* c0 = nullptr;
  const CounterChange* c1 = nullptr;
  for (const CounterChange& c : changes) {
    if (!in(c.t)) continue;
    if (!c0) c0 = &c;
    c1 = &c;
    ++w.counter_changes;
  }
  std::string why_instant;
  if (w.counter_changes >= 2 && c1->t > c0->t && c1->mj >= c0->mj) {
    w.mean_w = (c1->mj - c0->mj) * 1e-3 / (c1->t - c0->t);
    w.energy_source = "counter";
  } else {
    if (w.counter_changes >= 2)
      why_instant = "the energy counter went backwards (driver reloaded?)";
    else if (!changes.empty())
      why_instant = fmt::format("{} energy-counter change(s) in the {:.3f} s window", w.counter_changes, w.seconds);
    if (std::isfinite(w.mean_instant_w)) {
      w.mean_w = w.mean_instant_w;
      w.energy_source = "instant";
    }
  }
  return why_instant;
}

// At most kPowerTimelinePoints buckets of consecutive readings, each averaged, times from the window's start.
void add_timeline(const std::vector<const PowerReading*>& sel, double t0, PowerWindow& w) {
  const size_t n = sel.size();
  const size_t buckets = std::min(n, kPowerTimelinePoints);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    double st = 0, sp = 0, ss = 0;
    size_t kp = 0, ks = 0;
    for (size_t i = lo; i < hi; ++i) {
      st += sel[i]->t;
      if (std::isfinite(sel[i]->w)) sp += sel[i]->w, ++kp;
      if (std::isfinite(sel[i]->sm_mhz)) ss += sel[i]->sm_mhz, ++ks;
    }
    w.timeline.t_s.push_back(st / (hi - lo) - t0);
    w.timeline.w.push_back(kp ? sp / kp : PowerWindow::nan);
    w.timeline.sm_mhz.push_back(ks ? ss / ks : PowerWindow::nan);
  }
}

}  // namespace

PowerWindow power_window(const std::deque<PowerReading>& readings, const std::deque<CounterChange>& changes,
                         double t0, double t1) {
  PowerWindow w;
  w.seconds = t1 - t0;
  if (!(std::isfinite(t0) && std::isfinite(t1) && t1 > t0)) {
    w.note = "empty window";
    return w;
  }
  auto first = std::lower_bound(readings.begin(), readings.end(), t0,
                                [](const PowerReading& r, double t) { return r.t < t; });
  std::vector<const PowerReading*> sel;
  for (auto it = first; it != readings.end() && it->t <= t1; ++it) sel.push_back(&*it);
  w.readings = sel.size();

  summarise_readings(sel, w);
  const std::string why_instant = window_energy(changes, t0, t1, w);
  if (w.energy_source.empty()) {
    w.note = sel.empty() ? fmt::format("no readings in the {:.3f} s window", w.seconds)
                         : "no power readings in the window";
    return w;
  }
  w.measured = true;
  w.energy_j = w.mean_w * w.seconds;
  if (!why_instant.empty()) w.note = why_instant + ": energy from the instantaneous power readings";

  add_timeline(sel, t0, w);
  return w;
}

ojson to_json(const PowerWindow& w) {
  ojson j;
  j["measured"] = w.measured;
  j["energy_source"] = w.energy_source;
  j["window_s"] = number_or_null(w.seconds);
  j["energy_j"] = number_or_null(w.energy_j);
  j["mean_w"] = number_or_null(w.mean_w);
  j["mean_instant_w"] = number_or_null(w.mean_instant_w);
  j["max_w"] = number_or_null(w.max_w);
  j["mean_sm_mhz"] = number_or_null(w.mean_sm_mhz);
  j["mean_mem_mhz"] = number_or_null(w.mean_mem_mhz);
  j["max_temp_c"] = number_or_null(w.max_temp_c);
  j["capped_share"] = number_or_null(w.capped_share);
  j["thermal_share"] = number_or_null(w.thermal_share);
  j["hw_slowdown_share"] = number_or_null(w.hw_slowdown_share);
  j["readings"] = w.readings;
  j["counter_changes"] = w.counter_changes;
  if (!w.note.empty()) j["note"] = w.note;
  auto arr = [](const std::vector<double>& v, double scale) {
    ojson a = ojson::array();
    // Rounded (µs, 0.1 W, 1 MHz): the timeline is for plots, and reports stay small.
    for (double x : v) a.push_back(std::isfinite(x) ? ojson(std::round(x * scale) / scale) : ojson(nullptr));
    return a;
  };
  j["timeline"] = {{"t_s", arr(w.timeline.t_s, 1e6)}, {"w", arr(w.timeline.w, 10)},
                   {"sm_mhz", arr(w.timeline.sm_mhz, 1)}};
  return j;
}

}  // namespace dropbench
