// Reports that belong to one sweep: what must agree between a report and the run that resumes it,
// or between the shard reports that `dropbench merge` joins, and the merge itself. The command-specific part
// (recomputing a summary from the merged points) is a callback, so this layer needs no command's code.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/core/config.hpp"
#include "src/core/report.hpp"

namespace dropbench {

// A report read from disk. Throws UsageError("<who>: PATH: what") for a missing / unreadable file, not JSON,
// not a dropbench report or another schema_version.
struct ReportFile {
  std::string path;
  json doc;
};
// Points measured since the report's last rewrite are in the journal beside it (report.hpp): they are folded in.
ReportFile read_report_file(const std::string& path, const std::string& who);

// The checks every reader of a report makes before using it (merge, --resume, compare, model --report): each
// field a reader interprets has its type and range ("command" a string, "points" an array of objects with an
// unsigned "index" below "total_points", "variants" with a "name" and "stats" object, "shard" with index < count,
// ...). Throws UsageError("<who>: <path>: <json path>: <what> (allowed: ...)").
// `placed`: the reader puts points and skipped entries by index (merge, --resume), so each must have one; compare
// matches them by axes and takes reports without (scripts/peers.py writes skipped entries with none).
void check_report_body(const json& doc, const std::string& who, const std::string& path, bool placed = true);

// What makes two reports parts of one sweep: command, the resolved config (read back through the config
// rules, so defaults added since compare as filled in; its "source" path is left out), the tool version and
// git sha, the device name, dry_run and the command's own options (context.options). Throws UsageError when a
// report's config no longer passes the config rules.
json report_identity(const json& doc, const std::string& who, const std::string& path);
// The identity of the run about to start, in the same form.
json run_identity(const std::string& command, const Config& cfg, const json& context);
// Differences between two identities, one "field A vs B" each (e.g. "config.sweep.sq [64] vs [64,128]",
// "tool version 0.1.0+abc vs 0.1.0+def"); empty when they belong together.
std::vector<std::string> identity_differences(const json& a, const json& b);

// A report's shard (absent: the whole sweep, 0/1) and total point count (nullopt when the report predates it).
Shard report_shard(const json& doc);
std::optional<size_t> report_total_points(const json& doc);

// Recomputes the command's summary from the merged report and the inputs' summaries. Returns null when the
// command's summary cannot be recomputed, and then sets `note` to why.
using SummaryRecompute = std::function<json(const Report& merged, const std::vector<json>& input_summaries,
                                            std::string& note)>;

// Joins `inputs` (at least one): checks they belong together (identity, equal shard counts and total points, no
// shard index twice), refuses a point index present in two inputs (UsageError "merge: point I ... is in A and
// B"), and returns the union sorted by index. "complete" only when every point of the sweep is present and
// every input was complete; "merged_from" lists the inputs; the summary comes from `recompute` (or is left
// empty with "summary_note" saying why).
Report merge_reports(const std::vector<ReportFile>& inputs, const SummaryRecompute& recompute);

}  // namespace dropbench
