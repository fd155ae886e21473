// Comparing reports of one command (compare.hpp).
#include "src/core/compare.hpp"
#include "src/core/stats.hpp"

#include "src/core/bootstrap.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/input.hpp"
#include "src/core/merge.hpp"
#include "src/core/report.hpp"

namespace dropbench::compare {

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw UsageError(fmt::format("compare: {}: {}", path, what));
}

double number_or_nan(const json& obj, const char* key, const std::string& path, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) bad_file(path, fmt::format("{}.{} is missing", where, key));
  if (it->is_null()) return kNaN;
  if (!it->is_number()) bad_file(path, fmt::format("{}.{} is not a number", where, key));
  const double v = it->get<double>();
  // A time or a relative stdev below 0 is a broken report, not a fast one.
  if (v < 0) bad_file(path, fmt::format("{}.{}: {} is out of range (allowed: >= 0, or null)", where, key, it->dump()));
  return v;
}

// The document at `path`, checked to be a dropbench report of the schema version this build reads.
json read_report_doc(const std::string& path) {
  json doc = read_json_input(path, "compare", "a dropbench report, docs/report-schema.md");
  if (!doc.is_object()) bad_file(path, "not a dropbench report (the top level is not a JSON object)");
  const auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() || schema->get<std::string>() != "dropbench.report")
    bad_file(path, fmt::format("not a dropbench report (\"schema\" is {}, expected \"dropbench.report\")",
                               schema == doc.end() ? std::string("missing") : schema->dump()));
  const auto version = doc.find("schema_version");
  if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != kReportSchemaVersion)
    bad_file(path, fmt::format("schema_version {} is not supported (this dropbench reads {})",
                               version == doc.end() ? std::string("missing") : version->dump(), kReportSchemaVersion));
  return doc;
}

// Appends the variants of point `pi` to r (a key already seen counts as a duplicate).
void add_point_entries(LoadedReport& r, const json& p, size_t pi, std::map<std::string, bool>& seen) {
  const std::string& path = r.path;
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
    if (auto ci = stats->find("median_ci"); ci != stats->end() && ci->is_array() && ci->size() == 2 &&
                                            (*ci)[0].is_number() && (*ci)[1].is_number()) {
      e.ci_low = (*ci)[0].get<double>();
      e.ci_high = (*ci)[1].get<double>();
    }
    if (seen.count(e.key)) {
      ++r.duplicates;
      continue;
    }
    seen[e.key] = true;
    r.entries.push_back(std::move(e));
  }
}

double noise_of(double rs) { return std::isfinite(rs) && rs > 0 ? rs : 0.0; }

}  // namespace

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

LoadedReport load_report(const std::string& path) {
  const json doc = read_report_doc(path);
  check_report_body(doc, "compare", path, /*placed=*/false);  // the checks every reader of a report makes
  const auto command = doc.find("command");
  if (command == doc.end() || !command->is_string()) bad_file(path, "\"command\" is missing or not a string");
  const auto points = doc.find("points");
  if (points == doc.end() || !points->is_array()) bad_file(path, "\"points\" is missing or not an array");

  LoadedReport r;
  r.path = path;
  r.command = command->get<std::string>();
  std::map<std::string, bool> seen;
  for (size_t pi = 0; pi < points->size(); ++pi) add_point_entries(r, (*points)[pi], pi, seen);

  auto member = [](const json& obj, const char* key) -> json {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? json(nullptr) : *it;
  };
  const json config = member(doc, "config"), context = member(doc, "context");
  r.workload = member(config, "workload");
  r.measure = member(config, "measure");
  r.device = member(member(context, "device"), "name");
  if (const json sha = member(context, "git_sha"); sha.is_string()) r.git_sha = sha.get<std::string>();
  if (const json date = member(context, "date_utc"); date.is_string()) r.date_utc = date.get<std::string>();
  auto add_swept = [&r](const std::string& k) {
    if (std::find(r.swept.begin(), r.swept.end(), k) == r.swept.end()) r.swept.push_back(k);
  };
  if (const json sweep = member(config, "sweep"); sweep.is_object())
    for (auto it = sweep.begin(); it != sweep.end(); ++it) add_swept(it.key());
  for (const Entry& e : r.entries)
    for (auto it = e.axes.begin(); it != e.axes.end(); ++it) add_swept(it.key());
  return r;
}

std::vector<std::string> differences(const LoadedReport& base, const LoadedReport& cand) {
  std::vector<std::string> out;
  auto text = [](const json& v) {
    if (v.is_null()) return std::string("(none)");
    return v.is_string() ? v.get<std::string>() : canonical(v);
  };
  auto differ = [&out, &text](const std::string& name, const json& a, const json& b) {
    if (canonical(a) != canonical(b)) out.push_back(fmt::format("{} {} vs {}", name, text(a), text(b)));
  };
  // Field by field within an object section; a section only one side has is one difference.
  auto section = [&](const std::string& name, const json& a, const json& b, const std::vector<std::string>& skip) {
    if (a.is_null() && b.is_null()) return;
    if (!a.is_object() || !b.is_object()) {
      out.push_back(fmt::format("{} {} vs {}", name, a.is_null() ? "(none)" : "(present)",
                                b.is_null() ? "(none)" : "(present)"));
      return;
    }
    std::vector<std::string> keys;
    for (const json* side : {&a, &b})
      for (auto it = side->begin(); it != side->end(); ++it)
        if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
    for (const auto& k : keys) {
      if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
      differ(name + "." + k, a.contains(k) ? a.at(k) : json(nullptr), b.contains(k) ? b.at(k) : json(nullptr));
    }
  };
  std::vector<std::string> swept = base.swept;
  swept.insert(swept.end(), cand.swept.begin(), cand.swept.end());
  section("workload", base.workload, cand.workload, swept);
  differ("device", base.device, cand.device);
  section("measure", base.measure, cand.measure, {});
  return out;
}

std::vector<LoadedReport> load_reports(const std::vector<std::string>& paths) {
  std::vector<LoadedReport> reports;
  reports.reserve(paths.size());
  for (const auto& f : paths) {
    try {
      reports.push_back(load_report(f));
    } catch (const json::exception& e) {  // a field of a type the checks above do not name
      bad_file(f, one_line(fmt::format("malformed ({}) (allowed: a dropbench report, docs/report-schema.md)", json_error_text(e))));
    }
  }
  for (size_t i = 1; i < reports.size(); ++i)
    if (reports[i].command != reports[0].command)
      throw UsageError(fmt::format("compare: {}: command \"{}\" differs from the baseline's ({}: \"{}\")",
                                   reports[i].path, reports[i].command, reports[0].path, reports[0].command));
  return reports;
}

Row judge(const Entry& a, const Entry& b, const Settings& s) {
  Row r;
  r.a = &a;
  r.b = &b;
  if (!(std::isfinite(a.median) && a.median > 0 && std::isfinite(b.median) && b.median > 0)) {
    r.verdict = "n/a";
    return r;
  }
  r.ratio = b.median / a.median;
  const double floor = std::log1p(s.floor_pct / 100.0);
  const Interval iv = ratio_of_independent(b.median, b.ci_low, b.ci_high, a.median, a.ci_low, a.ci_high);
  if (iv.valid && iv.low > 0) {
    r.rule = "interval";
    r.ratio_low = iv.low;
    r.ratio_high = iv.high;
    // The side of the interval toward 1 decides: "same" exactly when the interval (or the floor) reaches 1.
    r.threshold = std::max(r.ratio >= 1 ? std::log(r.ratio / iv.low) : std::log(iv.high / r.ratio), floor);
  } else {
    r.rule = "noise";
    const double na = noise_of(a.rel_stdev), nb = noise_of(b.rel_stdev);
    r.threshold = std::max(s.k * std::sqrt(na * na + nb * nb), floor);
  }
  const double d = std::log(r.ratio);
  r.verdict = std::fabs(d) <= r.threshold ? "same" : d > 0 ? "slower" : "faster";
  if (s.fail_pct) r.regression = d > r.threshold + std::log1p(*s.fail_pct / 100.0);
  return r;
}

Comparison compare_reports(const LoadedReport& base, const LoadedReport& cand, const Settings& s) {
  Comparison c;
  c.base = &base;
  c.cand = &cand;
  c.differences = differences(base, cand);
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

namespace {

json info_json(const LoadedReport& r) {
  return {{"path", r.path}, {"git_sha", r.git_sha.empty() ? json(nullptr) : json(r.git_sha)},
          {"date_utc", r.date_utc.empty() ? json(nullptr) : json(r.date_utc)}, {"device", r.device}};
}

json entry_json(const Entry& e) {
  json j = json::object();
  j["axes"] = e.axes;
  j["variant"] = e.variant;
  j["median"] = number_or_null(e.median);
  j["rel_stdev"] = number_or_null(e.rel_stdev);
  return j;
}

}  // namespace

json comparisons_json(const std::vector<Comparison>& cs, const Settings& s) {
  json out = json::object();
  out["baseline"] = cs.front().base->path;
  out["command"] = cs.front().base->command;
  out["baseline_info"] = info_json(*cs.front().base);
  out["noise_k"] = s.k;
  out["noise_floor_pct"] = s.floor_pct;
  out["fail_on_regression_pct"] = s.fail_pct ? json(*s.fail_pct) : json(nullptr);
  out["comparisons"] = json::array();
  size_t total_regressions = 0;
  for (const Comparison& c : cs) {
    json jc = json::object();
    jc["candidate"] = c.cand->path;
    jc["candidate_info"] = info_json(*c.cand);
    jc["differences"] = c.differences;
    jc["rows"] = json::array();
    for (const Row& r : c.rows) {
      json jr = json::object();
      jr["axes"] = r.a->axes;
      jr["variant"] = r.a->variant;
      jr["median_a"] = number_or_null(r.a->median);
      jr["rel_stdev_a"] = number_or_null(r.a->rel_stdev);
      jr["median_b"] = number_or_null(r.b->median);
      jr["rel_stdev_b"] = number_or_null(r.b->rel_stdev);
      jr["ratio"] = number_or_null(r.ratio);
      jr["threshold_ln"] = number_or_null(r.threshold);
      jr["rule"] = r.rule;
      jr["ratio_ci"] = r.rule == "interval" ? json::array({r.ratio_low, r.ratio_high}) : json(nullptr);
      jr["verdict"] = r.verdict;
      jr["regression"] = r.regression;
      jc["rows"].push_back(std::move(jr));
    }
    jc["geomean"] = number_or_null(c.geomean);
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

}  // namespace dropbench::compare
