// What every sweeping command sets up and tears down the same way: the harness, the clock at start and
// end, the report (context + resolved config, written after each point), the command's root NVTX range,
// the progress line, and at the end the table on stdout and the skipped points on stderr.
#pragma once
#include <memory>
#include <string>

#include "src/core/run_context.hpp"
#include "src/core/harness.hpp"
#include "src/core/nvtx.hpp"
#include "src/core/report.hpp"

namespace dropbench {

class SweepSession {
 public:
  SweepSession(RunContext& ctx, const std::string& command, size_t points);
  bool dry() const { return dry_; }
  // Call before measuring point `index`.
  void step(size_t index, const std::string& label) { progress_.step(index, label); }
  // Adds the end clock to `summary`, stores it, prints `table` and the skipped points.
  void finish(json summary, const Table& table);

  Harness harness;
  Report report;

 private:
  RunContext& ctx_;
  bool dry_;
  NvtxRange root_;
  Progress progress_;
};

}  // namespace dropbench
