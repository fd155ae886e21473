// The driver's cuTensorMapEncodeTiled, looked up once through the runtime's entry-point query (the kernels library
// links no libcuda): what the TMA-based kernels (the wgmma attention, the wgmma FP8 GEMM) encode their tensor maps
// with. Host-only.
#pragma once
#include <cstdint>
#include <string>

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

// A 3-D tensor map {cols, sq rows, batch} over a row-major [batch * sq, >= cols] buffer of bf16 (or fp32) elements whose
// rows are row_stride elements apart (16-byte multiples; base 16-byte aligned): boxes of 128 bytes of columns (64
// bf16 or 32 fp32; 128-byte swizzle) x box_rows rows of one batch. Rows past sq are out of bounds of their batch: a
// load zero-fills them, a store or reduction skips them. The attention forward's Q / K / V maps and the backward's
// (QKV and dO: bf16; its fp32 dQ accumulator) are these.
enum class RowsMapType { Bf16, Fp32 };
inline CUtensorMap encode_rows_map(const void* base, int64_t cols, int64_t row_stride, int sq, int batch, uint32_t box_rows,
                                   const char* what, RowsMapType type = RowsMapType::Bf16) {
  CUtensorMap m;
  const cuuint64_t es = type == RowsMapType::Fp32 ? 4 : 2;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(sq), static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_stride) * es,
                                 static_cast<cuuint64_t>(row_stride) * es * static_cast<cuuint64_t>(sq)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(128 / es), box_rows, 1};
  const cuuint32_t estr[3] = {1, 1, 1};
  const CUtensorMapDataType dt = type == RowsMapType::Fp32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = tensor_map_encoder()(&m, dt, 3, const_cast<void*>(base), dims, strides,
                                          box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError(std::string(what) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return m;
}

}  // namespace dropbench
