#include "src/core/sweep_session.hpp"
#include "src/core/print.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/compare.hpp"
#include "src/core/input.hpp"
#include "src/core/interrupt.hpp"
#include "src/core/sweep_util.hpp"

namespace dropbench {

void RunContext::print_table(const Table& t) const {
  errno = 0;
  std::cout << render(t, opts.format) << std::flush;
  if (std::cout.good() && std::fflush(stdout) == 0) return;
  const int err = errno;
  throw OutputError(fmt::format("stdout: cannot write the table ({}); {}", err ? std::strerror(err) : "write error",
                                opts.output.empty() ? std::string("no report was written (no -o)")
                                                    : "the report " + opts.output + " is written"));
}

namespace {

SweepOutcome g_outcome;

json context_with_clock(RunContext& ctx, Harness& h) {
  if (!h.dry_run()) {
    ctx.context["clocks"]["sm_mhz_at_start"] = h.probe_clock_mhz();
    ctx.context["power"] = h.power_context();
  }
  return ctx.context;
}

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGPIPE ? "SIGPIPE" : "a signal";
}

// DROPBENCH_TEST_INTERRUPT_AFTER=N, N:TERM or N:PIPE: the interrupt a signal would raise, after N measured points
// (N:KILL: the process SIGKILLs itself there, as a node failure would end it)
// (tests interrupt a dry run at a known place; a real signal's timing is not deterministic).
void parse_test_hook(std::optional<size_t>& after, int& sig) {
  const char* v = std::getenv("DROPBENCH_TEST_INTERRUPT_AFTER");
  if (!v || !*v) return;
  const std::string s = v;
  const size_t colon = s.find(':');
  try {
    after = static_cast<size_t>(std::stoull(s.substr(0, colon)));
  } catch (const std::exception&) {
    throw UsageError(fmt::format("DROPBENCH_TEST_INTERRUPT_AFTER: '{}' is not N, N:TERM, N:PIPE or N:KILL (allowed: a point count)", s));
  }
  const std::string name = colon != std::string::npos ? s.substr(colon + 1) : std::string();
  sig = name == "TERM" ? SIGTERM : name == "PIPE" ? SIGPIPE : name == "KILL" ? SIGKILL : SIGINT;
}

}  // namespace

const SweepOutcome& last_sweep_outcome() { return g_outcome; }

SweepSession::SweepSession(RunContext& ctx, const std::string& command, const std::vector<SweepPoint>& points)
    : harness(ctx.cfg.measure, ctx.opts.dry_run),
      report(command, context_with_clock(ctx, harness), to_json(ctx.cfg)),
      ctx_(ctx),
      dry_(ctx.opts.dry_run),
      root_(command),
      shard_(ctx.opts.shard.value_or(Shard{})) {
  install_interrupt_handlers();
  if (!dry_ && ctx.context.value("tree", "") == "dirty")
    print_stderr("dropbench: WARNING: built from a modified tree (git_sha {}): this report cannot be rebuilt "
               "from a commit (context.tree = \"dirty\")\n", ctx.context.value("git_sha", ""));
  parse_test_hook(test_interrupt_after_, test_interrupt_signal_);
  report.set_sweep(points.size(), ctx.opts.shard);
  report.sweep().incomplete_reason = {
      {"kind", "running"},
      {"message", "written while the sweep ran; a process killed without warning (SIGKILL, node failure) leaves it so"}};
  if (!ctx.resume_doc.is_null()) adopt_resumed(points);
  for (const SweepPoint& p : points)
    if (shard_.holds(p.index) && !kept_.count(p.index)) ++to_measure_;
  progress_ = std::make_unique<Progress>(to_measure_, ctx.opts.quiet);
  g_outcome = SweepOutcome{};
  g_outcome.started = true;
  g_outcome.to_measure = to_measure_;
  g_outcome.total_points = points.size();
  report.set_output(ctx.opts.output);
  // The first point ended writes the report (then the journal takes the next ones): a run stopped before it
  // leaves what was at -o as it was.
  report.use_journal();
}

void SweepSession::adopt_resumed(const std::vector<SweepPoint>& points) {
  const json& old = ctx_.resume_doc;
  const std::string& path = ctx_.opts.resume;
  auto index_of = [&](const json& entry, const char* what) -> size_t {
    const json axes = entry.value("axes", json::object());
    const auto idx = entry.find("index");
    if (idx != entry.end() && idx->is_number_unsigned()) {
      const size_t i = idx->get<size_t>();
      if (i >= points.size())
        throw UsageError(fmt::format("--resume: {}: {} index {} is outside this sweep (0..{})", path, what, i,
                                     points.size() - 1));
      if (compare::canonical(axes) != compare::canonical(points[i].axes))
        throw UsageError(fmt::format("--resume: {}: {} {} is {{{}}}, this sweep's point {} is {{{}}} (allowed: a report "
                                     "of this sweep)",
                                     path, what, i, axes_label(axes), i, axes_label(points[i].axes)));
      return i;
    }
    // Skipped entries written before they carried an index: found by their axes.
    for (const SweepPoint& p : points)
      if (compare::canonical(axes) == compare::canonical(p.axes)) return p.index;
    throw UsageError(fmt::format("--resume: {}: {} {{{}}} is not a point of this sweep", path, what, axes_label(axes)));
  };
  size_t n_points = 0, n_skipped = 0;
  for (const json& p : old.at("points")) {
    const size_t i = index_of(p, "point");
    if (!shard_.holds(i) || !kept_.insert(i).second) continue;
    try {
      report.adopt_point(p);
    } catch (const json::exception& e) {
      throw UsageError(fmt::format("--resume: {}: point {} is malformed ({})", path, i, json_error_text(e)));
    }
    ++n_points;
  }
  for (const json& s : old.at("skipped")) {
    const size_t i = index_of(s, "skipped point");
    if (!shard_.holds(i) || !kept_.insert(i).second) continue;
    json entry = s;
    entry["index"] = i;
    report.adopt_skipped(entry);
    ++n_skipped;
  }
  json from = json::object();
  from["path"] = path;
  from["date_utc"] = old.at("context").value("date_utc", json(nullptr));
  from["points_kept"] = n_points;
  from["skipped_kept"] = n_skipped;
  report.sweep().resumed_from = std::move(from);
}

bool SweepSession::begin(const SweepPoint& pt, const std::string& label) {
  if (!shard_.holds(pt.index) || kept_.count(pt.index)) return false;
  in_flight_ = pt.index;
  const std::string warn = dropout_warning(pt.workload.dropout_p, static_cast<int>(pt.workload.threshold_bits));
  if (!warn.empty() && warned_.insert(warn).second) print_stderr("dropbench: WARNING: {}\n", warn);
  g_outcome.stopped_at = pt.index;
  if (test_interrupt_after_ && measured_ >= *test_interrupt_after_) {
    if (test_interrupt_signal_ == SIGKILL) std::raise(SIGKILL);  // a process killed without warning
    request_interrupt(test_interrupt_signal_);
  }
  throw_if_interrupted();
  report.set_current_index(pt.index);
  progress_->step(measured_, label);
  ++measured_;
  return true;
}

void SweepSession::finish(json summary, const Table& table) {
  progress_->done();
  if (!dry_) summary["sm_mhz_at_end"] = harness.probe_clock_mhz();
  report.sweep().complete = true;
  report.sweep().incomplete_reason = nullptr;
  report.set_summary(std::move(summary));
  finished_ = true;
  g_outcome.measured = measured_;
  g_outcome.stopped_at.reset();
  g_outcome.in_report = report.points().size() + report.skipped().size();
  ctx_.print_table(table);
  for (const SkippedPoint& s : report.skipped()) print_stderr("skipped {}: {}\n", axes_label(s.axes), s.reason);
}

SweepSession::~SweepSession() {
  if (finished_) return;
  // Unwinding (Interrupted, a CUDA error, ...): the point in flight was never added, so the report holds
  // exactly the finished points; say why it ends early.
  g_outcome.in_report = report.points().size() + report.skipped().size();
  g_outcome.measured = g_outcome.in_report - kept_.size();
  bool recorded = false;
  for (const PointResult& p : report.points()) recorded = recorded || (in_flight_ && p.index == *in_flight_);
  for (const SkippedPoint& s : report.skipped()) recorded = recorded || (in_flight_ && s.index == *in_flight_);
  if (recorded) in_flight_.reset();  // it stopped after its last point, e.g. in the summary
  g_outcome.stopped_at = in_flight_;
  const int sig = interrupt_signal();
  json why = json::object();
  why["kind"] = sig ? "signal" : "error";
  if (sig) why["signal"] = signal_name(sig);
  if (in_flight_) why["point_index"] = *in_flight_;
  const std::string where = in_flight_ ? fmt::format(" at point {} (not kept)", *in_flight_) : std::string();
  why["message"] = sig ? fmt::format("stopped by {}{}", signal_name(sig), where)
                       : fmt::format("stopped by an error{} (see the command's message)", where);
  report.sweep().complete = false;
  report.sweep().incomplete_reason = std::move(why);
  if (!report.written()) return;  // nothing of this run to keep: -o stays as it was
  try {
    report.write();
    g_outcome.wrote_report = true;
  } catch (const std::exception& e) {
    print_stderr("dropbench: could not write the incomplete report: {}\n", e.what());
  }
}

VariantResult variant_of(const std::string& name, const Measurement& m) {
  VariantResult v;
  v.name = name;
  v.stats = m.total;
  v.phases = m.phases;
  v.power = m.power;
  return v;
}

void set_figure(json& derived, const std::string& key, const Interval& iv) {
  derived[key] = iv.value;
  iv.write(derived, key);
}

}  // namespace dropbench
