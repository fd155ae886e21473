// The wgmma attention backward's GEMMs and the consumer warpgroups' loop. Consumer c (64 keys, the M dimension)
// per query block of 64, everything wgmma (bf16 in, fp32 accumulate):
//   S^T  = K_c Q^T    A = K_c, B = Q K-major in shared memory (the forward's S = Q K^T with the roles swapped); dH 64:
//                     A from registers (KvFrags: K_c's fragments, loaded once per CTA), dH 128: A K-major in shared
//                     memory too (the fragments would take 64 more registers than the consumers have)
//   dP^T = V_c dO^T   A = V_c, B = dO, likewise
//   (elementwise)     P^T = exp2(S^T c log2e - LSE log2e) while the dP^T GEMM runs (S^T and dP^T are two commit
//                     groups), then the keep bits' (P o Z)^T and dS^T (bwd_tile.cuh)
//   dV  += (P o Z)^T dO   A = (P o Z)^T from registers (the accumulator is the A fragment), B = dO MN-major
//   dK  += dS^T Q         A = dS^T from registers, B = Q MN-major
//   dQ  += dS K       fast mode only (dq.cuh): dS^T of both consumers through shared memory, read MN-major; one
//                     64-column slice per owner, added by a TMA tensor reduce-add
// Issue order per block: S^T, dP^T | dV (mode none, and dH 64 with dropout: before the dP^T wait, so that dS^T is
// computed while it runs) | dK | dQ after the dV / dK wait, each its own commit group.
// Descriptor offsets: K-major k-step kk reads slice kk/4 at byte 32 (kk%4) of each row; MN-major k-step kk (16 rows
// along K) starts 16 x 128 bytes further, the 64-column slices LBO apart, 8-row groups SBO = 1024.
#pragma once
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/bwd_tile.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/attention/bwd/wgmma/dq.cuh"
#include "kernels/attention/bwd/wgmma/dropout.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

// The consumer's K_c and V_c as the register A operands of S^T and dP^T at dH 64: per k-step kk the m64k16 fragment
// of the warp's 16 key rows (4 registers; 16 for K_c, 16 for V_c). K_c and V_c are the same for every block, so the
// GEMMs' A comes from registers loaded once instead of being read from shared memory again per block: S^T and dP^T
// then read only B there, half of what an SS m64n64k16 reads. The fragments are written once, after kv_full and
// before the first wgmma, and only read after, so no write meets an RS wgmma that reads them in flight. At dH 128
// they would take 64 registers more per thread: there nothing is held (kRegs false) and A stays in shared memory.
template <class C>
struct KvFrags {
  static constexpr bool kRegs = C::kHeadDim == 64;
  uint32_t k[kRegs ? 4 : 1][4], v[kRegs ? 4 : 1][4];
  // ldmatrix with the mma kernels' A pattern (bwd_tile.cuh) from the TMA tiles: rows of 128 bytes (dH 64, one slice),
  // 16-byte chunk j of row r at j ^ (r % 8) (the 128-byte swizzle of a 1024-aligned tile); consumer c's rows from
  // 64 c, warp w's 16 from 16 w of those.
  __device__ __forceinline__ void load(const Smem<C>& sm, int c, int warp, int lane) {
    if constexpr (kRegs) {
      const uint32_t row = static_cast<uint32_t>((c * 64 + warp * 16) * 128) + attn_bwd::off_a(lane, 128);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        ptx::ldsm_x4(k[kk], attn_bwd::at(sm.k() + row, kk));
        ptx::ldsm_x4(v[kk], attn_bwd::at(sm.v() + row, kk));
      }
    }
  }
};

template <class C>
struct Gemms {
  static constexpr int HD = C::kHeadDim;
  const Smem<C>& sm;
  uint64_t dk0, dv0;  // descriptors of the consumer's K_c, V_c rows (K-major), k-step 0 (S^T's, dP^T's A at dH 128)

  // The empty asm passes dk0, dv0 through unchanged; seen as values it cannot recompute, ptxas keeps them in uniform
  // registers across the loop over blocks instead of rebuilding both descriptors every block.
  __device__ __forceinline__ Gemms(const Smem<C>& s, int c)
      : sm(s), dk0(ptx::desc_sw128(s.k() + c * 64 * 128, 16, 1024)), dv0(ptx::desc_sw128(s.v() + c * 64 * 128, 16, 1024)) {
    asm("" : "+l"(dk0), "+l"(dv0));
  }

  // K-major k-step kk of a tile of `rows`-row slices: slice kk/4, byte 32 (kk%4) of each row (the descriptor's
  // address field counts 16 bytes).
  static __device__ __forceinline__ uint64_t kstep(uint64_t d0, int rows, int kk) {
    return d0 + static_cast<uint64_t>(((kk >> 2) * (rows * 128) + (kk & 3) * 32) >> 4);
  }
  // MN-major k-step kk of a stage tile (kBq rows along K): 16 rows further.
  static __device__ __forceinline__ uint64_t mnstep(uint64_t d0, int kk) { return d0 + static_cast<uint64_t>((kk * 16 * 128) >> 4); }

  // S^T and dP^T of stage s into st, dp: two commit groups, S^T first (its wait<1> lets P^T be computed while
  // the dP^T GEMM runs). A: kv's fragments at dH 64 (RS, B K-major), the K_c / V_c descriptors at dH 128 (SS).
  __device__ __forceinline__ void issue_s_dp(int s, float (&st)[32], float (&dp)[32], const KvFrags<C>& kv) const {
    uint64_t dq0 = ptx::desc_sw128(sm.q(s), 16, 1024), ddo0 = ptx::desc_sw128(sm.dout(s), 16, 1024);
    // The same values, hidden from the compiler's known-bits analysis (dk0, dv0 are, by the constructor's asm):
    // seeing the descriptors' fields, it turns the first slice's k-steps into an OR into the low word plus a rewrite
    // of the constant high word (two instructions per descriptor) instead of one 64-bit add.
    asm("" : "+l"(dq0), "+l"(ddo0));
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if constexpr (KvFrags<C>::kRegs) ptx::wgmma_rs_bf16<64, 0>(st, kv.k[kk], kstep(dq0, C::kBq, kk), kk > 0 ? 1 : 0);
      else ptx::wgmma_ss_bf16<64>(st, kstep(dk0, C::kBk, kk), kstep(dq0, C::kBq, kk), kk > 0 ? 1 : 0);
    }
    ptx::wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if constexpr (KvFrags<C>::kRegs) ptx::wgmma_rs_bf16<64, 0>(dp, kv.v[kk], kstep(ddo0, C::kBq, kk), kk > 0 ? 1 : 0);
      else ptx::wgmma_ss_bf16<64>(dp, kstep(dv0, C::kBk, kk), kstep(ddo0, C::kBq, kk), kk > 0 ? 1 : 0);
    }
    ptx::wgmma_commit();
  }
  // dV += (P o Z)^T dO and, as a separate commit group, dK += dS^T Q; B MN-major, the dH slices LBO = kBq * 128
  // apart. Two groups, so that dV can be issued before dS^T exists (the consumer loop's order).
  __device__ __forceinline__ void issue_dv(int s, uint32_t (&pa)[4][4], float (&dv)[HD / 2]) const {
    issue_rs(sm.dout(s), pa, dv);
  }
  __device__ __forceinline__ void issue_dk(int s, uint32_t (&ds)[4][4], float (&dk)[HD / 2]) const {
    issue_rs(sm.q(s), ds, dk);
  }
  static __device__ __forceinline__ void issue_rs(uint32_t b, uint32_t (&a)[4][4], float (&d)[HD / 2]) {
    const uint64_t db0 = ptx::desc_sw128(b, C::kBq * 128, 1024);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) ptx::wgmma_rs_bf16<HD, 1>(d, a[kk], mnstep(db0, kk), 1);
    ptx::wgmma_commit();
  }
};

// The thread's release of a ring stage, after its reads of the stage: one arrival per consumer thread, so that each
// thread's shared-memory reads are ordered before the producer's next copy into the stage by the mbarrier itself
// (compute-sanitizer's racecheck tracks that order per thread).
__device__ __forceinline__ void release(uint32_t empty) { ptx::mbar_arrive(empty); }

// dV issued before the dP^T wait keeps P^T, dP^T, dV's A operand and both accumulators live at once: at dH 128 with
// dropout (the keep bits and their state on top) ptxas spills 60-76 bytes, so there dV waits for dS^T.
template <class C, DropoutMode kMode>
inline constexpr bool kDvEarly = !(kMode != DropoutMode::None && C::kHeadDim == 128);

// Mode Mask at dH 128: the lane's keep bits are read while the S^T / dP^T GEMMs run (the words come with the stage).
// Otherwise they are read after P^T: at dH 64 an early read costs 1.00-1.03x the time, between the S^T wait and P^T
// the mask dH-128 instance spills; mode Fused generates its words while the GEMMs run, so they are ready after P^T.
template <class C, DropoutMode kMode>
inline constexpr bool kBitsEarly = kMode == DropoutMode::Mask && C::kHeadDim == 128;

// P^T and dP^T to the A operands of dV ((P o Z)^T: pa) and dK (dS^T: ds). kDvEarly: dV is issued before the dP^T
// wait, so dS^T is computed while the dV GEMM runs; otherwise both wait (the caller issues dV). dd: the block's D.
// pa and ds are the caller's arrays, for the register reason dq_slice_add gives.
template <class C, DropoutMode kMode>
__device__ __forceinline__ void dv_and_ds(const Gemms<C>& g, int s, float (&st)[32], float (&dp)[32],
                                          const uint32_t (&z)[2], float keep_scale, int lane, const float* dd,
                                          uint32_t (&pa)[4][4], uint32_t (&ds)[4][4], float (&dv)[C::kHeadDim / 2]) {
  using namespace ptx;
  constexpr bool kDrop = kMode != DropoutMode::None;
  if constexpr (kDvEarly<C, kMode>) {
    if constexpr (kDrop) attn_bwd::pz_dropped(st, z, keep_scale, pa);
    else attn_bwd::pack_a(st, pa);
    g.issue_dv(s, pa, dv);
    wgmma_wait<1>();  // dP^T; dV runs on
    reg_fence(dp);
    if constexpr (kDrop) attn_bwd::dst_dropped<false>(st, dp, z, keep_scale, lane, dd);
    else attn_bwd::dst(st, dp, lane, dd);
  } else {
    wgmma_wait<0>();
    reg_fence(dp);
    attn_bwd::dst_dropped<true>(st, dp, z, keep_scale, lane, dd);  // st becomes (P o Z)^T
    attn_bwd::pack_a(st, pa);
  }
  attn_bwd::pack_a(dp, ds);
}

// The fast mode's dQ slice n of the block (dq.cuh): its GEMM from dS^T buffer buf, then the reduce-add into dQ. dq is
// the caller's (declared there, ptxas gives it the registers of the inline sequence; declared here, others).
template <class C>
__device__ __forceinline__ void dq_slice_add(const Smem<C>& sm, const CUtensorMap* tm_dq, float (&dq)[32], int buf,
                                             int n, int c, int b, int h, int q0, int t, int warp, int lane) {
  issue_dq<C>(sm, buf, n, dq);
  ptx::wgmma_wait<0>();
  ptx::reg_fence(dq);
  dq_reduce<C>(sm, tm_dq, dq, n, c, b, h, q0, t, warp, lane);
}

// The block's accumulators and operands fenced after the last wgmma wait: nothing reads or reuses their registers
// before it.
template <int NO>
__device__ __forceinline__ void fence_block(float (&dv)[NO], float (&dk)[NO], uint32_t (&pa)[4][4],
                                            uint32_t (&ds)[4][4]) {
  ptx::reg_fence(dv);
  ptx::reg_fence(dk);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    ptx::reg_fence(pa[kk]);
    ptx::reg_fence(ds[kk]);
  }
}

// Consumer warpgroup c (0 or 1; threads 128 (c + 1) ..): its 64 keys' dK, dV over all of the CTA's iterations, and
// in the fast mode its share of dQ.
// The fast mode's dS^T buffers alternate by iteration: both consumers take part in every iteration there (a block
// consumer 1 skips it still meets the other at the barrier, with a zero dS^T), so they use the same buffer, and
// between two stores into a buffer both warpgroups met at the barrier of the iteration between, after their dQ
// GEMMs read it.
template <class C, DropoutMode kMode>
__device__ __forceinline__ void consume(const Smem<C>& sm, const Schedule& w, const Args& a, const CUtensorMap* tm_dq,
                                        int c) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim, ST = C::kStages, NO = HD / 2;
  constexpr bool kDrop = kMode != DropoutMode::None;
  const int t = static_cast<int>(threadIdx.x) - 128 * (c + 1);
  const int warp = t >> 5, lane = t & 31;
  const int kc0 = w.k0 + 64 * c;              // the consumer's first key
  const int kl0 = warp * 16 + (lane >> 2);    // the lane's first key row (of the consumer's 64)
  const int64_t tok0 = static_cast<int64_t>(w.b) * a.sq;
  const Gemms<C> g(sm, c);
  const KeepBits<C, kMode> keep{sm, a, c, warp, lane, static_cast<uint32_t>(kc0 / 64)};

  float dk[NO], dv[NO];
#pragma unroll
  for (int i = 0; i < NO; ++i) dk[i] = dv[i] = 0.f;

  mbar_wait_or_trap(sm.kv_full(), 0);
  KvFrags<C> kv;  // dH 64: K_c, V_c in registers for every block's S^T, dP^T
  kv.load(sm, c, warp, lane);
  // h, q0: iteration it's query head and first query (w.head(it), w.q0(it)), advanced with it.
  for (int it = 0, h = w.head(0), q0 = w.q0(0); it < w.n_it; ++it, w.advance(h, q0)) {
    const int s = it % ST, buf = it & 1;
    // A plain spin: the trapping wait (its clock read and trap path) inside this loop keeps ptxas at the entry's 168
    // registers for the consumers (spills, serialised wgmma).
    mbar_wait(sm.full(s), static_cast<uint32_t>((it / ST) & 1));
    // Every key after every query of the block: nothing to add to dK, dV (in the fast mode the consumer still stores
    // a zero dS^T for the other's dQ GEMM and adds its slice of dQ).
    const bool skip = a.causal && kc0 > q0 + 63;
    if (skip && !a.dq_fast) {
      release(sm.empty(s));
      continue;
    }
    // The fast mode's dQ slice of this consumer (dq.cuh), computed once the stage is released.
    const int dq_n = a.dq_fast ? dq_slice<C>(c, buf) : -1;
    if (!skip) {
      const uint32_t bh = static_cast<uint32_t>(w.b * a.hq + h);
      const bool edge = (kc0 + 63 >= a.sq) || (q0 + 63 >= a.sq) || (a.causal && kc0 + 63 > q0);
      float st[32], dp[32];
      g.issue_s_dp(s, st, dp, kv);
      keep.generate(bh, q0, s, edge);
      [[maybe_unused]] uint32_t z_early[2] = {0u, 0u};
      if constexpr (kBitsEarly<C, kMode>) keep.bits(s, q0, edge, z_early);
      wgmma_wait<1>();  // S^T; P^T while the dP^T GEMM runs
      reg_fence(st);
      // edge constant per call: the common block's copy has no masking code (else a move and branch per element).
      const float* lse = sm.template at<const float>(sm.lse(s));
      if (edge) attn_bwd::probs(st, a, a.scale_log2, kl0, lane, kc0, q0, true, lse);
      else attn_bwd::probs(st, a, a.scale_log2, kl0, lane, kc0, q0, false, lse);
      // The lane's keep bits. Mode Mask at dH 128 has read them into z_early (above): an array of their own leaves
      // the other modes' code as it is without the early read.
      uint32_t z[2] = {z_early[0], z_early[1]};
      if constexpr (kDrop && !kBitsEarly<C, kMode>) keep.bits(s, q0, edge, z);
      uint32_t pa[4][4], ds[4][4];
      dv_and_ds<C, kMode>(g, s, st, dp, z, a.keep_scale, lane, sm.template at<const float>(sm.dsum(s)), pa, ds, dv);
      // The fast mode's dS^T stores read ds before the dK GEMM takes it as an operand (registers of a running wgmma
      // are not to be read).
      if (a.dq_fast) store_ds(sm.ds(c, buf), ds, warp, lane);
      if constexpr (!kDvEarly<C, kMode>) g.issue_dv(s, pa, dv);
      g.issue_dk(s, ds, dk);
      if (a.dq_fast) dq_meet(t);  // waited under the dV / dK GEMMs
      wgmma_wait<0>();
      fence_block(dv, dk, pa, ds);
    } else {
      const uint32_t zero[4][4] = {};
      store_ds(sm.ds(c, buf), zero, warp, lane);
      dq_meet(t);
    }
    release(sm.empty(s));  // Q, dO, LSE, D and the words of stage s are read
    if (dq_n >= 0) {
      float dq[32];
      dq_slice_add<C>(sm, tm_dq, dq, buf, dq_n, c, w.b, h, q0, t, warp, lane);
    }
  }
  // The reduce-adds complete (their shared-memory reads and global writes) before the CTA's shared memory goes.
  if (a.dq_fast && t == 0) bulk_wait<0>();
  attn_bwd::store_dk_dv<HD>(a, dk, dv, tok0, kc0 + kl0, w.hk, lane, a.subgroups > 1 ? w.sg : -1);
}

}  // namespace attn_bwd_wg
}  // namespace dropbench
