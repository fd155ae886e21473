// Facts about the current device that launch rules read.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/common/check.hpp"

namespace dropbench {

// The current device's SM count (grids and launch orders sized by the CTAs resident at once).
inline int current_device_sms() {
  int dev = 0, sms = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace dropbench
