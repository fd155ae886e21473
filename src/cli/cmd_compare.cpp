// `dropbench compare A.json B.json [C.json ...]`: compares the medians of reports of one command, point by
// point and variant by variant, with a noise-aware verdict (same / faster / slower), the geometric mean of
// the ratios, the rows only one side has, and an optional regression gate for CI. Loading, matching and the
// verdict are src/core/compare.{hpp,cpp}; this file maps the options to them and prints.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/core/input.hpp"
#include "src/core/compare.hpp"
#include "src/core/report.hpp"

namespace dropbench {

namespace {

using compare::Comparison;
using compare::Entry;
using compare::LoadedReport;
using compare::Row;
using compare::Settings;

std::string point_label(const json& axes) {
  std::string out;
  for (auto it = axes.begin(); it != axes.end(); ++it) {
    if (!out.empty()) out += ' ';
    out += it.key() + '=' + axis_cell(*it);
  }
  return out.empty() ? "(no axes)" : out;
}

std::string us_cell(double seconds) { return std::isfinite(seconds) ? fmt_num(seconds * 1e6) : std::string(); }
std::string pct_cell(double rs) { return std::isfinite(rs) ? fmt_num(rs * 100.0) : std::string(); }
std::string ratio_cell(double r) { return std::isfinite(r) ? fmt::format("{:.3f}", r) : std::string(); }
std::string counts_text(const Comparison& c) {
  std::string s = fmt::format("{} faster, {} same, {} slower", c.n_faster, c.n_same, c.n_slower);
  if (c.n_na) s += fmt::format(", {} n/a", c.n_na);
  return s;
}

// The axis columns of a set of comparisons: every axis seen, in first-seen order (baseline first).
std::vector<std::string> axis_columns(const std::vector<Comparison>& cs) {
  std::vector<std::string> keys;
  auto add = [&keys](const Entry& e) {
    for (auto it = e.axes.begin(); it != e.axes.end(); ++it)
      if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  };
  if (!cs.empty())
    for (const Entry& e : cs.front().base->entries) add(e);
  for (const Comparison& c : cs)
    for (const Entry& e : c.cand->entries) add(e);
  return keys;
}

std::vector<std::string> axis_cells(const Entry& e, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    auto it = e.axes.find(k);
    out.push_back(it == e.axes.end() ? std::string() : axis_cell(*it));
  }
  return out;
}

// Matched rows plus the geomean row (md and csv); csv also gets the unmatched rows and a candidate column.
Table make_table(const std::vector<Comparison>& cs, const std::vector<std::string>& keys, bool csv, size_t which) {
  Table t;
  if (csv) t.columns.push_back("candidate");
  for (const auto& k : keys) t.columns.push_back(k);
  for (const char* col : {"variant", "A_us", "A_noise_%", "B_us", "B_noise_%", "B/A", "verdict"}) t.columns.push_back(col);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    if (!csv && ci != which) continue;
    const Comparison& c = cs[ci];
    auto start = [&](const Entry* e) {
      std::vector<std::string> row;
      if (csv) row.push_back(c.cand->path);
      for (auto& cell : e ? axis_cells(*e, keys) : std::vector<std::string>(keys.size())) row.push_back(cell);
      return row;
    };
    for (const Row& r : c.rows) {
      auto row = start(r.a);
      for (auto cell : {r.a->variant, us_cell(r.a->median), pct_cell(r.a->rel_stdev), us_cell(r.b->median),
                        pct_cell(r.b->rel_stdev), ratio_cell(r.ratio), r.verdict + (r.regression ? " (regression)" : "")})
        row.push_back(cell);
      t.rows.push_back(std::move(row));
    }
    auto row = start(nullptr);
    for (auto cell : {std::string("geomean"), std::string(), std::string(), std::string(), std::string(),
                      ratio_cell(c.geomean), counts_text(c)})
      row.push_back(cell);
    t.rows.push_back(std::move(row));
    if (csv) {
      for (const Entry* e : c.only_a) {
        auto u = start(e);
        for (auto cell : {e->variant, us_cell(e->median), pct_cell(e->rel_stdev), std::string(), std::string(),
                          std::string(), std::string("only in A")})
          u.push_back(cell);
        t.rows.push_back(std::move(u));
      }
      for (const Entry* e : c.only_b) {
        auto u = start(e);
        for (auto cell : {e->variant, std::string(), std::string(), us_cell(e->median), pct_cell(e->rel_stdev),
                          std::string(), std::string("only in B")})
          u.push_back(cell);
        t.rows.push_back(std::move(u));
      }
    }
  }
  return t;
}

std::string unmatched_text(const std::vector<const Entry*>& es, const std::string& side, const std::string& path) {
  if (es.empty()) return {};
  std::string out = fmt::format("\nOnly in {} ({}): {} row{}\n", side, path, es.size(), es.size() == 1 ? "" : "s");
  for (const Entry* e : es) out += fmt::format("- {}: {}\n", point_label(e->axes), e->variant);
  return out;
}

std::string fmt_setting(double v) { return fmt::format("{:g}", v); }

// A number option read here rather than by CLI11, whose range message prints DBL_MAX in full.
double parse_setting(const std::string& option, const std::string& text, double lo, double hi) {
  const std::string allowed = fmt::format("(allowed: [{}, {}])", fmt_setting(lo), fmt_setting(hi));
  const std::optional<double> parsed = parse_finite_number(text);
  if (!parsed) throw UsageError(fmt::format("compare: {}: '{}' is not a number {}", option, one_line(text, 40), allowed));
  const double v = *parsed;
  if (v < lo || v > hi) throw UsageError(fmt::format("compare: {}: {} is out of range {}", option, text, allowed));
  return v;
}

// "A: git abc123, 2026-11-29T18:39:28Z, NVIDIA H200" (what was measured where, when).
std::string origin_line(const char* side, const LoadedReport& r) {
  auto or_unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
  return fmt::format("{}: git {}, date {}, device {}\n", side, or_unknown(r.git_sha), or_unknown(r.date_utc),
                     r.device.is_string() ? r.device.get<std::string>() : std::string("unknown"));
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// --format md: the settings, then per candidate its summary line, table and unmatched rows.
void print_markdown(const std::vector<Comparison>& cs, const std::vector<std::string>& keys, const Settings& s) {
  const LoadedReport& base = *cs.front().base;
  std::cout << fmt::format("A = {} (baseline), command {}\n", base.path, base.command);
  std::cout << origin_line("A", base);
  std::cout << fmt::format(
      "verdict: same when |ln(B/A)| <= t = max(ln half-width of B/A's 95% interval, ln(1 + {1}%)) where both medians "
      "have intervals, else t = max({0} * sqrt(noiseA^2 + noiseB^2), ln(1 + {1}%)); B/A < 1: B faster\n",
      fmt_setting(s.k), fmt_setting(s.floor_pct));
  if (s.fail_pct) std::cout << fmt::format("regression: B/A > (1 + {}%) * exp(t)\n", fmt_setting(*s.fail_pct));
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    const Comparison& c = cs[ci];
    std::cout << fmt::format("\nB = {}: {} matched, geomean B/A {} ({})\n", c.cand->path, c.rows.size(),
                             ratio_cell(c.geomean).empty() ? "n/a" : ratio_cell(c.geomean), counts_text(c));
    std::cout << origin_line("B", *c.cand);
    if (!c.differences.empty()) std::cout << "differs from A (--force): " << joined(c.differences) << "\n";
    std::cout << "\n";
    if (c.rows.empty())
      std::cout << "(no matched rows)\n";
    else
      std::cout << render_markdown(make_table(cs, keys, false, ci));
    std::cout << unmatched_text(c.only_a, "A", c.base->path) << unmatched_text(c.only_b, "B", c.cand->path);
  }
}

// Warns on stderr about candidates with nothing in common; with --fail-on-regression, lists the regressions
// there and returns 1 if any (or if a candidate had nothing in common), else 0.
int regression_gate(const std::vector<Comparison>& cs, const Settings& s) {
  for (const Comparison& c : cs) {
    if (c.rows.empty())
      std::fprintf(stderr, "dropbench: compare: %s: no (point, variant) in common with the baseline %s\n",
                   c.cand->path.c_str(), c.base->path.c_str());
  }
  if (!s.fail_pct) return 0;
  int rc = 0;
  for (const Comparison& c : cs) {
    if (c.rows.empty()) rc = 1;
    for (const Row& r : c.rows) {
      if (!r.regression) continue;
      rc = 1;
      std::fprintf(stderr, "dropbench: compare: regression: %s: %s %s: B/A %.3f > %.3f (limit %s%% beyond noise)\n",
                   c.cand->path.c_str(), point_label(r.a->axes).c_str(), r.a->variant.c_str(), r.ratio,
                   (1.0 + *s.fail_pct / 100.0) * std::exp(r.threshold), fmt_setting(*s.fail_pct).c_str());
    }
  }
  return rc;
}

struct CompareOpts {
  std::vector<std::string> files;
  std::string format = "md";
  std::string noise_k, noise_floor, fail_pct;  // parsed in run: parse_setting
  bool force = false;
};

const char* const kCompareHelp =
    "Matches the (point, variant) rows of B.json (and of every further file) to those of the baseline A.json\n"
    "by axis values (key order and 4096 vs 4096.0 do not matter) and variant name, and prints per match:\n"
    "the axes, variant, A_us / B_us (median, microseconds), A_noise_% / B_noise_% (relative stdev), B/A\n"
    "(ratio of the medians; < 1 means B is faster) and a verdict, then a geomean row (geometric mean of the\n"
    "ratios over all matched rows) and the rows only one side has. With more files, each is compared\n"
    "against the first. --format csv adds a candidate column and the unmatched rows; --format json gives\n"
    "every figure unrounded (times in seconds).\n"
    "\n"
    "Verdict. Where both medians carry a 95% interval (stats.median_ci, reports since measure.interleave), B/A's\n"
    "interval combines the two as independent estimates and t = max(its larger ln half-width, ln(1 + FLOOR/100));\n"
    "the interval is the median's sampling uncertainty within each run, not the drift between runs, which the\n"
    "floor must cover. Otherwise t = max(K * sqrt(noiseA^2 + noiseB^2), ln(1 + FLOOR/100)), K = --noise-k\n"
    "(default 2), noise = the report's rel_stdev. FLOOR = --noise-floor in percent (default 1). Then:\n"
    "  same    |ln(B/A)| <= t          faster  ln(B/A) < -t          slower  ln(B/A) > t\n"
    "  n/a     a median is null or 0 (not in the geomean, never a regression)\n"
    "\n"
    "--fail-on-regression PCT: exit code 1 when any matched row has\n"
    "  ln(B/A) > t + ln(1 + PCT/100),  i.e.  B/A > (1 + PCT/100) * exp(t)\n"
    "(slower by more than PCT percent beyond its noise band; PCT = 0 fails on every \"slower\" row), or when a\n"
    "compared file has no row in common with the baseline. Such rows are marked \"(regression)\" and listed\n"
    "on stderr.\n"
    "\n"
    "Exit codes: 0 compared (no regression), 1 regression (only with --fail-on-regression), 2 bad input: a\n"
    "missing or unreadable file, not JSON, not a dropbench report, schema_version other than 1, reports of\n"
    "different commands, a negative median or rel_stdev, or reports that are not comparable (one line on\n"
    "stderr naming the file and what differs).\n"
    "\n"
    "Comparable: the workload fields (all but the axes either report sweeps), the device name and the\n"
    "measure settings of the config are equal. --force compares unlike reports anyway, with a warning on\n"
    "stderr listing what differs. The header names each report's git sha, date and device.\n"
    "Example:\n"
    "  dropbench compare results/h200/model/inputs/rng_quick.json results/latest/rng.json --fail-on-regression 5";

int run_compare(const CompareOpts& o) {
  if (o.files.size() < 2)
    throw UsageError(fmt::format("compare: needs at least two reports (baseline first), got {}", o.files.size()));
  Settings s;
  if (!o.noise_k.empty()) s.k = parse_setting("--noise-k", o.noise_k, 0, 100);
  if (!o.noise_floor.empty()) s.floor_pct = parse_setting("--noise-floor", o.noise_floor, 0, 100);
  if (!o.fail_pct.empty()) s.fail_pct = parse_setting("--fail-on-regression", o.fail_pct, 0, 1000);
  const std::vector<LoadedReport> reports = compare::load_reports(o.files);
  // Unlike reports give ratios that measure the difference in workload, not in code: refused up front.
  for (size_t i = 1; i < reports.size(); ++i) {
    const std::vector<std::string> d = compare::differences(reports[0], reports[i]);
    if (d.empty()) continue;
    if (!o.force)
      throw UsageError(fmt::format("compare: {}: not comparable with the baseline {}: {} (--force compares anyway)",
                                   reports[i].path, reports[0].path, joined(d)));
    std::fprintf(stderr, "dropbench: warning: compare: %s: differs from the baseline %s: %s; compared anyway (--force)\n",
                 reports[i].path.c_str(), reports[0].path.c_str(), joined(d).c_str());
  }
  for (const LoadedReport& r : reports)
    if (r.duplicates)
      std::fprintf(stderr, "dropbench: compare: %s: %zu repeated (point, variant) rows ignored (first kept)\n",
                   r.path.c_str(), r.duplicates);

  std::vector<Comparison> cs;
  for (size_t i = 1; i < reports.size(); ++i) cs.push_back(compare::compare_reports(reports[0], reports[i], s));
  const std::vector<std::string> keys = axis_columns(cs);
  if (o.format == "json")
    std::cout << compare::comparisons_json(cs, s).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  else if (o.format == "csv")
    std::cout << render_csv(make_table(cs, keys, true, 0));
  else
    print_markdown(cs, keys, s);
  std::cout << std::flush;
  return regression_gate(cs, s);
}

}  // namespace

Command make_compare_command() {
  auto o = std::make_shared<CompareOpts>();
  Command c;
  c.name = "compare";
  c.summary = "Compare reports of one command (first file = baseline): ratio and noise-aware verdict per point";
  c.help = kCompareHelp;
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    app.add_option("files", o->files, "Reports: baseline A.json first, then B.json [C.json ...]")->required();
    app.add_option("--format", o->format, "md | csv | json")->check(CLI::IsMember({"md", "json", "csv"}));
    app.add_option("--noise-k", o->noise_k, "K: how many combined standard deviations count as noise, [0, 100] (default 2)");
    app.add_option("--noise-floor", o->noise_floor, "Smallest difference (%) that can be a change, [0, 100] (default 1)");
    app.add_option("--fail-on-regression", o->fail_pct,
                   "Exit code 1 if a row is slower by more than PCT % beyond its noise (rule below), [0, 1000]");
    app.add_flag("--force", o->force, "Compare reports whose workload, device or measure settings differ");
  };
  c.run = [o](RunContext&) { return run_compare(*o); };
  return c;
}

}  // namespace dropbench
