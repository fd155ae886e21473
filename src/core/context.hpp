// The run context recorded in every report: tool, version, git sha, argv, date, host, device properties,
// driver / runtime / cuBLASLt versions, clocks.
#pragma once
#include <string>
#include <vector>

#include "src/core/config.hpp"

namespace dropbench {

// Device count without throwing (0 when there is no driver or device).
int device_count();
// Full properties of device `dev` as JSON (name, cc, sms, clocks, memory, L2, smem, registers, PCI id...).
json device_json(int dev);
// Driver / runtime / cuBLASLt versions ("13.0" style strings and raw numbers).
json versions_json();
// "dirty" (sha ends in -dirty: built from a modified tree), "archive" (a git-archive export), "unknown" or "clean".
std::string tree_state(const std::string& sha);
// Context for a report; `dev` < 0 means no device (dry run).
json make_context(const std::vector<std::string>& argv, int dev);
std::string utc_now_iso();

}  // namespace dropbench
