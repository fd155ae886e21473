#include "src/model/model.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "kernels/rng/dropout_scheme.cuh"  // the mask's tile geometry
#include "src/core/input.hpp"
#include "src/core/pipelines.hpp"

namespace dropbench::model {

void add_to(Demand& acc, const Demand& d, double scale) {
  for (const auto& [k, v] : d) acc[k] += v * scale;
}

Demand scaled(const Demand& d, double scale) {
  Demand out;
  add_to(out, d, scale);
  return out;
}

namespace {

json read_json_file(const std::string& path, const std::string& what) {
  return read_json_input(path, what, fmt::format("a {} JSON file, e.g. configs/{}s/h200.json", what, what));
}

// A document whose fields do not have the types the reader expects (beyond what Fields checks by name).
template <class F>
auto with_document(const std::string& path, const std::string& what, F&& read) {
  try {
    return read();
  } catch (const json::exception& e) {
    std::string msg = e.what();  // without nlohmann's "[json.exception.type_error.302] " tag
    if (const size_t tag = msg.find("] "); msg.rfind("[json.exception", 0) == 0 && tag != std::string::npos)
      msg = msg.substr(tag + 2);
    throw UsageError(one_line(fmt::format("{} {}: a field has the wrong type: {} (allowed: a {} JSON file, e.g. "
                                          "configs/{}s/h200.json)",
                                          what, path, msg, what, what)));
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

// Field access with errors that name the field: "machine <where>: <path> ...".
struct Fields {
  std::string what, where;
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw UsageError(fmt::format("{} {}: {} {}", what, where, path, msg));
  }
  const json& get(const json& j, const std::string& key, const std::string& path) const {
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) fail(path, "is missing");
    return j.at(key);
  }
  double number(const json& j, const std::string& key, const std::string& path, bool positive = true) const {
    const json& v = get(j, key, path);
    if (!v.is_number()) fail(path, fmt::format("must be a number (got {})", v.dump()));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(path, "must be finite");
    if (positive && !(x > 0)) fail(path, fmt::format("must be > 0 (got {})", x));
    if (!positive && x < 0) fail(path, fmt::format("must be >= 0 (got {})", x));
    return x;
  }
  std::string string(const json& j, const std::string& key, const std::string& path) const {
    const json& v = get(j, key, path);
    if (!v.is_string() || v.get<std::string>().empty()) fail(path, "must be a non-empty string");
    return v.get<std::string>();
  }
  // An optional member: absent or null gives `fallback`; present, it must have the type of `fallback`.
  template <class T>
  T optional(const json& j, const std::string& key, const std::string& path, T fallback) const {
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
    const json& v = j.at(key);
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) fail(path, fmt::format("must be true or false (got {})", v.dump()));
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) fail(path, fmt::format("must be a string (got {})", v.dump()));
    } else {
      if (!v.is_number_integer()) fail(path, fmt::format("must be an integer (got {})", v.dump()));
    }
    return v.get<T>();
  }
  // Fails on a key of j that allowed does not name: a misspelt key would otherwise be ignored and its default used.
  void only(const json& j, const std::vector<std::string>& allowed, const std::string& prefix,
            const std::string& kind) const {
    for (const auto& [key, value] : j.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(prefix + key, fmt::format("is not a {} field (allowed: {})", kind, fmt::join(allowed, ", ")));
  }
  // {"value": x, "source": "..."}: every machine number carries its source.
  double sourced(const json& j, const std::string& key, bool positive = true) const {
    const json& o = get(j, key, key);
    if (!o.is_object()) fail(key, "must be an object {\"value\": number, \"source\": string}");
    string(o, "source", key + ".source");
    return number(o, "value", key + ".value", positive);
  }
};

void check_schema(const json& j, const std::string& schema, const Fields& f) {
  if (!j.is_object()) f.fail("document", "must be a JSON object");
  if (f.string(j, "schema", "schema") != schema) f.fail("schema", fmt::format("must be \"{}\"", schema));
  const double v = f.number(j, "schema_version", "schema_version");
  if (v != 1) f.fail("schema_version", fmt::format("must be 1 (got {})", v));
}

// Keys of profile demand objects that are informational only (not op classes).
const std::set<std::string>& informational_keys() {
  static const std::set<std::string> k = {"issue", "stg", "ldg", "mma_sync_bf16_flops", "hmma"};
  return k;
}

Demand demand_from_json(const json& j, const Fields& f, const std::string& path) {
  if (!j.is_object()) f.fail(path, "must be an object of op class -> amount");
  Demand d;
  for (const auto& [k, v] : j.items()) {
    if (informational_keys().count(k)) continue;
    if (!v.is_number() || v.get<double>() < 0) f.fail(path + "." + k, "must be a number >= 0");
    d[k] = v.get<double>();
  }
  return d;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An "ncu" block: null / absent -> nothing; an object -> its demand per unit of work, the work and the
// workload it was measured at. A block without a usable workload or work cannot be carried to other shapes:
// it is ignored (the static counts are used).
std::optional<NcuDemand> ncu_from_json(const json& e, const Fields& f, const std::string& path) {
  if (!e.is_object() || !e.contains("ncu") || e.at("ncu").is_null()) return std::nullopt;
  const json& n = e.at("ncu");
  if (!n.is_object()) f.fail(path + ".ncu", "must be null or an object");
  if (!n.contains("demand") || !n.contains("work") || !n.contains("workload")) return std::nullopt;
  NcuDemand d;
  d.work = f.number(n, "work", path + ".ncu.work");
  const json& dm = f.get(n, "demand", path + ".ncu.demand");
  if (!dm.is_object()) f.fail(path + ".ncu.demand", "must be an object");
  for (const auto& [k, v] : dm.items()) {
    if (!v.is_number() || v.get<double>() < 0) f.fail(path + ".ncu.demand." + k, "must be a number >= 0");
    d.per_work[k] = v.get<double>();
  }
  if (n.contains("duration_us") && n.at("duration_us").is_number()) d.duration_s = n.at("duration_us").get<double>() * 1e-6;
  if (n.contains("sm_clock_mhz") && n.at("sm_clock_mhz").is_number()) d.clock_mhz = n.at("sm_clock_mhz").get<double>();
  const json& wj = f.get(n, "workload", path + ".ncu.workload");
  if (!wj.is_object()) f.fail(path + ".ncu.workload", "must be an object");
  d.w = builtin_config().workload;
  for (const auto& [k, v] : wj.items()) {
    try {
      set_workload_field(d.w, k, v, path + ".ncu.workload");
    } catch (const UsageError& err) {
      f.fail(path + ".ncu.workload." + k, err.what());
    }
  }
  if (d.per_work.empty()) return std::nullopt;
  return d;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Machine.
// ---------------------------------------------------------------------------------------------------------
const Unit* Machine::unit(const std::string& n) const {
  for (const Unit& u : units)
    if (u.name == n) return &u;
  return nullptr;
}

const OpClass* Machine::op(const std::string& n) const {
  for (const OpClass& o : ops)
    if (o.name == n) return &o;
  return nullptr;
}

namespace {

// A fitted number: {"value": x, "source": "..."} (q: the section's prefix "kernels.<name>.").
double sourced_number(const json& a, const Fields& f, const std::string& q, const std::string& key, bool positive) {
  const json& e = f.get(a, key, q + key);
  f.string(e, "source", q + key + ".source");
  return f.number(e, "value", q + key + ".value", positive);
}

// A section's fit_reports: the report paths its fit takes rows from (optional; empty when absent).
std::vector<std::string> fit_reports_from_json(const json& a, const Fields& f, const std::string& q) {
  std::vector<std::string> out;
  if (!a.contains("fit_reports")) return out;
  const json& r = a.at("fit_reports");
  if (!r.is_array()) f.fail(q + "fit_reports", "must be an array of report paths");
  for (const json& x : r) {
    if (!x.is_string() || x.get<std::string>().empty()) f.fail(q + "fit_reports", "must be an array of report paths");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// A machine's GEMM tile models (gemm_tile_model: dtype -> {mma_efficiency, tile_overhead_cycles, fit_reports}).
std::map<std::string, GemmTileModel> gemm_tiles_from_json(const json& gt, const Fields& f) {
  std::map<std::string, GemmTileModel> out;
  if (!gt.is_object()) f.fail("gemm_tile_model", "must be an object dtype (fp8, bf16) -> tile model");
  for (const auto& [dt, g] : gt.items()) {
    const std::string q = "gemm_tile_model." + dt + ".";
    if (dt != "fp8" && dt != "bf16") f.fail("gemm_tile_model." + dt, "is not a GEMM dtype (allowed: fp8, bf16)");
    if (!g.is_object()) f.fail("gemm_tile_model." + dt, "must be an object {mma_efficiency, tile_overhead_cycles, fit_reports}");
    f.only(g, {"mma_efficiency", "tile_overhead_cycles", "fit_reports"}, q, "tile-model");
    GemmTileModel t;
    t.mma_efficiency = sourced_number(g, f, q, "mma_efficiency", true);
    if (t.mma_efficiency > 1) f.fail(q + "mma_efficiency.value", "must be in (0, 1]");
    t.tile_overhead_cycles = sourced_number(g, f, q, "tile_overhead_cycles", false);
    t.fit_reports = fit_reports_from_json(g, f, q);
    out[dt] = t;
  }
  return out;
}

// "power": kernel key -> {dyn_j_per_work, mean_w, source} (a profile's or a machine file's; optional).
std::map<std::string, KernelPower> power_from_json(const json& j, const Fields& f) {
  std::map<std::string, KernelPower> out;
  if (!j.contains("power") || j.at("power").is_null()) return out;
  const json& pw = j.at("power");
  if (!pw.is_object()) f.fail("power", "must be an object kernel key -> {dyn_j_per_work, mean_w, source}");
  for (const auto& [key, e] : pw.items()) {
    if (key == "description") continue;
    const std::string q = "power." + key;
    KernelPower kp;
    kp.dyn_j_per_work = f.number(e, "dyn_j_per_work", q + ".dyn_j_per_work", false);
    kp.mean_w = f.number(e, "mean_w", q + ".mean_w", false);
    kp.source = f.string(e, "source", q + ".source");
    if (e.contains("fitted_on")) {
      const json& fo = e.at("fitted_on");
      if (!fo.is_array()) f.fail(q + ".fitted_on", "must be an array of {report, axes, variant}");
      for (size_t i = 0; i < fo.size(); ++i) {
        const std::string qi = fmt::format("{}.fitted_on[{}]", q, i);
        const json& x = fo[i];
        if (!x.is_object() || !x.contains("axes") || !x.at("axes").is_object())
          f.fail(qi, "must be an object {report, axes (object), variant}");
        kp.fitted_on.push_back({f.string(x, "report", qi + ".report"), x.at("axes"), f.string(x, "variant", qi + ".variant")});
      }
    }
    out[key] = kp;
  }
  return out;
}

// The machine's units (name -> efficiency) and op classes (name -> the units they load, at which rates).
void machine_units_ops(const json& j, const Fields& f, Machine& m) {
  const json& units = f.get(j, "units", "units");
  if (!units.is_object() || units.empty()) f.fail("units", "must be a non-empty object");
  for (const auto& [name, u] : units.items()) {
    const std::string p = "units." + name;
    Unit un;
    un.name = name;
    un.description = f.string(u, "description", p + ".description");
    const json& e = f.get(u, "efficiency", p + ".efficiency");
    un.efficiency = f.number(e, "value", p + ".efficiency.value");
    un.efficiency_source = f.string(e, "source", p + ".efficiency.source");
    m.units.push_back(un);
  }
  const json& ops = f.get(j, "ops", "ops");
  if (!ops.is_object() || ops.empty()) f.fail("ops", "must be a non-empty object");
  for (const auto& [name, o] : ops.items()) {
    const std::string p = "ops." + name;
    OpClass oc;
    oc.name = name;
    oc.demand = f.string(o, "demand", p + ".demand");
    oc.source = f.string(o, "source", p + ".source");
    oc.per_second = f.optional(o, "per_second", p + ".per_second", false);
    const json& loads = f.get(o, "loads", p + ".loads");
    if (!loads.is_object() || loads.empty()) f.fail(p + ".loads", "must be a non-empty object of unit -> rate");
    for (const auto& [un, rate] : loads.items()) {
      if (!m.unit(un)) f.fail(p + ".loads." + un, "names a unit that is not in units");
      oc.loads.emplace_back(un, f.number(loads, un, p + ".loads." + un));
    }
    m.ops.push_back(oc);
  }
}

// calibration.fit_points: the report rows each unit's efficiency is fitted on.
void machine_fit_points(const json& j, const Fields& f, Machine& m) {
  if (j.contains("calibration") && !j.at("calibration").is_object())
    f.fail("calibration", "must be an object {\"fit_points\": [...]}");
  if (j.contains("calibration") && j.at("calibration").contains("fit_points")) {
    if (!j.at("calibration").at("fit_points").is_array()) f.fail("calibration.fit_points", "must be an array");
    for (const json& fp : j.at("calibration").at("fit_points")) {
      FitPoint p;
      p.unit = f.string(fp, "unit", "calibration.fit_points[].unit");
      if (!m.unit(p.unit) && p.unit != kRngStripUnit)
        f.fail("calibration.fit_points[].unit", fmt::format("'{}' is not in units (nor {})", p.unit, kRngStripUnit));
      p.command = f.string(fp, "command", "calibration.fit_points[].command");
      p.variant = f.string(fp, "variant", "calibration.fit_points[].variant");
      p.axes = f.get(fp, "axes", "calibration.fit_points[].axes");
      p.report = f.optional(fp, "report", "calibration.fit_points[].report", std::string());
      m.fit_points.push_back(p);
    }
  }
}

}  // namespace

Machine machine_from_json(const json& j, const std::string& where) {
  const Fields f{"machine", where};
  check_schema(j, "dropbench.machine", f);
  f.only(j,
         {"schema", "schema_version", "name", "description", "sm_count", "clock_mhz", "hbm_gbs", "l2_gbs", "l2_bytes",
          "registers_per_sm", "smem_per_sm_bytes", "max_threads_per_sm", "max_blocks_per_sm", "launch_gap_us",
          "rng_saturation_warps", "units", "ops", "calibration", "cap_w", "static_w", "power", "memory_gib",
          "gemm_tile_model"},
         "", "machine");
  Machine m;
  m.path = where;
  m.name = f.string(j, "name", "name");
  m.description = f.optional(j, "description", "description", std::string());
  m.sm_count = f.sourced(j, "sm_count");
  {
    const json& c = f.get(j, "clock_mhz", "clock_mhz");
    const Fields fc{"machine", where};
    auto clk = [&](const char* k) {
      const json& o = fc.get(c, k, std::string("clock_mhz.") + k);
      fc.string(o, "source", std::string("clock_mhz.") + k + ".source");
      return fc.number(o, "value", std::string("clock_mhz.") + k + ".value");
    };
    m.clock_max_mhz = clk("max");
    m.clock_sustained_mhz = clk("sustained");
    for (const auto& [k, v] : c.items())
      if (k != "max" && k != "sustained") m.named_clocks[k] = clk(k.c_str());
  }
  m.hbm_gbs = f.sourced(j, "hbm_gbs");
  m.l2_gbs = f.sourced(j, "l2_gbs");
  m.l2_bytes = f.sourced(j, "l2_bytes");
  m.registers_per_sm = f.sourced(j, "registers_per_sm");
  m.smem_per_sm_bytes = f.sourced(j, "smem_per_sm_bytes");
  m.max_threads_per_sm = f.sourced(j, "max_threads_per_sm");
  m.max_blocks_per_sm = f.sourced(j, "max_blocks_per_sm");
  m.launch_gap_us = f.sourced(j, "launch_gap_us", /*positive=*/false);
  m.rng_saturation_warps = f.sourced(j, "rng_saturation_warps");
  if (j.contains("cap_w")) m.cap_w = f.sourced(j, "cap_w");
  if (j.contains("static_w")) m.static_w = f.sourced(j, "static_w", /*positive=*/false);
  if (j.contains("memory_gib")) m.memory_gib = f.sourced(j, "memory_gib");
  if (j.contains("cap_w") != j.contains("static_w")) f.fail(j.contains("cap_w") ? "static_w" : "cap_w", "is missing (cap_w and static_w go together)");
  if (m.cap_w > 0 && !(m.cap_w > m.static_w))
    f.fail("cap_w", fmt::format("must be above static_w (got {} <= {})", m.cap_w, m.static_w));
  if (j.contains("gemm_tile_model")) m.gemm_tiles = gemm_tiles_from_json(j.at("gemm_tile_model"), f);
  m.power = power_from_json(j, f);
  if (!m.power.empty() && !m.has_power()) f.fail("power", "needs cap_w and static_w (the power term divides by cap_w - static_w)");

  machine_units_ops(j, f, m);
  machine_fit_points(j, f, m);
  return m;
}

Machine load_machine(const std::string& path) {
  const json j = read_json_file(path, "machine");
  return with_document(path, "machine", [&] { return machine_from_json(j, path); });
}

// ---------------------------------------------------------------------------------------------------------
// Profile.
// ---------------------------------------------------------------------------------------------------------
namespace {

// An attention section's sass_key (the ncu / SASS keys of modes none, mask, fused and the causal suffix).
std::map<std::string, std::string> sass_keys_from_json(const json& a, const Fields& f, const std::string& q) {
  std::map<std::string, std::string> keys;
  const json& sk = f.get(a, "sass_key", q + "sass_key");
  for (const char* mode : {"none", "mask", "fused", "causal_suffix"})
    keys[mode] = f.string(sk, mode, q + "sass_key." + mode);
  return keys;
}

// A wgmma kernel's section (kernels.attention_wgmma, kernels.attention_bwd_wgmma; q: "kernels.<name>.").
WgmmaProfile wgmma_profile_from_json(const json& a, const Fields& f, const std::string& q) {
  WgmmaProfile wp;
  const json& clk = f.get(a, "clock", q + "clock");
  wp.clock = clk.is_number() ? fmt::format("{}", clk.get<double>()) : f.string(a, "clock", q + "clock");
  wp.head_dim = static_cast<int>(f.number(a, "head_dim", q + "head_dim"));
  wp.block_rows = static_cast<int>(f.number(a, "block_rows", q + "block_rows"));
  wp.block_keys = static_cast<int>(f.number(a, "block_keys", q + "block_keys"));
  wp.ctas_per_sm = static_cast<int>(f.number(a, "ctas_per_sm", q + "ctas_per_sm"));
  wp.registers = static_cast<int>(f.number(a, "registers", q + "registers"));
  wp.threads = static_cast<int>(f.number(a, "threads", q + "threads"));
  wp.smem_per_cta = f.number(a, "smem_per_cta_bytes", q + "smem_per_cta_bytes");
  wp.sass_key = sass_keys_from_json(a, f, q);
  wp.issue_efficiency = sourced_number(a, f, q, "issue_efficiency", true);
  wp.mma_efficiency = sourced_number(a, f, q, "mma_efficiency", true);
  wp.cta_overhead_cycles = sourced_number(a, f, q, "cta_overhead_cycles", false);
  wp.fit_reports = fit_reports_from_json(a, f, q);
  return wp;
}

// One sass.<key> entry: the kernel's demand per iteration (and on edge / rescale iterations), its registers, wide
// IMADs and its Nsight Compute counts.
SassKernel sass_kernel_from_json(const std::string& key, const json& e, const Fields& f) {
  const std::string path = "sass." + key;
  SassKernel k;
  k.key = key;
  k.elements_per_iteration = f.number(e, "elements_per_iteration", path + ".elements_per_iteration");
  k.per_iteration = demand_from_json(f.get(e, "per_iteration", path + ".per_iteration"), f, path + ".per_iteration");
  if (e.contains("edge_extra_per_iteration"))
    k.edge_extra = demand_from_json(e.at("edge_extra_per_iteration"), f, path + ".edge_extra_per_iteration");
  if (e.contains("rescale_extra_per_iteration"))
    k.rescale_extra = demand_from_json(e.at("rescale_extra_per_iteration"), f, path + ".rescale_extra_per_iteration");
  if (e.is_object() && e.contains("resources"))
    k.registers = f.optional(e.at("resources"), "registers", path + ".resources.registers", k.registers);
  if (e.contains("opcodes_per_iteration") && e.at("opcodes_per_iteration").is_object())
    for (const auto& [op, n] : e.at("opcodes_per_iteration").items())
      if ((op.rfind("IMAD.WIDE", 0) == 0 || op.rfind("IMAD.HI", 0) == 0) && n.is_number())
        k.imad_wide_per_iteration += n.get<double>();
  k.ncu = ncu_from_json(e, f, path);
  return k;
}

// kernels.rng: the RNG kernel's clock, SASS key, block, bytes per element, fitted efficiencies and strip cost.
void profile_rng_from_json(const json& ks, const Fields& f, Profile& p) {
  const json& r = f.get(ks, "rng", "kernels.rng");
  p.rng_clock = f.string(r, "clock", "kernels.rng.clock");
  p.rng_sass_key = f.string(r, "sass_key", "kernels.rng.sass_key");
  p.rng_block_threads = static_cast<int>(f.number(r, "block_threads", "kernels.rng.block_threads"));
  p.rng_hbm_bytes_per_element = f.number(f.get(r, "hbm_bytes_per_element", "kernels.rng.hbm_bytes_per_element"),
                                         "value", "kernels.rng.hbm_bytes_per_element.value", false);
  if (r.contains("efficiency") && r.at("efficiency").is_object())
    for (const auto& [u, e] : r.at("efficiency").items()) {
      const std::string q = "kernels.rng.efficiency." + u;
      f.string(e, "source", q + ".source");
      p.rng_efficiency[u] = f.number(e, "value", q + ".value");
    }
  if (r.contains("strip_overhead_cycles")) {
    const json& so = r.at("strip_overhead_cycles");
    f.string(so, "source", "kernels.rng.strip_overhead_cycles.source");
    p.rng_strip_cycles = f.number(so, "value", "kernels.rng.strip_overhead_cycles.value", false);
  }
}

// kernels.attention: the mma.sync attention kernel's clock, tiling, residency and SASS keys.
void profile_attention_from_json(const json& ks, const Fields& f, Profile& p) {
  const json& a = f.get(ks, "attention", "kernels.attention");
  const std::string q = "kernels.attention.";
  p.attn_clock = f.string(a, "clock", q + "clock");
  p.attn_head_dim = static_cast<int>(f.number(a, "head_dim", q + "head_dim"));
  p.attn_block_rows = static_cast<int>(f.number(a, "block_rows", q + "block_rows"));
  p.attn_block_keys = static_cast<int>(f.number(a, "block_keys", q + "block_keys"));
  p.attn_warps = static_cast<int>(f.number(a, "warps", q + "warps"));
  p.attn_rows_per_warp = static_cast<int>(f.number(a, "rows_per_warp", q + "rows_per_warp"));
  p.attn_ctas_per_sm = static_cast<int>(f.number(a, "ctas_per_sm", q + "ctas_per_sm"));
  p.attn_registers = static_cast<int>(f.number(a, "registers", q + "registers"));
  p.attn_smem_per_cta = f.number(a, "smem_per_cta_bytes", q + "smem_per_cta_bytes");
  if (p.attn_warps * p.attn_rows_per_warp != p.attn_block_rows)
    f.fail(q + "warps", "x rows_per_warp must equal block_rows");
  p.attn_sass_key = sass_keys_from_json(a, f, q);
}

// kernels.gemm_<dtype>: the GEMM's clock, demand per FLOP, bytes, tile, residency and Nsight Compute counts.
GemmProfile gemm_profile_from_json(const json& g, const Fields& f, const std::string& key) {
  const std::string q = "kernels." + key + ".";
  GemmProfile gp;
  const json& clk = f.get(g, "clock", q + "clock");  // sustained | max | a measured clock in MHz
  gp.clock = clk.is_number() ? fmt::format("{}", f.number(g, "clock", q + "clock")) : f.string(g, "clock", q + "clock");
  gp.per_flop = demand_from_json(f.get(g, "per_flop", q + "per_flop"), f, q + "per_flop");
  gp.input_bytes = f.number(g, "input_bytes", q + "input_bytes");
  gp.output_bytes = f.number(g, "output_bytes", q + "output_bytes");
  gp.tile_m = f.number(g, "tile_m", q + "tile_m");
  gp.tile_n = f.number(g, "tile_n", q + "tile_n");
  if (g.contains("cluster_multicast")) gp.cluster_multicast = f.number(g, "cluster_multicast", q + "cluster_multicast");
  const json& r = f.get(g, "residency", q + "residency");
  gp.registers_per_sm = f.number(r, "registers_per_sm", q + "residency.registers_per_sm", false);
  gp.smem_per_sm_bytes = f.number(r, "smem_per_sm_bytes", q + "residency.smem_per_sm_bytes", false);
  gp.threads_per_sm = f.number(r, "threads_per_sm", q + "residency.threads_per_sm", false);
  gp.blocks_per_sm = f.number(r, "blocks_per_sm", q + "residency.blocks_per_sm", false);
  gp.ncu = ncu_from_json(g, f, "kernels." + key);
  return gp;
}

}  // namespace

Profile profile_from_json(const json& j, const std::string& where) {
  const Fields f{"profile", where};
  check_schema(j, "dropbench.profile", f);
  Profile p;
  p.path = where;
  p.name = f.string(j, "name", "name");
  const json& sass = f.get(j, "sass", "sass");
  for (const auto& [key, e] : sass.items()) p.sass[key] = sass_kernel_from_json(key, e, f);
  const json& ks = f.get(j, "kernels", "kernels");
  profile_rng_from_json(ks, f, p);
  profile_attention_from_json(ks, f, p);
  for (const char* dt : {"fp8", "bf16"}) {
    const std::string key = std::string("gemm_") + dt;
    if (ks.contains(key)) p.gemm[dt] = gemm_profile_from_json(ks.at(key), f, key);
  }
  if (ks.contains("attention_wgmma")) p.wgmma = wgmma_profile_from_json(ks.at("attention_wgmma"), f, "kernels.attention_wgmma.");
  if (ks.contains("attention_bwd_wgmma"))
    p.wgmma_bwd = wgmma_profile_from_json(ks.at("attention_bwd_wgmma"), f, "kernels.attention_bwd_wgmma.");
  p.attn_auto = f.optional(j, "attention_kernel_auto", "attention_kernel_auto", std::string(p.wgmma ? "wgmma" : "mma"));
  if (p.attn_auto != "mma" && p.attn_auto != "wgmma")
    f.fail("attention_kernel_auto", "must be mma or wgmma");
  if (p.attn_auto == "wgmma" && !p.wgmma) f.fail("attention_kernel_auto", "is wgmma but kernels.attention_wgmma is missing");
  p.power = power_from_json(j, f);
  if (j.contains("ncu_calibration") && !j.at("ncu_calibration").is_null()) {
    const json& c = j.at("ncu_calibration");
    const json& u = f.get(c, "units", "ncu_calibration.units");
    if (!u.is_object()) f.fail("ncu_calibration.units", "must be an object unit -> {value, source}");
    for (const auto& [name, e] : u.items()) {
      const std::string q = "ncu_calibration.units." + name;
      f.string(e, "source", q + ".source");
      p.ncu_efficiency[name] = f.number(e, "value", q + ".value");
    }
  }
  return p;
}

bool Profile::has_ncu() const {
  for (const auto& [k, s] : sass)
    if (s.ncu) return true;
  for (const auto& [k, g] : gemm)
    if (g.ncu) return true;
  return false;
}

Profile load_profile(const std::string& path) {
  const json j = read_json_file(path, "profile");
  return with_document(path, "profile", [&] { return profile_from_json(j, path); });
}

// ---------------------------------------------------------------------------------------------------------
// Kernel time.
// ---------------------------------------------------------------------------------------------------------
double KernelTime::unit_seconds(const std::string& u) const {
  for (const UnitTime& t : units)
    if (t.unit == u) return t.seconds;
  return 0;
}

KernelTime kernel_time(const Machine& m, const std::string& name, const Demand& d, double clock_mhz, const Options& o,
                       double sm_share, double factor) {
  if (!(clock_mhz > 0)) throw UsageError(fmt::format("model: clock for {} must be > 0", name));
  if (!(sm_share > 0 && sm_share <= 1)) throw UsageError(fmt::format("model: SM share for {} must be in (0, 1]", name));
  std::map<std::string, double> per_unit;
  for (const auto& [op, amount] : d) {
    if (amount == 0) continue;
    const OpClass* oc = m.op(op);
    if (!oc) throw UsageError(fmt::format("machine {}: ops.{} is missing (needed by kernel {})", m.path, op, name));
    for (const auto& [unit, rate] : oc->loads) {
      const double denom = oc->per_second ? rate : rate * m.sm_count * sm_share * clock_mhz * 1e6;
      per_unit[unit] += amount / denom;
    }
  }
  KernelTime t;
  t.name = name;
  t.clock_mhz = clock_mhz;
  for (const Unit& u : m.units) {
    auto it = per_unit.find(u.name);
    if (it == per_unit.end()) continue;
    double eff = u.efficiency;
    if (auto ov = o.efficiency.find(u.name); ov != o.efficiency.end()) eff = ov->second;
    const double s = it->second / (o.calibrated ? eff : 1.0) * factor;
    t.units.push_back({u.name, s});
    if (s > t.seconds) {
      t.seconds = s;
      t.limiter = u.name;
    }
  }
  return t;
}

double kernel_clock(const Machine& m, const std::string& profile_clock, const Options& o) {
  if (o.clock_mhz > 0) return o.clock_mhz;
  const std::string c = o.clock == "model" ? profile_clock : o.clock;
  if (c == "max") return m.clock_max_mhz;
  if (c == "sustained") return m.clock_sustained_mhz;
  // A profile kernel's own measured clock (MHz), e.g. the power-capped wgmma attention.
  if (!c.empty() && (std::isdigit(static_cast<unsigned char>(c[0])) != 0)) {
    const std::optional<double> v = parse_finite_number(c);
    if (v && *v > 0) return *v;
  }
  // A clock the machine measured for this kind of kernel (clock_mhz.<name>).
  if (auto it = m.named_clocks.find(c); it != m.named_clocks.end()) return it->second;
  std::string named;
  for (const auto& [k, v] : m.named_clocks) named += ", " + k;
  if (o.clock == "model")
    throw UsageError(fmt::format("profile clock '{}' is not a clock of machine {} (allowed: max, sustained, a number of "
                                 "MHz{}; a name the machine lacks needs its clock_mhz.<name>)",
                                 c, m.path, named));
  throw UsageError(fmt::format("clock: '{}' is not a clock (allowed: model, max, sustained)", c));
}

// ---------------------------------------------------------------------------------------------------------
// Demands.
// ---------------------------------------------------------------------------------------------------------
namespace {

// The static part of every demand: hand-written (GEMM) or SASS-derived, with the IMAD.WIDE/HI extra weight
// under kImadWide so that ncu's instruction counts (one per IMAD.WIDE) can be compared (stripped before use).
const char* const kImadWide = "_imad_wide";

// M, N, K of the QKV GEMM (kernels/common/shapes.hpp, header-only: the model does not link the kernels library,
// so it runs anywhere), in doubles for the model's arithmetic.
struct GemmMnk {
  double m, n, k;
  double flops() const { return gemm_flops(m, n, k); }
};
GemmMnk gemm_mnk(const Workload& w) {
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  return {static_cast<double>(d.m), static_cast<double>(d.n), static_cast<double>(d.k)};
}

// The GEMM's static demand at the shape s (the QKV GEMM's by default; the training step's other GEMMs have
// their own M, N, K and the same per-FLOP demand of w.dtype).
Demand gemm_static(const Profile& p, const Workload& w, const GemmMnk& s) {
  auto it = p.gemm.find(w.dtype);
  if (it == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, w.dtype));
  const GemmProfile& g = it->second;
  const double M = s.m, N = s.n, K = s.k;
  Demand d = scaled(g.per_flop, s.flops());
  const double in = g.input_bytes, out = g.output_bytes;
  d["hbm_bytes"] += (M * K + N * K) * in + M * N * out;
  d["l2_bytes"] += (M * K * in * std::ceil(N / g.tile_n) + N * K * in * std::ceil(M / g.tile_m)) / g.cluster_multicast +
                   M * N * out;
  return d;
}
Demand gemm_static(const Profile& p, const Workload& w) { return gemm_static(p, w, gemm_mnk(w)); }

// Measured demand carried to workload w (docs/model.md, "Demand sources"). st_w / st_p: the static demand at
// w and at the measured workload; work_ratio: work(w) / work(measured), for what the static demand lacks.
// Groups of op classes against the ncu counters that measure them:
//   inst             <- smsp__inst_executed - HMMA (the model's inst excludes HMMA)
//   hmma16816        <- tensor_op_hmma - tensor_op_gmma (HMMA; the hmma counter includes wgmma on Hopper)
//   alu              <- alu pipe
//   imad + fma       <- fma pipe (IMAD and FP32 ops; fmaheavy + fmalite); static count with IMAD.WIDE once
//   mufu + conv      <- xu pipe
//   lsu              <- lsu pipe
//   hbm_bytes        <- dram__bytes_read + write;   l2_bytes <- lts__t_bytes
// A group the static demand has at the measured workload is scaled by measured / static (its op classes keep
// their static proportions and geometry); a group it lacks gets measured-per-work x work_ratio on its first
// op class. Op classes ncu does not measure (smem_bytes, regfile, wgmma FLOPs) keep their static amounts.
Demand ncu_carried(const Demand& st_w, const Demand& st_p, const NcuDemand& n, double work_ratio) {
  auto get = [](const Demand& d, const char* k) {
    auto it = d.find(k);
    return it == d.end() ? 0.0 : it->second;
  };
  auto meas = [&](const char* k) -> std::optional<double> {
    auto it = n.per_work.find(k);
    if (it == n.per_work.end()) return std::nullopt;
    return it->second * n.work;
  };
  struct Group {
    std::vector<const char*> classes;
    std::optional<double> measured;
    double static_p;
  };
  // On Hopper ncu's tensor_op_hmma pipe counter also counts wgmma (it equals tensor_op_gmma in a wgmma GEMM):
  // mma.sync HMMAs are the difference.
  std::optional<double> hmma = meas("tensor_op_hmma"), inst = meas("inst"), fma = meas("fma");
  if (hmma && meas("tensor_op_gmma")) hmma = std::max(0.0, *hmma - *meas("tensor_op_gmma"));
  if (!fma && meas("fmaheavy") && meas("fmalite")) fma = *meas("fmaheavy") + *meas("fmalite");
  std::optional<double> inst_nonhmma;
  if (inst) inst_nonhmma = std::max(0.0, *inst - (hmma ? *hmma : get(st_p, "hmma16816")));
  const std::vector<Group> groups = {
      {{"inst"}, inst_nonhmma, get(st_p, "inst")},
      {{"hmma16816"}, hmma, get(st_p, "hmma16816")},
      {{"alu"}, meas("alu"), get(st_p, "alu")},
      {{"fma", "imad"}, fma, get(st_p, "imad") - get(st_p, kImadWide) + get(st_p, "fma")},
      {{"mufu", "conv"}, meas("xu"), get(st_p, "mufu") + get(st_p, "conv")},
      {{"lsu"}, meas("lsu"), get(st_p, "lsu")},
      {{"hbm_bytes"}, meas("hbm_bytes"), get(st_p, "hbm_bytes")},
      {{"l2_bytes"}, meas("l2_bytes"), get(st_p, "l2_bytes")},
  };
  Demand out = st_w;
  out.erase(kImadWide);
  for (const Group& g : groups) {
    if (!g.measured) continue;
    if (g.static_p > 0) {
      const double k = *g.measured / g.static_p;
      for (const char* c : g.classes)
        if (auto it = out.find(c); it != out.end()) it->second *= k;
    } else if (*g.measured > 0) {
      out[g.classes.front()] += *g.measured * work_ratio;
    }
  }
  return out;
}

}  // namespace

namespace {

Demand gemm_demand_at(const Profile& p, const Workload& w, const GemmMnk& s, std::string* source) {
  Demand d = gemm_static(p, w, s);
  const GemmProfile& g = p.gemm.at(w.dtype);
  if (p.use_ncu && g.ncu) {
    Workload wp = g.ncu->w;
    wp.dtype = w.dtype;
    d = ncu_carried(d, gemm_static(p, wp), *g.ncu, s.flops() / gemm_mnk(wp).flops());
    if (source) *source = "ncu";
  } else if (source) {
    *source = "hand";
  }
  return d;
}

}  // namespace

Demand gemm_demand(const Profile& p, const Workload& w, std::string* source) {
  return gemm_demand_at(p, w, gemm_mnk(w), source);
}

namespace {

const SassKernel& sass_entry(const Profile& p, const std::string& key, const std::string& what) {
  auto it = p.sass.find(key);
  if (it == p.sass.end()) throw UsageError(fmt::format("profile {}: sass.{} is missing ({})", p.path, key, what));
  return it->second;
}

std::string rng_key(const Profile& p, const Workload& w, const std::string& layout) {
  std::string k = replace_all(p.rng_sass_key, "{layout}", layout);
  k = replace_all(k, "{rounds}", std::to_string(w.rounds));
  return replace_all(k, "{threshold_bits}", std::to_string(w.threshold_bits));
}

// The mask tiles generated for a window's query-row strips (causal: on/below the diagonal), as the RNG kernel
// counts them (MaskGeometry::tiles_before).
double window_tiles(const Workload& w, Window win) {
  const int64_t rows = win.rows < 0 ? w.sq : win.rows;
  const int64_t r16_begin = win.row_begin / kTileRows;
  const int64_t r16_end = ceil_div(std::min<int64_t>(win.row_begin + rows, w.sq), int64_t{kTileRows});
  if (r16_end <= r16_begin) return 0;
  MaskGeometry g;
  g.sq = g.sk = static_cast<uint32_t>(w.sq);
  g.causal = w.causal;
  return static_cast<double>(g.tiles_before(static_cast<uint32_t>(r16_end)) -
                             g.tiles_before(static_cast<uint32_t>(r16_begin)));
}
constexpr double kTileElems = kTileRows * kTileCols;  // a tile's elements

// Static RNG demand (with the kImadWide weight) and the elements it generates.
Demand rng_static(const SassKernel& k, const Profile& p, const Workload& w, const std::string& layout, Window win,
                  double* elements_out = nullptr) {
  const double bh = static_cast<double>(w.batch) * w.q_heads;
  double elements = 0;
  if (layout == "tile") {
    elements = window_tiles(w, win) * kTileElems * bh;
  } else {
    if (win.rows >= 0) throw UsageError("model: only the tile layout can be generated for a window of rows");
    elements = bh * static_cast<double>(w.sq) * static_cast<double>(w.sq);  // as `dropbench rng` sizes it
  }
  const double iters = elements / k.elements_per_iteration;
  Demand d = scaled(k.per_iteration, iters);
  if (k.imad_wide_per_iteration > 0) d[kImadWide] = k.imad_wide_per_iteration * iters;
  d["hbm_bytes"] += elements * p.rng_hbm_bytes_per_element;
  d["l2_bytes"] += elements * p.rng_hbm_bytes_per_element;
  if (elements_out) *elements_out = elements;
  return d;
}

}  // namespace

Demand rng_demand(const Profile& p, const Workload& w, const std::string& layout, Window win, std::string* source) {
  const SassKernel& k = sass_entry(p, rng_key(p, w, layout), "RNG mask kernel, layout " + layout);
  double elements = 0;
  Demand d = rng_static(k, p, w, layout, win, &elements);
  if (p.use_ncu && k.ncu) {
    // Measured at its own workload, with the layout this entry is (the tile kernel's counts do not depend on
    // causality: it generates the tiles it is given).
    double elements_p = 0;
    const Demand st_p = rng_static(k, p, k.ncu->w, layout, {}, &elements_p);
    d = ncu_carried(d, st_p, *k.ncu, elements_p > 0 ? elements / elements_p : 0);
    if (source) *source = "ncu";
  } else {
    d.erase(kImadWide);
    if (source) *source = "sass";
  }
  return d;
}

AttnWork attention_work(const Profile& p, const Workload& w, Window win) {
  if (w.head_dim != p.attn_head_dim)
    throw UsageError(fmt::format("profile {}: attention is profiled for head_dim {} only (workload has {})", p.path,
                                 p.attn_head_dim, w.head_dim));
  const int64_t BR = p.attn_block_rows, BC = p.attn_block_keys, RW = p.attn_rows_per_warp;
  const int64_t rows = win.rows < 0 ? w.sq : win.rows;
  const int64_t qb_begin = win.row_begin / BR, qb_end = ceil_div(std::min<int64_t>(win.row_begin + rows, w.sq), BR);
  const int64_t n_kv = ceil_div(w.sq, BC);
  // Expected fraction of key blocks where some row max of a warp's RW rows changes (i.i.d. scores): block j
  // holds the running max of a row with probability 1/(j+1).
  std::vector<double> rescale_prefix(static_cast<size_t>(n_kv) + 1, 0.0);
  for (int64_t j = 0; j < n_kv; ++j) {
    const double r = j == 0 ? 1.0 : 1.0 - std::pow(1.0 - 1.0 / static_cast<double>(j + 1), static_cast<double>(RW));
    rescale_prefix[static_cast<size_t>(j) + 1] = rescale_prefix[static_cast<size_t>(j)] + r;
  }
  AttnWork a;
  std::vector<double> cta_iters;  // loop iterations of each CTA of one (batch, head), in launch order
  for (int64_t x = 0; x < qb_end - qb_begin; ++x) {
    const int64_t qb = qb_begin + attn::query_block_in_order(qb_end - qb_begin, x, w.causal);
    cta_iters.push_back(static_cast<double>(attn::key_blocks_visited(w.sq, qb * BR, BR, BC, w.causal)));
  }
  for (int64_t qb = qb_begin; qb < qb_end; ++qb) {
    for (int64_t wi = 0; wi < p.attn_warps; ++wi) {
      const int64_t wrow = qb * BR + wi * RW;
      int64_t active = n_kv;
      if (w.causal) active = std::min(n_kv, (wrow + RW - 1) / BC + 1);
      a.iterations += static_cast<double>(active);
      a.rescale_iterations += rescale_prefix[static_cast<size_t>(active)];
      // Edge blocks: past the sequence end, or (causal) holding keys after the warp's first row.
      int64_t first_edge = active;
      if (w.sq % BC != 0) first_edge = std::min(first_edge, n_kv - 1);
      if (w.causal) first_edge = std::min(first_edge, std::max<int64_t>(0, ceil_div(wrow - BC + 2, BC)));
      a.edge_iterations += static_cast<double>(std::max<int64_t>(0, active - first_edge));
    }
  }
  const double bh = static_cast<double>(w.batch) * w.q_heads;
  a.iterations *= bh;
  a.edge_iterations *= bh;
  a.rescale_iterations *= bh;
  a.ctas = static_cast<double>(qb_end - qb_begin) * bh;
  a.cta_iterations = std::move(cta_iters);
  return a;
}

double tail_factor_simulated(const std::vector<double>& cta_iters, double heads, double slots) {
  // Greedy list scheduling of the grid (blockIdx.x = query block fastest, then head, then batch) on `slots`
  // identical CTA slots, each CTA lasting its loop iteration count; makespan / (total / slots).
  const int64_t n_slots = std::max<int64_t>(1, static_cast<int64_t>(slots));
  const int64_t reps = static_cast<int64_t>(heads);
  if (cta_iters.empty() || reps <= 0) return 1.0;
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int64_t i = 0; i < n_slots; ++i) free_at.push(0.0);
  double total = 0, makespan = 0;
  for (int64_t r = 0; r < reps; ++r)
    for (double d : cta_iters) {
      const double t0 = free_at.top();
      free_at.pop();
      free_at.push(t0 + d);
      makespan = std::max(makespan, t0 + d);
      total += d;
    }
  const double ideal = total / static_cast<double>(n_slots);
  return ideal > 0 ? std::max(1.0, makespan / ideal) : 1.0;
}

double tail_factor_closed(const std::vector<double>& cta_iters, double heads, double slots) {
  const double n_slots = std::max(1.0, std::floor(slots));
  const double reps = std::floor(heads);
  if (cta_iters.empty() || reps <= 0) return 1.0;
  double sum = 0, lo = cta_iters.front(), hi = cta_iters.front();
  for (double d : cta_iters) {
    sum += d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  const double total = sum * reps, ideal = total / n_slots;
  if (!(ideal > 0)) return 1.0;
  const double n = static_cast<double>(cta_iters.size()) * reps;
  // Equal CTAs: exactly ceil(waves) / waves.
  if (hi == lo) return std::max(1.0, std::ceil(n / n_slots) * hi / ideal);
  // Otherwise Graham's bound for greedy list scheduling: ideal <= makespan <= ideal + longest CTA (the last CTA
  // to finish started when every slot was busy). The midpoint is off by at most half the bound's width.
  return 1.0 + 0.5 * hi / ideal;
}

double tail_factor(const std::vector<double>& cta_iters, double heads, double slots) {
  // Simulating every CTA costs O(CTAs log slots): seconds past ~10^7 CTAs (b 4096, sq 64K, 128 heads is 2.7e8).
  // Past kTailSimulateCtas the closed form answers, whose error (<= half of longest / ideal) is then < 0.5 %
  // unless one CTA is longer than 1 % of a slot's whole share; such a grid is simulated after all up to 16 times
  // that size (past it, never seen with the allowed shapes, the closed form answers anyway).
  const double n = static_cast<double>(cta_iters.size()) * std::max(0.0, std::floor(heads));
  if (n <= kTailSimulateCtas) return tail_factor_simulated(cta_iters, heads, slots);
  double hi = 0, sum = 0;
  for (double d : cta_iters) {
    hi = std::max(hi, d);
    sum += d;
  }
  const double ideal = sum * std::floor(heads) / std::max(1.0, std::floor(slots));
  if (ideal > 0 && hi / ideal > 0.01 && n <= 16 * kTailSimulateCtas) return tail_factor_simulated(cta_iters, heads, slots);
  return tail_factor_closed(cta_iters, heads, slots);
}

namespace {

// The profile key of an attention kernel instance from a family's key templates (mode -> "..{rounds}..
// {threshold_bits}..", plus "causal_suffix"): the mma.sync kernel's (Profile::attn_sass_key) and the wgmma
// kernel's (WgmmaProfile::sass_key) are read the same way.
std::string attention_instance_key(const std::map<std::string, std::string>& templates, const Workload& w,
                                   const std::string& mode, bool causal) {
  auto km = templates.find(mode);
  if (km == templates.end() || mode == "causal_suffix")
    throw UsageError(fmt::format("model: attention mode '{}' (allowed: none, mask, fused, fused-composed)", mode));
  std::string key = replace_all(km->second, "{rounds}", std::to_string(w.rounds));
  key = replace_all(key, "{threshold_bits}", std::to_string(w.threshold_bits));
  if (causal) key += templates.at("causal_suffix");
  return key;
}

std::string attn_key(const Profile& p, const Workload& w, const std::string& base_mode, bool causal) {
  return attention_instance_key(p.attn_sass_key, w, base_mode, causal);
}

// Static demand of attention kernel `k` (mode none / mask / fused) over workload w, window win.
Demand attention_static(const Profile& p, const SassKernel& k, const Workload& w, const std::string& base_mode,
                        Window win, const AttnWork& a) {
  Demand d = scaled(k.per_iteration, a.iterations);
  if (k.imad_wide_per_iteration > 0) d[kImadWide] = k.imad_wide_per_iteration * a.iterations;
  add_to(d, k.edge_extra, a.edge_iterations);
  add_to(d, k.rescale_extra, a.rescale_iterations);
  // Bytes.
  const int64_t rows = std::min<int64_t>(win.rows < 0 ? w.sq : win.rows, w.sq - win.row_begin);
  const double B = static_cast<double>(w.batch), dh = static_cast<double>(w.head_dim);
  const double q_bytes = B * rows * w.q_heads * dh * 2, kv_bytes = B * static_cast<double>(w.sq) * 2 * w.kv_heads * dh * 2;
  const double o_bytes = B * rows * w.q_heads * dh * 2, lse_bytes = B * rows * w.q_heads * 4.0;
  double hbm = q_bytes + kv_bytes + o_bytes + lse_bytes;
  // K and V blocks streamed into every CTA's shared memory (from L2) for every key block it visits.
  const double kv_block_bytes = static_cast<double>(p.attn_block_keys) * dh * 2 * 2;
  double l2 = q_bytes + o_bytes + lse_bytes + a.iterations / p.attn_warps * kv_block_bytes;
  if (base_mode == "mask") {
    const double mask = window_tiles(w, win) * kTileBytes * B * w.q_heads;  // one 32-bit word per lane per tile
    hbm += mask;
    l2 += mask;
  }
  d["hbm_bytes"] += hbm;
  d["l2_bytes"] += l2;
  return d;
}

}  // namespace

Demand attention_demand(const Profile& p, const Workload& w, const std::string& mode, Window win, AttnWork* work,
                        std::string* source) {
  const AttnWork a = attention_work(p, w, win);
  if (work) *work = a;
  const std::string base_mode = mode == "fused-composed" ? "mask" : mode;
  const std::string key = attn_key(p, w, base_mode, w.causal);
  const SassKernel& k = sass_entry(p, key, "attention mode " + base_mode);
  Demand d = attention_static(p, k, w, base_mode, win, a);
  std::string src = "sass";
  // Measured counts: the kernel's own, else (causal) its non-causal twin's, carried through this kernel's
  // static structure.
  const SassKernel* mk = nullptr;
  if (p.use_ncu) {
    if (k.ncu) {
      mk = &k;
      src = "ncu";
    } else if (w.causal) {
      auto it = p.sass.find(attn_key(p, w, base_mode, false));
      if (it != p.sass.end() && it->second.ncu) {
        mk = &it->second;
        src = "ncu(nc)";
      }
    }
  }
  if (mk) {
    Workload wp = mk->ncu->w;
    wp.rounds = w.rounds;  // the measured kernel is this mode's at w's R / TW (the key says so)
    wp.threshold_bits = w.threshold_bits;
    wp.head_dim = w.head_dim;
    const AttnWork ap = attention_work(p, wp, {});
    // Static counts at the measured workload, of the measured kernel (its causality is the measured one's).
    // For a twin, its factors (measured / static) scale this kernel's static demand.
    const Demand st_p = attention_static(p, *mk, wp, base_mode, {}, ap);
    d = ncu_carried(d, st_p, *mk->ncu, ap.iterations > 0 ? a.iterations / ap.iterations : 0);
  } else {
    d.erase(kImadWide);
  }
  if (mode == "fused-composed") {
    // The paper's composition: the mask-mode kernel plus the RNG kernel's instruction demand on the units
    // they share, without the mask traffic (no mask is written or read).
    std::string rsrc;
    Demand r = rng_demand(p, w, "tile", win, &rsrc);
    r.erase("hbm_bytes");
    r.erase("l2_bytes");
    add_to(d, r);
    const double mask = window_tiles(w, win) * kTileBytes * static_cast<double>(w.batch) * w.q_heads;
    d["hbm_bytes"] = std::max(0.0, d["hbm_bytes"] - mask);
    d["l2_bytes"] = std::max(0.0, d["l2_bytes"] - mask);
    if (rsrc != src) src += "+" + rsrc;
  }
  if (source) *source = src;
  return d;
}

Options options_for(const Options& o, const Profile& p, const std::string& source) {
  if (source.rfind("ncu", 0) != 0 || p.ncu_efficiency.empty()) return o;
  Options r = o;
  r.efficiency = p.ncu_efficiency;
  return r;
}


// ---------------------------------------------------------------------------------------------------------
// Kernel times as the model composes them (attention family, tails, the wgmma kernel, the power term).
// ---------------------------------------------------------------------------------------------------------
std::string attention_family(const Profile& p, const Workload& w) {
  const std::string k = w.attention_kernel == "auto" || w.attention_kernel.empty() ? p.attn_auto : w.attention_kernel;
  if (k == "wgmma" && !p.wgmma)
    throw UsageError(fmt::format("profile {}: kernels.attention_wgmma is missing (attention_kernel wgmma)", p.path));
  if (k != "mma" && k != "wgmma")
    throw UsageError(fmt::format("model: attention_kernel '{}' (allowed: auto, mma, wgmma)", k));
  return k;
}

const KernelPower* kernel_power(const Machine& m, const Profile& p, const std::string& key) {
  for (const std::map<std::string, KernelPower>* src : {&m.power, &p.power}) {
    const auto it = src->find(key);
    if (it != src->end()) return &it->second;
  }
  return nullptr;
}

bool power_term_on(const Machine& m, const Profile& p) {
  return p.use_power && m.has_power() && (!m.power.empty() || !p.power.empty());
}

void apply_power(const Machine& m, const Profile& p, KernelTime& t, const Options& o) {
  t.seconds_no_power = t.seconds;
  if (!p.use_power || !m.has_power() || t.key.empty() || o.clock_mhz > 0) return;
  const KernelPower* kp = kernel_power(m, p, t.key);
  if (!kp) return;
  t.energy_j = t.work * kp->dyn_j_per_work;
  t.power_bound_s = t.energy_j / (m.cap_w - m.static_w);
  t.units.push_back({"power", t.power_bound_s});
  if (t.power_bound_s > t.seconds) {
    t.seconds = t.power_bound_s;
    t.limiter = "power";
  }
}

namespace {

struct Piece {
  Demand d;
  KernelTime t;
  double clock_mhz = 0;
  Options o;  // the options it is timed with (options_for its demand source)
  double scale = 1;  // t.seconds / the unit model's time of d (an RNG time carried from its ncu launch: rng_piece)
};

std::string wgmma_key(const WgmmaProfile& g, const Workload& w, const std::string& mode, bool causal) {
  return attention_instance_key(g.sass_key, w, mode, causal);
}

// Key blocks the wgmma kernel's CTAs visit, in launch order (the kernel's own tile order,
// kernels/attention/tile_order.hpp: causal grids launch the heaviest query block first).
AttnWork wgmma_work(const WgmmaProfile& g, const Workload& w, Window win) {
  if (w.head_dim != g.head_dim)
    throw UsageError(fmt::format("profile: the wgmma attention kernel is profiled for head_dim {} only (workload has {})",
                                 g.head_dim, w.head_dim));
  const int64_t BR = g.block_rows, BC = g.block_keys;
  const int64_t rows = std::min<int64_t>(win.rows < 0 ? w.sq : win.rows, w.sq - win.row_begin);
  const int64_t nq = ceil_div(rows, BR);
  AttnWork a;
  for (int64_t x = 0; x < nq; ++x) {
    const int64_t qb = attn::query_block_in_order(nq, x, w.causal);
    const int64_t q0 = win.row_begin + qb * BR;
    const int64_t nk = attn::key_blocks_visited(static_cast<int64_t>(w.sq), q0, BR, BC, w.causal);
    a.cta_iterations.push_back(static_cast<double>(nk));
    a.iterations += static_cast<double>(nk);
  }
  const double bh = static_cast<double>(w.batch) * w.q_heads;
  a.iterations *= bh;
  a.ctas = static_cast<double>(nq) * bh;
  return a;
}

// Static demand of the wgmma kernel: the wgmma FLOPs of S = QK^T and O += PV for every visited block, and the
// bytes (Q, K, V read, O and LSE written; K/V blocks streamed per CTA per visited block through L2; mode mask
// reads one 32-bit word per lane per 16x64 tile).
Demand wgmma_static(const WgmmaProfile& g, const Workload& w, const std::string& mode, Window win, const AttnWork& a) {
  Demand d;
  const double BR = g.block_rows, BC = g.block_keys, dh = static_cast<double>(w.head_dim);
  d["wgmma_bf16_flops"] = a.iterations * BR * BC * dh * 4;
  const int64_t rows = std::min<int64_t>(win.rows < 0 ? w.sq : win.rows, w.sq - win.row_begin);
  const double B = static_cast<double>(w.batch);
  const double q_bytes = B * rows * w.q_heads * dh * 2, kv_bytes = B * static_cast<double>(w.sq) * 2 * w.kv_heads * dh * 2;
  const double o_bytes = q_bytes, lse_bytes = B * rows * w.q_heads * 4.0;
  double hbm = q_bytes + kv_bytes + o_bytes + lse_bytes;
  double l2 = q_bytes + o_bytes + lse_bytes + a.iterations * BC * dh * 2 * 2;
  if (mode == "mask") {
    const double mask = window_tiles(w, win) * kTileBytes * B * w.q_heads;
    hbm += mask;
    l2 += mask;
  }
  d["hbm_bytes"] = hbm;
  d["l2_bytes"] = l2;
  return d;
}

// A wgmma kernel's measured demand at w: the ncu block of `key` carried by visited blocks through the kernel's
// static structure (work: its visited blocks at a workload; statik: its static demand there, `measured` for the
// measured launch's workload), that launch taken at w's R, TW and head_dim (the key names the instance). nullopt
// when the key has no ncu block.
template <class Work, class Static>
std::optional<Demand> wgmma_carried(const Profile& p, const std::string& key, const Workload& w, const AttnWork& a,
                                    const Work& work, const Static& statik) {
  auto it = p.sass.find(key);
  if (it == p.sass.end() || !it->second.ncu) return std::nullopt;
  const NcuDemand& n = *it->second.ncu;
  Workload wp = n.w;
  wp.rounds = w.rounds;
  wp.threshold_bits = w.threshold_bits;
  wp.head_dim = w.head_dim;
  const AttnWork ap = work(wp);
  return ncu_carried(statik(w, a, false), statik(wp, ap, true), n, ap.iterations > 0 ? a.iterations / ap.iterations : 0);
}

// The wgmma kernel's demand at w: its measured counts (ncu block of its key) carried by visited key blocks.
Demand wgmma_demand(const Profile& p, const Workload& w, const std::string& mode, Window win, AttnWork* work,
                    std::string* source, std::string* key_out) {
  const WgmmaProfile& g = *p.wgmma;
  const AttnWork a = wgmma_work(g, w, win);
  if (work) *work = a;
  const std::string key = wgmma_key(g, w, mode, w.causal);
  if (key_out) *key_out = key;
  // The measured workload is whole (no window); w keeps its window.
  const std::optional<Demand> d = wgmma_carried(
      p, key, w, a, [&](const Workload& x) { return wgmma_work(g, x, {}); },
      [&](const Workload& x, const AttnWork& xa, bool measured) {
        return wgmma_static(g, x, mode, measured ? Window{} : win, xa);
      });
  if (!d)
    throw UsageError(fmt::format("profile {}: sass.{} has no ncu block (the wgmma attention kernel has measured "
                                 "demand only: `dropbench profile`)",
                                 p.path, key));
  if (source) *source = "ncu";
  return *d;
}

// ---- the wgmma attention backward (kernels/attention/bwd/wgmma/, profile kernels.attention_bwd_wgmma) ----

// Its visited (block_rows-query x block_keys-key) blocks: CTA (subgroup, key block kb, KV head, batch) walks the
// subgroup's query heads (tile_order.hpp, bwd_subgroups: a causal group split into subgroups of at most 4 heads) and, per
// head, the query blocks from the first that reaches key kb x block_keys (causal) or 0. Launch order
// (bwd_cta_sectioned, bwd_section_units for `slots` resident CTAs): the (subgroup, batch, KV head) units in equal
// sections, each section's key blocks heaviest first with its units' CTAs of a block together; cta_iterations lists
// one section's CTAs in that order, repeated units / section times by the tail model (tail_reps), which is the launch
// order itself. Past kTailSimulateCtas entries it lists one entry per key block (tail_reps = units), the closed form's
// input.
// The subgroups of w's group the kernel launches (the kernel's rule, tile_order.hpp: bwd_subgroups, for the grid of
// block_keys-key blocks).
int64_t wgmma_bwd_subgroups(const WgmmaProfile& g, const Workload& w) {
  return attn::bwd_subgroups(static_cast<int>(w.q_heads / std::max<int64_t>(1, w.kv_heads)),
                             static_cast<int>(ceil_div(w.sq, static_cast<int64_t>(g.block_keys))), w.causal);
}

}  // namespace

AttnWork wgmma_bwd_work(const WgmmaProfile& g, const Workload& w, double slots, double* tail_reps) {
  const int64_t BQ = g.block_rows, BK = g.block_keys, group = w.q_heads / std::max<int64_t>(1, w.kv_heads);
  const int64_t nqb = ceil_div(w.sq, BQ), nkb = ceil_div(w.sq, BK);
  const int64_t subgroups = wgmma_bwd_subgroups(g, w);
  const int64_t units = subgroups * w.batch * w.kv_heads;
  const int64_t section = attn::bwd_section_units<int64_t>(units, nkb, std::max<int64_t>(1, static_cast<int64_t>(slots)));
  const bool expand = static_cast<double>(nkb * section) <= kTailSimulateCtas;
  AttnWork a;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const double n_it = static_cast<double>(group / subgroups * (nqb - attn::first_query_block(kb * BK, BQ, w.causal)));
    a.iterations += n_it * static_cast<double>(units);
    a.cta_iterations.insert(a.cta_iterations.end(), expand ? static_cast<size_t>(section) : 1, n_it);
  }
  a.ctas = static_cast<double>(nkb * units);
  if (tail_reps) *tail_reps = static_cast<double>(expand ? units / section : units);
  return a;
}

namespace {

// Its static demand: wgmma FLOPs of the five products per visited block (2.5 x the forward's 4 x BQ x BK x dH);
// HBM: Q, dO, K, V, LSE, D read, dK, dV written, the fp32 dQ accumulator read and written back; L2: K, V once per
// CTA, Q, dO, LSE, D per visited block, the dQ reduce-add (BQ x dH fp32) per visited block, dK, dV; mode mask:
// the block's keep words (4 strips x 2 tiles x 32 words) per visited block. A split group (subgroups > 1) writes
// dK, dV as fp32 partials per subgroup instead (the sum pass, counted in wgmma_bwd_aux_bytes, reads them).
Demand wgmma_bwd_static(const WgmmaProfile& g, const Workload& w, const std::string& mode, const AttnWork& a) {
  const double BQ = g.block_rows, BK = g.block_keys, dh = static_cast<double>(w.head_dim);
  const double B = static_cast<double>(w.batch), sq = static_cast<double>(w.sq);
  const double sq_pad = static_cast<double>(ceil_div(w.sq, static_cast<int64_t>(BQ))) * BQ;
  const double q_bytes = B * sq * w.q_heads * dh * 2, kv_bytes = B * sq * w.kv_heads * dh * 2;
  const double rows_f32 = B * w.q_heads * sq_pad * 4, dq_acc = B * sq * w.q_heads * dh * 4;
  const double subgroups = static_cast<double>(wgmma_bwd_subgroups(g, w));
  const double dkv_out = subgroups > 1 ? 2 * subgroups * kv_bytes * 2 : 2 * kv_bytes;  // fp32 partials or bf16
  Demand d;
  d["wgmma_bf16_flops"] = a.iterations * kAttentionBwdFlopRatio * 4 * BQ * BK * dh;
  double hbm = 2 * q_bytes + 2 * kv_bytes + dkv_out + 2 * rows_f32 + 2 * dq_acc;
  double l2 = 2 * subgroups * kv_bytes + dkv_out + a.iterations * (2 * BQ * dh * 2 + 2 * BQ * 4 + BQ * dh * 4);
  if (mode == "mask") {
    const double words = a.iterations * (BQ / kTileRows) * (BK / kTileCols) * kTileBytes;
    hbm += words;
    l2 += words;
  }
  d["hbm_bytes"] = hbm;
  d["l2_bytes"] = l2;
  return d;
}

// The ncu block the backward in `mode` (mask / fused) is timed from at w, or nullptr (then its demand is derived):
// the profile has kernels.attention_bwd_wgmma, measured demand is on, w's attention kernel (whose backward runs
// beside it) is the wgmma one at the profiled head_dim, and the key has an ncu block.
const NcuDemand* wgmma_bwd_measured(const Profile& p, const Workload& w, const std::string& mode) {
  if (!p.wgmma_bwd || !p.use_ncu || attention_family(p, w) != "wgmma" || w.head_dim != p.wgmma_bwd->head_dim)
    return nullptr;
  auto it = p.sass.find(wgmma_key(*p.wgmma_bwd, w, mode, w.causal));
  return it == p.sass.end() || !it->second.ncu ? nullptr : &*it->second.ncu;
}

// Visited score elements of an attention launch (the work its energy is counted per).
double attention_elements(const Profile& p, const std::string& family, const AttnWork& a) {
  if (family == "wgmma") return a.iterations * p.wgmma->block_rows * p.wgmma->block_keys;
  return a.iterations * p.attn_rows_per_warp * p.attn_block_keys;
}

// A kernel whose demand is derived from an attention kernel's (the training step's backward, the fused forward
// that also writes its keep words): `adjust` changes the demand before it is timed with that kernel's
// efficiencies, tail and CTA overhead; the energy counts work_scale x its visited elements at its power data.
struct AttnDerive {
  std::function<void(Demand&)> adjust;
  double work_scale = 1;
  std::string name;  // the KernelTime's name; "" = attention(<mode>)
};

// A fixed cost beside a kernel's unit times (waves of CTAs or tiles, launches around it): added to its time and to
// every unit's, and counted in fixed_s.
void add_fixed(KernelTime& t, double s) {
  t.seconds += s;
  t.fixed_s += s;
  for (UnitTime& u : t.units) u.seconds += s;
}

// Times a wgmma kernel's demand pc.d (src: where it comes from) with the kernel's own issue / mma efficiencies, the
// tail of its grid (a.cta_iterations repeated `reps` times, launch order) and its CTA overhead per wave.
void time_wgmma(const Machine& m, const Profile& p, const WgmmaProfile& g, const AttnWork& a, double reps,
                const std::string& src, const Options& o, const std::string& name, Piece& pc) {
  pc.clock_mhz = kernel_clock(m, g.clock, o);
  pc.o = options_for(o, p, src);
  pc.o.efficiency["issue"] = g.issue_efficiency;
  pc.o.efficiency["mma"] = g.mma_efficiency;
  const double slots = m.sm_count * g.ctas_per_sm;
  const double tail = tail_factor(a.cta_iterations, reps, slots);
  pc.t = kernel_time(m, name, pc.d, pc.clock_mhz, pc.o, 1.0, tail);
  const double unit_s = pc.t.seconds / tail;
  // The CTA prologue / pipeline fill / epilogue, once per wave of CTAs (uncalibrated: left out).
  add_fixed(pc.t, o.calibrated ? a.ctas / slots * g.cta_overhead_cycles / (pc.clock_mhz * 1e6) : 0.0);
  // The tail and the CTA overhead carried as a scale of the unit model's time (an overlap times the demand again).
  if (unit_s > 0) pc.scale = pc.t.seconds / unit_s;
}

Piece attention_piece(const Machine& m, const Profile& p, const Workload& w, const std::string& mode, Window win,
                      const Options& o, const AttnDerive& derive = {}) {
  const std::string fam = attention_family(p, w);
  const std::string tname = derive.name.empty() ? "attention(" + mode + ")" : derive.name;
  Piece pc;
  AttnWork a;
  std::string src, key;
  if (fam == "wgmma") {
    const WgmmaProfile& g = *p.wgmma;
    std::string rsrc;
    if (mode == "fused-composed") {
      // The paper's composition on this kernel: mask mode plus the RNG tile kernel's instructions.
      pc.d = wgmma_demand(p, w, "mask", win, &a, &src, nullptr);
      Demand r = rng_demand(p, w, "tile", win, &rsrc);
      r.erase("hbm_bytes");
      r.erase("l2_bytes");
      add_to(pc.d, r);
      const double mask = window_tiles(w, win) * kTileBytes * static_cast<double>(w.batch) * w.q_heads;
      pc.d["hbm_bytes"] = std::max(0.0, pc.d["hbm_bytes"] - mask);
      pc.d["l2_bytes"] = std::max(0.0, pc.d["l2_bytes"] - mask);
      if (rsrc != src) src += "+" + rsrc;
    } else {
      pc.d = wgmma_demand(p, w, mode, win, &a, &src, &key);
    }
    if (derive.adjust) derive.adjust(pc.d);
    time_wgmma(m, p, g, a, static_cast<double>(w.batch) * w.q_heads, src, o, tname, pc);
  } else {
    pc.d = attention_demand(p, w, mode, win, &a, &src);
    if (mode != "fused-composed") key = attn_key(p, w, mode, w.causal);
    if (derive.adjust) derive.adjust(pc.d);
    pc.clock_mhz = kernel_clock(m, p.attn_clock, o);
    pc.o = options_for(o, p, src);
    pc.t = kernel_time(m, tname, pc.d, pc.clock_mhz, pc.o, 1.0,
                       tail_factor(a.cta_iterations, static_cast<double>(w.batch) * w.q_heads,
                                   m.sm_count * p.attn_ctas_per_sm));
  }
  pc.t.source = src;
  pc.t.key = key;
  pc.t.work = attention_elements(p, fam, a) * derive.work_scale;
  apply_power(m, p, pc.t, o);
  return pc;
}

// The wgmma backward kernel in `mode` (mask / fused) from its measured demand (wgmma_bwd_measured holds): timed with
// its own efficiencies, tail and CTA overhead; key and work (visited score elements) set, the power term not applied
// (wgmma_bwd_power: on the kernel alone, or on the whole call with its launches around it).
Piece wgmma_bwd_kernel_piece(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                             const Options& o, const std::string& name) {
  const WgmmaProfile& g = *p.wgmma_bwd;
  double reps = 1;
  const double slots = m.sm_count * g.ctas_per_sm;
  const AttnWork a = wgmma_bwd_work(g, w, slots, &reps);
  const std::string key = wgmma_key(g, w, mode, w.causal);
  Piece pc;
  pc.d = wgmma_carried(
             p, key, w, a, [&](const Workload& x) { return wgmma_bwd_work(g, x, slots, nullptr); },
             [&](const Workload& x, const AttnWork& xa, bool) { return wgmma_bwd_static(g, x, mode, xa); })
             .value();
  time_wgmma(m, p, g, a, reps, "ncu", o, name, pc);
  pc.t.source = "ncu(bwd)";
  pc.t.key = key;
  pc.t.work = a.iterations * g.block_rows * g.block_keys;
  return pc;
}

// The power term on a backward piece t (its key and work as wgmma_bwd_kernel_piece sets them): its key's power where
// the machine or profile has it, else the forward none kernel's per visited element x 2.5, as the derived
// backward's; key and work are set back after.
void wgmma_bwd_power(const Machine& m, const Profile& p, const Workload& w, const Options& o, KernelTime& t) {
  const std::string key = t.key;
  const double elements = t.work;
  const bool own_power = kernel_power(m, p, key) != nullptr;
  t.key = own_power || !p.wgmma ? key : wgmma_key(*p.wgmma, w, "none", w.causal);
  t.work = own_power ? elements : elements * kAttentionBwdFlopRatio;
  apply_power(m, p, t, o);
  t.key = key;
  t.work = elements;
}

}  // namespace

double rng_strips(const Workload& w, Window win) {
  const int64_t rows = win.rows < 0 ? w.sq : win.rows;
  const int64_t r16 =
      ceil_div(std::min<int64_t>(win.row_begin + rows, w.sq), int64_t{kTileRows}) - win.row_begin / kTileRows;
  return static_cast<double>(w.batch) * w.q_heads * static_cast<double>(std::max<int64_t>(0, r16));
}

namespace {

double rng_elements(const Workload& w, const std::string& layout, Window win) {
  const double bh = static_cast<double>(w.batch) * w.q_heads;
  if (layout == "tile") return window_tiles(w, win) * kTileElems * bh;
  return bh * static_cast<double>(w.sq) * static_cast<double>(w.sq);
}

Piece rng_piece(const Machine& m, const Profile& p, const Workload& w, const std::string& layout, Window win,
                const Options& o) {
  Piece pc;
  std::string src;
  pc.d = rng_demand(p, w, layout, win, &src);
  pc.clock_mhz = kernel_clock(m, p.rng_clock, o);
  pc.o = options_for(o, p, src);
  if (src.rfind("ncu", 0) == 0)
    for (const auto& [u, e] : p.rng_efficiency) pc.o.efficiency[u] = e;
  pc.t = kernel_time(m, win.rows < 0 ? "rng" : "rng(chunk)", pc.d, pc.clock_mhz, pc.o);
  // With a per-strip cost fitted (kernels.rng.strip_overhead_cycles) the tile kernel's time is carried from its
  // own ncu launch: that launch's duration less its strips' cost is its time per generated tile (carried by
  // tiles and clock), and every strip adds the fixed cost, spread over the SMs. The unit times are scaled alike,
  // so the limiter is the unit model's. Uncalibrated (the rates as sourced): the unit model alone.
  const SassKernel& k = sass_entry(p, rng_key(p, w, layout), "RNG mask kernel, layout " + layout);
  if (layout == "tile" && o.calibrated && p.rng_strip_cycles > 0 && src.rfind("ncu", 0) == 0 && k.ncu &&
      k.ncu->duration_s > 0 && k.ncu->clock_mhz > 0 && pc.t.seconds > 0) {
    const double fp = k.ncu->clock_mhz * 1e6, f = pc.clock_mhz * 1e6;
    const double body_p = k.ncu->duration_s - rng_strips(k.ncu->w) * p.rng_strip_cycles / (m.sm_count * fp);
    const double body = body_p * (fp / f) * rng_elements(w, layout, win) / rng_elements(k.ncu->w, layout, {});
    const double extra = rng_strips(w, win) * p.rng_strip_cycles / (m.sm_count * f);
    const double scale = body / pc.t.seconds;
    pc.scale = (body + extra) / pc.t.seconds;
    pc.t.seconds = body + extra;
    pc.t.fixed_s = extra;
    for (UnitTime& u : pc.t.units) u.seconds = u.seconds * scale + extra;
  }
  pc.t.source = src;
  pc.t.key = rng_key(p, w, layout);
  pc.t.work = rng_elements(w, layout, win);
  apply_power(m, p, pc.t, o);
  return pc;
}

// A GEMM's output tiles on the machine (GemmTileModel): tiles of the profile's tile_m x tile_n, run in waves of
// slots = SMs x blocks_per_sm; the last wave's idle SMs make the unit times tail = waves x slots / tiles longer.
struct GemmWaves {
  double tiles, slots, waves;
  double tail() const { return waves * slots / tiles; }
};
GemmWaves gemm_waves(const Machine& m, const GemmProfile& g, const GemmMnk& s) {
  const double tiles = std::ceil(s.m / g.tile_m) * std::ceil(s.n / g.tile_n);
  const double slots = m.sm_count * std::max(1.0, g.blocks_per_sm);
  return {tiles, slots, std::ceil(tiles / slots)};
}

Piece gemm_piece(const Machine& m, const Profile& p, const Workload& w, const Options& o,
                 const std::optional<GemmMnk>& shape = std::nullopt, const std::string& name = "gemm") {
  auto gp = p.gemm.find(w.dtype);
  if (gp == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, w.dtype));
  const GemmProfile& g = gp->second;
  const GemmMnk s = shape ? *shape : gemm_mnk(w);
  Piece pc;
  std::string src;
  pc.d = gemm_demand_at(p, w, s, &src);
  pc.clock_mhz = kernel_clock(m, g.clock, o);
  pc.o = options_for(o, p, src);
  pc.t = kernel_time(m, name, pc.d, pc.clock_mhz, pc.o);
  // Calibrated with the tile model: the tensor pipe at the GEMM's own efficiency, the last wave's tail, and each
  // wave's fixed cost. Uncalibrated (the rates as sourced): the unit model alone. The tiled time is carried as a
  // scale of the unit model's at pc.o (as rng_piece's), so that the overlap's co-resident and SM-partition timings,
  // which time the demand again, keep it.
  const auto tm = m.gemm_tiles.find(w.dtype);
  if (o.calibrated && o.gemm_tile_model && tm != m.gemm_tiles.end()) {
    const GemmWaves gw = gemm_waves(m, g, s);
    Options ot = pc.o;
    ot.efficiency["mma"] = tm->second.mma_efficiency;
    const double unit_s = pc.t.seconds;
    pc.t = kernel_time(m, name, pc.d, pc.clock_mhz, ot, 1.0, gw.tail());
    add_fixed(pc.t, gw.waves * tm->second.tile_overhead_cycles / (pc.clock_mhz * 1e6));
    if (unit_s > 0) pc.scale = pc.t.seconds / unit_s;
  }
  pc.t.source = src;
  pc.t.key = "gemm_" + w.dtype;
  pc.t.work = s.flops();
  apply_power(m, p, pc.t, o);
  return pc;
}

}  // namespace

KernelTime attention_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode, Window win,
                          const Options& o) {
  return attention_piece(m, p, w, mode, win, o).t;
}
KernelTime attention_bwd_kernel_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                                     const Options& o) {
  if (!p.wgmma_bwd) throw UsageError(fmt::format("profile {}: kernels.attention_bwd_wgmma is missing", p.path));
  const std::string key = wgmma_key(*p.wgmma_bwd, w, mode, w.causal);
  auto it = p.sass.find(key);
  if (it == p.sass.end() || !it->second.ncu)
    throw UsageError(fmt::format("profile {}: sass.{} has no ncu block (`dropbench profile --kernels attention_bwd`)",
                                 p.path, key));
  KernelTime t = wgmma_bwd_kernel_piece(m, p, w, mode, o, "attention-bwd(" + mode + ")").t;
  wgmma_bwd_power(m, p, w, o, t);
  return t;
}
KernelTime rng_time(const Machine& m, const Profile& p, const Workload& w, const std::string& layout, Window win,
                    const Options& o) {
  return rng_piece(m, p, w, layout, win, o).t;
}
KernelTime gemm_time(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  return gemm_piece(m, p, w, o).t;
}

namespace {

struct FitPt {
  std::string key;
  std::map<std::string, double> unit;  // unit time (cycles) at efficiency 1 (times the tail)
  double waves = 0, y = 0;             // CTA waves (wgmma), measured cycles
};

double fit_model(const FitPt& q, const std::map<std::string, double>& e, double overhead) {
  double t = 0;
  for (const auto& [u, eff] : e)
    if (auto it = q.unit.find(u); it != q.unit.end()) t = std::max(t, it->second / eff);
  return t + q.waves * overhead;
}

void fit_errors(FamilyFit& f, const std::vector<FitPt>& pts) {
  f.points = pts.size();
  f.mean_abs_err = f.max_abs_err = 0;
  f.errors.clear();
  for (const FitPt& q : pts) {
    // The family's per-CTA cost only: the RNG efficiencies are fitted on whole ncu durations (strips included),
    // so adding the per-strip cost here would count it twice.
    const double e = (fit_model(q, f.efficiency, f.cta_overhead_cycles) - q.y) / q.y;
    f.errors.emplace_back(q.key, e);
    f.mean_abs_err += std::fabs(e) / static_cast<double>(pts.size());
    f.max_abs_err = std::max(f.max_abs_err, std::fabs(e));
  }
}

// A fit of unit efficiencies over a grid (least mean |relative error| of fit_model's form): each candidate e (one
// efficiency per unit, in `units`' order) with, where fit_overhead, the fixed cost per wave by least squares on the
// relative errors at that candidate; the best candidate so far is kept in the FamilyFit.
class EfficiencyGrid {
 public:
  EfficiencyGrid(const std::vector<FitPt>& pts, std::vector<std::string> units, bool fit_overhead)
      : pts_(pts), units_(std::move(units)), fit_overhead_(fit_overhead), ut_(pts.size()) {
    for (const FitPt& q : pts) sxx_ += q.waves * q.waves / (q.y * q.y);
    // Flat copies for the grid's inner loop (units in a fixed order).
    for (size_t i = 0; i < pts.size(); ++i)
      for (const std::string& u : units_) ut_[i].push_back(pts[i].unit.count(u) ? pts[i].unit.at(u) : 0.0);
  }
  void consider(const std::vector<double>& e, FamilyFit& best) const {
    std::vector<double> base(pts_.size());
    double sxy = 0;
    for (size_t i = 0; i < pts_.size(); ++i) {
      double t = 0;
      for (size_t k = 0; k < e.size(); ++k) t = std::max(t, ut_[i][k] / e[k]);
      base[i] = t;
      sxy += pts_[i].waves * (pts_[i].y - t) / (pts_[i].y * pts_[i].y);
    }
    const double overhead = fit_overhead_ && sxx_ > 0 ? std::max(0.0, sxy / sxx_) : 0.0;
    double mean = 0;
    for (size_t i = 0; i < pts_.size(); ++i)
      mean += std::fabs((base[i] + pts_[i].waves * overhead - pts_[i].y) / pts_[i].y);
    mean /= static_cast<double>(pts_.size());
    if (mean < best.mean_abs_err) {
      best.mean_abs_err = mean;
      best.efficiency.clear();
      for (size_t k = 0; k < e.size(); ++k) best.efficiency[units_[k]] = e[k];
      best.cta_overhead_cycles = overhead;
    }
  }

 private:
  const std::vector<FitPt>& pts_;
  std::vector<std::string> units_;
  bool fit_overhead_;
  std::vector<std::vector<double>> ut_;
  double sxx_ = 0;
};

}  // namespace

namespace {

// The RNG tile kernel's per-strip cost on report points, with its time carried from each kernel's ncu launch
// (rng_piece): T(w) = A + c B, A = d_p x (f_p / f) x (elements_w / elements_p), B = strips_w / (SMs f) -
// strips_p / (SMs f_p) x (f_p / f) x (elements_w / elements_p); c by least squares on the relative errors.
void fit_rng_strips(const Machine& m, const Profile& p, const std::vector<KernelPoint>& extra, FamilyFit& f) {
  struct Pt {
    std::string key;
    double a, b, y;
  };
  std::vector<Pt> pts;
  for (const KernelPoint& k : extra) {
    if (!(k.seconds > 0) || !(k.clock_mhz > 0))
      throw UsageError(fmt::format("--fit-kernels: report point {} has no time or clock", k.key));
    const std::string key = rng_key(p, k.w, "tile");
    const SassKernel& e = sass_entry(p, key, "RNG tile kernel of a report point");
    if (!e.ncu || !(e.ncu->duration_s > 0) || !(e.ncu->clock_mhz > 0))
      throw UsageError(fmt::format("profile {}: sass.{} has no ncu duration and clock (the per-strip fit carries it)",
                                   p.path, key));
    const NcuDemand& n = *e.ncu;
    const double fp = n.clock_mhz * 1e6, fw = k.clock_mhz * 1e6;
    const double carry = (fp / fw) * rng_elements(k.w, "tile", {}) / rng_elements(n.w, "tile", {});
    pts.push_back({k.key, n.duration_s * carry,
                   rng_strips(k.w) / (m.sm_count * fw) - rng_strips(n.w) / (m.sm_count * fp) * carry, k.seconds});
  }
  double sxy = 0, sxx = 0;
  for (const Pt& q : pts) sxy += q.b * (q.y - q.a) / (q.y * q.y), sxx += q.b * q.b / (q.y * q.y);
  double c = sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
  // No more than the ncu launches' own durations hold (their body time stays positive).
  for (const auto& [key, e] : p.sass)
    if (key.rfind("rng_tile_", 0) == 0 && e.ncu && e.ncu->duration_s > 0 && e.ncu->clock_mhz > 0)
      c = std::min(c, 0.95 * e.ncu->duration_s * m.sm_count * e.ncu->clock_mhz * 1e6 / rng_strips(e.ncu->w));
  f.strip_overhead_cycles = c;
  f.report_points = pts.size();
  f.strip_mean_abs_err = f.strip_max_abs_err = 0;
  for (const Pt& q : pts) {
    const double e = (q.a + c * q.b - q.y) / q.y;
    f.strip_errors.emplace_back(q.key, e);
    f.strip_mean_abs_err += std::fabs(e) / static_cast<double>(pts.size());
    f.strip_max_abs_err = std::max(f.strip_max_abs_err, std::fabs(e));
  }
}

// The GEMM's tile model (GemmTileModel) on standalone report rows of one dtype: per row the tensor pipe's cycles at
// efficiency 1 times the tail, and the waves; e_mma over a grid, the per-wave cost by least squares on the relative
// errors at each e (EfficiencyGrid with one unit).
FamilyFit fit_gemm(const Machine& m, const Profile& p, const std::string& dtype, const std::vector<KernelPoint>& extra) {
  auto gp = p.gemm.find(dtype);
  if (gp == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, dtype));
  Profile pu = p;
  pu.use_ncu = true;
  pu.use_power = false;
  std::vector<FitPt> pts;
  for (const KernelPoint& k : extra) {
    if (!(k.seconds > 0) || !(k.clock_mhz > 0))
      throw UsageError(fmt::format("--fit-kernels: report point {} has no time or clock", k.key));
    if (k.w.dtype != dtype)
      throw UsageError(fmt::format("--fit-kernels: report point {} is {}, not {}", k.key, k.w.dtype, dtype));
    Options o;
    o.calibrated = false;
    o.clock_mhz = k.clock_mhz;
    const double cyc = 1e6 * k.clock_mhz;
    const GemmMnk s = gemm_mnk(k.w);
    const GemmWaves gw = gemm_waves(m, gp->second, s);
    FitPt q;
    q.key = k.key;
    q.y = k.seconds * cyc;
    q.unit["mma"] = gemm_piece(m, pu, k.w, o, s).t.unit_seconds("mma") * cyc * gw.tail();
    q.waves = gw.waves;
    pts.push_back(q);
  }
  if (pts.size() < 2)
    throw UsageError(fmt::format("--fit-kernels: fewer than two {} GEMM rows (machine {}: gemm_tile_model.{}.fit_reports; "
                                 "the fit needs them)",
                                 dtype, m.path, dtype));
  FamilyFit best;
  best.family = "gemm_" + dtype;
  best.fitted_on = "report rows";
  best.mean_abs_err = std::numeric_limits<double>::infinity();
  const EfficiencyGrid grid(pts, {"mma"}, /*fit_overhead=*/true);
  for (int ie = 500; ie <= 1000; ++ie) grid.consider({ie / 1000.0}, best);
  fit_errors(best, pts);
  double t = 0, tc = 0;
  for (const KernelPoint& k : extra) t += k.seconds, tc += k.seconds * k.clock_mhz;
  best.clock_mhz = tc / t;
  return best;
}

// One RNG fit point: the kernel's unit times at efficiency 1 (no fixed costs) at w and the clock, in cycles, and its
// measured cycles.
FitPt rng_fit_point(const Machine& m, const Profile& pu, const std::string& key, Workload w, double seconds,
                    double clock_mhz) {
  Options o;
  o.calibrated = false;
  o.clock_mhz = clock_mhz;
  const double cyc = 1e6 * clock_mhz;
  FitPt q;
  q.key = key;
  q.y = seconds * cyc;
  w.layout = "tile";
  const KernelTime t = rng_time(m, pu, w, "tile", {}, o);
  for (const char* u : {"issue", "alu", "imad"}) q.unit[u] = t.unit_seconds(u) * cyc;
  q.waves = rng_strips(w) / m.sm_count;  // strips per SM: the per-strip overhead's multiplier
  return q;
}

// One wgmma fit point (forward, or backward with bwd): the kernel's unit times at w and the clock, and its measured
// cycles; a whole backward call (the harness's report points, whole_call) less the model's launches around the
// kernel, as attention_bwd_measured_piece composes a step's backward.
FitPt wgmma_fit_point(const Machine& m, const Profile& pu, bool bwd, const std::string& key, Workload w,
                      const std::string& mode, double seconds, double clock_mhz, bool whole_call) {
  Options o;
  o.calibrated = false;  // efficiency 1, no CTA overhead
  o.clock_mhz = clock_mhz;
  const double cyc = 1e6 * clock_mhz;
  w.attention_kernel = "wgmma";
  const WgmmaProfile& g = bwd ? *pu.wgmma_bwd : *pu.wgmma;
  FitPt q;
  q.key = key;
  q.y = (seconds - (whole_call ? attention_bwd_around_seconds(m, pu, w, o) : 0.0)) * cyc;
  const KernelTime t = bwd ? attention_bwd_kernel_time(m, pu, w, mode, o) : attention_time(m, pu, w, mode, {}, o);
  for (const char* u : {"issue", "mma"}) q.unit[u] = t.unit_seconds(u) * cyc;
  const double slots = m.sm_count * g.ctas_per_sm;
  q.waves = (bwd ? wgmma_bwd_work(g, w, slots, nullptr) : wgmma_work(g, w, {})).ctas / slots;
  return q;
}

// The fit points of family rng / wgmma / wgmma_bwd: wgmma_bwd's report points where extra has them, else the
// profile's kernels of the family with a measured ncu duration and clock.
std::vector<FitPt> family_fit_points(const Machine& m, const Profile& pu, const std::string& family,
                                     const std::vector<KernelPoint>& extra) {
  const bool bwd = family == "wgmma_bwd";
  std::vector<FitPt> pts;
  if (bwd && !extra.empty()) {
    for (const KernelPoint& k : extra) {
      if (!(k.seconds > 0) || !(k.clock_mhz > 0))
        throw UsageError(fmt::format("--fit-kernels: report point {} has no time or clock", k.key));
      pts.push_back(wgmma_fit_point(m, pu, bwd, k.key, k.w, k.mode, k.seconds, k.clock_mhz, true));
    }
    return pts;
  }
  for (const auto& [key, k] : pu.sass) {
    if (!k.ncu || !(k.ncu->duration_s > 0) || !(k.ncu->clock_mhz > 0)) continue;
    if (family == "rng") {
      if (key.rfind("rng_tile_", 0) == 0) pts.push_back(rng_fit_point(m, pu, key, k.ncu->w, k.ncu->duration_s, k.ncu->clock_mhz));
      continue;
    }
    const WgmmaProfile& g = bwd ? *pu.wgmma_bwd : *pu.wgmma;
    // The family's keys: its none key's prefix ("wgmma_", "wgmma_bwd_") and then a mode.
    const std::string& none = g.sass_key.at("none");
    const std::string prefix = none.substr(0, none.rfind('_') + 1);
    if (key.rfind(prefix, 0) != 0 || key.find("_rngwarps") != std::string::npos) continue;  // design (b) apart
    const std::string rest = key.substr(prefix.size());
    std::string mode;
    for (const char* md : {"none", "mask", "fused"})
      if (rest.rfind(md, 0) == 0) mode = md;
    if (mode.empty()) continue;  // another family's key ("wgmma_bwd_..." under "wgmma_")
    pts.push_back(wgmma_fit_point(m, pu, bwd, key, k.ncu->w, mode, k.ncu->duration_s, k.ncu->clock_mhz, false));
  }
  return pts;
}

}  // namespace

FamilyFit fit_family(const Machine& m, const Profile& p, const std::string& family,
                     const std::vector<KernelPoint>& extra) {
  if (family == "gemm_fp8" || family == "gemm_bf16") return fit_gemm(m, p, family.substr(5), extra);
  if (family != "rng" && family != "wgmma" && family != "wgmma_bwd")
    throw UsageError(
        fmt::format("--fit-kernels: family '{}' (allowed: rng, wgmma, wgmma_bwd, gemm_fp8, gemm_bf16)", family));
  const bool bwd = family == "wgmma_bwd";
  if (family != "rng" && !(bwd ? p.wgmma_bwd : p.wgmma))
    throw UsageError(fmt::format("profile {}: kernels.{} is missing", p.path, bwd ? "attention_bwd_wgmma" : "attention_wgmma"));
  if (family == "wgmma" && !extra.empty()) throw UsageError("--fit-kernels: report points are for the rng and wgmma_bwd families");
  Profile pu = p;
  pu.use_ncu = true;
  pu.use_power = false;
  const bool on_reports = bwd && !extra.empty();
  const std::vector<FitPt> pts = family_fit_points(m, pu, family, extra);
  if (pts.size() < 3)
    throw UsageError(fmt::format("profile {}: fewer than three {} kernels with a measured ncu duration and clock (the fit "
                                 "needs them: `dropbench profile`)",
                                 p.path, family));
  FamilyFit best;
  best.family = family;
  if (on_reports) best.fitted_on = "report rows";
  best.mean_abs_err = std::numeric_limits<double>::infinity();
  // A wgmma kernel's fixed cost per CTA wave by least squares on the relative errors at each efficiency.
  const EfficiencyGrid grid(
      pts, family == "rng" ? std::vector<std::string>{"issue", "alu", "imad"} : std::vector<std::string>{"issue", "mma"},
      /*fit_overhead=*/family != "rng");
  auto consider = [&](const std::vector<double>& e) { grid.consider(e, best); };
  if (family == "rng") {
    for (int ii = 300; ii <= 1000; ii += 2)
      for (int ia = 500; ia <= 1000; ia += 5)
        for (int im = 500; im <= 1000; im += 10) consider({ii / 1000.0, ia / 1000.0, im / 1000.0});
  } else {
    for (int im = 500; im <= 1000; im += 5)
      for (int ii = 300; ii <= 800; ++ii) consider({ii / 1000.0, im / 1000.0});
  }
  fit_errors(best, pts);
  if (family == "rng" && !extra.empty()) fit_rng_strips(m, p, extra, best);
  return best;
}

// ---------------------------------------------------------------------------------------------------------
// Pipelines.
// ---------------------------------------------------------------------------------------------------------
const PipelineTime* Prediction::pipeline(const std::string& n) const {
  for (const PipelineTime& p : pipelines)
    if (p.name == n) return &p;
  return nullptr;
}

double coresident_warps(const Machine& m, double used_regs, double used_smem, double used_threads, double used_blocks,
                        int rng_regs_per_thread) {
  (void)used_smem;  // the RNG kernels use no shared memory
  const double regs_per_warp = std::ceil(std::max(1, rng_regs_per_thread) * 32.0 / 256.0) * 256.0;
  const double by_regs = std::floor(std::max(0.0, m.registers_per_sm - used_regs) / regs_per_warp);
  const double by_threads = std::floor(std::max(0.0, m.max_threads_per_sm - used_threads) / 32.0);
  const double by_blocks = m.max_blocks_per_sm - used_blocks >= 1 ? by_threads : 0.0;
  return std::max(0.0, std::min({by_regs, by_threads, by_blocks}));
}

int64_t chunk_rows_for(const Workload& w, const Options& o, int block_rows) {
  int64_t c = o.chunk_rows > 0 ? o.chunk_rows : w.chunk;
  if (c <= 0) c = ceil_div(ceil_div(w.sq, 8), block_rows) * block_rows;
  if (c % block_rows != 0)
    throw UsageError(fmt::format("chunk: {} rows is not a multiple of the attention block ({} rows)", c, block_rows));
  return std::min<int64_t>(c, ceil_div(w.sq, block_rows) * block_rows);
}

namespace {

// A (e.g. the GEMM) and B (an RNG kernel) started together. Candidates: one after the other; B co-resident
// on A's SMs with `warps` warps per SM (the sum of their demands on shared units, B's rate capped by its
// warps, the rest of B after A); an SM partition (B on k SMs, A on the others).
Concurrent concurrent(const Machine& m, const Options& o, const Piece& a, const Piece& b, double warps,
                      bool allow_partition) {
  // One after the other: the baseline every concurrent mechanism is measured against.
  const double serial = serial_seconds(m, {a.t.seconds, b.t.seconds});
  const std::string serial_limiter = a.t.seconds >= b.t.seconds ? a.t.limiter : b.t.limiter;
  Concurrent best;
  best.seconds = serial;
  best.mechanism = "serial";
  best.limiter = serial_limiter;
  const double clk = std::max(a.clock_mhz, b.clock_mhz) > 0 ? std::min(a.clock_mhz, b.clock_mhz) : m.clock_max_mhz;
  if (warps > 0) {
    const double rho = std::min(1.0, warps / m.rng_saturation_warps);
    const double t_b_co = b.t.seconds / rho;  // B alone at its co-resident warp count
    double f = std::min(1.0, a.t.seconds / t_b_co);
    // Each piece's unit times at its own options (efficiencies) and carried time (its scale: a tiled GEMM's tail and
    // per-wave cost, the wgmma kernel's tail and CTA cost, the RNG's strips), summed unit by unit: A in full, the
    // share f of B that runs beside it.
    const KernelTime ua = kernel_time(m, a.t.name, a.d, clk, a.o), ub = kernel_time(m, b.t.name, b.d, clk, b.o);
    KernelTime t;
    for (int it = 0; it < 8; ++it) {
      t = KernelTime{};
      t.name = "co-resident";
      t.clock_mhz = clk;
      for (const Unit& u : m.units) {
        const double sec = ua.unit_seconds(u.name) * a.scale + f * ub.unit_seconds(u.name) * b.scale;
        if (sec <= 0) continue;
        t.units.push_back({u.name, sec});
        if (sec > t.seconds) t.seconds = sec, t.limiter = u.name;
      }
      f = std::min(1.0, t.seconds / t_b_co);
    }
    const double total = t.seconds + (1 - f) * b.t.seconds;
    if (total < best.seconds) {
      best.seconds = total;
      best.mechanism = fmt::format("co-resident, {:g} RNG warps/SM", warps);
      best.limiter = t.limiter;
    }
  }
  if (allow_partition) {
    const int sms = static_cast<int>(m.sm_count);
    const double hbm_rate = m.op("hbm_bytes") ? m.op("hbm_bytes")->loads.front().second : 0;
    double hbm_both = 0;
    if (hbm_rate > 0) {
      auto h = [&](const Demand& d) { auto it = d.find("hbm_bytes"); return it == d.end() ? 0.0 : it->second; };
      hbm_both = (h(a.d) + h(b.d)) / hbm_rate;
    }
    for (int k = 2; k <= sms - 2; k += 2) {
      const KernelTime ta = kernel_time(m, a.t.name, a.d, clk, a.o, static_cast<double>(sms - k) / sms);
      const KernelTime tb = kernel_time(m, b.t.name, b.d, clk, b.o, static_cast<double>(k) / sms);
      // A carried time (per tile and per strip, both spread over the SMs it has) scales with the share as well.
      const double t = std::max({ta.seconds * a.scale, tb.seconds * b.scale, hbm_both});
      if (t < best.seconds) {
        best.seconds = t;
        best.mechanism = fmt::format("SM partition, {} SMs for the RNG", k);
        best.limiter = ta.seconds * a.scale >= tb.seconds * b.scale ? ta.limiter : tb.limiter;
      }
    }
  }
  const double lo = std::min(a.t.seconds, b.t.seconds);
  // The energy bound: run together in any way, the two kernels' dynamic energy still has to be paid at the
  // cap, so no schedule is faster than (E_a + E_b) / (cap - static) -- nor than the longer of the two.
  if (a.t.energy_j >= 0 && b.t.energy_j >= 0 && m.has_power()) {
    best.energy_bound_s = (a.t.energy_j + b.t.energy_j) / (m.cap_w - m.static_w);
    if (best.mechanism != "serial" && best.seconds < best.energy_bound_s) {
      if (best.energy_bound_s >= serial) {  // sharing gains nothing the energy allows
        best.seconds = serial;
        best.mechanism = "serial";
        best.limiter = serial_limiter;
      } else {
        best.seconds = best.energy_bound_s;
        best.limiter = "power";
      }
    }
    const double floor = std::max({best.energy_bound_s, a.t.seconds, b.t.seconds});
    best.max_hidden = lo > 0 ? std::clamp((serial - floor) / lo, 0.0, 1.0) : 0;
  }
  best.hidden = lo > 0 ? (serial - best.seconds) / lo : 0;
  return best;
}

double residency_warps(const std::string& residency, double auto_warps, const Machine& m) {
  if (residency == "auto") return auto_warps;
  if (residency == "serial") return 0;
  if (residency == "coresident") return std::max(auto_warps, m.rng_saturation_warps);
  if (residency.rfind("coresident:", 0) == 0) {
    const std::optional<double> w = parse_finite_number(std::string_view(residency).substr(11));
    if (w && *w >= 0 && *w <= 64) return *w;
  }
  throw UsageError(fmt::format("--residency: '{}' (allowed: auto, serial, coresident, coresident:WARPS with 0..64)",
                               residency));
}

}  // namespace

std::string join_sources(const std::vector<std::string>& sources) {
  std::vector<std::string> u;
  for (const std::string& joined : sources)  // a source may be joined already ("ncu+bytes")
    for (size_t b = 0, e; b < joined.size(); b = e + 1) {
      e = std::min(joined.find('+', b), joined.size());
      const std::string s = joined.substr(b, e - b);
      if (!s.empty() && std::find(u.begin(), u.end(), s) == u.end()) u.push_back(s);
    }
  std::string out;
  for (const std::string& s : u) out += (out.empty() ? "" : "+") + s;
  return out;
}

std::string pipeline_source(const Prediction& pr, const std::string& pipeline) {
  if (pipeline == "fused") return join_sources({pr.gemm.source, pr.attn_fused.source});
  return join_sources({pr.gemm.source, pr.rng.source, pr.attn_mask.source});
}

std::string kernel_sources(const Prediction& pr) {
  const std::vector<std::pair<const char*, const KernelTime*>> k = {
      {"gemm", &pr.gemm}, {"rng", &pr.rng}, {"mask", &pr.attn_mask}, {"fused", &pr.attn_fused}};
  bool same = true;
  for (const auto& [n, t] : k) same = same && t->source == pr.gemm.source;
  if (same) return pr.gemm.source;
  std::string out;
  for (const auto& [n, t] : k) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, t->source);
  return out;
}

const char* const kSourceLegend =
    "demand sources: ncu = the kernel's Nsight Compute counts (dropbench profile) carried to the shape by its static "
    "structure; ncu(nc) = a causal kernel scaled by its non-causal twin's counts; sass = static SASS counts; "
    "hand = the GEMM's hand-written per-FLOP demand (docs/model.md, \"Demand sources\")";

namespace {

// The unit that limits most of a pipeline's or a step's time: its pieces' times summed by limiting unit.
struct Dominant {
  std::map<std::string, double> by;
  void add(const std::string& unit, double s) { by[unit] += s; }
  std::string unit() const {
    std::string u;
    double b = -1;
    for (const auto& [k, v] : by)
      if (v > b) b = v, u = k;
    return u;
  }
};

// A second prediction with the power term off, when the term can act (power data and a cap); nullopt otherwise
// (the times are the same).
template <class F>
auto without_power(const Machine& m, const Profile& p, F&& predict_with) -> std::optional<decltype(predict_with(p))> {
  if (!power_term_on(m, p)) return std::nullopt;
  Profile pn = p;
  pn.use_power = false;
  return predict_with(pn);
}

// The kernels' dynamic energy, -1 when one lacks power data (or the machine has no power figures).
double dynamic_energy(const Machine& m, std::initializer_list<const KernelTime*> ks) {
  double e = 0;
  for (const KernelTime* k : ks) {
    if (k->energy_j < 0 || !m.has_power()) return -1.0;
    e += k->energy_j;
  }
  return e;
}

// RNG warps per SM that fit beside the attention kernel of family fam (its registers, shared memory, threads and CTAs
// per SM), with the RNG kernel's rng_regs registers per thread.
double attention_rng_warps(const Machine& m, const Profile& p, const std::string& fam, int rng_regs, const Options& o) {
  double attn_regs = 0, attn_smem = 0, attn_threads = 0, attn_blocks = 0;
  if (fam == "wgmma") {
    const WgmmaProfile& g = *p.wgmma;
    attn_regs = static_cast<double>(g.registers) * g.threads * g.ctas_per_sm;
    attn_smem = g.smem_per_cta * g.ctas_per_sm;
    attn_threads = static_cast<double>(g.threads) * g.ctas_per_sm;
    attn_blocks = g.ctas_per_sm;
  } else {
    attn_regs = std::ceil(p.attn_registers / 8.0) * 8.0 * p.attn_warps * 32 * p.attn_ctas_per_sm;
    attn_smem = p.attn_smem_per_cta * p.attn_ctas_per_sm;
    attn_threads = p.attn_warps * 32.0 * p.attn_ctas_per_sm;
    attn_blocks = p.attn_ctas_per_sm;
  }
  return residency_warps(o.residency, coresident_warps(m, attn_regs, attn_smem, attn_threads, attn_blocks, rng_regs), m);
}

// Chunked: the GEMM, the RNG of chunk 0, then attention(chunk i) || RNG(chunk i+1).
PipelineTime chunked_pipeline(const Machine& m, const Profile& p, const Workload& w, const Options& o, const Piece& gemm,
                              const std::string& fam, int rng_regs) {
  const double gap = m.launch_gap_us * 1e-6;
  const int block_rows = fam == "wgmma" ? p.wgmma->block_rows : p.attn_block_rows;
  const int64_t crow = chunk_rows_for(w, o, block_rows);
  const double attn_warps_res = attention_rng_warps(m, p, fam, rng_regs, o);
  double chunked = gemm.t.seconds + gap;
  double chunk_dyn = gemm.t.energy_j;
  Dominant dch;
  dch.add(gemm.t.limiter, gemm.t.seconds);
  std::vector<Window> wins;
  for (int64_t r0 = 0; r0 < w.sq; r0 += crow) wins.push_back({r0, std::min(crow, w.sq - r0)});
  const int nchunks = static_cast<int>(wins.size());
  const Piece r0 = rng_piece(m, p, w, "tile", wins[0], o);
  chunked += r0.t.seconds + gap;
  chunk_dyn = chunk_dyn >= 0 && r0.t.energy_j >= 0 ? chunk_dyn + r0.t.energy_j : -1;
  dch.add(r0.t.limiter, r0.t.seconds);
  for (size_t i = 0; i < wins.size(); ++i) {
    const Piece a = attention_piece(m, p, w, "mask", wins[i], o);
    double t = a.t.seconds;
    std::string lim = a.t.limiter;
    chunk_dyn = chunk_dyn >= 0 && a.t.energy_j >= 0 ? chunk_dyn + a.t.energy_j : -1;
    if (i + 1 < wins.size()) {
      const Piece rn = rng_piece(m, p, w, "tile", wins[i + 1], o);
      const Concurrent c = concurrent(m, o, a, rn, attn_warps_res, /*allow_partition=*/false);
      t = c.seconds;
      lim = c.limiter;
      chunk_dyn = chunk_dyn >= 0 && rn.t.energy_j >= 0 ? chunk_dyn + rn.t.energy_j : -1;
    }
    chunked += t + gap;
    dch.add(lim, t);
  }
  PipelineTime chk{"chunked", chunked, dch.unit(),
                   fmt::format("{} chunks of {} rows: attention(chunk i) || RNG(chunk i+1): {}", nchunks, crow,
                               attn_warps_res > 0 ? fmt::format("{:g} RNG warps/SM co-resident", attn_warps_res)
                                                  : "no RNG warp fits beside attention (registers): serial"),
                   fmt::format("{}x{} rows, {}", nchunks, crow,
                               attn_warps_res > 0 ? fmt::format("{:g} RNG warps/SM", attn_warps_res) : "serial")};
  chk.energy_j = chunk_dyn >= 0 && m.has_power() ? chunk_dyn + m.static_w * chunked : -1;
  return chk;
}

}  // namespace

Prediction predict(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  Prediction r;
  r.w = w;
  const double gap = m.launch_gap_us * 1e-6;
  auto gp = p.gemm.find(w.dtype);
  if (gp == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, w.dtype));
  const std::string fam = attention_family(p, w);

  const Piece gemm = gemm_piece(m, p, w, o);
  const Piece rng = rng_piece(m, p, w, "tile", {}, o);
  r.gemm = gemm.t;
  r.rng = rng.t;
  const Piece none = attention_piece(m, p, w, "none", {}, o), mask = attention_piece(m, p, w, "mask", {}, o),
              composed = attention_piece(m, p, w, "fused-composed", {}, o);
  r.attn_none = none.t;
  r.attn_mask = mask.t;
  r.attn_fused_composed = composed.t;
  std::string fused_src = "own profile";
  Piece fused;
  try {
    fused = attention_piece(m, p, w, "fused", {}, o);
  } catch (const UsageError&) {
    fused = composed;
    fused_src = "composed: mask kernel + RNG demand";
  }
  r.attn_fused = fused.t;

  // Total energy of a pipeline: its kernels' dynamic energy plus the static power over its time; -1 when a
  // kernel has no power data.
  auto energy = [&](std::initializer_list<const KernelTime*> ks, double seconds) {
    const double e = dynamic_energy(m, ks);
    return e < 0 ? -1.0 : e + m.static_w * seconds;
  };
  Dominant db, df;
  for (const KernelTime* k : std::initializer_list<const KernelTime*>{&gemm.t, &rng.t, &mask.t}) db.add(k->limiter, k->seconds);
  for (const KernelTime* k : std::initializer_list<const KernelTime*>{&gemm.t, &fused.t}) df.add(k->limiter, k->seconds);
  PipelineTime base{"baseline", serial_seconds(m, {gemm.t.seconds, rng.t.seconds, mask.t.seconds}), db.unit(),
                    "GEMM, RNG, attention(mask) one after the other", "serial"};
  base.energy_j = energy({&gemm.t, &rng.t, &mask.t}, base.seconds);
  PipelineTime fus{"fused", serial_seconds(m, {gemm.t.seconds, fused.t.seconds}), df.unit(),
                   "GEMM, then attention generating its keep bits (" + fused_src + ")",
                   fused_src == "own profile" ? "fused kernel" : "fused (composed)"};
  fus.energy_j = energy({&gemm.t, &fused.t}, fus.seconds);

  const auto& gr = gp->second;
  const int rng_regs = sass_entry(p, rng_key(p, w, "tile"), "RNG").registers;
  r.rng_coresident_warps = residency_warps(
      o.residency, coresident_warps(m, gr.registers_per_sm, gr.smem_per_sm_bytes, gr.threads_per_sm, gr.blocks_per_sm, rng_regs), m);
  const Concurrent ov = concurrent(m, o, gemm, rng, r.rng_coresident_warps, /*allow_partition=*/true);
  r.overlap = ov;
  Dominant dov;
  dov.add(ov.limiter, ov.seconds);
  dov.add(mask.t.limiter, mask.t.seconds);
  std::string ov_detail =
      ov.mechanism == "serial"
          ? "GEMM || RNG: no RNG warp fits beside the GEMM and no SM split gains: serial; then attention(mask)"
          : fmt::format("GEMM || RNG: {}, hides {:.0f}% of the shorter; then attention(mask)", ov.mechanism, 100 * ov.hidden);
  if (ov.energy_bound_s > 0)
    ov_detail += fmt::format(" (energy bound: at most {:.0f}% of the shorter can hide)", 100 * ov.max_hidden);
  PipelineTime over{"overlap", ov.seconds + gap + mask.t.seconds, dov.unit(), ov_detail, ov.mechanism};
  over.energy_j = energy({&gemm.t, &rng.t, &mask.t}, over.seconds);

  const PipelineTime chk = chunked_pipeline(m, p, w, o, gemm, fam, rng_regs);
  r.pipelines = {base, fus, over, chk};
  // The same pipelines without the power term (what `model --report` shows beside).
  const std::optional<Prediction> np = without_power(m, p, [&](const Profile& pn) { return predict(m, pn, w, o); });
  for (size_t i = 0; i < r.pipelines.size(); ++i)
    r.pipelines[i].seconds_no_power = np ? np->pipelines[i].seconds : r.pipelines[i].seconds;
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// The training step.
// ---------------------------------------------------------------------------------------------------------
const StepTime* TrainPrediction::strategy(const std::string& n) const {
  for (const StepTime& t : strategies)
    if (t.name == n) return &t;
  return nullptr;
}

namespace {

// A memory-bound launch timed by its bytes, every one through L2 and HBM once; energy where there is power
// for `key`.
Piece bytes_piece(const Machine& m, const Profile& p, const Options& o, const std::string& name, double bytes,
                  const std::string& key) {
  Piece pc;
  pc.d["hbm_bytes"] = bytes;
  pc.d["l2_bytes"] = bytes;
  pc.clock_mhz = kernel_clock(m, p.rng_clock, o);
  pc.o = o;
  pc.t = kernel_time(m, name, pc.d, pc.clock_mhz, pc.o);
  pc.t.source = "bytes";
  pc.t.key = key;
  pc.t.work = bytes;
  apply_power(m, p, pc.t, o);
  return pc;
}

// One cast / transpose kernel of the fp8 step (kernels/gemm/cast_transpose: the copies cuBLASLt's TN-only fp8
// GEMMs need): memory-bound, rows x cols elements read at in_bytes each and written once per output copy (one
// byte each), every byte through L2 and HBM once. Energy only where there is power for `cast_transpose`.
Piece cast_piece(const Machine& m, const Profile& p, const Options& o, const std::string& name, double rows,
                 double cols, double in_bytes, double out_copies) {
  return bytes_piece(m, p, o, name, rows * cols * (in_bytes + out_copies), "cast_transpose");
}

// Two pieces one after the other as one (the output projection's dX then dW beside the RNG kernel): summed
// demand and times, the longer one's limiter; a's clock and options. The summed demand timed as one kernel would
// overlap the pieces' units (an fp8 cast's bytes under the GEMMs' tensor time), so the scale carries the serial sum
// of their times (each already its own carried time) onto it.
Piece serial_pieces(const Machine& m, const Piece& a, const Piece& b, const std::string& name) {
  Piece pc = a;
  add_to(pc.d, b.d);
  const double as_one = kernel_time(m, name, pc.d, pc.clock_mhz, pc.o).seconds;
  pc.scale = as_one > 0 ? (a.t.seconds_no_power + b.t.seconds_no_power) / as_one : 1;
  pc.t.name = name;
  pc.t.seconds = a.t.seconds + b.t.seconds;
  pc.t.seconds_no_power = a.t.seconds_no_power + b.t.seconds_no_power;
  pc.t.work = a.t.work + b.t.work;
  pc.t.energy_j = a.t.energy_j >= 0 && b.t.energy_j >= 0 ? a.t.energy_j + b.t.energy_j : -1;
  pc.t.limiter = a.t.seconds >= b.t.seconds ? a.t.limiter : b.t.limiter;
  pc.t.source = join_sources({a.t.source, b.t.source});
  return pc;
}

// The attention backward reading the mask: the forward's mode-none demand with every op class x 2.5 (five
// products against the forward's two, the same softmax-shaped work per product), its bytes x 2 (Q, K, V, O, dO
// read; dQ, dK, dV written; D), plus the 1-bit tile mask read once; timed with the forward kernel's
// efficiencies, tail and CTA overhead; energy: the forward none kernel's per element x 2.5. The demand a profiled
// backward (kernels.attention_bwd_wgmma with its ncu blocks) replaces.
Piece attention_bwd_mask_derived(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  const double mask = window_tiles(w, {}) * kTileBytes * static_cast<double>(w.batch) * w.q_heads;
  AttnDerive dv;
  dv.name = "attention-bwd(mask)";
  dv.work_scale = kAttentionBwdFlopRatio;
  dv.adjust = [mask](Demand& d) {
    const double hbm = d["hbm_bytes"], l2 = d["l2_bytes"];
    d = scaled(d, kAttentionBwdFlopRatio);
    d["hbm_bytes"] = 2 * hbm + mask;
    d["l2_bytes"] = 2 * l2 + mask;
  };
  Piece pc = attention_piece(m, p, w, "none", {}, o, dv);
  pc.t.source = "derived(" + pc.t.source + ")";
  return pc;
}

// The backward's memory-bound launches around the wgmma kernel (kernels/attention/bwd/attention_bwd.cu): the
// preprocess (O, dO, LSE read; D and the padded LSE written), the memset of the fp32 dQ accumulator and the dQ
// convert (the accumulator read, dQ written in bf16); a split group's dK / dV sum (the subgroups' fp32 partials
// read, dK, dV written in bf16). Launches: 3, or 4 with the sum.
double wgmma_bwd_aux_bytes(const Workload& w, const WgmmaProfile& g, int* launches) {
  const int block_rows = g.block_rows;
  const double rows = static_cast<double>(w.batch) * static_cast<double>(w.sq) * w.q_heads;
  const double rows_pad = static_cast<double>(w.batch) * w.q_heads * static_cast<double>(ceil_div(w.sq, block_rows)) * block_rows;
  const double dh = static_cast<double>(w.head_dim);
  const double preprocess = rows * dh * 2 * 2 + rows * 4 + rows_pad * 4 * 2;
  const double memset = rows * dh * 4, convert = rows * dh * (4 + 2);
  const int64_t subgroups = wgmma_bwd_subgroups(g, w);
  const double kv = static_cast<double>(w.batch) * static_cast<double>(w.sq) * w.kv_heads * dh;
  const double sum = subgroups > 1 ? 2 * kv * (subgroups * 4 + 2) : 0;
  if (launches) *launches = subgroups > 1 ? 4 : 3;
  return preprocess + memset + convert + sum;
}

// The backward's memory-bound launches around the kernel (wgmma_bwd_aux_bytes) as one piece, and their launch gaps
// (gaps_s).
Piece attention_bwd_aux_piece(const Machine& m, const Profile& p, const Workload& w, const Options& o,
                              const std::string& name, double* gaps_s) {
  int launches = 3;
  const Piece aux = bytes_piece(m, p, o, name + "-aux", wgmma_bwd_aux_bytes(w, *p.wgmma_bwd, &launches), "attention_bwd_aux");
  *gaps_s = launches * m.launch_gap_us * 1e-6;
  return aux;
}

// The attention backward in `mode` (mask / fused) from the wgmma backward's measured demand: the kernel, then its
// memory-bound launches (wgmma_bwd_aux_bytes) and their launch gaps, as a fixed time beside its unit times.
Piece attention_bwd_measured_piece(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                                   const Options& o, const std::string& name) {
  Piece pc = wgmma_bwd_kernel_piece(m, p, w, mode, o, name);
  double gaps = 0;
  const Piece aux = attention_bwd_aux_piece(m, p, w, o, name, &gaps);
  const double extra = aux.t.seconds + gaps;
  add_to(pc.d, aux.d);
  add_fixed(pc.t, extra);
  // The backward's power is fitted on whole calls (the kernel and its launches around it), so its bound holds the
  // call: the launches' time is inside the bound, not added to it.
  wgmma_bwd_power(m, p, w, o, pc.t);
  // Power of the backward's own key is fitted on whole calls and holds the launches' energy already; the forward's
  // power it falls back to does not.
  if (pc.t.energy_j >= 0 && !kernel_power(m, p, pc.t.key)) pc.t.energy_j += std::max(0.0, aux.t.energy_j);
  return pc;
}

// The attention backward reading the mask: from the wgmma backward's measured demand where the profile holds it
// (attention_bwd_measured_piece, source "ncu(bwd)"), else derived (attention_bwd_mask_derived, "derived(...)").
Piece attention_bwd_mask_piece(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  if (wgmma_bwd_measured(p, w, "mask")) return attention_bwd_measured_piece(m, p, w, "mask", o, "attention-bwd(mask)");
  return attention_bwd_mask_derived(m, p, w, o);
}

// The attention backward regenerating the keep bits: the mask-reading backward plus what generating the bits
// instead of reading them costs the forward kernel at the same shape, R and TW (attention(fused) -
// attention(mask), each as the model times it: measured demand where profiled). The bits are generated once per
// element in either kernel.
KernelTime attention_bwd_regen(const KernelTime& bwd_mask, const KernelTime& fwd_fused, const KernelTime& fwd_mask) {
  KernelTime t = bwd_mask;
  t.name = "attention-bwd(regen)";
  t.seconds += std::max(0.0, fwd_fused.seconds - fwd_mask.seconds);
  t.seconds_no_power += std::max(0.0, fwd_fused.seconds_no_power - fwd_mask.seconds_no_power);
  t.source = bwd_mask.source + "+fwd(fused-mask)";
  t.energy_j = bwd_mask.energy_j >= 0 && fwd_fused.energy_j >= 0 && fwd_mask.energy_j >= 0
                   ? bwd_mask.energy_j + std::max(0.0, fwd_fused.energy_j - fwd_mask.energy_j)
                   : -1;
  return t;
}

// The attention backward regenerating the keep bits as the step times it: the wgmma backward's measured fused
// kernel at w's R and TW where the profile holds it (source "ncu(bwd)"), else attention_bwd_regen's composition.
KernelTime attention_bwd_regen_time(const Machine& m, const Profile& p, const Workload& w, const Options& o,
                                    const KernelTime& bwd_mask, const Prediction& fwd) {
  if (wgmma_bwd_measured(p, w, "fused"))
    return attention_bwd_measured_piece(m, p, w, "fused", o, "attention-bwd(regen)").t;
  return attention_bwd_regen(bwd_mask, fwd.attn_fused, fwd.attn_mask);
}

// The fused forward writing its keep words: the fused kernel's demand plus the mask's bytes written.
Piece fused_write_piece(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  const double mask_bytes = window_tiles(w, {}) * kTileBytes * static_cast<double>(w.batch) * w.q_heads;
  AttnDerive write;
  write.name = "attention(fused-write)";
  write.adjust = [mask_bytes](Demand& d) {
    d["hbm_bytes"] += mask_bytes;
    d["l2_bytes"] += mask_bytes;
  };
  try {
    return attention_piece(m, p, w, "fused", {}, o, write);
  } catch (const UsageError&) {
    return attention_piece(m, p, w, "fused-composed", {}, o, write);
  }
}

std::string step_limiter(const StepTime& st) {
  Dominant d;
  for (const std::vector<PhaseTime>* side : {&st.fwd, &st.bwd})
    for (const PhaseTime& x : *side) d.add(x.limiter, x.seconds);
  return d.unit();
}

// The strategies' and their phases' times without the power term, from `np` (the same prediction with the term
// off), or their own times where the term cannot act (np empty).
void set_no_power(std::vector<StepTime>& steps, const std::optional<TrainPrediction>& np) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepTime& n = np ? np->strategies[i] : steps[i];
    steps[i].seconds_no_power = n.seconds;
    for (size_t j = 0; j < steps[i].fwd.size(); ++j) steps[i].fwd[j].seconds_no_power = n.fwd[j].seconds;
    for (size_t j = 0; j < steps[i].bwd.size(); ++j) steps[i].bwd[j].seconds_no_power = n.bwd[j].seconds;
  }
}

}  // namespace

double attention_bwd_around_seconds(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  if (!p.wgmma_bwd) throw UsageError(fmt::format("profile {}: kernels.attention_bwd_wgmma is missing", p.path));
  double gaps = 0;
  return attention_bwd_aux_piece(m, p, w, o, "around", &gaps).t.seconds + gaps;
}

double serial_seconds(const Machine& m, const std::vector<double>& launches) {
  double s = 0;
  for (double t : launches) s += t;
  return launches.empty() ? 0.0 : s + static_cast<double>(launches.size() - 1) * m.launch_gap_us * 1e-6;
}

KernelTime attention_bwd_call_time(const Machine& m, const Profile& p, const Workload& w, const std::string& mode,
                                   const Options& o) {
  if (!p.wgmma_bwd) throw UsageError(fmt::format("profile {}: kernels.attention_bwd_wgmma is missing", p.path));
  if (!p.use_ncu)
    throw UsageError("the attention backward is modelled from its measured (ncu) demand only, which --demand sass "
                     "leaves out");
  if (!wgmma_bwd_measured(p, w, mode))
    throw UsageError(fmt::format("profile {}: the attention backward is modelled for the wgmma kernel at head_dim {} "
                                 "where sass.{} has an ncu block (workload: kernel {}, head_dim {})",
                                 p.path, p.wgmma_bwd->head_dim, wgmma_key(*p.wgmma_bwd, w, mode, w.causal),
                                 attention_family(p, w), w.head_dim));
  return attention_bwd_measured_piece(m, p, w, mode, o, "attention-bwd-call(" + mode + ")").t;
}

namespace {

// The training step's pieces besides the forward prediction's.
struct TrainPieces {
  // Forward Y = O W_o^T; backward dO = dY W_o, dW_o = dY^T O; dX = dQKV W_qkv, dW_qkv = dQKV^T X.
  Piece g_out, g_out_dx, g_out_dw, g_dx, g_dw;
  Piece rng;     // the RNG kernel writing the tile mask (regen-overlap's backward side)
  Piece b_mask;  // the attention backward reading the mask
  Piece fw;      // the fused forward also writing its keep words
  Piece out_bwd_side;  // the output projection's dX, dW and their fp8 casts: the GEMM side of the backward's overlap
  // The fp8 step's casts, in the measured step's order: O before the output projection; dY and W_out^T before its
  // backward (inside the regen-overlap's GEMM side); dQKV, W_qkv^T and X^T before the QKV GEMM's backward.
  std::vector<Piece> cast_fwd, cast_out_bwd, cast_qkv_bwd;
};

TrainPieces train_pieces(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  TrainPieces t;
  const double tokens = static_cast<double>(w.batch) * static_cast<double>(w.sq);
  const double e = static_cast<double>(w.embed), hd = static_cast<double>(w.q_heads) * w.head_dim;
  const GemmMnk qkv = gemm_mnk(w);
  t.g_out = gemm_piece(m, p, w, o, GemmMnk{tokens, e, hd}, "gemm-out");
  t.g_out_dx = gemm_piece(m, p, w, o, GemmMnk{tokens, hd, e}, "gemm-out-dx");
  t.g_out_dw = gemm_piece(m, p, w, o, GemmMnk{e, hd, tokens}, "gemm-out-dw");
  t.g_dx = gemm_piece(m, p, w, o, GemmMnk{tokens, e, qkv.n}, "gemm-dx");
  t.g_dw = gemm_piece(m, p, w, o, GemmMnk{qkv.n, e, tokens}, "gemm-dw");
  t.rng = rng_piece(m, p, w, "tile", {}, o);
  t.b_mask = attention_bwd_mask_piece(m, p, w, o);
  t.fw = fused_write_piece(m, p, w, o);
  if (w.dtype == "fp8") {
    const double nq = qkv.n;
    t.cast_fwd = {cast_piece(m, p, o, "cast-o", tokens, hd, 2, 2)};
    t.cast_out_bwd = {cast_piece(m, p, o, "cast-dy", tokens, e, 2, 2), cast_piece(m, p, o, "transpose-w-out", e, hd, 1, 1)};
    t.cast_qkv_bwd = {cast_piece(m, p, o, "cast-dqkv", tokens, nq, 2, 2),
                      cast_piece(m, p, o, "transpose-w-qkv", nq, e, 1, 1),
                      cast_piece(m, p, o, "transpose-x", tokens, e, 1, 1)};
  }
  // The GEMMs stay the side's first piece: serial_pieces keeps the first one's clock and options, which the
  // overlap's co-resident and SM-partition timings of the side use.
  t.out_bwd_side = serial_pieces(m, t.g_out_dx, t.g_out_dw, "gemm-out-dx+dw");
  for (const Piece& c : t.cast_out_bwd) t.out_bwd_side = serial_pieces(m, t.out_bwd_side, c, "gemm-out-dx+dw");
  return t;
}

PhaseTime phase(const KernelTime& k) { return PhaseTime{k.name, k.seconds, k.limiter, k.clock_mhz, k.source}; }

// The strategies' phase lists, times and energies, from the forward prediction and the step's pieces.
class StepComposer {
 public:
  StepComposer(const Machine& m, const TrainPrediction& r, const TrainPieces& t) : m_(m), r_(r), t_(t) {
    for (const KernelTime& c : r.casts) cast_j_ += std::max(0.0, c.energy_j);
    for (const Piece& c : t.cast_fwd) casts_fwd_.push_back(phase(c.t));
    for (const Piece& c : t.cast_out_bwd) casts_out_bwd_.push_back(phase(c.t));
    // The backward after the attention backward: the casts of its operands, the QKV GEMM's dX and dW.
    for (const Piece& c : t.cast_qkv_bwd) tail_bwd_.push_back(phase(c.t));
    tail_bwd_.push_back(phase(t.g_dx.t));
    tail_bwd_.push_back(phase(t.g_dw.t));
  }

  // The strategy of the pipeline table's train row id.
  StepTime compose(Pipeline id) const {
    const Prediction& f = r_.fwd;
    const TrainPieces& t = t_;
    StepTime st;
    st.name = pipeline_name(id);
    double dj = -1;
    switch (id) {
      case Pipeline::Fused:
        st.fwd = fwd_phases(phase(f.gemm), phase(f.attn_fused));
        st.bwd = bwd_phases(r_.attn_bwd_regen);
        st.detail = "forward: GEMM, attention generating its keep bits (" + f.pipeline("fused")->how +
                    "), output projection; backward: its dX, dW, attention backward regenerating the bits (Philox "
                    "again), QKV dX, dW";
        dj = dyn({&f.gemm, &f.attn_fused, &t.g_out.t, &t.g_out_dx.t, &t.g_out_dw.t, &r_.attn_bwd_regen, &t.g_dx.t,
                  &t.g_dw.t});
        break;
      case Pipeline::Stored:
      case Pipeline::RegenOverlap:
        dj = compose_mask_strategy(id, st);
        break;
      case Pipeline::FusedWrite:
        st.fwd = fwd_phases(phase(f.gemm), phase(t.fw.t));
        st.bwd = bwd_phases(t.b_mask.t);
        st.detail = "forward: GEMM, fused attention also writing its keep words, output projection; backward: its "
                    "dX, dW, attention backward reading the written mask, QKV dX, dW";
        dj = dyn({&f.gemm, &t.fw.t, &t.g_out.t, &t.g_out_dx.t, &t.g_out_dw.t, &t.b_mask.t, &t.g_dx.t, &t.g_dw.t});
        break;
      default:
        throw UsageError(fmt::format("model: the pipeline table's train row '{}' has no composition", st.name));
    }
    st.bwd.insert(st.bwd.end(), tail_bwd_.begin(), tail_bwd_.end());
    finish(st, dj);
    return st;
  }

 private:
  // Stored and regen-overlap: the forward's GEMM || RNG writes the mask; the backward reads the held one (stored) or
  // one the RNG regenerates beside the output projection's backward GEMMs (regen-overlap). Returns the dynamic energy.
  double compose_mask_strategy(Pipeline id, StepTime& st) const {
    const Prediction& f = r_.fwd;
    const TrainPieces& t = t_;
    st.fwd = fwd_phases(PhaseTime{"gemm || rng", f.overlap.seconds, f.overlap.limiter, f.gemm.clock_mhz,
                                  join_sources({f.gemm.source, f.rng.source})},
                        phase(f.attn_mask));
    st.hidden_fwd = f.overlap.hidden;
    st.energy_bound_fwd_s = f.overlap.energy_bound_s;
    if (id == Pipeline::Stored) {
      st.bwd = bwd_phases(t.b_mask.t);
      st.detail = "forward: GEMM || RNG (" + f.overlap.mechanism +
                  ") writes the mask, attention(mask), output projection; backward: its dX, dW, attention "
                  "backward reading the held mask, QKV dX, dW";
      return dyn({&f.gemm, &f.rng, &f.attn_mask, &t.g_out.t, &t.g_out_dx.t, &t.g_out_dw.t, &t.b_mask.t, &t.g_dx.t,
                  &t.g_dw.t});
    }
    const Concurrent& c = r_.bwd_overlap;
    st.bwd = {PhaseTime{"gemm-out-dx+dw || rng", c.seconds, c.limiter, t.g_out_dx.t.clock_mhz,
                        join_sources({t.out_bwd_side.t.source, t.rng.t.source})},
              phase(t.b_mask.t)};
    st.hidden_bwd = c.hidden;
    st.energy_bound_bwd_s = c.energy_bound_s;
    st.detail = "forward as stored, mask freed after it; backward: output projection dX, dW || RNG (" + c.mechanism +
                ") regenerates the mask, attention backward reading it, QKV dX, dW";
    return dyn({&f.gemm, &f.rng, &f.attn_mask, &t.g_out.t, &t.g_out_dx.t, &t.g_out_dw.t, &t.rng.t, &t.b_mask.t,
                &t.g_dx.t, &t.g_dw.t});
  }

  // [first, attention, casts, output projection].
  std::vector<PhaseTime> fwd_phases(PhaseTime first, PhaseTime attn) const {
    std::vector<PhaseTime> v = {std::move(first), std::move(attn)};
    v.insert(v.end(), casts_fwd_.begin(), casts_fwd_.end());
    v.push_back(phase(t_.g_out.t));
    return v;
  }

  // [casts, output projection dX, dW, attention backward].
  std::vector<PhaseTime> bwd_phases(const KernelTime& attn_bwd) const {
    std::vector<PhaseTime> v = casts_out_bwd_;
    v.push_back(phase(t_.g_out_dx.t));
    v.push_back(phase(t_.g_out_dw.t));
    v.push_back(phase(attn_bwd));
    return v;
  }

  double dyn(std::initializer_list<const KernelTime*> ks) const { return dynamic_energy(m_, ks); }

  // Sums the phases with the launch gaps between them; the casts' dynamic energy counts where there is power for
  // them (else only their static share, through the step's time).
  void finish(StepTime& st, double dyn_j) const {
    const auto seconds = [&](const std::vector<PhaseTime>& ps) {
      std::vector<double> t;
      for (const PhaseTime& x : ps) t.push_back(x.seconds);
      return serial_seconds(m_, t);
    };
    st.fwd_seconds = seconds(st.fwd);
    st.bwd_seconds = seconds(st.bwd);
    st.seconds = st.fwd_seconds + m_.launch_gap_us * 1e-6 + st.bwd_seconds;
    st.limiter = step_limiter(st);
    st.energy_j = dyn_j >= 0 && m_.has_power() ? dyn_j + cast_j_ + m_.static_w * st.seconds : -1;
  }

  const Machine& m_;
  const TrainPrediction& r_;
  const TrainPieces& t_;
  double cast_j_ = 0;
  std::vector<PhaseTime> casts_fwd_, casts_out_bwd_, tail_bwd_;
};

}  // namespace

TrainPrediction predict_train(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  TrainPrediction r;
  r.w = w;
  r.fwd = predict(m, p, w, o);
  const TrainPieces t = train_pieces(m, p, w, o);
  r.gemm_out = t.g_out.t;
  r.gemm_out_dx = t.g_out_dx.t;
  r.gemm_out_dw = t.g_out_dw.t;
  r.gemm_dx = t.g_dx.t;
  r.gemm_dw = t.g_dw.t;
  r.attn_bwd_mask = t.b_mask.t;
  r.attn_bwd_regen = attention_bwd_regen_time(m, p, w, o, t.b_mask.t, r.fwd);
  r.attn_fused_write = t.fw.t;
  for (const std::vector<Piece>* v : {&t.cast_fwd, &t.cast_out_bwd, &t.cast_qkv_bwd})
    for (const Piece& c : *v) r.casts.push_back(c.t);
  r.bwd_overlap = concurrent(m, o, t.out_bwd_side, t.rng, r.fwd.rng_coresident_warps, /*allow_partition=*/true);
  const StepComposer compose(m, r, t);
  for (Pipeline id : pass_pipelines(Pass::Train)) r.strategies.push_back(compose.compose(id));
  set_no_power(r.strategies, without_power(m, p, [&](const Profile& pn) { return predict_train(m, pn, w, o); }));
  return r;
}

}  // namespace dropbench::model
