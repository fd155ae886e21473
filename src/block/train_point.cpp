#include "src/block/train_point.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "src/block/run_figures.hpp"
#include "src/core/energy.hpp"
#include "src/core/print.hpp"

namespace dropbench {

namespace {

// The strategies whose forward's RNG runs beside the QKV GEMM (fused-write's mask comes from its attention).
bool rng_in_forward(Pipeline p) { return p == Pipeline::Stored || p == Pipeline::RegenOverlap; }

// The RNG alone in the configuration the overlaps run, named as the forward's mechanisms name it: the standard
// kernel (alone:rng) for plain, else that mechanism's RNG alone (a co-resident kernel's time is not the standard's).
std::string rng_alone_name(const RngConfig& rc) { return rc.name == "plain" ? "alone:rng" : "alone:rng:" + rc.name; }

// Group 1: the pieces alone and the overlaps the plan's strategies run.
std::vector<Candidate> piece_candidates(TrainRunner& tr, const RngConfig& rc, bool fwd_overlap, bool bwd_overlap) {
  BlockRunner& b = tr.block();
  std::vector<Candidate> c;
  c.push_back({"alone:gemm", [&b](Sample& s) { s.phase("gemm", [&] { b.gemm().run(s.stream); }); }});
  if (fwd_overlap || bwd_overlap) {
    if (rc.name == "plain")
      c.push_back({rng_alone_name(rc), [&b](Sample& s) { b.rng_static(s.stream, hook(s)); }});
    else
      c.push_back({rng_alone_name(rc), [&b, &rc](Sample& s) { b.rng_alone(rc, s.stream, hook(s)); }});
  }
  if (bwd_overlap) c.push_back({"alone:gemm-out-bwd", [&tr](Sample& s) { tr.out_backward(s.stream, hook(s)); }});
  if (fwd_overlap)
    c.push_back({"overlap:fwd", [&b, &rc](Sample& s) { b.overlap_phase(b.gemm(), rc, s.stream, hook(s)); }});
  if (bwd_overlap)
    c.push_back({"overlap:bwd", [&tr, &rc](Sample& s) { tr.out_backward_with_rng(rc, s.stream, hook(s)); }});
  return c;
}

// The hidden fraction of one overlap (piece || RNG) with its paired interval, and the energy bound from the two
// pieces' power passes: (T_piece + T_rng - T_overlap) / min(T_piece, T_rng), docs/run.md.
json overlap_figure(PointScope& ps, const std::map<std::string, Measurement>& m, const std::string& piece,
                    const std::string& rng, const std::string& over) {
  const Measurement &mp = m.at(piece), &mr = m.at(rng), &mo = m.at(over);
  json j;
  j["pieces"] = {piece, rng, over};
  j["hidden"] = hidden_fraction(mp.total.median, mr.total.median, mo.total.median);
  ps.book.figure({piece, rng, over}, hidden_fraction_of).write(j, "hidden");
  j["saved_us"] = (mp.total.median + mr.total.median - mo.total.median) * 1e6;
  if (ps.harness.power_on()) {
    const EnergyBound b = energy_bound({power_figure(mp.power, "time_per_iter_s"), power_figure(mp.power, "mean_w"),
                                        power_figure(mr.power, "time_per_iter_s"), power_figure(mr.power, "mean_w"),
                                        ps.harness.cap_w(), ps.harness.idle_w()});
    j["hidden_energy_bound"] = b.max_hidden;
    j["energy_bound"] = to_json(b);
  }
  return j;
}

std::vector<Candidate> attention_candidates(TrainRunner& tr, const std::vector<AttentionAlone>& plan) {
  std::vector<Candidate> c;
  for (const AttentionAlone& a : plan) {
    const DropoutMode m = a.mode;
    if (a.backward)
      c.push_back({a.variant, [&tr, m](Sample& s) { tr.attention_backward(m, s.stream, hook(s), false); }});
    else
      c.push_back({a.variant, [&tr, m](Sample& s) {
                     s.phase("attention", [&] { tr.block().attention_full(m, s.stream); });
                   }});
  }
  return c;
}

// A measurement's phase `name` (its events, as the step times it), or nullptr.
const Stats* phase_stats(const Measurement& m, const std::string& name) {
  for (const auto& [n, st] : m.phases)
    if (n == name) return &st;
  return nullptr;
}

// The in-step time of a's phase over the same phase alone (both timed by their events, so the launch before the
// first kernel of a sample counts in neither), with both groups' clocks: what the step's power state costs it.
json attention_in_step(const AttentionAlone& a, const Measurement& alone, const Measurement& strategy) {
  json j = {{"strategy", a.strategy}, {"phase", a.phase}, {"alone_clock_mhz", alone.total.mean_clock_mhz},
            {"step_clock_mhz", strategy.total.mean_clock_mhz}};
  const Stats *in = phase_stats(strategy, a.phase), *out = phase_stats(alone, a.phase);
  if (out) j["alone_us"] = out->median * 1e6;
  if (in) j["in_step_us"] = in->median * 1e6;
  if (in && out && out->median > 0) j["x_alone"] = in->median / out->median;
  if (const double sus = power_figure(alone.power, "time_per_iter_s"); std::isfinite(sus))
    j["alone_sustained_us"] = sus * 1e6;
  return j;
}

// One strategy's validation run: poisoned gradients, deterministic dQ, compared with the first strategy's. O and LSE
// are poisoned and the mask zeroed too, so a strategy whose forward left them unwritten cannot pass on the bits an
// earlier strategy left there.
void check_strategy(PointScope& ps, TrainRunner& tr, Pipeline p, const RngConfig& rc, std::string& ref, json& ex) {
  const cudaStream_t main = ps.harness.stream();
  tr.block().poison_outputs(main);
  tr.poison_gradients(main);
  tr.run(p, main, no_phases(), rc, /*deterministic=*/true, /*check=*/true);
  DB_CUDA(cudaStreamSynchronize(main));
  const TrainRunner::GradientSums cs = tr.checksums(main);
  ex["checksums"] = {
      {"dqkv", hex64(cs.dqkv)}, {"dx", hex64(cs.dx)}, {"dw", hex64(cs.dw)}, {"dw_out", hex64(cs.dw_out)}};
  if (ref.empty()) {
    // The later strategies are compared with this one, so an element no kernel wrote (poison in all of them) is
    // caught here.
    const TrainRunner::GradientDiff u = tr.unwritten(main);
    ex["words_unwritten"] = {{"dqkv", u.dqkv}, {"dx", u.dx}, {"dw", u.dw}, {"dw_out", u.dw_out}};
    if (u.total() != 0) {
      print_stderr("dropbench: ERROR: strategy {} left gradient words unwritten at {}: dQKV {}, dX {}, dW {}, dW_o {}\n",
                   pipeline_name(p), ps.label, u.dqkv, u.dx, u.dw, u.dw_out);
      ++ps.counters.mismatches;
    }
    tr.keep_reference(main);
    ref = pipeline_name(p);
    ex["bitwise_equal"] = true;
    ex["reference"] = true;
    return;
  }
  const TrainRunner::GradientDiff d = tr.diff_reference(main);
  ex["bitwise_equal"] = d.total() == 0;
  ex["words_differing"] = {{"dqkv", d.dqkv}, {"dx", d.dx}, {"dw", d.dw}, {"dw_out", d.dw_out}};
  ex["compared_with"] = ref;
  if (d.total() != 0) {
    print_stderr("dropbench: ERROR: strategy {}'s gradients differ from {}'s at {}: dQKV {}, dX {}, dW {}, dW_o {} "
                 "words\n",
                 pipeline_name(p), ref, ps.label, d.dqkv, d.dx, d.dw, d.dw_out);
    ++ps.counters.mismatches;
  }
}

// The strategies' variants from group 2 and the point's figures: winners by time, energy and sustained time.
std::map<std::string, double> strategy_variants(PointScope& ps, TrainRunner& tr,
                                                const std::map<std::string, Measurement>& m, std::vector<json>& extras,
                                                json& measured) {
  std::map<std::string, double> t;
  std::map<std::string, double> energy;
  for (size_t i = 0; i < ps.plan.run.size(); ++i) {
    const std::string name = pipeline_name(ps.plan.run[i]);
    VariantResult v = variant_of(name, m.at(name));
    t[name] = v.stats.median;
    if (v.stats.median > 0) v.derived["tflops"] = tr.flops() / v.stats.median / 1e12;
    v.extra = std::move(extras[i]);
    const double e = put_variant_energy(v);
    if (std::isfinite(e)) energy[name] = e;
    ps.pr.variants.push_back(std::move(v));
  }
  if (t.count("fused"))
    for (VariantResult& v : ps.pr.variants)
      if (t.count(v.name) && v.name != "fused" && t.at("fused") > 0) {
        v.derived["x_fused"] = v.stats.median / t.at("fused");
        ps.book.ratio(v.name, "fused").write(v.derived, "x_fused");
      }
  auto least = [](const std::map<std::string, double>& x) {
    std::string best;
    for (const auto& [n, s] : x)
      if (s > 0 && (best.empty() || s < x.at(best))) best = n;
    return best;
  };
  measured["t"] = t;
  measured["winner"] = least(t);
  if (!energy.empty()) {
    measured["energy_mj"] = energy;
    measured["energy_winner"] = least(energy);
  }
  sustained_figures(ps.pr.variants, t, measured);
  return t;
}

}  // namespace

std::vector<AttentionAlone> attention_alone_plan(const std::vector<Pipeline>& run) {
  std::vector<AttentionAlone> out;
  auto add = [&out](AttentionAlone a) {
    for (const AttentionAlone& x : out)
      if (x.variant == a.variant) return;
    out.push_back(std::move(a));
  };
  for (Pipeline p : run) {
    const std::string s = pipeline_name(p);
    const DropoutMode f = train_forward_mode(p), b = train_backward_mode(p);
    if (p != Pipeline::FusedWrite)
      add({std::string("alone:attention-") + dropout_mode_name(f), "attention", s, f, false});
    add({std::string("alone:attention-bwd-") + dropout_mode_name(b), "attention-bwd", s, b, true});
  }
  return out;
}

std::map<std::string, double> measure_train_point(PointScope& ps, TrainRunner& tr, const RngConfig& rc) {
  bool fwd_overlap = false, bwd_overlap = false;
  for (Pipeline p : ps.plan.run) {
    fwd_overlap = fwd_overlap || rng_in_forward(p);
    bwd_overlap = bwd_overlap || p == Pipeline::RegenOverlap;
  }
  json measured = {{"flops", tr.flops()},
                   {"dq_mode_timed", "fast (fp32 reduce-adds in any order)"},
                   {"dq_mode_checked", "deterministic"},
                   {"gemm_dtype", tr.fp8() ? "fp8 (e4m3 forward, e5m2 gradients)" : "bf16"},
                   {"rng", rc.to_json()}};

  // Group 1: the pieces and the overlaps.
  const std::map<std::string, Measurement> pieces =
      ps.measure_group(piece_candidates(tr, rc, fwd_overlap, bwd_overlap));
  for (const auto& [name, m] : pieces) {
    VariantResult v = variant_of(name, m);
    put_variant_energy(v);
    ps.pr.variants.push_back(std::move(v));
  }
  if (fwd_overlap)
    measured["overlap_fwd"] = overlap_figure(ps, pieces, "alone:gemm", rng_alone_name(rc), "overlap:fwd");
  if (bwd_overlap)
    measured["overlap_bwd"] = overlap_figure(ps, pieces, "alone:gemm-out-bwd", rng_alone_name(rc), "overlap:bwd");

  // Group 2: the strategies, each checked first (deterministic dQ), then timed (fast dQ).
  std::vector<json> extras;
  std::vector<Candidate> group;
  std::string ref;
  for (Pipeline p : ps.plan.run) {
    json ex = {{"mask_bytes", pipeline_spec(p).train_mask != MaskLife::None ? tr.block().full_mask_bytes() : 0},
               {"bwd_kernel", tr.attention_backward_kernel(train_backward_mode(p))},
               {"attention_kernel", tr.block().attention_kernel_name(train_forward_mode(p))}};
    if (!ps.opts.no_validate) check_strategy(ps, tr, p, rc, ref, ex);
    extras.push_back(std::move(ex));
    group.push_back({pipeline_name(p), [&tr, p, &rc](Sample& s) { tr.run(p, s.stream, hook(s), rc, false); }});
  }
  const std::map<std::string, Measurement> m = ps.measure_group(group);
  std::map<std::string, double> t = strategy_variants(ps, tr, m, extras, measured);

  // Group 3: the attention kernels alone.
  const std::vector<AttentionAlone> ap = attention_alone_plan(ps.plan.run);
  const std::map<std::string, Measurement> alone = ps.measure_group(attention_candidates(tr, ap));
  for (const AttentionAlone& a : ap) {
    VariantResult v = variant_of(a.variant, alone.at(a.variant));
    const double flops = tr.block().attention_flops() * (a.backward ? kAttentionBwdFlopRatio : 1.0);
    if (v.stats.median > 0) v.derived["tflops"] = flops / v.stats.median / 1e12;
    v.extra["kernel"] = a.backward ? tr.attention_backward_kernel(a.mode) : tr.block().attention_kernel_name(a.mode);
    put_variant_energy(v);
    ps.pr.variants.push_back(std::move(v));
    measured["attention_in_step"][a.variant] = attention_in_step(a, alone.at(a.variant), m.at(a.strategy));
  }
  ps.pr.derived["train"]["measured"] = std::move(measured);
  return t;
}

}  // namespace dropbench
