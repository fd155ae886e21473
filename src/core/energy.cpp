// energy_bound() and energy_delay(): the arithmetic of energy.hpp, with its input checks.
#include "src/core/energy.hpp"
#include "src/core/stats.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dropbench {

using ojson = nlohmann::ordered_json;

namespace {

void add_note(std::string& note, const std::string& s) { note += (note.empty() ? "" : "; ") + s; }
}  // namespace

const char* bound_term_name(BoundTerm t) {
  switch (t) {
    case BoundTerm::Gemm: return "gemm";
    case BoundTerm::Rng: return "rng";
    case BoundTerm::Energy: return "energy";
    case BoundTerm::None: break;
  }
  return "";
}

EnergyBound energy_bound(const EnergyBoundInputs& in) {
  EnergyBound b;
  b.in = in;
  for (auto [name, v] : {std::pair{"gemm_s", in.gemm_s}, std::pair{"gemm_w", in.gemm_w}, std::pair{"rng_s", in.rng_s},
                         std::pair{"rng_w", in.rng_w}, std::pair{"cap_w", in.cap_w}}) {
    if (!(std::isfinite(v) && v > 0)) {
      b.why_not = fmt::format("{} must be a positive number (got {})", name, v);
      return b;
    }
  }
  if (!(std::isfinite(in.static_w) && in.static_w >= 0)) {
    b.why_not = fmt::format("static_w must be a number >= 0 (got {})", in.static_w);
    return b;
  }
  if (!(in.cap_w > in.static_w)) {
    b.why_not = fmt::format("cap_w ({} W) must exceed static_w ({} W)", in.cap_w, in.static_w);
    return b;
  }
  // A kernel measured below idle power (noise, or an idle figure taken hot) adds no dynamic energy; a negative
  // one would loosen the bound.
  auto dyn = [&](const char* name, double w, double s) {
    if (w < in.static_w)
      add_note(b.note, fmt::format("{} ({} W) is below static_w ({} W): its dynamic energy taken as 0", name, w,
                                   in.static_w));
    if (w > in.cap_w) add_note(b.note, fmt::format("{} ({} W) is above cap_w ({} W)", name, w, in.cap_w));
    return std::max(0.0, w - in.static_w) * s;
  };
  b.gemm_dyn_j = dyn("gemm_w", in.gemm_w, in.gemm_s);
  b.rng_dyn_j = dyn("rng_w", in.rng_w, in.rng_s);
  b.energy_s = (b.gemm_dyn_j + b.rng_dyn_j) / (in.cap_w - in.static_w);
  b.serial_s = in.gemm_s + in.rng_s;
  const double longer = std::max(in.gemm_s, in.rng_s);
  if (b.energy_s > longer) {
    b.t_min_s = b.energy_s;
    b.binds = BoundTerm::Energy;
  } else {
    b.t_min_s = longer;
    b.binds = in.gemm_s >= in.rng_s ? BoundTerm::Gemm : BoundTerm::Rng;
  }
  // Only a power above the cap can push the energy term past the serial time: nothing can be hidden then.
  const double hidden = (b.serial_s - b.t_min_s) / std::min(in.gemm_s, in.rng_s);
  b.max_hidden = std::clamp(hidden, 0.0, 1.0);
  b.computable = true;
  return b;
}

ojson to_json(const EnergyBound& b) {
  ojson j;
  j["computable"] = b.computable;
  if (!b.why_not.empty()) j["why_not"] = b.why_not;
  if (!b.note.empty()) j["note"] = b.note;
  j["binds"] = bound_term_name(b.binds);
  j["t_min_s"] = number_or_null(b.t_min_s);
  j["max_hidden"] = number_or_null(b.max_hidden);
  j["energy_s"] = number_or_null(b.energy_s);
  j["serial_s"] = number_or_null(b.serial_s);
  j["gemm_dyn_j"] = number_or_null(b.gemm_dyn_j);
  j["rng_dyn_j"] = number_or_null(b.rng_dyn_j);
  j["inputs"] = {{"gemm_s", number_or_null(b.in.gemm_s)}, {"gemm_w", number_or_null(b.in.gemm_w)},
                 {"rng_s", number_or_null(b.in.rng_s)},   {"rng_w", number_or_null(b.in.rng_w)},
                 {"cap_w", number_or_null(b.in.cap_w)},   {"static_w", number_or_null(b.in.static_w)}};
  return j;
}

EnergyDelay energy_delay(double energy_j, double seconds) {
  EnergyDelay d;
  d.energy_j = energy_j;
  d.seconds = seconds;
  if (std::isfinite(energy_j) && energy_j >= 0 && std::isfinite(seconds) && seconds > 0) {
    d.edp_js = energy_j * seconds;
    d.ed2p_js2 = energy_j * seconds * seconds;
  }
  return d;
}

ojson to_json(const EnergyDelay& d) {
  return {{"energy_j", number_or_null(d.energy_j)},
          {"seconds", number_or_null(d.seconds)},
          {"edp_js", number_or_null(d.edp_js)},
          {"ed2p_js2", number_or_null(d.ed2p_js2)}};
}

}  // namespace dropbench
