// The wgmma attention forward's schedule (WgCfg: tile sizes, stages and the code-shaping switches that leave the
// arithmetic unchanged), its register split, the shared-memory layout and the schedule transforms the dispatch
// rules apply (Persistent, WaitSplit). docs/attention.md has the design.
#pragma once
#include <cstdint>

namespace dropbench {
namespace attn_wg {

// The CTA of both wgmma attention kernels (forward and backward): a producer warpgroup and two consumer
// warpgroups, one CTA per SM (their __launch_bounds__), and the register split between them (setmaxnreg: producer
// down, consumers up). setmaxnreg only moves registers within the CTA's launch allocation, which ptxas sets to the
// launch bounds' cap, 65536 / kThreads rounded down to the allocation's 8 (168 a thread, 64512 in all): a split
// asking for more never completes its setmaxnreg.inc, and the kernel hangs.
struct Regs {
  static constexpr int kThreads = 384;
  static constexpr int kProducer = 24;
  static constexpr int kConsumer = 240;
  static constexpr int kLaunch = 65536 / kThreads / 8 * 8 * kThreads;
  static_assert(kProducer * 128 + (kThreads / 128 - 1) * kConsumer * 128 <= kLaunch,
                "more registers than the CTA's launch allocation");
};

template <int HD, int BN, int STAGES, bool PINGPONG = true, bool PHILOX_AHEAD = false, int DROP_IMPL = 1, bool UNROLL2 = false,
          bool PERSIST = false, int WAIT_SPLIT = 0>
struct WgCfg {
  // How the dropout modes are coded (same bits, same arithmetic, bit-identical outputs; docs/attention.md
  // "Cutting the dropout instructions"; dropout_apply.cuh):
  //   0 = per-block mask addressing; fused: __vcmpgeu4 + bit gather into a keep word; keep words applied with
  //       R2P + FSEL to the fp32 P inside the softmax (the dH 128 causal fused schedule, with PHILOX_AHEAD).
  //   1 = mask through a strip cursor (one compare per tile), applied as in 0; fused TW 8 without a keep word
  //       (SWAR byte compare), applied with PRMT + LOP3 to P packed to bf16x2 before the P V wait.
  //   2 = cursor; every keep word / ge7 set applied to the packed bf16x2 P after the P V wait (dH 128 non-causal
  //       fused TW 8).
  //   3 = cursor; the bf16x2 masks of block j made right after block j's GEMMs are issued, while the consumer
  //       waits for S_j; after the softmax only the 32 ANDs onto the packed P remain (dH 64 non-causal fused).
  static constexpr int kDropImpl = DROP_IMPL;
  // Main loop written out twice (blocks j, j+1): the keep words and P of consecutive blocks alternate between two
  // register sets, so there is no `kw = kw_next` copy.
  static constexpr bool kUnroll2 = UNROLL2;
  static constexpr bool kPingPong = PINGPONG;  // turn-taking between the consumer warpgroups
  // Persistent CTAs: a grid of at most one CTA per SM, each walking tiles blockIdx.x + k*gridDim.x (causal:
  // heaviest query blocks first, every other round in reverse CTA order so the CTAs' totals even out). The
  // producer loads the next tile's Q as soon as both consumers' last S GEMM of the current tile is done (a q_empty
  // barrier) and its K/V into the same ring, so the next tile's loads run under the current tile's last softmax,
  // P V and epilogue, and the ping-pong turns continue across tiles. Outputs equal the one-tile kernel's bit for bit.
  static constexpr bool kPersist = PERSIST;
  // Where the wait for P_{j-1} V_{j-1} sits (docs/attention.md "The P V wait"). ptxas moves a plain wait
  // (`WARPGROUP.DEPBAR.LE gsb0, 0x0`) to the top of the softmax's basic block, so the softmax of block j waits for
  // P_{j-1} V_{j-1} instead of running under it.
  //   0: the plain wait; after it: stage release, O *= alpha, P -> bf16.
  //   2: the wait after a basic-block boundary (ptx::block_boundary: one never-taken uniform branch), so it stays
  //      below the softmax, and O *= alpha_{j-1} right before P_{j-1} V_{j-1} is issued (under S_j, in the turn).
  //   3: 2, and P_j -> bf16 before the wait, into the other of two P register sets (P_{j-1}'s is still the A
  //      operand of the running P V): only the stage release is left after the wait. Mode none's unrolled
  //      schedules only (the sets alternate with the blocks, no copy).
  // No arithmetic changes: outputs equal the level-0 schedule's bit for bit.
  static constexpr int kWaitSplit = WAIT_SPLIT;
  static constexpr bool kRescaleAtPv = WAIT_SPLIT >= 2;
  static_assert(WAIT_SPLIT == 0 || WAIT_SPLIT == 2 || (WAIT_SPLIT == 3 && UNROLL2), "WAIT_SPLIT 0, 2 or 3 (3: unrolled)");
  // Fused: false = block j's Philox calls right after its GEMMs are issued (under S_j); true = block j+1's calls
  // after block j's softmax (under P_{j-1} V_{j-1} and the other warpgroup's GEMMs).
  static constexpr bool kPhiloxAhead = PHILOX_AHEAD;
  static constexpr int kHeadDim = HD;
  static constexpr int kBr = 128;   // query rows per CTA (2 consumer warpgroups x 64)
  static constexpr int kBc = BN;    // keys per block
  static constexpr int kStages = STAGES;
  static constexpr int kThreads = Regs::kThreads;
  static constexpr int kSlices = HD / 64;            // 128-byte column slices per row
  static constexpr int kQBytes = kBr * HD * 2;
  static constexpr int kKVBytes = BN * HD * 2;       // one K (or V) stage
  static constexpr int kBarOffset = kQBytes + 2 * STAGES * kKVBytes;
  static constexpr int kBarriers = 1 + 3 * STAGES + (PERSIST ? 1 : 0);  // + q_empty when persistent
  static constexpr int kSmem = 1024 + kBarOffset + 8 * kBarriers;  // + alignment slack + barriers
  static_assert(kSmem <= 232448, "shared memory per block");
  static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
  static_assert(BN == 64 || BN == 128, "key block 64 or 128 (a multiple of the 64-column mask tile)");
};

// Schedule C with persistent CTAs / with WgCfg WAIT_SPLIT = L, everything else equal.
template <class C>
struct Persistent;
template <int HD, int BN, int ST, bool PP, bool PA, int DI, bool U2, bool P, int WS>
struct Persistent<WgCfg<HD, BN, ST, PP, PA, DI, U2, P, WS>> {
  using type = WgCfg<HD, BN, ST, PP, PA, DI, U2, true, WS>;
};
template <class C, int L>
struct WaitSplit;
template <int HD, int BN, int ST, bool PP, bool PA, int DI, bool U2, bool P, int WS, int L>
struct WaitSplit<WgCfg<HD, BN, ST, PP, PA, DI, U2, P, WS>, L> {
  using type = WgCfg<HD, BN, ST, PP, PA, DI, U2, P, L>;
};

}  // namespace attn_wg
}  // namespace dropbench
