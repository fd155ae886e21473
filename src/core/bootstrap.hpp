// Confidence intervals by the percentile bootstrap, for medians and for figures computed from several medians.
//
// Variants measured in one interleaved group (Harness::measure_group) share rounds: round r of every variant ran
// within a few milliseconds of the others, under the same power and thermal state. A figure of several variants
// (a speedup, a hidden fraction) is resampled by drawing whole rounds, so each replicate keeps the pairing and the
// drift the variants share cancels in the figure, as it does in the point estimate. Variants of different groups
// are resampled independently (nothing pairs them). Replicates use a fixed seed: the same samples give the same
// interval on every run.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dropbench {

constexpr int kBootstrapReplicates = 1000;

// splitmix64's finaliser: the bootstrap's resampling draws and the harness's per-round order both hash with it.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
constexpr double kConfidence = 0.95;

// The per-round samples of one variant (seconds; NaN where a round's sample was discarded) and its group.
struct SampleSeries {
  int group = -1;
  std::vector<double> x;
};

struct Interval {
  double value = 0;  // the figure at the full samples' medians
  double low = 0, high = 0;
  bool valid = false;  // false: too few samples, or the figure was not finite
  nlohmann::ordered_json to_json() const;  // [low, high], or null when not valid
};

// Median of the finite values of x (NaN if none).
double finite_median(const std::vector<double>& x);

// The interval of f(medians of `series`, in the given order).
Interval bootstrap_figure(const std::vector<const SampleSeries*>& series,
                          const std::function<double(const std::vector<double>&)>& f,
                          int replicates = kBootstrapReplicates, uint64_t seed = 0x9e3779b97f4a7c15ull);

// The interval of num's median / den's median (paired when they share a group).
Interval bootstrap_ratio(const SampleSeries& num, const SampleSeries& den);

// The interval of one series' median.
Interval bootstrap_median(const SampleSeries& s, int replicates = kBootstrapReplicates);

// Two independent estimates m1 +- (their intervals) -> the interval of m1 / m2 from the relative half-widths added
// in quadrature. For figures across reports or points, where no samples are kept.
Interval ratio_of_independent(double m1, double lo1, double hi1, double m2, double lo2, double hi2);

// The samples of one point's variants by name: what figures are bootstrapped from.
class SampleBook {
 public:
  void add(const std::string& name, SampleSeries s) { series_[name] = std::move(s); }
  const SampleSeries* find(const std::string& name) const;
  // f of the named variants' medians; not valid when one is missing.
  Interval figure(const std::vector<std::string>& names,
                  const std::function<double(const std::vector<double>&)>& f) const;
  Interval ratio(const std::string& num, const std::string& den) const;  // num / den; invalid when one is missing

 private:
  std::map<std::string, SampleSeries> series_;
};

}  // namespace dropbench
