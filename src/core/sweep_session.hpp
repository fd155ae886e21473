// What every sweeping command sets up and tears down the same way: the harness, the clock at start and
// end, the report (context + resolved config, written after each point), the command's root NVTX range,
// the progress line, and at the end the table on stdout and the skipped points on stderr.
// It also decides which points this process measures (--shard i/N keeps index % N == i; --resume
// keeps the old report's points and skipped points), installs the SIGINT/SIGTERM handlers, and when the sweep
// ends without finish() (Interrupted, or any error) writes the report as incomplete with the reason.
#pragma once
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/core/run_context.hpp"
#include "src/core/harness.hpp"
#include "src/core/nvtx.hpp"
#include "src/core/report.hpp"

namespace dropbench {

// How the last SweepSession of this process ended; cli.cpp reads it to print the interrupt line.
struct SweepOutcome {
  bool started = false;
  size_t measured = 0;       // points measured (or skipped) by this process
  size_t to_measure = 0;     // points this process had to measure
  size_t in_report = 0;      // points + skipped entries in the report it wrote
  size_t total_points = 0;   // the whole sweep
  std::optional<size_t> stopped_at;  // index of the point in flight (or next) when it stopped early
  bool wrote_report = false;  // the incomplete report was written (false: -o left as it was)
};
const SweepOutcome& last_sweep_outcome();

class SweepSession {
 public:
  // `points`: the whole sweep, as expand_sweep() returns it. Throws UsageError when a --resume report's
  // points do not match this sweep's (index and axes).
  SweepSession(RunContext& ctx, const std::string& command, const std::vector<SweepPoint>& points);
  ~SweepSession();
  SweepSession(const SweepSession&) = delete;
  SweepSession& operator=(const SweepSession&) = delete;
  bool dry() const { return dry_; }
  // Call before measuring point `pt`. False: not this process's point (another shard's, or kept from the
  // --resume report): skip it. Throws Interrupted when SIGINT/SIGTERM arrived (or the test hook
  // DROPBENCH_TEST_INTERRUPT_AFTER=N[:TERM] fires after N measured points).
  bool begin(const SweepPoint& pt, const std::string& label);
  // Adds the end clock to `summary`, marks the report complete, stores it, prints `table` and the skipped points.
  void finish(json summary, const Table& table);

  Harness harness;
  Report report;

 private:
  void adopt_resumed(const std::vector<SweepPoint>& points);
  RunContext& ctx_;
  bool dry_;
  NvtxRange root_;
  Shard shard_;
  std::set<size_t> kept_;  // indices taken from the --resume report
  std::set<std::string> warned_;  // warnings already printed (once per sweep)
  size_t to_measure_ = 0, measured_ = 0;
  std::optional<size_t> in_flight_;
  std::optional<size_t> test_interrupt_after_;
  int test_interrupt_signal_ = 0;
  bool finished_ = false;
  std::unique_ptr<Progress> progress_;
};

// A variant's result with its measurement: the whole variant's and each phase's statistics, and the power pass.
VariantResult variant_of(const std::string& name, const Measurement& m);
// derived[key] = the figure's value, then Interval::write: key_ci (null when it has none), with repeats key_ci_within
// and key_repeats.
void set_figure(json& derived, const std::string& key, const Interval& iv);

}  // namespace dropbench
