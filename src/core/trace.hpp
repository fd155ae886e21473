// Kernel timeline from CUPTI activity records (`dropbench run --trace FILE`, docs/run.md "Kernel trace").
// KernelTracer enables CUPTI's concurrent-kernel activity (plus memcpy/memset, optionally) between start() and
// stop_and_collect(); the records carry the GPU's own start/end timestamps (ns), so they show what really ran
// concurrently. libcupti is loaded at run time (dlopen), so dropbench starts and runs without it: start() then
// fails with a message and nothing is traced.
// write_chrome_trace() writes Chrome-trace JSON (Perfetto, chrome://tracing); overlap_from_records() measures
// how long the kernels of two streams actually ran at the same time.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "src/core/report.hpp"  // json

namespace dropbench {

struct TraceRecord {
  enum class Kind { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  std::string name;          // kernel name, demangled when possible; "memcpy HtoD", "memset", ...
  uint32_t device = 0;
  uint32_t stream = 0;       // CUPTI stream id (KernelTracer::stream_id maps a cudaStream_t to it)
  uint64_t start_ns = 0;     // GPU timestamps (CUPTI time base, KernelTracer::now_ns)
  uint64_t end_ns = 0;
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers = 0;         // per thread
  int static_smem = 0;       // bytes per block
  int dynamic_smem = 0;
  uint64_t bytes = 0;        // memcpy / memset
  uint32_t correlation = 0;
};

const char* kind_name(TraceRecord::Kind k);

// A time window [begin_ns, end_ns) in the records' time base; the default takes everything.
struct TraceWindow {
  uint64_t begin_ns = 0;
  uint64_t end_ns = std::numeric_limits<uint64_t>::max();
};

// stream_b = kAnyOtherStream: every stream other than stream_a (e.g. the side and high-priority streams).
inline constexpr uint32_t kAnyOtherStream = std::numeric_limits<uint32_t>::max();

struct TraceOverlap {
  size_t kernels_a = 0, kernels_b = 0;  // kernels in the window on either side
  double busy_a_ns = 0;                 // length of the union of stream A's kernel intervals (clipped to the window)
  double busy_b_ns = 0;
  double both_ns = 0;                   // length of the intersection of the two unions: time both streams ran
  double union_ns = 0;                  // time either ran
  double fraction = 0;                  // both / min(busy_a, busy_b); 0 when either side is idle
};

// From the kernel records (memcpy/memset are ignored) that intersect `window`.
TraceOverlap overlap_from_records(const std::vector<TraceRecord>& records, uint32_t stream_a, uint32_t stream_b,
                                  const TraceWindow& window = {});

// Extra Chrome-trace events (labels): "X" (a span: ts + dur), "i" (instant), "M" (metadata, e.g. thread_name;
// args then holds {"name": ...}). Times in the records' time base (ns).
struct TraceEvent {
  std::string name;
  std::string ph = "X";
  uint64_t ts_ns = 0;
  uint64_t dur_ns = 0;
  uint32_t pid = 0;  // device
  uint32_t tid = 0;  // stream id, or a label track
  json args = json::object();
};

// The Chrome-trace document: {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}. One "X"
// event per record (pid = device, tid = stream, ts/dur in µs relative to the earliest timestamp, which is
// otherData.base_ns), args with grid/block/registers/shared memory (kernels) or bytes; process/thread names.
json chrome_trace_json(const std::vector<TraceRecord>& records, const std::vector<TraceEvent>& extra_events = {});
// Writes chrome_trace_json() to `path`; throws std::runtime_error naming the path when it cannot.
void write_chrome_trace(const std::string& path, const std::vector<TraceRecord>& records,
                        const std::vector<TraceEvent>& extra_events = {});

// One tracing session at a time per process (CUPTI's activity callbacks are process-wide).
class KernelTracer {
 public:
  explicit KernelTracer(bool memory_activities = false) : memory_(memory_activities) {}
  ~KernelTracer();
  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;

  // Loads CUPTI (first call) and enables the activities. false (and *error set) when CUPTI is missing or
  // refuses (e.g. another profiler holds it); nothing is recorded then.
  bool start(std::string* error = nullptr);
  bool active() const { return active_; }
  // Synchronises the device, flushes CUPTI's buffers, disables the activities; the records since start(), in
  // start-time order (empty when not active).
  std::vector<TraceRecord> stop_and_collect();
  // CUPTI's current timestamp (the records' time base); 0 when CUPTI is not loaded.
  static uint64_t now_ns();
  // CUPTI's id of `s` (what TraceRecord::stream holds); kAnyOtherStream when it cannot be had.
  static uint32_t stream_id(cudaStream_t s);

 private:
  bool memory_;
  bool active_ = false;
};

}  // namespace dropbench
