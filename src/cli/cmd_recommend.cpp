// `dropbench recommend`: rank the pipelines (fused / overlap / chunked / baseline) and the Philox round counts
// for one attention-block shape on one machine, with the resource model (docs/model.md). CPU only. This file
// parses the options and prints; the ranking is src/model/recommend.{hpp,cpp}.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "src/block/pipeline_plan.hpp"
#include "src/cli/cli.hpp"
#include "src/core/input.hpp"
#include "src/cli/model_cli.hpp"
#include "src/model/model.hpp"
#include "src/model/recommend.hpp"

namespace dropbench {

namespace {

struct RecOpts {
  std::string shape;
  std::string machine = "configs/machines/h200.json";
  std::string profile = "configs/profiles/h200.json";
  std::string reference = "configs/machines/h200.json";
  std::string residency = "auto";
  std::string clock = "model";
  std::string rounds = fmt::format("{}", fmt::join(kPhiloxRounds, ","));
  std::string format = "md";
  std::string demand = "ncu";
  std::string power = "on";
  std::string pass = "fwd";
  int64_t layers = 0;          // 0: not given (one layer)
  double mask_budget_gib = 0;  // 0: no budget
};

// "b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128[,causal=1][,dtype=fp8][,tw=8][,p=0.1]" -> workload.
Workload parse_shape(const std::string& s) {
  static const std::map<std::string, std::string> keys = {
      {"b", "batch"},        {"batch", "batch"},     {"sq", "sq"},           {"e", "embed"},
      {"embed", "embed"},    {"hq", "q_heads"},      {"hkv", "kv_heads"},    {"dh", "head_dim"},
      {"causal", "causal"},  {"dtype", "dtype"},     {"tw", "threshold_bits"}, {"p", "dropout_p"},
      {"chunk", "chunk"},    {"attn", "attention_kernel"}};
  Workload w = builtin_config().workload;
  if (s.empty()) throw UsageError("--shape: empty (example: b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128)");
  std::map<std::string, std::string> seen;  // field -> the item that set it: b and batch are one key
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("--shape: '{}' is not key=value (keys: b, sq, e, hq, hkv, dh, causal, dtype, tw, p, chunk, attn)", item));
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto it = keys.find(k);
    if (it == keys.end())
      throw UsageError(fmt::format("--shape: unknown key '{}' (allowed: b, sq, e, hq, hkv, dh, causal, dtype, tw, p, chunk, attn)", k));
    // A key given twice is refused: silently keeping the last value would hide a typo.
    if (auto [prev, fresh] = seen.emplace(it->second, item); !fresh)
      throw UsageError(fmt::format("--shape: key '{}' given twice ('{}', '{}'; allowed: each key once, b = batch, "
                                   "e = embed)",
                                   k, prev->second, item));
    json val;
    if (it->second == "dtype" || it->second == "attention_kernel") {
      val = v;
    } else if (it->second == "causal") {
      if (v == "1" || v == "true") val = true;
      else if (v == "0" || v == "false") val = false;
      else throw UsageError(fmt::format("--shape: causal={} (allowed: 0, 1, true, false)", v));
    } else if (it->second == "dropout_p") {
      const std::optional<double> p = parse_finite_number(v);
      if (!p) throw UsageError(fmt::format("--shape: p={} is not a number (allowed: [0, 1))", one_line(v, 40)));
      val = *p;
    } else {
      // The config's integer rule, as text: 8192, 8K (as in configs and --set).
      val = v;
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
    if (std::none_of(std::begin(kPhiloxRounds), std::end(kPhiloxRounds),
                     [&](int r) { return item == std::to_string(r); }))
      throw UsageError(fmt::format("--rounds: '{}' (allowed: {}, comma-separated)", item, kPhiloxRoundsText));
    if (std::find(out.begin(), out.end(), std::stoll(item)) != out.end())  // it was ranked twice
      throw UsageError(fmt::format("--rounds: {} given twice (allowed: {}, each at most once)", item, kPhiloxRoundsText));
    out.push_back(std::stoll(item));
  }
  if (out.empty()) throw UsageError(fmt::format("--rounds: empty (allowed: {})", kPhiloxRoundsText));
  return out;
}

using model::Recommendation;

// One line on the energy ranking: no power data, the same order as by time, or how they differ.
std::string power_line(const model::Machine& m, const model::Profile& p, const Recommendation& rec) {
  if (!p.use_power) return "energy: not ranked (--power off)";
  if (!m.has_power()) return fmt::format("energy: no power data (machine {} has no cap_w / static_w)", m.name);
  if (rec.energy_ranking.empty())
    return fmt::format("energy: no power data (neither machine {} nor profile {} has per-kernel power for these kernels: "
                       "`dropbench profile --power-from REPORT` fits it from reports with power)",
                       m.name, p.path);
  const size_t n = rec.energy_ranking.size();
  std::string scope = n == rec.ranking.size() ? "" : fmt::format(" ({} of {} entries have power data)", n, rec.ranking.size());
  if (!rec.energy_differs) return "energy: the least-energy order is the fastest-first order" + scope;
  const model::RankedEntry& e = rec.energy_ranking.front();
  if (rec.energy_best_differs) {
    const model::RankedEntry* t = nullptr;
    for (const model::RankedEntry& x : rec.ranking)
      if (x.energy_j >= 0) {
        t = &x;
        break;
      }
    return fmt::format("energy: the rankings differ -- least energy: {} at Philox-{} ({:.3g} mJ, {} us); fastest: {} at "
                       "Philox-{} ({:.3g} mJ, {} us){}",
                       e.pipeline, e.rounds, e.energy_j * 1e3, mcli::us(e.seconds), t->pipeline, t->rounds,
                       t->energy_j * 1e3, mcli::us(t->seconds), scope);
  }
  return "energy: the same best entry, but the orders below it differ" + scope;
}

json recommend_json(const Recommendation& rec, const Workload& shape, const model::Machine& m,
                    const model::Profile& p) {
  json out;
  out["shape"] = to_json(shape);
  out["machine"] = m.path;
  out["profile"] = p.path;
  out["attention_kernel"] = model::attention_family(p, shape);
  out["region"] = {{"name", model::region_of(rec.rng_over_gemm)},
                   {"rng_over_gemm", rec.rng_over_gemm},
                   {"rounds", rec.reference_rounds}};
  json ks = json::object();
  for (const auto& [r, pr] : rec.predictions) {
    ks[std::to_string(r)] = {
        {"gemm_s", pr.gemm.seconds},           {"gemm_limiter", pr.gemm.limiter},
        {"rng_s", pr.rng.seconds},             {"rng_limiter", pr.rng.limiter},
        {"attention_mask_s", pr.attn_mask.seconds}, {"attention_mask_limiter", pr.attn_mask.limiter},
        {"attention_fused_s", pr.attn_fused.seconds}, {"attention_fused_limiter", pr.attn_fused.limiter},
        {"rng_share_of_baseline", model::rng_share_of_baseline(pr)},
        {"demand_source", {{"gemm", pr.gemm.source}, {"rng", pr.rng.source}, {"attention_mask", pr.attn_mask.source},
                           {"attention_fused", pr.attn_fused.source}}}};
    if (rec.reference)
      ks[std::to_string(r)]["rng_share_of_baseline_on_reference"] = rec.reference->rng_share_of_baseline.at(r);
  }
  out["kernels"] = ks;
  json rk = json::array();
  for (size_t i = 0; i < rec.ranking.size(); ++i)
    rk.push_back({{"rank", i + 1},
                  {"pipeline", rec.ranking[i].pipeline},
                  {"rounds", rec.ranking[i].rounds},
                  {"seconds", rec.ranking[i].seconds},
                  {"limiter", rec.ranking[i].limiter},
                  {"how", rec.ranking[i].detail},
                  {"energy_j", rec.ranking[i].energy_j >= 0 ? json(rec.ranking[i].energy_j) : json(nullptr)}});
  out["ranking"] = rk;
  json ek = json::array();
  for (size_t i = 0; i < rec.energy_ranking.size(); ++i)
    ek.push_back({{"rank", i + 1},
                  {"pipeline", rec.energy_ranking[i].pipeline},
                  {"rounds", rec.energy_ranking[i].rounds},
                  {"energy_j", rec.energy_ranking[i].energy_j},
                  {"seconds", rec.energy_ranking[i].seconds}});
  out["energy_ranking"] = ek;
  out["energy"] = {{"status", power_line(m, p, rec)},
                   {"rankings_differ", rec.energy_differs},
                   {"best_differs", rec.energy_best_differs}};
  if (rec.reference) out["reference"] = rec.reference->path;
  if (rec.ranks(3)) out["caveat_r3"] = model::kR3Caveat;
  return out;
}

// The shape, the kernels at the reference round count, the region.
void print_header(const Recommendation& rec, const Workload& base, const model::Machine& m, const model::Profile& p,
                  const std::string& demand) {
  const int64_t rref = rec.reference_rounds;
  const model::Prediction& p7 = rec.at_reference_rounds();
  const double M = static_cast<double>(base.batch) * base.sq,
               N = static_cast<double>(base.q_heads + 2 * base.kv_heads) * base.head_dim;
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
  std::cout << fmt::format("attention kernel: {}{}\n", model::attention_family(p, base),
                           base.attention_kernel == "auto" ? " (attn=auto: the profile's attention_kernel_auto)" : "");
  std::cout << fmt::format("demand (--demand {}): {}\n", demand, model::kernel_sources(p7));
  std::cout << fmt::format("region: {} (RNG / GEMM = {:.2f} at Philox-{}): {}\n\n", model::region_of(rec.rng_over_gemm),
                           rec.rng_over_gemm, rref, model::region_text(rec.rng_over_gemm));
}

Table ranking_table(const Recommendation& rec) {
  Table t;
  t.columns = {"rank", "pipeline", "rounds", "predicted_us", "vs_best_%", "energy_mj", "limiting_unit", "how"};
  const double best = rec.ranking.front().seconds;
  for (size_t i = 0; i < rec.ranking.size(); ++i) {
    const model::RankedEntry& e = rec.ranking[i];
    t.rows.push_back({std::to_string(i + 1), e.pipeline, std::to_string(e.rounds), mcli::us(e.seconds),
                      fmt::format("+{:.1f}", 100 * (e.seconds / best - 1)),
                      e.energy_j >= 0 ? fmt::format("{:.3g}", e.energy_j * 1e3) : "-", e.limiter, e.how});
  }
  return t;
}

// By energy: least first, over the entries with power data.
Table energy_table(const Recommendation& rec) {
  Table t;
  t.columns = {"energy_rank", "pipeline", "rounds", "energy_mj", "vs_least_%", "predicted_us"};
  const double best = rec.energy_ranking.front().energy_j;
  for (size_t i = 0; i < rec.energy_ranking.size(); ++i) {
    const model::RankedEntry& e = rec.energy_ranking[i];
    t.rows.push_back({std::to_string(i + 1), e.pipeline, std::to_string(e.rounds), fmt::format("{:.3g}", e.energy_j * 1e3),
                      fmt::format("+{:.1f}", 100 * (e.energy_j / best - 1)), mcli::us(e.seconds)});
  }
  return t;
}

// How each pipeline is composed, the co-resident what-if, the RNG shares, the best entries, the R = 3 caveat.
void print_details(const Recommendation& rec, const model::Machine& m) {
  const int64_t rref = rec.reference_rounds;
  const model::Prediction& p7 = rec.at_reference_rounds();
  std::cout << fmt::format("\nhow (Philox-{}):\n", rref);
  for (const auto& pl : p7.pipelines) std::cout << fmt::format("  {:<9} {}\n", pl.name, pl.detail);
  if (rec.coresident)
    std::cout << fmt::format(
        "what if the GEMM left room for the RNG (--residency coresident: >= {:g} RNG warps per SM beside it, e.g. a GEMM "
        "built to share its SMs): overlap at Philox-{} = {} us, hiding {:.0f}% of the RNG (limited by {}){}\n",
        m.rng_saturation_warps, rref, mcli::us(rec.coresident->overlap.seconds),
        100 * rec.coresident->saved_seconds / p7.rng.seconds, rec.coresident->overlap.limiter,
        rec.coresident->energy_bound_s > 0
            ? fmt::format("; energy bound: GEMM + RNG need >= {} us at the {:g} W cap, so at most {:.0f}% of the RNG can "
                          "hide",
                          mcli::us(rec.coresident->energy_bound_s), m.cap_w, 100 * rec.coresident->max_hidden)
            : "; no power data: the energy bound is not applied");
  std::cout << "\nRNG share of the baseline block time (RNG / (GEMM + RNG + attention(mask))):";
  for (int64_t r : rec.rounds) std::cout << fmt::format(" R{} {:.1f}%", r, 100 * model::rng_share_of_baseline(rec.predictions.at(r)));
  std::cout << "\n";
  if (const auto& ref = rec.reference) {
    std::cout << fmt::format("  on {} (reference):", ref->name);
    for (int64_t r : rec.rounds) std::cout << fmt::format(" R{} {:.1f}%", r, 100 * ref->rng_share_of_baseline.at(r));
    std::cout << fmt::format("\n  -> Philox-{} share moves from {:.1f}% ({}) to {:.1f}% ({})\n", rref,
                             100 * ref->rng_share_of_baseline.at(rref), ref->name,
                             100 * model::rng_share_of_baseline(p7), m.name);
  }
  std::cout << fmt::format("RNG / (GEMM + RNG), the part an overlap acts on, at Philox-{}: {:.1f}%", rref,
                           100 * model::rng_share_of_gemm_rng(p7));
  if (rec.reference)
    std::cout << fmt::format(" (on {}: {:.1f}%)", rec.reference->name, 100 * rec.reference->rng_share_of_gemm_rng);
  std::cout << "\n";
  const model::RankedEntry& best = rec.ranking.front();
  std::cout << fmt::format("best: {} at Philox-{} ({} us, limited by {})", best.pipeline, best.rounds,
                           mcli::us(best.seconds), best.limiter);
  const model::RankedEntry* clean = rec.best_clean();
  if (best.rounds == 3 && clean)
    std::cout << fmt::format("; best with R >= 5: {} at Philox-{} ({} us, +{:.1f}%)", clean->pipeline, clean->rounds,
                             mcli::us(clean->seconds), 100 * (clean->seconds / best.seconds - 1));
  std::cout << "\n";
  if (rec.ranks(3)) std::cout << model::kR3Caveat << "\n";
}

// ---- pass train ----

// Each training-step strategy's mask memory for a network of `layers` layers (src/block/pipeline_plan.hpp).
std::map<std::string, uint64_t> network_mask_bytes(const Workload& w, int64_t layers) {
  const BlockMemory mem = block_memory(w, w.sq, 1, false);
  std::map<std::string, uint64_t> out;
  for (Pipeline p : pass_pipelines(Pass::Train)) out[pipeline_name(p)] = mask_footprint(p, mem, layers).network_bytes;
  return out;
}

json ladder_json(const std::vector<model::BudgetStep>& ladder) {
  json a = json::array();
  for (const model::BudgetStep& s : ladder)
    a.push_back({{"from_bytes", s.from_bytes}, {"strategy", s.strategy}, {"seconds", s.seconds}});
  return a;
}

json train_json(const model::TrainRecommendation& rec, const Workload& shape, const model::Machine& m,
                const model::Profile& p) {
  json out;
  out["pass"] = "train";
  out["shape"] = to_json(shape);
  out["machine"] = m.path;
  out["profile"] = p.path;
  out["layers"] = rec.layers;
  out["mask_budget_bytes"] = rec.budget;
  json rk = json::array();
  for (size_t i = 0; i < rec.ranking.size(); ++i) {
    const model::TrainEntry& e = rec.ranking[i];
    rk.push_back({{"rank", i + 1},
                  {"strategy", e.strategy},
                  {"rounds", e.rounds},
                  {"seconds", e.seconds},
                  {"fwd_seconds", e.fwd_seconds},
                  {"bwd_seconds", e.bwd_seconds},
                  {"energy_j", e.energy_j >= 0 ? json(e.energy_j) : json(nullptr)},
                  {"network_mask_bytes", e.mask_bytes},
                  {"fits_budget", e.fits},
                  {"how", e.detail}});
  }
  out["ranking"] = rk;
  const model::TrainEntry* best = rec.best_within_budget();
  out["best_within_budget"] = best ? json({{"strategy", best->strategy}, {"rounds", best->rounds}}) : json(nullptr);
  out["verdict"] = {{"rounds", rec.reference_rounds}, {"ladder", ladder_json(rec.ladder)},
                    {"text", model::ladder_text(rec.ladder)}};
  if (!rec.reference_name.empty())
    out["reference"] = {{"machine", rec.reference_name}, {"ladder", ladder_json(rec.reference_ladder)},
                        {"text", model::ladder_text(rec.reference_ladder)}};
  if (std::find(rec.rounds.begin(), rec.rounds.end(), 3) != rec.rounds.end()) out["caveat_r3"] = model::kR3Caveat;
  return out;
}

void print_train(const model::TrainRecommendation& rec, const Workload& w, const model::Machine& m,
                 const model::Profile& p) {
  const model::TrainPrediction& tp = rec.predictions.at(rec.reference_rounds);
  std::cout << fmt::format(
      "dropbench recommend --pass train: B {} x SQ {}, E {}, {} query / {} KV heads, dH {}, {}, {} GEMMs, dropout p {}; "
      "{} layer(s), mask budget {}\nmachine {} ({}), profile {}\n\n",
      w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim, w.causal ? "causal" : "non-causal", w.dtype,
      w.dropout_p, rec.layers, rec.budget > 0 ? model::bytes_text(rec.budget) : "none", m.name, m.path, p.path);
  std::cout << fmt::format(
      "kernels at Philox-{}: QKV GEMM {} us | output projection {} us | its dX {} us, dW {} us | QKV dX {} us, dW {} us "
      "| RNG {} us | attention(mask) {} us, (fused) {} us, (fused-write) {} us | attention backward (mask) {} us, "
      "(regen) {} us [{}]\n\n",
      rec.reference_rounds, mcli::us(tp.fwd.gemm.seconds), mcli::us(tp.gemm_out.seconds), mcli::us(tp.gemm_out_dx.seconds),
      mcli::us(tp.gemm_out_dw.seconds), mcli::us(tp.gemm_dx.seconds), mcli::us(tp.gemm_dw.seconds),
      mcli::us(tp.fwd.rng.seconds), mcli::us(tp.fwd.attn_mask.seconds), mcli::us(tp.fwd.attn_fused.seconds),
      mcli::us(tp.attn_fused_write.seconds), mcli::us(tp.attn_bwd_mask.seconds), mcli::us(tp.attn_bwd_regen.seconds),
      tp.attn_bwd_mask.source.rfind("derived(", 0) == 0
          ? "backward demand derived from the forward's: " + tp.attn_bwd_mask.source
          : "backward demand: mask " + tp.attn_bwd_mask.source + ", regen " + tp.attn_bwd_regen.source +
                " (docs/model.md, \"The attention backward's demand\")");
  Table t;
  t.columns = {"rank", "strategy", "rounds", "step_us", "fwd_us", "bwd_us", "vs_best_%", "energy_mj", "network_masks",
               "fits"};
  const double best = rec.ranking.front().seconds;
  for (size_t i = 0; i < rec.ranking.size(); ++i) {
    const model::TrainEntry& e = rec.ranking[i];
    t.rows.push_back({std::to_string(i + 1), e.strategy, std::to_string(e.rounds), mcli::us(e.seconds),
                      mcli::us(e.fwd_seconds), mcli::us(e.bwd_seconds), fmt::format("+{:.1f}", 100 * (e.seconds / best - 1)),
                      e.energy_j >= 0 ? fmt::format("{:.3g}", e.energy_j * 1e3) : "-", model::bytes_text(e.mask_bytes),
                      e.fits ? "yes" : "no"});
  }
  std::cout << render(t, "md");
  std::cout << fmt::format("\nhow (Philox-{}):\n", rec.reference_rounds);
  for (const model::StepTime& s : tp.strategies) std::cout << fmt::format("  {:<13} {}\n", s.name, s.detail);
  std::cout << fmt::format("\nverdict at Philox-{} ({} layer(s)): {}\n", rec.reference_rounds, rec.layers,
                           model::ladder_text(rec.ladder));
  if (!rec.reference_name.empty())
    std::cout << fmt::format("  on {} (reference): {}\n", rec.reference_name, model::ladder_text(rec.reference_ladder));
  const model::TrainEntry* b = rec.best_within_budget();
  if (rec.budget > 0)
    std::cout << (b ? fmt::format("within the budget of {}: {} at Philox-{} ({} us)\n", model::bytes_text(rec.budget),
                                  b->strategy, b->rounds, mcli::us(b->seconds))
                    : fmt::format("within the budget of {}: no strategy fits\n", model::bytes_text(rec.budget)));
  if (std::find(rec.rounds.begin(), rec.rounds.end(), 3) != rec.rounds.end()) std::cout << model::kR3Caveat << "\n";
}

const char* const kRecommendHelp =
    "Predicts, with the resource model of `dropbench model` (docs/model.md), every pipeline at every Philox\n"
    "round count for one attention-block shape, ranks them, names each one's limiting unit and the region of\n"
    "the shape (GEMM >> RNG: RNG/GEMM < 0.5; RNG <~ GEMM: 0.5..1; RNG > GEMM: > 1), and shows the RNG's share\n"
    "of the baseline block time, also on --reference (default H200) when --machine is another machine.\n"
    "--shape keys: b, sq, e, hq, hkv, dh, causal (0/1), dtype (fp8/bf16), tw (8/16/32), p, chunk,\n"
    "attn (auto/mma/wgmma: the attention kernel). With per-kernel power in the profile (`dropbench profile\n"
    "--power-from`) and a power cap in the machine file, every entry also gets its energy per block and a\n"
    "second ranking by energy; the output says when the two rankings differ.\n"
    "Examples:\n"
    "  dropbench recommend --shape \"b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128\"\n"
    "  dropbench recommend --shape \"b=1,sq=8192,e=16384,hq=128,hkv=8,dh=128,causal=1\" \\\n"
    "      --machine configs/machines/blackwell-projection.json\n"
    "--pass train ranks the training-step strategies (fused, stored, regen-overlap, fused-write: `run --help`)\n"
    "by the model's step time (forward + backward), with each one's mask memory for --layers layers and the\n"
    "verdict per mask budget (the fastest strategy at each budget; --mask-budget GIB marks what fits). The\n"
    "attention backward's demand is the profile's measured backward block where it holds one, else derived from\n"
    "the forward kernel's; the output's first lines say which (docs/model.md, \"The attention backward's demand\").\n"
    "  dropbench recommend --shape \"b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128,causal=1\" --pass train --layers 80\n"
    "Needs no GPU.";

int run_recommend(const RecOpts& ro) {
  if (ro.pass != "fwd" && ro.pass != "train")
    throw UsageError(fmt::format("--pass: '{}' is not a pass (allowed: fwd, train)", ro.pass));
  if (ro.layers < 0 || ro.layers > 4096)
    throw UsageError(fmt::format("--layers: {} is out of range (allowed: [0, 4096]; 0 = one layer)", ro.layers));
  const uint64_t budget = mask_budget_bytes(ro.mask_budget_gib, "no budget");
  if (ro.pass == "fwd" && (ro.layers != 0 || ro.mask_budget_gib != 0))
    throw UsageError("--layers / --mask-budget: only with --pass train (allowed: --pass train)");
  const Workload shape = parse_shape(ro.shape);
  const std::vector<int64_t> rounds = parse_rounds(ro.rounds);
  const model::Machine m = model::load_machine(mcli::default_path(ro.machine));
  model::Profile p = model::load_profile(mcli::default_path(ro.profile));
  p.use_ncu = ro.demand == "ncu";
  p.use_power = ro.power == "on";
  std::optional<model::Machine> ref;
  if (!ro.reference.empty()) ref = model::load_machine(mcli::default_path(ro.reference));
  model::Options o;
  o.residency = ro.residency;
  o.clock = ro.clock;
  if (ro.pass == "train") {
    const model::TrainRecommendation tr = model::recommend_train(
        m, p, shape, rounds, o, network_mask_bytes(shape, ro.layers), ro.layers, budget, ref ? &*ref : nullptr);
    if (ro.format == "json")
      std::cout << train_json(tr, shape, m, p).dump(2) << "\n";
    else
      print_train(tr, shape, m, p);
    return 0;
  }
  const Recommendation rec = model::recommend(m, p, shape, rounds, o, ref ? &*ref : nullptr);
  if (ro.format == "json") {
    std::cout << recommend_json(rec, shape, m, p).dump(2) << "\n";
    return 0;
  }
  print_header(rec, shape, m, p, ro.demand);
  std::cout << render(ranking_table(rec), "md");
  std::cout << "\n" << power_line(m, p, rec) << "\n";
  if (!rec.energy_ranking.empty()) std::cout << "\n" << render(energy_table(rec), "md");
  print_details(rec, m);
  return 0;
}

}  // namespace

Command make_recommend_command() {
  auto ro = std::make_shared<RecOpts>();
  Command c;
  c.name = "recommend";
  c.summary = "Rank fused / overlap / chunked / baseline and Philox round counts for a block shape (resource model, CPU)";
  c.help = kRecommendHelp;
  c.sweeps = false;
  c.add_options = [ro](CLI::App& app) {
    app.add_option("--shape", ro->shape, "Block shape, e.g. b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128")->required();
    app.add_option("--machine", ro->machine, "Machine description (configs/machines/*.json)");
    app.add_option("--profile", ro->profile, "Kernel demand profile (configs/profiles/*.json)");
    app.add_option("--reference", ro->reference, "Machine to compare the RNG share with (\"\" = none)");
    app.add_option("--residency", ro->residency, "auto | serial | coresident | coresident:WARPS");
    app.add_option("--clock", ro->clock, "model | max | sustained")->check(CLI::IsMember({"model", "max", "sustained"}));
    app.add_option("--rounds", ro->rounds, fmt::format("Philox round counts to rank (subset of {})", kPhiloxRoundsText));
    app.add_option("--format", ro->format, "md | json")->check(CLI::IsMember({"md", "json"}));
    app.add_option("--demand", ro->demand, "ncu (measured counts where the profile holds them) | sass (static only)")
        ->check(CLI::IsMember({"ncu", "sass"}));
    app.add_option("--power", ro->power, "on: the power term and the energy ranking where power data exists | off")
        ->check(CLI::IsMember({"on", "off"}));
    app.add_option("--pass", ro->pass, "fwd (the block's forward pipelines) | train (the training-step strategies)");
    app.add_option("--layers", ro->layers,
                   "--pass train: layers of the network whose masks are counted (0..4096; 0, the default, = one layer)");
    app.add_option("--mask-budget", ro->mask_budget_gib,
                   "--pass train: GiB the network's dropout masks may hold (0..1048576; 0 = no budget)");
  };
  c.run = [ro](RunContext&) { return run_recommend(*ro); };
  return c;
}

}  // namespace dropbench
