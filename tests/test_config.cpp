// Config parsing, validation, --set overrides and sweep expansion (src/config.cpp). CPU only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "src/core/config.hpp"
#include "src/core/workload_params.hpp"
#include "test_paths.hpp"

namespace db = dropbench;
using db::json;

namespace {

std::string configs_dir() { return dropbench_test::source_path("configs"); }

// Runs fn, expects a UsageError, returns its message ("" if none was thrown, which fails the test).
template <class F>
std::string usage_error(F&& fn) {
  try {
    fn();
  } catch (const db::UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected UsageError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected UsageError, nothing was thrown";
  return {};
}

db::Config parse(const std::string& text) { return db::config_from_json(json::parse(text), "<test>"); }

std::string parse_error(const std::string& text) {
  return usage_error([&] { parse(text); });
}

std::string set_error(const std::string& assignment) {
  return usage_error([&] {
    db::Config c = db::builtin_config();
    db::apply_override(c, assignment);
  });
}

#define EXPECT_CONTAINS(haystack, needle)                                                              \
  do {                                                                                                 \
    const std::string h_ = (haystack);                                                                 \
    EXPECT_NE(h_.find(needle), std::string::npos) << "message: \"" << h_ << "\"\nlacks: " << (needle); \
  } while (0)

// Field-by-field comparison (the structs have no operator==).
void expect_same(const db::Workload& a, const db::Workload& b) {
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.embed, b.embed);
  EXPECT_EQ(a.q_heads, b.q_heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.sq, b.sq);
  EXPECT_EQ(a.causal, b.causal);
  EXPECT_EQ(a.dropout_p, b.dropout_p);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.threshold_bits, b.threshold_bits);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.dropout_dtype, b.dropout_dtype);
  EXPECT_EQ(a.pipeline, b.pipeline);
  EXPECT_EQ(a.chunk, b.chunk);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.offset, b.offset);
}

void expect_same(const db::Config& a, const db::Config& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  expect_same(a.workload, b.workload);
  ASSERT_EQ(a.sweep.size(), b.sweep.size());
  for (size_t i = 0; i < a.sweep.size(); ++i) {
    EXPECT_EQ(a.sweep[i].first, b.sweep[i].first);
    EXPECT_EQ(json(a.sweep[i].second), json(b.sweep[i].second)) << a.sweep[i].first;
  }
  EXPECT_EQ(a.measure.min_samples, b.measure.min_samples);
  EXPECT_EQ(a.measure.max_samples, b.measure.max_samples);
  EXPECT_EQ(a.measure.min_time, b.measure.min_time);
  EXPECT_EQ(a.measure.max_noise, b.measure.max_noise);
  EXPECT_EQ(a.measure.timeout, b.measure.timeout);
  EXPECT_EQ(a.measure.warmup, b.measure.warmup);
  EXPECT_EQ(a.measure.cold, b.measure.cold);
  EXPECT_EQ(a.measure.repeats, b.measure.repeats);
  EXPECT_EQ(a.measure.repeat_gap, b.measure.repeat_gap);
  EXPECT_EQ(a.measure.keep_series, b.measure.keep_series);
}

std::vector<json> vals(std::initializer_list<json> l) { return std::vector<json>(l); }

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Parsing and defaults

TEST(Config, EmptyObjectGivesDefaults) {
  const db::Config c = parse("{}");
  expect_same(c.workload, db::Workload{});
  EXPECT_TRUE(c.sweep.empty());
  EXPECT_EQ(c.name, "default");
  EXPECT_EQ(c.source, "<test>");
  EXPECT_EQ(c.measure.max_samples, db::MeasureSettings{}.max_samples);
}

TEST(Config, ParsesEveryField) {
  const db::Config c = parse(R"({
    "name": "n", "description": "d",
    "workload": {"batch": 2, "embed": 8192, "q_heads": 64, "kv_heads": 8, "head_dim": 64, "sq": "8K",
                 "causal": true, "dropout_p": 0, "dtype": "bf16", "rounds": 10, "threshold_bits": 32,
                 "layout": "bits", "elements": "1G", "dropout_dtype": "fp32", "pipeline": "chunked",
                 "chunk": 512, "seed": "0xDEADBEEF12345678", "offset": 4294967295},
    "measure": {"min_samples": 3, "max_samples": 3, "min_time": 0, "max_noise": 1, "timeout": 0.5,
                "warmup": 0, "cold": true}})");
  EXPECT_EQ(c.name, "n");
  EXPECT_EQ(c.description, "d");
  EXPECT_EQ(c.workload.batch, 2);
  EXPECT_EQ(c.workload.embed, 8192);
  EXPECT_EQ(c.workload.q_heads, 64);
  EXPECT_EQ(c.workload.head_dim, 64);
  EXPECT_EQ(c.workload.sq, 8192);
  EXPECT_TRUE(c.workload.causal);
  EXPECT_EQ(c.workload.dropout_p, 0.0);
  EXPECT_EQ(c.workload.dtype, "bf16");
  EXPECT_EQ(c.workload.rounds, 10);
  EXPECT_EQ(c.workload.threshold_bits, 32);
  EXPECT_EQ(c.workload.layout, "bits");
  EXPECT_EQ(c.workload.elements, int64_t{1} << 30);
  EXPECT_EQ(c.workload.dropout_dtype, "fp32");
  EXPECT_EQ(c.workload.pipeline, "chunked");
  EXPECT_EQ(c.workload.chunk, 512);
  EXPECT_EQ(c.workload.seed, 0xDEADBEEF12345678ULL);
  EXPECT_EQ(c.workload.offset, 4294967295u);
  EXPECT_EQ(c.measure.min_samples, 3);
  EXPECT_EQ(c.measure.max_samples, 3);
  EXPECT_EQ(c.measure.max_noise, 1.0);
  EXPECT_TRUE(c.measure.cold);
}

TEST(Config, SeedAcceptsLargeNumbersAndHex) {
  EXPECT_EQ(parse(R"({"workload": {"seed": 18446744073709551615}})").workload.seed, ~0ULL);
  EXPECT_EQ(parse(R"({"workload": {"seed": "0x10"}})").workload.seed, 16u);
  EXPECT_EQ(parse(R"({"workload": {"seed": 0}})").workload.seed, 0u);
  EXPECT_CONTAINS(parse_error(R"({"workload": {"seed": -1}})"), "workload.seed");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"seed": "0xZZ"}})"), "workload.seed");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"seed": "0x1ffffffffffffffff"}})"), "out of range");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"offset": 4294967296}})"), "workload.offset");
}

TEST(Config, BoundariesAreInclusiveWhereDocumented) {
  EXPECT_NO_THROW(parse(R"({"workload": {"sq": 1}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"sq": 1048576}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"elements": 17179869184}})"));  // 2^34
  EXPECT_NO_THROW(parse(R"({"workload": {"dropout_p": 0.0}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"dropout_p": 0.999}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"embed": 64}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"embed": 65536}})"));
  EXPECT_NO_THROW(parse(R"({"workload": {"sq": 4096.0}})"));  // integral float is an integer
  EXPECT_CONTAINS(parse_error(R"({"workload": {"sq": 1048577}})"), "workload.sq");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"elements": 17179869185}})"), "workload.elements");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"sq": 4096.5}})"), "must be an integer");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"embed": 4100}})"), "multiple of 16");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"batch": 4097}})"), "workload.batch");
  EXPECT_CONTAINS(parse_error(R"({"workload": {"chunk": -1}})"), "workload.chunk");
  EXPECT_CONTAINS(parse_error(R"({"measure": {"timeout": 0}})"), "measure.timeout");
  EXPECT_CONTAINS(parse_error(R"({"measure": {"min_time": 3601}})"), "measure.min_time");
  EXPECT_CONTAINS(parse_error(R"({"measure": {"warmup": 10001}})"), "measure.warmup");
}

// ---------------------------------------------------------------------------------------------------
// Bad inputs: each must name the field path (and the message must be one line).

struct BadCase {
  const char* what;
  const char* json_text;
  const char* path;       // must appear in the message
  const char* also = "";  // and so must this (value / allowed range)
};

class BadConfig : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfig, ThrowsUsageErrorNamingThePath) {
  const BadCase& b = GetParam();
  const std::string msg = parse_error(b.json_text);
  EXPECT_CONTAINS(msg, b.path);
  EXPECT_CONTAINS(msg, b.also);
  EXPECT_EQ(msg.rfind("config: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Config, BadConfig,
    ::testing::Values(
        BadCase{"unknown_top_level_key", R"({"naem": "x"})", "naem", "allowed: name, description, workload"},
        BadCase{"unknown_workload_key", R"({"workload": {"sqq": 1}})", "workload.sqq", "allowed: batch, embed"},
        BadCase{"unknown_measure_key", R"({"measure": {"samples": 1}})", "measure.samples", "min_samples"},
        BadCase{"unknown_sweep_axis", R"({"sweep": {"seqlen": [1]}})", "sweep.seqlen", "allowed: batch"},
        BadCase{"seed_not_sweepable", R"({"sweep": {"seed": [1, 2]}})", "sweep.seed", "not sweepable"},
        BadCase{"wrong_type_int", R"({"workload": {"sq": "abc"}})", "workload.sq", "must be an integer"},
        BadCase{"wrong_type_bool", R"({"workload": {"causal": 1}})", "workload.causal", "must be a boolean"},
        BadCase{"wrong_type_string", R"({"workload": {"dtype": 8}})", "workload.dtype", "must be a string"},
        BadCase{"wrong_type_section", R"({"workload": [1]})", "workload", "must be an object"},
        BadCase{"wrong_type_name", R"({"name": 5})", "name", "must be a string"},
        BadCase{"sq_zero", R"({"workload": {"sq": 0}})", "workload.sq",
                "0 is out of range (allowed: [1, 1048576])"},
        BadCase{"dropout_p_one", R"({"workload": {"dropout_p": 1.0}})", "workload.dropout_p", "allowed: [0, 1)"},
        BadCase{"dropout_p_negative", R"({"workload": {"dropout_p": -0.1}})", "workload.dropout_p", "-0.1"},
        BadCase{"rounds_4", R"({"workload": {"rounds": 4}})", "workload.rounds", db::kPhiloxRoundsText},
        BadCase{"attention_kernel_bogus", R"({"workload": {"attention_kernel": "fa3"}})", "workload.attention_kernel",
                "allowed: auto, wgmma, mma"},
        BadCase{"pass_bogus", R"({"workload": {"pass": "back"}})", "workload.pass",
                "allowed: fwd, bwd, fwd+bwd for attention; fwd, train for run"},
        BadCase{"attention_pass_renamed", R"({"workload": {"attention_pass": "bwd"}})", "workload.attention_pass",
                "renamed: use workload.pass"},
        BadCase{"threshold_bits_12", R"({"workload": {"threshold_bits": 12}})", "workload.threshold_bits",
                db::kThresholdBitsText},
        BadCase{"kv_heads_not_dividing", R"({"workload": {"q_heads": 32, "kv_heads": 12}})", "workload.kv_heads",
                "does not divide q_heads = 32"},
        BadCase{"head_dim_96", R"({"workload": {"head_dim": 96}})", "workload.head_dim", db::kHeadDimsText},
        BadCase{"bad_layout", R"({"workload": {"layout": "tiles"}})", "workload.layout", "tile, bits, u8, i32"},
        BadCase{"bad_dtype", R"({"workload": {"dtype": "fp16"}})", "workload.dtype", "fp8, bf16"},
        BadCase{"bad_dropout_dtype", R"({"workload": {"dropout_dtype": "fp8"}})", "workload.dropout_dtype",
                "fp32"},
        BadCase{"bad_pipeline", R"({"workload": {"pipeline": "fast"}})", "workload.pipeline", "overlap"},
        BadCase{"pow2_not_power", R"({"sweep": {"sq": {"pow2": [2048, 3000]}}})", "sweep.sq",
                "3000 is not a power of two"},
        BadCase{"pow2_reversed", R"({"sweep": {"sq": {"pow2": [4096, 2048]}}})", "sweep.sq", "lo > hi"},
        BadCase{"pow2_on_string_axis", R"({"sweep": {"dtype": {"pow2": [1, 2]}}})", "sweep.dtype", "integer axis"},
        BadCase{"pow2_value_invalid", R"({"sweep": {"head_dim": {"pow2": [64, 256]}}})", "sweep.head_dim", "256"},
        BadCase{"empty_sweep_list", R"({"sweep": {"sq": []}})", "sweep.sq", "empty list"},
        BadCase{"range_step_zero", R"({"sweep": {"sq": {"range": [1024, 8192, 0]}}})", "sweep.sq", "step <= 0"},
        BadCase{"range_too_many", R"({"sweep": {"sq": {"range": [1, 1048576, 1]}}})", "sweep.sq", "at most 10000"},
        BadCase{"sweep_bad_form", R"({"sweep": {"sq": {"log": [1, 2]}}})", "sweep.sq.log", "pow2, range"},
        BadCase{"sweep_value_out_of_range", R"({"sweep": {"sq": [2048, 0]}})", "sweep.sq[1]", "out of range"},
        BadCase{"sweep_nested_list", R"({"sweep": {"sq": [[1]]}})", "sweep.sq[0]", "must be a scalar"},
        BadCase{"max_noise_zero", R"({"measure": {"max_noise": 0}})", "measure.max_noise", "allowed: (0, 1]"},
        BadCase{"max_below_min_samples", R"({"measure": {"min_samples": 100, "max_samples": 50}})",
                "measure.max_samples", "min_samples = 100"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.what); });

TEST(Config, TopLevelMustBeObject) {
  EXPECT_CONTAINS(usage_error([] { db::config_from_json(json::array(), "x.json"); }), "x.json");
}

TEST(Config, LoadConfigReportsMissingFileAndBadJson) {
  EXPECT_CONTAINS(usage_error([] { db::load_config("/nonexistent/dir/x.json"); }), "/nonexistent/dir/x.json");
  const std::string path = testing::TempDir() + "dropbench_bad_config.json";
  { std::ofstream(path) << "{\"workload\": {\"sq\": 1,}}"; }
  const std::string msg = usage_error([&] { db::load_config(path); });
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "not JSON");
  std::filesystem::remove(path);
}

// A directory is named as one, not read as an empty file ("invalid JSON ... unexpected end of input").
TEST(Config, LoadConfigOfADirectorySaysSo) {
  const std::string dir = testing::TempDir() + "dropbench_config_dir";
  std::filesystem::create_directories(dir);
  const std::string msg = usage_error([&] { db::load_config(dir); });
  EXPECT_CONTAINS(msg, dir);
  EXPECT_CONTAINS(msg, "is a directory");
  EXPECT_EQ(msg.find("not JSON"), std::string::npos) << msg;
  std::filesystem::remove(dir);
}

TEST(Config, LoadConfigNamesConfigAfterFileWhenNameMissing) {
  const std::string path = testing::TempDir() + "my_sweep.json";
  { std::ofstream(path) << R"({"workload": {"sq": 1024}})"; }
  const db::Config c = db::load_config(path);
  EXPECT_EQ(c.name, "my_sweep");
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.workload.sq, 1024);
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------------------------------
// Axis expansion

TEST(Sweep, AxisNamesAreAllWorkloadFieldsButSeedAndOffset) {
  const auto& a = db::axis_names();
  EXPECT_EQ(a.size(), 19u);
  EXPECT_EQ(a.front(), "batch");
  EXPECT_EQ(a.back(), "attention_kernel");
  EXPECT_EQ(std::count(a.begin(), a.end(), "seed"), 0);
  EXPECT_EQ(std::count(a.begin(), a.end(), "offset"), 0);
  EXPECT_EQ(std::count(a.begin(), a.end(), "dropout_p"), 1);
  // Every axis name is a workload key in to_json (pass and layers are written when not at their defaults).
  db::Workload set;
  set.pass = "train";
  set.layers = 1;
  const json w = db::to_json(set);
  for (const auto& name : a) EXPECT_TRUE(w.contains(name)) << name;
}

TEST(Sweep, Pow2ExpandsInclusive) {
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"({"pow2": [2048, 65536]})"))),
            json::parse("[2048, 4096, 8192, 16384, 32768, 65536]"));
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"({"pow2": [1024, 1024]})"))), json::parse("[1024]"));
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"({"pow2": ["2K", "8K"]})"))),
            json::parse("[2048, 4096, 8192]"));
}

TEST(Sweep, RangeExpandsUpToHi) {
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"({"range": [1024, 4096, 1024]})"))),
            json::parse("[1024, 2048, 3072, 4096]"));
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"({"range": [1000, 3500, 1000]})"))),
            json::parse("[1000, 2000, 3000]"));
  EXPECT_EQ(json(db::expand_axis("dropout_p", json::parse(R"({"range": [0, 0.3, 0.1]})"))),
            json::parse("[0.0, 0.1, 0.2, 0.3]"));
}

TEST(Sweep, ListAndScalarNormaliseAndDeduplicate) {
  EXPECT_EQ(json(db::expand_axis("rounds", json::parse("[7, 3, 7, 5, 3]"))), json::parse("[7, 3, 5]"));
  EXPECT_EQ(json(db::expand_axis("sq", json::parse(R"(["8K", 8192, 4096.0])"))), json::parse("[8192, 4096]"));
  EXPECT_EQ(json(db::expand_axis("sq", json(2048))), json::parse("[2048]"));
  EXPECT_EQ(json(db::expand_axis("dtype", json("bf16"))), json::parse(R"(["bf16"])"));
  EXPECT_EQ(json(db::expand_axis("causal", json::parse("[false, true]"))), json::parse("[false, true]"));
  const auto p = db::expand_axis("dropout_p", json::parse("[0, 0.1]"));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_TRUE(p[0].is_number_float());  // normalised to the field's type
  EXPECT_CONTAINS(usage_error([] { db::expand_axis("rounds", json::parse("[3, 4]")); }), "sweep.rounds[1]");
  EXPECT_CONTAINS(usage_error([] { db::expand_axis("nope", json(1)); }), "sweep.nope");
}

TEST(Sweep, ConfigKeepsAxesInFileOrder) {
  const db::Config c = parse(R"({"sweep": {"rounds": [3, 5], "sq": {"pow2": [1024, 4096]}, "dtype": "bf16"}})");
  ASSERT_EQ(c.sweep.size(), 3u);
  EXPECT_EQ(c.sweep[0].first, "rounds");
  EXPECT_EQ(c.sweep[1].first, "sq");
  EXPECT_EQ(c.sweep[2].first, "dtype");
  EXPECT_EQ(json(c.sweep[1].second), json::parse("[1024, 2048, 4096]"));
}

TEST(Sweep, CartesianProductLastAxisFastest) {
  const db::Config c = parse(R"({"sweep": {"sq": [1024, 2048, 4096], "rounds": [3, 7]}})");
  const auto pts = db::expand_sweep(c, {"sq", "rounds"});
  ASSERT_EQ(pts.size(), 6u);
  const int64_t want_sq[] = {1024, 1024, 2048, 2048, 4096, 4096};
  const int64_t want_rounds[] = {3, 7, 3, 7, 3, 7};
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(pts[i].index, i);
    EXPECT_EQ(pts[i].workload.sq, want_sq[i]) << i;
    EXPECT_EQ(pts[i].workload.rounds, want_rounds[i]) << i;
    json want = json::object();
    want["sq"] = want_sq[i];
    want["rounds"] = want_rounds[i];
    EXPECT_EQ(pts[i].axes.dump(), want.dump()) << i;
    // Fields not swept keep the workload value.
    EXPECT_EQ(pts[i].workload.embed, c.workload.embed);
  }
  // The order of `axes`, not of the file, decides which varies fastest.
  const auto rev = db::expand_sweep(c, {"rounds", "sq"});
  ASSERT_EQ(rev.size(), 6u);
  EXPECT_EQ(rev[1].workload.rounds, 3);
  EXPECT_EQ(rev[1].workload.sq, 2048);
  EXPECT_EQ(rev[0].axes.begin().key(), "rounds");
}

TEST(Sweep, ThreeAxesCountAndOrder) {
  const db::Config c = db::load_config(configs_dir() + "/paper-sweep.json");
  const auto pts = db::expand_sweep(c, {"sq", "embed", "rounds"});
  ASSERT_EQ(pts.size(), 6u * 3u * 3u);
  EXPECT_EQ(pts[0].workload.sq, 2048);
  EXPECT_EQ(pts[0].workload.embed, 4096);
  EXPECT_EQ(pts[0].workload.rounds, 3);
  EXPECT_EQ(pts[1].workload.rounds, 5);
  EXPECT_EQ(pts[3].workload.embed, 8192);
  EXPECT_EQ(pts[3].workload.rounds, 3);
  EXPECT_EQ(pts[9].workload.sq, 4096);
  EXPECT_EQ(pts.back().workload.sq, 65536);
  EXPECT_EQ(pts.back().workload.embed, 16384);
  EXPECT_EQ(pts.back().workload.rounds, 7);
  EXPECT_EQ(pts.back().workload.q_heads, 32);  // fixed, not derived from E
}

TEST(Sweep, DefaultsOnlyWhenConfigLacksTheAxis) {
  // rounds 7 is the built-in value, so the command's defaults sweep around it (a config's own value is kept:
  // Config.ExpandSweepKeepsTheConfigsValueOverADefaultSweep).
  const db::Config c = parse(R"({"workload": {"rounds": 7, "layout": "u8"}, "sweep": {"sq": [1024, 2048]}})");
  const std::map<std::string, std::vector<json>> defaults = {{"sq", vals({4096, 8192, 16384})},
                                                             {"rounds", vals({3, 7, 10})}};
  const auto pts = db::expand_sweep(c, {"sq", "rounds", "layout"}, defaults);
  // sq from the config (2 values), rounds from defaults (3 values), layout = the workload value.
  ASSERT_EQ(pts.size(), 6u);
  EXPECT_EQ(pts[0].workload.sq, 1024);
  EXPECT_EQ(pts[0].workload.rounds, 3);
  EXPECT_EQ(pts[2].workload.rounds, 10);
  EXPECT_EQ(pts[3].workload.sq, 2048);
  for (const auto& p : pts) {
    EXPECT_EQ(p.workload.layout, "u8");
    EXPECT_TRUE(p.axes.contains("sq"));
    EXPECT_TRUE(p.axes.contains("rounds"));   // from defaults: recorded
    EXPECT_FALSE(p.axes.contains("layout"));  // single workload value: not recorded
    EXPECT_EQ(p.axes.size(), 2u);
  }
  // rounds 5 (not the built-in 7) is the config's choice: one value, still listed in the axes.
  const db::Config c5 = parse(R"({"workload": {"rounds": 5}, "sweep": {"sq": [1024, 2048]}})");
  const auto p5 = db::expand_sweep(c5, {"sq", "rounds"}, defaults);
  ASSERT_EQ(p5.size(), 2u);
  for (const auto& p : p5) EXPECT_EQ(p.axes.at("rounds"), 5);
}

TEST(Sweep, UnlistedAxesIgnoredAndNoAxesGivesOnePoint) {
  const db::Config c = parse(R"({"workload": {"sq": 777}, "sweep": {"sq": [1024, 2048], "rounds": [3, 5]}})");
  const auto only_rounds = db::expand_sweep(c, {"rounds"});
  ASSERT_EQ(only_rounds.size(), 2u);
  for (const auto& p : only_rounds) {
    EXPECT_EQ(p.workload.sq, 777);  // sweep.sq ignored
    EXPECT_FALSE(p.axes.contains("sq"));
  }
  const auto none = db::expand_sweep(c, {});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].axes.empty());
  EXPECT_EQ(none[0].workload.sq, 777);
  EXPECT_EQ(none[0].workload.rounds, c.workload.rounds);
}

TEST(Sweep, PointThatBreaksCrossFieldRuleNamesThePoint) {
  const db::Config c = parse(R"({"workload": {"q_heads": 32}, "sweep": {"kv_heads": [8, 12]}})");
  const std::string msg = usage_error([&] { db::expand_sweep(c, {"kv_heads"}); });
  EXPECT_CONTAINS(msg, "sweep point {\"kv_heads\":12}");
  EXPECT_CONTAINS(msg, "kv_heads: 12 does not divide q_heads = 32");
  // Also when the rule breaks by combining two axes.
  const db::Config c2 = parse(R"({"workload": {"kv_heads": 8}, "sweep": {"q_heads": [32, 4]}})");
  EXPECT_CONTAINS(usage_error([&] { db::expand_sweep(c2, {"q_heads"}); }), "sweep point {\"q_heads\":4}");
  EXPECT_NO_THROW(db::expand_sweep(c2, {"sq"}));  // q_heads not swept by this command
}

TEST(Sweep, UnknownAxisInCommandListIsAnError) {
  EXPECT_CONTAINS(usage_error([] { db::expand_sweep(db::Config{}, {"seqlen"}); }), "sweep.seqlen");
}

TEST(Sweep, TooManyPointsIsAnError) {
  db::Config c;
  db::apply_override(c, "sweep.sq=range:1:10000:1");
  db::apply_override(c, "sweep.chunk=range:0:9999:1");
  EXPECT_CONTAINS(usage_error([&] { db::expand_sweep(c, {"sq", "chunk"}); }), "at most 1000000");
}

// ---------------------------------------------------------------------------------------------------
// --set overrides

TEST(Override, ScalarsAndSuffixes) {
  db::Config c = db::builtin_config();
  db::apply_override(c, "workload.sq=8K");
  EXPECT_EQ(c.workload.sq, 8192);
  db::apply_override(c, "workload.elements=1G");
  EXPECT_EQ(c.workload.elements, int64_t{1} << 30);
  db::apply_override(c, "workload.elements=64M");
  EXPECT_EQ(c.workload.elements, int64_t{64} << 20);
  db::apply_override(c, "workload.dropout_p=0.25");
  EXPECT_EQ(c.workload.dropout_p, 0.25);
  db::apply_override(c, "workload.dtype=bf16");
  EXPECT_EQ(c.workload.dtype, "bf16");
  db::apply_override(c, "workload.dtype=\"fp8\"");
  EXPECT_EQ(c.workload.dtype, "fp8");
  db::apply_override(c, "workload.causal=true");
  EXPECT_TRUE(c.workload.causal);
  db::apply_override(c, "workload.seed=0x1234");
  EXPECT_EQ(c.workload.seed, 0x1234u);
  db::apply_override(c, "measure.cold=true");
  EXPECT_TRUE(c.measure.cold);
  db::apply_override(c, "measure.min_time=1.5");
  EXPECT_EQ(c.measure.min_time, 1.5);
  db::apply_override(c, "name=my-run");
  EXPECT_EQ(c.name, "my-run");
  db::apply_override(c, "description=42");
  EXPECT_EQ(c.description, "42");
}

TEST(Override, SweepSyntaxes) {
  db::Config c = db::builtin_config();
  const auto axis = [&](const std::string& name) {
    for (const auto& [n, v] : c.sweep)
      if (n == name) return json(v);
    return json();
  };
  db::apply_override(c, "sweep.sq=[2048,4096]");
  EXPECT_EQ(axis("sq"), json::parse("[2048, 4096]"));
  db::apply_override(c, "sweep.sq=pow2:2K:64K");
  EXPECT_EQ(axis("sq"), json::parse("[2048, 4096, 8192, 16384, 32768, 65536]"));
  db::apply_override(c, "sweep.sq=range:1K:4K:1K");
  EXPECT_EQ(axis("sq"), json::parse("[1024, 2048, 3072, 4096]"));
  db::apply_override(c, "sweep.rounds=3,5,7");
  EXPECT_EQ(axis("rounds"), json::parse("[3, 5, 7]"));
  db::apply_override(c, "sweep.sq=[2K,4K]");
  EXPECT_EQ(axis("sq"), json::parse("[2048, 4096]"));
  db::apply_override(c, "sweep.sq=8K");
  EXPECT_EQ(axis("sq"), json::parse("[8192]"));
  db::apply_override(c, "sweep.dtype=fp8,bf16");
  EXPECT_EQ(axis("dtype"), json::parse(R"(["fp8", "bf16"])"));
  db::apply_override(c, "sweep.layout=bits");
  EXPECT_EQ(axis("layout"), json::parse(R"(["bits"])"));
  db::apply_override(c, "sweep.dropout_p=range:0:0.2:0.1");
  EXPECT_EQ(axis("dropout_p"), json::parse("[0.0, 0.1, 0.2]"));
  db::apply_override(c, R"(sweep.embed={"pow2":[4096,16384]})");
  EXPECT_EQ(axis("embed"), json::parse("[4096, 8192, 16384]"));
  // Replaces in place: sq keeps its first position.
  EXPECT_EQ(c.sweep[0].first, "sq");
  db::apply_override(c, "sweep.sq=null");  // removes the axis
  EXPECT_TRUE(axis("sq").is_null());
}

TEST(Override, BadInputsNameTheKey) {
  EXPECT_CONTAINS(set_error("workload.sqq=1"), "workload.sqq");
  EXPECT_CONTAINS(set_error("workload.sqq=1"), "allowed: batch");
  EXPECT_CONTAINS(set_error("wrkload.sq=1"), "wrkload.sq");
  EXPECT_CONTAINS(set_error("measure.colder=true"), "measure.colder");
  EXPECT_CONTAINS(set_error("sweep.seqlen=1,2"), "sweep.seqlen");
  EXPECT_CONTAINS(set_error("sweep.seed=1,2"), "not sweepable");
  EXPECT_CONTAINS(set_error("workload.sq"), "expected KEY=VALUE");
  EXPECT_CONTAINS(set_error("workload.sq=abc"), "workload.sq");
  EXPECT_CONTAINS(set_error("workload.sq=abc"), "must be an integer");
  EXPECT_CONTAINS(set_error("workload.sq=0"), "out of range");
  EXPECT_CONTAINS(set_error("workload.sq=2048,4096"), "sweep.sq");  // hint: sweep it instead
  EXPECT_CONTAINS(set_error("workload.rounds=4"), "workload.rounds");
  EXPECT_CONTAINS(set_error("workload.kv_heads=12"), "does not divide q_heads");
  EXPECT_CONTAINS(set_error("measure.cold=maybe"), "measure.cold");
  EXPECT_CONTAINS(set_error("measure.max_noise=0"), "measure.max_noise");
  EXPECT_CONTAINS(set_error("measure.max_samples=1"), "measure.max_samples");
  EXPECT_CONTAINS(set_error("sweep.sq=pow2:2K"), "sweep.sq");
  EXPECT_CONTAINS(set_error("sweep.sq=pow2:3:64"), "not a power of two");
  EXPECT_CONTAINS(set_error("sweep.sq=range:1K:4K:0"), "step <= 0");
  EXPECT_CONTAINS(set_error("sweep.sq=[]"), "empty list");
  EXPECT_CONTAINS(set_error("sweep.rounds=3,4"), "sweep.rounds[1]");
  EXPECT_CONTAINS(set_error("sweep.layout=tile,tiles"), "sweep.layout[1]");
  EXPECT_CONTAINS(set_error("name="), "name");
  // Huge and negative values are range errors, not crashes or wrap-arounds.
  EXPECT_CONTAINS(set_error("workload.sq=99999999999999999999G"), "out of range");
  EXPECT_CONTAINS(set_error("workload.sq=-8K"), "out of range");
  EXPECT_CONTAINS(set_error("workload.elements=32G"), "out of range");  // 2^35 > 2^34
  EXPECT_CONTAINS(set_error("sweep.sq=range:-9223372036854775808:9223372036854775807:1"), "at most 10000");
  EXPECT_CONTAINS(set_error("sweep.sq=pow2:1:9223372036854775807"), "not a power of two");
  EXPECT_CONTAINS(set_error("workload.seed=0x10000000000000000"), "workload.seed");
  // Every --set message starts with the assignment.
  EXPECT_EQ(set_error("workload.sq=0").rfind("--set workload.sq=0: ", 0), 0u);
}

TEST(Override, FailedOverrideLeavesConfigUnchanged) {
  db::Config c = db::builtin_config();
  const json before = db::to_json(c);
  EXPECT_THROW(db::apply_override(c, "workload.kv_heads=12"), db::UsageError);
  EXPECT_THROW(db::apply_override(c, "sweep.sq=1,0"), db::UsageError);
  EXPECT_EQ(db::to_json(c), before);
}

// ---------------------------------------------------------------------------------------------------
// Round trip, presets, built-in

TEST(RoundTrip, ToJsonThenBackReproducesTheConfig) {
  db::Config c = parse(R"({"name": "rt", "description": "round trip",
    "workload": {"batch": 3, "embed": 8192, "q_heads": 48, "kv_heads": 6, "head_dim": 64, "sq": 12345,
                 "causal": true, "dropout_p": 0.123456789012345, "dtype": "bf16", "rounds": 5,
                 "threshold_bits": 16, "layout": "i32", "elements": 17179869184, "dropout_dtype": "fp32",
                 "pipeline": "overlap", "chunk": 256, "seed": "0xffffffffffffffff", "offset": 77},
    "sweep": {"rounds": [10, 3], "sq": {"pow2": [1024, 4096]}, "causal": [true, false],
              "dropout_p": {"range": [0.05, 0.15, 0.05]}, "pipeline": "fused"},
    "measure": {"min_samples": 7, "max_samples": 99, "min_time": 0.75, "max_noise": 0.02, "timeout": 12.5,
                "warmup": 9, "cold": true, "repeats": 3, "repeat_gap": 2.5, "keep_series": true}})");
  const json j = db::to_json(c);
  // All fields present, defaults included.
  EXPECT_EQ(j.size(), 5u);
  EXPECT_EQ(j["workload"].size(), 19u);  // pass and layers are written only when set
  EXPECT_EQ(j["measure"].size(), 15u);
  EXPECT_TRUE(j["sweep"]["sq"].is_array());  // explicit lists
  EXPECT_EQ(j["sweep"]["sq"], json::parse("[1024, 2048, 4096]"));
  const db::Config back = db::config_from_json(j, "<rt>");
  expect_same(back, c);
  EXPECT_EQ(db::to_json(back), j);
  // Through text as well.
  const db::Config back2 = db::config_from_json(json::parse(j.dump(2)), "<rt>");
  expect_same(back2, c);

  // Defaults round-trip too.
  const db::Config d;
  expect_same(db::config_from_json(db::to_json(d), "<d>"), d);
}

TEST(Presets, EveryConfigFileLoads) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++n;
    SCOPED_TRACE(entry.path().string());
    db::Config c;
    ASSERT_NO_THROW(c = db::load_config(entry.path().string()));
    EXPECT_EQ(c.name, entry.path().stem().string());
    EXPECT_GT(c.description.size(), 40u);
    std::vector<std::string> axes;
    for (const auto& [a, v] : c.sweep) axes.push_back(a);
    EXPECT_NO_THROW(db::expand_sweep(c, axes));
    expect_same(db::config_from_json(db::to_json(c), c.source), c);
  }
  EXPECT_GE(n, 5u);
}

TEST(Presets, ContentsMatchTheirModels) {
  struct Want {
    const char* file;
    int64_t embed, q_heads;
  };
  for (const Want& w :
       {Want{"llama3-8b", 4096, 32}, Want{"llama3-70b", 8192, 64}, Want{"llama3-405b", 16384, 128}}) {
    SCOPED_TRACE(w.file);
    const db::Config c = db::load_config(configs_dir() + "/" + w.file + ".json");
    EXPECT_EQ(c.workload.embed, w.embed);
    EXPECT_EQ(c.workload.q_heads, w.q_heads);
    EXPECT_EQ(c.workload.kv_heads, 8);
    EXPECT_EQ(c.workload.head_dim, 128);
    EXPECT_EQ(c.workload.batch, 1);
    EXPECT_EQ(c.workload.dropout_p, 0.1);
    EXPECT_EQ(c.workload.dtype, "fp8");
    // Power-capped GEMMs run below the default 75 % clock threshold: the presets keep every sample.
    EXPECT_EQ(c.measure.throttle, 0.0);
    const auto pts = db::expand_sweep(c, {"sq", "rounds"});
    ASSERT_EQ(pts.size(), 12u);
    EXPECT_EQ(pts[0].axes.dump(), R"({"sq":4096,"rounds":3})");
    EXPECT_EQ(pts[11].axes.dump(), R"({"sq":16384,"rounds":10})");
  }
  const db::Config q = db::load_config(configs_dir() + "/quick.json");
  EXPECT_EQ(q.workload.elements, int64_t{1} << 26);
  EXPECT_EQ(q.workload.sq, 4096);
  EXPECT_EQ(q.workload.rounds, 7);
  EXPECT_EQ(q.workload.threshold_bits, 8);
  EXPECT_FALSE(q.workload.causal);
  EXPECT_EQ(q.measure.min_time, 0.1);
  EXPECT_EQ(q.measure.timeout, 2.0);
}

TEST(Presets, BuiltinEqualsQuickJson) {
  const db::Config b = db::builtin_config();
  const db::Config q = db::load_config(configs_dir() + "/quick.json");
  EXPECT_EQ(b.source, "<built-in>");
  expect_same(b, q);
  EXPECT_EQ(db::to_json(b).dump(), db::to_json(q).dump());
  // And the file holds nothing that to_json would drop: the file itself equals the resolved config.
  std::ifstream in(configs_dir() + "/quick.json");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(json::parse(ss.str()), db::to_json(q));
}

// workload.attention_kernel reaches the kernels' AttentionParams (the one Workload -> kernel-params mapping).
TEST(WorkloadParams, AttentionKernelFamilyReachesTheKernelParams) {
  db::Workload w;
  const db::Threshold t = db::make_threshold(0.1, 8);
  EXPECT_EQ(db::attention_params(w, t).kernel, db::AttentionKernel::Auto);
  w.attention_kernel = "mma";
  EXPECT_EQ(db::attention_params(w, t).kernel, db::AttentionKernel::Mma);
  w.attention_kernel = "wgmma";
  EXPECT_EQ(db::attention_params(w, t).kernel, db::AttentionKernel::Wgmma);
}

// JSON keeps the last of two equal keys silently; a config file with a repeated key is refused,
// naming the key's path.
TEST(Config, LoadConfigRefusesDuplicateKeysNamingThePath) {
  const std::string path = testing::TempDir() + "dropbench_dup_keys.json";
  auto msg_for = [&](const std::string& text) {
    { std::ofstream(path) << text; }
    return usage_error([&] { db::load_config(path); });
  };
  EXPECT_EQ(msg_for(R"({"workload": {"sq": 4096, "causal": true, "sq": 8192}})"),
            "config: " + path + ": workload.sq: duplicate key (allowed: each key once per object)");
  EXPECT_CONTAINS(msg_for(R"({"sweep": {"sq": [1024]}, "measure": {}, "sweep": {"rounds": [3]}})"),
                  ": sweep: duplicate key");
  EXPECT_CONTAINS(msg_for(R"({"sweep": {"sq": {"pow2": [1024, 4096], "pow2": [1, 2]}}})"),
                  ": sweep.sq.pow2: duplicate key");
  EXPECT_CONTAINS(msg_for(R"({"sweep": {"sq": [1, {"a": 1}, {"b": 1, "b": 2}]}})"), ": sweep.sq[2].b: duplicate key");
  // Equal keys in different objects, and comments, are fine.
  { std::ofstream(path) << "{\"workload\": {\"sq\": 2048}, // a comment\n \"sweep\": {\"sq\": [1024, 2048]}}"; }
  EXPECT_EQ(db::load_config(path).workload.sq, 2048);
  std::filesystem::remove(path);
}

// `rng --set sweep.dropout_p=...` is neither ignored nor a warning: an axis --set adds that the command does not
// sweep is an error naming it and the command's axes; a preset's sweep of such an axis (every
// preset sweeps sq, which dropout does not) stays quiet.
TEST(Config, ExpandSweepRefusesSetAxesTheCommandDoesNotSweep) {
  const std::vector<std::string> rng_axes = {"sq", "causal", "rounds", "threshold_bits", "layout"};
  db::Config c = db::builtin_config();
  db::apply_override(c, "sweep.dropout_p=[0.1,0.2]");
  EXPECT_EQ(usage_error([&] { db::expand_sweep(c, rng_axes); }),
            "--set sweep.dropout_p: this command does not sweep it (allowed axes: sq, causal, rounds, threshold_bits, "
            "layout)");

  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(db::expand_sweep(db::builtin_config(), {"elements", "dropout_dtype"}));  // built-in sweeps sq
  EXPECT_NO_THROW(db::expand_sweep(db::load_config(dropbench_test::source_path("configs/paper-sweep.json")),
                                   {"sq", "causal", "rounds"}));  // the preset sweeps embed
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  // --set changing a preset's axis counts as the user's.
  db::Config p = db::load_config(dropbench_test::source_path("configs/llama3-8b.json"));
  db::apply_override(p, "sweep.sq=[1024]");
  EXPECT_EQ(usage_error([&] { db::expand_sweep(p, {"elements", "rounds"}); }),
            "--set sweep.sq: this command does not sweep it (allowed axes: elements, rounds)");
  EXPECT_CONTAINS(usage_error([&] { db::expand_sweep(p, {}); }), "(allowed axes: none)");
}

// `gemm --config configs/llama3-70b.json` sweeps the preset's E (8192), not gemm's default E values.
// A workload value the built-in config does not have is the config's choice: the axis keeps that one value
// (listed in the axes) instead of the command's default sweep, without a warning.
TEST(Config, ExpandSweepKeepsTheConfigsValueOverADefaultSweep) {
  const std::map<std::string, std::vector<json>> gemm_defaults = {{"embed", {4096, 8192, 16384}},
                                                                   {"dtype", {"fp8", "bf16"}}};
  const db::Config c = db::load_config(dropbench_test::source_path("configs/llama3-70b.json"));
  testing::internal::CaptureStderr();
  const auto pts = db::expand_sweep(c, {"sq", "embed", "dtype"}, gemm_defaults);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(pts.size(), 3u * 1 * 2);  // the preset's sq sweep, its E, gemm's dtype defaults (fp8 is built-in)
  for (const auto& p : pts) {
    EXPECT_EQ(p.workload.embed, 8192);
    EXPECT_EQ(p.axes.at("embed"), 8192);
  }
  // attention's causal default sweep keeps the preset's causal = true.
  const auto att = db::expand_sweep(c, {"sq", "causal"}, {{"causal", {false, true}}});
  ASSERT_EQ(att.size(), 3u);
  for (const auto& p : att) EXPECT_EQ(p.axes.at("causal"), true);
  // The built-in values are swept around as before; a preset that sweeps E keeps its sweep.
  EXPECT_EQ(db::expand_sweep(db::builtin_config(), {"sq", "embed", "dtype"}, gemm_defaults).size(), 2u * 3 * 2);
  const db::Config paper = db::load_config(dropbench_test::source_path("configs/paper-sweep.json"));
  EXPECT_EQ(db::expand_sweep(paper, {"embed"}, {{"embed", {4096}}}).size(), 3u);  // its own 4096, 8192, 16384
}

// Repeats, repeat_gap and keep_series default to the old behaviour; bad values are one-line errors naming
// the field (exit 2 through UsageError).
TEST(Config, RepeatFieldsDefaultsRangesAndErrors) {
  const db::Config d = parse("{}");
  EXPECT_EQ(d.measure.repeats, 1);
  EXPECT_EQ(d.measure.repeat_gap, 0.0);
  EXPECT_FALSE(d.measure.keep_series);
  EXPECT_NO_THROW(parse(R"({"measure": {"repeats": 100, "repeat_gap": 3600, "keep_series": true}})"));
  for (const char* bad : {R"({"measure": {"repeats": 0}})", R"({"measure": {"repeats": 101}})",
                          R"({"measure": {"repeats": 2.5}})"}) {
    const std::string msg = parse_error(bad);
    EXPECT_CONTAINS(msg, "measure.repeats");
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_CONTAINS(parse_error(R"({"measure": {"repeat_gap": -1}})"), "measure.repeat_gap");
  EXPECT_CONTAINS(parse_error(R"({"measure": {"keep_series": "yes"}})"), "measure.keep_series");
  EXPECT_CONTAINS(set_error("measure.repeats=0"), "measure.repeats");
  EXPECT_CONTAINS(set_error("measure.repeat_gap=3601"), "measure.repeat_gap");
  db::Config c = parse("{}");
  db::apply_override(c, "measure.repeats=3");
  db::apply_override(c, "measure.keep_series=true");
  db::apply_override(c, "measure.max_noise=1e-9");  // scripts/repeat_point.sh: groups of a fixed length
  EXPECT_EQ(c.measure.max_noise, 1e-9);
  EXPECT_EQ(c.measure.repeats, 3);
  EXPECT_TRUE(c.measure.keep_series);
}
