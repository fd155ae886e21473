// The dropbench executable end to end on the CPU: exit codes, messages, philox output, dry-run sweeps and
// their JSON reports, and the no-GPU behaviour.
#include <gtest/gtest.h>

#include "cli_runner.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "src/core/context.hpp"

namespace {

using Result = dropbench_test::CliResult;
Result run(const std::string& args) { return dropbench_test::run_dropbench(args); }

bool has_gpu() { return dropbench::device_count() > 0; }

}  // namespace

TEST(Cli, HelpAndVersion) {
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("--version").code, 0);
  const Result r = run("rng --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("threshold_bits"), std::string::npos);
}

TEST(Cli, PhiloxKnownAnswer) {
  const Result r = run("philox --rounds 7 --counter 0 0 0 0 --key 0 0");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "5f6fb709 0d893f64 4f121f81 4f730a48\n");
  const Result r10 = run("philox --rounds 10 --counter 0xffffffff 0xffffffff 0xffffffff 0xffffffff --key 0xffffffff 0xffffffff");
  EXPECT_EQ(r10.out, "408f276d 41c83b0e a20bc7c6 6d5451fd\n");
}

TEST(Cli, BadInputExitsTwoWithOneLine) {
  const char* cases[][2] = {
      {"philox --counter 0 zz 0 0 --key 0 0", "--counter"},
      {"philox --counter 0 0x100000000 0 0 --key 0 0", "--counter"},
      {"philox --rounds 0", "rounds"},
      {"nosuchcommand", ""},
      {"rng --dry-run --set workload.sqq=5", "workload.sqq"},
      {"rng --dry-run --set workload.sq=0", "workload.sq"},
      {"rng --dry-run --set sweep.rounds=[4]", "rounds"},
      {"rng --dry-run --config /nonexistent/config.json", "nonexistent"},
      {"rng --dry-run -o /nonexistent/dir/out.json", "--output"},
      {"rng --dry-run --max-noise 0", "max_noise"},
      {"rng --dry-run --format xml", "format"},
      {"dropout --dry-run --set workload.dropout_p=1.5", "dropout_p"},
  };
  for (const auto& c : cases) {
    const Result r = run(c[0]);
    EXPECT_EQ(r.code, 2) << c[0] << "\n" << r.err;
    EXPECT_NE(r.err.find(c[1]), std::string::npos) << c[0] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c[0];
  }
}

TEST(Cli, DryRunWritesReportAndTable) {
  const auto path = std::filesystem::temp_directory_path() / "dropbench_cli_dry.json";
  std::filesystem::remove(path);
  const Result r = run("rng --dry-run --quiet --set sweep.sq=[64,128] --set sweep.rounds=[5,7] "
                       "--set sweep.threshold_bits=[8] --set sweep.layout=[tile,bits] -o '" + path.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  // 2 sq x 2 rounds x 1 x 2 layouts = 8 rows after the markdown header (2 lines).
  size_t lines = 0;
  for (char ch : r.out) lines += ch == '\n';
  EXPECT_EQ(lines, 10u) << r.out;
  std::ifstream f(path);
  ASSERT_TRUE(f.good());
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["command"], "rng");
  EXPECT_EQ(j["points"].size(), 8u);
  EXPECT_EQ(j["points"][0]["axes"]["sq"], 64);
  EXPECT_EQ(j["context"]["dry_run"], true);
  EXPECT_FALSE(j["context"]["git_sha"].get<std::string>().empty());
  std::filesystem::remove(path);
}

TEST(Cli, CsvAndJsonFormats) {
  const Result csv = run("rng --dry-run -q --set sweep.sq=[64] --set sweep.rounds=[7] --set sweep.threshold_bits=[8] "
                         "--set sweep.layout=[tile] --format csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, 3), "sq,");
  const Result js = run("rng --dry-run -q --set sweep.sq=[64] --set sweep.rounds=[7] --set sweep.threshold_bits=[8] "
                        "--set sweep.layout=[tile] --format json");
  ASSERT_EQ(js.code, 0) << js.err;
  EXPECT_TRUE(nlohmann::json::parse(js.out).is_array());
}

TEST(Cli, NoGpuSaysSoAndExitsTwo) {
  if (has_gpu()) GTEST_SKIP() << "a GPU is present";
  for (const char* cmd : {"devices", "rng --quiet", "dropout --quiet"}) {
    const Result r = run(cmd);
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << cmd << ": " << r.err;
  }
}
