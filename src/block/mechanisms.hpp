// The GEMM || RNG overlap mechanisms `dropbench run` measures at each point (docs/run.md):
//   plain, priority (d), coresident-w1/w2/w4 (a)  fixed configurations on the pipelines' GEMM (the registry below)
//   partition-Ksm (c)                              GEMM on SMs - K, RNG pinned to K SMs, K from the serial times
//   algo (b)                                       the cuBLASLt candidate that overlaps best with the pipelines' mechanism
// Adding a fixed mechanism = one entry in fixed_mechanisms(); --overlap-rng accepts every entry's name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "src/block/run_point.hpp"

namespace dropbench {

struct FixedMechanism {
  RngConfig rc;
  std::string description;
};
// plain, priority, coresident-w1, -w2, -w4: in the order they are measured.
const std::vector<FixedMechanism>& fixed_mechanisms();
// The fixed mechanism of that name, or nullptr.
const FixedMechanism* find_fixed_mechanism(const std::string& name);
// "auto" and the fixed mechanisms' names, comma-separated (for --overlap-rng's message).
std::string overlap_rng_choices();

// One mechanism's outcome.
struct Mech {
  RngConfig rc;
  std::string mechanism;   // "a: co-resident RNG kernel", ...
  std::string vname;       // its variant: mech:<name> (algo: mech:algo:cand<i> while scanned)
  std::string gemm_name;   // the variant of its GEMM alone (alone:gemm for the pipelines' GEMM)
  std::string rng_name;    // the variant of its RNG alone (alone:rng for the standard kernel)
  QkvGemm* gemm = nullptr; // the GEMM object it runs (owned by the runner or the explorer)
  Measurement over;        // GEMM || RNG, joined
  double t_gemm = 0;       // the mechanism's GEMM alone
  double t_rng = 0;        // the mechanism's RNG alone
  double hidden = 0;       // against the default GEMM and the standard RNG kernel alone
  double hidden_self = 0;  // against the mechanism's own kernels alone
  Interval hidden_ci, hidden_self_ci;
  bool eligible = false;   // same GEMM object and bits as the pipelines (can serve the overlap pipeline)
  json extra = json::object();
};

// The overlap mechanisms of one point (when the plan runs overlap or chunked with a whole mask and exploration is
// on). The fixed mechanisms join the point's first group, beside the pieces alone: their hidden fractions are
// paired figures. The partition and GEMM-candidate scans depend on that group's times and form groups of their own.
class MechanismExplorer {
 public:
  explicit MechanismExplorer(PointScope& ps);  // reference bits: QKV from the pipelines' GEMM, the standard mask
  bool active() const { return active_; }
  // mech:<name> and alone:rng:<name> of every fixed mechanism, each run once first with its bits checked.
  std::vector<Candidate> fixed_candidates();
  // After the first group: the fixed mechanisms' figures, then the partition and candidate scans measured.
  void finish(const std::map<std::string, Measurement>& first_group, const AloneTimes& alone);
  const std::vector<Mech>& mechs() const { return mechs_; }

 private:
  Mech prepare(const RngConfig& rc, QkvGemm& g, bool default_gemm, const std::string& mechanism,
               const std::string& vname, const std::string& gemm_name);
  void figures(Mech& m, const std::map<std::string, Measurement>& measured, const AloneTimes& alone);
  void explore_partition(const AloneTimes& alone);
  void explore_algo(const AloneTimes& alone, const RngConfig& partner);
  PointScope& ps_;
  bool active_ = false;
  uint64_t ref_qkv_ = 0, ref_mask_ = 0;
  std::vector<Mech> mechs_;
  std::vector<std::unique_ptr<QkvGemm>> gemms_;
};

// The mechanism a choice from measured times takes (pick): plain, then each other mechanism in list order
// replaces the one held only when faster with its paired interval of (its time / the held one's) wholly below 1.
// A near-tie picked by point estimate flips from run to run and carries into the overlap and chunked pipelines
// (70B R7, plain vs priority 1375.2 vs 1375.9 us, chunked/baseline 1.000 with plain, 0.989 with
// priority). eligible_only: only mechanisms that can serve the pipelines. Without a usable plain: the fastest by
// point estimate (nullptr: none has samples). vs_plain: the pick's ratio to plain, or with plain kept the
// fastest one's; invalid when plain is fastest or absent, or the series are not paired.
struct MechChoice {
  const Mech* pick = nullptr;
  const Mech* fastest = nullptr;  // by point estimate
  const Mech* plain = nullptr;    // nullptr: not usable
  Interval vs_plain;
};
MechChoice stable_fastest(const std::vector<Mech>& mechs, const SampleBook& book, bool eligible_only);
// --overlap-rng, else stable_fastest of the eligible mechanisms, else plain.
OverlapChoice choose_overlap_rng(const RunOptions& o, const std::vector<Mech>& mechs, const SampleBook& book);

// The mechanisms as variants mech:* of the point; hidden fraction by mechanism and the best one.
struct MechanismFigures {
  json hidden_by = json::object();
  const Mech* best = nullptr;  // the largest finite hidden fraction (nullptr: none)
};
MechanismFigures add_mechanism_variants(PointScope& ps, const std::vector<Mech>& mechs, const AloneTimes& alone);

}  // namespace dropbench
