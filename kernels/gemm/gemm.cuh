// QKV projection GEMM through cuBLASLt, plus an fp32 reference kernel for tests.
//
//   Y[M, N] = (s_x * X[M, K]) · (s_w * W[N, K])ᵀ        all matrices row-major
//   M = B·SQ (tokens), K = E (model width), N = (Hq + 2·Hkv)·dH (Q, K and V projections side by side)
// The same class runs a training step's other products (GemmOptions: an e5m2 X, transposed bf16 operands).
//
// Inputs are FP8 e4m3 with one fp32 scale per tensor (device scalars s_x, s_w: the factors that turn the
// stored fp8 values back into real values), or bf16 (no scales). The output is bf16, row-major, fp32
// accumulation in both cases. Hopper's FP8 tensor-core path in cuBLASLt wants the "TN" layout; the mapping
// from our row-major operands is documented in gemm.cu next to the matrix layouts.
//
// Usage:
//   QkvGemm g(shape, opts);                 // handle, descriptors, 64 MiB workspace
//   g.bind(x, w, y, sx, sw);                // device pointers; queries cuBLASLt's heuristics
//   g.tune(stream);                         // top_k > 1: time each heuristic candidate, keep the fastest
//   g.run(stream);                          // enqueue one GEMM (no sync, no allocation)
//   g.algo().summary()                      // "algo 66 tile 128x256 stages 64xAUTO cluster 2x1x1 ..."
// One QkvGemm owns one workspace: don't run the same object on two streams concurrently.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/common/shapes.hpp"

namespace dropbench {

enum class GemmDtype { fp8_e4m3, bf16 };

// "fp8" | "bf16" (the Workload.dtype spellings); throws UsageError otherwise.
GemmDtype parse_gemm_dtype(const std::string& s);
const char* gemm_dtype_name(GemmDtype d);           // "fp8" | "bf16"
inline size_t gemm_input_bytes(GemmDtype d) { return d == GemmDtype::fp8_e4m3 ? 1 : 2; }

struct GemmShape {
  int64_t m = 0;  // rows of X and Y (tokens)
  int64_t n = 0;  // rows of W, columns of Y
  int64_t k = 0;  // reduction (embed)
  double flops() const { return gemm_flops(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)); }
};

// M = batch·sq, K = embed, N = (q_heads + 2·kv_heads)·head_dim.
GemmShape qkv_gemm_shape(int64_t batch, int64_t sq, int64_t embed, int64_t q_heads, int64_t kv_heads,
                         int64_t head_dim);

// Checks a shape against what the kernels support: all dims >= 1; K and N multiples of 16 (cuBLASLt's FP8
// kernels need 16-byte aligned leading dimensions; bf16 is held to the same rule so both dtypes run the
// same shapes). M is free. Throws UsageError naming the problem.
void validate_gemm_shape(const GemmShape& s, GemmDtype d);

struct GemmOptions {
  GemmDtype dtype = GemmDtype::fp8_e4m3;
  // The backward products of a training step (Transformer Engine's recipe): fp8 gradients are e5m2, and bf16
  // operands may be stored transposed. cuBLASLt's FP8 kernels on Hopper take only the "TN" form (both operands
  // K-contiguous, the layout below), so fp8 operands are never transposed here: the caller passes transposed
  // copies (kernels/gemm/cast_transpose.cuh).
  bool x_e5m2 = false;             // fp8 only: X is e5m2 (a gradient), W stays e4m3
  bool x_transposed = false;       // bf16 only: X is stored [K, M] row-major (ld M) instead of [M, K]
  bool w_transposed = false;       // bf16 only: W is stored [K, N] row-major (ld N) instead of [N, K]
  bool fast_accum = true;          // fp8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM (ignored for bf16)
  int top_k = 1;                   // heuristic candidates to request; > 1: tune() times them, keeps the fastest
  int sm_count_target = 0;         // CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0 = every SM of the device
  size_t workspace_bytes = size_t{64} << 20;
  int tune_rounds = 3;             // tune(): rounds over all candidates (round-robin, best round kept)
  int tune_reps = 3;               // tune(): at least this many GEMMs per candidate per round (more for
                                   // short GEMMs: each timed batch is sized to ~2 ms), one event pair
  double tune_margin = 0.01;       // tune(): leave the heuristic's first choice only for one this much faster
};

// What cublasLtMatmulAlgoConfigGetAttribute says about an algorithm, plus the heuristic's own figures.
struct GemmAlgoInfo {
  int32_t algo_id = -1;            // CUBLASLT_ALGO_CONFIG_ID
  uint32_t tile_id = 0;            // cublasLtMatmulTile_t
  uint32_t stages_id = 0;          // cublasLtMatmulStages_t
  int32_t splitk = 1;              // CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  uint32_t reduction_scheme = 0;   // cublasLtReductionScheme_t
  uint32_t cta_swizzling = 0;
  uint32_t custom_option = 0;
  uint16_t inner_shape_id = 0;     // cublasLtMatmulInnerShape_t
  uint16_t cluster_shape_id = 0;   // cublasLtClusterShape_t
  size_t workspace_bytes = 0;      // workspace the algorithm needs (heuristic result)
  float waves = 0;                 // heuristic's wavesCount
  int heuristic_rank = 0;          // 0 = the heuristic's first choice

  std::string tile_name() const;     // "128x256", or "tile#<id>" for shapes not in our name table
  std::string stages_name() const;   // "64xAUTO", "128x3", or "stages#<id>"
  std::string cluster_name() const;  // "2x1x1", "auto", or "cluster#<id>"
  std::string summary() const;       // one line with all of the above
};

// One heuristic candidate and, after tune(), its time.
struct GemmCandidate {
  GemmAlgoInfo info;
  double ms = -1;                  // best-round mean time of one GEMM; -1 = not timed
  bool failed = false;             // cublasLtMatmul refused it (status != success)
};

class QkvGemm {
 public:
  QkvGemm(const GemmShape& shape, const GemmOptions& opts);
  ~QkvGemm();
  QkvGemm(const QkvGemm&) = delete;
  QkvGemm& operator=(const QkvGemm&) = delete;

  // Device pointers: x [M, K] and w [N, K] row-major of opts.dtype, y [M, N] bf16 row-major; for fp8
  // scale_x / scale_w are fp32 device scalars (nullptr = 1); bf16 ignores them. Queries the heuristics the
  // first time, and again when a pointer is less aligned than at the last query (which resets tune()).
  void bind(const void* x, const void* w, void* y, const float* scale_x = nullptr,
            const float* scale_w = nullptr);
  // top_k > 1: runs every candidate (writes y), times each with CUDA events (back-to-back batches, several
  // round-robin rounds, best round), keeps the fastest unless it beats the heuristic's first choice by less
  // than tune_margin, and synchronises `stream`. top_k == 1: no-op. Needs bind().
  void tune(cudaStream_t stream);
  // Makes candidates()[i] the algorithm run() uses (e.g. the one that overlaps best with other work); throws
  // UsageError for an index out of range or a candidate cuBLASLt refused in tune(). Needs bind().
  void select(size_t i);
  // Enqueues Y = X·Wᵀ on `stream` with the chosen algorithm. Needs bind().
  void run(cudaStream_t stream) const;

  const GemmShape& shape() const { return shape_; }
  const GemmOptions& options() const { return opts_; }
  const GemmAlgoInfo& algo() const;
  const std::vector<GemmCandidate>& candidates() const { return candidates_; }
  size_t chosen() const { return chosen_; }   // index into candidates() of the algorithm run() uses
  bool tuned() const { return tuned_; }      // tune() timed more than one candidate

  static size_t cublaslt_version();          // cublasLtGetVersion(), e.g. 130100
  static std::string cublaslt_version_string();  // "13.1.0"

 private:
  void query_heuristics();
  struct Impl;
  Impl* impl_ = nullptr;
  GemmShape shape_;
  GemmOptions opts_;
  std::vector<GemmCandidate> candidates_;
  size_t chosen_ = 0;
  bool tuned_ = false;
  unsigned heur_align_ = 0;  // pointer alignment (bytes) the heuristics were queried for; 0 = not yet
};

// Device buffers of one QKV GEMM problem: X, W (opts.dtype), Y (bf16), the two fp32 scales. Move-only.
struct QkvBuffers {
  QkvBuffers() = default;
  QkvBuffers(const GemmShape& shape, GemmDtype dtype);
  ~QkvBuffers();
  QkvBuffers(QkvBuffers&& o) noexcept;
  QkvBuffers& operator=(QkvBuffers&& o) noexcept;
  QkvBuffers(const QkvBuffers&) = delete;
  QkvBuffers& operator=(const QkvBuffers&) = delete;

  // Fills X and W with hashed uniform values in [-1, 1) (never zeros); fp8 stores round(v / s) with
  // s_x = 1/300 and s_w = 1/200 (amax 300 and 200, inside e4m3's 448) and writes those scales; bf16
  // stores v and sets both scales to 1. Same (seed, shape) -> same bits.
  void randomize(uint64_t seed, cudaStream_t stream);
  // Sets every byte of Y to 0xFF: bf16 0xFFFF is a NaN, so any element a GEMM fails to write shows.
  void poison_output(cudaStream_t stream);
  static size_t bytes_needed(const GemmShape& shape, GemmDtype dtype);

  GemmShape shape;
  GemmDtype dtype = GemmDtype::fp8_e4m3;
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;          // __nv_bfloat16
  float* scales = nullptr;    // one 512-byte allocation: s_x at [0], s_w at [kScaleStride] (256-byte aligned)
  static constexpr size_t kScaleStride = 64;
  float* scale_x() const { return scales; }
  float* scale_w() const { return scales ? scales + kScaleStride : nullptr; }

 private:
  void release();
};

// Reference: y_ref[M, N] (fp32, row-major) = s_x·s_w · Σ_k x[m, k]·w[n, k], products and sums in fp32,
// reading the same fp8/bf16 inputs as QkvGemm (scales nullptr = 1). Simple shared-memory tiled kernel;
// slow (a few TFLOP/s) but exact up to fp32 summation order. In kernels/gemm_ref.cu.
void gemm_reference(GemmDtype dtype, const GemmShape& shape, const void* x, const void* w, const float* scale_x,
                    const float* scale_w, float* y_ref, cudaStream_t stream);

}  // namespace dropbench
