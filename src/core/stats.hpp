// Sample statistics of timed runs.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/core/bootstrap.hpp"

namespace dropbench {

struct Stats {
  size_t samples = 0;      // samples kept
  double median = 0;       // seconds
  double mean = 0;
  double min = 0;
  double max = 0;
  double stdev = 0;        // sample standard deviation (n-1); 0 for n < 2
  double rel_stdev = 0;    // stdev / mean; 0 when mean == 0
  size_t discarded = 0;    // samples dropped (clock throttling), not in the figures above
  double mean_clock_mhz = 0;  // mean SM clock over kept samples (0 if not measured)
  // 95 % bootstrap interval of the median (src/core/bootstrap.hpp): not valid with < 3 samples; its block length
  // (0 = not known); with measure.repeats > 1 (repeat_values has K entries, NaN where a repeat kept no sample)
  // low / high are the combined interval and its parts are kept too. Written as median_ci, ci_block,
  // median_ci_within, median_repeats.
  Interval median_ci;
  // measure.keep_series: the per-round samples (seconds, NaN = discarded), the SM clock of each, the rounds of
  // each repeat; empty otherwise. Written as stats.series.
  std::vector<double> series_s, series_clock_mhz;
  std::vector<size_t> series_repeat_rounds;
};

// Figures of `seconds` (need not be sorted). Empty input -> all zeros.
Stats compute_stats(const std::vector<double>& seconds);
// Relative stdev of a running set, cheap enough to call after every sample.
double relative_stdev(const std::vector<double>& seconds);

nlohmann::ordered_json to_json(const Stats& s);
// A finite number, or null for NaN / inf (JSON has no NaN): how every report figure is written.
nlohmann::ordered_json number_or_null(double v);  // keys as the field names, times in seconds
Stats stats_from_json(const nlohmann::ordered_json& j);

}  // namespace dropbench
