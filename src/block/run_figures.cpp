#include "src/block/run_figures.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "src/core/energy.hpp"

namespace dropbench {

namespace {

// Dropout's exposed cost in each pipeline: its time minus GEMM + attention without dropout work (vs the
// mask-reading attention alone; fused: the in-kernel Philox's extra time).
json exposed_dropout(const PointTimes& t) {
  const auto& tp = t.pipelines;
  const double t_g = t.alone.gemm();
  const double t_am = t.alone.get("attention-mask");
  json exposed = json::object();
  for (const char* p : {"baseline", "overlap", "fused"})
    if (tp.count(p) && t_am > 0) exposed[p] = tp.at(p) - t_g - t_am;
  if (tp.count("chunked") && t.alone.t.count("attention-chunks"))
    exposed["chunked"] = tp.at("chunked") - t_g - t.alone.get("attention-chunks");
  return exposed;
}

// The pipeline speedups a point reports, t_num / t_den, as sampled medians (point_figures) and as sustained times
// (sustained_figures, the key + "_sustained").
struct Speedup {
  const char *num, *den, *key;
};
constexpr Speedup kSpeedups[] = {
    {"baseline", "overlap", "speedup_overlap_vs_baseline"}, {"fused", "overlap", "speedup_overlap_vs_fused"},
    {"baseline", "fused", "speedup_fused_vs_baseline"},     {"baseline", "chunked", "speedup_chunked_vs_baseline"},
    {"overlap", "chunked", "speedup_chunked_vs_overlap"}};

// The fastest pipeline of `times` (seconds by name); one without a time (<= 0) never wins; "" when none has one.
std::string fastest(const std::map<std::string, double>& times) {
  std::string best;
  for (const auto& [n, s] : times)
    if (s > 0 && (best.empty() || s < times.at(best))) best = n;
  return best;
}

}  // namespace

double put_variant_energy(VariantResult& v) {
  const double e_mj = v.power.is_object() ? power_figure(v.power, "energy_mj_per_iter") : std::nan("");
  if (!std::isfinite(e_mj)) return e_mj;
  v.derived["energy_mj"] = e_mj;
  v.derived["mean_w"] = power_figure(v.power, "mean_w");
  v.derived["capped_share"] = power_figure(v.power, "capped_share");
  const EnergyDelay ed = energy_delay(e_mj * 1e-3, power_figure(v.power, "time_per_iter_s"));  // both of the pass
  v.derived["edp_js"] = ed.edp_js;
  return e_mj;
}

// Back-to-back ("sustained") pipeline times from the power pass (launches queued 4 deep for measure.power_time,
// as a training loop runs them), beside the sampled medians: a power-capped kernel recovers clock in the gaps
// between timed samples, so its sampled median is faster than its sustained time (the FP8 GEMM by up to ~14 %),
// and a verdict between pipelines that differ in how power-bound they are can shift (docs/power.md). One window
// per pipeline, measured one after another: no interval.
void sustained_figures(const std::vector<VariantResult>& variants, const std::map<std::string, double>& pipelines,
                       json& d) {
  std::map<std::string, double> sus;
  for (const VariantResult& v : variants) {
    if (!pipelines.count(v.name) || !v.power.is_object()) continue;
    const double s = power_figure(v.power, "time_per_iter_s");
    if (std::isfinite(s) && s > 0) sus[v.name] = s;
  }
  if (sus.empty()) return;
  const std::string best = fastest(sus);
  d["t_sustained"] = sus;
  d["sustained_winner"] = best;
  if (d.contains("winner")) d["sustained_winner_differs"] = d["winner"] != best;
  for (const Speedup& q : kSpeedups)
    if (sus.count(q.num) && sus.count(q.den)) d[std::string(q.key) + "_sustained"] = sus.at(q.num) / sus.at(q.den);
}

namespace {

// Energy per block where the power pass ran: each pipeline's J per iteration (measured over its own back-to-back
// run) and energy-delay products (with the pass's time per iteration); for the serial pipelines (baseline, fused)
// its phases' energy estimated as the phase's median time x the matching piece's mean W alone (an estimate:
// overlap and chunked run phases concurrently and get none). The energy winner beside the time winner.
void energy_figures(PointResult& pr, json& d, const PointTimes& t) {
  json energy = json::object();
  std::string best;
  double best_e = 0;
  for (VariantResult& v : pr.variants) {
    if (!t.pipelines.count(v.name)) continue;
    const double e_mj = put_variant_energy(v);
    if (!std::isfinite(e_mj)) continue;
    energy[v.name] = e_mj;
    if (best.empty() || e_mj < best_e) {
      best = v.name;
      best_e = e_mj;
    }
    const bool serial = v.name == "baseline" || v.name == "fused";
    if (!serial) continue;
    json phase_e = json::object();
    for (const auto& [ph, st] : v.phases) {
      std::string piece = ph;
      if (ph == "attention") piece = v.name == "fused" ? "attention-fused" : "attention-mask";
      const double w = t.alone.watts(piece);
      if (std::isfinite(w)) phase_e[ph] = w * st.median * 1e3;
    }
    v.derived["phase_energy_mj_est"] = phase_e;
  }
  if (energy.empty()) return;
  d["energy_mj"] = energy;
  d["energy_winner"] = best;
  if (d.contains("winner")) d["energy_winner_differs"] = d["winner"] != best;
}

}  // namespace

json point_figures(PointResult& pr, const Workload& w, const PointTimes& t) {
  const auto& tp = t.pipelines;
  if (tp.count("baseline"))
    for (auto& v : pr.variants)
      if (tp.count(v.name) && v.stats.median > 0) {
        v.derived["x_baseline"] = tp.at("baseline") / v.stats.median;
        t.book.ratio("baseline", v.name).write(v.derived, "x_baseline");
      }

  json d = pr.derived;
  for (const auto& [n, s] : tp) d["t_" + n] = s;
  for (const Speedup& q : kSpeedups)
    if (tp.count(q.num) && tp.count(q.den) && tp.at(q.den) > 0) {
      d[q.key] = tp.at(q.num) / tp.at(q.den);
      t.book.ratio(q.num, q.den).write(d, q.key);
    }
  const json exposed = exposed_dropout(t);
  d["rng_exposed_s"] = exposed;
  const double t_g = t.alone.gemm(), t_r = t.alone.rng();
  const std::string winner = fastest(tp);  // a pipeline without samples (median 0) never wins
  d["winner"] = winner;
  if (!winner.empty()) {
    std::string why = fmt::format("{} is fastest ({:.1f} us); GEMM {:.1f} us, RNG alone {:.1f} us, attention "
                                  "(mask) {:.1f} us, (fused) {:.1f} us; dropout exposed:",
                                  winner, tp.at(winner) * 1e6, t_g * 1e6, t_r * 1e6,
                                  t.alone.get("attention-mask") * 1e6, t.alone.get("attention-fused") * 1e6);
    for (auto it = exposed.begin(); it != exposed.end(); ++it)
      why += fmt::format(" {} {:.1f} us", it.key(), it.value().get<double>() * 1e6);
    d["why"] = why;
  }
  d["mask_bytes_full"] = t.mem.full_mask;
  d["mask_bytes_chunked"] = 2 * t.mem.chunk_mask;
  d["overlap_rng"] = t.ovl.rc.name;
  d["overlap_rng_why"] = t.ovl.why;
  if (t.ovl.vs_plain.valid) set_figure(d, "overlap_rng_vs_plain", t.ovl.vs_plain);
  const Mech* best = t.mechs.best;
  if (!t.mechs.hidden_by.empty() && best) {
    d["hidden_by_mechanism"] = t.mechs.hidden_by;
    d["best_mechanism"] = best->rc.name;
    d["best_hidden"] = best->hidden;
    best->hidden_ci.write(d, "best_hidden");
  }
  if (t_r > 0 && t_g > 0) d["rng_over_gemm"] = t_r / t_g;
  if (best && best->over.power.is_object()) {
    for (const VariantResult& v : pr.variants)
      if (v.name == "mech:" + best->rc.name && v.derived.contains("hidden_energy_bound"))
        d["best_hidden_energy_bound"] = v.derived["hidden_energy_bound"];
  }
  energy_figures(pr, d, t);
  sustained_figures(pr.variants, tp, d);
  pr.derived = d;
  if (w.embed == 8192 && w.sq == 8192 && w.rounds == 7 && best) {
    json row;
    row["axes"] = pr.axes;
    row["dtype"] = w.dtype;
    row["best_mechanism"] = best->rc.name;
    row["best_hidden"] = best->hidden;
    row["met_80_percent"] = best->hidden >= 0.8;
    row["hidden_by_mechanism"] = t.mechs.hidden_by;
    return row;
  }
  return nullptr;
}

namespace {

// Philox R / R7 time ratios of every variant (and of the baseline's RNG phase) between points that differ only
// in rounds.
json rounds_vs_r7(const Report& report) {
  std::map<std::string, std::map<int64_t, const PointResult*>> groups;
  for (const PointResult& p : report.points()) {
    json key = p.axes;
    key.erase("rounds");
    groups[key.dump()][p.workload.value("rounds", int64_t{7})] = &p;
  }
  json ratios = json::array();
  for (const auto& [key, by_r] : groups) {
    auto r7 = by_r.find(7);
    if (r7 == by_r.end()) continue;
    for (const auto& [r, p] : by_r) {
      if (r == 7) continue;
      json row;
      row["axes"] = json::parse(key);
      row["rounds"] = r;
      for (const VariantResult& v : p->variants) {
        for (const VariantResult& v7 : r7->second->variants)
          if (v7.name == v.name && v7.stats.median > 0) {
            if (v.name.rfind("alone:", 0) == 0 || v.name.find(':') == std::string::npos) {
              row["x_r7"][v.name] = v.stats.median / v7.stats.median;
              // Two points, two groups: nothing pairs them, so the medians' intervals combine as independent.
              const Interval &ci = v.stats.median_ci, &ci7 = v7.stats.median_ci;
              if (ci.valid && ci7.valid)
                row["x_r7_ci"][v.name] = ratio_of_independent(v.stats.median, ci.low, ci.high, v7.stats.median,
                                                              ci7.low, ci7.high)
                                             .to_json();
            }
            if (v.name == "baseline")
              for (size_t k = 0; k < v.phases.size() && k < v7.phases.size(); ++k)
                if (v.phases[k].first == "rng" && v7.phases[k].second.median > 0)
                  row["x_r7"]["baseline/rng-phase"] = v.phases[k].second.median / v7.phases[k].second.median;
          }
      }
      ratios.push_back(row);
    }
  }
  return ratios;
}

}  // namespace

json run_summary(const Report& report, const RunTotals& totals) {
  json summary = json::object();
  summary["rounds_vs_r7"] = rounds_vs_r7(report);
  // The forward points' winners (derived) and the training points' (derived.train.measured).
  json winners = json::array(), train_winners = json::array();
  for (const PointResult& p : report.points()) {
    const bool train = p.derived.contains("train") && p.derived["train"].contains("measured");
    const json& d = train ? p.derived["train"]["measured"] : p.derived;
    if (!d.contains("winner")) continue;
    json w = {{"axes", p.axes}, {"winner", d["winner"]}};
    if (d.contains("energy_winner")) w["energy_winner"] = d["energy_winner"];
    if (d.contains("sustained_winner")) w["sustained_winner"] = d["sustained_winner"];
    (train ? train_winners : winners).push_back(std::move(w));
  }
  summary["winners"] = winners;
  if (!train_winners.empty()) summary["train_winners"] = train_winners;
  summary["bitwise_mismatches"] = totals.counters.mismatches;
  summary["measurements_without_samples"] = totals.counters.unmeasured;
  if (!totals.target.empty()) summary["coresidency_target"] = totals.target;
  if (totals.traced) summary["trace"] = {{"file", totals.trace_path}, {"records", totals.trace_records}};
  return summary;
}

}  // namespace dropbench
