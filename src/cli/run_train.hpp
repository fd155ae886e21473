// `dropbench run` at a point of pass train (the block's training step): the strategies of the pipeline table that
// apply to it, the plan (buffers, each strategy's mask memory per layer and per network, the model's step and phase
// times, the verdict per mask budget), and either a dry run's walk or the measurement on the GPU
// (src/block/train_point.hpp). cmd_run.cpp calls these; the plan arithmetic is src/block/pipeline_plan.hpp, the
// model's src/model/model.hpp (predict_train) and recommend.hpp (budget_ladder).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "src/block/pipeline_plan.hpp"
#include "src/block/run_point.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/report.hpp"
#include "src/core/sweep_session.hpp"

namespace dropbench {

// The pipelines wanted at a point of `pass`: `wanted` (from --pipelines or sweep.pipeline, nullopt = none given)
// filtered to the pass, else every pipeline of the pass.
std::vector<Pipeline> wanted_for_pass(const std::optional<std::vector<Pipeline>>& wanted, Pass pass);

// Before anything runs: every point's pass is one of run's (fwd, train) and every --pipelines name applies to a pass
// the sweep has. Throws UsageError naming the field or option and what is allowed.
void check_run_passes(const std::vector<SweepPoint>& points, const std::optional<std::vector<Pipeline>>& wanted);

// What every point of pass train shares.
struct TrainPointContext {
  SweepSession& session;
  const RunOptions& opts;
  const PlanDevice& dev;              // a dry run's device (the memory it plans against)
  bool dry;
  size_t mask_budget;                 // bytes (--mask-budget; 0 = none)
  const std::vector<Pipeline>& wanted;  // the strategies wanted (pass train)
  const Estimator& model;
  size_t headroom;                    // free memory kept beside the buffers
  RunCounters& counters;              // bitwise mismatches (exit 1), unmeasured variants
};

// One point of pass train into the report: skipped (bad workload, nothing fits), or planned and then walked (dry)
// or measured.
void train_point(const TrainPointContext& c, const SweepPoint& pt, const std::string& label);

// The measured verdict of a point of pass train, from its strategies' network mask memory
// (train.strategies.<name>.network_mask_bytes) and measured figures (train.measured: t, and where the power pass
// ran t_sustained and energy_mj): for each cost -- "time" (sampled median step), "sustained" (the power pass's
// back-to-back step) and "energy" (J per step) -- the ladder of the cheapest strategy at every budget of network mask
// memory (as the model's verdict), its text and the pick within mask_budget (bytes; 0 = none). Each step of the
// time ladder also names the runner-up (the fastest other strategy that fits the same budget) and the margin
// t(runner-up) / t(winner) with its paired 95 % interval from `book`. A cost no strategy has is left out.
json measured_train_verdict(const json& train, const SampleBook& book, size_t mask_budget);

// The model's step for a measured strategy with every kernel at the step's measured SM clock (v.stats.mean_clock_mhz,
// the harness's probe between samples): derived.model_step_clock_mhz, model_step_clock_us and x_model_step_clock =
// measured / that model. Nothing when the variant has no clock or median, or the model does not compose it.
void put_train_model_at_step_clock(VariantResult& v, const Estimator& model, const Workload& w);

// The dry run's training-step points as text: per point and strategy the mask memory (block, held per layer,
// network) and the model's step, forward and backward times, then the point's verdict per mask budget (the model's,
// and where the point was measured the measured one). Empty when the report has no train point.
std::string train_plan_text(const Report& r);

}  // namespace dropbench
