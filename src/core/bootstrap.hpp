// Confidence intervals by the percentile bootstrap, for medians and for figures computed from several medians.
//
// Variants measured in one interleaved group (Harness::measure_group) share rounds: round r of every variant ran
// within a few milliseconds of the others, under the same power and thermal state. A figure of several variants
// (a speedup, a hidden fraction) is resampled by drawing whole rounds, so each replicate keeps the pairing and the
// drift the variants share cancels in the figure, as it does in the point estimate. Variants of different groups
// are resampled independently (nothing pairs them). Replicates use a fixed seed: the same samples give the same
// interval on every run.
//
// Rounds are not independent (the clock drifts slowly), so rounds are drawn in blocks: a circular block
// bootstrap, one block length per figure from the series' own autocorrelation (block_length()). Series with
// repeats (measure.repeats = K > 1: K independent measurements of the group) are resampled within each repeat,
// and the figure of each repeat gives a between-repeat spread; the interval reported is then the hull of the
// within-run interval and a t-interval over the K repeats (docs/measurement.md says why).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/hash.hpp"  // mix64: the bootstrap's resampling draws, the harness's round order

namespace dropbench {

constexpr int kBootstrapReplicates = 1000;

constexpr double kConfidence = 0.95;

// The per-round samples of one variant (seconds; NaN where a round's sample was discarded) and its group.
struct SampleSeries {
  int group = -1;
  std::vector<double> x;               // repeats one after another
  std::vector<size_t> repeat_rounds;   // rounds of each repeat (sum = x.size()); empty = one repeat
  std::vector<double> clock_mhz;       // SM clock of each round's sample (the harness's probe); may be empty
  size_t repeats() const { return repeat_rounds.empty() ? 1 : repeat_rounds.size(); }
};

struct Interval {
  double value = 0;  // the figure at the full samples' medians
  double low = 0, high = 0;  // the interval to use: `combined` with repeats, else the within-run one
  bool valid = false;  // false: too few samples, or the figure was not finite
  int block = 0;       // rounds per resampled block (1: the rounds were drawn one by one)
  double within_low = 0, within_high = 0;  // the within-run (block bootstrap) interval
  // With repeats > 1: the figure of each repeat (its own medians), their sample stdev, and the t-interval of the
  // figure from them (centred on `value`); low/high are then the hull of the within-run and the t-interval.
  std::vector<double> repeat_values;
  double repeat_sd = 0;
  double t_low = 0, t_high = 0;
  bool has_repeats() const { return valid && repeat_values.size() > 1; }
  nlohmann::ordered_json to_json() const;  // [low, high], or null when not valid
  // obj[key + "_ci"] = to_json(); with repeats also obj[key + "_ci_within"] = [within_low, within_high] and
  // obj[key + "_repeats"] = {"values", "sd", "t_ci"} (docs/report-schema.md).
  void write(nlohmann::ordered_json& obj, const std::string& key) const;
};

// What Interval::write wrote under `key` (the _ci_within and _repeats parts; low/high from key_ci): not valid
// when absent.
Interval interval_from_json(const nlohmann::ordered_json& obj, const std::string& key);

// Median of the finite values of x (NaN if none).
double finite_median(const std::vector<double>& x);

// The block length rule (Politis & White 2004, with Patton, Politis & White 2009's correction, for the circular
// block bootstrap), applied to the signs of x - median(x) (the median's influence function: robust to the
// outliers timings have) with autocovariances taken within each repeat. 1 for serially uncorrelated rounds;
// at most min(3 sqrt(n), n / 3) for n rounds per repeat.
int block_length(const SampleSeries& s);

// The 0.975 quantile of Student's t with df degrees of freedom (df >= 1).
double t_quantile_975(int df);

// The interval of f(medians of `series`, in the given order). block = 0: the rule above (the largest of the
// series' lengths); block >= 1: that length (1 = the iid bootstrap of rounds).
Interval bootstrap_figure(const std::vector<const SampleSeries*>& series,
                          const std::function<double(const std::vector<double>&)>& f,
                          int replicates = kBootstrapReplicates, uint64_t seed = 0x9e3779b97f4a7c15ull, int block = 0);

// The interval of num's median / den's median (paired when they share a group).
Interval bootstrap_ratio(const SampleSeries& num, const SampleSeries& den);

// The interval of one series' median.
Interval bootstrap_median(const SampleSeries& s, int replicates = kBootstrapReplicates, int block = 0);

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
