// The launch scaffolding both attention kernel families share (attention.cu: mma.sync; attention_wgmma.cu:
// wgmma): one compiled instance as the launcher sees it, its shared-memory attribute set once per kernel, its
// resource report, and the switch from the run-time mode (and causality) to template arguments, which the backward's
// launcher (bwd/attention_bwd.cu) uses too. The head-dim switch is kernels/common/dispatch.cuh's with_head_dim.
// Host-only.
#pragma once
#include <mutex>
#include <string>
#include <unordered_set>

#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "kernels/common/check.hpp"

namespace dropbench {
namespace attn {

struct Instance {
  const void* fn = nullptr;
  int threads = 0, smem = 0, br = 0, bc = 0;
  bool persist = false;  // a grid of at most one CTA per SM walking the tiles (wgmma)
  std::string name;
};

// The dynamic shared-memory limit of in's kernel (and, with max_carveout, the largest shared-memory carveout), set
// once per kernel per process.
inline void ensure_smem_attribute(const Instance& in, bool max_carveout) {
  static std::mutex mu;
  static std::unordered_set<const void*> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(in.fn)) return;
  DB_CUDA(cudaFuncSetAttribute(in.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, in.smem));
  if (max_carveout) DB_CUDA(cudaFuncSetAttribute(in.fn, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  done.insert(in.fn);
}

// Registers, shared and local memory, and CTAs per SM of in's kernel (its shared-memory attribute set first).
inline AttentionKernelInfo kernel_info(const Instance& in, bool max_carveout) {
  ensure_smem_attribute(in, max_carveout);
  cudaFuncAttributes fa{};
  DB_CUDA(cudaFuncGetAttributes(&fa, in.fn));
  AttentionKernelInfo info;
  info.name = in.name;
  info.threads = in.threads;
  info.block_rows = in.br;
  info.block_cols = in.bc;
  info.registers = fa.numRegs;
  info.smem_dynamic = static_cast<size_t>(in.smem);
  info.smem_static = fa.sharedSizeBytes;
  info.local_bytes = fa.localSizeBytes;
  DB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&info.ctas_per_sm, in.fn, in.threads, static_cast<size_t>(in.smem)));
  return info;
}

// f.template operator()<M>() for the run-time mode m.
template <class F>
decltype(auto) with_mode(DropoutMode m, F&& f) {
  switch (m) {
    case DropoutMode::None: return f.template operator()<DropoutMode::None>();
    case DropoutMode::Mask: return f.template operator()<DropoutMode::Mask>();
    case DropoutMode::Fused: return f.template operator()<DropoutMode::Fused>();
  }
  throw UsageError("attention: unknown dropout mode");
}

// f.template operator()<M, kCausal>() for the run-time mode m and causality.
template <class F>
decltype(auto) with_mode_causal(DropoutMode m, bool causal, F&& f) {
  return with_mode(m, [&]<DropoutMode M>() -> decltype(auto) {
    return causal ? f.template operator()<M, true>() : f.template operator()<M, false>();
  });
}

}  // namespace attn
}  // namespace dropbench
