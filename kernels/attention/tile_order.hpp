// The order in which the attention kernels visit their work, written once for the kernels (device code), their
// launch rules and the performance model (host code, src/model/model.cpp):
//   - a launch's x-th query block (grid order): causal launches take the heaviest block (the last: it has the most
//     key blocks below the diagonal) first, so the longest CTAs start in the first wave;
//   - the key blocks a query tile visits: all of them, or (causal) those up to the diagonal of the tile's last row;
//   - persistent CTAs: CTA i of G takes tile k * G + i in round k, causal rounds alternating direction (a snake),
//     so that with heaviest-first tiles the CTAs' totals even out;
//   - the mma backward's one-CTA-per-block grids (key blocks of a KV head for dK / dV, query blocks of a query head
//     for the deterministic dQ): (head, batch) fastest, then the blocks heaviest first, so every head's heaviest CTA
//     starts before any head's next heaviest. With the blocks fastest and the heads in y, the first wave would hold
//     the lightest CTAs of the first heads and the heaviest CTAs of the last heads would run as the tail;
//   - the wgmma backward's grid: (subgroup, batch, KV head) units in sections of at least one wave of CTAs, each
//     section's key blocks heaviest first (bwd_cta_sectioned, bwd_section_units: the rule the launcher and the
//     model read).
#pragma once
#include "kernels/common/host_device.hpp"

namespace dropbench {
namespace attn {

template <class I>
DB_HD constexpr I query_block_in_order(I nq, I x, bool causal) {
  return causal ? nq - 1 - x : x;
}

// Key blocks of bc keys (of sk) that the query tile of br rows starting at row q0 visits.
template <class I>
DB_HD constexpr I key_blocks_visited(I sk, I q0, I br, I bc, bool causal) {
  const I n = (sk + bc - 1) / bc;
  if (!causal) return n;
  const I d = (q0 + br - 1) / bc + 1;
  return n < d ? n : d;
}

// The first query block of br rows that reaches the keys from k0 on (top-left causal, key <= query: every earlier
// block's queries all precede key k0): where a backward CTA of those keys starts. 0 unless causal.
template <class I>
DB_HD constexpr I first_query_block(I k0, I br, bool causal) {
  return causal ? k0 / br : 0;
}

// The linear tile index CTA i of a persistent grid of G CTAs takes in round k.
template <class I>
DB_HD constexpr I persistent_tile_index(I k, I G, I i, bool causal) {
  return k * G + ((causal && (k & 1)) ? G - 1 - i : i);
}

// The backward CTA (x, y) of a grid (heads x batch, blocks): its block (heaviest first: causal key blocks from the
// first, which meets the most query blocks; causal query blocks from the last), head and batch.
template <class I>
struct BwdCta {
  I block, head, batch;
};
template <class I>
DB_HD constexpr BwdCta<I> bwd_cta_in_order(I x, I y, I blocks, I heads, bool heaviest_last) {
  return BwdCta<I>{heaviest_last ? blocks - 1 - y : y, x % heads, x / heads};
}

// The query heads of a GQA group one wgmma-backward CTA walks, at most, in a causal grid: there the key blocks'
// CTAs have different amounts of work per head, so CTAs that walk more heads (8, 16: the Llama-3 70B and 405B groups)
// drift onto different heads, and the Q, dO and dQ rows they stream together outgrow L2. A larger group is split
// into subgroups, one CTA per (subgroup, KV head, key block), the subgroup the slowest part of the launch order's
// unit (so the CTAs in flight share their query heads); each sums its heads' dK, dV into fp32 partials that one
// pass adds in subgroup order (deterministic). Non-causal CTAs stay in step, and the split's partials only cost there.
constexpr int kBwdCtaHeads = 4;

// The wgmma backward's launch order. Its CTAs are (unit, key block), a unit being (subgroup, batch, KV head), the
// subgroup slowest: u = (sg x batch + b) x heads + h. The units go in sections of `section` consecutive units; a
// section's CTAs launch key block by key block, heaviest (block 0) first, its units' CTAs of one block together,
// and the next section follows. One section of all units is the longest-first order over the whole grid, the
// shortest tail, but the CTAs in flight then stream every unit's Q, dO and dQ rows through L2, which long causal
// grids outgrow. One unit per section keeps one KV head's rows in flight, but the grid then ends on the last unit's
// heavy blocks: one wave of CTAs of falling length, the SMs emptying as they finish.
template <class I>
struct BwdCtaSg {
  I block, head, batch, sg;
};
template <class I>
DB_HD constexpr BwdCtaSg<I> bwd_cta_sectioned(I lin, I blocks, I section, I heads, I batch) {
  const I span = section * blocks, r = lin % span, u = lin / span * section + r % section, hb = heads * batch;
  return BwdCtaSg<I>{r / section, u % heads, u % hb / heads, u / hb};
}
// The section: the fewest units, a divisor of `units`, whose CTAs fill at least kBwdSectionWaves waves of `slots`
// resident CTAs. Of one unit, one wave and two waves, one wave runs the causal grids of record fastest (sections of
// 4 KV heads at 8K keys, 2 at 16K, with 32 / 8 heads on 132 SMs; docs/attention-backward.md).
constexpr int kBwdSectionWaves = 1;
template <class I>
DB_HD constexpr I bwd_section_units(I units, I blocks, I slots) {
  if (units < 1 || blocks < 1) return 1;
  const I want = (kBwdSectionWaves * slots + blocks - 1) / blocks;
  for (I s = want < 1 ? 1 : want; s < units; ++s)
    if (units % s == 0) return s;
  return units;
}
// Subgroups of a group of `group` query heads for a grid of `blocks` key blocks: causal, the fewest that divide the
// group into subgroups of 2 to kBwdCtaHeads heads; 1 when not causal, when the group has at most kBwdCtaHeads heads
// or no such divisor (a prime group: one-head CTAs are not measured), or where the grid's y (blocks x subgroups)
// would pass 65535.
DB_HD constexpr int bwd_subgroups(int group, int blocks, bool causal) {
  if (!causal || group <= kBwdCtaHeads) return 1;
  for (int s = 2; s <= group / 2; ++s)
    if (group % s == 0 && group / s <= kBwdCtaHeads) return static_cast<long long>(blocks) * s > 65535 ? 1 : s;
  return 1;
}

}  // namespace attn
}  // namespace dropbench
