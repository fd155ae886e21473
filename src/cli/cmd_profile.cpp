// `dropbench profile`: per-kernel unit demand as a profile JSON (schema of configs/profiles/*.json), from
// Nsight Compute counters where ncu works, else from the kernels' SASS (scripts/profile_sass.py).
// docs/model.md, "Collecting a profile".
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/shapes.hpp"
#include "src/cli/cli.hpp"
#include "src/core/input.hpp"
#include "src/core/context.hpp"
#include "src/core/report.hpp"
#include "src/model/model.hpp"
#include "src/model/model_report.hpp"
#include "src/model/profile.hpp"

#ifndef DROPBENCH_PROFILE_ROOT
#define DROPBENCH_PROFILE_ROOT "."
#endif

namespace dropbench {

namespace {

namespace fs = std::filesystem;

struct ProfileOptions {
  std::string out = "profile.json";
  std::string kernels = "rng,attention,attention_bwd,gemm";
  std::string base;
  std::string ncu_csv;
  bool no_ncu = false;
  int device = 0;
  std::vector<std::string> power_from;  // reports with per-variant power: fit per-kernel power instead of counts
  std::string machine = "configs/machines/h200.json";
  bool into_machine = false;  // --power-from: write the fitted power into the --machine file, not a profile
  const CLI::Option* out_opt = nullptr;      // given on the command line: count() > 0
  const CLI::Option* machine_opt = nullptr;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Captured {
  int code = -1;
  std::string out, err;
};

Captured capture(const std::string& cmd) {
  static int n = 0;
  const fs::path errf = fs::temp_directory_path() / fmt::format("dropbench_profile_{}_{}.err", ::getpid(), n++);
  Captured r;
  FILE* p = popen((cmd + " 2>" + quote(errf.string())).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, k);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errf);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  fs::remove(errf);
  return r;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty()) {
      const fs::path c = fs::path(dir) / name;
      if (::access(c.c_str(), X_OK) == 0) return c.string();
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// A line of ncu's / the script's stderr worth showing: the first ==ERROR== line, else the last line.
std::string reason_of(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.find("==ERROR==") != std::string::npos) return l;
    if (!l.empty()) last = l;
  }
  return last.empty() ? "no output" : last;
}

fs::path root_dir() {
  if (fs::exists(fs::path(DROPBENCH_PROFILE_ROOT) / "scripts/profile_sass.py")) return DROPBENCH_PROFILE_ROOT;
  return fs::current_path();
}

json read_json(const std::string& path) {
  return read_json_input(path, "--base", "a profile JSON file, e.g. configs/profiles/h200.json");
}

// The base profile through the model's profile rules; a field of a type those rules do not name is one line too.
model::Profile base_profile(const json& prof, const std::string& path) {
  try {
    return model::profile_from_json(prof, path);
  } catch (const json::exception& e) {
    throw UsageError(one_line(fmt::format("--base: {}: malformed ({}) (allowed: a profile JSON file, e.g. "
                                          "configs/profiles/h200.json)", path, json_error_text(e))));
  }
}

// core's atomic write, a failure being bad input that names `option`.
void write_text_atomically(const std::string& path, const std::string& text, const char* option) {
  try {
    write_file_atomic(path, text);
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format("{}: {}", option, e.what()));
  }
}

// --power-from: per-kernel power from reports whose variants carry "power" (model::fit_power) into the
// base profile's "power" object (the counts are left as the base has them), or with --into-machine into the
// machine file's. No GPU needed.
int run_power_fit(const ProfileOptions& o, json prof, const std::string& base) {
  fs::path mpath = o.machine;
  if (!fs::exists(mpath) && fs::exists(root_dir() / o.machine)) mpath = root_dir() / o.machine;
  const model::Machine m = model::load_machine(mpath.string());
  const model::Profile p = base_profile(prof, base);
  std::vector<model::MeasuredReport> reports;
  for (const std::string& r : o.power_from) reports.push_back(model::load_measured_report(r, "--power-from"));
  const model::PowerFits fits = model::fit_power(m, p, reports);
  if (fits.kernels.empty())
    throw UsageError(fmt::format("--power-from: no single-kernel variant with \"power\" data in {} report(s) ({} "
                                 "variant(s) without power; allowed: run reports' alone:* variants, rng / gemm / "
                                 "attention reports' kernel variants, measured with power)",
                                 reports.size(), fits.variants_without_power));
  const json fitted = model::power_json(fits);
  std::string wrote = o.out;
  if (o.into_machine) {
    // The card's own power replaces the machine file's "power" whole; its other fields keep their order.
    nlohmann::ordered_json mj = nlohmann::ordered_json::parse(std::ifstream(mpath));
    mj["power"] = nlohmann::ordered_json::parse(fitted.dump());
    model::machine_from_json(json::parse(mj.dump()), mpath.string());  // what we write must load in the model
    write_text_atomically(mpath.string(), mj.dump(2) + "\n", "--machine");
    wrote = mpath.string();
  } else {
    json pj = prof.contains("power") && prof["power"].is_object() ? prof["power"] : json::object();
    for (const auto& [k, v] : fitted.items()) pj[k] = v;
    prof["power"] = pj;
    prof["name"] = fs::path(o.out).stem().string();
    model::profile_from_json(prof, o.out);  // what we write must load in the model
    write_text_atomically(o.out, prof.dump(2) + "\n", "--out");
  }
  Table t;
  t.columns = {"kernel", "measurements", "mean_w", "dyn_energy_per_work_j", "power_bound_at_cap"};
  for (const model::PowerFit& f : fits.kernels)
    t.rows.push_back({f.key, std::to_string(f.measurements), fmt_num(f.mean_w), fmt::format("{:.4g}", f.dyn_j_per_work),
                      fmt::format("{:.0f}% of its measured time", 100 * (f.mean_w - m.static_w) / (m.cap_w - m.static_w))});
  std::cout << render(t, "md");
  std::cout << fmt::format("\npower from {} report(s): {} variant(s) with power, {} without; machine {} (cap {:g} W, "
                           "static {:g} W); wrote {}\n",
                           reports.size(), fits.variants_with_power, fits.variants_without_power, m.name, m.cap_w,
                           m.static_w, wrote);
  return 0;
}

// ---- the ncu path ----------------------------------------------------------------------------------------
struct Family {
  std::string name, command, kernel_regex;
  std::vector<std::string> sets;
  std::function<double(const std::string& key)> work;     // work of a launch key
  std::function<json(const std::string& key)> workload;   // the workload (geometry) of a launch key
  std::string work_unit;
  // The profile key of a launch's classify_launch kind, where the kernel name cannot tell it (the wgmma backward:
  // R, TW and causality are run-time arguments, fixed by the family's sweep point); empty: from the name.
  std::function<std::string(const std::string& kind)> key_of;
};

// R and TW of "rng_tile_r7_tw8" / "attn_fused_r7_tw8_causal"; {-1, -1} when the key has none.
std::pair<int, int> rounds_tw(const std::string& key) {
  const size_t r = key.find("_r"), t = key.find("_tw");
  if (r == std::string::npos || t == std::string::npos) return {-1, -1};
  return {std::atoi(key.c_str() + r + 2), std::atoi(key.c_str() + t + 3)};
}

// Every family at SQ 4096 (small enough for ncu's replay, large enough to fill the GPU), non-causal, except
// attention, which runs causal too (its causal instantiations are separate kernels).
constexpr int64_t kSq = 4096, kEmbed = 4096;

std::vector<Family> families(const profile::Selection& s, const Workload& w) {
  const double sq = kSq, scores = static_cast<double>(w.batch) * w.q_heads * sq * sq;
  const QkvDims d = qkv_dims(w.batch, kSq, kEmbed, w.q_heads, w.kv_heads, w.head_dim);
  const double M = static_cast<double>(d.m), N = static_cast<double>(d.n), K = static_cast<double>(d.k);
  auto geometry = [w](const std::string& key, bool gemm) {
    json j = {{"batch", w.batch}, {"q_heads", w.q_heads}, {"kv_heads", w.kv_heads}, {"head_dim", w.head_dim},
              {"sq", kSq},        {"causal", key.size() > 7 && key.substr(key.size() - 7) == "_causal"}};
    if (gemm) {
      j["embed"] = kEmbed;
      j["dtype"] = key.substr(key.find('_') + 1);
    } else {
      const auto [r, tw] = rounds_tw(key);
      j["rounds"] = r > 0 ? r : w.rounds;
      j["threshold_bits"] = tw > 0 ? tw : w.threshold_bits;
      if (key.rfind("rng_", 0) == 0) j["layout"] = "tile";
      if (key.rfind("attn_", 0) == 0) j["attention_kernel"] = "mma";
      if (key.rfind("wgmma_", 0) == 0) j["attention_kernel"] = "wgmma";
    }
    return j;
  };
  std::vector<Family> f;
  if (s.rng)
    f.push_back({"rng", "rng", "rng_tile",
                 {"sweep.sq=[4096]", fmt::format("sweep.rounds=[{}]", fmt::join(kPhiloxRounds, ",")),
                  fmt::format("sweep.threshold_bits=[{}]", fmt::join(kThresholdBits, ",")), "sweep.layout=[tile]",
                  "sweep.causal=[false]"},
                 [scores](const std::string&) { return scores; },
                 [geometry](const std::string& k) { return geometry(k, false); }, "elements"});
  // Both attention kernels, one family each (the kernel names tell them apart; attn_fwd_kernel is the mma.sync
  // kernel, attn_fwd_wgmma_kernel the Hopper-native one).
  struct AttnFamily {
    const char *family, *kernel_prefix, *attention_kernel;
  };
  if (s.attention)
    for (const AttnFamily& a :
         {AttnFamily{"attention", "attn_fwd", "mma"}, AttnFamily{"attention_wgmma", "attn_fwd_wgmma", "wgmma"}})
      f.push_back({a.family, "attention", a.kernel_prefix,
                   {"sweep.sq=[4096]", "sweep.causal=[false,true]", fmt::format("sweep.rounds=[{}]", fmt::join(kPhiloxRounds, ",")),
                    fmt::format("sweep.threshold_bits=[{}]", w.threshold_bits),
                    fmt::format("workload.attention_kernel={}", a.attention_kernel)},
                   [scores](const std::string&) { return scores; },
                   [geometry](const std::string& k) { return geometry(k, false); }, "score elements (full SQ x SQ)"});
  // The wgmma backward (attn_bwd_wgmma_kernel<HD, mode>), `dropbench attention` at pass bwd: one family per
  // causality and R (one sweep point each), so the last launch of each mode is that point's measured one (the
  // bitwise checks' deterministic launches come first) and the family names its key.
  if (s.attention_bwd)
    for (bool causal : {false, true})
      for (int r : kPhiloxRounds) {
        const std::string suffix = causal ? "_causal" : "";
        const int tw = static_cast<int>(w.threshold_bits);
        f.push_back({fmt::format("attention_bwd_r{}{}", r, suffix), "attention", "attn_bwd_wgmma",
                     {"sweep.sq=[4096]", fmt::format("sweep.causal=[{}]", causal), fmt::format("sweep.rounds=[{}]", r),
                      fmt::format("sweep.threshold_bits=[{}]", tw), "sweep.pass=[bwd]", "workload.attention_kernel=wgmma"},
                     [scores](const std::string&) { return scores; },
                     [geometry](const std::string& k) { return geometry(k, false); }, "score elements (full SQ x SQ)",
                     [=](const std::string& kind) {
                       return kind + (kind == "wgmma_bwd_fused" ? fmt::format("_r{}_tw{}", r, tw) : "") + suffix;
                     }});
      }
  if (s.gemm)
    for (const char* dt : {"fp8", "bf16"})
      f.push_back({std::string("gemm_") + dt, "gemm", "nvjet|xmma|cutlass|gemm|sm90",
                   {"sweep.sq=[4096]", "sweep.embed=[4096]", fmt::format("sweep.dtype=[{}]", dt)},
                   [=](const std::string&) { return 2 * M * N * K; },
                   [geometry](const std::string& k) { return geometry(k, true); }, "FLOPs"});
  return f;
}

std::string ncu_command(const std::string& ncu, const Family& f, int device, bool sections) {
  std::string c = quote(ncu) + " --clock-control none --csv";
  if (sections) {
    c += " --page details --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats "
         "--section MemoryWorkloadAnalysis --section LaunchStats";
  } else {
    std::string m;
    for (const std::string& x : profile::ncu_metrics()) m += (m.empty() ? "" : ",") + x;
    c += " --page raw --print-units base --metrics " + quote(m);
  }
  c += " --kernel-name " + quote("regex:" + f.kernel_regex);
  c += " " + quote(fs::read_symlink("/proc/self/exe").string()) + " " + f.command;
  c += fmt::format(" -q --device {} --min-time 0", device);
  for (const char* s : {"measure.min_samples=1", "measure.max_samples=1", "measure.warmup=0", "measure.throttle=0"})
    c += std::string(" --set ") + s;
  for (const std::string& s : f.sets) c += " --set " + quote(s);
  return c;
}

// Fills the ncu blocks; returns "" on success, else why ncu could not be used. csv_dir: keep ncu's CSV of
// each family there (<family>.csv) when not empty.
std::string collect_ncu(const std::string& ncu, const profile::Selection& sel, const Workload& w, int device,
                        const std::string& csv_dir, json& prof, std::vector<std::string>& notes) {
  for (const Family& f : families(sel, w)) {
    std::fprintf(stderr, "profile: ncu on `dropbench %s` (%s)...\n", f.command.c_str(), f.name.c_str());
    std::vector<profile::NcuLaunch> launches;
    Captured r;
    for (bool sections : {false, true}) {
      r = capture(ncu_command(ncu, f, device, sections));
      const std::string all = r.out + r.err;
      if (all.find("ERR_NVGPUCTRPERM") != std::string::npos)
        return "ncu cannot read the performance counters (ERR_NVGPUCTRPERM: profiling needs admin rights here)";
      if (!csv_dir.empty()) {
        std::ofstream c(fs::path(csv_dir) / (f.name + (sections ? "_sections" : "") + ".csv"));
        c << r.out;
      }
      launches = profile::parse_ncu_csv(r.out);
      std::erase_if(launches, [](const profile::NcuLaunch& l) { return profile::classify_launch(l.kernel).empty(); });
      if (!launches.empty()) {
        if (sections) notes.push_back(f.name + ": the metric list was refused, used ncu's sections (no per-pipe counts)");
        break;
      }
    }
    if (launches.empty())
      return fmt::format("ncu profiled no kernel of `dropbench {}` (exit {}): {}", f.command, r.code, reason_of(r.err + r.out));
    // Last launch of each kernel wins (attention: the fused reference launch of a point comes first; the
    // backward: the checks' deterministic launches come first; gemm: after any set-up).
    std::map<std::string, const profile::NcuLaunch*> last;
    for (const auto& l : launches) last[profile::classify_launch(l.kernel)] = &l;
    for (const auto& [kind, l] : last) {
      std::string key = kind;
      if (f.key_of) key = f.key_of(kind);
      else if (kind == "attn_fused" || kind == "wgmma_fused")  // a name without R/TW
        key = fmt::format("{}_r{}_tw{}", kind, w.rounds, w.threshold_bits);
      if (kind == "gemm") key = f.name;
      const json block = profile::ncu_block(*l, f.work(key), f.work_unit, f.workload(key));
      if (key.rfind("gemm_", 0) == 0) {
        if (!prof["kernels"].contains(key)) continue;
        prof["kernels"][key]["ncu"] = block;
      } else {
        if (!prof["sass"].contains(key)) prof["sass"][key] = {{"elements_per_iteration", 1}, {"per_iteration", json::object()}};
        prof["sass"][key]["ncu"] = block;
      }
    }
  }
  return "";
}

// ---- the SASS path ---------------------------------------------------------------------------------------
std::string collect_sass(const profile::Selection& sel, json& prof, std::vector<std::string>& notes) {
  const fs::path root = root_dir(), script = root / "scripts/profile_sass.py";
  if (!fs::exists(script)) return "scripts/profile_sass.py not found (run from the source tree)";
  if (find_on_path("python3").empty()) return "python3 not on PATH";
  std::fprintf(stderr, "profile: compiling and disassembling the kernels (scripts/profile_sass.py)...\n");
  const Captured r = capture("python3 " + quote(script.string()) + " --print --src " + quote(root.string()));
  if (r.code != 0) return "scripts/profile_sass.py failed: " + reason_of(r.err + r.out);
  json got;
  try {
    got = json::parse(r.out.substr(r.out.find('{')));
  } catch (const std::exception& e) {
    return std::string("scripts/profile_sass.py printed no JSON: ") + e.what();
  }
  for (const auto& [k, v] : got["sass"].items()) {
    const bool is_rng = k.rfind("rng_", 0) == 0, is_attn = k.rfind("attn_", 0) == 0 || k.rfind("wgmma_", 0) == 0;
    if ((is_rng && sel.rng) || (is_attn && sel.attention)) {
      prof["sass"][k] = v;
      prof["sass"][k]["ncu"] = nullptr;
    }
  }
  prof["sass_meta"] = got["sass_meta"];
  if (sel.gemm) notes.push_back("gemm: cuBLASLt is closed source, no SASS to count: per_flop kept from the base profile");
  if (sel.attention_bwd)
    notes.push_back("attention_bwd: the wgmma backward's demand is measured only (ncu): nothing counted, the model derives it");
  return "";
}

// How the counts were collected: path "ncu" or "sass" ("" when neither worked, said on stderr), the ncu binary
// found and why Nsight Compute was not used.
struct Collected {
  std::string path, ncu, ncu_why;
};

// The counts into prof: Nsight Compute where it is on PATH with a GPU (and not --no-ncu), else the SASS path.
Collected collect_counts(const ProfileOptions& o, const profile::Selection& sel, const Workload& w, json& prof,
                         std::vector<std::string>& notes) {
  Collected c;
  c.ncu = find_on_path("ncu");
  if (o.no_ncu) c.ncu_why = "--no-ncu";
  else if (c.ncu.empty()) c.ncu_why = "ncu not on PATH";
  else if (device_count() == 0) c.ncu_why = "no CUDA device";
  else {
    require_gpu(o.device);
    if (!o.ncu_csv.empty()) fs::create_directories(o.ncu_csv);
    c.ncu_why = collect_ncu(c.ncu, sel, w, o.device, o.ncu_csv, prof, notes);
    if (c.ncu_why.empty()) c.path = "ncu";
  }
  if (!c.path.empty()) return c;
  std::fprintf(stderr, "profile: not using Nsight Compute: %s; SASS path\n", c.ncu_why.c_str());
  const std::string sass_why = collect_sass(sel, prof, notes);
  if (!sass_why.empty()) {
    std::fprintf(stderr, "dropbench: profile: no way to collect counts: Nsight Compute: %s; SASS: %s\n",
                 c.ncu_why.c_str(), sass_why.c_str());
    return c;
  }
  c.path = "sass";
  return c;
}

// The profile's name (the --out file's stem) and its "collected" object: path, kernels, base, date, ncu, notes.
void stamp_collected(json& prof, const ProfileOptions& o, const std::string& base, const Collected& got,
                     const std::vector<std::string>& notes) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  prof["name"] = fs::path(o.out).stem().string();
  prof["collected"] = {{"path", got.path},
                       {"kernels", o.kernels},
                       {"base", base},
                       {"date", date},
                       {"ncu", got.ncu.empty() ? json(nullptr) : json(got.ncu)},
                       {"why_not_ncu", got.path == "ncu" ? json(nullptr) : json(got.ncu_why)},
                       {"notes", notes}};
  if (got.path == "ncu") prof["collected"]["device"] = device_json(o.device);
}

// The table printed after writing: kernel x demand per unit of work (element; FLOP for the GEMM), and its source.
Table demand_table(const json& prof, const profile::Selection& sel, const Workload& w) {
  Table t;
  std::vector<std::pair<std::string, std::map<std::string, double>>> rows;
  std::set<std::string> cols;
  for (const std::string& k : profile::kernel_keys(sel, static_cast<int>(w.threshold_bits))) {
    // Not collected: the backward on the SASS path.
    if (!prof.at("sass").contains(k) && !prof.at("kernels").contains(k)) continue;
    auto d = profile::table_demand(prof, k);
    for (const auto& [u, v] : d) cols.insert(u);
    rows.emplace_back(k, d);
  }
  t.columns = {"kernel", "source", "per"};
  t.columns.insert(t.columns.end(), cols.begin(), cols.end());
  for (const auto& [k, d] : rows) {
    const json& e = prof.at("sass").contains(k) ? prof.at("sass").at(k) : prof.at("kernels").at(k);
    const bool measured = e.contains("ncu") && e.at("ncu").is_object();
    std::vector<std::string> r = {k, measured ? "ncu" : (k.rfind("gemm", 0) == 0 ? "hand" : "sass"),
                                  k.rfind("gemm", 0) == 0 ? "FLOP" : "element"};
    for (const std::string& u : cols) r.push_back(d.count(u) ? fmt_num(d.at(u)) : "");
    t.rows.push_back(r);
  }
  return t;
}

}  // namespace

Command make_profile_command() {
  auto o = std::make_shared<ProfileOptions>();
  Command c;
  c.name = "profile";
  c.summary = "Collect per-kernel unit demand (ncu counters, else SASS counts) into a profile JSON for `model`";
  c.help =
      "Per kernel (RNG tile kernel for R 3/5/7/10 x threshold width 8/16/32; attention none / mask / fused; the\n"
      "QKV GEMM fp8 / bf16) the demand on each unit, written as a profile in the schema of\n"
      "configs/profiles/h200.json (`dropbench model --profile FILE` reads it). Starts from --base (default that\n"
      "file) and fills it in:\n"
      "  ncu path (ncu on PATH, a GPU, readable counters): runs dropbench itself under Nsight Compute\n"
      "    (--clock-control none), one sweep per family at SQ 4096 (RNG: every R x TW; attention, both the\n"
      "    mma.sync and the wgmma kernel (keys attn_* / wgmma_*): none, mask\n"
      "    and fused for R 3/5/7/10, causal and not; attention_bwd: the wgmma backward alone (pass bwd, keys\n"
      "    wgmma_bwd_*), one sweep per causality x R; GEMM: fp8, bf16); each kernel's \"ncu\" block gets\n"
      "    executed warp instructions per element (per FLOP for the GEMM) in total and per pipe, HBM / L2\n"
      "    bytes, the measured workload, the measured utilisations and launch resources. `dropbench model`\n"
      "    uses them in place of the static counts (--demand ncu, docs/model.md \"Demand sources\").\n"
      "  SASS path (--no-ncu, or ncu unusable): scripts/profile_sass.py compiles and disassembles the kernels\n"
      "    (needs nvcc, cuobjdump, nvdisasm) and replaces the \"sass\" counts; the GEMM keeps its hand-written\n"
      "    per-FLOP demand; the backward gets nothing (the model derives its demand).\n"
      "  power path (--power-from REPORT...): per-kernel power from reports whose variants carry \"power\"\n"
      "    into the profile's \"power\" object (no counts collected, no GPU; --machine gives the static power),\n"
      "    or with --into-machine into the --machine file's own \"power\" (a card's power: it takes the place of\n"
      "    the profile's for the same kernel).\n"
      "The file's \"collected\" object says which path was taken. Table: kernel x demand per unit of work.\n"
      "Exit 2 with one line when neither path works.\n"
      "Examples:\n"
      "  dropbench profile --out results/h200/profile.json\n"
      "  dropbench profile --kernels rng --no-ncu --out /tmp/sass.json\n"
      "  dropbench profile --kernels attention_bwd --out /tmp/bwd.json   # the wgmma backward's ncu blocks\n"
      "  dropbench profile --power-from results/h200/verdict/run_llama3-70b.json --out /tmp/power.json   # per-kernel power\n"
      "  dropbench profile $(for f in results/h100/train/train_llama3-{8b,70b}_*.json results/h100/train/gemms/power/*.json; \\\n"
      "    do echo --power-from $f; done) --machine configs/machines/h100-sxm.json --into-machine   # a card's power";
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    o->out_opt = app.add_option("--out", o->out, "Profile JSON to write (default profile.json)");
    app.add_option("--kernels", o->kernels, "Comma list of kernel families: rng, attention, attention_bwd, gemm");
    app.add_option("--base", o->base, "Profile to start from (default configs/profiles/h200.json)");
    app.add_flag("--no-ncu", o->no_ncu, "Skip Nsight Compute; count SASS instead");
    app.add_option("--device", o->device, "CUDA device index (ncu path)");
    app.add_option("--ncu-csv", o->ncu_csv, "Keep Nsight Compute's CSV output of each family in this directory");
    app.add_option("--power-from", o->power_from,
                   "Fit per-kernel power from these reports (variants with \"power\" data) into the profile's \"power\" "
                   "object instead of collecting counts (repeatable; no GPU needed)")
        ->take_all()
        ->allow_extra_args(false);
    o->machine_opt = app.add_option("--machine", o->machine, "Machine file for --power-from (cap_w, static_w)");
    app.add_flag("--into-machine", o->into_machine,
                 "With --power-from: write the fitted power into the --machine file's \"power\" (replacing it) "
                 "instead of a profile to --out");
  };
  c.run = [o](RunContext&) -> int {
    const profile::Selection sel = profile::parse_kernels(o->kernels);
    check_output_path(o->out, "--out");
    const std::string base = o->base.empty() ? (root_dir() / "configs/profiles/h200.json").string() : o->base;
    json prof = read_json(base);
    base_profile(prof, base);  // the base must be a valid profile
    // The machine file is rewritten: it must be named, and nothing else is written.
    if (o->into_machine && (o->power_from.empty() || o->machine_opt->count() == 0 || o->out_opt->count() > 0))
      throw UsageError("--into-machine: needs --power-from and an explicit --machine, and takes no --out (allowed: "
                       "--power-from REPORT... --machine FILE --into-machine)");
    if (!o->power_from.empty()) return run_power_fit(*o, prof, base);
    const Workload w = builtin_config().workload;
    std::vector<std::string> notes;
    const Collected got = collect_counts(*o, sel, w, prof, notes);
    if (got.path.empty()) return 2;
    stamp_collected(prof, *o, base, got, notes);
    model::profile_from_json(prof, o->out);  // what we write must load in the model
    write_text_atomically(o->out, prof.dump(2) + "\n", "--out");
    std::cout << render(demand_table(prof, sel, w), "md");
    std::cout << fmt::format("\npath: {}{}; wrote {}\n", got.path, got.path == "ncu" ? "" : " (" + got.ncu_why + ")",
                             o->out);
    for (const std::string& n : notes) std::cout << "note: " << n << "\n";
    return 0;
  };
  return c;
}

}  // namespace dropbench
