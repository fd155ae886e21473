// GPU: what the measuring commands write into their reports on a real run (the dry runs the CPU tests read have
// no measured figures): rng's fraction of the Philox ceiling, dropout's checks and its figures against the copy
// measured in the same group, attention's bitwise checks of every mode against fused, forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "gpu_guard.hpp"

using dropbench_test::run_dropbench;
using json = nlohmann::json;

namespace {

// Runs `args` with -o into a fresh file and returns the report.
json run_report(const std::string& args) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("dropbench_cli_gpu_" + std::to_string(::getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
  std::filesystem::remove(path);
  const auto r = run_dropbench(args + " -q --min-time 0.01 --set measure.power_time=0 -o '" + path.string() + "'");
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  std::ifstream in(path);
  if (!in) return json();
  json j = json::parse(in);
  std::filesystem::remove(path);
  return j;
}

const json& variant(const json& point, const std::string& name) {
  for (const json& v : point.at("variants"))
    if (v.at("name") == name) return v;
  static const json none;
  ADD_FAILURE() << "no variant " << name;
  return none;
}

// An interval [low, high] around value. A percentile bootstrap's bound can sit on the value (tied timings), and
// the bounds are computed in other arithmetic than the value: a relative slack of 1e-9.
void expect_brackets(const json& ci, double value, const std::string& what) {
  ASSERT_TRUE(ci.is_array()) << what << ": " << ci.dump();
  EXPECT_LE(ci[0].get<double>(), value + 1e-9 * std::abs(value)) << what;
  EXPECT_GE(ci[1].get<double>(), value - 1e-9 * std::abs(value)) << what;
}

}  // namespace

TEST(CliGpu, RngReportCarriesItsShareOfTheCeiling) {
  DB_REQUIRE_GPU();
  const json r = run_report(
      "rng --set sweep.sq=[1024] --set sweep.rounds=[7] --set sweep.threshold_bits=[8] --set sweep.layout=[tile]");
  ASSERT_EQ(r.at("points").size(), 1u);
  const json& p = r.at("points")[0];
  const json& rng = variant(p, "rng");
  const json& ceiling = variant(p, "ceiling");
  const double frac = rng.at("derived").at("ceiling_fraction").get<double>();
  EXPECT_GT(frac, 0.0);
  EXPECT_LT(frac, 2.0);  // a mask kernel cannot make Philox calls much faster than a kernel that only makes them
  expect_brackets(rng.at("derived").at("ceiling_fraction_ci"), frac, "ceiling_fraction");
  // The fraction is elements/s over the ceiling's elements/s.
  EXPECT_NEAR(frac,
              rng.at("derived").at("gelem_s").get<double>() / ceiling.at("derived").at("gelem_s").get<double>(),
              1e-9 * frac);
  EXPECT_NEAR(rng.at("extra").at("keep_sampled").get<double>(), rng.at("extra").at("keep_effective").get<double>(),
              0.01);
}

TEST(CliGpu, DropoutChecksEveryVariantAndPairsItWithTheCopy) {
  DB_REQUIRE_GPU();
  const json r = run_report("dropout --set sweep.elements=[16777216] --set sweep.dropout_dtype=[bf16]");
  ASSERT_EQ(r.at("points").size(), 1u);
  const json& p = r.at("points")[0];
  ASSERT_EQ(p.at("variants").size(), 5u);
  const json& copy = variant(p, "copy");
  EXPECT_DOUBLE_EQ(copy.at("derived").at("pct_of_copy").get<double>(), 100.0);
  EXPECT_FALSE(copy.at("extra").contains("bitwise_equal_seeded"));
  for (const char* name : {"mask-i32", "mask-u8", "mask-bits", "seeded"}) {
    const json& v = variant(p, name);
    EXPECT_TRUE(v.at("extra").at("bitwise_equal_seeded").get<bool>()) << name;
    const json& d = v.at("derived");
    const double x = d.at("x_copy").get<double>(), pct = d.at("pct_of_copy").get<double>();
    expect_brackets(d.at("x_copy_ci"), x, std::string(name) + " x_copy");
    expect_brackets(d.at("pct_of_copy_ci"), pct, std::string(name) + " pct_of_copy");
    // pct_of_copy is the bytes' ratio over the paired time ratio.
    const double data = v.at("extra").at("data_bytes").get<double>();
    const double bytes = 2.0 * data + 2.0 * v.at("extra").at("extra_memory_bytes").get<double>();
    EXPECT_NEAR(pct, 100.0 * bytes / (2.0 * data) / x, 1e-6 * pct) << name;
  }
}

TEST(CliGpu, AttentionModesEqualFusedForwardAndBackward) {
  DB_REQUIRE_GPU();
  const json r = run_report(
      "attention --set workload.kv_heads=2 --set workload.q_heads=4 --set workload.head_dim=64 --set sweep.sq=[384] "
      "--set sweep.causal=[true] --set sweep.pass=[fwd+bwd]");
  ASSERT_EQ(r.at("points").size(), 1u);
  const json& p = r.at("points")[0];
  for (const char* name : {"mask", "rng+mask", "fused"}) {
    const json& e = variant(p, name).at("extra");
    EXPECT_TRUE(e.at("bitwise_equal_fused").get<bool>()) << name;
    EXPECT_TRUE(e.at("bwd_bitwise_equal_fused").get<bool>()) << name;
  }
  const json& none = variant(p, "none");
  EXPECT_TRUE(none.at("derived").at("tflops").get<double>() > 0);
}
