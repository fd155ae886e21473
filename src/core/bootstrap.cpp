#include "src/core/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

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

void Interval::write(nlohmann::ordered_json& obj, const std::string& key) const {
  obj[key + "_ci"] = to_json();
  if (!has_repeats()) return;
  using J = nlohmann::ordered_json;
  obj[key + "_ci_within"] = J::array({within_low, within_high});
  J vals = J::array();
  for (double v : repeat_values) vals.push_back(std::isfinite(v) ? J(v) : J(nullptr));
  obj[key + "_repeats"] = J{{"values", vals}, {"sd", repeat_sd}, {"t_ci", J::array({t_low, t_high})}};
}

Interval interval_from_json(const nlohmann::ordered_json& obj, const std::string& key) {
  Interval iv;
  auto pair = [&](const nlohmann::ordered_json* a, double& lo, double& hi) {
    if (!a || !a->is_array() || a->size() != 2 || !(*a)[0].is_number() || !(*a)[1].is_number()) return false;
    lo = (*a)[0].get<double>();
    hi = (*a)[1].get<double>();
    return true;
  };
  auto at = [&](const std::string& k) -> const nlohmann::ordered_json* {
    auto it = obj.find(k);
    return it == obj.end() ? nullptr : &*it;
  };
  if (!obj.is_object() || !pair(at(key + "_ci"), iv.low, iv.high)) return iv;
  iv.valid = true;
  iv.within_low = iv.low;
  iv.within_high = iv.high;
  pair(at(key + "_ci_within"), iv.within_low, iv.within_high);
  if (const auto* r = at(key + "_repeats"); r && r->is_object()) {
    if (auto v = r->find("values"); v != r->end() && v->is_array())
      for (const auto& x : *v) iv.repeat_values.push_back(x.is_number() ? x.get<double>() : kNaN);
    if (auto sd = r->find("sd"); sd != r->end() && sd->is_number()) iv.repeat_sd = sd->get<double>();
    if (auto t = r->find("t_ci"); t != r->end()) pair(&*t, iv.t_low, iv.t_high);
  }
  return iv;
}

double finite_median(const std::vector<double>& x) {
  std::vector<double> v;
  v.reserve(x.size());
  for (double d : x)
    if (std::isfinite(d)) v.push_back(d);
  return median_in_place(v);
}

double t_quantile_975(int df) {
  static const double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                              2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                              2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return kNaN;
  if (df <= 30) return kT[df - 1];
  // Above 30: the normal quantile's expansion in 1 / df (Abramowitz & Stegun 26.7.5), as scripts/dbstats.py
  // computes it; within 1e-5 of the exact quantile there.
  const double x = 1.959963984540054, v = df, x2 = x * x;
  const double g1 = (x2 * x + x) / 4;
  const double g2 = (5 * x2 * x2 * x + 16 * x2 * x + 3 * x) / 96;
  const double g3 = (3 * x2 * x2 * x2 * x + 19 * x2 * x2 * x + 17 * x2 * x - 15 * x) / 384;
  const double g4 =
      (79 * x2 * x2 * x2 * x2 * x + 776 * x2 * x2 * x2 * x + 1482 * x2 * x2 * x - 1920 * x2 * x - 945 * x) / 92160;
  return x + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

namespace {

// The repeats of a series as [offset, length) ranges of rounds.
std::vector<std::pair<size_t, size_t>> repeat_ranges(const SampleSeries& s) {
  std::vector<std::pair<size_t, size_t>> r;
  if (s.repeat_rounds.empty()) {
    r.emplace_back(0, s.x.size());
    return r;
  }
  size_t o = 0;
  for (size_t n : s.repeat_rounds) {
    r.emplace_back(o, n);
    o += n;
  }
  return r;
}

// The flat-top lag window of Politis & Romano.
double flat_top(double t) {
  t = std::fabs(t);
  return t <= 0.5 ? 1.0 : t <= 1.0 ? 2.0 * (1.0 - t) : 0.0;
}

}  // namespace

int block_length(const SampleSeries& s) {
  const auto reps = repeat_ranges(s);
  size_t n = s.x.size();
  for (const auto& [o, len] : reps) n = std::min(n, len);
  if (n < 8) return 1;
  const double med = finite_median(s.x);
  if (!std::isfinite(med)) return 1;
  // u = sign(x - median), centred within each repeat (a repeat's offset is not serial dependence).
  std::vector<double> u(s.x.size(), kNaN);
  size_t finite = 0;
  for (const auto& [o, len] : reps) {
    double sum = 0;
    size_t c = 0;
    for (size_t t = o; t < o + len; ++t)
      if (std::isfinite(s.x[t])) {
        u[t] = s.x[t] > med ? 1.0 : s.x[t] < med ? -1.0 : 0.0;
        sum += u[t];
        ++c;
      }
    for (size_t t = o; t < o + len; ++t)
      if (c) u[t] -= sum / static_cast<double>(c);
    finite += c;
  }
  if (finite < 8) return 1;
  const double nd = static_cast<double>(n);
  const int kn = std::max(5, static_cast<int>(std::ceil(std::sqrt(std::log10(nd)))));
  const int mmax = static_cast<int>(std::ceil(std::sqrt(nd))) + kn;
  const int bmax = static_cast<int>(std::ceil(std::min(3.0 * std::sqrt(nd), nd / 3.0)));
  const int lags = std::min<int>(static_cast<int>(n) - 1, mmax + kn);
  // Autocovariances over pairs inside one repeat, divided by the number of finite rounds (the usual estimator).
  std::vector<double> R(static_cast<size_t>(lags) + 1, 0.0);
  for (int k = 0; k <= lags; ++k) {
    double acc = 0;
    for (const auto& [o, len] : reps)
      for (size_t t = o; t + static_cast<size_t>(k) < o + len; ++t) {
        const double a = u[t], b = u[t + static_cast<size_t>(k)];
        if (std::isfinite(a) && std::isfinite(b)) acc += a * b;
      }
    R[static_cast<size_t>(k)] = acc / static_cast<double>(finite);
  }
  if (!(R[0] > 0)) return 1;
  // m-hat: the first lag after which kn autocorrelations in a row are insignificant (|rho| < 2 sqrt(log10 n / n)).
  const double thr = 2.0 * std::sqrt(std::log10(nd) / nd);
  int mhat = mmax;
  for (int m = 0; m <= mmax; ++m) {
    bool quiet = true;
    for (int j = 1; j <= kn && quiet; ++j) {
      const int k = m + j;
      quiet = k > lags || std::fabs(R[static_cast<size_t>(k)] / R[0]) < thr;
    }
    if (quiet) {
      mhat = m;
      break;
    }
  }
  const int M = std::min(2 * mhat, lags);
  if (M == 0) return 1;
  double g0 = R[0], G = 0;
  for (int k = 1; k <= M; ++k) {
    const double w = flat_top(static_cast<double>(k) / M);
    g0 += 2 * w * R[static_cast<size_t>(k)];
    G += 2 * w * k * R[static_cast<size_t>(k)];
  }
  if (!(g0 > 0)) return 1;  // negatively correlated rounds: blocks would not help
  const double D = 4.0 / 3.0 * g0 * g0;  // the circular block bootstrap's constant
  const double b = std::cbrt(2 * G * G / D) * std::cbrt(nd);
  return std::clamp(static_cast<int>(std::lround(b)), 1, std::max(1, bmax));
}

namespace {

using Figure = std::function<double(const std::vector<double>&)>;

// The series' groups, each with its first series (the round layout), when every series has at least 3 finite
// samples and its repeats cover it, and the series of one group share one layout (one sample per round); nullopt
// (unpaired or too little data) otherwise.
std::optional<std::map<int, const SampleSeries*>> paired_groups(const std::vector<const SampleSeries*>& series) {
  std::map<int, const SampleSeries*> groups;
  for (const SampleSeries* s : series) {
    size_t finite = 0, rounds = 0;
    for (double d : s->x) finite += std::isfinite(d) ? 1 : 0;
    for (size_t r : s->repeat_rounds) rounds += r;
    if (finite < 3 || (!s->repeat_rounds.empty() && rounds != s->x.size())) return std::nullopt;
    auto [it, fresh] = groups.emplace(s->group, s);
    if (!fresh && (it->second->x.size() != s->x.size() || it->second->repeats() != s->repeats() ||
                   repeat_ranges(*it->second) != repeat_ranges(*s)))
      return std::nullopt;
  }
  return groups;
}

// One replicate's rounds of each group: circular blocks of L rounds, drawn inside each repeat (a repeat is its own
// stretch of time).
void draw_rounds(const std::map<int, const SampleSeries*>& groups, int L, SplitMix& rng,
                 std::map<int, std::vector<size_t>>& idx) {
  for (const auto& [g, first] : groups) {
    auto& v = idx[g];
    v.clear();
    for (const auto& [o, n] : repeat_ranges(*first)) {
      if (n == 0) continue;
      const size_t l = std::min(static_cast<size_t>(L), n);
      while (v.size() < o + n) {
        const size_t start = rng.below(n);
        for (size_t k = 0; k < l && v.size() < o + n; ++k) v.push_back(o + (start + k) % n);
      }
    }
  }
}

// Repeats: the figure of each repeat from its own medians, and the t-interval of the figure from their spread;
// out's interval becomes the hull of the within-run one and the t-interval.
void add_repeat_interval(const std::vector<const SampleSeries*>& series, const Figure& f, Interval& out) {
  const size_t K = series.front()->repeats();
  if (K < 2) return;
  for (const SampleSeries* s : series)
    if (s->repeats() != K) return;  // nothing to pair repeat k of one series with
  std::vector<double> med(series.size()), buf, finite_vals;
  for (size_t k = 0; k < K; ++k) {
    for (size_t i = 0; i < series.size(); ++i) {
      const auto [o, n] = repeat_ranges(*series[i])[k];
      buf.assign(series[i]->x.begin() + static_cast<std::ptrdiff_t>(o),
                 series[i]->x.begin() + static_cast<std::ptrdiff_t>(o + n));
      med[i] = finite_median(buf);
    }
    const double v = f(med);
    out.repeat_values.push_back(v);
    if (std::isfinite(v)) finite_vals.push_back(v);
  }
  if (finite_vals.size() < 2) {
    out.repeat_values.clear();
    return;
  }
  double mean = 0, ss = 0;
  for (double v : finite_vals) mean += v;
  mean /= static_cast<double>(finite_vals.size());
  for (double v : finite_vals) ss += (v - mean) * (v - mean);
  out.repeat_sd = std::sqrt(ss / static_cast<double>(finite_vals.size() - 1));
  const double h = t_quantile_975(static_cast<int>(finite_vals.size()) - 1) * out.repeat_sd /
                   std::sqrt(static_cast<double>(finite_vals.size()));
  out.t_low = out.value - h;
  out.t_high = out.value + h;
  out.low = std::min(out.within_low, out.t_low);
  out.high = std::max(out.within_high, out.t_high);
}

}  // namespace

Interval bootstrap_figure(const std::vector<const SampleSeries*>& series, const Figure& f, int replicates,
                          uint64_t seed, int block) {
  Interval out;
  std::vector<double> med(series.size());
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i]) return out;
    med[i] = finite_median(series[i]->x);
  }
  out.value = f(med);
  if (!std::isfinite(out.value)) return out;
  // Each group's rounds are drawn once per replicate, for all of its series (the pairing).
  const auto groups = paired_groups(series);
  if (!groups) return out;
  int L = block;
  if (L < 1) {
    L = 1;
    for (const SampleSeries* s : series) L = std::max(L, block_length(*s));
  }
  out.block = L;
  SplitMix rng{seed};
  std::map<int, std::vector<size_t>> idx;
  std::vector<double> reps, buf;
  reps.reserve(static_cast<size_t>(replicates));
  for (int b = 0; b < replicates; ++b) {
    draw_rounds(*groups, L, rng, idx);
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
  out.within_low = out.low = quantile_sorted(reps, a);
  out.within_high = out.high = quantile_sorted(reps, 1 - a);
  out.valid = true;
  add_repeat_interval(series, f, out);
  return out;
}

Interval bootstrap_ratio(const SampleSeries& num, const SampleSeries& den) {
  return bootstrap_figure({&num, &den}, [](const std::vector<double>& m) { return m[0] / m[1]; });
}

Interval bootstrap_median(const SampleSeries& s, int replicates, int block) {
  return bootstrap_figure({&s}, [](const std::vector<double>& m) { return m[0]; }, replicates,
                          0x9e3779b97f4a7c15ull, block);
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
