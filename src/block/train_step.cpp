#include "src/block/train_step.hpp"

#include <array>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "kernels/gemm/cast_transpose.cuh"
#include "kernels/util/util_kernels.cuh"

namespace dropbench {

namespace {
// The fp8 scale block's slots (kTrainScaleSlotBytes apart).
constexpr int kScaleWout = 0;  // W_o's dequantisation scale
constexpr int kScaleUnit = 1;  // 1: the casts' scale and their outputs' dequantisation scale
constexpr int kScaleFill = 2;  // W_o's quantisation at set-up (stored = value * 200, as QkvBuffers' W)
constexpr int kAmaxO = 3, kAmaxDy = 4, kAmaxDqkv = 5;
}  // namespace

void validate_train_workload(const Workload& w) {
  validate_block_workload(w);
  const int64_t tokens = w.batch * w.sq;
  if (tokens % 16 != 0)
    throw UsageError(fmt::format("workload.sq: batch * sq = {} is not a multiple of 16 (allowed: batch * sq a multiple "
                                 "of 16 at pass train: the dW GEMMs contract over the tokens)",
                                 tokens));
  // The step launches the attention backward on the whole matrix: a shape it refuses is refused here, with its
  // reason, before anything is sized (train_memory asks it for its workspace).
  check_attention_backward_shape(train_backward_shape(w), DropoutMode::None);
}

struct TrainRunner::Gemms {
  std::unique_ptr<QkvGemm> out, out_dx, out_dw, dx, dw;
};

TrainRunner::TrainRunner(const Workload& w, const Options& o, cudaStream_t setup) : w_(w), opt_(o) {
  validate_train_workload(w);
  fp8_ = parse_gemm_dtype(w.dtype) == GemmDtype::fp8_e4m3;
  BlockRunner::Options bo;
  bo.top_k = o.top_k;
  bo.full_mask = o.full_mask;
  bo.chunk_masks = false;
  bo.validate = false;
  block_ = std::make_unique<BlockRunner>(w, bo, setup);
  tokens_ = w.batch * w.sq;
  hd_ = w.q_heads * w.head_dim;
  const TrainMemory tm = train_memory(w, o.validate);
  const std::pair<DeviceBuffer*, size_t> sized[] = {
      {&w_out_, tm.w_out}, {&w_out_t_, tm.w_out_t}, {&o_in_, tm.o_in},     {&o_t_, tm.o_t},
      {&y_, tm.y},         {&dy_, tm.dy},           {&dy_in_, tm.dy_in},   {&dy_t_, tm.dy_t},
      {&d_o_, tm.d_o},     {&dw_out_, tm.dw_out},   {&dqkv_, tm.dqkv},     {&dqkv_in_, tm.dqkv_in},
      {&dqkv_t_, tm.dqkv_t}, {&x_t_, tm.x_t},       {&w_t_, tm.w_t},       {&dx_, tm.dx},
      {&dw_, tm.dw},       {&bwd_ws_, tm.bwd_workspace}, {&scales_, tm.fp8_scales}, {&ref_, tm.grad_ref}};
  for (const auto& [buf, bytes] : sized) buf->resize(bytes);
  scratch_.resize(8 * sizeof(unsigned long long));

  fill_inputs(setup);
  make_gemms();
  if (bwd_ws_.size() < attention_backward_workspace_bytes(backward_params(DropoutMode::None, false)))
    throw std::logic_error("TrainRunner: train_memory's bwd_workspace is smaller than the attention backward's");
  DB_CUDA(cudaStreamSynchronize(setup));
}

TrainRunner::~TrainRunner() = default;

void TrainRunner::fill_inputs(cudaStream_t setup) {
  // Inputs: the gradient from the layer above, and W_o (uniform in [-1, 1); fp8: stored x 200 in e4m3, with the
  // dequantisation scale (1/200) x 3/sqrt(Hq*dH) that gives Y unit variance, as BlockRunner scales W_qkv).
  const Workload& w = w_;
  const uint64_t seed = w.seed ^ 0x6a09e667f3bcc908ull;
  launch_fill_uniform(dy_.get(), static_cast<uint64_t>(tokens_) * w.embed, true, seed, setup);
  const uint64_t wo_elems = static_cast<uint64_t>(w.embed) * hd_;
  if (fp8_) {
    float h[kTrainScaleSlots] = {};
    h[kScaleWout] = static_cast<float>(1.0 / 200.0 * 3.0 / std::sqrt(static_cast<double>(hd_)));
    h[kScaleUnit] = 1.f;
    h[kScaleFill] = 200.f;
    for (size_t i = 0; i < kTrainScaleSlots; ++i)
      DB_CUDA(cudaMemcpy(scale_slot(static_cast<int>(i)), &h[i], sizeof(float), cudaMemcpyHostToDevice));
    DeviceBuffer master(wo_elems * 2);
    launch_fill_uniform(master.get(), wo_elems, true, seed + 1, setup);
    CastTransposeParams cp;
    cp.in = master.get();
    cp.rows = w.embed;
    cp.cols = hd_;
    cp.scale = scale_slot(kScaleFill);
    cp.out = w_out_.get();
    launch_cast_transpose(cp, setup);
    DB_CUDA(cudaStreamSynchronize(setup));  // before `master` is freed
  } else {
    launch_fill_uniform(w_out_.get(), wo_elems, true, seed + 1, setup);
  }
}

// The five GEMMs beside the forward's QKV GEMM (shapes and operands: train_step.hpp), bound to their buffers.
void TrainRunner::make_gemms() {
  const QkvBuffers& qb = block_->qkv_buffers();
  const int64_t M = tokens_, E = w_.embed, HD = hd_, NQ = block_->gemm_shape().n;
  const GemmOptions base = block_->gemm_options();
  auto make = [&](GemmShape s, bool fwd, bool xt, bool wt, const void* x, const void* wp, void* y, const float* sx,
                  const float* sw) {
    GemmOptions go = base;
    if (fp8_) {
      go.fast_accum = fwd;  // TE: fast accumulation in the forward, the split accumulator in the backward
      go.x_e5m2 = !fwd;     // the backward's X operand is a gradient
    } else {
      go.x_transposed = xt;
      go.w_transposed = wt;
    }
    auto g = std::make_unique<QkvGemm>(s, go);
    g->bind(x, wp, y, sx, sw);
    return g;
  };
  const float* unit = fp8_ ? scale_slot(kScaleUnit) : nullptr;
  const float* s_wo = fp8_ ? scale_slot(kScaleWout) : nullptr;
  gemms_ = std::make_unique<Gemms>();
  Gemms& g = *gemms_;
  g.out = make({M, E, HD}, true, false, false, fp8_ ? o_in_.get() : block_->o(), w_out_.get(), y_.get(), unit, s_wo);
  g.out_dx = make({M, HD, E}, false, false, true, fp8_ ? dy_in_.get() : dy_.get(),
                  fp8_ ? w_out_t_.get() : w_out_.get(), d_o_.get(), unit, s_wo);
  g.out_dw = make({E, HD, M}, false, true, true, fp8_ ? dy_t_.get() : dy_.get(), fp8_ ? o_t_.get() : block_->o(),
                  dw_out_.get(), unit, unit);
  g.dx = make({M, E, NQ}, false, false, true, fp8_ ? dqkv_in_.get() : dqkv_.get(), fp8_ ? w_t_.get() : qb.w,
              dx_.get(), unit, qb.scale_w());
  g.dw = make({NQ, E, M}, false, true, true, fp8_ ? dqkv_t_.get() : dqkv_.get(), fp8_ ? x_t_.get() : qb.x, dw_.get(),
              unit, qb.scale_x());
}

float* TrainRunner::scale_slot(int i) const {
  return reinterpret_cast<float*>(scales_.get<unsigned char>() + static_cast<size_t>(i) * kTrainScaleSlotBytes);
}

void TrainRunner::tune(cudaStream_t s) {
  const std::initializer_list<QkvGemm*> all = {&block_->gemm(),      gemms_->out.get(), gemms_->out_dx.get(),
                                               gemms_->out_dw.get(), gemms_->dx.get(),  gemms_->dw.get()};
  bool choice = false;
  for (const QkvGemm* g : all) choice = choice || g->candidates().size() > 1;
  if (!choice) return;
  // One untimed fused step first: the backward GEMMs' operands (fp8: the casts' copies and transposes) then hold
  // the step's data, not whatever the allocation held, when the candidates are timed.
  run(Pipeline::Fused, s, no_phases(), rng_plain(), /*deterministic=*/false);
  for (QkvGemm* g : all) g->tune(s);
}

void TrainRunner::cast(const char* phase, const void* in, bool in_e4m3, int64_t rows, int64_t cols, bool e5m2,
                       void* out, void* out_t, int amax_slot, cudaStream_t main, const PhaseFn& ph) {
  CastTransposeParams p;
  p.in = in;
  p.in_e4m3 = in_e4m3;
  p.rows = rows;
  p.cols = cols;
  p.out_kind = e5m2 ? Fp8Kind::e5m2 : Fp8Kind::e4m3;
  p.scale = in_e4m3 ? nullptr : scale_slot(kScaleUnit);
  p.out = out;
  p.out_t = out_t;
  p.amax = amax_slot >= 0 ? scale_slot(amax_slot) : nullptr;
  ph(phase, [&] { launch_cast_transpose(p, main); }, main);
}

void TrainRunner::out_projection(cudaStream_t main, const PhaseFn& ph) {
  if (fp8_) cast("cast-o", block_->o(), false, tokens_, hd_, false, o_in_.get(), o_t_.get(), kAmaxO, main, ph);
  ph("gemm-out", [&] { gemms_->out->run(main); }, main);
}

void TrainRunner::out_backward(cudaStream_t main, const PhaseFn& ph) {
  if (fp8_) {
    cast("cast-dy", dy_.get(), false, tokens_, w_.embed, true, dy_in_.get(), dy_t_.get(), kAmaxDy, main, ph);
    cast("transpose-w-out", w_out_.get(), true, w_.embed, hd_, false, nullptr, w_out_t_.get(), -1, main, ph);
  }
  ph("gemm-out-dx", [&] { gemms_->out_dx->run(main); }, main);
  ph("gemm-out-dw", [&] { gemms_->out_dw->run(main); }, main);
}

void TrainRunner::out_backward_with_rng(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph) {
  block_->rng_on_side(rc, main, ph, "regen-overlap", [&] { out_backward(main, ph); }, "rng-bwd");
}

void TrainRunner::qkv_backward(cudaStream_t main, const PhaseFn& ph) {
  if (fp8_) {
    const QkvBuffers& qb = block_->qkv_buffers();
    const int64_t nq = block_->gemm_shape().n;
    cast("cast-dqkv", dqkv_.get(), false, tokens_, nq, true, dqkv_in_.get(), dqkv_t_.get(), kAmaxDqkv, main, ph);
    cast("transpose-w-qkv", qb.w, true, nq, w_.embed, false, nullptr, w_t_.get(), -1, main, ph);
    cast("transpose-x", qb.x, true, tokens_, w_.embed, false, nullptr, x_t_.get(), -1, main, ph);
  }
  ph("gemm-dx", [&] { gemms_->dx->run(main); }, main);
  ph("gemm-dw", [&] { gemms_->dw->run(main); }, main);
}

DropoutMode train_forward_mode(Pipeline p) {
  return p == Pipeline::Fused || p == Pipeline::FusedWrite ? DropoutMode::Fused : DropoutMode::Mask;
}
DropoutMode train_backward_mode(Pipeline p) { return p == Pipeline::Fused ? DropoutMode::Fused : DropoutMode::Mask; }

AttentionBwdParams TrainRunner::backward_params(DropoutMode m, bool deterministic) const {
  AttentionBwdParams bp;
  bp.fwd = block_->attention_params(m, nullptr, block_->full_mask());
  bp.dout = d_o_.get<__nv_bfloat16>();
  bp.dqkv = dqkv_.get<__nv_bfloat16>();
  bp.workspace = bwd_ws_.get();
  bp.deterministic = deterministic;
  return bp;
}

void TrainRunner::forward(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, bool check) {
  BlockRunner& b = *block_;
  if (train_forward_mode(p) == DropoutMode::Fused) {
    ph("gemm", [&] { b.gemm().run(main); }, main);
    ph("attention", [&] { b.attention_full(DropoutMode::Fused, main, p == Pipeline::FusedWrite); }, main);
  } else {
    b.overlap_phase(b.gemm(), rc, main, ph);  // GEMM || RNG writing the whole mask
    ph("attention", [&] { b.attention_full(DropoutMode::Mask, main); }, main);
  }
  out_projection(main, ph);
  // regen-overlap frees its mask here: a validation run wipes it, so a backward that read it unregenerated shows.
  if (check && p == Pipeline::RegenOverlap) DB_CUDA(cudaMemsetAsync(b.full_mask(), 0, b.full_mask_bytes(), main));
}

void TrainRunner::run(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, bool deterministic,
                      bool check) {
  if (!applies_to(p, Pass::Train))
    throw UsageError(std::string("run: ") + pipeline_name(p) + " is not a training-step strategy (pass fwd)");
  forward(p, main, ph, rc, check);
  if (p == Pipeline::RegenOverlap)
    out_backward_with_rng(rc, main, ph);
  else
    out_backward(main, ph);
  attention_backward(train_backward_mode(p), main, ph, deterministic);
  qkv_backward(main, ph);
}

void TrainRunner::attention_backward(DropoutMode m, cudaStream_t main, const PhaseFn& ph, bool deterministic) {
  const AttentionBwdParams bp = backward_params(m, deterministic);
  ph("attention-bwd", [&] { launch_attention_backward(bp, m, main); }, main);
}

double TrainRunner::flops() const {
  // Each GEMM runs three times (forward, dX, dW); the attention forward once and its backward at the convention's
  // ratio.
  const double out = gemm_flops(static_cast<double>(tokens_), static_cast<double>(w_.embed), static_cast<double>(hd_));
  return 3.0 * (block_->gemm_flops() + out) + (1.0 + kAttentionBwdFlopRatio) * block_->attention_flops();
}

std::string TrainRunner::attention_backward_kernel(DropoutMode m) const {
  return attention_backward_kernel_name(backward_params(m, false), m);
}

namespace {
constexpr uint32_t kGradientPoison = 0xFFFFFFFFu;  // NaN in bf16 pairs and fp32: no finite gradient has it
}  // namespace

void TrainRunner::poison_gradients(cudaStream_t s) {
  for (DeviceBuffer* b : {&dqkv_, &dx_, &dw_, &dw_out_}) launch_poison(b->get(), b->size(), kGradientPoison, s);
}

std::array<uint64_t, 4> TrainRunner::per_gradient(cudaStream_t s, const GradientKernel& launch) {
  auto* c = scratch_.get<unsigned long long>();
  DB_CUDA(cudaMemsetAsync(c, 0, 4 * sizeof(unsigned long long), s));
  size_t off = 0, i = 0;
  for (DeviceBuffer* b : {&dqkv_, &dx_, &dw_, &dw_out_}) {
    launch(*b, off, c + i++);
    off += b->size();
  }
  unsigned long long h[4];
  DB_CUDA(cudaMemcpyAsync(h, c, sizeof h, cudaMemcpyDeviceToHost, s));
  DB_CUDA(cudaStreamSynchronize(s));
  return {h[0], h[1], h[2], h[3]};
}

TrainRunner::GradientDiff TrainRunner::unwritten(cudaStream_t s) {
  const auto n = per_gradient(s, [&](const DeviceBuffer& b, size_t, unsigned long long* c) {
    launch_count_word(b.get(), b.size(), kGradientPoison, c, s);
  });
  return {n[0], n[1], n[2], n[3]};
}

void TrainRunner::keep_reference(cudaStream_t s) {
  if (!ref_.get()) throw UsageError("run: the gradients' reference buffers were not allocated");
  size_t off = 0;
  for (DeviceBuffer* b : {&dqkv_, &dx_, &dw_, &dw_out_}) {
    DB_CUDA(cudaMemcpyAsync(ref_.get<unsigned char>() + off, b->get(), b->size(), cudaMemcpyDeviceToDevice, s));
    off += b->size();
  }
}

TrainRunner::GradientDiff TrainRunner::diff_reference(cudaStream_t s) {
  if (!ref_.get()) throw UsageError("run: the gradients' reference buffers were not allocated");
  const auto n = per_gradient(s, [&](const DeviceBuffer& b, size_t off, unsigned long long* c) {
    launch_count_diff(b.get(), ref_.get<unsigned char>() + off, b.size(), c, s);
  });
  return {n[0], n[1], n[2], n[3]};
}

TrainRunner::Buffers TrainRunner::buffers() const {
  const QkvBuffers& qb = block_->qkv_buffers();
  return {qb.x,       qb.w,           block_->o(),  w_out_.get(), y_.get(),
          dy_.get(),  d_o_.get(),     dw_out_.get(), dqkv_.get(), dx_.get(),
          dw_.get(),  fp8_ ? qb.scale_x() : nullptr, fp8_ ? qb.scale_w() : nullptr,
          fp8_ ? scale_slot(kScaleWout) : nullptr};
}

TrainRunner::GradientSums TrainRunner::checksums(cudaStream_t s) {
  const auto n = per_gradient(s, [&](const DeviceBuffer& b, size_t, unsigned long long* c) {
    launch_checksum(b.get(), b.size(), c, s);
  });
  return {n[0], n[1], n[2], n[3]};
}

}  // namespace dropbench
