// KernelTracer (CUPTI Activity API, loaded with dlopen), the Chrome-trace writer and the overlap arithmetic.
#include "src/core/trace.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>

#include <cupti.h>
#include <fmt/format.h>

#include "kernels/common/dl.hpp"

namespace dropbench {

const char* kind_name(TraceRecord::Kind k) {
  switch (k) {
    case TraceRecord::Kind::Kernel: return "kernel";
    case TraceRecord::Kind::Memcpy: return "memcpy";
    case TraceRecord::Kind::Memset: return "memset";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------------
// Overlap: union of each side's busy intervals, then the intersection of the two unions.

namespace {

using TimeSpan = std::pair<uint64_t, uint64_t>;  // [begin, end)

std::vector<TimeSpan> merged(std::vector<TimeSpan> v) {
  std::sort(v.begin(), v.end());
  std::vector<TimeSpan> out;
  for (const TimeSpan& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

double length(const std::vector<TimeSpan>& v) {
  double s = 0;
  for (const TimeSpan& i : v) s += static_cast<double>(i.second - i.first);
  return s;
}

double intersection(const std::vector<TimeSpan>& a, const std::vector<TimeSpan>& b) {
  double s = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t lo = std::max(a[i].first, b[j].first);
    const uint64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) s += static_cast<double>(hi - lo);
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return s;
}

}  // namespace

TraceOverlap overlap_from_records(const std::vector<TraceRecord>& records, uint32_t stream_a, uint32_t stream_b,
                                  const TraceWindow& window) {
  std::vector<TimeSpan> a, b;
  TraceOverlap r;
  for (const TraceRecord& k : records) {
    if (k.kind != TraceRecord::Kind::Kernel) continue;
    const uint64_t lo = std::max(k.start_ns, window.begin_ns);
    const uint64_t hi = std::min(k.end_ns, window.end_ns);
    if (hi <= lo) continue;
    if (k.stream == stream_a) {
      a.emplace_back(lo, hi);
      ++r.kernels_a;
    } else if (stream_b == kAnyOtherStream || k.stream == stream_b) {
      b.emplace_back(lo, hi);
      ++r.kernels_b;
    }
  }
  a = merged(std::move(a));
  b = merged(std::move(b));
  r.busy_a_ns = length(a);
  r.busy_b_ns = length(b);
  r.both_ns = intersection(a, b);
  r.union_ns = r.busy_a_ns + r.busy_b_ns - r.both_ns;
  const double m = std::min(r.busy_a_ns, r.busy_b_ns);
  r.fraction = m > 0 ? r.both_ns / m : 0.0;
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Chrome trace.

json chrome_trace_json(const std::vector<TraceRecord>& records, const std::vector<TraceEvent>& extra_events) {
  uint64_t base = std::numeric_limits<uint64_t>::max();
  for (const TraceRecord& r : records) base = std::min(base, r.start_ns);
  for (const TraceEvent& e : extra_events)
    if (e.ph != "M") base = std::min(base, e.ts_ns);
  if (base == std::numeric_limits<uint64_t>::max()) base = 0;
  auto us = [base](uint64_t ns) { return ns >= base ? static_cast<double>(ns - base) / 1e3 : 0.0; };

  json events = json::array();
  std::set<uint32_t> pids;
  std::set<std::pair<uint32_t, uint32_t>> tids;
  std::set<std::pair<uint32_t, uint32_t>> named;  // threads named by an extra "M" event
  for (const TraceEvent& e : extra_events)
    if (e.ph == "M" && e.name == "thread_name") named.emplace(e.pid, e.tid);

  for (const TraceRecord& r : records) {
    json ev;
    ev["name"] = r.name;
    ev["cat"] = kind_name(r.kind);
    ev["ph"] = "X";
    ev["ts"] = us(r.start_ns);
    ev["dur"] = r.end_ns > r.start_ns ? static_cast<double>(r.end_ns - r.start_ns) / 1e3 : 0.0;
    ev["pid"] = r.device;
    ev["tid"] = r.stream;
    json args = json::object();
    if (r.kind == TraceRecord::Kind::Kernel) {
      args["grid"] = {r.grid[0], r.grid[1], r.grid[2]};
      args["block"] = {r.block[0], r.block[1], r.block[2]};
      args["registers"] = r.registers;
      args["static_smem"] = r.static_smem;
      args["dynamic_smem"] = r.dynamic_smem;
    } else {
      args["bytes"] = r.bytes;
    }
    args["correlation"] = r.correlation;
    ev["args"] = std::move(args);
    events.push_back(std::move(ev));
    pids.insert(r.device);
    tids.emplace(r.device, r.stream);
  }
  for (const TraceEvent& e : extra_events) {
    json ev;
    ev["name"] = e.name;
    ev["ph"] = e.ph;
    ev["pid"] = e.pid;
    ev["tid"] = e.tid;
    if (e.ph != "M") {
      ev["cat"] = "dropbench";
      ev["ts"] = us(e.ts_ns);
      if (e.ph == "X") ev["dur"] = static_cast<double>(e.dur_ns) / 1e3;
      if (e.ph == "i") ev["s"] = "t";  // instant event scoped to its thread
      pids.insert(e.pid);
    }
    ev["args"] = e.args;
    events.push_back(std::move(ev));
  }
  for (uint32_t p : pids)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", p}, {"tid", 0},
                      {"args", {{"name", fmt::format("GPU {}", p)}}}});
  for (const auto& [p, t] : tids)
    if (!named.count({p, t}))
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", p}, {"tid", t},
                        {"args", {{"name", fmt::format("stream {}", t)}}}});
  json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ns";
  doc["otherData"] = {{"tool", "dropbench"}, {"base_ns", base}, {"records", records.size()}};
  return doc;
}

void write_chrome_trace(const std::string& path, const std::vector<TraceRecord>& records,
                        const std::vector<TraceEvent>& extra_events) {
  const json doc = chrome_trace_json(records, extra_events);
  std::ofstream f(path, std::ios::trunc);
  if (!f) throw std::runtime_error("--trace: cannot write '" + path + "'");
  f << doc.dump() << '\n';
  f.close();
  if (!f) throw std::runtime_error("--trace: writing '" + path + "' failed");
}

// ---------------------------------------------------------------------------------------------------------------
// CUPTI, loaded at run time.

namespace {

struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;
  bool callbacks_registered = false;
};

std::mutex g_mu;                        // guards g_records (CUPTI may call back from its own thread)
std::vector<TraceRecord> g_records;
bool g_session = false;                 // one KernelTracer active at a time

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

// The Cupti table, or nullptr with *why set.
Cupti* cupti(std::string* why) {
  static Cupti api;
  static std::string error;
  static bool tried = false;
  static bool ok = false;
  if (!tried) {
    tried = true;
    std::vector<std::string> names;
    if (const char* env = std::getenv("DROPBENCH_CUPTI")) names.push_back(env);
#ifdef DROPBENCH_CUPTI_LIB
    names.push_back(DROPBENCH_CUPTI_LIB);  // the toolkit's library found at build time
#endif
    names.insert(names.end(), {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                               "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"});
    std::string tried_names;
    void* h = dlopen_first(names, &tried_names);
    if (!h) {
      error = "libcupti not found (tried " + tried_names + "; set DROPBENCH_CUPTI=/path/to/libcupti.so)";
    } else {
      bool all = true;
      auto sym = [&](auto& fn, const char* s) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, s));
        if (!fn) {
          all = false;
          error += std::string(error.empty() ? "libcupti lacks " : ", ") + s;
        }
      };
      sym(api.register_callbacks, "cuptiActivityRegisterCallbacks");
      sym(api.enable, "cuptiActivityEnable");
      sym(api.disable, "cuptiActivityDisable");
      sym(api.flush_all, "cuptiActivityFlushAll");
      sym(api.next_record, "cuptiActivityGetNextRecord");
      sym(api.result_string, "cuptiGetResultString");
      sym(api.timestamp, "cuptiGetTimestamp");
      sym(api.stream_id, "cuptiGetStreamIdEx");
      ok = all;
    }
  }
  if (!ok && why) *why = error;
  return ok ? &api : nullptr;
}

std::string result_text(Cupti* api, CUptiResult r) {
  const char* s = nullptr;
  if (api->result_string && api->result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return fmt::format("CUPTI error {}", static_cast<int>(r));
}

constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kAlign = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Cupti* api = cupti(nullptr);
  std::vector<TraceRecord> got;
  CUpti_Activity* rec = nullptr;
  while (api && valid > 0 && api->next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    TraceRecord t;
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        t.kind = TraceRecord::Kind::Kernel;
        t.name = demangle(k->name);
        t.device = k->deviceId;
        t.stream = k->streamId;
        t.start_ns = k->start;
        t.end_ns = k->end;
        t.grid[0] = k->gridX, t.grid[1] = k->gridY, t.grid[2] = k->gridZ;
        t.block[0] = k->blockX, t.block[1] = k->blockY, t.block[2] = k->blockZ;
        t.registers = k->registersPerThread;
        t.static_smem = k->staticSharedMemory;
        t.dynamic_smem = k->dynamicSharedMemory;
        t.correlation = k->correlationId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        static const char* kinds[] = {"?", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
        t.kind = TraceRecord::Kind::Memcpy;
        t.name = std::string("memcpy ") + (m->copyKind < std::size(kinds) ? kinds[m->copyKind] : "?");
        t.device = m->deviceId;
        t.stream = m->streamId;
        t.start_ns = m->start;
        t.end_ns = m->end;
        t.bytes = m->bytes;
        t.correlation = m->correlationId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        t.kind = TraceRecord::Kind::Memset;
        t.name = "memset";
        t.device = m->deviceId;
        t.stream = m->streamId;
        t.start_ns = m->start;
        t.end_ns = m->end;
        t.bytes = m->bytes;
        t.correlation = m->correlationId;
        break;
      }
      default:
        continue;
    }
    if (t.start_ns == 0 || t.end_ns < t.start_ns) continue;  // incomplete record
    got.push_back(std::move(t));
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_session) g_records.insert(g_records.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
}

std::vector<CUpti_ActivityKind> kinds_of(bool memory) {
  std::vector<CUpti_ActivityKind> k = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  if (memory) k.insert(k.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  return k;
}

}  // namespace

KernelTracer::~KernelTracer() {
  if (active_) {
    try {
      stop_and_collect();
    } catch (...) {
    }
  }
}

bool KernelTracer::start(std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return false;
  };
  if (active_) return true;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_session) return fail("another KernelTracer is active");
  }
  std::string why;
  Cupti* api = cupti(&why);
  if (!api) return fail(why);
  if (!api->callbacks_registered) {
    const CUptiResult r = api->register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return fail("cuptiActivityRegisterCallbacks: " + result_text(api, r));
    api->callbacks_registered = true;
  }
  std::vector<CUpti_ActivityKind> enabled;
  for (CUpti_ActivityKind k : kinds_of(memory_)) {
    const CUptiResult r = api->enable(k);
    if (r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind e : enabled) api->disable(e);
      return fail(fmt::format("cuptiActivityEnable({}): {}", static_cast<int>(k), result_text(api, r)));
    }
    enabled.push_back(k);
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_records.clear();
    g_session = true;
  }
  active_ = true;
  return true;
}

std::vector<TraceRecord> KernelTracer::stop_and_collect() {
  if (!active_) return {};
  active_ = false;
  Cupti* api = cupti(nullptr);
  (void)cudaDeviceSynchronize();  // every traced kernel complete (an error surfaces at the caller's next check)
  api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kinds_of(memory_)) api->disable(k);
  api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<TraceRecord> out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    out.swap(g_records);
    g_session = false;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRecord& a, const TraceRecord& b) { return a.start_ns < b.start_ns; });
  return out;
}

uint64_t KernelTracer::now_ns() {
  Cupti* api = cupti(nullptr);
  uint64_t t = 0;
  if (!api || api->timestamp(&t) != CUPTI_SUCCESS) return 0;
  return t;
}

uint32_t KernelTracer::stream_id(cudaStream_t s) {
  Cupti* api = cupti(nullptr);
  uint32_t id = 0;
  if (!api || api->stream_id(nullptr, s, 0, &id) != CUPTI_SUCCESS) return kAnyOtherStream;
  return id;
}

}  // namespace dropbench
