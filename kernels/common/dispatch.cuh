// The one place where a run-time Philox round count or threshold width becomes a template argument, and the
// one list of the values every kernel family is instantiated for. Config validation, the CLI's default sweeps
// and the profile's kernel list read kPhiloxRounds / kThresholdBits; kernels dispatch through with_rounds /
// with_threshold_bits / with_rounds_tw. Adding a value = one entry in a list and one case in a switch, here.
// Host-only (usable from .cu and .cpp files).
#pragma once
#include <type_traits>

#include "kernels/common/check.hpp"

namespace dropbench {

inline constexpr int kPhiloxRounds[] = {3, 5, 7, 10};
inline constexpr int kThresholdBits[] = {8, 16, 32};
inline constexpr const char* kPhiloxRoundsText = "3, 5, 7, 10";
inline constexpr const char* kThresholdBitsText = "8, 16, 32";

template <int R>
using Rounds = std::integral_constant<int, R>;
template <int TW>
using ThresholdBits = std::integral_constant<int, TW>;

// Calls f(Rounds<R>{}) for R == rounds; otherwise throws UsageError "<what>: rounds must be one of 3, 5, 7, 10
// (got N)".
template <class F>
decltype(auto) with_rounds(int rounds, const char* what, F&& f) {
  switch (rounds) {
    case 3: return f(Rounds<3>{});
    case 5: return f(Rounds<5>{});
    case 7: return f(Rounds<7>{});
    case 10: return f(Rounds<10>{});
  }
  throw_unsupported_value(what, "rounds", rounds, kPhiloxRoundsText);
}

// Calls f(ThresholdBits<TW>{}) for TW == bits; otherwise throws UsageError naming threshold_bits.
template <class F>
decltype(auto) with_threshold_bits(int bits, const char* what, F&& f) {
  switch (bits) {
    case 8: return f(ThresholdBits<8>{});
    case 16: return f(ThresholdBits<16>{});
    case 32: return f(ThresholdBits<32>{});
  }
  throw_unsupported_value(what, "threshold_bits", bits, kThresholdBitsText);
}

// Both at once: f(Rounds<R>{}, ThresholdBits<TW>{}).
template <class F>
decltype(auto) with_rounds_tw(int rounds, int bits, const char* what, F&& f) {
  return with_rounds(rounds, what, [&](auto r) -> decltype(auto) {
    return with_threshold_bits(bits, what, [&](auto tw) -> decltype(auto) { return f(r, tw); });
  });
}

}  // namespace dropbench
