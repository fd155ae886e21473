// GPU power, clocks and energy through NVML while variants are measured (docs/power.md).
// libnvidia-ml is loaded at run time (dlopen), so dropbench starts and runs where it is absent: open() then
// returns nullptr and says why, and reports say power was not measured. A PowerSampler polls, on its own
// thread, the instantaneous power reading, SM/memory clocks, temperature and the clock event ("throttle")
// reasons every few ms, and the total-energy counter as often as its cost allows. window(t0, t1) turns what
// it saw into figures over a host-time window (steady_clock seconds, PowerSampler::now()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dropbench {

// Readings over a window, downsampled for plots (at most kPowerTimelinePoints, each the mean of its bucket).
struct PowerTimeline {
  std::vector<double> t_s;     // seconds relative to the window's t0
  std::vector<double> w;       // instantaneous power reading (W)
  std::vector<double> sm_mhz;  // SM clock (MHz)
};
inline constexpr size_t kPowerTimelinePoints = 200;

struct PowerWindow {
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  bool measured = false;
  // "counter": energy from the total-energy counter's change points inside the window; "instant": from the
  // mean of the instantaneous power readings (the window held fewer than two counter changes); "" = none.
  std::string energy_source;
  double seconds = 0;            // t1 - t0
  double energy_j = nan;         // mean_w * seconds
  double mean_w = nan;           // counter: dE/dt between its first and last change in the window; else instant mean
  double mean_instant_w = nan;   // mean of the instantaneous power readings in the window
  double max_w = nan;            // highest instantaneous reading
  double mean_sm_mhz = nan, mean_mem_mhz = nan, max_temp_c = nan;
  double capped_share = nan;     // share of readings with SW power cap (0x4) or HW power brake (0x80)
  double thermal_share = nan;    // share with SW (0x20) or HW (0x40) thermal slowdown
  double hw_slowdown_share = nan;  // share with HW slowdown (0x8: power brake, thermal or power, not told apart)
  size_t readings = 0;           // fast readings (power/clocks) inside the window
  size_t counter_changes = 0;    // energy-counter changes inside the window
  std::string note;              // why not measured, or what limits the figures (empty when nothing to say)
  PowerTimeline timeline;
};

// keys: measured, energy_source, window_s, energy_j, mean_w, mean_instant_w, max_w, mean_sm_mhz, mean_mem_mhz,
// max_temp_c, capped_share, thermal_share, hw_slowdown_share, readings, counter_changes, [note],
// timeline {t_s, w, sm_mhz}. NaN figures are written as null.
nlohmann::ordered_json to_json(const PowerWindow& w);

class PowerSampler {
 public:
  // A sampler of CUDA device `cuda_device` (mapped to NVML by PCI bus id), its thread started; nullptr and
  // *why_not set when NVML or the device's power readings are unavailable. DROPBENCH_NVML_LIB names the library
  // to load instead of libnvidia-ml.so.1. CUDA failures (the bus id query) throw CudaError.
  static std::unique_ptr<PowerSampler> open(int cuda_device, std::string* why_not);
  // The same for the device at `pci_bus_id` ("0000:19:00.0"), with no CUDA call (tests, devices CUDA does not see).
  static std::unique_ptr<PowerSampler> open_pci(const std::string& pci_bus_id, std::string* why_not);
  ~PowerSampler();  // stops and joins the thread, shuts NVML down
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  static double now();  // steady_clock seconds: the clock windows are given in
  // Figures over [t0, t1] from the readings so far (call after t1, once the work inside has finished).
  PowerWindow window(double t0, double t1) const;
  // library, driver, device name, PCI bus id, cap_w and its constraints, which power reading is used, poll
  // interval, energy query cost, counter update interval seen, readings so far, errors.
  nlohmann::ordered_json info() const;
  double cap_w() const;  // enforced power limit (W); NaN when NVML does not say

  struct Impl;  // NVML table, thread, readings (power.cpp)

 private:
  explicit PowerSampler(std::unique_ptr<Impl> impl);
  static std::unique_ptr<PowerSampler> attach(std::unique_ptr<Impl> impl, const std::string& pci_bus_id,
                                              std::string* why_not);
  std::unique_ptr<Impl> impl_;
};

// The device's clock and power settings now, for context.clocks, through the same NVML loader:
// applications_{sm,mem}_mhz and their defaults, max_{sm,mem}_mhz, power_limit_w (as set), default_power_limit_w,
// enforced_power_limit_w, persistence_mode, clock_event_reasons ("0x..") and applications_clocks_setting (its
// bit 0x2: clocks held by the applications-clocks setting or a lock). "nvml": whether NVML answered; a figure
// it does not give is null, and without NVML all are, with "why_not".
nlohmann::ordered_json clock_settings(int cuda_device);
nlohmann::ordered_json clock_settings_pci(const std::string& pci_bus_id);

// For a report's context: {"measured": true, ...info()} or {"measured": false, "why_not": why_not}.
nlohmann::ordered_json power_context(const PowerSampler* sampler, const std::string& why_not);

// ---- the arithmetic of window(), on plain readings (exposed for CPU tests) ----

struct PowerReading {
  double t = 0;                   // steady_clock seconds
  double w = PowerWindow::nan;    // instantaneous power (W)
  double sm_mhz = PowerWindow::nan, mem_mhz = PowerWindow::nan, temp_c = PowerWindow::nan;
  uint64_t reasons = 0;           // NVML clock event reason bits
  bool reasons_known = false;
};

struct CounterChange {
  double t = 0;      // estimated moment the new value appeared (midway between the queries around it)
  double mj = 0;     // counter value (mJ since the driver loaded)
};

PowerWindow power_window(const std::deque<PowerReading>& readings, const std::deque<CounterChange>& changes,
                         double t0, double t1);

}  // namespace dropbench
