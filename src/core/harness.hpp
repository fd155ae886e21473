// Measurement harness (nvbench-style): CUDA events around every sample and every phase, warm-up, repeat
// until the relative stdev is <= max_noise after min_time (or the timeout / max_samples), >= min_samples
// kept; optional L2 flush before each sample; the SM clock measured around each sample (a one-thread probe
// that reads %globaltimer and clock64 over a fixed spin), samples run below measure.throttle (default 75%)
// of the max SM clock are discarded and counted.
//
// The variants compared at a point are measured as one group (measure_group): with measure.interleave (the
// default) one sample of each per round, in an order shuffled every round, so the GPU's power and thermal drift
// hits all of them alike and a ratio of two variants' medians does not mix it in. The group stops when every
// variant meets the noise rule (or at max_samples rounds, or after timeout x variants). Each variant keeps its
// per-round samples (SampleSeries, NaN = discarded) for the paired bootstrap intervals of src/core/bootstrap.hpp.
// measure.repeats = K: the group is measured K times (each with its warm-up and stopping rule, repeat_gap idle
// seconds between); the series hold the K repeats one after another and the intervals include their spread.
#pragma once
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "src/core/bootstrap.hpp"
#include "src/core/config.hpp"
#include "src/core/power.hpp"
#include "src/core/stats.hpp"

namespace dropbench {

class Harness;

// Handed to the body of a measurement once per run. Phases are timed with their own events on the
// stream they run on; the sample's total runs from the start to the end event on the main stream, so a
// body that forks to other streams must join back to `stream` before returning.
class Sample {
 public:
  cudaStream_t stream;
  // Runs fn (which enqueues work on `on`, default the main stream) between two events, in an NVTX range.
  void phase(const std::string& name, const std::function<void()>& fn, cudaStream_t on = nullptr);
  bool dry() const { return dry_; }

 private:
  friend class Harness;
  friend class GroupRun;
  struct Rec {
    std::string name;
    cudaEvent_t start, stop;
  };
  Harness* h_ = nullptr;
  bool dry_ = false;
  std::vector<Rec> recs_;
  size_t next_ = 0;
};

// A phase hook: run fn (which enqueues work on `on`) as the named phase, so one launch sequence serves a timed
// sample (hook(s): Sample::phase) and an untimed run such as a check (no_phases(): fn alone).
using PhaseFn = std::function<void(const std::string& name, const std::function<void()>& fn, cudaStream_t on)>;
PhaseFn no_phases();
PhaseFn hook(Sample& s);

struct Measurement {
  Stats total;                // with the bootstrap interval of the median
  std::vector<std::pair<std::string, Stats>> phases;
  double seconds_spent = 0;   // wall time of the whole measurement or group (warm-up included)
  SampleSeries series;        // the kept samples by round (NaN where discarded), and the group they pair within
  // The power pass (measure.power_time): power.hpp's window keys plus iterations and energy_mj_per_iter; null
  // when power is not measured.
  json power;
};

// One variant of a group: its name (for NVTX and messages) and its body.
struct Candidate {
  std::string name;
  std::function<void(Sample&)> body;
};

class Harness {
 public:
  // dry_run: no GPU work at all; measure() calls the body once with phases that only push NVTX ranges.
  Harness(const MeasureSettings& m, bool dry_run);
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // A group of one.
  Measurement measure(const std::function<void(Sample&)>& body);
  // The candidates measured together (interleaved unless measure.interleave is false), in their order.
  // Throws Interrupted (src/core/interrupt.hpp) between samples once SIGINT/SIGTERM has been received.
  std::vector<Measurement> measure_group(const std::vector<Candidate>& group);
  cudaStream_t stream() const { return stream_; }
  double max_clock_mhz() const { return max_clock_mhz_; }
  bool dry_run() const { return dry_; }
  const MeasureSettings& settings() const { return m_; }
  // SM clock (MHz) measured right now by the probe (synchronises the stream).
  double probe_clock_mhz();
  // Power: the sampler's description for the report context (measured or why not), the idle power measured when
  // the harness started (NaN if not), the enforced cap (NaN if unknown).
  json power_context() const;
  double idle_w() const { return idle_w_; }
  double cap_w() const;
  bool power_on() const { return sampler_ != nullptr; }

 private:
  friend class Sample;
  friend class GroupRun;  // one measure_group call's rounds (harness.cpp)
  cudaEvent_t event();  // from a pool, reused across samples
  Sample start_sample();  // a sample on the main stream, the event pool rewound
  void settle(const std::vector<Candidate>& group);
  json power_pass(const Candidate& c);
  std::unique_ptr<PowerSampler> sampler_;
  std::string power_why_;
  json idle_window_;
  double idle_w_ = std::numeric_limits<double>::quiet_NaN();
  MeasureSettings m_;
  bool dry_;
  int groups_ = 0;       // groups measured so far: the id of the next one's SampleSeries
  bool settled_ = false; // measure.settle done
  cudaStream_t stream_ = nullptr;
  void* flush_buf_ = nullptr;
  size_t flush_bytes_ = 0;
  unsigned long long* probe_buf_ = nullptr;  // device: [t0, c0, t1, c1] x 2 probes
  double max_clock_mhz_ = 0;
  std::vector<cudaEvent_t> pool_;
  std::vector<cudaEvent_t> ring_;  // the power pass's queue-depth events
  size_t pool_next_ = 0;
};

}  // namespace dropbench
