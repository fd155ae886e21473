// Reports: a JSON document (docs/report-schema.md, "schema_version") written atomically, a markdown/CSV/JSON
// table on stdout, and a progress line on stderr.
// A sweep's report (use_journal) is not rewritten whole after every point, which costs time in proportion to the
// points already in it: each point is appended as one line to FILE.journal beside it, and the report is rewritten
// (the journal emptied) when the journal holds as many entries as the report, and when the sweep ends. The
// rewritten report names the journal in incomplete_reason ("journal": {"file", "id"}), so that a reader of a
// report left "running" (a process killed without warning) folds the journal's points in (fold_journal: merge,
// --resume). The cost per point is then constant (amortized), and every point that ended is on disk.
#pragma once
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/core/config.hpp"
#include "src/core/stats.hpp"

namespace dropbench {

constexpr int kReportSchemaVersion = 1;

// Output that could not be written (stdout full, closed or a broken pipe): reported, exit non-zero.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One measured variant at one point (e.g. "rng" of rng, "seeded" of dropout, "overlap" of run).
struct VariantResult {
  std::string name;
  bool peer = false;                       // measured from another tool (scripts/peers.py)
  Stats stats;                             // the whole variant (seconds)
  std::vector<std::pair<std::string, Stats>> phases;  // per-phase stats, in execution order
  json derived = json::object();           // Gelem/s, GB/s, TFLOP/s, ratios... (name -> number)
  json extra = json::object();             // anything else (memory, checksums, thresholds...)
  json power;                              // the harness's power pass (Measurement::power); null = not measured
};

struct PointResult {
  size_t index = 0;
  json axes = json::object();
  json workload = json::object();          // resolved workload at this point
  std::vector<VariantResult> variants;
  json derived = json::object();           // point-level figures (e.g. winner, speedups)
};

// A skipped point's index when the writer did not give one (older reports have none).
constexpr size_t kNoIndex = static_cast<size_t>(-1);

struct SkippedPoint {
  json axes = json::object();
  std::string reason;
  size_t index = kNoIndex;  // kNoIndex: add_skipped() takes the index set by set_current_index()
  json plan;                // a dry run's plan of the point (src/cli/dry_plan.hpp); null: not written
};

// The slice of a sweep one process measures: the points whose index % count == index (round-robin, so that a
// sweep ordered by size spreads its big points over every shard).
struct Shard {
  size_t index = 0;
  size_t count = 1;
  bool holds(size_t point) const { return point % count == index; }
};

// What a report says about the sweep as a whole (docs/report-schema.md, "Sweep state"): written only once
// set_sweep() has been called, so a bare Report (tests, tools) keeps the eight top-level keys.
struct SweepState {
  bool known = false;                // set_sweep() was called
  size_t total_points = 0;           // points in the whole sweep (every shard)
  std::optional<Shard> shard;        // --shard i/N
  bool complete = false;             // every point of this report's slice is measured or skipped
  json incomplete_reason = nullptr;  // object: kind (running|signal|error|merge), signal, point_index, message
  json resumed_from = nullptr;       // object: path, date_utc, points_kept, skipped_kept
  json merged_from = nullptr;        // array: one object per input of `dropbench merge`
  std::string summary_note;          // merge: why the summary is not recomputed ("" = recomputed)
};

class Report {
 public:
  // `command` is the subcommand ("rng"...); `context` from make_context(); `config` resolved config JSON.
  Report(std::string command, json context, json config);
  void set_output(const std::string& path);      // "" = no file
  void add_point(PointResult p);                 // then rewrites the file atomically
  void add_skipped(SkippedPoint s);              // likewise
  void set_summary(json summary);                // command-level results (e.g. R ratios); rewrites
  // The sweep's state (total points, shard, complete, ...): set once by SweepSession, updated as it ends.
  void set_sweep(size_t total_points, std::optional<Shard> shard);
  SweepState& sweep() { return sweep_; }
  const SweepState& sweep() const { return sweep_; }
  // The point being measured: add_skipped() records it for entries that name no index.
  void set_current_index(size_t i) { current_ = i; }
  // A point or skipped entry read back from a report (--resume, merge): kept as written (keys this build
  // does not know survive) and parsed for the summaries. Points are kept sorted by index.
  void adopt_point(const json& point);
  void adopt_skipped(const json& entry);
  json to_json() const;
  const std::vector<PointResult>& points() const { return points_; }
  const std::vector<SkippedPoint>& skipped() const { return skipped_; }
  void write() const;                            // no-op without output path
  // From now on, points and skipped entries go to the journal between rewrites (see the top of this file); the
  // first one added writes the whole report, so a report is written only once there is a point to keep.
  void use_journal() { journal_on_ = true; }
  // Whether this Report has written its output file.
  bool written() const { return written_; }

 private:
  struct Journal;
  void record(const char* kind, const json& entry);
  std::string command_, path_;
  json context_, config_, summary_ = json::object();
  std::vector<PointResult> points_;
  std::vector<SkippedPoint> skipped_;
  std::vector<json> points_raw_, skipped_raw_;  // as read back, null for points measured here (same order)
  SweepState sweep_;
  size_t current_ = kNoIndex;
  bool journal_on_ = false;
  mutable bool written_ = false;
  mutable std::shared_ptr<Journal> journal_;  // open while the report is written as running
};

// A report read back (`doc`, from `path`) that was left "running" with a journal: adds the journal's points and
// skipped entries that the report lacks (by index). A journal of another run (its id differs), or none, is
// ignored; a torn last line (the process died while writing it) is dropped. Throws UsageError("<who>: ...") for a
// journal line that is not an entry.
void fold_journal(json& doc, const std::string& path, const std::string& who);

// A report's point read back (stats through stats_from_json); throws nlohmann's errors on a malformed point.
PointResult point_from_json(const json& j);
json point_to_json(const PointResult& p);

// The dropout a workload (JSON) actually samples: p_requested, p_effective, keep_effective, p_error,
// drop_threshold, threshold_bits; null without dropout_p / threshold_bits. Report::add_point stores it in every
// point's derived.dropout_effective.
json dropout_effective(const json& workload);
// One warning line when p > 0 samples as 0 or more than 10 % away from p at these threshold bits; "" otherwise.
std::string dropout_warning(double p, int bits);

// Write `text` to `path` through a temp file in the same directory + rename (readers never see half a file).
void write_file_atomic(const std::string& path, const std::string& text);

// A table: column headers and rows of already-formatted cells.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};
std::string render_markdown(const Table& t);
std::string render_csv(const Table& t);
// Table -> JSON array of objects (numbers stay strings as formatted).
json table_to_json(const Table& t);
std::string render(const Table& t, const std::string& format);  // "md" | "csv" | "json"

// Standard rows for a report: one row per (point, variant): axes..., variant, median (us), rel stdev,
// samples, then the derived figures named in `derived_cols` (header = the key).
Table standard_table(const Report& r, const std::vector<std::string>& derived_cols);

// A dry run's table (what the sweep will do): one row per (point, variant) and one per skipped
// point or pipeline: axes..., variant, memory (the point's need), device (what it was checked against),
// model_us (the model's estimate), plan ("runs", or "skipped: why"); "-" for what a dry run does not know.
Table dry_plan_table(const Report& r);

// "[i/N] elapsed 12.3s, ETA 45.6s: <label>" on stderr (suppressed when quiet).
class Progress {
 public:
  Progress(size_t total, bool quiet);
  void step(size_t i, const std::string& label);  // call before measuring point i (0-based)
  void done();
 private:
  size_t total_;
  bool quiet_;
  std::chrono::steady_clock::time_point t0_;
};

// Human number formatting used in tables: 3 significant digits.
std::string fmt_num(double v);

// A sweep axis value as a table cell (reports' tables, dropbench compare): strings bare, integers exact, other
// numbers and bools as JSON writes them, non-finite numbers as fmt_num.
std::string axis_cell(const json& v);

}  // namespace dropbench
