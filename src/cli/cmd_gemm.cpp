// `dropbench gemm`: the QKV projection GEMM alone, Y[M, N] = X[M, K]·W[N, K]ᵀ through cuBLASLt, over
// sequence length, model width and input type: time, TFLOP/s, and the algorithm cuBLASLt ran.
#include <map>
#include <memory>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/device_buffer.hpp"
#include "kernels/gemm/gemm.cuh"
#include "src/core/workload_params.hpp"
#include "src/core/harness.hpp"
#include "src/core/nvtx.hpp"
#include "src/core/sweep_session.hpp"
#include "src/core/sweep_util.hpp"

namespace dropbench {

namespace {

struct GemmCmdOptions {
  int top_k = 1;
  bool fast_accum = true;
  int sm_count = 0;
};

json algo_json(const GemmAlgoInfo& a) {
  json j;
  j["id"] = a.algo_id;
  j["tile"] = a.tile_name();
  j["tile_id"] = a.tile_id;
  j["stages"] = a.stages_name();
  j["stages_id"] = a.stages_id;
  j["cluster"] = a.cluster_name();
  j["cluster_id"] = a.cluster_shape_id;
  j["splitk"] = a.splitk;
  j["reduction_scheme"] = a.reduction_scheme;
  j["cta_swizzling"] = a.cta_swizzling;
  j["custom_option"] = a.custom_option;
  j["inner_shape_id"] = a.inner_shape_id;
  j["workspace_bytes"] = a.workspace_bytes;
  j["waves"] = a.waves;
  j["heuristic_rank"] = a.heuristic_rank;
  j["summary"] = a.summary();
  return j;
}

// --sm-count within the device's SMs, and every point's shape and sizes, checked before the first point is
// measured (a refused sweep measures nothing and leaves -o as it was).
void check_gemm_sweep(const RunContext& ctx, const GemmCmdOptions& o, const std::vector<SweepPoint>& points) {
  if (!ctx.opts.dry_run && o.sm_count > 0) {
    int sms = 0;
    DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.opts.device));
    if (o.sm_count > sms)
      throw UsageError(fmt::format("--sm-count: {} is more than the device's {} SMs", o.sm_count, sms));
  }
  const size_t workspace = GemmOptions{}.workspace_bytes;
  for (const SweepPoint& pt : points) {
    gemm_memory(pt.workload, workspace, "sweep point " + pt.axes.dump() + ": ");
    try {
      validate_gemm_shape(qkv_gemm_shape(pt.workload), parse_gemm_dtype(pt.workload.dtype));
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("sweep point {}: {}", pt.axes.dump(), e.what()));
    }
  }
}

// The GEMM's result: its shape and options, and on a real run (gemm not null) the algorithm cuBLASLt ran, the
// candidates tuned over, and TFLOP/s.
VariantResult gemm_variant(const GemmShape& shape, const GemmOptions& go, const Measurement& m, const QkvGemm* gemm) {
  VariantResult v = variant_of("cublaslt", m);
  v.extra["m"] = shape.m;
  v.extra["n"] = shape.n;
  v.extra["k"] = shape.k;
  v.extra["flops"] = shape.flops();
  v.extra["dtype"] = gemm_dtype_name(go.dtype);
  v.extra["fast_accum"] = go.fast_accum;
  v.extra["top_k"] = go.top_k;
  v.extra["sm_count_target"] = go.sm_count_target;
  v.extra["workspace_bytes"] = go.workspace_bytes;
  v.extra["cublaslt_version"] = QkvGemm::cublaslt_version_string();
  if (!gemm) return v;
  v.extra["algo"] = algo_json(gemm->algo());
  v.extra["tuned"] = gemm->tuned();
  if (gemm->candidates().size() > 1 || go.top_k > 1) {
    json cands = json::array();
    for (const GemmCandidate& c : gemm->candidates()) {
      json cj = algo_json(c.info);
      cj["tune_ms"] = c.ms;
      cj["failed"] = c.failed;
      cands.push_back(cj);
    }
    v.extra["candidates"] = cands;
  }
  if (m.total.median > 0) v.derived["tflops"] = shape.flops() / m.total.median / 1e12;
  return v;
}

int run_gemm(RunContext& ctx, const GemmCmdOptions& o) {
  const std::vector<std::string> axes = {"sq", "embed", "dtype"};
  const std::map<std::string, std::vector<json>> defaults = {
      {"sq", {4096, 8192, 16384}}, {"embed", {4096, 8192, 16384}}, {"dtype", {"fp8", "bf16"}}};
  const auto points = expand_sweep(ctx.cfg, axes, defaults);
  const bool dry = ctx.opts.dry_run;

  check_gemm_sweep(ctx, o, points);
  const PlanDevice dev = dry ? plan_device(ctx.opts) : PlanDevice{};
  const std::optional<Estimator> model = dry ? std::make_optional<Estimator>(ctx.opts) : std::nullopt;

  SweepSession session(ctx, "gemm", points);
  for (const SweepPoint& pt : points) {
    const std::string label = axes_label(pt.axes);
    if (!session.begin(pt, label)) continue;  // another shard's point, or kept from --resume
    NvtxRange point_range("point " + label);
    const Workload& w = pt.workload;
    const GemmDtype dtype = parse_gemm_dtype(w.dtype);
    const GemmShape shape = qkv_gemm_shape(w);  // checked above

    GemmOptions go;
    go.dtype = dtype;
    go.fast_accum = dtype == GemmDtype::fp8_e4m3 && o.fast_accum;
    go.top_k = o.top_k;
    go.sm_count_target = o.sm_count;

    PointResult pr;
    pr.index = pt.index;
    pr.axes = pt.axes;
    pr.workload = to_json(w);

    const MemoryPlan mem = gemm_memory(w, go.workspace_bytes);  // QkvBuffers::bytes_needed + the workspace
    const size_t need = mem.buffers_total();
    if (mem.need() > (dry ? dev.bytes : device_free_bytes())) {
      const std::string why = fmt::format("X, W, Y and workspace need {:.1f} GiB, more than the free device memory",
                                          need / double(1ull << 30));
      session.report.add_skipped({pt.axes, why, kNoIndex, dry ? plan_json(mem, dev, false, why) : json()});
      continue;
    }
    if (dry) pr.derived["plan"] = plan_json(mem, dev, true);

    // Buffers and plan only on a real run; the dry run walks the same ranges with no GPU work.
    std::unique_ptr<QkvBuffers> buf;
    std::unique_ptr<QkvGemm> gemm;
    if (!dry) {
      buf = std::make_unique<QkvBuffers>(shape, dtype);
      buf->randomize(w.seed ^ (0x9e3779b97f4a7c15ULL * (pt.index + 1)), session.harness.stream());
      gemm = std::make_unique<QkvGemm>(shape, go);
      gemm->bind(buf->x, buf->w, buf->y, buf->scale_x(), buf->scale_w());
      gemm->tune(session.harness.stream());  // top_k == 1: no-op
    }

    Measurement m;
    {
      NvtxRange vr("variant cublaslt");
      m = session.harness.measure([&](Sample& s) { s.phase("gemm", [&] { gemm->run(s.stream); }); });
    }
    VariantResult v = gemm_variant(shape, go, m, gemm.get());
    if (dry) put_estimate(v.derived, v.extra, model->gemm(w));
    pr.variants.push_back(v);
    session.report.add_point(pr);
  }
  session.finish(json::object(), dry ? dry_plan_table(session.report) : standard_table(session.report, {"tflops"}));
  return 0;
}

}  // namespace

Command make_gemm_command() {
  auto o = std::make_shared<GemmCmdOptions>();
  Command c;
  c.name = "gemm";
  c.summary = "Benchmark the QKV projection GEMM through cuBLASLt (fp8 / bf16): TFLOP/s";
  c.help =
      "Times Y[M, N] = X[M, K] * W[N, K]^T with M = batch*sq, K = embed, N = (q_heads + 2*kv_heads)*head_dim\n"
      "(Q, K and V projections in one GEMM), bf16 output, fp32 accumulation. fp8 inputs are e4m3 with one fp32\n"
      "scale per tensor; bf16 inputs have none. Inputs are random (never zeros). Default sweep (unless the\n"
      "config sweeps these axes or sets another value than the built-in config's):\n"
      "  sq 4096,8192,16384  x  embed 4096,8192,16384  x  dtype fp8,bf16;\n"
      "batch, q_heads, kv_heads and head_dim come from the workload (built-in: 1, 32, 8, 128 -> N = 6144).\n"
      "Columns: TFLOP/s = 2*M*N*K / median time. The report's `extra` holds the cuBLASLt version and the\n"
      "algorithm run (id, tile, stages, cluster, split-K, ...); with --top-k N > 1 also every candidate's\n"
      "tuning time. --top-k times cuBLASLt's first N heuristic candidates and keeps the fastest (it leaves the\n"
      "first choice only for one over 1% faster). --sm-count sets CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, the\n"
      "SM budget a GEMM sharing the GPU with another stream should plan for.\n"
      "scripts/peer_gemm.py measures torch._scaled_mm / torch.matmul on the same shapes.\n"
      "Examples:\n"
      "  dropbench gemm --top-k 16 -o gemm.json\n"
      "  dropbench gemm --set sweep.dtype=[fp8] --set workload.q_heads=64 --set workload.kv_heads=64 --sm-count 100";
  c.add_options = [o](CLI::App& app) {
    app.add_option("--top-k", o->top_k, "Time this many cuBLASLt heuristic candidates and keep the fastest (1 = "
                                        "the heuristic's first choice)")
        ->check(CLI::Range(1, 64));
    app.add_flag("--fast-accum,!--no-fast-accum", o->fast_accum,
                 "fp8: CUBLASLT_MATMUL_DESC_FAST_ACCUM (default on; no effect on bf16)");
    app.add_option("--sm-count", o->sm_count, "CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET (0 = every SM)")
        ->check(CLI::Range(0, 4096));
  };
  c.run = [o](RunContext& ctx) { return run_gemm(ctx, *o); };
  return c;
}

}  // namespace dropbench
