// The consumer warpgroups' main loop of the wgmma attention forward: the ping-pong turns, the K/V ring position,
// the two GEMMs of a key block (S = Q K^T and O += P V with wgmma.mma_async), the O rescale and the pipelined loop
// over a tile's key blocks. Warp w of consumer c owns query rows q0 + 64c + 16w .. +15, exactly one 16-row strip of
// the counter scheme's mask tiles, so the dropout hooks apply per 64-key slice of the m64nBN accumulator unchanged.
#pragma once
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/wgmma/dropout_apply.cuh"
#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/attention/wgmma/softmax.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

// Ping-pong turns: named barrier 2 + c is "consumer c may issue"; 128 threads of c sync on it, 128 of the other
// consumer arrive. Consumer 1 grants the first turn; both take n_kv + 1 turns per tile (n_kv blocks + the tail
// P V; persistent: the turns go on across tiles), and consumer 1 skips the hand-over of its last tile's tail so
// every barrier generation completes.
template <bool kPingPong>
struct Turns {
  const int c, my_turn, other_turn;
  __device__ __forceinline__ void grant_first() const {
    if (kPingPong && c == 1) ptx::named_bar_arrive(2, 256);
  }
  __device__ void take() const {
    if constexpr (kPingPong) ptx::named_bar_sync(my_turn, 256);
  }
  __device__ void pass(bool last) const {
    if constexpr (kPingPong) {
      if (!(last && c == 1)) ptx::named_bar_arrive(other_turn, 256);
    }
  }
};

// Block j's K/V stage and barrier parity: it0 is the ring position of the tile's block 0 (persistent: the blocks
// consumed over the CTA's earlier tiles).
template <int ST>
struct Ring {
  const int& it0;
  __device__ int stage(int j) const { return (it0 + j) % ST; }
  __device__ uint32_t parity(int j) const { return static_cast<uint32_t>(((it0 + j) / ST) & 1); }
};

// The GEMMs of consumer c into its accumulators s (S) and o (O): S = Q K^T (A = its 64 Q rows, B = K, both
// K-major in shared memory) and O += P V (A = P from registers, B = V MN-major). Descriptor k-step offsets are
// compile-time adds to the 14-bit address field (+16 bytes = +1). Q, K: k-step kk reads slice kk/4 at byte
// 32*(kk%4) of each row; V: k-step kk (16 keys) starts 16*128 bytes further, the dH slices LBO = BN*128 bytes
// apart, 8-key groups SBO = 1024.
template <class C>
struct Gemms {
  static constexpr int HD = C::kHeadDim, BN = C::kBc;
  static constexpr int KS = HD / 16;  // k-steps of S = Q K^T
  static constexpr int PK = BN / 16;  // k-steps of O += P V
  const uint64_t dq0;                 // consumer c's Q descriptor, k-step 0
  const SmemLayout<C>& sm;
  float (&s)[BN / 2];
  float (&o)[HD / 2];

  __device__ uint64_t desc_q(int kk) const {
    return dq0 + static_cast<uint64_t>(((kk >> 2) * (C::kBr * 128) + (kk & 3) * 32) >> 4);
  }
  __device__ uint64_t desc_k(int st, int kk) const {
    return ptx::desc_sw128(sm.sK + st * C::kKVBytes + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
  }
  __device__ uint64_t desc_v(int st, int kk) const {
    return ptx::desc_sw128(sm.sV + st * C::kKVBytes + kk * 16 * 128, BN * 128, 1024);
  }
  __device__ void issue_s(int st) const {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) ptx::wgmma_ss_bf16<BN>(s, desc_q(kk), desc_k(st, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit();
  }
  __device__ void issue_pv(int st, uint32_t (&pa)[PK][4]) const {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) ptx::wgmma_rs_bf16<HD, 1>(o, pa[kk], desc_v(st, kk), 1);
    ptx::wgmma_commit();
  }
};

// O *= alpha of the last softmax (rows r_lo: elements 0, 1 of each n8 block; r_lo + 8: elements 2, 3).
template <int NO>
__device__ void rescale_o(float (&o)[NO], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// One consumer warpgroup's pipelined loop over a tile's key blocks, software-pipelined inside the warpgroup:
//   block j: [turn] issue S_j = Q K_j^T; issue O += P_{j-1} V_{j-1} [pass the turn]; [fused: Philox for block
//   j's keep words]; wait S_j; mask + online softmax + dropout on S_j (overlaps P_{j-1} V_{j-1} and the other
//   warpgroup's GEMMs on the tensor cores); wait PV; release stage j-1; rescale O; P_j -> bf16 registers.
// The state is the caller's (held by reference): the accumulators o and s, the softmax's row max / sum and alpha.
template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
struct BlockLoop {
  static constexpr int HD = C::kHeadDim, BN = C::kBc, ST = C::kStages;
  static constexpr int PK = BN / 16;  // k-steps of O += P V
  static constexpr int NT = BN / 64;  // 16x64 mask tiles per warp per key block
  static constexpr int NS = BN / 2;   // S accumulators per thread
  static constexpr int NO = HD / 2;   // O accumulators per thread
  static constexpr bool kPersist = C::kPersist;
  using Drop = DropoutApply<C, kMode, R, TW, kCausal>;
  // WAIT_SPLIT 3 where it applies (see WgCfg): P_j packed before the P V wait into the other register set.
  static constexpr bool kPAhead = C::kWaitSplit >= 3 && C::kUnroll2 && kMode == DropoutMode::None;
  // Fused, Philox ahead: block j+1's keep words right after block j's softmax.
  static constexpr bool kAhead = C::kPhiloxAhead && kMode == DropoutMode::Fused && !Drop::kGe7;

  const SmemLayout<C>& sm;
  const Ring<ST>& ring;
  const Turns<C::kPingPong>& turns;
  const Gemms<C>& gemm;
  Drop& drop;
  float (&o)[NO];
  float (&s)[NS];
  float (&row_max)[2];
  float (&row_sum)[2];
  float (&alpha)[2];
  const int n_kv, sk, wrow, r_lo, lane;
  const float sl2;
  const int never;  // 0 at run time; ptxas cannot know (block_boundary)

  // Block 0: S_0, its softmax, P_0 into p.
  __device__ __forceinline__ void first(uint32_t (&kw)[NT], uint32_t (&kw_next)[NT], uint32_t (&p)[PK][4]) {
    using namespace ptx;
    drop.load_words(0, kw);
    mbar_wait_or_trap(sm.k_full(ring.stage(0)), ring.parity(0));
    turns.take();
    gemm.issue_s(ring.stage(0));
    turns.pass(false);
    // The cursor loads run unconditionally (past the last block they are predicated off): under an
    // `if (j + 1 < n_kv)` ptxas joins the two paths with a register copy of the loaded word right after the
    // load, which waits the whole global-load latency (three times the long-scoreboard stalls in ncu).
    if (Drop::kNewMask || n_kv > 1) drop.load_words(1, kw_next);
    drop.gen_words(0, kw);
    drop.mask_early(kw);
    wgmma_wait<0>();
    reg_fence(s);
    if constexpr (kPersist) {
      if (n_kv == 1 && lane == 0) mbar_arrive(sm.q_empty());  // the tile's last S GEMM is done: Q may be reloaded
    }
    online_softmax<BN, kCausal>(s, row_max, row_sum, alpha, 0, sk, wrow, r_lo, lane, sl2, drop, kw);
    if constexpr (kAhead) {
      if (n_kv > 1) drop.gen_words(1, kw_next);
    }
    drop.pack_early(s, kw);
    drop.convert_p(s, kw, p);
  }

  // Block j >= 1: its words in kwc (loaded during block j-1); block j+1's are loaded into kwn.
  // pc: where P_j goes; pp: P_{j-1}, the A operand of this block's P V (the same set unless kPAhead).
  __device__ void block(int j, uint32_t (&kwc)[NT], uint32_t (&kwn)[NT], uint32_t (&pc)[PK][4], uint32_t (&pp)[PK][4]) {
    using namespace ptx;
    const int st = ring.stage(j), pst = ring.stage(j - 1);
    mbar_wait(sm.k_full(st), ring.parity(j));
    mbar_wait(sm.v_full(pst), ring.parity(j - 1));
    turns.take();
    gemm.issue_s(st);
    if constexpr (C::kRescaleAtPv) {  // O *= alpha_{j-1} (P_{j-2} V_{j-2} was waited for in block j-1)
      if (j >= 2) rescale_o(o, alpha);
    }
    gemm.issue_pv(pst, pp);
    turns.pass(false);
    if (Drop::kNewMask || j + 1 < n_kv) drop.load_words(j + 1, kwn);
    if constexpr (!kAhead) drop.gen_words(j, kwc);
    drop.mask_early(kwc);
    wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
    reg_fence(s);
    if constexpr (kPersist) {
      if (j == n_kv - 1 && lane == 0) mbar_arrive(sm.q_empty());  // the tile's last S GEMM is done
    }
    online_softmax<BN, kCausal>(s, row_max, row_sum, alpha, j, sk, wrow, r_lo, lane, sl2, drop, kwc);
    if constexpr (kAhead) {
      if (j + 1 < n_kv) drop.gen_words(j + 1, kwn);
    }
    drop.pack_early(s, kwc);
    // A plain wait is hoisted by ptxas to the top of the softmax's basic block (the softmax then runs after
    // P_{j-1} V_{j-1} rather than under it); WAIT_SPLIT puts it after a never-taken branch instead (WgCfg).
    if constexpr (kPAhead) {  // P_j into pc (its P V, two blocks back, was waited for in block j-1)
      drop.convert_p(s, kwc, pc);
#pragma unroll
      for (int kk = 0; kk < PK; ++kk) reg_fence(pc[kk]);
    }
    if constexpr (C::kWaitSplit > 0) block_boundary(never);
    wgmma_wait<0>();
    reg_fence(o);
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) reg_fence(pp[kk]);
    if (lane == 0) mbar_arrive(sm.kv_empty(pst));
    if constexpr (!C::kRescaleAtPv) rescale_o(o, alpha);
    if constexpr (!kPAhead) drop.convert_p(s, kwc, pc);
  }

  // Blocks 1 .. n_kv - 1.
  __device__ __forceinline__ void rest(uint32_t (&kw)[NT], uint32_t (&kw_next)[NT], uint32_t (&p)[PK][4], uint32_t (&p2)[PK][4]) {
    if constexpr (C::kUnroll2) {
      // Odd blocks read kw_next and load into kw, even blocks the reverse (block 1 reads kw_next, loaded in block 0);
      // kPAhead: odd blocks' P in p2, even blocks' in p.
      uint32_t(&p_odd)[PK][4] = kPAhead ? p2 : p;
      for (int j = 1; j < n_kv; j += 2) {
        block(j, kw_next, kw, p_odd, p);
        if (j + 1 >= n_kv) break;
        block(j + 1, kw, kw_next, p, p_odd);
      }
    } else {
      for (int j = 1; j < n_kv; ++j) {
        if constexpr (kMode == DropoutMode::Mask || kAhead) {
#pragma unroll
          for (int tt = 0; tt < NT; ++tt) kw[tt] = kw_next[tt];
        }
        block(j, kw, kw_next, p, p);
      }
    }
  }

  // The tail: O += P_last V_last; persistent: the last stage released (the next tile's loads reuse every stage).
  __device__ __forceinline__ void tail(uint32_t (&p)[PK][4], uint32_t (&p2)[PK][4], bool last_tile) {
    using namespace ptx;
    const int last = n_kv - 1, st = ring.stage(last);
    mbar_wait(sm.v_full(st), ring.parity(last));
    turns.take();
    if constexpr (C::kRescaleAtPv) {  // O *= alpha_last before the tail P V (no rescale after block 0)
      if (last >= 1) rescale_o(o, alpha);
    }
    if constexpr (kPAhead) {
      if (last & 1) gemm.issue_pv(st, p2);
      else gemm.issue_pv(st, p);
    } else {
      gemm.issue_pv(st, p);
    }
    turns.pass(last_tile);
    wgmma_wait<0>();
    reg_fence(o);
    if constexpr (kPersist) {
      if (lane == 0) mbar_arrive(sm.kv_empty(st));  // the next tile's loads reuse every stage
    }
  }
};

}  // namespace attn_wg
}  // namespace dropbench
