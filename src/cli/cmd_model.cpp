// `dropbench model`: the resource model (docs/model.md) on a config's sweep points, or against a measured
// report (predicted vs measured per point and variant, with the model error). CPU only.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/model/model.hpp"
#include "src/cli/model_cli.hpp"

namespace dropbench {

namespace mcli {

std::string default_path(const std::string& rel) {
#ifdef DROPBENCH_MODEL_ROOT
  std::ifstream probe(rel);
  if (!probe) {
    const std::string alt = std::string(DROPBENCH_MODEL_ROOT) + "/" + rel;
    std::ifstream p2(alt);
    if (p2) return alt;
  }
#endif
  return rel;
}

std::string us(double seconds) { return fmt_num(seconds * 1e6); }

std::string cell(const model::KernelTime& t) { return fmt::format("{} ({})", us(t.seconds), t.limiter); }

}  // namespace mcli

namespace {

using model::KernelTime;
using model::Options;

struct ModelOpts {
  std::string machine = "configs/machines/h200.json";
  std::string profile = "configs/profiles/h200.json";
  std::string config;
  std::vector<std::string> sets;
  std::string report;
  std::string clock = "model";
  std::string residency = "auto";
  std::string format = "md";
  bool uncalibrated = false;
  bool fit = false;
  std::string demand = "ncu";
};

// One comparison: a measured median against a prediction.
struct Row {
  json axes;
  std::string variant, piece;
  double measured = 0, predicted = 0, predicted_at_measured_clock = 0, measured_clock = 0;
  std::string limiter;
  std::string source;  // demand source of the prediction (ncu | ncu(nc) | sass | hand, joined by + for several)
  std::string role;  // fit | held-out | composed
  std::string fit_unit;
  double fit_unit_seconds_uncal = 0;  // the fitted unit's time at efficiency 1 (for --fit)
  double err() const { return (predicted - measured) / measured; }
  double err_clk() const { return (predicted_at_measured_clock - measured) / measured; }
};

Workload workload_of(const json& wj, const std::string& where) {
  json cfg = {{"name", "report-point"}, {"workload", wj}};
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

// Predicted kernel / pipeline time of `piece` for workload w at options o; .source: where the demand came from.
struct Predictor {
  const model::Machine& m;
  const model::Profile& p;
  KernelTime kernel(const std::string& piece, const Workload& w, const Options& o) const {
    std::string src;
    KernelTime t;
    if (piece == "gemm") {
      const auto& g = p.gemm.at(w.dtype);
      const model::Demand d = model::gemm_demand(p, w, &src);
      t = model::kernel_time(m, "gemm", d, model::kernel_clock(m, g.clock, o), model::options_for(o, p, src));
    } else if (piece.rfind("rng:", 0) == 0) {
      const std::string layout = piece.substr(4);
      const model::Demand d = model::rng_demand(p, w, layout, {}, &src);
      t = model::kernel_time(m, "rng", d, model::kernel_clock(m, p.rng_clock, o), model::options_for(o, p, src));
    } else if (piece.rfind("attention:", 0) == 0) {
      const std::string mode = piece.substr(10);
      model::AttnWork a;
      const model::Demand d = model::attention_demand(p, w, mode, {}, &a, &src);
      const double factor = model::tail_factor(a.cta_iterations, static_cast<double>(w.batch) * w.q_heads,
                                               m.sm_count * p.attn_ctas_per_sm);
      t = model::kernel_time(m, "attention(" + mode + ")", d, model::kernel_clock(m, p.attn_clock, o),
                             model::options_for(o, p, src), 1.0, factor);
    } else {
      throw UsageError("model: unknown piece " + piece);
    }
    t.source = src;
    return t;
  }
  KernelTime pipeline(const std::string& name, const Workload& w, const Options& o) const {
    const model::Prediction pr = model::predict(m, p, w, o);
    const model::PipelineTime* pt = pr.pipeline(name);
    if (!pt) throw UsageError("model: unknown pipeline " + name);
    KernelTime t;
    t.name = name;
    t.seconds = pt->seconds;
    t.limiter = pt->limiter;
    t.source = model::pipeline_source(pr, name);
    return t;
  }
  KernelTime any(const std::string& piece, const Workload& w, const Options& o) const {
    if (piece.rfind("pipeline:", 0) == 0) return pipeline(piece.substr(9), w, o);
    if (piece.rfind("sum:", 0) == 0) {  // "sum:rng:tile+attention:mask": serial kernels with a launch gap
      const std::string rest = piece.substr(4);
      const size_t plus = rest.find('+');
      const KernelTime a = kernel(rest.substr(0, plus), w, o), b = kernel(rest.substr(plus + 1), w, o);
      KernelTime t;
      t.name = piece;
      t.seconds = a.seconds + b.seconds + m.launch_gap_us * 1e-6;
      t.limiter = a.seconds >= b.seconds ? a.limiter : b.limiter;
      t.source = model::join_sources({a.source, b.source});
      return t;
    }
    return kernel(piece, w, o);
  }
};

// (variant, phase or "" for the whole variant, piece) comparisons for one report point.
std::vector<std::tuple<std::string, std::string, std::string>> comparisons(const std::string& command, const json& v,
                                                                          const Workload& w) {
  const std::string name = v.value("name", "");
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  if (command == "rng") {
    if (w.layout == "tile" || w.layout == "bits") out.emplace_back(name, "gen", "rng:" + w.layout);
  } else if (command == "attention") {
    if (name == "none" || name == "mask" || name == "fused") out.emplace_back(name, "attention", "attention:" + name);
    if (name == "fused") out.emplace_back(name, "attention", "attention:fused-composed");
    if (name == "rng+mask") {
      out.emplace_back(name, "gen", "rng:tile");
      out.emplace_back(name, "attention", "attention:mask");
      out.emplace_back(name, "", "sum:rng:tile+attention:mask");
    }
  } else if (command == "gemm") {
    out.emplace_back(name, "gemm", "gemm");
  } else if (command == "run") {
    // Pipelines as wholes; the phases of the serial ones; the pieces measured alone. Overlap-mechanism
    // variants ("mech:...") and chunk-level pieces are not compared.
    if (name == "baseline" || name == "fused" || name == "overlap" || name == "chunked")
      out.emplace_back(name, "", "pipeline:" + name);
    if (name == "baseline") {
      out.emplace_back(name, "gemm", "gemm");
      out.emplace_back(name, "rng", "rng:tile");
      out.emplace_back(name, "attention", "attention:mask");
    }
    if (name == "fused") {
      out.emplace_back(name, "gemm", "gemm");
      out.emplace_back(name, "attention", "attention:fused");
    }
    if (name == "alone:gemm") out.emplace_back(name, "gemm", "gemm");
    if (name == "alone:rng") out.emplace_back(name, "rng", "rng:tile");
    if (name == "alone:attention-mask") out.emplace_back(name, "attention", "attention:mask");
    if (name == "alone:attention-fused") out.emplace_back(name, "attention", "attention:fused");
  }
  return out;
}

struct ErrStats {
  size_t n = 0;
  double mean = 0, stdev = 0, max = 0;
};

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

std::string pct(double x) {
  const double v = std::round(1000 * x) / 10 + 0.0;  // one decimal, no "-0.0"
  return fmt::format("{:+.1f}", v == 0 ? 0.0 : v);
}

int run_report(const ModelOpts& mo, const model::Machine& m, const model::Profile& p) {
  std::ifstream f(mo.report);
  if (!f) throw UsageError(fmt::format("--report: cannot open '{}'", mo.report));
  json r;
  try {
    r = json::parse(f);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("--report: '{}' is not valid JSON ({})", mo.report, e.what()));
  }
  if (!r.is_object() || r.value("schema", "") != "dropbench.report")
    throw UsageError(fmt::format("--report: '{}' is not a dropbench report (schema != \"dropbench.report\")", mo.report));
  if (r.value("schema_version", 0) != 1)
    throw UsageError(fmt::format("--report: '{}' has schema_version {} (this dropbench reads 1)", mo.report,
                                 r.value("schema_version", 0)));
  const std::string command = r.value("command", "");
  if (command != "rng" && command != "attention" && command != "gemm" && command != "run")
    throw UsageError(fmt::format("--report: command '{}' is not modelled (allowed: rng, attention, gemm, run)", command));

  Options o;
  o.clock = mo.clock == "report" ? "model" : mo.clock;
  o.residency = mo.residency;
  o.calibrated = !mo.uncalibrated;
  Options ou = o;
  ou.calibrated = false;
  const Predictor pred{m, p};
  std::vector<Row> rows;
  size_t skipped = 0;
  for (const json& pt : r.at("points")) {
    const json axes = pt.value("axes", json::object());
    const Workload w = workload_of(pt.at("workload"), mo.report);
    for (const json& v : pt.at("variants")) {
      if (v.value("peer", false)) continue;
      const auto cmp = comparisons(command, v, w);
      if (cmp.empty()) ++skipped;
      for (const auto& [variant, phase, piece] : cmp) {
        const json* stats = &v.at("stats");
        if (!phase.empty()) {
          const json* ph = find_phase(v, phase);
          if (ph) stats = &ph->at("stats");
          else if (command == "run" || command == "attention") continue;  // that phase was not timed
        }
        Row row;
        row.axes = axes;
        row.variant = variant;
        row.piece = phase.empty() ? piece : phase + " = " + piece;
        row.measured = median_of(*stats);
        row.measured_clock = clock_of(*stats);
        if (row.measured <= 0) continue;
        KernelTime t;
        try {
          t = pred.any(piece, w, o);
        } catch (const UsageError& e) {
          ++skipped;
          continue;
        }
        row.predicted = t.seconds;
        row.limiter = t.limiter;
        row.source = t.source;
        Options oc = o;
        oc.clock_mhz = row.measured_clock;
        row.predicted_at_measured_clock = row.measured_clock > 0 ? pred.any(piece, w, oc).seconds : t.seconds;
        row.role = piece == "attention:fused-composed" ? "composed" : "held-out";
        for (const model::FitPoint& fp : m.fit_points) {
          if (fp.command == command && fp.variant == variant && axes_match(fp.axes, axes) &&
              piece.rfind("sum:", 0) != 0 && piece.rfind("pipeline:", 0) != 0 && row.role != "composed") {
            row.role = "fit";
            row.fit_unit = fp.unit;
            row.fit_unit_seconds_uncal = pred.any(piece, w, ou).unit_seconds(fp.unit);
          }
        }
        rows.push_back(row);
      }
    }
  }
  if (mo.clock == "report")
    for (Row& row : rows) row.predicted = row.predicted_at_measured_clock;

  // Table.
  Table t;
  std::vector<std::string> axis_names;
  for (const Row& row : rows)
    for (const auto& [k, v] : row.axes.items())
      if (std::find(axis_names.begin(), axis_names.end(), k) == axis_names.end()) axis_names.push_back(k);
  t.columns = axis_names;
  for (const char* c : {"variant", "piece", "measured_us", "predicted_us", "err_%", "limiter", "demand", "role"})
    t.columns.push_back(c);
  for (const Row& row : rows) {
    std::vector<std::string> cells;
    for (const std::string& a : axis_names) {
      if (!row.axes.contains(a)) cells.push_back("");
      else if (row.axes.at(a).is_string()) cells.push_back(row.axes.at(a).get<std::string>());
      else cells.push_back(row.axes.at(a).dump());
    }
    cells.insert(cells.end(), {row.variant, row.piece, mcli::us(row.measured), mcli::us(row.predicted), pct(row.err()),
                               row.limiter, row.source, row.role});
    t.rows.push_back(cells);
  }

  std::vector<double> held, held_clk, composed, fitted, all;
  std::map<std::string, std::vector<double>> by_piece;
  for (const Row& row : rows) {
    if (row.role == "composed") {
      composed.push_back(row.err());
      continue;
    }
    all.push_back(row.err());
    if (row.role == "fit") {
      fitted.push_back(row.err());
      continue;
    }
    held.push_back(row.err());
    held_clk.push_back(row.err_clk());
    std::string kind = row.piece;
    const size_t eq = kind.find(" = ");
    if (eq != std::string::npos) kind = kind.substr(eq + 3);
    by_piece[kind].push_back(row.err());
  }
  const ErrStats sh = err_stats(held), sc = err_stats(held_clk), sp = err_stats(composed), sa = err_stats(all);
  json summary = {{"report", mo.report},
                  {"command", command},
                  {"machine", m.path},
                  {"profile", p.path},
                  {"calibrated", !mo.uncalibrated},
                  {"clock", mo.clock},
                  {"rows", rows.size()},
                  {"skipped_variants", skipped},
                  {"held_out", {{"n", sh.n}, {"mean_abs_err", sh.mean}, {"stdev_abs_err", sh.stdev}, {"max_abs_err", sh.max}}},
                  {"held_out_at_measured_clock",
                   {{"n", sc.n}, {"mean_abs_err", sc.mean}, {"stdev_abs_err", sc.stdev}, {"max_abs_err", sc.max}}},
                  {"all_including_fit", {{"n", sa.n}, {"mean_abs_err", sa.mean}, {"stdev_abs_err", sa.stdev}}},
                  {"fused_composed", {{"n", sp.n}, {"mean_abs_err", sp.mean}, {"stdev_abs_err", sp.stdev}}}};
  json per = json::object();
  for (const auto& [k, e] : by_piece) {
    const ErrStats s = err_stats(e);
    per[k] = {{"n", s.n}, {"mean_abs_err", s.mean}, {"stdev_abs_err", s.stdev}, {"max_abs_err", s.max}};
  }
  summary["held_out_by_piece"] = per;
  // Where each kernel's demand came from (kernel pieces; pipelines and sums combine them).
  std::map<std::string, std::set<std::string>> src_by_piece;
  for (const Row& row : rows) {
    std::string kind = row.piece;
    if (const size_t eq = kind.find(" = "); eq != std::string::npos) kind = kind.substr(eq + 3);
    if (kind.rfind("pipeline:", 0) == 0 || kind.rfind("sum:", 0) == 0) continue;
    src_by_piece[kind].insert(row.source);
  }
  json srcj = json::object();
  std::string src_line;
  for (const auto& [k, v] : src_by_piece) {
    const std::string joined = model::join_sources(std::vector<std::string>(v.begin(), v.end()));
    srcj[k] = joined;
    src_line += fmt::format("{}{}: {}", src_line.empty() ? "" : ", ", k, joined);
  }
  summary["demand"] = {{"preference", mo.demand}, {"source_by_piece", srcj}};
  json fits = json::array();
  for (const Row& row : rows) {
    if (row.role != "fit") continue;
    fits.push_back({{"unit", row.fit_unit},
                    {"axes", row.axes},
                    {"variant", row.variant},
                    {"measured_s", row.measured},
                    {"unit_time_at_efficiency_1_s", row.fit_unit_seconds_uncal},
                    {"efficiency", row.fit_unit_seconds_uncal / row.measured}});
  }
  summary["fit_points"] = fits;

  if (mo.format == "json") {
    json out = {{"rows", table_to_json(t)}, {"summary", summary}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << render(t, mo.format);
  if (mo.format == "csv") return 0;
  std::cout << fmt::format(
      "\nmodel error on {} ({}; machine {}, {}; clock: {}):\n"
      "  held out ({} comparisons): mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n"
      "  held out, each point at its measured SM clock: mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n",
      mo.report, command, m.name, mo.uncalibrated ? "uncalibrated" : "calibrated", mo.clock, sh.n, 100 * sh.mean,
      100 * sh.stdev, 100 * sh.max, 100 * sc.mean, 100 * sc.stdev, 100 * sc.max);
  for (const auto& [k, e] : by_piece) {
    const ErrStats s = err_stats(e);
    std::cout << fmt::format("    {:<32} n={:<3} mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n", k, s.n, 100 * s.mean,
                             100 * s.stdev, 100 * s.max);
  }
  std::cout << fmt::format("  demand (--demand {}): {}\n    {}\n", mo.demand, src_line, model::kSourceLegend);
  if (sp.n)
    std::cout << fmt::format(
        "  fused attention composed as mask kernel + RNG demand (the paper's composition), {} comparisons: mean "
        "|err| {:.1f}%, stdev {:.1f}%\n",
        sp.n, 100 * sp.mean, 100 * sp.stdev);
  if (!fitted.empty()) {
    std::cout << "  fit points (excluded above):";
    for (const Row& row : rows)
      if (row.role == "fit") std::cout << fmt::format(" {} {} {} err {}%;", row.fit_unit, row.axes.dump(), row.variant, pct(row.err()));
    std::cout << "\n";
  }
  if (skipped) std::cout << fmt::format("  {} variant(s) not modelled (peer, layout or mode without a profile)\n", skipped);
  if (mo.fit) {
    std::cout << "\nefficiency fit (one factor per unit = the unit's time at efficiency 1 / measured):\n";
    for (const Row& row : rows) {
      if (row.role != "fit") continue;
      std::cout << fmt::format("  {:<8} {:.4f}   from {} {} (measured {} us, unit time at efficiency 1: {} us)\n",
                               row.fit_unit, row.fit_unit_seconds_uncal / row.measured, row.axes.dump(), row.variant,
                               mcli::us(row.measured), mcli::us(row.fit_unit_seconds_uncal));
    }
  }
  return 0;
}

int run_sweep(const ModelOpts& mo, const model::Machine& m, const model::Profile& p) {
  Config cfg = mo.config.empty() ? builtin_config() : load_config(mo.config);
  for (const std::string& s : mo.sets) apply_override(cfg, s);
  const std::vector<SweepPoint> pts = expand_sweep(cfg, {"sq", "embed", "rounds", "causal"});
  Options o;
  o.clock = mo.clock;
  o.residency = mo.residency;
  o.calibrated = !mo.uncalibrated;
  Table t;
  std::vector<std::string> axis_names;
  for (const SweepPoint& sp : pts)
    for (const auto& [k, v] : sp.axes.items())
      if (std::find(axis_names.begin(), axis_names.end(), k) == axis_names.end()) axis_names.push_back(k);
  t.columns = axis_names;
  for (const char* c : {"gemm_us", "rng_us", "attn_mask_us", "attn_fused_us", "baseline_us", "fused_us", "overlap_us",
                        "chunked_us", "best", "demand", "overlap_how"})
    t.columns.push_back(c);
  json points = json::array();
  for (const SweepPoint& sp : pts) {
    const model::Prediction pr = model::predict(m, p, sp.workload, o);
    std::vector<std::string> cells;
    for (const std::string& a : axis_names) cells.push_back(sp.axes.contains(a) ? sp.axes.at(a).dump() : "");
    const model::PipelineTime* best = &pr.pipelines.front();
    for (const auto& pl : pr.pipelines)
      if (pl.seconds < best->seconds) best = &pl;
    cells.insert(cells.end(), {mcli::cell(pr.gemm), mcli::cell(pr.rng), mcli::cell(pr.attn_mask), mcli::cell(pr.attn_fused)});
    for (const auto& pl : pr.pipelines) cells.push_back(fmt::format("{} ({})", mcli::us(pl.seconds), pl.limiter));
    cells.push_back(best->name);
    cells.push_back(model::kernel_sources(pr));
    cells.push_back(pr.pipeline("overlap")->detail);
    t.rows.push_back(cells);
  }
  std::cout << render(t, mo.format);
  if (mo.format == "md")
    std::cout << fmt::format("\nmachine {} ({}), profile {}; cells: predicted us (limiting unit); clock: {}; "
                             "residency: {}; --demand {}\n{}\n",
                             m.name, m.path, p.path, mo.clock, mo.residency, mo.demand, model::kSourceLegend);
  return 0;
}

}  // namespace

Command make_model_command() {
  auto mo = std::make_shared<ModelOpts>();
  Command c;
  c.name = "model";
  c.summary = "Resource model (CPU): predicted kernel and pipeline times, limiting units, model error vs a report";
  c.help =
      "Predicts each kernel's time as the maximum over the units it loads (tensor cores, issue, ALU, IMAD, FMA,\n"
      "MUFU, LSU, shared memory, register file, HBM, L2) of demand / (rate x efficiency), from a machine file and\n"
      "a kernel demand profile, and composes the pipelines: baseline = GEMM + RNG + attention(mask); fused = GEMM +\n"
      "attention generating its bits; overlap = GEMM || RNG (co-resident if the residency allows, else SM\n"
      "partition or serial) + attention(mask); chunked = attention(chunk i) || RNG(chunk i+1). docs/model.md.\n"
      "Without --report: one row per sweep point of --config (axes sq, embed, rounds, causal).\n"
      "With --report FILE (a dropbench rng, attention, gemm or run report): predicted vs measured per point and\n"
      "variant, err = (pred - meas) / meas, and the mean / stdev of |err| over the points not used for the\n"
      "efficiency fit (the machine file's calibration.fit_points).\n"
      "Demand: --demand ncu (default) takes each kernel's demand from its Nsight Compute counts where the profile\n"
      "holds them (`dropbench profile`), carried to the shape by the static structure, with the profile's\n"
      "ncu_calibration efficiencies; other kernels use their static (SASS / hand-written) counts. --demand sass:\n"
      "static counts only. The demand column / line says which source each kernel's demand came from.\n"
      "Examples:\n"
      "  dropbench model --config configs/llama3-70b.json\n"
      "  dropbench model --report results/h200/foundation/rng_2g.json\n"
      "  dropbench model --report results/h200/kernels/gemm.json --uncalibrated --fit\n"
      "Needs no GPU.";
  c.sweeps = false;
  c.add_options = [mo](CLI::App& app) {
    app.add_option("--machine", mo->machine, "Machine description (configs/machines/*.json)");
    app.add_option("--profile", mo->profile, "Kernel demand profile (configs/profiles/*.json)");
    app.add_option("--config", mo->config, "Config whose sweep points to predict (default: the built-in quick config)");
    app.add_option("--set", mo->sets, "Override a config field (as for the measuring commands; repeatable)")
        ->take_all()
        ->allow_extra_args(false);
    app.add_option("--report", mo->report, "Compare with this measured report (rng, attention, gemm or run)");
    app.add_option("--clock", mo->clock,
                   "SM clock of each kernel: model (the profile's max/sustained per kernel), max, sustained, or report "
                   "(each point's measured mean clock; --report only)")
        ->check(CLI::IsMember({"model", "max", "sustained", "report"}));
    app.add_option("--residency", mo->residency,
                   "RNG beside the GEMM (overlap) / attention (chunked): auto (from registers), serial, coresident, "
                   "coresident:WARPS");
    app.add_flag("--uncalibrated", mo->uncalibrated, "Every unit efficiency = 1 (the rates as sourced)");
    app.add_flag("--fit", mo->fit, "With --report: print the efficiency each fit point implies for its unit");
    app.add_option("--demand", mo->demand,
                   "Kernel demand: ncu (measured Nsight Compute counts where the profile holds them, static counts "
                   "otherwise) or sass (static SASS / hand-written counts only)")
        ->check(CLI::IsMember({"ncu", "sass"}));
    app.add_option("--format", mo->format, "md | csv | json")->check(CLI::IsMember({"md", "json", "csv"}));
  };
  c.run = [mo](RunContext&) {
    const model::Machine m = model::load_machine(mcli::default_path(mo->machine));
    model::Profile p = model::load_profile(mcli::default_path(mo->profile));
    p.use_ncu = mo->demand == "ncu";
    if (!mo->report.empty()) {
      if (!mo->config.empty() || !mo->sets.empty())
        throw UsageError("--report: the points come from the report; --config / --set do not apply");
      return run_report(*mo, m, p);
    }
    if (mo->clock == "report") throw UsageError("--clock report needs --report");
    if (mo->fit) throw UsageError("--fit needs --report");
    return run_sweep(*mo, m, p);
  };
  return c;
}

}  // namespace dropbench
