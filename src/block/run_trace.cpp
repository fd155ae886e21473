#include "src/block/run_trace.hpp"
#include "src/core/print.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/common/check.hpp"

namespace dropbench {

void TraceState::write() const {
  std::vector<TraceEvent> ev = labels;
  for (const auto& [k, name] : threads) {
    TraceEvent m;
    m.name = "thread_name";
    m.ph = "M";
    m.pid = k.first;
    m.tid = k.second;
    m.args = {{"name", name}};
    ev.push_back(std::move(m));
  }
  write_chrome_trace(path, records, ev);
}

TraceState open_trace(const std::string& path, bool dry) {
  TraceState t;
  if (path.empty()) return t;
  try {
    write_chrome_trace(path, {});
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  t.path = path;
  t.on = !dry;
  if (dry) print_stderr("dropbench: --trace: nothing to trace in a dry run (no GPU work)\n");
  return t;
}

namespace {

// The label event of one pipeline's window, and the trace_* fields of its variant.
void label_window(PointScope& ps, TraceState& trace, const json& axes, const std::string& name, const TraceWindow& win,
                  const std::vector<TraceRecord>& recs, uint32_t sa, int device) {
  size_t kernels = 0;
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  uint32_t dev = static_cast<uint32_t>(device);
  for (const TraceRecord& r : recs)
    if (r.start_ns >= win.begin_ns && r.start_ns < win.end_ns) {
      if (r.kind == TraceRecord::Kind::Kernel) ++kernels;
      first = std::min(first, r.start_ns);
      last = std::max(last, r.end_ns);
      dev = r.device;
      trace.threads.emplace(std::make_pair(r.device, r.stream),
                            r.stream == sa ? fmt::format("stream {} (A: main)", r.stream)
                                           : fmt::format("stream {} (B: side)", r.stream));
    }
  const bool any = first <= last;  // no records: no label (and a span of 0)
  if (!any) first = last = 0;
  TraceEvent ev;
  ev.name = name + " @ " + ps.label;
  ev.ts_ns = first;
  ev.dur_ns = last - first;
  ev.pid = dev;
  ev.tid = TraceState::kLabelTid;
  ev.args = {{"point", ps.label}, {"pipeline", name}, {"axes", axes}, {"kernels", kernels}};
  if (any) trace.labels.push_back(ev);
  if (any && name == pipeline_name(ps.plan.run.front())) {
    TraceEvent mark = ev;
    mark.name = "point " + ps.label;
    mark.ph = "i";
    mark.dur_ns = 0;
    mark.args = {{"point", ps.label}, {"axes", axes}};
    trace.labels.push_back(mark);
  }
  trace.threads.emplace(std::make_pair(dev, TraceState::kLabelTid), "dropbench: pipeline @ point");
  for (VariantResult& v : ps.pr.variants) {
    if (v.name != name) continue;
    v.extra["trace_kernels"] = kernels;
    v.extra["trace_span_us"] = static_cast<double>(last - first) / 1e3;
    if ((name == "overlap" || name == "chunked") && sa != kAnyOtherStream) {
      const TraceOverlap ov = overlap_from_records(recs, sa, kAnyOtherStream, win);
      v.extra["trace_overlap_us"] = ov.both_ns / 1e3;
      v.extra["trace_overlap_fraction"] = ov.fraction;
      v.extra["trace_busy_a_us"] = ov.busy_a_ns / 1e3;
      v.extra["trace_busy_b_us"] = ov.busy_b_ns / 1e3;
    }
  }
}

}  // namespace

void trace_point(PointScope& ps, TraceState& trace, const json& axes, const OverlapChoice& ovl, int device) {
  if (!trace.on) return;
  KernelTracer tracer;
  std::string why;
  DB_CUDA(cudaDeviceSynchronize());
  if (!tracer.start(&why)) {
    print_stderr("dropbench: WARNING: --trace: CUPTI is unavailable ({}); no kernel trace\n", why);
    trace.on = false;
    return;
  }
  const cudaStream_t main = ps.harness.stream();
  const uint32_t sa = KernelTracer::stream_id(main);
  // Pipeline i's kernels start after pipeline i-1 was synchronised: its window runs from that sync to its own
  // (the first from the start, the last to the end), robust to a small skew of the host timestamps.
  std::vector<std::pair<std::string, TraceWindow>> windows;
  for (Pipeline p : ps.plan.run) {
    TraceWindow win;
    if (!windows.empty()) win.begin_ns = windows.back().second.end_ns;
    ps.runner.run(p, main, no_phases(), ovl.rc);
    DB_CUDA(cudaStreamSynchronize(main));  // the pipelines join their side streams back to main
    win.end_ns = KernelTracer::now_ns();
    windows.emplace_back(pipeline_name(p), win);
  }
  if (!windows.empty()) windows.back().second.end_ns = std::numeric_limits<uint64_t>::max();
  std::vector<TraceRecord> recs = tracer.stop_and_collect();
  DB_CUDA(cudaGetLastError());
  for (const auto& [name, win] : windows) label_window(ps, trace, axes, name, win, recs, sa, device);
  trace.records.insert(trace.records.end(), std::make_move_iterator(recs.begin()), std::make_move_iterator(recs.end()));
  trace.write();  // after every point: an interrupted run keeps a trace of what finished
}

}  // namespace dropbench
