#include "src/block/mechanisms.hpp"
#include "src/core/print.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/core/energy.hpp"

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

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

MechanismExplorer::MechanismExplorer(PointScope& ps) : ps_(ps) {
  const auto& run = ps.plan.run;
  const bool want_overlap =
      std::any_of(run.begin(), run.end(), [](Pipeline p) { return p == Pipeline::Overlap || p == Pipeline::Chunked; });
  active_ = want_overlap && ps.plan.needs_full_mask && !ps.opts.no_explore;
  if (!active_) return;
  BlockRunner& runner = ps.runner;
  const cudaStream_t main = ps.harness.stream();
  // Reference bits: QKV from the pipelines' GEMM, the mask from the standard kernel (outputs poisoned first).
  runner.gemm().run(main);
  ref_qkv_ = runner.checksum(runner.qkv(), runner.qkv_bytes(), main);
  runner.poison_outputs(main);
  runner.rng_static(main, no_phases());
  ref_mask_ = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main);
}

// Runs `rc` beside GEMM `g` once on poisoned outputs and checks QKV and the mask against the references.
Mech MechanismExplorer::prepare(const RngConfig& rc, QkvGemm& g, bool default_gemm, const std::string& mechanism,
                                const std::string& vname, const std::string& gemm_name) {
  BlockRunner& runner = ps_.runner;
  const cudaStream_t main = ps_.harness.stream();
  Mech m;
  m.rc = rc;
  m.mechanism = mechanism;
  m.vname = vname;
  m.gemm_name = gemm_name;
  // The first group measures the standard RNG alone as the piece alone:rng; a scan group measures its own
  // (alone:rng:plain for the plain partner), so hidden_self pairs within the scan.
  m.rng_name = rc.name == "plain" && default_gemm ? "alone:rng" : "alone:rng:" + rc.name;
  m.gemm = &g;
  runner.poison_outputs(main);
  runner.overlap_phase(g, rc, main, no_phases());
  DB_CUDA(cudaStreamSynchronize(main));
  const BlockRunner::WorkStats ws = runner.work_stats(main);
  const bool y_eq = runner.checksum(runner.qkv(), runner.qkv_bytes(), main) == ref_qkv_;
  const bool mask_eq = runner.checksum(runner.full_mask(), runner.full_mask_bytes(), main) == ref_mask_;
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
    print_stderr("dropbench: WARNING: mechanism {} wrote a different mask at {}\n", rc.name, ps_.label);
    ++ps_.counters.mismatches;
  }
  return m;
}

namespace {

// The candidates of one mechanism: joined GEMM || RNG, and its RNG alone unless that is already in `group` (or
// is the first group's piece alone:rng).
void add_mech_candidates(BlockRunner& runner, const Mech& m, std::vector<Candidate>& group) {
  QkvGemm* g = m.gemm;
  const RngConfig rc = m.rc;
  group.push_back({m.vname, [&runner, g, rc](Sample& s) { runner.overlap_phase(*g, rc, s.stream, hook(s)); }});
  const bool have = std::any_of(group.begin(), group.end(), [&](const Candidate& c) { return c.name == m.rng_name; });
  if (!have && m.rng_name != "alone:rng")
    group.push_back({m.rng_name, [&runner, rc](Sample& s) { runner.rng_alone(rc, s.stream, hook(s)); }});
}

}  // namespace

std::vector<Candidate> MechanismExplorer::fixed_candidates() {
  std::vector<Candidate> group;
  if (!active_) return group;
  for (const FixedMechanism& f : fixed_mechanisms()) {
    mechs_.push_back(prepare(f.rc, ps_.runner.gemm(), true, f.description, "mech:" + f.rc.name, "alone:gemm"));
    add_mech_candidates(ps_.runner, mechs_.back(), group);
  }
  return group;
}

// The hidden fractions and their intervals: paired where the variants share a group (the book knows).
void MechanismExplorer::figures(Mech& m, const std::map<std::string, Measurement>& measured, const AloneTimes& alone) {
  m.over = measured.at(m.vname);
  auto med = [&](const std::string& n) {
    auto it = measured.find(n);
    if (it != measured.end()) return it->second.total.median;
    if (n == "alone:gemm") return alone.gemm();
    if (n == "alone:rng") return alone.rng();
    return 0.0;
  };
  m.t_gemm = med(m.gemm_name);
  m.t_rng = med(m.rng_name);
  const double t_g = alone.gemm(), t_r = alone.rng(), t_o = m.over.total.median;
  // A time without samples (NaN in the report) leaves the fraction undefined rather than 0.
  const bool have = t_g > 0 && t_r > 0 && t_o > 0;
  m.hidden = have ? hidden_fraction(t_g, t_r, t_o) : kNaN;
  m.hidden_self = have && m.t_gemm > 0 && m.t_rng > 0 ? hidden_fraction(m.t_gemm, m.t_rng, t_o) : kNaN;
  m.hidden_ci = ps_.book.figure({"alone:gemm", "alone:rng", m.vname}, hidden_fraction_of);
  m.hidden_self_ci = ps_.book.figure({m.gemm_name, m.rng_name, m.vname}, hidden_fraction_of);
}

// (c) spatial partition: the GEMM on sms - k SMs (SM_COUNT_TARGET), the RNG pinned to k SMs. k in proportion to
// the RNG's share of the serial time (x 0.5, 1, 1.5): the GEMM runs power-capped, so it loses less than
// (sms - k) / sms of its speed, and a larger k can balance better.
void MechanismExplorer::explore_partition(const AloneTimes& alone) {
  BlockRunner& runner = ps_.runner;
  std::vector<int> ks;
  for (double scale : {1.0, 0.5, 1.5}) {
    const int k = partition_rng_sms(runner.sms(), alone.gemm(), alone.rng(), scale);
    if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  std::vector<Candidate> group;
  const size_t first = mechs_.size();
  for (int k : ks) {
    GemmOptions go = runner.gemm_options();
    go.top_k = 1;
    go.sm_count_target = runner.sms() - k;
    gemms_.push_back(runner.make_gemm(go));
    QkvGemm* gp = gemms_.back().get();
    const std::string gname = "alone:gemm:sm" + std::to_string(runner.sms() - k);
    group.push_back({gname, [gp](Sample& s) { s.phase("gemm", [&] { gp->run(s.stream); }); }});
    mechs_.push_back(prepare(rng_partition(k), *gp, false,
                             "c: spatial partition (GEMM SM_COUNT_TARGET, RNG pinned to the other SMs) + finisher",
                             "mech:" + rng_partition(k).name, gname));
    add_mech_candidates(runner, mechs_.back(), group);
  }
  const auto measured = ps_.measure_group(group);
  for (size_t i = first; i < mechs_.size(); ++i) {
    figures(mechs_[i], measured, alone);
    mechs_[i].extra["gemm_alone"] = mechs_[i].t_gemm;
    mechs_[i].gemm = nullptr;
  }
  gemms_.clear();  // each holds a cuBLASLt workspace: the memory plan budgets one scan's GEMMs at a time
}

// (b) the cuBLASLt heuristic candidate that overlaps best with `partner` (the fixed mechanism the pipelines use): every
// candidate alone and beside the partner's RNG, one group.
void MechanismExplorer::explore_algo(const AloneTimes& alone, const RngConfig& partner) {
  BlockRunner& runner = ps_.runner;
  if (ps_.opts.top_k <= 1 || runner.gemm().candidates().size() <= 1) return;
  const size_t n = runner.gemm().candidates().size();
  std::vector<Mech> scanned;
  std::vector<Candidate> group;
  for (size_t i = 0; i < n; ++i) {
    auto g = runner.make_gemm(runner.gemm_options());
    try {
      g->select(i);
    } catch (const UsageError&) {
      continue;
    }
    gemms_.push_back(std::move(g));
    QkvGemm* gp = gemms_.back().get();
    const std::string gname = fmt::format("alone:gemm:cand{}", i);
    group.push_back({gname, [gp](Sample& s) { s.phase("gemm", [&] { gp->run(s.stream); }); }});
    Mech m = prepare(partner, *gp, false,
                     "b: the cuBLASLt candidate that overlaps best (with the pipelines' mechanism, " + partner.name + ")",
                     fmt::format("mech:algo:cand{}", i), gname);
    m.extra["candidate"] = i;
    add_mech_candidates(runner, m, group);
    scanned.push_back(std::move(m));
  }
  if (scanned.empty()) return;
  const auto measured = ps_.measure_group(group);
  json cands = json::array();
  std::optional<Mech> best;
  for (Mech& m : scanned) {
    figures(m, measured, alone);
    json c = algo_brief(m.gemm->algo());
    c["candidate"] = m.extra["candidate"];
    c["gemm_alone"] = m.t_gemm;
    c["overlap"] = m.over.total.median;
    c["hidden"] = m.hidden;
    c["hidden_self"] = m.hidden_self;
    c["qkv_equal_pipelines"] = m.extra["qkv_equal_pipelines"];
    cands.push_back(c);
    if (m.over.total.median > 0 && (!best || m.over.total.median < best->over.total.median)) best = m;
  }
  if (!best) {
    gemms_.clear();
    return;
  }
  best->rc.name = "algo";
  best->extra["candidates"] = cands;
  best->eligible = false;  // another GEMM object (its bits are checked, its choice is per point)
  best->gemm = nullptr;
  mechs_.push_back(std::move(*best));
  gemms_.clear();
}

void MechanismExplorer::finish(const std::map<std::string, Measurement>& first_group, const AloneTimes& alone) {
  if (!active_) return;
  for (Mech& m : mechs_) figures(m, first_group, alone);
  // The partner of the GEMM-candidate scan: the fixed mechanism the pipelines' rule picks, so a near-tie does
  // not change the scan from run to run (none eligible: the first measured).
  const Mech* partner = stable_fastest(mechs_, ps_.book, true).pick;
  if (!partner) partner = stable_fastest(mechs_, ps_.book, false).pick;
  const RngConfig cores = partner ? partner->rc : mechs_.front().rc;
  explore_partition(alone);
  explore_algo(alone, cores);
}

MechChoice stable_fastest(const std::vector<Mech>& mechs, const SampleBook& book, bool eligible_only) {
  auto usable = [&](const Mech& m) { return (!eligible_only || m.eligible) && m.over.total.median > 0; };
  MechChoice c;
  for (const Mech& m : mechs) {
    if (!usable(m)) continue;
    if (m.rc.name == "plain") c.plain = &m;
    if (!c.fastest || m.over.total.median < c.fastest->over.total.median) c.fastest = &m;
  }
  c.pick = c.fastest;
  if (!c.plain) return c;  // no plain to hold: the point estimate is all there is
  // Challengers in list order: one replaces the incumbent only when faster beyond their paired interval, so a
  // near-tie at any level (with plain, or between two that both beat it) keeps the incumbent.
  c.pick = c.plain;
  for (const Mech& m : mechs) {
    if (&m == c.plain || !usable(m)) continue;
    const Interval iv = book.ratio(m.vname, c.pick->vname);
    if (iv.valid && iv.high < 1 && m.over.total.median < c.pick->over.total.median) c.pick = &m;
  }
  if (c.fastest != c.plain)
    c.vs_plain = book.ratio((c.pick == c.plain ? c.fastest : c.pick)->vname, c.plain->vname);
  return c;
}

OverlapChoice choose_overlap_rng(const RunOptions& o, const std::vector<Mech>& mechs, const SampleBook& book) {
  // Without exploration: the plain second stream, the mechanism that hid the most on the H200 presets (the
  // co-resident kernels launched first delay cuBLASLt's GEMM: overlap/baseline 0.61-0.69x with coresident-w1).
  OverlapChoice c{rng_plain(), "default (no exploration)"};
  if (o.overlap_rng != "auto") {
    if (const FixedMechanism* f = find_fixed_mechanism(o.overlap_rng)) c.rc = f->rc;
    c.why = "--overlap-rng";
    return c;
  }
  const MechChoice mc = stable_fastest(mechs, book, true);
  if (!mc.pick) return c;
  const Mech& pick = *mc.pick;
  const Interval& iv = mc.vs_plain;
  c.rc = pick.rc;
  c.vs_plain = iv;
  auto ratio = [&](const Mech& m) {
    return fmt::format("{} / plain {:.5f} [{:.5f}, {:.5f}]", m.rc.name, iv.value, iv.low, iv.high);
  };
  if (!mc.plain)
    c.why = "fastest eligible mechanism by point estimate (plain not eligible or without samples)";
  else if (&pick != mc.plain)
    c.why = "faster than plain (and than any earlier challenger) beyond the paired interval (" +
            (iv.valid ? ratio(pick) : pick.rc.name + " / plain: no interval") + ")" +
            (mc.fastest != &pick ? "; fastest by point estimate: " + mc.fastest->rc.name : "");
  else if (mc.fastest != &pick)
    c.why = "plain: no eligible mechanism faster beyond its paired interval (fastest " +
            (iv.valid ? ratio(*mc.fastest) : mc.fastest->rc.name + ", no interval") + ")";
  else
    c.why = "plain: the fastest eligible mechanism";
  return c;
}

MechanismFigures add_mechanism_variants(PointScope& ps, const std::vector<Mech>& mechs, const AloneTimes& alone) {
  MechanismFigures f;
  for (const Mech& m : mechs) {
    VariantResult v = variant_of("mech:" + m.rc.name, m.over);
    v.derived["hidden"] = m.hidden;
    m.hidden_ci.write(v.derived, "hidden");
    v.derived["hidden_self"] = m.hidden_self;
    m.hidden_self_ci.write(v.derived, "hidden_self");
    v.derived["saved_us"] = (alone.gemm() + alone.rng() - m.over.total.median) * 1e6;
    v.extra = m.extra;
    v.extra["mechanism"] = m.mechanism;
    v.extra["gemm_alone"] = m.t_gemm;
    v.extra["rng_alone"] = m.t_rng;
    v.extra["eligible_for_pipelines"] = m.eligible;
    if (m.extra.contains("coresident_share")) v.derived["coresident_share"] = m.extra["coresident_share"];
    // The most any schedule could hide, given the two kernels' energies alone, the cap and the idle power
    // (src/core/energy.hpp): beside `hidden`, for the same pieces, but from their power passes (time and power
    // both measured back to back; the interleaved medians are another power state).
    if (ps.harness.power_on()) {
      const EnergyBound b = energy_bound({alone.pass_time("gemm"), alone.watts("gemm"), alone.pass_time("rng"),
                                          alone.watts("rng"), ps.harness.cap_w(), ps.harness.idle_w()});
      v.derived["hidden_energy_bound"] = b.max_hidden;
      v.extra["energy_bound"] = to_json(b);
    }
    ps.pr.variants.push_back(std::move(v));
    f.hidden_by[m.rc.name] = m.hidden;
    if (std::isfinite(m.hidden) && (!f.best || m.hidden > f.best->hidden)) f.best = &m;
  }
  return f;
}

}  // namespace dropbench
