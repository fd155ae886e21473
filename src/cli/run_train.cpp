#include "src/cli/run_train.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/block/run_point.hpp"
#include "src/core/nvtx.hpp"
#include "src/core/sweep_util.hpp"
#include "src/model/recommend.hpp"

namespace dropbench {

namespace {

const char* mask_life_name(MaskLife l) {
  switch (l) {
    case MaskLife::None: return "none";
    case MaskLife::HeldAcrossStep: return "held from forward to backward";
    case MaskLife::WithinPhase: return "within each phase (regenerated for the backward)";
  }
  return "?";
}

json phases_json(const std::vector<model::PhaseTime>& ph) {
  json a = json::array();
  for (const model::PhaseTime& p : ph) a.push_back({{"phase", p.name}, {"model_us", p.seconds * 1e6}, {"limiter", p.limiter}});
  return a;
}

}  // namespace

std::vector<Pipeline> wanted_for_pass(const std::optional<std::vector<Pipeline>>& wanted, Pass pass) {
  if (!wanted) return pass_pipelines(pass);
  std::vector<Pipeline> out;
  for (Pipeline p : *wanted)
    if (applies_to(p, pass)) out.push_back(p);
  return out;
}

void check_run_passes(const std::vector<SweepPoint>& points, const std::optional<std::vector<Pipeline>>& wanted,
                      bool dry_run) {
  check_command_passes(points, "run");
  bool fwd = false, train = false;
  for (const SweepPoint& pt : points) (parse_pass(pt.workload.pass) == Pass::Train ? train : fwd) = true;
  if (wanted)
    for (Pipeline p : *wanted)
      if (!(fwd && applies_to(p, Pass::Fwd)) && !(train && applies_to(p, Pass::Train)))
        throw UsageError(fmt::format("--pipelines: '{}' is not a pipeline of the sweep's pass{} (allowed: {}{}{})",
                                     pipeline_name(p), fwd && train ? "es" : fwd ? " fwd" : " train",
                                     fwd ? "pass fwd: " + pass_pipeline_names_text(Pass::Fwd) : "",
                                     fwd && train ? "; " : "",
                                     train ? "pass train: " + pass_pipeline_names_text(Pass::Train) : ""));
  if (train && !dry_run)
    throw UsageError("workload.pass: train is planned and modelled only: measuring the training step needs the "
                     "attention backward and the backward GEMMs (transposed operands, e5m2 gradients) in run's "
                     "pipelines, which this build does not have (allowed: fwd; or train with --dry-run)");
}

void dry_train_point(SweepSession& session, const SweepPoint& pt, const BlockMemory& mem, const PlanDevice& dev,
                     size_t mask_budget, const std::vector<Pipeline>& wanted, const Estimator& model, size_t headroom) {
  const Workload& w = pt.workload;
  const TrainMemory tm = train_memory(w);
  if (wanted.empty()) {
    session.report.add_skipped({pt.axes, "--pipelines lists no strategy of pass train (allowed: " +
                                             pass_pipeline_names_text(Pass::Train) + ")"});
    return;
  }
  const PipelinePlan plan = plan_train(mem, tm, w.layers, dev.bytes, mask_budget, wanted, headroom);
  if (!plan.point_fits) {
    session.report.add_skipped({pt.axes, plan.point_reason, kNoIndex,
                                plan_json(train_run_memory(mem, tm, false, headroom), dev, false, plan.point_reason)});
    return;
  }
  PointResult pr = planned_point(pt, plan);
  json pj = plan_json(train_run_memory(mem, tm, plan.needs_full_mask, headroom), dev, true);
  if (mask_budget > 0) pj["mask_budget_bytes"] = mask_budget;
  pr.derived["plan"] = std::move(pj);

  // Every wanted strategy's mask memory (skipped ones too: the verdict compares them all).
  std::string note;
  const std::optional<model::TrainPrediction> tp = model.train(w, &note);
  const int64_t layers = std::max<int64_t>(w.layers, 1);
  json strategies = json::object();
  std::vector<model::StrategyCost> costs;
  for (Pipeline p : wanted) {
    const MaskFootprint f = mask_footprint(p, mem, w.layers);
    strategies[pipeline_name(p)] = {{"mask_life", mask_life_name(pipeline_spec(p).train_mask)},
                                    {"block_mask_bytes", f.block_bytes},
                                    {"held_bytes_per_layer", f.held_per_layer},
                                    {"network_mask_bytes", f.network_bytes},
                                    {"fits_budget", mask_budget == 0 || f.network_bytes <= mask_budget}};
    if (tp)
      if (const model::StepTime* st = tp->strategy(pipeline_name(p))) {
        costs.push_back({st->name, st->seconds, f.network_bytes});
        // Skipped strategies too: the verdict weighs them.
        json& e = strategies[pipeline_name(p)];
        e["model_us"] = st->seconds * 1e6;
        e["model_fwd_us"] = st->fwd_seconds * 1e6;
        e["model_bwd_us"] = st->bwd_seconds * 1e6;
      }
  }
  json train = {{"layers", layers},
                {"layers_from", w.layers > 0 ? "workload.layers" : "not given: one layer"},
                {"strategies", strategies}};
  if (tp) {
    const std::vector<model::BudgetStep> ladder = model::budget_ladder(costs);
    json steps = json::array();
    for (const model::BudgetStep& s : ladder)
      steps.push_back({{"from_bytes", s.from_bytes}, {"strategy", s.strategy}, {"model_us", s.seconds * 1e6}});
    json verdict = {{"ladder", steps}, {"text", model::ladder_text(ladder)}};
    const model::BudgetStep* best = model::best_within(ladder, mask_budget);
    verdict["best_within_budget"] = best ? json(best->strategy) : json(nullptr);
    train["verdict"] = std::move(verdict);
  } else {
    train["verdict_note"] = note;
  }
  pr.derived["train"] = std::move(train);

  for (Pipeline p : plan.run) {
    const PipelineSpec& spec = pipeline_spec(p);
    NvtxRange vr(std::string("variant ") + spec.name);
    session.harness.measure([&](Sample& s) {
      for (const char* phase : spec.train_phases) s.phase(phase, [] {});
    });
    VariantResult v = variant_of(spec.name, Measurement{});
    const MaskFootprint f = mask_footprint(p, mem, w.layers);
    v.extra = {{"mask_bytes", f.block_bytes}, {"network_mask_bytes", f.network_bytes}};
    const model::StepTime* st = tp ? tp->strategy(spec.name) : nullptr;
    if (st) {
      v.derived["model_us"] = st->seconds * 1e6;
      v.derived["model_fwd_us"] = st->fwd_seconds * 1e6;
      v.derived["model_bwd_us"] = st->bwd_seconds * 1e6;
      if (st->energy_j >= 0) v.derived["model_energy_mj"] = st->energy_j * 1e3;
      if (st->hidden_fwd >= 0) v.derived["model_hidden_fwd"] = st->hidden_fwd;
      if (st->hidden_bwd >= 0) v.derived["model_hidden_bwd"] = st->hidden_bwd;
      // No schedule of a GEMM || RNG overlap beats its energy bound (0: no power data).
      if (st->energy_bound_fwd_s > 0) v.derived["model_energy_bound_fwd_us"] = st->energy_bound_fwd_s * 1e6;
      if (st->energy_bound_bwd_s > 0) v.derived["model_energy_bound_bwd_us"] = st->energy_bound_bwd_s * 1e6;
      v.extra["model_phases"] = {{"fwd", phases_json(st->fwd)}, {"bwd", phases_json(st->bwd)}};
      v.extra["model_detail"] = st->detail;
    } else {
      v.extra["model_note"] = tp ? "the model composes no strategy '" + std::string(spec.name) + "'" : note;
    }
    pr.variants.push_back(std::move(v));
  }
  session.report.add_point(std::move(pr));
}

std::string train_plan_text(const Report& r) {
  Table t;
  t.columns = {"point", "strategy", "mask_life", "block_mask", "held_per_layer", "network_masks", "model_step_us",
               "model_fwd_us", "model_bwd_us", "fits_budget"};
  std::string verdicts;
  auto bytes = [](const json& v) { return v.is_number() ? model::bytes_text(v.get<uint64_t>()) : std::string("-"); };
  auto us = [](const json& d, const char* k) {
    return d.is_object() && d.contains(k) ? fmt::format("{:.0f}", d.at(k).get<double>()) : std::string("-");
  };
  for (const PointResult& p : r.points()) {
    if (!p.derived.is_object() || !p.derived.contains("train")) continue;
    const json& tr = p.derived.at("train");
    const std::string label = axes_label(p.axes);
    for (auto it = tr.at("strategies").begin(); it != tr.at("strategies").end(); ++it) {
      const json& s = it.value();
      const json& d = s;
      t.rows.push_back({label, it.key(), s.at("mask_life").get<std::string>(), bytes(s.at("block_mask_bytes")),
                        bytes(s.at("held_bytes_per_layer")),
                        fmt::format("{} ({} layers)", bytes(s.at("network_mask_bytes")), tr.at("layers").get<int64_t>()),
                        us(d, "model_us"), us(d, "model_fwd_us"), us(d, "model_bwd_us"),
                        s.at("fits_budget").get<bool>() ? "yes" : "no"});
    }
    const bool budget = p.derived.contains("plan") && p.derived.at("plan").contains("mask_budget_bytes");
    if (tr.contains("verdict")) {
      const json& pick = tr.at("verdict").at("best_within_budget");
      verdicts += fmt::format("verdict {{{}}}: {}{}\n", label, tr.at("verdict").at("text").get<std::string>(),
                              !budget ? std::string()
                                      : "; within --mask-budget: " + (pick.is_string() ? pick.get<std::string>() : "none"));
    } else
      verdicts += fmt::format("verdict {{{}}}: {}\n", label, tr.value("verdict_note", std::string("not modelled")));
  }
  if (t.rows.empty()) return "";
  return "\ntraining step (pass train; planned and modelled, not measured):\n" + render(t, "md") + verdicts;
}

}  // namespace dropbench
