// `dropbench profile` (docs/model.md, "Collecting a profile"): per-kernel unit demand, collected with Nsight
// Compute where it can read counters, else from the kernels' SASS (scripts/profile_sass.py), written as a
// profile JSON in the schema of configs/profiles/*.json ("dropbench.profile" v1) so that
// `dropbench model --profile FILE` reads it. The CSV parser and the JSON assembly are CPU-only and tested in
// tests/test_profile.cpp.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "src/core/config.hpp"

namespace dropbench::profile {

// One profiled kernel launch from ncu's CSV. `metrics` holds every numeric value under its ncu metric name
// (raw page: "smsp__inst_executed.sum"; details page: "Section/Metric Name"), scaled to base units (bytes,
// ns, Hz, cycles); `canon` holds the values the profile uses under fixed names (see canonical_names()).
struct NcuLaunch {
  int id = -1;
  std::string kernel;          // demangled name as ncu prints it
  std::string block, grid;     // "(256, 1, 1)"
  std::map<std::string, double> metrics;
  std::map<std::string, double> canon;
  double get(const std::string& name, double fallback = -1) const;
};

// Parses `ncu --csv` output, either --page raw (one row per launch, one column per metric, a units row) or
// --page details (one row per metric). Lines that are not CSV records (==PROF== lines, the profiled
// program's own output) are skipped. Missing metrics are simply absent; "n/a" / "no data" values too.
std::vector<NcuLaunch> parse_ncu_csv(const std::string& text);

// Canonical fields filled from either page: duration_ns, sm_clock_hz, elapsed_cycles, sm_active_cycles,
// inst_executed, issue_active_pct, ipc_active, sm_throughput_pct, memory_throughput_pct, dram_throughput_pct,
// l2_throughput_pct, dram_bytes_read, dram_bytes_write, l2_bytes, registers_per_thread, smem_per_block,
// pipe_<name> (warp instructions executed on pipe <name>: alu, fma, fmaheavy, xu, tensor..., lsu, uniform).
const std::vector<std::string>& canonical_names();

// The metric list passed to `ncu --metrics` (names as in recent Nsight Compute; unknown ones are reported
// by ncu and skipped by the parser).
const std::vector<std::string>& ncu_metrics();

// The "ncu" block of one profile kernel: executed counts divided by `work` (elements generated / score
// elements of the full SQ x SQ matrix / FLOPs; `work_unit` names it), the workload of the measured launch
// (`workload`: the geometry fields; the model needs it to carry the counts to other shapes, and ignores a
// block without it), measured utilisations, launch resources, the raw metrics.
json ncu_block(const NcuLaunch& l, double work, const std::string& work_unit, const json& workload = json::object());

// Demand per unit of work of one kernel, for the table: from an ncu block ("demand") or, on the SASS path,
// a sass entry's per_element.
std::map<std::string, double> table_demand(const json& profile, const std::string& kernel_key);

// Kernel selection: the families of --kernels.
struct Selection {
  bool rng = true, attention = true, gemm = true;
  bool attention_bwd = true;  // the wgmma attention backward (ncu only: measured demand, no SASS counts)
};
Selection parse_kernels(const std::string& list);  // "rng,attention,attention_bwd,gemm"; UsageError on anything else

// Profile keys of the kernels a selection covers: rng_tile_r{R}_tw{TW} (R 3/5/7/10 x TW 8/16/32), attention
// attn_none, attn_mask, attn_fused_r{R}_tw{attn_threshold_bits} (R 3/5/7/10), each also _causal, and
// the Hopper-native kernel's wgmma_none, wgmma_mask, wgmma_fused_r{R}_tw{TW} (each also _causal) and
// gemm_fp8 / gemm_bf16 (38 with those families), and the wgmma backward's wgmma_bwd_none, wgmma_bwd_mask,
// wgmma_bwd_fused_r{R}_tw{attn_threshold_bits} (R 3/5/7/10; each also _causal; 12 more).
std::vector<std::string> kernel_keys(const Selection& s, int attn_threshold_bits = 8);

// Recognise a profiled launch: "rng_tile_r7_tw8", "attn_none", "attn_mask", "attn_fused_r7_tw8" (each with
// "_causal" for the causal instantiation; "attn_fused" etc. when the name lacks R / TW / causal), the wgmma
// kernel's "wgmma_none", "wgmma_mask", "wgmma_fused_r7_tw8" (+ "_rngwarps" for design (b), "_causal"), the wgmma
// backward's "wgmma_bwd_none", "wgmma_bwd_mask", "wgmma_bwd_fused" (its name carries no R, TW or causality),
// "gemm", "".
std::string classify_launch(const std::string& kernel_name);

}  // namespace dropbench::profile
