// One transformer block's training step on the real kernels (`dropbench run`, workload.pass = train):
//
//   forward   QKV GEMM (Y = X W_qkvᵀ) -> attention with dropout -> output projection (Y = O W_oᵀ)
//   backward  output projection's dX (dO = dY W_o) and dW (dW_o = dYᵀ O) -> attention backward (dQKV, laid out like
//             QKV) -> QKV GEMM's dX (dX = dQKV W_qkv) and dW (dW_qkv = dQKVᵀ X)
//
// and the training-step strategies of the pipeline table (src/core/pipelines.hpp) for paying for the keep bits:
// fused (Philox in both attention kernels), stored (the RNG kernel beside the QKV GEMM writes the mask; both
// attention kernels read it), regen-overlap (as stored in the forward; the backward's RNG regenerates the mask
// beside the output projection's backward GEMMs), fused-write (the fused forward also writes the keep words it
// generates into the mask, AttentionParams::mask_out; the backward reads it as stored's does). The forward part is
// a BlockRunner's (its buffers, QKV GEMM, mask, streams and RNG configurations); this class adds the output
// projection, the backward and their buffers (TrainMemory, src/block/pipeline_plan.hpp, lists them).
//
// GEMM precision (workload.dtype): bf16 everywhere, or Transformer Engine's fp8 recipe: e4m3 forward operands,
// e5m2 gradients, the forward GEMMs with cuBLASLt's fast accumulation and the backward ones without (TE's split
// accumulator); transposed operands as cast-transposed copies (kernels/gemm/cast_transpose.cuh), made inside the
// step as phases cast-o, cast-dy, transpose-w-out, cast-dqkv, transpose-w-qkv, transpose-x. The casts use unit
// scales: their amax is computed (as TE's cast-transpose does) but not fed back into the scales.
//
// Every strategy applies the same keep bits, so with the attention backward's deterministic dQ its gradients
// (dQKV, dX, dW_qkv, dW_o) are bitwise those of every other strategy; the timed runs use the fast (atomic) dQ.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/gemm/gemm.cuh"
#include "src/block/block_pipelines.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/core/device_buffer.hpp"

namespace dropbench {

// The workload rules of a training step beyond the forward's (validate_block_workload): the dW GEMMs contract
// over the tokens, so batch * sq must be a multiple of 16. Throws UsageError naming the field.
void validate_train_workload(const Workload& w);

// The attention's dropout mode in strategy p's forward and in its backward (fused-write: Fused writing the mask,
// then Mask).
DropoutMode train_forward_mode(Pipeline p);
DropoutMode train_backward_mode(Pipeline p);

class TrainRunner {
 public:
  struct Options {
    int top_k = 1;          // heuristic candidates of each GEMM (tune() keeps the fastest)
    bool full_mask = true;  // allocate the whole mask (stored, regen-overlap, fused-write)
    bool validate = true;   // allocate the gradients' reference copies
  };
  TrainRunner(const Workload& w, const Options& o, cudaStream_t setup);
  ~TrainRunner();
  TrainRunner(const TrainRunner&) = delete;
  TrainRunner& operator=(const TrainRunner&) = delete;

  BlockRunner& block() { return *block_; }
  bool fp8() const { return fp8_; }
  // Times each GEMM's heuristic candidates (top_k > 1), on the operands of one untimed fused step, and keeps the
  // fastest; synchronises `s`.
  void tune(cudaStream_t s);

  // Enqueues strategy p's step on `main` (side work joined back). rc: the RNG configuration beside the GEMMs.
  // deterministic: the attention backward's dQ mode. check: a validation run, in which regen-overlap's mask is
  // zeroed between the forward and the backward (it is freed there; the backward must regenerate it).
  void run(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, bool deterministic,
           bool check = false);

  // ---- pieces (the hidden fractions of the overlaps) ----
  // The output projection's backward: (fp8: cast-dy, transpose-w) dX, dW, as phases on `main`.
  void out_backward(cudaStream_t main, const PhaseFn& ph);
  // The same beside the whole-mask RNG on rc's side stream (regen-overlap's backward overlap, phase "rng-bwd").
  void out_backward_with_rng(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph);
  // The attention backward in mode m on the step's O, LSE and dO, phase "attention-bwd" (the step's own launch).
  void attention_backward(DropoutMode m, cudaStream_t main, const PhaseFn& ph, bool deterministic);

  // ---- figures and checks ----
  double flops() const;  // forward GEMMs + attention, backward GEMMs + attention backward (2.5x the forward's)
  std::string attention_backward_kernel(DropoutMode m) const;
  // Poisons (0xFF) the gradients dQKV, dX, dW_qkv, dW_o on `s`.
  void poison_gradients(cudaStream_t s);
  // Copies the gradients into the reference buffers (validate) on `s`.
  void keep_reference(cudaStream_t s);
  // 4-byte words of each gradient that differ from the reference, in the order dqkv, dx, dw, dw_out; synchronises.
  struct GradientDiff {
    uint64_t dqkv = 0, dx = 0, dw = 0, dw_out = 0;
    uint64_t total() const { return dqkv + dx + dw + dw_out; }
  };
  GradientDiff diff_reference(cudaStream_t s);
  // 4-byte words of each gradient still holding poison_gradients' pattern (written by no kernel); synchronises.
  GradientDiff unwritten(cudaStream_t s);
  // Order-independent checksums of the gradients, the same order; synchronises.
  struct GradientSums {
    uint64_t dqkv = 0, dx = 0, dw = 0, dw_out = 0;
  };
  GradientSums checksums(cudaStream_t s);
  // The step's operands and results (device), for the GPU tests' references.
  struct Buffers {
    const void *x, *w_qkv, *o, *w_out, *y, *dy, *d_o, *dw_out, *dqkv, *dx, *dw;
    const float *scale_x, *scale_w_qkv, *scale_w_out;  // fp8 dequantisation scales (nullptr for bf16)
  };
  Buffers buffers() const;
  // The attention backward's parameters in mode m (its inputs: QKV, O, LSE, dO; output dQKV).
  AttentionBwdParams backward_params(DropoutMode m, bool deterministic) const;

 private:
  struct Gemms;
  // Runs `launch` once per gradient (dQKV, dX, dW_qkv, dW_o: the buffer, its byte offset among the four as the
  // reference buffers hold them, its counter, zeroed first) on s; returns the four counters. Synchronises.
  using GradientKernel = std::function<void(const DeviceBuffer&, size_t, unsigned long long*)>;
  std::array<uint64_t, 4> per_gradient(cudaStream_t s, const GradientKernel& launch);
  void forward(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, bool check);
  void out_projection(cudaStream_t main, const PhaseFn& ph);
  void qkv_backward(cudaStream_t main, const PhaseFn& ph);
  void cast(const char* phase, const void* in, bool in_e4m3, int64_t rows, int64_t cols, bool e5m2, void* out,
            void* out_t, int amax_slot, cudaStream_t main, const PhaseFn& ph);
  float* scale_slot(int i) const;
  void fill_inputs(cudaStream_t setup);  // the constructor's parts
  void make_gemms();

  Workload w_;
  Options opt_;
  bool fp8_ = false;
  int64_t tokens_ = 0, hd_ = 0;  // B*SQ, Hq*dH
  std::unique_ptr<BlockRunner> block_;
  std::unique_ptr<Gemms> gemms_;
  DeviceBuffer w_out_, w_out_t_, o_in_, o_t_, y_, dy_, dy_in_, dy_t_, d_o_, dw_out_;
  DeviceBuffer dqkv_, dqkv_in_, dqkv_t_, x_t_, w_t_, dx_, dw_, bwd_ws_, scales_, ref_, scratch_;
};

}  // namespace dropbench
