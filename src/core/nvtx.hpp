// NVTX3 ranges in the "dropbench" domain with registered strings. Range names (one tree per command):
//   <command>                                   e.g. "rng"
//     point <axis>=<value> ...                  one per sweep point, axes in sweep order
//       variant <name>                          one per variant / pipeline measured at the point
//         <phase>                               one per phase of every sample ("gen", "apply", "gemm", ...)
// `nsys profile --capture-range=nvtx --nvtx-capture='point sq=8192 ...@dropbench'` captures one point;
// scripts/nsys.sh has the exact commands.
#pragma once
#include <string>

#include <nvtx3/nvtx3.hpp>

namespace dropbench {

struct nvtx_domain {
  static constexpr char const* name{"dropbench"};
};

// Registered (once per distinct text) string handle; names repeat every sample, so registration pays.
const nvtx3::registered_string_in<nvtx_domain>& nvtx_string(const std::string& text);

// RAII push/pop of a named range in the dropbench domain.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace dropbench
