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

// Pass fwd (the block's forward: QKV GEMM -> attention with dropout):
//   Baseline      one stream: GEMM -> RNG mask kernel -> attention reading the mask
//   Fused         GEMM -> attention generating its keep bits (no mask)
//   Overlap       GEMM on stream A || RNG on stream B (event fork / join) -> attention reading the mask
//   Chunked       RNG for query-row chunk i+1 || attention for chunk i, two chunk-sized mask buffers
// Pass train (the block's training step: forward QKV GEMM -> attention -> output projection, backward output
// projection dX, dW -> attention backward -> QKV GEMM dX, dW), strategies for paying for the keep bits:
//   Fused         Philox in the forward kernel and again in the backward kernel; no mask memory
//   Stored        GEMM || RNG writes the mask; forward and backward read it; held from forward to backward
//   RegenOverlap  as Stored in the forward, mask freed after it; the backward's RNG regenerates it beside the
//                 output projection's backward GEMMs; one layer's mask at a time
//   FusedWrite    the fused forward also writes the keep words it generated; the backward reads them (held)
enum class Pipeline { Baseline, Fused, Overlap, Chunked, Stored, RegenOverlap, FusedWrite };

// The passes `dropbench run` measures (workload.pass).
enum class Pass { Fwd, Train };
Pass parse_pass(const std::string& s);  // "fwd" | "train"; UsageError naming workload.pass otherwise
const char* pass_name(Pass p);

// How long a training-step strategy keeps its whole-matrix mask: not at all, from the forward's RNG to the
// backward's read (across the step: every layer's mask at once in a network), or only while one kernel pair
// uses it (written and read within the forward, written again and read within the backward).
enum class MaskLife { None, HeldAcrossStep, WithinPhase };

struct PipelineSpec {
  Pipeline id;
  const char* name;
  bool full_mask;                       // pass fwd: needs the whole-matrix mask in device memory
  bool chunk_masks;                     // pass fwd: needs the two chunk-sized masks
  std::vector<const char*> dry_phases;  // pass fwd: the phases a dry run walks (NVTX tree without a GPU)
  const char* summary;                  // for `run --help`
  bool fwd = true;                      // a pipeline of pass fwd
  bool train = false;                   // a strategy of pass train
  MaskLife train_mask = MaskLife::None; // pass train: the whole-matrix mask's lifetime
  std::vector<const char*> train_phases = {};  // pass train: the phases a dry run walks
  const char* train_summary = "";              // pass train: for `run --help`
};

// In the order they are measured and reported. Adding a pipeline: an enum value and an entry here, its execution
// in BlockRunner::run (pass fwd) or the training step's runner (pass train), its composition in the model
// (src/model/model.cpp: predict, predict_train; docs/architecture.md).
inline const std::vector<PipelineSpec>& pipeline_specs() {
  static const std::vector<PipelineSpec> specs = {
      {Pipeline::Baseline, "baseline", true, false, {"gemm", "rng", "attention"},
       "one stream: GEMM -> RNG mask kernel -> attention reading the 1-bit mask"},
      {Pipeline::Fused, "fused", false, false, {"gemm", "attention"},
       "GEMM -> attention generating the keep bits with Philox in the kernel (no mask)", true, true, MaskLife::None,
       {"gemm", "attention", "gemm-out", "gemm-out-dx", "gemm-out-dw", "attention-bwd", "gemm-dx", "gemm-dw"},
       "Philox in the forward kernel and again in the attention backward (no mask memory)"},
      {Pipeline::Overlap, "overlap", true, false, {"gemm", "rng", "attention"},
       "GEMM on stream A || RNG on stream B (event fork/join) -> attention reading the mask"},
      {Pipeline::Chunked, "chunked", false, true, {"gemm", "attention"},
       "RNG for query-row chunk i+1 || attention for chunk i, double-buffered chunk masks (memory\n"
       "            O(chunk), workload.chunk rows, 0 = auto = ~8 chunks); chunk 0's RNG runs beside the GEMM"},
      {Pipeline::Stored, "stored", true, false, {}, "", false, true, MaskLife::HeldAcrossStep,
       {"gemm", "rng", "attention", "gemm-out", "gemm-out-dx", "gemm-out-dw", "attention-bwd", "gemm-dx", "gemm-dw"},
       "GEMM || RNG writes the 1-bit mask; the forward and the backward read it (held from forward\n"
       "                to backward: one mask per layer of the network)"},
      {Pipeline::RegenOverlap, "regen-overlap", true, false, {}, "", false, true, MaskLife::WithinPhase,
       {"gemm", "rng", "attention", "gemm-out", "gemm-out-dx", "gemm-out-dw", "rng-bwd", "attention-bwd", "gemm-dx",
        "gemm-dw"},
       "as stored in the forward, mask freed after it; the backward's RNG regenerates it beside the\n"
       "                output projection's dX, dW GEMMs (one layer's mask at a time)"},
      {Pipeline::FusedWrite, "fused-write", true, false, {}, "", false, true, MaskLife::HeldAcrossStep,
       {"gemm", "attention", "gemm-out", "gemm-out-dx", "gemm-out-dw", "attention-bwd", "gemm-dx", "gemm-dw"},
       "the fused forward also writes the keep words it generated; the backward reads them (held)"},
  };
  return specs;
}

const PipelineSpec& pipeline_spec(Pipeline p);
// The pipelines of pass fwd, in table order (what `run` measures by default at a forward point).
const std::vector<Pipeline>& all_pipelines();
// The pipelines (strategies) of a pass, in table order.
const std::vector<Pipeline>& pass_pipelines(Pass pass);
bool applies_to(Pipeline p, Pass pass);
std::string pass_pipeline_names_text(Pass pass);  // "fused, stored, regen-overlap, fused-write"
const char* pipeline_name(Pipeline p);                // "baseline" | "fused" | ... (the table's names)
std::vector<std::string> pipeline_names();            // every spec's name, in table order
std::string pipeline_names_text();                    // every name: "baseline, fused, overlap, chunked, stored, ..."
// Both throw UsageError "<field>: ..." naming the allowed values (field: the option or key the text came from).
Pipeline parse_pipeline(const std::string& s, const std::string& field = "pipeline");
// "overlap,fused"; no duplicates, not empty.
std::vector<Pipeline> parse_pipeline_list(const std::string& csv, const std::string& field = "pipelines");

}  // namespace dropbench
