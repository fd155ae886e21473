// The RNG mask kernel: writes keep masks from the counter scheme of dropout_scheme.cuh.
//   Tile: 1 bit per element in the attention tile layout (what mode-`mask` attention reads).
//   Bits / U8 / I32: flat-domain masks of N elements (1 bit packed, one byte, one int32 per element), the
//   mask tensors of standalone mask-tensor dropout.
// Tile masks can cover a window of query rows (MaskWindow: the chunked pipeline) and be produced by three
// schedules (RngSchedule): the static grid-stride kernel, a small persistent kernel shaped to co-reside with
// a GEMM, and a work-stealing kernel that shares the co-resident kernel's strip counter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/common/dispatch.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {

enum class MaskLayout { Tile, Bits, U8, I32 };
// The layouts' names, in the enum's order: workload.layout's allowed values and the rng command's default axis.
inline constexpr const char* kMaskLayoutNames[] = {"tile", "bits", "u8", "i32"};
MaskLayout parse_mask_layout(const std::string& s);  // one of kMaskLayoutNames
const char* mask_layout_name(MaskLayout l);

// How a tile mask is produced. All three write the same bits.
//   Static      256-thread blocks, one wave of resident blocks (grid 0); 8-bit masks: each warp a contiguous range of
//               tiles, 16/32-bit: grid-stride over the row strips.
//   Coresident  persistent, few registers (<= 32 per thread: __maxnreg__), no shared memory, one small block
//               per SM by default (grid 0 = SM count, block 32..256); strips are taken one at a time from the
//               counter `work` (atomicAdd), so it runs at whatever pace the SM left over allows. Meant to be
//               launched BEFORE a GEMM and sit beside it (the GEMM's CTAs take almost the whole register
//               file: a 32-thread x 32-register block needs 1024 registers).
//   Steal       the same strip loop at full width (grid 0 = SMs x 2048/block, block up to 1024): the finisher
//               that takes whatever strips the co-resident kernel has not reached, or a spatial partition
//               (grid = k blocks of 1024 threads with `reserve_smem` to pin one block per SM).
// Coresident and Steal kernels of one mask share `work` (kRngWorkWords counters, zeroed before the first
// of them is launched).
enum class RngSchedule { Static, Coresident, Steal };
const char* rng_schedule_name(RngSchedule s);  // "static" | "coresident" | "steal"

// work[0]: next strip to hand out; work[1]: strips done by Coresident kernels; work[2..5]: bitmap of the SMs
// (smid < 256) Coresident blocks ran on; work[6]: Coresident blocks that ran.
constexpr int kRngWorkWords = 8;

struct RngMaskParams {
  uint64_t seed = 0;
  uint32_t offset = 0;
  int rounds = kDefaultRounds;                 // kPhiloxRounds
  int threshold_bits = kDefaultThresholdBits;  // kThresholdBits
  uint32_t drop = 0;         // Threshold::drop
  MaskLayout layout = MaskLayout::Tile;
  MaskGeometry geo;          // Tile layout
  uint64_t elements = 0;     // flat layouts
  void* out = nullptr;
  int grid = 0;              // blocks; 0 = enough to fill the device (persistent grid-stride)
  int block = 256;           // threads per block (multiple of 32)
  // Tile layout only:
  uint32_t row_begin = 0;    // query-row window [row_begin, row_begin + rows), row_begin a multiple of 16;
  uint32_t rows = 0;         //   rows 0 = to the end. out holds MaskWindow layout (dropout_scheme.cuh)
  RngSchedule schedule = RngSchedule::Static;
  unsigned long long* work = nullptr;  // Coresident / Steal: kRngWorkWords device counters (see above)
  size_t reserve_smem = 0;   // dynamic shared memory requested per block and never used (Steal only)
};

// The window of the params (tile layout).
MaskWindow rng_mask_window(const RngMaskParams& p);

// Bytes the mask occupies (tile: the window's bytes, geometry.bytes() for the whole matrix; bits: ceil(N/32)*4; u8: N; i32: 4N).
size_t mask_bytes(const RngMaskParams& p);
// Elements actually sampled (tile: of the window; causal skips tiles above the diagonal; flat: N).
uint64_t mask_elements_generated(const RngMaskParams& p);
void launch_rng_mask(const RngMaskParams& p, cudaStream_t s);

}  // namespace dropbench
