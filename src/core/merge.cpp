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

ReportFile read_report_file(const std::string& path, const std::string& who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) bad(who, path, "no such file");
  if (fs::is_directory(path, ec)) bad(who, path, "is a directory, not a report file");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(who, path, fmt::format("cannot open ({})", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  ReportFile f{path, nullptr};
  try {
    f.doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    bad(who, path, fmt::format("not JSON (parse error at byte {})", e.byte));
  }
  if (!f.doc.is_object() || member(f.doc, "schema") != "dropbench.report")
    bad(who, path, "not a dropbench report (\"schema\" is not \"dropbench.report\")");
  if (member(f.doc, "schema_version") != kReportSchemaVersion)
    bad(who, path, fmt::format("schema_version {} is not supported (this dropbench reads {})",
                               text(member(f.doc, "schema_version")), kReportSchemaVersion));
  if (!member(f.doc, "command").is_string()) bad(who, path, "\"command\" is missing or not a string");
  if (!member(f.doc, "points").is_array()) bad(who, path, "\"points\" is missing or not an array");
  if (!member(f.doc, "skipped").is_array()) bad(who, path, "\"skipped\" is missing or not an array");
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

Report merge_reports(const std::vector<ReportFile>& inputs, const SummaryRecompute& recompute) {
  if (inputs.empty()) throw UsageError("merge: no reports given (allowed: one or more report files)");
  const ReportFile& first = inputs.front();
  const json id0 = report_identity(first.doc, "merge", first.path);
  const Shard sh0 = report_shard(first.doc);
  const std::optional<size_t> total = report_total_points(first.doc);
  if (!total)
    bad("merge", first.path, "has no \"total_points\" (written by a dropbench that predates sharding; rerun it)");

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
    if (report_total_points(f.doc) != total)
      throw UsageError(fmt::format("merge: {} has total_points {}, {} has {} (allowed: reports of one sweep)", f.path,
                                   text(member(f.doc, "total_points")), first.path, *total));
    if (sh.count > 1) {
      const auto [it, fresh] = shard_owner.emplace(sh.index, f.path);
      if (!fresh)
        throw UsageError(fmt::format("merge: shard {}/{} is in both {} and {} (allowed: each shard once)", sh.index,
                                     sh.count, it->second, f.path));
    }
  }

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
        bad("merge", f.path, fmt::format("point {} is malformed ({})", p.at("index").get<size_t>(), e.what()));
      }
    }
    for (const json& s : f.doc.at("skipped")) {
      if (!s.is_object() || !member(s, "index").is_number_unsigned())
        bad("merge", f.path, "a skipped entry has no index (written by a dropbench that predates sharding; rerun it)");
      claim(s.at("index").get<size_t>(), member(s, "axes"), f.path);
      out.adopt_skipped(s);
    }
    const bool complete = member(f.doc, "complete") == true;
    all_complete = all_complete && complete;
    const Shard sh = report_shard(f.doc);
    const json ctx = member(f.doc, "context");
    json in = json::object();
    in["path"] = f.path;
    in["shard"] = {{"index", sh.index}, {"count", sh.count}};
    in["complete"] = complete;
    in["points"] = f.doc.at("points").size();
    in["skipped"] = f.doc.at("skipped").size();
    in["date_utc"] = member(ctx, "date_utc");
    in["hostname"] = member(ctx, "hostname");
    in["device_index"] = member(member(ctx, "device"), "index");
    in["sm_mhz_at_end"] = member(member(f.doc, "summary"), "sm_mhz_at_end");
    merged_from.push_back(std::move(in));
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
