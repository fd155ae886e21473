// `dropbench attention`: the FlashAttention forward kernel alone, reading Q, K, V out of a QKV projection
// buffer, in every dropout mode: none, mask (reads the 1-bit tile mask the RNG kernel wrote), rng+mask
// (the RNG kernel then the attention: the baseline pipeline minus its GEMM) and fused (Philox in-kernel).
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "src/core/print.hpp"
#include "src/cli/cli.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/nvtx.hpp"
#include "kernels/rng/rng_mask.cuh"
#include "src/core/sweep_session.hpp"
#include "src/core/sweep_util.hpp"
#include "src/core/workload_params.hpp"
#include "kernels/util/util_kernels.cuh"

namespace dropbench {

namespace {

// What one variant's result says beside its measurement: FLOPs, mask bytes, the checks, the kernels' names and
// resources, TFLOP/s and the paired ratio to none (m0: none's measurement in the same group).
struct VariantContext {
  const Workload& w;
  const AttentionParams& ap;
  const AttentionBwdParams& bp;
  const MaskGeometry& geo;
  const Threshold& thr;
  double flops;
  bool dry, has_bwd;
  const Estimator* model;
  const Measurement& m0;
};
VariantResult attention_variant(const VariantContext& c, const char* name, DropoutMode mode, const Measurement& m,
                                const json& checks) {
  VariantResult v = variant_of(name, m);
  v.extra["flops"] = c.flops;
  v.extra["mask_bytes"] = mode == DropoutMode::Mask ? c.geo.bytes() : 0;
  v.extra["keep_effective"] = c.thr.keep_effective;
  v.extra["inputs"] = "bf16 N(0,1)";
  v.extra["pass"] = c.w.pass;
  if (c.dry) put_estimate(v.derived, v.extra, c.model->attention(c.w, name));
  for (auto it = checks.begin(); it != checks.end(); ++it) v.extra[it.key()] = it.value();
  if (!c.dry) {
    const AttentionKernelInfo ki = attention_kernel_info(c.ap, mode);
    v.extra["kernel"] = ki.name;
    v.extra["registers"] = ki.registers;
    v.extra["smem_bytes"] = ki.smem_dynamic + ki.smem_static;
    v.extra["local_bytes"] = ki.local_bytes;
    v.extra["ctas_per_sm"] = ki.ctas_per_sm;
    if (c.has_bwd) {
      const AttentionBwdKernelInfo bi = attention_backward_kernel_info(c.bp, mode);
      v.extra["bwd_kernel"] = bi.name;
      v.extra["bwd_registers"] = bi.registers;
      v.extra["bwd_smem_bytes"] = bi.smem_dynamic;
      v.extra["bwd_local_bytes"] = bi.local_bytes;
    }
    v.derived["tflops"] = c.flops / m.total.median / 1e12;
    if (c.m0.total.median > 0) {
      v.derived["x_none"] = m.total.median / c.m0.total.median;
      // _ci, and with measure.repeats also _ci_within and _repeats, as run's figures
      bootstrap_ratio(m.series, c.m0.series).write(v.derived, "x_none");
    }
  }
  return v;
}

// Mask and fused must agree bit for bit: the fused forward's output (into bp_check.fwd.o) and, with a backward,
// the deterministic fused backward's dQKV from it (into dqkv), copied to the host as every check's reference.
void fused_references(const AttentionParams& ap, const AttentionBwdParams& bp_check, const RngMaskParams& rp,
                      size_t o_bytes, DeviceBuffer& dqkv, size_t dqkv_bytes, bool has_bwd, cudaStream_t st,
                      std::vector<uint8_t>& h_ref, std::vector<uint8_t>& h_dref) {
  launch_rng_mask(rp, st);
  AttentionParams fp = ap;
  fp.o = bp_check.fwd.o;
  launch_attention(fp, DropoutMode::Fused, st);
  DB_CUDA(cudaStreamSynchronize(st));
  h_ref.resize(o_bytes);
  DB_CUDA(cudaMemcpy(h_ref.data(), fp.o, o_bytes, cudaMemcpyDeviceToHost));
  if (!has_bwd) return;
  launch_poison(dqkv.get(), dqkv_bytes, 0xFFFFFFFFu, st);
  launch_attention_backward(bp_check, DropoutMode::Fused, st);
  DB_CUDA(cudaStreamSynchronize(st));
  h_dref.resize(dqkv_bytes);
  DB_CUDA(cudaMemcpy(h_dref.data(), dqkv.get(), dqkv_bytes, cudaMemcpyDeviceToHost));
}

const std::vector<std::string> kAttentionAxes = {"batch",  "sq",        "q_heads",        "kv_heads",
                                                "head_dim", "causal", "dropout_p", "rounds",
                                                "threshold_bits", "attention_kernel", "pass"};
const std::map<std::string, std::vector<json>> kDefaults = {{"sq", {4096, 8192, 16384}}, {"causal", {false, true}}};

// The device buffers, kept across points (reserve only grows them).
struct AttentionBuffers {
  DeviceBuffer qkv, o, o_ref, lse, mask, dout, dqkv, bwd_ws;
  size_t held() const {
    return qkv.size() + o.size() + o_ref.size() + lse.size() + mask.size() + dout.size() + dqkv.size() +
           bwd_ws.size();
  }
};

// One point's sizes and launches over the buffers: the timed forward (ap) and backward (bp, atomic dQ), the RNG
// kernel (rp), and the checks' backward (bp_check: deterministic dQ from the fused forward's O in o_ref).
struct PointLaunches {
  AttentionParams ap;
  AttentionBwdParams bp, bp_check;
  RngMaskParams rp;
  MaskGeometry geo;
  size_t qkv_bytes = 0, o_bytes = 0, lse_bytes = 0;
};

PointLaunches point_sizes(const Workload& w, const Threshold& thr) {
  PointLaunches pl;
  pl.ap = attention_params(w, thr);
  pl.geo = attention_mask_geometry(pl.ap);
  const uint64_t rows = static_cast<uint64_t>(w.batch) * w.sq;
  pl.qkv_bytes = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim).qkv_bytes();
  pl.o_bytes = rows * w.q_heads * w.head_dim * 2;
  pl.lse_bytes = static_cast<size_t>(w.batch) * w.q_heads * w.sq * 4;
  return pl;
}

// Grows the buffers to the point's sizes and fills QKV (and dO for a backward) with N(0, 1), as scripts/peers.py
// (torch.randn) and bench_attention draw theirs: the wgmma kernel's rescale skipping makes its time depend on how
// often a row's running max moves, so peers compare on equal inputs.
void fill_buffers(AttentionBuffers& b, const PointLaunches& pl, const MemoryPlan& mem, const Workload& w,
                  size_t point_index, bool has_bwd, cudaStream_t st) {
  b.qkv.reserve(pl.qkv_bytes);
  b.o.reserve(pl.o_bytes);
  b.o_ref.reserve(pl.o_bytes);
  b.lse.reserve(pl.lse_bytes);
  b.mask.reserve(pl.geo.bytes());
  launch_fill_normal(b.qkv.get(), pl.qkv_bytes / 2, true, w.seed ^ (0x51ull * (point_index + 1)), st);
  if (!has_bwd) return;
  b.dout.reserve(mem.bytes("dout"));
  b.dqkv.reserve(mem.bytes("dqkv"));
  b.bwd_ws.reserve(mem.bytes("bwd_workspace"));
  launch_fill_normal(b.dout.get(), mem.bytes("dout") / 2, true, w.seed ^ (0x5Dull * (point_index + 1)), st);
}

// Points the launches at the buffers (null in a dry run).
void bind_buffers(PointLaunches& pl, AttentionBuffers& b, const Workload& w, const Threshold& thr) {
  pl.ap.qkv = b.qkv.get<__nv_bfloat16>();
  pl.ap.o = b.o.get<__nv_bfloat16>();
  pl.ap.lse = b.lse.get<float>();
  pl.ap.mask = b.mask.get<uint32_t>();
  pl.bp.fwd = pl.ap;
  pl.bp.dout = b.dout.get<__nv_bfloat16>();
  pl.bp.dqkv = b.dqkv.get<__nv_bfloat16>();
  pl.bp.workspace = b.bwd_ws.get();
  pl.bp.deterministic = false;
  pl.rp = rng_mask_params(w, thr, MaskLayout::Tile);
  pl.rp.geo = pl.geo;
  pl.rp.out = b.mask.get();
  // The backward's reference: fused mode, deterministic dQ, from the fused forward's O and LSE (in o_ref).
  pl.bp_check = pl.bp;
  pl.bp_check.fwd.o = b.o_ref.get<__nv_bfloat16>();
  pl.bp_check.deterministic = true;
}

struct AttentionVariant {
  const char* name;
  DropoutMode mode;
  bool gen;  // the RNG kernel first (rng+mask)
};

// One variant's checks against fused's outputs (h_ref, h_dref): its forward once on a poisoned O, and with a
// backward its deterministic backward from the fused forward's O and LSE (the same keep bits give the same dQKV,
// bit for bit). h_out: the host buffer the outputs are read into, shared by the variants.
json check_variant(const AttentionVariant& vd, const PointLaunches& pl, AttentionBuffers& b, size_t dqkv_bytes,
                   bool has_bwd, const std::vector<uint8_t>& h_ref, const std::vector<uint8_t>& h_dref,
                   std::vector<uint8_t>& h_out, const std::string& label, cudaStream_t st) {
  json checks = json::object();
  h_out.resize(pl.o_bytes);
  launch_poison(b.o.get(), pl.o_bytes, 0xFFFFFFFFu, st);
  if (vd.gen) launch_rng_mask(pl.rp, st);
  launch_attention(pl.ap, vd.mode, st);
  DB_CUDA(cudaStreamSynchronize(st));
  DB_CUDA(cudaMemcpy(h_out.data(), b.o.get(), pl.o_bytes, cudaMemcpyDeviceToHost));
  const bool same = h_out == h_ref;
  checks["bitwise_equal_fused"] = same;
  if (!same) print_stderr("dropbench: WARNING: {} output differs from fused at {}\n", vd.name, label);
  if (!has_bwd) return checks;
  // The forward above rewrote LSE: the fused forward again.
  AttentionParams fp = pl.ap;
  fp.o = b.o_ref.get<__nv_bfloat16>();
  launch_attention(fp, DropoutMode::Fused, st);
  launch_poison(b.dqkv.get(), dqkv_bytes, 0xFFFFFFFFu, st);
  launch_attention_backward(pl.bp_check, vd.mode, st);
  DB_CUDA(cudaStreamSynchronize(st));
  h_out.resize(dqkv_bytes);
  DB_CUDA(cudaMemcpy(h_out.data(), b.dqkv.get(), dqkv_bytes, cudaMemcpyDeviceToHost));
  const bool bsame = h_out == h_dref;
  checks["bwd_bitwise_equal_fused"] = bsame;
  if (!bsame) print_stderr("dropbench: WARNING: {} backward differs from fused at {}\n", vd.name, label);
  return checks;
}

int run_attention(RunContext& ctx) {
  const std::vector<std::string>& axes = kAttentionAxes;
  const auto points = expand_sweep(ctx.cfg, axes, kDefaults);
  const bool dry = ctx.opts.dry_run;
  for (const SweepPoint& pt : points) attention_memory(pt.workload, "sweep point " + pt.axes.dump() + ": ");
  const PlanDevice dev = dry ? plan_device(ctx.opts) : PlanDevice{};
  const std::optional<Estimator> model = dry ? std::make_optional<Estimator>(ctx.opts) : std::nullopt;
  SweepSession session(ctx, "attention", points);
  const cudaStream_t st = session.harness.stream();
  AttentionBuffers bufs;

  for (const SweepPoint& pt : points) {
    const std::string label = axes_label(pt.axes);
    if (!session.begin(pt, label)) continue;  // another shard's point, or kept from --resume
    NvtxRange point_range("point " + label);
    const Workload& w = pt.workload;
    const Threshold thr = make_threshold(w.dropout_p, static_cast<int>(w.threshold_bits));
    PointLaunches pl = point_sizes(w, thr);

    PointResult pr;
    pr.index = pt.index;
    pr.axes = pt.axes;
    pr.workload = to_json(w);
    const MemoryPlan mem = attention_memory(w);  // the same five buffers, checked
    // The pass: fwd times the forward; bwd the backward alone (reading the O and LSE the checks' forwards left, whose
    // values do not change its work); fwd+bwd both, back to back. The backward runs in its fast mode (atomic dQ).
    const bool has_bwd = w.pass != "fwd", has_fwd = w.pass != "bwd";
    if (mem.need() > (dry ? dev.bytes : device_free_bytes() + bufs.held())) {
      const std::string why = fmt::format("{} need {:.1f} GiB, more than the free device memory",
                                          has_bwd ? "QKV, O, LSE, the mask, dO, dQKV and the backward's workspace"
                                                  : "QKV, O, LSE and the mask",
                                          mem.buffers_total() / double(1ull << 30));
      session.report.add_skipped({pt.axes, why, kNoIndex, dry ? plan_json(mem, dev, false, why) : json()});
      continue;
    }
    if (dry) pr.derived["plan"] = plan_json(mem, dev, true);
    if (!dry) fill_buffers(bufs, pl, mem, w, pt.index, has_bwd, st);
    bind_buffers(pl, bufs, w, thr);

    const size_t dqkv_bytes = mem.bytes("dqkv");
    std::vector<uint8_t> h_ref, h_dref, h_out;
    if (!dry)
      fused_references(pl.ap, pl.bp_check, pl.rp, pl.o_bytes, bufs.dqkv, dqkv_bytes, has_bwd, st, h_ref, h_dref);

    const double flops = attention_flops(pl.ap) * ((has_fwd ? 1.0 : 0.0) + (has_bwd ? kAttentionBwdFlopRatio : 0.0));
    std::vector<AttentionVariant> vds = {{"none", DropoutMode::None, false},
                                         {"mask", DropoutMode::Mask, false},
                                         {"rng+mask", DropoutMode::Mask, true},
                                         {"fused", DropoutMode::Fused, false}};
    // The backward alone reads a mask generated for the forward: the RNG kernel is not part of it.
    if (!has_fwd) vds.erase(vds.begin() + 2);
    // Checks first (each variant once, compared with fused's), then all four measured as one interleaved group, so
    // x_none is a paired figure.
    std::vector<json> checks(vds.size(), json::object());
    std::vector<Candidate> group;
    for (size_t i = 0; i < vds.size(); ++i) {
      const AttentionVariant vd = vds[i];
      if (!dry && vd.mode != DropoutMode::None)
        checks[i] = check_variant(vd, pl, bufs, dqkv_bytes, has_bwd, h_ref, h_dref, h_out, label, st);
      group.push_back({vd.name, [&pl, vd, has_fwd, has_bwd](Sample& s) {
                         NvtxRange vr(std::string("variant ") + vd.name);
                         if (vd.gen) s.phase("gen", [&] { launch_rng_mask(pl.rp, s.stream); });
                         if (has_fwd) s.phase("attention", [&] { launch_attention(pl.ap, vd.mode, s.stream); });
                         if (has_bwd) s.phase("backward", [&] { launch_attention_backward(pl.bp, vd.mode, s.stream); });
                       }});
    }
    const std::vector<Measurement> ms = session.harness.measure_group(group);
    const VariantContext vc{w, pl.ap, pl.bp, pl.geo, thr, flops, dry, has_bwd, model ? &*model : nullptr, ms[0]};
    for (size_t i = 0; i < vds.size(); ++i)
      pr.variants.push_back(attention_variant(vc, vds[i].name, vds[i].mode, ms[i], checks[i]));
    session.report.add_point(pr);
  }
  session.finish(json::object(),
                 dry ? dry_plan_table(session.report) : standard_table(session.report, {"tflops", "x_none"}));
  return 0;
}

}  // namespace

Command make_attention_command() {
  Command c;
  c.name = "attention";
  c.summary = "Benchmark FlashAttention forward with dropout: none / mask / rng+mask / fused";
  c.help =
      "Q, K, V are strided views into one QKV buffer [B*SQ, (Hq+2*Hkv)*dH] (as the QKV GEMM writes it) of bf16\n"
      "N(0,1) values (as scripts/peers.py draws the SDPA peers' inputs);\n"
      "O [B*SQ, Hq*dH] bf16 and the per-row log-sum-exp are written. Variants at every point:\n"
      "  none      no dropout\n"
      "  mask      reads the 1-bit tile mask (docs/rng-scheme.md) that the RNG kernel wrote beforehand\n"
      "  rng+mask  the RNG kernel then the attention (phases gen, attention): the baseline pipeline minus the GEMM\n"
      "  fused     keep bits generated in-kernel with Philox (workload.rounds, workload.threshold_bits)\n"
      "TFLOP/s = 4*B*Hq*SQ^2*dH / time, halved when causal; x_none = time / time of mode none. Mask and\n"
      "rng+mask outputs are checked bit for bit against fused at every point (extra.bitwise_equal_fused).\n"
      "Default sweep: sq 4096,8192,16384 x causal false,true at the workload's heads, dH, p, rounds (an axis the\n"
      "config sweeps, or sets to another value than the built-in config's, keeps the config's values).\n"
      "workload.attention_kernel (an axis too) picks the kernel family: wgmma (Hopper TMA + wgmma), mma\n"
      "(FlashAttention-2-class mma.sync), auto = wgmma on sm_90 (the backward too), else mma; extra.kernel\n"
      "names the instance.\n"
      "workload.pass (an axis too): fwd (default) | bwd (the backward alone: dQ, dK, dV into a dQKV\n"
      "buffer laid out like QKV, fast mode with atomic dQ; no rng+mask variant) | fwd+bwd (phases attention,\n"
      "backward). TFLOP/s count the backward as 2.5x the forward; the deterministic backward of mask and\n"
      "rng+mask is checked bit for bit against fused's (extra.bwd_bitwise_equal_fused); extra.bwd_kernel names it.\n"
      "Example: dropbench attention --set workload.q_heads=32 --set sweep.sq=[8192] --set sweep.causal=[false]";
  c.run = run_attention;
  // A pass of another command is refused before the GPU is looked for.
  c.check = [](const Config& cfg, const CommonOptions&) {
    check_command_passes(expand_sweep(cfg, kAttentionAxes, kDefaults), "attention");
  };
  return c;
}

}  // namespace dropbench
