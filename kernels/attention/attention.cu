// Host launcher of the attention forward kernels: validation, the kernel family (AttentionParams::kernel:
// mma.sync here, wgmma in attention_wgmma.cu), run-time dispatch over (head_dim, mode, rounds, threshold bits,
// causal) to the instances of attn_fwd_kernel.
#include "kernels/attention/attention.cuh"

#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/attention/attention_kernel.cuh"
#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/attention/instance.hpp"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"

namespace dropbench {

const char* dropout_mode_name(DropoutMode m) {
  switch (m) {
    case DropoutMode::None: return "none";
    case DropoutMode::Mask: return "mask";
    case DropoutMode::Fused: return "fused";
  }
  return "?";
}

const char* attention_kernel_family_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::Auto: return "auto";
    case AttentionKernel::Mma: return "mma";
    case AttentionKernel::Wgmma: return "wgmma";
  }
  return "?";
}

AttentionKernel attention_kernel_resolved(const AttentionParams& p) {
  switch (p.kernel) {
    case AttentionKernel::Mma: return AttentionKernel::Mma;
    case AttentionKernel::Wgmma:
      if (!attn_wg::device_is_sm90())
        throw UsageError("attention: the wgmma kernel needs an sm_90 device (H100/H200); use kernel mma or auto");
      return AttentionKernel::Wgmma;
    case AttentionKernel::Auto: break;
  }
  return attn_wg::supported(p) ? AttentionKernel::Wgmma : AttentionKernel::Mma;
}

MaskGeometry attention_mask_geometry(const AttentionParams& p) {
  MaskGeometry g;
  g.bh = static_cast<uint32_t>(p.batch) * static_cast<uint32_t>(p.q_heads);
  g.sq = static_cast<uint32_t>(p.sq);
  g.sk = static_cast<uint32_t>(p.sq);
  g.causal = p.causal;
  return g;
}

MaskWindow attention_mask_window(const AttentionParams& p) {
  return mask_window(attention_mask_geometry(p), static_cast<uint32_t>(p.row_begin), static_cast<uint32_t>(p.rows));
}

int attention_query_block(const AttentionParams&) {
  static_assert(attn::CfgHd128::kBr == 128 && attn::CfgHd128None::kBr == 128 && attn::CfgHd64::kBr == 128,
                "attention_query_block() assumes 128 query rows per CTA for every tiling");
  // The wgmma kernel (attention_wgmma_kernel.cuh) also runs 128 query rows per CTA, so the granularity of row
  // windows does not depend on the kernel family.
  return 128;
}

double attention_flops(const AttentionParams& p) {
  const double rb = p.row_begin;
  const double re = p.rows == 0 ? p.sq : std::min<double>(p.sq, rb + p.rows);
  const double base = 4.0 * p.batch * p.q_heads * static_cast<double>(p.head_dim);
  if (re <= rb) return 0;
  return p.causal ? base * (re - rb) * (rb + re) / 2 : base * (re - rb) * p.sq;
}

namespace {

using attn::Cfg;
using attn::CfgHd128;
using attn::CfgHd64;

using attn::Instance;

template <class C, DropoutMode M, int R, int TW, bool kCausal>
Instance make_instance() {
  Instance in;
  in.fn = reinterpret_cast<const void*>(&attn::attn_fwd_kernel<C, M, R, TW, kCausal>);
  in.threads = C::kThreads;
  in.smem = C::kSmem;
  in.br = C::kBr;
  in.bc = C::kBc;
  in.name = "attn_fwd_mma_hd" + std::to_string(C::kHeadDim) + "_q" + std::to_string(C::kBr) + "k" +
            std::to_string(C::kBc) + "w" + std::to_string(C::kWarps) + "_" + dropout_mode_name(M);
  if (M == DropoutMode::Fused) in.name += "_r" + std::to_string(R) + "_tw" + std::to_string(TW);
  if (kCausal) in.name += "_causal";
  return in;
}

template <class C, DropoutMode M, bool kCausal>
Instance pick_rtw(const AttentionParams& p) {
  if constexpr (M != DropoutMode::Fused) {
    return make_instance<C, M, 7, 8, kCausal>();  // R/TW unused
  } else {
    return with_rounds_tw(p.rounds, p.threshold_bits, "attention",
                          [](auto r, auto tw) { return make_instance<C, M, r(), tw(), kCausal>(); });
  }
}

// CNone serves mode none, CDrop mode mask and causal fused, CFusedNc non-causal fused (they must share the
// tiling: p = 0 is bit for bit none; they may differ in the bitwise-neutral skip-rescale switch).
template <class CNone, class CDrop, class CFusedNc = CDrop>
Instance pick_mode(const AttentionParams& p, DropoutMode m) {
  static_assert(CNone::kBr == CDrop::kBr && CNone::kBc == CDrop::kBc && CNone::kWM == CDrop::kWM &&
                    CFusedNc::kBr == CDrop::kBr && CFusedNc::kBc == CDrop::kBc && CFusedNc::kWM == CDrop::kWM,
                "mode none and the dropout modes must use the same tiling");
  return attn::with_mode_causal(m, p.causal, [&]<DropoutMode M, bool kCausal>() {
    using C = std::conditional_t<M == DropoutMode::None, CNone,
                                 std::conditional_t<M == DropoutMode::Fused && !kCausal, CFusedNc, CDrop>>;
    return pick_rtw<C, M, kCausal>(p);
  });
}

Instance pick(const AttentionParams& p, DropoutMode m) {
  return with_head_dim(p.head_dim, "attention", [&](auto hd) {
    if constexpr (hd() == 128) return pick_mode<attn::CfgHd128None, CfgHd128, attn::CfgHd128FusedNc>(p, m);
    else return pick_mode<CfgHd64, CfgHd64>(p, m);
  });
}

void validate(const AttentionParams& p, DropoutMode m) {
  auto fail = [](const std::string& s) { throw UsageError("attention: " + s); };
  if (p.mask_out != nullptr && m != DropoutMode::Fused) fail("mask_out is written in mode fused only");
  if (reinterpret_cast<uintptr_t>(p.mask_out) % 4 != 0) fail("mask_out must be 4-byte aligned");
  if (p.qkv == nullptr || p.o == nullptr) fail("qkv and o must be set");
  if (p.batch < 1 || p.sq < 1 || p.q_heads < 1 || p.kv_heads < 1) fail("batch, sq, q_heads, kv_heads must be >= 1");
  if (p.q_heads % p.kv_heads != 0) fail("kv_heads must divide q_heads");
  if (!is_head_dim(p.head_dim))
    fail(std::string("head_dim must be one of ") + kHeadDimsText + " (got " + std::to_string(p.head_dim) + ")");
  if (p.softmax_scale < 0.f || !std::isfinite(p.softmax_scale)) fail("softmax_scale must be > 0 (0 = 1/sqrt(dH))");
  const int64_t min_stride = static_cast<int64_t>(p.q_heads + 2 * p.kv_heads) * p.head_dim;
  if (p.qkv_row_stride != 0 && (p.qkv_row_stride < min_stride || p.qkv_row_stride % 8 != 0))
    fail("qkv_row_stride must be >= (Hq+2*Hkv)*dH and a multiple of 8");
  if (p.o_row_stride != 0 && (p.o_row_stride < static_cast<int64_t>(p.q_heads) * p.head_dim || p.o_row_stride % 2 != 0))
    fail("o_row_stride must be >= Hq*dH and even");
  if (reinterpret_cast<uintptr_t>(p.qkv) % 16 != 0) fail("qkv must be 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(p.o) % 4 != 0) fail("o must be 4-byte aligned");
  if (static_cast<int64_t>(p.batch) * p.q_heads >= (int64_t{1} << 31)) fail("batch * q_heads too large");
  if (m == DropoutMode::Mask && p.mask == nullptr) fail("mode mask needs a mask");
  const int qb = attention_query_block(p);
  if (p.row_begin < 0 || p.row_begin >= p.sq || p.row_begin % qb != 0)
    fail("row_begin must be a multiple of " + std::to_string(qb) + " in [0, sq) (got " + std::to_string(p.row_begin) + ")");
  if (p.rows < 0 || (p.rows % qb != 0 && static_cast<int64_t>(p.row_begin) + p.rows < p.sq))
    fail("rows must be >= 0 and a multiple of " + std::to_string(qb) + " unless the window reaches the end (got " +
         std::to_string(p.rows) + ")");
  if (m != DropoutMode::None && !keep_scale_valid(p.keep_scale)) fail(kKeepScaleRule);
}

}  // namespace

void launch_attention(const AttentionParams& p, DropoutMode mode, cudaStream_t stream) {
  validate(p, mode);
  if (attention_kernel_resolved(p) == AttentionKernel::Wgmma) {
    attn_wg::launch(p, mode, stream);
    return;
  }
  const Instance in = pick(p, mode);
  attn::ensure_smem_attribute(in, true);
  attn::KernelArgs args = attn::make_kernel_args(p);
  const dim3 grid(static_cast<unsigned>((attn::window_rows(p) + in.br - 1) / in.br), static_cast<unsigned>(p.q_heads),
                  static_cast<unsigned>(p.batch));
  if (grid.z > 65535 || grid.y > 65535) throw UsageError("attention: batch / q_heads exceed the grid limits");
  void* kargs[] = {&args};
  DB_CUDA(cudaLaunchKernel(in.fn, grid, dim3(in.threads), kargs, static_cast<size_t>(in.smem), stream));
  DB_CUDA_LAUNCH();
}

std::string attention_kernel_name(const AttentionParams& p, DropoutMode mode) {
  if (attention_kernel_resolved(p) == AttentionKernel::Wgmma) return attn_wg::kernel_name(p, mode);
  return pick(p, mode).name;
}

AttentionKernelInfo attention_kernel_info(const AttentionParams& p, DropoutMode mode) {
  if (attention_kernel_resolved(p) == AttentionKernel::Wgmma) return attn_wg::kernel_info(p, mode);
  return attn::kernel_info(pick(p, mode), true);
}

}  // namespace dropbench
