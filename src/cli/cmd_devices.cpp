// `dropbench devices`: what GPUs this machine has, with the figures every report records.
#include <iostream>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "src/core/context.hpp"

namespace dropbench {

Command make_devices_command() {
  auto format = std::make_shared<std::string>("md");
  Command c;
  c.name = "devices";
  c.summary = "List GPUs: name, compute capability, SMs, clocks, memory, L2, driver/runtime/cuBLASLt versions";
  c.help =
      "Prints one row per CUDA device (and the versions of the driver, the CUDA runtime dropbench was built "
      "with, and cuBLASLt).\nWith --format json the full property set that reports record is printed.\n"
      "Exit code 2 (with one line on stderr) when there is no GPU.";
  c.sweeps = false;
  c.add_options = [format](CLI::App& app) {
    app.add_option("--format", *format, "md | json | csv")->check(CLI::IsMember({"md", "json", "csv"}));
  };
  c.run = [format](RunContext&) {
    const int n = device_count();
    if (n == 0) throw NoDeviceError(kNoGpuMessage);
    const json v = versions_json();
    if (*format == "json") {
      json out = v;
      out["devices"] = json::array();
      for (int d = 0; d < n; ++d) out["devices"].push_back(device_json(d));
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    Table t;
    t.columns = {"index", "name", "cc", "sms", "max_sm_mhz", "max_mem_mhz", "memory_GiB", "l2_MiB", "smem/sm_KiB",
                 "regs/sm", "pci"};
    for (int d = 0; d < n; ++d) {
      const json j = device_json(d);
      t.rows.push_back({std::to_string(d), j["name"].get<std::string>(), j["cc"].get<std::string>(),
                        std::to_string(j["sms"].get<int>()), fmt_num(j["max_sm_clock_mhz"].get<double>()),
                        fmt_num(j["max_mem_clock_mhz"].get<double>()),
                        fmt_num(j["total_mem_bytes"].get<double>() / (1ull << 30)),
                        fmt_num(j["l2_bytes"].get<double>() / (1 << 20)),
                        fmt_num(j["smem_per_sm_bytes"].get<double>() / 1024), std::to_string(j["regs_per_sm"].get<int>()),
                        j["pci"].get<std::string>()});
    }
    std::cout << render(t, *format);
    if (*format == "md")
      std::cout << fmt::format("\ndriver {}, runtime {}, cuBLASLt {}\n", v.value("driver_version", "?"),
                               v.value("runtime_version", "?"), v.value("cublaslt_version", "?"));
    return 0;
  };
  return c;
}

}  // namespace dropbench
