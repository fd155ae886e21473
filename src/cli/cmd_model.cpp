// `dropbench model`: the resource model (docs/model.md) on a config's sweep points, or against a measured
// report (predicted vs measured per point and variant, with the model error). CPU only. The comparison with
// a report is src/model/model_report.{hpp,cpp}; this file maps the options to it and prints.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/cli/model_cli.hpp"
#include "src/model/model.hpp"
#include "src/model/model_report.hpp"

namespace dropbench {

namespace mcli {

std::string default_path(const std::string& rel) {
#ifdef DROPBENCH_MODEL_ROOT
  // Looked up, not opened: opening a FIFO would wait for a writer (the reader refuses what is not a file).
  std::error_code ec;
  if (!std::filesystem::exists(rel, ec)) {
    const std::string alt = std::string(DROPBENCH_MODEL_ROOT) + "/" + rel;
    if (std::filesystem::exists(alt, ec)) return alt;
  }
#endif
  return rel;
}

std::string us(double seconds) { return fmt_num(seconds * 1e6); }

std::string cell(const model::KernelTime& t) { return fmt::format("{} ({})", us(t.seconds), t.limiter); }

}  // namespace mcli

namespace {

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
  bool fit_kernels = false;
  std::string demand = "ncu";
  std::string power = "on";
};

// What the power term has to work with: the machine's cap / static power and the per-kernel power of the machine
// file and the profile (the machine's entry wins for a key both have).
std::string power_status(const model::Machine& m, const model::Profile& p) {
  if (!p.use_power) return "power term: off (--power off)";
  if (!m.has_power()) return fmt::format("power term: no power data (machine {} has no cap_w / static_w)", m.name);
  if (!model::power_term_on(m, p))
    return fmt::format("power term: no power data (neither machine {} nor profile {} has per-kernel power: `dropbench "
                       "profile --power-from REPORT` fits it from reports whose variants carry \"power\"); cap {:g} W, "
                       "static {:g} W",
                       m.name, p.path, m.cap_w, m.static_w);
  return fmt::format("power term: on (cap {:g} W, static {:g} W; power data for {} kernel(s) of machine {} and {} of "
                     "profile {}): a kernel cannot finish faster than its dynamic energy / (cap - static)",
                     m.cap_w, m.static_w, m.power.size(), m.name, p.power.size(), p.path);
}

size_t kernels_with_power(const model::Machine& m, const model::Profile& p) {
  std::set<std::string> keys;
  for (const auto* src : {&m.power, &p.power})
    for (const auto& [k, v] : *src) keys.insert(k);
  return keys.size();
}

std::string pct(double x) {
  const double v = std::round(1000 * x) / 10 + 0.0;  // one decimal, no "-0.0"
  return fmt::format("{:+.1f}", v == 0 ? 0.0 : v);
}

// One row per comparison: the axes (every axis seen, first-seen order), then the comparison's cells.
Table report_table(const std::vector<model::ReportRow>& rows) {
  Table t;
  std::vector<std::string> axis_names;
  for (const model::ReportRow& row : rows)
    for (const auto& [k, v] : row.axes.items())
      if (std::find(axis_names.begin(), axis_names.end(), k) == axis_names.end()) axis_names.push_back(k);
  t.columns = axis_names;
  for (const char* c : {"variant", "piece", "measured_us", "predicted_us", "err_%", "err_no_power_%", "sustained_us",
                        "err_sustained_%", "limiter", "demand", "role"})
    t.columns.push_back(c);
  for (const model::ReportRow& row : rows) {
    std::vector<std::string> cells;
    for (const std::string& a : axis_names) {
      if (!row.axes.contains(a)) cells.push_back("");
      else if (row.axes.at(a).is_string()) cells.push_back(row.axes.at(a).get<std::string>());
      else cells.push_back(row.axes.at(a).dump());
    }
    cells.insert(cells.end(), {row.variant, row.piece, mcli::us(row.measured), mcli::us(row.predicted), pct(row.err()),
                               pct(row.err_no_power()), row.sustained > 0 ? mcli::us(row.sustained) : "-",
                               row.sustained > 0 ? pct(row.err_sustained()) : "-", row.limiter, row.source, row.role});
    t.rows.push_back(cells);
  }
  return t;
}

json stats_json(const model::ErrStats& s, bool with_max = true) {
  json j = {{"n", s.n}, {"mean_abs_err", s.mean}, {"stdev_abs_err", s.stdev}};
  if (with_max) j["max_abs_err"] = s.max;
  return j;
}

// The "summary" object of --format json.
json report_summary_json(const ModelOpts& mo, const model::Machine& m, const model::Profile& p,
                         const model::MeasuredReport& r, const model::ReportComparison& c, const model::ReportErrors& e) {
  json summary = {{"report", mo.report},
                  {"command", r.command},
                  {"machine", m.path},
                  {"profile", p.path},
                  {"calibrated", !mo.uncalibrated},
                  {"clock", mo.clock},
                  {"rows", c.rows.size()},
                  {"skipped_variants", c.skipped},
                  {"held_out", stats_json(e.held_out)},
                  {"held_out_at_measured_clock", stats_json(e.held_out_at_measured_clock)},
                  {"held_out_no_power", stats_json(e.held_out_no_power)},
                  {"held_out_sustained", stats_json(e.held_out_sustained)},
                  {"held_out_sustained_no_power", stats_json(e.held_out_sustained_no_power)},
                  {"all_including_fit", stats_json(e.all_including_fit, false)},
                  {"fused_composed", stats_json(e.composed, false)}};
  json per = json::object();
  for (const auto& [k, s] : e.held_out_by_piece) per[k] = stats_json(s);
  summary["held_out_by_piece"] = per;
  json srcj = json::object();
  for (const auto& [k, v] : e.source_by_piece) srcj[k] = v;
  summary["demand"] = {{"preference", mo.demand}, {"source_by_piece", srcj}};
  size_t bound = 0;
  for (const model::ReportRow& row : c.rows) bound += row.power_bound ? 1 : 0;
  summary["power"] = {{"term", model::power_term_on(m, p)},
                      {"status", power_status(m, p)},
                      {"cap_w", m.cap_w},
                      {"static_w", m.static_w},
                      {"kernels_with_power", kernels_with_power(m, p)},
                      {"power_bound_rows", bound}};
  json fits = json::array();
  for (const model::ReportRow& row : c.rows) {
    if (!row.efficiency_fit()) continue;
    fits.push_back({{"unit", row.fit_unit},
                    {"axes", row.axes},
                    {"variant", row.variant},
                    {"measured_s", row.measured},
                    {"fixed_s", row.fit_fixed_s},
                    {"unit_time_at_efficiency_1_s", row.fit_unit_seconds_uncal},
                    {"efficiency", row.fit_efficiency()}});
  }
  summary["fit_points"] = fits;
  // Rows the RNG's per-strip cost was fitted on (--fit-kernels): excluded from held_out like the fit points.
  summary["rng_strip_fit_rows"] = model::ReportRow::rows_with(c.rows, &model::ReportRow::strip_fit);
  summary["gemm_tile_fit_rows"] = model::ReportRow::rows_with(c.rows, &model::ReportRow::tile_fit);
  summary["power_fit_rows"] = model::ReportRow::rows_with(c.rows, &model::ReportRow::power_fit);
  summary["attention_bwd_fit_rows"] = model::ReportRow::rows_with(c.rows, &model::ReportRow::bwd_fit);
  return summary;
}

// The model-error lines under the markdown table.
void print_report_errors(const ModelOpts& mo, const model::Machine& m, const model::Profile& p,
                         const model::MeasuredReport& r,
                         const model::ReportComparison& c, const model::ReportErrors& e) {
  const model::ErrStats &sh = e.held_out, &sc = e.held_out_at_measured_clock, &sp = e.composed;
  std::cout << fmt::format(
      "\nmodel error on {} ({}; machine {}, {}; clock: {}):\n"
      "  held out ({} comparisons): mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n"
      "  held out, each point at its measured SM clock ({}): mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n"
      "  held out, without the power term ({}): mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n  {}\n",
      mo.report, r.command, m.name, mo.uncalibrated ? "uncalibrated" : "calibrated", mo.clock, sh.n, 100 * sh.mean,
      100 * sh.stdev, 100 * sh.max, sc.n, 100 * sc.mean, 100 * sc.stdev, 100 * sc.max, e.held_out_no_power.n,
      100 * e.held_out_no_power.mean, 100 * e.held_out_no_power.stdev, 100 * e.held_out_no_power.max,
      power_status(m, p));
  if (e.held_out_sustained.n)
    std::cout << fmt::format(
        "  held out against sustained (power-pass) times, {} comparisons: mean |err| {:.1f}%, stdev {:.1f}%, max "
        "{:.1f}%; the same rows without the power term against sampled medians: mean |err| {:.1f}%\n",
        e.held_out_sustained.n, 100 * e.held_out_sustained.mean, 100 * e.held_out_sustained.stdev,
        100 * e.held_out_sustained.max, 100 * e.held_out_sustained_no_power.mean);
  for (const auto& [k, s] : e.held_out_by_piece)
    std::cout << fmt::format("    {:<32} n={:<3} mean |err| {:.1f}%, stdev {:.1f}%, max {:.1f}%\n", k, s.n, 100 * s.mean,
                             100 * s.stdev, 100 * s.max);
  std::string src_line;
  for (const auto& [k, v] : e.source_by_piece) src_line += fmt::format("{}{}: {}", src_line.empty() ? "" : ", ", k, v);
  std::cout << fmt::format("  demand (--demand {}): {}\n    {}\n", mo.demand, src_line, model::kSourceLegend);
  if (sp.n)
    std::cout << fmt::format(
        "  fused attention composed as mask kernel + RNG demand (the paper's composition), {} comparisons: mean "
        "|err| {:.1f}%, stdev {:.1f}%\n",
        sp.n, 100 * sp.mean, 100 * sp.stdev);
  // Power fit rows are left out of the held-out and sustained lines only: their predictions without the term and
  // at the measured clock do not use the fitted power.
  for (const bool power : {false, true}) {
    std::string line;
    for (const model::ReportRow& row : c.rows)
      if (row.role == "fit" && row.power_fit == power)
        line += fmt::format(" {} {} {} err {}%;", row.fit_unit, row.axes.dump(), row.variant, pct(row.err()));
    if (!line.empty())
      std::cout << (power ? "  power fit rows (excluded from the held-out and sustained lines, kept in the "
                            "measured-clock and no-power ones):"
                          : "  fit points (excluded above):")
                << line << "\n";
  }
  if (c.skipped)
    std::cout << fmt::format("  {} variant(s) not modelled (peer, layout or mode without a profile)\n", c.skipped);
}

// --fit: the efficiency each fit point implies for its unit.
void print_fit(const std::vector<model::ReportRow>& rows) {
  std::cout << "\nefficiency fit (one factor per unit = the unit's time at efficiency 1 / measured):\n";
  for (const model::ReportRow& row : rows) {
    if (!row.efficiency_fit()) continue;
    std::cout << fmt::format("  {:<8} {:.4f}   from {} {} (measured {} us less fixed costs {} us, unit time at "
                             "efficiency 1: {} us)\n",
                             row.fit_unit, row.fit_efficiency(), row.axes.dump(), row.variant, mcli::us(row.measured),
                             mcli::us(row.fit_fixed_s), mcli::us(row.fit_unit_seconds_uncal));
  }
  if (const size_t strip_rows = model::ReportRow::rows_with(rows, &model::ReportRow::strip_fit))
    std::cout << fmt::format("  ({} row(s) are the RNG per-strip cost's fit points: `dropbench model --fit-kernels`)\n",
                             strip_rows);
  if (const size_t tile_rows = model::ReportRow::rows_with(rows, &model::ReportRow::tile_fit))
    std::cout << fmt::format("  ({} row(s) are the GEMM tile model's fit points: `dropbench model --fit-kernels`)\n",
                             tile_rows);
  if (const size_t bwd_rows = model::ReportRow::rows_with(rows, &model::ReportRow::bwd_fit))
    std::cout << fmt::format(
        "  ({} row(s) are the wgmma attention backward's fit points: `dropbench model --fit-kernels`)\n", bwd_rows);
}

int run_report(const ModelOpts& mo, const model::Machine& m, const model::Profile& p) {
  const model::MeasuredReport r = model::load_measured_report(mo.report);
  Options o;
  o.clock = mo.clock == "report" ? "model" : mo.clock;  // "report": each point's own clock, set per row
  o.residency = mo.residency;
  o.calibrated = !mo.uncalibrated;
  const model::ReportComparison c = model::compare_with_report(m, p, r, o, mo.clock == "report");
  const model::ReportErrors e = model::report_errors(c.rows);
  const Table t = report_table(c.rows);
  if (mo.format == "json") {
    json out = {{"rows", table_to_json(t)}, {"summary", report_summary_json(mo, m, p, r, c, e)}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << render(t, mo.format);
  if (mo.format == "csv") return 0;
  print_report_errors(mo, m, p, r, c, e);
  if (mo.fit) print_fit(c.rows);
  return 0;
}

// --fit-kernels: each measured kernel family's own efficiencies from its ncu durations (model::fit_family).
int run_fit_kernels(const ModelOpts& mo, const model::Machine& m, const model::Profile& p) {
  std::vector<model::FamilyFit> fits;
  // The RNG's per-strip cost is fitted with the report rows the machine's rng_strip fit points name (paths from
  // the repository root, as the other defaults).
  model::Machine mr = m;
  for (model::FitPoint& fp : mr.fit_points)
    if (fp.unit == model::kRngStripUnit) fp.report = mcli::default_path(fp.report);
  const std::vector<model::KernelPoint> strip_pts = model::rng_strip_points(mr, "");
  fits.push_back(model::fit_family(m, p, "rng", strip_pts));
  if (p.wgmma) fits.push_back(model::fit_family(m, p, "wgmma"));
  if (p.wgmma_bwd) {
    model::Profile pr = p;  // the backward's fit reports, as the other defaults: paths from the repository root
    for (std::string& rep : pr.wgmma_bwd->fit_reports) rep = mcli::default_path(rep);
    fits.push_back(model::fit_family(m, p, "wgmma_bwd", model::wgmma_bwd_report_points(pr, "")));
  }
  for (const auto& [dt, g] : m.gemm_tiles) {  // the GEMMs' tile model, where the machine names reports to fit it on
    if (g.fit_reports.empty()) continue;
    model::Machine mr = m;
    for (std::string& rep : mr.gemm_tiles.at(dt).fit_reports) rep = mcli::default_path(rep);
    fits.push_back(model::fit_family(m, p, "gemm_" + dt, model::gemm_report_points(mr, dt, "")));
  }
  if (mo.format == "json") {
    json out = json::object();
    for (const model::FamilyFit& f : fits) {
      json e = json::object(), eff = json::object();
      for (const auto& [k, v] : f.errors) e[k] = v;
      for (const auto& [u, v] : f.efficiency) eff[u] = v;
      json se = json::object();
      for (const auto& [k, v] : f.strip_errors) se[k] = v;
      const bool gemm = f.family.rfind("gemm_", 0) == 0;  // its fixed cost is per wave of output tiles
      out[f.family] = {{"efficiency", eff},
                       {gemm ? "tile_overhead_cycles" : "cta_overhead_cycles", f.cta_overhead_cycles},
                       {"points", f.points},
                       {"fitted_on", f.fitted_on},
                       {"mean_abs_err", f.mean_abs_err},
                       {"max_abs_err", f.max_abs_err},
                       {"errors", e}};
      if (gemm) out[f.family]["clock_mhz"] = f.clock_mhz;
      if (f.family == "rng")
        out[f.family].update({{"strip_overhead_cycles", f.strip_overhead_cycles},
                              {"report_points", f.report_points},
                              {"strip_mean_abs_err", f.strip_mean_abs_err},
                              {"strip_max_abs_err", f.strip_max_abs_err},
                              {"strip_errors", se}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const model::FamilyFit& f : fits) {
    std::string eff;
    for (const auto& [u, v] : f.efficiency) eff += fmt::format("{}{} {:.3f}", eff.empty() ? "" : ", ", u, v);
    const bool gemm = f.family.rfind("gemm_", 0) == 0;  // the machine's GEMM tile model
    std::cout << fmt::format("{}: fitted on {} {} of {} {}: efficiency {}{}; fitted durations: mean "
                             "|err| {:.1f}%, max {:.1f}%\n",
                             f.family, f.points, f.fitted_on, gemm ? "machine" : "profile", gemm ? m.path : p.path, eff,
                             f.family == "rng" ? ""
                             : gemm
                                 ? fmt::format(", tile_overhead_cycles {:.0f} per wave (rows at {:.0f} MHz, "
                                               "time-weighted)",
                                               f.cta_overhead_cycles, f.clock_mhz)
                                 : fmt::format(", cta_overhead_cycles {:.0f}", f.cta_overhead_cycles),
                             100 * f.mean_abs_err, 100 * f.max_abs_err);
    for (const auto& [k, v] : f.errors) std::cout << fmt::format("    {:<28} {}%\n", k, pct(v));
    if (f.report_points) {
      std::cout << fmt::format("{}: per-strip cost {:.0f} SM cycles, fitted on {} report rows (the machine's {} fit "
                               "points) with the time carried from each kernel's ncu launch: mean |err| {:.1f}%, max "
                               "{:.1f}%\n",
                               f.family, f.strip_overhead_cycles, f.report_points, model::kRngStripUnit,
                               100 * f.strip_mean_abs_err, 100 * f.strip_max_abs_err);
      for (const auto& [k, v] : f.strip_errors) std::cout << fmt::format("    {:<28} {}%\n", k, pct(v));
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

// The options of `dropbench model`.
void add_model_options(CLI::App& app, ModelOpts& mo) {
  app.add_option("--machine", mo.machine, "Machine description (configs/machines/*.json)");
  app.add_option("--profile", mo.profile, "Kernel demand profile (configs/profiles/*.json)");
  app.add_option("--config", mo.config, "Config whose sweep points to predict (default: the built-in quick config)");
  app.add_option("--set", mo.sets, "Override a config field (as for the measuring commands; repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--report", mo.report, "Compare with this measured report (rng, attention, gemm or run)");
  app.add_option("--clock", mo.clock,
                 "SM clock of each kernel: model (the profile's max/sustained per kernel), max, sustained, or report "
                 "(each point's measured mean clock; --report only)")
      ->check(CLI::IsMember({"model", "max", "sustained", "report"}));
  app.add_option("--residency", mo.residency,
                 "RNG beside the GEMM (overlap) / attention (chunked): auto (from registers), serial, coresident, "
                 "coresident:WARPS");
  app.add_flag("--uncalibrated", mo.uncalibrated, "Every unit efficiency = 1 (the rates as sourced)");
  app.add_flag("--fit", mo.fit, "With --report: print the efficiency each fit point implies for its unit");
  app.add_flag("--fit-kernels", mo.fit_kernels,
               "Fit the RNG and wgmma attention kernels' own efficiencies (and the wgmma CTA overhead) on the "
               "profile's ncu durations (kernels.rng.efficiency, kernels.attention_wgmma, "
               "kernels.attention_bwd_wgmma), and the RNG's per-strip "
               "cost on the machine's rng_strip fit points (kernels.rng.strip_overhead_cycles)");
  app.add_option("--power", mo.power,
                 "on: the power term where the profile has per-kernel power and the machine a cap (a kernel cannot "
                 "finish faster than its dynamic energy / (cap - static)); off: times only")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--demand", mo.demand,
                 "Kernel demand: ncu (measured Nsight Compute counts where the profile holds them, static counts "
                 "otherwise) or sass (static SASS / hand-written counts only)")
      ->check(CLI::IsMember({"ncu", "sass"}));
  app.add_option("--format", mo.format, "md | csv | json")->check(CLI::IsMember({"md", "json", "csv"}));
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
      "efficiency fit (the machine file's calibration.fit_points). A run report of the training step\n"
      "(workload.pass train): each strategy's step and phases against the model's step; an attention report of\n"
      "pass bwd / fwd+bwd: each variant's backward call (docs/model.md).\n"
      "Demand: --demand ncu (default) takes each kernel's demand from its Nsight Compute counts where the profile\n"
      "holds them (`dropbench profile`), carried to the shape by the static structure, with the profile's\n"
      "ncu_calibration efficiencies; other kernels use their static (SASS / hand-written) counts. --demand sass:\n"
      "static counts only. The demand column / line says which source each kernel's demand came from.\n"
      "Examples:\n"
      "  dropbench model --config configs/llama3-70b.json\n"
      "  dropbench model --report results/h200/model/inputs/rng_2g_first_kernel.json\n"
      "  dropbench model --report results/h200/gemm/gemm.json --uncalibrated --fit\n"
      "Attention: the workload's attention_kernel (auto = the profile's attention_kernel_auto: wgmma on the\n"
      "H200 profile; mma = the mma.sync kernel); reports without the field are read as mma.\n"
      "Power: with per-kernel power in the profile (`dropbench profile --power-from REPORT`) and cap_w /\n"
      "static_w in the machine file, no kernel finishes faster than its dynamic energy / (cap - static), nor\n"
      "two kernels run together faster than their summed energy allows; --report then shows the error with\n"
      "and without that term (--power off: without). Without power data it says so.\n"
      "--fit-kernels: the RNG and wgmma kernels' (forward, and the backward where the profile has\n"
      "kernels.attention_bwd_wgmma) own efficiencies fitted on the profile's ncu durations, and the\n"
      "RNG tile kernel's per-strip cost on the report rows the machine's rng_strip fit points name, and\n"
      "the GEMMs' tile model (the machine's gemm_tile_model.<dtype>: mma_efficiency,\n"
      "tile_overhead_cycles) on the gemm rows of its fit_reports (scripts/refit_profile.py writes them,\n"
      "and the fit points' efficiencies, into the data files).\n"
      "Needs no GPU.";
  c.sweeps = false;
  c.add_options = [mo](CLI::App& app) { add_model_options(app, *mo); };
  c.run = [mo](RunContext&) {
    const model::Machine m = model::load_machine(mcli::default_path(mo->machine));
    model::Profile p = model::load_profile(mcli::default_path(mo->profile));
    p.use_ncu = mo->demand == "ncu";
    p.use_power = mo->power == "on";
    if (mo->fit_kernels) return run_fit_kernels(*mo, m, p);
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
