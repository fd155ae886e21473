#include "src/core/nvtx.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace dropbench {

const nvtx3::registered_string_in<nvtx_domain>& nvtx_string(const std::string& text) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<nvtx3::registered_string_in<nvtx_domain>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[text];
  if (!slot) slot = std::make_unique<nvtx3::registered_string_in<nvtx_domain>>(text);
  return *slot;
}

NvtxRange::NvtxRange(const std::string& name) {
  nvtx3::event_attributes attr{nvtx_string(name)};
  nvtxDomainRangePushEx(nvtx3::domain::get<nvtx_domain>(), attr.get());
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(nvtx3::domain::get<nvtx_domain>()); }

}  // namespace dropbench
