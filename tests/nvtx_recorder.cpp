// nvtx_recorder: an NVTX injection library that writes every range push/pop to a text log, so tests (and
// users without Nsight Systems) can check the NVTX ranges dropbench emits.
//
// Use:   NVTX_INJECTION64_PATH=/path/libnvtx_recorder.so DROPBENCH_NVTX_LOG=/tmp/ranges.log ./dropbench ...
//
// The NVTX3 header-only implementation in the application dlopens the library named by
// NVTX_INJECTION64_PATH at the first NVTX call and calls our InitializeInjectionNvtx2(getExportTable). We
// fetch the callback export table, ask it for the CORE and CORE2 module function tables and overwrite the
// slots of the calls we handle; every slot we leave alone becomes a no-op once initialisation finishes.
//
// Log format, one line per event, appended to $DROPBENCH_NVTX_LOG (opened once, line-buffered):
//   push <domain>\t<name>
//   pop <domain>
// <domain> is "" for the default (global) domain. Message types ASCII and REGISTERED are written as their
// text; any other message type (unicode, unknown) is written as "<unsupported>". Backslash, tab, newline
// and carriage return inside a domain or name are written as \\, \t, \n, \r so one event stays one line.
// Events from all threads go to the one file under a mutex; the log does not say which thread pushed.
//
// If DROPBENCH_NVTX_LOG is unset or cannot be opened, initialisation fails (a line on stderr) and the
// application's NVTX calls all become no-ops.
#define NVTX_NO_IMPL  // a tool: we want the types and the export-table declarations, not the implementation
#include <nvtx3/nvToolsExt.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

// All state is heap-allocated and never freed: NVTX calls may still arrive from static destructors of the
// application after this library's own globals would have been destroyed.
struct Recorder {
  std::mutex mu;
  std::FILE* log = nullptr;
  std::vector<std::string> domains;                        // domain handle (index + 1) -> name
  std::unordered_map<std::string, std::size_t> domain_ids; // name -> index, so a name maps to one handle
  std::vector<std::string> strings;                        // string handle (index + 1) -> text
};

Recorder& rec() {
  static Recorder* r = new Recorder();
  return *r;
}

// Per-thread push depth per domain (key: the domain handle value), to give NVTX's return values.
thread_local std::unordered_map<std::uintptr_t, int>* t_depth = nullptr;

int& depth_of(std::uintptr_t domain_key) {
  if (!t_depth) t_depth = new std::unordered_map<std::uintptr_t, int>();
  return (*t_depth)[domain_key];
}

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

// Caller holds rec().mu.
std::string domain_name_locked(nvtxDomainHandle_t domain) {
  if (!domain) return "";
  auto id = reinterpret_cast<std::uintptr_t>(domain);
  auto& r = rec();
  if (id >= 1 && id <= r.domains.size()) return r.domains[id - 1];
  return "<unknown domain>";
}

// Caller holds rec().mu.
std::string message_text_locked(const nvtxEventAttributes_t* attr) {
  if (!attr) return "<unsupported>";
  switch (attr->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return attr->message.ascii ? std::string(attr->message.ascii) : std::string();
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      auto id = reinterpret_cast<std::uintptr_t>(attr->message.registered);
      auto& r = rec();
      if (id >= 1 && id <= r.strings.size()) return r.strings[id - 1];
      return "<unknown string handle>";
    }
    default:
      return "<unsupported>";
  }
}

// Caller holds rec().mu.
void write_line_locked(std::string_view verb, std::string_view domain, const std::string* name) {
  std::string line;
  line.reserve(64);
  line += verb;
  line += ' ';
  append_escaped(line, domain);
  if (name) {
    line += '\t';
    append_escaped(line, *name);
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), rec().log);  // line-buffered stream: flushed at the newline
}

int push_event(nvtxDomainHandle_t domain, const std::string* literal, const nvtxEventAttributes_t* attr) {
  std::string dname, text;
  {
    std::lock_guard<std::mutex> lock(rec().mu);
    dname = domain_name_locked(domain);
    text = literal ? *literal : message_text_locked(attr);
    write_line_locked("push", dname, &text);
  }
  int& d = depth_of(reinterpret_cast<std::uintptr_t>(domain));
  return d++;  // NVTX: the zero-based level of the range being started
}

int pop_event(nvtxDomainHandle_t domain) {
  {
    std::lock_guard<std::mutex> lock(rec().mu);
    write_line_locked("pop", domain_name_locked(domain), nullptr);
  }
  int& d = depth_of(reinterpret_cast<std::uintptr_t>(domain));
  if (d <= 0) return -1;  // NVTX: negative when there was no range to end (still logged, for the parser)
  return --d;
}

// ---- handlers, installed into the application's NVTX function-pointer slots ----

nvtxDomainHandle_t NVTX_API rec_DomainCreateA(const char* name) {
  std::string n = name ? name : "";
  auto& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.domain_ids.find(n);
  std::size_t idx;
  if (it != r.domain_ids.end()) {
    idx = it->second;
  } else {
    idx = r.domains.size();
    r.domains.push_back(n);
    r.domain_ids.emplace(n, idx);
  }
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<std::uintptr_t>(idx + 1));
}

nvtxDomainHandle_t NVTX_API rec_DomainCreateW(const wchar_t*) { return rec_DomainCreateA("<unsupported>"); }

void NVTX_API rec_DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: names remain printable

nvtxStringHandle_t NVTX_API rec_DomainRegisterStringA(nvtxDomainHandle_t, const char* text) {
  auto& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  r.strings.emplace_back(text ? text : "");
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<std::uintptr_t>(r.strings.size()));
}

nvtxStringHandle_t NVTX_API rec_DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t*) {
  auto& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  r.strings.emplace_back("<unsupported>");
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<std::uintptr_t>(r.strings.size()));
}

int NVTX_API rec_DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  return push_event(domain, nullptr, attr);
}

int NVTX_API rec_DomainRangePop(nvtxDomainHandle_t domain) { return pop_event(domain); }

int NVTX_API rec_RangePushEx(const nvtxEventAttributes_t* attr) { return push_event(nullptr, nullptr, attr); }

int NVTX_API rec_RangePushA(const char* message) {
  std::string m = message ? message : "";
  return push_event(nullptr, &m, nullptr);
}

int NVTX_API rec_RangePushW(const wchar_t*) {
  static const std::string unsupported = "<unsupported>";
  return push_event(nullptr, &unsupported, nullptr);
}

int NVTX_API rec_RangePop(void) { return pop_event(nullptr); }

void NVTX_API rec_Initialize(const void*) {}

// Fetches one module's function table: an array of pointers to the application's function-pointer slots.
bool module_table(const NvtxExportTableCallbacks* cb, NvtxCallbackModule module, NvtxFunctionTable* table,
                  unsigned int* size) {
  *table = nullptr;
  *size = 0;
  return cb->GetModuleFunctionTable(module, table, size) != 0 && *table != nullptr;
}

template <class Fn>
bool install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (id >= size || table[id] == nullptr) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;

  const char* path = std::getenv("DROPBENCH_NVTX_LOG");
  if (!path || !*path) {
    std::fprintf(stderr, "nvtx_recorder: DROPBENCH_NVTX_LOG is not set; NVTX recording disabled\n");
    return 0;
  }

  auto* cb = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks) || !cb->GetModuleFunctionTable) {
    std::fprintf(stderr, "nvtx_recorder: the application's NVTX has no callback export table\n");
    return 0;
  }
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_n = 0, core2_n = 0;
  if (!module_table(cb, NVTX_CB_MODULE_CORE, &core, &core_n) ||
      !module_table(cb, NVTX_CB_MODULE_CORE2, &core2, &core2_n)) {
    std::fprintf(stderr, "nvtx_recorder: cannot get the NVTX CORE/CORE2 function tables\n");
    return 0;
  }

  {
    auto& r = rec();
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.log) {
      r.log = std::fopen(path, "a");
      if (!r.log) {
        std::fprintf(stderr, "nvtx_recorder: cannot open DROPBENCH_NVTX_LOG=%s: %s\n", path, std::strerror(errno));
        return 0;
      }
      std::setvbuf(r.log, nullptr, _IOLBF, 0);
    }
  }

  if (auto* vi = static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
      vi && vi->struct_size >= sizeof(NvtxExportTableVersionInfo) && vi->SetInjectionNvtxVersion) {
    vi->SetInjectionNvtxVersion(NVTX_VERSION);
  }

  bool ok = true;
  ok &= install(core2, core2_n, NVTX_CBID_CORE2_DomainCreateA, &rec_DomainCreateA);
  ok &= install(core2, core2_n, NVTX_CBID_CORE2_DomainRegisterStringA, &rec_DomainRegisterStringA);
  ok &= install(core2, core2_n, NVTX_CBID_CORE2_DomainRangePushEx, &rec_DomainRangePushEx);
  ok &= install(core2, core2_n, NVTX_CBID_CORE2_DomainRangePop, &rec_DomainRangePop);
  ok &= install(core, core_n, NVTX_CBID_CORE_RangePushA, &rec_RangePushA);
  ok &= install(core, core_n, NVTX_CBID_CORE_RangePushEx, &rec_RangePushEx);
  ok &= install(core, core_n, NVTX_CBID_CORE_RangePop, &rec_RangePop);
  if (!ok) {
    std::fprintf(stderr, "nvtx_recorder: the application's NVTX function tables are too small\n");
    return 0;
  }
  // Optional extras: accepted so that they do not hand out null handles.
  install(core2, core2_n, NVTX_CBID_CORE2_DomainCreateW, &rec_DomainCreateW);
  install(core2, core2_n, NVTX_CBID_CORE2_DomainRegisterStringW, &rec_DomainRegisterStringW);
  install(core2, core2_n, NVTX_CBID_CORE2_DomainDestroy, &rec_DomainDestroy);
  install(core2, core2_n, NVTX_CBID_CORE2_Initialize, &rec_Initialize);
  install(core, core_n, NVTX_CBID_CORE_RangePushW, &rec_RangePushW);
  return 1;
}
