// Host-side planning of `dropbench run` (no CUDA; the pipelines themselves: src/core/pipelines.hpp): how the chunked pipeline cuts the
// query rows, what each pipeline needs in device memory and which ones fit, the hidden-fraction arithmetic
// of an overlap, and the SM split of the spatial-partition mechanism. Tested on the CPU
// (tests/test_pipeline_plan.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "src/core/config.hpp"
#include "src/core/pipelines.hpp"
#include "src/core/report.hpp"

namespace dropbench {

// Query rows [row_begin, row_begin + rows) of one chunk.
struct ChunkRange {
  int64_t row_begin = 0;
  int64_t rows = 0;
  bool operator==(const ChunkRange&) const = default;
};

// Automatic chunk size: about `target_chunks` chunks, rounded up to a multiple of block_rows (at least one
// block, at most the whole sequence rounded up).
int64_t auto_chunk_rows(int64_t sq, int64_t block_rows = 128, int target_chunks = 8);
// Cuts [0, sq) into chunks of chunk_rows (0 = auto_chunk_rows); the last one is ragged. chunk_rows must be a
// multiple of block_rows (itself a multiple of 16): otherwise UsageError("chunk: ...").
std::vector<ChunkRange> plan_chunks(int64_t sq, int64_t chunk_rows, int64_t block_rows = 128);

// Hidden fraction of an overlap of two pieces of work measured alone (t_a, t_b) and together (t_ab):
// (t_a + t_b - t_ab) / min(t_a, t_b). 1 = the shorter one vanished completely, 0 = no gain (serial), < 0 = the
// overlap is slower than running them one after the other. 0 when a time is not positive.
double hidden_fraction(double t_a, double t_b, double t_ab);
// The same of the times {t_a, t_b, t_ab}, the form a book figure of three variants takes.
double hidden_fraction_of(const std::vector<double>& t);

// SMs to give the RNG in a spatial partition (the GEMM keeps the others): proportional to the RNG's share
// of the serial time, sms * t_rng / (t_gemm + t_rng), times `scale`, rounded to a multiple of granularity and
// kept in [granularity, sms - granularity].
int partition_rng_sms(int sms, double t_gemm, double t_rng, double scale = 1.0, int granularity = 2);

// a * b * ... and a + b + ... of byte counts, or UsageError("<what> more than 2^64 bytes ...") when the result
// does not fit 64 bits (unchecked, 2^62 elements of 4 bytes wrap to a mask of 0 bytes).
uint64_t checked_product(std::initializer_list<uint64_t> factors, const std::string& what);
uint64_t checked_sum(std::initializer_list<uint64_t> terms, const std::string& what);

// Device memory of one point.
struct BlockMemory {
  size_t x = 0, w = 0;        // GEMM inputs
  size_t qkv = 0;             // GEMM output = attention input
  size_t o = 0, lse = 0;      // attention outputs
  size_t o_ref = 0;           // validation copy of O
  size_t full_mask = 0;       // 1-bit tile mask of the whole B x Hq x SQ x SQ (baseline, overlap)
  size_t chunk_mask = 0;      // one chunk's mask (chunked pipeline: two of them)
  size_t gemm_workspaces = 0; // cuBLASLt workspaces of the GEMM objects
  size_t common() const { return x + w + qkv + o + lse + o_ref + gemm_workspaces; }
};

// chunk_rows: as resolved by plan_chunks (the first chunk's rows). gemm_objects: QkvGemm instances alive.
// Sizes are checked (UsageError naming workload.sq when a buffer passes 2^64 bytes).
BlockMemory block_memory(const Workload& w, int64_t chunk_rows, int gemm_objects, bool validate);

// Which of the wanted pipelines run at a point: the full mask must fit next to everything else within
// `free_bytes`, and within `mask_budget` (bytes: --mask-budget; 0 = none given); pipelines that need it are
// skipped with a reason otherwise. Fused needs no mask, Chunked two chunk masks. When even the common
// buffers do not fit, the whole point is skipped.
struct PipelinePlan {
  bool point_fits = true;
  std::string point_reason;                                  // why the point is skipped
  std::vector<Pipeline> run;                                 // in the order wanted
  std::vector<std::pair<Pipeline, std::string>> skipped;     // pipeline, reason
  bool needs_full_mask = false, needs_chunk_masks = false;
};
PipelinePlan plan_pipelines(const BlockMemory& m, size_t free_bytes, size_t mask_budget,
                            const std::vector<Pipeline>& wanted, size_t headroom = size_t{512} << 20);

// The training step's buffers beyond the forward's BlockMemory (pass train), as TrainRunner allocates them
// (src/block/train_step.hpp). The GEMMs run in workload.dtype. bf16: every operand bf16, transposed operands read
// in place. fp8 (Transformer Engine's recipe): e4m3 forward operands, e5m2 gradients, and cuBLASLt's FP8 path takes
// only K-contiguous operands, so the step keeps fp8 copies and transposed copies made by cast-transpose: O (e4m3,
// and transposed), dY and dQKV (e5m2, and transposed), X and both weights (transposed). dY, the gradient from the
// layer above, arrives in bf16. The attention backward's workspace: attention_backward_workspace_bytes in its fast
// mode (the timed mode; fp32 D = rowsum(dO o O) and the LSE copy, padded, plus the fp32 dQ accumulator). grad_ref:
// validation copies of dQKV, dX, dW, dW_o (validate).
// The training step's attention backward on the whole matrix of w, shape only (no dropout field, no buffers):
// what train_memory sizes its workspace with and validate_train_workload checks.
AttentionBwdParams train_backward_shape(const Workload& w);

struct TrainMemory {
  size_t w_out = 0, w_out_t = 0;            // output projection weights [E, Hq*dH] (fp8: and transposed)
  size_t o_in = 0, o_t = 0, y = 0;          // fp8: O as the output projection's input, and transposed; Y
  size_t dy = 0, dy_in = 0, dy_t = 0;       // dY (bf16); fp8: e5m2, and transposed
  size_t d_o = 0, dw_out = 0;               // dO, dW_o
  size_t dqkv = 0, dqkv_in = 0, dqkv_t = 0; // dQ, dK, dV laid out like QKV; fp8: e5m2, and transposed
  size_t x_t = 0, w_t = 0;                  // fp8: X and W_qkv transposed
  size_t dx = 0, dw = 0;                    // the QKV GEMM's backward outputs
  size_t bwd_workspace = 0;                 // attention backward: D, the LSE copy, the fast mode's dQ accumulator
  size_t fp8_scales = 0;                    // fp8: the casts' scales and amax slots
  size_t grad_ref = 0;                      // validation copies of dQKV, dX, dW, dW_o
  size_t total() const;
  std::vector<std::pair<std::string, size_t>> buffers() const;  // name -> bytes, allocation order (non-zero)
};
TrainMemory train_memory(const Workload& w, bool validate = false);
// GEMM objects (each with its cuBLASLt workspace) a training step holds: QKV, the output projection, its dX and
// dW, the QKV GEMM's dX and dW.
constexpr int kTrainGemmObjects = 6;
// The fp8 scale block: one 256-byte slot per scalar (cuBLASLt wants scale pointers 16-byte aligned).
constexpr size_t kTrainScaleSlots = 8, kTrainScaleSlotBytes = 256;

// The mask memory of a training-step strategy (pass train): what one block's step allocates, what it holds
// from the forward to the backward, and what a network of `layers` layers would hold at its peak (every
// layer's held mask once all forwards ran, plus the one a layer works on within a phase). layers < 1 counts 1.
struct MaskFootprint {
  uint64_t block_bytes = 0;           // the mask buffers one block's step allocates
  uint64_t held_per_layer = 0;        // kept from the forward to the backward, per layer
  uint64_t network_bytes = 0;         // held_per_layer x layers + a within-phase mask
  int64_t layers = 1;
};
MaskFootprint mask_footprint(Pipeline p, const BlockMemory& m, int64_t layers);

// A --mask-budget in GiB as bytes, after its one check (run's and recommend's): [0, 1048576] GiB, NaN and
// infinity refused with a line naming the option; `zero` says what 0 stands for in that line (0 gives 0 bytes).
uint64_t mask_budget_bytes(double gib, const char* zero);

// Which training-step strategies run at a point: the common and training buffers plus the whole mask (when a
// strategy needs one) must fit `free_bytes`; a strategy whose network mask memory (mask_footprint, `layers`)
// passes `mask_budget` (bytes; 0 = none given) is skipped with the reason.
PipelinePlan plan_train(const BlockMemory& m, const TrainMemory& t, int64_t layers, size_t free_bytes,
                        size_t mask_budget, const std::vector<Pipeline>& wanted, size_t headroom = size_t{512} << 20);

// A point's result as both passes of `run` start it: index, axes and workload of `pt`, and the plan's skipped
// pipelines with their reasons in derived.skipped_pipelines (absent when none is skipped).
PointResult planned_point(const SweepPoint& pt, const PipelinePlan& plan);

// "1.5 GiB", "512 MiB", "12 KiB", "100 B".
std::string human_bytes(size_t bytes);

}  // namespace dropbench
