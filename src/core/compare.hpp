// Comparing reports of one command (`dropbench compare`): reading the (point, variant) medians of a report,
// matching them to a baseline's by canonical axes + variant, the noise-aware verdict per match, the
// geometric mean of the ratios and the regression gate. Printing lives in src/cli/cmd_compare.cpp. Tested
// end to end in tests/test_compare.cpp, as a library in tests/test_compare_core.cpp.
#pragma once
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "src/core/config.hpp"

namespace dropbench::compare {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One (point, variant) of a report: what compare needs of it.
struct Entry {
  json axes = json::object();
  std::string key;  // canonical axes + variant: equal keys are the same measurement
  std::string variant;
  double median = kNaN;     // s; NaN when null
  double rel_stdev = kNaN;  // ratio; NaN when null
  double ci_low = kNaN, ci_high = kNaN;  // stats.median_ci (the median's 95 % interval); NaN when absent
};

struct LoadedReport {
  std::string path;
  std::string command;
  std::vector<Entry> entries;  // report order; duplicates of a key dropped (first wins)
  size_t duplicates = 0;
  // What makes two reports comparable; null where the report does not say (hand-written fixtures).
  json workload;              // config.workload
  json measure;               // config.measure
  json device;                // context.device.name
  std::vector<std::string> swept;  // config.sweep keys and every point's axes: excluded from the workload check
  std::string git_sha, date_utc;   // context.git_sha, context.date_utc ("" when absent)
};

// Integral floats print as integers so that 4096 and 4096.0 match; object keys are sorted so that the order
// in which a report lists its axes does not matter.
std::string canonical(const json& v);

// Throws UsageError ("compare: PATH: what") for a missing / unreadable file, not JSON, not a dropbench
// report, another schema_version, a malformed point / variant, or a negative median / rel_stdev.
LoadedReport load_report(const std::string& path);
// Every file in order (the first is the baseline); throws UsageError when a report's command differs from
// the baseline's.
std::vector<LoadedReport> load_reports(const std::vector<std::string>& paths);

// Why `cand` is not comparable with `base`: one "field A vs B" per differing workload field (the fields
// either report sweeps excepted), measure setting and device name, e.g. "workload.embed 4096 vs 8192".
// Empty when comparable. A section only one report has counts as differing ("(none)" on the other side).
std::vector<std::string> differences(const LoadedReport& base, const LoadedReport& cand);

struct Settings {
  double k = 2.0;                  // --noise-k
  double floor_pct = 1.0;          // --noise-floor (percent)
  std::optional<double> fail_pct;  // --fail-on-regression (percent)
};

// One matched (point, variant).
struct Row {
  const Entry* a = nullptr;
  const Entry* b = nullptr;
  double ratio = kNaN;      // B/A
  double threshold = kNaN;  // t in ln units: |ln(B/A)| <= t is "same"
  double ratio_low = kNaN, ratio_high = kNaN;  // B/A's interval (rule "interval")
  std::string rule;         // "interval": both medians have intervals; "noise": the rel_stdev rule
  std::string verdict;      // same | faster | slower | n/a
  bool regression = false;
};

// Entries point into the two LoadedReports, which must outlive it.
struct Comparison {
  const LoadedReport* base = nullptr;
  const LoadedReport* cand = nullptr;
  std::vector<Row> rows;  // baseline order
  std::vector<const Entry*> only_a, only_b;
  std::vector<std::string> differences;  // differences(base, cand): non-empty only when compared with --force
  double geomean = kNaN;  // over the rows with a finite ratio
  size_t n_same = 0, n_faster = 0, n_slower = 0, n_na = 0, n_regressions = 0;
};

// Both medians with intervals (reports with intervals): B/A's interval from the two as independent estimates
// (bootstrap.hpp ratio_of_independent), t = max(its larger ln half-width, ln(1 + floor/100)). Otherwise
// t = max(k * sqrt(noiseA^2 + noiseB^2), ln(1 + floor/100)). Regression: ln(B/A) > t + ln(1 + fail/100).
Row judge(const Entry& a, const Entry& b, const Settings& s);
Comparison compare_reports(const LoadedReport& base, const LoadedReport& cand, const Settings& s);

// Every figure unrounded (times in seconds), the --format json document.
json comparisons_json(const std::vector<Comparison>& cs, const Settings& s);

}  // namespace dropbench::compare
