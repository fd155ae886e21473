// Our own Hopper FP8 QKV GEMM (wgmma + TMA), sized to leave room for one co-resident RNG CTA per SM.
//
//   Y[M, N] bf16 = (s_x X[M, K]) · (s_w W[N, K])ᵀ      X, W fp8 e4m3 row-major (both K-major), Y row-major,
//                                                      s_x, s_w fp32 device scalars (nullptr = 1)
// Same contract as QkvGemm (gemm.cuh) for fp8: any M >= 1, N and K multiples of 16, 16-byte aligned pointers.
//
// The kernel (gemm_wgmma.cu): one CTA per 128 x BN output tile (BN = 256 by default, or 128; a
// non-persistent grid, tiles in groups of 16 M-tiles for L2 reuse), 384 threads = 3 warpgroups:
//   warpgroup 0   producer: one thread issues TMA loads (cp.async.bulk.tensor, 128-byte swizzle) of the
//                 128 x 128-byte A tile and the BN x 128-byte B tile of each K step into a ring of stages
//                 (4 x 48 KiB for BN 256, 6 x 32 KiB for BN 128), completing on "full" mbarriers; it waits on
//                 "empty" mbarriers to reuse a stage.
//   warpgroups 1-2 consumers: each owns 64 rows x BN columns and issues 4 wgmma.mma_async m64nBNk32 e4m3 per
//                 K step (shared-memory descriptors, 128-byte swizzle), one wgmma group kept in flight; fp32
//                 accumulators (BN/2 registers a thread), FAST accumulation: the tensor core's own accumulator
//                 over the whole K, never promoted to a separate fp32 sum (like cuBLASLt's
//                 CUBLASLT_MATMUL_DESC_FAST_ACCUM, which the pipelines use); the epilogue scales by s_x·s_w,
//                 rounds to bf16 (RN) and stores (staged through shared memory in 16-byte row stores, or direct).
//   cluster 2 (BN 256 only): CTA pairs on adjacent M-tiles load half of the B tile each and multicast it.
// Footprint (one CTA per SM, by design): BN 256: a register cap of 160 (__maxnreg__; 154 used, allocated as
// 160): 384 x 160 = 61440 of the SM's 65536 registers, 197 696 bytes of shared memory. BN 128: cap 96 (90
// used): 36864 registers, 197 696 bytes. No setmaxnreg (ptxas keeps the whole kernel inside the entry cap
// anyway; see gemm_wgmma.cu). The co-resident RNG kernel uses no shared memory and <= 32 registers a thread.
// Measured on the H200 (bench_gemm_wgmma.cu, results/h200/gemm/wgmma/): an RNG CTA sits beside the GEMM
// CTA only if (1) its kernel prefers the max-shared-memory carveout (an SM running a kernel configured for
// little shared memory cannot take the GEMM's 193 KiB CTA until it drains: the project's Coresident kernel,
// default carveout, never co-resided), (2) it fits the registers the GEMM leaves, and (3) for BN 256, it is
// resident first (128 x 32-register RNG blocks started before the GEMM co-resided on all 132 SMs; launched
// after the GEMM's CTAs they did not fit). Co-residency then works, but the GEMM slows by about the RNG work
// it hosts (no net gain at 8B/70B): see the benchmark's report.
// Usage:
//   WgmmaGemm g(shape);                       // validates the shape
//   g.bind(x, w, y, sx, sw);                  // encodes the two TMA tensor maps (driver entry point)
//   g.run(stream);                            // enqueue one GEMM (no sync, no allocation)
//   WgmmaGemm::resources(cfg)                 // registers / smem / CTAs per SM / room left for an RNG CTA
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/gemm/gemm.cuh"

namespace dropbench {

// Kernel variants (template instances of the one kernel).
enum class WgmmaEpilogue { Staged, Direct };   // Staged: bf16 tile through shared memory, 16-byte row stores;
                                               // Direct: 4-byte stores straight from the accumulators
struct WgmmaConfig {
  WgmmaEpilogue epilogue = WgmmaEpilogue::Staged;
  int cluster = 1;             // 2: CTA pairs on adjacent M-tiles share the B tile by TMA multicast (half each)
  int tile_n = 256;            // 256 (4 stages, 160 registers) or 128 (6 stages, 96 registers; cluster 1 only)
  std::string name() const;  // ["n128-"] "staged" | "direct" ["-c2"]
};

struct WgmmaResources {
  int regs_per_thread = 0;     // cudaFuncGetAttributes numRegs (the launch allocation)
  int threads = 0;             // per CTA
  int regs_cap = 0;            // the kernel's __maxnreg__
  int regs_per_cta = 0;        // ceil8(regs_per_thread) * threads (the allocation granule is 8 a thread)
  size_t local_bytes = 0;      // local memory (spills) a thread
  int smem_dynamic = 0;        // bytes a CTA
  int smem_static = 0;
  int ctas_per_sm = 0;         // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  int regs_per_sm = 0;         // device
  int smem_per_sm = 0;         // device (sharedMemPerMultiprocessor)
  int regs_left_per_sm = 0;    // regs_per_sm - ctas_per_sm * regs_per_cta
  int smem_left_per_sm = 0;    // smem_per_sm - ctas_per_sm * (dynamic + static + 1 KiB reserved)
  int tile_m = 0, tile_n = 0, tile_k = 0, stages = 0;
  // Whether a CTA of `threads` threads with `regs` registers each and no shared memory fits beside the
  // GEMM's CTA on one SM (registers: whole warps of ceil(regs/8)*8 x 32; shared memory: the 1 KiB reserve).
  bool fits_beside(int threads, int regs) const;
  std::string summary() const;
};

class WgmmaGemm {
 public:
  explicit WgmmaGemm(const GemmShape& shape, WgmmaConfig cfg = {});
  // x [M, K], w [N, K] fp8 e4m3 row-major; y [M, N] bf16 row-major; scale_x / scale_w fp32 device scalars
  // (nullptr = 1). Pointers 16-byte aligned. Encodes the tensor maps (host only, nothing enqueued).
  void bind(const void* x, const void* w, void* y, const float* scale_x = nullptr, const float* scale_w = nullptr);
  void run(cudaStream_t stream) const;  // needs bind()

  const GemmShape& shape() const { return shape_; }
  const WgmmaConfig& config() const { return cfg_; }
  int64_t tiles() const;                          // CTAs of one launch
  static WgmmaResources resources(WgmmaConfig cfg = {});

 private:
  GemmShape shape_;
  WgmmaConfig cfg_;
  alignas(64) unsigned char map_a_[128] = {};     // CUtensorMap of X
  alignas(64) unsigned char map_b_[128] = {};     // CUtensorMap of W
  void* y_ = nullptr;
  const float* sx_ = nullptr;
  const float* sw_ = nullptr;
  bool bound_ = false;
};

}  // namespace dropbench
