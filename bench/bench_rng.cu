// Standalone benchmark of the RNG mask kernel and seeded dropout (CMake target bench_rng; scripts/rng_bench.sh
// also links the merge base's kernels beside them, -DDROPBENCH_BENCH_OLD, for old-vs-new in one binary).
// Round-robin over the variants (one launch of each per round, CUDA events around each), median and spread:
//   ceiling R      kernels/rng/philox_ceiling: the same number of Philox-R calls as the mask, compute only
//   tile R         the 8-bit tile mask of B*H = bh matrices SQ x SQ (launch_rng_mask), [old R: the merge base's]
//   copy / seeded  device-to-device copy of n elements vs seeded dropout (bf16, fp32): the default kind and each
//                  kind k (seeded kK), [old seeded]; kcopy, a plain copy kernel; pcopy kK, kind K's access pattern
//                  with no RNG (launch_dropout_pattern_copy); "% of copy, per round" = copy / variant time per round
// Checks: every seeded kind's y equal to kind 3's (at n and at a ragged size; exit code 1 if not); old and new
// masks / dropout outputs bit for bit equal (with DROPBENCH_BENCH_OLD).
// usage: bench_rng [sq=8192] [bh=32] [elements=2^29] [rounds=20] [mode=all|rng|dropout|check|ncu]
//   mode ncu: one launch of each rng kernel at R 7 (for ncu --kernel-name), no timing; check: the dropout checks
//   only. BENCH_RNG_KINDS=0125 (say) times only those seeded kinds.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/common/check.hpp"
#include "kernels/dropout/dropout.cuh"
#include "kernels/rng/philox_ceiling.cuh"
#include "kernels/rng/rng_mask.cuh"

#ifdef DROPBENCH_BENCH_OLD
void bench_old_rng_tile(void* out, uint32_t bh, uint32_t sq, int rounds, int tw, uint32_t drop, uint64_t seed,
                        uint32_t offset, cudaStream_t s);
void bench_old_dropout_seeded(bool bf16, const void* x, void* y, uint64_t n, float scale, uint64_t seed,
                              uint32_t offset, int rounds, int tw, uint32_t drop, cudaStream_t s);
#endif

using namespace dropbench;

namespace {

struct Variant {
  std::string name;
  double work;  // elements (rng) or bytes moved (dropout) per launch
  std::function<void()> launch;
  std::vector<float> ms;
};

__global__ void fill_bits(uint32_t* x, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    // bf16 pairs / fp32 values in [-2, 2): exponent forced into range so no NaN/Inf
    x[i] = static_cast<uint32_t>(z ^ (z >> 31)) & 0xBFFFBFFFu;
  }
}

void round_robin(std::vector<Variant>& vs, int rounds, const char* unit) {
  std::vector<cudaEvent_t> ev(2 * vs.size());
  for (auto& e : ev) DB_CUDA(cudaEventCreate(&e));
  for (auto& v : vs) v.launch();  // warm-up
  DB_CUDA(cudaDeviceSynchronize());
  for (int r = 0; r < rounds; ++r) {
    // rotate the order every round so drift hits all alike
    for (size_t k = 0; k < vs.size(); ++k) {
      const size_t i = (k + r) % vs.size();
      DB_CUDA(cudaEventRecord(ev[2 * i]));
      vs[i].launch();
      DB_CUDA(cudaEventRecord(ev[2 * i + 1]));
    }
    DB_CUDA(cudaDeviceSynchronize());
    for (size_t i = 0; i < vs.size(); ++i) {
      float t = 0;
      DB_CUDA(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
      vs[i].ms.push_back(t);
    }
  }
  for (auto& e : ev) DB_CUDA(cudaEventDestroy(e));
  std::printf("%-22s %10s %10s %10s %12s\n", "variant", "median_us", "min_us", "max_us", unit);
  for (auto& v : vs) {
    std::vector<float> t = v.ms;
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2] * 1e-3;
    std::printf("%-22s %10.1f %10.1f %10.1f %12.2f\n", v.name.c_str(), med * 1e6, t.front() * 1e3, t.back() * 1e3,
                v.work / med / 1e9);
  }
}

// A plain copy kernel for reference: 4 16-byte vectors per thread (block-strided, coalesced), one block per 16 KB,
// no grid-stride loop.
__global__ void copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, size_t vecs) {
  const size_t base = blockIdx.x * size_t(4 * 256) + threadIdx.x;
  uint4 v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (base + 256 * j < vecs) v[j] = x[base + 256 * j];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (base + 256 * j < vecs) y[base + 256 * j] = v[j];
}

__global__ void count_diff(const uint32_t* a, const uint32_t* b, size_t words, unsigned long long* out) {
  unsigned long long d = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    d += a[i] != b[i];
  if (d) atomicAdd(out, d);
}

double median_s(const Variant& v) {
  std::vector<float> t = v.ms;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e-3;
}

}  // namespace

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "bench_rng: no CUDA device\n");
    return 77;
  }
  const uint32_t sq = argc > 1 ? std::atoi(argv[1]) : 8192;
  const uint32_t bh = argc > 2 ? std::atoi(argv[2]) : 32;
  const uint64_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 0) : (1ull << 29);
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 20;
  const std::string mode = argc > 5 ? argv[5] : "all";
  const uint64_t seed = 0x5eed5eedull;
  const uint32_t drop = 26;  // p = 0.1 at 8 bits
  const MaskGeometry geo{bh, sq, sq, false};
  const double elems = static_cast<double>(geo.generated_elements());
  int clk = 0;
  DB_CUDA(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  std::printf("bench_rng: sq %u bh %u (%.3g elements), dropout %llu elements, %d rounds, max SM clock %d MHz\n", sq, bh,
              elems, static_cast<unsigned long long>(n), rounds, clk / 1000);

  int checks_failed = 0;  // seeded-kind checks that found a difference (exit code 1: BenchSmoke.Rng fails)
  void *mask = nullptr, *mask_old = nullptr, *ceil_out = nullptr;
  if (mode == "all" || mode == "rng" || mode == "ncu") {
    DB_CUDA(cudaMalloc(&mask, geo.bytes()));
    DB_CUDA(cudaMalloc(&mask_old, geo.bytes()));
    DB_CUDA(cudaMalloc(&ceil_out, 64ull << 20));
    std::vector<Variant> vs;
    for (int R : {3, 5, 7, 10}) {
      if (mode == "ncu" && R != 7) continue;
      PhiloxCeilingParams cp;
      cp.rounds = R;
      cp.seed = seed;
      cp.calls_per_thread = philox_ceiling_calls_per_thread(cp, static_cast<uint64_t>(elems / 16));
      cp.out = static_cast<uint32_t*>(ceil_out);
      const double ceil_elems = static_cast<double>(philox_ceiling_calls(cp)) * 16;
      RngMaskParams rp;
      rp.seed = seed;
      rp.rounds = R;
      rp.threshold_bits = 8;
      rp.drop = drop;
      rp.geo = geo;
      rp.out = mask;
      vs.push_back({"ceiling R" + std::to_string(R), ceil_elems, [cp] { launch_philox_ceiling(cp, nullptr); }, {}});
      vs.push_back({"tile R" + std::to_string(R), elems, [rp] { launch_rng_mask(rp, nullptr); }, {}});
#ifdef DROPBENCH_BENCH_OLD
      vs.push_back({"old tile R" + std::to_string(R), elems,
                    [=] { bench_old_rng_tile(mask_old, bh, sq, R, 8, drop, seed, 0, nullptr); }, {}});
      // bit for bit: the new kernel against the merge base's
      launch_rng_mask(rp, nullptr);
      bench_old_rng_tile(mask_old, bh, sq, R, 8, drop, seed, 0, nullptr);
      std::vector<uint32_t> a(geo.words()), b(geo.words());
      DB_CUDA(cudaMemcpy(a.data(), mask, geo.bytes(), cudaMemcpyDeviceToHost));
      DB_CUDA(cudaMemcpy(b.data(), mask_old, geo.bytes(), cudaMemcpyDeviceToHost));
      std::printf("check R%d: tile masks old == new: %s\n", R, a == b ? "yes" : "NO");
#endif
    }
    if (mode == "ncu") {
      for (auto& v : vs) v.launch();
      DB_CUDA(cudaDeviceSynchronize());
      return 0;
    }
    std::printf("-- RNG (8-bit thresholds, p 0.1); unit: G elements/s\n");
    round_robin(vs, rounds, "Gelem/s");
    for (size_t i = 0; i + 1 < vs.size(); ++i)
      if (vs[i].name.rfind("ceiling", 0) == 0) {
        const double ce = vs[i].work / median_s(vs[i]);
        std::printf("%s: ceiling %.1f Gelem/s", vs[i].name.c_str(), ce / 1e9);
        for (size_t j = i + 1; j < vs.size() && vs[j].name.rfind("ceiling", 0) != 0; ++j)
          std::printf(", %s %.1f%%", vs[j].name.c_str(), 100 * vs[j].work / median_s(vs[j]) / ce);
        std::printf("\n");
      }
    DB_CUDA(cudaFree(mask));
    DB_CUDA(cudaFree(mask_old));
    DB_CUDA(cudaFree(ceil_out));
  }
  if (mode == "all" || mode == "dropout" || mode == "check") {
    // BENCH_RNG_KINDS: the seeded kinds to time (digits, default all); the device script drops any kind whose
    // check run failed, so one broken kind cannot take the other measurements down with it.
    const char* ke = std::getenv("BENCH_RNG_KINDS");
    const std::string kinds = ke ? ke : "01234567";
    unsigned long long* diff = nullptr;  // words that differ, per check
    DB_CUDA(cudaMalloc(&diff, sizeof(unsigned long long)));
    for (bool bf16 : {true, false}) {
      const size_t es = bf16 ? 2 : 4, bytes = n * es;
      void *x = nullptr, *y = nullptr, *y_old = nullptr;
      DB_CUDA(cudaMalloc(&x, bytes));
      DB_CUDA(cudaMalloc(&y, bytes + 16));  // + 16: a poisoned word past the end (check)
      DB_CUDA(cudaMalloc(&y_old, bytes + 16));
      fill_bits<<<1024, 256>>>(static_cast<uint32_t*>(x), bytes / 4, seed);
      DB_CUDA_LAUNCH();
      DropoutApplyParams ap;
      ap.type = bf16 ? ElemType::BF16 : ElemType::FP32;
      ap.x = x;
      ap.y = y;
      ap.n = n;
      ap.scale = 1.f / (1.f - drop / 256.f);
      const std::string t = bf16 ? " bf16" : " fp32";
      // Bit for bit: every kind against kind 3 (the reference kind), at n and at a ragged size; compared on
      // the device (32-bit words that differ), y poisoned before each launch.
      for (uint64_t m : {n, n / 64 + 4099}) {
        DropoutApplyParams kp = ap;
        kp.n = m;
        kp.y = y_old;
        kp.seeded_kernel = 3;
        DB_CUDA(cudaMemset(y_old, 0xFF, m * es + 4));
        launch_dropout_seeded(kp, seed, 0, 7, 8, drop, nullptr);
        kp.y = y;
        for (char kc : std::string("-") + kinds) {
          kp.seeded_kernel = kc == '-' ? -1 : kc - '0';
          DB_CUDA(cudaMemset(y, 0xFF, m * es + 4));
          launch_dropout_seeded(kp, seed, 0, 7, 8, drop, nullptr);
          DB_CUDA(cudaMemset(diff, 0, sizeof(unsigned long long)));
          count_diff<<<1024, 256>>>(static_cast<const uint32_t*>(y), static_cast<const uint32_t*>(y_old),
                                    (m * es + 3) / 4 + 1, diff);  // + 1: the word past the end stays poisoned
          DB_CUDA_LAUNCH();
          unsigned long long d = 0;
          DB_CUDA(cudaMemcpy(&d, diff, sizeof d, cudaMemcpyDeviceToHost));
          std::printf("check%s n=%llu: seeded dropout kind %d == kind 3: %s (%llu words differ)\n", t.c_str(),
                      static_cast<unsigned long long>(m), kp.seeded_kernel, d == 0 ? "yes" : "NO", d);
          checks_failed += d != 0;
        }
      }
      std::vector<Variant> vs;
      vs.push_back({"copy" + t, 2.0 * bytes, [=] { DB_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice)); }, {}});
      const unsigned copy_grid = static_cast<unsigned>((bytes / 16 + 4 * 256 - 1) / (4 * 256));
      vs.push_back({"kcopy" + t, 2.0 * bytes, [=] {
                      copy_kernel<<<copy_grid, 256>>>(static_cast<const uint4*>(x), static_cast<uint4*>(y), bytes / 16);
                      DB_CUDA_LAUNCH();
                    }, {}});
      vs.push_back({"seeded" + t, 2.0 * bytes, [=] { launch_dropout_seeded(ap, seed, 0, 7, 8, drop, nullptr); }, {}});
      for (char kc : kinds) {  // the kernel kinds of seeded dropout (kernels/dropout/dropout.cu)
        DropoutApplyParams kp = ap;
        kp.seeded_kernel = kc - '0';
        vs.push_back({std::string("seeded k") + kc + t, 2.0 * bytes,
                      [=] { launch_dropout_seeded(kp, seed, 0, 7, 8, drop, nullptr); }, {}});
      }
      for (char kc : kinds) {  // the same access patterns with no RNG (y = x)
        if (kc != '1' && kc != '4' && kc != '5' && kc != '6' && kc != '7') continue;
        DropoutApplyParams kp = ap;
        kp.seeded_kernel = kc - '0';
        vs.push_back({std::string("pcopy k") + kc + t, 2.0 * bytes,
                      [=] { launch_dropout_pattern_copy(kp, nullptr); }, {}});
      }
#ifdef DROPBENCH_BENCH_OLD
      vs.push_back({"old seeded" + t, 2.0 * bytes,
                    [=] { bench_old_dropout_seeded(bf16, x, y_old, n, ap.scale, seed, 0, 7, 8, drop, nullptr); }, {}});
      bench_old_dropout_seeded(bf16, x, y_old, n, ap.scale, seed, 0, 7, 8, drop, nullptr);
      std::vector<uint8_t> a(bytes), b(bytes);
      DB_CUDA(cudaMemcpy(b.data(), y_old, bytes, cudaMemcpyDeviceToHost));
      for (int k = -1; k < 4; ++k) {
        DropoutApplyParams kp = ap;
        kp.seeded_kernel = k;
        DB_CUDA(cudaMemset(y, 0xFF, bytes));
        launch_dropout_seeded(kp, seed, 0, 7, 8, drop, nullptr);
        DB_CUDA(cudaMemcpy(a.data(), y, bytes, cudaMemcpyDeviceToHost));
        std::printf("check%s: seeded dropout kind %d == old: %s\n", t.c_str(), k, a == b ? "yes" : "NO");
      }
#endif
      if (mode != "check") {
        std::printf("-- dropout%s, %llu elements; unit: GB/s (x read + y written)\n", t.c_str(),
                    static_cast<unsigned long long>(n));
        round_robin(vs, rounds, "GB/s");
        // Per round: copy time / variant time (the two launched next to each other), median and quartiles.
        std::printf("%-22s %8s %8s %8s\n", "% of copy, per round", "median", "q25", "q75");
        for (size_t i = 1; i < vs.size(); ++i) {
          std::vector<double> r;
          for (size_t k = 0; k < vs[i].ms.size(); ++k) r.push_back(100.0 * vs[0].ms[k] / vs[i].ms[k]);
          std::sort(r.begin(), r.end());
          std::printf("%-22s %8.2f %8.2f %8.2f\n", vs[i].name.c_str(), r[r.size() / 2], r[r.size() / 4],
                      r[(3 * r.size()) / 4]);
        }
        const double copy = median_s(vs[0]);
        for (size_t i = 1; i < vs.size(); ++i)
          std::printf("%s: %.1f%% of copy\n", vs[i].name.c_str(), 100 * copy / median_s(vs[i]));
      }
      DB_CUDA(cudaFree(x));
      DB_CUDA(cudaFree(y));
      DB_CUDA(cudaFree(y_old));
    }
    DB_CUDA(cudaFree(diff));
  }
  if (checks_failed) std::fprintf(stderr, "bench_rng: %d seeded-dropout checks FAILED\n", checks_failed);
  return checks_failed ? 1 : 0;
}
