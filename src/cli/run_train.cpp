#include "src/cli/run_train.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/block/mechanisms.hpp"
#include "src/block/run_point.hpp"
#include "src/block/train_point.hpp"
#include "src/block/train_step.hpp"
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
  for (const model::PhaseTime& p : ph)
    a.push_back({{"phase", p.name}, {"model_us", p.seconds * 1e6}, {"limiter", p.limiter}, {"clock_mhz", p.clock_mhz}});
  return a;
}


// The model's step for one strategy beside its variant (dry and measured runs); x_model = measured / model.
void put_train_model(VariantResult& v, const std::optional<model::TrainPrediction>& tp, const std::string& note) {
  const model::StepTime* st = tp ? tp->strategy(v.name) : nullptr;
  if (!st) {
    v.extra["model_note"] = tp ? "the model composes no strategy '" + v.name + "'" : note;
    return;
  }
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
  if (v.stats.median > 0 && st->seconds > 0) v.derived["x_model"] = v.stats.median / st->seconds;
}

// A budget ladder as a report's verdict: its steps (cost_key = the step's cost x unit), text and the pick within
// mask_budget.
json verdict_json(const std::vector<model::BudgetStep>& ladder, const char* cost_key, double unit, size_t mask_budget) {
  json steps = json::array();
  for (const model::BudgetStep& s : ladder)
    steps.push_back({{"from_bytes", s.from_bytes}, {"strategy", s.strategy}, {cost_key, s.seconds * unit}});
  const model::BudgetStep* best = model::best_within(ladder, mask_budget);
  return {{"ladder", steps}, {"text", model::ladder_text(ladder)},
          {"best_within_budget", best ? json(best->strategy) : json(nullptr)}};
}

// derived.train of a point: every wanted strategy's mask memory per layer and per network and the model's step
// (skipped strategies too: the verdict compares them all), and the verdict per mask budget.
json train_strategies(const Workload& w, const BlockMemory& mem, const std::vector<Pipeline>& wanted,
                      const std::optional<model::TrainPrediction>& tp, const std::string& note, size_t mask_budget) {
  json strategies = json::object();
  std::vector<model::StrategyCost> costs;
  for (Pipeline p : wanted) {
    const MaskFootprint f = mask_footprint(p, mem, w.layers);
    json e = {{"mask_life", mask_life_name(pipeline_spec(p).train_mask)},
              {"block_mask_bytes", f.block_bytes},
              {"held_bytes_per_layer", f.held_per_layer},
              {"network_mask_bytes", f.network_bytes},
              {"fits_budget", mask_budget == 0 || f.network_bytes <= mask_budget}};
    if (tp)
      if (const model::StepTime* st = tp->strategy(pipeline_name(p))) {
        costs.push_back({st->name, st->seconds, f.network_bytes});
        e["model_us"] = st->seconds * 1e6;
        e["model_fwd_us"] = st->fwd_seconds * 1e6;
        e["model_bwd_us"] = st->bwd_seconds * 1e6;
      }
    strategies[pipeline_name(p)] = std::move(e);
  }
  json train = {{"layers", std::max<int64_t>(w.layers, 1)},
                {"layers_from", w.layers > 0 ? "workload.layers" : "not given: one layer"},
                {"strategies", strategies}};
  if (!tp) {
    train["verdict_note"] = note;
    return train;
  }
  train["verdict"] = verdict_json(model::budget_ladder(costs), "model_us", 1e6, mask_budget);
  return train;
}

// A dry run walks each strategy's phases (the NVTX tree without a GPU) and gives it the model's figures.
void dry_walk(SweepSession& session, const PipelinePlan& plan, const BlockMemory& mem, const Workload& w,
              const std::optional<model::TrainPrediction>& tp, const std::string& note, PointResult& pr) {
  for (Pipeline p : plan.run) {
    const PipelineSpec& spec = pipeline_spec(p);
    NvtxRange vr(std::string("variant ") + spec.name);
    session.harness.measure([&](Sample& s) {
      for (const char* phase : spec.train_phases) s.phase(phase, [] {});
    });
    VariantResult v = variant_of(spec.name, Measurement{});
    const MaskFootprint f = mask_footprint(p, mem, w.layers);
    v.extra = {{"mask_bytes", f.block_bytes}, {"network_mask_bytes", f.network_bytes}};
    put_train_model(v, tp, note);
    pr.variants.push_back(std::move(v));
  }
}

// The RNG configuration beside the GEMMs: --overlap-rng's mechanism, plain for auto (the forward's automatic choice
// needs its mechanism group, which a training point does not measure).
RngConfig train_rng(const RunOptions& o) {
  if (o.overlap_rng == "auto") return rng_plain();
  const FixedMechanism* m = find_fixed_mechanism(o.overlap_rng);
  if (!m) throw UsageError("--overlap-rng: '" + o.overlap_rng + "' is not allowed (allowed: " + overlap_rng_choices() + ")");
  return m->rc;
}

// The training step on the GPU (src/block/train_point.hpp), the model beside each strategy.
void measure_train(const TrainPointContext& c, const SweepPoint& pt, const std::string& label, const PipelinePlan& plan,
                   const std::optional<model::TrainPrediction>& tp, const std::string& note, PointResult& pr) {
  const cudaStream_t main = c.session.harness.stream();
  TrainRunner::Options to;
  to.top_k = c.opts.top_k;
  to.full_mask = plan.needs_full_mask;
  to.validate = !c.opts.no_validate;
  TrainRunner tr(pt.workload, to, main);
  tr.tune(main);
  PointScope ps{c.session.harness, tr.block(), c.opts, plan, label, pr, c.counters};
  measure_train_point(ps, tr, train_rng(c.opts));
  json& train = pr.derived["train"];
  train["measured"]["verdict"] = measured_train_verdict(train, ps.book, c.mask_budget);
  for (VariantResult& v : pr.variants)
    if (v.name.find(':') == std::string::npos) {
      put_train_model(v, tp, note);
      put_train_model_at_step_clock(v, c.model, pt.workload);
    }
}

}  // namespace

// The model does not predict the step's clock (the step's power holds it, and the attention inside the step runs at
// it: docs/model.md), so a measured step is also compared with the model at the clock it measured.
void put_train_model_at_step_clock(VariantResult& v, const Estimator& model, const Workload& w) {
  const double mhz = v.stats.mean_clock_mhz;
  if (!(mhz > 0) || !(v.stats.median > 0)) return;
  const std::optional<model::TrainPrediction> tp = model.train(w, nullptr, mhz);
  const model::StepTime* st = tp ? tp->strategy(v.name) : nullptr;
  if (!st || !(st->seconds > 0)) return;
  v.derived["model_step_clock_mhz"] = mhz;
  v.derived["model_step_clock_us"] = st->seconds * 1e6;
  v.derived["x_model_step_clock"] = v.stats.median / st->seconds;
}

std::vector<Pipeline> wanted_for_pass(const std::optional<std::vector<Pipeline>>& wanted, Pass pass) {
  if (!wanted) return pass_pipelines(pass);
  std::vector<Pipeline> out;
  for (Pipeline p : *wanted)
    if (applies_to(p, pass)) out.push_back(p);
  return out;
}

void check_run_passes(const std::vector<SweepPoint>& points, const std::optional<std::vector<Pipeline>>& wanted) {
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
}

void train_point(const TrainPointContext& c, const SweepPoint& pt, const std::string& label) {
  const Workload& w = pt.workload;
  try {
    validate_train_workload(w);
  } catch (const UsageError& e) {
    c.session.report.add_skipped({pt.axes, e.what()});
    return;
  }
  if (c.wanted.empty()) {
    c.session.report.add_skipped({pt.axes, "--pipelines lists no strategy of pass train (allowed: " +
                                               pass_pipeline_names_text(Pass::Train) + ")"});
    return;
  }
  const BlockMemory mem = block_memory(w, w.sq, kTrainGemmObjects, false);
  const TrainMemory tm = train_memory(w, !c.opts.no_validate);
  const size_t free_b = c.dry ? c.dev.bytes : device_free_bytes();
  PipelinePlan plan = plan_train(mem, tm, w.layers, free_b, c.mask_budget, c.wanted, c.headroom);
  if (!plan.point_fits) {
    c.session.report.add_skipped(
        {pt.axes, plan.point_reason, kNoIndex,
         c.dry ? plan_json(train_run_memory(mem, tm, false, c.headroom), c.dev, false, plan.point_reason) : json()});
    return;
  }
  PointResult pr = planned_point(pt, plan);
  if (c.dry) {
    json pj = plan_json(train_run_memory(mem, tm, plan.needs_full_mask, c.headroom), c.dev, true);
    if (c.mask_budget > 0) pj["mask_budget_bytes"] = c.mask_budget;
    pr.derived["plan"] = std::move(pj);
  }
  std::string note;
  const std::optional<model::TrainPrediction> tp = c.model.train(w, &note);
  pr.derived["train"] = train_strategies(w, mem, c.wanted, tp, note, c.mask_budget);
  pr.derived["train"]["model_machine"] = c.model.machine_name();
  pr.derived["train"]["model_clock"] = c.model.clock_text();
  if (c.dry)
    dry_walk(c.session, plan, mem, w, tp, note, pr);
  else
    measure_train(c, pt, label, plan, tp, note, pr);
  c.session.report.add_point(std::move(pr));
}

json measured_train_verdict(const json& train, const SampleBook& book, size_t mask_budget) {
  std::map<std::string, uint64_t> bytes;
  for (auto it = train.at("strategies").begin(); it != train.at("strategies").end(); ++it)
    bytes[it.key()] = it.value().at("network_mask_bytes").get<uint64_t>();
  const json& m = train.at("measured");
  auto costs = [&](const char* key) {
    std::vector<model::StrategyCost> c;
    if (m.contains(key))
      for (auto it = m.at(key).begin(); it != m.at(key).end(); ++it)
        if (bytes.count(it.key()) && it.value().is_number() && it.value().get<double>() > 0)
          c.push_back({it.key(), it.value().get<double>(), bytes.at(it.key())});
    return c;
  };
  json out = json::object();
  const std::vector<model::StrategyCost> t = costs("t");
  if (!t.empty()) {
    json v = verdict_json(model::budget_ladder(t), "t_us", 1e6, mask_budget);
    for (json& step : v["ladder"]) {
      const model::StrategyCost *winner = nullptr, *runner = nullptr;
      const std::string win = step.at("strategy").get<std::string>();
      for (const model::StrategyCost& c : t)
        if (c.name == win)
          winner = &c;
        else if (c.mask_bytes <= step.at("from_bytes").get<uint64_t>() && (!runner || c.seconds < runner->seconds))
          runner = &c;
      if (!runner) {
        step["runner_up"] = nullptr;
        continue;
      }
      step["runner_up"] = runner->name;
      const Interval iv = book.ratio(runner->name, win);
      if (iv.valid) {
        set_figure(step, "margin", iv);
      } else {
        step["margin"] = runner->seconds / winner->seconds;
        step["margin_ci"] = nullptr;
      }
    }
    out["time"] = std::move(v);
  }
  const std::vector<model::StrategyCost> sus = costs("t_sustained");
  if (!sus.empty()) out["sustained"] = verdict_json(model::budget_ladder(sus), "t_us", 1e6, mask_budget);
  // energy_mj is in mJ: the ladder's cost as given.
  const std::vector<model::StrategyCost> e = costs("energy_mj");
  if (!e.empty()) out["energy"] = verdict_json(model::budget_ladder(e), "energy_mj", 1, mask_budget);
  return out;
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
    if (tr.contains("measured") && tr.at("measured").contains("verdict"))
      for (const char* cost : {"time", "sustained", "energy"})
        if (tr.at("measured").at("verdict").contains(cost))
          verdicts += fmt::format("measured verdict by {} {{{}}}: {}\n", cost, label,
                                  tr.at("measured").at("verdict").at(cost).at("text").get<std::string>());
  }
  if (t.rows.empty()) return "";
  return "\ntraining step (pass train; the plan and the model):\n" + render(t, "md") + verdicts;
}

}  // namespace dropbench
