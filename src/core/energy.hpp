// The energy bound on GEMM ‖ RNG overlap, and energy-delay figures (docs/power.md "The energy bound").
// Two kernels measured alone: the GEMM for T_g seconds at mean power P_g, the RNG kernel for T_r at P_r. Run
// together for T seconds, the GPU pays its static (idle) power P_s once, P_s * T, plus both kernels' dynamic
// energies E_dyn = (P - P_s) * T_alone, and it cannot draw more than the cap P_cap:
//   P_s * T + E_g_dyn + E_r_dyn <= P_cap * T   =>   T >= (E_g_dyn + E_r_dyn) / (P_cap - P_s).
// Neither kernel can finish faster than alone either, so T_min = max(T_g, T_r, that energy term), and the most
// of the shorter kernel any schedule can hide is (T_g + T_r - T_min) / min(T_g, T_r).
#pragma once
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace dropbench {

struct EnergyBoundInputs {
  double gemm_s = 0, gemm_w = 0;  // T_g, P_g: the GEMM alone
  double rng_s = 0, rng_w = 0;    // T_r, P_r: the RNG kernel alone
  double cap_w = 0;               // P_cap: the enforced power limit
  double static_w = 0;            // P_s: idle power; 0 = bound on total energy (every watt counted against the cap)
};

enum class BoundTerm { None, Gemm, Rng, Energy };
const char* bound_term_name(BoundTerm t);  // "gemm", "rng", "energy", "" (None)

struct EnergyBound {
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  bool computable = false;
  std::string why_not;            // set when not computable: the first bad input and its value
  std::string note;               // inputs that are valid but odd (a power above the cap or below static power)
  EnergyBoundInputs in;
  double gemm_dyn_j = nan;        // (P_g - P_s) * T_g, at least 0
  double rng_dyn_j = nan;         // (P_r - P_s) * T_r, at least 0
  double energy_s = nan;          // (gemm_dyn_j + rng_dyn_j) / (P_cap - P_s)
  double serial_s = nan;          // T_g + T_r
  double t_min_s = nan;           // max(T_g, T_r, energy_s)
  double max_hidden = nan;        // (serial_s - t_min_s) / min(T_g, T_r), in [0, 1]
  BoundTerm binds = BoundTerm::None;  // the term that sets t_min_s (Energy only when it exceeds both times)
};

EnergyBound energy_bound(const EnergyBoundInputs& in);
// keys: computable, [why_not], [note], binds, t_min_s, max_hidden, energy_s, serial_s, gemm_dyn_j, rng_dyn_j,
// inputs {gemm_s, gemm_w, rng_s, rng_w, cap_w, static_w}. NaN as null.
nlohmann::ordered_json to_json(const EnergyBound& b);

// Energy-delay products of one run: E*T (J s) and E*T^2 (J s^2); NaN unless energy >= 0 and seconds > 0 (finite).
struct EnergyDelay {
  double energy_j = EnergyBound::nan, seconds = EnergyBound::nan;
  double edp_js = EnergyBound::nan, ed2p_js2 = EnergyBound::nan;
};
EnergyDelay energy_delay(double energy_j, double seconds);
nlohmann::ordered_json to_json(const EnergyDelay& d);  // keys: energy_j, seconds, edp_js, ed2p_js2

}  // namespace dropbench
