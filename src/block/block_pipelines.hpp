// One transformer block's QKV GEMM + attention with dropout on the real kernels, and the four ways to run it
// (src/pipeline_plan.hpp): baseline, fused, overlap, chunked. The attention consumes the GEMM's actual bf16
// output QKV [B*SQ, (Hq+2*Hkv)*dH], which is exactly its input layout. All pipelines use the same counter
// scheme, so for one (seed, offset) they write bit-identical O and LSE. Used by `dropbench run` and the GPU
// tests (tests/test_pipelines_gpu.cpp).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "src/core/config.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/harness.hpp"
#include "kernels/gemm/gemm.cuh"
#include "src/block/pipeline_plan.hpp"
#include "kernels/rng/rng_mask.cuh"

namespace dropbench {

// How the RNG mask kernel runs next to the GEMM (overlap pipeline, and the first chunk of the chunked one).
struct RngConfig {
  std::string name = "standard";
  RngSchedule schedule = RngSchedule::Static;
  int grid = 0;                // 0 = the schedule's default
  int block = 256;
  size_t reserve_smem = 0;     // Steal: unused dynamic shared memory per block (one block per SM)
  bool before_gemm = false;    // enqueue the RNG before the GEMM (to be resident first)
  bool finisher = false;       // after the GEMM, a full-width Steal kernel on the GEMM's stream takes the strips left
  bool high_priority = false;  // the RNG's stream has the highest priority
  json to_json() const;
};
// Static grid-stride kernel, enqueued after the GEMM on the side stream (the naive two-stream version).
RngConfig rng_plain();
// (a) Co-resident: persistent, `warps` warps per block, one block per SM, <= 32 registers, no shared memory,
// enqueued before the GEMM, plus the finisher.
RngConfig rng_coresident(int warps);
// (c) Spatial partition: `sms` blocks of 1024 threads each pinned to its own SM by ~120 KiB of reserved shared
// memory, enqueued before a GEMM limited to the other SMs (QkvGemm sm_count_target), plus the finisher.
RngConfig rng_partition(int sms);
// (d) Static kernel on the highest-priority stream, enqueued after the GEMM.
RngConfig rng_priority();

class BlockRunner {
 public:
  struct Options {
    int top_k = 1;               // heuristic candidates of the pipelines' GEMM (tune() keeps the fastest)
    bool full_mask = true;       // allocate the whole-matrix mask (baseline, overlap)
    bool chunk_masks = true;     // allocate the two chunk masks (chunked)
    bool validate = true;        // allocate reference copies of O and LSE
  };
  // Allocates everything for workload w (chunk rows from w.chunk, 0 = auto) and fills X and W.
  BlockRunner(const Workload& w, const Options& o, cudaStream_t setup_stream);
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  const Workload& workload() const { return w_; }
  const GemmShape& gemm_shape() const { return shape_; }
  QkvGemm& gemm() { return *gemm_; }
  // Another GEMM object over the same X, W, QKV (e.g. an SM-count target, or to select another candidate).
  std::unique_ptr<QkvGemm> make_gemm(const GemmOptions& o) const;
  GemmOptions gemm_options() const;
  int sms() const { return sms_; }
  const std::vector<ChunkRange>& chunks() const { return chunks_; }
  const Threshold& threshold() const { return thr_; }
  double gemm_flops() const { return shape_.flops(); }
  double attention_flops() const;

  // ---- pipelines: enqueued on `main`; side work on the runner's streams, joined back before returning ----
  // overlap_rng: the RNG configuration of the overlap pipeline and of the chunked pipeline's first chunk; g: the
  // GEMM object (nullptr = gemm()).
  void run(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& overlap_rng, QkvGemm* g = nullptr);

  // ---- pieces ----
  void gemm_alone(QkvGemm& g, cudaStream_t main) const { g.run(main); }
  // GEMM || RNG of the whole mask with `rc`, joined (phases "gemm", "rng", "rng-finish").
  void overlap_phase(QkvGemm& g, const RngConfig& rc, cudaStream_t main, const PhaseFn& ph);
  // Forks to rc's side stream, runs the whole-mask RNG there as phase `rng_phase` (before or after `main_work` on
  // the main stream, as rc.before_gemm says; no main_work: just the RNG), the finisher on main, and joins. The
  // training step's regen-overlap runs it beside the output projection's backward GEMMs.
  void rng_on_side(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph, const char* who,
                   const std::function<void()>& main_work, const std::string& rng_phase = "rng");
  // The standard (Static) RNG kernel for the whole mask on `main`, phase "rng": the baseline's RNG.
  void rng_static(cudaStream_t main, const PhaseFn& ph);
  // The same RNG without a GEMM (the alone time of the configuration).
  void rng_alone(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph);
  // The whole-matrix attention in mode m; write_mask (mode Fused): it also writes its keep words into the whole mask.
  void attention_full(DropoutMode m, cudaStream_t main, bool write_mask = false) const;
  // The attention kernel instance the pipelines launch in mode m (workload.attention_kernel resolved).
  std::string attention_kernel_name(DropoutMode m) const;
  void rng_chunks_alone(cudaStream_t main, const PhaseFn& ph);
  void attention_chunks_alone(cudaStream_t main, const PhaseFn& ph) const;

  // ---- buffers and checks ----
  const QkvBuffers& qkv_buffers() const { return bufs_; }  // X, W, QKV and the fp8 scales
  void* qkv() const { return bufs_.y; }
  size_t qkv_bytes() const;
  void* o() const { return o_.get(); }
  size_t o_bytes() const { return o_bytes_; }
  float* lse() const { return lse_.get<float>(); }
  size_t lse_bytes() const { return lse_bytes_; }
  uint32_t* full_mask() const { return mask_.get<uint32_t>(); }
  size_t full_mask_bytes() const { return mask_.size(); }
  size_t chunk_mask_bytes() const { return chunk_mask_[0].size(); }
  // Poison O and LSE (0xFF: NaN), and reset the whole mask to zero, on `s`.
  void poison_outputs(cudaStream_t s);
  // Copies O and LSE into the reference buffers (validate) on `s`.
  void keep_reference(cudaStream_t s);
  // Words (4-byte) of O, and of LSE, that differ from the reference; synchronises `s`.
  std::pair<uint64_t, uint64_t> diff_reference(cudaStream_t s);
  // Order-independent checksum of `bytes` bytes at p; synchronises `s`.
  uint64_t checksum(const void* p, size_t bytes, cudaStream_t s);

  // Counters of the last Coresident/Steal group on the whole mask (after a sync).
  struct WorkStats {
    uint64_t strips = 0;             // strips of the mask
    uint64_t coresident_strips = 0;  // done by the co-resident kernel
    uint64_t coresident_blocks = 0;  // its blocks that ran
    int coresident_sms = 0;          // distinct SMs they ran on
  };
  WorkStats work_stats(cudaStream_t s);

  AttentionParams attention_params(DropoutMode m, const ChunkRange* window, const uint32_t* mask) const;
  RngMaskParams rng_params(const ChunkRange* window, void* out) const;

 private:
  void launch_rng(const RngConfig& rc, const ChunkRange* window, void* out, unsigned long long* work, cudaStream_t side,
                  const PhaseFn& ph, const std::string& name);
  void launch_finisher(const ChunkRange* window, void* out, unsigned long long* work, cudaStream_t main,
                       const PhaseFn& ph, const std::string& name);
  cudaStream_t side_stream(const RngConfig& rc) const { return rc.high_priority ? side_hi_ : side_; }
  void chunked(cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, QkvGemm& g);

  Workload w_;
  Options opt_;
  GemmShape shape_;
  Threshold thr_;
  MaskGeometry geo_;
  int sms_ = 0;
  std::vector<ChunkRange> chunks_;
  QkvBuffers bufs_;
  std::unique_ptr<QkvGemm> gemm_;
  DeviceBuffer o_, lse_, o_ref_, lse_ref_, mask_, chunk_mask_[2], work_, scratch_;
  size_t o_bytes_ = 0, lse_bytes_ = 0;
  cudaStream_t side_ = nullptr, side_hi_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr, rng_done_[2] = {nullptr, nullptr}, attn_done_[2] = {nullptr, nullptr};
};

// The fields of a Workload that define a block problem, as a BlockRunner needs them checked: GEMM shape rules,
// attention rules, chunk rule. Throws UsageError naming the problem.
void validate_block_workload(const Workload& w);

}  // namespace dropbench
