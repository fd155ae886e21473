// `dropbench run`: one transformer block's QKV GEMM + attention with dropout, four ways (baseline, fused,
// overlap, chunked: src/pipeline_plan.hpp), on the real kernels; checks they write bit-identical O and LSE,
// measures how much of the RNG each GEMM-RNG overlap mechanism hides, and names the winner.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "src/block/block_pipelines.hpp"
#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/nvtx.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/core/sweep_session.hpp"
#include "src/core/sweep_util.hpp"
#include "src/core/trace.hpp"

namespace dropbench {

namespace {

struct RunOptions {
  std::string pipelines;       // --pipelines (empty: sweep.pipeline if the config sweeps it, else all four)
  bool no_validate = false;    // --no-validate
  bool no_explore = false;     // --no-explore
  int top_k = 4;               // --top-k
  double mask_budget_gib = 0;  // --mask-budget (GiB; 0 = free device memory)
  std::string overlap_rng = "auto";  // --overlap-rng
  std::string trace;           // --trace FILE (Chrome-trace JSON of one untimed execution per pipeline and point)
  bool graph = false;          // --graph: also replay each pipeline as one CUDA graph (variants <pipeline>:graph)
};

// One pipeline captured from `main` (and the streams it forks to) into an instantiated CUDA graph.
class PipelineGraph {
 public:
  PipelineGraph(cudaStream_t main, const std::function<void()>& enqueue) {
    DB_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(main, &g);  // leave the stream usable; the capture is invalid anyway
      if (g) cudaGraphDestroy(g);
      throw;
    }
    DB_CUDA(cudaStreamEndCapture(main, &graph_));
    DB_CUDA(cudaGraphGetNodes(graph_, nullptr, &nodes_));
    DB_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~PipelineGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  PipelineGraph(const PipelineGraph&) = delete;
  PipelineGraph& operator=(const PipelineGraph&) = delete;
  void launch(cudaStream_t s) const { DB_CUDA(cudaGraphLaunch(exec_, s)); }
  size_t nodes() const { return nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

// --trace: the records of every point so far, the label events, and the names of the timeline's rows.
struct TraceState {
  bool on = false;
  std::vector<TraceRecord> records;
  std::vector<TraceEvent> labels;
  std::map<std::pair<uint32_t, uint32_t>, std::string> threads;  // (device, tid) -> row name
  static constexpr uint32_t kLabelTid = 1u << 30;                // the row of the point/pipeline labels
  void write(const std::string& path) const {
    std::vector<TraceEvent> ev = labels;
    for (const auto& [k, name] : threads) {
      TraceEvent m;
      m.name = "thread_name";
      m.ph = "M";
      m.pid = k.first;
      m.tid = k.second;
      m.args = {{"name", name}};
      ev.push_back(std::move(m));
    }
    write_chrome_trace(path, records, ev);
  }
};

const std::vector<std::string> kAxes = {"batch",   "embed",  "q_heads", "kv_heads",       "head_dim", "sq",
                                        "causal",  "dropout_p", "dtype", "rounds", "threshold_bits", "chunk"};

std::string hex64(uint64_t v) { return fmt::format("0x{:016x}", v); }

json algo_brief(const GemmAlgoInfo& a) {
  json j;
  j["id"] = a.algo_id;
  j["tile"] = a.tile_name();
  j["stages"] = a.stages_name();
  j["cluster"] = a.cluster_name();
  j["splitk"] = a.splitk;
  j["heuristic_rank"] = a.heuristic_rank;
  j["summary"] = a.summary();
  return j;
}

PhaseFn hook(Sample& s) {
  return [&s](const std::string& n, const std::function<void()>& fn, cudaStream_t on) { s.phase(n, fn, on); };
}

VariantResult variant_of(const std::string& name, const Measurement& m) {
  VariantResult v;
  v.name = name;
  v.stats = m.total;
  v.phases = m.phases;
  return v;
}

// One overlap mechanism's outcome.
struct Mech {
  RngConfig rc;
  std::string mechanism;   // "a: co-resident RNG kernel", ...
  Measurement over;        // GEMM || RNG, joined
  double t_gemm = 0;       // the mechanism's GEMM alone
  double t_rng = 0;        // the mechanism's RNG alone
  double hidden = 0;       // against the default GEMM and the standard RNG kernel alone
  double hidden_self = 0;  // against the mechanism's own kernels alone
  bool eligible = false;   // same GEMM object and bits as the pipelines (can serve the overlap pipeline)
  json extra = json::object();
};

int run_run(RunContext& ctx, const RunOptions& o) {
  std::vector<Pipeline> wanted = all_pipelines();
  if (!o.pipelines.empty()) {
    wanted = parse_pipeline_list(o.pipelines);
  } else {
    for (const auto& [axis, values] : ctx.cfg.sweep)
      if (axis == "pipeline") {
        wanted.clear();
        for (const json& v : values) wanted.push_back(parse_pipeline(v.get<std::string>()));
      }
  }
  if (o.top_k < 1 || o.top_k > 16) throw UsageError(fmt::format("--top-k: {} is out of range (allowed: [1, 16])", o.top_k));
  if (o.mask_budget_gib < 0) throw UsageError("--mask-budget: must be >= 0 (GiB; 0 = the free device memory)");
  const std::vector<std::string> rng_names = {"auto", "plain", "priority", "coresident-w1", "coresident-w2",
                                              "coresident-w4"};
  if (std::find(rng_names.begin(), rng_names.end(), o.overlap_rng) == rng_names.end())
    throw UsageError("--overlap-rng: '" + o.overlap_rng +
                     "' is not allowed (allowed: auto, plain, priority, coresident-w1, coresident-w2, coresident-w4)");
  const bool validate = !o.no_validate;
  const auto points = expand_sweep(ctx.cfg, kAxes);
  const bool dry = ctx.opts.dry_run;
  TraceState trace;
  if (!o.trace.empty()) {
    try {
      write_chrome_trace(o.trace, {});  // an empty, valid timeline until the first point is traced
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    trace.on = !dry;
    if (dry) fmt::print(stderr, "dropbench: --trace: nothing to trace in a dry run (no GPU work)\n");
  }
  SweepSession session(ctx, "run", points.size());
  int mismatches = 0;
  int unmeasured = 0;  // measurements left without samples (all discarded as throttled)
  json target = json::array();

  for (const SweepPoint& pt : points) {
    const std::string label = axes_label(pt.axes);
    session.step(pt.index, label);
    NvtxRange point_range("point " + label);
    const Workload& w = pt.workload;

    std::vector<ChunkRange> chunks;
    try {
      validate_block_workload(w);
      chunks = plan_chunks(w.sq, w.chunk, 128);
    } catch (const UsageError& e) {
      session.report.add_skipped({pt.axes, e.what()});
      continue;
    }
    const BlockMemory mem = block_memory(w, chunks.front().rows, 4, validate);
    const size_t free_b = dry ? std::numeric_limits<size_t>::max() / 4 : device_free_bytes();
    const size_t budget = o.mask_budget_gib > 0 ? static_cast<size_t>(o.mask_budget_gib * (1ull << 30)) : free_b;
    const PipelinePlan plan = plan_pipelines(mem, free_b, budget, wanted);
    if (!plan.point_fits) {
      session.report.add_skipped({pt.axes, plan.point_reason});
      continue;
    }

    PointResult pr;
    pr.index = pt.index;
    pr.axes = pt.axes;
    pr.workload = to_json(w);
    json skipped = json::object();
    for (const auto& [p, why] : plan.skipped) skipped[pipeline_name(p)] = why;
    if (!skipped.empty()) pr.derived["skipped_pipelines"] = skipped;

    if (dry) {
      // Walk the NVTX tree without a GPU: one range per pipeline and its phases.
      for (Pipeline p : plan.run) {
        NvtxRange vr(std::string("variant ") + pipeline_name(p));
        session.harness.measure([&](Sample& s) {
          s.phase("gemm", [] {});
          if (p == Pipeline::Baseline || p == Pipeline::Overlap) s.phase("rng", [] {});
          s.phase("attention", [] {});
        });
        pr.variants.push_back(variant_of(pipeline_name(p), Measurement{}));
      }
      session.report.add_point(pr);
      continue;
    }

    const cudaStream_t main = session.harness.stream();
    BlockRunner::Options bo;
    bo.top_k = o.top_k;
    bo.full_mask = plan.needs_full_mask;
    bo.chunk_masks = plan.needs_chunk_masks;
    bo.validate = validate;
    BlockRunner runner(w, bo, main);
    runner.gemm().tune(main);
    const double flops = runner.gemm_flops() + runner.attention_flops();
    auto measure = [&](const std::string& name, const std::function<void(Sample&)>& body) {
      NvtxRange vr("variant " + name);
      Measurement m = session.harness.measure(body);
      if (m.total.samples == 0) {
        ++unmeasured;
        fmt::print(stderr, "dropbench: WARNING: {} at {}: every sample was discarded as clock-throttled ({} of them); "
                   "power-capped GEMMs need --set measure.throttle=0\n", name, label, m.total.discarded);
      }
      return m;
    };

    // ---- the pieces alone ----
    std::map<std::string, double> alone;  // name -> median seconds
    auto add_alone = [&](const std::string& name, const Measurement& m, double fl, json extra = json::object()) {
      VariantResult v = variant_of("alone:" + name, m);
      alone[name] = m.total.median;
      if (fl > 0 && m.total.median > 0) v.derived["tflops"] = fl / m.total.median / 1e12;
      v.extra = std::move(extra);
      pr.variants.push_back(std::move(v));
    };
    {
      json ex;
      ex["algo"] = algo_brief(runner.gemm().algo());
      ex["tuned"] = runner.gemm().tuned();
      add_alone("gemm", measure("alone:gemm", [&](Sample& s) { s.phase("gemm", [&] { runner.gemm().run(s.stream); }); }),
                runner.gemm_flops(), ex);
    }
    const double attn_flops = runner.attention_flops();
    if (plan.needs_full_mask) {
      add_alone("rng", measure("alone:rng", [&](Sample& s) { runner.rng_static(s.stream, hook(s)); }), 0,
                json{{"mask_bytes", runner.full_mask_bytes()}});
      add_alone("attention-mask", measure("alone:attention-mask", [&](Sample& s) {
                  s.phase("attention", [&] { runner.attention_full(DropoutMode::Mask, s.stream); });
                }), attn_flops);
    }
    add_alone("attention-fused", measure("alone:attention-fused", [&](Sample& s) {
                s.phase("attention", [&] { runner.attention_full(DropoutMode::Fused, s.stream); });
              }), attn_flops);
    if (plan.needs_chunk_masks) {
      add_alone("rng-chunks", measure("alone:rng-chunks", [&](Sample& s) { runner.rng_chunks_alone(s.stream, hook(s)); }),
                0, json{{"chunks", runner.chunks().size()}, {"chunk_rows", runner.chunks().front().rows}});
      add_alone("attention-chunks", measure("alone:attention-chunks", [&](Sample& s) {
                  runner.attention_chunks_alone(s.stream, hook(s));
                }), attn_flops);
    }
    const double t_g = alone["gemm"];
    const double t_r = alone.count("rng") ? alone["rng"] : 0;

    // ---- overlap mechanisms (GEMM || RNG of the whole mask) ----
    std::vector<Mech> mechs;
    const bool want_overlap = std::any_of(plan.run.begin(), plan.run.end(),
                                          [](Pipeline p) { return p == Pipeline::Overlap || p == Pipeline::Chunked; });
    if (want_overlap && plan.needs_full_mask && !o.no_explore) {
      // Reference bits: QKV from the pipelines' GEMM, the mask from the standard kernel (mask zeroed first).
      runner.gemm().run(main);
      const uint64_t y_ref = runner.checksum(runner.qkv(), runner.qkv_bytes(), main);
      runner.poison_outputs(main);
      runner.rng_static(main, no_phases());
      const uint64_t mask_ref = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main);
      std::map<std::string, double> rng_alone_cache;

      auto evaluate = [&](const RngConfig& rc, QkvGemm& g, bool default_gemm, double t_g_mech,
                          const std::string& mechanism, const std::string& vname) {
        Mech m;
        m.rc = rc;
        m.mechanism = mechanism;
        runner.poison_outputs(main);
        runner.overlap_phase(g, rc, main, no_phases());
        DB_CUDA(cudaStreamSynchronize(main));
        const BlockRunner::WorkStats ws = runner.work_stats(main);
        const bool y_eq = runner.checksum(runner.qkv(), runner.qkv_bytes(), main) == y_ref;
        const bool mask_eq = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main) == mask_ref;
        m.over = measure(vname, [&](Sample& s) { runner.overlap_phase(g, rc, s.stream, hook(s)); });
        if (!rng_alone_cache.count(rc.name))
          rng_alone_cache[rc.name] = rc.name == "plain" ? t_r : measure("alone:rng:" + rc.name, [&](Sample& s) {
                                                              runner.rng_alone(rc, s.stream, hook(s));
                                                            }).total.median;
        m.t_rng = rng_alone_cache[rc.name];
        m.t_gemm = t_g_mech;
        // A time without samples (NaN in the report) leaves the fraction undefined rather than 0.
        const double nan = std::numeric_limits<double>::quiet_NaN();
        const bool have = t_g > 0 && t_r > 0 && m.over.total.median > 0;
        m.hidden = have ? hidden_fraction(t_g, t_r, m.over.total.median) : nan;
        m.hidden_self = have && m.t_gemm > 0 && m.t_rng > 0 ? hidden_fraction(m.t_gemm, m.t_rng, m.over.total.median) : nan;
        m.eligible = default_gemm && y_eq && mask_eq;
        m.extra["rng"] = rc.to_json();
        m.extra["gemm_algo"] = algo_brief(g.algo());
        m.extra["gemm_sm_count_target"] = g.options().sm_count_target;
        m.extra["qkv_equal_pipelines"] = y_eq;
        m.extra["mask_equal_standard"] = mask_eq;
        if (rc.schedule == RngSchedule::Coresident) {
          m.extra["coresident_share"] = ws.strips ? static_cast<double>(ws.coresident_strips) / ws.strips : 0.0;
          m.extra["coresident_blocks"] = ws.coresident_blocks;
          m.extra["coresident_sms"] = ws.coresident_sms;
        }
        if (!mask_eq) {
          fmt::print(stderr, "dropbench: WARNING: mechanism {} wrote a different mask at {}\n", rc.name, label);
          ++mismatches;
        }
        return m;
      };

      // (naive) plain two-stream, (d) priority, (a) co-resident kernels of 1, 2, 4 warps.
      mechs.push_back(evaluate(rng_plain(), runner.gemm(), true, t_g, "two streams, RNG enqueued after the GEMM",
                               "mech:plain"));
      mechs.push_back(evaluate(rng_priority(), runner.gemm(), true, t_g,
                               "d: RNG on the highest-priority stream, after the GEMM", "mech:priority"));
      for (int warps : {1, 2, 4})
        mechs.push_back(evaluate(rng_coresident(warps), runner.gemm(), true, t_g,
                                 "a: persistent co-resident RNG (<= 32 regs, no smem, launched first) + finisher",
                                 "mech:" + rng_coresident(warps).name));
      // The partner of the GEMM-candidate scan: the fastest mechanism so far (all use the default GEMM).
      size_t partner = 0;
      for (size_t i = 1; i < mechs.size(); ++i)
        if (mechs[i].over.total.median < mechs[partner].over.total.median) partner = i;
      const RngConfig cores = mechs[partner].rc;

      // (c) spatial partition: the GEMM on sms - k SMs (SM_COUNT_TARGET), the RNG pinned to k SMs.
      // k in proportion to the RNG's share of the serial time (x 0.5, 1, 1.5): the GEMM runs power-capped, so it
      // loses less than (sms - k) / sms of its speed, and a larger k can balance better.
      std::vector<int> ks;
      for (double scale : {1.0, 0.5, 1.5}) {
        const int k = partition_rng_sms(runner.sms(), t_g, t_r, scale);
        if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
      }
      for (int k : ks) {
        GemmOptions go = runner.gemm_options();
        go.top_k = 1;
        go.sm_count_target = runner.sms() - k;
        auto gp = runner.make_gemm(go);
        const double tg = measure("alone:gemm:sm" + std::to_string(runner.sms() - k), [&](Sample& s) {
                            s.phase("gemm", [&] { gp->run(s.stream); });
                          }).total.median;
        Mech m = evaluate(rng_partition(k), *gp, false, tg,
                          "c: spatial partition (GEMM SM_COUNT_TARGET, RNG pinned to the other SMs) + finisher",
                          "mech:" + rng_partition(k).name);
        m.extra["gemm_alone"] = tg;
        mechs.push_back(std::move(m));
      }

      // (b) the cuBLASLt heuristic candidate that overlaps best with the co-resident kernel.
      if (o.top_k > 1 && runner.gemm().candidates().size() > 1) {
        auto gb = runner.make_gemm(runner.gemm_options());
        json cands = json::array();
        std::optional<Mech> best;
        for (size_t i = 0; i < gb->candidates().size(); ++i) {
          try {
            gb->select(i);
          } catch (const UsageError&) {
            continue;
          }
          const double tg = measure(fmt::format("alone:gemm:cand{}", i), [&](Sample& s) {
                              s.phase("gemm", [&] { gb->run(s.stream); });
                            }).total.median;
          Mech m = evaluate(cores, *gb, false, tg,
                            "b: the cuBLASLt candidate that overlaps best (with the fastest mechanism above, " + cores.name + ")",
                            fmt::format("mech:algo:cand{}", i));
          json c = algo_brief(gb->algo());
          c["candidate"] = i;
          c["gemm_alone"] = tg;
          c["overlap"] = m.over.total.median;
          c["hidden"] = m.hidden;
          c["hidden_self"] = m.hidden_self;
          c["qkv_equal_pipelines"] = m.extra["qkv_equal_pipelines"];
          cands.push_back(c);
          m.extra["candidate"] = i;
          if (!best || m.over.total.median < best->over.total.median) best = std::move(m);
        }
        if (best) {
          best->rc.name = "algo";
          best->extra["candidates"] = cands;
          best->eligible = false;  // another GEMM object (its bits are checked, its choice is per point)
          mechs.push_back(std::move(*best));
        }
      }
    }

    // The overlap pipeline's RNG: the fastest eligible mechanism (same GEMM, same bits), or the one asked for.
    // Without exploration: the plain second stream, the mechanism that hid the most on the H200 presets (the
    // co-resident kernels launched first delay cuBLASLt's GEMM: overlap/baseline 0.61-0.69x with coresident-w1).
    RngConfig ovl = rng_plain();
    std::string ovl_why = "default (no exploration)";
    if (o.overlap_rng != "auto") {
      for (const RngConfig& c : {rng_plain(), rng_priority(), rng_coresident(1), rng_coresident(2), rng_coresident(4)})
        if (c.name == o.overlap_rng) ovl = c;
      ovl_why = "--overlap-rng";
    } else {
      const Mech* best = nullptr;
      for (const Mech& m : mechs)
        if (m.eligible && (!best || m.over.total.median < best->over.total.median)) best = &m;
      if (best) {
        ovl = best->rc;
        ovl_why = "fastest eligible mechanism of this point";
      }
    }

    json hidden_by = json::object();
    const Mech* best_hidden = nullptr;
    for (Mech& m : mechs) {
      VariantResult v = variant_of("mech:" + m.rc.name, m.over);
      v.derived["hidden"] = m.hidden;
      v.derived["hidden_self"] = m.hidden_self;
      v.derived["saved_us"] = (t_g + t_r - m.over.total.median) * 1e6;
      v.extra = m.extra;
      v.extra["mechanism"] = m.mechanism;
      v.extra["gemm_alone"] = m.t_gemm;
      v.extra["rng_alone"] = m.t_rng;
      v.extra["eligible_for_pipelines"] = m.eligible;
      if (m.extra.contains("coresident_share")) v.derived["coresident_share"] = m.extra["coresident_share"];
      pr.variants.push_back(std::move(v));
      hidden_by[m.rc.name] = m.hidden;
      if (std::isfinite(m.hidden) && (!best_hidden || m.hidden > best_hidden->hidden)) best_hidden = &m;
    }

    // ---- the pipelines ----
    std::map<std::string, double> t_pipe;
    std::string ref_name;
    // O and LSE just written against the reference pipeline's, into `ex`; a difference is an error.
    auto compare_with_reference = [&](const std::string& what, json& ex) {
      const auto [od, ld] = runner.diff_reference(main);
      ex["bitwise_equal"] = od == 0 && ld == 0;
      ex["o_words_differing"] = od;
      ex["lse_words_differing"] = ld;
      ex["compared_with"] = ref_name;
      if (od != 0 || ld != 0) {
        fmt::print(stderr, "dropbench: ERROR: {} differs from {} at {}: {} O words, {} LSE words\n", what, ref_name,
                   label, od, ld);
        ++mismatches;
      }
    };
    for (Pipeline p : plan.run) {
      const std::string name = pipeline_name(p);
      VariantResult v;
      json ex = json::object();
      if (validate) {
        runner.poison_outputs(main);
        runner.run(p, main, no_phases(), ovl);
        DB_CUDA(cudaStreamSynchronize(main));
        ex["o_checksum"] = hex64(runner.checksum(runner.o(), runner.o_bytes(), main));
        ex["lse_checksum"] = hex64(runner.checksum(runner.lse(), runner.lse_bytes(), main));
        if (ref_name.empty()) {
          runner.keep_reference(main);
          ref_name = name;
          ex["bitwise_equal"] = true;
          ex["reference"] = true;
        } else {
          compare_with_reference("pipeline " + name, ex);
        }
      }
      const Measurement m = measure(name, [&](Sample& s) { runner.run(p, s.stream, hook(s), ovl); });
      v = variant_of(name, m);
      t_pipe[name] = m.total.median;
      if (m.total.median > 0) v.derived["tflops"] = flops / m.total.median / 1e12;
      switch (p) {
        case Pipeline::Baseline: ex["mask_bytes"] = runner.full_mask_bytes(); break;
        case Pipeline::Fused: ex["mask_bytes"] = 0; break;
        case Pipeline::Overlap:
          ex["mask_bytes"] = runner.full_mask_bytes();
          ex["rng"] = ovl.to_json();
          ex["rng_choice"] = ovl_why;
          break;
        case Pipeline::Chunked:
          ex["mask_bytes"] = 2 * runner.chunk_mask_bytes();
          ex["chunk_rows"] = runner.chunks().front().rows;
          ex["chunks"] = runner.chunks().size();
          ex["first_chunk_rng"] = ovl.to_json();
          break;
      }
      v.extra = ex;
      pr.variants.push_back(std::move(v));

      // ---- --graph: the same pipeline captured once into a CUDA graph and replayed (launch overhead and
      // inter-kernel gaps removed); reported as its own variant, never a candidate for the winner ----
      if (o.graph && !session.harness.dry_run()) {
        const PipelineGraph graph(main, [&] { runner.run(p, main, no_phases(), ovl); });
        json gx = json::object();
        gx["graph_nodes"] = graph.nodes();
        if (validate) {
          runner.poison_outputs(main);
          graph.launch(main);
          compare_with_reference("pipeline " + name + " replayed as a graph", gx);
        }
        const Measurement mg = measure(name + ":graph", [&](Sample& s) { graph.launch(s.stream); });
        VariantResult vg = variant_of(name + ":graph", mg);
        if (mg.total.median > 0) {
          vg.derived["tflops"] = flops / mg.total.median / 1e12;
          if (m.total.median > 0) vg.derived["x_streams"] = m.total.median / mg.total.median;
        }
        vg.extra = gx;
        pr.variants.push_back(std::move(vg));
      }
    }

    // ---- --trace: one more, untimed execution of every pipeline under CUPTI (after this point's measurements) ----
    if (trace.on) {
      KernelTracer tracer;
      std::string why;
      DB_CUDA(cudaDeviceSynchronize());
      if (!tracer.start(&why)) {
        fmt::print(stderr, "dropbench: WARNING: --trace: CUPTI is unavailable ({}); no kernel trace\n", why);
        trace.on = false;
      } else {
        const uint32_t sa = KernelTracer::stream_id(main);
        // Pipeline i's kernels start after pipeline i-1 was synchronised: its window runs from that sync to its own
        // (the first from the start, the last to the end), robust to a small skew of the host timestamps.
        std::vector<std::pair<std::string, TraceWindow>> windows;
        for (Pipeline p : plan.run) {
          TraceWindow win;
          if (!windows.empty()) win.begin_ns = windows.back().second.end_ns;
          runner.run(p, main, no_phases(), ovl);
          DB_CUDA(cudaStreamSynchronize(main));  // the pipelines join their side streams back to main
          win.end_ns = KernelTracer::now_ns();
          windows.emplace_back(pipeline_name(p), win);
        }
        if (!windows.empty()) windows.back().second.end_ns = std::numeric_limits<uint64_t>::max();
        std::vector<TraceRecord> recs = tracer.stop_and_collect();
        DB_CUDA(cudaGetLastError());
        for (const auto& [name, win] : windows) {
          size_t kernels = 0;
          uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
          uint32_t dev = static_cast<uint32_t>(ctx.opts.device);
          for (const TraceRecord& r : recs)
            if (r.start_ns >= win.begin_ns && r.start_ns < win.end_ns) {
              if (r.kind == TraceRecord::Kind::Kernel) ++kernels;
              first = std::min(first, r.start_ns);
              last = std::max(last, r.end_ns);
              dev = r.device;
              trace.threads.emplace(std::make_pair(r.device, r.stream),
                                    r.stream == sa ? fmt::format("stream {} (A: main)", r.stream)
                                                   : fmt::format("stream {} (B: side)", r.stream));
            }
          const bool any = first <= last;  // no records: no label (and a span of 0)
          if (!any) first = last = 0;
          TraceEvent ev;
          ev.name = name + " @ " + label;
          ev.ts_ns = first;
          ev.dur_ns = last - first;
          ev.pid = dev;
          ev.tid = TraceState::kLabelTid;
          ev.args = {{"point", label}, {"pipeline", name}, {"axes", pt.axes}, {"kernels", kernels}};
          if (any) trace.labels.push_back(ev);
          if (any && name == pipeline_name(plan.run.front())) {
            TraceEvent mark = ev;
            mark.name = "point " + label;
            mark.ph = "i";
            mark.dur_ns = 0;
            mark.args = {{"point", label}, {"axes", pt.axes}};
            trace.labels.push_back(mark);
          }
          trace.threads.emplace(std::make_pair(dev, TraceState::kLabelTid), "dropbench: pipeline @ point");
          for (VariantResult& v : pr.variants) {
            if (v.name != name) continue;
            v.extra["trace_kernels"] = kernels;
            v.extra["trace_span_us"] = static_cast<double>(last - first) / 1e3;
            if ((name == "overlap" || name == "chunked") && sa != kAnyOtherStream) {
              const TraceOverlap ov = overlap_from_records(recs, sa, kAnyOtherStream, win);
              v.extra["trace_overlap_us"] = ov.both_ns / 1e3;
              v.extra["trace_overlap_fraction"] = ov.fraction;
              v.extra["trace_busy_a_us"] = ov.busy_a_ns / 1e3;
              v.extra["trace_busy_b_us"] = ov.busy_b_ns / 1e3;
            }
          }
        }
        trace.records.insert(trace.records.end(), std::make_move_iterator(recs.begin()),
                             std::make_move_iterator(recs.end()));
        trace.write(o.trace);  // after every point: an interrupted run keeps a trace of what finished
      }
    }
    if (t_pipe.count("baseline"))
      for (auto& v : pr.variants)
        if (t_pipe.count(v.name) && v.stats.median > 0) v.derived["x_baseline"] = t_pipe["baseline"] / v.stats.median;

    // ---- point figures: speedups, exposed dropout cost, winner ----
    json d = pr.derived;
    for (const auto& [n, t] : t_pipe) d["t_" + n] = t;
    auto ratio = [&](const char* num, const char* den, const char* key) {
      if (t_pipe.count(num) && t_pipe.count(den) && t_pipe[den] > 0) d[key] = t_pipe[num] / t_pipe[den];
    };
    ratio("baseline", "overlap", "speedup_overlap_vs_baseline");
    ratio("fused", "overlap", "speedup_overlap_vs_fused");
    ratio("baseline", "fused", "speedup_fused_vs_baseline");
    ratio("baseline", "chunked", "speedup_chunked_vs_baseline");
    ratio("overlap", "chunked", "speedup_chunked_vs_overlap");
    // Dropout's exposed cost in each pipeline: its time minus GEMM + attention without dropout work.
    json exposed = json::object();
    const double t_am = alone.count("attention-mask") ? alone["attention-mask"] : 0;
    if (t_pipe.count("baseline") && t_am > 0) exposed["baseline"] = t_pipe["baseline"] - t_g - t_am;
    if (t_pipe.count("overlap") && t_am > 0) exposed["overlap"] = t_pipe["overlap"] - t_g - t_am;
    if (t_pipe.count("fused") && t_am > 0) exposed["fused"] = t_pipe["fused"] - t_g - t_am;
    if (t_pipe.count("chunked") && alone.count("attention-chunks"))
      exposed["chunked"] = t_pipe["chunked"] - t_g - alone["attention-chunks"];
    d["rng_exposed_s"] = exposed;  // vs the mask-reading attention alone (fused: the in-kernel Philox's extra time)
    std::string winner;
    for (const auto& [n, t] : t_pipe)
      if (winner.empty() || t < t_pipe[winner]) winner = n;
    d["winner"] = winner;
    if (!winner.empty()) {
      std::string why = fmt::format("{} is fastest ({:.1f} us); GEMM {:.1f} us, RNG alone {:.1f} us, attention "
                                    "(mask) {:.1f} us, (fused) {:.1f} us; dropout exposed:",
                                    winner, t_pipe[winner] * 1e6, t_g * 1e6, t_r * 1e6, t_am * 1e6,
                                    alone["attention-fused"] * 1e6);
      for (auto it = exposed.begin(); it != exposed.end(); ++it)
        why += fmt::format(" {} {:.1f} us", it.key(), it.value().get<double>() * 1e6);
      d["why"] = why;
    }
    d["mask_bytes_full"] = mem.full_mask;
    d["mask_bytes_chunked"] = 2 * mem.chunk_mask;
    d["overlap_rng"] = ovl.name;
    if (!hidden_by.empty()) {
      d["hidden_by_mechanism"] = hidden_by;
      d["best_mechanism"] = best_hidden->rc.name;
      d["best_hidden"] = best_hidden->hidden;
    }
    if (t_r > 0 && t_g > 0) d["rng_over_gemm"] = t_r / t_g;
    pr.derived = d;
    if (w.embed == 8192 && w.sq == 8192 && w.rounds == 7 && best_hidden) {
      json t;
      t["axes"] = pt.axes;
      t["dtype"] = w.dtype;
      t["best_mechanism"] = best_hidden->rc.name;
      t["best_hidden"] = best_hidden->hidden;
      t["met_80_percent"] = best_hidden->hidden >= 0.8;
      t["hidden_by_mechanism"] = hidden_by;
      target.push_back(t);
    }
    session.report.add_point(std::move(pr));
  }

  // ---- summary: Philox round ratios inside the pipelines, winners, the co-residency target ----
  json summary = json::object();
  {
    std::map<std::string, std::map<int64_t, const PointResult*>> groups;
    for (const PointResult& p : session.report.points()) {
      json key = p.axes;
      key.erase("rounds");
      groups[key.dump()][p.workload.value("rounds", int64_t{7})] = &p;
    }
    json ratios = json::array();
    for (const auto& [key, by_r] : groups) {
      auto r7 = by_r.find(7);
      if (r7 == by_r.end()) continue;
      for (const auto& [r, p] : by_r) {
        if (r == 7) continue;
        json row;
        row["axes"] = json::parse(key);
        row["rounds"] = r;
        for (const VariantResult& v : p->variants) {
          for (const VariantResult& v7 : r7->second->variants)
            if (v7.name == v.name && v7.stats.median > 0) {
              if (v.name.rfind("alone:", 0) == 0 || v.name.find(':') == std::string::npos)
                row["x_r7"][v.name] = v.stats.median / v7.stats.median;
              if (v.name == "baseline")
                for (size_t k = 0; k < v.phases.size() && k < v7.phases.size(); ++k)
                  if (v.phases[k].first == "rng" && v7.phases[k].second.median > 0)
                    row["x_r7"]["baseline/rng-phase"] = v.phases[k].second.median / v7.phases[k].second.median;
            }
        }
        ratios.push_back(row);
      }
    }
    summary["rounds_vs_r7"] = ratios;
    json winners = json::array();
    for (const PointResult& p : session.report.points())
      if (p.derived.contains("winner")) winners.push_back({{"axes", p.axes}, {"winner", p.derived["winner"]}});
    summary["winners"] = winners;
    summary["bitwise_mismatches"] = mismatches;
    summary["measurements_without_samples"] = unmeasured;
    if (!target.empty()) summary["coresidency_target"] = target;
    if (trace.on) summary["trace"] = {{"file", o.trace}, {"records", trace.records.size()}};
  }
  session.finish(summary, standard_table(session.report, {"tflops", "x_baseline", "hidden", "hidden_self",
                                                          "coresident_share"}));
  if (mismatches > 0) {
    fmt::print(stderr, "dropbench: {} bitwise mismatch(es) between pipelines or mask producers (see the report)\n",
               mismatches);
    return 1;
  }
  return 0;
}

}  // namespace

Command make_run_command() {
  auto o = std::make_shared<RunOptions>();
  Command c;
  c.name = "run";
  c.summary = "One block's QKV GEMM + attention with dropout four ways: baseline / fused / overlap / chunked";
  c.help =
      "Runs one transformer block's QKV GEMM (cuBLASLt, workload.dtype) and attention with dropout on its real output,\n"
      "four ways, at every sweep point (axes: any workload field except pipeline/layout/elements):\n"
      "  baseline  one stream: GEMM -> RNG mask kernel -> attention reading the 1-bit mask\n"
      "  fused     GEMM -> attention generating the keep bits with Philox in the kernel (no mask)\n"
      "  overlap   GEMM on stream A || RNG on stream B (event fork/join) -> attention reading the mask\n"
      "  chunked   RNG for query-row chunk i+1 || attention for chunk i, double-buffered chunk masks (memory\n"
      "            O(chunk), workload.chunk rows, 0 = auto = ~8 chunks); chunk 0's RNG runs beside the GEMM\n"
      "All four write bit-identical O and LSE for one (seed, offset): checked at every point (--no-validate skips).\n"
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
      "stream time / graph time). Graph variants never decide the winner.\n"
      "Example: dropbench run --config configs/llama3-70b.json --set sweep.sq=[8192] --set sweep.rounds=[3,5,7]\n"
      "         --set measure.throttle=0";
  c.add_options = [o](CLI::App& app) {
    app.add_option("--pipelines", o->pipelines, "Comma list of pipelines to run (default: all four)");
    app.add_flag("--no-validate", o->no_validate, "Skip the bitwise comparison of the pipelines' outputs");
    app.add_flag("--no-explore", o->no_explore, "Skip the overlap-mechanism exploration (overlap uses plain)");
    app.add_option("--top-k", o->top_k, "cuBLASLt heuristic candidates: tuned for the GEMM, scanned by mechanism b");
    app.add_option("--mask-budget", o->mask_budget_gib,
                   "GiB a whole-matrix mask may take (0 = the free device memory); larger: baseline/overlap skipped");
    app.add_option("--overlap-rng", o->overlap_rng,
                   "RNG of the overlap pipeline: auto, plain, priority, coresident-w1, coresident-w2, coresident-w4");
    app.add_flag("--graph", o->graph,
                 "Also capture each pipeline into a CUDA graph and time its replay (variants <pipeline>:graph)");
    app.add_option("--trace", o->trace,
                   "Write a CUPTI kernel timeline (Chrome-trace JSON) of one extra untimed run of each pipeline per point");
  };
  c.run = [o](RunContext& ctx) { return run_run(ctx, *o); };
  return c;
}

}  // namespace dropbench
