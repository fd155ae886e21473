// Small helpers shared by the sweeping commands.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "src/core/config.hpp"

namespace dropbench {

// An axis value as text: strings bare, floats %g, the rest as JSON.
inline std::string axis_value_str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump();
}

// "sq=8192 rounds=7 layout=tile": axis values in sweep order (NVTX range names and progress labels).
inline std::string axes_label(const json& axes) {
  std::string s;
  for (auto it = axes.begin(); it != axes.end(); ++it) {
    if (!s.empty()) s += ' ';
    s += it.key() + "=" + axis_value_str(it.value());
  }
  return s;
}

// Axis names of the first point (all points of a sweep share them), as table columns.
inline std::vector<std::string> axis_columns(const json& axes) {
  std::vector<std::string> cols;
  for (auto it = axes.begin(); it != axes.end(); ++it) cols.push_back(it.key());
  return cols;
}

// z-score of an observed binomial proportion against its expected probability.
inline double binomial_z(double observed, double expected, double n) {
  const double sd = std::sqrt(expected * (1 - expected) / n);
  return sd > 0 ? (observed - expected) / sd : 0.0;
}

}  // namespace dropbench
