// GPU: KernelTracer on spin kernels of known length: two streams launched concurrently are seen running
// together (overlap fraction > 0.5), the same kernels in sequence are not (overlap 0).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/common/check.hpp"
#include "cli_runner.hpp"
#include "src/core/device_buffer.hpp"
#include "gpu_guard.hpp"
#include "src/core/trace.hpp"
#include "kernels/util/util_kernels.cuh"

using namespace dropbench;

namespace {

constexpr long long kSpinCycles = 4'000'000;  // ~2 ms at 2 GHz

struct Streams {
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t ev = nullptr;
  Streams() {
    DB_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    DB_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    DB_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  }
  ~Streams() {
    cudaEventDestroy(ev);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
  }
};

size_t kernels_on(const std::vector<TraceRecord>& r, uint32_t stream) {
  size_t n = 0;
  for (const TraceRecord& k : r) n += k.kind == TraceRecord::Kind::Kernel && k.stream == stream;
  return n;
}

// Starts a tracer, or skips the test when CUPTI is unavailable here (the message says why).
#define START_OR_SKIP(tracer)                                                  \
  do {                                                                         \
    std::string why_;                                                          \
    if (!(tracer).start(&why_)) GTEST_SKIP() << "CUPTI unavailable: " << why_; \
  } while (0)

}  // namespace

TEST(TraceGpu, ConcurrentStreamsOverlap) {
  DB_REQUIRE_GPU();
  Streams s;
  DeviceBuffer buf(8 * sizeof(unsigned long long));
  auto* out = buf.get<unsigned long long>();
  launch_spin(out, 1000, s.a);  // warm-up: module load outside the trace
  DB_CUDA(cudaDeviceSynchronize());

  KernelTracer tracer;
  START_OR_SKIP(tracer);
  const uint32_t ia = KernelTracer::stream_id(s.a), ib = KernelTracer::stream_id(s.b);
  ASSERT_NE(ia, kAnyOtherStream);
  ASSERT_NE(ib, kAnyOtherStream);
  ASSERT_NE(ia, ib);
  // The first launch after CUPTI enables activity tracing was seen to run synchronously on the H200
  // (the two spins below then never overlapped): one traced warm-up launch first, excluded by the window.
  launch_spin(out, 1000, s.a);
  DB_CUDA(cudaDeviceSynchronize());
  const uint64_t t0 = KernelTracer::now_ns();
  launch_spin(out, kSpinCycles, s.a);
  launch_spin(out + 4, kSpinCycles, s.b);
  DB_CUDA(cudaDeviceSynchronize());
  const uint64_t t1 = KernelTracer::now_ns();
  const std::vector<TraceRecord> r = tracer.stop_and_collect();
  EXPECT_FALSE(tracer.active());
  const TraceWindow win{t0, t1 + 100'000};

  ASSERT_EQ(kernels_on(r, ia), 2u);
  ASSERT_EQ(kernels_on(r, ib), 1u);
  int warmups = 0;
  for (const TraceRecord& k : r) {
    if (k.kind != TraceRecord::Kind::Kernel) continue;
    EXPECT_FALSE(k.name.empty());
    EXPECT_NE(k.name.find("spin"), std::string::npos) << k.name;
    EXPECT_GT(k.end_ns, k.start_ns);
    EXPECT_LE(k.end_ns, t1 + 100'000);
    // now_ns() shares the records' time base: the traced warm-up ended before t0, the two spins start after
    // it (1 ms slack for clock-domain rounding).
    if (k.end_ns < t0) {
      ++warmups;
    } else {
      EXPECT_GE(k.start_ns + 1'000'000, t0);
    }
    EXPECT_EQ(k.grid[0] * k.grid[1] * k.grid[2] * k.block[0] * k.block[1] * k.block[2], 1);  // one thread
    EXPECT_GT(k.registers, 0);
  }
  EXPECT_LE(warmups, 1);
  const TraceOverlap o = overlap_from_records(r, ia, ib, win);
  EXPECT_GT(o.fraction, 0.5) << "both " << o.both_ns << " ns, busy " << o.busy_a_ns << " / " << o.busy_b_ns;
  EXPECT_GT(o.busy_a_ns, 100'000);  // a spin of millions of cycles runs well over 100 µs
  EXPECT_NEAR(overlap_from_records(r, ia, kAnyOtherStream, win).fraction, o.fraction, 1e-12);
  // The Chrome trace of real records is valid JSON.
  const auto doc = nlohmann::json::parse(chrome_trace_json(r).dump());
  EXPECT_GE(doc["traceEvents"].size(), 2u);
}

TEST(TraceGpu, SequentialKernelsDoNotOverlap) {
  DB_REQUIRE_GPU();
  Streams s;
  DeviceBuffer buf(8 * sizeof(unsigned long long));
  auto* out = buf.get<unsigned long long>();
  launch_spin(out, 1000, s.a);
  DB_CUDA(cudaDeviceSynchronize());

  KernelTracer tracer;
  START_OR_SKIP(tracer);
  const uint32_t ia = KernelTracer::stream_id(s.a), ib = KernelTracer::stream_id(s.b);
  // One stream: two kernels back to back.
  launch_spin(out, kSpinCycles, s.a);
  launch_spin(out + 4, kSpinCycles, s.a);
  // Two streams, ordered by an event: B's kernel waits for A's.
  launch_spin(out, kSpinCycles, s.a);
  DB_CUDA(cudaEventRecord(s.ev, s.a));
  DB_CUDA(cudaStreamWaitEvent(s.b, s.ev, 0));
  launch_spin(out + 4, kSpinCycles, s.b);
  DB_CUDA(cudaDeviceSynchronize());
  const std::vector<TraceRecord> r = tracer.stop_and_collect();

  ASSERT_EQ(kernels_on(r, ia), 3u);
  ASSERT_EQ(kernels_on(r, ib), 1u);
  std::vector<TraceRecord> on_a;
  for (const TraceRecord& k : r)
    if (k.kind == TraceRecord::Kind::Kernel && k.stream == ia) on_a.push_back(k);
  for (size_t i = 1; i < on_a.size(); ++i) EXPECT_LE(on_a[i - 1].end_ns, on_a[i].start_ns);  // in order, no overlap
  const TraceOverlap o = overlap_from_records(r, ia, ib);
  EXPECT_EQ(o.both_ns, 0);
  EXPECT_EQ(o.fraction, 0);
  EXPECT_GT(o.busy_b_ns, 0);
}

TEST(TraceGpu, StopWithoutStartAndRestart) {
  DB_REQUIRE_GPU();
  KernelTracer idle;
  EXPECT_TRUE(idle.stop_and_collect().empty());
  Streams s;
  DeviceBuffer buf(4 * sizeof(unsigned long long));
  // Two sessions in a row: each sees only its own kernels.
  for (int round = 0; round < 2; ++round) {
    KernelTracer t;
    START_OR_SKIP(t);
    for (int i = 0; i <= round; ++i) launch_spin(buf.get<unsigned long long>(), 1000, s.a);
    DB_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(kernels_on(t.stop_and_collect(), KernelTracer::stream_id(s.a)), static_cast<size_t>(round + 1));
  }
}

// End to end: `dropbench run --trace` on one small point: a valid timeline, and the measured stream overlap of the
// overlap and chunked pipelines in the report.
TEST(TraceGpu, RunWritesTraceAndOverlapFigures) {
  DB_REQUIRE_GPU();
  const auto dir = std::filesystem::temp_directory_path() / ("dropbench_trace_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string trace = (dir / "t.json").string(), report = (dir / "r.json").string();
  const auto r = dropbench_test::run_dropbench(
      "run -q --no-explore --pipelines baseline,overlap,chunked --set sweep.sq=[2048] --min-time 0.01 "
      "--max-noise 1 --set measure.timeout=1 --set measure.throttle=0 --trace '" + trace + "' -o '" + report + "'");
  if (r.err.find("CUPTI is unavailable") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream tf(trace), rf(report);
  const auto t = nlohmann::json::parse(tf);
  const auto rep = nlohmann::json::parse(rf);
  std::filesystem::remove_all(dir);

  size_t kernels = 0, labels = 0;
  for (const auto& e : t["traceEvents"]) {
    kernels += e.value("cat", "") == "kernel";
    labels += e.value("cat", "") == "dropbench" && e["ph"] == "X";
  }
  EXPECT_GT(kernels, 5u);
  EXPECT_EQ(labels, 3u);  // one per pipeline at the one point
  ASSERT_EQ(rep["points"].size(), 1u);
  int seen = 0;
  for (const auto& v : rep["points"][0]["variants"]) {
    const std::string n = v["name"];
    if (n != "baseline" && n != "overlap" && n != "chunked") continue;
    ++seen;
    EXPECT_GT(v["extra"]["trace_kernels"].get<int>(), 1) << n;
    if (n == "baseline") {
      EXPECT_FALSE(v["extra"].contains("trace_overlap_fraction"));
      continue;
    }
    const double f = v["extra"]["trace_overlap_fraction"];
    EXPECT_GE(f, 0.0) << n;
    EXPECT_LE(f, 1.0) << n;
    EXPECT_GT(v["extra"]["trace_busy_b_us"].get<double>(), 0) << n;  // the side stream ran something
    std::printf("[ trace    ] %s: overlap %.1f us, fraction %.3f, busy A %.1f us, B %.1f us\n", n.c_str(),
                v["extra"]["trace_overlap_us"].get<double>(), f, v["extra"]["trace_busy_a_us"].get<double>(),
                v["extra"]["trace_busy_b_us"].get<double>());
  }
  EXPECT_EQ(seen, 3);
}
