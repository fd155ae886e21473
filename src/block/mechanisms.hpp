// The GEMM || RNG overlap mechanisms `dropbench run` measures at each point (docs/run.md):
//   plain, priority (d), coresident-w1/w2/w4 (a)  fixed configurations on the pipelines' GEMM (the registry below)
//   partition-Ksm (c)                              GEMM on SMs - K, RNG pinned to K SMs, K from the serial times
//   algo (b)                                       the cuBLASLt candidate that overlaps best with the fastest of the above
// Adding a fixed mechanism = one entry in fixed_mechanisms(); --overlap-rng accepts every entry's name.
#pragma once
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
  Measurement over;        // GEMM || RNG, joined
  double t_gemm = 0;       // the mechanism's GEMM alone
  double t_rng = 0;        // the mechanism's RNG alone
  double hidden = 0;       // against the default GEMM and the standard RNG kernel alone
  double hidden_self = 0;  // against the mechanism's own kernels alone
  bool eligible = false;   // same GEMM object and bits as the pipelines (can serve the overlap pipeline)
  json extra = json::object();
};

// Measures every mechanism (when the plan runs overlap or chunked with a whole mask and exploration is on).
std::vector<Mech> explore_mechanisms(PointScope& ps, const AloneTimes& alone);
// --overlap-rng, else the fastest eligible mechanism, else plain.
OverlapChoice choose_overlap_rng(const RunOptions& o, const std::vector<Mech>& mechs);

// The mechanisms as variants mech:* of the point; hidden fraction by mechanism and the best one.
struct MechanismFigures {
  json hidden_by = json::object();
  const Mech* best = nullptr;  // the largest finite hidden fraction (nullptr: none)
};
MechanismFigures add_mechanism_variants(PointScope& ps, const std::vector<Mech>& mechs, const AloneTimes& alone);

}  // namespace dropbench
