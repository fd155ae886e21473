#include "src/core/harness.hpp"
#include "src/core/print.hpp"
#include "src/core/report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/hash.hpp"  // mix64: the per-round order
#include "src/core/interrupt.hpp"
#include "src/core/nvtx.hpp"
#include "kernels/util/util_kernels.cuh"

namespace dropbench {
namespace {

constexpr long long kProbeCycles = 40000;   // ~20 us at 2 GHz: long against %globaltimer's granularity

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void Sample::phase(const std::string& name, const std::function<void()>& fn, cudaStream_t on) {
  NvtxRange range(name);
  if (dry_) return;  // dry run: the range tree only
  cudaStream_t st = on ? on : stream;
  Rec r{name, h_->event(), h_->event()};
  DB_CUDA(cudaEventRecord(r.start, st));
  fn();
  DB_CUDA(cudaEventRecord(r.stop, st));
  recs_.push_back(r);
}

Harness::Harness(const MeasureSettings& m, bool dry_run) : m_(m), dry_(dry_run) {
  if (dry_) return;
  int dev = 0, khz = 0, l2 = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  DB_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  max_clock_mhz_ = khz / 1000.0;
  DB_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Flushing = overwriting a buffer twice the L2 size, so no line of the measured data survives.
  flush_bytes_ = static_cast<size_t>(std::max(l2, 1 << 20)) * 2;
  DB_CUDA(cudaMalloc(&flush_buf_, flush_bytes_));
  DB_CUDA(cudaMalloc(reinterpret_cast<void**>(&probe_buf_), 8 * sizeof(unsigned long long)));
  if (m_.power_time > 0) {
    sampler_ = PowerSampler::open(dev, &power_why_);
    if (sampler_) {
      // Idle power before any work: the static power the energy bound subtracts. 0.6 s spans several of the
      // energy counter's ~100 ms updates.
      const double t0 = PowerSampler::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      const PowerWindow w = sampler_->window(t0 + 0.05, PowerSampler::now());
      idle_window_ = to_json(w);
      idle_window_.erase("timeline");
      if (w.measured) idle_w_ = w.mean_w;
    } else {
      print_stderr("dropbench: power not measured: {}\n", power_why_);
    }
  } else {
    power_why_ = "measure.power_time = 0";
  }
}

json Harness::power_context() const {
  json j = dropbench::power_context(sampler_.get(), power_why_);
  if (sampler_) {
    j["idle"] = idle_window_;
    j["idle_w"] = std::isfinite(idle_w_) ? json(idle_w_) : json(nullptr);
    j["power_time_s"] = m_.power_time;
    j["power_settle_s"] = m_.power_settle;
  }
  return j;
}

double Harness::cap_w() const { return sampler_ ? sampler_->cap_w() : std::numeric_limits<double>::quiet_NaN(); }

// One variant back to back for measure.power_time under the sampler. The launch queue is kept a few iterations
// deep (each waits on the event of the iteration kDepth before it) so the GPU never drains between iterations.
// No L2 flush here even with measure.cold: the figures are the variant's own.
json Harness::power_pass(const Candidate& c) {
  constexpr int64_t kDepth = 4;
  if (ring_.empty()) {
    ring_.resize(kDepth);
    for (cudaEvent_t& e : ring_) DB_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  // Back to back for `seconds`, the queue kept kDepth deep across calls; returns the iterations issued.
  int64_t issued = 0;
  auto run_for = [&](double seconds) {
    const double start = PowerSampler::now();
    int64_t n = 0;
    for (;;) {
      throw_if_interrupted();
      Sample s = start_sample();
      c.body(s);
      cudaEvent_t& slot = ring_[static_cast<size_t>(issued % kDepth)];
      ++issued, ++n;
      if (issued > kDepth) DB_CUDA(cudaEventSynchronize(slot));  // the iteration kDepth back has finished
      DB_CUDA(cudaEventRecord(slot, stream_));
      if (PowerSampler::now() - start >= seconds) break;
    }
    return n;
  };
  if (m_.power_settle > 0) {
    run_for(m_.power_settle);
    DB_CUDA(cudaStreamSynchronize(stream_));  // the window holds only its own iterations
  }
  const double t0 = PowerSampler::now();
  const int64_t iters = run_for(m_.power_time);
  DB_CUDA(cudaStreamSynchronize(stream_));
  const double t1 = PowerSampler::now();
  const PowerWindow w = sampler_->window(t0, t1);
  json j = to_json(w);
  j["iterations"] = iters;
  j["energy_mj_per_iter"] = w.measured && std::isfinite(w.energy_j) ? json(w.energy_j * 1e3 / iters) : json(nullptr);
  j["time_per_iter_s"] = (t1 - t0) / iters;
  if (m_.power_settle > 0) j["settle_s"] = m_.power_settle;
  return j;
}

Harness::~Harness() {
  if (dry_) return;
  // Destructors must not throw: release quietly.
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  for (cudaEvent_t e : ring_) cudaEventDestroy(e);
  cudaFree(flush_buf_);
  cudaFree(probe_buf_);
  if (stream_) cudaStreamDestroy(stream_);
}

Sample Harness::start_sample() {
  pool_next_ = 0;  // the event pool is reused from the start by every sample
  Sample s;
  s.stream = stream_;
  s.h_ = this;
  return s;
}

cudaEvent_t Harness::event() {
  if (pool_next_ == pool_.size()) {
    cudaEvent_t e;
    DB_CUDA(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  return pool_[pool_next_++];
}

double Harness::probe_clock_mhz() {
  launch_clock_probe(probe_buf_, kProbeCycles, stream_);
  unsigned long long h[4];
  DB_CUDA(cudaMemcpyAsync(h, probe_buf_, sizeof h, cudaMemcpyDeviceToHost, stream_));
  DB_CUDA(cudaStreamSynchronize(stream_));
  return probe_mhz(h);
}

PhaseFn no_phases() {
  return [](const std::string&, const std::function<void()>& fn, cudaStream_t) { fn(); };
}

PhaseFn hook(Sample& s) {
  return [&s](const std::string& n, const std::function<void()>& fn, cudaStream_t on) { s.phase(n, fn, on); };
}

Measurement Harness::measure(const std::function<void(Sample&)>& body) { return measure_group({{"", body}})[0]; }

namespace {

// Running mean and variance (Welford): the noise rule is checked after every round for every variant.
struct Running {
  size_t n = 0;
  double mean = 0, m2 = 0, sum = 0;
  void add(double x) {
    ++n;
    sum += x;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  double rel_stdev() const { return n < 2 || mean == 0 ? 0.0 : std::sqrt(m2 / static_cast<double>(n - 1)) / mean; }
};

// One variant's samples while its group is measured.
struct Collect {
  std::vector<double> totals;  // by round, NaN = discarded
  std::vector<double> kept;
  std::vector<std::string> phase_names;
  std::vector<std::vector<double>> phase_times;
  std::vector<double> clocks;       // of the kept samples
  std::vector<double> round_clocks;  // of every sample, by round
  std::vector<size_t> repeat_rounds;
  size_t discarded = 0;
  Running run;  // this repeat's kept samples (the stopping rule)
};

// A deterministic shuffle of 0..k-1 for round r (splitmix64 steps as the random source).
std::vector<size_t> round_order(size_t k, uint64_t r) {
  std::vector<size_t> o(k);
  for (size_t i = 0; i < k; ++i) o[i] = i;
  uint64_t x = mix64(r + 0x2545f4914f6cdd1dull);  // each round's stream seeded by a hash of r: rounds uncorrelated
  for (size_t i = k; i > 1; --i) {
    x += 0x9e3779b97f4a7c15ull;
    std::swap(o[i - 1], o[mix64(x) % i]);
  }
  return o;
}

// One variant's measurement from what its group collected: statistics of the kept samples, the per-round series
// (group_id pairs the variants measured together), the bootstrap interval of the median, the phases.
Measurement finish_measurement(Collect& c, const MeasureSettings& ms, int group_id) {
  Measurement m;
  m.total = compute_stats(c.kept);
  m.total.discarded = c.discarded;
  double csum = 0;
  for (double x : c.clocks) csum += x;
  m.total.mean_clock_mhz = c.clocks.empty() ? 0 : csum / c.clocks.size();
  m.series.group = group_id;
  m.series.x = std::move(c.totals);
  m.series.clock_mhz = std::move(c.round_clocks);
  if (ms.repeats > 1) m.series.repeat_rounds = c.repeat_rounds;
  m.total.median_ci = bootstrap_median(m.series);
  if (ms.keep_series) {
    m.total.series_s = m.series.x;
    m.total.series_clock_mhz = m.series.clock_mhz;
    m.total.series_repeat_rounds = m.series.repeat_rounds;
  }
  for (size_t p = 0; p < c.phase_names.size(); ++p) {
    Stats st = compute_stats(c.phase_times[p]);
    st.mean_clock_mhz = m.total.mean_clock_mhz;
    m.phases.emplace_back(c.phase_names[p], st);
  }
  return m;
}

}  // namespace

// measure.settle: the group's bodies run untimed, round-robin, until the GPU has been busy that long, once per
// harness (before its first measured group), so the first point is not measured on a cold, fast GPU.
void Harness::settle(const std::vector<Candidate>& group) {
  settled_ = true;
  if (m_.settle <= 0) return;
  const double t0 = now_s();
  while (now_s() - t0 < m_.settle) {
    for (const Candidate& c : group) {
      throw_if_interrupted();
      Sample s = start_sample();
      c.body(s);
      DB_CUDA(cudaStreamSynchronize(stream_));
    }
  }
}

// One measure_group call: its variants' samples, the rounds that take them, and the stopping rules.
class GroupRun {
 public:
  GroupRun(Harness& h, const std::vector<Candidate>& group) : h_(h), m_(h.m_), group_(group), col_(group.size()) {}

  // measure.repeats: the whole measurement K times, each repeat with its own warm-up and stopping rule, so what
  // differs between repeats (the state each starts in) is sampled too; repeat_gap idles the GPU between.
  void run() {
    const size_t k = group_.size();
    for (int64_t rep = 0; rep < m_.repeats; ++rep) {
      if (rep > 0 && m_.repeat_gap > 0) idle_gap();
      std::vector<size_t> start(k);
      for (size_t i = 0; i < k; ++i) {
        start[i] = col_[i].totals.size();
        col_[i].run = Running{};
      }
      if (m_.interleave) {
        for (size_t i = 0; i < k; ++i) warm_up(i);
        DB_CUDA(cudaStreamSynchronize(h_.stream_));
        std::vector<size_t> all(k);
        for (size_t i = 0; i < k; ++i) all[i] = i;
        measure_rounds(all, now_s());
      } else {
        // One after another, each with its own warm-up and budget (the older sequential measurement).
        for (size_t i = 0; i < k; ++i) {
          warm_up(i);
          DB_CUDA(cudaStreamSynchronize(h_.stream_));
          measure_rounds({i}, now_s());
        }
      }
      for (size_t i = 0; i < k; ++i) col_[i].repeat_rounds.push_back(col_[i].totals.size() - start[i]);
    }
  }
  Collect& collected(size_t i) { return col_[i]; }

 private:
  struct Timed {
    float total_ms = 0;
    std::vector<std::pair<std::string, float>> phases;
  };

  // One run of the body on the main stream, after the cold-cache flush (measure.cold); timed into *t when given.
  void run_once(const Candidate& c, Timed* t) {
    Sample s = h_.start_sample();
    if (m_.cold)
      DB_CUDA(cudaMemsetAsync(h_.flush_buf_, static_cast<int>(h_.pool_.size() & 0xFF), h_.flush_bytes_, h_.stream_));
    cudaEvent_t start = h_.event(), stop = h_.event();
    DB_CUDA(cudaEventRecord(start, h_.stream_));
    c.body(s);
    DB_CUDA(cudaEventRecord(stop, h_.stream_));
    if (!t) return;
    DB_CUDA(cudaEventSynchronize(stop));
    DB_CUDA(cudaEventElapsedTime(&t->total_ms, start, stop));
    for (const auto& r : s.recs_) {
      float ms = 0;
      DB_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
      t->phases.emplace_back(r.name, ms);
    }
  }

  void warm_up(size_t i) {
    for (int64_t w = 0; w < m_.warmup; ++w) run_once(group_[i], nullptr);
  }

  void idle_gap() {
    DB_CUDA(cudaStreamSynchronize(h_.stream_));
    const double t_gap = now_s();
    while (now_s() - t_gap < m_.repeat_gap) {
      throw_if_interrupted();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // One sample of variant i; its clock is the mean of the probes just before and just after it. A sample below
  // measure.throttle of the maximum clock is discarded (NaN in its round).
  void sample(size_t i) {
    Timed t;
    run_once(group_[i], &t);
    const double clock_after = h_.probe_clock_mhz();
    const double clock = 0.5 * (clock_before_ + clock_after);
    clock_before_ = clock_after;
    Collect& c = col_[i];
    c.round_clocks.push_back(clock);
    if (clock < m_.throttle * h_.max_clock_mhz_) {
      ++c.discarded;
      c.totals.push_back(std::numeric_limits<double>::quiet_NaN());
      return;
    }
    const double total = t.total_ms * 1e-3;
    c.totals.push_back(total);
    c.kept.push_back(total);
    c.run.add(total);
    c.clocks.push_back(clock);
    for (size_t p = 0; p < t.phases.size(); ++p) {
      if (p == c.phase_times.size()) {
        c.phase_names.push_back(t.phases[p].first);
        c.phase_times.emplace_back();
      }
      c.phase_times[p].push_back(t.phases[p].second * 1e-3);
    }
  }

  // Done when it has min_samples, min_time of samples and the noise rule met.
  bool settled(const Collect& c) const {
    return static_cast<int64_t>(c.run.n) >= m_.min_samples && c.run.sum >= m_.min_time &&
           c.run.rel_stdev() <= m_.max_noise;
  }
  bool enough_for_timeout(const Collect& c) const {
    return static_cast<int64_t>(c.run.n) >= std::min<int64_t>(m_.min_samples, 3);
  }

  // Rounds over the members (in a shuffled order each round) until every one is settled, or the group's time
  // budget (what its variants measured one after another would have had) is spent.
  void measure_rounds(const std::vector<size_t>& members, double t0) {
    const double timeout = m_.timeout * static_cast<double>(m_.interleave ? group_.size() : 1);
    clock_before_ = h_.probe_clock_mhz();
    for (int64_t r = 0;; ++r) {
      throw_if_interrupted();
      if (members.size() == 1) {
        sample(members[0]);
      } else {
        for (size_t j : round_order(members.size(), static_cast<uint64_t>(r))) sample(members[j]);
      }
      if (r + 1 >= m_.max_samples) break;
      bool all = true, min_ok = true;
      for (size_t i : members) {
        all = all && settled(col_[i]);
        min_ok = min_ok && enough_for_timeout(col_[i]);
      }
      if (all) break;
      const double wall = now_s() - t0;
      if (wall >= timeout && min_ok) break;
      if (wall >= 4 * timeout) break;  // clocks never recovered: report what there is
    }
  }

  Harness& h_;
  const MeasureSettings& m_;
  const std::vector<Candidate>& group_;
  std::vector<Collect> col_;
  double clock_before_ = 0;
};

std::vector<Measurement> Harness::measure_group(const std::vector<Candidate>& group) {
  std::vector<Measurement> out(group.size());
  const double t_begin = now_s();
  if (dry_) {
    for (const Candidate& c : group) {
      Sample s;
      s.dry_ = true;
      c.body(s);
    }
    return out;
  }
  if (!settled_) settle(group);
  GroupRun g(*this, group);
  g.run();
  const size_t k = group.size();
  for (size_t i = 0; i < k; ++i) {
    // Sequential mode: nothing pairs the variants, each is its own group.
    out[i] = finish_measurement(g.collected(i), m_, m_.interleave ? groups_ : groups_ + static_cast<int>(i) + 1);
    out[i].seconds_spent = now_s() - t_begin;
  }
  if (sampler_)
    for (size_t i = 0; i < k; ++i) out[i].power = power_pass(group[i]);
  groups_ += m_.interleave ? 1 : static_cast<int>(k) + 1;
  return out;
}

}  // namespace dropbench
