// Our Hopper FP8 QKV GEMM: TMA + mbarrier pipeline, warp-specialised, wgmma m64n256k32 (see gemm_wgmma.cuh).
//
// Written from the PTX ISA (wgmma.mma_async, matrix descriptors, cp.async.bulk.tensor, mbarrier; the wrappers are
// kernels/common/ptx.cuh's) and the CUDA driver API (cuTensorMapEncodeTiled).
//
// Shared-memory layout of one stage (1024-byte aligned): A tile 128 rows x 128 bytes, B tile 256 rows x 128
// bytes, each written by TMA with the 128-byte swizzle (16-byte chunk c of row r lands at chunk c ^ (r % 8)).
// wgmma reads them through descriptors in the canonical K-major 128-byte-swizzle layout: stride between
// 8-row groups (SBO) 1024 bytes, leading offset unused (1), swizzle mode 1; the k-th 32-byte K slice of a
// row starts 32·k bytes further (the swizzle is applied by the hardware to the final address bits, so the
// start address simply advances inside the 128-byte row).
#include "lab/gemm_wgmma/gemm_wgmma.cuh"

#include <cuda.h>  // CUtensorMap and its enums (header only: the encoder comes from the driver entry point)
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>

#include "kernels/common/check.hpp"
#include "kernels/common/tensor_map.hpp"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace wg {

constexpr int kBM = 128, kBK = 128, kThreads = 384;
constexpr int kABytes = kBM * kBK;                  // 16 KiB
[[maybe_unused]] constexpr int kGroupM = 16;                         // tile raster: 16 M-tiles per group, N-tiles across

// Per N-tile width (the CTA tile is 128 x BN; each consumer warpgroup owns 64 x BN, one m64nBNk32 wgmma per
// 32-byte K slice):
//   BN 256: 4 stages of 48 KiB, register cap 160 a thread at launch: 384 x 160 = 61440 of the SM's 65536.
//   BN 128: 6 stages of 32 KiB, register cap 96: 384 x 96 = 36864, leaving 28672.
// No setmaxnreg: ptxas allocates the whole kernel within the entry cap even after setmaxnreg.inc (a cap of 144
// failed with "Insufficient registers (144) ... register target of 154 or higher" on the m64n256 wgmma), so
// moving registers from the producer to the consumers would buy the compiler nothing; nothing spills.
template <int BN> struct Tile;
template <> struct Tile<256> { static constexpr int kStages = 4, kRegs = 160; };
template <> struct Tile<128> { static constexpr int kStages = 6, kRegs = 96; };
template <int BN> constexpr int kBBytes = BN * kBK;
template <int BN> constexpr int kSmemData = Tile<BN>::kStages * (kABytes + kBBytes<BN>);
template <int BN> constexpr int kSmemBytes = kSmemData<BN> + 1024 + 2 * Tile<BN>::kStages * 8;  // + align + barriers
template <int BN> constexpr int kStageRow = BN * 2 + 16;  // staged epilogue: bytes per bf16 row (+16: no conflicts)
static_assert(2 * 64 * kStageRow<256> <= kSmemData<256> && 2 * 64 * kStageRow<128> <= kSmemData<128>,
              "staged epilogue must fit in the stage buffers");

using namespace ptx;

template <int BN>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[BN / 2], uint64_t da, uint64_t db) {
  if constexpr (BN == 256) wgmma_m64n256k32_e4m3(d, da, db);
  else wgmma_m64n128k32_e4m3(d, da, db);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

// kCluster 2: CTAs (2i, 2i+1) form a cluster on M-tiles (tm, tm+1) of one N-tile; each loads half of the B tile
// (128 rows) and multicasts it to both, so B's L2->SM traffic halves. A stage is refilled only after the
// consumers of BOTH CTAs released it (empty barriers count 16 arrivals, 8 of them remote), and both CTAs meet
// at a cluster barrier before exiting (no remote arrive or multicast can reach an exited CTA).
template <bool kStaged, int kCluster, int kBN>
__global__ void __maxnreg__(Tile<kBN>::kRegs)
    gemm_wgmma_fp8_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                          __nv_bfloat16* __restrict__ y, const float* __restrict__ scale_x,
                          const float* __restrict__ scale_w, int M, int N, int K, int tiles_m, int tiles_n) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A plain compute_90 / PTX pass (-DDROPBENCH_CUDA_GENCODE with a PTX target): wgmma, TMA and mbarrier
  // transaction counts exist only on sm_90a, so that image holds a stub; the sm_90a image is the one that runs.
  __trap();
#else
  constexpr int kStages = Tile<kBN>::kStages;
  constexpr int kBBytes = wg::kBBytes<kBN>;
  constexpr int kSmemData = wg::kSmemData<kBN>;
  constexpr int kStageRow = wg::kStageRow<kBN>;
  constexpr int kAcc = kBN / 2;  // fp32 accumulators a thread
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (base - raw);
  const uint32_t s_a = base, s_b = base + kStages * kABytes;
  const uint32_t full = base + kSmemData, empty = full + kStages * 8;

  // Tile raster: groups of kGroupM M-tiles; inside a group the M-tile varies fastest.
  const int id = blockIdx.x;
  const int group = id / (kGroupM * tiles_n);
  const int first_m = group * kGroupM;
  const int group_m = min(tiles_m - first_m, kGroupM);
  const int local = id - group * kGroupM * tiles_n;
  const int tm = first_m + local % group_m;
  const int tn = local / group_m;
  const int ktiles = (K + kBK - 1) / kBK;
  const int wgi = threadIdx.x / 128;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full + 8 * s, 1);   // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(empty + 8 * s, 8 * kCluster);  // one arrive per consumer warp of every CTA of the cluster
    }
    fence_mbar_init();
    prefetch_tensormap(&map_a);
    prefetch_tensormap(&map_b);
  }
  if constexpr (kCluster > 1) cluster_sync();  // the peer's barriers exist before anything is multicast into them
  else __syncthreads();
  const uint32_t rank = kCluster > 1 ? cluster_rank() : 0;

  if (wgi == 0) {
    // ---- producer warpgroup ----
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % kStages;
        if (kt >= kStages) {
          if constexpr (kCluster == 1) mbar_wait(empty + 8 * s, ((kt / kStages) - 1) & 1);
          else mbar_wait_cluster(empty + 8 * s, ((kt / kStages) - 1) & 1);
        }
        mbar_arrive_expect_tx(full + 8 * s, kABytes + kBBytes);  // OOB-filled bytes count too
        tma_load_2d(s_a + s * kABytes, &map_a, kt * kBK, tm * kBM, full + 8 * s);
        if constexpr (kCluster == 1) {
          tma_load_2d(s_b + s * kBBytes, &map_b, kt * kBK, tn * kBN, full + 8 * s);
        } else {
          constexpr int kHalf = kBN / kCluster;  // rows of B this CTA loads for the whole cluster
          tma_load_2d_multicast(s_b + s * kBBytes + rank * kHalf * kBK, &map_b, kt * kBK, tn * kBN + rank * kHalf,
                                full + 8 * s, static_cast<uint16_t>((1u << kCluster) - 1));
        }
      }
    }
    if constexpr (kCluster > 1) {
      __syncwarp();
      cluster_sync();
    }
    return;
  }

  // ---- consumer warpgroups 1, 2: rows [64 (wgi-1), 64 wgi) of the tile ----
  const int c = wgi - 1;
  const int t = threadIdx.x - 128 * wgi;
  const int warp = t >> 5, lane = t & 31;
  float d[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) d[i] = 0.f;

  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % kStages;
    mbar_wait(full + 8 * s, (kt / kStages) & 1);
    const uint64_t da = desc_sw128(s_a + s * kABytes + c * 64 * kBK, 16, 1024);
    const uint64_t db = desc_sw128(s_b + s * kBBytes, 16, 1024);
    reg_fence(d);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 32; ++k) wgmma_e4m3<kBN>(d, da + 2 * k, db + 2 * k);  // +32 bytes = +2
    wgmma_commit();
    reg_fence(d);
    wgmma_wait<1>();  // the previous K step's group is done: its stage can be refilled
    reg_fence(d);
    if (kt > 0 && lane == 0) {
      const uint32_t e = empty + 8 * ((kt - 1) % kStages);
      if constexpr (kCluster == 1) {
        mbar_arrive(e);
      } else {
#pragma unroll
        for (int r = 0; r < kCluster; ++r) mbar_arrive_cluster(e, r);  // own CTA included (rank == own)
      }
    }
  }
  wgmma_wait<0>();
  reg_fence(d);

  const float scale = (scale_x ? *scale_x : 1.f) * (scale_w ? *scale_w : 1.f);
  const int row_l = 16 * warp + (lane >> 2);  // accumulator rows row_l and row_l + 8 of this warpgroup's 64
  const int col_l = 2 * (lane & 3);           // columns col_l + 8 j, + 1
  const int64_t row_g = static_cast<int64_t>(tm) * kBM + 64 * c;
  const int col_g = tn * kBN;

  if constexpr (kStaged) {
    // Every consumer's wgmmas have finished reading the stages (both warpgroups) before they are reused.
    named_bar_sync<1, 256>();
    uint8_t* st = smem + c * 64 * kStageRow;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = 8 * j + col_l;
      *reinterpret_cast<uint32_t*>(st + row_l * kStageRow + col * 2) = pack_bf16x2(d[4 * j] * scale, d[4 * j + 1] * scale);
      *reinterpret_cast<uint32_t*>(st + (row_l + 8) * kStageRow + col * 2) =
          pack_bf16x2(d[4 * j + 2] * scale, d[4 * j + 3] * scale);
    }
    if (c == 0) named_bar_sync<2, 128>();
    else named_bar_sync<3, 128>();
    // Warp w writes whole rows, 16 bytes a lane: one 512-byte row (BN 256) or two 256-byte rows (BN 128) per
    // instruction, rows w·rpi + lr, then every 4·rpi.
    constexpr int kLanesPerRow = kBN / 8, kRowsPerIter = 32 / kLanesPerRow;
    const int lr = lane / kLanesPerRow, lc = lane % kLanesPerRow;
    const int col = col_g + 8 * lc;
    if (col < N) {
#pragma unroll 4
      for (int r = warp * kRowsPerIter + lr; r < 64; r += 4 * kRowsPerIter) {
        const int64_t row = row_g + r;
        if (row < M)
          *reinterpret_cast<uint4*>(y + row * N + col) = *reinterpret_cast<const uint4*>(st + r * kStageRow + lc * 16);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = col_g + 8 * j + col_l;
      if (col < N) {
        const int64_t r0 = row_g + row_l;
        if (r0 < M) *reinterpret_cast<uint32_t*>(y + r0 * N + col) = pack_bf16x2(d[4 * j] * scale, d[4 * j + 1] * scale);
        if (r0 + 8 < M)
          *reinterpret_cast<uint32_t*>(y + (r0 + 8) * N + col) = pack_bf16x2(d[4 * j + 2] * scale, d[4 * j + 3] * scale);
      }
    }
  }
  if constexpr (kCluster > 1) {
    __syncwarp();
    cluster_sync();
  }
#endif
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, __nv_bfloat16*, const float*, const float*, int, int, int, int, int);

KernelFn kernel_for(const WgmmaConfig& cfg) {
  const bool staged = cfg.epilogue == WgmmaEpilogue::Staged;
  if (cfg.tile_n == 128) return staged ? gemm_wgmma_fp8_kernel<true, 1, 128> : gemm_wgmma_fp8_kernel<false, 1, 128>;
  if (cfg.cluster == 2) return staged ? gemm_wgmma_fp8_kernel<true, 2, 256> : gemm_wgmma_fp8_kernel<false, 2, 256>;
  return staged ? gemm_wgmma_fp8_kernel<true, 1, 256> : gemm_wgmma_fp8_kernel<false, 1, 256>;
}

// Host-side view of a variant's geometry.
struct Geom {
  int bn, stages, smem_bytes, regs_cap;
};
Geom geom(const WgmmaConfig& cfg) {
  if (cfg.tile_n == 128) return {128, Tile<128>::kStages, kSmemBytes<128>, Tile<128>::kRegs};
  return {256, Tile<256>::kStages, kSmemBytes<256>, Tile<256>::kRegs};
}

// The kernel's dynamic shared-memory limit is raised once per variant (and device; one device here).
void prepare(KernelFn fn, int smem_bytes) {
  static KernelFn done[8] = {};
  for (KernelFn f : done)
    if (f == fn) return;
  DB_CUDA(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  for (KernelFn& f : done)
    if (!f) {
      f = fn;
      break;
    }
}

// A [rows, k] fp8 row-major matrix read in boxes of 128 bytes (K) x box_rows rows, 128-byte swizzle,
// out-of-bounds elements zero-filled.
void encode_map(void* out, const void* ptr, uint64_t rows, uint64_t k, uint32_t box_rows) {
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBK), box_rows};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(static_cast<CUtensorMap*>(out), CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr),
                               dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw CudaError("gemm_wgmma: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
}

}  // namespace wg

std::string WgmmaConfig::name() const {
  return std::string(tile_n == 128 ? "n128-" : "") + (epilogue == WgmmaEpilogue::Staged ? "staged" : "direct") +
         (cluster == 2 ? "-c2" : "");
}

WgmmaGemm::WgmmaGemm(const GemmShape& shape, WgmmaConfig cfg) : shape_(shape), cfg_(cfg) {
  validate_gemm_shape(shape, GemmDtype::fp8_e4m3);
  if (cfg.cluster != 1 && cfg.cluster != 2) throw UsageError("gemm_wgmma: cluster must be 1 or 2");
  if (cfg.tile_n != 256 && cfg.tile_n != 128) throw UsageError("gemm_wgmma: tile_n must be 256 or 128");
  if (cfg.tile_n == 128 && cfg.cluster != 1) throw UsageError("gemm_wgmma: cluster 2 needs tile_n 256");
  if (shape.m > (int64_t{1} << 31) - 1 || shape.n > (int64_t{1} << 31) - 1 || shape.k > (int64_t{1} << 31) - 1)
    throw UsageError("gemm_wgmma: dimensions must fit in int32");
  if (tiles() > 0x7fffffff) throw UsageError("gemm_wgmma: too many tiles");
}

// M-tiles, padded to a multiple of the cluster size (a padding tile reads zeros and stores nothing).
static int64_t tiles_m_of(const GemmShape& s, int cluster) {
  const int64_t t = (s.m + wg::kBM - 1) / wg::kBM;
  return (t + cluster - 1) / cluster * cluster;
}

int64_t WgmmaGemm::tiles() const {
  return tiles_m_of(shape_, cfg_.cluster) * ((shape_.n + cfg_.tile_n - 1) / cfg_.tile_n);
}

void WgmmaGemm::bind(const void* x, const void* w, void* y, const float* scale_x, const float* scale_w) {
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (!x || !w || !y || misaligned(x) || misaligned(w) || misaligned(y))
    throw UsageError("gemm_wgmma: x, w, y must be non-null and 16-byte aligned");
  wg::encode_map(map_a_, x, static_cast<uint64_t>(shape_.m), static_cast<uint64_t>(shape_.k), wg::kBM);
  wg::encode_map(map_b_, w, static_cast<uint64_t>(shape_.n), static_cast<uint64_t>(shape_.k),
                 static_cast<uint32_t>(cfg_.tile_n / cfg_.cluster));
  y_ = y;
  sx_ = scale_x;
  sw_ = scale_w;
  bound_ = true;
}

void WgmmaGemm::run(cudaStream_t stream) const {
  if (!bound_) throw UsageError("gemm_wgmma: run() before bind()");
  const wg::KernelFn fn = wg::kernel_for(cfg_);
  const wg::Geom g = wg::geom(cfg_);
  wg::prepare(fn, g.smem_bytes);
  CUtensorMap a, b;
  std::memcpy(&a, map_a_, sizeof a);
  std::memcpy(&b, map_b_, sizeof b);
  const int tiles_m = static_cast<int>(tiles_m_of(shape_, cfg_.cluster));
  const int tiles_n = static_cast<int>((shape_.n + g.bn - 1) / g.bn);
  auto* y = static_cast<__nv_bfloat16*>(y_);
  const int m = static_cast<int>(shape_.m), n = static_cast<int>(shape_.n), k = static_cast<int>(shape_.k);
  if (cfg_.cluster == 1) {
    fn<<<static_cast<unsigned>(tiles()), wg::kThreads, g.smem_bytes, stream>>>(a, b, y, sx_, sw_, m, n, k, tiles_m,
                                                                                  tiles_n);
    DB_CUDA_LAUNCH();
    return;
  }
  cudaLaunchConfig_t lc{};
  lc.gridDim = dim3(static_cast<unsigned>(tiles()));
  lc.blockDim = dim3(wg::kThreads);
  lc.dynamicSmemBytes = g.smem_bytes;
  lc.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cfg_.cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  lc.attrs = attr;
  lc.numAttrs = 1;
  DB_CUDA(cudaLaunchKernelEx(&lc, fn, a, b, y, sx_, sw_, m, n, k, tiles_m, tiles_n));
}

bool WgmmaResources::fits_beside(int threads, int regs) const {
  const int warps = (threads + 31) / 32;
  const int need = warps * 32 * ((regs + 7) / 8 * 8);
  return ctas_per_sm >= 1 && need <= regs_left_per_sm && smem_left_per_sm >= 1024;
}

std::string WgmmaResources::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "tile %dx%dx%d stages %d, %d threads x %d regs = %d regs/CTA (cap %d), "
                "local %zu B, smem %d B dyn + %d B static, %d CTA/SM, left per SM: %d regs, %d B smem",
                tile_m, tile_n, tile_k, stages, threads, regs_per_thread, regs_per_cta, regs_cap,
                local_bytes, smem_dynamic, smem_static, ctas_per_sm, regs_left_per_sm, smem_left_per_sm);
  return buf;
}

WgmmaResources WgmmaGemm::resources(WgmmaConfig cfg) {
  const wg::KernelFn fn = wg::kernel_for(cfg);
  const wg::Geom g = wg::geom(cfg);
  wg::prepare(fn, g.smem_bytes);
  cudaFuncAttributes fa{};
  DB_CUDA(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(fn)));
  int dev = 0;
  DB_CUDA(cudaGetDevice(&dev));
  WgmmaResources r;
  r.regs_per_thread = fa.numRegs;
  r.threads = wg::kThreads;
  r.regs_per_cta = (fa.numRegs + 7) / 8 * 8 * wg::kThreads;  // allocated per warp in units of 8 a thread
  r.local_bytes = fa.localSizeBytes;
  r.smem_dynamic = g.smem_bytes;
  r.regs_cap = g.regs_cap;
  r.smem_static = static_cast<int>(fa.sharedSizeBytes);
  DB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.ctas_per_sm, reinterpret_cast<const void*>(fn), wg::kThreads,
                                                        g.smem_bytes));
  DB_CUDA(cudaDeviceGetAttribute(&r.regs_per_sm, cudaDevAttrMaxRegistersPerMultiprocessor, dev));
  DB_CUDA(cudaDeviceGetAttribute(&r.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  r.regs_left_per_sm = r.regs_per_sm - r.ctas_per_sm * r.regs_per_cta;
  r.smem_left_per_sm = r.smem_per_sm - r.ctas_per_sm * (r.smem_dynamic + r.smem_static + 1024);
  r.tile_m = wg::kBM;
  r.tile_n = g.bn;
  r.tile_k = wg::kBK;
  r.stages = g.stages;
  return r;
}

}  // namespace dropbench
