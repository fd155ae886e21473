// C ABI of capi/dropbench_attention.h: the parameters become AttentionParams / RngMaskParams exactly as dropbench's
// own commands build them (src/core/workload_params.hpp), and every C++ exception becomes a status code plus a
// per-thread message, so that no exception crosses the C boundary.
#include "capi/dropbench_attention.h"

#include <algorithm>
#include <iterator>

#include <cstring>
#include <exception>
#include <string>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/check.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/rng/rng_mask.cuh"

namespace {

thread_local std::string g_error;

using dropbench::UsageError;

dropbench::Threshold threshold_of(const dba_params& c) {
  if (!(c.dropout_p >= 0.0 && c.dropout_p < 1.0))
    throw UsageError("dropout_p must be in [0, 1) (got " + std::to_string(c.dropout_p) + ")");
  if (std::find(std::begin(dropbench::kThresholdBits), std::end(dropbench::kThresholdBits), c.threshold_bits) ==
      std::end(dropbench::kThresholdBits))
    throw UsageError(std::string("threshold_bits must be one of ") + dropbench::kThresholdBitsText + " (got " +
                     std::to_string(c.threshold_bits) + ")");
  return dropbench::make_threshold(c.dropout_p, c.threshold_bits);
}

dropbench::AttentionParams to_params(const dba_params* c) {
  if (!c) throw UsageError("params must not be NULL");
  if (c->kernel < DBA_KERNEL_AUTO || c->kernel > DBA_KERNEL_WGMMA)
    throw UsageError("kernel must be one of 0 (auto), 1 (mma), 2 (wgmma) (got " + std::to_string(c->kernel) + ")");
  if (c->causal != 0 && c->causal != 1) throw UsageError("causal must be 0 or 1 (got " + std::to_string(c->causal) + ")");
  const dropbench::Threshold t = threshold_of(*c);
  dropbench::AttentionParams p;
  p.qkv = static_cast<const __nv_bfloat16*>(c->qkv);
  p.qkv_row_stride = c->qkv_row_stride;
  p.o = static_cast<__nv_bfloat16*>(c->o);
  p.o_row_stride = c->o_row_stride;
  p.lse = c->lse;
  p.batch = c->batch;
  p.sq = c->sq;
  p.q_heads = c->q_heads;
  p.kv_heads = c->kv_heads;
  p.head_dim = c->head_dim;
  p.causal = c->causal != 0;
  p.softmax_scale = c->softmax_scale;
  p.mask = c->mask;
  p.mask_out = c->mask_out;
  p.seed = c->seed;
  p.offset = c->offset;
  p.drop_threshold = t.drop;
  p.keep_scale = t.scale;
  p.rounds = c->rounds;
  p.threshold_bits = c->threshold_bits;
  p.kernel = c->kernel == DBA_KERNEL_MMA     ? dropbench::AttentionKernel::Mma
             : c->kernel == DBA_KERNEL_WGMMA ? dropbench::AttentionKernel::Wgmma
                                             : dropbench::AttentionKernel::Auto;
  return p;
}

dropbench::DropoutMode to_mode(int mode) {
  switch (mode) {
    case DBA_MODE_NONE: return dropbench::DropoutMode::None;
    case DBA_MODE_MASK: return dropbench::DropoutMode::Mask;
    case DBA_MODE_FUSED: return dropbench::DropoutMode::Fused;
  }
  throw UsageError("mode must be one of 0 (none), 1 (mask), 2 (fused) (got " + std::to_string(mode) + ")");
}

template <class F>
int guarded(F&& f) {
  try {
    f();
    g_error.clear();
    return DBA_OK;
  } catch (const dropbench::UsageError& e) {
    g_error = e.what();
    return DBA_USAGE;
  } catch (const dropbench::CudaError& e) {
    g_error = e.what();
    return DBA_CUDA;
  } catch (const std::exception& e) {
    g_error = e.what();
    return DBA_OTHER;
  } catch (...) {
    g_error = "unknown exception";
    return DBA_OTHER;
  }
}

dropbench::AttentionBwdParams to_bwd_params(const dba_params* c, const void* dout, void* dqkv, void* workspace,
                                           int deterministic) {
  if (deterministic != 0 && deterministic != 1)
    throw UsageError("deterministic must be 0 or 1 (got " + std::to_string(deterministic) + ")");
  dropbench::AttentionBwdParams b;
  b.fwd = to_params(c);
  b.dout = static_cast<const __nv_bfloat16*>(dout);
  b.dqkv = static_cast<__nv_bfloat16*>(dqkv);
  b.workspace = workspace;
  b.deterministic = deterministic != 0;
  return b;
}

}  // namespace

extern "C" {

int dba_abi_version(void) { return DBA_ABI_VERSION; }

size_t dba_params_size(void) { return sizeof(dba_params); }

void dba_params_init(dba_params* p) {
  if (!p) return;
  std::memset(p, 0, sizeof *p);
  p->batch = p->q_heads = p->kv_heads = 1;
  p->head_dim = 128;
  p->rounds = dropbench::kDefaultRounds;
  p->threshold_bits = dropbench::kDefaultThresholdBits;
  p->kernel = DBA_KERNEL_AUTO;
}

int dba_attention(const dba_params* c, int mode, void* stream) {
  return guarded([&] {
    const dropbench::DropoutMode m = to_mode(mode);
    const dropbench::AttentionParams p = to_params(c);
    if (m == dropbench::DropoutMode::Mask && !p.mask) throw UsageError("mask must not be NULL in mode 1 (mask)");
    dropbench::launch_attention(p, m, static_cast<cudaStream_t>(stream));
  });
}

int dba_mask_bytes(const dba_params* c, uint64_t* bytes) {
  return guarded([&] {
    if (!bytes) throw UsageError("bytes must not be NULL");
    const dropbench::AttentionParams p = to_params(c);
    if (p.batch < 1 || p.q_heads < 1 || p.sq < 1)
      throw UsageError("batch, q_heads and sq must be >= 1 (got " + std::to_string(p.batch) + ", " +
                       std::to_string(p.q_heads) + ", " + std::to_string(p.sq) + ")");
    *bytes = dropbench::attention_mask_geometry(p).bytes();
  });
}

int dba_make_mask(const dba_params* c, uint32_t* mask, void* stream) {
  return guarded([&] {
    if (!mask) throw UsageError("mask must not be NULL");
    const dropbench::AttentionParams p = to_params(c);
    if (p.batch < 1 || p.q_heads < 1 || p.sq < 1) throw UsageError("batch, q_heads and sq must be >= 1");
    dropbench::RngMaskParams rp;
    rp.seed = p.seed;
    rp.offset = p.offset;
    rp.rounds = p.rounds;
    rp.threshold_bits = p.threshold_bits;
    rp.drop = p.drop_threshold;
    rp.layout = dropbench::MaskLayout::Tile;
    rp.geo = dropbench::attention_mask_geometry(p);
    rp.out = mask;
    dropbench::launch_rng_mask(rp, static_cast<cudaStream_t>(stream));
  });
}

int dba_mask_expand(const dba_params* c, const uint32_t* words, uint8_t* keep) {
  return guarded([&] {
    if (!words) throw UsageError("words must not be NULL");
    if (!keep) throw UsageError("keep must not be NULL");
    const dropbench::AttentionParams p = to_params(c);
    if (p.batch < 1 || p.q_heads < 1 || p.sq < 1) throw UsageError("batch, q_heads and sq must be >= 1");
    const dropbench::MaskGeometry g = dropbench::attention_mask_geometry(p);
    const uint32_t sq = static_cast<uint32_t>(p.sq);
    uint8_t* out = keep;
    for (uint32_t bh = 0; bh < g.bh; ++bh)
      for (uint32_t row = 0; row < sq; ++row)
        for (uint32_t col = 0; col < sq; ++col) {
          // Tiles above the causal diagonal are never generated (their words hold anything): not read.
          const bool visible = !g.causal || col <= row;
          const uint32_t r = row % dropbench::kTileRows, k = col % dropbench::kTileCols;
          *out++ = visible ? static_cast<uint8_t>(
                                 (words[g.word_index(bh, row / dropbench::kTileRows, col / dropbench::kTileCols,
                                                     dropbench::tile_lane_of(r, k))] >>
                                  dropbench::tile_bit_of(r, k)) & 1u)
                           : 0;
        }
  });
}

int dba_kernel_name(const dba_params* c, int mode, char* buf, size_t len) {
  return guarded([&] {
    if (!buf || len == 0) throw UsageError("buf must not be NULL and len >= 1");
    const std::string name = dropbench::attention_kernel_name(to_params(c), to_mode(mode));
    const size_t n = name.size() < len - 1 ? name.size() : len - 1;
    std::memcpy(buf, name.data(), n);
    buf[n] = '\0';
  });
}

int dba_threshold(const dba_params* c, double* p_effective, float* keep_scale) {
  return guarded([&] {
    if (!c) throw UsageError("params must not be NULL");
    const dropbench::Threshold t = threshold_of(*c);
    if (p_effective) *p_effective = 1.0 - t.keep_effective;
    if (keep_scale) *keep_scale = t.scale;
  });
}

int dba_attention_backward_workspace_bytes(const dba_params* c, int deterministic, uint64_t* bytes) {
  return guarded([&] {
    if (!bytes) throw UsageError("bytes must not be NULL");
    *bytes = dropbench::attention_backward_workspace_bytes(to_bwd_params(c, nullptr, nullptr, nullptr, deterministic));
  });
}

int dba_attention_backward(const dba_params* c, int mode, const void* dout, void* dqkv, void* workspace,
                           int deterministic, void* stream) {
  return guarded([&] {
    const dropbench::DropoutMode m = to_mode(mode);
    dropbench::launch_attention_backward(to_bwd_params(c, dout, dqkv, workspace, deterministic), m,
                                         static_cast<cudaStream_t>(stream));
  });
}

int dba_backward_kernel_name(const dba_params* c, int mode, int deterministic, char* buf, size_t len) {
  return guarded([&] {
    if (!buf || len == 0) throw UsageError("buf must not be NULL and len >= 1");
    const std::string name = dropbench::attention_backward_kernel_name(
        to_bwd_params(c, nullptr, nullptr, nullptr, deterministic), to_mode(mode));
    const size_t n = name.size() < len - 1 ? name.size() : len - 1;
    std::memcpy(buf, name.data(), n);
    buf[n] = '\0';
  });
}

const char* dba_last_error(void) { return g_error.c_str(); }

}  // extern "C"
