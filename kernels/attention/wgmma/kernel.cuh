// The Hopper-native (sm_90a) attention forward kernel: the composition of its parts, split by concern as
// FlashAttention-3's hopper/ folder is:
//   config.cuh          the schedule (WgCfg) and the register split (Regs)
//   smem.cuh            shared-memory layout and mbarriers
//   tile_scheduler.cuh  which tiles a CTA computes (one per CTA or persistent; causal heaviest first)
//   producer.cuh        warpgroup 0: one thread issues the TMA loads (Q once; K_j and V_j into an ST-stage ring)
//   consumer.cuh        warpgroups 1, 2 (64 query rows each): per tile, the state, the loop and the epilogue
//   mainloop.cuh        ping-pong turns, the wgmma GEMMs (S = Q K^T, O += P V) and the pipelined block loop
//   softmax.cuh         online softmax of one key block (fp32, log2 domain)
//   dropout_apply.cuh   keep words (mask or Philox) applied to the fp32 P or the packed bf16x2 P
//   epilogue.cuh        O / rowsum and the LSE
//   dispatch.cuh        which schedule runs each (dH, mode, causal, threshold width)
// CTA = one (batch b, query head h, block of 128 query rows), or persistent: a sequence of them; 384 threads,
// register reallocation with setmaxnreg (producer down, consumers up). Instantiated by attention_wgmma.cu and by
// the tests that launch instances. docs/attention.md has the design.
#pragma once
#include <cstdint>

#include <cuda.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_kernel.cuh"  // KernelArgs
#include "kernels/attention/wgmma/config.cuh"
#include "kernels/attention/wgmma/consumer.cuh"
#include "kernels/attention/wgmma/producer.cuh"
#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/attention/wgmma/tile_scheduler.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
__global__ void __launch_bounds__(Regs::kThreads, 1)
    attn_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_kv,
                          const attn::KernelArgs a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A plain sm_90 / PTX pass: wgmma, setmaxnreg and TMA transaction counts exist only on sm_90a.
  __trap();
#else
  using namespace ptx;
  extern __shared__ uint8_t smem_raw[];
  const SmemLayout<C> sm(smem_u32(smem_raw));

  constexpr bool kPersist = C::kPersist;
  const int sq = a.sq, sk = a.sq;
  // The CTA's tiles; one tile per CTA: decoded here, before the barriers are set up.
  [[maybe_unused]] Tile T0{};
  const TileScheduler<C, kCausal> sched{a, sk, T0};
  if constexpr (!kPersist) sched.tile_at(0, T0);

  if (threadIdx.x == 0) init_barriers(sm, &tm_q, &tm_kv);
  __syncthreads();

  const int wgi = threadIdx.x / 128;
  if (wgi == 0) {
    // ---------------- producer ----------------
    setmaxnreg_dec<Regs::kProducer>();
    if (threadIdx.x == 0) produce(sm, sched, &tm_q, &tm_kv, a);
  } else {
    // ---------------- consumers ----------------
    setmaxnreg_inc<Regs::kConsumer>();
    consume<C, kMode, R, TW, kCausal>(sm, sched, a, sq, sk, wgi);
  }
#endif
}

}  // namespace attn_wg
}  // namespace dropbench
