#include "src/core/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dropbench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// splitmix64: small, fast and good enough to draw resampling indices.
struct SplitMix {
  uint64_t s;
  uint64_t next() { return mix64(s += 0x9e3779b97f4a7c15ull); }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

double median_in_place(std::vector<double>& v) {
  if (v.empty()) return kNaN;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  const double hi = v[h];
  if (v.size() % 2 == 1) return hi;
  return 0.5 * (*std::max_element(v.begin(), v.begin() + h) + hi);
}

double quantile_sorted(const std::vector<double>& s, double q) {
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < s.size() ? s[i] * (1 - f) + s[i + 1] * f : s[i];
}

}  // namespace

nlohmann::ordered_json Interval::to_json() const {
  if (!valid) return nullptr;
  return nlohmann::ordered_json::array({low, high});
}

double finite_median(const std::vector<double>& x) {
  std::vector<double> v;
  v.reserve(x.size());
  for (double d : x)
    if (std::isfinite(d)) v.push_back(d);
  return median_in_place(v);
}

Interval bootstrap_figure(const std::vector<const SampleSeries*>& series,
                          const std::function<double(const std::vector<double>&)>& f, int replicates, uint64_t seed) {
  Interval out;
  std::vector<double> med(series.size());
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i]) return out;
    med[i] = finite_median(series[i]->x);
  }
  out.value = f(med);
  // Each group's rounds are drawn once per replicate, for all of its series (the pairing).
  std::map<int, size_t> rounds;  // group -> rounds
  for (const SampleSeries* s : series) {
    size_t finite = 0;
    for (double d : s->x) finite += std::isfinite(d) ? 1 : 0;
    if (finite < 3 || !std::isfinite(out.value)) return out;
    auto [it, fresh] = rounds.emplace(s->group, s->x.size());
    // Series of one group have one sample per round; a different length means unpaired data: refuse.
    if (!fresh && it->second != s->x.size()) return out;
  }
  SplitMix rng{seed};
  std::map<int, std::vector<size_t>> idx;
  std::vector<double> reps, buf;
  reps.reserve(static_cast<size_t>(replicates));
  for (int b = 0; b < replicates; ++b) {
    for (const auto& [g, n] : rounds) {
      auto& v = idx[g];
      v.resize(n);
      for (size_t k = 0; k < n; ++k) v[k] = rng.below(n);
    }
    for (size_t i = 0; i < series.size(); ++i) {
      const auto& v = idx[series[i]->group];
      buf.clear();
      for (size_t k : v) {
        const double d = series[i]->x[k];
        if (std::isfinite(d)) buf.push_back(d);
      }
      med[i] = median_in_place(buf);
    }
    const double r = f(med);
    if (std::isfinite(r)) reps.push_back(r);
  }
  // A figure that is undefined in many replicates (a denominator near 0) has no trustworthy interval.
  if (reps.size() < static_cast<size_t>(replicates) * 9 / 10) return out;
  std::sort(reps.begin(), reps.end());
  const double a = (1 - kConfidence) / 2;
  out.low = quantile_sorted(reps, a);
  out.high = quantile_sorted(reps, 1 - a);
  out.valid = true;
  return out;
}

Interval bootstrap_ratio(const SampleSeries& num, const SampleSeries& den) {
  return bootstrap_figure({&num, &den}, [](const std::vector<double>& m) { return m[0] / m[1]; });
}

Interval bootstrap_median(const SampleSeries& s, int replicates) {
  return bootstrap_figure({&s}, [](const std::vector<double>& m) { return m[0]; }, replicates);
}

Interval ratio_of_independent(double m1, double lo1, double hi1, double m2, double lo2, double hi2) {
  Interval out;
  if (!(m1 > 0 && m2 > 0) || !(hi1 >= lo1) || !(hi2 >= lo2)) return out;
  const double r1 = 0.5 * (hi1 - lo1) / m1, r2 = 0.5 * (hi2 - lo2) / m2;
  const double rel = std::sqrt(r1 * r1 + r2 * r2);
  out.value = m1 / m2;
  out.low = out.value * (1 - rel);
  out.high = out.value * (1 + rel);
  out.valid = std::isfinite(out.low) && std::isfinite(out.high);
  return out;
}

Interval SampleBook::ratio(const std::string& num, const std::string& den) const {
  const SampleSeries *a = find(num), *b = find(den);
  return a && b ? bootstrap_ratio(*a, *b) : Interval{};
}

const SampleSeries* SampleBook::find(const std::string& name) const {
  auto it = series_.find(name);
  return it == series_.end() ? nullptr : &it->second;
}

Interval SampleBook::figure(const std::vector<std::string>& names,
                            const std::function<double(const std::vector<double>&)>& f) const {
  std::vector<const SampleSeries*> s;
  for (const auto& n : names) s.push_back(find(n));
  return bootstrap_figure(s, f);
}

}  // namespace dropbench
