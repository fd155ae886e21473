// The merge base's RNG tile and seeded-dropout launchers behind plain functions, for bench_rng's old-vs-new
// comparison in one binary. scripts/rng_bench.sh compiles this file and the OLD tree's kernels/rng/rng_mask.cu,
// kernels/dropout/dropout.cu and kernels/common/check.cpp with -Ddropbench=dropbench_old (their namespace
// renamed, so they link beside the current ones) and the old tree first on the include path. Not in CMake.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/dropout/dropout.cuh"
#include "kernels/rng/rng_mask.cuh"

void bench_old_rng_tile(void* out, uint32_t bh, uint32_t sq, int rounds, int tw, uint32_t drop, uint64_t seed,
                        uint32_t offset, cudaStream_t s) {
  dropbench::RngMaskParams p;
  p.seed = seed;
  p.offset = offset;
  p.rounds = rounds;
  p.threshold_bits = tw;
  p.drop = drop;
  p.geo = dropbench::MaskGeometry{bh, sq, sq, false};
  p.out = out;
  dropbench::launch_rng_mask(p, s);
}

void bench_old_dropout_seeded(bool bf16, const void* x, void* y, uint64_t n, float scale, uint64_t seed,
                              uint32_t offset, int rounds, int tw, uint32_t drop, cudaStream_t s) {
  dropbench::DropoutApplyParams p;
  p.type = bf16 ? dropbench::ElemType::BF16 : dropbench::ElemType::FP32;
  p.x = x;
  p.y = y;
  p.n = n;
  p.scale = scale;
  dropbench::launch_dropout_seeded(p, seed, offset, rounds, tw, drop, s);
}
