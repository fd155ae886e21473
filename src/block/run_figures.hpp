// The figures `dropbench run` derives from one point's measurements (speedups, dropout's exposed time per
// pipeline, the winner and why, mask memory, hidden fractions) and from the whole sweep (Philox R/R7 ratios
// inside every pipeline, winners, the co-residency target).
#pragma once
#include <map>
#include <string>

#include "src/block/mechanisms.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/block/run_point.hpp"
#include "src/core/report.hpp"

namespace dropbench {

struct PointTimes {
  const AloneTimes& alone;
  const std::map<std::string, double>& pipelines;  // median seconds by pipeline name
  const MechanismFigures& mechs;
  const OverlapChoice& ovl;
  const BlockMemory& mem;
  const SampleBook& book;  // the point's samples: figures of variants in one group get paired intervals
};

// Sets x_baseline on the pipeline variants and fills pr.derived. Returns the co-residency target row of this
// point (E 8192, SQ 8192, Philox-7 with a measured mechanism), or null.
json point_figures(PointResult& pr, const Workload& w, const PointTimes& t);

// Adds to a point's derived `d` the pipelines' back-to-back times from their power passes (t_sustained),
// sustained_winner (+ sustained_winner_differs against d["winner"]) and the speedups of point_figures with suffix
// _sustained. Nothing when no pipeline variant carries power.time_per_iter_s.
void sustained_figures(const std::vector<VariantResult>& variants, const std::map<std::string, double>& pipelines,
                       json& d);

// A variant's energy from its power pass (measure.power_time): derived energy_mj (per iteration), mean_w,
// capped_share, edp_js. Returns energy_mj, NaN (nothing written) when the pass has no energy.
double put_variant_energy(VariantResult& v);

struct RunTotals {
  RunCounters counters;
  json target = json::array();  // the co-residency target rows
  bool traced = false;
  std::string trace_path;
  size_t trace_records = 0;
};
json run_summary(const Report& report, const RunTotals& totals);

}  // namespace dropbench
