#include "src/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"

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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(fmt::format("{}: '{}' is a directory (allowed: a {} JSON file, e.g. configs/{}s/h200.json)", what,
                                 path, what, what == "machine" ? "machine" : "profile"));
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("{}: cannot open '{}'", what, path));
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}: '{}' is not valid JSON ({})", what, path, e.what()));
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

Machine machine_from_json(const json& j, const std::string& where) {
  const Fields f{"machine", where};
  check_schema(j, "dropbench.machine", f);
  // A misspelt key would otherwise be ignored and its default silently used.
  static const std::set<std::string> known = {
      "schema",   "schema_version",   "name",      "description",        "sm_count",          "clock_mhz",
      "hbm_gbs",  "l2_gbs",           "l2_bytes",  "registers_per_sm",   "smem_per_sm_bytes", "max_threads_per_sm",
      "max_blocks_per_sm", "launch_gap_us", "rng_saturation_warps", "units", "ops", "calibration"};
  for (const auto& [key, value] : j.items())
    if (!known.count(key))
      f.fail(key, "is not a machine field (allowed: schema, schema_version, name, description, sm_count, clock_mhz, "
                  "hbm_gbs, l2_gbs, l2_bytes, registers_per_sm, smem_per_sm_bytes, max_threads_per_sm, "
                  "max_blocks_per_sm, launch_gap_us, rng_saturation_warps, units, ops, calibration)");
  Machine m;
  m.path = where;
  m.name = f.string(j, "name", "name");
  m.description = j.value("description", "");
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
    oc.per_second = o.value("per_second", false);
    const json& loads = f.get(o, "loads", p + ".loads");
    if (!loads.is_object() || loads.empty()) f.fail(p + ".loads", "must be a non-empty object of unit -> rate");
    for (const auto& [un, rate] : loads.items()) {
      if (!m.unit(un)) f.fail(p + ".loads." + un, "names a unit that is not in units");
      oc.loads.emplace_back(un, f.number(loads, un, p + ".loads." + un));
    }
    m.ops.push_back(oc);
  }
  if (j.contains("calibration") && j.at("calibration").contains("fit_points")) {
    for (const json& fp : j.at("calibration").at("fit_points")) {
      FitPoint p;
      p.unit = f.string(fp, "unit", "calibration.fit_points[].unit");
      if (!m.unit(p.unit)) f.fail("calibration.fit_points[].unit", fmt::format("'{}' is not in units", p.unit));
      p.command = f.string(fp, "command", "calibration.fit_points[].command");
      p.variant = f.string(fp, "variant", "calibration.fit_points[].variant");
      p.axes = f.get(fp, "axes", "calibration.fit_points[].axes");
      p.report = fp.value("report", "");
      m.fit_points.push_back(p);
    }
  }
  return m;
}

Machine load_machine(const std::string& path) { return machine_from_json(read_json_file(path, "machine"), path); }

// ---------------------------------------------------------------------------------------------------------
// Profile.
// ---------------------------------------------------------------------------------------------------------
Profile profile_from_json(const json& j, const std::string& where) {
  const Fields f{"profile", where};
  check_schema(j, "dropbench.profile", f);
  Profile p;
  p.path = where;
  p.name = f.string(j, "name", "name");
  const json& sass = f.get(j, "sass", "sass");
  for (const auto& [key, e] : sass.items()) {
    const std::string path = "sass." + key;
    SassKernel k;
    k.key = key;
    k.elements_per_iteration = f.number(e, "elements_per_iteration", path + ".elements_per_iteration");
    k.per_iteration = demand_from_json(f.get(e, "per_iteration", path + ".per_iteration"), f, path + ".per_iteration");
    if (e.contains("edge_extra_per_iteration"))
      k.edge_extra = demand_from_json(e.at("edge_extra_per_iteration"), f, path + ".edge_extra_per_iteration");
    if (e.contains("rescale_extra_per_iteration"))
      k.rescale_extra = demand_from_json(e.at("rescale_extra_per_iteration"), f, path + ".rescale_extra_per_iteration");
    if (e.contains("resources") && e.at("resources").contains("registers"))
      k.registers = e.at("resources").at("registers").get<int>();
    if (e.contains("opcodes_per_iteration") && e.at("opcodes_per_iteration").is_object())
      for (const auto& [op, n] : e.at("opcodes_per_iteration").items())
        if ((op.rfind("IMAD.WIDE", 0) == 0 || op.rfind("IMAD.HI", 0) == 0) && n.is_number())
          k.imad_wide_per_iteration += n.get<double>();
    k.ncu = ncu_from_json(e, f, path);
    p.sass[key] = k;
  }
  const json& ks = f.get(j, "kernels", "kernels");
  {
    const json& r = f.get(ks, "rng", "kernels.rng");
    p.rng_clock = f.string(r, "clock", "kernels.rng.clock");
    p.rng_sass_key = f.string(r, "sass_key", "kernels.rng.sass_key");
    p.rng_block_threads = static_cast<int>(f.number(r, "block_threads", "kernels.rng.block_threads"));
    p.rng_hbm_bytes_per_element = f.number(f.get(r, "hbm_bytes_per_element", "kernels.rng.hbm_bytes_per_element"),
                                           "value", "kernels.rng.hbm_bytes_per_element.value", false);
  }
  {
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
    const json& sk = f.get(a, "sass_key", q + "sass_key");
    for (const char* mode : {"none", "mask", "fused", "causal_suffix"})
      p.attn_sass_key[mode] = f.string(sk, mode, q + "sass_key." + mode);
  }
  for (const char* dt : {"fp8", "bf16"}) {
    const std::string key = std::string("gemm_") + dt, q = "kernels." + key + ".";
    if (!ks.contains(key)) continue;
    const json& g = ks.at(key);
    GemmProfile gp;
    gp.clock = f.string(g, "clock", q + "clock");
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
    p.gemm[dt] = gp;
  }
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

Profile load_profile(const std::string& path) { return profile_from_json(read_json_file(path, "profile"), path); }

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
  double flops() const { return 2 * m * n * k; }
};
GemmMnk gemm_mnk(const Workload& w) {
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  return {static_cast<double>(d.m), static_cast<double>(d.n), static_cast<double>(d.k)};
}

Demand gemm_static(const Profile& p, const Workload& w) {
  auto it = p.gemm.find(w.dtype);
  if (it == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, w.dtype));
  const GemmProfile& g = it->second;
  const GemmMnk s = gemm_mnk(w);
  const double M = s.m, N = s.n, K = s.k;
  Demand d = scaled(g.per_flop, s.flops());
  const double in = g.input_bytes, out = g.output_bytes;
  d["hbm_bytes"] += (M * K + N * K) * in + M * N * out;
  d["l2_bytes"] += (M * K * in * std::ceil(N / g.tile_n) + N * K * in * std::ceil(M / g.tile_m)) / g.cluster_multicast +
                   M * N * out;
  return d;
}

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

Demand gemm_demand(const Profile& p, const Workload& w, std::string* source) {
  Demand d = gemm_static(p, w);
  const GemmProfile& g = p.gemm.at(w.dtype);
  if (p.use_ncu && g.ncu) {
    Workload wp = g.ncu->w;
    wp.dtype = w.dtype;
    d = ncu_carried(d, gemm_static(p, wp), *g.ncu, gemm_mnk(w).flops() / gemm_mnk(wp).flops());
    if (source) *source = "ncu";
  } else if (source) {
    *source = "hand";
  }
  return d;
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

// Query-row strips of 16 in a window, and the mask tiles generated for them (causal: on/below the diagonal).
double window_tiles(const Workload& w, Window win) {
  const int64_t rows = win.rows < 0 ? w.sq : win.rows;
  const int64_t r16_begin = win.row_begin / 16, r16_end = ceil_div(std::min<int64_t>(win.row_begin + rows, w.sq), 16);
  const int64_t cols64 = ceil_div(w.sq, 64);
  double tiles = 0;
  for (int64_t r = r16_begin; r < r16_end; ++r) {
    if (!w.causal) {
      tiles += static_cast<double>(cols64);
    } else {
      const int64_t last = (r * 16 + 15) / 64;
      tiles += static_cast<double>(std::min(last + 1, cols64));
    }
  }
  return tiles;
}

// Static RNG demand (with the kImadWide weight) and the elements it generates.
Demand rng_static(const SassKernel& k, const Profile& p, const Workload& w, const std::string& layout, Window win,
                  double* elements_out = nullptr) {
  const double bh = static_cast<double>(w.batch) * w.q_heads;
  double elements = 0;
  if (layout == "tile") {
    elements = window_tiles(w, win) * 1024 * bh;
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
    const int64_t qb = w.causal ? qb_end - 1 - x : qb_begin + x;  // causal: heaviest query block first
    cta_iters.push_back(static_cast<double>(w.causal ? std::min(n_kv, (qb * BR + BR - 1) / BC + 1) : n_kv));
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

double tail_factor(const std::vector<double>& cta_iters, double heads, double slots) {
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

namespace {

std::string attn_key(const Profile& p, const Workload& w, const std::string& base_mode, bool causal) {
  auto km = p.attn_sass_key.find(base_mode);
  if (km == p.attn_sass_key.end() || base_mode == "causal_suffix")
    throw UsageError(fmt::format("model: attention mode '{}' (allowed: none, mask, fused, fused-composed)", base_mode));
  std::string key = replace_all(km->second, "{rounds}", std::to_string(w.rounds));
  key = replace_all(key, "{threshold_bits}", std::to_string(w.threshold_bits));
  if (causal) key += p.attn_sass_key.at("causal_suffix");
  return key;
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
    const double mask = window_tiles(w, win) * 128.0 * B * w.q_heads;  // one 32-bit word per lane per tile
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
    const double mask = window_tiles(w, win) * 128.0 * static_cast<double>(w.batch) * w.q_heads;
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

struct Piece {
  Demand d;
  KernelTime t;
  double clock_mhz = 0;
  Options o;  // the options it is timed with (options_for its demand source)
};

// A (e.g. the GEMM) and B (an RNG kernel) started together. Candidates: one after the other; B co-resident
// on A's SMs with `warps` warps per SM (the sum of their demands on shared units, B's rate capped by its
// warps, the rest of B after A); an SM partition (B on k SMs, A on the others).
Concurrent concurrent(const Machine& m, const Options& o, const Piece& a, const Piece& b, double warps,
                      bool allow_partition) {
  const double gap = m.launch_gap_us * 1e-6;
  Concurrent best;
  best.seconds = a.t.seconds + b.t.seconds + gap;
  best.mechanism = "serial";
  best.limiter = a.t.seconds >= b.t.seconds ? a.t.limiter : b.t.limiter;
  const double clk = std::max(a.clock_mhz, b.clock_mhz) > 0 ? std::min(a.clock_mhz, b.clock_mhz) : m.clock_max_mhz;
  if (warps > 0) {
    const double rho = std::min(1.0, warps / m.rng_saturation_warps);
    const double t_b_co = b.t.seconds / rho;  // B alone at its co-resident warp count
    double f = std::min(1.0, a.t.seconds / t_b_co);
    KernelTime t;
    // Measured-demand efficiencies when either piece's demand is measured (a sum of both demands).
    const Options& osum = b.o.efficiency.empty() ? a.o : b.o;
    for (int it = 0; it < 8; ++it) {
      Demand sum = a.d;
      add_to(sum, b.d, f);
      t = kernel_time(m, "co-resident", sum, clk, osum);
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
      const double t = std::max({ta.seconds, tb.seconds, hbm_both});
      if (t < best.seconds) {
        best.seconds = t;
        best.mechanism = fmt::format("SM partition, {} SMs for the RNG", k);
        best.limiter = ta.seconds >= tb.seconds ? ta.limiter : tb.limiter;
      }
    }
  }
  const double lo = std::min(a.t.seconds, b.t.seconds);
  best.hidden = lo > 0 ? (a.t.seconds + b.t.seconds + gap - best.seconds) / lo : 0;
  return best;
}

double residency_warps(const std::string& residency, double auto_warps, const Machine& m) {
  if (residency == "auto") return auto_warps;
  if (residency == "serial") return 0;
  if (residency == "coresident") return std::max(auto_warps, m.rng_saturation_warps);
  if (residency.rfind("coresident:", 0) == 0) {
    try {
      size_t pos = 0;
      const double w = std::stod(residency.substr(11), &pos);
      if (pos == residency.size() - 11 && w >= 0 && w <= 64) return w;
    } catch (const std::exception&) {
    }
  }
  throw UsageError(fmt::format("--residency: '{}' (allowed: auto, serial, coresident, coresident:WARPS with 0..64)",
                               residency));
}

}  // namespace

std::string join_sources(const std::vector<std::string>& sources) {
  std::vector<std::string> u;
  for (const std::string& s : sources)
    if (!s.empty() && std::find(u.begin(), u.end(), s) == u.end()) u.push_back(s);
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

Prediction predict(const Machine& m, const Profile& p, const Workload& w, const Options& o) {
  Prediction r;
  r.w = w;
  const double gap = m.launch_gap_us * 1e-6;
  auto gp = p.gemm.find(w.dtype);
  if (gp == p.gemm.end()) throw UsageError(fmt::format("profile {}: kernels.gemm_{} is missing", p.path, w.dtype));
  const double clk_gemm = kernel_clock(m, gp->second.clock, o), clk_rng = kernel_clock(m, p.rng_clock, o),
               clk_attn = kernel_clock(m, p.attn_clock, o);

  // A kernel timed with the options of its demand source, the source kept on its KernelTime.
  auto timed = [&](Piece& pc, const std::string& name, const std::string& src, double factor = 1.0) {
    pc.o = options_for(o, p, src);
    pc.t = kernel_time(m, name, pc.d, pc.clock_mhz, pc.o, 1.0, factor);
    pc.t.source = src;
  };
  std::string src;
  Piece gemm{gemm_demand(p, w, &src), {}, clk_gemm, o};
  timed(gemm, "gemm", src);
  Piece rng{rng_demand(p, w, "tile", {}, &src), {}, clk_rng, o};
  timed(rng, "rng", src);
  r.gemm = gemm.t;
  r.rng = rng.t;

  auto attn = [&](const std::string& mode, Window win = {}) {
    AttnWork a;
    std::string asrc;
    Piece pc{attention_demand(p, w, mode, win, &a, &asrc), {}, clk_attn, o};
    timed(pc, "attention(" + mode + ")", asrc,
          tail_factor(a.cta_iterations, static_cast<double>(w.batch) * w.q_heads, m.sm_count * p.attn_ctas_per_sm));
    return pc;
  };
  const Piece none = attn("none"), mask = attn("mask"), composed = attn("fused-composed");
  r.attn_none = none.t;
  r.attn_mask = mask.t;
  r.attn_fused_composed = composed.t;
  std::string fused_src = "own profile";
  Piece fused;
  try {
    fused = attn("fused");
  } catch (const UsageError&) {
    fused = composed;
    fused_src = "composed: mask kernel + RNG demand";
  }
  r.attn_fused = fused.t;

  // The unit that limits most of a pipeline's time: its pieces' times summed by limiting unit.
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
  Dominant db, df;
  for (const KernelTime* k : std::initializer_list<const KernelTime*>{&gemm.t, &rng.t, &mask.t}) db.add(k->limiter, k->seconds);
  for (const KernelTime* k : std::initializer_list<const KernelTime*>{&gemm.t, &fused.t}) df.add(k->limiter, k->seconds);
  PipelineTime base{"baseline", gemm.t.seconds + rng.t.seconds + mask.t.seconds + 2 * gap, db.unit(),
                    "GEMM, RNG, attention(mask) one after the other", "serial"};
  PipelineTime fus{"fused", gemm.t.seconds + fused.t.seconds + gap, df.unit(),
                   "GEMM, then attention generating its keep bits (" + fused_src + ")",
                   fused_src == "own profile" ? "fused kernel" : "fused (composed)"};

  const auto& gr = gp->second;
  const int rng_regs = sass_entry(p, rng_key(p, w, "tile"), "RNG").registers;
  r.rng_coresident_warps = residency_warps(
      o.residency, coresident_warps(m, gr.registers_per_sm, gr.smem_per_sm_bytes, gr.threads_per_sm, gr.blocks_per_sm, rng_regs), m);
  const Concurrent ov = concurrent(m, o, gemm, rng, r.rng_coresident_warps, /*allow_partition=*/true);
  Dominant dov;
  dov.add(ov.limiter, ov.seconds);
  dov.add(mask.t.limiter, mask.t.seconds);
  PipelineTime over{"overlap", ov.seconds + gap + mask.t.seconds, dov.unit(),
                    ov.mechanism == "serial"
                        ? "GEMM || RNG: no RNG warp fits beside the GEMM and no SM split gains: serial; then attention(mask)"
                        : fmt::format("GEMM || RNG: {}, hides {:.0f}% of the shorter; then attention(mask)", ov.mechanism,
                                      100 * ov.hidden),
                    ov.mechanism};

  // Chunked: RNG of chunk 0, then attention(chunk i) || RNG(chunk i+1).
  const int64_t crow = chunk_rows_for(w, o, p.attn_block_rows);
  const double attn_regs = std::ceil(p.attn_registers / 8.0) * 8.0 * p.attn_warps * 32 * p.attn_ctas_per_sm;
  const double attn_warps_res = residency_warps(
      o.residency,
      coresident_warps(m, attn_regs, p.attn_smem_per_cta * p.attn_ctas_per_sm, p.attn_warps * 32.0 * p.attn_ctas_per_sm,
                       p.attn_ctas_per_sm, rng_regs),
      m);
  double chunked = gemm.t.seconds + gap;
  int nchunks = 0;
  Dominant dch;
  dch.add(gemm.t.limiter, gemm.t.seconds);
  std::vector<Window> wins;
  for (int64_t r0 = 0; r0 < w.sq; r0 += crow) wins.push_back({r0, std::min(crow, w.sq - r0)});
  nchunks = static_cast<int>(wins.size());
  {
    Piece r0{rng_demand(p, w, "tile", wins[0], &src), {}, clk_rng, o};
    timed(r0, "rng(chunk)", src);
    chunked += r0.t.seconds + gap;
    dch.add(r0.t.limiter, r0.t.seconds);
    for (size_t i = 0; i < wins.size(); ++i) {
      const Piece a = attn("mask", wins[i]);
      double t = a.t.seconds;
      std::string lim = a.t.limiter;
      if (i + 1 < wins.size()) {
        Piece rn{rng_demand(p, w, "tile", wins[i + 1], &src), {}, clk_rng, o};
        timed(rn, "rng(chunk)", src);
        const Concurrent c = concurrent(m, o, a, rn, attn_warps_res, /*allow_partition=*/false);
        t = c.seconds;
        lim = c.limiter;
      }
      chunked += t + gap;
      dch.add(lim, t);
    }
  }
  PipelineTime chk{"chunked", chunked, dch.unit(),
                   fmt::format("{} chunks of {} rows: attention(chunk i) || RNG(chunk i+1): {}", nchunks, crow,
                               attn_warps_res > 0 ? fmt::format("{:g} RNG warps/SM co-resident", attn_warps_res)
                                                  : "no RNG warp fits beside attention (registers): serial"),
                   fmt::format("{}x{} rows, {}", nchunks, crow,
                               attn_warps_res > 0 ? fmt::format("{:g} RNG warps/SM", attn_warps_res) : "serial")};
  r.pipelines = {base, fus, over, chk};
  return r;
}

}  // namespace dropbench::model
