// The resource model against a measured report (`dropbench model --report`): which pieces of which report
// variants the model predicts, predicted vs measured per (point, variant, piece), the rows that are the
// machine's efficiency-fit points, and the error statistics over the rest. Printing lives in
// src/cli/cmd_model.cpp. Tested in tests/test_model_report.cpp.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "src/model/model.hpp"

namespace dropbench::model {

// A report the model can be compared with: schema dropbench.report v1 of command rng, attention, gemm or run.
struct MeasuredReport {
  std::string path, command;
  json doc;
};
// Throws UsageError ("<who>: ...", who = the option that named the file) for a missing / unparsable file, another
// schema, a malformed point or an unmodelled command.
MeasuredReport load_measured_report(const std::string& path, const std::string& who = "--report");

// The newest committed reports of `command` (rng, attention, gemm, run) at `pass` below a machine's results folder
// (e.g. results/h200, any depth): of the measured reports of that command whose every point is of that pass
// (workload.pass; absent = fwd), the newest by context.date_utc and every other one built from the same git sha (the
// reports of one measuring call); none: empty. The rule the accuracy tests use, so that newly committed reports
// replace the old ones without a list.
std::vector<std::string> newest_reports(const std::string& results_dir, const std::string& command,
                                        const std::string& pass = "fwd");

// The measured phases of a training-step report variant that time the model phase `model_phase` (PhaseTime::name
// of predict_train), as sides started at one fork: an overlap "gemm || rng" / "gemm-out-dx+dw || rng" has two (the
// GEMM stream's phases, summed, and the RNG's), and ends with the later side; any other phase has one, the
// measured phase of its name less the "(mode)" suffix ("attention-bwd(regen)" -> "attention-bwd"). A side's
// phases that the report did not time (the bf16 step has no casts) are left out of its sum.
std::vector<std::vector<std::string>> train_measured_phases(const std::string& model_phase);

// One comparison: a measured median against a prediction.
struct ReportRow {
  json axes;
  std::string variant;
  // "phase = piece" when a phase of the variant is compared, else the piece. A training step's strategy: piece
  // train-step:STRATEGY (the whole step) or train-phase:MODEL_PHASE, its phase the measured ones that time it
  // ("max(gemm, rng) = train-phase:gemm || rng").
  std::string piece;
  double measured = 0, predicted = 0, predicted_at_measured_clock = 0, measured_clock = 0;
  double predicted_no_power = 0;  // without the power term (= predicted when the profile has no power data)
  // Back-to-back time of a single-kernel or whole-pipeline variant from its power pass (power.time_per_iter_s:
  // launches queued 4 deep for measure.power_time, as a training loop runs them); 0 when the report has none.
  // The power term predicts this regime: sampled medians leave gaps in which a power-capped kernel's clock
  // recovers, so they read up to ~14 % faster than sustained for the FP8 GEMM (docs/model.md, "Power").
  double sustained = 0;
  bool power_bound = false;       // the power term set the prediction
  std::string limiter;
  std::string source;  // demand source of the prediction (ncu | ncu(nc) | sass | hand, joined by + for several)
  std::string role;    // fit | held-out | composed
  std::string fit_unit;
  bool strip_fit = false;  // a row the RNG per-strip cost is fitted on (an rng_strip fit point names it)
  bool tile_fit = false;   // a GEMM row the machine's tile model is fitted on (its fit_reports name the report)
  bool power_fit = false;  // a row only the power term's fit takes (fit_unit power: mark_power_fit)
  bool bwd_fit = false;    // a backward call the wgmma backward's efficiencies are fitted on (its fit_reports)
  double fit_unit_seconds_uncal = 0;  // the fitted unit's time at efficiency 1 (for --fit)
  double fit_fixed_s = 0;             // the prediction's fixed costs (RNG strips, wgmma CTAs), not the unit's
  bool efficiency_fit() const {
    return role == "fit" && fit_unit != kRngStripUnit && fit_unit != kGemmTileUnit && fit_unit != kPowerFitUnit &&
           fit_unit != kAttentionBwdUnit;
  }
  // The rows one of the fit marks flags (strip_fit, tile_fit, power_fit, bwd_fit), whether or not an efficiency is
  // fitted on them too.
  static size_t rows_with(const std::vector<ReportRow>& rows, bool ReportRow::*mark) {
    size_t n = 0;
    for (const ReportRow& r : rows) n += r.*mark ? 1 : 0;
    return n;
  }
  double err() const { return (predicted - measured) / measured; }
  double err_clk() const { return (predicted_at_measured_clock - measured) / measured; }
  double err_no_power() const { return (predicted_no_power - measured) / measured; }
  double err_sustained() const { return sustained > 0 ? (predicted - sustained) / sustained : 0; }
  // The efficiency a fit row implies for its unit: unit time at efficiency 1 / the measured time less the fixed
  // costs the model adds to every unit (a per-strip cost is not the ALU's).
  double fit_efficiency() const { return fit_unit_seconds_uncal / (measured - fit_fixed_s); }
};

struct ReportComparison {
  std::vector<ReportRow> rows;  // report order: point, variant, piece
  size_t skipped = 0;           // variants with nothing to compare, or a piece the profile cannot predict
};

// Predicts every comparable piece of every non-peer variant of `r` with options `o` (each row also at its
// point's measured SM clock). at_measured_clock (--clock report): `predicted` is the measured-clock one.
ReportComparison compare_with_report(const Machine& m, const Profile& p, const MeasuredReport& r, const Options& o,
                                     bool at_measured_clock);

// The RNG tile kernel's measured times at the machine's rng_strip fit points (calibration.fit_points with unit
// rng_strip: every tile-layout `rng` row of the named report whose axes match, its gen phase median and mean
// clock): fit_family's report points. Report paths are relative to `root` (the repository). UsageError when a
// report is missing or no row matches.
std::vector<KernelPoint> rng_strip_points(const Machine& m, const std::string& root);
// The wgmma backward's harness-timed rows of the reports its profile section names (`fit_reports`, paths below
// root): every pass-bwd point of the wgmma kernel at the section's head_dim, variants none / mask / fused (their
// median and mean SM clock); fit_family("wgmma_bwd") fits on them. Empty without fit_reports.
std::vector<KernelPoint> wgmma_bwd_report_points(const Profile& p, const std::string& root);
// The standalone GEMM rows (`dropbench gemm`, variant cublaslt, the gemm phase's median and mean SM clock) of dtype
// `dtype` in the reports the machine's gemm_tile_model.<dtype>.fit_reports names (paths below `root`);
// fit_family("gemm_<dtype>") fits on them. Empty without fit_reports.
std::vector<KernelPoint> gemm_report_points(const Machine& m, const std::string& dtype, const std::string& root);

// |err| statistics of a set of relative errors.
struct ErrStats {
  size_t n = 0;
  double mean = 0, stdev = 0, max = 0;  // of |err|; stdev with n - 1 (0 for n < 2)
};
ErrStats err_stats(const std::vector<double>& e);

// The kernel / pipeline a row's piece names, without its phase: "gen = rng:tile" -> "rng:tile".
std::string piece_kind(const std::string& piece);

struct ReportErrors {
  // held_out_no_power also takes the power fit rows (ReportRow::power_fit), held_out_at_measured_clock those with a
  // measured clock: those predictions do not use the fitted power.
  ErrStats held_out, held_out_at_measured_clock, held_out_no_power, composed, all_including_fit;
  // Held-out rows with a sustained time: the prediction against it, and without the power term against the
  // sampled median (the pairing each regime predicts).
  ErrStats held_out_sustained, held_out_sustained_no_power;
  size_t fitted = 0;                                  // rows that are fit points (excluded from held_out)
  std::map<std::string, ErrStats> held_out_by_piece;  // by piece_kind
  // Demand sources of each kernel piece (pipelines and sums combine them), joined (join_sources).
  std::map<std::string, std::string> source_by_piece;
};
ReportErrors report_errors(const std::vector<ReportRow>& rows);

// Per-kernel power from a report whose variants carry "power" ({"mean_w", "energy_mj_per_iter", ...}: the
// lead's NVML sampler): every single-kernel variant (run: alone:gemm, alone:rng, alone:attention-mask,
// alone:attention-fused; rng / gemm / attention reports: their kernel variants) gives its kernel's dynamic
// energy per unit of work, (energy per iteration - static_w x time per iteration) / work (both from the power
// pass; the median time where a report has no power-pass time), the work as the model
// counts it at the point's workload. Several measurements of one kernel are averaged (weighted by work).
struct PowerFit {
  std::string key;             // profile kernel key (power.<key>)
  double dyn_j_per_work = 0, mean_w = 0;
  size_t measurements = 0;
  std::string source;
  std::vector<PowerMeasurement> fitted_on;  // the measurements, in the order read
};
struct PowerFits {
  std::vector<PowerFit> kernels;  // by key, sorted
  size_t variants_with_power = 0, variants_without_power = 0;
};
// Throws UsageError when the machine has no cap_w / static_w.
PowerFits fit_power(const Machine& m, const Profile& p, const std::vector<MeasuredReport>& reports);
// The profile JSON's "power" object for `fits` (kernel key -> {dyn_j_per_work, mean_w, measurements, source,
// fitted_on}).
json power_json(const PowerFits& fits);

}  // namespace dropbench::model
