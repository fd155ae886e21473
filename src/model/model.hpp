// The resource model (docs/model.md), after Ma, Liu, Krashinsky (arXiv:2410.07531): a kernel's time is the
// maximum over the units it loads (tensor-core math, issue slots, integer ALU, IMAD, FMA, MUFU, LSU, shared
// memory, register file, HBM, L2) of demand / (rate x efficiency). Two kernels overlap well only when they
// load different units. CPU only: machine descriptions (configs/machines/*.json) and kernel demand profiles
// (configs/profiles/*.json) in, predicted times and limiting units out. Tested in tests/test_model.cpp.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/core/config.hpp"

namespace dropbench::model {

// Demand of a piece of work: op class -> amount (warp instructions, HMMA instructions, bytes, FLOPs...).
using Demand = std::map<std::string, double>;
void add_to(Demand& acc, const Demand& d, double scale = 1.0);
Demand scaled(const Demand& d, double scale);

// ---------------------------------------------------------------------------------------------------------
// Machine description (configs/machines/*.json, schema "dropbench.machine" version 1).
// ---------------------------------------------------------------------------------------------------------
struct Unit {
  std::string name, description;
  double efficiency = 1.0;  // fitted factor (<= 1 typically); 1 = the rate as sourced
  std::string efficiency_source;
};

struct OpClass {
  std::string name, demand;  // demand: what one unit of this op class is ("warp instructions", "bytes")
  bool per_second = false;   // rates are per second for the whole device (HBM, L2), else per clock per SM
  std::vector<std::pair<std::string, double>> loads;  // unit -> rate (amount per clock per SM, or per second)
  std::string source;
};

struct FitPoint {
  std::string unit, command, variant, report;
  json axes = json::object();
};
// The fit-point unit of the RNG tile kernel's per-strip cost (Profile::rng_strip_cycles): not a machine unit but
// a term `--fit-kernels` fits on the rows these points name, with the RNG kernels' own ncu durations.
inline constexpr const char* kRngStripUnit = "rng_strip";
// The fit-row mark of a GEMM row a machine's tile model (gemm_tile_model.<dtype>.fit_reports) is fitted on.
inline constexpr const char* kGemmTileUnit = "gemm_tile";
// The fit-row mark of a single-kernel row whose measured power a machine's or profile's power.<key> is fitted on
// (its fitted_on names the row) and whose prediction that power bounds.
inline constexpr const char* kPowerFitUnit = "power";
// The fit-row mark of a whole attention backward call the wgmma backward's efficiencies are fitted on (the profile's
// kernels.attention_bwd_wgmma.fit_reports name the report).
inline constexpr const char* kAttentionBwdUnit = "attention_bwd";

// A GEMM's tile model on one machine (machine file "gemm_tile_model".<dtype>; fitted by fit_family("gemm_<dtype>")
// on the harness rows of fit_reports): the GEMM's output tiles (the profile's tile_m x tile_n) run in waves of SMs x
// blocks_per_sm, so the unit times carry the last wave's idle SMs (tail = waves x slots / tiles), the tensor pipe
// runs at mma_efficiency, and every wave pays tile_overhead_cycles (prologue, pipeline fill, epilogue: the fixed
// cost of one tile on an SM). Per machine, as the GEMM's cycles depend on the card (its memory, its power cap) and
// on the algorithms cuBLASLt picks there.
struct GemmTileModel {
  double mma_efficiency = 0, tile_overhead_cycles = 0;
  std::vector<std::string> fit_reports;
};

// Measured power of one kernel ("power.<kernel key>" of a machine file or a profile, from reports with power
// data: fit_power): dynamic energy (total minus static_w x time) per unit of work (RNG: element generated;
// attention: visited score element; GEMM: FLOP). The model turns it into a time bound: work x j_per_work /
// (cap - static).
// One measurement a kernel's power is fitted on: the report (its path as given to the fit), the point's axes and
// the variant.
struct PowerMeasurement {
  std::string report;
  json axes = json::object();
  std::string variant;
};
struct KernelPower {
  double dyn_j_per_work = 0;
  double mean_w = 0;
  std::string source;
  std::vector<PowerMeasurement> fitted_on;  // empty where the entry does not say (older files)
};

struct Machine {
  std::string name, path, description;
  double sm_count = 0;
  double clock_max_mhz = 0, clock_sustained_mhz = 0;
  // Measured clocks of particular kernels (clock_mhz.<name> besides max and sustained, e.g. gemm_bf16: a bf16 GEMM
  // stays below the power cap on one card and reaches it on another); a profile's kernel clock may name one.
  std::map<std::string, double> named_clocks;
  std::map<std::string, GemmTileModel> gemm_tiles;  // by dtype (fp8, bf16); none: GEMMs at the unit efficiencies
  double hbm_gbs = 0, l2_gbs = 0, l2_bytes = 0;
  double registers_per_sm = 0, smem_per_sm_bytes = 0, max_threads_per_sm = 0, max_blocks_per_sm = 0;
  double launch_gap_us = 0;
  double rng_saturation_warps = 0;
  // Power (optional; 0 = not given): the enforced board power cap and the static (idle) power. A kernel cannot
  // finish faster than its dynamic energy / (cap_w - static_w) (docs/model.md, "Power").
  double cap_w = 0, static_w = 0;
  // Per-kernel power measured on this card (optional, "power" as in a profile): a kernel's energy per work
  // depends on the card, so a machine file's entry takes the place of the profile's for the same key.
  std::map<std::string, KernelPower> power;
  // Free device memory in GiB (optional; 0 = not given): what `--dry-run --machine FILE` plans against.
  double memory_gib = 0;
  bool has_power() const { return cap_w > 0 && cap_w > static_w; }
  std::vector<Unit> units;
  std::vector<OpClass> ops;
  std::vector<FitPoint> fit_points;
  const Unit* unit(const std::string& n) const;
  const OpClass* op(const std::string& n) const;
};

// Parse + validate; throws UsageError("machine <where>: <field> ...") naming the missing / bad field.
Machine machine_from_json(const json& j, const std::string& where);
Machine load_machine(const std::string& path);

// ---------------------------------------------------------------------------------------------------------
// Kernel demand profile (configs/profiles/*.json, schema "dropbench.profile" version 1).
// ---------------------------------------------------------------------------------------------------------
// An Nsight Compute measurement of one kernel (the "ncu" block `dropbench profile` writes): executed counts
// per unit of work at the workload it was measured at. The model carries it to other workloads through the
// static demand (docs/model.md, "Demand sources"): each op-class group is scaled by measured / static at the
// measured workload, so geometry (causal edges, rescales, windows) still comes from the static structure.
struct NcuDemand {
  Workload w;                              // the measured launch's workload
  double work = 0;                         // units of work of that launch (elements, score elements, FLOPs)
  std::map<std::string, double> per_work;  // ncu names: inst, alu, fma, fmaheavy, xu, lsu, tensor_op_hmma, hbm_bytes...
  double duration_s = 0, clock_mhz = 0;    // the launch's measured duration and SM clock (0: not recorded)
};

struct SassKernel {
  std::string key;
  double elements_per_iteration = 0;
  Demand per_iteration;   // op classes (only the ones a machine defines are used)
  Demand edge_extra;      // per edge iteration (attention: block on the causal diagonal / sequence end)
  Demand rescale_extra;   // per rescaled iteration (attention mode none, skip-rescale)
  int registers = 0;
  // IMAD.WIDE / IMAD.HI per iteration (from opcodes_per_iteration): counted twice in `imad`, once by ncu.
  double imad_wide_per_iteration = 0;
  std::optional<NcuDemand> ncu;
};

// The Hopper-native attention kernel (kernels/attention/attention_wgmma_kernel.cuh, "kernels.attention_wgmma"):
// CTAs of block_rows query rows (two consumer warpgroups) visiting block_keys-key blocks, one CTA per SM. Its
// demand is measured (ncu blocks under sass_key, carried by visited key blocks) plus the static wgmma FLOPs and
// bytes. Time: the max over units with the issue unit at `issue_efficiency` (the warp-specialised schedule
// issues at ~0.45 of the schedulers' peak: wgmma waits, softmax dependency chains) and the tensor cores at
// `mma_efficiency`, times the tail of the grid, plus `cta_overhead_cycles` per CTA wave (prologue / pipeline
// fill / epilogue); all three fitted on the kernel's own ncu durations (fit_family).
struct WgmmaProfile {
  std::string clock = "max";  // max | sustained | a number (MHz)
  int head_dim = 128, block_rows = 128, block_keys = 128, ctas_per_sm = 1, registers = 168, threads = 384;
  double smem_per_cta = 230480;
  std::map<std::string, std::string> sass_key;  // none / mask / fused / causal_suffix
  double issue_efficiency = 1, mma_efficiency = 1, cta_overhead_cycles = 0;
  // Reports (paths from the repository root) whose harness-timed rows of this kernel the efficiencies are fitted
  // on instead of the ncu durations (`fit_reports`, optional; the backward's: back-to-back launches).
  std::vector<std::string> fit_reports;
};

struct GemmProfile {
  std::string clock = "sustained";
  Demand per_flop;
  double input_bytes = 1, output_bytes = 2, tile_m = 128, tile_n = 256, cluster_multicast = 1;
  double registers_per_sm = 0, smem_per_sm_bytes = 0, threads_per_sm = 0, blocks_per_sm = 0;
  std::optional<NcuDemand> ncu;
};

struct Profile {
  std::string name, path;
  std::map<std::string, SassKernel> sass;
  // RNG mask kernel
  std::string rng_clock = "max", rng_sass_key = "rng_{layout}_r{rounds}_tw{threshold_bits}";
  int rng_block_threads = 256;
  double rng_hbm_bytes_per_element = 0.125;
  // attention
  std::string attn_clock = "max";
  int attn_head_dim = 128, attn_block_rows = 128, attn_block_keys = 64, attn_warps = 4, attn_rows_per_warp = 32;
  int attn_ctas_per_sm = 2, attn_registers = 255;
  double attn_smem_per_cta = 98304;
  std::map<std::string, std::string> attn_sass_key;  // none / mask / fused / causal_suffix
  std::map<std::string, GemmProfile> gemm;           // "fp8" / "bf16"
  std::optional<WgmmaProfile> wgmma;                 // the Hopper-native attention kernel, when profiled
  // The Hopper-native attention backward ("kernels.attention_bwd_wgmma", kernels/attention/bwd/wgmma/), the same
  // schema: one CTA = block_keys keys of one KV head walking its group's (or subgroup's, tile_order.hpp:
  // bwd_subgroups) query heads in block_rows-query blocks.
  // When its ncu block for a workload's key is there, the training step's backward is timed from it.
  std::optional<WgmmaProfile> wgmma_bwd;
  std::string attn_auto = "mma";                     // the kernel attention_kernel "auto" means (wgmma when profiled)
  std::map<std::string, KernelPower> power;          // by kernel key (gemm_fp8, rng_tile_r7_tw8, wgmma_mask...)
  // The RNG tile kernels' own efficiencies ("kernels.rng.efficiency", fitted on their ncu durations by
  // fit_family): they replace the calibration's for RNG kernels with measured demand. Empty: not fitted.
  std::map<std::string, double> rng_efficiency;
  // The RNG tile kernel's fixed cost per 16-row strip it generates ("kernels.rng.strip_overhead_cycles"), in SM
  // cycles summed over the device: the strip setup (the row's Philox products, locating the strip, the loop's
  // ramp) costs the same at every R, TW and strip length, so causal masks (strips of 1..SQ/64 tiles) and short
  // rows pay more of it per element. 0: not fitted. Fitted by fit_family with report points (docs/model.md).
  double rng_strip_cycles = 0;
  bool use_power = true;                             // false: the power term is off (`--power off`)
  // Demand source: true (default) = a kernel's measured ncu counts where the profile holds them, its static
  // (SASS / hand-written) counts otherwise; false = static counts only (`--demand sass`).
  bool use_ncu = true;
  // Unit efficiencies for kernels whose demand is measured ("ncu_calibration": fitted on the machine's fit
  // points with ncu demand); they replace the machine's for those kernels. Empty: the machine's.
  std::map<std::string, double> ncu_efficiency;
  bool has_ncu() const;  // any kernel with an ncu block
};

Profile profile_from_json(const json& j, const std::string& where);
Profile load_profile(const std::string& path);

// ---------------------------------------------------------------------------------------------------------
// Kernel times.
// ---------------------------------------------------------------------------------------------------------
struct UnitTime {
  std::string unit;
  double seconds = 0;
};

struct KernelTime {
  std::string name;
  std::string key;             // profile kernel key (power lookup), "" for compositions
  double seconds = 0;
  double work = 0;             // units of work (for energy): elements / visited score elements / FLOPs
  double energy_j = -1;        // dynamic energy (J) from the machine's or profile's power; < 0: no power data
  double power_bound_s = 0;    // energy_j / (cap - static), when known
  double seconds_no_power = 0; // the time without the power term
  double fixed_s = 0;          // the part of seconds that is a fixed cost, not a unit's demand (CTA / strip overhead)
  std::string limiter;         // the unit with the largest time
  std::string source;          // where its demand came from: ncu | ncu(nc) | sass | hand (set by the caller)
  double clock_mhz = 0;
  std::vector<UnitTime> units; // every unit the demand loads, machine order
  double unit_seconds(const std::string& u) const;
};

struct Options {
  std::string residency = "auto";  // auto | serial | coresident | coresident:WARPS (RNG warps/SM beside GEMM)
  std::string clock = "model";     // model (each kernel's profile clock) | max | sustained
  double clock_mhz = 0;            // > 0: every kernel at this SM clock (e.g. a report point's measured clock)
  bool calibrated = true;          // false: every unit efficiency taken as 1
  // false: GEMMs without their tile model (GemmTileModel), at the machine's unit efficiencies alone: what the
  // machine's mma fit point (a GEMM) measures the tensor pipe's efficiency by, for the kernels that have no own.
  bool gemm_tile_model = true;
  int64_t chunk_rows = 0;          // chunked pipeline: rows per chunk (0: workload.chunk, then ~8 chunks)
  std::map<std::string, double> efficiency;  // per-unit overrides of the machine's efficiencies (see options_for)
};

// Time of `d` on `m`: max over units of sum_{ops loading u} demand / rate / efficiency. sm_share (0, 1]
// scales every per-SM rate (a kernel confined to part of the GPU); `factor` multiplies the result (waves).
KernelTime kernel_time(const Machine& m, const std::string& name, const Demand& d, double clock_mhz,
                       const Options& o, double sm_share = 1.0, double factor = 1.0);

// Rows [row_begin, row_begin + rows) of the query dimension (chunked pipeline); rows < 0 = all.
struct Window {
  int64_t row_begin = 0, rows = -1;
};

// Demands of the three kernels for a workload (throw UsageError when the profile lacks the case). `source`
// (if given) receives where the demand came from:
//   ncu      the kernel's own Nsight Compute counts (p.use_ncu and the profile holds them), carried to w by
//            the static structure: per op-class group x measured / static at the measured workload;
//   ncu(nc)  a causal attention kernel without its own block, scaled by its non-causal twin's counts;
//   sass     the static SASS counts (scripts/profile_sass.py); hand: the GEMM's hand-written per-FLOP demand.
Demand gemm_demand(const Profile& p, const Workload& w, std::string* source = nullptr);
Demand rng_demand(const Profile& p, const Workload& w, const std::string& layout, Window win = {},
                  std::string* source = nullptr);
struct AttnWork {
  double iterations = 0, edge_iterations = 0, rescale_iterations = 0, ctas = 0;
  std::vector<double> cta_iterations;  // key-block iterations of each CTA of one (batch, head), launch order
};
// Makespan of the grid (the CTAs of cta_iters repeated `heads` times, launch order) greedily scheduled on
// `slots` CTA slots, over total / slots: 1 for a perfectly balanced grid; ceil(waves) / waves for equal CTAs.
// Past kTailSimulateCtas CTAs the closed form answers (tail_factor_closed: ceil(waves) / waves for equal CTAs,
// else the midpoint of Graham's bound [1, 1 + longest CTA / (total / slots)]), within 0.5 % of the simulation.
double tail_factor(const std::vector<double>& cta_iters, double heads, double slots);
constexpr double kTailSimulateCtas = 1 << 20;
double tail_factor_simulated(const std::vector<double>& cta_iters, double heads, double slots);
double tail_factor_closed(const std::vector<double>& cta_iters, double heads, double slots);
AttnWork attention_work(const Profile& p, const Workload& w, Window win = {});
// The wgmma attention backward's visited blocks, its CTAs and their launch order for the tail model: one section's
// CTAs (tile_order.hpp: bwd_cta_sectioned, bwd_section_units for `slots` resident CTAs), repeated *tail_reps times.
AttnWork wgmma_bwd_work(const WgmmaProfile& g, const Workload& w, double slots, double* tail_reps);
// mode: none | mask | fused (its own profile entry) | fused-composed (mask + the RNG tile kernel's demand)
Demand attention_demand(const Profile& p, const Workload& w, const std::string& mode, Window win = {},
                        AttnWork* work = nullptr, std::string* source = nullptr);

// Attention kernel family of a workload: "mma" or "wgmma" ("auto" = p.attn_auto). UsageError when the profile
// lacks the wgmma kernel and it is asked for.
std::string attention_family(const Profile& p, const Workload& w);

// One attention kernel timed as the model times it (demand, efficiencies of its source, tail, the wgmma
// kernel's issue efficiency and CTA overhead, the power term): what predict() and the report comparison use.
KernelTime attention_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode, Window win,
                          const Options& o);
// The wgmma attention backward kernel alone (without its preprocess / dQ convert launches) in mode none / mask /
// fused from its measured demand, as the training step times it; UsageError when the profile lacks
// kernels.attention_bwd_wgmma or the key's ncu block.
KernelTime attention_bwd_kernel_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                                     const Options& o);
// The wgmma backward's memory-bound launches around its kernel (preprocess, dQ accumulator memset, dQ convert, a split
// group's dK / dV sum) and their launch gaps, in seconds at o's clock: what a backward call adds to the kernel.
double attention_bwd_around_seconds(const Machine& m, const Profile& p, const Workload& w, const Options& o);
// A whole attention backward call in mode none / mask / fused (the kernel, its launches around it and their gaps; the
// power bound holding the call), as `dropbench attention --pass bwd` times it; UsageError where the profile has no
// measured demand for it (another kernel family or head dim, or an unprofiled R / TW).
KernelTime attention_bwd_call_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                                   const Options& o);
KernelTime rng_time(const Machine& m, const Profile& p, const Workload& w, const std::string& layout, Window win,
                    const Options& o);
// Kernels launched one after another on one stream: their times in order, and the machine's launch gap between
// each two.
double serial_seconds(const Machine& m, const std::vector<double>& launches);
KernelTime gemm_time(const Machine& m, const Profile& p, const Workload& w, const Options& o);

// The power term on t (in place): with power data for t.key and a machine cap, energy_j = work x dyn_j_per_work,
// power_bound_s = energy_j / (cap - static); seconds = max(seconds, bound) (limiter "power" when it binds). Not at a
// given clock (o.clock_mhz > 0, e.g. a measured one): that clock is what the cap holds the kernel to already.
void apply_power(const Machine& m, const Profile& p, KernelTime& t, const Options& o = {});
// The power of kernel `key`: the machine file's entry, else the profile's; nullptr where neither has one.
const KernelPower* kernel_power(const Machine& m, const Profile& p, const std::string& key);
// Whether the power term can act at all: a cap, power data in the machine file or the profile, and not switched off.
bool power_term_on(const Machine& m, const Profile& p);

// Fits of a measured kernel family's own efficiencies on the durations of its ncu blocks (measured at their
// measured clocks; `dropbench model --fit-kernels`), least mean |relative error| over a grid:
//   rng:   time = max(issue / e_issue, alu / e_alu, imad / e_imad) over the RNG tile kernels (R x TW);
//   wgmma: cycles = max(issue / e_issue, mma / e_mma) x tail + CTA waves x cta_overhead_cycles;
//   wgmma_bwd: the same for the wgmma backward kernel (kernels.attention_bwd_wgmma) on its own ncu launches;
//   gemm_fp8, gemm_bf16: cycles = mma / e_mma x tail + tile waves x overhead (the machine's GemmTileModel), on
//          report points only (cuBLASLt has no ncu launch per shape).
struct FamilyFit {
  std::string family;
  std::map<std::string, double> efficiency;  // unit -> fitted efficiency
  double cta_overhead_cycles = 0;            // wgmma, wgmma_bwd: per CTA wave; gemm_*: per wave of output tiles
  double clock_mhz = 0;                      // gemm_*: the points' mean SM clock, weighted by their times
  std::string fitted_on = "ncu durations";   // or "report rows" (wgmma_bwd with report points)
  // rng with report points: the per-strip cost (Profile::rng_strip_cycles) fitted on them, and the errors of
  // the carried time (rng_piece) at those points.
  double strip_overhead_cycles = 0;
  size_t report_points = 0;
  double strip_mean_abs_err = 0, strip_max_abs_err = 0;
  std::vector<std::pair<std::string, double>> strip_errors;
  size_t points = 0;
  double mean_abs_err = 0, max_abs_err = 0;  // of the fitted durations
  std::vector<std::pair<std::string, double>> errors;  // kernel key -> relative error
};
// A kernel's measured time outside the profile (a report row: fit_family's extra points).
struct KernelPoint {
  std::string key;  // what it is (report, axes)
  Workload w;
  double seconds = 0, clock_mhz = 0;
  std::string mode;  // wgmma_bwd: none / mask / fused
};
//   rng with report points (`extra`: RNG tile kernels at other strip lengths, e.g. causal masks): also the
//          per-strip cost of the carried time (rng_piece), by least squares on those points.
//   wgmma_bwd with report points (`extra`: the backward timed by the harness, wgmma_bwd_report_points): fitted
//          on them instead of the ncu durations, each point's time less the model's memory-bound launches around
//          the kernel.
//   gemm_<dtype> (`extra`: standalone GEMMs timed by the harness, gemm_report_points): required.
FamilyFit fit_family(const Machine& m, const Profile& p, const std::string& family,
                     const std::vector<KernelPoint>& extra = {});
// Strips (16 query rows of one batch x head) the RNG tile kernel generates in a window.
double rng_strips(const Workload& w, Window win = {});

// The options a kernel with demand `source` is timed with: for measured demand (ncu...), the profile's ncu
// calibration replaces the machine's unit efficiencies; otherwise o unchanged.
Options options_for(const Options& o, const Profile& p, const std::string& source);

double kernel_clock(const Machine& m, const std::string& profile_clock, const Options& o);

// ---------------------------------------------------------------------------------------------------------
// Pipelines.
// ---------------------------------------------------------------------------------------------------------
struct Concurrent {
  double seconds = 0;
  std::string mechanism;  // "serial", "co-resident (W warps/SM)", "SM partition (k SMs for the RNG)"
  std::string limiter;
  double hidden = 0;      // (t_a + t_b - t) / min(t_a, t_b)
  double energy_bound_s = 0;  // (E_a + E_b) / (cap - static): no schedule of the two is faster (0: no power data)
  double max_hidden = 1;      // the most of the shorter that any schedule can hide under the energy bound
};

struct PipelineTime {
  std::string name;       // baseline | fused | overlap | chunked
  double seconds = 0;
  std::string limiter;    // the unit that limits most of its time (pieces' times summed by limiting unit)
  std::string detail;     // how it was composed
  std::string how;        // the same, short
  double energy_j = -1;   // total energy: the kernels' dynamic energy + static_w x seconds (< 0: no power data)
  double seconds_no_power = 0;
};

struct Prediction {
  Workload w;
  KernelTime gemm, rng, attn_none, attn_mask, attn_fused, attn_fused_composed;  // .source: demand source
  std::vector<PipelineTime> pipelines;  // baseline, fused, overlap, chunked
  double rng_coresident_warps = 0;      // RNG warps per SM that fit beside the GEMM (residency input)
  Concurrent overlap;                   // the overlap pipeline's GEMM || RNG (mechanism, energy bound)
  const PipelineTime* pipeline(const std::string& n) const;
};

// RNG warps per SM that fit beside a kernel using (regs, smem, threads, blocks) per SM (register
// allocation granularity 256 per warp).
double coresident_warps(const Machine& m, double used_regs, double used_smem, double used_threads, double used_blocks,
                        int rng_regs_per_thread);

Prediction predict(const Machine& m, const Profile& p, const Workload& w, const Options& o);

// Demand sources (KernelTime::source): the distinct ones in order, joined by "+" ("ncu", "hand+ncu"); a source
// joined already counts as its parts.
std::string join_sources(const std::vector<std::string>& sources);
// The sources of a pipeline's kernels (baseline / overlap / chunked: GEMM, RNG, attention(mask); fused: GEMM,
// attention(fused)).
std::string pipeline_source(const Prediction& pr, const std::string& pipeline);
// One line for a prediction's kernels: "ncu" when all agree, else "gemm hand, rng ncu, mask ncu(nc), fused sass".
std::string kernel_sources(const Prediction& pr);
// What the source names mean (printed under the tables).
extern const char* const kSourceLegend;

// ---------------------------------------------------------------------------------------------------------
// The training step (workload.pass train): forward QKV GEMM -> attention -> output projection GEMM; backward
// output projection dX, dW -> attention backward -> QKV GEMM dX, dW (docs/model.md, "The training step").
// ---------------------------------------------------------------------------------------------------------

struct PhaseTime {
  std::string name;     // "gemm || rng", "attention(mask)", "gemm-out-dx", ...
  double seconds = 0;
  std::string limiter;
  double clock_mhz = 0;  // the SM clock it is timed at (an overlap: its GEMM side's)
  std::string source;    // its kernels' demand sources (join_sources)
  double seconds_no_power = 0;  // without the power term (= seconds when the term cannot act)
};

struct StepTime {
  std::string name;                 // the strategy (src/core/pipelines.hpp, pass train)
  double seconds = 0;               // forward + backward
  double fwd_seconds = 0, bwd_seconds = 0;
  std::vector<PhaseTime> fwd, bwd;  // in execution order (launch gaps not listed)
  std::string limiter;              // the unit that limits most of its time (its phases' times summed by limiter)
  std::string detail;
  double energy_j = -1;             // the kernels' dynamic energy + static_w x seconds (< 0: no power data)
  double seconds_no_power = 0;
  // The overlap of a RNG kernel with GEMMs in each phase (hidden < 0: the strategy has none there).
  double hidden_fwd = -1, hidden_bwd = -1;
  double energy_bound_fwd_s = 0, energy_bound_bwd_s = 0;  // (E_gemm + E_rng) / (cap - static); 0: no power data
};

struct TrainPrediction {
  Workload w;
  Prediction fwd;  // the forward pass's prediction (its QKV GEMM, RNG, attention kernels, GEMM || RNG)
  // The output projection's forward GEMM [B*SQ, Hq*dH] x [Hq*dH, E]; its backward dX and dW; the QKV GEMM's dX, dW.
  KernelTime gemm_out, gemm_out_dx, gemm_out_dw, gemm_dx, gemm_dw;
  // The attention backward in mode mask and in mode regen (docs/model.md, "The training step": from the wgmma
  // backward's own measured demand where the profile holds it, else derived from the forward's mode-none kernel,
  // regen adding the forward's fused - mask time), and the fused forward that also writes its keep words.
  KernelTime attn_bwd_mask, attn_bwd_regen, attn_fused_write;
  Concurrent bwd_overlap;  // the backward's output-projection GEMMs (dX then dW, after their casts) || the RNG kernel
  std::vector<KernelTime> casts;  // fp8 only: the cast / transpose kernels, in step order (timed by their bytes)
  std::vector<StepTime> strategies;  // the pass-train rows of the pipeline table, in table order
  const StepTime* strategy(const std::string& n) const;
};

// Predicts every training-step strategy of the pipeline table at w (w.pass is not read).
TrainPrediction predict_train(const Machine& m, const Profile& p, const Workload& w, const Options& o);

// Chunk rows of the chunked pipeline: o.chunk_rows, else w.chunk, else ~8 chunks rounded up to a multiple of
// the attention block (128 rows).
int64_t chunk_rows_for(const Workload& w, const Options& o, int block_rows = 128);

}  // namespace dropbench::model
