#include "src/model/profile.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"

namespace dropbench::profile {

namespace {

// One CSV record (RFC 4180 quoting, as ncu writes it). Returns false for lines that are not records.
bool split_csv(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  if (line.empty() || line[0] != '"') return false;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return !quoted;
}

// "3,198,714,391.42" -> 3198714391.42; false for "n/a", "no data", "".
bool parse_number(const std::string& s, double& v) {
  std::string t;
  for (char c : s)
    if (c != ',' && !std::isspace(static_cast<unsigned char>(c))) t += c;
  if (t.empty()) return false;
  char* end = nullptr;
  v = std::strtod(t.c_str(), &end);
  return end && *end == '\0';
}

double prefix_factor(const std::string& u, std::string& rest) {
  static const std::vector<std::pair<std::string, double>> p = {{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}};
  for (const auto& [k, f] : p)
    if (u.size() > 1 && u.rfind(k, 0) == 0 && std::islower(static_cast<unsigned char>(u[1]))) {
      rest = u.substr(1);
      return f;
    }
  rest = u;
  return 1;
}

// Factor from a unit to the base this file stores: bytes, instructions, cycles, Hz, ns (time), per second.
double unit_factor(const std::string& unit) {
  if (unit.empty() || unit == "%") return 1;
  const auto slash = unit.find('/');
  std::string num = unit.substr(0, slash), base;
  double f = prefix_factor(num, base);
  if (base == "hz") return f;
  if (base == "usecond" || base == "us") return f * 1e3;
  if (base == "msecond" || base == "ms") return f * 1e6;
  if (base == "second" || base == "s") return f * 1e9;
  if (slash != std::string::npos) {
    const std::string den = unit.substr(slash + 1);
    if (den == "nsecond" || den == "ns") f *= 1e9;
    else if (den == "usecond" || den == "us") f *= 1e6;
    else if (den == "msecond" || den == "ms") f *= 1e3;
  }
  return f;
}

struct Canon {
  std::string name;
  std::vector<std::string> sources;  // raw metric names or "Section/Metric Name", first present wins
};

const std::vector<Canon>& canon_table() {
  static const std::vector<Canon> t = {
      {"duration_ns", {"gpu__time_duration.sum", "GPU Speed Of Light Throughput/Duration"}},
      {"sm_clock_hz",
       {"smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
        "GPU Speed Of Light Throughput/SM Frequency"}},
      {"elapsed_cycles",
       {"gpc__cycles_elapsed.max", "sm__cycles_elapsed.max", "sm__cycles_elapsed.avg",
        "GPU Speed Of Light Throughput/Elapsed Cycles"}},
      {"sm_active_cycles", {"sm__cycles_active.avg", "GPU Speed Of Light Throughput/SM Active Cycles"}},
      {"inst_executed",
       {"smsp__inst_executed.sum", "sm__inst_executed.sum", "Instruction Statistics/Executed Instructions"}},
      {"issue_active_pct",
       {"smsp__issue_active.avg.pct_of_peak_sustained_active", "Compute Workload Analysis/Issue Slots Busy"}},
      {"ipc_active", {"sm__inst_executed.avg.per_cycle_active", "Compute Workload Analysis/Executed Ipc Active"}},
      {"sm_throughput_pct",
       {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "GPU Speed Of Light Throughput/Compute (SM) Throughput"}},
      {"memory_throughput_pct",
       {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "GPU Speed Of Light Throughput/Memory Throughput"}},
      {"dram_throughput_pct",
       {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "GPU Speed Of Light Throughput/DRAM Throughput"}},
      {"l2_throughput_pct",
       {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "GPU Speed Of Light Throughput/L2 Cache Throughput"}},
      {"dram_bytes_read", {"dram__bytes_read.sum"}},
      {"dram_bytes_write", {"dram__bytes_write.sum"}},
      {"l2_bytes", {"lts__t_bytes.sum"}},
      {"registers_per_thread", {"launch__registers_per_thread", "Launch Statistics/Registers Per Thread"}},
  };
  return t;
}

void fill_canon(NcuLaunch& l) {
  for (const Canon& c : canon_table())
    for (const std::string& s : c.sources)
      if (auto it = l.metrics.find(s); it != l.metrics.end()) {
        l.canon[c.name] = it->second;
        break;
      }
  // Shared memory per block: static + dynamic (either page).
  double smem = 0;
  bool any = false;
  for (const char* s : {"launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
                        "Launch Statistics/Static Shared Memory Per Block",
                        "Launch Statistics/Dynamic Shared Memory Per Block"})
    if (auto it = l.metrics.find(s); it != l.metrics.end()) {
      smem += it->second;
      any = true;
    }
  if (!any)
    if (auto it = l.metrics.find("launch__shared_mem_per_block"); it != l.metrics.end()) smem = it->second, any = true;
  if (any) l.canon["smem_per_block"] = smem;
  // Executed warp instructions per pipe: sm__ preferred over smsp__ (same sum).
  static const std::regex pipe(R"(^(sm|smsp)__inst_executed_pipe_([a-z0-9_]+)\.sum$)");
  for (const auto& [k, v] : l.metrics) {
    std::smatch m;
    if (!std::regex_match(k, m, pipe)) continue;
    const std::string key = "pipe_" + m[2].str();
    if (m[1] == "sm" || !l.canon.count(key)) l.canon[key] = v;
  }
}

int index_of(const std::vector<std::string>& h, const std::string& name) {
  auto it = std::find(h.begin(), h.end(), name);
  return it == h.end() ? -1 : static_cast<int>(it - h.begin());
}

}  // namespace

double NcuLaunch::get(const std::string& name, double fallback) const {
  auto it = canon.find(name);
  return it == canon.end() ? fallback : it->second;
}

const std::vector<std::string>& canonical_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const Canon& c : canon_table()) v.push_back(c.name);
    v.push_back("smem_per_block");
    return v;
  }();
  return n;
}

const std::vector<std::string>& ncu_metrics() {
  static const std::vector<std::string> m = {
      "gpu__time_duration.sum", "smsp__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.max",
      "sm__cycles_active.avg", "smsp__inst_executed.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed.avg.per_cycle_active", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", "launch__registers_per_thread",
      "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
      "sm__inst_executed_pipe_alu.sum", "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_fmaheavy.sum",
      "sm__inst_executed_pipe_xu.sum", "sm__inst_executed_pipe_lsu.sum", "sm__inst_executed_pipe_uniform.sum",
      "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum"};
  return m;
}

std::vector<NcuLaunch> parse_ncu_csv(const std::string& text) {
  std::vector<NcuLaunch> out;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header, row, units;
  enum { None, Raw, Details } page = None;
  int c_id = -1, c_kernel = -1, c_block = -1, c_grid = -1, c_section = -1, c_name = -1, c_unit = -1, c_value = -1;
  std::map<int, size_t> by_id;  // details page: launch ID -> index in out
  while (std::getline(in, line)) {
    if (!split_csv(line, row)) continue;
    if (!row.empty() && row[0] == "ID") {  // a header (one per ncu invocation / report)
      header = row;
      units.clear();
      c_id = 0;
      c_kernel = index_of(header, "Kernel Name");
      c_block = index_of(header, "Block Size");
      c_grid = index_of(header, "Grid Size");
      c_section = index_of(header, "Section Name");
      c_name = index_of(header, "Metric Name");
      c_unit = index_of(header, "Metric Unit");
      c_value = index_of(header, "Metric Value");
      page = (c_name >= 0 && c_value >= 0) ? Details : Raw;
      by_id.clear();
      continue;
    }
    if (page == None) continue;
    double idv = 0;
    const bool has_id = parse_number(row[0], idv);
    if (page == Raw && !has_id) {  // the units row
      units = row;
      continue;
    }
    if (!has_id) continue;
    const int id = static_cast<int>(idv);
    auto field = [&](int c) { return c >= 0 && c < static_cast<int>(row.size()) ? row[c] : std::string(); };
    NcuLaunch* l = nullptr;
    if (page == Details) {
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        by_id[id] = out.size();
        out.emplace_back();
      }
      l = &out[by_id[id]];
    } else {
      out.emplace_back();
      l = &out.back();
    }
    l->id = id;
    l->kernel = field(c_kernel);
    l->block = field(c_block);
    l->grid = field(c_grid);
    if (page == Details) {
      double v;
      const std::string name = field(c_name);
      if (name.empty() || !parse_number(field(c_value), v)) continue;
      l->metrics[field(c_section) + "/" + name] = v * unit_factor(field(c_unit));
    } else {
      for (size_t c = 0; c < header.size() && c < row.size(); ++c) {
        if (header[c].find("__") == std::string::npos) continue;  // not a metric column
        double v;
        if (!parse_number(row[c], v)) continue;
        l->metrics[header[c]] = v * unit_factor(c < units.size() ? units[c] : "");
      }
    }
  }
  for (NcuLaunch& l : out) fill_canon(l);
  return out;
}

json ncu_block(const NcuLaunch& l, double work, const std::string& work_unit, const json& workload) {
  if (!(work > 0)) throw UsageError(fmt::format("profile: work for kernel '{}' must be > 0", l.kernel));
  json b = json::object();
  b["kernel"] = l.kernel;
  if (workload.is_object() && !workload.empty()) b["workload"] = workload;
  b["launch"] = {{"block", l.block}, {"grid", l.grid}};
  if (double r = l.get("registers_per_thread"); r >= 0) b["launch"]["registers_per_thread"] = r;
  if (double s = l.get("smem_per_block"); s >= 0) b["launch"]["smem_per_block_bytes"] = s;
  b["work"] = work;
  b["work_unit"] = work_unit;
  if (double d = l.get("duration_ns"); d >= 0) b["duration_us"] = d / 1e3;
  if (double c = l.get("sm_clock_hz"); c >= 0) b["sm_clock_mhz"] = c / 1e6;
  if (double c = l.get("elapsed_cycles"); c >= 0) b["elapsed_cycles"] = c;
  // Executed counts per unit of work: warp instructions (all, and per pipe), bytes.
  json d = json::object();
  if (double i = l.get("inst_executed"); i >= 0) d["inst"] = i / work;
  for (const auto& [k, v] : l.canon)
    if (k.rfind("pipe_", 0) == 0) d[k.substr(5)] = v / work;
  const double rd = l.get("dram_bytes_read"), wr = l.get("dram_bytes_write");
  if (rd >= 0 || wr >= 0) d["hbm_bytes"] = (std::max(rd, 0.0) + std::max(wr, 0.0)) / work;
  if (double b2 = l.get("l2_bytes"); b2 >= 0) d["l2_bytes"] = b2 / work;
  b["demand"] = d;
  json u = json::object();
  for (const auto& [k, name] : std::vector<std::pair<std::string, std::string>>{
           {"issue_active_pct", "issue"}, {"sm_throughput_pct", "sm"}, {"memory_throughput_pct", "memory"},
           {"dram_throughput_pct", "dram"}, {"l2_throughput_pct", "l2"}})
    if (double v = l.get(k); v >= 0) u[name] = v;
  if (double ipc = l.get("ipc_active"); ipc >= 0) u["ipc_active"] = ipc;
  b["utilization_pct"] = u;
  // The raw values: the metrics asked for (the raw page adds .avg/.min/.max variants: left in ncu's CSV) or,
  // from the details page, every "Section/Metric".
  json raw = json::object();
  const auto& asked = ncu_metrics();
  for (const auto& [k, v] : l.metrics)
    if (k.find('/') != std::string::npos || std::find(asked.begin(), asked.end(), k) != asked.end()) raw[k] = v;
  b["metrics"] = raw;
  return b;
}

std::map<std::string, double> table_demand(const json& profile, const std::string& key) {
  std::map<std::string, double> out;
  const json* e = nullptr;
  if (profile.contains("sass") && profile["sass"].contains(key)) e = &profile["sass"][key];
  else if (profile.contains("kernels") && profile["kernels"].contains(key)) e = &profile["kernels"][key];
  if (!e) return out;
  if (e->contains("ncu") && (*e)["ncu"].is_object() && (*e)["ncu"].contains("demand")) {
    for (const auto& [k, v] : (*e)["ncu"]["demand"].items())
      if (v.is_number()) out[k] = v.get<double>();
    if ((*e)["ncu"].contains("utilization_pct") && (*e)["ncu"]["utilization_pct"].contains("issue"))
      out["issue_%"] = (*e)["ncu"]["utilization_pct"]["issue"].get<double>();
    return out;
  }
  const char* src = e->contains("per_element") ? "per_element" : (e->contains("per_flop") ? "per_flop" : nullptr);
  if (src)
    for (const auto& [k, v] : (*e)[src].items())
      if (v.is_number() && v.get<double>() != 0) out[k] = v.get<double>();
  return out;
}

Selection parse_kernels(const std::string& list) {
  Selection s{false, false, false, false};
  std::stringstream ss(list);
  std::string item;
  bool any = false;
  while (std::getline(ss, item, ',')) {
    if (item == "rng") s.rng = true;
    else if (item == "attention") s.attention = true;
    else if (item == "attention_bwd") s.attention_bwd = true;
    else if (item == "gemm") s.gemm = true;
    else
      throw UsageError(fmt::format(
          "--kernels: '{}' is not a kernel family (allowed: rng, attention, attention_bwd, gemm)", item));
    any = true;
  }
  if (!any) throw UsageError("--kernels: empty list (allowed: rng, attention, attention_bwd, gemm)");
  return s;
}

std::vector<std::string> kernel_keys(const Selection& s, int attn_tw) {
  std::vector<std::string> k;
  if (s.rng)
    for (int r : kPhiloxRounds)
      for (int tw : kThresholdBits) k.push_back(fmt::format("rng_tile_r{}_tw{}", r, tw));
  if (s.attention)
    for (const char* causal : {"", "_causal"}) {
      k.push_back(fmt::format("attn_none{}", causal));
      k.push_back(fmt::format("attn_mask{}", causal));
      for (int r : kPhiloxRounds) k.push_back(fmt::format("attn_fused_r{}_tw{}{}", r, attn_tw, causal));
    }
  if (s.attention)  // the Hopper-native kernel (kernels/attention/attention_wgmma_kernel.cuh)
    for (const char* causal : {"", "_causal"}) {
      k.push_back(fmt::format("wgmma_none{}", causal));
      k.push_back(fmt::format("wgmma_mask{}", causal));
      for (int r : kPhiloxRounds) k.push_back(fmt::format("wgmma_fused_r{}_tw{}{}", r, attn_tw, causal));
    }
  if (s.attention_bwd)  // the wgmma backward (kernels/attention/bwd/wgmma/kernel.cuh)
    for (const char* causal : {"", "_causal"}) {
      k.push_back(fmt::format("wgmma_bwd_none{}", causal));
      k.push_back(fmt::format("wgmma_bwd_mask{}", causal));
      for (int r : kPhiloxRounds) k.push_back(fmt::format("wgmma_bwd_fused_r{}_tw{}{}", r, attn_tw, causal));
    }
  if (s.gemm) {
    k.push_back("gemm_fp8");
    k.push_back("gemm_bf16");
  }
  return k;
}

std::string classify_launch(const std::string& name) {
  static const std::regex rng(R"(rng_tile_kernel<\s*(\d+)\s*,\s*(\d+)\s*>)");
  // attn_fwd_kernel<Cfg<...>, mode, R, TW, causal>: mode 0 none, 1 mask, 2 fused; causal 0/1 or false/true
  // (an enum may print as "(DropoutMode)2").
  static const std::regex attn_full(
      R"(attn_fwd_kernel<\s*(?:\w+::)?Cfg<[^>]*>\s*,\s*(?:\([\w:]+\))?(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\w+)\s*>)");
  static const std::regex attn(R"(attn_fwd_kernel<\s*(?:\w+::)?Cfg<[^>]*>\s*,\s*(?:\([\w:]+\))?(\d+))");
  // attn_fwd_wgmma_kernel<WgCfg<...>, mode, R, TW, causal, rng_warps>: the same fields, plus design (b)'s
  // RNG warps (a separate instance, "_rngwarps").
  static const std::regex wg_full(
      R"(attn_fwd_wgmma_kernel<\s*(?:\w+::)?WgCfg<[^>]*>\s*,\s*(?:\([\w:]+\))?(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\w+)\s*(?:,\s*(\w+)\s*)?>)");
  static const std::regex wg(R"(attn_fwd_wgmma_kernel<\s*(?:\w+::)?WgCfg<[^>]*>\s*,\s*(?:\([\w:]+\))?(\d+))");
  // attn_bwd_wgmma_kernel<HD, mode>: R, TW and causality are run-time arguments, so the key has none of them
  // (`dropbench profile` adds them from the profiled sweep point).
  static const std::regex wg_bwd(R"(attn_bwd_wgmma_kernel<\s*(?:\([\w:]+\))?(\d+)\s*,\s*(?:\([\w:]+\))?(\d+)\s*>)");
  std::smatch m;
  if (std::regex_search(name, m, rng)) return fmt::format("rng_tile_r{}_tw{}", m[1].str(), m[2].str());
  if (std::regex_search(name, m, wg_bwd)) {
    const int mode = std::stoi(m[2].str());
    return mode == 0 ? "wgmma_bwd_none" : mode == 1 ? "wgmma_bwd_mask" : "wgmma_bwd_fused";
  }
  auto truthy = [](const std::string& v) { return v == "1" || v == "true"; };
  if (std::regex_search(name, m, wg_full)) {
    const int mode = std::stoi(m[1].str());
    const std::string suffix = std::string(m[5].matched && truthy(m[5].str()) ? "_rngwarps" : "") +
                               (truthy(m[4].str()) ? "_causal" : "");
    if (mode == 0) return "wgmma_none" + suffix;
    if (mode == 1) return "wgmma_mask" + suffix;
    return fmt::format("wgmma_fused_r{}_tw{}{}", m[2].str(), m[3].str(), suffix);
  }
  if (std::regex_search(name, m, wg)) {
    const int mode = std::stoi(m[1].str());
    return mode == 0 ? "wgmma_none" : mode == 1 ? "wgmma_mask" : "wgmma_fused";
  }
  if (std::regex_search(name, m, attn_full)) {
    const int mode = std::stoi(m[1].str());
    const std::string c = m[4].str();
    const std::string suffix = (c == "1" || c == "true") ? "_causal" : "";
    if (mode == 0) return "attn_none" + suffix;
    if (mode == 1) return "attn_mask" + suffix;
    return fmt::format("attn_fused_r{}_tw{}{}", m[2].str(), m[3].str(), suffix);
  }
  if (std::regex_search(name, m, attn)) {
    const int mode = std::stoi(m[1].str());
    return mode == 0 ? "attn_none" : mode == 1 ? "attn_mask" : "attn_fused";
  }
  if (name.find("ref") != std::string::npos || name.find("fill_") != std::string::npos) return "";
  static const std::regex gemm(R"(nvjet|xmma|cutlass|gemm|sm90_)");
  if (std::regex_search(name, gemm)) return "gemm";
  return "";
}

}  // namespace dropbench::profile
