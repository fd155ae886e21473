#include "src/block/pipeline_plan.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "src/core/workload_params.hpp"

namespace dropbench {

int64_t auto_chunk_rows(int64_t sq, int64_t block_rows, int target_chunks) {
  if (sq < 1 || block_rows < 1 || target_chunks < 1) throw UsageError("chunk: bad auto-chunk arguments");
  const int64_t want = (sq + target_chunks - 1) / target_chunks;
  const int64_t rows = (want + block_rows - 1) / block_rows * block_rows;
  return std::max(rows, block_rows);
}

std::vector<ChunkRange> plan_chunks(int64_t sq, int64_t chunk_rows, int64_t block_rows) {
  if (block_rows < 16 || block_rows % 16 != 0) throw UsageError("chunk: the query block must be a multiple of 16");
  if (sq < 1) throw UsageError("chunk: sq must be >= 1");
  if (chunk_rows < 0) throw UsageError(fmt::format("chunk: {} is negative", chunk_rows));
  if (chunk_rows == 0) chunk_rows = auto_chunk_rows(sq, block_rows);
  if (chunk_rows % block_rows != 0)
    throw UsageError(fmt::format("chunk: {} query rows is not a multiple of {} (the attention kernel's query block; "
                                 "allowed: 0 = auto, {}, {}, ...)",
                                 chunk_rows, block_rows, block_rows, 2 * block_rows));
  std::vector<ChunkRange> out;
  for (int64_t r = 0; r < sq; r += chunk_rows) out.push_back({r, std::min(chunk_rows, sq - r)});
  return out;
}

double hidden_fraction(double t_a, double t_b, double t_ab) {
  if (!(t_a > 0) || !(t_b > 0) || !(t_ab > 0)) return 0.0;
  return (t_a + t_b - t_ab) / std::min(t_a, t_b);
}

double hidden_fraction_of(const std::vector<double>& t) { return hidden_fraction(t[0], t[1], t[2]); }

int partition_rng_sms(int sms, double t_gemm, double t_rng, double scale, int granularity) {
  if (granularity < 1) granularity = 1;
  if (sms < 2 * granularity) throw UsageError("partition: too few SMs to split");
  double share = (t_gemm > 0 && t_rng > 0) ? t_rng / (t_gemm + t_rng) : 0.5;
  double k = sms * share * scale;
  int ki = static_cast<int>(std::lround(k / granularity)) * granularity;
  return std::clamp(ki, granularity, sms - granularity);
}

namespace {

[[noreturn]] void too_big(const std::string& what) {
  throw UsageError(what + " more than 2^64 bytes, which no size can count (allowed: a shape whose buffers are below "
                          "2^64 bytes)");
}

uint64_t u64(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

}  // namespace

uint64_t checked_product(std::initializer_list<uint64_t> factors, const std::string& what) {
  uint64_t r = 1;
  for (uint64_t f : factors)
    if (__builtin_mul_overflow(r, f, &r)) too_big(what);
  return r;
}

uint64_t checked_sum(std::initializer_list<uint64_t> terms, const std::string& what) {
  uint64_t r = 0;
  for (uint64_t t : terms)
    if (__builtin_add_overflow(r, t, &r)) too_big(what);
  return r;
}

BlockMemory block_memory(const Workload& w, int64_t chunk_rows, int gemm_objects, bool validate) {
  BlockMemory m;
  const std::string what = fmt::format("workload.sq: {} (batch {}, embed {}, q_heads {}) makes the block's buffers",
                                       w.sq, w.batch, w.embed, w.q_heads);
  const uint64_t in_bytes = w.dtype == "fp8" ? 1 : 2;
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  const uint64_t tokens = checked_product({u64(w.batch), u64(w.sq)}, what);
  m.x = checked_product({u64(d.m), u64(d.k), in_bytes}, what);
  m.w = checked_product({u64(d.n), u64(d.k), in_bytes}, what);
  m.qkv = checked_product({u64(d.m), u64(d.n), 2}, what);
  m.o = checked_product({tokens, u64(w.q_heads), u64(w.head_dim), 2}, what);
  m.lse = checked_product({u64(w.batch), u64(w.q_heads), u64(w.sq), 4}, what);
  m.o_ref = validate ? m.o : 0;
  // Dense tile storage (causal too): 16 x 64 tiles of 32 words, as MaskGeometry counts them (its bh and sq are
  // 32-bit, so they are counted here in 64 bits); a chunk's mask holds its rows.
  const uint64_t bh = checked_product({u64(w.batch), u64(w.q_heads)}, what);
  const uint64_t c64 = mask_tile_cols(u64(w.sq));
  const uint64_t chunk = u64(std::min<int64_t>(chunk_rows, w.sq));
  m.full_mask = checked_product({bh, mask_strips(u64(w.sq)), c64, kTileBytes}, what);
  m.chunk_mask = checked_product({bh, mask_strips(chunk), c64, kTileBytes}, what);
  m.gemm_workspaces = checked_product({u64(gemm_objects), uint64_t{64} << 20}, what);
  checked_sum({m.x, m.w, m.qkv, m.o, m.lse, m.o_ref, m.gemm_workspaces, m.full_mask, 2 * m.chunk_mask}, what);
  return m;
}

size_t TrainMemory::total() const {
  uint64_t r = 0;
  for (const auto& [name, b] : buffers()) r = checked_sum({r, b}, "the training step's buffers take");
  return r;
}

std::vector<std::pair<std::string, size_t>> TrainMemory::buffers() const {
  std::vector<std::pair<std::string, size_t>> all = {
      {"w_out", w_out}, {"w_out_t", w_out_t}, {"o_in", o_in},       {"o_t", o_t},       {"y", y},
      {"dy", dy},       {"dy_in", dy_in},     {"dy_t", dy_t},       {"d_o", d_o},       {"dw_out", dw_out},
      {"dqkv", dqkv},   {"dqkv_in", dqkv_in}, {"dqkv_t", dqkv_t},   {"x_t", x_t},       {"w_t", w_t},
      {"dx", dx},       {"dw", dw},           {"bwd_workspace", bwd_workspace}, {"fp8_scales", fp8_scales},
      {"grad_ref", grad_ref}};
  std::vector<std::pair<std::string, size_t>> out;
  for (const auto& b : all)
    if (b.second > 0) out.push_back(b);
  return out;
}

AttentionBwdParams train_backward_shape(const Workload& w) {
  AttentionBwdParams bp;
  bp.fwd = attention_params(w, Threshold{});
  bp.deterministic = false;
  return bp;
}

TrainMemory train_memory(const Workload& w, bool validate) {
  const std::string what = fmt::format("workload.sq: {} (batch {}, embed {}, q_heads {}) makes the training step's buffers",
                                       w.sq, w.batch, w.embed, w.q_heads);
  const bool fp8 = w.dtype == "fp8";
  const uint64_t in_bytes = fp8 ? 1 : 2;
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  const uint64_t tokens = checked_product({u64(w.batch), u64(w.sq)}, what);
  const uint64_t hd = checked_product({u64(w.q_heads), u64(w.head_dim)}, what);
  const uint64_t o_elems = checked_product({tokens, hd}, what), y_elems = checked_product({tokens, u64(w.embed)}, what);
  const uint64_t qkv_elems = checked_product({u64(d.m), u64(d.n)}, what);
  const uint64_t w_elems = checked_product({u64(d.n), u64(d.k)}, what);
  const uint64_t wo_elems = checked_product({u64(w.embed), hd}, what);
  const uint64_t f8 = fp8 ? 1 : 0;
  TrainMemory t;
  t.w_out = checked_product({wo_elems, in_bytes}, what);
  t.w_out_t = wo_elems * f8;
  t.o_in = o_elems * f8;
  t.o_t = o_elems * f8;
  t.y = checked_product({y_elems, 2}, what);
  t.dy = checked_product({y_elems, 2}, what);
  t.dy_in = y_elems * f8;
  t.dy_t = y_elems * f8;
  t.d_o = checked_product({o_elems, 2}, what);
  t.dw_out = checked_product({wo_elems, 2}, what);
  t.dqkv = checked_product({qkv_elems, 2}, what);
  t.dqkv_in = qkv_elems * f8;
  t.dqkv_t = qkv_elems * f8;
  t.x_t = checked_product({u64(d.m), u64(d.k)}, what) * f8;
  t.w_t = w_elems * f8;
  t.dx = checked_product({u64(d.m), u64(d.k), 2}, what);
  t.dw = checked_product({w_elems, 2}, what);
  // The attention backward's own size in its fast (atomic dQ) mode, the larger one: its layout (D and the LSE copy
  // padded to 64 queries, the dQ accumulator) is the kernel's to say. Shape only: no dropout field is read.
  checked_product({o_elems, 4}, what);  // the dQ accumulator, before the backward sizes it
  t.bwd_workspace = attention_backward_workspace_bytes(train_backward_shape(w));
  t.fp8_scales = fp8 ? kTrainScaleSlots * kTrainScaleSlotBytes : 0;
  t.grad_ref = validate ? checked_sum({t.dqkv, t.dx, t.dw, t.dw_out}, what) : 0;
  t.total();  // checked
  return t;
}

uint64_t mask_budget_bytes(double gib, const char* zero) {
  if (!(gib >= 0 && gib <= 1048576.0))  // NaN fails both
    throw UsageError(fmt::format("--mask-budget: must be in [0, 1048576] (GiB; 0 = {})", zero));
  const uint64_t bytes = static_cast<uint64_t>(gib * double(uint64_t{1} << 30));
  if (gib > 0 && bytes == 0)  // a positive budget must not read as 0 (its other meaning)
    throw UsageError(fmt::format("--mask-budget: {} GiB is less than one byte (allowed: 0 = {}, or at least 1 byte)",
                                 gib, zero));
  return bytes;
}

MaskFootprint mask_footprint(Pipeline p, const BlockMemory& m, int64_t layers) {
  const PipelineSpec& s = pipeline_spec(p);
  if (!s.train) throw UsageError(std::string("run: ") + s.name + " is not a training-step strategy");
  MaskFootprint f;
  f.layers = std::max<int64_t>(layers, 1);
  const std::string what = fmt::format("{} layers' masks take", f.layers);
  switch (s.train_mask) {
    case MaskLife::None: break;
    case MaskLife::HeldAcrossStep:
      f.block_bytes = m.full_mask;
      f.held_per_layer = m.full_mask;
      f.network_bytes = checked_product({m.full_mask, u64(f.layers)}, what);
      break;
    case MaskLife::WithinPhase:
      f.block_bytes = m.full_mask;
      f.network_bytes = m.full_mask;
      break;
  }
  return f;
}

PipelinePlan plan_train(const BlockMemory& m, const TrainMemory& t, int64_t layers, size_t free_bytes,
                        size_t mask_budget, const std::vector<Pipeline>& wanted, size_t headroom) {
  PipelinePlan plan;
  const size_t common = checked_sum({m.common(), t.total(), headroom}, "the training step's buffers take");
  if (common > free_bytes) {
    plan.point_fits = false;
    plan.point_reason = fmt::format("the training step's buffers need {} (with {} headroom), more than the {} of free "
                                    "device memory",
                                    human_bytes(m.common() + t.total()), human_bytes(headroom), human_bytes(free_bytes));
    return plan;
  }
  const size_t left = free_bytes - common;
  for (Pipeline p : wanted) {
    const MaskFootprint f = mask_footprint(p, m, layers);
    if (f.block_bytes > left) {
      plan.skipped.emplace_back(p, fmt::format("the whole dropout mask needs {}, more than the {} of device memory left",
                                               human_bytes(f.block_bytes), human_bytes(left)));
    } else if (mask_budget > 0 && f.network_bytes > mask_budget) {
      plan.skipped.emplace_back(p, fmt::format("its masks take {} over {} layer(s), more than the --mask-budget of {}",
                                               human_bytes(f.network_bytes), f.layers, human_bytes(mask_budget)));
    } else {
      plan.run.push_back(p);
      plan.needs_full_mask = plan.needs_full_mask || f.block_bytes > 0;
    }
  }
  if (plan.run.empty()) {
    plan.point_fits = false;
    plan.point_reason = "no wanted strategy fits: " + (plan.skipped.empty() ? std::string("?") : plan.skipped.front().second);
  }
  return plan;
}

PipelinePlan plan_pipelines(const BlockMemory& m, size_t free_bytes, size_t mask_budget,
                            const std::vector<Pipeline>& wanted, size_t headroom) {
  PipelinePlan plan;
  const size_t common = m.common() + headroom;
  if (common > free_bytes) {
    plan.point_fits = false;
    plan.point_reason = fmt::format("X, W, QKV, O and LSE need {} (with {} headroom), more than the {} of free device "
                                    "memory",
                                    human_bytes(m.common()), human_bytes(headroom), human_bytes(free_bytes));
    return plan;
  }
  const size_t left = free_bytes - common;
  const bool want_full =
      std::any_of(wanted.begin(), wanted.end(), [](Pipeline p) { return pipeline_spec(p).full_mask; });
  const bool want_chunk =
      std::any_of(wanted.begin(), wanted.end(), [](Pipeline p) { return pipeline_spec(p).chunk_masks; });
  const size_t chunk_need = want_chunk ? 2 * m.chunk_mask : 0;
  const bool chunk_ok = chunk_need <= left;
  const bool over_budget = mask_budget > 0 && m.full_mask > mask_budget;  // only a --mask-budget given
  // The chunk masks are reserved beside the full mask only when Chunked runs at all.
  const size_t reserve = chunk_ok ? chunk_need : 0;
  const bool full_ok = !want_full || (!over_budget && m.full_mask + reserve <= left);
  for (Pipeline p : wanted) {
    const PipelineSpec& spec = pipeline_spec(p);
    if (spec.full_mask && !full_ok) {
      plan.skipped.emplace_back(
          p, over_budget
                 ? fmt::format("the full dropout mask needs {}, more than the --mask-budget of {}",
                               human_bytes(m.full_mask), human_bytes(mask_budget))
                 : fmt::format("the full dropout mask needs {}, more than the {} of device memory left",
                               human_bytes(m.full_mask), human_bytes(left - reserve)));
    } else if (spec.chunk_masks && !chunk_ok) {
      plan.skipped.emplace_back(p, fmt::format("two chunk masks need {}, more than the {} of device memory left",
                                               human_bytes(chunk_need), human_bytes(left)));
    } else {
      plan.run.push_back(p);
    }
  }
  for (Pipeline p : plan.run) {
    plan.needs_full_mask = plan.needs_full_mask || pipeline_spec(p).full_mask;
    plan.needs_chunk_masks = plan.needs_chunk_masks || pipeline_spec(p).chunk_masks;
  }
  if (plan.run.empty()) {
    plan.point_fits = false;
    plan.point_reason = "no wanted pipeline fits: " + (plan.skipped.empty() ? std::string("?") : plan.skipped.front().second);
  }
  return plan;
}

PointResult planned_point(const SweepPoint& pt, const PipelinePlan& plan) {
  PointResult pr;
  pr.index = pt.index;
  pr.axes = pt.axes;
  pr.workload = to_json(pt.workload);
  json skipped = json::object();
  for (const auto& [p, why] : plan.skipped) skipped[pipeline_name(p)] = why;
  if (!skipped.empty()) pr.derived["skipped_pipelines"] = skipped;
  return pr;
}

std::string human_bytes(size_t b) {
  const double v = static_cast<double>(b);
  if (b >= (size_t{1} << 30)) return fmt::format("{:.1f} GiB", v / (1ull << 30));
  if (b >= (size_t{1} << 20)) return fmt::format("{:.0f} MiB", v / (1ull << 20));
  if (b >= (size_t{1} << 10)) return fmt::format("{:.0f} KiB", v / (1ull << 10));
  return fmt::format("{} B", b);
}

}  // namespace dropbench
