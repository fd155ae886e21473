// Reports, tables and progress (see report.hpp; the JSON layout is documented in docs/report-schema.md).
#include "src/core/report.hpp"
#include "src/core/print.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <set>
#include <utility>

#include <time.h>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "src/core/input.hpp"

namespace dropbench {

// ---------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------

Report::Report(std::string command, json context, json config)
    : command_(std::move(command)), context_(std::move(context)), config_(std::move(config)) {}

void Report::set_output(const std::string& path) { path_ = path; }

namespace {

// Position that keeps a vector sorted by index (equal indices stay in insertion order).
template <class T>
size_t sorted_slot(const std::vector<T>& v, size_t index) {
  const auto it = std::upper_bound(v.begin(), v.end(), index, [](size_t i, const T& e) { return i < e.index; });
  return static_cast<size_t>(it - v.begin());
}

}  // namespace

json dropout_effective(const json& workload) {
  if (!workload.is_object() || !workload.contains("dropout_p") || !workload.contains("threshold_bits") ||
      !workload["dropout_p"].is_number() || !workload["threshold_bits"].is_number_integer())
    return nullptr;
  const Threshold t = make_threshold(workload["dropout_p"].get<double>(), workload["threshold_bits"].get<int>());
  json j = json::object();
  j["p_requested"] = t.p_requested;
  j["p_effective"] = 1.0 - t.keep_effective;
  j["keep_effective"] = t.keep_effective;
  j["p_error"] = t.p_error;
  j["drop_threshold"] = t.drop;
  j["threshold_bits"] = t.bits;
  return j;
}

std::string dropout_warning(double p, int bits) {
  const Threshold t = make_threshold(p, bits);
  const double p_eff = 1.0 - t.keep_effective;
  if (p <= 0) return "";
  // Off, or more than 10 % away from what was asked: the thresholds are round(p x 2^TW).
  if (p_eff > 0 && std::fabs(t.p_error) <= 0.1 * p) return "";
  return fmt::format("workload.dropout_p = {} with threshold_bits = {} samples p = {:.6g}{} (thresholds are "
                     "round(p x 2^{})); use threshold_bits 16 or 32",
                     p, bits, p_eff, p_eff == 0 ? " (dropout off)" : "", bits);
}

json skipped_to_json(const SkippedPoint& s);  // below, with to_json

void Report::add_point(PointResult p) {
  // What dropout the point actually sampled, whatever the command (the threshold rounds p).
  if (!p.derived.contains("dropout_effective")) {
    const json de = dropout_effective(p.workload);
    if (!de.is_null()) p.derived["dropout_effective"] = de;
  }
  const size_t at = sorted_slot(points_, p.index);
  points_.insert(points_.begin() + static_cast<std::ptrdiff_t>(at), std::move(p));
  points_raw_.insert(points_raw_.begin() + static_cast<std::ptrdiff_t>(at), json(nullptr));
  if (journal_on_ && journal_ && !path_.empty()) record("point", point_to_json(points_[at]));
  else write();
}

void Report::add_skipped(SkippedPoint s) {
  if (s.index == kNoIndex) s.index = current_;
  const size_t at = sorted_slot(skipped_, s.index);
  skipped_.insert(skipped_.begin() + static_cast<std::ptrdiff_t>(at), std::move(s));
  skipped_raw_.insert(skipped_raw_.begin() + static_cast<std::ptrdiff_t>(at), json(nullptr));
  if (journal_on_ && journal_ && !path_.empty()) record("skipped", skipped_to_json(skipped_[at]));
  else write();
}

void Report::adopt_point(const json& point) {
  PointResult p = point_from_json(point);
  const size_t at = sorted_slot(points_, p.index);
  points_.insert(points_.begin() + static_cast<std::ptrdiff_t>(at), std::move(p));
  points_raw_.insert(points_raw_.begin() + static_cast<std::ptrdiff_t>(at), point);
}

void Report::adopt_skipped(const json& entry) {
  SkippedPoint s;
  s.axes = entry.value("axes", json::object());
  s.reason = entry.value("reason", std::string());
  const auto idx = entry.find("index");
  s.index = idx != entry.end() && idx->is_number_unsigned() ? idx->get<size_t>() : kNoIndex;
  const size_t at = sorted_slot(skipped_, s.index);
  skipped_.insert(skipped_.begin() + static_cast<std::ptrdiff_t>(at), std::move(s));
  skipped_raw_.insert(skipped_raw_.begin() + static_cast<std::ptrdiff_t>(at), entry);
}

void Report::set_sweep(size_t total_points, std::optional<Shard> shard) {
  sweep_.known = true;
  sweep_.total_points = total_points;
  sweep_.shard = shard;
}

void Report::set_summary(json summary) {
  summary_ = std::move(summary);
  write();
}

namespace {

json variant_to_json(const VariantResult& v) {
  json j = json::object();
  j["name"] = v.name;
  j["peer"] = v.peer;
  j["stats"] = to_json(v.stats);
  json phases = json::array();
  for (const auto& [name, st] : v.phases) {
    json ph = json::object();
    ph["name"] = name;
    ph["stats"] = to_json(st);
    phases.push_back(std::move(ph));
  }
  j["phases"] = std::move(phases);
  j["derived"] = v.derived.is_null() ? json::object() : v.derived;
  j["extra"] = v.extra.is_null() ? json::object() : v.extra;
  if (!v.power.is_null()) j["power"] = v.power;
  return j;
}

}  // namespace

json point_to_json(const PointResult& p) {
  json j = json::object();
  j["index"] = p.index;
  j["axes"] = p.axes.is_null() ? json::object() : p.axes;
  j["workload"] = p.workload.is_null() ? json::object() : p.workload;
  json variants = json::array();
  for (const auto& v : p.variants) variants.push_back(variant_to_json(v));
  j["variants"] = std::move(variants);
  j["derived"] = p.derived.is_null() ? json::object() : p.derived;
  return j;
}

PointResult point_from_json(const json& j) {
  PointResult p;
  p.index = j.at("index").get<size_t>();
  p.axes = j.value("axes", json::object());
  p.workload = j.value("workload", json::object());
  p.derived = j.value("derived", json::object());
  for (const json& vj : j.at("variants")) {
    VariantResult v;
    v.name = vj.at("name").get<std::string>();
    v.peer = vj.value("peer", false);
    v.stats = stats_from_json(vj.at("stats"));
    if (const auto ph = vj.find("phases"); ph != vj.end() && ph->is_array())
      for (const json& e : *ph) v.phases.emplace_back(e.at("name").get<std::string>(), stats_from_json(e.at("stats")));
    v.derived = vj.value("derived", json::object());
    v.extra = vj.value("extra", json::object());
    v.power = vj.value("power", json(nullptr));
    p.variants.push_back(std::move(v));
  }
  return p;
}

json skipped_to_json(const SkippedPoint& s) {
  json e = json::object();
  if (s.index != kNoIndex) e["index"] = s.index;
  e["axes"] = s.axes.is_null() ? json::object() : s.axes;
  e["reason"] = s.reason;
  if (!s.plan.is_null()) e["plan"] = s.plan;
  return e;
}

json Report::to_json() const {
  json j = json::object();
  j["schema"] = "dropbench.report";
  j["schema_version"] = kReportSchemaVersion;
  j["command"] = command_;
  j["context"] = context_.is_null() ? json::object() : context_;
  j["config"] = config_.is_null() ? json::object() : config_;
  j["summary"] = summary_.is_null() ? json::object() : summary_;
  json points = json::array();
  for (size_t i = 0; i < points_.size(); ++i)
    points.push_back(points_raw_[i].is_null() ? point_to_json(points_[i]) : points_raw_[i]);
  j["points"] = std::move(points);
  json skipped = json::array();
  for (size_t i = 0; i < skipped_.size(); ++i) {
    if (!skipped_raw_[i].is_null()) {
      skipped.push_back(skipped_raw_[i]);
      continue;
    }
    skipped.push_back(skipped_to_json(skipped_[i]));
  }
  j["skipped"] = std::move(skipped);
  if (sweep_.known) {
    j["complete"] = sweep_.complete;
    if (!sweep_.complete && !sweep_.incomplete_reason.is_null()) j["incomplete_reason"] = sweep_.incomplete_reason;
    j["total_points"] = sweep_.total_points;
    if (sweep_.shard) j["shard"] = {{"index", sweep_.shard->index}, {"count", sweep_.shard->count}};
    if (!sweep_.resumed_from.is_null()) j["resumed_from"] = sweep_.resumed_from;
    if (!sweep_.merged_from.is_null()) j["merged_from"] = sweep_.merged_from;
    if (!sweep_.summary_note.empty()) j["summary_note"] = sweep_.summary_note;
  }
  return j;
}

// ---------------------------------------------------------------------------------------------------
// Journal
// ---------------------------------------------------------------------------------------------------

namespace {

// Entries the journal may hold before the report is rewritten: at least this many, else as many as the report
// holds (so the rewrites' bytes sum to a few times the final report's, whatever the number of points).
constexpr size_t kJournalMinEntries = 256;
// The journal is synced to the disk at most this often (a process that dies loses nothing either way: what it
// wrote is in the page cache; a machine that loses power loses at most this long of points).
constexpr double kJournalSyncSeconds = 1.0;

std::string journal_path(const std::string& report) { return report + ".journal"; }

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

void write_all(int fd, const std::string& text, const std::string& path) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write", path, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool is_running(const SweepState& st) {
  return st.known && !st.complete && st.incomplete_reason.is_object() &&
         st.incomplete_reason.value("kind", json()) == "running";
}

}  // namespace

struct Report::Journal {
  std::string path;
  std::string id;
  int fd = -1;
  size_t entries = 0;  // lines since the last rewrite
  size_t base = 0;     // points + skipped entries in the last rewrite
  std::chrono::steady_clock::time_point synced = std::chrono::steady_clock::now();
  ~Journal() {
    if (fd >= 0) ::close(fd);
  }
};

void Report::record(const char* kind, const json& entry) {
  Journal& j = *journal_;
  if (j.entries + 1 > std::max(kJournalMinEntries, j.base)) {
    write();  // the whole report, the journal emptied
    return;
  }
  json line = json::object();
  line[kind] = entry;
  write_all(j.fd, line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", j.path);
  ++j.entries;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - j.synced).count() >= kJournalSyncSeconds) {
    if (::fdatasync(j.fd) != 0) throw_io("cannot sync", j.path, errno);
    j.synced = now;
  }
}

void Report::write() const {
  if (path_.empty()) return;
  json doc = to_json();
  const bool running = journal_on_ && is_running(sweep_);
  if (running && !journal_) {
    journal_ = std::make_shared<Journal>();
    journal_->path = journal_path(path_);
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    journal_->id = fmt::format("{}.{:09d}-{}", static_cast<long long>(t.tv_sec), static_cast<long>(t.tv_nsec),
                               static_cast<long>(::getpid()));
  }
  if (running)
    doc["incomplete_reason"]["journal"] = {{"file", std::filesystem::path(journal_->path).filename().string()},
                                           {"id", journal_->id}};
  // Replace invalid UTF-8 (e.g. from a hostname or a kernel name) instead of failing mid-sweep.
  std::string text = doc.dump(2, ' ', false, json::error_handler_t::replace);
  text += '\n';
  write_file_atomic(path_, text);
  written_ = true;
  if (!journal_) return;
  Journal& j = *journal_;
  if (running) {  // the report holds every entry now: start the journal over (a stale one is overwritten)
    if (j.fd < 0) j.fd = ::open(j.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    else if (::ftruncate(j.fd, 0) != 0) throw_io("cannot truncate", j.path, errno);
    if (j.fd < 0) throw_io("cannot write", j.path, errno);
    json head = json::object();
    head["journal"] = "dropbench.report";
    head["id"] = j.id;
    write_all(j.fd, head.dump() + "\n", j.path);
    j.entries = 0;
    j.base = points_.size() + skipped_.size();
  } else {  // complete, or stopped with the reason written: the report is whole, the journal not needed
    ::unlink(j.path.c_str());
    journal_.reset();
  }
}

void fold_journal(json& doc, const std::string& path, const std::string& who) {
  if (!doc.is_object()) return;
  const auto reason = doc.find("incomplete_reason");
  if (reason == doc.end() || !reason->is_object() || reason->value("kind", json()) != "running") return;
  const auto jr = reason->find("journal");
  if (jr == reason->end() || !jr->is_object() || !jr->contains("id") || !jr->at("id").is_string()) return;
  const std::string id = jr->at("id").get<std::string>();
  const std::string jpath = journal_path(path);
  std::error_code ec;
  if (!std::filesystem::exists(jpath, ec)) return;
  const std::string text = read_input_file(jpath, who, "the journal dropbench writes beside a running report");
  const auto points = doc.find("points");
  const auto skipped = doc.find("skipped");
  if (points == doc.end() || !points->is_array() || skipped == doc.end() || !skipped->is_array()) return;
  std::set<size_t> have_points, have_skipped;
  for (const json& p : *points)
    if (p.is_object() && p.contains("index") && p.at("index").is_number_unsigned()) have_points.insert(p.at("index").get<size_t>());
  for (const json& s : *skipped)
    if (s.is_object() && s.contains("index") && s.at("index").is_number_unsigned()) have_skipped.insert(s.at("index").get<size_t>());
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t nl = text.find('\n', start);
    const bool torn = nl == std::string::npos;  // the last line, cut by a process that died writing it
    const std::string line = text.substr(start, torn ? std::string::npos : nl - start);
    start = torn ? text.size() : nl + 1;
    ++line_no;
    auto bad = [&](const std::string& why) {
      throw UsageError(one_line(fmt::format("{}: {}: line {}: {} (allowed: the journal dropbench writes beside a "
                                            "running report; delete it to keep only the report's points)",
                                            who, jpath, line_no, why)));
    };
    if (json_depth(line) > kMaxJsonDepth) bad("nested too deep");
    const json e = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (e.is_discarded()) {
      if (torn) break;
      bad("not JSON");
    }
    if (line_no == 1) {  // the header: a journal of another run than the report's is not this report's
      if (!e.is_object() || e.value("journal", json()) != "dropbench.report" || e.value("id", json()) != id) return;
      continue;
    }
    const bool is_point = e.is_object() && e.size() == 1 && e.contains("point");
    const bool is_skipped = e.is_object() && e.size() == 1 && e.contains("skipped");
    if (!is_point && !is_skipped) bad("not {\"point\": ...} or {\"skipped\": ...}");
    const json& entry = e.begin().value();
    if (!entry.is_object() || !entry.contains("index") || !entry.at("index").is_number_unsigned())
      bad("the entry has no index");
    const size_t index = entry.at("index").get<size_t>();
    // An entry already in the report: the process stopped between a rewrite and emptying the journal.
    if (!(is_point ? have_points : have_skipped).insert(index).second) continue;
    (is_point ? *points : *skipped).push_back(entry);
  }
}

// ---------------------------------------------------------------------------------------------------
// Atomic file write
// ---------------------------------------------------------------------------------------------------

void write_file_atomic(const std::string& path, const std::string& text) {
  if (path.empty()) throw std::runtime_error("write: empty output path");
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));

  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw_io("cannot write", path, errno);

  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_io(what, path, err);
  };

  try {
    write_all(fd, text, path);
  } catch (const std::runtime_error&) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0) fail("cannot fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_io("cannot close", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_io("cannot rename temp file onto", path, err);
  }

  // Make the rename itself durable (best effort: some file systems refuse fsync on directories).
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// ---------------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------------

namespace {

void check_table(const Table& t) {
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.rows[r].size() > t.columns.size()) {
      throw std::invalid_argument(fmt::format("table: row {} has {} cells for {} columns", r, t.rows[r].size(),
                                              t.columns.size()));
    }
  }
}

// Cell c of a row; short rows read as empty cells.
const std::string& cell(const std::vector<std::string>& row, size_t c) {
  static const std::string empty;
  return c < row.size() ? row[c] : empty;
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;  // from_chars rejects a leading '+'
  if (b == e) return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(b, e, v);
  // Out-of-range values are still numbers as far as alignment goes.
  return ptr == e && (ec == std::errc() || ec == std::errc::result_out_of_range);
}

// Display width: UTF-8 code points (continuation bytes do not count).
size_t display_width(const std::string& s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
  return w;
}

// Markdown cell text: '|' would end the cell and a newline the row.
std::string md_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    if (ch == '|') {
      out += "\\|";
    } else if (ch == '\n' || ch == '\r') {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

}  // namespace

std::string render_markdown(const Table& t) {
  check_table(t);
  const size_t nc = t.columns.size();
  if (nc == 0) return {};

  std::vector<std::string> header(nc);
  std::vector<std::vector<std::string>> body(t.rows.size(), std::vector<std::string>(nc));
  std::vector<std::vector<bool>> numeric(t.rows.size(), std::vector<bool>(nc, false));
  std::vector<size_t> width(nc, 3);  // "---" is the shortest separator
  std::vector<bool> col_numeric(nc, false);  // every non-empty cell numeric, at least one such cell

  for (size_t c = 0; c < nc; ++c) {
    header[c] = md_escape(t.columns[c]);
    width[c] = std::max(width[c], display_width(header[c]));
    bool any = false, all = true;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      const std::string& raw = cell(t.rows[r], c);
      body[r][c] = md_escape(raw);
      numeric[r][c] = is_number(raw);
      width[c] = std::max(width[c], display_width(body[r][c]));
      if (!raw.empty()) {
        any = true;
        all = all && numeric[r][c];
      }
    }
    col_numeric[c] = any && all;
  }

  auto pad = [](const std::string& s, size_t w, bool right) {
    const size_t n = display_width(s);
    const std::string fill(w > n ? w - n : 0, ' ');
    return right ? fill + s : s + fill;
  };

  std::string out;
  out += '|';
  for (size_t c = 0; c < nc; ++c) out += ' ' + pad(header[c], width[c], col_numeric[c]) + " |";
  out += '\n';
  out += '|';
  for (size_t c = 0; c < nc; ++c) {
    // Right-aligned columns get "---:"; the dashes fill the column so the separator lines up too.
    out += ' ';
    out += col_numeric[c] ? std::string(width[c] - 1, '-') + ':' : std::string(width[c], '-');
    out += " |";
  }
  out += '\n';
  for (size_t r = 0; r < body.size(); ++r) {
    out += '|';
    for (size_t c = 0; c < nc; ++c) out += ' ' + pad(body[r][c], width[c], numeric[r][c]) + " |";
    out += '\n';
  }
  return out;
}

std::string render_csv(const Table& t) {
  check_table(t);
  const size_t nc = t.columns.size();
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < nc; ++c) {
      if (c) out += ',';
      out += csv_field(cell(row, c));
    }
    out += '\n';
  };
  if (nc == 0) return out;
  line(t.columns);
  for (const auto& row : t.rows) line(row);
  return out;
}

json table_to_json(const Table& t) {
  check_table(t);
  json arr = json::array();
  for (const auto& row : t.rows) {
    json o = json::object();
    for (size_t c = 0; c < t.columns.size(); ++c) o[t.columns[c]] = cell(row, c);
    arr.push_back(std::move(o));
  }
  return arr;
}

std::string render(const Table& t, const std::string& format) {
  if (format == "md") return render_markdown(t);
  if (format == "csv") return render_csv(t);
  if (format == "json") return table_to_json(t).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  throw std::invalid_argument(fmt::format("unknown table format '{}' (allowed: md, csv, json)", format));
}

std::string axis_cell(const json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return fmt_num(d);
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

std::string derived_cell(const json& obj, const std::string& key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (it->is_number()) return fmt_num(it->get<double>());
  if (it->is_string()) return it->get<std::string>();
  return it->dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

Table standard_table(const Report& r, const std::vector<std::string>& derived_cols) {
  Table t;
  std::vector<std::string> axis_keys;
  for (const auto& p : r.points()) {
    if (!p.axes.is_object()) continue;
    for (auto it = p.axes.begin(); it != p.axes.end(); ++it) {
      if (std::find(axis_keys.begin(), axis_keys.end(), it.key()) == axis_keys.end()) axis_keys.push_back(it.key());
    }
  }
  t.columns = axis_keys;
  for (const char* c : {"variant", "median_us", "rel_stdev_%", "samples"}) t.columns.emplace_back(c);
  for (const auto& d : derived_cols) t.columns.push_back(d);

  for (const auto& p : r.points()) {
    std::vector<std::string> axis_cells;
    axis_cells.reserve(axis_keys.size());
    for (const auto& k : axis_keys) {
      if (p.axes.is_object() && p.axes.contains(k)) {
        axis_cells.push_back(axis_cell(p.axes.at(k)));
      } else {
        axis_cells.emplace_back();
      }
    }
    for (const auto& v : p.variants) {
      std::vector<std::string> row = axis_cells;
      row.push_back(v.name);
      // A variant without samples (a dry run's, or one the noise rule never timed) was not measured: "-", not 0.
      const bool measured = v.stats.samples > 0;
      row.push_back(measured ? fmt_num(v.stats.median * 1e6) : "-");
      row.push_back(measured ? fmt_num(v.stats.rel_stdev * 100.0) : "-");
      row.push_back(measured ? std::to_string(v.stats.samples) : "-");
      for (const auto& d : derived_cols) row.push_back(derived_cell(v.derived, d));
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

Table dry_plan_table(const Report& r) {
  Table t;
  std::vector<std::string> axis_keys;
  auto add_keys = [&](const json& axes) {
    if (!axes.is_object()) return;
    for (auto it = axes.begin(); it != axes.end(); ++it)
      if (std::find(axis_keys.begin(), axis_keys.end(), it.key()) == axis_keys.end()) axis_keys.push_back(it.key());
  };
  for (const auto& p : r.points()) add_keys(p.axes);
  for (const auto& s : r.skipped()) add_keys(s.axes);
  t.columns = axis_keys;
  for (const char* c : {"variant", "memory", "device", "model_us", "plan"}) t.columns.emplace_back(c);
  auto axis_cells = [&](const json& axes) {
    std::vector<std::string> cells;
    for (const auto& k : axis_keys)
      cells.push_back(axes.is_object() && axes.contains(k) ? axis_cell(axes.at(k)) : std::string("-"));
    return cells;
  };
  auto bytes_cell = [](const json& plan, const char* key) -> std::string {
    const json* v = nullptr;
    if (plan.is_object() && std::string(key) == "need") {
      const auto m = plan.find("memory");
      if (m != plan.end() && m->contains("need_bytes")) v = &m->at("need_bytes");
    } else if (plan.is_object() && plan.contains(key)) {
      v = &plan.at(key);
    }
    if (!v || !v->is_number()) return "-";
    const double b = v->get<double>();
    return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  };
  struct Row {
    size_t index;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;
  for (const auto& p : r.points()) {
    const json plan = p.derived.is_object() ? p.derived.value("plan", json()) : json();
    for (const auto& v : p.variants) {
      std::vector<std::string> row = axis_cells(p.axes);
      row.push_back(v.name);
      row.push_back(bytes_cell(plan, "need"));
      row.push_back(bytes_cell(plan, "device_memory_bytes"));
      const auto m = v.derived.find("model_us");
      row.push_back(m != v.derived.end() && m->is_number() ? fmt_num(m->get<double>()) : "-");
      row.push_back("runs");
      rows.push_back({p.index, std::move(row)});
    }
    // run: pipelines the plan leaves out at this point (their masks do not fit).
    if (p.derived.is_object() && p.derived.contains("skipped_pipelines"))
      for (auto it = p.derived["skipped_pipelines"].begin(); it != p.derived["skipped_pipelines"].end(); ++it) {
        std::vector<std::string> row = axis_cells(p.axes);
        row.push_back(it.key());
        row.push_back(bytes_cell(plan, "need"));
        row.push_back(bytes_cell(plan, "device_memory_bytes"));
        row.push_back("-");
        row.push_back("skipped: " + (it->is_string() ? it->get<std::string>() : it->dump()));
        rows.push_back({p.index, std::move(row)});
      }
  }
  for (const auto& s : r.skipped()) {
    std::vector<std::string> row = axis_cells(s.axes);
    row.push_back("-");
    row.push_back(bytes_cell(s.plan, "need"));
    row.push_back(bytes_cell(s.plan, "device_memory_bytes"));
    row.push_back("-");
    row.push_back("skipped: " + s.reason);
    rows.push_back({s.index, std::move(row)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.index < b.index; });
  for (Row& row : rows) t.rows.push_back(std::move(row.cells));
  return t;
}

// ---------------------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------------------

Progress::Progress(size_t total, bool quiet)
    : total_(total), quiet_(quiet), t0_(std::chrono::steady_clock::now()) {}

void Progress::step(size_t i, const std::string& label) {
  if (quiet_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::string eta = "?";
  if (i > 0) {
    const size_t remaining = total_ > i ? total_ - i : 0;
    eta = fmt::format("{:.1f} s", elapsed / static_cast<double>(i) * static_cast<double>(remaining));
  }
  print_stderr("[{}/{}] {}  elapsed {:.1f} s  ETA {}\n", i + 1, total_, label, elapsed, eta);
  std::fflush(stderr);
}

void Progress::done() {
  if (quiet_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  print_stderr("[{}/{}] done  elapsed {:.1f} s\n", total_, total_, elapsed);
  std::fflush(stderr);
}

// ---------------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------------

namespace {

// Decimals shown for magnitude `a` (1e-3 <= a < 1e7): >=100: 0, >=10: 1, >=1: 2, <1: 3 significant digits.
int decimals_for(double a) {
  if (a >= 100) return 0;
  if (a >= 10) return 1;
  if (a >= 1) return 2;
  if (a >= 0.1) return 3;
  if (a >= 0.01) return 4;
  return 5;
}

// Round half away from zero (printf rounds exact binary ties to even: 1234.5 would print "1234").
double round_to(double a, int dec) {
  const double scale = std::pow(10.0, dec);
  return std::round(a * scale) / scale;
}

}  // namespace

std::string fmt_num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return "0";

  const double a = std::fabs(v);
  if (a < 1e-3 || a >= 1e7) return fmt::format("{:.2e}", v);

  int dec = decimals_for(a);
  double r = round_to(a, dec);
  // Rounding can carry into the next magnitude (9.996 -> 10.00, 0.09996 -> 0.1000): re-pick the decimals
  // for the rounded value so the figure keeps the shape of any other of its size.
  if (r >= 1e7) return fmt::format("{:.2e}", v);
  if (decimals_for(r) < dec) {
    dec = decimals_for(r);
    r = round_to(a, dec);
  }
  return fmt::format("{:.{}f}", v < 0 ? -r : r, dec);
}

}  // namespace dropbench
