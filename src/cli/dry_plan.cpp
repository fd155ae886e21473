#include "src/cli/dry_plan.hpp"

#include <map>

#include <fmt/format.h>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "src/cli/model_cli.hpp"
#include "src/core/context.hpp"
#include "src/core/device_buffer.hpp"
#include "src/core/input.hpp"
#include "src/core/workload_params.hpp"
#include "src/model/model.hpp"

namespace dropbench {

namespace {

uint64_t u(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

}  // namespace

uint64_t MemoryPlan::buffers_total() const {
  uint64_t r = 0;
  for (const auto& [name, b] : buffers) r = checked_sum({r, b}, "the buffers take");
  return r;
}

uint64_t MemoryPlan::need() const { return checked_sum({buffers_total(), headroom}, "the buffers and headroom take"); }

uint64_t MemoryPlan::bytes(const std::string& name) const {
  for (const auto& [n, b] : buffers)
    if (n == name) return b;
  return 0;
}

json MemoryPlan::to_json() const {
  json b = json::object();
  for (const auto& [name, bytes] : buffers) b[name] = bytes;
  return json{{"buffers", b}, {"buffers_bytes", buffers_total()}, {"headroom_bytes", headroom}, {"need_bytes", need()}};
}

MemoryPlan rng_memory(const Workload& w, const std::string& where) {
  // cmd_rng.cpp: one mask buffer of the layout's size and the keep counter; 64 MiB left free.
  const std::string what = fmt::format("{}workload.sq: {} (batch {} x q_heads {} x sq^2 elements) makes the {} mask",
                                       where, w.sq, w.batch, w.q_heads, w.layout);
  const uint64_t bh = checked_product({u(w.batch), u(w.q_heads)}, what);
  const uint64_t elements = checked_product({bh, u(w.sq), u(w.sq)}, what);
  uint64_t mask = 0;
  if (w.layout == "tile") {
    mask = checked_product({bh, mask_strips(u(w.sq)), mask_tile_cols(u(w.sq)), kTileBytes}, what);
  } else if (w.layout == "bits") {
    mask = checked_product({elements / 32 + (elements % 32 != 0), 4}, what);
  } else if (w.layout == "u8") {
    mask = elements;
  } else {
    mask = checked_product({elements, 4}, what);
  }
  MemoryPlan m;
  m.buffers = {{"mask", mask}, {"counter", sizeof(unsigned long long)}};
  m.headroom = uint64_t{64} << 20;
  return m;
}

MemoryPlan dropout_memory(const Workload& w, const std::string& where) {
  // cmd_dropout.cpp: x, y, the seeded reference y, and a mask buffer as large as the int32 mask; 64 MiB free.
  const uint64_t es = w.dropout_dtype == "fp32" ? 4 : 2;
  const std::string what = fmt::format("{}workload.elements: {} makes the tensors", where, w.elements);
  const uint64_t data = checked_product({u(w.elements), es}, what);
  MemoryPlan m;
  m.buffers = {{"x", data}, {"y", data}, {"y_ref", data}, {"mask", checked_product({u(w.elements), 4}, what)}};
  m.headroom = uint64_t{64} << 20;
  return m;
}

MemoryPlan gemm_memory(const Workload& w, uint64_t workspace_bytes, const std::string& where) {
  // cmd_gemm.cpp: QkvBuffers (X, W, Y, two scales in one 512-byte block) and the cuBLASLt workspace; 64 MiB free.
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  const uint64_t in = w.dtype == "fp8" ? 1 : 2;
  const std::string what = fmt::format("{}workload.sq: {} (batch {}, embed {}) makes the GEMM's buffers", where, w.sq,
                                       w.batch, w.embed);
  MemoryPlan m;
  m.buffers = {{"x", checked_product({u(d.m), u(d.k), in}, what)},
               {"w", checked_product({u(d.n), u(d.k), in}, what)},
               {"y", checked_product({u(d.m), u(d.n), 2}, what)},
               {"scales", 2 * 64 * sizeof(float)},
               {"workspace", workspace_bytes}};
  m.headroom = uint64_t{64} << 20;
  return m;
}

MemoryPlan attention_memory(const Workload& w, const std::string& where) {
  // cmd_attention.cpp: QKV, O, the fused reference O, LSE and the 1-bit tile mask; 256 MiB free.
  const std::string what = fmt::format("{}workload.sq: {} (batch {}, q_heads {}) makes the attention's buffers", where,
                                       w.sq, w.batch, w.q_heads);
  const QkvDims d = qkv_dims(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
  const uint64_t o = checked_product({u(w.batch), u(w.sq), u(w.q_heads), u(w.head_dim), 2}, what);
  const uint64_t bh = checked_product({u(w.batch), u(w.q_heads)}, what);
  MemoryPlan m;
  m.buffers = {{"qkv", checked_product({u(d.m), u(d.n), 2}, what)},
               {"o", o},
               {"o_ref", o},
               {"lse", checked_product({bh, u(w.sq), 4}, what)},
               {"mask", checked_product({bh, mask_strips(u(w.sq)), mask_tile_cols(u(w.sq)), kTileBytes}, what)}};
  if (w.pass != "fwd") {  // attention's bwd, fwd+bwd
    // The backward's: dO, dQKV (laid out like QKV) and its workspace in the fast (atomic dQ) mode, the larger one.
    AttentionBwdParams bp;
    bp.fwd = attention_params(w, make_threshold(w.dropout_p, static_cast<int>(w.threshold_bits)));
    bp.deterministic = false;
    m.buffers.emplace_back("dout", o);
    m.buffers.emplace_back("dqkv", checked_product({u(d.m), u(d.n), 2}, what));
    checked_product({bh, u(w.sq), u(w.head_dim), 4}, what);  // the workspace's dQ accumulator, before it is sized
    m.buffers.emplace_back("bwd_workspace", attention_backward_workspace_bytes(bp));
  }
  m.headroom = uint64_t{256} << 20;
  return m;
}

MemoryPlan run_memory(const BlockMemory& b, bool full_mask, bool chunk_masks, uint64_t headroom) {
  MemoryPlan m;
  m.buffers = {{"x", b.x}, {"w", b.w}, {"qkv", b.qkv}, {"o", b.o}, {"lse", b.lse}};
  if (b.o_ref) m.buffers.emplace_back("o_ref", b.o_ref);
  m.buffers.emplace_back("gemm_workspaces", b.gemm_workspaces);
  if (full_mask) m.buffers.emplace_back("full_mask", b.full_mask);
  if (chunk_masks) m.buffers.emplace_back("chunk_masks", checked_product({b.chunk_mask, 2}, "two chunk masks take"));
  m.headroom = headroom;
  return m;
}

MemoryPlan train_run_memory(const BlockMemory& b, const TrainMemory& t, bool full_mask, uint64_t headroom) {
  MemoryPlan m = run_memory(b, false, false, headroom);
  for (const auto& [name, bytes] : t.buffers()) m.buffers.emplace_back(name, bytes);
  if (full_mask) m.buffers.emplace_back("full_mask", b.full_mask);
  return m;
}

PlanDevice plan_device(const CommonOptions& o) {
  if (o.device_memory_gib)
    return {static_cast<uint64_t>(*o.device_memory_gib * double(uint64_t{1} << 30)), "--device-memory"};
  if (!o.machine.empty()) {
    const model::Machine m = model::load_machine(mcli::default_path(o.machine));
    if (m.memory_gib > 0)
      return {static_cast<uint64_t>(m.memory_gib * double(uint64_t{1} << 30)), "machine " + m.path + ": memory_gib"};
    return {static_cast<uint64_t>(kDefaultPlanMemoryGib * double(uint64_t{1} << 30)),
            "default: an idle H200's free memory (machine " + m.path + " has no memory_gib)"};
  }
  return {static_cast<uint64_t>(kDefaultPlanMemoryGib * double(uint64_t{1} << 30)),
          "default: an idle H200's free memory"};
}

void check_plan_options(const CommonOptions& o) {
  if (o.dry_run) {
    model::Options scratch;
    apply_model_clock(o.model_clock, scratch);
    return;
  }
  if (o.device_memory_gib)
    throw UsageError("--device-memory: only with --dry-run (allowed: a dry run's plan; a measuring run checks the "
                     "device's own free memory)");
  if (!o.machine.empty())
    throw UsageError("--machine: only with --dry-run (allowed: a dry run's plan and estimates; a measuring run times "
                     "the device)");
  if (!o.model_clock.empty())
    throw UsageError("--model-clock: only with --dry-run (allowed: a dry run's estimates; a measuring run's model "
                     "uses each kernel's own clock)");
}

void apply_model_clock(const std::string& text, model::Options& o) {
  if (text.empty() || text == "model" || text == "max" || text == "sustained") {
    o.clock = text.empty() ? "model" : text;
    o.clock_mhz = 0;
    return;
  }
  const std::optional<double> v = parse_finite_number(text);
  if (!v || *v < 100 || *v > 3000)
    throw UsageError("--model-clock: '" + text + "' is not a clock (allowed: model, max, sustained, or MHz in 100..3000)");
  o.clock_mhz = *v;
}

uint64_t memory_for_checks(const CommonOptions& o) {
  return o.dry_run ? plan_device(o).bytes : static_cast<uint64_t>(device_free_bytes());
}

// ---------------------------------------------------------------------------------------------------------
// Estimates
// ---------------------------------------------------------------------------------------------------------

struct Estimator::Impl {
  std::optional<model::Machine> machine;
  std::optional<model::Profile> profile;
  std::string error;  // why the model is not available
  model::Options opts;
  mutable std::string cached_key;
  mutable std::optional<model::Prediction> cached;
  mutable std::string cached_error;

  template <class F>
  Estimate guarded(F&& f) const {
    if (!machine || !profile) return {std::nullopt, "not modelled: " + error};
    try {
      return {f(), ""};
    } catch (const std::exception& e) {
      return {std::nullopt, std::string("not modelled: ") + e.what()};
    }
  }
};

std::string machine_file_for_device(const std::string& device_name) {
  static const std::pair<const char*, const char*> kByName[] = {{"H100", "configs/machines/h100-sxm.json"},
                                                                {"H200", "configs/machines/h200.json"}};
  for (const auto& [key, file] : kByName)
    if (device_name.find(key) != std::string::npos) return file;
  return "configs/machines/h200.json";
}

namespace {

// The model's machine file: --machine (dry runs); in a measuring run the file of the GPU being measured (the
// measurement and the prediction then describe one device); else the default (no device name).
std::string machine_file(const CommonOptions& o) {
  if (!o.machine.empty()) return o.machine;
  const bool measured = !o.dry_run && device_count() > o.device;
  return machine_file_for_device(measured ? device_json(o.device).value("name", "") : std::string());
}

}  // namespace

Estimator::Estimator(const CommonOptions& o) : impl_(std::make_unique<Impl>()) {
  machine_path_ = mcli::default_path(machine_file(o));
  apply_model_clock(o.model_clock, impl_->opts);
  try {
    impl_->machine = model::load_machine(machine_path_);
    impl_->profile = model::load_profile(mcli::default_path("configs/profiles/h200.json"));
  } catch (const std::exception& e) {
    impl_->machine.reset();
    impl_->error = e.what();
  }
}

std::string Estimator::machine_name() const { return impl_->machine ? impl_->machine->name : std::string(); }

std::string Estimator::clock_text() const {
  return impl_->opts.clock_mhz > 0 ? fmt::format("{} MHz", impl_->opts.clock_mhz) : impl_->opts.clock;
}

Estimator::Estimator(Estimator&&) noexcept = default;
Estimator::~Estimator() = default;

Estimator::Estimate Estimator::rng(const Workload& w, const std::string& layout) const {
  return impl_->guarded([&] { return model::rng_time(*impl_->machine, *impl_->profile, w, layout, {}, impl_->opts).seconds; });
}

Estimator::Estimate Estimator::gemm(const Workload& w) const {
  return impl_->guarded([&] { return model::gemm_time(*impl_->machine, *impl_->profile, w, impl_->opts).seconds; });
}

Estimator::Estimate Estimator::attention(const Workload& w, const std::string& variant) const {
  return impl_->guarded([&] {
    const model::Machine& m = *impl_->machine;
    const model::Profile& p = *impl_->profile;
    const model::Options& o = impl_->opts;
    const std::string mode = variant == "rng+mask" ? "mask" : variant;
    // Serial launches, as `model --report` composes a sum.
    std::vector<double> launches;
    if (w.pass != "bwd") {
      if (variant == "rng+mask") launches.push_back(model::rng_time(m, p, w, "tile", {}, o).seconds);
      launches.push_back(model::attention_time(m, p, w, mode, {}, o).seconds);
    }
    // The backward call (passes bwd and fwd+bwd): rng+mask's reads the mask, as mask's does.
    if (w.pass != "fwd") launches.push_back(model::attention_bwd_call_time(m, p, w, mode, o).seconds);
    return model::serial_seconds(m, launches);
  });
}

Estimator::Estimate Estimator::pipeline(const Workload& w, const std::string& pipeline) const {
  return impl_->guarded([&] {
    const std::string key = to_json(w).dump();
    if (key != impl_->cached_key) {
      impl_->cached_key = key;
      impl_->cached.reset();
      impl_->cached_error.clear();
      try {
        impl_->cached = model::predict(*impl_->machine, *impl_->profile, w, impl_->opts);
      } catch (const std::exception& e) {
        impl_->cached_error = e.what();
      }
    }
    if (!impl_->cached) throw UsageError(impl_->cached_error);
    const model::PipelineTime* t = impl_->cached->pipeline(pipeline);
    if (!t) throw UsageError("the model composes no pipeline '" + pipeline + "'");
    return t->seconds;
  });
}

std::optional<model::TrainPrediction> Estimator::train(const Workload& w, std::string* note, double clock_mhz) const {
  if (!impl_->machine || !impl_->profile) {
    if (note) *note = "not modelled: " + impl_->error;
    return std::nullopt;
  }
  try {
    model::Options o = impl_->opts;
    if (clock_mhz > 0) o.clock_mhz = clock_mhz;
    return model::predict_train(*impl_->machine, *impl_->profile, w, o);
  } catch (const std::exception& e) {
    if (note) *note = std::string("not modelled: ") + e.what();
    return std::nullopt;
  }
}

json plan_json(const MemoryPlan& m, const PlanDevice& d, bool fits, const std::string& reason) {
  json j{{"memory", m.to_json()}, {"device_memory_bytes", d.bytes}, {"device_memory_from", d.from}, {"fits", fits}};
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

void put_estimate(json& derived, json& extra, const Estimator::Estimate& e) {
  if (e.seconds)
    derived["model_us"] = *e.seconds * 1e6;
  else
    extra["model_note"] = e.note;
}

}  // namespace dropbench
