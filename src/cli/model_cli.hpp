// Helpers shared by `dropbench model` and `dropbench recommend` (src/cli/cmd_model.cpp, src/cli/cmd_recommend.cpp).
#pragma once
#include <string>

#include "src/model/model.hpp"
#include "src/core/report.hpp"

namespace dropbench::mcli {

// `rel` as given when it exists, else under the source tree the binary was built from (so the default
// configs/machines/h200.json works from any directory).
std::string default_path(const std::string& rel);
std::string us(double seconds);               // microseconds, 3 significant digits
std::string cell(const model::KernelTime& t);  // "595 (mma)"

}  // namespace dropbench::mcli
