// Nothing lost, nothing crashes: what a refused or broken run leaves behind (the bytes of an existing -o file),
// the one-line errors of bad JSON and bad numbers, output errors and SIGPIPE, files that are not regular files,
// and the report's journal (the cost of writing a sweep's report grows with its points, not their square).
// End to end through the executable with dry runs (no GPU), plus the report writer in-process.
#include <gtest/gtest.h>

#include "cli_runner.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/cli/cli.hpp"
#include "src/core/input.hpp"
#include "src/core/merge.hpp"
#include "src/core/report.hpp"
#include "test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using Result = dropbench_test::CliResult;

Result run(const std::string& args) { return dropbench_test::run_dropbench(args); }

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// One line on stderr starting "dropbench: error: ", exit 2.
void expect_one_line_refusal(const Result& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << what << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("dropbench: error: ", 0), 0u) << what << "\n" << r.err;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

class Lost : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dropbench_lost_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A valid report that must survive every refused run below.
    keep_ = path("keep.json");
    ASSERT_EQ(run("gemm --dry-run -q --set 'sweep.sq=[64]' --set 'sweep.embed=[4096]' --set 'sweep.dtype=[fp8]' -o " +
                  keep_ + " > /dev/null")
                  .code,
              0);
    keep_bytes_ = slurp(keep_);
    ASSERT_FALSE(keep_bytes_.empty());
  }
  void TearDown() override {
    ::unsetenv("DROPBENCH_TEST_INTERRUPT_AFTER");
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void expect_keep_unchanged(const std::string& what) const {
    EXPECT_EQ(slurp(keep_), keep_bytes_) << what << ": the existing -o file changed";
  }
  fs::path dir_;
  std::string keep_, keep_bytes_;
};

// A sweep with a point that cannot run is refused before its first point: nothing measured, -o as it was.
TEST_F(Lost, RefusedSweepLeavesTheExistingReport) {
  const Result r = run("gemm --dry-run --set workload.batch=2048 --set 'sweep.sq=[4096,1048576]' "
                       "--set 'sweep.embed=[4096]' --set 'sweep.dtype=[fp8]' -o " + keep_);
  expect_one_line_refusal(r, "shape past 2^31");
  EXPECT_NE(r.err.find("1048576"), std::string::npos) << r.err;  // names the point
  EXPECT_EQ(r.out, "");                                            // nothing measured, no table
  expect_keep_unchanged("refused gemm sweep");
  // A sweep stopped before its first point ends keeps nothing, so it leaves -o alone too.
  ::setenv("DROPBENCH_TEST_INTERRUPT_AFTER", "0", 1);
  const Result i = run("gemm --dry-run -q -o " + keep_);
  EXPECT_EQ(i.code, 130) << i.err;
  expect_keep_unchanged("interrupted before the first point");
}

// --devices whose children all refuse writes nothing: the shard files an earlier run left are not this run's.
TEST_F(Lost, DevicesNeverMergeStaleShardReports) {
  const std::string sweep = "rng --dry-run -q --set 'sweep.sq=[64,128]' --set 'sweep.rounds=[3]' "
                            "--set 'sweep.threshold_bits=[8]' --set 'sweep.layout=[tile]'";
  const std::string out = path("dev.json");
  ASSERT_EQ(run(sweep + " --devices 0,1 -o " + out + " > /dev/null").code, 0);
  ASSERT_TRUE(fs::exists(out + ".shards/shard-0-of-2.json"));
  spit(out, keep_bytes_);  // whatever is at -o now must stay
  // A --resume of another config: refused (by the parent, once, or by every child).
  const Result r = run("rng --dry-run -q --set 'sweep.sq=[256]' --set 'sweep.rounds=[3]' --set 'sweep.threshold_bits=[8]' "
                       "--set 'sweep.layout=[tile]' --devices 0,1 --resume " + keep_ + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(out), keep_bytes_) << "stale shard reports were merged over -o";
  // Children that stop before their first point (the parent has nothing to refuse) write no shard report: the
  // stale ones are still not merged.
  ::setenv("DROPBENCH_TEST_INTERRUPT_AFTER", "0", 1);
  const Result c = run(sweep + " --devices 0,1 -o " + out);
  ::unsetenv("DROPBENCH_TEST_INTERRUPT_AFTER");
  EXPECT_NE(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("no shard wrote a report"), std::string::npos) << c.err;
  EXPECT_EQ(slurp(out), keep_bytes_) << "stale shard reports were merged over -o";
}

// A document nested 100 000 deep is one line, exit 2, in every command that reads JSON (no stack overflow).
TEST_F(Lost, DeepNestingIsOneLine) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string deep_obj = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  spit(path("deep.json"), deep);
  spit(path("deep_obj.json"), deep_obj);
  for (const std::string& f : {path("deep.json"), path("deep_obj.json")}) {
    for (const std::string& cmd :
         {"gemm --dry-run --config " + f + " -o " + keep_, "gemm --dry-run --resume " + f + " -o " + keep_,
          "merge " + f + " -o " + keep_, "compare " + f + " " + keep_, "model --machine " + f,
          "model --profile " + f, "model --report " + f, "gemm --dry-run --machine " + f + " -o " + keep_}) {
      const Result r = run(cmd);
      expect_one_line_refusal(r, cmd);
      EXPECT_NE(r.err.find("nested"), std::string::npos) << cmd << "\n" << r.err;
      expect_keep_unchanged(cmd);
    }
  }
  // The same through --set (the value is JSON text too).
  const Result s = run("gemm --dry-run --set 'sweep.sq=" + std::string(50000, '[') + "' -o " + keep_);
  expect_one_line_refusal(s, "--set deep");
  expect_keep_unchanged("--set deep");
}

// 1e309 and values of the wrong type are one line naming the file and the JSON path, exit 2 (no library error).
TEST_F(Lost, MalformedJsonNamesFileAndPath) {
  spit(path("ovf.json"), R"({"name": "x", "measure": {"timeout": 1e309}})");
  Result r = run("gemm --dry-run --config " + path("ovf.json") + " -o " + keep_);
  expect_one_line_refusal(r, "1e309 in a config");
  EXPECT_NE(r.err.find("ovf.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1e309"), std::string::npos) << r.err;

  json rep = json::parse(keep_bytes_);
  std::string text = rep.dump();
  const size_t at = text.find("\"median\":") + 9;
  text.replace(at, text.find_first_of(",}", at) - at, "1e309");
  spit(path("ovf_report.json"), text);
  rep["points"][0]["variants"][0]["stats"] = 7;  // a number where an object belongs
  spit(path("bad_stats.json"), rep.dump());
  rep = json::parse(keep_bytes_);
  rep["points"][0]["variants"][0]["name"] = json::array({1});
  spit(path("bad_name.json"), rep.dump());
  rep = json::parse(keep_bytes_);
  rep["skipped"] = json::array({5});
  spit(path("bad_skipped.json"), rep.dump());
  for (const std::string& f : {"ovf_report.json", "bad_stats.json", "bad_name.json", "bad_skipped.json"}) {
    for (const std::string& cmd : {"merge " + path(f) + " -o " + keep_, "gemm --dry-run -q --resume " + path(f) + " -o " + keep_,
                                   "compare " + path(f) + " " + keep_}) {
      r = run(cmd);
      expect_one_line_refusal(r, cmd);
      EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find(f), std::string::npos) << cmd << "\n" << r.err;
      expect_keep_unchanged(cmd);
    }
  }
  // The JSON path of the field is named.
  r = run("merge " + path("bad_stats.json") + " -o " + keep_);
  EXPECT_NE(r.err.find("points[0].variants[0].stats"), std::string::npos) << r.err;
}

// merge's -o gets the sweeping commands' check, before anything is read: a missing directory, "", a device node
// or a directory are refused with exit 2, and an existing report stays as it was.
TEST_F(Lost, MergeChecksItsOutputFirst) {
  Result r = run("merge " + keep_ + " -o " + path("no/such/dir/out.json"));
  expect_one_line_refusal(r, "merge into a missing directory");
  EXPECT_NE(r.err.find("--output"), std::string::npos) << r.err;
  r = run("merge " + keep_ + " -o ''");
  expect_one_line_refusal(r, "merge -o ''");
  // Not a regular file (a FIFO here, not a system node: a broken check would replace it).
  const std::string fifo = path("out.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = run("merge " + keep_ + " -o " + fifo);
  expect_one_line_refusal(r, "merge -o FIFO");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  r = run("merge " + keep_ + " -o " + dir_.string());
  expect_one_line_refusal(r, "merge -o DIR");
  // A refused merge (an input that is not a report) leaves an existing -o as it was.
  spit(path("not_report.json"), "{\"a\": 1}");
  r = run("merge " + path("not_report.json") + " -o " + keep_);
  expect_one_line_refusal(r, "merge of a non-report");
  expect_keep_unchanged("refused merge");
}

// NaN and infinity are refused by every numeric option and field (one parser).
TEST_F(Lost, NonFiniteNumbersAreRefusedEverywhere) {
  for (const std::string& v : {"nan", "NaN", "inf", "-inf", "infinity", "1e999"}) {
    for (const std::string& cmd :
         {"gemm --dry-run --device-memory " + v, "run --dry-run --mask-budget " + v, "gemm --dry-run --min-time " + v,
          "gemm --dry-run --max-noise " + v, "gemm --dry-run --set measure.timeout=" + v,
          "gemm --dry-run --set workload.dropout_p=" + v, "compare " + keep_ + " " + keep_ + " --noise-k " + v,
          "compare " + keep_ + " " + keep_ + " --noise-floor " + v, "recommend --shape sq=4096,p=" + v,
          "recommend --shape sq=4096 --pass train --mask-budget " + v, "model --residency coresident:" + v}) {
      const Result r = run(cmd);
      expect_one_line_refusal(r, cmd);
    }
  }
  expect_keep_unchanged("non-finite numbers");
}

// What merge refuses, --resume refuses too, with the same words.
TEST_F(Lost, ResumeRefusesWhatMergeRefuses) {
  const std::string sweep = "rng --dry-run -q --set 'sweep.sq=[64,128,256]' --set 'sweep.rounds=[3]' "
                            "--set 'sweep.threshold_bits=[8]' --set 'sweep.layout=[tile]'";
  ASSERT_EQ(run(sweep + " -o " + path("good.json")).code, 0);
  const json good = json::parse(slurp(path("good.json")));
  std::vector<std::pair<std::string, json>> bad;
  json j = good;
  j["points"][1]["index"] = -1;
  bad.emplace_back("negative index", j);
  j = good;
  j["points"][1]["index"] = 3;
  bad.emplace_back("index = total_points", j);
  j = good;
  j["shard"] = {{"index", 2}, {"count", 2}};
  bad.emplace_back("shard index = count", j);
  j = good;
  j["shard"] = {{"index", 0}, {"count", 0}};
  bad.emplace_back("shard count 0", j);
  j = good;
  j["skipped"] = json::array({json{{"axes", json::object()}, {"reason", "x"}}});
  bad.emplace_back("skipped entry without index", j);
  for (const auto& [what, doc] : bad) {
    const std::string f = path("bad.json");
    spit(f, doc.dump(2));
    const Result m = run("merge " + f + " -o " + path("merged.json"));
    const Result r = run(sweep + " --resume " + f + " -o " + keep_);
    expect_one_line_refusal(m, "merge: " + what);
    expect_one_line_refusal(r, "--resume: " + what);
    // The same message after the word that says who refused.
    const auto tail = [](const std::string& e, const std::string& who) {
      const size_t p = e.find(who);
      return p == std::string::npos ? e : e.substr(p + who.size());
    };
    EXPECT_EQ(tail(m.err, "merge: "), tail(r.err, "--resume: ")) << what;
    EXPECT_FALSE(fs::exists(path("merged.json"))) << what;
    expect_keep_unchanged("--resume: " + what);
  }
}

// Output that cannot be written is an error (exit non-zero); SIGPIPE stops a sweep as SIGTERM does: the report
// says SIGPIPE and the resume line is printed.
TEST_F(Lost, OutputErrorsAreReported) {
  const std::string sweep = "gemm --dry-run -q --set 'sweep.sq=[64,128]' --set 'sweep.embed=[4096]' --set 'sweep.dtype=[fp8]'";
  Result r = run(sweep + " > /dev/full");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("stdout"), std::string::npos) << r.err;
  r = run(sweep + " >&-");
  EXPECT_NE(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("stdout"), std::string::npos) << r.err;
  r = run("compare " + keep_ + " " + keep_ + " > /dev/full");
  EXPECT_NE(r.code, 0) << r.err;

  // SIGPIPE in the middle of a sweep: stopped like SIGTERM, the report says so, and the resume line is printed.
  ::setenv("DROPBENCH_TEST_INTERRUPT_AFTER", "1:PIPE", 1);
  const std::string out = path("pipe.json");
  r = run(sweep + " -o " + out);
  ::unsetenv("DROPBENCH_TEST_INTERRUPT_AFTER");
  EXPECT_EQ(r.code, 128 + SIGPIPE) << r.err;
  EXPECT_NE(r.err.find("--resume " + out), std::string::npos) << r.err;
  json j = json::parse(slurp(out));
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["incomplete_reason"]["signal"], "SIGPIPE");

  // A real reader that goes away: the progress lines on stderr go to `head -1`, which exits after the first.
  const std::string big = "gemm --dry-run --set 'sweep.sq=range:1:3000:1' --set 'sweep.embed=[4096]' "
                          "--set 'sweep.dtype=[fp8]' -o " + out;
  const std::string cmd = "bash -c \"'" + dropbench_test::dropbench_binary() + "' " + big +
                          " 2>&1 >/dev/null | head -1 >/dev/null; exit \\${PIPESTATUS[0]}\"";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGPIPE);
  j = json::parse(slurp(out));
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["incomplete_reason"]["kind"], "signal") << j["incomplete_reason"].dump();
  EXPECT_EQ(j["incomplete_reason"]["signal"], "SIGPIPE") << j["incomplete_reason"].dump();
}

// A FIFO given as a config, machine file, profile or report is refused at once, not waited on.
TEST_F(Lost, FifoIsRefusedNotWaitedOn) {
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& cmd : {"gemm --dry-run --config " + fifo, "gemm --dry-run --resume " + fifo + " -o " + keep_,
                                 "merge " + fifo + " -o " + path("m.json"), "compare " + fifo + " " + keep_,
                                 "model --machine " + fifo, "model --profile " + fifo, "model --report " + fifo}) {
    // `timeout` turns a hang into exit 124.
    const Result r = dropbench_test::run_dropbench(cmd, "timeout 20 ");
    expect_one_line_refusal(r, cmd);
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << cmd << "\n" << r.err;
  }
  expect_keep_unchanged("fifo");
}

// Smaller ones: --power-from names itself; error text is not cut inside a UTF-8 character; recommend takes 8K.
TEST_F(Lost, SmallerOnes) {
  Result r = run("profile --power-from " + path("missing.json") + " --out " + path("p.json"));
  expect_one_line_refusal(r, "--power-from missing");
  EXPECT_NE(r.err.find("--power-from"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--report"), std::string::npos) << r.err;

  std::string name;
  for (int i = 0; i < 40; ++i) name += "\xc3\xa9";  // é x 40: 80 bytes, cut somewhere in the middle
  spit(path("utf8.json"), "{\"workload\": {\"dtype\": \"" + name + "\"}}");
  r = run("gemm --dry-run --config " + path("utf8.json"));
  expect_one_line_refusal(r, "utf-8");
  EXPECT_TRUE(valid_utf8(r.err)) << r.err;
  r = run("gemm --dry-run --set 'workload.dtype=" + name + "'");
  expect_one_line_refusal(r, "utf-8 --set");
  EXPECT_TRUE(valid_utf8(r.err)) << r.err;

  r = run("recommend --shape sq=8K");
  EXPECT_EQ(r.code, 0) << r.err;
}

// ---- Scale: the report's journal -------------------------------------------------------------------------

// Bytes this process has passed to write(2) so far (/proc/self/io "wchar").
size_t bytes_written() {
  std::ifstream io("/proc/self/io");
  std::string key;
  size_t v = 0;
  while (io >> key >> v)
    if (key == "wchar:") return v;
  return 0;
}

// A dry-run sweep of `n` points with -o, in this process; the bytes it wrote (report, journal, table).
size_t sweep_bytes(size_t n, const std::string& out) {
  std::vector<std::string> args = {"dropbench", "gemm", "--dry-run", "-q", "--format", "csv",
                                   "--set", "sweep.sq=range:1:" + std::to_string(n) + ":1", "--set", "sweep.embed=[4096]",
                                   "--set", "sweep.dtype=[fp8]", "-o", out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::fflush(stdout);
  const int saved = ::dup(1);
  const int devnull = ::open("/dev/null", O_WRONLY);
  ::dup2(devnull, 1);
  const size_t before = bytes_written();
  const int rc = dropbench::run_cli(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  const size_t after = bytes_written();
  ::dup2(saved, 1);
  ::close(saved);
  ::close(devnull);
  EXPECT_EQ(rc, 0);
  return after - before;
}

// The bytes a sweep writes grow with its points, not their square (a report rewritten whole after every point
// writes ~n^2/2 points' worth: 4x the points, 16x the bytes).
TEST_F(Lost, ReportBytesGrowLinearlyWithPoints) {
  const size_t small = sweep_bytes(400, path("s.json"));
  const size_t large = sweep_bytes(1600, path("l.json"));
  const size_t final_large = fs::file_size(path("l.json"));
  EXPECT_FALSE(fs::exists(path("l.json.journal")));  // compacted at the end
  ASSERT_GT(small, 0u);
  const double ratio = static_cast<double>(large) / static_cast<double>(small);
  EXPECT_LT(ratio, 6.0) << small << " bytes for 400 points, " << large << " for 1600";
  // Every byte of the final report costs a bounded number of bytes written, whatever the number of points.
  EXPECT_LT(large, 6 * final_large) << large << " bytes written for a " << final_large << "-byte report";
}

// A process that dies without warning: the report plus its journal hold every point that ended; a torn last
// line is dropped; merge and --resume read them.
TEST_F(Lost, JournalKeepsEveryPointOfADeadProcess) {
  const std::string out = path("dead.json");
  {
    dropbench::Report r("gemm", json{{"dry_run", true}}, json::object());
    r.set_sweep(1000, std::nullopt);
    r.sweep().incomplete_reason = {{"kind", "running"}, {"message", "written while the sweep ran"}};
    r.set_output(out);
    r.use_journal();
    for (size_t i = 0; i < 700; ++i) {
      dropbench::PointResult p;
      p.index = i;
      p.axes = {{"sq", i + 1}};
      dropbench::VariantResult v;
      v.name = "cublaslt";
      p.variants.push_back(v);
      r.add_point(p);
    }
    // No finish, no final write: the Report goes away as the process would.
  }
  ASSERT_TRUE(fs::exists(out + ".journal"));
  const json base = json::parse(slurp(out));
  EXPECT_LT(base["points"].size(), 700u);  // the rest is in the journal
  dropbench::ReportFile f = dropbench::read_report_file(out, "merge");
  ASSERT_EQ(f.doc["points"].size(), 700u);
  for (size_t i = 0; i < 700; ++i) EXPECT_EQ(f.doc["points"][i]["index"], i);
  // The process died in the middle of a line.
  std::string j = slurp(out + ".journal");
  j.resize(j.size() - 10);
  spit(out + ".journal", j);
  f = dropbench::read_report_file(out, "merge");
  EXPECT_EQ(f.doc["points"].size(), 699u);
  // A journal of another run (another id) is not this report's.
  spit(out + ".journal", "{\"journal\":\"dropbench.report\",\"id\":\"other\"}\n{\"point\":{\"index\":999}}\n");
  f = dropbench::read_report_file(out, "merge");
  EXPECT_EQ(f.doc["points"].size(), base["points"].size());
}

// The journal of a real sweep killed without warning (the test hook's N:KILL is a SIGKILL at point N) is resumed
// from: the resumed report is the whole sweep, and merge reads the killed one whole too.
TEST_F(Lost, ResumeFoldsTheJournal) {
  const std::string sweep = "gemm --dry-run -q --set 'sweep.sq=range:1:600:1' --set 'sweep.embed=[4096]' "
                            "--set 'sweep.dtype=[fp8]'";
  const std::string whole = path("whole.json"), cut = path("cut.json");
  ASSERT_EQ(run(sweep + " -o " + whole + " > /dev/null").code, 0);
  ::setenv("DROPBENCH_TEST_INTERRUPT_AFTER", "500:KILL", 1);
  const Result k = run(sweep + " -o " + cut + " > /dev/null");
  ::unsetenv("DROPBENCH_TEST_INTERRUPT_AFTER");
  EXPECT_EQ(k.code, 128 + SIGKILL) << "not killed: " << k.err;  // the shell's status of a killed child
  const json left = json::parse(slurp(cut));
  EXPECT_EQ(left["incomplete_reason"]["kind"], "running");
  EXPECT_LT(left["points"].size(), 500u);  // the rest is in the journal
  ASSERT_TRUE(fs::exists(cut + ".journal"));
  const Result m = run("merge " + cut + " -o " + path("merged.json"));
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(json::parse(slurp(path("merged.json")))["points"].size(), 500u);
  const Result r = run(sweep + " --resume " + cut + " > /dev/null");
  ASSERT_EQ(r.code, 0) << r.err;
  const json a = json::parse(slurp(whole)), b = json::parse(slurp(cut));
  EXPECT_EQ(b["complete"], true);
  EXPECT_EQ(a["points"], b["points"]);
  EXPECT_EQ(b["resumed_from"]["points_kept"], 500);
  EXPECT_FALSE(fs::exists(cut + ".journal"));
}

}  // namespace
