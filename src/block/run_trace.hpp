// `run --trace FILE`: after a point's measurements, every pipeline once more (untimed) under CUPTI; the kernel
// records of all points so far, a label row naming pipeline and point, written as Chrome-trace JSON after each
// point (an interrupted run keeps a trace of what finished).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/block/run_point.hpp"
#include "src/core/trace.hpp"

namespace dropbench {

struct TraceState {
  bool on = false;
  std::string path;
  std::vector<TraceRecord> records;
  std::vector<TraceEvent> labels;
  std::map<std::pair<uint32_t, uint32_t>, std::string> threads;  // (device, tid) -> row name
  static constexpr uint32_t kLabelTid = 1u << 30;                // the row of the point/pipeline labels
  void write() const;
};

// Opens the trace (an empty, valid timeline until the first point is traced): UsageError when `path` cannot be
// written. Off in a dry run (nothing to trace; says so on stderr).
TraceState open_trace(const std::string& path, bool dry);

// Traces one point's pipelines and adds trace_* fields to their variants in ps.pr. Turns tracing off (with a
// warning) when CUPTI is unavailable.
void trace_point(PointScope& ps, TraceState& trace, const json& axes, const OverlapChoice& ovl, int device);

}  // namespace dropbench
