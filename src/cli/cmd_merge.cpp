// `dropbench merge a.json b.json ... -o all.json`: joins the reports of one sweep's shards (--shard i/N,
// --devices, scripts/slurm/) or of partial runs into one report (src/core/merge.hpp checks that they belong
// together). Here: the command-specific part, recomputing each command's summary from the merged points.
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/print.hpp"
#include "src/block/run_figures.hpp"
#include "src/cli/cli.hpp"
#include "src/core/merge.hpp"

namespace dropbench {

// Reads and merges `inputs` (also called by cli.cpp for --devices).
Report merge_report_files(const std::vector<std::string>& inputs);

namespace {

// Keys of the inputs' summaries that `recomputed` lacks (sm_mhz_at_end is per process: merged_from keeps it).
std::string missing_keys(const json& recomputed, const std::vector<json>& inputs, const std::set<std::string>& also_ok) {
  std::set<std::string> missing;
  for (const json& s : inputs)
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "sm_mhz_at_end" && !also_ok.count(it.key()) && !recomputed.contains(it.key()))
        missing.insert(it.key());
  std::string out;
  for (const std::string& k : missing) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// `run`: run_summary over the merged points, with the counters summed over the inputs and their
// co-residency target rows joined (each is one point's, so the shards never repeat one).
json recompute_run(const Report& merged, const std::vector<json>& inputs, std::string& note) {
  RunTotals totals;
  json traces = json::array();
  for (const json& s : inputs) {
    totals.counters.mismatches += s.value("bitwise_mismatches", 0);
    totals.counters.unmeasured += s.value("measurements_without_samples", 0);
    if (const auto t = s.find("coresidency_target"); t != s.end() && t->is_array())
      for (const json& row : *t) totals.target.push_back(row);
    if (const auto t = s.find("trace"); t != s.end()) traces.push_back(*t);
  }
  json summary = run_summary(merged, totals);
  // One trace file per process: the merged report lists them all.
  if (!traces.empty()) summary["traces"] = traces;
  const std::string lost = missing_keys(summary, inputs, {"trace"});
  if (!lost.empty()) note = "run: summary keys not recomputed by merge (left out): " + lost;
  return summary;
}

// dropout, gemm, attention: their summaries hold nothing but the end clock (kept per input in merged_from).
json recompute_empty(const Report&, const std::vector<json>& inputs, std::string& note) {
  json summary = json::object();
  const std::string lost = missing_keys(summary, inputs, {});
  if (!lost.empty()) note = "summary keys not recomputed by merge (left out): " + lost;
  return summary;
}

json recompute_summary(const std::string& command, const Report& merged, const std::vector<json>& inputs,
                       std::string& note) {
  if (command == "run") return recompute_run(merged, inputs, note);
  if (command == "dropout" || command == "gemm" || command == "attention") return recompute_empty(merged, inputs, note);
  // rng's ratios_to_r7 pair points of different rounds, which round-robin puts in different shards; it is
  // computed inside cmd_rng.cpp's table loop, so merge cannot rebuild it here.
  note = fmt::format("{}: merge does not recompute this command's summary (a concatenation of the shards' would be "
                     "wrong); summary left empty",
                     command);
  return nullptr;
}

struct MergeOptions {
  std::vector<std::string> files;
  std::string output;
};

int run_merge(const MergeOptions& o) {
  check_output_path(o.output);  // the sweeping commands' check, before anything is read
  Report merged = merge_report_files(o.files);
  merged.set_output(o.output);
  merged.write();
  const SweepState& st = merged.sweep();
  print_stderr("dropbench: merged {} report(s): {} of {} points ({}) -> {}{}\n", o.files.size(),
             merged.points().size() + merged.skipped().size(), st.total_points,
             st.complete ? "complete" : "incomplete", o.output,
             st.summary_note.empty() ? "" : "; " + st.summary_note);
  return 0;
}

}  // namespace

Report merge_report_files(const std::vector<std::string>& inputs) {
  std::vector<ReportFile> files;
  for (const std::string& p : inputs) files.push_back(read_report_file(p, "merge"));
  const std::string command = files.empty() ? std::string() : files.front().doc.at("command").get<std::string>();
  return merge_reports(files, [&command](const Report& m, const std::vector<json>& in, std::string& note) {
    return recompute_summary(command, m, in, note);
  });
}

Command make_merge_command() {
  auto o = std::make_shared<MergeOptions>();
  Command c;
  c.name = "merge";
  c.summary = "Join the reports of one sweep's shards (--shard, --devices, Slurm) into one report";
  c.help =
      "Checks that the reports belong to one sweep (command, resolved config, tool version and git sha, device name,\n"
      "dry run, the command's own options, shard count and total_points), refuses a point index present in two\n"
      "reports and a shard given twice, and writes their points and skipped points sorted by index.\n"
      "\"complete\" is true only when every point of the sweep is present and every input was complete;\n"
      "\"merged_from\" lists the inputs (path, shard, complete, host, date, end clock). The summary is recomputed\n"
      "from the merged points (run: run_summary with the inputs' counters summed); a command whose summary merge\n"
      "cannot recompute (rng) gets an empty summary and \"summary_note\" says so.\n"
      "Examples:\n"
      "  dropbench run --config configs/llama3-70b.json --shard 0/2 -o s0.json   (and --shard 1/2 -o s1.json)\n"
      "  dropbench merge s0.json s1.json -o all.json";
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    app.add_option("reports", o->files, "Report files to join (one or more)")->required()->type_name("FILE");
    app.add_option("-o,--output", o->output, "Write the merged report here")->required()->type_name("FILE");
  };
  c.run = [o](RunContext&) { return run_merge(*o); };
  return c;
}

}  // namespace dropbench
