// Ranking pipelines and Philox round counts for one shape (recommend.hpp).
#include "src/model/recommend.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dropbench::model {

namespace {

Workload at_rounds(const Workload& shape, int64_t rounds) {
  Workload w = shape;
  w.rounds = rounds;
  return w;
}

}  // namespace

double rng_share_of_baseline(const Prediction& pr) { return pr.rng.seconds / pr.pipeline("baseline")->seconds; }

double rng_share_of_gemm_rng(const Prediction& pr) { return pr.rng.seconds / (pr.gemm.seconds + pr.rng.seconds); }

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

const char* const kR3Caveat =
    "caveat (R = 3): Philox-3 is biased under dropbench's structured counters (docs/rng-scheme.md): byte chi^2 ~ "
    "850,000 vs ~240 for R >= 5, and the keep rate actually applied is off -- z = -24.6 in the attention tile "
    "scheme at TW 8, up to +2.5 points (z = +3862) in the flat scheme at TW 32 (H200, 2^31 elements). R >= 5 is "
    "statistically clean in these tests; rank R = 3 only if that bias is acceptable.";

bool Recommendation::ranks(int64_t r) const { return std::find(rounds.begin(), rounds.end(), r) != rounds.end(); }

const RankedEntry* Recommendation::best_clean() const {
  const auto it = std::find_if(ranking.begin(), ranking.end(), [](const RankedEntry& e) { return e.rounds >= 5; });
  return it == ranking.end() ? nullptr : &*it;
}

Recommendation recommend(const Machine& m, const Profile& p, const Workload& shape, const std::vector<int64_t>& rounds,
                         const Options& o, const Machine* reference) {
  Recommendation rec;
  rec.rounds = rounds;
  for (int64_t r : rounds) {
    const Prediction pr = predict(m, p, at_rounds(shape, r), o);
    rec.predictions.emplace(r, pr);
    for (const auto& pl : pr.pipelines)
      rec.ranking.push_back({pl.name, r, pl.seconds, pl.limiter, pl.how, pl.detail, pl.energy_j});
  }
  std::stable_sort(rec.ranking.begin(), rec.ranking.end(),
                   [](const RankedEntry& a, const RankedEntry& b) { return a.seconds < b.seconds; });
  for (const RankedEntry& e : rec.ranking)
    if (e.energy_j >= 0) rec.energy_ranking.push_back(e);
  std::stable_sort(rec.energy_ranking.begin(), rec.energy_ranking.end(),
                   [](const RankedEntry& a, const RankedEntry& b) { return a.energy_j < b.energy_j; });
  if (!rec.energy_ranking.empty()) {
    // Compare with the time order of the same entries (those with power data).
    std::vector<const RankedEntry*> by_time;
    for (const RankedEntry& e : rec.ranking)
      if (e.energy_j >= 0) by_time.push_back(&e);
    for (size_t i = 0; i < by_time.size(); ++i)
      if (by_time[i]->pipeline != rec.energy_ranking[i].pipeline || by_time[i]->rounds != rec.energy_ranking[i].rounds)
        rec.energy_differs = true;
    rec.energy_best_differs = by_time.front()->pipeline != rec.energy_ranking.front().pipeline ||
                              by_time.front()->rounds != rec.energy_ranking.front().rounds;
  }
  rec.reference_rounds = rec.ranks(7) ? 7 : rounds.back();
  const Prediction& pref = rec.at_reference_rounds();
  rec.rng_over_gemm = pref.rng.seconds / pref.gemm.seconds;

  if (o.residency != "coresident") {
    // What a GEMM that leaves room for RNG warps on its SMs would give the overlap pipeline.
    Options oc = o;
    oc.residency = "coresident";
    const Prediction pc = predict(m, p, at_rounds(shape, rec.reference_rounds), oc);
    CoresidentWhatIf wi;
    wi.overlap = *pc.pipeline("overlap");
    wi.energy_bound_s = pc.overlap.energy_bound_s;
    wi.max_hidden = pc.overlap.max_hidden;
    wi.saved_seconds = pref.pipeline("baseline")->seconds - wi.overlap.seconds;
    rec.coresident = wi;
  }

  if (reference && reference->name != m.name) {
    ReferenceShares ref;
    ref.name = reference->name;
    ref.path = reference->path;
    for (int64_t r : rounds)
      ref.rng_share_of_baseline[r] = rng_share_of_baseline(predict(*reference, p, at_rounds(shape, r), o));
    ref.rng_share_of_gemm_rng =
        rng_share_of_gemm_rng(predict(*reference, p, at_rounds(shape, rec.reference_rounds), o));
    rec.reference = ref;
  }
  return rec;
}

std::vector<BudgetStep> budget_ladder(const std::vector<StrategyCost>& costs) {
  std::vector<StrategyCost> by_bytes = costs;
  std::stable_sort(by_bytes.begin(), by_bytes.end(), [](const StrategyCost& a, const StrategyCost& b) {
    return a.mask_bytes != b.mask_bytes ? a.mask_bytes < b.mask_bytes : a.seconds < b.seconds;
  });
  std::vector<BudgetStep> out;
  for (const StrategyCost& c : by_bytes)
    if (out.empty() || c.seconds < out.back().seconds) out.push_back({c.mask_bytes, c.name, c.seconds});
  return out;
}

std::string bytes_text(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", v / double(uint64_t{1} << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.0f} MiB", v / double(uint64_t{1} << 20));
  if (b >= (uint64_t{1} << 10)) return fmt::format("{:.0f} KiB", v / double(uint64_t{1} << 10));
  return fmt::format("{} B", b);
}

std::string ladder_text(const std::vector<BudgetStep>& ladder) {
  std::string out;
  for (auto it = ladder.rbegin(); it != ladder.rend(); ++it) {
    out += out.empty() ? "" : ", else ";
    out += it->strategy;
    if (it->from_bytes > 0) out += " if you can spare " + bytes_text(it->from_bytes);
  }
  if (!ladder.empty() && ladder.front().from_bytes > 0) out += ", else none fits";
  return out;
}

const BudgetStep* best_within(const std::vector<BudgetStep>& ladder, uint64_t budget) {
  const BudgetStep* best = nullptr;
  for (const BudgetStep& s : ladder)
    if (budget == 0 || s.from_bytes <= budget) best = &s;
  return best;
}

const TrainEntry* TrainRecommendation::best_within_budget() const {
  for (const TrainEntry& e : ranking)
    if (e.fits) return &e;
  return nullptr;
}

namespace {

std::vector<BudgetStep> ladder_of(const TrainPrediction& tp, const std::map<std::string, uint64_t>& mask_bytes) {
  std::vector<StrategyCost> costs;
  for (const StepTime& s : tp.strategies) {
    auto it = mask_bytes.find(s.name);
    costs.push_back({s.name, s.seconds, it == mask_bytes.end() ? 0 : it->second});
  }
  return budget_ladder(costs);
}

}  // namespace

TrainRecommendation recommend_train(const Machine& m, const Profile& p, const Workload& shape,
                                    const std::vector<int64_t>& rounds, const Options& o,
                                    const std::map<std::string, uint64_t>& mask_bytes, int64_t layers, uint64_t budget,
                                    const Machine* reference) {
  TrainRecommendation rec;
  rec.rounds = rounds;
  rec.layers = std::max<int64_t>(layers, 1);
  rec.budget = budget;
  for (int64_t r : rounds) {
    const TrainPrediction tp = predict_train(m, p, at_rounds(shape, r), o);
    for (const StepTime& s : tp.strategies) {
      auto it = mask_bytes.find(s.name);
      const uint64_t mb = it == mask_bytes.end() ? 0 : it->second;
      rec.ranking.push_back({s.name, r, s.seconds, s.fwd_seconds, s.bwd_seconds, s.energy_j, mb,
                             budget == 0 || mb <= budget, s.detail});
    }
    rec.predictions.emplace(r, tp);
  }
  std::stable_sort(rec.ranking.begin(), rec.ranking.end(),
                   [](const TrainEntry& a, const TrainEntry& b) { return a.seconds < b.seconds; });
  rec.reference_rounds = std::find(rounds.begin(), rounds.end(), 7) != rounds.end() ? 7 : rounds.back();
  rec.ladder = ladder_of(rec.predictions.at(rec.reference_rounds), mask_bytes);
  if (reference && reference->name != m.name) {
    rec.reference_name = reference->name;
    rec.reference_ladder = ladder_of(predict_train(*reference, p, at_rounds(shape, rec.reference_rounds), o), mask_bytes);
  }
  return rec;
}

}  // namespace dropbench::model
