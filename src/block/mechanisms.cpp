#include "src/block/mechanisms.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "kernels/common/check.hpp"

namespace dropbench {

const std::vector<FixedMechanism>& fixed_mechanisms() {
  static const std::vector<FixedMechanism> list = [] {
    std::vector<FixedMechanism> l = {{rng_plain(), "two streams, RNG enqueued after the GEMM"},
                                     {rng_priority(), "d: RNG on the highest-priority stream, after the GEMM"}};
    for (int warps : {1, 2, 4})
      l.push_back({rng_coresident(warps),
                   "a: persistent co-resident RNG (<= 32 regs, no smem, launched first) + finisher"});
    return l;
  }();
  return list;
}

const FixedMechanism* find_fixed_mechanism(const std::string& name) {
  for (const FixedMechanism& m : fixed_mechanisms())
    if (m.rc.name == name) return &m;
  return nullptr;
}

std::string overlap_rng_choices() {
  std::string s = "auto";
  for (const FixedMechanism& m : fixed_mechanisms()) s += ", " + m.rc.name;
  return s;
}

namespace {

// The bits every mechanism must reproduce: QKV from the pipelines' GEMM, the mask from the standard kernel.
struct MechanismRefs {
  uint64_t qkv = 0, mask = 0;
  std::map<std::string, double> rng_alone;  // RNG configuration name -> alone median (s)
};

// Runs `rc` beside GEMM `g` once (bits checked), then measures it joined, and its RNG alone (once per name).
Mech evaluate(PointScope& ps, const AloneTimes& alone, MechanismRefs& refs, const RngConfig& rc, QkvGemm& g,
              bool default_gemm, double t_g_mech, const std::string& mechanism, const std::string& vname) {
  BlockRunner& runner = ps.runner;
  const cudaStream_t main = ps.harness.stream();
  const double t_g = alone.gemm(), t_r = alone.rng();
  Mech m;
  m.rc = rc;
  m.mechanism = mechanism;
  runner.poison_outputs(main);
  runner.overlap_phase(g, rc, main, no_phases());
  DB_CUDA(cudaStreamSynchronize(main));
  const BlockRunner::WorkStats ws = runner.work_stats(main);
  const bool y_eq = runner.checksum(runner.qkv(), runner.qkv_bytes(), main) == refs.qkv;
  const bool mask_eq = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main) == refs.mask;
  m.over = ps.measure(vname, [&](Sample& s) { runner.overlap_phase(g, rc, s.stream, hook(s)); });
  if (!refs.rng_alone.count(rc.name))
    refs.rng_alone[rc.name] = rc.name == "plain" ? t_r : ps.measure("alone:rng:" + rc.name, [&](Sample& s) {
                                                           runner.rng_alone(rc, s.stream, hook(s));
                                                         }).total.median;
  m.t_rng = refs.rng_alone[rc.name];
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
    fmt::print(stderr, "dropbench: WARNING: mechanism {} wrote a different mask at {}\n", rc.name, ps.label);
    ++ps.counters.mismatches;
  }
  return m;
}

// (c) spatial partition: the GEMM on sms - k SMs (SM_COUNT_TARGET), the RNG pinned to k SMs. k in proportion to
// the RNG's share of the serial time (x 0.5, 1, 1.5): the GEMM runs power-capped, so it loses less than
// (sms - k) / sms of its speed, and a larger k can balance better.
void explore_partition(PointScope& ps, const AloneTimes& alone, MechanismRefs& refs, std::vector<Mech>& mechs) {
  BlockRunner& runner = ps.runner;
  std::vector<int> ks;
  for (double scale : {1.0, 0.5, 1.5}) {
    const int k = partition_rng_sms(runner.sms(), alone.gemm(), alone.rng(), scale);
    if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  for (int k : ks) {
    GemmOptions go = runner.gemm_options();
    go.top_k = 1;
    go.sm_count_target = runner.sms() - k;
    auto gp = runner.make_gemm(go);
    const double tg = ps.measure("alone:gemm:sm" + std::to_string(runner.sms() - k), [&](Sample& s) {
                        s.phase("gemm", [&] { gp->run(s.stream); });
                      }).total.median;
    Mech m = evaluate(ps, alone, refs, rng_partition(k), *gp, false, tg,
                      "c: spatial partition (GEMM SM_COUNT_TARGET, RNG pinned to the other SMs) + finisher",
                      "mech:" + rng_partition(k).name);
    m.extra["gemm_alone"] = tg;
    mechs.push_back(std::move(m));
  }
}

// (b) the cuBLASLt heuristic candidate that overlaps best with `partner` (the fastest mechanism so far).
void explore_algo(PointScope& ps, const AloneTimes& alone, MechanismRefs& refs, const RngConfig& partner,
                  std::vector<Mech>& mechs) {
  BlockRunner& runner = ps.runner;
  if (ps.opts.top_k <= 1 || runner.gemm().candidates().size() <= 1) return;
  auto gb = runner.make_gemm(runner.gemm_options());
  json cands = json::array();
  std::optional<Mech> best;
  for (size_t i = 0; i < gb->candidates().size(); ++i) {
    try {
      gb->select(i);
    } catch (const UsageError&) {
      continue;
    }
    const double tg = ps.measure(fmt::format("alone:gemm:cand{}", i), [&](Sample& s) {
                        s.phase("gemm", [&] { gb->run(s.stream); });
                      }).total.median;
    Mech m = evaluate(ps, alone, refs, partner, *gb, false, tg,
                      "b: the cuBLASLt candidate that overlaps best (with the fastest mechanism above, " + partner.name +
                          ")",
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

}  // namespace

std::vector<Mech> explore_mechanisms(PointScope& ps, const AloneTimes& alone) {
  std::vector<Mech> mechs;
  const auto& run = ps.plan.run;
  const bool want_overlap =
      std::any_of(run.begin(), run.end(), [](Pipeline p) { return p == Pipeline::Overlap || p == Pipeline::Chunked; });
  if (!want_overlap || !ps.plan.needs_full_mask || ps.opts.no_explore) return mechs;
  BlockRunner& runner = ps.runner;
  const cudaStream_t main = ps.harness.stream();
  // Reference bits: QKV from the pipelines' GEMM, the mask from the standard kernel (mask zeroed first).
  MechanismRefs refs;
  runner.gemm().run(main);
  refs.qkv = runner.checksum(runner.qkv(), runner.qkv_bytes(), main);
  runner.poison_outputs(main);
  runner.rng_static(main, no_phases());
  refs.mask = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main);

  for (const FixedMechanism& f : fixed_mechanisms())
    mechs.push_back(evaluate(ps, alone, refs, f.rc, runner.gemm(), true, alone.gemm(), f.description, "mech:" + f.rc.name));
  // The partner of the GEMM-candidate scan: the fastest mechanism so far (all use the default GEMM).
  size_t partner = 0;
  for (size_t i = 1; i < mechs.size(); ++i)
    if (mechs[i].over.total.median < mechs[partner].over.total.median) partner = i;
  const RngConfig cores = mechs[partner].rc;
  explore_partition(ps, alone, refs, mechs);
  explore_algo(ps, alone, refs, cores, mechs);
  return mechs;
}

OverlapChoice choose_overlap_rng(const RunOptions& o, const std::vector<Mech>& mechs) {
  // Without exploration: the plain second stream, the mechanism that hid the most on the H200 presets (the
  // co-resident kernels launched first delay cuBLASLt's GEMM: overlap/baseline 0.61-0.69x with coresident-w1).
  OverlapChoice c{rng_plain(), "default (no exploration)"};
  if (o.overlap_rng != "auto") {
    if (const FixedMechanism* f = find_fixed_mechanism(o.overlap_rng)) c.rc = f->rc;
    c.why = "--overlap-rng";
    return c;
  }
  const Mech* best = nullptr;
  for (const Mech& m : mechs)
    if (m.eligible && (!best || m.over.total.median < best->over.total.median)) best = &m;
  if (best) {
    c.rc = best->rc;
    c.why = "fastest eligible mechanism of this point";
  }
  return c;
}

MechanismFigures add_mechanism_variants(PointScope& ps, const std::vector<Mech>& mechs, const AloneTimes& alone) {
  MechanismFigures f;
  for (const Mech& m : mechs) {
    VariantResult v = variant_of("mech:" + m.rc.name, m.over);
    v.derived["hidden"] = m.hidden;
    v.derived["hidden_self"] = m.hidden_self;
    v.derived["saved_us"] = (alone.gemm() + alone.rng() - m.over.total.median) * 1e6;
    v.extra = m.extra;
    v.extra["mechanism"] = m.mechanism;
    v.extra["gemm_alone"] = m.t_gemm;
    v.extra["rng_alone"] = m.t_rng;
    v.extra["eligible_for_pipelines"] = m.eligible;
    if (m.extra.contains("coresident_share")) v.derived["coresident_share"] = m.extra["coresident_share"];
    ps.pr.variants.push_back(std::move(v));
    f.hidden_by[m.rc.name] = m.hidden;
    if (std::isfinite(m.hidden) && (!f.best || m.hidden > f.best->hidden)) f.best = &m;
  }
  return f;
}

}  // namespace dropbench
