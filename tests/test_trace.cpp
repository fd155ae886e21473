// CPU: the Chrome-trace writer (valid JSON, the fields Perfetto / chrome://tracing read) and the overlap
// arithmetic of overlap_from_records() on hand-made records with known answers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "cli_runner.hpp"
#include "src/core/trace.hpp"

using namespace dropbench;

namespace {

TraceRecord kernel(uint32_t stream, uint64_t start, uint64_t end, const std::string& name = "k") {
  TraceRecord r;
  r.name = name;
  r.stream = stream;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

}  // namespace

TEST(Trace, ChromeTraceParsesWithTheRightFields) {
  TraceRecord k = kernel(7, 1'000'000'000'500, 1'000'000'003'000, "void foo<int>(int*)");
  k.device = 1;
  k.grid[0] = 132, k.grid[1] = 2, k.grid[2] = 1;
  k.block[0] = 256, k.block[1] = 1, k.block[2] = 1;
  k.registers = 32;
  k.static_smem = 1024;
  k.dynamic_smem = 4096;
  TraceRecord m = kernel(9, 1'000'000'001'000, 1'000'000'002'000, "memcpy HtoD");
  m.kind = TraceRecord::Kind::Memcpy;
  m.device = 1;
  m.bytes = 4096;
  TraceEvent label;
  label.name = "overlap @ sq=128";
  label.ts_ns = 1'000'000'000'500;
  label.dur_ns = 2'500;
  label.pid = 1;
  label.tid = 1u << 30;
  label.args = {{"pipeline", "overlap"}};
  TraceEvent tname;
  tname.name = "thread_name";
  tname.ph = "M";
  tname.pid = 1;
  tname.tid = 7;
  tname.args = {{"name", "stream 7 (A: main)"}};

  const auto path = std::filesystem::temp_directory_path() / ("dropbench_trace_" + std::to_string(::getpid()) + ".json");
  write_chrome_trace(path.string(), {k, m}, {label, tname});
  std::ifstream f(path);
  const nlohmann::json doc = nlohmann::json::parse(f);  // throws on malformed JSON
  std::filesystem::remove(path);

  ASSERT_TRUE(doc.contains("traceEvents"));
  ASSERT_TRUE(doc["traceEvents"].is_array());
  EXPECT_EQ(doc["otherData"]["base_ns"].get<uint64_t>(), 1'000'000'000'500u);
  std::map<std::string, nlohmann::json> by_name;
  int thread_names = 0, process_names = 0;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("name") && e.contains("ph") && e.contains("pid") && e.contains("tid")) << e.dump();
    if (e["ph"] == "M") {
      thread_names += e["name"] == "thread_name";
      process_names += e["name"] == "process_name";
      ASSERT_TRUE(e["args"].contains("name"));
      if (e["name"] == "thread_name" && e["tid"] == 7) EXPECT_EQ(e["args"]["name"], "stream 7 (A: main)");
      continue;
    }
    by_name[e["name"].get<std::string>()] = e;
  }
  const auto& ek = by_name.at("void foo<int>(int*)");
  EXPECT_EQ(ek["ph"], "X");
  EXPECT_EQ(ek["cat"], "kernel");
  EXPECT_DOUBLE_EQ(ek["ts"].get<double>(), 0.0);   // µs from the base
  EXPECT_DOUBLE_EQ(ek["dur"].get<double>(), 2.5);  // 2500 ns
  EXPECT_EQ(ek["pid"], 1);
  EXPECT_EQ(ek["tid"], 7);
  EXPECT_EQ(ek["args"]["grid"], nlohmann::json({132, 2, 1}));
  EXPECT_EQ(ek["args"]["block"], nlohmann::json({256, 1, 1}));
  EXPECT_EQ(ek["args"]["registers"], 32);
  EXPECT_EQ(ek["args"]["static_smem"], 1024);
  EXPECT_EQ(ek["args"]["dynamic_smem"], 4096);
  const auto& em = by_name.at("memcpy HtoD");
  EXPECT_EQ(em["cat"], "memcpy");
  EXPECT_DOUBLE_EQ(em["ts"].get<double>(), 0.5);
  EXPECT_EQ(em["args"]["bytes"], 4096);
  const auto& el = by_name.at("overlap @ sq=128");
  EXPECT_EQ(el["ph"], "X");
  EXPECT_DOUBLE_EQ(el["dur"].get<double>(), 2.5);
  EXPECT_EQ(el["args"]["pipeline"], "overlap");
  EXPECT_EQ(process_names, 1);  // GPU 1
  EXPECT_EQ(thread_names, 2);   // stream 7 named by the caller (once), stream 9 by default
}

TEST(Trace, EmptyTraceIsValid) {
  const nlohmann::json doc = nlohmann::json::parse(chrome_trace_json({}).dump());
  EXPECT_TRUE(doc["traceEvents"].is_array());
  EXPECT_TRUE(doc["traceEvents"].empty());
}

TEST(Trace, OverlapDisjoint) {
  const auto o = overlap_from_records({kernel(1, 0, 100), kernel(2, 100, 250)}, 1, 2);
  EXPECT_EQ(o.kernels_a, 1u);
  EXPECT_EQ(o.kernels_b, 1u);
  EXPECT_DOUBLE_EQ(o.busy_a_ns, 100);
  EXPECT_DOUBLE_EQ(o.busy_b_ns, 150);
  EXPECT_DOUBLE_EQ(o.both_ns, 0);
  EXPECT_DOUBLE_EQ(o.union_ns, 250);
  EXPECT_DOUBLE_EQ(o.fraction, 0);
}

TEST(Trace, OverlapNested) {
  const auto o = overlap_from_records({kernel(1, 0, 1000), kernel(2, 200, 500)}, 1, 2);
  EXPECT_DOUBLE_EQ(o.both_ns, 300);
  EXPECT_DOUBLE_EQ(o.union_ns, 1000);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);  // the shorter stream ran entirely beside the longer
}

TEST(Trace, OverlapPartial) {
  const auto o = overlap_from_records({kernel(1, 0, 400), kernel(2, 300, 500)}, 1, 2);
  EXPECT_DOUBLE_EQ(o.both_ns, 100);
  EXPECT_DOUBLE_EQ(o.union_ns, 500);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);  // 100 / min(400, 200)
}

TEST(Trace, OverlapManyKernelsPerStreamAndSelfOverlap) {
  // A: [0,100) [50,150) (concurrent on one stream: a busy union of [0,150)), [300,400)
  // B: [100,200) [350,600); stream 3 [0,1000) is ignored unless B = any other stream.
  std::vector<TraceRecord> r = {kernel(1, 0, 100), kernel(1, 50, 150), kernel(1, 300, 400), kernel(2, 100, 200),
                                kernel(2, 350, 600), kernel(3, 0, 1000)};
  TraceRecord copy = kernel(2, 0, 1000);
  copy.kind = TraceRecord::Kind::Memcpy;  // not a kernel: ignored
  r.push_back(copy);
  const auto o = overlap_from_records(r, 1, 2);
  EXPECT_EQ(o.kernels_a, 3u);
  EXPECT_EQ(o.kernels_b, 2u);
  EXPECT_DOUBLE_EQ(o.busy_a_ns, 250);  // [0,150) + [300,400)
  EXPECT_DOUBLE_EQ(o.busy_b_ns, 350);  // [100,200) + [350,600)
  EXPECT_DOUBLE_EQ(o.both_ns, 100);    // [100,150) + [350,400)
  EXPECT_DOUBLE_EQ(o.union_ns, 500);
  EXPECT_DOUBLE_EQ(o.fraction, 100.0 / 250.0);

  const auto any = overlap_from_records(r, 1, kAnyOtherStream);
  EXPECT_EQ(any.kernels_b, 3u);
  EXPECT_DOUBLE_EQ(any.busy_b_ns, 1000);
  EXPECT_DOUBLE_EQ(any.both_ns, 250);
  EXPECT_DOUBLE_EQ(any.fraction, 1.0);
}

TEST(Trace, OverlapWindowClipsAndEmptySide) {
  std::vector<TraceRecord> r = {kernel(1, 0, 400), kernel(2, 300, 500), kernel(2, 900, 1000)};
  TraceWindow w;
  w.begin_ns = 350;
  w.end_ns = 950;
  const auto o = overlap_from_records(r, 1, 2, w);
  EXPECT_DOUBLE_EQ(o.busy_a_ns, 50);   // [350,400)
  EXPECT_DOUBLE_EQ(o.busy_b_ns, 200);  // [350,500) + [900,950)
  EXPECT_DOUBLE_EQ(o.both_ns, 50);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  const auto none = overlap_from_records(r, 1, 5);
  EXPECT_EQ(none.kernels_b, 0u);
  EXPECT_DOUBLE_EQ(none.both_ns, 0);
  EXPECT_DOUBLE_EQ(none.fraction, 0);  // an idle side: 0, not NaN
}

// The option is documented, and a bad --trace path is bad input (exit 2) before any GPU work.
TEST(Trace, RunHelpAndBadPath) {
  const auto help = dropbench_test::run_dropbench("run --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--trace"), std::string::npos);
  const auto bad = dropbench_test::run_dropbench("run --dry-run -q --trace /nonexistent/dir/t.json");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--trace"), std::string::npos) << bad.err;
}
