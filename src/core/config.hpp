// Configs, validation and sweeps. A config is JSON (configs/*.json):
//   { "name": str, "description": str,
//     "workload": { <field>: scalar, ... },          // defaults for every sweep point
//     "sweep":    { <axis>: list | {"pow2":[lo,hi]} | {"range":[lo,hi,step]} | scalar, ... },
//     "measure":  { "min_samples", "max_samples", "min_time", "max_noise", "timeout", "warmup", "cold", ... } }
// Every field is checked (type, range); unknown keys anywhere are errors. docs/config.md lists the fields.
// --set overrides use dotted paths: --set workload.sq=8192, --set sweep.sq=[2048,4096],
// --set sweep.sq=pow2:2048:65536, --set sweep.sq=range:1024:8192:1024, --set sweep.rounds=3,5,7,
// --set measure.cold=true. Integers accept K/M/G suffixes (powers of 1024): 8K = 8192.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/dispatch.cuh"  // kDefaultRounds, kDefaultThresholdBits

namespace dropbench {

using json = nlohmann::ordered_json;

// The workload of one sweep point: the attention block's shape and the dropout/RNG settings.
struct Workload {
  int64_t batch = 1;            // B, [1, 4096]
  int64_t embed = 4096;         // E, model width: [64, 65536], multiple of 16
  int64_t q_heads = 32;         // Hq, [1, 1024]
  int64_t kv_heads = 8;         // Hkv, [1, 1024], divides q_heads (GQA)
  int64_t head_dim = 128;       // dH, {64, 128}
  int64_t sq = 4096;            // sequence length, [1, 1048576]
  bool causal = false;
  double dropout_p = 0.1;       // [0, 1)
  std::string dtype = "fp8";    // QKV GEMM input type: fp8 | bf16
  int64_t rounds = kDefaultRounds;                 // Philox rounds: kPhiloxRounds
  int64_t threshold_bits = kDefaultThresholdBits;  // kThresholdBits
  std::string layout = "tile";  // rng mask layout: one of kMaskLayoutNames (kernels/rng/rng_mask.cuh)
  int64_t elements = 1 << 28;   // standalone dropout tensor size, [1, 2^34]
  std::string dropout_dtype = "bf16";  // standalone dropout element type: bf16 | fp32
  std::string pipeline = "baseline";   // baseline | fused | overlap | chunked
  int64_t chunk = 0;            // chunked pipeline: query rows per chunk (0 = auto), [0, 1048576]
  // What a command runs (check_command_passes): attention fwd | bwd | fwd+bwd (the backward alone or both);
  // run fwd (the block's forward) | train (its training step: forward + backward).
  std::string pass = "fwd";
  int64_t layers = 0;           // transformer layers of the network the block belongs to (0 = not given), [0, 4096]
  std::string attention_kernel = "auto";  // attention kernel family: auto (wgmma on sm_90) | wgmma | mma
  uint64_t seed = 0x5eed5eedULL;   // Philox key (not sweepable)
  uint32_t offset = 0;             // Philox counter.w (not sweepable)
};

struct MeasureSettings {
  int64_t min_samples = 10;     // [1, 1000000]
  int64_t max_samples = 2000;   // [min_samples, 10000000]
  double min_time = 0.2;        // seconds of samples before the noise criterion may stop, [0, 3600]
  double max_noise = 0.005;     // stop when relative stdev <= this, (0, 1]
  double timeout = 5.0;         // seconds per measurement at most, (0, 86400]
  int64_t warmup = 3;           // untimed runs first, [0, 10000]
  bool cold = false;            // flush L2 before every sample
  // Discard samples run below this fraction of the max SM clock, [0, 1]; 0 keeps every sample. Sustained
  // FP8/BF16 GEMMs on an H200 run power-capped near 1.5 GHz (76% of 1.98): there, 0.75 discards the
  // steady state itself, so lower it (or 0) to measure what a training step sees.
  double throttle = 0.75;
  // Sample the variants compared at a point round-robin, one sample each per round (src/core/harness.hpp);
  // false: one after another, each to its own noise rule (the older sequential measurement).
  bool interleave = true;
  // Seconds the first group's bodies run untimed before anything is measured, to reach a steady power and
  // thermal state, [0, 3600]; 0 = none.
  double settle = 0;
  // After a group's timed rounds, each of its variants runs back to back this long (s) while the NVML sampler
  // (src/core/power.hpp) reads power and the energy counter: the variant's steady-state W, J per iteration, clocks
  // and capped share. [0, 600]; 0 = no power pass. The counter moves every ~100 ms: below ~0.5 s the figures
  // come from the instantaneous readings instead (docs/power.md).
  double power_time = 0.5;
  // Before each power-pass window the variant first runs back to back this long (s), unmeasured, so the power
  // limiter's state at the window is the variant's own, not the previous variant's (the limiter averages over a
  // longer time than a 0.3-0.5 s window: a 450 W kernel after a capped one reads capped). [0, 600]; 0 = none.
  double power_settle = 0.5;
  // Each group measured this many times as independent repeats (fresh warm-up, each to the stopping rule above),
  // so its intervals include what changes between repeats (docs/measurement.md), [1, 100]; 1 = once.
  int64_t repeats = 1;
  // Idle seconds before each repeat after the first (the GPU's power and thermal state relaxes), [0, 3600].
  double repeat_gap = 0;
  // Write each variant's per-round samples and SM clocks into the report (stats.series); reports stay small
  // without it.
  bool keep_series = false;
};

struct Config {
  std::string name = "default";
  std::string description;
  Workload workload;
  // Sweep axes in file order; each value list already expanded and validated.
  std::vector<std::pair<std::string, std::vector<json>>> sweep;
  MeasureSettings measure;
  std::string source;  // file it came from, or "<built-in>"
};

// One point of a sweep: the axis values that define it and the workload they resolve to.
struct SweepPoint {
  size_t index = 0;
  json axes = json::object();  // axis name -> value, only the axes the command sweeps
  Workload workload;
};

// Parse + validate. Throws UsageError("config: <path>: <value> is ... (allowed: ...)") on any problem.
Config config_from_json(const json& j, const std::string& source);
Config load_config(const std::string& path);  // reads the file, then config_from_json
// Apply "--set path=value" (throws UsageError naming the key on bad path/value). Re-validates.
void apply_override(Config& cfg, const std::string& assignment);
// Resolved config as JSON (all fields, defaults included) for reports; config_from_json(to_json(c)) == c.
json to_json(const Config& cfg);
json to_json(const Workload& w);
json to_json(const MeasureSettings& m);

// Names of all sweepable axes (every Workload field except seed/offset).
const std::vector<std::string>& axis_names();
// Expand one axis spec (list, scalar, {"pow2":[lo,hi]}, {"range":[lo,hi,step]}) and validate each value.
std::vector<json> expand_axis(const std::string& axis, const json& spec);
// Set one workload field from a JSON value (validated; throws UsageError naming "workload.<field>").
void set_workload_field(Workload& w, const std::string& field, const json& value, const std::string& where);
// Cross-field checks (kv_heads divides q_heads, embed multiple of 16...). `where` prefixes messages.
void validate_workload(const Workload& w, const std::string& where);

// Cartesian product of the sweep axes in `axes` (in the given order, the last varying fastest). Axes the
// config does not sweep take `defaults` if given there, else the workload value (and are not listed in
// point.axes unless they come from defaults). Axes the config sweeps but `axes` does not name are ignored.
std::vector<SweepPoint> expand_sweep(const Config& cfg, const std::vector<std::string>& axes,
                                     const std::map<std::string, std::vector<json>>& defaults = {});

// The passes `command` runs (workload.pass): attention fwd, bwd, fwd+bwd; run fwd, train.
const std::vector<std::string>& command_passes(const std::string& command);
// Refuses (UsageError naming workload.pass or sweep.pass and the command's passes) a point whose pass the
// command does not run. Called by each command right after expanding its sweep, before anything is measured.
void check_command_passes(const std::vector<SweepPoint>& points, const std::string& command);

// The built-in config used when --config is not given (same content as configs/quick.json).
Config builtin_config();

}  // namespace dropbench
