// `dropbench run`, one sweep point at a time: the steps that measure one block (the pieces alone, the GEMM || RNG
// overlap mechanisms, the pipelines, an optional CUDA-graph replay and CUPTI trace) and the figures derived from
// them. src/cli/cmd_run.cpp holds only the options and the sweep loop; each step lives in its own file here:
//   run_point.cpp     the pieces alone, the pipelines (+ --graph), validation against the reference pipeline
//   mechanisms.cpp    the overlap-mechanism registry and its exploration
//   run_trace.cpp     --trace: one untimed execution per pipeline under CUPTI
//   run_figures.cpp   per-point speedups / exposed dropout / winner, and the sweep summary
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/block/block_pipelines.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/core/harness.hpp"
#include "src/core/report.hpp"

namespace dropbench {

struct RunOptions {
  std::string pipelines;             // --pipelines (empty: sweep.pipeline if the config sweeps it, else all four)
  bool no_validate = false;          // --no-validate
  bool no_explore = false;           // --no-explore
  int top_k = 4;                     // --top-k
  double mask_budget_gib = 0;        // --mask-budget (GiB; 0 = free device memory)
  std::string overlap_rng = "auto";  // --overlap-rng
  std::string trace;                 // --trace FILE (Chrome-trace JSON of one untimed execution per pipeline and point)
  bool graph = false;                // --graph: also replay each pipeline as one CUDA graph (variants <pipeline>:graph)
};
// Throws UsageError naming the option and its allowed range (before anything is measured).
void validate_run_options(const RunOptions& o);
// --pipelines, else the config's sweep.pipeline axis, else all four.
std::vector<Pipeline> wanted_pipelines(const RunOptions& o, const Config& cfg);

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
  // Measures `body` as variant `name` (in an NVTX range); warns (and counts) when every sample was discarded.
  Measurement measure(const std::string& name, const std::function<void(Sample&)>& body);
};

// A Sample's phase() as the runner's phase hook.
PhaseFn hook(Sample& s);
VariantResult variant_of(const std::string& name, const Measurement& m);
json algo_brief(const GemmAlgoInfo& a);

// The pieces alone (variants alone:*): median seconds by piece name ("gemm", "rng", "attention-mask", ...).
struct AloneTimes {
  std::map<std::string, double> t;
  double get(const std::string& n) const {
    auto it = t.find(n);
    return it == t.end() ? 0.0 : it->second;
  }
  double gemm() const { return get("gemm"); }
  double rng() const { return get("rng"); }
};
AloneTimes measure_alone(PointScope& ps);

// The RNG configuration the overlap pipeline (and the chunked pipeline's first chunk) runs with, and why.
struct OverlapChoice {
  RngConfig rc;
  std::string why;
};

// The pipelines of plan.run, each validated against the first (poisoned outputs, bitwise O/LSE) and measured;
// with --graph also replayed as a CUDA graph. Returns the median seconds by pipeline name.
std::map<std::string, double> measure_pipelines(PointScope& ps, const OverlapChoice& ovl);

}  // namespace dropbench
