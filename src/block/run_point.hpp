// `dropbench run`, one sweep point at a time: the steps that measure one block (the pieces alone, the GEMM || RNG
// overlap mechanisms, the pipelines, an optional CUDA-graph replay and CUPTI trace) and the figures derived from
// them. A point is measured in interleaved groups (src/core/harness.hpp), each set up and checked first:
//   1. the pieces alone and the fixed overlap mechanisms (hidden fractions are paired within it)
//   2. the partition mechanisms, 3. the GEMM-candidate scan (each chosen from group 1's times)
//   4. the pipelines and their graph replays (speedups are paired within it) src/cli/cmd_run.cpp holds only the options and the sweep loop; each step lives in its own file here:
//   run_point.cpp     the pieces alone, the pipelines (+ --graph), validation against the reference pipeline
//   mechanisms.cpp    the overlap-mechanism registry and its exploration
//   run_trace.cpp     --trace: one untimed execution per pipeline under CUPTI
//   run_figures.cpp   per-point speedups / exposed dropout / winner, and the sweep summary
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/block/block_pipelines.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/core/bootstrap.hpp"
#include "src/core/harness.hpp"
#include "src/core/report.hpp"
#include "src/core/sweep_session.hpp"

namespace dropbench {

struct RunOptions {
  std::string pipelines;             // --pipelines (not given: sweep.pipeline if the config sweeps it, else all four)
  bool pipelines_given = false;      // --pipelines was on the command line (an empty list is refused)
  bool no_validate = false;          // --no-validate
  bool no_explore = false;           // --no-explore
  int top_k = 4;                     // --top-k
  double mask_budget_gib = 0;        // --mask-budget (GiB; 0 = free device memory)
  std::string overlap_rng = "auto";  // --overlap-rng
  std::string trace;                 // --trace FILE (Chrome-trace JSON of one untimed execution per pipeline and point)
  bool graph = false;                // --graph: also replay each pipeline as one CUDA graph (variants <pipeline>:graph)
};
// --pipelines names the pipelines (given on the command line, or set in code): its list is then the only one.
inline bool pipelines_named(const RunOptions& o) { return o.pipelines_given || !o.pipelines.empty(); }
// What `run --mask-budget 0` stands for.
inline constexpr const char* kRunMaskBudgetZero = "the free device memory";
// Throws UsageError naming the option and its allowed range (before anything is measured).
void validate_run_options(const RunOptions& o);
// --pipelines, else the config's sweep.pipeline axis, else all four.
std::vector<Pipeline> wanted_pipelines(const RunOptions& o, const Config& cfg);
// --pipelines, else the config's sweep.pipeline axis, else nullopt (every pipeline of each point's pass).
std::optional<std::vector<Pipeline>> wanted_pipeline_list(const RunOptions& o, const Config& cfg);

// Counted over the whole sweep: bitwise mismatches (an error: exit 1) and measurements left without samples.
struct RunCounters {
  int mismatches = 0;
  int unmeasured = 0;
};

// What every step of one point shares.
struct PointScope {
  Harness& harness;
  BlockRunner& runner;
  const RunOptions& opts;
  const PipelinePlan& plan;
  std::string label;  // the point's axes, for messages
  PointResult& pr;
  RunCounters& counters;
  SampleBook book;    // every measured variant's per-round samples, for the figures' intervals
  // Measures the candidates as one group (each in an NVTX range "variant <name>"), records their samples in
  // `book`, and warns (and counts) for each whose every sample was discarded. Returns them by name.
  std::map<std::string, Measurement> measure_group(const std::vector<Candidate>& group);
};

// A number of a variant's power pass (Measurement::power / VariantResult::power), NaN when absent or null.
double power_figure(const json& power, const char* key);
json algo_brief(const GemmAlgoInfo& a);

// The pieces alone (variants alone:*): median seconds by piece name ("gemm", "rng", "attention-mask", ...).
struct AloneTimes {
  std::map<std::string, double> t;
  std::map<std::string, json> power;  // their power passes (null = not measured)
  double get(const std::string& n) const {
    auto it = t.find(n);
    return it == t.end() ? 0.0 : it->second;
  }
  double gemm() const { return get("gemm"); }
  double rng() const { return get("rng"); }
  // A piece's power pass (back to back, measure.power_time): its mean W and time per iteration (s); NaN when
  // not measured. The energy figures use these together, not the interleaved medians.
  double watts(const std::string& n) const;
  double pass_time(const std::string& n) const;
};
// The pieces alone as candidates of the point's first group, and (after it) their variants and times.
std::vector<Candidate> alone_candidates(PointScope& ps);
AloneTimes add_alone_variants(PointScope& ps, const std::map<std::string, Measurement>& measured);

// The RNG configuration the overlap pipeline (and the chunked pipeline's first chunk) runs with, and why.
struct OverlapChoice {
  RngConfig rc;
  std::string why;
  Interval vs_plain;  // chosen (or, plain kept, the fastest) mechanism's time / plain's, paired; invalid: none
};

// The pipelines of plan.run, each validated against the first (poisoned outputs, bitwise O/LSE) and measured;
// with --graph also replayed as a CUDA graph. Returns the median seconds by pipeline name.
std::map<std::string, double> measure_pipelines(PointScope& ps, const OverlapChoice& ovl);

}  // namespace dropbench
