// `dropbench run` at a point of pass train (the block's training step): the strategies of the pipeline table
// that apply to it, the dry run's plan (buffers, each strategy's mask memory per layer and per network, the
// model's step and phase times, the verdict per mask budget), and the refusal of a measuring run while this
// build has no attention backward to run. cmd_run.cpp calls these; the plan arithmetic is
// src/block/pipeline_plan.hpp, the model's src/model/model.hpp (predict_train) and recommend.hpp (budget_ladder).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "src/block/pipeline_plan.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/report.hpp"
#include "src/core/sweep_session.hpp"

namespace dropbench {

// The pipelines wanted at a point of `pass`: `wanted` (from --pipelines or sweep.pipeline, nullopt = none given)
// filtered to the pass, else every pipeline of the pass.
std::vector<Pipeline> wanted_for_pass(const std::optional<std::vector<Pipeline>>& wanted, Pass pass);

// Before anything runs: every point's pass is one of run's (fwd, train), every --pipelines name applies to a pass
// the sweep has, and a measuring run has no train point (the training step's measurement needs the attention
// backward, which this build lacks).
// Throws UsageError naming the option or field and what is allowed.
void check_run_passes(const std::vector<SweepPoint>& points, const std::optional<std::vector<Pipeline>>& wanted,
                      bool dry_run);

// A dry run's point of pass train: the plan (or a skipped entry) into the report.
void dry_train_point(SweepSession& session, const SweepPoint& pt, const BlockMemory& mem, const PlanDevice& dev,
                     size_t mask_budget, const std::vector<Pipeline>& wanted, const Estimator& model, size_t headroom);

// The dry run's training-step points as text: per point and strategy the mask memory (block, held per layer,
// network) and the model's step, forward and backward times, then the point's verdict per mask budget.
// Empty when the report has no train point.
std::string train_plan_text(const Report& r);

}  // namespace dropbench
