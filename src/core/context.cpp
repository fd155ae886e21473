#include "src/core/context.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "kernels/gemm/gemm.cuh"
#include "src/core/power.hpp"
#include "version.h"

namespace dropbench {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

static std::string ver(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

json versions_json() {
  json j;
  int drv = 0, rt = 0;
  if (cudaDriverGetVersion(&drv) == cudaSuccess) j["driver_version"] = ver(drv);
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) j["runtime_version"] = ver(rt);
  j["cublaslt_version"] = QkvGemm::cublaslt_version_string();
  j["cublaslt_version_raw"] = QkvGemm::cublaslt_version();
  return j;
}

json device_json(int dev) {
  cudaDeviceProp p{};
  DB_CUDA(cudaGetDeviceProperties(&p, dev));
  auto attr = [dev](cudaDeviceAttr a) {
    int v = 0;
    DB_CUDA(cudaDeviceGetAttribute(&v, a, dev));
    return v;
  };
  const int sm_khz = attr(cudaDevAttrClockRate), mem_khz = attr(cudaDevAttrMemoryClockRate);
  const int bus = attr(cudaDevAttrGlobalMemoryBusWidth);
  json j;
  j["index"] = dev;
  j["name"] = p.name;
  j["cc"] = fmt::format("{}.{}", p.major, p.minor);
  j["sms"] = p.multiProcessorCount;
  j["max_sm_clock_mhz"] = sm_khz / 1000.0;
  j["max_mem_clock_mhz"] = mem_khz / 1000.0;
  j["mem_bus_width_bits"] = bus;
  // DDR: two transfers per clock.
  j["theoretical_mem_bw_gbs"] = 2.0 * mem_khz * 1e3 * (bus / 8) / 1e9;
  j["total_mem_bytes"] = p.totalGlobalMem;
  j["l2_bytes"] = p.l2CacheSize;
  j["persisting_l2_max_bytes"] = p.persistingL2CacheMaxSize;
  j["smem_per_sm_bytes"] = p.sharedMemPerMultiprocessor;
  j["smem_per_block_optin_bytes"] = p.sharedMemPerBlockOptin;
  j["regs_per_sm"] = p.regsPerMultiprocessor;
  j["max_threads_per_sm"] = p.maxThreadsPerMultiProcessor;
  j["max_blocks_per_sm"] = p.maxBlocksPerMultiProcessor;
  j["warp_size"] = p.warpSize;
  j["ecc"] = p.ECCEnabled != 0;
  j["pci"] = fmt::format("{:04x}:{:02x}:{:02x}", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  std::string uuid;
  for (int i = 0; i < 16; ++i) uuid += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[i]));
  j["uuid"] = uuid;
  return j;
}

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string tree_state(const std::string& sha) {
  auto ends = [&](const char* suf) {
    const std::string x(suf);
    return sha.size() >= x.size() && sha.compare(sha.size() - x.size(), x.size(), x) == 0;
  };
  if (ends("-dirty")) return "dirty";
  if (ends("-archive")) return "archive";
  if (sha.empty() || sha == "unknown") return "unknown";
  return "clean";
}

json make_context(const std::vector<std::string>& argv, int dev) {
  json j;
  j["tool"] = "dropbench";
  j["version"] = DROPBENCH_VERSION;
  j["git_sha"] = DROPBENCH_GIT_SHA;
  // A binary built from a modified tree cannot be rebuilt from its sha: the report says so in its own key, not
  // only in the sha's suffix.
  j["tree"] = tree_state(DROPBENCH_GIT_SHA);
  j["argv"] = argv;
  j["date_utc"] = utc_now_iso();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  j["hostname"] = host;
  const json versions = versions_json();
  for (auto it = versions.begin(); it != versions.end(); ++it) j[it.key()] = it.value();
  if (dev >= 0) {
    j["device"] = device_json(dev);
  } else {
    j["device"] = nullptr;
  }
  // The clock and power settings NVML reports (application / max clocks, power limits, persistence, the clock
  // event reasons; src/core/power.hpp); commands add the SM clock measured at start. Without a device (a dry
  // run) none of these keys is written.
  j["clocks"] = dev >= 0 ? json(clock_settings(dev)) : json::object();
  return j;
}

}  // namespace dropbench
