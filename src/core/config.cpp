// Configs, validation, --set overrides and sweep expansion (see config.hpp and docs/config.md).
//
// Every check produces a one-line UsageError of the form
//   config: <dotted.path>: <value> <what is wrong> (allowed: <what would be accepted>)
// Per-field checks are written once, as functions that return the error detail ("" = fine), and are used
// both when a value is set (from a file, a sweep axis or --set) and when a whole Workload is re-validated.
#include "src/core/config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "kernels/common/check.hpp"
#include "kernels/attention/attention.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/rng/rng_mask.cuh"  // kMaskLayoutNames
#include "src/core/input.hpp"
#include "src/core/pipelines.hpp"

namespace dropbench {
namespace {

// Same content as configs/quick.json (tests/test_config.cpp checks that the two agree).
constexpr const char* kBuiltinConfig = R"json({
  "name": "quick",
  "description": "Smoke test and the built-in default (used when --config is not given). One Llama-3-8B-shaped attention block (E 4096, 32 query heads, 8 KV heads, dH 128, batch 1, non-causal) at SQ 2048 and 4096, FP8 QKV GEMM, dropout p = 0.1 with 7-round Philox and 8-bit thresholds, and a 64 Mi-element standalone dropout tensor. Measurements are short (0.1 s minimum, 2 s timeout), so a whole command finishes in seconds. Use it to check that the tool and the GPU work, not for numbers you publish.",
  "workload": {
    "batch": 1,
    "embed": 4096,
    "q_heads": 32,
    "kv_heads": 8,
    "head_dim": 128,
    "sq": 4096,
    "causal": false,
    "dropout_p": 0.1,
    "dtype": "fp8",
    "rounds": 7,
    "threshold_bits": 8,
    "layout": "tile",
    "elements": 67108864,
    "dropout_dtype": "bf16",
    "pipeline": "baseline",
    "chunk": 0,
    "attention_kernel": "auto",
    "seed": "0x5eed5eed",
    "offset": 0
  },
  "sweep": {
    "sq": [2048, 4096]
  },
  "measure": {
    "min_samples": 5,
    "max_samples": 500,
    "min_time": 0.1,
    "max_noise": 0.01,
    "timeout": 2,
    "warmup": 2,
    "cold": false,
    "throttle": 0.75,
    "interleave": true,
    "settle": 0,
    "power_time": 0.5,
    "power_settle": 0.5,
    "repeats": 1,
    "repeat_gap": 0,
    "keep_series": false
  }
}
)json";

constexpr size_t kMaxAxisValues = 10000;     // values one axis may expand to
constexpr size_t kMaxSweepPoints = 1000000;  // points one sweep may expand to
constexpr const char* kAxisSpecForms =
    "a non-empty list, a scalar, {\"pow2\":[lo,hi]} or {\"range\":[lo,hi,step]}";

// ---------------------------------------------------------------------------------------------------
// Small helpers

std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64) {
    size_t cut = 61;  // not inside a UTF-8 character
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::string num(double d) {
  std::ostringstream o;
  o << d;
  return o.str();
}

template <class Seq>
std::string join(const Seq& items) {
  std::string out;
  for (const auto& it : items) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(it)>>) {
      out += std::to_string(it);
    } else {
      out += it;
    }
  }
  return out;
}

[[noreturn]] void fail(const std::string& path, const std::string& detail) {
  throw UsageError("config: " + path + ": " + detail);
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

// "[+-]digits[K|M|G]" (suffixes are powers of 1024, either case). Saturates at the int64 limits so that
// the range check, not the parser, reports huge values.
std::optional<int64_t> parse_int_text(std::string_view s) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  const size_t digits = i;
  uint64_t acc = 0;  // magnitude, saturated at kMax + 1
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    acc = acc > (kMax + 1 - d) / 10 ? kMax + 1 : acc * 10 + d;
    ++i;
  }
  if (i == digits) return std::nullopt;
  if (i < s.size()) {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
    const int shift = c == 'K' ? 10 : c == 'M' ? 20 : c == 'G' ? 30 : -1;
    if (shift < 0) return std::nullopt;
    acc = acc > ((kMax + 1) >> shift) ? kMax + 1 : acc << shift;
    ++i;
  }
  if (i != s.size()) return std::nullopt;
  if (neg) return acc > kMax ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(acc);
  return acc > kMax ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(acc);
}

// An integer: JSON integer, integral JSON float, or a string "8192" / "8K". Out-of-int64 values saturate.
std::optional<int64_t> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                          : static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) return std::nullopt;
    if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(d);
  }
  if (v.is_string()) return parse_int_text(v.get_ref<const std::string&>());
  return std::nullopt;
}

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// ---------------------------------------------------------------------------------------------------
// Per-value checks. Each returns "" when `v` is acceptable (and stores it in `out`), else the message
// detail "<value> ... (allowed: ...)".

std::string int_range(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string chk_int(const json& v, int64_t lo, int64_t hi, int64_t& out) {
  const auto i = as_int(v);
  if (!i) return show(v) + " must be an integer (allowed: " + int_range(lo, hi) + ")";
  if (*i < lo || *i > hi) return show(v) + " is out of range (allowed: " + int_range(lo, hi) + ")";
  out = *i;
  return {};
}

std::string chk_int_in(const json& v, const std::vector<int64_t>& allowed, int64_t& out) {
  const auto i = as_int(v);
  if (!i) return show(v) + " must be an integer (allowed: " + join(allowed) + ")";
  if (std::find(allowed.begin(), allowed.end(), *i) == allowed.end())
    return show(v) + " is out of range (allowed: " + join(allowed) + ")";
  out = *i;
  return {};
}

std::string chk_double(const json& v, double lo, bool lo_open, double hi, bool hi_open, double& out) {
  const std::string range = std::string(lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + (hi_open ? ")" : "]");
  if (!v.is_number()) return show(v) + " must be a number (allowed: " + range + ")";
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo) || (hi_open && d == hi))
    return show(v) + " is out of range (allowed: " + range + ")";
  out = d;
  return {};
}

std::string chk_bool(const json& v, bool& out) {
  if (!v.is_boolean()) return show(v) + " must be a boolean (allowed: true, false)";
  out = v.get<bool>();
  return {};
}

std::string chk_choice(const json& v, const std::vector<std::string>& names, std::string& out) {
  if (!v.is_string()) return show(v) + " must be a string (allowed: " + join(names) + ")";
  const auto& s = v.get_ref<const std::string&>();
  if (std::find(names.begin(), names.end(), s) == names.end())
    return show(v) + " is not a valid choice (allowed: " + join(names) + ")";
  out = s;
  return {};
}
std::string chk_choice(const json& v, std::initializer_list<const char*> allowed, std::string& out) {
  return chk_choice(v, std::vector<std::string>(allowed.begin(), allowed.end()), out);
}

std::string chk_text(const json& v, bool nonempty, std::string& out) {
  if (!v.is_string())
    return show(v) + " must be a string (allowed: " + (nonempty ? "any non-empty string" : "any string") + ")";
  if (nonempty && v.get_ref<const std::string&>().empty()) return "\"\" is empty (allowed: any non-empty string)";
  out = v.get<std::string>();
  return {};
}

// Unsigned integer up to `max`: a non-negative JSON integer, or a string of decimal digits or "0x" + hex.
std::string chk_uint(const json& v, uint64_t max, const char* type, uint64_t& out) {
  const std::string allowed =
      std::string(" (allowed: [0, ") + std::to_string(max) + "], a number or a \"0x...\" hex string)";
  uint64_t u = 0;
  if (v.is_number_unsigned()) {
    u = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    return show(v) + " is out of range" + allowed;  // negative
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d) || std::fabs(d) > 9007199254740992.0)
      return show(v) + " must be a " + type + allowed;
    if (d < 0) return show(v) + " is out of range" + allowed;
    u = static_cast<uint64_t>(d);
  } else if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const size_t start = hex ? 2 : 0;
    if (s.size() == start) return show(v) + " must be a " + type + allowed;
    for (size_t i = start; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      const int digit = std::isdigit(c) ? c - '0' : (hex && std::isxdigit(c)) ? std::tolower(c) - 'a' + 10 : -1;
      if (digit < 0) return show(v) + " must be a " + type + allowed;
      const uint64_t base = hex ? 16 : 10;
      if (u > (std::numeric_limits<uint64_t>::max() - digit) / base) return show(v) + " is out of range" + allowed;
      u = u * base + digit;
    }
  } else {
    return show(v) + " must be a " + type + allowed;
  }
  if (u > max) return show(v) + " is out of range" + allowed;
  out = u;
  return {};
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---------------------------------------------------------------------------------------------------
// Field tables: name, kind, checker/setter, getter. Order = struct order = to_json order.

enum class Kind { Int, Double, Bool, Text, UInt };

struct WorkloadField {
  const char* name;
  Kind kind;
  std::string (*set)(Workload&, const json&);
  json (*get)(const Workload&);
  // Written by to_json only when it differs from the default, so configs and reports that never set it read as
  // before the field existed.
  bool omit_default = false;
};

// The passes each command runs (workload.pass): one field, whose allowed values depend on the command.
struct CommandPasses {
  const char* command;
  std::vector<std::string> passes;
};
const std::vector<CommandPasses>& command_passes_table() {
  static const std::vector<CommandPasses> t = {{"attention", {"fwd", "bwd", "fwd+bwd"}}, {"run", {"fwd", "train"}}};
  return t;
}

std::vector<std::string> all_passes() {
  std::vector<std::string> out;
  for (const CommandPasses& c : command_passes_table())
    for (const std::string& p : c.passes)
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

std::string passes_by_command_text() {
  std::string out;
  for (const CommandPasses& c : command_passes_table())
    out += (out.empty() ? "" : "; ") + join(c.passes) + " for " + c.command;
  return out;
}

// A workload key that was renamed: the refusal names the new one.
[[noreturn]] void renamed_or_unknown(const std::string& path, const std::string& name, const std::string& allowed) {
  if (name == "attention_pass")
    fail(path, std::string("renamed: use ") + (path.rfind("sweep.", 0) == 0 ? "sweep" : "workload") +
                   ".pass (allowed: " + passes_by_command_text() + ")");
  fail(path, "unknown key (allowed: " + allowed + ")");
}

// The fields of the problem: its shape, precision and dropout (Philox rounds, threshold width).
std::vector<WorkloadField> problem_fields() {
  return {
      {"batch", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 1, 4096, w.batch); },
       [](const Workload& w) { return json(w.batch); }},
      {"embed", Kind::Int,
       [](Workload& w, const json& v) {
         int64_t e = 0;
         std::string d = chk_int(v, 64, 65536, e);
         if (d.empty() && e % 16 != 0)
           return show(v) + " is not a multiple of 16 (allowed: multiples of 16 in [64, 65536])";
         if (d.empty()) w.embed = e;
         return d;
       },
       [](const Workload& w) { return json(w.embed); }},
      {"q_heads", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 1, 1024, w.q_heads); },
       [](const Workload& w) { return json(w.q_heads); }},
      {"kv_heads", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 1, 1024, w.kv_heads); },
       [](const Workload& w) { return json(w.kv_heads); }},
      {"head_dim", Kind::Int,
       [](Workload& w, const json& v) {
         return chk_int_in(v, std::vector<int64_t>(std::begin(kHeadDims), std::end(kHeadDims)), w.head_dim);
       },
       [](const Workload& w) { return json(w.head_dim); }},
      {"sq", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 1, 1048576, w.sq); },
       [](const Workload& w) { return json(w.sq); }},
      {"causal", Kind::Bool, [](Workload& w, const json& v) { return chk_bool(v, w.causal); },
       [](const Workload& w) { return json(w.causal); }},
      {"dropout_p", Kind::Double,
       [](Workload& w, const json& v) { return chk_double(v, 0.0, false, 1.0, true, w.dropout_p); },
       [](const Workload& w) { return json(w.dropout_p); }},
      {"dtype", Kind::Text,
       [](Workload& w, const json& v) {
         return chk_choice(v, {"fp8", "bf16"}, w.dtype);
       },
       [](const Workload& w) { return json(w.dtype); }},
      {"rounds", Kind::Int,
       [](Workload& w, const json& v) {
         return chk_int_in(v, std::vector<int64_t>(std::begin(kPhiloxRounds), std::end(kPhiloxRounds)), w.rounds);
       },
       [](const Workload& w) { return json(w.rounds); }},
      {"threshold_bits", Kind::Int,
       [](Workload& w, const json& v) {
         return chk_int_in(v, std::vector<int64_t>(std::begin(kThresholdBits), std::end(kThresholdBits)), w.threshold_bits);
       },
       [](const Workload& w) { return json(w.threshold_bits); }},
  };
}

// The rest, in struct order: the RNG mask layout, the dropout command's tensor (elements, dtype), the pipeline and
// its chunk, the pass, the layer count, the kernel family and the RNG stream (seed, offset).
std::vector<WorkloadField> run_fields() {
  return {
      {"layout", Kind::Text,
       [](Workload& w, const json& v) {
         return chk_choice(v, std::vector<std::string>(std::begin(kMaskLayoutNames), std::end(kMaskLayoutNames)),
                           w.layout);
       },
       [](const Workload& w) { return json(w.layout); }},
      {"elements", Kind::Int,
       [](Workload& w, const json& v) { return chk_int(v, 1, int64_t{1} << 34, w.elements); },
       [](const Workload& w) { return json(w.elements); }},
      {"dropout_dtype", Kind::Text,
       [](Workload& w, const json& v) {
         return chk_choice(v, {"bf16", "fp32"}, w.dropout_dtype);
       },
       [](const Workload& w) { return json(w.dropout_dtype); }},
      {"pipeline", Kind::Text,
       [](Workload& w, const json& v) {
         return chk_choice(v, pipeline_names(), w.pipeline);
       },
       [](const Workload& w) { return json(w.pipeline); }},
      {"chunk", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 0, 1048576, w.chunk); },
       [](const Workload& w) { return json(w.chunk); }},
      {"pass", Kind::Text,
       [](Workload& w, const json& v) {
         // Any command's pass here; the command checks its own (check_command_passes), as only it knows them.
         std::string d = chk_choice(v, all_passes(), w.pass);
         return d.empty() ? d : show(v) + " is not a pass (allowed: " + passes_by_command_text() + ")";
       },
       [](const Workload& w) { return json(w.pass); }, true},
      {"layers", Kind::Int, [](Workload& w, const json& v) { return chk_int(v, 0, 4096, w.layers); },
       [](const Workload& w) { return json(w.layers); }, true},
      {"attention_kernel", Kind::Text,
       [](Workload& w, const json& v) {
         // The kernels library's own names, so the two cannot drift apart.
         return chk_choice(v,
                           {attention_kernel_family_name(AttentionKernel::Auto),
                            attention_kernel_family_name(AttentionKernel::Wgmma),
                            attention_kernel_family_name(AttentionKernel::Mma)},
                           w.attention_kernel);
       },
       [](const Workload& w) { return json(w.attention_kernel); }},
      {"seed", Kind::UInt,
       [](Workload& w, const json& v) {
         return chk_uint(v, std::numeric_limits<uint64_t>::max(), "uint64", w.seed);
       },
       [](const Workload& w) { return json(hex(w.seed)); }},
      {"offset", Kind::UInt,
       [](Workload& w, const json& v) {
         uint64_t u = 0;
         std::string d = chk_uint(v, std::numeric_limits<uint32_t>::max(), "uint32", u);
         if (d.empty()) w.offset = static_cast<uint32_t>(u);
         return d;
       },
       [](const Workload& w) { return json(w.offset); }},
  };
}

// Every workload field, in struct (and to_json) order.
const std::vector<WorkloadField>& workload_fields() {
  static const std::vector<WorkloadField> fields = [] {
    std::vector<WorkloadField> f = problem_fields();
    const std::vector<WorkloadField> r = run_fields();
    f.insert(f.end(), r.begin(), r.end());
    return f;
  }();
  return fields;
}

const WorkloadField* find_workload_field(const std::string& name) {
  for (const auto& f : workload_fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string workload_keys() {
  std::vector<std::string> names;
  for (const auto& f : workload_fields()) names.push_back(f.name);
  return join(names);
}

struct MeasureField {
  const char* name;
  std::string (*set)(MeasureSettings&, const json&);
  json (*get)(const MeasureSettings&);
};

const std::vector<MeasureField>& measure_fields() {
  static const std::vector<MeasureField> fields = {
      {"min_samples", [](MeasureSettings& m, const json& v) { return chk_int(v, 1, 1000000, m.min_samples); },
       [](const MeasureSettings& m) { return json(m.min_samples); }},
      {"max_samples", [](MeasureSettings& m, const json& v) { return chk_int(v, 1, 10000000, m.max_samples); },
       [](const MeasureSettings& m) { return json(m.max_samples); }},
      {"min_time",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 3600.0, false, m.min_time); },
       [](const MeasureSettings& m) { return json(m.min_time); }},
      {"max_noise",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, true, 1.0, false, m.max_noise); },
       [](const MeasureSettings& m) { return json(m.max_noise); }},
      {"timeout",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, true, 86400.0, false, m.timeout); },
       [](const MeasureSettings& m) { return json(m.timeout); }},
      {"warmup", [](MeasureSettings& m, const json& v) { return chk_int(v, 0, 10000, m.warmup); },
       [](const MeasureSettings& m) { return json(m.warmup); }},
      {"cold", [](MeasureSettings& m, const json& v) { return chk_bool(v, m.cold); },
       [](const MeasureSettings& m) { return json(m.cold); }},
      {"throttle",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 1.0, false, m.throttle); },
       [](const MeasureSettings& m) { return json(m.throttle); }},
      {"interleave", [](MeasureSettings& m, const json& v) { return chk_bool(v, m.interleave); },
       [](const MeasureSettings& m) { return json(m.interleave); }},
      {"settle",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 3600.0, false, m.settle); },
       [](const MeasureSettings& m) { return json(m.settle); }},
      {"power_time",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 600.0, false, m.power_time); },
       [](const MeasureSettings& m) { return json(m.power_time); }},
      {"power_settle",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 600.0, false, m.power_settle); },
       [](const MeasureSettings& m) { return json(m.power_settle); }},
      {"repeats", [](MeasureSettings& m, const json& v) { return chk_int(v, 1, 100, m.repeats); },
       [](const MeasureSettings& m) { return json(m.repeats); }},
      {"repeat_gap",
       [](MeasureSettings& m, const json& v) { return chk_double(v, 0.0, false, 3600.0, false, m.repeat_gap); },
       [](const MeasureSettings& m) { return json(m.repeat_gap); }},
      {"keep_series", [](MeasureSettings& m, const json& v) { return chk_bool(v, m.keep_series); },
       [](const MeasureSettings& m) { return json(m.keep_series); }},
  };
  return fields;
}

const MeasureField* find_measure_field(const std::string& name) {
  for (const auto& f : measure_fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::string measure_keys() {
  std::vector<std::string> names;
  for (const auto& f : measure_fields()) names.push_back(f.name);
  return join(names);
}

void set_measure_field(MeasureSettings& m, const std::string& field, const json& v, const std::string& path) {
  const MeasureField* f = find_measure_field(field);
  if (!f) fail(path, "unknown key (allowed: " + measure_keys() + ")");
  const std::string d = f->set(m, v);
  if (!d.empty()) fail(path, d);
}

void validate_measure(const MeasureSettings& m) {
  MeasureSettings tmp;
  for (const auto& f : measure_fields()) {
    const std::string d = f.set(tmp, f.get(m));
    if (!d.empty()) fail(std::string("measure.") + f.name, d);
  }
  if (m.max_samples < m.min_samples)
    fail("measure.max_samples", std::to_string(m.max_samples) +
                                    " is less than measure.min_samples = " + std::to_string(m.min_samples) +
                                    " (allowed: [" + std::to_string(m.min_samples) + ", 10000000])");
}

bool is_axis(const std::string& name) {
  const auto& a = axis_names();
  return std::find(a.begin(), a.end(), name) != a.end();
}

[[noreturn]] void unknown_axis(const std::string& name) {
  std::string hint;
  if (name == "seed" || name == "offset") hint = "; seed and offset are not sweepable";
  renamed_or_unknown("sweep." + name, name, join(axis_names()) + hint);
}

// ---------------------------------------------------------------------------------------------------
// --set value parsing

// One scalar token of a comma list / pow2 / range: JSON scalar, else integer with K/M/G suffix, else a
// bare word (string).
json token_value(const std::string& raw) {
  const std::string t = trim(raw);
  json j = json::parse(t, nullptr, false);
  if (!j.is_discarded() && j.is_primitive()) return j;
  if (auto i = parse_int_text(t)) return json(*i);
  return json(t);
}

// JSON; else pow2:LO:HI; else range:LO:HI:STEP; else a comma list (optionally in [ ]); else one token.
json parse_override_value(const std::string& text, const std::string& path) {
  if (json_depth(text) > kMaxJsonDepth)
    fail(path, "the value is nested more than " + std::to_string(kMaxJsonDepth) +
                   " levels deep (allowed: a scalar, a list or {\"pow2\"|\"range\": [...]})");
  json j = json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  const std::string t = trim(text);
  for (const char* form : {"pow2", "range"}) {
    const std::string prefix = std::string(form) + ":";
    if (t.rfind(prefix, 0) != 0) continue;
    const auto parts = split(t.substr(prefix.size()), ':');
    const size_t want = std::string(form) == "pow2" ? 2 : 3;
    if (parts.size() != want)
      fail(path, show(json(t)) + " is malformed (allowed: " +
                     (want == 2 ? "pow2:LO:HI, e.g. pow2:2K:64K" : "range:LO:HI:STEP, e.g. range:1K:8K:1K") + ")");
    json arr = json::array();
    for (const auto& p : parts) arr.push_back(token_value(p));
    return json{{form, arr}};
  }
  std::string body = t;
  bool bracketed = false;
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']') {
    body = body.substr(1, body.size() - 2);
    bracketed = true;
  }
  if (bracketed || body.find(',') != std::string::npos) {
    json arr = json::array();
    if (trim(body).empty()) return arr;
    for (const auto& item : split(body, ',')) arr.push_back(token_value(item));
    return arr;
  }
  return token_value(t);
}

void set_axis(Config& c, const std::string& axis, std::vector<json> values) {
  for (auto& [name, vals] : c.sweep) {
    if (name == axis) {
      vals = std::move(values);
      return;
    }
  }
  c.sweep.emplace_back(axis, std::move(values));
}

}  // namespace

// -------------------------------------------------------------------------------------------------------
// Public API

const std::vector<std::string>& axis_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& f : workload_fields())
      if (f.kind != Kind::UInt) n.push_back(f.name);
    return n;
  }();
  return names;
}

void set_workload_field(Workload& w, const std::string& field, const json& value, const std::string& where) {
  const std::string path = where.empty() ? "workload." + field : where;
  const WorkloadField* f = find_workload_field(field);
  if (!f) renamed_or_unknown(path, field, workload_keys());
  const std::string d = f->set(w, value);
  if (!d.empty()) fail(path, d);
}

// `where` is the literal message prefix for a field name: "config: workload." (the default when empty),
// or e.g. "config: sweep point {\"sq\":100}: ".
void validate_workload(const Workload& w, const std::string& where) {
  const std::string pre = where.empty() ? "config: workload." : where;
  Workload tmp;
  for (const auto& f : workload_fields()) {
    const std::string d = f.set(tmp, f.get(w));
    if (!d.empty()) throw UsageError(pre + f.name + ": " + d);
  }
  if (w.q_heads % w.kv_heads != 0) {
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= w.q_heads; ++d)
      if (w.q_heads % d == 0) divisors.push_back(d);
    throw UsageError(pre + "kv_heads: " + std::to_string(w.kv_heads) + " does not divide q_heads = " +
                     std::to_string(w.q_heads) + " (allowed: " + join(divisors) + ")");
  }
}

namespace {

// The integer values of a pow2 ([lo, hi]) or range ([lo, hi, step]) axis spec, each with the path it is reported
// under; form errors name fpath and the allowed forms.
void generate_ints(const WorkloadField& field, const std::string& axis, const json& spec, const std::string& form,
                   const json& args, const std::string& fpath, const std::string& forms,
                   std::vector<std::pair<json, std::string>>& raw) {
  const bool pow2 = form == "pow2";
  const size_t nargs = args.size();  // checked: 2 for pow2, 3 for range
  if (field.kind != Kind::Int)
    fail(fpath, show(spec) + ": " + form + " needs an integer axis (allowed: a list of " + axis + " values)");
  int64_t b[3] = {0, 0, 0};
  for (size_t i = 0; i < nargs; ++i) {
    const auto v = as_int(args[i]);
    if (!v) fail(fpath, show(args[i]) + " must be an integer (allowed: " + forms + ")");
    b[i] = *v;
  }
  if (pow2) {
    for (int i = 0; i < 2; ++i)
      if (!is_pow2(b[i])) fail(fpath, show(args[i]) + " is not a power of two (allowed: " + forms + ")");
    if (b[0] > b[1]) fail(fpath, show(args) + " has lo > hi (allowed: " + forms + ")");
    for (int64_t v = b[0];; v *= 2) {
      raw.emplace_back(json(v), fpath);
      if (v == b[1]) break;
    }
  } else {
    if (b[2] <= 0) fail(fpath, show(args) + " has step <= 0 (allowed: " + forms + ")");
    if (b[0] > b[1]) fail(fpath, show(args) + " has lo > hi (allowed: " + forms + ")");
    // lo <= hi, so hi - lo is exact in uint64; every generated value lies in [lo, hi].
    const uint64_t steps =
        (static_cast<uint64_t>(b[1]) - static_cast<uint64_t>(b[0])) / static_cast<uint64_t>(b[2]);
    if (steps >= kMaxAxisValues)
      fail(fpath, show(args) + " gives " +
                      (steps == std::numeric_limits<uint64_t>::max() ? std::to_string(steps) + "+"
                                                                     : std::to_string(steps + 1)) +
                      " values (allowed: at most " + std::to_string(kMaxAxisValues) + ")");
    for (uint64_t i = 0; i <= steps; ++i)
      raw.emplace_back(
          json(static_cast<int64_t>(static_cast<uint64_t>(b[0]) + i * static_cast<uint64_t>(b[2]))), fpath);
  }
}

// The values of a range ([lo, hi, step]) spec of a real-valued axis, snapped to 1e-12.
void generate_doubles(const json& args, const std::string& fpath, const std::string& forms,
                      std::vector<std::pair<json, std::string>>& raw) {
  double b[3];
  for (size_t i = 0; i < 3; ++i) {
    if (!args[i].is_number()) fail(fpath, show(args[i]) + " must be a number (allowed: " + forms + ")");
    b[i] = args[i].get<double>();
  }
  if (!(b[2] > 0)) fail(fpath, show(args) + " has step <= 0 (allowed: " + forms + ")");
  if (b[0] > b[1]) fail(fpath, show(args) + " has lo > hi (allowed: " + forms + ")");
  const double n = std::floor((b[1] - b[0]) / b[2] + 1e-9) + 1;
  if (n > static_cast<double>(kMaxAxisValues))
    fail(fpath,
         show(args) + " gives too many values (allowed: at most " + std::to_string(kMaxAxisValues) + ")");
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    // Snap to 1e-12 so that 0 + 3 * 0.1 is 0.3, not 0.30000000000000004.
    const double v = std::round((b[0] + static_cast<double>(i) * b[2]) * 1e12) / 1e12;
    raw.emplace_back(json(std::min(v, b[1])), fpath);
  }
}

}  // namespace

std::vector<json> expand_axis(const std::string& axis, const json& spec) {
  if (!is_axis(axis)) unknown_axis(axis);
  const WorkloadField& field = *find_workload_field(axis);
  const std::string path = "sweep." + axis;

  // Raw values with the path each is reported under.
  std::vector<std::pair<json, std::string>> raw;
  if (spec.is_array()) {
    if (spec.empty()) fail(path, "[] is an empty list (allowed: " + std::string(kAxisSpecForms) + ")");
    for (size_t i = 0; i < spec.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (!spec[i].is_primitive() || spec[i].is_null())
        fail(p, show(spec[i]) + " must be a scalar (allowed: " + std::string(kAxisSpecForms) + ")");
      raw.emplace_back(spec[i], p);
    }
  } else if (spec.is_object()) {
    if (spec.size() != 1 || !(spec.contains("pow2") || spec.contains("range"))) {
      for (const auto& [k, v] : spec.items())
        if (k != "pow2" && k != "range") fail(path + "." + k, "unknown key (allowed: pow2, range)");
      fail(path, show(spec) + " has both pow2 and range (allowed: " + std::string(kAxisSpecForms) + ")");
    }
    const bool pow2 = spec.contains("pow2");
    const std::string form = pow2 ? "pow2" : "range";
    const std::string fpath = path + "." + form;
    const json& args = spec.at(form);
    const size_t nargs = pow2 ? 2 : 3;
    const std::string forms =
        pow2 ? "[lo, hi], powers of two with lo <= hi" : "[lo, hi, step] with lo <= hi, step > 0";
    if (!args.is_array() || args.size() != nargs)
      fail(fpath, show(args) + " is malformed (allowed: " + forms + ")");
    if (pow2 || field.kind == Kind::Int) {
      generate_ints(field, axis, spec, form, args, fpath, forms, raw);
    } else if (field.kind == Kind::Double) {
      generate_doubles(args, fpath, forms, raw);
    } else {
      fail(fpath, show(spec) + ": range needs a numeric axis (allowed: a list of " + axis + " values)");
    }
  } else if (spec.is_null()) {
    fail(path, "null is not a sweep axis (allowed: " + std::string(kAxisSpecForms) + ")");
  } else {
    raw.emplace_back(spec, path);
  }

  // Validate and normalise each value (8K -> 8192, 0 -> 0.0 for dropout_p...), then drop duplicates.
  std::vector<json> out;
  for (const auto& [v, p] : raw) {
    Workload tmp;
    set_workload_field(tmp, axis, v, p);
    json n = field.get(tmp);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

Config config_from_json(const json& j, const std::string& source) {
  if (!j.is_object())
    throw UsageError(
        "config: " + source + ": " + show(j) +
        " is not a JSON object (allowed: {\"name\", \"description\", \"workload\", \"sweep\", \"measure\"})");
  Config c;
  c.source = source;
  const char* kTop = "name, description, workload, sweep, measure";
  for (const auto& [key, val] : j.items()) {
    if (key == "name" || key == "description") {
      std::string s;
      const std::string d = chk_text(val, key == "name", s);
      if (!d.empty()) fail(key, d);
      (key == "name" ? c.name : c.description) = s;
    } else if (key == "workload") {
      if (!val.is_object()) fail(key, show(val) + " must be an object (allowed: {" + workload_keys() + "})");
      for (const auto& [k, v] : val.items()) set_workload_field(c.workload, k, v, "workload." + k);
    } else if (key == "sweep") {
      if (!val.is_object()) fail(key, show(val) + " must be an object (allowed: {axis: values, ...})");
      for (const auto& [k, v] : val.items()) {
        if (!is_axis(k)) unknown_axis(k);
        set_axis(c, k, expand_axis(k, v));
      }
    } else if (key == "measure") {
      if (!val.is_object()) fail(key, show(val) + " must be an object (allowed: {" + measure_keys() + "})");
      for (const auto& [k, v] : val.items()) set_measure_field(c.measure, k, v, "measure." + k);
    } else {
      fail(key, std::string("unknown key (allowed: ") + kTop + ")");
    }
  }
  validate_workload(c.workload, "config: workload.");
  validate_measure(c.measure);
  return c;
}

namespace {

// JSON keeps the last of two equal keys in an object without a word; a config that says sq twice is a
// mistake (a paste, a merge), so the raw text is walked once more and the first repeated key refused.
void reject_duplicate_keys(const std::string& text, const std::string& source) {
  struct Frame {
    bool object;
    std::vector<std::string> keys;  // seen in this object
    size_t index = 0;               // next element of this array
  };
  std::vector<Frame> stack;
  std::string dup;  // path of the first repeated key
  auto path_to = [&stack](const std::string& key) {
    std::string out;
    for (const Frame& f : stack) {
      if (&f == &stack.back()) break;
      if (f.object) out += (out.empty() ? "" : ".") + f.keys.back();
      else out += "[" + std::to_string(f.index) + "]";
    }
    return out + (out.empty() ? "" : ".") + key;
  };
  auto element_done = [&stack] {
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
  };
  const json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start: stack.push_back({true, {}}); break;
      case json::parse_event_t::array_start: stack.push_back({false, {}}); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        element_done();
        break;
      case json::parse_event_t::key: {
        if (stack.empty() || !parsed.is_string()) break;
        const std::string k = parsed.get<std::string>();
        auto& keys = stack.back().keys;
        if (dup.empty() && std::find(keys.begin(), keys.end(), k) != keys.end()) dup = path_to(k);
        keys.push_back(k);  // back() is the current key: the path of what follows
        break;
      }
      case json::parse_event_t::value: element_done(); break;
    }
    return true;
  };
  // Syntax errors are load_config's to report; this pass only looks for repeated keys (the document it builds
  // is not needed).
  const json walked = json::parse(text, cb, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  static_cast<void>(walked);
  if (!dup.empty()) fail(source + ": " + dup, "duplicate key (allowed: each key once per object)");
}

}  // namespace

Config load_config(const std::string& path) {
  const char* what = "a JSON config file, e.g. configs/quick.json";
  const std::string text = read_input_file(path, "config", what);
  const json j = parse_json_input(text, path, "config", what, /*comments=*/true);
  reject_duplicate_keys(text, path);
  Config c = config_from_json(j, path);
  if (j.is_object() && !j.contains("name")) c.name = std::filesystem::path(path).stem().string();
  return c;
}

void apply_override(Config& cfg, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos)
    throw UsageError("--set " + assignment +
                     ": expected KEY=VALUE (allowed: e.g. workload.sq=8192, sweep.rounds=3,5,7)");
  const std::string key = trim(std::string_view(assignment).substr(0, eq));
  const std::string text = assignment.substr(eq + 1);
  try {
    Config c = cfg;  // all-or-nothing
    const auto parts = split(key, '.');
    const std::string top = parts[0];
    const char* kPaths = "name, description, workload.<field>, sweep.<axis>, measure.<field>";
    if (parts.size() == 1 && (top == "name" || top == "description")) {
      json v = parse_override_value(text, key);
      if (!v.is_string()) v = json(trim(text));  // --set name=123 means the text "123"
      std::string s;
      const std::string d = chk_text(v, top == "name", s);
      if (!d.empty()) fail(key, d);
      (top == "name" ? c.name : c.description) = s;
    } else if (parts.size() == 2 && top == "workload") {
      if (!find_workload_field(parts[1])) renamed_or_unknown(key, parts[1], workload_keys());
      const json v = parse_override_value(text, key);
      if (v.is_array() || v.is_object())
        fail(key, show(v) + " is not a single value (allowed: one value; to sweep it use --set sweep." + parts[1] +
                      "=...)");
      set_workload_field(c.workload, parts[1], v, key);
      validate_workload(c.workload, "config: workload.");
    } else if (parts.size() == 2 && top == "sweep") {
      if (!is_axis(parts[1])) unknown_axis(parts[1]);
      const json v = parse_override_value(text, key);
      if (v.is_null()) {  // --set sweep.sq=null drops the axis
        std::erase_if(c.sweep, [&](const auto& a) { return a.first == parts[1]; });
      } else {
        set_axis(c, parts[1], expand_axis(parts[1], v));
      }
    } else if (parts.size() == 2 && top == "measure") {
      if (!find_measure_field(parts[1])) fail(key, "unknown key (allowed: " + measure_keys() + ")");
      set_measure_field(c.measure, parts[1], parse_override_value(text, key), key);
      validate_measure(c.measure);
    } else {
      fail(key.empty() ? std::string("\"\"") : key, std::string("unknown key (allowed: ") + kPaths + ")");
    }
    cfg = std::move(c);
  } catch (const UsageError& e) {
    std::string msg = e.what();
    if (msg.rfind("config: ", 0) == 0) msg = msg.substr(8);
    throw UsageError("--set " + assignment + ": " + msg);
  }
}

json to_json(const Workload& w) {
  json j = json::object();
  static const Workload defaults;
  for (const auto& f : workload_fields())
    if (!f.omit_default || f.get(w) != f.get(defaults)) j[f.name] = f.get(w);
  return j;
}

json to_json(const MeasureSettings& m) {
  json j = json::object();
  for (const auto& f : measure_fields()) j[f.name] = f.get(m);
  return j;
}

json to_json(const Config& cfg) {
  json sweep = json::object();
  for (const auto& [axis, values] : cfg.sweep) {
    json arr = json::array();
    for (const auto& v : values) arr.push_back(v);
    sweep[axis] = std::move(arr);
  }
  json j = json::object();
  j["name"] = cfg.name;
  j["description"] = cfg.description;
  j["workload"] = to_json(cfg.workload);
  j["sweep"] = std::move(sweep);
  j["measure"] = to_json(cfg.measure);
  return j;
}

namespace {

// The config as loaded, before any --set: the built-in one, or cfg.source read again (Config keeps no record
// of which values --set changed). Unreadable now: nullopt.
std::optional<Config> as_loaded(const Config& cfg) {
  if (cfg.source == "<built-in>") return builtin_config();
  try {
    return load_config(cfg.source);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// An axis the command does not sweep: a preset sweeps axes for several commands, so its own are ignored; one that
// --set added or changed is an error naming it and the command's axes (scripts/peers.py passes each command only its
// own axes).
void check_unswept_axes(const Config& cfg, const std::vector<std::string>& axes) {
  std::vector<std::string> ignored;
  std::optional<std::optional<Config>> loaded;  // read only when needed
  for (const auto& [name, values] : cfg.sweep) {
    if (values.empty() || std::find(axes.begin(), axes.end(), name) != axes.end()) continue;
    if (!loaded) loaded = as_loaded(cfg);
    const std::optional<Config>& file = *loaded;
    // A config that cannot be read again (made from JSON text): its sweep is taken as its own, not --set.
    const bool from_file = !file || std::any_of(file->sweep.begin(), file->sweep.end(), [&](const auto& a) {
                             return a.first == name && a.second == values;
                           });
    if (!from_file) ignored.push_back("sweep." + name);
  }
  if (!ignored.empty())
    throw UsageError("--set " + join(ignored) + ": this command does not sweep " +
                     (ignored.size() == 1 ? "it" : "them") + " (allowed axes: " + (axes.empty() ? "none" : join(axes)) +
                     ")");
}

}  // namespace

std::vector<SweepPoint> expand_sweep(const Config& cfg, const std::vector<std::string>& axes,
                                     const std::map<std::string, std::vector<json>>& defaults) {
  struct Axis {
    std::string name;
    std::vector<json> values;
    bool recorded;  // listed in point.axes (swept by the config or by `defaults`)
  };
  std::vector<Axis> dims;
  for (const auto& name : axes) {
    if (!is_axis(name)) unknown_axis(name);
    if (std::any_of(dims.begin(), dims.end(), [&](const Axis& a) { return a.name == name; })) continue;
    const auto it =
        std::find_if(cfg.sweep.begin(), cfg.sweep.end(), [&](const auto& a) { return a.first == name; });
    if (it != cfg.sweep.end() && !it->second.empty()) {
      dims.push_back({name, it->second, true});
    } else if (auto d = defaults.find(name); d != defaults.end() && !d->second.empty()) {
      // Presets set every workload field, most to the built-in values the command's defaults sweep around; a
      // value the built-in config does not have (E 8192, causal) is the config's choice, so it is kept as the
      // axis's one value (still listed in the axes) instead of the default sweep.
      const json mine = find_workload_field(name)->get(cfg.workload);
      if (mine != find_workload_field(name)->get(builtin_config().workload)) {
        dims.push_back({name, {mine}, true});
        continue;
      }
      json spec = json::array();
      for (const auto& v : d->second) spec.push_back(v);
      dims.push_back({name, expand_axis(name, spec), true});
    } else {
      dims.push_back({name, {find_workload_field(name)->get(cfg.workload)}, false});
    }
  }

  check_unswept_axes(cfg, axes);

  size_t total = 1;
  for (const auto& d : dims) {
    if (total > kMaxSweepPoints / d.values.size())
      throw UsageError("config: sweep: the sweep over " + join(axes) + " has more than " +
                       std::to_string(kMaxSweepPoints) + " points (allowed: at most " +
                       std::to_string(kMaxSweepPoints) + ")");
    total *= d.values.size();
  }

  std::vector<SweepPoint> points;
  points.reserve(total);
  std::vector<size_t> digit(dims.size(), 0);
  for (size_t idx = 0; idx < total; ++idx) {
    size_t rem = idx;
    for (size_t k = dims.size(); k-- > 0;) {  // mixed radix, last axis fastest
      digit[k] = rem % dims[k].values.size();
      rem /= dims[k].values.size();
    }
    SweepPoint p;
    p.index = idx;
    p.workload = cfg.workload;
    for (size_t k = 0; k < dims.size(); ++k) {
      const json& v = dims[k].values[digit[k]];
      set_workload_field(p.workload, dims[k].name, v, "sweep." + dims[k].name);
      if (dims[k].recorded) p.axes[dims[k].name] = v;
    }
    validate_workload(p.workload, "config: sweep point " + p.axes.dump() + ": ");
    points.push_back(std::move(p));
  }
  return points;
}

Config builtin_config() { return config_from_json(json::parse(kBuiltinConfig), "<built-in>"); }

const std::vector<std::string>& command_passes(const std::string& command) {
  for (const CommandPasses& c : command_passes_table())
    if (command == c.command) return c.passes;
  throw std::logic_error("command_passes: " + command + " runs no pass");
}

void check_command_passes(const std::vector<SweepPoint>& points, const std::string& command) {
  const std::vector<std::string>& ok = command_passes(command);
  for (const SweepPoint& pt : points)
    if (std::find(ok.begin(), ok.end(), pt.workload.pass) == ok.end())
      fail(pt.axes.contains("pass") ? "sweep.pass" : "workload.pass",
           show(json(pt.workload.pass)) + " is not a pass of " + command + " (allowed: " + join(ok) + ")");
}

}  // namespace dropbench
