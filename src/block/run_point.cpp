#include "src/block/run_point.hpp"
#include "src/core/print.hpp"

#include <limits>
#include <memory>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/block/mechanisms.hpp"
#include "src/block/pipeline_graph.hpp"
#include "src/core/nvtx.hpp"

namespace dropbench {

void validate_run_options(const RunOptions& o) {
  if (o.top_k < 1 || o.top_k > 16) throw UsageError(fmt::format("--top-k: {} is out of range (allowed: [1, 16])", o.top_k));
  mask_budget_bytes(o.mask_budget_gib, kRunMaskBudgetZero);
  if (o.overlap_rng != "auto" && !find_fixed_mechanism(o.overlap_rng))
    throw UsageError("--overlap-rng: '" + o.overlap_rng + "' is not allowed (allowed: " + overlap_rng_choices() + ")");
}

std::vector<Pipeline> wanted_pipelines(const RunOptions& o, const Config& cfg) {
  const std::optional<std::vector<Pipeline>> l = wanted_pipeline_list(o, cfg);
  return l ? *l : all_pipelines();
}

std::optional<std::vector<Pipeline>> wanted_pipeline_list(const RunOptions& o, const Config& cfg) {
  if (pipelines_named(o)) return parse_pipeline_list(o.pipelines, "--pipelines");
  for (const auto& [axis, values] : cfg.sweep)
    if (axis == "pipeline") {
      std::vector<Pipeline> wanted;
      for (const json& v : values) wanted.push_back(parse_pipeline(v.get<std::string>()));
      return wanted;
    }
  return std::nullopt;
}

std::map<std::string, Measurement> PointScope::measure_group(const std::vector<Candidate>& group) {
  std::vector<Candidate> named;
  for (const Candidate& c : group)
    named.push_back({c.name, [&c](Sample& s) {
                       NvtxRange vr("variant " + c.name);
                       c.body(s);
                     }});
  std::vector<Measurement> ms = harness.measure_group(named);
  std::map<std::string, Measurement> out;
  for (size_t i = 0; i < group.size(); ++i) {
    const Measurement& m = ms[i];
    if (m.total.samples == 0 && !harness.dry_run()) {
      ++counters.unmeasured;
      print_stderr("dropbench: WARNING: {} at {}: every sample was discarded as clock-throttled ({} of them); "
                 "power-capped GEMMs need --set measure.throttle=0\n", group[i].name, label, m.total.discarded);
    }
    book.add(group[i].name, m.series);
    out[group[i].name] = m;
  }
  return out;
}

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

double power_figure(const json& power, const char* key) {
  if (!power.is_object()) return std::numeric_limits<double>::quiet_NaN();
  const json& v = power.value(key, json(nullptr));
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

double AloneTimes::watts(const std::string& n) const {
  auto it = power.find(n);
  return power_figure(it == power.end() ? json(nullptr) : it->second, "mean_w");
}
double AloneTimes::pass_time(const std::string& n) const {
  auto it = power.find(n);
  return power_figure(it == power.end() ? json(nullptr) : it->second, "time_per_iter_s");
}

std::vector<Candidate> alone_candidates(PointScope& ps) {
  BlockRunner& runner = ps.runner;
  std::vector<Candidate> c;
  c.push_back({"alone:gemm", [&runner](Sample& s) { s.phase("gemm", [&] { runner.gemm().run(s.stream); }); }});
  if (ps.plan.needs_full_mask) {
    c.push_back({"alone:rng", [&runner](Sample& s) { runner.rng_static(s.stream, hook(s)); }});
    c.push_back({"alone:attention-mask", [&runner](Sample& s) {
                   s.phase("attention", [&] { runner.attention_full(DropoutMode::Mask, s.stream); });
                 }});
  }
  c.push_back({"alone:attention-fused", [&runner](Sample& s) {
                 s.phase("attention", [&] { runner.attention_full(DropoutMode::Fused, s.stream); });
               }});
  if (ps.plan.needs_chunk_masks) {
    c.push_back({"alone:rng-chunks", [&runner](Sample& s) { runner.rng_chunks_alone(s.stream, hook(s)); }});
    c.push_back({"alone:attention-chunks", [&runner](Sample& s) { runner.attention_chunks_alone(s.stream, hook(s)); }});
  }
  return c;
}

AloneTimes add_alone_variants(PointScope& ps, const std::map<std::string, Measurement>& measured) {
  BlockRunner& runner = ps.runner;
  AloneTimes alone;
  const double attn_flops = runner.attention_flops();
  auto add = [&](const std::string& name, double fl, json extra = json::object()) {
    auto it = measured.find("alone:" + name);
    if (it == measured.end()) return;
    const Measurement& m = it->second;
    VariantResult v = variant_of("alone:" + name, m);
    alone.t[name] = m.total.median;
    alone.power[name] = m.power;
    if (fl > 0 && m.total.median > 0) v.derived["tflops"] = fl / m.total.median / 1e12;
    v.extra = std::move(extra);
    ps.pr.variants.push_back(std::move(v));
  };
  json gx;
  gx["algo"] = algo_brief(runner.gemm().algo());
  gx["tuned"] = runner.gemm().tuned();
  add("gemm", runner.gemm_flops(), gx);
  if (ps.plan.needs_full_mask) {
    add("rng", 0, json{{"mask_bytes", runner.full_mask_bytes()}});
    add("attention-mask", attn_flops, json{{"kernel", runner.attention_kernel_name(DropoutMode::Mask)}});
  }
  add("attention-fused", attn_flops, json{{"kernel", runner.attention_kernel_name(DropoutMode::Fused)}});
  if (ps.plan.needs_chunk_masks) {
    add("rng-chunks", 0, json{{"chunks", runner.chunks().size()}, {"chunk_rows", runner.chunks().front().rows}});
    add("attention-chunks", attn_flops);
  }
  return alone;
}

namespace {

// The validation state of one point: the first pipeline run is the reference the others must equal bitwise.
struct Reference {
  PointScope& ps;
  std::string name;
  // O and LSE just written, compared with the reference pipeline's, into `ex`; a difference is an error.
  void compare(const std::string& what, json& ex) {
    const auto [od, ld] = ps.runner.diff_reference(ps.harness.stream());
    ex["bitwise_equal"] = od == 0 && ld == 0;
    ex["o_words_differing"] = od;
    ex["lse_words_differing"] = ld;
    ex["compared_with"] = name;
    if (od != 0 || ld != 0) {
      print_stderr("dropbench: ERROR: {} differs from {} at {}: {} O words, {} LSE words\n", what, name,
                 ps.label, od, ld);
      ++ps.counters.mismatches;
    }
  }
};

// What the report says of each pipeline's memory and RNG configuration.
void pipeline_extra(Pipeline p, const BlockRunner& runner, const OverlapChoice& ovl, json& ex) {
  switch (p) {
    case Pipeline::Baseline: ex["mask_bytes"] = runner.full_mask_bytes(); break;
    case Pipeline::Fused: ex["mask_bytes"] = 0; break;
    case Pipeline::Overlap:
      ex["mask_bytes"] = runner.full_mask_bytes();
      ex["rng"] = ovl.rc.to_json();
      ex["rng_choice"] = ovl.why;
      break;
    case Pipeline::Chunked:
      ex["mask_bytes"] = 2 * runner.chunk_mask_bytes();
      ex["chunk_rows"] = runner.chunks().front().rows;
      ex["chunks"] = runner.chunks().size();
      ex["first_chunk_rng"] = ovl.rc.to_json();
      break;
    case Pipeline::Stored:
    case Pipeline::RegenOverlap:
    case Pipeline::FusedWrite:
      break;  // pass train only: never measured as a forward pipeline
  }
}

}  // namespace

std::map<std::string, double> measure_pipelines(PointScope& ps, const OverlapChoice& ovl) {
  BlockRunner& runner = ps.runner;
  const cudaStream_t main = ps.harness.stream();
  const double flops = runner.gemm_flops() + runner.attention_flops();
  Reference ref{ps, ""};
  // Set-up and checks first (each pipeline once on poisoned outputs; --graph: captured and replayed once), then
  // all of them measured as one group.
  std::vector<json> extras;
  std::vector<std::unique_ptr<PipelineGraph>> graphs;
  std::vector<Candidate> group;
  for (Pipeline p : ps.plan.run) {
    const std::string name = pipeline_name(p);
    json ex = json::object();
    if (!ps.opts.no_validate) {
      runner.poison_outputs(main);
      runner.run(p, main, no_phases(), ovl.rc);
      DB_CUDA(cudaStreamSynchronize(main));
      ex["o_checksum"] = hex64(runner.checksum(runner.o(), runner.o_bytes(), main));
      ex["lse_checksum"] = hex64(runner.checksum(runner.lse(), runner.lse_bytes(), main));
      if (ref.name.empty()) {
        runner.keep_reference(main);
        ref.name = name;
        ex["bitwise_equal"] = true;
        ex["reference"] = true;
      } else {
        ref.compare("pipeline " + name, ex);
      }
    }
    pipeline_extra(p, runner, ovl, ex);
    extras.push_back(std::move(ex));
    group.push_back({name, [&runner, p, &ovl](Sample& s) { runner.run(p, s.stream, hook(s), ovl.rc); }});
  }
  // --graph: each pipeline captured once into a CUDA graph and replayed (launch overhead and inter-kernel gaps
  // removed); its own variant, never a candidate for the winner.
  std::vector<json> graph_extras;
  if (ps.opts.graph && !ps.harness.dry_run()) {
    for (Pipeline p : ps.plan.run) {
      const std::string name = pipeline_name(p);
      graphs.push_back(std::make_unique<PipelineGraph>(main, [&] { runner.run(p, main, no_phases(), ovl.rc); }));
      const PipelineGraph& graph = *graphs.back();
      json gx = json::object();
      gx["graph_nodes"] = graph.nodes();
      if (!ps.opts.no_validate) {
        runner.poison_outputs(main);
        graph.launch(main);
        ref.compare("pipeline " + name + " replayed as a graph", gx);
      }
      graph_extras.push_back(std::move(gx));
      group.push_back({name + ":graph", [&graph](Sample& s) { graph.launch(s.stream); }});
    }
  }
  const std::map<std::string, Measurement> measured = ps.measure_group(group);

  std::map<std::string, double> t_pipe;
  for (size_t i = 0; i < ps.plan.run.size(); ++i) {
    const std::string name = pipeline_name(ps.plan.run[i]);
    const Measurement& m = measured.at(name);
    VariantResult v = variant_of(name, m);
    t_pipe[name] = m.total.median;
    if (m.total.median > 0) v.derived["tflops"] = flops / m.total.median / 1e12;
    v.extra = extras[i];
    ps.pr.variants.push_back(std::move(v));
    if (i < graph_extras.size()) {
      const std::string gname = name + ":graph";
      const Measurement& mg = measured.at(gname);
      VariantResult vg = variant_of(gname, mg);
      if (mg.total.median > 0) {
        vg.derived["tflops"] = flops / mg.total.median / 1e12;
        if (m.total.median > 0)
          set_figure(vg.derived, "x_streams", ps.book.ratio(name, gname));
      }
      vg.extra = graph_extras[i];
      ps.pr.variants.push_back(std::move(vg));
    }
  }
  return t_pipe;
}

}  // namespace dropbench
