// GPU: row windows of the RNG mask kernel and of the attention kernel (the chunked pipeline's building blocks)
// against the whole-matrix runs, the co-resident / work-stealing RNG schedules against the static kernel, and
// the four pipelines of `dropbench run` (baseline, fused, overlap, chunked) bit for bit on small shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "src/block/block_pipelines.hpp"
#include "attention_test_problem.hpp"
#include "cli_runner.hpp"
#include "src/core/device_buffer.hpp"
#include "gpu_guard.hpp"
#include "src/block/pipeline_plan.hpp"
#include "kernels/rng/rng_mask.cuh"

using namespace dropbench;

namespace {

template <class T>
std::vector<T> download(const void* p, size_t bytes) {
  std::vector<T> h(bytes / sizeof(T));
  DB_CUDA(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Elements that are not finite (NaN: a poisoned element no kernel wrote).
size_t nonfinite(const std::vector<__nv_bfloat16>& v) {
  size_t bad = 0;
  for (const auto& x : v) bad += !std::isfinite(__bfloat162float(x));
  return bad;
}

struct MaskCase {
  uint32_t bh, sq;
  bool causal;
  int rounds, tw;
  double p;
  int64_t chunk;
};

RngMaskParams tile_params(const MaskCase& c, void* out) {
  RngMaskParams p;
  p.seed = 0x1234abcd5678ull + c.sq;
  p.offset = c.sq * 3u;
  p.rounds = c.rounds;
  p.threshold_bits = c.tw;
  p.drop = make_threshold(c.p, c.tw).drop;
  p.geo = MaskGeometry{c.bh, c.sq, c.sq, c.causal};
  p.out = out;
  return p;
}

const MaskCase kMaskCases[] = {
    {3, 1000, true, 7, 8, 0.1, 256},  {2, 1000, false, 5, 16, 0.3, 128}, {1, 77, true, 3, 8, 0.2, 128},
    {4, 640, false, 10, 32, 0.5, 0},  {2, 2048, true, 7, 8, 0.1, 512},
};

}  // namespace

// Every chunk window written on its own (chunk-local, dense) equals the corresponding slice of the full mask,
// for the static, co-resident and stealing schedules.
TEST(PipelinesGpu, WindowedRngEqualsFullMaskSlice) {
  DB_REQUIRE_GPU();
  DeviceBuffer work(kRngWorkWords * 8);
  for (const MaskCase& c : kMaskCases) {
    const MaskGeometry g{c.bh, c.sq, c.sq, c.causal};
    DeviceBuffer full(g.bytes());
    DB_CUDA(cudaMemset(full.get(), 0xA5, g.bytes()));
    launch_rng_mask(tile_params(c, full.get()), nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const auto hf = download<uint32_t>(full.get(), g.bytes());
    for (RngSchedule sch : {RngSchedule::Static, RngSchedule::Coresident, RngSchedule::Steal}) {
      for (const ChunkRange& ch : plan_chunks(c.sq, c.chunk)) {
        RngMaskParams p = tile_params(c, nullptr);
        p.row_begin = static_cast<uint32_t>(ch.row_begin);
        p.rows = static_cast<uint32_t>(ch.rows);
        p.schedule = sch;
        p.work = work.get<unsigned long long>();
        if (sch == RngSchedule::Coresident) p.block = 64, p.grid = 3;
        if (sch == RngSchedule::Steal) p.block = 1024, p.grid = 2;
        const MaskWindow win = rng_mask_window(p);
        ASSERT_EQ(mask_bytes(p), win.bytes(g));
        DeviceBuffer buf(win.bytes(g));
        p.out = buf.get();
        DB_CUDA(cudaMemset(buf.get(), 0xA5, win.bytes(g)));
        DB_CUDA(cudaMemset(work.get(), 0, work.size()));
        launch_rng_mask(p, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        const auto hw = download<uint32_t>(buf.get(), win.bytes(g));
        size_t bad = 0;
        for (uint32_t bh = 0; bh < g.bh; ++bh)
          for (uint32_t r16 = win.r16_begin; r16 < win.r16_begin + win.rows16; ++r16)
            for (uint32_t c64 = 0; c64 < g.cols64(); ++c64)
              for (uint32_t l = 0; l < 32; ++l)
                bad += hw[win.word_index(g, bh, r16, c64, l)] != hf[g.word_index(bh, r16, c64, l)];
        EXPECT_EQ(bad, 0u) << "sq=" << c.sq << " causal=" << c.causal << " R=" << c.rounds << " tw=" << c.tw
                           << " schedule=" << rng_schedule_name(sch) << " rows [" << ch.row_begin << ", +"
                           << ch.rows << ")";
        if (sch != RngSchedule::Static) {
          unsigned long long h[kRngWorkWords];
          DB_CUDA(cudaMemcpy(h, work.get(), sizeof h, cudaMemcpyDeviceToHost));
          const uint64_t strips = static_cast<uint64_t>(g.bh) * win.rows16;
          EXPECT_GE(h[0], strips);  // every strip handed out (plus one failed grab per warp)
          if (sch == RngSchedule::Coresident) {
            EXPECT_EQ(h[1], strips);  // all done by the co-resident kernel
            EXPECT_EQ(h[6], 3u);      // its three blocks ran
          }
        }
      }
    }
  }
}

// A co-resident kernel and a stealing finisher on another stream share one counter: the mask is complete and
// bit-identical to the static kernel's, and the strips are split between them.
TEST(PipelinesGpu, CoresidentAndFinisherShareTheWork) {
  DB_REQUIRE_GPU();
  const MaskCase c{16, 4096, true, 7, 8, 0.1, 0};
  const MaskGeometry g{c.bh, c.sq, c.sq, c.causal};
  DeviceBuffer ref(g.bytes()), out(g.bytes()), work(kRngWorkWords * 8);
  DB_CUDA(cudaMemset(ref.get(), 0, g.bytes()));
  DB_CUDA(cudaMemset(out.get(), 0, g.bytes()));
  DB_CUDA(cudaMemset(work.get(), 0, work.size()));
  launch_rng_mask(tile_params(c, ref.get()), nullptr);
  cudaStream_t s1, s2;
  DB_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  DB_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  RngMaskParams a = tile_params(c, out.get());
  a.schedule = RngSchedule::Coresident;
  a.block = 32;
  a.work = work.get<unsigned long long>();
  RngMaskParams b = a;
  b.schedule = RngSchedule::Steal;
  b.block = 256;
  DB_CUDA(cudaDeviceSynchronize());
  launch_rng_mask(a, s1);
  launch_rng_mask(b, s2);
  DB_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(download<uint32_t>(ref.get(), g.bytes()), download<uint32_t>(out.get(), g.bytes()));
  unsigned long long h[kRngWorkWords];
  DB_CUDA(cudaMemcpy(h, work.get(), sizeof h, cudaMemcpyDeviceToHost));
  const uint64_t strips = static_cast<uint64_t>(g.bh) * g.rows16();
  EXPECT_LE(h[1], strips);
  int dev = 0, sms = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  EXPECT_EQ(h[6], static_cast<unsigned long long>(sms));  // default grid: one block per SM
  int covered = 0;
  for (int i = 2; i < 6; ++i) covered += __builtin_popcountll(h[i]);
  std::printf("[ info ] co-resident share %.3f on %d distinct SMs of %d blocks\n", double(h[1]) / strips, covered, sms);
  DB_CUDA(cudaStreamDestroy(s1));
  DB_CUDA(cudaStreamDestroy(s2));
}

TEST(PipelinesGpu, RngRejectsBadWindows) {
  DB_REQUIRE_GPU();
  RngMaskParams p = tile_params(kMaskCases[0], nullptr);
  p.row_begin = 8;
  EXPECT_THROW(launch_rng_mask(p, nullptr), UsageError);
  p.row_begin = 0;
  p.schedule = RngSchedule::Coresident;  // no work counter
  EXPECT_THROW(launch_rng_mask(p, nullptr), UsageError);
  p.schedule = RngSchedule::Static;
  p.layout = MaskLayout::Bits;
  p.rows = 128;
  EXPECT_THROW(launch_rng_mask(p, nullptr), UsageError);
}

namespace {

struct AttnShape {
  int b, sq, hq, hkv, hd;
  bool causal;
  int64_t chunk;
};

std::string name_of(const AttnShape& s) {
  return "B" + std::to_string(s.b) + "_S" + std::to_string(s.sq) + "_H" + std::to_string(s.hq) + "x" +
         std::to_string(s.hkv) + "_D" + std::to_string(s.hd) + (s.causal ? "_causal" : "") + "_chunk" +
         std::to_string(s.chunk);
}

}  // namespace

// Attention over chunk windows (each reading its chunk-local mask) writes exactly the rows of the whole-matrix
// run, bit for bit, in modes none, mask and fused; rows outside a window are not touched.
TEST(PipelinesGpu, WindowedAttentionEqualsFullRows) {
  DB_REQUIRE_GPU();
  const AttnShape shapes[] = {
      {2, 1000, 8, 2, 128, true, 256}, {1, 1000, 4, 4, 128, false, 128}, {1, 77, 4, 1, 128, true, 128},
      {2, 300, 8, 2, 64, true, 128},   {1, 2048, 8, 2, 128, true, 512},  {1, 640, 4, 2, 64, false, 0},
  };
  // Both kernel families (auto would pick one): each reads a window's chunk-local mask in its own way.
  std::vector<std::pair<AttentionKernel, AttnShape>> runs;
  for (AttentionKernel k : {AttentionKernel::Mma, AttentionKernel::Wgmma})
    if (test::kernel_available(k))
      for (const AttnShape& sh : shapes) runs.emplace_back(k, sh);
  for (const auto& [kern, s] : runs) {
    const std::string nm = name_of(s) + "_" + attention_kernel_family_name(kern);
    const int64_t stride = static_cast<int64_t>(s.hq + 2 * s.hkv) * s.hd;
    const size_t qkv_n = static_cast<size_t>(s.b) * s.sq * stride, o_bytes = static_cast<size_t>(s.b) * s.sq * s.hq * s.hd * 2;
    const size_t lse_bytes = static_cast<size_t>(s.b) * s.hq * s.sq * 4;
    std::vector<__nv_bfloat16> h(qkv_n);
    std::mt19937_64 rng(test::next_draw_seed());  // fresh inputs (DB_ATTN_SEED replays a run)
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : h) v = __float2bfloat16(nd(rng));
    DeviceBuffer qkv(qkv_n * 2), o_full(o_bytes), o_win(o_bytes), lse_full(lse_bytes), lse_win(lse_bytes);
    DB_CUDA(cudaMemcpy(qkv.get(), h.data(), qkv_n * 2, cudaMemcpyHostToDevice));
    const Threshold t = make_threshold(0.15, 8);
    AttentionParams base;
    base.kernel = kern;
    base.qkv = qkv.get<__nv_bfloat16>();
    base.batch = s.b;
    base.sq = s.sq;
    base.q_heads = s.hq;
    base.kv_heads = s.hkv;
    base.head_dim = s.hd;
    base.causal = s.causal;
    base.seed = 0xfeedbeef;
    base.offset = 11;
    base.drop_threshold = t.drop;
    base.keep_scale = t.scale;
    base.rounds = 7;
    base.threshold_bits = 8;
    const MaskGeometry g = attention_mask_geometry(base);
    DeviceBuffer full_mask(g.bytes());
    RngMaskParams rp;
    rp.seed = base.seed;
    rp.offset = base.offset;
    rp.drop = t.drop;
    rp.geo = g;
    rp.out = full_mask.get();
    launch_rng_mask(rp, nullptr);
    const auto chunks = plan_chunks(s.sq, s.chunk);
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      AttentionParams pf = base;
      pf.o = o_full.get<__nv_bfloat16>();
      pf.lse = lse_full.get<float>();
      pf.mask = full_mask.get<uint32_t>();
      DB_CUDA(cudaMemset(o_full.get(), 0xFF, o_bytes));
      DB_CUDA(cudaMemset(lse_full.get(), 0xFF, lse_bytes));
      launch_attention(pf, m, nullptr);
      DB_CUDA(cudaMemset(o_win.get(), 0xFF, o_bytes));
      DB_CUDA(cudaMemset(lse_win.get(), 0xFF, lse_bytes));
      for (size_t ci = 0; ci < chunks.size(); ++ci) {
        const ChunkRange& ch = chunks[ci];
        RngMaskParams wp = rp;
        wp.row_begin = static_cast<uint32_t>(ch.row_begin);
        wp.rows = static_cast<uint32_t>(ch.rows);
        DeviceBuffer wmask(mask_bytes(wp));
        wp.out = wmask.get();
        launch_rng_mask(wp, nullptr);
        AttentionParams pw = base;
        pw.o = o_win.get<__nv_bfloat16>();
        pw.lse = lse_win.get<float>();
        pw.mask = wmask.get<uint32_t>();
        pw.row_begin = static_cast<int>(ch.row_begin);
        pw.rows = static_cast<int>(ch.rows);
        EXPECT_EQ(attention_mask_window(pw).words(g) * 4, mask_bytes(wp));
        launch_attention(pw, m, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        if (ci == 0 && chunks.size() > 1) {
          // Only the first chunk's rows are written so far.
          const auto ow = download<uint16_t>(o_win.get(), o_bytes);
          size_t written_outside = 0;
          const size_t row_elems = static_cast<size_t>(s.hq) * s.hd;
          for (int b = 0; b < s.b; ++b)
            for (int r = static_cast<int>(ch.rows); r < s.sq; ++r)
              for (size_t e = 0; e < row_elems; ++e) written_outside += ow[(static_cast<size_t>(b) * s.sq + r) * row_elems + e] != 0xFFFF;
          EXPECT_EQ(written_outside, 0u) << nm;
        }
      }
      DB_CUDA(cudaDeviceSynchronize());
      EXPECT_EQ(download<uint32_t>(o_full.get(), o_bytes & ~size_t{3}), download<uint32_t>(o_win.get(), o_bytes & ~size_t{3}))
          << nm << " mode " << dropout_mode_name(m);
      EXPECT_EQ(download<uint32_t>(lse_full.get(), lse_bytes), download<uint32_t>(lse_win.get(), lse_bytes))
          << nm << " mode " << dropout_mode_name(m);
      // Flops of the windows add up to the whole.
      double fl = 0;
      for (const ChunkRange& ch : chunks) {
        AttentionParams pw = base;
        pw.row_begin = static_cast<int>(ch.row_begin);
        pw.rows = static_cast<int>(ch.rows);
        fl += attention_flops(pw);
      }
      if (!s.causal) EXPECT_NEAR(fl, attention_flops(base), 1e-6 * attention_flops(base));
    }
  }
}

TEST(PipelinesGpu, AttentionRejectsBadWindows) {
  DB_REQUIRE_GPU();
  DeviceBuffer qkv(1000 * 3 * 128 * 2), o(1000 * 128 * 2);
  AttentionParams p;
  p.qkv = qkv.get<__nv_bfloat16>();
  p.o = o.get<__nv_bfloat16>();
  p.sq = 1000;
  p.row_begin = 64;  // not a multiple of 128
  EXPECT_THROW(launch_attention(p, DropoutMode::None, nullptr), UsageError);
  p.row_begin = 1024;  // past the end
  EXPECT_THROW(launch_attention(p, DropoutMode::None, nullptr), UsageError);
  p.row_begin = 128;
  p.rows = 100;  // ragged but not reaching the end
  EXPECT_THROW(launch_attention(p, DropoutMode::None, nullptr), UsageError);
  p.rows = 900;  // reaches past the end: fine
  EXPECT_NO_THROW(launch_attention(p, DropoutMode::None, nullptr));
  DB_CUDA(cudaDeviceSynchronize());
}

namespace {

struct BlockCase {
  int64_t batch, sq, embed, hq, hkv, hd;
  bool causal;
  const char* dtype;
  int64_t rounds, tw;
  int64_t chunk;
};

Workload workload_of(const BlockCase& c) {
  Workload w;
  w.batch = c.batch;
  w.sq = c.sq;
  w.embed = c.embed;
  w.q_heads = c.hq;
  w.kv_heads = c.hkv;
  w.head_dim = c.hd;
  w.causal = c.causal;
  w.dtype = c.dtype;
  w.rounds = c.rounds;
  w.threshold_bits = c.tw;
  w.chunk = c.chunk;
  w.dropout_p = 0.1;
  w.seed = 0xabcdef0123ull + c.sq;
  w.offset = 5;
  return w;
}

}  // namespace

// The four pipelines, with every overlap RNG configuration, write the same O and LSE bit for bit; O is finite
// everywhere (every element written) and dropout changed it.
TEST(PipelinesGpu, FourPipelinesBitwiseIdentical) {
  DB_REQUIRE_GPU();
  const BlockCase cases[] = {
      {1, 1000, 256, 8, 2, 128, true, "fp8", 7, 8, 256},   // ragged, causal, GQA 4:1
      {2, 640, 128, 4, 4, 64, false, "bf16", 7, 8, 0},     // batch 2, MHA, dH 64, auto chunks
      {1, 300, 512, 8, 1, 128, true, "fp8", 5, 16, 128},   // MQA, Philox-5, 16-bit thresholds
      {1, 2048, 1024, 16, 4, 128, true, "fp8", 3, 8, 0},   // 8 chunks
      {1, 77, 256, 4, 2, 128, false, "fp8", 10, 32, 128},  // shorter than one block: one chunk
  };
  cudaStream_t st;
  DB_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (const BlockCase& c : cases) {
    const Workload w = workload_of(c);
    BlockRunner::Options bo;
    BlockRunner r(w, bo, st);
    const std::string nm = "B" + std::to_string(c.batch) + " S" + std::to_string(c.sq) + " H" + std::to_string(c.hq) +
                           "x" + std::to_string(c.hkv) + " D" + std::to_string(c.hd) + (c.causal ? " causal" : "");
    // Reference: the baseline.
    r.poison_outputs(st);
    r.run(Pipeline::Baseline, st, no_phases(), rng_plain());
    DB_CUDA(cudaStreamSynchronize(st));
    EXPECT_EQ(nonfinite(download<__nv_bfloat16>(r.o(), r.o_bytes())), 0u) << nm << ": O not finite / not written";
    r.keep_reference(st);
    const uint64_t ref_sum = r.checksum(r.o(), r.o_bytes(), st);
    int dev = 0, sms = 0;
    DB_CUDA(cudaGetDevice(&dev));
    DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    auto gp = [&] {
      GemmOptions go = r.gemm_options();
      go.sm_count_target = sms - 8;
      return r.make_gemm(go);
    }();
    // The partition mechanism (Steal) runs with its SM-limited GEMM, whose QKV may differ from the whole-device
    // GEMM's in the last bits: its pipelines are compared with the baseline run on that same GEMM, which becomes
    // the reference from there on (Steal comes last).
    for (const RngConfig& rc : {rng_plain(), rng_priority(), rng_coresident(1), rng_coresident(4), rng_partition(8)}) {
      const bool steal = rc.schedule == RngSchedule::Steal;
      uint64_t want_sum = ref_sum;
      if (steal) {
        r.poison_outputs(st);
        r.run(Pipeline::Baseline, st, no_phases(), rng_plain(), gp.get());
        DB_CUDA(cudaStreamSynchronize(st));
        EXPECT_EQ(nonfinite(download<__nv_bfloat16>(r.o(), r.o_bytes())), 0u) << nm << ": SM-limited baseline's O";
        r.keep_reference(st);
        want_sum = r.checksum(r.o(), r.o_bytes(), st);
      }
      for (Pipeline p : all_pipelines()) {
        if (p == Pipeline::Baseline && rc.name != "plain") continue;
        r.poison_outputs(st);
        r.run(p, st, no_phases(), rc, steal ? gp.get() : nullptr);
        const auto [od, ld] = r.diff_reference(st);
        EXPECT_EQ(od, 0u) << nm << " pipeline " << pipeline_name(p) << " rng " << rc.name << ": O words differ";
        EXPECT_EQ(ld, 0u) << nm << " pipeline " << pipeline_name(p) << " rng " << rc.name << ": LSE words differ";
        EXPECT_EQ(r.checksum(r.o(), r.o_bytes(), st), want_sum) << nm << " " << pipeline_name(p) << " " << rc.name;
      }
    }
    // The comparison sees a difference: one word of O changed is one word counted.
    {
      uint32_t w0 = 0;
      DB_CUDA(cudaMemcpy(&w0, r.o(), 4, cudaMemcpyDeviceToHost));
      w0 ^= 0x00010000u;
      DB_CUDA(cudaMemcpy(r.o(), &w0, 4, cudaMemcpyHostToDevice));
      DB_CUDA(cudaDeviceSynchronize());  // st is non-blocking: the count below must see the write
      const auto [od, ld] = r.diff_reference(st);
      EXPECT_EQ(od, 1u) << nm << ": one O word changed";
      EXPECT_EQ(ld, 0u) << nm;
    }
    // The overlap's mask equals the standard kernel's, whichever schedule wrote it.
    r.poison_outputs(st);
    r.rng_static(st, no_phases());
    const uint64_t mask_ref = r.checksum(r.full_mask(), r.full_mask_bytes(), st);
    for (const RngConfig& rc : {rng_coresident(1), rng_coresident(2), rng_partition(8)}) {
      r.poison_outputs(st);
      r.overlap_phase(r.gemm(), rc, st, no_phases());
      EXPECT_EQ(r.checksum(r.full_mask(), r.full_mask_bytes(), st), mask_ref) << nm << " " << rc.name;
      const auto ws = r.work_stats(st);
      if (rc.schedule == RngSchedule::Coresident) {
        EXPECT_LE(ws.coresident_strips, ws.strips);
        EXPECT_GT(ws.coresident_blocks, 0u);
      }
    }
    // Dropout did something: p = 0 gives another O.
    Workload w0 = w;
    w0.dropout_p = 0.0;
    BlockRunner r0(w0, bo, st);
    r0.run(Pipeline::Fused, st, no_phases(), rng_plain());
    EXPECT_NE(r0.checksum(r0.o(), r0.o_bytes(), st), ref_sum) << nm;
  }
  DB_CUDA(cudaStreamDestroy(st));
}

// `dropbench run --graph`: every pipeline is also captured into a CUDA graph (its side streams included), replayed
// bit for bit like the stream version, timed as its own variant, and never chosen as the winner.
TEST(PipelinesGpu, RunGraphReplayMatchesStreams) {
  DB_REQUIRE_GPU();
  const auto dir = std::filesystem::temp_directory_path() / ("dropbench_graph_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string report = (dir / "r.json").string();
  const auto r = dropbench_test::run_dropbench(
      "run -q --no-explore --graph --set sweep.sq=[1000] --set workload.causal=true --min-time 0.01 --max-noise 1 "
      "--set measure.timeout=1 --set measure.throttle=0 -o '" + report + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream rf(report);
  const auto rep = nlohmann::json::parse(rf);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(rep["points"].size(), 1u);
  const auto& pt = rep["points"][0];
  int graphs = 0;
  for (const auto& v : pt["variants"]) {
    const std::string n = v["name"];
    const auto colon = n.find(":graph");
    if (colon == std::string::npos) continue;
    ++graphs;
    EXPECT_TRUE(v["extra"]["bitwise_equal"].get<bool>()) << n;
    EXPECT_GE(v["extra"]["graph_nodes"].get<int>(), 2) << n;  // at least GEMM and attention
    EXPECT_GT(v["stats"]["median"].get<double>(), 0) << n;
    EXPECT_GT(v["derived"]["x_streams"].get<double>(), 0) << n;
    EXPECT_NE(pt["derived"]["winner"].get<std::string>(), n);
  }
  EXPECT_EQ(graphs, 4);
  EXPECT_EQ(rep["summary"]["bitwise_mismatches"].get<int>(), 0);
}
