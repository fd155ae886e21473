// The training step (workload.pass train) on the CPU: the pass and layers fields, the pipeline table's train
// rows, the training-step memory and each strategy's mask footprint, plan_train's budget, the model's
// predict_train (structure, not figures), recommend_train's ranking by budget, and `run` / `recommend` at the
// command line (dry-run plans, bad input, the refused measuring run).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/shapes.hpp"
#include "model_fixtures.hpp"
#include "src/block/block_pipelines.hpp"
#include "src/block/pipeline_plan.hpp"
#include "src/block/train_point.hpp"
#include "src/block/train_step.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/cli/run_train.hpp"
#include "src/core/bootstrap.hpp"
#include "src/core/config.hpp"
#include "src/core/pipelines.hpp"
#include "src/core/workload_params.hpp"
#include "src/model/model.hpp"
#include "src/model/model_report.hpp"
#include "src/model/recommend.hpp"
#include "test_paths.hpp"
#include "usage_error.hpp"

namespace db = dropbench;
using nlohmann::json;

namespace {

using dropbench_test::usage_error;

std::filesystem::path temp_path(const std::string& tag) {
  return std::filesystem::temp_directory_path() /
         ("dropbench_train_" + tag + "_" + std::to_string(::getpid()) + ".json");
}

json dry_report(const std::string& args) {
  const auto path = temp_path("dry");
  const auto r = dropbench_test::run_dropbench(args + " --dry-run -q -o '" + path.string() + "'");
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  std::ifstream f(path);
  json j = f ? json::parse(f) : json();
  std::filesystem::remove(path);
  return j;
}

std::string preset(const char* name) { return dropbench_test::source_path("configs/") + name + ".json"; }

std::vector<std::string> names(const std::vector<db::Pipeline>& ps) {
  std::vector<std::string> out;
  for (db::Pipeline p : ps) out.emplace_back(db::pipeline_name(p));
  return out;
}

}  // namespace

// ---- config ----

TEST(TrainStep, PassAndLayersFields) {
  db::Workload w;
  EXPECT_EQ(w.pass, "fwd");
  db::set_workload_field(w, "pass", json("train"), "");
  EXPECT_EQ(w.pass, "train");
  db::set_workload_field(w, "layers", json(80), "");
  EXPECT_EQ(w.layers, 80);
  const std::string bad = usage_error([&] { db::set_workload_field(w, "pass", json("back"), ""); });
  EXPECT_NE(bad.find("workload.pass"), std::string::npos) << bad;
  EXPECT_NE(bad.find("fwd, train for run"), std::string::npos) << bad;
  // bwd is a pass of attention: the field takes it, run refuses it by its own passes.
  db::SweepPoint sp;
  db::set_workload_field(sp.workload, "pass", json("bwd"), "");
  const std::string run_bad = usage_error([&] { db::check_command_passes({sp}, "run"); });
  EXPECT_NE(run_bad.find("workload.pass: \"bwd\" is not a pass of run (allowed: fwd, train)"), std::string::npos)
      << run_bad;
  EXPECT_EQ(usage_error([&] { db::check_command_passes({sp}, "attention"); }), "");
  EXPECT_NE(usage_error([&] { db::set_workload_field(w, "layers", json(-1), ""); }).find("workload.layers"),
            std::string::npos);
  // Written only when set, so the forward's configs and reports read as before; read back as written.
  const json def = db::to_json(db::Workload{});
  EXPECT_FALSE(def.contains("pass"));
  EXPECT_FALSE(def.contains("layers"));
  const json j = db::to_json(w);
  EXPECT_EQ(j.at("pass"), "train");
  EXPECT_EQ(j.at("layers"), 80);
  db::Config c = db::builtin_config();
  c.workload = w;
  const db::Config back = db::config_from_json(db::to_json(c), "test");
  EXPECT_EQ(back.workload.pass, "train");
  EXPECT_EQ(back.workload.layers, 80);
}

TEST(TrainStep, PresetsCarryTheirLayerCounts) {
  const std::vector<std::pair<const char*, int64_t>> want = {{"llama3-8b", 32}, {"llama3-70b", 80}, {"llama3-405b", 126}};
  for (const auto& [name, layers] : want) {
    const db::Config c = db::load_config(preset(name));
    EXPECT_EQ(c.workload.layers, layers) << name;
    EXPECT_EQ(c.workload.pass, "fwd") << name;
  }
}

// ---- the pipeline table ----

TEST(TrainStep, PipelineTableRowsPerPass) {
  EXPECT_EQ(names(db::pass_pipelines(db::Pass::Fwd)),
            (std::vector<std::string>{"baseline", "fused", "overlap", "chunked"}));
  EXPECT_EQ(db::all_pipelines(), db::pass_pipelines(db::Pass::Fwd));
  EXPECT_EQ(names(db::pass_pipelines(db::Pass::Train)),
            (std::vector<std::string>{"fused", "stored", "regen-overlap", "fused-write"}));
  for (db::Pipeline p : db::pass_pipelines(db::Pass::Train)) {
    const db::PipelineSpec& s = db::pipeline_spec(p);
    EXPECT_EQ(db::parse_pipeline(s.name), p);
    EXPECT_TRUE(s.train);
    EXPECT_FALSE(std::string(s.train_summary).empty()) << s.name;
    // Every strategy walks the whole step: forward, the output projection, its backward, attention's, QKV's.
    for (const char* ph : {"gemm", "attention", "gemm-out", "gemm-out-dx", "gemm-out-dw", "attention-bwd", "gemm-dx",
                           "gemm-dw"})
      EXPECT_NE(std::find_if(s.train_phases.begin(), s.train_phases.end(),
                             [&](const char* x) { return std::string(x) == ph; }),
                s.train_phases.end())
          << s.name << " " << ph;
  }
  EXPECT_EQ(db::pipeline_spec(db::Pipeline::Fused).train_mask, db::MaskLife::None);
  EXPECT_EQ(db::pipeline_spec(db::Pipeline::Stored).train_mask, db::MaskLife::HeldAcrossStep);
  EXPECT_EQ(db::pipeline_spec(db::Pipeline::RegenOverlap).train_mask, db::MaskLife::WithinPhase);
  EXPECT_EQ(db::pipeline_spec(db::Pipeline::FusedWrite).train_mask, db::MaskLife::HeldAcrossStep);
  EXPECT_TRUE(db::applies_to(db::Pipeline::Fused, db::Pass::Fwd));
  EXPECT_FALSE(db::applies_to(db::Pipeline::Stored, db::Pass::Fwd));
  EXPECT_FALSE(db::applies_to(db::Pipeline::Baseline, db::Pass::Train));
  EXPECT_EQ(db::parse_pass("train"), db::Pass::Train);
  EXPECT_NE(usage_error([] { db::parse_pass("bwd"); }).find("allowed: fwd, train"), std::string::npos);
}

// ---- memory ----

TEST(TrainStep, TrainMemoryFollowsTheShapeAndPrecision) {
  db::Workload w = db::load_config(preset("llama3-70b")).workload;
  const db::BlockMemory b = db::block_memory(w, w.sq, 1, false);
  const db::TrainMemory f8 = db::train_memory(w);
  w.dtype = "bf16";
  const db::TrainMemory b16 = db::train_memory(w);
  const db::BlockMemory bb = db::block_memory(w, w.sq, 1, false);
  // dQKV is laid out like QKV (bf16); its GEMM-input copy exists only for fp8 (e5m2, one byte).
  EXPECT_EQ(f8.dqkv, b.qkv);
  EXPECT_EQ(f8.dqkv_in, b.qkv / 2);
  EXPECT_EQ(b16.dqkv_in, 0u);
  EXPECT_EQ(b16.o_in, 0u);
  EXPECT_EQ(f8.o_in, b.o / 2);
  // dX and dW are bf16 whatever X and W are; dY arrives in bf16, and fp8 casts it to e5m2 (and transposed).
  EXPECT_EQ(f8.dx, 2 * b.x);
  EXPECT_EQ(b16.dx, bb.x);
  EXPECT_EQ(f8.dw, 2 * b.w);
  EXPECT_EQ(b16.dy, f8.dy);
  EXPECT_EQ(f8.dy_in, f8.dy / 2);
  EXPECT_EQ(f8.dy_t, f8.dy / 2);
  EXPECT_EQ(b16.dy_in + b16.dy_t + b16.o_t + b16.dqkv_t + b16.x_t + b16.w_t + b16.w_out_t + b16.fp8_scales, 0u);
  EXPECT_EQ(f8.d_o, b.o);
  // fp8's transposed copies (cuBLASLt's FP8 GEMMs are TN only): O, dQKV, X, W_qkv, W_o, one byte per element.
  EXPECT_EQ(f8.o_t, b.o / 2);
  EXPECT_EQ(f8.dqkv_t, b.qkv / 2);
  EXPECT_EQ(f8.x_t, b.x);
  EXPECT_EQ(f8.w_t, b.w);
  EXPECT_EQ(f8.w_out_t, f8.w_out);
  EXPECT_EQ(b16.w_out, 2 * f8.w_out);
  EXPECT_GT(f8.fp8_scales, 0u);
  // The backward's workspace, as the attention backward lays it out: D and the LSE copy (fp32, B * Hq rows of SQ
  // padded to 64 queries, each 256-byte aligned), the fast mode's fp32 dQ accumulator (the timed mode) and, for a
  // causal group of more than 4 query heads (the presets' 8 and 16: subgroups of 4), the wgmma kernel's fp32 dK, dV
  // partials per subgroup. TrainRunner refuses a smaller buffer, so an undercount fails every measured training step.
  auto bwd_workspace = [](const db::Workload& x) {
    const uint64_t d = (static_cast<uint64_t>(x.batch * x.q_heads * ((x.sq + 63) / 64 * 64)) * 4 + 255) / 256 * 256;
    const uint64_t group = static_cast<uint64_t>(x.q_heads / x.kv_heads);
    const uint64_t subgroups = x.causal && group > 4 ? group / 4 : 1;
    const uint64_t parts = subgroups > 1 ? 2 * subgroups * static_cast<uint64_t>(x.batch * x.sq * x.kv_heads * x.head_dim) * 4 : 0;
    return 2 * d + static_cast<uint64_t>(x.batch * x.sq * x.q_heads * x.head_dim) * 4 + parts;
  };
  EXPECT_EQ(f8.bwd_workspace, bwd_workspace(db::load_config(preset("llama3-70b")).workload));
  db::Workload ragged = w;
  ragged.sq = 8200;  // not a multiple of 64: the padded rows count
  EXPECT_EQ(db::train_memory(ragged).bwd_workspace, bwd_workspace(ragged));
  db::AttentionBwdParams bp;
  bp.fwd = db::attention_params(ragged, db::Threshold{});
  for (bool det : {false, true}) {
    bp.deterministic = det;
    EXPECT_GE(db::train_memory(ragged).bwd_workspace, db::attention_backward_workspace_bytes(bp)) << det;
  }
  // Validation copies of dQKV, dX, dW, dW_o only when asked for.
  EXPECT_EQ(f8.grad_ref, 0u);
  const db::TrainMemory v = db::train_memory(db::load_config(preset("llama3-70b")).workload, true);
  EXPECT_EQ(v.grad_ref, v.dqkv + v.dx + v.dw + v.dw_out);
  size_t sum = 0;
  for (const auto& [n, bytes] : f8.buffers()) sum += bytes;
  EXPECT_EQ(sum, f8.total());
}

// A shape the attention backward refuses is the training step's refusal too, before anything is sized (train_memory
// asks the backward for its workspace): here an sq the forward's rules allow.
TEST(TrainStep, ValidateRefusesWhatTheBackwardRefuses) {
  db::Workload w = db::load_config(preset("llama3-8b")).workload;
  w.sq = 8192;
  EXPECT_EQ(usage_error([&] { db::validate_train_workload(w); }), "");
  w.sq = (int64_t{1} << 24) + 64;
  EXPECT_EQ(usage_error([&] { db::validate_block_workload(w); }), "");
  const std::string bad = usage_error([&] { db::validate_train_workload(w); });
  EXPECT_NE(bad.find("attention backward: sq"), std::string::npos) << bad;
}

TEST(TrainStep, PlanRunsFusedWriteWithTheWholeMask) {
  const db::Workload w = db::load_config(preset("llama3-70b")).workload;
  const db::BlockMemory b = db::block_memory(w, w.sq, db::kTrainGemmObjects, false);
  const db::TrainMemory t = db::train_memory(w, true);
  const size_t big = size_t{1} << 40;
  // Every strategy wanted: all run, none skipped.
  const db::PipelinePlan all = db::plan_train(b, t, 80, big, 0, db::pass_pipelines(db::Pass::Train));
  EXPECT_EQ(names(all.run), (std::vector<std::string>{"fused", "stored", "regen-overlap", "fused-write"}));
  EXPECT_TRUE(all.skipped.empty());
  EXPECT_TRUE(all.needs_full_mask);
  // fused-write alone runs and allocates the whole mask (its forward writes it, its backward reads it); fused
  // alone needs none.
  const db::PipelinePlan fw = db::plan_train(b, t, 80, big, 0, {db::Pipeline::FusedWrite});
  EXPECT_TRUE(fw.point_fits);
  EXPECT_EQ(names(fw.run), (std::vector<std::string>{"fused-write"}));
  EXPECT_TRUE(fw.needs_full_mask);
  EXPECT_FALSE(db::plan_train(b, t, 80, big, 0, {db::Pipeline::Fused}).needs_full_mask);
  // The attention's modes: fused-write's forward generates (and writes) the bits, its backward reads them.
  EXPECT_EQ(db::train_forward_mode(db::Pipeline::FusedWrite), db::DropoutMode::Fused);
  EXPECT_EQ(db::train_backward_mode(db::Pipeline::FusedWrite), db::DropoutMode::Mask);
  EXPECT_EQ(db::train_forward_mode(db::Pipeline::Fused), db::DropoutMode::Fused);
  EXPECT_EQ(db::train_backward_mode(db::Pipeline::Fused), db::DropoutMode::Fused);
  for (db::Pipeline p : {db::Pipeline::Stored, db::Pipeline::RegenOverlap}) {
    EXPECT_EQ(db::train_forward_mode(p), db::DropoutMode::Mask);
    EXPECT_EQ(db::train_backward_mode(p), db::DropoutMode::Mask);
  }
}

// Group 3 of a train point: each attention kernel the strategies launch, once, against the first strategy that
// launches it; fused-write's forward (the fused kernel writing the mask) is not measured alone.
TEST(TrainStep, AttentionAlonePlan) {
  auto rows = [](const std::vector<db::Pipeline>& run) {
    std::vector<std::string> out;
    for (const db::AttentionAlone& a : db::attention_alone_plan(run))
      out.push_back(a.variant + " " + a.phase + " " + a.strategy + (a.backward ? " bwd" : " fwd") +
                    (a.mode == db::DropoutMode::Fused ? " fused" : " mask"));
    return out;
  };
  EXPECT_EQ(rows(db::pass_pipelines(db::Pass::Train)),
            (std::vector<std::string>{"alone:attention-fused attention fused fwd fused",
                                      "alone:attention-bwd-fused attention-bwd fused bwd fused",
                                      "alone:attention-mask attention stored fwd mask",
                                      "alone:attention-bwd-mask attention-bwd stored bwd mask"}));
  EXPECT_EQ(rows({db::Pipeline::FusedWrite, db::Pipeline::RegenOverlap}),
            (std::vector<std::string>{"alone:attention-bwd-mask attention-bwd fused-write bwd mask",
                                      "alone:attention-mask attention regen-overlap fwd mask"}));
  EXPECT_TRUE(db::attention_alone_plan({}).empty());
}

TEST(TrainStep, MaskFootprintPerStrategy) {
  const db::Workload w = db::load_config(preset("llama3-70b")).workload;
  const db::BlockMemory b = db::block_memory(w, w.sq, 1, false);
  ASSERT_GT(b.full_mask, 0u);
  const auto fs = db::mask_footprint(db::Pipeline::Stored, b, 80);
  EXPECT_EQ(fs.held_per_layer, b.full_mask);
  EXPECT_EQ(fs.network_bytes, 80 * b.full_mask);
  EXPECT_EQ(fs.layers, 80);
  const auto fw = db::mask_footprint(db::Pipeline::FusedWrite, b, 80);
  EXPECT_EQ(fw.network_bytes, fs.network_bytes);
  const auto fr = db::mask_footprint(db::Pipeline::RegenOverlap, b, 80);
  EXPECT_EQ(fr.held_per_layer, 0u);
  EXPECT_EQ(fr.block_bytes, b.full_mask);
  EXPECT_EQ(fr.network_bytes, b.full_mask);  // one layer's mask at a time
  const auto ff = db::mask_footprint(db::Pipeline::Fused, b, 80);
  EXPECT_EQ(ff.block_bytes + ff.held_per_layer + ff.network_bytes, 0u);
  EXPECT_EQ(db::mask_footprint(db::Pipeline::Stored, b, 0).network_bytes, b.full_mask);  // not given: one layer
  EXPECT_NE(usage_error([&] { db::mask_footprint(db::Pipeline::Baseline, b, 1); }), "");
}

TEST(TrainStep, PlanTrainSkipsByBudgetAndDevice) {
  const db::Workload w = db::load_config(preset("llama3-70b")).workload;
  const db::BlockMemory b = db::block_memory(w, w.sq, 1, false);
  const db::TrainMemory t = db::train_memory(w);
  const auto all = db::pass_pipelines(db::Pass::Train);
  const size_t big = size_t{1} << 40;
  const db::PipelinePlan none = db::plan_train(b, t, 80, big, 0, all);
  EXPECT_EQ(none.run, all);
  EXPECT_TRUE(none.needs_full_mask);
  // A budget between one mask and 80 of them: the held strategies are skipped, regen-overlap and fused run.
  const db::PipelinePlan mid = db::plan_train(b, t, 80, big, 2 * b.full_mask, all);
  EXPECT_EQ(names(mid.run), (std::vector<std::string>{"fused", "regen-overlap"}));
  ASSERT_EQ(mid.skipped.size(), 2u);
  EXPECT_NE(mid.skipped[0].second.find("--mask-budget"), std::string::npos) << mid.skipped[0].second;
  // Below one mask: fused alone.
  EXPECT_EQ(names(db::plan_train(b, t, 80, big, b.full_mask / 2, all).run), (std::vector<std::string>{"fused"}));
  // A device that holds the buffers but no mask.
  const size_t just = b.common() + t.total() + (size_t{512} << 20) + b.full_mask / 2;
  const db::PipelinePlan dev = db::plan_train(b, t, 1, just, 0, all);
  EXPECT_EQ(names(dev.run), (std::vector<std::string>{"fused"}));
  EXPECT_FALSE(dev.needs_full_mask);
  const db::PipelinePlan tiny = db::plan_train(b, t, 1, size_t{1} << 30, 0, all);
  EXPECT_FALSE(tiny.point_fits);
  EXPECT_NE(tiny.point_reason.find("training step"), std::string::npos);
}

// ---- the budget verdict ----

TEST(TrainStep, BudgetLadderKeepsTheFastestAtEachBudget) {
  const std::vector<db::model::StrategyCost> c = {
      {"fused", 10.0, 0}, {"stored", 8.0, 100}, {"regen-overlap", 9.0, 5}, {"fused-write", 8.5, 100}};
  const auto l = db::model::budget_ladder(c);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].strategy, "fused");
  EXPECT_EQ(l[1].strategy, "regen-overlap");
  EXPECT_EQ(l[1].from_bytes, 5u);
  EXPECT_EQ(l[2].strategy, "stored");
  EXPECT_EQ(l[2].from_bytes, 100u);
  for (size_t i = 1; i < l.size(); ++i) {
    EXPECT_GT(l[i].from_bytes, l[i - 1].from_bytes);
    EXPECT_LT(l[i].seconds, l[i - 1].seconds);
  }
  EXPECT_EQ(db::model::ladder_text(l),
            "stored if you can spare 100 B, else regen-overlap if you can spare 5 B, else fused");
  EXPECT_EQ(db::model::best_within(l, 0)->strategy, "stored");
  EXPECT_EQ(db::model::best_within(l, 99)->strategy, "regen-overlap");
  EXPECT_EQ(db::model::best_within(l, 4)->strategy, "fused");
  // No mask-free strategy: a budget below the least is answered with none.
  const auto l2 = db::model::budget_ladder({{"stored", 8.0, 100}});
  EXPECT_EQ(db::model::best_within(l2, 50), nullptr);
  EXPECT_NE(db::model::ladder_text(l2).find("else none fits"), std::string::npos);
}

// The measured verdict: ladders by sampled time and by energy over the strategies' network mask memory; each time
// step names the runner-up within its budget and the margin with the interval from the per-round samples.
TEST(TrainStep, MeasuredVerdictLaddersAndMargins) {
  const uint64_t kMiB = uint64_t{1} << 20;
  db::json train;
  const std::map<std::string, std::pair<uint64_t, double>> s = {{"fused", {0, 13e-3}},
                                                                {"regen-overlap", {512 * kMiB, 12.6e-3}},
                                                                {"stored", {40960 * kMiB, 12.3e-3}},
                                                                {"fused-write", {40960 * kMiB, 12.5e-3}}};
  db::SampleBook book;
  for (const auto& [name, bt] : s) {
    train["strategies"][name]["network_mask_bytes"] = bt.first;
    train["measured"]["t"][name] = bt.second;
    db::SampleSeries ser;
    ser.group = 0;
    for (int i = 0; i < 40; ++i) ser.x.push_back(bt.second * (1 + 0.002 * ((i * 7 + name.size()) % 5 - 2)));
    book.add(name, ser);
  }
  train["measured"]["energy_mj"] = {{"fused", 9000}, {"regen-overlap", 9100}, {"stored", 8800}, {"fused-write", 8700}};
  const db::json v = db::measured_train_verdict(train, book, size_t{1} << 30);

  const db::json& t = v.at("time");
  ASSERT_EQ(t.at("ladder").size(), 3u);
  EXPECT_EQ(t.at("ladder")[0].at("strategy"), "fused");
  EXPECT_TRUE(t.at("ladder")[0].at("runner_up").is_null());  // nothing else holds no mask
  EXPECT_EQ(t.at("ladder")[1].at("strategy"), "regen-overlap");
  EXPECT_EQ(t.at("ladder")[1].at("runner_up"), "fused");
  const db::json& top = t.at("ladder")[2];
  EXPECT_EQ(top.at("strategy"), "stored");
  EXPECT_EQ(top.at("from_bytes").get<uint64_t>(), 40960 * kMiB);
  EXPECT_NEAR(top.at("t_us").get<double>(), 12300, 1e-6);
  EXPECT_EQ(top.at("runner_up"), "fused-write");
  const double margin = top.at("margin").get<double>();
  EXPECT_NEAR(margin, 12.5 / 12.3, 2e-3);
  ASSERT_TRUE(top.at("margin_ci").is_array());
  EXPECT_LE(top.at("margin_ci")[0].get<double>(), margin);
  EXPECT_GE(top.at("margin_ci")[1].get<double>(), margin);
  EXPECT_GT(top.at("margin_ci")[0].get<double>(), 1.0);  // 1.6 % apart with 0.2 % noise: resolved
  EXPECT_EQ(t.at("text"), "stored if you can spare 40.0 GiB, else regen-overlap if you can spare 512 MiB, else fused");
  EXPECT_EQ(t.at("best_within_budget"), "regen-overlap");  // 1 GiB budget

  const db::json& e = v.at("energy");
  ASSERT_EQ(e.at("ladder").size(), 2u);
  EXPECT_EQ(e.at("ladder")[0].at("strategy"), "fused");
  EXPECT_EQ(e.at("ladder")[1].at("strategy"), "fused-write");
  EXPECT_EQ(e.at("ladder")[1].at("energy_mj").get<double>(), 8700);
  EXPECT_EQ(e.at("best_within_budget"), "fused");
  EXPECT_FALSE(v.contains("sustained"));  // no power pass: no sustained times

  // A strategy without samples in the book: the margin is the plain ratio of medians, without an interval.
  db::SampleBook thin;
  const db::json v2 = db::measured_train_verdict(train, thin, 0);
  const db::json& top2 = v2.at("time").at("ladder")[2];
  EXPECT_NEAR(top2.at("margin").get<double>(), 12.5 / 12.3, 1e-9);
  EXPECT_TRUE(top2.at("margin_ci").is_null());
  EXPECT_EQ(v2.at("time").at("best_within_budget"), "stored");
}

// ---- the model ----

TEST(TrainStep, PredictTrainComposesEveryStrategy) {
  const db::model::Machine m = dropbench_test::tiny_machine();
  const db::model::Profile p = dropbench_test::tiny_profile();
  const db::Workload w = dropbench_test::tiny_workload(db::builtin_config().workload);
  const db::model::TrainPrediction tp = db::model::predict_train(m, p, w, {});
  ASSERT_EQ(tp.strategies.size(), db::pass_pipelines(db::Pass::Train).size());
  const double gap = m.launch_gap_us * 1e-6;
  for (const db::model::StepTime& s : tp.strategies) {
    EXPECT_GT(s.fwd_seconds, 0) << s.name;
    EXPECT_GT(s.bwd_seconds, 0) << s.name;
    EXPECT_NEAR(s.seconds, s.fwd_seconds + gap + s.bwd_seconds, 1e-15) << s.name;
    double fsum = 0, bsum = 0;
    for (const auto& x : s.fwd) fsum += x.seconds;
    for (const auto& x : s.bwd) bsum += x.seconds;
    EXPECT_NEAR(s.fwd_seconds, fsum + gap * (s.fwd.size() - 1), 1e-15) << s.name;
    EXPECT_NEAR(s.bwd_seconds, bsum + gap * (s.bwd.size() - 1), 1e-15) << s.name;
  }
  // The GEMMs' backward is twice the forward's FLOPs; the attention backward's work is 2.5x the forward's.
  EXPECT_DOUBLE_EQ(tp.gemm_out_dx.work + tp.gemm_out_dw.work, 2 * tp.gemm_out.work);
  EXPECT_DOUBLE_EQ(tp.gemm_dx.work + tp.gemm_dw.work, 2 * tp.fwd.gemm.work);
  EXPECT_DOUBLE_EQ(tp.attn_bwd_mask.work, db::kAttentionBwdFlopRatio * tp.fwd.attn_none.work);
  EXPECT_NE(tp.attn_bwd_mask.source.find("derived"), std::string::npos);
  // The backward (2.5x the products) takes longer than the forward's none kernel.
  EXPECT_GT(tp.attn_bwd_mask.seconds, tp.fwd.attn_none.seconds);
  EXPECT_GT(tp.attn_bwd_regen.seconds, tp.fwd.attn_none.seconds);
  // Stored and regen-overlap share the forward; fused-write and stored share the backward.
  const auto* stored = tp.strategy("stored");
  const auto* regen = tp.strategy("regen-overlap");
  const auto* fw = tp.strategy("fused-write");
  const auto* fused = tp.strategy("fused");
  ASSERT_TRUE(stored && regen && fw && fused);
  EXPECT_DOUBLE_EQ(stored->fwd_seconds, regen->fwd_seconds);
  EXPECT_DOUBLE_EQ(fw->bwd_seconds, stored->bwd_seconds);
  // Writing the keep words can only add to the fused forward.
  EXPECT_GE(tp.attn_fused_write.seconds, tp.fwd.attn_fused.seconds);
  // Regenerating beside the GEMMs is never slower than the RNG after them.
  EXPECT_LE(regen->bwd_seconds, stored->bwd_seconds + tp.fwd.rng.seconds + gap + 1e-15);
  EXPECT_GE(regen->hidden_bwd, 0);
  EXPECT_LT(stored->hidden_bwd, 0);  // no overlap in its backward
  EXPECT_EQ(tp.strategy("baseline"), nullptr);
}

// Every phase carries the SM clock it is timed at: the GEMMs at the machine's sustained clock (the committed
// profile's GEMM clock), the attention backward at its profile entry's measured clock, an overlap at its GEMM side's.
// With Options::clock_mhz every phase runs at that clock, and an MMA-limited GEMM's time scales by the clock ratio
// (the clock alone: the machine's per-kernel power, whose bound does not scale with the clock, is left out).
TEST(TrainStep, PhasesCarryTheClockTheyAreTimedAt) {
  db::model::Machine m = db::model::load_machine(dropbench_test::source_path("configs/machines/h100-sxm.json"));
  m.power.clear();
  const db::model::Profile p = db::model::load_profile(dropbench_test::source_path("configs/profiles/h200.json"));
  ASSERT_TRUE(p.wgmma_bwd.has_value());
  db::Workload w = db::load_config(preset("llama3-70b")).workload;
  w.pass = "train";
  const db::model::TrainPrediction tp = db::model::predict_train(m, p, w, {});
  const double bwd_clock = db::model::kernel_clock(m, p.wgmma_bwd->clock, {});
  const db::model::StepTime* stored = tp.strategy("stored");
  ASSERT_TRUE(stored);
  auto phase = [](const db::model::StepTime& s, const std::string& name) -> const db::model::PhaseTime* {
    for (const auto* v : {&s.fwd, &s.bwd})
      for (const db::model::PhaseTime& x : *v)
        if (x.name == name) return &x;
    return nullptr;
  };
  for (const char* g : {"gemm || rng", "gemm-out", "gemm-out-dx", "gemm-out-dw", "gemm-dx", "gemm-dw"}) {
    ASSERT_TRUE(phase(*stored, g)) << g;
    EXPECT_DOUBLE_EQ(phase(*stored, g)->clock_mhz, m.clock_sustained_mhz) << g;
  }
  ASSERT_TRUE(phase(*stored, "attention-bwd(mask)"));
  EXPECT_DOUBLE_EQ(phase(*stored, "attention-bwd(mask)")->clock_mhz, bwd_clock);
  ASSERT_TRUE(phase(*tp.strategy("fused"), "attention-bwd(regen)"));
  EXPECT_DOUBLE_EQ(phase(*tp.strategy("fused"), "attention-bwd(regen)")->clock_mhz, bwd_clock);

  db::model::Options at;
  at.clock_mhz = 1650;
  const db::model::TrainPrediction tc = db::model::predict_train(m, p, w, at);
  for (const db::model::StepTime& s : tc.strategies)
    for (const auto* v : {&s.fwd, &s.bwd})
      for (const db::model::PhaseTime& x : *v) EXPECT_DOUBLE_EQ(x.clock_mhz, 1650) << s.name << " " << x.name;
  ASSERT_EQ(tp.gemm_dx.limiter, "mma");
  EXPECT_NEAR(tc.gemm_dx.seconds / tp.gemm_dx.seconds, m.clock_sustained_mhz / 1650, 1e-12);
  // Below its profile clock the backward takes longer; its memory-bound launches do not scale, so less than the ratio.
  const double r = tc.attn_bwd_mask.seconds / tp.attn_bwd_mask.seconds;
  EXPECT_GT(r, 1);
  EXPECT_LT(r, bwd_clock / 1650);
}

// A dry run's --model-clock times every kernel of the step at that clock (without the power term) and says so; it is
// refused without --dry-run and outside 100..3000 MHz.
TEST(TrainStep, DryRunModelClock) {
  // The H100 machine without its per-kernel power: the clock's effect alone (a power bound does not scale with it).
  json mj = json::parse(std::ifstream(dropbench_test::source_path("configs/machines/h100-sxm.json")));
  ASSERT_TRUE(mj.contains("power"));
  mj.erase("power");
  const auto machine = temp_path("machine_no_power");
  std::ofstream(machine) << mj.dump();
  const std::string base = "run --config '" + preset("llama3-8b") + "' --set workload.pass=train --set 'sweep.sq=[8192]' "
                           "--set 'sweep.rounds=[7]' --machine '" + machine.string() + "'";
  const json d = dry_report(base);
  const json c = dry_report(base + " --model-clock 1650");
  ASSERT_EQ(d.at("points").size(), 1u);
  ASSERT_EQ(c.at("points").size(), 1u);
  EXPECT_EQ(d.at("points")[0].at("derived").at("train").at("model_clock"), "model");
  EXPECT_EQ(c.at("points")[0].at("derived").at("train").at("model_clock"), "1650 MHz");
  const db::model::Machine m =
      db::model::load_machine(dropbench_test::source_path("configs/machines/h100-sxm.json"));
  auto phases = [](const json& rep, const std::string& strategy) {
    for (const json& v : rep.at("points")[0].at("variants"))
      if (v.at("name") == strategy) return v.at("extra").at("model_phases");
    return json();
  };
  const json pd = phases(d, "stored"), pc = phases(c, "stored");
  ASSERT_FALSE(pd.is_null());
  ASSERT_FALSE(pc.is_null());
  for (const char* side : {"fwd", "bwd"})
    for (size_t i = 0; i < pc.at(side).size(); ++i) {
      EXPECT_DOUBLE_EQ(pc.at(side)[i].at("clock_mhz").get<double>(), 1650) << pc.at(side)[i].dump();
      if (pc.at(side)[i].at("phase") == "gemm-dx")
        EXPECT_NEAR(pc.at(side)[i].at("model_us").get<double>() / pd.at(side)[i].at("model_us").get<double>(),
                    m.clock_sustained_mhz / 1650, 1e-9);
    }
  for (const std::string& bad : {base + " --model-clock 5", base + " --model-clock fast"}) {
    const auto r = dropbench_test::run_dropbench(bad + " --dry-run -q");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--model-clock"), std::string::npos) << r.err;
  }
  const auto measuring = dropbench_test::run_dropbench("run --set workload.pass=train --model-clock 1650 -q");
  EXPECT_EQ(measuring.code, 2);
  EXPECT_NE(measuring.err.find("--model-clock"), std::string::npos) << measuring.err;
  std::filesystem::remove(machine);
}

// The backward timed alone in a training-step report fits the power of the backward kernel's key (the call's
// energy less static x time, per visited element); a machine file's power takes the place of the profile's for the
// same key; a machine file with power but no cap is refused.
TEST(TrainStep, MachinePowerFromTheBackwardAlone) {
  const std::string mpath = dropbench_test::source_path("configs/machines/h100-sxm.json");
  db::model::Machine m = db::model::load_machine(mpath);
  ASSERT_TRUE(m.has_power());
  m.power.clear();
  const db::model::Profile p = db::model::load_profile(dropbench_test::source_path("configs/profiles/h200.json"));
  db::Workload w = db::load_config(preset("llama3-8b")).workload;
  w.pass = "train";
  const db::model::KernelTime bwd = db::model::attention_bwd_kernel_time(m, p, w, "mask", {});
  ASSERT_FALSE(bwd.key.empty());
  ASSERT_GT(bwd.work, 0);
  const double t = 3e-3, e_mj = 2100;
  json v = {{"name", "alone:attention-bwd-mask"}, {"peer", false},
            {"stats", {{"samples", 10}, {"median", t}, {"mean", t}, {"min", t}, {"max", t}}},
            {"power", {{"time_per_iter_s", t}, {"energy_mj_per_iter", e_mj}, {"mean_w", e_mj / t * 1e-3}}}};
  json doc = {{"schema", "dropbench.report"}, {"schema_version", 1}, {"command", "run"},
              {"points", json::array({{{"axes", json::object()}, {"workload", db::to_json(w)}, {"variants", {v}}}})}};
  const db::model::PowerFits f = db::model::fit_power(m, p, {db::model::MeasuredReport{"synthetic", "run", doc}});
  ASSERT_EQ(f.kernels.size(), 1u);
  EXPECT_EQ(f.kernels[0].key, bwd.key);
  const double dyn = (e_mj * 1e-3 - m.static_w * t) / bwd.work;
  EXPECT_NEAR(f.kernels[0].dyn_j_per_work, dyn, 1e-9 * dyn);

  db::model::Machine mm = m;
  mm.power[bwd.key] = {10 * dyn, 700, "machine"};
  db::model::Profile pp = p;
  pp.power[bwd.key] = {dyn, 700, "profile"};
  ASSERT_NE(db::model::kernel_power(mm, pp, bwd.key), nullptr);
  EXPECT_EQ(db::model::kernel_power(mm, pp, bwd.key)->source, "machine");
  EXPECT_EQ(db::model::kernel_power(m, pp, bwd.key)->source, "profile");
  EXPECT_EQ(db::model::kernel_power(m, p, bwd.key), nullptr);
  const db::model::KernelTime hot = db::model::attention_bwd_kernel_time(mm, p, w, "mask", {});
  EXPECT_NEAR(hot.power_bound_s, bwd.work * 10 * dyn / (m.cap_w - m.static_w), 1e-12);
  EXPECT_EQ(hot.limiter, "power");  // ten times the measured energy binds
  // In the step the bound holds the whole call it was fitted on: the launches around the kernel are inside it.
  const db::model::TrainPrediction tp = db::model::predict_train(mm, p, w, {});
  EXPECT_EQ(tp.attn_bwd_mask.limiter, "power");
  EXPECT_NEAR(tp.attn_bwd_mask.seconds, hot.power_bound_s, 1e-12);
  EXPECT_GT(tp.attn_bwd_mask.seconds_no_power, bwd.seconds);  // the launches around it, without the bound
  // At a given clock (a measured one) the cap is in the clock already: no power term.
  db::model::Options at;
  at.clock_mhz = 1650;
  const db::model::KernelTime clocked = db::model::attention_bwd_kernel_time(mm, p, w, "mask", at);
  EXPECT_NE(clocked.limiter, "power");
  EXPECT_DOUBLE_EQ(clocked.power_bound_s, 0);
  EXPECT_TRUE(db::model::power_term_on(mm, p));
  EXPECT_FALSE(db::model::power_term_on(m, p));
  db::model::Machine nocap = mm;
  nocap.cap_w = 0;
  EXPECT_FALSE(db::model::power_term_on(nocap, p));

  json mj = json::parse(std::ifstream(mpath));
  mj.erase("cap_w");
  mj.erase("static_w");
  try {
    db::model::machine_from_json(mj, "no-cap");
    ADD_FAILURE() << "power without cap_w accepted";
  } catch (const db::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("power needs cap_w and static_w"), std::string::npos) << e.what();
  }
}

// A measured step's strategies also carry the model at the step's own clock (Estimator::train with clock_mhz): the
// prediction predict_train makes at that clock (what --model-clock sets), every phase timed at it.
TEST(TrainStep, EstimatorAtAGivenClock) {
  db::CommonOptions o;
  o.dry_run = true;
  o.machine = dropbench_test::source_path("configs/machines/h100-sxm.json");
  const db::Estimator est(o);
  db::Workload w = db::load_config(preset("llama3-8b")).workload;
  w.pass = "train";
  w.sq = 8192;
  std::string note;
  const auto own = est.train(w, &note);
  const auto at = est.train(w, &note, 1650);
  ASSERT_TRUE(own && at) << note;
  db::model::Options ref;
  ref.clock_mhz = 1650;
  const db::model::Machine m = db::model::load_machine(o.machine);
  db::model::Profile prof = db::model::load_profile(dropbench_test::source_path("configs/profiles/h200.json"));
  ASSERT_TRUE(db::model::power_term_on(m, prof));
  const db::model::TrainPrediction direct = db::model::predict_train(m, prof, w, ref);
  // At a given clock the power term is off (model::apply_power): the clock is what the cap holds the kernels to.
  prof.use_power = false;
  const db::model::TrainPrediction no_power = db::model::predict_train(m, prof, w, ref);
  for (const char* s : {"fused", "stored", "regen-overlap", "fused-write"}) {
    SCOPED_TRACE(s);
    ASSERT_TRUE(at->strategy(s) && own->strategy(s) && direct.strategy(s));
    EXPECT_DOUBLE_EQ(at->strategy(s)->seconds, direct.strategy(s)->seconds);
    EXPECT_DOUBLE_EQ(at->strategy(s)->seconds, no_power.strategy(s)->seconds);
    EXPECT_NE(at->strategy(s)->seconds, own->strategy(s)->seconds);
    for (const auto* side : {&at->strategy(s)->fwd, &at->strategy(s)->bwd})
      for (const db::model::PhaseTime& ph : *side) EXPECT_DOUBLE_EQ(ph.clock_mhz, 1650) << ph.name;
  }
  // A measured strategy's variant: the three keys from the model at its probe clock; nothing without a clock.
  db::VariantResult v;
  v.name = "stored";
  v.stats.median = 6e-3;
  v.stats.mean_clock_mhz = 1650;
  db::put_train_model_at_step_clock(v, est, w);
  EXPECT_DOUBLE_EQ(v.derived.at("model_step_clock_mhz").get<double>(), 1650);
  EXPECT_DOUBLE_EQ(v.derived.at("model_step_clock_us").get<double>(), at->strategy("stored")->seconds * 1e6);
  EXPECT_DOUBLE_EQ(v.derived.at("x_model_step_clock").get<double>(), 6e-3 / at->strategy("stored")->seconds);
  db::VariantResult none = v;
  none.derived = json::object();
  none.stats.mean_clock_mhz = 0;
  db::put_train_model_at_step_clock(none, est, w);
  EXPECT_TRUE(none.derived.empty());
  db::VariantResult alone = v;
  alone.derived = json::object();
  alone.name = "alone:gemm";  // not a strategy the model composes
  db::put_train_model_at_step_clock(alone, est, w);
  EXPECT_TRUE(alone.derived.empty());
}

// ---- the attention backward from the wgmma backward's own measured demand ----

namespace {

db::model::Machine h200_machine() {
  return db::model::load_machine(dropbench_test::source_path("configs/machines/h200.json"));
}
db::model::Profile bwd_profile(const json& j) { return db::model::profile_from_json(j, "synthetic-bwd"); }
db::Workload bwd_w(int64_t sq, bool causal) {
  return dropbench_test::bwd_workload(sq, causal, db::builtin_config().workload);
}
// Visited (64-query x 128-key) blocks of the backward at w, counted from the kernel's schedule as written in
// kernels/attention/bwd/wgmma/config.cuh (Schedule): key block kb walks the group's heads and, per head, the
// query blocks from kb * 128 / 64 (causal) or 0.
double visited_blocks(const db::Workload& w) {
  const int64_t nqb = (w.sq + 63) / 64, nkb = (w.sq + 127) / 128, group = w.q_heads / w.kv_heads;
  double n = 0;
  for (int64_t kb = 0; kb < nkb; ++kb) n += static_cast<double>(group * (nqb - (w.causal ? kb * 2 : 0)));
  return n * static_cast<double>(w.batch * w.kv_heads);
}

}  // namespace

// The committed profile holds the backward's measured demand: every R the model ranks, causal or not, is timed from
// the backward's own ncu blocks (none derived), and the fitted efficiencies are inside (0, 1].
TEST(TrainStep, CommittedProfileTimesTheBackwardFromItsMeasuredDemand) {
  const db::model::Machine m = h200_machine();
  const db::model::Profile p = db::model::load_profile(dropbench_test::source_path("configs/profiles/h200.json"));
  ASSERT_TRUE(p.wgmma_bwd.has_value());
  for (double e : {p.wgmma_bwd->issue_efficiency, p.wgmma_bwd->mma_efficiency}) {
    EXPECT_GT(e, 0);
    EXPECT_LE(e, 1);
  }
  for (bool causal : {false, true})
    for (int r : db::kPhiloxRounds) {
      db::Workload w = bwd_w(8192, causal);
      w.rounds = r;
      const db::model::TrainPrediction tp = db::model::predict_train(m, p, w, {});
      EXPECT_EQ(tp.attn_bwd_mask.source, "ncu(bwd)") << "R " << r << " causal " << causal;
      EXPECT_EQ(tp.attn_bwd_regen.source, "ncu(bwd)") << "R " << r << " causal " << causal;
      EXPECT_GT(tp.attn_bwd_mask.seconds, 0);
    }
}

// With kernels.attention_bwd_wgmma and the keys' ncu blocks the step's backward is timed from them (mask and, at
// the profiled R / TW, regen); without a block, with static demand only, or for the mma kernel it is derived.
TEST(TrainStep, MeasuredBackwardWhereProfiledElseDerived) {
  const db::model::Machine m = h200_machine();
  const json j = dropbench_test::bwd_profile_json();
  const db::model::Profile p = bwd_profile(j);
  ASSERT_TRUE(p.wgmma_bwd.has_value());
  EXPECT_EQ(p.wgmma_bwd->block_rows, 64);
  EXPECT_EQ(p.wgmma_bwd->block_keys, 128);
  const db::Workload w = bwd_w(8192, true);
  const db::model::TrainPrediction tp = db::model::predict_train(m, p, w, {});
  EXPECT_EQ(tp.attn_bwd_mask.source, "ncu(bwd)");
  EXPECT_EQ(tp.attn_bwd_regen.source, "ncu(bwd)");
  EXPECT_EQ(tp.attn_bwd_mask.key, "wgmma_bwd_mask_causal");
  EXPECT_EQ(tp.attn_bwd_regen.key, "wgmma_bwd_fused_r7_tw8_causal");
  EXPECT_DOUBLE_EQ(tp.attn_bwd_mask.work, visited_blocks(w) * 64 * 128);
  // The kernel, then the preprocess / memset / convert launches as a fixed time.
  const db::model::KernelTime k = db::model::attention_bwd_kernel_time(m, p, w, "mask", {});
  EXPECT_GT(tp.attn_bwd_mask.seconds, k.seconds + 3 * m.launch_gap_us * 1e-6);
  EXPECT_GT(tp.attn_bwd_mask.fixed_s, k.fixed_s);
  // The synthetic fused launch does more per block than the mask one: regen costs more.
  EXPECT_GT(tp.attn_bwd_regen.seconds, tp.attn_bwd_mask.seconds);
  // Without the backward section the derived backward, which differs.
  const db::model::Profile base = bwd_profile([&] {
    json b = j;
    b["kernels"].erase("attention_bwd_wgmma");
    return b;
  }());
  const db::model::TrainPrediction td = db::model::predict_train(m, base, w, {});
  EXPECT_EQ(td.attn_bwd_mask.source.rfind("derived(", 0), 0u) << td.attn_bwd_mask.source;
  EXPECT_NE(td.attn_bwd_regen.source.find("+fwd(fused-mask)"), std::string::npos) << td.attn_bwd_regen.source;
  EXPECT_NE(td.attn_bwd_mask.seconds, tp.attn_bwd_mask.seconds);
  // A key without its ncu block: R 5 has no fused launch, so regen is the measured mask + the forward's difference.
  db::Workload w5 = w;
  w5.rounds = 5;
  const db::model::TrainPrediction t5 = db::model::predict_train(m, p, w5, {});
  EXPECT_EQ(t5.attn_bwd_mask.source, "ncu(bwd)");
  EXPECT_EQ(t5.attn_bwd_regen.source, "ncu(bwd)+fwd(fused-mask)");
  json nomask = j;
  nomask["sass"]["wgmma_bwd_mask_causal"]["ncu"] = nullptr;
  EXPECT_EQ(db::model::predict_train(m, bwd_profile(nomask), w, {}).attn_bwd_mask.source.rfind("derived(", 0), 0u);
  // Static demand only (--demand sass), or the mma kernel's step: derived.
  db::model::Profile sass = p;
  sass.use_ncu = false;
  EXPECT_EQ(db::model::predict_train(m, sass, w, {}).attn_bwd_mask.source.rfind("derived(", 0), 0u);
  db::Workload wm = w;
  wm.attention_kernel = "mma";
  EXPECT_EQ(db::model::predict_train(m, p, wm, {}).attn_bwd_mask.source.rfind("derived(", 0), 0u);
  EXPECT_THROW(db::model::attention_bwd_kernel_time(m, base, w, "mask", {}), db::UsageError);
  EXPECT_THROW(db::model::attention_bwd_kernel_time(m, p, w5, "fused", {}), db::UsageError);
}

// The measured backward scales with SQ as its visited blocks: x4 from SQ 8K to 16K non-causal; causal (nkb + 1) /
// (2 nkb) of non-causal, about half at large SQ.
TEST(TrainStep, MeasuredBackwardScalesByVisitedBlocks) {
  const db::model::Machine m = h200_machine();
  const db::model::Profile p = bwd_profile(dropbench_test::bwd_profile_json());
  db::model::Options o;
  o.calibrated = false;  // no CTA overhead: unit times only
  auto kt = [&](int64_t sq, bool causal) { return db::model::attention_bwd_kernel_time(m, p, bwd_w(sq, causal), "mask", o); };
  for (int64_t sq : {8192, 16384, 32768}) {
    const db::Workload nc = bwd_w(sq, false), c = bwd_w(sq, true);
    const double nkb = static_cast<double>(sq / 128);
    EXPECT_DOUBLE_EQ(visited_blocks(c) / visited_blocks(nc), (nkb + 1) / (2 * nkb)) << sq;
    EXPECT_DOUBLE_EQ(kt(sq, true).work / kt(sq, false).work, (nkb + 1) / (2 * nkb)) << sq;
    // The tensor-core unit's time follows the visited blocks (x the grid's tail, >= 1).
    const double r = kt(sq, true).unit_seconds("mma") / kt(sq, false).unit_seconds("mma");
    EXPECT_GT(r, 0.45) << sq;
    EXPECT_LT(r, 0.6) << sq;
  }
  const double r2 = kt(16384, false).unit_seconds("mma") / kt(8192, false).unit_seconds("mma");
  EXPECT_NEAR(r2, 4.0, 0.2);
  EXPECT_DOUBLE_EQ(kt(16384, false).work / kt(8192, false).work, 4.0);
}

// Energy: at the backward key's own power where the profile has it, else the forward none kernel's per element x 2.5.
TEST(TrainStep, MeasuredBackwardEnergy) {
  const db::model::Machine m = h200_machine();
  ASSERT_TRUE(m.has_power());
  json j = dropbench_test::bwd_profile_json();
  j["power"] = {{"wgmma_none_causal", {{"dyn_j_per_work", 2e-12}, {"mean_w", 600}, {"source", "synthetic"}}}};
  const db::Workload w = bwd_w(8192, true);
  const db::model::KernelTime k = db::model::attention_bwd_kernel_time(m, bwd_profile(j), w, "mask", {});
  EXPECT_NEAR(k.energy_j, k.work * db::kAttentionBwdFlopRatio * 2e-12, 1e-12 * k.energy_j);
  EXPECT_EQ(k.key, "wgmma_bwd_mask_causal");
  j["power"]["wgmma_bwd_mask_causal"] = {{"dyn_j_per_work", 3e-12}, {"mean_w", 650}, {"source", "synthetic"}};
  const db::model::KernelTime k2 = db::model::attention_bwd_kernel_time(m, bwd_profile(j), w, "mask", {});
  EXPECT_NEAR(k2.energy_j, k2.work * 3e-12, 1e-12 * k2.energy_j);
  // The step's backward adds no energy of its own for the memory-bound launches without power data.
  const db::model::TrainPrediction tp = db::model::predict_train(m, bwd_profile(j), w, {});
  EXPECT_NEAR(tp.attn_bwd_mask.energy_j, k2.energy_j, 1e-12 * k2.energy_j);
}

// Bad fields of kernels.attention_bwd_wgmma: one line naming the field.
TEST(TrainStep, BadBackwardProfileFieldsNameTheField) {
  const json good = dropbench_test::bwd_profile_json();
  auto err = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    return usage_error([&] { bwd_profile(j); });
  };
  for (const auto& [field, edit] : std::vector<std::pair<std::string, std::function<void(json&)>>>{
           {"kernels.attention_bwd_wgmma.mma_efficiency", [](json& j) { j["kernels"]["attention_bwd_wgmma"].erase("mma_efficiency"); }},
           {"kernels.attention_bwd_wgmma.block_rows", [](json& j) { j["kernels"]["attention_bwd_wgmma"]["block_rows"] = -64; }},
           {"kernels.attention_bwd_wgmma.sass_key.fused", [](json& j) { j["kernels"]["attention_bwd_wgmma"]["sass_key"].erase("fused"); }},
           {"kernels.attention_bwd_wgmma.issue_efficiency.source",
            [](json& j) { j["kernels"]["attention_bwd_wgmma"]["issue_efficiency"].erase("source"); }},
           {"kernels.attention_bwd_wgmma.cta_overhead_cycles.value",
            [](json& j) { j["kernels"]["attention_bwd_wgmma"]["cta_overhead_cycles"]["value"] = "many"; }},
           {"sass.wgmma_bwd_mask.ncu.workload.sq", [](json& j) { j["sass"]["wgmma_bwd_mask"]["ncu"]["workload"]["sq"] = -1; }}}) {
    const std::string e = err(edit);
    EXPECT_NE(e.find(field), std::string::npos) << field << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(TrainStep, PredictTrainTimesTheFp8CastsByTheirBytes) {
  const db::model::Machine m = dropbench_test::tiny_machine();
  const db::model::Profile p = dropbench_test::tiny_profile();
  db::Workload w = dropbench_test::tiny_workload(db::builtin_config().workload);
  ASSERT_EQ(w.dtype, "fp8");
  const db::model::TrainPrediction tp = db::model::predict_train(m, p, w, {});
  // The measured step's casts, in its order (src/block/train_step.cpp).
  std::vector<std::string> names;
  for (const auto& c : tp.casts) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"cast-o", "cast-dy", "transpose-w-out", "cast-dqkv", "transpose-w-qkv",
                                             "transpose-x"}));
  // cast-dy (bf16 in, fp8 copy and transpose out: 4 B per element) and transpose-x (fp8 in, transpose out: 2 B)
  // cover the same [B*SQ, E] elements: twice the bytes, twice the time.
  ASSERT_GT(tp.casts[5].seconds, 0);
  EXPECT_NEAR(tp.casts[1].seconds / tp.casts[5].seconds, 2.0, 1e-12);
  EXPECT_DOUBLE_EQ(tp.casts[1].work, 4.0 * w.batch * w.sq * w.embed);
  // Every strategy lists them: O's cast between the attention and the output projection, the others before the
  // GEMMs that read them.
  auto index = [](const std::vector<db::model::PhaseTime>& v, const std::string& n) {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i].name == n) return static_cast<int>(i);
    return -1;
  };
  for (const db::model::StepTime& s : tp.strategies) {
    EXPECT_EQ(index(s.fwd, "cast-o") + 1, index(s.fwd, "gemm-out")) << s.name;
    EXPECT_LT(index(s.bwd, "cast-dqkv"), index(s.bwd, "gemm-dx")) << s.name;
    EXPECT_GE(index(s.bwd, "transpose-x"), 0) << s.name;
    if (s.name == "regen-overlap")
      EXPECT_EQ(index(s.bwd, "cast-dy"), -1) << "inside the GEMM side of the overlap";
    else
      EXPECT_EQ(index(s.bwd, "cast-dy") + 2, index(s.bwd, "gemm-out-dx")) << s.name;
  }
  // The regen-overlap's GEMM side carries the casts: the overlap lasts at least the casts and the two GEMMs.
  const double side = tp.casts[1].seconds + tp.casts[2].seconds + tp.gemm_out_dx.seconds + tp.gemm_out_dw.seconds;
  const db::model::StepTime* regen = tp.strategy("regen-overlap");
  ASSERT_TRUE(regen && !regen->bwd.empty());
  EXPECT_EQ(regen->bwd[0].name, "gemm-out-dx+dw || rng");
  EXPECT_GE(regen->bwd[0].seconds, side * (1 - 1e-12));
  // bf16 GEMMs read bf16: no casts.
  w.dtype = "bf16";
  const db::model::TrainPrediction tb = db::model::predict_train(m, p, w, {});
  EXPECT_TRUE(tb.casts.empty());
  for (const db::model::StepTime& s : tb.strategies) EXPECT_EQ(index(s.bwd, "cast-dy"), -1) << s.name;
}

TEST(TrainStep, RecommendTrainRanksByBudget) {
  const db::model::Machine m = dropbench_test::tiny_machine();
  const db::model::Profile p = dropbench_test::tiny_profile();
  const db::Workload w = dropbench_test::tiny_workload(db::builtin_config().workload);
  const std::map<std::string, uint64_t> bytes = {
      {"fused", 0}, {"stored", 1000}, {"regen-overlap", 10}, {"fused-write", 1000}};
  const auto all = db::model::recommend_train(m, p, w, {5, 7}, {}, bytes, 4, 0, nullptr);
  ASSERT_EQ(all.ranking.size(), 8u);
  for (size_t i = 1; i < all.ranking.size(); ++i) EXPECT_LE(all.ranking[i - 1].seconds, all.ranking[i].seconds);
  for (const auto& e : all.ranking) EXPECT_TRUE(e.fits);
  EXPECT_EQ(all.reference_rounds, 7);
  ASSERT_FALSE(all.ladder.empty());
  const auto tight = db::model::recommend_train(m, p, w, {5, 7}, {}, bytes, 4, 100, nullptr);
  for (const auto& e : tight.ranking) EXPECT_EQ(e.fits, e.mask_bytes <= 100) << e.strategy;
  const db::model::TrainEntry* best = tight.best_within_budget();
  ASSERT_NE(best, nullptr);
  EXPECT_LE(best->mask_bytes, 100u);
  for (const auto& e : tight.ranking)
    if (e.fits) EXPECT_GE(e.seconds, best->seconds);
  // The ladder's best within the budget is the ranking's at the reference round count.
  const db::model::BudgetStep* step = db::model::best_within(tight.ladder, 100);
  ASSERT_NE(step, nullptr);
  double best7 = 1e30;
  for (const auto& e : tight.ranking)
    if (e.fits && e.rounds == 7) best7 = std::min(best7, e.seconds);
  EXPECT_DOUBLE_EQ(step->seconds, best7);
}

// ---- the command line ----

TEST(TrainStep, RunDryPlansTheTrainingStep) {
  const json r = dry_report("run --config '" + preset("llama3-70b") +
                            "' --set sweep.sq=[8192] --set sweep.rounds=[7] --set workload.pass=train");
  ASSERT_EQ(r.at("points").size(), 1u);
  const json& pt = r.at("points")[0];
  const json& tr = pt.at("derived").at("train");
  EXPECT_EQ(tr.at("layers"), 80);
  const json& st = tr.at("strategies");
  const uint64_t mask = st.at("stored").at("block_mask_bytes").get<uint64_t>();
  EXPECT_GT(mask, 0u);
  EXPECT_EQ(st.at("stored").at("held_bytes_per_layer").get<uint64_t>(), mask);
  EXPECT_EQ(st.at("stored").at("network_mask_bytes").get<uint64_t>(), 80 * mask);
  EXPECT_EQ(st.at("fused-write").at("network_mask_bytes").get<uint64_t>(), 80 * mask);
  EXPECT_EQ(st.at("regen-overlap").at("network_mask_bytes").get<uint64_t>(), mask);
  EXPECT_EQ(st.at("fused").at("network_mask_bytes").get<uint64_t>(), 0u);
  // The plan's buffers: the forward's, the training step's, one mask.
  const json& buf = pt.at("derived").at("plan").at("memory").at("buffers");
  for (const char* b : {"x", "qkv", "o", "lse", "w_out", "dy", "d_o", "dqkv", "dx", "dw", "bwd_workspace", "full_mask",
                        "o_t", "dy_in", "dy_t", "dqkv_t", "x_t", "w_t", "w_out_t", "grad_ref"})
    EXPECT_TRUE(buf.contains(b)) << b;  // the preset is fp8: the transposed copies; validation is on by default
  EXPECT_FALSE(buf.contains("o_ref"));   // the forward's O copy: a training point compares gradients instead
  EXPECT_EQ(buf.at("full_mask").get<uint64_t>(), mask);
  // Every strategy as a variant with the model's step, forward and backward.
  std::vector<std::string> vs;
  for (const json& v : pt.at("variants")) {
    vs.push_back(v.at("name"));
    ASSERT_TRUE(v.at("derived").contains("model_us")) << v.dump();
    EXPECT_NEAR(v.at("derived").at("model_us").get<double>(),
                v.at("derived").at("model_fwd_us").get<double>() + v.at("derived").at("model_bwd_us").get<double>(),
                0.01 * v.at("derived").at("model_us").get<double>());
  }
  EXPECT_EQ(vs, (std::vector<std::string>{"fused", "stored", "regen-overlap", "fused-write"}));
  ASSERT_TRUE(tr.contains("verdict"));
  EXPECT_FALSE(tr.at("verdict").at("text").get<std::string>().empty());
  EXPECT_TRUE(tr.at("verdict").at("best_within_budget").is_string());
}

TEST(TrainStep, RunDryMaskBudgetAndSweepAxis) {
  // A budget of 1 GiB: the held strategies (80 masks) do not fit; the verdict's pick is within it.
  const json r = dry_report("run --config '" + preset("llama3-70b") +
                            "' --set sweep.sq=[8192] --set sweep.rounds=[7] --set workload.pass=train --mask-budget 1");
  const json& d = r.at("points")[0].at("derived");
  EXPECT_TRUE(d.at("skipped_pipelines").contains("stored"));
  EXPECT_TRUE(d.at("skipped_pipelines").contains("fused-write"));
  EXPECT_FALSE(d.at("train").at("strategies").at("stored").at("fits_budget").get<bool>());
  EXPECT_TRUE(d.at("train").at("strategies").at("stored").contains("model_us"));  // skipped, still weighed
  const std::string pick = d.at("train").at("verdict").at("best_within_budget");
  EXPECT_TRUE(pick == "fused" || pick == "regen-overlap") << pick;
  // pass as a sweep axis: a forward point and a training point in one run.
  const json s = dry_report("run --set sweep.sq=[2048] --set 'sweep.pass=[fwd,train]'");
  ASSERT_EQ(s.at("points").size(), 2u);
  EXPECT_EQ(s.at("points")[0].at("axes").at("pass"), "fwd");
  EXPECT_FALSE(s.at("points")[0].at("derived").contains("train"));
  EXPECT_EQ(s.at("points")[1].at("axes").at("pass"), "train");
  EXPECT_TRUE(s.at("points")[1].at("derived").contains("train"));
  EXPECT_EQ(s.at("points")[1].at("derived").at("train").at("layers_from"), "not given: one layer");
}

TEST(TrainStep, RunDryTrainPointRules) {
  // The dW GEMMs contract over the tokens: batch * sq = 1000 is skipped with the rule, 1024 is planned.
  const json r = dry_report("run --set workload.pass=train --set 'sweep.sq=[1000,1024]'");
  ASSERT_EQ(r.at("skipped").size(), 1u) << r.at("skipped").dump();
  const std::string why = r.at("skipped")[0].at("reason");
  EXPECT_NE(why.find("workload.sq"), std::string::npos) << why;
  EXPECT_NE(why.find("multiple of 16"), std::string::npos) << why;
  ASSERT_EQ(r.at("points").size(), 1u);
  // Six GEMM objects (QKV, output projection, their dX and dW), each with its 64 MiB cuBLASLt workspace.
  const json& buf = r.at("points")[0].at("derived").at("plan").at("memory").at("buffers");
  EXPECT_EQ(buf.at("gemm_workspaces").get<uint64_t>(), uint64_t{6} << 26);
  // Every strategy is planned (fused-write too).
  EXPECT_FALSE(r.at("points")[0].at("derived").contains("skipped_pipelines"));
}

TEST(TrainStep, BadInputIsOneLineAndLeavesTheReport) {
  const auto out = temp_path("keep");
  {
    std::ofstream f(out);
    f << "{\"keep\": true}";
  }
  auto check = [&](const std::string& args, const std::string& field) {
    const auto r = dropbench_test::run_dropbench(args + " -q -o '" + out.string() + "'");
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
    std::ifstream f(out);
    const std::string body((std::istreambuf_iterator<char>(f)), {});
    EXPECT_EQ(body, "{\"keep\": true}") << args;
  };
  check("run --set workload.pass=bwd --dry-run", "workload.pass");
  check("run --dry-run --pipelines stored", "--pipelines");       // a strategy of pass train at a forward point
  check("run --dry-run --set workload.layers=5000", "workload.layers");
  std::filesystem::remove(out);
  const auto rec = dropbench_test::run_dropbench("recommend --shape b=1,sq=1024,e=1024,hq=8,hkv=8,dh=128 --pass bwd");
  EXPECT_EQ(rec.code, 2);
  EXPECT_NE(rec.err.find("--pass"), std::string::npos) << rec.err;
  const auto rl = dropbench_test::run_dropbench("recommend --shape b=1,sq=1024,e=1024,hq=8,hkv=8,dh=128 --layers 80");
  EXPECT_EQ(rl.code, 2);
  EXPECT_NE(rl.err.find("--pass train"), std::string::npos) << rl.err;
  // A budget past the range, or below one byte, is refused, not read as "no budget".
  for (const char* gib : {"1e30", "1e-12"}) {
    const auto rb = dropbench_test::run_dropbench(
        std::string("recommend --shape b=1,sq=1024,e=1024,hq=8,hkv=8,dh=128 --pass train --mask-budget ") + gib);
    EXPECT_EQ(rb.code, 2) << gib;
    EXPECT_NE(rb.err.find("--mask-budget"), std::string::npos) << rb.err;
  }
  // --pipelines: an unknown name or an empty list is refused naming the option.
  for (const std::string& l : {"foo", "''"}) {
    const auto rp = dropbench_test::run_dropbench("run --dry-run -q --set workload.pass=train --pipelines " + l);
    EXPECT_EQ(rp.code, 2) << l;
    EXPECT_EQ(rp.err.rfind("dropbench: error: --pipelines: ", 0), 0u) << rp.err;
  }
}

TEST(TrainStep, RecommendTrainJson) {
  const auto r = dropbench_test::run_dropbench(
      "recommend --shape b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128,causal=1 --pass train --layers 80 --mask-budget 4 "
      "--rounds 5,7 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("pass"), "train");
  EXPECT_EQ(j.at("ranking").size(), 8u);
  for (const json& e : j.at("ranking"))
    EXPECT_EQ(e.at("fits_budget").get<bool>(), e.at("network_mask_bytes").get<uint64_t>() <= (uint64_t{4} << 30));
  ASSERT_TRUE(j.at("best_within_budget").is_object());
  EXPECT_NE(j.at("best_within_budget").at("strategy"), "stored");
  EXPECT_FALSE(j.at("verdict").at("ladder").empty());
  // The Blackwell projection with the H200 as the reference.
  const auto b = dropbench_test::run_dropbench(
      "recommend --shape b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128,causal=1 --pass train --layers 80 --rounds 7 "
      "--machine configs/machines/blackwell-projection.json --format json");
  ASSERT_EQ(b.code, 0) << b.err;
  const json jb = json::parse(b.out);
  EXPECT_TRUE(jb.contains("reference"));
  EXPECT_FALSE(jb.at("reference").at("ladder").empty());
}
