// The dispatch rules of the wgmma attention forward, in one place: which schedule (WgCfg) runs each (dH, mode,
// causal, threshold width), at compile time (Sched, SchedTw) and at run time (with_run_time_schedule). Stage count,
// ping-pong, the dropout coding, the loop unrolling, persistent CTAs and the P V wait do not change the arithmetic
// (bit-identical outputs, checked by the GPU tests), so each instance takes the fastest measured on the H200
// (docs/attention.md, "Dispatch"; what lost is in its "Tried and lost" table).
//   K/V stages: 3 at dH 128 (2 starve the tensor cores), 4 at dH 64.
//   Ping-pong: everywhere but the causal dH 128 mask schedule and dH 64 non-causal none.
//   Coding (kDropImpl): 0 + Philox ahead for causal dH 128 fused; 2 for non-causal dH 128 fused TW 8; 3 for
//     non-causal dH 64 fused; 1 elsewhere.
//   Unrolled loop: mode none at dH 128 and dH 64 non-causal; the causal dH 128 mask schedule.
//   Persistent CTAs: always for causal dH 128 mask; at run time (with_run_time_schedule) for short causal tiles
//     (kPersistShortCausal); never otherwise.
//   P V wait split: level 3 for non-causal dH 64 none; level 2 for the persistent causal dH 128 none; 0 elsewhere.
#pragma once
#include <type_traits>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_kernel.cuh"  // window_rows
#include "kernels/attention/tile_order.hpp"
#include "kernels/attention/wgmma/config.cuh"

namespace dropbench {
namespace attn_wg {

template <int HD, DropoutMode M, bool kCausal>
struct Sched;
template <DropoutMode M, bool kCausal>
struct Sched<128, M, kCausal> {
  using type = std::conditional_t<
      M == DropoutMode::None, WgCfg<128, 128, 3, true, false, 1, true>,
      std::conditional_t<M == DropoutMode::Mask && kCausal, WgCfg<128, 128, 3, false, false, 1, true>,
                         std::conditional_t<M == DropoutMode::Fused && kCausal, WgCfg<128, 128, 3, true, true, 0>, WgCfg<128, 128, 3, true>>>>;
};
template <DropoutMode M, bool kCausal>
struct Sched<64, M, kCausal> {
  using type = std::conditional_t<
      M == DropoutMode::None,
      std::conditional_t<kCausal, WgCfg<64, 128, 4, true>, WgCfg<64, 128, 4, false, false, 1, true, false, 3>>,
      std::conditional_t<M == DropoutMode::Fused && !kCausal, WgCfg<64, 128, 4, true, false, 3>, WgCfg<64, 128, 4, true>>>;
};
template <int HD, DropoutMode M, bool kCausal, int TW>
using SchedTwOneTile = std::conditional_t<HD == 128 && M == DropoutMode::Fused && !kCausal && TW == 8, WgCfg<128, 128, 3, true, false, 2>,
                                          typename Sched<HD, M, kCausal>::type>;
template <int HD, DropoutMode M, bool kCausal, int TW>
inline constexpr bool kDispatchPersist = HD == 128 && M == DropoutMode::Mask && kCausal;
// Persistent CTAs where causal tiles are short (at most kShortTileBlocks key blocks per query tile on average:
// SQ <= 8320 at 128 x 128 blocks): there the one-tile CTA's start and end (barrier set-up, the first loads, the
// epilogue; nothing else on the SM to overlap them) weigh most.
template <int HD, DropoutMode M, bool kCausal, int TW = 8>
inline constexpr bool kPersistShortCausal =
    kCausal && (M == DropoutMode::None || (M == DropoutMode::Mask && HD == 64) || (M == DropoutMode::Fused && HD == 64 && TW == 8));
inline constexpr double kShortTileBlocks = 33.0;
// The P V wait level of a persistent short-causal schedule: 2 for dH 128 none, else the one-tile schedule's.
template <class C, DropoutMode M>
inline constexpr int kPersistWaitSplit = (C::kHeadDim == 128 && M == DropoutMode::None) ? 2 : C::kWaitSplit;
// Mean key blocks per query tile of a causal launch (br-row query tiles of the row window, bc-key blocks).
inline double mean_causal_key_blocks(const AttentionParams& p, int br, int bc) {
  const int wrows = attn::window_rows(p);
  const int nq = (wrows + br - 1) / br;
  if (nq <= 0) return 0.0;
  double sum = 0.0;
  for (int qb = 0; qb < nq; ++qb) sum += attn::key_blocks_visited(p.sq, p.row_begin + qb * br, br, bc, true);
  return sum / nq;
}
inline bool short_causal_tiles(const AttentionParams& p, int br, int bc) {
  return p.causal && mean_causal_key_blocks(p, br, bc) <= kShortTileBlocks;
}
// The run-time half of the dispatch, in one place for launch_attention and for the tests that mirror it:
// f.template operator()<C>() with schedule C1, or with its persistent twin where kPersistShortCausal allows it and
// p's causal tiles are short. The twin is instantiated only where the rule can pick it.
template <class C1, DropoutMode M, bool kCausal, int TW, class F>
decltype(auto) with_run_time_schedule(const AttentionParams& p, F&& f) {
  if constexpr (kPersistShortCausal<C1::kHeadDim, M, kCausal, TW> && !C1::kPersist) {
    using CP = typename WaitSplit<typename Persistent<C1>::type, kPersistWaitSplit<C1, M>>::type;
    if (short_causal_tiles(p, C1::kBr, C1::kBc)) return f.template operator()<CP>();
  }
  return f.template operator()<C1>();
}
// What launch_attention dispatches before the run-time choice.
template <int HD, DropoutMode M, bool kCausal, int TW>
using SchedTw = std::conditional_t<kDispatchPersist<HD, M, kCausal, TW>, typename Persistent<SchedTwOneTile<HD, M, kCausal, TW>>::type,
                                   SchedTwOneTile<HD, M, kCausal, TW>>;

}  // namespace attn_wg
}  // namespace dropbench
