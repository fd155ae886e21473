// `dropbench run` at a measured point of pass train: the training step's strategies on the GPU (TrainRunner,
// src/block/train_step.hpp), through the core harness in three interleaved groups:
//   1. the pieces alone and the two overlaps: alone:gemm (the QKV GEMM), alone:rng (the whole mask; for an
//      --overlap-rng other than plain, alone:rng:<mechanism>), alone:gemm-out-bwd (the output projection's backward
//      GEMMs), overlap:fwd (QKV GEMM || RNG: stored's and
//      regen-overlap's forward), overlap:bwd (the output projection's backward || RNG: regen-overlap's backward),
//      from which the hidden fraction of each overlap (paired 95 % interval) and its energy bound;
//   2. the strategies, each first run once on poisoned gradients with the deterministic dQ and compared bitwise
//      with the first strategy's gradients (dQKV, dX, dW_qkv, dW_o), then timed in the fast (atomic dQ) mode;
//   3. the attention kernels those strategies launch, alone on the step's data: alone:attention-mask / -fused (the
//      forward), alone:attention-bwd-mask / -fused (the backward), each against its phase inside the step.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "src/block/run_point.hpp"
#include "src/block/train_step.hpp"

namespace dropbench {

// Group 3: the attention kernels the measured strategies launch, alone, each against its phase in the first strategy
// that launches it. They are measured after group 2, so that O, LSE, dO and the mask hold a step's values: a kernel's
// power, and so its clock at the power cap, depends on its data. fused-write's forward (the fused kernel writing the
// mask) is not among them.
struct AttentionAlone {
  std::string variant;   // alone:attention-{mask,fused} or alone:attention-bwd-{mask,fused}
  std::string phase;     // its phase in the step: attention, attention-bwd
  std::string strategy;  // the first strategy of `run` that launches it
  DropoutMode mode;
  bool backward;
};
std::vector<AttentionAlone> attention_alone_plan(const std::vector<Pipeline>& run);

// The training step's measured figures at one point (PointScope: ps.plan.run are the strategies to measure). Adds
// the variants (pieces, overlaps, strategies, attention kernels alone) to ps.pr and the point's figures to
// ps.pr.derived["train"]["measured"]; returns the strategies' median step times by name.
std::map<std::string, double> measure_train_point(PointScope& ps, TrainRunner& tr, const RngConfig& rc);

}  // namespace dropbench
