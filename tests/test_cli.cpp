// The dropbench executable end to end on the CPU: exit codes, messages, philox output, dry-run sweeps and
// their JSON reports, and the no-GPU behaviour.
#include <gtest/gtest.h>

#include "cli_runner.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
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

// What every bad input gets: exit 2, nothing on stdout, exactly one line on stderr, with the
// prefix, naming the option (`needle`, which must not be empty).
void expect_usage_error(const std::string& args, const std::string& needle) {
  ASSERT_FALSE(needle.empty()) << args;
  const Result r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
  EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << args << ": " << r.err;
  EXPECT_EQ(r.err.rfind("dropbench: error: ", 0), 0u) << args << ": " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": no '" << needle << "' in: " << r.err;
}

// A tiny dry-run sweep (one point), so that only the option under test can fail.
const std::string kOnePoint = "rng --dry-run -q --set sweep.sq=[64] --set sweep.rounds=[7] "
                              "--set sweep.threshold_bits=[8] --set sweep.layout=[tile]";

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
      {"philox --rounds 0", "--rounds"},
      {"nosuchcommand", "unknown command 'nosuchcommand'"},
      {"rng --dry-run --set workload.sqq=5", "workload.sqq"},
      {"rng --dry-run --set workload.sq=0", "workload.sq"},
      {"rng --dry-run --set sweep.rounds=[4]", "rounds"},
      {"rng --dry-run --config /nonexistent/config.json", "nonexistent"},
      {"rng --dry-run -o /nonexistent/dir/out.json", "--output"},
      {"rng --dry-run --max-noise 0", "--max-noise"},
      {"rng --dry-run --format xml", "--format"},
      {"dropout --dry-run --set workload.dropout_p=1.5", "dropout_p"},
  };
  for (const auto& c : cases) expect_usage_error(c[0], c[1]);
}

// Words are hex like the output, 0x optional, so a line of Random123's kat_vectors pastes as it stands.
// "03707344" is hex (not decimal), and bare words with a-f are accepted.
TEST(Cli, PhiloxWordsAreHexLikeKatVectors) {
  // kat_vectors: philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0 -> d16cfe09 ...
  const std::string want = "d16cfe09 94fdcceb 5001e420 24126ea1\n";
  const Result bare = run("philox --rounds 10 --counter 243f6a88 85a308d3 13198a2e 03707344 --key a4093822 299f31d0");
  EXPECT_EQ(bare.code, 0) << bare.err;
  EXPECT_EQ(bare.out, want);
  const Result mixed =
      run("philox --rounds 10 --counter 0x243f6a88 0x85a308d3 0x13198a2e 03707344 --key 0xa4093822 0X299f31d0");
  EXPECT_EQ(mixed.code, 0) << mixed.err;
  EXPECT_EQ(mixed.out, want);
  // Digits only are hex too: 10 is 0x10.
  EXPECT_EQ(run("philox --counter 10 0 0 0 --key 0 ff").out, run("philox --counter 0x10 0 0 0 --key 0 0xff").out);
  for (const char* bad : {"zz", "0x", "-1", "100000000", "0x1g"})
    expect_usage_error(std::string("philox --counter 0 0 0 0 --key 0 ") + bad, "--key");
}

// --seed refuses what config and --set refuse (-1 does not wrap to 0xffffffffffffffff).
TEST(Cli, SeedOutOfRangeIsAnError) {
  for (const char* bad : {"-1", "99999999999999999999", "0x10000000000000000", "abc"})
    expect_usage_error(kOnePoint + " --seed " + bad, "--seed");
  expect_usage_error(kOnePoint + " --seed -1", "18446744073709551615");
  const Result ok = run(kOnePoint + " --format json --seed 0xffffffffffffffff");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// CLI11's own errors were two lines without the prefix, and a failed conversion gave no range.
TEST(Cli, OptionErrorsAreOneLineWithTheRange) {
  expect_usage_error(kOnePoint + " --offset 4294967296", "--offset");
  expect_usage_error(kOnePoint + " --offset 4294967296", "[0, 4294967295]");
  expect_usage_error(kOnePoint + " --min-samples abc", "--min-samples");
  expect_usage_error(kOnePoint + " --min-samples 0", "[1, 1000000]");
  expect_usage_error(kOnePoint + " --min-time -1", "--min-time");
  expect_usage_error(kOnePoint + " --max-noise 2", "--max-noise");
  expect_usage_error(kOnePoint + " --device abc", "--device");
  expect_usage_error(kOnePoint + " --bogus", "--bogus");
  expect_usage_error(kOnePoint + " --format", "--format");
  expect_usage_error("philox --counter 1 2 3", "--counter");
  expect_usage_error("philox --rounds 17", "--rounds");
  expect_usage_error("", "a command is required");
  const Result ok = run(kOnePoint + " --format json --offset 4294967295 --min-samples 3 --min-time 0 --max-noise 1");
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// -o is checked before anything is measured, not at the first write after a point.
TEST(Cli, OutputPathIsCheckedUpFront) {
  const auto dir = std::filesystem::temp_directory_path() / "dropbench_cli_outdir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  expect_usage_error(kOnePoint + " -o /proc/x.json", "--output");
  expect_usage_error(kOnePoint + " -o /proc/x.json", "/proc");
  expect_usage_error(kOnePoint + " -o '" + dir.string() + "'", "is a directory");
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the write probe leaves nothing behind
  // Not a regular file: a FIFO of our own, never /dev/null, since a binary without the check renames its
  // report onto the node (as root, /dev/null became a regular file that way).
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_usage_error(kOnePoint + " -o '" + fifo.string() + "'", "is not a regular file");
  std::filesystem::remove_all(dir);
}

TEST(Cli, UnknownCommandListsTheCommands) {
  expect_usage_error("bogus", "unknown command 'bogus'");
  const Result r = run("bogus --help");
  for (const char* name : {"philox", "rng", "run", "compare", "recommend", "profile"})
    EXPECT_NE(r.err.find(std::string(" ") + name), std::string::npos) << name << ": " << r.err;
}

// A directory is named as one, not read as an empty file ("invalid JSON ... unexpected end of input").
TEST(Cli, ConfigDirectorySaysSo) {
  expect_usage_error(kOnePoint + " --config '" + std::filesystem::temp_directory_path().string() + "'",
                     "is a directory");
}

// Duplicates are refused: a shape key given twice (the last would win silently), --rounds 3,3 (R = 3 ranked twice).
TEST(Cli, RecommendRejectsDuplicates) {
  const std::string shape = "b=1,sq=8192,e=8192,hq=64,hkv=8,dh=128";
  expect_usage_error("recommend --shape b=1,b=2,sq=8192,e=8192,hq=64,hkv=8,dh=128", "key 'b' given twice");
  expect_usage_error("recommend --shape " + shape + ",batch=2", "key 'batch' given twice");
  expect_usage_error("recommend --shape " + shape + " --rounds 3,3", "--rounds: 3 given twice");
  expect_usage_error("recommend --shape " + shape + " --rounds 5,7,5", "--rounds: 5 given twice");
}

TEST(Cli, DryRunWritesReportAndTable) {
  const auto path = std::filesystem::temp_directory_path() / "dropbench_cli_dry.json";
  std::filesystem::remove(path);
  const Result r = run("rng --dry-run --quiet --set sweep.sq=[64,128] --set sweep.rounds=[5,7] "
                       "--set sweep.threshold_bits=[8] --set sweep.layout=[tile,bits] -o '" + path.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  // 2 sq x 2 rounds x 1 x 2 layouts = 8 points, each a row for the rng variant and one for the Philox ceiling
  // measured beside it: 16 rows after the markdown header (2 lines).
  size_t lines = 0;
  for (char ch : r.out) lines += ch == '\n';
  EXPECT_EQ(lines, 18u) << r.out;
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
