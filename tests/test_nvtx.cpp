// NVTX range tests through the nvtx_recorder injection library (no Nsight Systems needed):
//   - the log parser (nvtx_tree) on hand-written logs;
//   - the recorder itself, on nvtx_probe, which pushes a known tree the way dropbench does;
//   - dropbench --dry-run for rng and dropout: the command > point > variant > phase tree.
// Children are started with `env NVTX_INJECTION64_PATH=<recorder> DROPBENCH_NVTX_LOG=<tmp>/nvtx.log ...`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "nvtx_tree.hpp"
#include "test_paths.hpp"

#ifndef NVTX_RECORDER_PATH
#error "NVTX_RECORDER_PATH (path of libnvtx_recorder.so) must be defined by the build"
#endif
#ifndef NVTX_PROBE_PATH
#error "NVTX_PROBE_PATH (path of the nvtx_probe executable) must be defined by the build"
#endif

namespace fs = std::filesystem;
using nvtx_tree::Range;

namespace {

// ---------------------------------------------------------------- helpers

// A fresh directory under $TMPDIR, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dropbench_nvtx_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Single-quoted for /bin/sh: safe for spaces, brackets (sweep lists look like globs), etc.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout + stderr
};

// Runs argv with a clean NVTX environment plus `env_sets` ("NAME=value"), output captured to a file.
RunResult run(const std::vector<std::string>& env_sets, const std::vector<std::string>& argv, const TempDir& dir) {
  const fs::path out = dir.path() / "output.txt";
  std::string cmd = "env -u NVTX_INJECTION64_PATH -u NVTX_INJECTION32_PATH -u DROPBENCH_NVTX_LOG";
  for (const auto& e : env_sets) cmd += " " + sh_quote(e);
  for (const auto& a : argv) cmd += " " + sh_quote(a);
  cmd += " >" + sh_quote(out.string()) + " 2>&1";
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.output = read_file(out);
  return r;
}

struct Recorded {
  RunResult run;
  fs::path log;
};

// Runs argv under the recorder, logging to <dir>/nvtx.log.
Recorded run_recorded(const std::vector<std::string>& argv, const TempDir& dir) {
  Recorded r;
  r.log = dir.path() / "nvtx.log";
  r.run = run({std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_PATH, "DROPBENCH_NVTX_LOG=" + r.log.string()},
              argv, dir);
  return r;
}

std::vector<std::string> names(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

// Expected-tree builder: node("rng", {node("point ..."), ...}).
Range node(std::string name, std::vector<Range> children = {}) { return Range{std::move(name), std::move(children)}; }

// ---------------------------------------------------------------- parser

TEST(NvtxTree, ParsesNestedRangesPerDomain) {
  const auto forest = nvtx_tree::parse_text(
      "push dropbench\trng\n"
      "push \touter\n"
      "push dropbench\tpoint a=1\n"
      "pop dropbench\n"
      "pop \n"
      "push dropbench\tpoint a=2\n"
      "push dropbench\tgen\n"
      "pop dropbench\n"
      "pop dropbench\n"
      "pop dropbench\n");
  ASSERT_EQ(forest.size(), 2u);
  EXPECT_EQ(nvtx_tree::domain_root(forest, "dropbench"),
            node("dropbench", {node("rng", {node("point a=1"), node("point a=2", {node("gen")})})}));
  EXPECT_EQ(nvtx_tree::domain_root(forest, ""), node("", {node("outer")}));
  EXPECT_EQ(nvtx_tree::render(nvtx_tree::domain_root(forest, "dropbench")),
            "rng\n  point a=1\n  point a=2\n    gen\n");
  EXPECT_EQ(nvtx_tree::render(forest), "[]\nouter\n[dropbench]\nrng\n  point a=1\n  point a=2\n    gen\n");
  const Range& root = nvtx_tree::domain_root(forest, "dropbench");
  EXPECT_EQ(nvtx_tree::child_names(root), names({"rng"}));
  ASSERT_NE(nvtx_tree::find_path(root, {"rng", "point a=2", "gen"}), nullptr);
  EXPECT_EQ(nvtx_tree::find_path(root, {"rng", "point a=3"}), nullptr);
  EXPECT_EQ(nvtx_tree::count_descendants(root), 4u);
  EXPECT_THROW(nvtx_tree::domain_root(forest, "nope"), std::out_of_range);
}

TEST(NvtxTree, UnbalancedPopIsAnErrorWithLineNumber) {
  try {
    nvtx_tree::parse_text("push d\ta\npop d\npop d\n");
    FAIL() << "expected ParseError";
  } catch (const nvtx_tree::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unbalanced pop"), std::string::npos) << e.what();
  }
  // A pop in another domain does not close this domain's range.
  EXPECT_THROW(nvtx_tree::parse_text("push d\ta\npop e\n"), nvtx_tree::ParseError);
}

TEST(NvtxTree, OpenRangeAtEndIsAnErrorUnlessAllowed) {
  EXPECT_THROW(nvtx_tree::parse_text("push d\ta\npush d\tb\npop d\n"), nvtx_tree::ParseError);
  nvtx_tree::ParseOptions lenient;
  lenient.allow_open_at_end = true;
  const auto forest = nvtx_tree::parse_text("push d\ta\npush d\tb\npop d\n", lenient);
  EXPECT_EQ(nvtx_tree::domain_root(forest, "d"), node("d", {node("a", {node("b")})}));
}

TEST(NvtxTree, MalformedLinesAndEscapes) {
  EXPECT_THROW(nvtx_tree::parse_text("push d no tab\n"), nvtx_tree::ParseError);
  EXPECT_THROW(nvtx_tree::parse_text("mark d\tx\n"), nvtx_tree::ParseError);
  EXPECT_THROW(nvtx_tree::parse_text("push d\tbad \\q\npop d\n"), nvtx_tree::ParseError);
  const auto forest = nvtx_tree::parse_text("push d\\tx\ta\\\\b\\nc\npop d\\tx\n");
  EXPECT_EQ(nvtx_tree::domain_root(forest, "d\tx"), node("d\tx", {node("a\\b\nc")}));
  EXPECT_TRUE(nvtx_tree::parse_text("").empty());
}

// ---------------------------------------------------------------- recorder self-test (nvtx_probe)

// Must match what tests/nvtx_probe.cpp pushes.
constexpr int kProbeTicks = 200;

Range expected_probe_dropbench() {
  auto point = [](const std::string& sq) {
    return node("point sq=" + sq, {node("variant x", {node("gen"), node("apply")})});
  };
  return node("dropbench", {node("rng", {point("256"), point("512")}), node("probe ascii")});
}

TEST(NvtxRecorder, ProbeTreeIsRecordedExactly) {
  TempDir dir;
  const auto rec = run_recorded({NVTX_PROBE_PATH}, dir);
  ASSERT_EQ(rec.run.exit_code, 0) << rec.run.output;
  ASSERT_TRUE(fs::exists(rec.log)) << "recorder wrote no log; probe output:\n" << rec.run.output;
  const std::string log = read_file(rec.log);

  nvtx_tree::Forest forest;
  ASSERT_NO_THROW(forest = nvtx_tree::parse_file(rec.log.string())) << log;
  ASSERT_EQ(forest.size(), 3u) << nvtx_tree::render(forest);

  const Range& db = nvtx_tree::domain_root(forest, "dropbench");
  EXPECT_EQ(db, expected_probe_dropbench()) << "got:\n" << nvtx_tree::render(db) << "expected:\n"
                                            << nvtx_tree::render(expected_probe_dropbench());

  // Default domain: nvtxRangePushA > nvtxRangePushEx (ASCII) > nvtxRangePushW (unicode: unsupported).
  const Range& global = nvtx_tree::domain_root(forest, "");
  EXPECT_EQ(global, node("", {node("probe main", {node("probe ex", {node("<unsupported>")})})}))
      << nvtx_tree::render(global);

  // Second thread, concurrent: every event made it, each on its own line.
  const Range& ticks = nvtx_tree::domain_root(forest, "probe-thread");
  ASSERT_EQ(ticks.children.size(), static_cast<size_t>(kProbeTicks));
  for (const Range& t : ticks.children) {
    EXPECT_EQ(t.name, "tick");
    EXPECT_TRUE(t.children.empty());
  }

  // Registered strings come back as text (never a handle) and the file is exactly the events.
  EXPECT_EQ(log.find("<unknown"), std::string::npos) << log;
  size_t lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, 2 * nvtx_tree::count_descendants(db) + 2 * nvtx_tree::count_descendants(global) +
                       2 * static_cast<size_t>(kProbeTicks));
}

TEST(NvtxRecorder, NothingIsLoggedWithoutTheInjectionVariable) {
  TempDir dir;
  const fs::path log = dir.path() / "nvtx.log";
  const auto r = run({"DROPBENCH_NVTX_LOG=" + log.string()}, {NVTX_PROBE_PATH}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(log)) << read_file(log);
}

TEST(NvtxRecorder, MissingLogVariableDisablesRecordingButAppRuns) {
  TempDir dir;
  const auto r = run({std::string("NVTX_INJECTION64_PATH=") + NVTX_RECORDER_PATH}, {NVTX_PROBE_PATH}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DROPBENCH_NVTX_LOG is not set"), std::string::npos) << r.output;
}

// ---------------------------------------------------------------- dropbench --dry-run

// Runs dropbench under the recorder and returns the "dropbench" domain tree (fails the test on error).
bool record_dropbench(const std::vector<std::string>& args, nvtx_tree::Forest& forest, Range& root) {
  const std::string bin = dropbench_test::dropbench_binary();
  if (!fs::exists(bin)) {
    ADD_FAILURE() << "dropbench binary not found at " << bin;
    return false;
  }
  TempDir dir;
  std::vector<std::string> argv{bin};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto rec = run_recorded(argv, dir);
  if (rec.run.exit_code != 0) {
    ADD_FAILURE() << "dropbench exited with " << rec.run.exit_code << ":\n" << rec.run.output;
    return false;
  }
  if (!fs::exists(rec.log)) {
    ADD_FAILURE() << "no NVTX events recorded (dropbench pushed no ranges?); output:\n" << rec.run.output;
    return false;
  }
  try {
    forest = nvtx_tree::parse_file(rec.log.string());
    root = nvtx_tree::domain_root(forest, "dropbench");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\nlog:\n" << read_file(rec.log);
    return false;
  }
  return true;
}

TEST(DropbenchNvtx, RngDryRunTree) {
  nvtx_tree::Forest forest;
  Range root;
  ASSERT_TRUE(record_dropbench({"rng", "--dry-run", "--quiet", "--set", "sweep.sq=[256,512]", "--set",
                                "sweep.rounds=[3,7]", "--set", "sweep.threshold_bits=[8]", "--set",
                                "sweep.layout=[tile]"},
                               forest, root));
  SCOPED_TRACE("dropbench domain tree:\n" + nvtx_tree::render(root));

  ASSERT_EQ(nvtx_tree::child_names(root), names({"rng"}));
  const Range& rng = root.children[0];
  // Axes in sweep order (sq, rounds, threshold_bits, layout), the last axis varying fastest.
  EXPECT_EQ(nvtx_tree::child_names(rng), names({
                                             "point sq=256 rounds=3 threshold_bits=8 layout=tile",
                                             "point sq=256 rounds=7 threshold_bits=8 layout=tile",
                                             "point sq=512 rounds=3 threshold_bits=8 layout=tile",
                                             "point sq=512 rounds=7 threshold_bits=8 layout=tile",
                                         }));
  for (const Range& point : rng.children) {
    SCOPED_TRACE(point.name);
    // The mask kernel, then the Philox ceiling measured in the same group (kernels/rng/philox_ceiling.cuh).
    ASSERT_EQ(nvtx_tree::child_names(point), names({"variant rng", "variant ceiling"}));
    const Range& variant = point.children[0];
    EXPECT_FALSE(variant.children.empty());
    EXPECT_NE(nvtx_tree::find_child(variant, "gen"), nullptr);
    EXPECT_NE(nvtx_tree::find_child(point.children[1], "ceiling"), nullptr);
  }
}

TEST(DropbenchNvtx, DropoutDryRunTree) {
  nvtx_tree::Forest forest;
  Range root;
  ASSERT_TRUE(record_dropbench({"dropout", "--dry-run", "--quiet", "--set", "sweep.elements=[4096]", "--set",
                                "sweep.dropout_dtype=[bf16]"},
                               forest, root));
  SCOPED_TRACE("dropbench domain tree:\n" + nvtx_tree::render(root));

  ASSERT_EQ(nvtx_tree::child_names(root), names({"dropout"}));
  const Range& dropout = root.children[0];
  ASSERT_EQ(nvtx_tree::child_names(dropout), names({"point elements=4096 dropout_dtype=bf16"}));
  const Range& point = dropout.children[0];
  ASSERT_EQ(nvtx_tree::child_names(point),
            names({"variant copy", "variant mask-i32", "variant mask-u8", "variant mask-bits", "variant seeded"}));
  const std::vector<std::vector<std::string>> phases{
      names({"copy"}), names({"gen", "apply"}), names({"gen", "apply"}), names({"gen", "apply"}),
      names({"dropout"})};
  for (size_t i = 0; i < phases.size(); ++i) {
    SCOPED_TRACE(point.children[i].name);
    EXPECT_EQ(nvtx_tree::child_names(point.children[i]), phases[i]);
  }
}

}  // namespace
