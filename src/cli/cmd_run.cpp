// `dropbench run`: one transformer block's QKV GEMM + attention with dropout, four ways (baseline, fused,
// overlap, chunked: src/block/pipeline_plan.hpp), on the real kernels; checks they write bit-identical O and LSE,
// measures how much of the RNG each GEMM-RNG overlap mechanism hides, and names the winner. This file is the
// options and the sweep loop; the steps of one point live in src/block/ (run_point.hpp lists them).
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/print.hpp"
#include "src/block/block_pipelines.hpp"
#include "src/block/mechanisms.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/block/run_figures.hpp"
#include "src/block/run_point.hpp"
#include "src/block/run_trace.hpp"
#include "src/cli/cli.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/cli/run_train.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/nvtx.hpp"
#include "src/core/sweep_session.hpp"
#include "src/core/sweep_util.hpp"

namespace dropbench {

namespace {

const std::vector<std::string> kRunAxes = {"batch",  "embed",     "q_heads", "kv_heads", "head_dim",
                                          "sq",     "causal",    "dropout_p", "dtype",  "rounds",
                                          "threshold_bits", "chunk", "attention_kernel", "pass"};

// Free memory plan_pipelines keeps beside a point's buffers (its default).
constexpr size_t kRunHeadroom = size_t{512} << 20;

// A dry run walks the NVTX tree without a GPU: one range per pipeline and its phases; each pipeline gets the
// model's estimate.
void walk_dry(SweepSession& session, const PipelinePlan& plan, const Estimator& model, const Workload& w,
              PointResult& pr) {
  for (Pipeline p : plan.run) {
    NvtxRange vr(std::string("variant ") + pipeline_name(p));
    session.harness.measure([&](Sample& s) {
      for (const char* phase : pipeline_spec(p).dry_phases) s.phase(phase, [] {});
    });
    VariantResult v = variant_of(pipeline_name(p), Measurement{});
    put_estimate(v.derived, v.extra, model.pipeline(w, pipeline_name(p)));
    pr.variants.push_back(std::move(v));
  }
}

// One point on the GPU: the pieces alone, the overlap mechanisms, the pipelines, the trace, the figures.
void measure_point(RunContext& ctx, const RunOptions& o, SweepSession& session, const SweepPoint& pt,
                   const std::string& label, const PipelinePlan& plan, const BlockMemory& mem, PointResult& pr,
                   RunTotals& totals, TraceState& trace) {
  const Workload& w = pt.workload;
  const cudaStream_t main = session.harness.stream();
  BlockRunner::Options bo;
  bo.top_k = o.top_k;
  bo.full_mask = plan.needs_full_mask;
  bo.chunk_masks = plan.needs_chunk_masks;
  bo.validate = !o.no_validate;
  BlockRunner runner(w, bo, main);
  runner.gemm().tune(main);
  PointScope ps{session.harness, runner, o, plan, label, pr, totals.counters};

  // Group 1: the pieces alone and the fixed mechanisms; then the scans; then the pipelines (run_point.hpp).
  MechanismExplorer explorer(ps);
  std::vector<Candidate> first = alone_candidates(ps);
  for (Candidate& c : explorer.fixed_candidates()) first.push_back(std::move(c));
  const std::map<std::string, Measurement> first_group = ps.measure_group(first);
  const AloneTimes alone = add_alone_variants(ps, first_group);
  explorer.finish(first_group, alone);
  const OverlapChoice ovl = choose_overlap_rng(o, explorer.mechs(), ps.book);
  const MechanismFigures mf = add_mechanism_variants(ps, explorer.mechs(), alone);
  const std::map<std::string, double> t_pipe = measure_pipelines(ps, ovl);
  trace_point(ps, trace, pt.axes, ovl, ctx.opts.device);
  const json target = point_figures(pr, w, PointTimes{alone, t_pipe, mf, ovl, mem, ps.book});
  if (!target.is_null()) totals.target.push_back(target);
}

int run_run(RunContext& ctx, const RunOptions& o) {
  const std::optional<std::vector<Pipeline>> wanted_any = wanted_pipeline_list(o, ctx.cfg);
  const std::vector<Pipeline> wanted = wanted_for_pass(wanted_any, Pass::Fwd);
  validate_run_options(o);
  const auto points = expand_sweep(ctx.cfg, kRunAxes);
  check_run_passes(points, wanted_any);
  const bool dry = ctx.opts.dry_run;
  const bool any_train = std::any_of(points.begin(), points.end(),
                                     [](const SweepPoint& pt) { return parse_pass(pt.workload.pass) == Pass::Train; });
  TraceState trace = open_trace(o.trace, dry);
  // Sizes past 2^64 bytes are refused before anything runs (a chunk of the whole sequence is the largest).
  for (const SweepPoint& pt : points) block_memory(pt.workload, pt.workload.sq, 1 + std::max(3, o.top_k), true);
  const PlanDevice dev = dry ? plan_device(ctx.opts) : PlanDevice{};
  // The model's estimates: every point of a dry run, and beside the measurement of a training step.
  const std::optional<Estimator> model = dry || any_train ? std::make_optional<Estimator>(ctx.opts) : std::nullopt;
  SweepSession session(ctx, "run", points);
  RunTotals totals;
  const size_t budget = mask_budget_bytes(o.mask_budget_gib, kRunMaskBudgetZero);
  const std::vector<Pipeline> train_wanted = wanted_for_pass(wanted_any, Pass::Train);

  for (const SweepPoint& pt : points) {
    const std::string label = axes_label(pt.axes);
    if (!session.begin(pt, label)) continue;  // another shard's point, or kept from --resume
    NvtxRange point_range("point " + label);
    const Workload& w = pt.workload;
    if (parse_pass(w.pass) == Pass::Train) {
      train_point({session, o, dev, dry, budget, train_wanted, *model, kRunHeadroom, totals.counters}, pt, label);
      continue;
    }
    std::vector<ChunkRange> chunks;
    try {
      validate_block_workload(w);
      chunks = plan_chunks(w.sq, w.chunk, 128);
    } catch (const UsageError& e) {
      session.report.add_skipped({pt.axes, e.what()});
      continue;
    }
    // GEMM objects alive at once: the pipelines' one, plus one scan's (3 partitions or --top-k candidates).
    const int gemm_objects = o.no_explore ? 1 : 1 + std::max(3, o.top_k);
    const BlockMemory mem = block_memory(w, chunks.front().rows, gemm_objects, !o.no_validate);
    const size_t free_b = dry ? dev.bytes : device_free_bytes();
    const PipelinePlan plan = plan_pipelines(mem, free_b, budget, wanted, kRunHeadroom);
    if (!plan.point_fits) {
      session.report.add_skipped({pt.axes, plan.point_reason, kNoIndex,
                                  dry ? plan_json(run_memory(mem, false, false, kRunHeadroom), dev, false,
                                                  plan.point_reason)
                                      : json()});
      continue;
    }
    PointResult pr = planned_point(pt, plan);
    if (dry) {
      json pj = plan_json(run_memory(mem, plan.needs_full_mask, plan.needs_chunk_masks, kRunHeadroom), dev, true);
      if (o.mask_budget_gib > 0) pj["mask_budget_bytes"] = budget;
      pr.derived["plan"] = std::move(pj);
      walk_dry(session, plan, *model, w, pr);
    } else {
      measure_point(ctx, o, session, pt, label, plan, mem, pr, totals, trace);
    }
    session.report.add_point(std::move(pr));
  }

  totals.traced = trace.on;
  totals.trace_path = o.trace;
  totals.trace_records = trace.records.size();
  session.finish(run_summary(session.report, totals),
                 dry ? dry_plan_table(session.report)
                     : standard_table(session.report,
                                      {"tflops", "x_baseline", "x_fused", "x_model", "hidden", "hidden_self", "coresident_share"}));
  // Human text beside the table, on stderr: stdout holds the table alone.
  if (!ctx.opts.quiet) fmt::print(stderr, "{}", train_plan_text(session.report));
  if (totals.counters.mismatches > 0) {
    print_stderr("dropbench: {} bitwise mismatch(es) between pipelines or mask producers (see the report)\n",
               totals.counters.mismatches);
    return 1;
  }
  return 0;
}

// One line per entry of the pipeline table (src/core/pipelines.hpp) of pass fwd.
std::string pipelines_help() {
  std::string h;
  for (Pipeline p : pass_pipelines(Pass::Fwd)) h += fmt::format("  {:<9} {}\n", pipeline_name(p), pipeline_spec(p).summary);
  return h;
}

// The pass-train rows of the pipeline table.
std::string train_help() {
  std::string h =
      "workload.pass=train (also an axis): the block's training step -- forward QKV GEMM -> attention -> output\n"
      "projection; backward its dX, dW -> attention backward -> QKV dX, dW (fp8: e4m3 forward operands, e5m2\n"
      "gradients) -- with the strategies:\n";
  for (Pipeline p : pass_pipelines(Pass::Train))
    h += fmt::format("  {:<13} {}\n", pipeline_name(p), pipeline_spec(p).train_summary);
  return h +
         "Measured on the GPU: per strategy the step time with its phases, energy, sustained time, x_fused and the\n"
         "model's step beside it (x_model; x_model_step_clock: every kernel at the step's measured clock); the\n"
         "hidden fraction of each GEMM || RNG overlap with its energy bound; the attention kernels alone against\n"
         "their phase in the step (attention_in_step); every strategy's gradients (dQKV, dX, dW_qkv, dW_o)\n"
         "checked bitwise against the first's with the deterministic dQ (timed: fast dQ).\n"
         "The RNG beside the GEMMs is --overlap-rng's mechanism (auto: plain). A dry run gives per strategy the mask\n"
         "bytes per layer and for workload.layers layers (presets: 32 / 80 / 126), the model's step / forward /\n"
         "backward time and the verdict per mask budget (--mask-budget: GiB the network's masks may hold).\n";
}

}  // namespace

Command make_run_command() {
  auto o = std::make_shared<RunOptions>();
  Command c;
  c.name = "run";
  c.summary = "One block's QKV GEMM + attention with dropout four ways: baseline / fused / overlap / chunked";
  c.help =
      "Runs one transformer block's QKV GEMM (cuBLASLt, workload.dtype) and attention with dropout on its real output,\n"
      "four ways, at every sweep point (axes: batch, embed, q_heads, kv_heads, head_dim, sq, causal, dropout_p,\n"
      "dtype, rounds, threshold_bits, chunk, attention_kernel, pass; sweep.pipeline selects pipelines):\n" +
      pipelines_help() +
      "All four write bit-identical O and LSE for one (seed, offset): checked at every point (--no-validate skips).\n"
      "workload.attention_kernel (also an axis): wgmma (Hopper TMA + wgmma), mma (FlashAttention-2 class), auto =\n"
      "wgmma where supported; alone:attention-mask/-fused extra.kernel names the instance the pipelines launch.\n"
      "Overlap mechanisms (variants mech:*; each: GEMM || RNG timed together, both alone, hidden fraction\n"
      "(T_gemm + T_rng - T_overlap) / min(T_gemm, T_rng) with the default GEMM and the standard RNG kernel alone\n"
      "(hidden), and with the mechanism's own kernels alone (hidden_self)):\n"
      "  plain            the standard RNG kernel on a second stream, enqueued after the GEMM\n"
      "  priority         (d) the same on the highest-priority stream\n"
      "  coresident-wN    (a) persistent RNG, N warps x 1 block per SM, <= 32 registers, no shared memory, launched\n"
      "                   before the GEMM, taking strips from an atomic counter; a full-width finisher after the GEMM\n"
      "                   takes what is left (coresident_share = fraction done beside the GEMM)\n"
      "  partition-Ksm    (c) GEMM with CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - K, RNG pinned to K SMs\n"
      "  algo             (b) of the --top-k cuBLASLt candidates, the one that overlaps best with the fastest of the\n"
      "                   mechanisms above (extra.candidates lists them all)\n"
      "The overlap pipeline uses the fastest mechanism that keeps the pipelines' GEMM (--overlap-rng to force one).\n"
      "Also measured alone: alone:gemm, alone:rng, alone:attention-mask/-fused, alone:rng-chunks/attention-chunks.\n"
      "Point figures (report points[].derived): t_<pipeline>, speedups, winner and why (dropout's exposed time per\n"
      "pipeline), hidden_by_mechanism, mask memory. Summary: Philox R/R7 time ratios inside every pipeline, winners,\n"
      "the co-residency target at E 8192, SQ 8192, Philox-7. A point whose whole mask does not fit the device (or\n"
      "--mask-budget) runs fused and chunked only; the others are listed in derived.skipped_pipelines.\n"
      "The QKV GEMMs run power-capped (about 1.5 GHz of 1.98 on an H200): with the default measure.throttle = 0.75\n"
      "their samples can all be discarded as throttled; use --set measure.throttle=0 to time that steady state.\n"
      "--trace FILE: after each point's measurements, runs every pipeline once more (untimed) under CUPTI and writes\n"
      "a Chrome-trace JSON timeline of its kernels (open in https://ui.perfetto.dev or chrome://tracing; pid = GPU,\n"
      "tid = stream, a label row names pipeline and point). Adds to each pipeline's extra: trace_kernels,\n"
      "trace_span_us, and for overlap/chunked the measured concurrency of stream A (main) and B (side) kernels:\n"
      "trace_overlap_us and trace_overlap_fraction (= concurrent time / min of the two streams' busy times).\n"
      "Without libcupti (or with another profiler attached) it warns and traces nothing.\n"
      "--graph: after each pipeline's stream measurement, captures it once (all its streams) into a CUDA graph and\n"
      "times graph launches as variant <pipeline>:graph (checked bitwise against the reference; derived.x_streams =\n"
      "stream time / graph time). Graph variants never decide the winner.\n" +
      train_help() +
      "Example: dropbench run --config configs/llama3-70b.json --set sweep.sq=[8192] --set sweep.rounds=[3,5,7]\n"
      "         --set measure.throttle=0";
  c.add_options = [o](CLI::App& app) {
    app.add_option("--pipelines", o->pipelines,
                   "Comma list of pipelines to run (default: the pass's four: the forward pipelines, or pass train's "
                   "strategies)")
        ->each([o](const std::string&) { o->pipelines_given = true; });
    app.add_flag("--no-validate", o->no_validate, "Skip the bitwise comparison of the pipelines' outputs");
    app.add_flag("--no-explore", o->no_explore, "Skip the overlap-mechanism exploration (overlap uses plain)");
    app.add_option("--top-k", o->top_k,
                   "cuBLASLt heuristic candidates: tuned for the GEMM, scanned by mechanism b (1..16, default 4)");
    app.add_option("--mask-budget", o->mask_budget_gib,
                   "GiB a whole-matrix mask may take (0 = the free device memory); larger: baseline/overlap skipped;\n"
                   "pass train: GiB the network's masks may hold (workload.layers)")
        ->check(finite_number(0, 1048576.0));
    app.add_option("--overlap-rng", o->overlap_rng,
                   "RNG of the overlap pipeline: auto, plain, priority, coresident-w1, coresident-w2, coresident-w4");
    app.add_flag("--graph", o->graph,
                 "Also capture each pipeline into a CUDA graph and time its replay (variants <pipeline>:graph)");
    app.add_option("--trace", o->trace,
                   "Write a CUPTI kernel timeline (Chrome-trace JSON) of one extra untimed run of each pipeline per point");
  };
  c.run = [o](RunContext& ctx) { return run_run(ctx, *o); };
  // A pass or pipeline the sweep cannot run is refused before the GPU is looked for.
  c.check = [o](const Config& cfg, const CommonOptions&) {
    check_run_passes(expand_sweep(cfg, kRunAxes), wanted_pipeline_list(*o, cfg));
  };
  return c;
}

}  // namespace dropbench
