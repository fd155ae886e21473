// Host launcher of the Hopper-native attention kernel (wgmma/kernel.cuh): tensor maps over the QKV buffer,
// run-time dispatch over (head_dim, mode, rounds, threshold bits, causal) through the rules of wgmma/dispatch.cuh.
#include "kernels/attention/attention_wgmma.cuh"

#include <cuda.h>

#include <mutex>
#include <string>

#include "kernels/attention/instance.hpp"
#include "kernels/attention/wgmma/dispatch.cuh"
#include "kernels/attention/wgmma/kernel.cuh"
#include "kernels/attention/wgmma/tile_scheduler.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/tensor_map.hpp"
#include "kernels/common/dispatch.cuh"

namespace dropbench {
namespace attn_wg {
namespace {

using attn::Instance;

template <class C, DropoutMode M, int R, int TW, bool kCausal>
Instance make_instance() {
  Instance in;
  in.fn = reinterpret_cast<const void*>(&attn_fwd_wgmma_kernel<C, M, R, TW, kCausal>);
  in.threads = C::kThreads;
  in.smem = C::kSmem;
  in.br = C::kBr;
  in.bc = C::kBc;
  in.persist = C::kPersist;
  in.name = "attn_fwd_wgmma_hd" + std::to_string(C::kHeadDim) + "_q" + std::to_string(C::kBr) + "k" +
            std::to_string(C::kBc) + "s" + std::to_string(C::kStages) + (C::kPingPong ? "pp" : "") + "_" +
            dropout_mode_name(M);
  if (M == DropoutMode::Fused) in.name += "_r" + std::to_string(R) + "_tw" + std::to_string(TW);
  if (M == DropoutMode::Fused && C::kPhiloxAhead) in.name += "_ahead";
  // The schedule flags that change the code but not the results (reports before and after a dispatch change name
  // different kernels): dropout coding other than 1, unrolled loop, persistent CTAs, the P V wait level.
  if (M != DropoutMode::None && C::kDropImpl != 1) in.name += "_c" + std::to_string(C::kDropImpl);
  if (C::kUnroll2) in.name += "_u2";
  if (C::kPersist) in.name += "_persist";
  if (C::kWaitSplit > 0) in.name += "_ws" + std::to_string(C::kWaitSplit);
  if (kCausal) in.name += "_causal";
  return in;
}

// Schedule C1's instance, or its persistent twin where kPersistShortCausal allows it and p's causal tiles are short.
template <class C1, DropoutMode M, int R, int TW, bool kCausal>
Instance schedule_instance(const AttentionParams& p) {
  // [&]: a capturing lambda has no conversion to a function pointer (nvcc warns #445-D on that conversion of a
  // lambda whose template parameter is not a function parameter).
  return with_run_time_schedule<C1, M, kCausal, TW>(p, [&]<class C>() { return make_instance<C, M, R, TW, kCausal>(); });
}

template <int HD, DropoutMode M, bool kCausal>
Instance pick_rtw(const AttentionParams& p) {
  if constexpr (M != DropoutMode::Fused) {
    return schedule_instance<SchedTw<HD, M, kCausal, 8>, M, 7, 8, kCausal>(p);
  } else {
    return with_rounds_tw(p.rounds, p.threshold_bits, "attention", [&p](auto r, auto tw) {
      return schedule_instance<SchedTw<HD, M, kCausal, tw()>, M, r(), tw(), kCausal>(p);
    });
  }
}

Instance pick(const AttentionParams& p, DropoutMode m) {
  return with_head_dim(p.head_dim, "attention", [&](auto hd) {
    return attn::with_mode_causal(m, p.causal, [&]<DropoutMode M, bool kCausal>() { return pick_rtw<hd(), M, kCausal>(p); });
  });
}

// The QKV buffer as a 3-D bf16 tensor {columns, SQ rows, batch} (row stride qkv_row_stride, batch stride SQ rows;
// tensor_map.hpp): boxes of 64 columns x box_rows rows of one batch; rows past SQ are zero-filled.
CUtensorMap encode_qkv_map(const AttentionParams& p, const attn::KernelArgs& a, uint32_t box_rows) {
  return encode_rows_map(p.qkv, static_cast<int64_t>(p.q_heads + 2 * p.kv_heads) * p.head_dim, a.qkv_stride, p.sq,
                         p.batch, box_rows, "attention (wgmma)");
}

}  // namespace

bool device_is_sm90() {
  static std::mutex mu;
  static int cached[64];
  static bool init = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!init) {
    for (int& c : cached) c = -1;
    init = true;
  }
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  if (cached[dev] < 0) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    cached[dev] = (major == 9 && minor == 0) ? 1 : 0;
  }
  return cached[dev] == 1;
}

bool supported(const AttentionParams& p) { return is_head_dim(p.head_dim) && device_is_sm90(); }

void launch(const AttentionParams& p, DropoutMode mode, cudaStream_t stream) {
  const Instance in = pick(p, mode);
  attn::ensure_smem_attribute(in, false);
  const attn::KernelArgs args = attn::make_kernel_args(p);
  CUtensorMap tm_q = encode_qkv_map(p, args, static_cast<uint32_t>(in.br));
  CUtensorMap tm_kv = encode_qkv_map(p, args, static_cast<uint32_t>(in.bc));
  const dim3 grid = launch_grid(p, in.br, in.persist);
  if (grid.z > 65535 || grid.y > 65535) throw UsageError("attention: batch / q_heads exceed the grid limits");
  void* kargs[] = {&tm_q, &tm_kv, const_cast<attn::KernelArgs*>(&args)};
  DB_CUDA(cudaLaunchKernel(in.fn, grid, dim3(in.threads), kargs,
                           static_cast<size_t>(in.smem), stream));
  DB_CUDA_LAUNCH();
}

std::string kernel_name(const AttentionParams& p, DropoutMode mode) { return pick(p, mode).name; }

void encode_tensor_maps(const AttentionParams& p, int q_rows, int kv_rows, CUtensorMap* tm_q, CUtensorMap* tm_kv) {
  const attn::KernelArgs args = attn::make_kernel_args(p);
  *tm_q = encode_qkv_map(p, args, static_cast<uint32_t>(q_rows));
  *tm_kv = encode_qkv_map(p, args, static_cast<uint32_t>(kv_rows));
}

AttentionKernelInfo kernel_info(const AttentionParams& p, DropoutMode mode) {
  return attn::kernel_info(pick(p, mode), false);
}

}  // namespace attn_wg
}  // namespace dropbench
