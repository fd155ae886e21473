// The pipelines `dropbench run` compares, in one table: each pipeline's name, what it needs in device memory, the
// phases a dry run walks, and a one-line description. Everything that lists, parses, plans or describes pipelines
// reads this table (config validation, --pipelines, the memory plan, the dry run); how a pipeline executes lives
// in BlockRunner::run (src/block/block_pipelines.cpp) and how the model composes it in src/model/model.cpp.
// Report convention: a run report's pipeline variants are the variants whose name has no ':' (alone:*, mech:*,
// <pipeline>:graph are not pipelines), so report readers need no list of their own.
#pragma once
#include <string>
#include <vector>

namespace dropbench {

//   Baseline  one stream: GEMM -> RNG mask kernel -> attention reading the mask
//   Fused     GEMM -> attention generating its keep bits (no mask)
//   Overlap   GEMM on stream A || RNG on stream B (event fork / join) -> attention reading the mask
//   Chunked   RNG for query-row chunk i+1 || attention for chunk i, two chunk-sized mask buffers
enum class Pipeline { Baseline, Fused, Overlap, Chunked };

struct PipelineSpec {
  Pipeline id;
  const char* name;
  bool full_mask;                       // needs the whole-matrix mask in device memory
  bool chunk_masks;                     // needs the two chunk-sized masks
  std::vector<const char*> dry_phases;  // the phases a dry run walks (NVTX tree without a GPU)
  const char* summary;                  // for `run --help`
};

// In the order they are measured and reported. Adding a pipeline: an enum value and an entry here, its execution
// in BlockRunner::run, its composition in the model (docs/architecture.md).
inline const std::vector<PipelineSpec>& pipeline_specs() {
  static const std::vector<PipelineSpec> specs = {
      {Pipeline::Baseline, "baseline", true, false, {"gemm", "rng", "attention"},
       "one stream: GEMM -> RNG mask kernel -> attention reading the 1-bit mask"},
      {Pipeline::Fused, "fused", false, false, {"gemm", "attention"},
       "GEMM -> attention generating the keep bits with Philox in the kernel (no mask)"},
      {Pipeline::Overlap, "overlap", true, false, {"gemm", "rng", "attention"},
       "GEMM on stream A || RNG on stream B (event fork/join) -> attention reading the mask"},
      {Pipeline::Chunked, "chunked", false, true, {"gemm", "attention"},
       "RNG for query-row chunk i+1 || attention for chunk i, double-buffered chunk masks (memory\n"
       "            O(chunk), workload.chunk rows, 0 = auto = ~8 chunks); chunk 0's RNG runs beside the GEMM"},
  };
  return specs;
}

const PipelineSpec& pipeline_spec(Pipeline p);
const std::vector<Pipeline>& all_pipelines();
const char* pipeline_name(Pipeline p);                // "baseline" | "fused" | "overlap" | "chunked"
std::vector<std::string> pipeline_names();            // every spec's name, in table order
std::string pipeline_names_text();                    // "baseline, fused, overlap, chunked"
Pipeline parse_pipeline(const std::string& s);        // throws UsageError naming the allowed values
std::vector<Pipeline> parse_pipeline_list(const std::string& csv);  // "overlap,fused"; no duplicates, not empty

}  // namespace dropbench
