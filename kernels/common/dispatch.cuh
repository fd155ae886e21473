// The one place where a run-time Philox round count, threshold width or attention head dim becomes a template
// argument, and the one list of the values every kernel family is instantiated for. Config validation, the CLI's
// default sweeps, the C API, the tests and the profile's kernel list read kPhiloxRounds / kThresholdBits /
// kHeadDims; kernels dispatch through with_rounds / with_threshold_bits / with_rounds_tw / with_head_dim. Adding a
// value = one entry in a list, here.
// Host-only (usable from .cu and .cpp files).
#pragma once
#include <array>
#include <cstddef>
#include <iterator>
#include <type_traits>

#include "kernels/common/check.hpp"

namespace dropbench {

inline constexpr int kPhiloxRounds[] = {3, 5, 7, 10};
inline constexpr int kThresholdBits[] = {8, 16, 32};
inline constexpr int kHeadDims[] = {64, 128};
// The defaults of every parameter set (config workload, attention, RNG mask, Philox ceiling, C API): Philox-7 (the
// paper's) and 8-bit thresholds.
inline constexpr int kDefaultRounds = 7;
inline constexpr int kDefaultThresholdBits = 8;

template <int R>
using Rounds = std::integral_constant<int, R>;
template <int TW>
using ThresholdBits = std::integral_constant<int, TW>;
template <int HD>
using HeadDim = std::integral_constant<int, HD>;

namespace detail {
// A list's values as "a, b, c" (the "allowed" text of an error), made at compile time.
template <const auto& kList>
struct ListText {
  static constexpr std::array<char, 64> make() {
    std::array<char, 64> s{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < std::size(kList); ++i) {
      if (i > 0) {
        s[n++] = ',';
        s[n++] = ' ';
      }
      char d[12] = {};
      int k = 0;
      for (int v = kList[i]; k == 0 || v > 0; v /= 10) d[k++] = static_cast<char>('0' + v % 10);
      while (k > 0) s[n++] = d[--k];
    }
    return s;
  }
  static constexpr std::array<char, 64> value = make();
};

// f(std::integral_constant<int, kList[I]>{}) for the kList[I] == v (instantiated in the list's order); otherwise
// UsageError "<what>: <field> must be one of <the list> (got v)".
template <const auto& kList, std::size_t I = 0, class F>
auto with_value_in(int v, const char* what, const char* field, F& f) -> decltype(f(std::integral_constant<int, kList[0]>{})) {
  if constexpr (I == std::size(kList)) {
    throw_unsupported_value(what, field, v, ListText<kList>::value.data());
  } else {
    if (v == kList[I]) return f(std::integral_constant<int, kList[I]>{});
    return with_value_in<kList, I + 1>(v, what, field, f);
  }
}
}  // namespace detail

// The allowed values as text, e.g. "3, 5, 7, 10".
inline constexpr const char* kPhiloxRoundsText = detail::ListText<kPhiloxRounds>::value.data();
inline constexpr const char* kThresholdBitsText = detail::ListText<kThresholdBits>::value.data();
inline constexpr const char* kHeadDimsText = detail::ListText<kHeadDims>::value.data();
inline constexpr bool is_head_dim(int hd) {
  for (int v : kHeadDims)
    if (v == hd) return true;
  return false;
}

// Calls f(Rounds<R>{}) for R == rounds; otherwise throws UsageError "<what>: rounds must be one of 3, 5, 7, 10
// (got N)".
template <class F>
decltype(auto) with_rounds(int rounds, const char* what, F&& f) {
  return detail::with_value_in<kPhiloxRounds>(rounds, what, "rounds", f);
}

// Calls f(ThresholdBits<TW>{}) for TW == bits; otherwise throws UsageError naming threshold_bits.
template <class F>
decltype(auto) with_threshold_bits(int bits, const char* what, F&& f) {
  return detail::with_value_in<kThresholdBits>(bits, what, "threshold_bits", f);
}

// Calls f(HeadDim<HD>{}) for HD == head_dim; otherwise throws UsageError naming head_dim.
template <class F>
decltype(auto) with_head_dim(int head_dim, const char* what, F&& f) {
  return detail::with_value_in<kHeadDims>(head_dim, what, "head_dim", f);
}

// Both at once: f(Rounds<R>{}, ThresholdBits<TW>{}).
template <class F>
decltype(auto) with_rounds_tw(int rounds, int bits, const char* what, F&& f) {
  return with_rounds(rounds, what, [&](auto r) -> decltype(auto) {
    return with_threshold_bits(bits, what, [&](auto tw) -> decltype(auto) { return f(r, tw); });
  });
}

}  // namespace dropbench
