// Sample statistics of timed runs (see stats.hpp).
#include "src/core/stats.hpp"

#include "src/core/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dropbench {

namespace {

double mean_of(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

// Sample standard deviation around a known mean (two-pass: no cancellation on tightly clustered timings).
double stdev_of(const std::vector<double>& x, double mean) {
  if (x.size() < 2) return 0.0;
  double ss = 0;
  for (double v : x) {
    const double d = v - mean;
    ss += d * d;
  }
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

// JSON number -> double; null (how nlohmann writes NaN/inf) -> NaN; absent -> `def`.
double get_double(const nlohmann::ordered_json& j, const char* key, double def) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

size_t get_size(const nlohmann::ordered_json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  return it->get<size_t>();
}

}  // namespace

Stats compute_stats(const std::vector<double>& seconds) {
  Stats s;
  const size_t n = seconds.size();
  if (n == 0) return s;

  std::vector<double> sorted(seconds);
  std::sort(sorted.begin(), sorted.end());

  s.samples = n;
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = (n % 2 == 1) ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  s.mean = mean_of(sorted);
  s.stdev = stdev_of(sorted, s.mean);
  s.rel_stdev = (s.mean != 0.0) ? s.stdev / s.mean : 0.0;
  return s;
}

double relative_stdev(const std::vector<double>& seconds) {
  if (seconds.size() < 2) return 0.0;
  const double m = mean_of(seconds);
  if (m == 0.0) return 0.0;
  return stdev_of(seconds, m) / m;
}

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json to_json(const Stats& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["samples"] = s.samples;
  j["median"] = s.median;
  j["mean"] = s.mean;
  j["min"] = s.min;
  j["max"] = s.max;
  j["stdev"] = s.stdev;
  j["rel_stdev"] = s.rel_stdev;
  j["discarded"] = s.discarded;
  j["mean_clock_mhz"] = s.mean_clock_mhz;
  if (s.median_ci.valid) {
    j["median_ci"] = s.median_ci.to_json();
    if (s.median_ci.block > 0) j["ci_block"] = s.median_ci.block;
    s.median_ci.write(j, "median");  // median_ci again, and with repeats median_ci_within and median_repeats
  }
  if (!s.series_s.empty()) {
    nlohmann::ordered_json sec = nlohmann::ordered_json::array(), clk = nlohmann::ordered_json::array();
    for (double x : s.series_s) sec.push_back(number_or_null(x));
    for (double c : s.series_clock_mhz) clk.push_back(number_or_null(c));
    nlohmann::ordered_json rr = nlohmann::ordered_json::array();
    if (s.series_repeat_rounds.empty()) rr.push_back(s.series_s.size());
    for (size_t r : s.series_repeat_rounds) rr.push_back(r);
    j["series"] = {{"seconds", sec}, {"clock_mhz", clk}, {"repeat_rounds", rr}};
  }
  return j;
}

Stats stats_from_json(const nlohmann::ordered_json& j) {
  if (!j.is_object()) {
    const std::string what = "stats: expected an object, got " + std::string(j.type_name());
    throw nlohmann::ordered_json::type_error::create(302, what, &j);
  }
  Stats s;
  s.samples = get_size(j, "samples");
  s.median = get_double(j, "median", 0.0);
  s.mean = get_double(j, "mean", 0.0);
  s.min = get_double(j, "min", 0.0);
  s.max = get_double(j, "max", 0.0);
  s.stdev = get_double(j, "stdev", 0.0);
  s.rel_stdev = get_double(j, "rel_stdev", 0.0);
  s.discarded = get_size(j, "discarded");
  s.mean_clock_mhz = get_double(j, "mean_clock_mhz", 0.0);
  s.median_ci = interval_from_json(j, "median");
  if (s.median_ci.valid) {
    s.median_ci.value = s.median;
    s.median_ci.block = static_cast<int>(get_size(j, "ci_block"));
  }
  if (auto se = j.find("series"); se != j.end() && se->is_object()) {
    auto nums = [&](const char* key, std::vector<double>& out) {
      if (auto a = se->find(key); a != se->end() && a->is_array())
        for (const auto& v : *a) out.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
    };
    nums("seconds", s.series_s);
    nums("clock_mhz", s.series_clock_mhz);
    if (auto rr = se->find("repeat_rounds"); rr != se->end() && rr->is_array() && rr->size() > 1)
      for (const auto& v : *rr) s.series_repeat_rounds.push_back(v.get<size_t>());
  }
  return s;
}

}  // namespace dropbench
