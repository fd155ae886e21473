// The Hopper-native (sm_90a) attention backward: the composition of its parts, split by concern:
//   config.cuh    tiling, shared-memory layout and mbarriers, the CTA's schedule of (query head, query block)
//   producer.cuh  warpgroup 0: one thread issues the TMA / bulk loads (K, V once; Q, dO, LSE, D, mask words per block)
//   mainloop.cuh  warpgroups 1, 2: the wgmma GEMMs and the loop over the CTA's blocks, dK / dV stored at the end
//   dropout.cuh   the keep bits in the transposed (keys-as-rows) layout: mask words staged by the producer, or
//                 regenerated with Philox by the consumers
//   dq.cuh        the fast mode's dQ (dS^T through shared memory, wgmma, TMA reduce-add into the fp32 accumulator)
// The per-warp arithmetic (masking, P^T, dS^T, the A fragments, the dK / dV stores) is the mma backward's
// (bwd_tile.cuh). CTA = 128 keys of one KV head and batch, 384 threads, setmaxnreg (producer down, consumers up).
// docs/attention-backward.md has the design.
#pragma once
#include <cstdint>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/bwd/bwd_tile.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/attention/bwd/wgmma/kernel_api.hpp"
#include "kernels/attention/bwd/wgmma/mainloop.cuh"
#include "kernels/attention/bwd/wgmma/producer.cuh"
#include "kernels/attention/instance.hpp"
#include "kernels/attention/wgmma/config.cuh"  // Regs: the CTA and register split both wgmma kernels share
#include "kernels/common/check.hpp"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

template <int HD, DropoutMode kMode>
__global__ void __launch_bounds__(attn_wg::Regs::kThreads, 1)
    attn_bwd_wgmma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_kv,
                          const __grid_constant__ CUtensorMap tm_do, const __grid_constant__ CUtensorMap tm_dq,
                          const Args a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A plain sm_90 / PTX pass: wgmma, setmaxnreg and TMA transaction counts exist only on sm_90a.
  __trap();
#else
  using namespace ptx;
  using C = Cfg<HD>;
  const Smem<C> sm(attn_bwd::dynamic_smem());
  // 32-bit: check_attention_backward_shape keeps the CTAs below 2^32 (64-bit division is a long software sequence).
  const auto cta = attn::bwd_cta_sectioned<uint32_t>(blockIdx.x + gridDim.x * blockIdx.y, gridDim.y / a.subgroups,
                                                     a.section, a.hkv, gridDim.x / a.hkv);
  const Schedule w(a, static_cast<int>(cta.block), static_cast<int>(cta.head), static_cast<int>(cta.batch),
                   static_cast<int>(cta.sg));
  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 1);
#pragma unroll
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(sm.full(s), 1);
      mbar_init(sm.empty(s), 256);  // one arrival per consumer thread
    }
    fence_mbar_init();
    prefetch_tensormap(&tm_q);
    prefetch_tensormap(&tm_kv);
    prefetch_tensormap(&tm_do);
    if (a.dq_fast) prefetch_tensormap(&tm_dq);
  }
  __syncthreads();
  // The warpgroup index broadcast from lane 0: the same value, but ptxas then knows it is warp-uniform, so what
  // derives from it (the consumer's loop counters, wgmma descriptors, stage addresses and the edge predicate) lives
  // in uniform registers instead of being rebuilt per thread and moved over with R2UR before every wgmma.
  const int wgi = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wgi == 0) {
    setmaxnreg_dec<attn_wg::Regs::kProducer>();
    if (threadIdx.x == 0) produce<C, kMode>(sm, w, a, &tm_q, &tm_kv, &tm_do);
  } else {
    setmaxnreg_inc<attn_wg::Regs::kConsumer>();
    consume<C, kMode>(sm, w, a, &tm_dq, wgi - 1);
  }
#endif
}

template <int HD, DropoutMode M>
attn::Instance instance() {
  attn::Instance in;
  in.fn = reinterpret_cast<const void*>(&attn_bwd_wgmma_kernel<HD, M>);
  in.threads = Cfg<HD>::kThreads;
  in.smem = Cfg<HD>::kSmem;
  in.br = Cfg<HD>::kBk;
  in.bc = Cfg<HD>::kBq;
  return in;
}

template <int HD, DropoutMode M>
void launch(const Args& a, const Maps& m, int batch, cudaStream_t s) {
  const attn::Instance in = instance<HD, M>();
  attn::ensure_smem_attribute(in, false);
  const dim3 grid = attn_bwd::bwd_grid((a.sq + Cfg<HD>::kBk - 1) / Cfg<HD>::kBk * a.subgroups, a.hkv, batch);
  void* args[] = {const_cast<CUtensorMap*>(&m.q), const_cast<CUtensorMap*>(&m.kv), const_cast<CUtensorMap*>(&m.dout),
                  const_cast<CUtensorMap*>(&m.dq), const_cast<Args*>(&a)};
  DB_CUDA(cudaLaunchKernel(in.fn, grid, dim3(in.threads), args, static_cast<size_t>(in.smem), s));
  DB_CUDA_LAUNCH();
}

template <int HD, DropoutMode M>
void attributes(cudaFuncAttributes* fa) {
  DB_CUDA(cudaFuncGetAttributes(fa, attn_bwd_wgmma_kernel<HD, M>));
}

}  // namespace attn_bwd_wg
}  // namespace dropbench

// Explicit instantiation of one instance (attention_bwd_wgmma_hd*.cu).
#define DB_ATTN_BWD_WGMMA_INSTANCE(HD, M)                                                                           \
  template void dropbench::attn_bwd_wg::launch<HD, M>(const dropbench::attn_bwd::Args&,                           \
                                                      const dropbench::attn_bwd_wg::Maps&, int, cudaStream_t);      \
  template void dropbench::attn_bwd_wg::attributes<HD, M>(cudaFuncAttributes*);
