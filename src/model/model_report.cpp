// Predicted vs measured for a report (model_report.hpp).
#include "src/model/model_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/common/check.hpp"
#include "src/core/input.hpp"
#include "src/core/merge.hpp"

namespace dropbench::model {

namespace {

Workload workload_of(const json& wj, const std::string& where) {
  json cfg = {{"name", "report-point"}, {"workload", wj}};
  // Reports from before the wgmma attention kernel existed name no attention kernel: theirs was the mma one.
  if (wj.is_object() && !wj.contains("attention_kernel")) cfg["workload"]["attention_kernel"] = "mma";
  try {
    return config_from_json(cfg, where).workload;
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("--report {}: point workload: {}", where, e.what()));
  }
}

const json* find_phase(const json& v, const std::string& name) {
  if (!v.contains("phases")) return nullptr;
  for (const json& ph : v.at("phases"))
    if (ph.value("name", "") == name) return &ph;
  return nullptr;
}

double median_of(const json& stats) {
  const json& m = stats.at("median");
  return m.is_number() ? m.get<double>() : 0.0;
}

double clock_of(const json& stats) {
  const json& c = stats.value("mean_clock_mhz", json(0.0));
  return c.is_number() ? c.get<double>() : 0.0;
}

bool axes_match(const json& fit_axes, const json& axes) {
  for (const auto& [k, v] : fit_axes.items()) {
    if (!axes.contains(k) || axes.at(k) != v) return false;
  }
  return true;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What one report variant is compared on.
struct Comparand {
  std::string variant;
  std::string phase;  // "" = the whole variant
  std::string piece;  // Predictor piece
  // A training-step strategy (Predictor::train): its step (model_phase "") or its model phase `model_phase`,
  // measured by the phases train_measured_phases names.
  std::string strategy, model_phase;
};

// A training step's strategy as a whole (phase "") or one of its model phases, from a prediction of the step.
KernelTime train_time(const TrainPrediction& tp, const std::string& strategy, const std::string& phase) {
  const StepTime* st = tp.strategy(strategy);
  if (!st) throw UsageError("model: the training step has no strategy " + strategy);
  KernelTime t;
  t.name = phase.empty() ? strategy : phase;
  std::vector<std::string> sources;
  for (const std::vector<PhaseTime>* side : {&st->fwd, &st->bwd})
    for (const PhaseTime& x : *side) {
      sources.push_back(x.source);
      if (x.name != phase) continue;
      t.seconds = x.seconds;
      t.seconds_no_power = x.seconds_no_power;
      t.limiter = x.limiter;
      t.source = x.source;
      return t;
    }
  if (!phase.empty()) throw UsageError("model: strategy " + strategy + " has no phase " + phase);
  t.seconds = st->seconds;
  t.seconds_no_power = st->seconds_no_power;
  t.energy_j = st->energy_j;
  t.limiter = st->limiter;
  t.source = join_sources(sources);
  return t;
}

// Predicted kernel / pipeline time of `piece` for workload w at options o; .source: where the demand came from.
// Pieces: gemm, rng:LAYOUT, attention:MODE, attention-bwd:MODE (the kernel), attention-bwd-call:MODE (the whole
// backward call), pipeline:NAME, sum:A+B (two kernels back to back).
struct Predictor {
  const Machine& m;
  const Profile& p;
  KernelTime kernel(const std::string& piece, const Workload& w, const Options& o) const {
    if (piece == "gemm") return gemm_time(m, p, w, o);
    if (starts_with(piece, "rng:")) return rng_time(m, p, w, piece.substr(4), {}, o);
    if (starts_with(piece, "attention:")) return attention_time(m, p, w, piece.substr(10), {}, o);
    if (starts_with(piece, "attention-bwd:")) return attention_bwd_kernel_time(m, p, w, piece.substr(14), o);
    if (starts_with(piece, "attention-bwd-call:")) return attention_bwd_call_time(m, p, w, piece.substr(19), o);
    throw UsageError("model: unknown piece " + piece);
  }
  KernelTime pipeline(const std::string& name, const Workload& w, const Options& o) const {
    const Prediction pr = predict(m, p, w, o);
    const PipelineTime* pt = pr.pipeline(name);
    if (!pt) throw UsageError("model: unknown pipeline " + name);
    KernelTime t;
    t.name = name;
    t.seconds = pt->seconds;
    t.seconds_no_power = pt->seconds_no_power;
    t.energy_j = pt->energy_j;
    t.limiter = pt->limiter;
    t.source = pipeline_source(pr, name);
    return t;
  }
  // A training step's strategy as a whole (phase "") or one of its model phases, as predict_train composes it.
  KernelTime train(const std::string& strategy, const std::string& phase, const Workload& w, const Options& o) const {
    return train_time(predict_train(m, p, w, o), strategy, phase);
  }
  KernelTime any(const std::string& piece, const Workload& w, const Options& o) const {
    if (starts_with(piece, "pipeline:")) return pipeline(piece.substr(9), w, o);
    if (starts_with(piece, "sum:")) {  // "sum:rng:tile+attention:mask": serial kernels with a launch gap
      const std::string rest = piece.substr(4);
      const size_t plus = rest.find('+');
      const KernelTime a = kernel(rest.substr(0, plus), w, o), b = kernel(rest.substr(plus + 1), w, o);
      KernelTime t;
      t.name = piece;
      t.seconds = serial_seconds(m, {a.seconds, b.seconds});
      t.seconds_no_power = serial_seconds(m, {a.seconds_no_power, b.seconds_no_power});
      t.limiter = a.seconds >= b.seconds ? a.limiter : b.limiter;
      t.source = join_sources({a.source, b.source});
      return t;
    }
    return kernel(piece, w, o);
  }
  KernelTime any(const Comparand& c, const Workload& w, const Options& o) const {
    return c.strategy.empty() ? any(c.piece, w, o) : train(c.strategy, c.model_phase, w, o);
  }
};

// The training-step variants of a pass-train point: each strategy the model composes, as a whole step and phase
// by phase (every model phase of the strategy, in step order).
std::vector<Comparand> train_comparands(const json& v, const TrainPrediction& tp) {
  const std::string name = v.value("name", "");
  // The attention backward alone (its phase "attention-bwd"): the model phase of the first strategy that launches
  // that kernel, attention-bwd(regen) for the fused one, attention-bwd(mask) for the one reading the mask.
  const char* bwd_alone = "alone:attention-bwd-";
  if (starts_with(name, bwd_alone)) {
    const std::string phase =
        std::string("attention-bwd(") + (name == std::string(bwd_alone) + "fused" ? "regen" : "mask") + ")";
    for (const StepTime& st : tp.strategies)
      for (const PhaseTime& x : st.bwd)
        if (x.name == phase) return {{name, "", "train-phase:" + phase, st.name, phase}};
    return {};
  }
  const StepTime* st = tp.strategy(name);
  if (!st) return {};
  std::vector<Comparand> out = {{name, "", "train-step:" + name, name, ""}};
  for (const std::vector<PhaseTime>* side : {&st->fwd, &st->bwd})
    for (const PhaseTime& x : *side) out.push_back({name, x.name, "train-phase:" + x.name, name, x.name});
  return out;
}

std::vector<Comparand> comparands(const std::string& command, const json& v, const Workload& w) {
  const std::string name = v.value("name", "");
  std::vector<Comparand> out;
  auto add = [&](const std::string& phase, const std::string& piece) { out.push_back({name, phase, piece}); };
  if (command == "rng") {
    // Not the "ceiling" variant measured beside it: a compute-only Philox loop, no mask kernel.
    if (name == "rng" && (w.layout == "tile" || w.layout == "bits")) add("gen", "rng:" + w.layout);
  } else if (command == "attention") {
    if (name == "none" || name == "mask" || name == "fused") add("attention", "attention:" + name);
    if (name == "fused") add("attention", "attention:fused-composed");
    if (name == "rng+mask") {
      add("gen", "rng:tile");
      add("attention", "attention:mask");
      if (w.pass == "fwd") add("", "sum:rng:tile+attention:mask");
    }
    // The backward phase (passes bwd and fwd+bwd): rng+mask's backward reads the mask, as mask's does.
    if (w.pass != "fwd" && (name == "none" || name == "mask" || name == "fused" || name == "rng+mask"))
      add("backward", "attention-bwd-call:" + std::string(name == "rng+mask" ? "mask" : name));
  } else if (command == "gemm") {
    add("gemm", "gemm");
  } else if (command == "run") {
    // Pipelines as wholes; the phases of the serial ones; the pieces measured alone. Overlap-mechanism
    // variants ("mech:...") and chunk-level pieces are not compared. A training step's strategies (some named
    // as forward pipelines) are train_comparands'.
    const bool fwd = w.pass != "train";
    if (fwd && (name == "baseline" || name == "fused" || name == "overlap" || name == "chunked"))
      add("", "pipeline:" + name);
    if (fwd && name == "baseline") {
      add("gemm", "gemm");
      add("rng", "rng:tile");
      add("attention", "attention:mask");
    }
    if (fwd && name == "fused") {
      add("gemm", "gemm");
      add("attention", "attention:fused");
    }
    if (name == "alone:gemm") add("gemm", "gemm");
    if (name == "alone:rng") add("rng", "rng:tile");
    if (name == "alone:attention-mask") add("attention", "attention:mask");
    if (name == "alone:attention-fused") add("attention", "attention:fused");
  }
  return out;
}

// The stats a comparand is measured by: the variant's, or its phase's; nullptr when that phase was not timed
// (run and attention reports leave out phases they did not time; rng and gemm fall back to the variant).
const json* stats_for(const std::string& command, const json& v, const std::string& phase) {
  const json& whole = v.at("stats");
  if (phase.empty()) return &whole;
  if (const json* ph = find_phase(v, phase)) return &ph->at("stats");
  if (command == "run" || command == "attention") return nullptr;
  return &whole;
}

// A comparand's measured median and mean SM clock, and the measured phases it reads ("" = the whole variant).
struct Measured {
  double median = 0, clock = 0;
  std::string phases;
};

// What `c` measures in variant v; nullopt when the report did not time it. A model phase of the training step
// reads the phases train_measured_phases names: sides that start at one fork, each the sum of its timed phases
// (a side's clock: their time-weighted mean), the phase ending with the later side.
std::optional<Measured> measured(const std::string& command, const json& v, const Comparand& c) {
  if (c.model_phase.empty()) {
    const json* st = stats_for(command, v, c.phase);
    if (!st) return std::nullopt;
    return Measured{median_of(*st), clock_of(*st), c.phase};
  }
  Measured out;
  std::vector<std::string> sides;
  for (const std::vector<std::string>& side : train_measured_phases(c.model_phase)) {
    double t = 0, clocked = 0, clock = 0;
    std::vector<std::string> timed;
    for (const std::string& name : side) {
      const json* ph = find_phase(v, name);
      if (!ph) continue;
      const double d = median_of(ph->at("stats")), f = clock_of(ph->at("stats"));
      t += d;
      if (f > 0) {
        clocked += d;
        clock += d * f;
      }
      timed.push_back(name);
    }
    if (timed.empty()) return std::nullopt;
    sides.push_back(fmt::format("{}", fmt::join(timed, "+")));
    if (t > out.median) {
      out.median = t;
      out.clock = clocked > 0 ? clock / clocked : 0;
    }
  }
  out.phases = sides.size() == 1 ? sides.front() : fmt::format("max({})", fmt::join(sides, ", "));
  return out;
}

// A row the wgmma backward's efficiencies are fitted on, in a report its fit_reports name: an attention report's
// backward alone (pass bwd) of the wgmma kernel named as such, at the section's head dim, in mode none / mask / fused.
bool wgmma_bwd_fit_row(const Profile& p, const std::string& command, const Workload& w, const std::string& variant) {
  return p.wgmma_bwd && command == "attention" && w.pass == "bwd" && w.attention_kernel == "wgmma" &&
         w.head_dim == p.wgmma_bwd->head_dim && (variant == "none" || variant == "mask" || variant == "fused");
}

// Whether report `a` (a path as given, relative to the working directory) is the file `b` a data file names (a path
// from the repository root, or a bare file name as test fixtures use): `a` made absolute ends with `b` at a path
// boundary. A report given by a bare name from its own folder then matches its entry, and not another GPU's file of
// the same name.
bool same_report(const std::string& a, const std::string& b) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(a, ec);
  if (ec) abs = a;
  const std::string x = abs.lexically_normal().generic_string();
  const std::string y = std::filesystem::path(b).lexically_normal().generic_string();
  return x == y || ends_with(x, "/" + y);
}

// Marks `row` as a power fit row when the power bound that sets its scored prediction (the caller checks the
// limiter; `power_key`, the predicted kernel's key) is fitted on a set of measurements that includes this one (the
// entry's fitted_on names the report, the axes and the variant): its predicted time then comes from its own
// measurement, so it is no held-out check of the power. The row's predictions at the measured clock and without the
// power term do not use the power: they stay in those statistics (row.power_fit, report_errors).
void mark_power_fit(ReportRow& row, const Machine& m, const Profile& p, const std::string& report_path,
                    const std::string& power_key) {
  if (power_key.empty() || row.role != "held-out") return;
  const KernelPower* kp = kernel_power(m, p, power_key);
  if (!kp) return;
  for (const PowerMeasurement& x : kp->fitted_on)
    if (x.variant == row.variant && x.axes == row.axes && same_report(report_path, x.report)) {
      row.role = "fit";
      row.fit_unit = kPowerFitUnit;
      row.power_fit = true;
      return;
    }
}

// Marks `row` as a fit row of the wgmma backward when it compares a whole backward call from a report the profile's
// kernels.attention_bwd_wgmma.fit_reports name (`--fit-kernels` fits its efficiencies on those calls).
void mark_bwd_fit(ReportRow& row, const Profile& p, const std::string& report_path, const std::string& command,
                  const Workload& w, const std::string& piece) {
  // wgmma_bwd_fit_row is false without the backward's section, so fit_reports below exists.
  if (!starts_with(piece, "attention-bwd-call:") || row.role != "held-out" ||
      !wgmma_bwd_fit_row(p, command, w, row.variant))
    return;
  for (const std::string& rep : p.wgmma_bwd->fit_reports)
    if (same_report(report_path, rep)) {
      row.role = "fit";
      row.fit_unit = kAttentionBwdUnit;
      row.bwd_fit = true;
      return;
    }
}

// Marks `row` as a fit point when the machine's calibration names it (last match wins); composed rows,
// sums, pipelines and training steps are never fit points.
void mark_fit(ReportRow& row, const Machine& m, const Predictor& pred, const std::string& report_path,
              const std::string& command, const std::string& piece, const Workload& w, const Options& uncalibrated) {
  Options calibrated = uncalibrated;
  calibrated.calibrated = true;
  calibrated.gemm_tile_model = false;  // a GEMM fit point measures the machine's unit, not the GEMM's own model
  // The rows the machine's GEMM tile model is fitted on (gemm_report_points' rows): fit rows, not held out; an
  // efficiency fit point on the row names its unit.
  if (auto tm = m.gemm_tiles.find(w.dtype); command == "gemm" && piece == "gemm" && row.variant == "cublaslt" &&
                                             tm != m.gemm_tiles.end())
    for (const std::string& rep : tm->second.fit_reports)
      if (same_report(report_path, rep)) {
        row.role = "fit";
        row.tile_fit = true;
        row.fit_unit = kGemmTileUnit;
      }
  for (const FitPoint& fp : m.fit_points) {
    // A fit point names its report: the same axes in another report are held out.
    if (!fp.report.empty() && !same_report(report_path, fp.report)) continue;
    if (fp.command == command && fp.variant == row.variant && axes_match(fp.axes, row.axes) &&
        !starts_with(piece, "sum:") && !starts_with(piece, "pipeline:") && !starts_with(piece, "train-") &&
        !starts_with(piece, "attention-bwd-call:") && row.role != "composed") {
      row.role = "fit";
      if (fp.unit == kRngStripUnit) {  // fitted by --fit-kernels; an efficiency fit point on the row names its unit
        row.strip_fit = true;
        if (row.fit_unit.empty()) row.fit_unit = fp.unit;
        continue;
      }
      row.fit_unit = fp.unit;
      row.fit_unit_seconds_uncal = pred.any(piece, w, uncalibrated).unit_seconds(fp.unit);
      row.fit_fixed_s = pred.any(piece, w, calibrated).fixed_s;
      if (!(row.measured > row.fit_fixed_s))  // the efficiency would be infinite or negative
        throw UsageError(fmt::format("model --fit: {}'s fit point ({} {}) measures {:.3g} s, not more than the "
                                     "model's fixed costs there ({:.3g} s)",
                                     fp.unit, report_path, row.variant, row.measured, row.fit_fixed_s));
    }
  }
}

// The kernel piece a single-kernel variant measures, or "".
std::string power_piece(const std::string& command, const std::string& variant, const Workload& w) {
  if (command == "run") {
    if (variant == "alone:gemm") return "gemm";
    if (variant == "alone:rng") return "rng:tile";
    if (variant == "alone:attention-mask") return "attention:mask";
    if (variant == "alone:attention-fused") return "attention:fused";
    // A training step's backward alone: the whole call (its preprocess and dQ launches included) per visited
    // element of the kernel, whose key the power is stored under.
    if (variant == "alone:attention-bwd-mask") return "attention-bwd:mask";
    if (variant == "alone:attention-bwd-fused") return "attention-bwd:fused";
    return "";
  }
  if (command == "rng") return variant == "rng" && (w.layout == "tile" || w.layout == "bits") ? "rng:" + w.layout : "";
  if (command == "gemm") return "gemm";
  // An attention variant's power pass times its whole pass: the forward kernel (pass fwd) or the backward call
  // (pass bwd) under one key; fwd+bwd holds both, which no one key does.
  if (command == "attention" && (variant == "none" || variant == "mask" || variant == "fused")) {
    if (w.pass == "fwd") return "attention:" + variant;
    if (w.pass == "bwd") return "attention-bwd-call:" + variant;
  }
  return "";
}

double num(const json& j, const char* k) {
  return j.contains(k) && j.at(k).is_number() ? j.at(k).get<double>() : -1;
}

}  // namespace

std::vector<std::vector<std::string>> train_measured_phases(const std::string& model_phase) {
  const std::string base = model_phase.substr(0, model_phase.find('('));
  if (base == "gemm || rng") return {{"gemm"}, {"rng"}};
  if (base == "gemm-out-dx+dw || rng")
    return {{"cast-dy", "transpose-w-out", "gemm-out-dx", "gemm-out-dw"}, {"rng-bwd"}};
  return {{base}};
}

MeasuredReport load_measured_report(const std::string& path, const std::string& who) {
  MeasuredReport r;
  r.path = path;
  r.doc = read_json_input(path, who, "a dropbench report measured on a GPU");
  const json& d = r.doc;
  if (!d.is_object() || !d.contains("schema") || d["schema"] != "dropbench.report")
    throw UsageError(fmt::format("{}: '{}' is not a dropbench report (schema != \"dropbench.report\")", who, path));
  if (!d.contains("schema_version") || d["schema_version"] != 1)
    throw UsageError(one_line(fmt::format("{}: '{}' has schema_version {} (this dropbench reads 1)", who, path,
                                          d.contains("schema_version") ? d["schema_version"].dump() : "(none)")));
  check_report_body(d, who, path);
  // A dry run has points but no measurements: comparing with it would report 0 comparisons as a 0 % error.
  if (d.contains("context") && d["context"].value("dry_run", false))
    throw UsageError(fmt::format("{}: '{}' is a dry run (nothing was measured; allowed: a report measured on a GPU)",
                                 who, path));
  r.command = d.value("command", "");
  if (r.command != "rng" && r.command != "attention" && r.command != "gemm" && r.command != "run")
    throw UsageError(
        fmt::format("{}: command '{}' is not modelled (allowed: rng, attention, gemm, run)", who, r.command));
  return r;
}

std::vector<std::string> newest_reports(const std::string& results_dir, const std::string& command,
                                        const std::string& pass) {
  namespace fs = std::filesystem;
  struct Found {
    std::string path, date, sha;
  };
  auto text = [](const json& ctx, const char* key) {
    const auto it = ctx.find(key);
    return it != ctx.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto point_pass = [](const json& pt) {  // workload.pass, absent = fwd
    const json* wl = pt.is_object() && pt.contains("workload") ? &pt["workload"] : nullptr;
    return wl && wl->is_object() ? wl->value("pass", std::string("fwd")) : std::string("fwd");
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(results_dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    json d;
    try {
      d = json::parse(f);
    } catch (const json::exception&) {
      continue;
    }
    if (!d.is_object() || d.value("schema", "") != "dropbench.report" || d.value("command", "") != command) continue;
    const json ctx = d.contains("context") && d["context"].is_object() ? d["context"] : json::object();
    if (ctx.value("dry_run", false)) continue;
    const auto pts = d.find("points");
    if (pts != d.end() && pts->is_array() &&
        !std::all_of(pts->begin(), pts->end(), [&](const json& pt) { return point_pass(pt) == pass; }))
      continue;
    found.push_back({e.path().string(), text(ctx, "date_utc"), text(ctx, "git_sha")});
  }
  if (found.empty()) return {};
  // ISO 8601 UTC dates order as strings; a report without a date is the oldest; equal dates: the later path.
  const Found newest = *std::max_element(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.date, a.path) < std::tie(b.date, b.path);
  });
  std::vector<std::string> out;
  for (const Found& f : found)
    if (f.path == newest.path || (!newest.sha.empty() && f.sha == newest.sha)) out.push_back(f.path);
  std::sort(out.begin(), out.end());
  return out;
}

ReportComparison compare_with_report(const Machine& m, const Profile& p, const MeasuredReport& r, const Options& o,
                                     bool at_measured_clock) {
  Options ou = o;
  ou.calibrated = false;
  const Predictor pred{m, p};
  ReportComparison out;
  for (const json& pt : r.doc.at("points")) {
    const json axes = pt.value("axes", json::object());
    const Workload w = workload_of(pt.at("workload"), r.path);
    // A training step's strategies are compared phase by phase as the model composes each.
    std::optional<TrainPrediction> tp;
    if (r.command == "run" && w.pass == "train") try {
        tp = predict_train(m, p, w, o);
      } catch (const UsageError&) {
        tp.reset();  // the profile lacks this case: its strategies are not modelled
      }
    for (const json& v : pt.at("variants")) {
      if (v.value("peer", false)) continue;
      std::vector<Comparand> cmp = comparands(r.command, v, w);
      if (tp)
        for (Comparand& c : train_comparands(v, *tp)) cmp.push_back(std::move(c));
      if (cmp.empty()) ++out.skipped;
      for (const Comparand& c : cmp) {
        const std::optional<Measured> ms = measured(r.command, v, c);
        if (!ms) continue;
        ReportRow row;
        row.axes = axes;
        row.variant = c.variant;
        row.piece = ms->phases.empty() ? c.piece : ms->phases + " = " + c.piece;
        row.measured = ms->median;
        row.measured_clock = ms->clock;
        if (row.measured <= 0) continue;
        KernelTime t;
        try {
          // The step at the run's own options is the point's prediction already made (tp).
          t = c.strategy.empty() ? pred.any(c.piece, w, o) : train_time(*tp, c.strategy, c.model_phase);
        } catch (const UsageError&) {
          ++out.skipped;  // the profile lacks this case (layout, mode, head_dim...)
          continue;
        }
        row.predicted = t.seconds;
        row.predicted_no_power = t.seconds_no_power > 0 ? t.seconds_no_power : t.seconds;
        row.power_bound = t.limiter == "power";
        row.limiter = t.limiter;
        row.source = t.source;
        Options oc = o;
        oc.clock_mhz = row.measured_clock;
        const KernelTime tc = row.measured_clock > 0 ? pred.any(c, w, oc) : t;
        row.predicted_at_measured_clock = tc.seconds;
        if (at_measured_clock) row.predicted_no_power = tc.seconds_no_power > 0 ? tc.seconds_no_power : tc.seconds;
        // Sustained time: the whole variant's power pass, for a pipeline compared whole or a single-kernel variant.
        if (v.contains("power") && v.at("power").is_object() &&
            (c.phase.empty() || !power_piece(r.command, c.variant, w).empty()))
          row.sustained = std::max(0.0, num(v.at("power"), "time_per_iter_s"));
        row.role = c.piece == "attention:fused-composed" ? "composed" : "held-out";
        mark_fit(row, m, pred, r.path, r.command, c.piece, w, ou);
        mark_bwd_fit(row, p, r.path, r.command, w, c.piece);
        // Decided on the prediction scored: at a measured clock the power term is off (a row without one is
        // scored at the model's clock, t).
        const bool scored_power = (at_measured_clock && row.measured_clock > 0 ? tc : t).limiter == "power";
        if (scored_power && c.strategy.empty() && c.piece == power_piece(r.command, c.variant, w))
          mark_power_fit(row, m, p, r.path, t.key);
        out.rows.push_back(row);
      }
    }
  }
  if (at_measured_clock)
    for (ReportRow& row : out.rows) row.predicted = row.predicted_at_measured_clock;
  return out;
}

std::vector<KernelPoint> rng_strip_points(const Machine& m, const std::string& root) {
  std::vector<KernelPoint> out;
  for (const FitPoint& fp : m.fit_points) {
    if (fp.unit != kRngStripUnit) continue;
    if (fp.command != "rng" || fp.report.empty())
      throw UsageError(fmt::format("machine {}: calibration.fit_points[] of unit {} must name an rng report", m.path,
                                   kRngStripUnit));
    const MeasuredReport r = load_measured_report(root.empty() ? fp.report : root + "/" + fp.report);
    size_t n = 0;
    for (const json& pt : r.doc.at("points")) {
      const json axes = pt.value("axes", json::object());
      if (!axes_match(fp.axes, axes)) continue;
      const Workload w = workload_of(pt.at("workload"), r.path);
      if (w.layout != "tile") continue;
      for (const json& v : pt.at("variants")) {
        if (v.value("peer", false) || v.value("name", "") != fp.variant) continue;
        const json* st = stats_for(r.command, v, "gen");
        if (!st || !(median_of(*st) > 0) || !(clock_of(*st) > 0)) continue;
        out.push_back({fp.report + " " + axes.dump(), w, median_of(*st), clock_of(*st)});
        ++n;
      }
    }
    if (n == 0)
      throw UsageError(fmt::format("machine {}: the {} fit point {} matches no tile-layout row of {}", m.path,
                                   kRngStripUnit, fp.axes.dump(), fp.report));
  }
  return out;
}

std::vector<KernelPoint> wgmma_bwd_report_points(const Profile& p, const std::string& root) {
  std::vector<KernelPoint> out;
  if (!p.wgmma_bwd) return out;
  for (const std::string& rep : p.wgmma_bwd->fit_reports) {
    const MeasuredReport r = load_measured_report(root.empty() ? rep : root + "/" + rep, "kernels.attention_bwd_wgmma.fit_reports");
    size_t n = 0;
    for (const json& pt : r.doc.at("points")) {
      const Workload w = workload_of(pt.at("workload"), r.path);
      for (const json& v : pt.at("variants")) {
        const std::string mode = v.value("name", "");
        if (v.value("peer", false) || !wgmma_bwd_fit_row(p, r.command, w, mode)) continue;
        const json& st = v.at("stats");
        if (!(median_of(st) > 0) || !(clock_of(st) > 0)) continue;
        out.push_back({rep + " " + pt.value("axes", json::object()).dump() + " " + mode, w, median_of(st), clock_of(st), mode});
        ++n;
      }
    }
    if (n == 0)
      throw UsageError(fmt::format("profile {}: kernels.attention_bwd_wgmma.fit_reports: {} has no timed wgmma backward "
                                   "row at head_dim {}",
                                   p.path, rep, p.wgmma_bwd->head_dim));
  }
  return out;
}

std::vector<KernelPoint> gemm_report_points(const Machine& m, const std::string& dtype, const std::string& root) {
  std::vector<KernelPoint> out;
  auto g = m.gemm_tiles.find(dtype);
  if (g == m.gemm_tiles.end()) return out;
  const std::string what = "gemm_tile_model." + dtype + ".fit_reports";
  for (const std::string& rep : g->second.fit_reports) {
    const MeasuredReport r = load_measured_report(root.empty() ? rep : root + "/" + rep, what);
    size_t n = 0;
    for (const json& pt : r.doc.at("points")) {
      const Workload w = workload_of(pt.at("workload"), r.path);
      if (r.command != "gemm" || w.dtype != dtype) continue;
      for (const json& v : pt.at("variants")) {
        if (v.value("peer", false) || v.value("name", "") != "cublaslt") continue;
        const json* st = stats_for(r.command, v, "gemm");
        if (!st || !(median_of(*st) > 0) || !(clock_of(*st) > 0)) continue;
        out.push_back({rep + " " + pt.value("axes", json::object()).dump(), w, median_of(*st), clock_of(*st)});
        ++n;
      }
    }
    if (n == 0)
      throw UsageError(fmt::format("machine {}: {}: {} has no timed {} `dropbench gemm` row", m.path, what, rep, dtype));
  }
  return out;
}

ErrStats err_stats(const std::vector<double>& e) {
  ErrStats s;
  s.n = e.size();
  if (e.empty()) return s;
  for (double x : e) {
    s.mean += std::fabs(x);
    s.max = std::max(s.max, std::fabs(x));
  }
  s.mean /= static_cast<double>(e.size());
  if (e.size() > 1) {
    double acc = 0;
    for (double x : e) acc += (std::fabs(x) - s.mean) * (std::fabs(x) - s.mean);
    s.stdev = std::sqrt(acc / static_cast<double>(e.size() - 1));
  }
  return s;
}

std::string piece_kind(const std::string& piece) {
  const size_t eq = piece.find(" = ");
  return eq == std::string::npos ? piece : piece.substr(eq + 3);
}

ReportErrors report_errors(const std::vector<ReportRow>& rows) {
  std::vector<double> held, held_clk, held_np, held_sus, held_sus_np, composed, all;
  std::map<std::string, std::vector<double>> by_piece;
  std::map<std::string, std::set<std::string>> sources;
  ReportErrors out;
  for (const ReportRow& row : rows) {
    const std::string kind = piece_kind(row.piece);
    // Compositions name no demand source of their own; a step's phases are its kernels seen again.
    if (!starts_with(kind, "pipeline:") && !starts_with(kind, "sum:") && !starts_with(kind, "train-"))
      sources[kind].insert(row.source);
    if (row.role == "composed") {
      composed.push_back(row.err());
      continue;
    }
    all.push_back(row.err());
    if (row.role == "fit") {
      ++out.fitted;
      // A power fit row's prediction without the term, and at its measured clock where it has one, does not use
      // the power.
      if (row.power_fit) {
        if (row.measured_clock > 0) held_clk.push_back(row.err_clk());
        held_np.push_back(row.err_no_power());
      }
      continue;
    }
    held.push_back(row.err());
    held_clk.push_back(row.err_clk());
    held_np.push_back(row.err_no_power());
    if (row.sustained > 0) {
      held_sus.push_back(row.err_sustained());
      held_sus_np.push_back(row.err_no_power());
    }
    by_piece[kind].push_back(row.err());
  }
  out.held_out = err_stats(held);
  out.held_out_at_measured_clock = err_stats(held_clk);
  out.held_out_no_power = err_stats(held_np);
  out.held_out_sustained = err_stats(held_sus);
  out.held_out_sustained_no_power = err_stats(held_sus_np);
  out.composed = err_stats(composed);
  out.all_including_fit = err_stats(all);
  for (const auto& [k, e] : by_piece) out.held_out_by_piece[k] = err_stats(e);
  for (const auto& [k, s] : sources) out.source_by_piece[k] = join_sources(std::vector<std::string>(s.begin(), s.end()));
  return out;
}

PowerFits fit_power(const Machine& m, const Profile& p, const std::vector<MeasuredReport>& reports) {
  if (!m.has_power())
    throw UsageError(fmt::format("--power-from: machine {} has no cap_w / static_w (needed to split static from "
                                 "dynamic energy)",
                                 m.path));
  Profile pn = p;
  pn.use_power = false;
  const Predictor pred{m, pn};
  struct Acc {
    double dyn = 0, work = 0, watts = 0;
    size_t n = 0;
    std::vector<std::string> from;
    std::vector<PowerMeasurement> on;
  };
  std::map<std::string, Acc> acc;
  PowerFits out;
  for (const MeasuredReport& r : reports) {
    for (const json& pt : r.doc.at("points")) {
      const Workload w = workload_of(pt.at("workload"), r.path);
      for (const json& v : pt.at("variants")) {
        if (v.value("peer", false)) continue;
        const std::string name = v.value("name", "");
        const std::string piece = power_piece(r.command, name, w);
        if (piece.empty()) continue;
        if (!v.contains("power") || !v.at("power").is_object()) {
          ++out.variants_without_power;
          continue;
        }
        const json& pw = v.at("power");
        // Energy and time of the same window (the power pass); the sampled median only where there is none.
        const double t_pass = num(pw, "time_per_iter_s");
        const double t = t_pass > 0 ? t_pass : median_of(v.at("stats"));
        double e_iter = num(pw, "energy_mj_per_iter") * 1e-3;
        const double watts = num(pw, "mean_w");
        if (e_iter < 0 && watts > 0) e_iter = watts * t;  // no energy counter: mean power x time
        if (!(e_iter > 0) || !(t > 0)) {
          ++out.variants_without_power;
          continue;
        }
        KernelTime kt;
        try {
          kt = pred.any(piece, w, {});
        } catch (const UsageError&) {
          continue;  // a kernel the profile cannot predict
        }
        if (kt.key.empty() || !(kt.work > 0)) continue;
        ++out.variants_with_power;
        Acc& a = acc[kt.key];
        a.dyn += std::max(0.0, e_iter - m.static_w * t);
        a.work += kt.work;
        a.watts += watts > 0 ? watts : e_iter / t;
        ++a.n;
        const json axes = pt.value("axes", json::object());
        a.from.push_back(fmt::format("{} {} {} ({:.1f} W, {:.3f} mJ/iter over {:.1f} us)", r.path, axes.dump(), name,
                                     watts > 0 ? watts : e_iter / t, e_iter * 1e3, t * 1e6));
        a.on.push_back({r.path, axes, name});
      }
    }
  }
  for (const auto& [key, a] : acc) {
    PowerFit f;
    f.key = key;
    f.dyn_j_per_work = a.dyn / a.work;
    f.mean_w = a.watts / static_cast<double>(a.n);
    f.measurements = a.n;
    f.fitted_on = a.on;
    std::string from;
    for (const std::string& s : a.from) from += (from.empty() ? "" : "; ") + s;
    f.source = fmt::format("fitted (dropbench profile --power-from): (energy per iteration - static {:g} W x time) / work, "
                           "{} measurement(s): {}",
                           m.static_w, a.n, from);
    out.kernels.push_back(f);
  }
  return out;
}

json power_json(const PowerFits& fits) {
  json j = json::object();
  for (const PowerFit& f : fits.kernels) {
    json on = json::array();
    for (const PowerMeasurement& x : f.fitted_on) on.push_back({{"report", x.report}, {"axes", x.axes}, {"variant", x.variant}});
    j[f.key] = {{"dyn_j_per_work", f.dyn_j_per_work}, {"mean_w", f.mean_w}, {"measurements", f.measurements},
                {"source", f.source}, {"fitted_on", on}};
  }
  return j;
}

}  // namespace dropbench::model
