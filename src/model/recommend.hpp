// `dropbench recommend`'s ranking: every pipeline at every Philox round count for one block shape, ranked by
// predicted time, with the shape's region (RNG / GEMM), the RNG's share of the block, the co-resident
// what-if and the same shares on a reference machine. Printing lives in src/cli/cmd_recommend.cpp. Tested in
// tests/test_recommend.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/model/model.hpp"

namespace dropbench::model {

struct RankedEntry {
  std::string pipeline;
  int64_t rounds = 0;
  double seconds = 0;
  std::string limiter, how, detail;  // how / detail: PipelineTime's
  double energy_j = -1;              // predicted energy per block (dynamic + static x time); < 0: no power data
};

// The RNG's share of the baseline block: RNG / (GEMM + RNG + attention(mask)), as the baseline composes it.
double rng_share_of_baseline(const Prediction& pr);
// RNG / (GEMM + RNG): the part an overlap acts on.
double rng_share_of_gemm_rng(const Prediction& pr);

// Region of a shape by RNG / GEMM: "GEMM >> RNG" (< 0.5), "RNG <~ GEMM" (0.5..1), "RNG > GEMM" (> 1), and
// what it means for the pipelines.
std::string region_of(double rng_over_gemm);
std::string region_text(double rng_over_gemm);

// Why Philox-3 carries a caveat wherever it is ranked (docs/rng-scheme.md).
extern const char* const kR3Caveat;

struct ReferenceShares {
  std::string name, path;
  std::map<int64_t, double> rng_share_of_baseline;  // per round count
  double rng_share_of_gemm_rng = 0;                 // at the reference round count
};

struct CoresidentWhatIf {
  PipelineTime overlap;        // overlap at the reference round count with --residency coresident
  double saved_seconds = 0;    // baseline - that overlap (both at the reference round count)
  double energy_bound_s = 0;   // GEMM || RNG cannot beat (E_gemm + E_rng) / (cap - static); 0: no power data
  double max_hidden = 1;       // the most of the shorter kernel any schedule can hide under that bound
};

struct Recommendation {
  std::vector<int64_t> rounds;                 // as asked, in order
  std::map<int64_t, Prediction> predictions;   // per round count
  std::vector<RankedEntry> ranking;            // fastest first; ties keep (rounds as asked, pipeline) order
  // Least energy first, over the entries with power data (every kernel of the pipeline has some); empty when
  // none has. energy_differs: the least-energy entry is not the fastest, or the two orders differ.
  std::vector<RankedEntry> energy_ranking;
  bool energy_differs = false;
  bool energy_best_differs = false;            // the first entries differ
  int64_t reference_rounds = 0;                // 7 when ranked, else the last round count asked
  double rng_over_gemm = 0;                    // at reference_rounds
  std::optional<CoresidentWhatIf> coresident;  // unless o.residency is already "coresident"
  std::optional<ReferenceShares> reference;    // when a reference machine other than m is given
  const Prediction& at_reference_rounds() const { return predictions.at(reference_rounds); }
  bool ranks(int64_t r) const;
  // The fastest entry with R >= 5 (Philox-3 is biased), or nullptr.
  const RankedEntry* best_clean() const;
};

// rounds: non-empty. reference: may be nullptr; ignored when it is the same machine (by name) as m.
Recommendation recommend(const Machine& m, const Profile& p, const Workload& shape, const std::vector<int64_t>& rounds,
                         const Options& o, const Machine* reference);

// ---------------------------------------------------------------------------------------------------------
// The training step (pass train): strategies ranked by predicted step time, and which one wins at each memory
// budget for the masks.
// ---------------------------------------------------------------------------------------------------------
struct StrategyCost {
  std::string name;
  double seconds = 0;
  uint64_t mask_bytes = 0;  // what it holds in masks (a network's: src/block/pipeline_plan.hpp mask_footprint)
};
// From from_bytes of mask memory up to the next step's, `strategy` is the fastest that fits.
struct BudgetStep {
  uint64_t from_bytes = 0;
  std::string strategy;
  double seconds = 0;
};
// The fastest strategy at every budget, as steps of increasing budget and decreasing time (ties in time keep
// the one with less memory, then table order). Empty input: empty ladder.
std::vector<BudgetStep> budget_ladder(const std::vector<StrategyCost>& costs);
// "stored if you can spare 20.0 GiB, else regen-overlap if you can spare 512 MiB, else fused".
std::string ladder_text(const std::vector<BudgetStep>& ladder);
// The fastest strategy within `budget` bytes (0 = no budget: the fastest), or nullptr when none fits.
const BudgetStep* best_within(const std::vector<BudgetStep>& ladder, uint64_t budget);
std::string bytes_text(uint64_t bytes);  // "20.0 GiB", "512 MiB"

struct TrainEntry {
  std::string strategy;
  int64_t rounds = 0;
  double seconds = 0, fwd_seconds = 0, bwd_seconds = 0;
  double energy_j = -1;
  uint64_t mask_bytes = 0;  // the network's (layers) masks
  bool fits = true;         // within the budget (always, with no budget)
  std::string detail;
};

struct TrainRecommendation {
  std::vector<int64_t> rounds;
  std::map<int64_t, TrainPrediction> predictions;
  std::vector<TrainEntry> ranking;  // fastest first
  int64_t layers = 1;
  uint64_t budget = 0;              // 0: none given
  int64_t reference_rounds = 0;     // 7 when ranked, else the last asked
  std::vector<BudgetStep> ladder;   // at reference_rounds
  std::string reference_name;       // the reference machine's ladder, when one other than m is given
  std::vector<BudgetStep> reference_ladder;
  const TrainEntry* best_within_budget() const;  // fastest entry that fits, or nullptr
};

// mask_bytes: each pass-train strategy's network mask memory (by name; a missing name counts 0).
TrainRecommendation recommend_train(const Machine& m, const Profile& p, const Workload& shape,
                                    const std::vector<int64_t>& rounds, const Options& o,
                                    const std::map<std::string, uint64_t>& mask_bytes, int64_t layers, uint64_t budget,
                                    const Machine* reference);

}  // namespace dropbench::model
