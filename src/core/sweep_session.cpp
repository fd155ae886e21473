#include "src/core/sweep_session.hpp"

#include <iostream>

#include <fmt/format.h>

#include "src/core/sweep_util.hpp"

namespace dropbench {

void RunContext::print_table(const Table& t) const { std::cout << render(t, opts.format) << std::flush; }

namespace {
json context_with_clock(RunContext& ctx, Harness& h) {
  if (!h.dry_run()) ctx.context["clocks"]["sm_mhz_at_start"] = h.probe_clock_mhz();
  return ctx.context;
}
}  // namespace

SweepSession::SweepSession(RunContext& ctx, const std::string& command, size_t points)
    : harness(ctx.cfg.measure, ctx.opts.dry_run),
      report(command, context_with_clock(ctx, harness), to_json(ctx.cfg)),
      ctx_(ctx),
      dry_(ctx.opts.dry_run),
      root_(command),
      progress_(points, ctx.opts.quiet) {
  report.set_output(ctx.opts.output);
}

void SweepSession::finish(json summary, const Table& table) {
  progress_.done();
  if (!dry_) summary["sm_mhz_at_end"] = harness.probe_clock_mhz();
  report.set_summary(std::move(summary));
  ctx_.print_table(table);
  for (const SkippedPoint& s : report.skipped()) fmt::print(stderr, "skipped {}: {}\n", axes_label(s.axes), s.reason);
}

}  // namespace dropbench
