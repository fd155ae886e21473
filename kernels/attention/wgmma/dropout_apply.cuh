// Dropout in the wgmma attention consumer: one warp's 16-row strip of keep words per key block (mode mask: loaded
// from the mask; mode fused: Philox in the consumer while the tensor cores run), applied either to the fp32 P
// inside the softmax or to P packed to bf16x2 (the A operand of P V). Same bits in every coding (WgCfg::kDropImpl);
// the hooks themselves are attention_dropout.cuh's.
//   kFp32Apply   keep words zero the fp32 P at the end of the softmax (R2P + FSEL)
//   kPackEarly   packed P (pe) and masks (pm) made before the P V wait, P = pe & pm after it
//   kPackLate    pack, masks and P &= masks all after the P V wait
//   kMaskEarly   block j's masks made while S_j runs, P &= pm after the bf16 conversion
#pragma once
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/attention_kernel.cuh"  // KernelArgs, pack_bf16
#include "kernels/common/ptx.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_wg {

template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
struct DropoutApply {
  static constexpr int BN = C::kBc;
  static constexpr int NT = BN / 64;  // 16x64 mask tiles per warp per key block
  static constexpr int PK = BN / 16;  // k-steps of O += P V
  static constexpr int NS = BN / 2;   // S accumulators per thread
  static constexpr bool kDrop = kMode != DropoutMode::None;
  // kDropImpl >= 1: mode Mask walks the strip with a cursor (pointer to block j's first word, tiles left to
  // read); mode Fused with 8-bit thresholds keeps the byte compares' results (ge7: 4 words per Philox call,
  // NT*2 calls per block) and applies them to the packed P.
  static constexpr int DI = C::kDropImpl;
  static constexpr bool kNewMask = DI >= 1 && kMode == DropoutMode::Mask;
  static constexpr bool kGe7 = DI >= 1 && kMode == DropoutMode::Fused && TW == 8;
  static constexpr bool kPackLate = kDrop && DI == 2;
  static constexpr bool kPackEarly = kDrop && DI == 1 && kGe7;
  // DI 3: the bf16x2 masks (pm) before the S_j wait (mode Mask from the keep words, fused TW 8 from the ge7
  // words right after their Philox calls), P &= pm after the bf16 conversion.
  static constexpr bool kMaskEarly = DI == 3 && (kMode == DropoutMode::Mask || kGe7);
  static constexpr bool kFp32Apply = kDrop && !kPackLate && !kPackEarly && !kMaskEarly;

  const uint32_t lane;
  attn::MaskStrip mstrip;
  attn::FusedStream fstream;
  uint32_t tile_row = 0;
  // Mode Fused: the kernel's arguments (mask_out: where the keep words are also stored, null: nowhere) and the
  // strip's r16. The output strip's address is made per block under the mask_out test (store_words), not held
  // across the loop: held, its three registers make ptxas spill in the dH 128 TW 16 / 32 instances.
  const attn::KernelArgs& args;
  uint32_t r16 = 0;
  const uint32_t* mcur = nullptr;
  int mleft = 0;
  // Fused TW 8: the byte threshold and block j's byte compares (the caller's, held by reference).
  attn::ByteThreshold& bthr;
  // kGe7: the byte compares of block j (ge7[tt][k][q]), applied to P after its bf16 conversion.
  uint32_t (&ge7)[NT][2][4];
  // kPackEarly: the packed P (pe) and the masks (pm), made before the P V wait in registers the softmax no longer
  // needs (S's); after the wait only the 32 ANDs remain, which define the A operand (a plain copy would be folded
  // by ptxas, making pe the operand while the previous P V still reads p: ptxas then serializes every wgmma).
  // kMaskEarly: the masks (pm).
  uint32_t (&pe)[PK][4];
  uint32_t (&pm)[PK][4];

  // The strip of query rows 16*r16 .. +15 of matrix bh.
  __device__ __forceinline__ DropoutApply(const attn::KernelArgs& a, uint32_t bh, uint32_t r16, int lane_,
                                          attn::ByteThreshold& bthr_, uint32_t (&ge7_)[NT][2][4], uint32_t (&pe_)[PK][4],
                                          uint32_t (&pm_)[PK][4])
      : lane(static_cast<uint32_t>(lane_)), args(a), bthr(bthr_), ge7(ge7_), pe(pe_), pm(pm_) {
    if constexpr (kMode == DropoutMode::Mask) {
      mstrip = attn::mask_strip(a.mask, bh, a.rows16, a.mask_rows16, a.cols64, r16, lane);
      mcur = mstrip.ptr;
      mleft = static_cast<int>(attn::mask_strip_tiles<kCausal>(mstrip));
    }
    if constexpr (kMode == DropoutMode::Fused) {
      fstream = attn::FusedStream{a.seed_lo, a.seed_hi, bh, a.offset, a.drop};
      tile_row = r16 * a.cols64;
      bthr = attn::byte_threshold(a.drop);
      this->r16 = r16;
    }
  }

  // Mode Mask: the block's keep words (loads issued one block ahead, consumed after the softmax).
  // kDropImpl >= 1: called for j = 0, 1, 2, ... in order, so a cursor replaces the per-tile address arithmetic.
  __device__ void load_words(int j, uint32_t (&kw)[NT]) {
    if constexpr (kNewMask) {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) kw[tt] = attn::mask_word_at(mcur + tt * kWordsPerTile, tt < mleft);
      mcur += NT * kWordsPerTile;
      mleft -= NT;
    } else if constexpr (kMode == DropoutMode::Mask) {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) kw[tt] = attn::mask_tile_word<kCausal>(mstrip, static_cast<uint32_t>(j * NT + tt));
    }
  }
  __device__ void gen_ge7(int j) {
    if constexpr (kGe7) {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt)
#pragma unroll
        for (int k = 0; k < 2; ++k)
          attn::fused_call_ge7<R>(fstream, bthr, tile_row + static_cast<uint32_t>(j * NT + tt), lane, k, ge7[tt][k]);
      // The words are rebuilt from the byte compares only where they are stored (mask_out set).
      store_words(j, [&](int tt) { return attn::ge7_keep_word(ge7[tt]); });
    }
  }
  // Mode Fused: the block's keep words from Philox in the consumer, while the tensor cores run.
  __device__ void gen_words(int j, uint32_t (&kw)[NT]) {
    if constexpr (kGe7) {
      gen_ge7(j);
    } else if constexpr (kMode == DropoutMode::Fused) {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) {
        uint32_t w = 0;
#pragma unroll
        for (int k = 0; k < kCallsPerWord<TW>; ++k)
          w |= attn::fused_word_part<R, TW>(fstream, tile_row + static_cast<uint32_t>(j * NT + tt), lane, k);
        kw[tt] = w;
      }
      store_words(j, [&](int tt) { return kw[tt]; });
    }
  }
  // Mode Fused with mask_out: block j's keep words (word(tt): tile tt's) stored where the RNG kernel stores them.
  template <class W>
  __device__ __forceinline__ void store_words(int j, const W& word) {
    if (args.mask_out != nullptr)
      attn::store_mask_words<kCausal, NT>(args.mask_out, fstream.bh, args.rows16, args.mask_rows16, args.cols64, r16,
                                          lane, static_cast<uint32_t>(j * NT), word);
  }

  // kFp32Apply: the dropped elements of the fp32 P become 0 (the end of the softmax).
  __device__ __forceinline__ void apply_fp32(float (&s)[NS], const uint32_t (&kw)[NT]) {
    if constexpr (kFp32Apply) {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) attn::apply_keep_word(*reinterpret_cast<float(*)[8][4]>(&s[32 * tt]), kw[tt]);
    }
  }

  // P_j (fp32, the softmax's output in S's registers) as bf16x2.
  __device__ static void pack(const float (&s)[NS], uint32_t (&d)[PK][4]) {
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) {
      d[kk][0] = attn::pack_bf16(s[8 * kk + 0], s[8 * kk + 1]);
      d[kk][1] = attn::pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
      d[kk][2] = attn::pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
      d[kk][3] = attn::pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }
  __device__ void masks(uint32_t (&m)[PK][4], const uint32_t (&kwp)[NT]) {
    if constexpr (kGe7) {
      attn::ge7_masks_bf16x2<NT>(ge7, m);
    } else {
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) attn::keep_word_masks_bf16x2(kwp[tt], *reinterpret_cast<uint32_t(*)[4][4]>(&m[4 * tt]));
    }
  }
  __device__ void pack_early(const float (&s)[NS], const uint32_t (&kwp)[NT]) {
    if constexpr (kPackEarly) {
      pack(s, pe);
      masks(pm, kwp);
#pragma unroll
      for (int kk = 0; kk < PK; ++kk) {
        ptx::reg_fence(pe[kk]);
        ptx::reg_fence(pm[kk]);
      }
    }
  }
  // kMaskEarly: block j's masks, made while S_j runs (mask: the keep words arrived a block ago; fused: right
  // after gen_ge7). The fence keeps nvcc from sinking them to their use after the softmax; ptxas places them
  // between the P V wgmmas.
  __device__ void mask_early(const uint32_t (&kwp)[NT]) {
    if constexpr (kMaskEarly) {
      masks(pm, kwp);
#pragma unroll
      for (int kk = 0; kk < PK; ++kk) ptx::reg_fence(pm[kk]);
    }
  }
  // P_j as bf16x2 (the A operand of P V) with the packed-domain dropout: P &= masks.
  __device__ void convert_p(const float (&s)[NS], const uint32_t (&kwp)[NT], uint32_t (&d)[PK][4]) {
    if constexpr (kMaskEarly) {
      pack(s, d);
#pragma unroll
      for (int kk = 0; kk < PK; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) d[kk][i] &= pm[kk][i];
    } else if constexpr (kPackEarly) {
#pragma unroll
      for (int kk = 0; kk < PK; ++kk)
#pragma unroll
        for (int i = 0; i < 4; ++i) d[kk][i] = pe[kk][i] & pm[kk][i];
    } else {
      pack(s, d);
      if constexpr (kPackLate) {
        uint32_t m[PK][4];
        masks(m, kwp);
#pragma unroll
        for (int kk = 0; kk < PK; ++kk)
#pragma unroll
          for (int i = 0; i < 4; ++i) d[kk][i] &= m[kk][i];
      }
    }
  }
};

}  // namespace attn_wg
}  // namespace dropbench
