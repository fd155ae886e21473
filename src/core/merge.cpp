#include "src/core/merge.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/compare.hpp"
#include "src/core/input.hpp"
#include "src/core/sweep_util.hpp"

namespace dropbench {

namespace {

[[noreturn]] void bad(const std::string& who, const std::string& path, const std::string& what) {
  throw UsageError(fmt::format("{}: {}: {}", who, path, what));
}

json member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? json(nullptr) : *it;
}

// Value as one would type it: strings bare, the rest as compact JSON.
std::string text(const json& v) {
  if (v.is_null()) return "(none)";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Every leaf where a and b differ, as "prefix.key A vs B" (arrays compare whole: a sweep list is one value).
void diff_into(const std::string& prefix, const json& a, const json& b, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) diff_into(prefix + "." + it.key(), it.value(), member(b, it.key().c_str()), out);
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) diff_into(prefix + "." + it.key(), nullptr, it.value(), out);
    return;
  }
  if (compare::canonical(a) != compare::canonical(b)) out.push_back(fmt::format("{} {} vs {}", prefix, text(a), text(b)));
}

// The resolved config without its file path (the same config read from another path is the same config).
json resolved_config(const Config& cfg) {
  json j = to_json(cfg);
  j.erase("source");
  return j;
}

json identity_of(const std::string& command, const json& config, const json& context) {
  json id = json::object();
  id["command"] = command;
  id["config"] = config;
  const json device = member(context, "device");
  id["tool version"] = text(member(context, "version")) + "+" + text(member(context, "git_sha"));
  id["device"] = member(device, "name");
  id["dry_run"] = member(context, "dry_run").is_boolean() ? member(context, "dry_run") : json(false);
  id["options"] = member(context, "options").is_object() ? member(context, "options") : json::object();
  return id;
}

}  // namespace

namespace {

constexpr const char* kReportAllowed = "a dropbench report as dropbench writes it, docs/report-schema.md";

// One field of a report checked by type: the message names the JSON path and what it must be.
struct BodyCheck {
  const std::string& who;
  const std::string& path;
  [[noreturn]] void fail(const std::string& at, const json& v, const std::string& must) const {
    std::string shown = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (shown.size() > 40) shown = one_line(shown, 37);
    throw UsageError(one_line(fmt::format("{}: {}: {}: {} must be {} (allowed: {})", who, path, at, shown, must,
                                          kReportAllowed)));
  }
  [[noreturn]] void missing(const std::string& at, const std::string& must) const {
    throw UsageError(one_line(fmt::format("{}: {}: {} is missing, must be {} (allowed: {})", who, path, at, must,
                                          kReportAllowed)));
  }
  // The member `key` of object `obj` (at path `at`), or nullptr when absent and optional.
  const json* field(const json& obj, const std::string& at, const char* key, bool required, const char* must) const {
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) missing(json_path_key(at, key), must);
      return nullptr;
    }
    return &*it;
  }
  // An object; an optional one may also be null (written for "none", e.g. a dry run's context.device).
  const json* object(const json& obj, const std::string& at, const char* key, bool required = false) const {
    const json* v = field(obj, at, key, required, "an object");
    if (v && v->is_null() && !required) return nullptr;
    if (v && !v->is_object()) fail(json_path_key(at, key), *v, required ? "an object" : "an object or null");
    return v;
  }
  const json* array(const json& obj, const std::string& at, const char* key, bool required = false) const {
    const json* v = field(obj, at, key, required, "an array");
    if (v && !v->is_array()) fail(json_path_key(at, key), *v, "an array");
    return v;
  }
  void string(const json& obj, const std::string& at, const char* key, bool required = false) const {
    const json* v = field(obj, at, key, required, "a string");
    if (v && !v->is_string()) fail(json_path_key(at, key), *v, "a string");
  }
  void boolean(const json& obj, const std::string& at, const char* key) const {
    const json* v = field(obj, at, key, false, "true or false");
    if (v && !v->is_boolean()) fail(json_path_key(at, key), *v, "true or false");
  }
  // A number or null (a statistic that could not be computed is written as null).
  void number(const json& obj, const std::string& at, const char* key) const {
    const json* v = field(obj, at, key, false, "a number");
    if (v && !v->is_number() && !v->is_null()) fail(json_path_key(at, key), *v, "a number or null");
  }
  std::optional<size_t> index(const json& obj, const std::string& at, const char* key, bool required,
                              std::optional<size_t> below, const char* below_what) const {
    const json* v = field(obj, at, key, required, "an integer >= 0");
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned()) fail(json_path_key(at, key), *v, "an integer >= 0");
    const size_t i = v->get<size_t>();
    if (below && i >= *below)
      fail(json_path_key(at, key), *v, fmt::format("below {} = {}", below_what, *below));
    return i;
  }
  void stats(const json& obj, const std::string& at, const char* key) const {
    const json* st = object(obj, at, key, true);
    const std::string sp = json_path_key(at, key);
    for (const char* k : {"samples", "discarded", "ci_block"})
      if (const json* v = field(*st, sp, k, false, "an integer >= 0"); v && !v->is_null() && !v->is_number_unsigned())
        fail(json_path_key(sp, k), *v, "an integer >= 0");
    for (const char* k : {"median", "mean", "min", "max", "stdev", "rel_stdev", "mean_clock_mhz"}) number(*st, sp, k);
    if (const json* se = object(*st, sp, "series")) {
      const std::string ssp = json_path_key(sp, "series");
      for (const char* k : {"seconds", "clock_mhz", "repeat_rounds"}) array(*se, ssp, k);
      if (const auto rr = se->find("repeat_rounds"); rr != se->end())
        for (size_t i = 0; i < rr->size(); ++i)
          if (!(*rr)[i].is_number_unsigned())
            fail(json_path_index(json_path_key(ssp, "repeat_rounds"), i), (*rr)[i], "an integer >= 0");
    }
  }
};

}  // namespace

void check_report_body(const json& doc, const std::string& who, const std::string& path, bool placed) {
  const BodyCheck c{who, path};
  if (!doc.is_object()) c.fail("the document", doc, "an object");
  c.string(doc, "", "command", true);
  if (const json* ctx = c.object(doc, "", "context")) {
    c.boolean(*ctx, "context", "dry_run");
    c.object(*ctx, "context", "options");
    if (const json* dev = c.object(*ctx, "context", "device"))
      if (const auto name = dev->find("name"); name != dev->end() && !name->is_null() && !name->is_string())
        c.fail("context.device.name", *name, "a string or null");
    for (const char* k : {"version", "git_sha", "date_utc", "hostname"})
      if (const auto v = ctx->find(k); v != ctx->end() && !v->is_null() && !v->is_string())
        c.fail(json_path_key("context", k), *v, "a string or null");
  }
  c.object(doc, "", "config");
  c.object(doc, "", "summary");
  c.boolean(doc, "", "complete");
  if (const json* why = c.object(doc, "", "incomplete_reason")) c.string(*why, "incomplete_reason", "kind");
  const std::optional<size_t> total = c.index(doc, "", "total_points", false, std::nullopt, "");
  if (total && *total == 0) c.fail("total_points", doc.at("total_points"), "at least 1");
  if (const json* shard = c.object(doc, "", "shard")) {
    const json& sh = *shard;
    const std::optional<size_t> count = c.index(sh, "shard", "count", true, std::nullopt, "");
    if (*count == 0) c.fail("shard.count", sh.at("count"), "at least 1");
    c.index(sh, "shard", "index", true, count, "shard.count");
  }
  const json& points = *c.array(doc, "", "points", true);
  for (size_t i = 0; i < points.size(); ++i) {
    const std::string at = json_path_index("points", i);
    const json& p = points[i];
    if (!p.is_object()) c.fail(at, p, "an object");
    c.index(p, at, "index", placed, total, "total_points");
    c.object(p, at, "axes");
    c.object(p, at, "workload");
    c.object(p, at, "derived");
    const json& vars = *c.array(p, at, "variants", true);
    for (size_t k = 0; k < vars.size(); ++k) {
      const std::string vat = json_path_index(json_path_key(at, "variants"), k);
      const json& v = vars[k];
      if (!v.is_object()) c.fail(vat, v, "an object");
      c.string(v, vat, "name", true);
      c.boolean(v, vat, "peer");
      c.stats(v, vat, "stats");
      c.object(v, vat, "derived");
      c.object(v, vat, "extra");
      if (const auto pw = v.find("power"); pw != v.end() && !pw->is_null() && !pw->is_object())
        c.fail(json_path_key(vat, "power"), *pw, "an object or null");
      if (const json* phases = c.array(v, vat, "phases")) {
        for (size_t q = 0; q < phases->size(); ++q) {
          const std::string pat = json_path_index(json_path_key(vat, "phases"), q);
          const json& ph = (*phases)[q];
          if (!ph.is_object()) c.fail(pat, ph, "an object");
          c.string(ph, pat, "name", true);
          c.stats(ph, pat, "stats");
        }
      }
    }
  }
  const json& skipped = *c.array(doc, "", "skipped", true);
  for (size_t i = 0; i < skipped.size(); ++i) {
    const std::string at = json_path_index("skipped", i);
    const json& s = skipped[i];
    if (!s.is_object()) c.fail(at, s, "an object");
    // Entries written before sweeps were sharded carry no index: merge and --resume cannot place them.
    c.index(s, at, "index", placed, total, "total_points");
    c.object(s, at, "axes");
    c.string(s, at, "reason");
  }
}

ReportFile read_report_file(const std::string& path, const std::string& who) {
  ReportFile f{path, read_json_input(path, who, kReportAllowed)};
  if (!f.doc.is_object() || member(f.doc, "schema") != "dropbench.report")
    bad(who, path, "not a dropbench report (\"schema\" is not \"dropbench.report\")");
  if (member(f.doc, "schema_version") != kReportSchemaVersion)
    bad(who, path, one_line(fmt::format("schema_version {} is not supported (this dropbench reads {})",
                                        text(member(f.doc, "schema_version")), kReportSchemaVersion)));
  fold_journal(f.doc, path, who);
  check_report_body(f.doc, who, path);
  // What the body check does not see: a point whose fields the report reader still cannot take.
  const json& points = f.doc.at("points");
  for (size_t i = 0; i < points.size(); ++i) {
    try {
      (void)point_from_json(points[i]);
    } catch (const json::exception& e) {
      bad(who, path, one_line(fmt::format("points[{}] is malformed ({}) (allowed: {})", i, json_error_text(e), kReportAllowed)));
    }
  }
  return f;
}

json report_identity(const json& doc, const std::string& who, const std::string& path) {
  json config;
  try {
    config = resolved_config(config_from_json(member(doc, "config"), path));
  } catch (const UsageError& e) {
    bad(who, path, fmt::format("its config does not pass this dropbench's config rules ({})", e.what()));
  }
  return identity_of(member(doc, "command").get<std::string>(), config, member(doc, "context"));
}

json run_identity(const std::string& command, const Config& cfg, const json& context) {
  // Through the config rules as a report's config goes, so both sides have the same form.
  return identity_of(command, resolved_config(config_from_json(to_json(cfg), cfg.source)), context);
}

std::vector<std::string> identity_differences(const json& a, const json& b) {
  std::vector<std::string> out;
  for (const char* k : {"command", "tool version", "device", "dry_run"})
    if (compare::canonical(a.at(k)) != compare::canonical(b.at(k)))
      out.push_back(fmt::format("{} {} vs {}", k, text(a.at(k)), text(b.at(k))));
  diff_into("config", a.at("config"), b.at("config"), out);
  diff_into("option", a.at("options"), b.at("options"), out);
  return out;
}

Shard report_shard(const json& doc) {
  const json s = member(doc, "shard");
  Shard sh;
  if (s.is_object() && member(s, "index").is_number_unsigned() && member(s, "count").is_number_unsigned()) {
    sh.index = s.at("index").get<size_t>();
    sh.count = s.at("count").get<size_t>();
  }
  return sh;
}

std::optional<size_t> report_total_points(const json& doc) {
  const json t = member(doc, "total_points");
  if (!t.is_number_unsigned()) return std::nullopt;
  return t.get<size_t>();
}

namespace {

// Every input is a shard of one sweep of the first's command, config, tool version and device (identity id0,
// shard split sh0, total points), each shard once.
void check_belong_together(const std::vector<ReportFile>& inputs, const json& id0, const Shard& sh0, size_t total) {
  const ReportFile& first = inputs.front();
  std::map<size_t, std::string> shard_owner;  // shard index -> path
  for (const ReportFile& f : inputs) {
    const std::vector<std::string> diffs = identity_differences(id0, report_identity(f.doc, "merge", f.path));
    if (!diffs.empty())
      throw UsageError(fmt::format("merge: {} does not belong with {}: {} (allowed: reports of one command, config, "
                                   "tool version and device)",
                                   f.path, first.path, diffs.front()));
    const Shard sh = report_shard(f.doc);
    if (sh.count != sh0.count)
      throw UsageError(fmt::format("merge: {} is shard {}/{}, {} is shard {}/{} (allowed: shards of one --shard i/N split)",
                                   f.path, sh.index, sh.count, first.path, sh0.index, sh0.count));
    if (report_total_points(f.doc) != std::optional<size_t>(total))
      throw UsageError(fmt::format("merge: {} has total_points {}, {} has {} (allowed: reports of one sweep)", f.path,
                                   text(member(f.doc, "total_points")), first.path, total));
    if (sh.count > 1) {
      const auto [it, fresh] = shard_owner.emplace(sh.index, f.path);
      if (!fresh)
        throw UsageError(fmt::format("merge: shard {}/{} is in both {} and {} (allowed: each shard once)", sh.index,
                                     sh.count, it->second, f.path));
    }
  }
}

// What merged_from says of one input: its path, shard, completeness, counts, and where and when it ran.
json merged_input(const ReportFile& f) {
  const Shard sh = report_shard(f.doc);
  const json ctx = member(f.doc, "context");
  json in = json::object();
  in["path"] = f.path;
  in["shard"] = {{"index", sh.index}, {"count", sh.count}};
  in["complete"] = member(f.doc, "complete") == true;
  in["points"] = f.doc.at("points").size();
  in["skipped"] = f.doc.at("skipped").size();
  in["date_utc"] = member(ctx, "date_utc");
  in["hostname"] = member(ctx, "hostname");
  in["device_index"] = member(member(ctx, "device"), "index");
  in["sm_mhz_at_end"] = member(member(f.doc, "summary"), "sm_mhz_at_end");
  return in;
}

}  // namespace

Report merge_reports(const std::vector<ReportFile>& inputs, const SummaryRecompute& recompute) {
  if (inputs.empty()) throw UsageError("merge: no reports given (allowed: one or more report files)");
  const ReportFile& first = inputs.front();
  const json id0 = report_identity(first.doc, "merge", first.path);
  const Shard sh0 = report_shard(first.doc);
  const std::optional<size_t> total = report_total_points(first.doc);
  if (!total)
    bad("merge", first.path, "has no \"total_points\" (written by a dropbench that predates sharding; rerun it)");

  check_belong_together(inputs, id0, sh0, *total);

  Report out(member(first.doc, "command").get<std::string>(), member(first.doc, "context"), member(first.doc, "config"));
  out.set_sweep(*total, std::nullopt);
  std::map<size_t, std::string> owner;  // point index -> path that holds it
  auto claim = [&](size_t index, const json& axes, const std::string& path) {
    if (index >= *total)
      throw UsageError(fmt::format("merge: {}: point index {} is outside the sweep (total_points {})", path, index, *total));
    const auto [it, fresh] = owner.emplace(index, path);
    if (!fresh)
      throw UsageError(fmt::format("merge: point {} ({}) is in both {} and {} (allowed: each point once)", index,
                                   axes_label(axes), it->second, path));
  };
  json merged_from = json::array();
  std::vector<json> summaries;
  bool all_complete = true;
  for (const ReportFile& f : inputs) {
    for (const json& p : f.doc.at("points")) {
      if (!p.is_object() || !member(p, "index").is_number_unsigned())
        bad("merge", f.path, "a point has no index");
      claim(p.at("index").get<size_t>(), member(p, "axes"), f.path);
      try {
        out.adopt_point(p);
      } catch (const json::exception& e) {
        bad("merge", f.path, fmt::format("point {} is malformed ({})", p.at("index").get<size_t>(), json_error_text(e)));
      }
    }
    for (const json& s : f.doc.at("skipped")) {
      if (!s.is_object() || !member(s, "index").is_number_unsigned())
        bad("merge", f.path, "a skipped entry has no index (written by a dropbench that predates sharding; rerun it)");
      claim(s.at("index").get<size_t>(), member(s, "axes"), f.path);
      out.adopt_skipped(s);
    }
    all_complete = all_complete && member(f.doc, "complete") == true;
    merged_from.push_back(merged_input(f));
    summaries.push_back(member(f.doc, "summary").is_object() ? member(f.doc, "summary") : json::object());
  }

  SweepState& st = out.sweep();
  st.merged_from = std::move(merged_from);
  st.complete = all_complete && owner.size() == *total;
  if (!st.complete) {
    std::string why = fmt::format("{} of {} points present", owner.size(), *total);
    for (const ReportFile& f : inputs)
      if (member(f.doc, "complete") != true) why += fmt::format("; {} is incomplete", f.path);
    st.incomplete_reason = {{"kind", "merge"}, {"message", why}};
  }
  std::string note;
  json summary = recompute ? recompute(out, summaries, note) : json(nullptr);
  if (summary.is_null()) {
    st.summary_note = note.empty() ? "merge does not know how to recompute this command's summary; left empty" : note;
    summary = json::object();
  } else {
    st.summary_note = note;  // a part it could not recompute, if any
  }
  out.set_summary(std::move(summary));  // no output path yet: nothing written
  return out;
}

}  // namespace dropbench
