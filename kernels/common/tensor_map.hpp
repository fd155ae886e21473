// The driver's cuTensorMapEncodeTiled, looked up once through the runtime's entry-point query (the kernels library
// links no libcuda): what the TMA-based kernels (the wgmma attention, the wgmma FP8 GEMM) encode their tensor maps
// with. Host-only.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/common/check.hpp"

namespace dropbench {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiledFn tensor_map_encoder() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    DB_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || f == nullptr) throw CudaError("the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

}  // namespace dropbench
