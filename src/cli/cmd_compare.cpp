// `dropbench compare A.json B.json [C.json ...]`: compares the medians of reports of one command, point by
// point and variant by variant, with a noise-aware verdict (same / faster / slower), the geometric mean of
// the ratios, the rows only one side has, and an optional regression gate for CI.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"

namespace dropbench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One (point, variant) of a report: what compare needs of it.
struct Entry {
  json axes = json::object();
  std::string key;      // canonical axes + variant: equal keys are the same measurement
  std::string variant;
  double median = kNaN;     // s; NaN when null
  double rel_stdev = kNaN;  // ratio; NaN when null
};

struct Loaded {
  std::string path;
  std::string command;
  std::vector<Entry> entries;  // report order; duplicates of a key dropped (first wins)
  size_t duplicates = 0;
};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw UsageError(fmt::format("compare: {}: {}", path, what));
}

// Integral floats print as integers so that 4096 and 4096.0 match; object keys are sorted so that the order
// in which a report lists its axes does not matter.
std::string canonical(const json& v) {
  if (v.is_object()) {
    std::vector<std::string> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    std::string out = "{";
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i) out += ',';
      out += json(keys[i]).dump() + ':' + canonical(v.at(keys[i]));
    }
    return out + '}';
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += canonical(v[i]);
    }
    return out + ']';
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.0e15) return fmt::format("{}", static_cast<int64_t>(d));
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// An axis value as a table cell: strings bare, integral numbers without ".0".
std::string axis_cell(const json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return fmt_num(d);
  }
  return canonical(v);
}

std::string point_label(const json& axes) {
  std::string out;
  for (auto it = axes.begin(); it != axes.end(); ++it) {
    if (!out.empty()) out += ' ';
    out += it.key() + '=' + axis_cell(*it);
  }
  return out.empty() ? "(no axes)" : out;
}

double number_or_nan(const json& obj, const char* key, const std::string& path, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) bad_file(path, fmt::format("{}.{} is missing", where, key));
  if (it->is_null()) return kNaN;
  if (!it->is_number()) bad_file(path, fmt::format("{}.{} is not a number", where, key));
  return it->get<double>();
}

Loaded load_report(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) bad_file(path, "no such file");
  if (fs::is_directory(path, ec)) bad_file(path, "is a directory, not a report file");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, fmt::format("cannot open ({})", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) bad_file(path, "read error");

  json doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    bad_file(path, fmt::format("not JSON (parse error at byte {})", e.byte));
  }
  if (!doc.is_object()) bad_file(path, "not a dropbench report (the top level is not a JSON object)");
  const auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() || schema->get<std::string>() != "dropbench.report")
    bad_file(path, fmt::format("not a dropbench report (\"schema\" is {}, expected \"dropbench.report\")",
                               schema == doc.end() ? std::string("missing") : schema->dump()));
  const auto version = doc.find("schema_version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != kReportSchemaVersion)
    bad_file(path, fmt::format("schema_version {} is not supported (this dropbench reads {})",
                               version == doc.end() ? std::string("missing") : version->dump(), kReportSchemaVersion));
  const auto command = doc.find("command");
  if (command == doc.end() || !command->is_string()) bad_file(path, "\"command\" is missing or not a string");
  const auto points = doc.find("points");
  if (points == doc.end() || !points->is_array()) bad_file(path, "\"points\" is missing or not an array");

  Loaded r;
  r.path = path;
  r.command = command->get<std::string>();
  std::map<std::string, bool> seen;
  for (size_t pi = 0; pi < points->size(); ++pi) {
    const json& p = (*points)[pi];
    const std::string where = fmt::format("points[{}]", pi);
    if (!p.is_object()) bad_file(path, where + " is not an object");
    json axes = json::object();
    if (auto a = p.find("axes"); a != p.end() && !a->is_null()) {
      if (!a->is_object()) bad_file(path, where + ".axes is not an object");
      axes = *a;
    }
    const auto vars = p.find("variants");
    if (vars == p.end() || !vars->is_array()) bad_file(path, where + ".variants is missing or not an array");
    const std::string axes_key = canonical(axes);
    for (size_t vi = 0; vi < vars->size(); ++vi) {
      const json& v = (*vars)[vi];
      const std::string vwhere = fmt::format("{}.variants[{}]", where, vi);
      if (!v.is_object()) bad_file(path, vwhere + " is not an object");
      const auto name = v.find("name");
      if (name == v.end() || !name->is_string()) bad_file(path, vwhere + ".name is missing or not a string");
      const auto stats = v.find("stats");
      if (stats == v.end() || !stats->is_object()) bad_file(path, vwhere + ".stats is missing or not an object");
      Entry e;
      e.axes = axes;
      e.variant = name->get<std::string>();
      e.key = axes_key + '\x1f' + e.variant;
      e.median = number_or_nan(*stats, "median", path, vwhere + ".stats");
      e.rel_stdev = stats->contains("rel_stdev") ? number_or_nan(*stats, "rel_stdev", path, vwhere + ".stats") : kNaN;
      if (seen.count(e.key)) {
        ++r.duplicates;
        continue;
      }
      seen[e.key] = true;
      r.entries.push_back(std::move(e));
    }
  }
  return r;
}

struct Settings {
  double k = 2.0;             // --noise-k
  double floor_pct = 1.0;     // --noise-floor (percent)
  std::optional<double> fail_pct;  // --fail-on-regression (percent)
};

// One matched (point, variant).
struct Row {
  const Entry* a = nullptr;
  const Entry* b = nullptr;
  double ratio = kNaN;      // B/A
  double threshold = kNaN;  // t in ln units: |ln(B/A)| <= t is "same"
  std::string verdict;      // same | faster | slower | n/a
  bool regression = false;
};

struct Comparison {
  const Loaded* base = nullptr;
  const Loaded* cand = nullptr;
  std::vector<Row> rows;
  std::vector<const Entry*> only_a, only_b;
  double geomean = kNaN;
  size_t n_same = 0, n_faster = 0, n_slower = 0, n_na = 0, n_regressions = 0;
};

double noise_of(double rs) { return std::isfinite(rs) && rs > 0 ? rs : 0.0; }

Row judge(const Entry& a, const Entry& b, const Settings& s) {
  Row r;
  r.a = &a;
  r.b = &b;
  if (!(std::isfinite(a.median) && a.median > 0 && std::isfinite(b.median) && b.median > 0)) {
    r.verdict = "n/a";
    return r;
  }
  r.ratio = b.median / a.median;
  const double na = noise_of(a.rel_stdev), nb = noise_of(b.rel_stdev);
  r.threshold = std::max(s.k * std::sqrt(na * na + nb * nb), std::log1p(s.floor_pct / 100.0));
  const double d = std::log(r.ratio);
  r.verdict = std::fabs(d) <= r.threshold ? "same" : d > 0 ? "slower" : "faster";
  if (s.fail_pct) r.regression = d > r.threshold + std::log1p(*s.fail_pct / 100.0);
  return r;
}

Comparison compare(const Loaded& base, const Loaded& cand, const Settings& s) {
  Comparison c;
  c.base = &base;
  c.cand = &cand;
  std::map<std::string, size_t> in_b;
  for (size_t i = 0; i < cand.entries.size(); ++i) in_b[cand.entries[i].key] = i;
  std::vector<bool> used(cand.entries.size(), false);
  double log_sum = 0;
  size_t n_log = 0;
  for (const Entry& a : base.entries) {
    auto it = in_b.find(a.key);
    if (it == in_b.end()) {
      c.only_a.push_back(&a);
      continue;
    }
    used[it->second] = true;
    Row r = judge(a, cand.entries[it->second], s);
    if (r.verdict == "same") ++c.n_same;
    else if (r.verdict == "faster") ++c.n_faster;
    else if (r.verdict == "slower") ++c.n_slower;
    else ++c.n_na;
    if (r.regression) ++c.n_regressions;
    if (std::isfinite(r.ratio)) {
      log_sum += std::log(r.ratio);
      ++n_log;
    }
    c.rows.push_back(std::move(r));
  }
  for (size_t i = 0; i < cand.entries.size(); ++i)
    if (!used[i]) c.only_b.push_back(&cand.entries[i]);
  if (n_log) c.geomean = std::exp(log_sum / static_cast<double>(n_log));
  return c;
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

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json entry_json(const Entry& e) {
  json j = json::object();
  j["axes"] = e.axes;
  j["variant"] = e.variant;
  j["median"] = num(e.median);
  j["rel_stdev"] = num(e.rel_stdev);
  return j;
}

json to_json_doc(const std::vector<Comparison>& cs, const Settings& s) {
  json out = json::object();
  out["baseline"] = cs.front().base->path;
  out["command"] = cs.front().base->command;
  out["noise_k"] = s.k;
  out["noise_floor_pct"] = s.floor_pct;
  out["fail_on_regression_pct"] = s.fail_pct ? json(*s.fail_pct) : json(nullptr);
  out["comparisons"] = json::array();
  size_t total_regressions = 0;
  for (const Comparison& c : cs) {
    json jc = json::object();
    jc["candidate"] = c.cand->path;
    jc["rows"] = json::array();
    for (const Row& r : c.rows) {
      json jr = json::object();
      jr["axes"] = r.a->axes;
      jr["variant"] = r.a->variant;
      jr["median_a"] = num(r.a->median);
      jr["rel_stdev_a"] = num(r.a->rel_stdev);
      jr["median_b"] = num(r.b->median);
      jr["rel_stdev_b"] = num(r.b->rel_stdev);
      jr["ratio"] = num(r.ratio);
      jr["threshold_ln"] = num(r.threshold);
      jr["verdict"] = r.verdict;
      jr["regression"] = r.regression;
      jc["rows"].push_back(std::move(jr));
    }
    jc["geomean"] = num(c.geomean);
    jc["counts"] = {{"faster", c.n_faster}, {"same", c.n_same}, {"slower", c.n_slower}, {"n/a", c.n_na}};
    jc["regressions"] = c.n_regressions;
    jc["only_in_a"] = json::array();
    for (const Entry* e : c.only_a) jc["only_in_a"].push_back(entry_json(*e));
    jc["only_in_b"] = json::array();
    for (const Entry* e : c.only_b) jc["only_in_b"].push_back(entry_json(*e));
    total_regressions += c.n_regressions;
    out["comparisons"].push_back(std::move(jc));
  }
  out["regressions"] = total_regressions;
  return out;
}

std::string unmatched_text(const std::vector<const Entry*>& es, const std::string& side, const std::string& path) {
  if (es.empty()) return {};
  std::string out = fmt::format("\nOnly in {} ({}): {} row{}\n", side, path, es.size(), es.size() == 1 ? "" : "s");
  for (const Entry* e : es) out += fmt::format("- {}: {}\n", point_label(e->axes), e->variant);
  return out;
}

std::string fmt_setting(double v) { return fmt::format("{:g}", v); }

}  // namespace

Command make_compare_command() {
  struct Opts {
    std::vector<std::string> files;
    std::string format = "md";
    Settings s;
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.name = "compare";
  c.summary = "Compare reports of one command (first file = baseline): ratio and noise-aware verdict per point";
  c.help =
      "Matches the (point, variant) rows of B.json (and of every further file) to those of the baseline A.json\n"
      "by axis values (key order and 4096 vs 4096.0 do not matter) and variant name, and prints per match:\n"
      "the axes, variant, A_us / B_us (median, microseconds), A_noise_% / B_noise_% (relative stdev), B/A\n"
      "(ratio of the medians; < 1 means B is faster) and a verdict, then a geomean row (geometric mean of the\n"
      "ratios over all matched rows) and the rows only one side has. With more files, each is compared\n"
      "against the first. --format csv adds a candidate column and the unmatched rows; --format json gives\n"
      "every figure unrounded (times in seconds).\n"
      "\n"
      "Verdict, with t = max(K * sqrt(noiseA^2 + noiseB^2), ln(1 + FLOOR/100)), K = --noise-k (default 2),\n"
      "FLOOR = --noise-floor in percent (default 1), noise = the report's rel_stdev:\n"
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
      "different commands (one line on stderr naming the file).\n"
      "Example:\n"
      "  dropbench compare results/h200/foundation/rng_quick.json results/latest/rng.json --fail-on-regression 5";
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    app.add_option("files", o->files, "Reports: baseline A.json first, then B.json [C.json ...]")->required();
    app.add_option("--format", o->format, "md | csv | json")->check(CLI::IsMember({"md", "json", "csv"}));
    app.add_option("--noise-k", o->s.k, "K: how many combined standard deviations count as noise (default 2)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--noise-floor", o->s.floor_pct, "Smallest difference (%) that can be a change (default 1)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--fail-on-regression", o->s.fail_pct,
                   "Exit code 1 if a row is slower by more than PCT % beyond its noise (rule below)")
        ->check(CLI::NonNegativeNumber);
  };
  c.run = [o](RunContext&) {
    if (o->files.size() < 2)
      throw UsageError(fmt::format("compare: needs at least two reports (baseline first), got {}", o->files.size()));
    const Settings& s = o->s;
    if (!std::isfinite(s.k) || !std::isfinite(s.floor_pct) || (s.fail_pct && !std::isfinite(*s.fail_pct)))
      throw UsageError("compare: --noise-k, --noise-floor and --fail-on-regression must be finite numbers");
    std::vector<Loaded> reports;
    reports.reserve(o->files.size());
    for (const auto& f : o->files) reports.push_back(load_report(f));
    for (size_t i = 1; i < reports.size(); ++i)
      if (reports[i].command != reports[0].command)
        throw UsageError(fmt::format("compare: {}: command \"{}\" differs from the baseline's ({}: \"{}\")",
                                     reports[i].path, reports[i].command, reports[0].path, reports[0].command));
    for (const Loaded& r : reports)
      if (r.duplicates)
        std::fprintf(stderr, "dropbench: compare: %s: %zu repeated (point, variant) rows ignored (first kept)\n",
                     r.path.c_str(), r.duplicates);

    std::vector<Comparison> cs;
    for (size_t i = 1; i < reports.size(); ++i) cs.push_back(compare(reports[0], reports[i], s));
    const std::vector<std::string> keys = axis_columns(cs);

    if (o->format == "json") {
      std::cout << to_json_doc(cs, s).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    } else if (o->format == "csv") {
      std::cout << render_csv(make_table(cs, keys, true, 0));
    } else {
      std::cout << fmt::format("A = {} (baseline), command {}\n", reports[0].path, reports[0].command);
      std::cout << fmt::format(
          "verdict: same when |ln(B/A)| <= t = max({} * sqrt(noiseA^2 + noiseB^2), ln(1 + {}%)); B/A < 1: B faster\n",
          fmt_setting(s.k), fmt_setting(s.floor_pct));
      if (s.fail_pct)
        std::cout << fmt::format("regression: B/A > (1 + {}%) * exp(t)\n", fmt_setting(*s.fail_pct));
      for (size_t ci = 0; ci < cs.size(); ++ci) {
        const Comparison& c = cs[ci];
        std::cout << fmt::format("\nB = {}: {} matched, geomean B/A {} ({})\n\n", c.cand->path, c.rows.size(),
                                 ratio_cell(c.geomean).empty() ? "n/a" : ratio_cell(c.geomean), counts_text(c));
        if (c.rows.empty())
          std::cout << "(no matched rows)\n";
        else
          std::cout << render_markdown(make_table(cs, keys, false, ci));
        std::cout << unmatched_text(c.only_a, "A", c.base->path) << unmatched_text(c.only_b, "B", c.cand->path);
      }
    }
    std::cout << std::flush;

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
  };
  return c;
}

}  // namespace dropbench
