// Host launcher of the attention backward: validation, workspace, the preprocessing kernel (D = rowsum(dO o O), the
// LSE copied to whole 64-entry rows), the kernel family (mma.sync: attention_bwd_kernel.cuh, instances in
// attention_bwd_hd*.cu; wgmma: wgmma/kernel.cuh, instances in attention_bwd_wgmma_hd*.cu), dispatch over (head_dim,
// mode, rounds, threshold bits) and the conversion of the fast mode's fp32 dQ accumulator.
#include "kernels/attention/bwd/attention_bwd.cuh"

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/bwd/wgmma/kernel_api.hpp"
#include "kernels/attention/instance.hpp"
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"
#include "kernels/common/shapes.hpp"
#include "kernels/common/device.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/tensor_map.hpp"

namespace dropbench {
namespace {

int64_t qkv_width(const AttentionParams& f) { return static_cast<int64_t>(f.q_heads + 2 * f.kv_heads) * f.head_dim; }
int64_t o_width(const AttentionParams& f) { return static_cast<int64_t>(f.q_heads) * f.head_dim; }

size_t align256(size_t n) { return (n + 255) / 256 * 256; }
int sq_pad(const AttentionParams& f) { return (f.sq + 63) / 64 * 64; }
// One of the two padded [B*Hq, sq_pad] fp32 arrays (D, the LSE copy).
size_t d_bytes(const AttentionParams& f) {
  return align256(static_cast<size_t>(f.batch) * f.q_heads * sq_pad(f) * sizeof(float));
}
// The wgmma kernel's key blocks (128 keys at either head_dim) and subgroups per (KV head, key block)
// (tile_order.hpp: bwd_subgroups).
int wgmma_key_blocks(const AttentionParams& f) {
  constexpr int kBk = attn_bwd_wg::Cfg<128>::kBk;
  static_assert(kBk == attn_bwd_wg::Cfg<64>::kBk, "one key block for both head_dims");
  return (f.sq + kBk - 1) / kBk;
}
int wgmma_subgroups(const AttentionParams& f) {
  return attn::bwd_subgroups(f.q_heads / f.kv_heads, wgmma_key_blocks(f), f.causal);
}
// Elements of one [B*SQ, Hkv*dH] slab of dK or dV partials.
int64_t dkv_slab(const AttentionParams& f) { return static_cast<int64_t>(f.batch) * f.sq * f.kv_heads * f.head_dim; }
// Bytes of the dQ accumulator (fast mode) and of the dK / dV partials (subgroups > 1; laid out after it, kept for
// either family so that the workspace does not depend on the kernel chosen).
size_t dq_acc_bytes(const AttentionBwdParams& p) {
  const AttentionParams& f = p.fwd;
  return p.deterministic ? 0 : align256(static_cast<size_t>(f.batch) * f.sq * f.q_heads * f.head_dim * sizeof(float));
}
size_t dkv_part_bytes(const AttentionParams& f) {
  const int s = wgmma_subgroups(f);
  return s > 1 ? 2 * static_cast<size_t>(s) * static_cast<size_t>(dkv_slab(f)) * sizeof(float) : 0;
}

void check_stride(int64_t stride, int64_t width, const char* field) {
  if (stride == 0) return;
  if (stride < width || stride % 8 != 0)
    throw UsageError(std::string("attention backward: ") + field + " must be 0 or a multiple of 8 >= " +
                     std::to_string(width) + " (got " + std::to_string(stride) + ")");
}

// D[b*Hq + h, q] = sum_d dO[b*SQ + q, h*dH + d] * O[b*SQ + q, h*dH + d] in fp32 and lse_pad[b*Hq + h, q] = the
// forward's LSE[b, h, q], both 0 for q in [SQ, sq_pad): one warp per (batch, padded row, head).
__global__ void bwd_preprocess_kernel(const __nv_bfloat16* __restrict__ o, int64_t o_stride,
                                      const __nv_bfloat16* __restrict__ dout, int64_t do_stride,
                                      const float* __restrict__ lse, float* __restrict__ dsum, float* __restrict__ lse_pad,
                                      int sq, int sqp, int hq, int hd, int64_t rows_pad) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= rows_pad * hq) return;
  const int64_t r = w / hq;  // b * sq_pad + q
  const int h = static_cast<int>(w % hq);
  const int64_t b = r / sqp, q = r % sqp;
  const int64_t out = (b * hq + h) * sqp + q;
  if (q >= sq) {
    if (lane == 0) dsum[out] = lse_pad[out] = 0.f;
    return;
  }
  const int64_t tok = b * sq + q;
  const __nv_bfloat16* po = o + tok * o_stride + h * hd;
  const __nv_bfloat16* pd = dout + tok * do_stride + h * hd;
  float acc = 0.f;
  for (int d = lane; d < hd; d += 32) acc = fmaf(__bfloat162float(po[d]), __bfloat162float(pd[d]), acc);
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (lane == 0) {
    dsum[out] = acc;
    lse_pad[out] = lse[(b * hq + h) * sq + q];
  }
}

// The fp32 accumulators into dQKV's bf16 columns: plane p (dQ: one plane; dK, dV: two, side by side in dQKV) is
// dst[r, c] = bf16(s_p * sum over g < parts of src[(p * parts + g) * slab + r * width + c]), s_0 = scale and s_1 = 1
// (the softmax scale belongs to dQ and dK, not dV). The parts are added in index order, the same order every run, so
// the sums stay bitwise reproducible.
__global__ void bwd_fp32_to_dqkv_kernel(const float* __restrict__ src, int planes, int parts, int64_t slab,
                                        int64_t width, __nv_bfloat16* __restrict__ dst, int64_t stride, float scale) {
  const int64_t pairs = slab / 2;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < planes * pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int plane = i >= pairs;  // planes is 1 or 2
    const int64_t e = 2 * (i - plane * pairs), r = e / width, c = e % width;
    const float* in = src + static_cast<int64_t>(plane) * parts * slab + e;
    float2 sum = *reinterpret_cast<const float2*>(in);
    for (int g = 1; g < parts; ++g) {
      const float2 v = *reinterpret_cast<const float2*>(in + g * slab);
      sum.x += v.x;
      sum.y += v.y;
    }
    const float k = plane ? 1.f : scale;
    *reinterpret_cast<__nv_bfloat162*>(dst + plane * width + r * stride + c) = __floats2bfloat162_rn(sum.x * k, sum.y * k);
  }
}

// One launch of bwd_fp32_to_dqkv_kernel over `planes` (1: dQ; 2: dK, dV) planes of `rows` x `width` floats, a grid
// of at most 16 blocks per SM (grid-stride beyond).
void fp32_to_dqkv(const float* src, int planes, int parts, int64_t rows, int64_t width, __nv_bfloat16* dst,
                  int64_t stride, float scale, cudaStream_t s) {
  const int64_t pairs = planes * rows * width / 2;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((pairs + 255) / 256, 132 * 16));
  bwd_fp32_to_dqkv_kernel<<<blocks, 256, 0, s>>>(src, planes, parts, rows * width, width, dst, stride, scale);
  DB_CUDA_LAUNCH();
}

attn_bwd::Args make_args(const AttentionBwdParams& p, bool wgmma) {
  const AttentionParams& f = p.fwd;
  attn_bwd::Args a{};
  a.qkv = f.qkv;
  a.dout = p.dout;
  a.lse = f.lse;
  a.mask = f.mask;
  a.dqkv = p.dqkv;
  a.qkv_stride = f.qkv_row_stride ? f.qkv_row_stride : qkv_width(f);
  a.dout_stride = p.dout_row_stride ? p.dout_row_stride : o_width(f);
  a.dqkv_stride = p.dqkv_row_stride ? p.dqkv_row_stride : qkv_width(f);
  a.sq = f.sq;
  a.hq = f.q_heads;
  a.hkv = f.kv_heads;
  a.group = f.q_heads / f.kv_heads;
  a.sq_pad = sq_pad(f);
  a.causal = f.causal ? 1 : 0;
  a.rounds = f.rounds;
  a.tw = f.threshold_bits;
  a.dq_fast = p.deterministic ? 0 : 1;
  a.scale = f.softmax_scale > 0.f ? f.softmax_scale : 1.f / std::sqrt(static_cast<float>(f.head_dim));
  a.scale_log2 = a.scale * 1.4426950408889634f;
  a.keep_scale = f.keep_scale;
  a.seed = f.seed;
  a.offset = f.offset;
  a.drop = f.drop_threshold;
  a.geo = attention_mask_geometry(f);
  char* ws = static_cast<char*>(p.workspace);
  a.dsum = reinterpret_cast<float*>(ws);
  a.lse_pad = reinterpret_cast<float*>(ws + d_bytes(f));
  a.dq_acc = p.deterministic ? nullptr : reinterpret_cast<float*>(ws + 2 * d_bytes(f));
  a.subgroups = wgmma ? wgmma_subgroups(f) : 1;
  // One wgmma CTA per SM is resident: 384 threads x 168 registers take the register file, and at dH 128 its shared
  // memory most of the SM's.
  a.section = wgmma ? attn::bwd_section_units(a.subgroups * f.batch * f.kv_heads, wgmma_key_blocks(f),
                                              current_device_sms())
                    : 1;
  a.dkv_part = a.subgroups > 1 ? reinterpret_cast<float*>(ws + 2 * d_bytes(f) + dq_acc_bytes(p)) : nullptr;
  a.dkv_slab = dkv_slab(f);
  return a;
}

// f(head_dim, mode) as template arguments: the wgmma kernel's instances (its mode Fused chooses rounds and width
// inside the kernel), and the head dim and mode of the mma kernels' instances.
template <class F>
void dispatch_hd_mode(const AttentionBwdParams& p, DropoutMode mode, F&& f) {
  with_head_dim(p.fwd.head_dim, "attention backward", [&](auto hd) {
    attn::with_mode(mode, [&]<DropoutMode M>() { f(hd, std::integral_constant<DropoutMode, M>{}); });
  });
}

// The mma kernels' instances: (head_dim, mode, rounds, threshold bits); rounds and width are template arguments of
// mode Fused only (the other modes' one instance each takes Philox-7 / 8 bits, unused).
template <class F>
void dispatch(const AttentionBwdParams& p, DropoutMode mode, F&& f) {
  const AttentionParams& fw = p.fwd;
  dispatch_hd_mode(p, mode, [&](auto hd, auto md) {
    if constexpr (decltype(md)::value == DropoutMode::Fused)
      with_rounds_tw(fw.rounds, fw.threshold_bits, "attention backward", [&](auto r, auto tw) { f(hd, md, r, tw); });
    else
      f(hd, md, Rounds<7>{}, ThresholdBits<8>{});
  });
}

bool uses_wgmma(const AttentionBwdParams& p) { return attention_backward_kernel_resolved(p) == AttentionKernel::Wgmma; }

}  // namespace

void check_attention_backward_shape(const AttentionBwdParams& p, DropoutMode mode) {
  const AttentionParams& f = p.fwd;
  auto bad = [](const std::string& m) { throw UsageError("attention backward: " + m); };
  if (f.head_dim != 64 && f.head_dim != 128) bad("head_dim must be 64 or 128 (got " + std::to_string(f.head_dim) + ")");
  if (f.batch < 1) bad("batch must be >= 1 (got " + std::to_string(f.batch) + ")");
  // The grids hold the blocks of 64 keys / queries in y (bwd_tile.cuh: bwd_grid), at most 65535 of them.
  if (f.sq < 1 || f.sq > 65535 * 64) bad("sq must be in [1, 4194240] (got " + std::to_string(f.sq) + ")");
  if (f.q_heads < 1 || f.kv_heads < 1 || f.q_heads % f.kv_heads != 0)
    bad("kv_heads must be >= 1 and divide q_heads (got q_heads " + std::to_string(f.q_heads) + ", kv_heads " +
        std::to_string(f.kv_heads) + ")");
  if (f.kv_heads > 65535 || f.q_heads > 65535 || f.batch > 65535) bad("batch and heads must be <= 65535");
  if (f.row_begin != 0 || f.rows != 0) bad("row windows are not supported (row_begin and rows must be 0)");
  if (f.softmax_scale < 0.f || !std::isfinite(f.softmax_scale)) bad("softmax_scale must be >= 0 (0 = 1/sqrt(head_dim))");
  check_stride(f.qkv_row_stride, qkv_width(f), "qkv_row_stride");
  check_stride(f.o_row_stride, o_width(f), "o_row_stride");
  check_stride(p.dout_row_stride, o_width(f), "dout_row_stride");
  check_stride(p.dqkv_row_stride, qkv_width(f), "dqkv_row_stride");
  // b * q_heads is the counter word of the keep bits and an int in the kernels.
  if (static_cast<int64_t>(f.batch) * f.q_heads >= (int64_t{1} << 31)) bad("batch * q_heads must be < 2^31");
  // The wgmma kernel decodes its launch index in 32 bits: its CTAs (at most batch x q_heads x its key blocks).
  if (const int64_t ctas = static_cast<int64_t>(f.batch) * f.q_heads * wgmma_key_blocks(f); ctas >= (int64_t{1} << 32))
    bad("batch * q_heads * ceil(sq / 128) must be < 2^32 (got " + std::to_string(ctas) + ")");
  // Checked here, before launch_attention_backward queues its preprocessing kernel, so an unknown mode from the C++
  // API queues nothing.
  if (mode != DropoutMode::None && mode != DropoutMode::Mask && mode != DropoutMode::Fused)
    bad("mode must be none, mask or fused (got " + std::to_string(static_cast<int>(mode)) + ")");
  if (mode != DropoutMode::None) {
    if (!keep_scale_valid(f.keep_scale)) bad(kKeepScaleRule);
  }
  if (mode == DropoutMode::Fused) with_rounds_tw(f.rounds, f.threshold_bits, "attention backward", [](auto, auto) {});
}

void check_attention_backward(const AttentionBwdParams& p, DropoutMode mode) {
  check_attention_backward_shape(p, mode);
  const AttentionParams& f = p.fwd;
  auto bad = [](const std::string& m) { throw UsageError("attention backward: " + m); };
  if (f.qkv == nullptr) bad("qkv is null");
  if (f.o == nullptr) bad("o (the forward's output) is null");
  if (f.lse == nullptr) bad("lse (the forward's LSE) is null");
  if (p.dout == nullptr) bad("dout is null");
  if (p.dqkv == nullptr) bad("dqkv is null");
  if (p.workspace == nullptr) bad("workspace is null (attention_backward_workspace_bytes)");
  // The loaders copy 16-byte chunks of Q/K/V and dO, 4-byte LSE words; the epilogues store 4-byte pairs; the
  // workspace holds float2 reads.
  auto misaligned = [](const void* ptr, uintptr_t align) { return reinterpret_cast<uintptr_t>(ptr) % align != 0; };
  if (misaligned(f.qkv, 16)) bad("qkv must be 16-byte aligned");
  if (misaligned(p.dout, 16)) bad("dout must be 16-byte aligned");
  if (misaligned(f.lse, 4)) bad("lse must be 4-byte aligned");
  if (misaligned(p.dqkv, 4)) bad("dqkv must be 4-byte aligned");
  if (misaligned(p.workspace, 8)) bad("workspace must be 8-byte aligned");
  if (mode == DropoutMode::Mask && f.mask == nullptr) bad("mode mask needs a mask");
  // The wgmma kernel's bulk copies of the mask words and of the workspace's D / LSE rows, and its tensor map over the
  // workspace's dQ accumulator, need 16-byte alignment (kernel wgmma, or auto where it resolves to wgmma).
  const bool wg = uses_wgmma(p);
  if (mode == DropoutMode::Mask && wg && misaligned(f.mask, 16)) bad("mask must be 16-byte aligned (kernel wgmma)");
  if (wg && misaligned(p.workspace, 16)) bad("workspace must be 16-byte aligned (kernel wgmma)");
}

AttentionKernel attention_backward_kernel_resolved(const AttentionBwdParams& p) {
  switch (p.fwd.kernel) {
    case AttentionKernel::Mma: return AttentionKernel::Mma;
    case AttentionKernel::Wgmma: return AttentionKernel::Wgmma;
    case AttentionKernel::Auto: break;
  }
  return attn_wg::device_is_sm90() ? AttentionKernel::Wgmma : AttentionKernel::Mma;
}

size_t attention_backward_workspace_bytes(const AttentionBwdParams& p) {
  check_attention_backward_shape(p, DropoutMode::None);
  const AttentionParams& f = p.fwd;
  return 2 * d_bytes(f) + dq_acc_bytes(p) + dkv_part_bytes(f);
}

double attention_backward_flops(const AttentionBwdParams& p) { return kAttentionBwdFlopRatio * attention_flops(p.fwd); }

void launch_attention_backward(const AttentionBwdParams& p, DropoutMode mode, cudaStream_t s) {
  check_attention_backward(p, mode);
  const AttentionParams& f = p.fwd;
  const bool wg = uses_wgmma(p);
  if (wg && !attn_wg::device_is_sm90())
    throw UsageError("attention backward: kernel wgmma needs an sm_90 device (H100 / H200); use kernel mma or auto");
  const attn_bwd::Args a = make_args(p, wg);
  const int64_t rows = static_cast<int64_t>(f.batch) * f.sq;
  {
    const int64_t rows_pad = static_cast<int64_t>(f.batch) * a.sq_pad;
    const int64_t warps = rows_pad * f.q_heads;
    const unsigned blocks = static_cast<unsigned>((warps * 32 + 255) / 256);
    bwd_preprocess_kernel<<<blocks, 256, 0, s>>>(f.o, f.o_row_stride ? f.o_row_stride : o_width(f), p.dout, a.dout_stride,
                                                 f.lse, const_cast<float*>(a.dsum), const_cast<float*>(a.lse_pad), f.sq,
                                                 a.sq_pad, f.q_heads, f.head_dim, rows_pad);
    DB_CUDA_LAUNCH();
  }
  if (!p.deterministic)
    DB_CUDA(cudaMemsetAsync(a.dq_acc, 0, static_cast<size_t>(rows) * o_width(f) * sizeof(float), s));
  if (wg) {
    attn_bwd_wg::Maps m{};  // dq stays zero in the deterministic mode (unused there)
    const char* what = "attention backward (wgmma)";
    m.q = encode_rows_map(f.qkv, qkv_width(f), a.qkv_stride, f.sq, f.batch, 64, what);
    m.kv = encode_rows_map(f.qkv, qkv_width(f), a.qkv_stride, f.sq, f.batch, 128, what);
    m.dout = encode_rows_map(p.dout, o_width(f), a.dout_stride, f.sq, f.batch, 64, what);
    if (!p.deterministic) m.dq = encode_rows_map(a.dq_acc, o_width(f), o_width(f), f.sq, f.batch, 64, what, RowsMapType::Fp32);
    dispatch_hd_mode(p, mode, [&](auto hd, auto md) { attn_bwd_wg::launch<hd(), md()>(a, m, f.batch, s); });
    if (a.subgroups > 1)  // dK and dV: the subgroups' partials summed
      fp32_to_dqkv(a.dkv_part, 2, a.subgroups, rows, static_cast<int64_t>(f.kv_heads) * f.head_dim,
                   p.dqkv + static_cast<int64_t>(f.q_heads) * f.head_dim, a.dqkv_stride, a.scale, s);
    // The deterministic dQ: the mma backward's dQ kernel (a fixed order of key blocks, no atomics).
    if (p.deterministic)
      dispatch(p, mode, [&](auto hd, auto md, auto r, auto tw) { attn_bwd::launch_dq_instance<hd(), md(), r(), tw()>(a, f.batch, s); });
  } else {
    dispatch(p, mode, [&](auto hd, auto m, auto r, auto tw) {
      attn_bwd::launch_instance<hd(), m(), r(), tw()>(a, f.batch, p.deterministic, s);
    });
  }
  if (!p.deterministic) fp32_to_dqkv(a.dq_acc, 1, 1, rows, o_width(f), p.dqkv, a.dqkv_stride, a.scale, s);
}

namespace {
// The instance name's tiling: keys and queries per block and the wgmma kernel's ring stages, or the mma kernel's
// warps, from the configurations the kernels are built with.
template <int HD>
std::string tile_tag(bool wgmma) {
  if (wgmma) {
    using C = attn_bwd_wg::Cfg<HD>;
    return "k" + std::to_string(C::kBk) + "q" + std::to_string(C::kBq) + "s" + std::to_string(C::kStages);
  }
  using C = attn_bwd::Cfg<HD>;
  return "k" + std::to_string(C::kBk) + "q" + std::to_string(C::kBq) + "w" + std::to_string(C::kWarps);
}
}  // namespace

std::string attention_backward_kernel_name(const AttentionBwdParams& p, DropoutMode mode) {
  check_attention_backward_shape(p, mode);
  const AttentionParams& f = p.fwd;
  const bool wg = uses_wgmma(p);
  const std::string tiling =
      with_head_dim(f.head_dim, "attention backward", [&](auto hd) { return tile_tag<decltype(hd)::value>(wg); });
  std::string n = (wg ? "attn_bwd_wgmma_hd" : "attn_bwd_mma_hd") + std::to_string(f.head_dim) + "_" + tiling + "_";
  n += dropout_mode_name(mode);
  if (mode == DropoutMode::Fused) n += "_r" + std::to_string(f.rounds) + "_tw" + std::to_string(f.threshold_bits);
  if (f.causal) n += "_causal";
  n += p.deterministic ? "_det" : "_atomic";
  return n;
}

AttentionBwdKernelInfo attention_backward_kernel_info(const AttentionBwdParams& p, DropoutMode mode) {
  AttentionBwdKernelInfo info;
  info.name = attention_backward_kernel_name(p, mode);
  cudaFuncAttributes m{}, d{};
  dispatch(p, mode, [&](auto hd, auto md, auto r, auto tw) {
    attn_bwd::instance_attributes<hd(), md(), r(), tw()>(&m, &d);
    info.threads = attn_bwd::Cfg<hd()>::kThreads;
    info.block_keys = attn_bwd::Cfg<hd()>::kBk;
    info.block_queries = attn_bwd::Cfg<hd()>::kBq;
    info.smem_dynamic = attn_bwd::Cfg<hd()>::kSmemMain;
    info.dq_smem_dynamic = attn_bwd::Cfg<hd()>::kSmemDq;
  });
  if (uses_wgmma(p)) {  // the main kernel is the wgmma one; the deterministic dQ kernel stays the mma one
    dispatch_hd_mode(p, mode, [&](auto hd, auto md) {
      attn_bwd_wg::attributes<hd(), md()>(&m);
      info.threads = attn_bwd_wg::Cfg<hd()>::kThreads;
      info.block_keys = attn_bwd_wg::Cfg<hd()>::kBk;
      info.block_queries = attn_bwd_wg::Cfg<hd()>::kBq;
      info.smem_dynamic = static_cast<size_t>(attn_bwd_wg::Cfg<hd()>::kSmem);
    });
  }
  info.registers = m.numRegs;
  info.local_bytes = m.localSizeBytes;
  info.dq_registers = d.numRegs;
  info.dq_local_bytes = d.localSizeBytes;
  return info;
}

}  // namespace dropbench
