// Host-side planning of `dropbench run` (src/pipeline_plan.hpp): chunking, hidden-fraction arithmetic, SM
// partition, memory and skip logic, pipeline names; the counter-scheme window helpers; `run --dry-run`.
#include <gtest/gtest.h>

#include "cli_runner.hpp"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/common/check.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "src/block/pipeline_plan.hpp"
#include "test_paths.hpp"

using namespace dropbench;

TEST(PipelinePlan, NamesRoundTrip) {
  for (Pipeline p : all_pipelines()) EXPECT_EQ(parse_pipeline(pipeline_name(p)), p);
  EXPECT_THROW(parse_pipeline("fast"), UsageError);
  const auto l = parse_pipeline_list("overlap,fused");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], Pipeline::Overlap);
  EXPECT_EQ(l[1], Pipeline::Fused);
  EXPECT_THROW(parse_pipeline_list("fused,fused"), UsageError);
  EXPECT_THROW(parse_pipeline_list(""), UsageError);
  EXPECT_THROW(parse_pipeline_list("fused,bogus"), UsageError);
}

TEST(PipelinePlan, AutoChunkIsAMultipleOfTheQueryBlock) {
  EXPECT_EQ(auto_chunk_rows(8192), 1024);
  EXPECT_EQ(auto_chunk_rows(16384), 2048);
  EXPECT_EQ(auto_chunk_rows(1000), 128);   // ceil(1000/8) = 125 -> 128
  EXPECT_EQ(auto_chunk_rows(77), 128);     // at least one block
  EXPECT_EQ(auto_chunk_rows(4097), 640);   // ceil(4097/8) = 513 -> 640
  for (int64_t sq : {1, 100, 128, 129, 1000, 4096, 8191, 8192, 65536}) {
    const int64_t c = auto_chunk_rows(sq);
    EXPECT_EQ(c % 128, 0) << sq;
    EXPECT_GE(c, 128) << sq;
  }
}

TEST(PipelinePlan, ChunksCoverTheSequenceExactly) {
  for (int64_t sq : {1, 77, 128, 1000, 1024, 4097, 8192}) {
    for (int64_t chunk : {0, 128, 256, 1024, 8192}) {
      const auto cs = plan_chunks(sq, chunk);
      ASSERT_FALSE(cs.empty());
      int64_t next = 0;
      for (const ChunkRange& c : cs) {
        EXPECT_EQ(c.row_begin, next);
        EXPECT_EQ(c.row_begin % 128, 0);
        EXPECT_GT(c.rows, 0);
        next += c.rows;
      }
      EXPECT_EQ(next, sq) << "sq=" << sq << " chunk=" << chunk;
      for (size_t i = 0; i + 1 < cs.size(); ++i) EXPECT_EQ(cs[i].rows, cs[0].rows);  // only the last is ragged
    }
  }
  const auto cs = plan_chunks(1000, 256);
  ASSERT_EQ(cs.size(), 4u);
  EXPECT_EQ(cs.back(), (ChunkRange{768, 232}));
  EXPECT_EQ(plan_chunks(8192, 0).size(), 8u);
}

TEST(PipelinePlan, ChunkMustBeAMultipleOfTheQueryBlock) {
  EXPECT_THROW(plan_chunks(8192, 100), UsageError);
  EXPECT_THROW(plan_chunks(8192, 64), UsageError);
  EXPECT_THROW(plan_chunks(8192, -128), UsageError);
  try {
    plan_chunks(8192, 192);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 128"), std::string::npos) << e.what();
  }
}

TEST(PipelinePlan, HiddenFraction) {
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 0.25, 1.0), 1.0);   // the RNG vanished
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 0.25, 1.25), 0.0);  // serial
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 0.25, 1.05), 0.8);
  EXPECT_DOUBLE_EQ(hidden_fraction(0.25, 1.0, 1.05), 0.8);  // symmetric
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 0.25, 1.5), -1.0);  // slower than serial
  EXPECT_DOUBLE_EQ(hidden_fraction(0.0, 0.25, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 0.25, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(hidden_fraction(1.0, 1.0, 1.0), 1.0);
}

TEST(PipelinePlan, PartitionSplitsInProportion) {
  EXPECT_EQ(partition_rng_sms(132, 1.0, 0.25), 26);   // 132 * 0.2 = 26.4 -> 26
  EXPECT_EQ(partition_rng_sms(132, 1.0, 0.25, 0.5), 14);  // 13.2 -> 14 (even)
  EXPECT_EQ(partition_rng_sms(132, 1.0, 1.0), 66);
  EXPECT_EQ(partition_rng_sms(132, 1.0, 1e-6), 2);      // at least one granule
  EXPECT_EQ(partition_rng_sms(132, 1e-6, 1.0), 130);    // the GEMM keeps one granule
  EXPECT_EQ(partition_rng_sms(132, 0, 0), 66);
  EXPECT_EQ(partition_rng_sms(132, 1.0, 0.25, 1.0, 1), 26);
  EXPECT_THROW(partition_rng_sms(3, 1.0, 1.0), UsageError);
}

namespace {
Workload llama70b(int64_t sq) {
  Workload w;
  w.embed = 8192;
  w.q_heads = 64;
  w.kv_heads = 8;
  w.head_dim = 128;
  w.sq = sq;
  w.causal = true;
  w.dtype = "fp8";
  return w;
}
}  // namespace

TEST(PipelinePlan, MemoryOfTheLlama70bPoint) {
  const BlockMemory m = block_memory(llama70b(8192), 1024, 2, true);
  EXPECT_EQ(m.x, 8192ull * 8192);
  EXPECT_EQ(m.w, 10240ull * 8192);
  EXPECT_EQ(m.qkv, 8192ull * 10240 * 2);
  EXPECT_EQ(m.o, 8192ull * 8192 * 2);
  EXPECT_EQ(m.o_ref, m.o);
  EXPECT_EQ(m.lse, 64ull * 8192 * 4);
  EXPECT_EQ(m.full_mask, 64ull * 8192 * 8192 / 8);   // 512 MiB: 1 bit per element
  EXPECT_EQ(m.chunk_mask, 64ull * 1024 * 8192 / 8);  // 64 MiB per chunk buffer
  EXPECT_EQ(m.gemm_workspaces, 2ull << 26);
  EXPECT_EQ(block_memory(llama70b(8192), 1024, 2, false).o_ref, 0u);
  // Ragged: rows and columns padded to the tile.
  const BlockMemory r = block_memory(llama70b(1000), 128, 1, false);
  EXPECT_EQ(r.full_mask, 64ull * 63 * 16 * 128);
}

TEST(PipelinePlan, EverythingRunsWhenItFits) {
  const BlockMemory m = block_memory(llama70b(8192), 1024, 2, true);
  const PipelinePlan p = plan_pipelines(m, size_t{100} << 30, 0, all_pipelines());
  EXPECT_TRUE(p.point_fits);
  EXPECT_EQ(p.run, all_pipelines());
  EXPECT_TRUE(p.skipped.empty());
  EXPECT_TRUE(p.needs_full_mask);
  EXPECT_TRUE(p.needs_chunk_masks);
}

TEST(PipelinePlan, MaskThatDoesNotFitRunsChunkedAndFusedOnly) {
  const BlockMemory m = block_memory(llama70b(65536), 8192, 2, true);  // full mask 32 GiB
  const PipelinePlan p = plan_pipelines(m, size_t{30} << 30, 0, all_pipelines());  // no --mask-budget
  EXPECT_TRUE(p.point_fits);
  ASSERT_EQ(p.run.size(), 2u);
  EXPECT_EQ(p.run[0], Pipeline::Fused);
  EXPECT_EQ(p.run[1], Pipeline::Chunked);
  ASSERT_EQ(p.skipped.size(), 2u);
  EXPECT_EQ(p.skipped[0].first, Pipeline::Baseline);
  EXPECT_EQ(p.skipped[1].first, Pipeline::Overlap);
  EXPECT_NE(p.skipped[0].second.find("32.0 GiB"), std::string::npos) << p.skipped[0].second;
  EXPECT_NE(p.skipped[0].second.find("device memory left"), std::string::npos) << p.skipped[0].second;
  EXPECT_EQ(p.skipped[0].second.find("budget"), std::string::npos) << p.skipped[0].second;  // none was given
  EXPECT_FALSE(p.needs_full_mask);
  EXPECT_TRUE(p.needs_chunk_masks);
}

TEST(PipelinePlan, MaskBudgetSkipsLikeMemory) {
  const BlockMemory m = block_memory(llama70b(8192), 1024, 2, true);
  const PipelinePlan p = plan_pipelines(m, size_t{100} << 30, size_t{256} << 20, all_pipelines());
  ASSERT_EQ(p.skipped.size(), 2u);
  EXPECT_NE(p.skipped[0].second.find("--mask-budget of 256 MiB"), std::string::npos) << p.skipped[0].second;
  EXPECT_EQ(p.run.size(), 2u);
}

TEST(PipelinePlan, PointSkippedWhenTheBuffersDoNotFit) {
  const BlockMemory m = block_memory(llama70b(8192), 1024, 2, true);
  const PipelinePlan p = plan_pipelines(m, size_t{256} << 20, 0, all_pipelines());
  EXPECT_FALSE(p.point_fits);
  EXPECT_NE(p.point_reason.find("free device memory"), std::string::npos) << p.point_reason;
  // Only baseline wanted and its mask does not fit: nothing to run.
  const PipelinePlan q = plan_pipelines(m, size_t{100} << 30, 1, {Pipeline::Baseline});
  EXPECT_FALSE(q.point_fits);
  EXPECT_NE(q.point_reason.find("no wanted pipeline fits"), std::string::npos);
}

TEST(PipelinePlan, ChunkMasksThatDoNotFitSkipChunked) {
  BlockMemory m = block_memory(llama70b(8192), 8192, 1, false);
  const size_t free_b = m.common() + (size_t{512} << 20) + m.chunk_mask;  // room for one chunk mask only
  const PipelinePlan p = plan_pipelines(m, free_b, 0, {Pipeline::Fused, Pipeline::Chunked});
  ASSERT_EQ(p.run.size(), 1u);
  EXPECT_EQ(p.run[0], Pipeline::Fused);
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0].first, Pipeline::Chunked);
}

// Chunked's two chunk masks are reserved beside the full mask only when Chunked can run: room for the full mask
// alone runs baseline and overlap, and skips only chunked.
TEST(PipelinePlan, ChunkMasksAreNotReservedWhenChunkedCannotRun) {
  BlockMemory m = block_memory(llama70b(8192), 8192, 1, false);  // one chunk: chunk mask = full mask
  ASSERT_EQ(m.chunk_mask, m.full_mask);
  const size_t free_b = m.common() + (size_t{512} << 20) + m.full_mask + (m.full_mask / 2);
  const PipelinePlan p = plan_pipelines(m, free_b, 0, all_pipelines());
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0].first, Pipeline::Chunked);
  EXPECT_EQ(p.run.size(), 3u);
  EXPECT_TRUE(p.needs_full_mask);
}

TEST(PipelinePlan, HumanBytes) {
  EXPECT_EQ(human_bytes(100), "100 B");
  EXPECT_EQ(human_bytes(512ull << 20), "512 MiB");
  EXPECT_EQ(human_bytes(3ull << 29), "1.5 GiB");
}

// The chunk-local mask addressing of dropout_scheme.cuh (host side of the same functions the kernels use).
TEST(MaskWindow, WholeMatrixWindowIsTheFullLayout) {
  const MaskGeometry g{3, 1000, 1000, true};
  const MaskWindow w = mask_window(g, 0, 0);
  EXPECT_EQ(w.r16_begin, 0u);
  EXPECT_EQ(w.rows16, g.rows16());
  EXPECT_EQ(w.words(g), g.words());
  EXPECT_EQ(w.generated_elements(g), g.generated_elements());
  for (uint32_t bh = 0; bh < 3; ++bh)
    for (uint32_t r16 = 0; r16 < g.rows16(); r16 += 7)
      for (uint32_t c64 = 0; c64 < g.cols64(); c64 += 3)
        EXPECT_EQ(w.word_index(g, bh, r16, c64, 5), g.word_index(bh, r16, c64, 5));
}

TEST(MaskWindow, ChunkWindowsPartitionTheStrips) {
  const MaskGeometry g{2, 1000, 1000, false};
  uint64_t words = 0, elems = 0;
  uint32_t next = 0;
  for (const ChunkRange& c : plan_chunks(1000, 256)) {
    const MaskWindow w = mask_window(g, static_cast<uint32_t>(c.row_begin), static_cast<uint32_t>(c.rows));
    EXPECT_EQ(w.r16_begin, next);
    next += w.rows16;
    words += w.words(g);
    elems += w.generated_elements(g);
    // Dense per chunk: the first strip of matrix 1 follows the last of matrix 0.
    EXPECT_EQ(w.word_index(g, 1, w.r16_begin, 0, 0), static_cast<uint64_t>(w.rows16) * g.cols64() * 32);
  }
  EXPECT_EQ(next, g.rows16());
  EXPECT_EQ(words, g.words());
  EXPECT_EQ(elems, g.generated_elements());
  // Last window: rows past the end are clamped; a window starting past the end is empty.
  EXPECT_EQ(mask_window(g, 768, 100000).rows16, 15u);  // rows 768..999 -> strips 48..62
  EXPECT_EQ(mask_window(g, 1008, 0).rows16, 0u);
}

namespace {
using Result = dropbench_test::CliResult;
Result run_cli(const std::string& args) { return dropbench_test::run_dropbench(args); }
}  // namespace

TEST(RunCommand, DryRunWalksThePipelines) {
  const auto out = std::filesystem::temp_directory_path() / ("dropbench_run_dry_" + std::to_string(::getpid()) + ".json");
  const Result r = run_cli("run --dry-run -q --config '" + dropbench_test::source_path("configs/llama3-70b.json") +
                           "' --set sweep.sq=[8192] --set sweep.rounds=[5,7] -o '" + out.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["command"], "run");
  ASSERT_EQ(j["points"].size(), 2u);
  ASSERT_EQ(j["points"][0]["variants"].size(), 4u);
  EXPECT_EQ(j["points"][0]["variants"][0]["name"], "baseline");
  EXPECT_EQ(j["points"][0]["variants"][3]["name"], "chunked");
  std::filesystem::remove(out);
}

TEST(RunCommand, BadInputIsAUsageError) {
  EXPECT_EQ(run_cli("run --dry-run -q --pipelines fused,bogus").code, 2);
  EXPECT_EQ(run_cli("run --dry-run -q --top-k 0").code, 2);
  EXPECT_EQ(run_cli("run --dry-run -q --overlap-rng fastest").code, 2);
  // A chunk that is not a multiple of the query block skips the point (reported), exit 0.
  const Result r = run_cli("run --dry-run -q --set workload.chunk=100");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("multiple of 128"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli("run --dry-run -q --pipelines fused").code, 0);
  const Result h = run_cli("run --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("coresident"), std::string::npos);
}
