// What a sweep will do: per point the device memory each command
// allocates (named buffers + the headroom its skip check keeps), the device memory those checks compare with,
// and the model's time for each variant. The measuring commands use the same memory functions for their skip
// checks, so a dry run skips exactly the points a measuring run on that memory would.
// Sizes are summed with checked 64-bit arithmetic: a shape whose bytes pass 2^64 is refused (UsageError
// naming the field) instead of wrapping to a small number.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/block/pipeline_plan.hpp"  // BlockMemory, checked_product, checked_sum
#include "src/core/config.hpp"
#include "src/core/run_context.hpp"
#include "src/model/model.hpp"

namespace dropbench {

// What a dry run plans against without --device-memory or a machine file's memory_gib: the H200 of results/h200
// has 150109880320 bytes (139.8 GiB, context.device.total_mem_bytes of its reports); 139 GiB leaves the CUDA
// context its share.
constexpr double kDefaultPlanMemoryGib = 139.0;


// A point's device memory: the buffers a command allocates and the headroom its check leaves free.
struct MemoryPlan {
  std::vector<std::pair<std::string, uint64_t>> buffers;  // name -> bytes, allocation order
  uint64_t headroom = 0;
  uint64_t buffers_total() const;  // checked
  uint64_t need() const;           // buffers + headroom (checked)
  uint64_t bytes(const std::string& name) const;  // 0 when absent
  json to_json() const;            // {"buffers": {name: bytes}, "buffers_bytes", "headroom_bytes", "need_bytes"}
};

// What each sweeping command allocates at a point (cmd_*.cpp; run: block_memory in src/block/pipeline_plan.hpp).
// `where` prefixes an overflow message ("sweep point {...}: ").
MemoryPlan rng_memory(const Workload& w, const std::string& where = "");
MemoryPlan dropout_memory(const Workload& w, const std::string& where = "");
MemoryPlan gemm_memory(const Workload& w, uint64_t workspace_bytes, const std::string& where = "");
MemoryPlan attention_memory(const Workload& w, const std::string& where = "");
// run: the common buffers, then the masks its plan keeps (full mask, two chunk masks).
MemoryPlan run_memory(const BlockMemory& m, bool full_mask, bool chunk_masks, uint64_t headroom);
// run, pass train: the common buffers, the training step's (TrainMemory), then the whole mask when kept.
MemoryPlan train_run_memory(const BlockMemory& m, const TrainMemory& t, bool full_mask, uint64_t headroom);

// The device memory a dry run plans against, and where that figure came from.
struct PlanDevice {
  uint64_t bytes = 0;
  std::string from;  // "--device-memory", "machine <path>: memory_gib", "default: an idle H200's free memory"
};
PlanDevice plan_device(const CommonOptions& o);
// --device-memory / --machine given to a measuring run: UsageError (they plan; the device says what is free).
void check_plan_options(const CommonOptions& o);

// Free device memory the skip checks compare with: the device's on a measuring run, the plan's on a dry run.
uint64_t memory_for_checks(const CommonOptions& o);

// --model-clock TEXT into the model's options: model / max / sustained (Options::clock) or MHz in 100..3000
// (Options::clock_mhz: every kernel at that clock); anything else is a UsageError naming the option.
void apply_model_clock(const std::string& text, model::Options& o);

// The machine file (configs/machines/) of a GPU by its name: h100-sxm.json for an H100, else h200.json.
std::string machine_file_for_device(const std::string& device_name);

// The model's times for a dry run and beside a measured training step (src/model): machine (--machine; in a
// measuring run the measured GPU's file, configs/machines/h100-sxm.json or h200.json; else h200.json) and profile
// (configs/profiles/h200.json), loaded once; when they cannot be loaded every estimate says why.
class Estimator {
 public:
  explicit Estimator(const CommonOptions& o);
  Estimator(Estimator&&) noexcept;
  ~Estimator();
  struct Estimate {
    std::optional<double> seconds;  // nullopt: not modelled
    std::string note;               // why not ("" when modelled)
  };
  Estimate rng(const Workload& w, const std::string& layout) const;
  Estimate gemm(const Workload& w) const;
  // none | mask | rng+mask | fused, in w's pass (fwd, bwd: the backward call, fwd+bwd: both)
  Estimate attention(const Workload& w, const std::string& variant) const;
  Estimate pipeline(const Workload& w, const std::string& pipeline) const;  // baseline | fused | overlap | chunked
  // The training step's prediction (every pass-train strategy), or nullopt and `note` saying why not. clock_mhz > 0:
  // every kernel at that SM clock instead of the estimator's (a measured step's clock).
  std::optional<model::TrainPrediction> train(const Workload& w, std::string* note, double clock_mhz = 0) const;
  const std::string& machine_path() const { return machine_path_; }
  std::string machine_name() const;  // the loaded machine file's name ("" when none loaded)
  std::string clock_text() const;    // the clock the estimates use: "model" (each kernel's own), max, sustained, MHz

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string machine_path_;
};

// The plan of one point as the dry-run report carries it (points[].derived.plan, skipped[].plan):
// {"memory": MemoryPlan::to_json(), "device_memory_bytes", "device_memory_from", "fits", "reason"?}.
json plan_json(const MemoryPlan& m, const PlanDevice& d, bool fits, const std::string& reason = "");
// An estimate into a dry-run variant: derived.model_us, or extra.model_note.
void put_estimate(json& derived, json& extra, const Estimator::Estimate& e);

}  // namespace dropbench
