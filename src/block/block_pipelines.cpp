#include "src/block/block_pipelines.hpp"

#include "src/core/workload_params.hpp"

#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/util/util_kernels.cuh"

namespace dropbench {

namespace {
constexpr size_t kPartitionSmem = size_t{120} << 10;  // > half of an SM's shared memory: one block per SM
constexpr int kWorkGroups = 2;                         // 0: the whole mask, 1: the chunked pipeline's first chunk
}  // namespace

json RngConfig::to_json() const {
  json j;
  j["name"] = name;
  j["schedule"] = rng_schedule_name(schedule);
  j["grid"] = grid;
  j["block"] = block;
  j["reserve_smem"] = reserve_smem;
  j["before_gemm"] = before_gemm;
  j["finisher"] = finisher;
  j["high_priority"] = high_priority;
  return j;
}

RngConfig rng_plain() {
  RngConfig c;
  c.name = "plain";
  return c;
}

RngConfig rng_coresident(int warps) {
  RngConfig c;
  c.name = fmt::format("coresident-w{}", warps);
  c.schedule = RngSchedule::Coresident;
  c.block = 32 * warps;
  c.before_gemm = true;
  c.finisher = true;
  return c;
}

RngConfig rng_partition(int sms) {
  RngConfig c;
  c.name = fmt::format("partition-{}sm", sms);
  c.schedule = RngSchedule::Steal;
  c.grid = sms;
  c.block = 1024;
  c.reserve_smem = kPartitionSmem;
  c.before_gemm = true;
  c.finisher = true;
  return c;
}

RngConfig rng_priority() {
  RngConfig c;
  c.name = "priority";
  c.high_priority = true;
  return c;
}

void validate_block_workload(const Workload& w) {
  const GemmDtype dt = parse_gemm_dtype(w.dtype);
  validate_gemm_shape(qkv_gemm_shape(w), dt);
  if (w.head_dim != 64 && w.head_dim != 128) throw UsageError("run: head_dim must be 64 or 128");
  if (w.q_heads % w.kv_heads != 0) throw UsageError("run: kv_heads must divide q_heads");
  if (w.sq > (int64_t{1} << 30)) throw UsageError("run: sq too large");
  plan_chunks(w.sq, w.chunk, 128);  // throws on a bad chunk size
}

BlockRunner::BlockRunner(const Workload& w, const Options& o, cudaStream_t setup)
    : w_(w), opt_(o), shape_(qkv_gemm_shape(w)) {
  validate_block_workload(w);
  thr_ = make_threshold(w.dropout_p, static_cast<int>(w.threshold_bits));
  geo_ = MaskGeometry{static_cast<uint32_t>(w.batch * w.q_heads), static_cast<uint32_t>(w.sq),
                      static_cast<uint32_t>(w.sq), w.causal};
  int dev = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
  chunks_ = plan_chunks(w.sq, w.chunk, 128);

  const GemmDtype dt = parse_gemm_dtype(w.dtype);
  bufs_ = QkvBuffers(shape_, dt);
  bufs_.randomize(w.seed ^ 0x9b1c4a7d2e3f5061ull, setup);
  if (dt == GemmDtype::fp8_e4m3) {
    // X and W are uniform in [-1, 1): a dot product of E terms has stdev sqrt(E)/3. Scaling W by 3/sqrt(E)
    // gives Q, K, V of unit variance, so the attention scores are what a trained model's look like (not a
    // one-hot softmax). bf16 inputs carry no scale and keep the larger values (still finite).
    const float sw = static_cast<float>(1.0 / 200.0 * 3.0 / std::sqrt(static_cast<double>(w.embed)));
    DB_CUDA(cudaMemcpy(bufs_.scale_w(), &sw, sizeof sw, cudaMemcpyHostToDevice));
  }
  gemm_ = make_gemm(gemm_options());

  o_bytes_ = static_cast<size_t>(w.batch) * w.sq * w.q_heads * w.head_dim * 2;
  lse_bytes_ = static_cast<size_t>(w.batch) * w.q_heads * w.sq * 4;
  o_.resize(o_bytes_);
  lse_.resize(lse_bytes_);
  if (o.validate) {
    o_ref_.resize(o_bytes_);
    lse_ref_.resize(lse_bytes_);
  }
  if (o.full_mask) mask_.resize(geo_.bytes());
  if (o.chunk_masks) {
    const RngMaskParams rp = rng_params(&chunks_.front(), nullptr);
    chunk_mask_[0].resize(mask_bytes(rp));
    if (chunks_.size() > 1) chunk_mask_[1].resize(mask_bytes(rp));
  }
  work_.resize(kWorkGroups * kRngWorkWords * sizeof(unsigned long long));
  scratch_.resize(4 * sizeof(unsigned long long));
  DB_CUDA(cudaMemsetAsync(work_.get(), 0, work_.size(), setup));

  int least = 0, greatest = 0;
  DB_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  DB_CUDA(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  DB_CUDA(cudaStreamCreateWithPriority(&side_hi_, cudaStreamNonBlocking, greatest));
  for (cudaEvent_t* e : {&fork_, &join_, &rng_done_[0], &rng_done_[1], &attn_done_[0], &attn_done_[1]})
    DB_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  DB_CUDA(cudaStreamSynchronize(setup));
}

BlockRunner::~BlockRunner() {
  for (cudaEvent_t e : {fork_, join_, rng_done_[0], rng_done_[1], attn_done_[0], attn_done_[1]})
    if (e) cudaEventDestroy(e);
  if (side_) cudaStreamDestroy(side_);
  if (side_hi_) cudaStreamDestroy(side_hi_);
}

GemmOptions BlockRunner::gemm_options() const {
  GemmOptions go;
  go.dtype = parse_gemm_dtype(w_.dtype);
  go.fast_accum = go.dtype == GemmDtype::fp8_e4m3;
  go.top_k = opt_.top_k;
  return go;
}

std::unique_ptr<QkvGemm> BlockRunner::make_gemm(const GemmOptions& o) const {
  auto g = std::make_unique<QkvGemm>(shape_, o);
  g->bind(bufs_.x, bufs_.w, bufs_.y, bufs_.scale_x(), bufs_.scale_w());
  return g;
}

double BlockRunner::attention_flops() const {
  return dropbench::attention_flops(attention_params(DropoutMode::None, nullptr, nullptr));
}

size_t BlockRunner::qkv_bytes() const { return static_cast<size_t>(shape_.m) * static_cast<size_t>(shape_.n) * 2; }

std::string BlockRunner::attention_kernel_name(DropoutMode m) const {
  return dropbench::attention_kernel_name(attention_params(m, nullptr, mask_.get<uint32_t>()), m);
}

AttentionParams BlockRunner::attention_params(DropoutMode m, const ChunkRange* window, const uint32_t* mask) const {
  AttentionParams ap = dropbench::attention_params(w_, thr_);
  ap.qkv = static_cast<const __nv_bfloat16*>(bufs_.y);
  ap.o = o_.get<__nv_bfloat16>();
  ap.lse = lse_.get<float>();
  ap.mask = m == DropoutMode::Mask ? mask : nullptr;
  if (window) {
    ap.row_begin = static_cast<int>(window->row_begin);
    ap.rows = static_cast<int>(window->rows);
  }
  return ap;
}

RngMaskParams BlockRunner::rng_params(const ChunkRange* window, void* out) const {
  RngMaskParams rp = rng_mask_params(w_, thr_, MaskLayout::Tile);
  rp.geo = geo_;
  rp.out = out;
  if (window) {
    rp.row_begin = static_cast<uint32_t>(window->row_begin);
    rp.rows = static_cast<uint32_t>(window->rows);
  }
  return rp;
}

void BlockRunner::launch_rng(const RngConfig& rc, const ChunkRange* window, void* out, unsigned long long* work,
                             cudaStream_t on, const PhaseFn& ph, const std::string& name) {
  RngMaskParams rp = rng_params(window, out);
  rp.schedule = rc.schedule;
  rp.grid = rc.grid;
  rp.block = rc.block;
  rp.reserve_smem = rc.reserve_smem;
  rp.work = work;
  ph(name, [&] { launch_rng_mask(rp, on); }, on);
}

void BlockRunner::launch_finisher(const ChunkRange* window, void* out, unsigned long long* work, cudaStream_t main,
                                  const PhaseFn& ph, const std::string& name) {
  RngMaskParams rp = rng_params(window, out);
  rp.schedule = RngSchedule::Steal;
  rp.block = 256;
  rp.work = work;
  ph(name, [&] { launch_rng_mask(rp, main); }, main);
}

void BlockRunner::rng_on_side(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph, const char* who,
                              const std::function<void()>& main_work, const std::string& rng_phase) {
  if (!mask_.get()) throw UsageError(std::string("run: ") + who + " needs the whole mask, which was not allocated");
  auto* work = work_.get<unsigned long long>();
  if (rc.schedule != RngSchedule::Static)
    DB_CUDA(cudaMemsetAsync(work, 0, kRngWorkWords * sizeof(unsigned long long), main));
  const cudaStream_t side = side_stream(rc);
  DB_CUDA(cudaEventRecord(fork_, main));
  DB_CUDA(cudaStreamWaitEvent(side, fork_, 0));
  const bool rng_first = !main_work || rc.before_gemm;
  if (rng_first) launch_rng(rc, nullptr, mask_.get(), work, side, ph, rng_phase);
  if (main_work) main_work();
  if (!rng_first) launch_rng(rc, nullptr, mask_.get(), work, side, ph, rng_phase);
  if (rc.finisher) launch_finisher(nullptr, mask_.get(), work, main, ph, rng_phase + "-finish");
  DB_CUDA(cudaEventRecord(join_, side));
  DB_CUDA(cudaStreamWaitEvent(main, join_, 0));
}

void BlockRunner::overlap_phase(QkvGemm& g, const RngConfig& rc, cudaStream_t main, const PhaseFn& ph) {
  rng_on_side(rc, main, ph, "the overlap", [&] { ph("gemm", [&] { g.run(main); }, main); });
}

void BlockRunner::rng_static(cudaStream_t main, const PhaseFn& ph) {
  if (!mask_.get()) throw UsageError("run: the RNG needs the whole mask, which was not allocated");
  launch_rng(rng_plain(), nullptr, mask_.get(), nullptr, main, ph, "rng");
}

void BlockRunner::rng_alone(const RngConfig& rc, cudaStream_t main, const PhaseFn& ph) {
  rng_on_side(rc, main, ph, "the RNG", nullptr);
}

void BlockRunner::attention_full(DropoutMode m, cudaStream_t main, bool write_mask) const {
  if ((m == DropoutMode::Mask || write_mask) && !mask_.get())
    throw UsageError(std::string("run: attention(") + (write_mask ? "fused-write" : "mask") + ") needs the whole mask");
  AttentionParams ap = attention_params(m, nullptr, mask_.get<uint32_t>());
  if (write_mask) ap.mask_out = mask_.get<uint32_t>();
  launch_attention(ap, m, main);
}

void BlockRunner::rng_chunks_alone(cudaStream_t main, const PhaseFn& ph) {
  if (!chunk_mask_[0].get()) throw UsageError("run: the chunk masks were not allocated");
  const RngConfig st = rng_plain();
  for (size_t i = 0; i < chunks_.size(); ++i)
    launch_rng(st, &chunks_[i], chunk_mask_[i % 2].get(), nullptr, main, ph, fmt::format("rng[{}]", i));
}

void BlockRunner::attention_chunks_alone(cudaStream_t main, const PhaseFn& ph) const {
  if (!chunk_mask_[0].get()) throw UsageError("run: the chunk masks were not allocated");
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const AttentionParams ap = attention_params(DropoutMode::Mask, &chunks_[i], chunk_mask_[i % 2].get<uint32_t>());
    ph(fmt::format("attention[{}]", i), [&] { launch_attention(ap, DropoutMode::Mask, main); }, main);
  }
}

void BlockRunner::chunked(cudaStream_t main, const PhaseFn& ph, const RngConfig& rc, QkvGemm& g) {
  if (!chunk_mask_[0].get()) throw UsageError("run: the chunk masks were not allocated");
  const size_t n = chunks_.size();
  auto* work = work_.get<unsigned long long>() + kRngWorkWords;
  const RngConfig st = rng_plain();
  const cudaStream_t side = side_stream(rc);
  if (rc.schedule != RngSchedule::Static)
    DB_CUDA(cudaMemsetAsync(work, 0, kRngWorkWords * sizeof(unsigned long long), main));
  DB_CUDA(cudaEventRecord(fork_, main));
  DB_CUDA(cudaStreamWaitEvent(side, fork_, 0));
  // Chunk 0's mask is generated next to the GEMM with the overlap configuration; chunk 1's right after it.
  if (rc.before_gemm) launch_rng(rc, &chunks_[0], chunk_mask_[0].get(), work, side, ph, "rng[0]");
  ph("gemm", [&] { g.run(main); }, main);
  if (!rc.before_gemm) launch_rng(rc, &chunks_[0], chunk_mask_[0].get(), work, side, ph, "rng[0]");
  if (rc.finisher) launch_finisher(&chunks_[0], chunk_mask_[0].get(), work, main, ph, "rng[0]-finish");
  DB_CUDA(cudaEventRecord(rng_done_[0], side));
  if (n > 1) {
    launch_rng(st, &chunks_[1], chunk_mask_[1].get(), nullptr, side, ph, "rng[1]");
    DB_CUDA(cudaEventRecord(rng_done_[1], side));
  }
  for (size_t i = 0; i < n; ++i) {
    const int b = static_cast<int>(i % 2);
    DB_CUDA(cudaStreamWaitEvent(main, rng_done_[b], 0));
    const AttentionParams ap = attention_params(DropoutMode::Mask, &chunks_[i], chunk_mask_[b].get<uint32_t>());
    ph(fmt::format("attention[{}]", i), [&] { launch_attention(ap, DropoutMode::Mask, main); }, main);
    if (i + 2 < n) {
      // Buffer b is free once attention i has read it: chunk i+2 goes there.
      DB_CUDA(cudaEventRecord(attn_done_[b], main));
      DB_CUDA(cudaStreamWaitEvent(side, attn_done_[b], 0));
      launch_rng(st, &chunks_[i + 2], chunk_mask_[b].get(), nullptr, side, ph, fmt::format("rng[{}]", i + 2));
      DB_CUDA(cudaEventRecord(rng_done_[b], side));
    }
  }
  DB_CUDA(cudaEventRecord(join_, side));
  DB_CUDA(cudaStreamWaitEvent(main, join_, 0));
}

void BlockRunner::run(Pipeline p, cudaStream_t main, const PhaseFn& ph, const RngConfig& overlap_rng, QkvGemm* g) {
  QkvGemm& gm = g ? *g : *gemm_;
  switch (p) {
    case Pipeline::Baseline:
      ph("gemm", [&] { gm.run(main); }, main);
      rng_static(main, ph);
      ph("attention", [&] { attention_full(DropoutMode::Mask, main); }, main);
      return;
    case Pipeline::Fused:
      ph("gemm", [&] { gm.run(main); }, main);
      ph("attention", [&] { attention_full(DropoutMode::Fused, main); }, main);
      return;
    case Pipeline::Overlap:
      overlap_phase(gm, overlap_rng, main, ph);
      ph("attention", [&] { attention_full(DropoutMode::Mask, main); }, main);
      return;
    case Pipeline::Chunked:
      chunked(main, ph, overlap_rng, gm);
      return;
    case Pipeline::Stored:
    case Pipeline::RegenOverlap:
    case Pipeline::FusedWrite:
      break;
  }
  throw UsageError(std::string("run: ") + pipeline_name(p) + " is a training-step strategy (pass train), not a forward "
                   "pipeline");
}

void BlockRunner::poison_outputs(cudaStream_t s) {
  launch_poison(o_.get(), o_bytes_, 0xFFFFFFFFu, s);
  launch_poison(lse_.get(), lse_bytes_, 0xFFFFFFFFu, s);
  if (mask_.get()) DB_CUDA(cudaMemsetAsync(mask_.get(), 0, mask_.size(), s));
}

void BlockRunner::keep_reference(cudaStream_t s) {
  if (!o_ref_.get()) throw UsageError("run: validation buffers were not allocated");
  DB_CUDA(cudaMemcpyAsync(o_ref_.get(), o_.get(), o_bytes_, cudaMemcpyDeviceToDevice, s));
  DB_CUDA(cudaMemcpyAsync(lse_ref_.get(), lse_.get(), lse_bytes_, cudaMemcpyDeviceToDevice, s));
}

std::pair<uint64_t, uint64_t> BlockRunner::diff_reference(cudaStream_t s) {
  if (!o_ref_.get()) throw UsageError("run: validation buffers were not allocated");
  auto* c = scratch_.get<unsigned long long>();
  DB_CUDA(cudaMemsetAsync(c, 0, 2 * sizeof(unsigned long long), s));
  launch_count_diff(o_.get(), o_ref_.get(), o_bytes_, c, s);
  launch_count_diff(lse_.get(), lse_ref_.get(), lse_bytes_, c + 1, s);
  unsigned long long h[2];
  DB_CUDA(cudaMemcpyAsync(h, c, sizeof h, cudaMemcpyDeviceToHost, s));
  DB_CUDA(cudaStreamSynchronize(s));
  return {h[0], h[1]};
}

uint64_t BlockRunner::checksum(const void* p, size_t bytes, cudaStream_t s) {
  auto* c = scratch_.get<unsigned long long>() + 2;
  launch_checksum(p, bytes, c, s);
  unsigned long long h = 0;
  DB_CUDA(cudaMemcpyAsync(&h, c, sizeof h, cudaMemcpyDeviceToHost, s));
  DB_CUDA(cudaStreamSynchronize(s));
  return h;
}

BlockRunner::WorkStats BlockRunner::work_stats(cudaStream_t s) {
  unsigned long long h[kRngWorkWords];
  DB_CUDA(cudaMemcpyAsync(h, work_.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  DB_CUDA(cudaStreamSynchronize(s));
  WorkStats ws;
  ws.strips = static_cast<uint64_t>(geo_.bh) * geo_.rows16();
  ws.coresident_strips = h[1];
  ws.coresident_blocks = h[6];
  for (int i = 2; i < 6; ++i) ws.coresident_sms += std::popcount(h[i]);
  return ws;
}

}  // namespace dropbench
