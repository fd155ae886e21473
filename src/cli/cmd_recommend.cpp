// `dropbench recommend`: rank the pipelines (fused / overlap / chunked / baseline) and the Philox round counts
// for one attention-block shape on one machine, with the resource model (docs/model.md). CPU only.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/model/model.hpp"
#include "src/cli/model_cli.hpp"

namespace dropbench {

namespace {

struct RecOpts {
  std::string shape;
  std::string machine = "configs/machines/h200.json";
  std::string profile = "configs/profiles/h200.json";
  std::string reference = "configs/machines/h200.json";
  std::string residency = "auto";
  std::string clock = "model";
  std::string rounds = "3,5,7,10";
  std::string format = "md";
  std::string demand = "ncu";
};

// "b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128[,causal=1][,dtype=fp8][,tw=8][,p=0.1]" -> workload.
Workload parse_shape(const std::string& s) {
  static const std::map<std::string, std::string> keys = {
      {"b", "batch"},        {"batch", "batch"},     {"sq", "sq"},           {"e", "embed"},
      {"embed", "embed"},    {"hq", "q_heads"},      {"hkv", "kv_heads"},    {"dh", "head_dim"},
      {"causal", "causal"},  {"dtype", "dtype"},     {"tw", "threshold_bits"}, {"p", "dropout_p"},
      {"chunk", "chunk"}};
  Workload w = builtin_config().workload;
  if (s.empty()) throw UsageError("--shape: empty (example: b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128)");
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("--shape: '{}' is not key=value (keys: b, sq, e, hq, hkv, dh, causal, dtype, tw, p, chunk)", item));
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto it = keys.find(k);
    if (it == keys.end())
      throw UsageError(fmt::format("--shape: unknown key '{}' (allowed: b, sq, e, hq, hkv, dh, causal, dtype, tw, p, chunk)", k));
    json val;
    if (it->second == "dtype") {
      val = v;
    } else if (it->second == "causal") {
      if (v == "1" || v == "true") val = true;
      else if (v == "0" || v == "false") val = false;
      else throw UsageError(fmt::format("--shape: causal={} (allowed: 0, 1, true, false)", v));
    } else if (it->second == "dropout_p") {
      try {
        val = std::stod(v);
      } catch (const std::exception&) {
        throw UsageError(fmt::format("--shape: p={} is not a number", v));
      }
    } else {
      try {
        size_t pos = 0;
        const long long x = std::stoll(v, &pos);
        if (pos != v.size()) throw std::invalid_argument(v);
        val = x;
      } catch (const std::exception&) {
        throw UsageError(fmt::format("--shape: {}={} is not an integer", k, v));
      }
    }
    set_workload_field(w, it->second, val, "--shape: " + k);
  }
  validate_workload(w, "--shape: ");
  return w;
}

std::vector<int64_t> parse_rounds(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item != "3" && item != "5" && item != "7" && item != "10")
      throw UsageError(fmt::format("--rounds: '{}' (allowed: 3, 5, 7, 10, comma-separated)", item));
    out.push_back(std::stoll(item));
  }
  if (out.empty()) throw UsageError("--rounds: empty (allowed: 3, 5, 7, 10)");
  return out;
}

struct Entry {
  std::string pipeline;
  int64_t rounds = 0;
  double seconds = 0;
  std::string limiter, how, detail;
};

std::string region_of(double ratio) {
  if (ratio < 0.5) return "GEMM >> RNG";
  if (ratio <= 1.0) return "RNG <~ GEMM";
  return "RNG > GEMM";
}

std::string region_text(double ratio) {
  if (ratio < 0.5)
    return "the GEMM is long enough to hide the whole RNG if they can share the SMs (overlap), and fusing the RNG "
           "into attention adds its integer work to a kernel that is already issue-bound";
  if (ratio <= 1.0)
    return "the RNG still fits under the GEMM in time, but only a good overlap mechanism hides most of it";
  return "the RNG is longer than the GEMM: overlap can hide at most the GEMM's length; the rest shows";
}

constexpr const char* kR3Caveat =
    "caveat (R = 3): Philox-3 is biased under dropbench's structured counters (docs/rng-scheme.md): byte chi^2 ~ "
    "850,000 vs ~240 for R >= 5, and the keep rate actually applied is off -- z = -24.6 in the attention tile "
    "scheme at TW 8, up to +2.5 points (z = +3862) in the flat scheme at TW 32 (H200, 2^31 elements). R >= 5 is "
    "statistically clean in these tests; rank R = 3 only if that bias is acceptable.";

}  // namespace

Command make_recommend_command() {
  auto ro = std::make_shared<RecOpts>();
  Command c;
  c.name = "recommend";
  c.summary = "Rank fused / overlap / chunked / baseline and Philox round counts for a block shape (resource model, CPU)";
  c.help =
      "Predicts, with the resource model of `dropbench model` (docs/model.md), every pipeline at every Philox\n"
      "round count for one attention-block shape, ranks them, names each one's limiting unit and the region of\n"
      "the shape (GEMM >> RNG: RNG/GEMM < 0.5; RNG <~ GEMM: 0.5..1; RNG > GEMM: > 1), and shows the RNG's share\n"
      "of the baseline block time, also on --reference (default H200) when --machine is another machine.\n"
      "--shape keys: b, sq, e, hq, hkv, dh, causal (0/1), dtype (fp8/bf16), tw (8/16/32), p, chunk.\n"
      "Examples:\n"
      "  dropbench recommend --shape \"b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128\"\n"
      "  dropbench recommend --shape \"b=1,sq=8192,e=16384,hq=128,hkv=8,dh=128,causal=1\" \\\n"
      "      --machine configs/machines/blackwell-projection.json\n"
      "Needs no GPU.";
  c.sweeps = false;
  c.add_options = [ro](CLI::App& app) {
    app.add_option("--shape", ro->shape, "Block shape, e.g. b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128")->required();
    app.add_option("--machine", ro->machine, "Machine description (configs/machines/*.json)");
    app.add_option("--profile", ro->profile, "Kernel demand profile (configs/profiles/*.json)");
    app.add_option("--reference", ro->reference, "Machine to compare the RNG share with (\"\" = none)");
    app.add_option("--residency", ro->residency, "auto | serial | coresident | coresident:WARPS");
    app.add_option("--clock", ro->clock, "model | max | sustained")->check(CLI::IsMember({"model", "max", "sustained"}));
    app.add_option("--rounds", ro->rounds, "Philox round counts to rank (subset of 3,5,7,10)");
    app.add_option("--format", ro->format, "md | json")->check(CLI::IsMember({"md", "json"}));
    app.add_option("--demand", ro->demand, "ncu (measured counts where the profile holds them) | sass (static only)")
        ->check(CLI::IsMember({"ncu", "sass"}));
  };
  c.run = [ro](RunContext&) {
    const Workload base = parse_shape(ro->shape);
    const std::vector<int64_t> rounds = parse_rounds(ro->rounds);
    const model::Machine m = model::load_machine(mcli::default_path(ro->machine));
    model::Profile p = model::load_profile(mcli::default_path(ro->profile));
    p.use_ncu = ro->demand == "ncu";
    std::optional<model::Machine> ref;
    if (!ro->reference.empty()) {
      const std::string rp = mcli::default_path(ro->reference);
      model::Machine r = model::load_machine(rp);
      if (r.name != m.name) ref = r;
    }
    model::Options o;
    o.residency = ro->residency;
    o.clock = ro->clock;

    std::vector<Entry> entries;
    std::map<int64_t, model::Prediction> preds;
    for (int64_t r : rounds) {
      Workload w = base;
      w.rounds = r;
      const model::Prediction pr = model::predict(m, p, w, o);
      preds.emplace(r, pr);
      for (const auto& pl : pr.pipelines) entries.push_back({pl.name, r, pl.seconds, pl.limiter, pl.how, pl.detail});
    }
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.seconds < b.seconds; });
    const int64_t rref = std::find(rounds.begin(), rounds.end(), 7) != rounds.end() ? 7 : rounds.back();
    const model::Prediction& p7 = preds.at(rref);
    const double ratio = p7.rng.seconds / p7.gemm.seconds;
    auto share = [](const model::Prediction& pr) {
      const model::PipelineTime* b = pr.pipeline("baseline");
      return pr.rng.seconds / b->seconds;
    };
    std::map<int64_t, double> ref_share;
    if (ref)
      for (int64_t r : rounds) {
        Workload w = base;
        w.rounds = r;
        ref_share[r] = share(model::predict(*ref, p, w, o));
      }
    const double M = static_cast<double>(base.batch) * base.sq,
                 N = static_cast<double>(base.q_heads + 2 * base.kv_heads) * base.head_dim;

    if (ro->format == "json") {
      json out;
      out["shape"] = to_json(base);
      out["machine"] = m.path;
      out["profile"] = p.path;
      out["region"] = {{"name", region_of(ratio)}, {"rng_over_gemm", ratio}, {"rounds", rref}};
      json ks = json::object();
      for (const auto& [r, pr] : preds) {
        ks[std::to_string(r)] = {
            {"gemm_s", pr.gemm.seconds},           {"gemm_limiter", pr.gemm.limiter},
            {"rng_s", pr.rng.seconds},             {"rng_limiter", pr.rng.limiter},
            {"attention_mask_s", pr.attn_mask.seconds}, {"attention_mask_limiter", pr.attn_mask.limiter},
            {"attention_fused_s", pr.attn_fused.seconds}, {"attention_fused_limiter", pr.attn_fused.limiter},
            {"rng_share_of_baseline", share(pr)},
            {"demand_source", {{"gemm", pr.gemm.source}, {"rng", pr.rng.source}, {"attention_mask", pr.attn_mask.source},
                               {"attention_fused", pr.attn_fused.source}}}};
        if (ref) ks[std::to_string(r)]["rng_share_of_baseline_on_reference"] = ref_share.at(r);
      }
      out["kernels"] = ks;
      json rk = json::array();
      for (size_t i = 0; i < entries.size(); ++i)
        rk.push_back({{"rank", i + 1},
                      {"pipeline", entries[i].pipeline},
                      {"rounds", entries[i].rounds},
                      {"seconds", entries[i].seconds},
                      {"limiter", entries[i].limiter},
                      {"how", entries[i].detail}});
      out["ranking"] = rk;
      if (ref) out["reference"] = ref->path;
      if (std::find(rounds.begin(), rounds.end(), 3) != rounds.end()) out["caveat_r3"] = kR3Caveat;
      std::cout << out.dump(2) << "\n";
      return 0;
    }

    std::cout << fmt::format(
        "dropbench recommend: B {} x SQ {}, E {}, {} query / {} KV heads, dH {}, {}, {} QKV GEMM, dropout p {}, "
        "{}-bit thresholds\nmachine {} ({}), profile {}\n\n",
        base.batch, base.sq, base.embed, base.q_heads, base.kv_heads, base.head_dim, base.causal ? "causal" : "non-causal",
        base.dtype, base.dropout_p, base.threshold_bits, m.name, m.path, p.path);
    std::cout << fmt::format("kernels at Philox-{}: QKV GEMM {:g}x{:g}x{} {} {} us ({}) | RNG mask {} us ({}) | "
                             "attention(mask) {} us ({}) | attention(fused) {} us ({})\n",
                             rref, M, N, base.embed, base.dtype, mcli::us(p7.gemm.seconds), p7.gemm.limiter,
                             mcli::us(p7.rng.seconds), p7.rng.limiter, mcli::us(p7.attn_mask.seconds),
                             p7.attn_mask.limiter, mcli::us(p7.attn_fused.seconds), p7.attn_fused.limiter);
    std::cout << fmt::format("demand (--demand {}): {}\n", ro->demand, model::kernel_sources(p7));
    std::cout << fmt::format("region: {} (RNG / GEMM = {:.2f} at Philox-{}): {}\n\n", region_of(ratio), ratio, rref,
                             region_text(ratio));
    Table t;
    t.columns = {"rank", "pipeline", "rounds", "predicted_us", "vs_best_%", "limiting_unit", "how"};
    const double best = entries.front().seconds;
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      t.rows.push_back({std::to_string(i + 1), e.pipeline, std::to_string(e.rounds), mcli::us(e.seconds),
                        fmt::format("+{:.1f}", 100 * (e.seconds / best - 1)), e.limiter, e.how});
    }
    std::cout << render(t, "md");
    std::cout << fmt::format("\nhow (Philox-{}):\n", rref);
    for (const auto& pl : p7.pipelines) std::cout << fmt::format("  {:<9} {}\n", pl.name, pl.detail);
    if (ro->residency != "coresident") {
      Workload w = base;
      w.rounds = rref;
      model::Options oc = o;
      oc.residency = "coresident";
      const model::Prediction pc = model::predict(m, p, w, oc);
      const double saved = p7.pipeline("baseline")->seconds - pc.pipeline("overlap")->seconds;
      std::cout << fmt::format(
          "what if the GEMM left room for the RNG (--residency coresident: >= {:g} RNG warps per SM beside it, e.g. a GEMM "
          "built to share its SMs): overlap at Philox-{} = {} us, hiding {:.0f}% of the RNG (limited by {})\n",
          m.rng_saturation_warps, rref, mcli::us(pc.pipeline("overlap")->seconds), 100 * saved / p7.rng.seconds,
          pc.pipeline("overlap")->limiter);
    }
    std::cout << "\nRNG share of the baseline block time (RNG / (GEMM + RNG + attention(mask))):";
    for (int64_t r : rounds) std::cout << fmt::format(" R{} {:.1f}%", r, 100 * share(preds.at(r)));
    std::cout << "\n";
    if (ref) {
      std::cout << fmt::format("  on {} (reference):", ref->name);
      for (int64_t r : rounds) std::cout << fmt::format(" R{} {:.1f}%", r, 100 * ref_share.at(r));
      std::cout << fmt::format("\n  -> Philox-{} share moves from {:.1f}% ({}) to {:.1f}% ({})\n", rref,
                               100 * ref_share.at(rref), ref->name, 100 * share(p7), m.name);
    }
    auto gr_share = [](const model::Prediction& pr) { return pr.rng.seconds / (pr.gemm.seconds + pr.rng.seconds); };
    std::cout << fmt::format("RNG / (GEMM + RNG), the part an overlap acts on, at Philox-{}: {:.1f}%", rref, 100 * gr_share(p7));
    if (ref) {
      Workload w = base;
      w.rounds = rref;
      std::cout << fmt::format(" (on {}: {:.1f}%)", ref->name, 100 * gr_share(model::predict(*ref, p, w, o)));
    }
    std::cout << "\n";
    const auto& best_e = entries.front();
    std::cout << fmt::format("best: {} at Philox-{} ({} us, limited by {})", best_e.pipeline, best_e.rounds,
                             mcli::us(best_e.seconds), best_e.limiter);
    const auto first_clean = std::find_if(entries.begin(), entries.end(), [](const Entry& e) { return e.rounds >= 5; });
    if (best_e.rounds == 3 && first_clean != entries.end())
      std::cout << fmt::format("; best with R >= 5: {} at Philox-{} ({} us, +{:.1f}%)", first_clean->pipeline,
                               first_clean->rounds, mcli::us(first_clean->seconds),
                               100 * (first_clean->seconds / best - 1));
    std::cout << "\n";
    if (std::find(rounds.begin(), rounds.end(), 3) != rounds.end()) std::cout << kR3Caveat << "\n";
    return 0;
  };
  return c;
}

}  // namespace dropbench
