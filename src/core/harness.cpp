#include "src/core/harness.hpp"

#include <algorithm>
#include <chrono>

#include "kernels/common/check.hpp"
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
}

Harness::~Harness() {
  if (dry_) return;
  // Destructors must not throw: release quietly.
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  cudaFree(flush_buf_);
  cudaFree(probe_buf_);
  if (stream_) cudaStreamDestroy(stream_);
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

Measurement Harness::measure(const std::function<void(Sample&)>& body) {
  Measurement out;
  const double t_begin = now_s();
  if (dry_) {
    Sample s;
    s.dry_ = true;
    body(s);
    return out;
  }
  auto run_once = [&](bool timed, std::vector<std::pair<std::string, float>>* phase_ms, float* total_ms) {
    pool_next_ = 0;
    Sample s;
    s.stream = stream_;
    s.h_ = this;
    if (m_.cold) DB_CUDA(cudaMemsetAsync(flush_buf_, static_cast<int>(pool_.size() & 0xFF), flush_bytes_, stream_));
    cudaEvent_t start = event(), stop = event();
    DB_CUDA(cudaEventRecord(start, stream_));
    body(s);
    DB_CUDA(cudaEventRecord(stop, stream_));
    if (!timed) return;
    DB_CUDA(cudaEventSynchronize(stop));
    DB_CUDA(cudaEventElapsedTime(total_ms, start, stop));
    for (const auto& r : s.recs_) {
      float ms = 0;
      DB_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
      phase_ms->emplace_back(r.name, ms);
    }
  };

  for (int64_t i = 0; i < m_.warmup; ++i) run_once(false, nullptr, nullptr);
  DB_CUDA(cudaStreamSynchronize(stream_));

  std::vector<double> totals;
  std::vector<std::string> phase_names;
  std::vector<std::vector<double>> phase_times;
  std::vector<double> clocks;
  size_t discarded = 0;
  double sampled_time = 0;
  double clock_before = probe_clock_mhz();
  for (;;) {
    std::vector<std::pair<std::string, float>> ph;
    float total_ms = 0;
    run_once(true, &ph, &total_ms);
    const double clock_after = probe_clock_mhz();
    const double clock = 0.5 * (clock_before + clock_after);
    clock_before = clock_after;
    if (clock < m_.throttle * max_clock_mhz_) {
      ++discarded;
    } else {
      totals.push_back(total_ms * 1e-3);
      clocks.push_back(clock);
      sampled_time += total_ms * 1e-3;
      for (size_t k = 0; k < ph.size(); ++k) {
        if (k == phase_times.size()) {
          phase_names.push_back(ph[k].first);
          phase_times.emplace_back();
        }
        phase_times[k].push_back(ph[k].second * 1e-3);
      }
    }
    const size_t n = totals.size();
    const double wall = now_s() - t_begin;
    if (static_cast<int64_t>(n) >= m_.max_samples) break;
    if (static_cast<int64_t>(n) >= m_.min_samples && sampled_time >= m_.min_time &&
        relative_stdev(totals) <= m_.max_noise)
      break;
    // The time limit ends a measurement once it has min_samples (or 3, if min_samples cannot fit).
    if (wall >= m_.timeout && static_cast<int64_t>(n) >= std::min<int64_t>(m_.min_samples, 3)) break;
    if (wall >= 4 * m_.timeout) break;  // clocks never recovered: report what there is
  }
  out.total = compute_stats(totals);
  out.total.discarded = discarded;
  double csum = 0;
  for (double c : clocks) csum += c;
  out.total.mean_clock_mhz = clocks.empty() ? 0 : csum / clocks.size();
  for (size_t k = 0; k < phase_names.size(); ++k) {
    Stats st = compute_stats(phase_times[k]);
    st.mean_clock_mhz = out.total.mean_clock_mhz;
    out.phases.emplace_back(phase_names[k], st);
  }
  out.seconds_spent = now_s() - t_begin;
  return out;
}

}  // namespace dropbench
