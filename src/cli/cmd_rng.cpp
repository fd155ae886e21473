// `dropbench rng`: the RNG mask kernel alone, over sequence length, Philox rounds, threshold width and
// output layout: time, Gelem/s, GB/s written, the keep rate actually sampled, and each R's runtime / R=7.
// Beside every point, interleaved with it, the Philox ceiling (kernels/rng/philox_ceiling.cuh) at the same R and
// number of calls: derived.ceiling_fraction = the layout's elements/s over the ceiling's.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "src/cli/cli.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/harness.hpp"
#include "src/core/nvtx.hpp"
#include "kernels/rng/philox_ceiling.cuh"
#include "kernels/rng/rng_mask.cuh"
#include "src/core/sweep_session.hpp"
#include "src/core/sweep_util.hpp"
#include "src/core/workload_params.hpp"
#include "kernels/util/util_kernels.cuh"

namespace dropbench {

namespace {

int count_kind(MaskLayout l) { return l == MaskLayout::U8 ? 1 : l == MaskLayout::I32 ? 2 : 0; }

uint64_t count_items(const RngMaskParams& p) {
  switch (p.layout) {
    case MaskLayout::Tile: return p.geo.words();
    case MaskLayout::Bits: return (p.elements + 31) / 32;
    default: return p.elements;
  }
}

// Elements the count covers (tile/bits count every generated bit, padding included).
double counted_elements(const RngMaskParams& p) {
  switch (p.layout) {
    case MaskLayout::Tile: return static_cast<double>(p.geo.generated_elements());
    case MaskLayout::Bits: return static_cast<double>((p.elements + 31) / 32 * 32);
    default: return static_cast<double>(p.elements);
  }
}

// The rng table: per point the layout's figures, its runtime relative to R = 7 at the same other axes (also appended
// to ratios, the summary's ratios_to_r7) and the fraction of the Philox ceiling; first_axes names the axis columns
// (null: no points).
Table rng_table(const std::vector<PointResult>& pts, const json& first_axes, bool dry, json& ratios) {
  auto key_without_rounds = [](const json& axes) {
    json k = axes;
    k.erase("rounds");
    return k.dump();
  };
  std::map<std::string, double> r7;
  for (const PointResult& p : pts)
    if (p.workload["rounds"] == 7 && !p.variants.empty()) r7[key_without_rounds(p.axes)] = p.variants[0].stats.median;
  Table table;
  if (!first_axes.is_null()) table.columns = axis_columns(first_axes);
  for (const char* c : {"elements", "median_us", "rel_stdev_%", "samples", "Gelem/s", "GB/s", "keep_eff", "keep_sampled",
                        "z", "R/R7", "ceiling_Gelem/s", "%ceiling"})
    table.columns.push_back(c);
  for (const PointResult& p : pts) {
    const VariantResult& v = p.variants[0];
    std::vector<std::string> row;
    for (auto it = p.axes.begin(); it != p.axes.end(); ++it) row.push_back(axis_value_str(it.value()));
    row.push_back(fmt::format("{}", v.extra["elements"].get<uint64_t>()));
    if (dry) {
      row.insert(row.end(), 11, "-");
    } else {
      std::string ratio;
      const auto it7 = r7.find(key_without_rounds(p.axes));
      if (it7 != r7.end()) {
        const double r = v.stats.median / it7->second;
        ratio = fmt_num(r);
        json rj = p.axes;
        rj["ratio_to_r7"] = r;
        ratios.push_back(rj);
      }
      row.insert(row.end(), {fmt_num(v.stats.median * 1e6), fmt_num(v.stats.rel_stdev * 100), std::to_string(v.stats.samples),
                             fmt_num(v.derived["gelem_s"].get<double>()), fmt_num(v.derived["gb_s"].get<double>()),
                             fmt::format("{:.5f}", v.extra["keep_effective"].get<double>()),
                             fmt::format("{:.5f}", v.extra["keep_sampled"].get<double>()),
                             fmt::format("{:.1f}", v.extra["keep_z"].get<double>()), ratio});
      const VariantResult* vc = p.variants.size() > 1 ? &p.variants[1] : nullptr;
      row.push_back(vc && vc->derived.contains("gelem_s") ? fmt_num(vc->derived["gelem_s"].get<double>()) : "");
      row.push_back(v.derived.contains("ceiling_fraction") ? fmt_num(100 * v.derived["ceiling_fraction"].get<double>()) : "");
    }
    table.rows.push_back(row);
  }
  return table;
}

// The mask of the batch's B x Hq attention matrices, SQ x SQ each, in the workload's layout.
RngMaskParams attention_matrix_mask(const Workload& w, const Threshold& thr) {
  RngMaskParams rp = rng_mask_params(w, thr, parse_mask_layout(w.layout));
  rp.geo = MaskGeometry{static_cast<uint32_t>(w.batch * w.q_heads), static_cast<uint32_t>(w.sq),
                        static_cast<uint32_t>(w.sq), w.causal};
  rp.elements = static_cast<uint64_t>(w.batch * w.q_heads) * w.sq * w.sq;
  return rp;
}

VariantResult rng_variant(const RngMaskParams& rp, const Threshold& thr, const Measurement& m, double generated,
                          size_t bytes) {
  VariantResult v = variant_of("rng", m);
  v.extra["elements"] = rp.elements;
  v.extra["elements_generated"] = generated;
  v.extra["mask_bytes"] = bytes;
  v.extra["drop_threshold"] = thr.drop;
  v.extra["p_requested"] = thr.p_requested;
  v.extra["keep_effective"] = thr.keep_effective;
  v.extra["p_error"] = thr.p_error;
  v.extra["scale"] = thr.scale;
  return v;
}

// The keep rate actually sampled: zero the mask (causal tiles stay zero), generate once, count.
double sample_keep_rate(const RngMaskParams& rp, DeviceBuffer& mask, DeviceBuffer& counter, size_t bytes,
                        cudaStream_t st) {
  DB_CUDA(cudaMemsetAsync(mask.get(), 0, bytes, st));
  DB_CUDA(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), st));
  launch_rng_mask(rp, st);
  launch_count_keep(mask.get(), count_items(rp), count_kind(rp.layout), counter.get<unsigned long long>(), st);
  unsigned long long kept = 0;
  DB_CUDA(cudaMemcpyAsync(&kept, counter.get(), sizeof kept, cudaMemcpyDeviceToHost, st));
  DB_CUDA(cudaStreamSynchronize(st));
  return kept / counted_elements(rp);
}

// The ceiling kernel making at least `calls` Philox calls (none in a dry run), its output in `out`.
PhiloxCeilingParams ceiling_params(const Workload& w, double calls, DeviceBuffer& out, bool dry) {
  PhiloxCeilingParams cp;
  cp.rounds = static_cast<int>(w.rounds);
  cp.seed = w.seed;
  if (dry) return cp;
  cp.calls_per_thread = philox_ceiling_calls_per_thread(cp, static_cast<uint64_t>(calls));
  out.reserve(philox_ceiling_threads(cp) * sizeof(uint32_t));
  cp.out = out.get<uint32_t>();
  return cp;
}

// The Philox ceiling's result (mc: its measurement).
VariantResult ceiling_variant(const PhiloxCeilingParams& cp, uint64_t ceiling_calls, double per_call,
                              const Measurement& mc, bool dry) {
  VariantResult vc = variant_of("ceiling", mc);
  vc.extra["calls"] = ceiling_calls;
  vc.extra["elements_per_call"] = per_call;
  if (dry) return vc;
  vc.extra["grid"] = philox_ceiling_grid(cp);
  vc.extra["block"] = cp.block;
  vc.extra["calls_per_thread"] = cp.calls_per_thread;
  vc.derived["gcalls_s"] = ceiling_calls / mc.total.median / 1e9;
  vc.derived["gelem_s"] = ceiling_calls * per_call / mc.total.median / 1e9;
  return vc;
}

// The RNG kernel's fraction of the ceiling's elements/s, with its paired interval: elements/s over elements/s =
// k x (ceiling time / RNG time), k = generated / ceiling elements. rng, m: the RNG kernel's result and measurement;
// ceiling, mc: the ceiling's, measured in the same group.
void add_ceiling_fraction(VariantResult& rng, const Measurement& m, const VariantResult& ceiling,
                          const Measurement& mc, double k) {
  rng.derived["ceiling_fraction"] =
      rng.derived["gelem_s"].get<double>() / ceiling.derived.at("gelem_s").get<double>();
  const Interval ci = bootstrap_ratio(mc.series, m.series);
  rng.derived["ceiling_fraction_ci"] = ci.valid ? json::array({ci.low * k, ci.high * k}) : json();
}

int run_rng(RunContext& ctx) {
  const std::vector<std::string> axes = {"sq", "causal", "rounds", "threshold_bits", "layout"};
  const std::map<std::string, std::vector<json>> defaults = {
      {"rounds", std::vector<json>(std::begin(kPhiloxRounds), std::end(kPhiloxRounds))},
      {"threshold_bits", std::vector<json>(std::begin(kThresholdBits), std::end(kThresholdBits))},
      {"layout", std::vector<json>(std::begin(kMaskLayoutNames), std::end(kMaskLayoutNames))}};
  const auto points = expand_sweep(ctx.cfg, axes, defaults);
  const bool dry = ctx.opts.dry_run;
  // Sizes past 2^64 bytes are refused before anything runs (one line naming the field).
  for (const SweepPoint& pt : points) rng_memory(pt.workload, "sweep point " + pt.axes.dump() + ": ");
  const PlanDevice dev = dry ? plan_device(ctx.opts) : PlanDevice{};
  const std::optional<Estimator> model = dry ? std::make_optional<Estimator>(ctx.opts) : std::nullopt;

  SweepSession session(ctx, "rng", points);
  DeviceBuffer mask, counter, ceiling_out;
  if (!dry) counter.resize(sizeof(unsigned long long));
  for (const SweepPoint& pt : points) {
    const std::string label = axes_label(pt.axes);
    if (!session.begin(pt, label)) continue;  // another shard's point, or kept from --resume
    NvtxRange point_range("point " + label);
    const Workload& w = pt.workload;
    const Threshold thr = make_threshold(w.dropout_p, static_cast<int>(w.threshold_bits));
    RngMaskParams rp = attention_matrix_mask(w, thr);
    const MemoryPlan mem = rng_memory(w);
    const size_t bytes = mem.bytes("mask");
    const double generated = static_cast<double>(mask_elements_generated(rp));

    PointResult pr;
    pr.index = pt.index;
    pr.axes = pt.axes;
    pr.workload = to_json(w);
    if (mem.need() > (dry ? dev.bytes : device_free_bytes() + mask.size() + counter.size())) {
      const std::string why =
          fmt::format("mask needs {:.1f} GiB, more than the free device memory", bytes / double(1ull << 30));
      session.report.add_skipped({pt.axes, why, kNoIndex, dry ? plan_json(mem, dev, false, why) : json()});
      continue;
    }
    if (dry) pr.derived["plan"] = plan_json(mem, dev, true);
    if (!dry) mask.reserve(bytes);
    rp.out = mask.get();

    // The ceiling: as many Philox calls as the mask needs, nothing else (E elements per call).
    const double per_call = 128.0 / static_cast<double>(w.threshold_bits);
    const PhiloxCeilingParams cp = ceiling_params(w, generated / per_call, ceiling_out, dry);
    const uint64_t ceiling_calls = dry ? 0 : philox_ceiling_calls(cp);
    const std::vector<Measurement> ms = session.harness.measure_group(
        {{"rng", [&](Sample& s) {
            NvtxRange vr("variant rng");
            s.phase("gen", [&] { launch_rng_mask(rp, s.stream); });
          }},
         {"ceiling", [&](Sample& s) {
            NvtxRange vr("variant ceiling");
            s.phase("ceiling", [&] { launch_philox_ceiling(cp, s.stream); });
          }}});
    const Measurement& m = ms[0];
    VariantResult v = rng_variant(rp, thr, m, generated, bytes);
    if (dry) put_estimate(v.derived, v.extra, model->rng(w, w.layout));
    if (!dry) {
      const double kept = sample_keep_rate(rp, mask, counter, bytes, session.harness.stream());
      v.extra["keep_sampled"] = kept;
      v.extra["keep_z"] = binomial_z(kept, thr.keep_effective, counted_elements(rp));
      v.derived["gelem_s"] = generated / m.total.median / 1e9;
      v.derived["gb_s"] = bytes / m.total.median / 1e9;
    }
    const VariantResult vc = ceiling_variant(cp, ceiling_calls, per_call, ms[1], dry);
    if (!dry) add_ceiling_fraction(v, m, vc, ms[1], generated / (ceiling_calls * per_call));
    pr.variants.push_back(v);
    pr.variants.push_back(vc);
    session.report.add_point(pr);
  }

  json ratios = json::array();
  const Table table = rng_table(session.report.points(), points.empty() ? json() : points[0].axes, dry, ratios);
  json summary;
  summary["ratios_to_r7"] = ratios;
  session.finish(summary, dry ? dry_plan_table(session.report) : table);
  return 0;
}

}  // namespace

Command make_rng_command() {
  Command c;
  c.name = "rng";
  c.summary = "Benchmark the Philox mask kernel: rounds, threshold width, layout, size";
  c.help =
      "Generates keep masks for B x Hq x SQ x SQ attention probabilities with Philox4x32-R and the dropbench\n"
      "counter scheme (docs/rng-scheme.md). Default sweep (unless the config sweeps these axes):\n"
      "  rounds " + fmt::format("{}", fmt::join(kPhiloxRounds, ",")) + "  x  threshold_bits " +
      fmt::format("{}", fmt::join(kThresholdBits, ",")) + "  x  layout " + fmt::format("{}", fmt::join(kMaskLayoutNames, ",")) +
      "   at workload.sq\n"
      "Columns: Gelem/s (elements sampled per second), GB/s (mask bytes written), keep_eff (the keep probability\n"
      "the quantised threshold implies), keep_sampled (counted in the generated mask) and its z-score, R/R7\n"
      "(runtime of R rounds over R = 7, the paper's Philox-5/7 and 3/7 ratios), ceiling_Gelem/s (variant `ceiling`:\n"
      "the same number of Philox-R calls in a compute-only loop, measured interleaved with the point) and %ceiling\n"
      "(Gelem/s over it; derived.ceiling_fraction, with ceiling_fraction_ci).\n"
      "Examples:\n"
      "  dropbench rng --set workload.sq=8192 --set sweep.layout=[tile] -o rng.json\n"
      "  dropbench rng --config configs/llama3-8b.json --set sweep.threshold_bits=[8]";
  c.run = run_rng;
  return c;
}

}  // namespace dropbench
