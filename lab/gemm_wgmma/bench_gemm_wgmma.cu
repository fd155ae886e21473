// Experiment (lab/gemm_wgmma/README.md): our wgmma FP8 GEMM (gemm_wgmma.cu) against cuBLASLt's (QkvGemm, top-4
// tuned), alone and beside co-resident RNG mask kernels. CMake target bench_gemm_wgmma with -DDROPBENCH_EXPERIMENTS=ON
// (a GPU smoke test runs one round of the 8B shape); lab/gemm_wgmma/gemm_wgmma.sh runs it with logs, SASS check and
// memcheck.
//
// Per Llama-3 shape (M = 8192; 8B: K 4096 N 6144 Hq 32; 70B: K 8192 N 10240 Hq 64; 405B: K 16384 N 18432
// Hq 128), with the RNG mask = tile layout, Philox-7, 8-bit thresholds, p 0.1, B 1 x Hq x 8192 x 8192 causal:
//   own-<cfg>      our GEMM alone: 128x256 ("staged"/"direct" epilogue; "-c2": cluster of 2 with the B tile
//                  multicast) and 128x128 ("n128-"); the fastest 128x256 one is "A", the fastest 128x128 one "B"
//   cublas         QkvGemm alone (fp8, fast accumulation, top_k 4, tuned)
//   rng-static     the standard grid-stride RNG kernel alone (RngSchedule::Static)
//   rng-<mech>     a co-resident RNG kernel (grid = SMs) on a side stream + the project's Steal finisher on the
//                  main stream, nothing else (BlockRunner::rng_alone). <mech>:
//                    cores  the project's RngSchedule::Coresident kernel, 128 threads (it asks for the
//                           max-shared-memory carveout; before that fix the default carveout kept it off the SMs)
//                    msN    the same kernel with N threads (the first runs used a copy of it with the carveout)
//   G||<mech>[g]   G (A, B or cublas) beside it: the RNG launched first on the side stream, the GEMM on the main
//                  stream, the finisher after the GEMM on the main stream, fork/join by events (overlap_phase);
//                  "g": a gate kernel before the GEMM waits until every RNG block has started
//   G||plain       the GEMM, then the Static RNG on the side stream (the naive two-stream version)
//   G+rng          GEMM then Static RNG on one stream (serial)
// Every sample is one CUDA-event pair on the main stream around the whole (forked and joined) work; variants are
// interleaved round-robin (rounds x reps) and the median is reported.
// hidden = (T_gemm + T_rng - T_overlap) / min(T_gemm, T_rng), with T_rng = rng-static alone (the standard RNG
// kernel, as `dropbench run` defines it) and T_gemm = the overlapped GEMM alone ("vs own GEMM") or cuBLASLt
// alone ("vs cuBLASLt": what the overlapped pipeline saves against cuBLASLt + RNG in series); "self" uses the
// mechanism's own RNG-alone time, "vs measured serial" the interleaved G+rng time instead of the sum.
// Checks: our GEMM's output against cuBLASLt's on the full shape (relative Frobenius difference, poisoned first);
// the mask of every overlapped combination bit for bit against the Static kernel's; a probe run of each that
// reads the co-resident kernel's counters right after the GEMM (strips handed out while the GEMM ran, when the
// GEMM ended, the SMs the RNG blocks ran on); SM clock and power per variant (NVML, ~300 ms each); and, on the
// first shape, spinner blocks (default vs max-shared carveout) launched before each GEMM.
//
// usage: bench_gemm_wgmma [rounds=5] [reps=4] [shapes=8b,70b,405b] [cluster=1 (0: skip the c2 variants)]
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/gemm/gemm.cuh"
#include "lab/gemm_wgmma/gemm_wgmma.cuh"
#include "kernels/rng/rng_mask.cuh"
#include "kernels/common/check.hpp"

using namespace dropbench;

namespace {

__global__ void diff_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, size_t n, double* acc,
                            unsigned long long* nonfinite) {
  double num = 0, den = 0;
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
    if (!isfinite(x) || !isfinite(y)) {
      ++bad;
      continue;
    }
    num += double(x - y) * double(x - y);
    den += double(y) * double(y);
  }
  for (int o = 16; o > 0; o >>= 1) {
    num += __shfl_down_sync(0xffffffffu, num, o);
    den += __shfl_down_sync(0xffffffffu, den, o);
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc[0], num);
    atomicAdd(&acc[1], den);
    atomicAdd(nonfinite, bad);
  }
}

__global__ void mask_diff_kernel(const uint32_t* a, const uint32_t* b, size_t words, unsigned long long* ndiff) {
  unsigned long long d = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    d += a[i] != b[i];
  for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o);
  if ((threadIdx.x & 31) == 0 && d) atomicAdd(ndiff, d);
}

// Copies the co-resident kernel's counters at the moment it runs (right after the GEMM on the main stream).
__global__ void snapshot_kernel(const unsigned long long* work, unsigned long long* out) {
  for (int i = 0; i < kRngWorkWords; ++i) out[i] = *reinterpret_cast<const volatile unsigned long long*>(&work[i]);
}

// Occupies its block for `ns` nanoseconds of %globaltimer and records its SM (bitmap in bits[0..3]). kTag 1
// gets the max-shared-memory carveout preference, kTag 0 keeps the default.
template <int kTag>
__global__ void __maxnreg__(32) spin_kernel(unsigned long long ns, unsigned long long* bits) {
  if (threadIdx.x == 0) {
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (smid < 256) atomicOr(&bits[smid / 64], 1ull << (smid % 64));
  }
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// Waits (at most ~20 ms) until `blocks` co-resident RNG blocks have started (work[6]): launched on the GEMM's
// stream between the RNG launch and the GEMM, it makes "RNG blocks first on every SM, then the GEMM" certain.
__global__ void gate_kernel(const unsigned long long* work, unsigned long long blocks) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    if (*reinterpret_cast<const volatile unsigned long long*>(&work[6]) >= blocks) return;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < 20000000ull);
}

struct Variant {
  std::string name;
  std::function<void()> fn;
  std::vector<float> ms;
  double med() const {
    std::vector<float> v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v[v.size() / 2];
  }
  double min() const { return ms.empty() ? NAN : *std::min_element(ms.begin(), ms.end()); }
};

// NVML through dlopen (no header or link dependency): SM clock, power, clock-event reasons.
struct Nvml {
  bool ok = false;
  void* dev = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*power)(void*, unsigned*) = nullptr;
  int (*reasons)(void*, unsigned long long*) = nullptr;
  Nvml() {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    auto get = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(h, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(h, "nvmlDeviceGetPowerUsage"));
    reasons = reinterpret_cast<int (*)(void*, unsigned long long*)>(dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    ok = init && get && clock && power && reasons && init() == 0 && get(0, &dev) == 0;
  }
};

struct ShapeCfg {
  const char* name;
  int64_t k, n;
  uint32_t hq;
};

double hidden(double tg, double tr, double tb) { return (tg + tr - tb) / std::min(tg, tr); }

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 4;
  const std::string which = argc > 3 ? argv[3] : "8b,70b,405b";
  const bool with_cluster = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  std::vector<WgmmaConfig> cfgs = {{WgmmaEpilogue::Staged, 1, 256},
                                   {WgmmaEpilogue::Direct, 1, 256},
                                   {WgmmaEpilogue::Staged, 1, 128},
                                   {WgmmaEpilogue::Direct, 1, 128}};
  if (with_cluster) {
    cfgs.push_back({WgmmaEpilogue::Staged, 2});
    cfgs.push_back({WgmmaEpilogue::Direct, 2});
  }
  const std::vector<ShapeCfg> all = {{"8b", 4096, 6144, 32}, {"70b", 8192, 10240, 64}, {"405b", 16384, 18432, 128}};

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to benchmark (skipped)\n");
    return 77;  // ctest SKIP_RETURN_CODE
  }
  cudaDeviceProp prop{};
  DB_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, %d regs/SM, %zu B smem/SM, cuBLASLt %s\n", prop.name, sms,
              prop.regsPerMultiprocessor, prop.sharedMemPerMultiprocessor, QkvGemm::cublaslt_version_string().c_str());
  for (const WgmmaConfig& cfg : cfgs) {
    const WgmmaResources r = WgmmaGemm::resources(cfg);
    std::printf("own-%s: %s; RNG CTA 128 thr x 32 regs fits beside: %s; 256 thr: %s\n", cfg.name().c_str(),
                r.summary().c_str(), r.fits_beside(128, 32) ? "yes" : "no", r.fits_beside(256, 32) ? "yes" : "no");
  }

  cudaStream_t main_s, side_s;
  DB_CUDA(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  DB_CUDA(cudaStreamCreateWithFlags(&side_s, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  DB_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  DB_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  double* d_acc = nullptr;
  unsigned long long *d_cnt = nullptr, *d_work = nullptr, *d_snap = nullptr;
  DB_CUDA(cudaMalloc(&d_acc, 2 * sizeof(double)));
  DB_CUDA(cudaMalloc(&d_cnt, sizeof(unsigned long long)));
  DB_CUDA(cudaMalloc(&d_work, kRngWorkWords * sizeof(unsigned long long)));
  DB_CUDA(cudaMalloc(&d_snap, kRngWorkWords * sizeof(unsigned long long)));
  DB_CUDA(cudaFuncSetAttribute(spin_kernel<1>, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared));

  const Nvml nvml;
  std::printf("NVML: %s\n", nvml.ok ? "clock/power sampling on" : "unavailable");
  std::vector<std::string> csv;
  for (const ShapeCfg& sc : all) {
    if (which.find(sc.name) == std::string::npos) continue;
    const GemmShape gs{8192, sc.n, sc.k};
    std::printf("\n=== %s: M %lld N %lld K %lld, mask 1 x %u x 8192 x 8192 causal, Philox-7, 8-bit, p 0.1 ===\n", sc.name,
                static_cast<long long>(gs.m), static_cast<long long>(gs.n), static_cast<long long>(gs.k), sc.hq);
    QkvBuffers buf(gs, GemmDtype::fp8_e4m3);
    buf.randomize(0x5eed0000ull + sc.hq, main_s);
    GemmOptions go;
    go.dtype = GemmDtype::fp8_e4m3;
    go.fast_accum = true;
    go.top_k = 4;
    QkvGemm cub(gs, go);
    cub.bind(buf.x, buf.w, buf.y, buf.scale_x(), buf.scale_w());
    cub.tune(main_s);
    std::printf("cuBLASLt: %s (%zu candidates)\n", cub.algo().summary().c_str(), cub.candidates().size());

    const size_t ybytes = static_cast<size_t>(gs.m) * gs.n * 2;
    void* y_own = nullptr;
    DB_CUDA(cudaMalloc(&y_own, ybytes));
    std::vector<std::unique_ptr<WgmmaGemm>> owns;
    for (const WgmmaConfig& cfg : cfgs) {
      owns.push_back(std::make_unique<WgmmaGemm>(gs, cfg));
      owns.back()->bind(buf.x, buf.w, y_own, buf.scale_x(), buf.scale_w());
    }

    // Correctness on the full shape: ours vs cuBLASLt's output (both fast accumulation).
    for (const auto& gp : owns) {
      const WgmmaGemm* g = gp.get();
      DB_CUDA(cudaMemsetAsync(y_own, 0xFF, ybytes, main_s));
      DB_CUDA(cudaMemsetAsync(buf.y, 0xFF, ybytes, main_s));
      cub.run(main_s);
      g->run(main_s);
      DB_CUDA(cudaMemsetAsync(d_acc, 0, 2 * sizeof(double), main_s));
      DB_CUDA(cudaMemsetAsync(d_cnt, 0, sizeof(unsigned long long), main_s));
      diff_kernel<<<sms * 4, 256, 0, main_s>>>(static_cast<const __nv_bfloat16*>(y_own),
                                               static_cast<const __nv_bfloat16*>(buf.y), ybytes / 2, d_acc, d_cnt);
      DB_CUDA_LAUNCH();
      double acc[2];
      unsigned long long nf = 0;
      DB_CUDA(cudaMemcpyAsync(acc, d_acc, sizeof acc, cudaMemcpyDeviceToHost, main_s));
      DB_CUDA(cudaMemcpyAsync(&nf, d_cnt, sizeof nf, cudaMemcpyDeviceToHost, main_s));
      DB_CUDA(cudaStreamSynchronize(main_s));
      std::printf("check own-%s vs cuBLASLt: rel diff %.3e, non-finite %llu -> %s\n", g->config().name().c_str(),
                  std::sqrt(acc[0] / acc[1]), nf, (nf == 0 && std::sqrt(acc[0] / acc[1]) < 1e-2) ? "OK" : "MISMATCH");
    }

    // RNG.
    const Threshold thr = make_threshold(0.1, 8);
    RngMaskParams rp;
    rp.seed = 0x243F6A8885A308D3ull;
    rp.offset = 7;
    rp.rounds = 7;
    rp.threshold_bits = 8;
    rp.drop = thr.drop;
    rp.layout = MaskLayout::Tile;
    rp.geo = MaskGeometry{sc.hq, 8192, 8192, true};
    const size_t mbytes = rp.geo.bytes();
    void *mask = nullptr, *mask_ref = nullptr;
    DB_CUDA(cudaMalloc(&mask, mbytes));
    DB_CUDA(cudaMalloc(&mask_ref, mbytes));
    const uint64_t strips = uint64_t{sc.hq} * rp.geo.rows16();
    RngMaskParams st = rp, co = rp, fin = rp;
    st.out = mask_ref;
    st.schedule = RngSchedule::Static;
    co.out = fin.out = mask;
    co.schedule = RngSchedule::Coresident;
    co.grid = sms;
    co.block = 128;
    co.work = d_work;
    fin.schedule = RngSchedule::Steal;
    fin.block = 256;
    fin.work = d_work;
    RngMaskParams st_side = st;
    st_side.out = mask;

    // Co-resident mechanisms: how the small persistent RNG kernel is launched on the side stream.
    //   cores       the project's RngSchedule::Coresident kernel, 128 threads, grid = SMs
    //   msB         the same kernel with B threads a block (the name is from the first runs, when the
    //               max-shared carveout existed only in a copy of the kernel in this file; rng_mask.cu has it now)
    //   ...g        + a gate on the GEMM's stream: the GEMM starts once every RNG block has started
    struct Mech {
      std::string name;
      int block;
      bool ms, gate;  // ms: only in the name (see above)
    };
    auto launch_mech = [&](const Mech& m, cudaStream_t s) {
      RngMaskParams c = co;
      c.block = m.block;
      launch_rng_mask(c, s);
    };
    auto fork_side = [&] {
      DB_CUDA(cudaEventRecord(fork, main_s));
      DB_CUDA(cudaStreamWaitEvent(side_s, fork, 0));
    };
    auto join_side = [&] {
      DB_CUDA(cudaEventRecord(join, side_s));
      DB_CUDA(cudaStreamWaitEvent(main_s, join, 0));
    };
    // As BlockRunner::rng_on_side: counters zeroed, the RNG first on the side stream, (gate,) the GEMM, the
    // finisher after it on the main stream, join. gemm nullptr: the RNG alone.
    auto overlap = [&](const Mech& m, const std::function<void()>& gemm, bool probe_snapshot) {
      DB_CUDA(cudaMemsetAsync(d_work, 0, kRngWorkWords * sizeof(unsigned long long), main_s));
      fork_side();
      launch_mech(m, side_s);
      if (gemm) {
        if (m.gate) gate_kernel<<<1, 32, 0, main_s>>>(d_work, static_cast<unsigned long long>(sms));
        gemm();
      }
      if (probe_snapshot) snapshot_kernel<<<1, 1, 0, main_s>>>(d_work, d_snap);
      launch_rng_mask(fin, main_s);
      join_side();
    };
    auto plain = [&](const std::function<void()>& gemm) {
      fork_side();
      gemm();
      launch_rng_mask(st_side, side_s);
      join_side();
    };

    // Static reference mask.
    DB_CUDA(cudaMemsetAsync(mask_ref, 0, mbytes, main_s));
    launch_rng_mask(st, main_s);
    DB_CUDA(cudaStreamSynchronize(main_s));

    auto measure = [&](std::vector<Variant>& vs, int nrounds, int nreps) {
      std::vector<cudaEvent_t> ev(2 * vs.size() * nreps);
      for (auto& e : ev) DB_CUDA(cudaEventCreate(&e));
      for (auto& v : vs) v.fn();  // warm-up
      DB_CUDA(cudaDeviceSynchronize());
      for (int r = 0; r < nrounds; ++r) {
        for (size_t i = 0; i < vs.size(); ++i)
          for (int k = 0; k < nreps; ++k) {
            DB_CUDA(cudaEventRecord(ev[2 * (i * nreps + k)], main_s));
            vs[i].fn();
            DB_CUDA(cudaEventRecord(ev[2 * (i * nreps + k) + 1], main_s));
          }
        DB_CUDA(cudaStreamSynchronize(main_s));
        for (size_t i = 0; i < vs.size(); ++i)
          for (int k = 0; k < nreps; ++k) {
            float t = 0;
            DB_CUDA(cudaEventElapsedTime(&t, ev[2 * (i * nreps + k)], ev[2 * (i * nreps + k) + 1]));
            vs[i].ms.push_back(t);
          }
      }
      for (auto& e : ev) DB_CUDA(cudaEventDestroy(e));
    };

    // Our variants alone (short pre-timing): the fastest 128 x 256 one is "A", the fastest 128 x 128 one "B".
    std::vector<Variant> pre;
    for (const auto& g : owns) pre.push_back({"own-" + g->config().name(), [&g, &main_s] { g->run(main_s); }, {}});
    measure(pre, 2, 3);
    int best_a = -1, best_b = -1;
    for (size_t i = 0; i < pre.size(); ++i) {
      std::printf("pre-timing %s: %.1f us\n", pre[i].name.c_str(), pre[i].med() * 1e3);
      const WgmmaConfig& c = owns[i]->config();
      int& b = c.tile_n == 128 ? best_b : best_a;
      if (c.cluster == 1 && (b < 0 || pre[i].med() < pre[b].med())) b = static_cast<int>(i);
    }
    const WgmmaGemm* ga = owns[best_a].get();
    const WgmmaGemm* gb = owns[best_b].get();
    const std::function<void()> run_a = [ga, &main_s] { ga->run(main_s); };
    const std::function<void()> run_b = [gb, &main_s] { gb->run(main_s); };
    const std::function<void()> run_cub = [&] { cub.run(main_s); };
    std::printf("A = own-%s, B = own-%s\n", ga->config().name().c_str(), gb->config().name().c_str());

    const std::vector<Mech> rng_alone = {{"cores", 128, false, false}, {"ms64", 64, true, false},
                                         {"ms128", 128, true, false}, {"ms256", 256, true, false}};
    struct Combo {
      std::string gemm;  // "A", "B", "cublas"
      Mech m;
    };
    const std::vector<Combo> combos = {
        {"A", {"cores", 128, false, false}},      {"A", {"ms128", 128, true, false}},
        {"A", {"ms64g", 64, true, true}},         {"A", {"ms128g", 128, true, true}},
        {"B", {"cores", 128, false, false}},      {"B", {"ms256g", 256, true, true}},
        {"cublas", {"cores", 128, false, false}}, {"cublas", {"ms128g", 128, true, true}},
    };
    auto gemm_fn = [&](const std::string& g) -> const std::function<void()>& {
      return g == "A" ? run_a : g == "B" ? run_b : run_cub;
    };

    std::vector<Variant> vs;
    for (const auto& g : owns)
      if (g->config().cluster == 1) vs.push_back({"own-" + g->config().name(), [&g, &main_s] { g->run(main_s); }, {}});
    vs.push_back({"A", run_a, {}});
    vs.push_back({"B", run_b, {}});
    vs.push_back({"cublas", run_cub, {}});
    vs.push_back({"rng-static", [&] { launch_rng_mask(st, main_s); }, {}});
    for (const Mech& m : rng_alone) vs.push_back({"rng-" + m.name, [&, m] { overlap(m, nullptr, false); }, {}});
    for (const Combo& c : combos)
      vs.push_back({c.gemm + "||" + c.m.name, [&, c] { overlap(c.m, gemm_fn(c.gemm), false); }, {}});
    vs.push_back({"A||plain", [&] { plain(run_a); }, {}});
    vs.push_back({"B||plain", [&] { plain(run_b); }, {}});
    vs.push_back({"cublas||plain", [&] { plain(run_cub); }, {}});
    vs.push_back({"A+rng", [&] { run_a(); launch_rng_mask(st, main_s); }, {}});
    vs.push_back({"B+rng", [&] { run_b(); launch_rng_mask(st, main_s); }, {}});
    vs.push_back({"cublas+rng", [&] { run_cub(); launch_rng_mask(st, main_s); }, {}});
    measure(vs, rounds, reps);
    auto T = [&](const std::string& n) -> double {
      for (auto& v : vs)
        if (v.name == n) return v.med() * 1e3;  // us
      return NAN;
    };
    const double flops = gs.flops();
    for (auto& v : vs) {
      const bool gemm_alone = v.name.rfind("own-", 0) == 0 || v.name == "cublas" || v.name == "A" || v.name == "B";
      std::printf("  %-18s median %9.1f us  min %9.1f us  (%zu samples)", v.name.c_str(), v.med() * 1e3, v.min() * 1e3,
                  v.ms.size());
      if (gemm_alone) std::printf("  %.0f TFLOP/s", flops / (v.med() * 1e-3) / 1e12);
      std::printf("\n");
    }

    // Mask of every overlapped combination == the Static kernel's, bit for bit; and a probe of co-residency:
    // the counters read right after the GEMM (strips handed out while it ran) and when the GEMM ended.
    struct Probe {
      double pct_during_gemm = 0, gemm_end_us = 0;
      int sms = 0;
      bool mask_ok = false;
    };
    auto probe = [&](const Combo& c) {
      DB_CUDA(cudaMemsetAsync(mask, 0, mbytes, main_s));
      DB_CUDA(cudaMemsetAsync(d_snap, 0xFF, kRngWorkWords * sizeof(unsigned long long), main_s));
      cudaEvent_t e0, e1;
      DB_CUDA(cudaEventCreate(&e0));
      DB_CUDA(cudaEventCreate(&e1));
      DB_CUDA(cudaEventRecord(e0, main_s));
      const std::function<void()>& g = gemm_fn(c.gemm);
      overlap(c.m, [&] {
        g();
        DB_CUDA(cudaEventRecord(e1, main_s));
      }, true);
      DB_CUDA(cudaMemsetAsync(d_cnt, 0, sizeof(unsigned long long), main_s));
      mask_diff_kernel<<<sms * 4, 256, 0, main_s>>>(static_cast<const uint32_t*>(mask),
                                                    static_cast<const uint32_t*>(mask_ref), mbytes / 4, d_cnt);
      DB_CUDA_LAUNCH();
      unsigned long long nd = 0, snap[kRngWorkWords], work[kRngWorkWords];
      DB_CUDA(cudaMemcpyAsync(&nd, d_cnt, sizeof nd, cudaMemcpyDeviceToHost, main_s));
      DB_CUDA(cudaMemcpyAsync(snap, d_snap, sizeof snap, cudaMemcpyDeviceToHost, main_s));
      DB_CUDA(cudaMemcpyAsync(work, d_work, sizeof work, cudaMemcpyDeviceToHost, main_s));
      DB_CUDA(cudaStreamSynchronize(main_s));
      float tg = 0;
      DB_CUDA(cudaEventElapsedTime(&tg, e0, e1));
      DB_CUDA(cudaEventDestroy(e0));
      DB_CUDA(cudaEventDestroy(e1));
      Probe pr;
      for (int i = 2; i < 6; ++i) pr.sms += __builtin_popcountll(work[i]);
      const uint64_t handed = std::min<uint64_t>(snap[0], strips);
      pr.pct_during_gemm = 100.0 * handed / strips;
      pr.gemm_end_us = tg * 1e3;
      pr.mask_ok = nd == 0;
      std::printf("probe %-16s mask words differing from Static: %llu -> %s; GEMM ended at %.1f us; strips handed "
                  "out by then %.1f%%; by co-resident blocks in all %.1f%%; co-resident blocks %llu on %d SMs\n",
                  (c.gemm + "||" + c.m.name).c_str(), nd, nd == 0 ? "OK" : "MISMATCH", pr.gemm_end_us,
                  pr.pct_during_gemm, 100.0 * work[1] / strips, work[6], pr.sms);
      return pr;
    };
    std::vector<Probe> probes;
    bool masks_ok = true;
    for (const Combo& c : combos) {
      probes.push_back(probe(c));
      masks_ok = masks_ok && probes.back().mask_ok;
    }

    const double t_a = T("A"), t_b = T("B"), t_cub = T("cublas"), t_rng = T("rng-static"), t_sc = T("cublas+rng");
    std::printf("summary %s: A %.1f us (%.0f TFLOP/s), B %.1f us (%.0f TFLOP/s), cuBLASLt %.1f us (%.0f TFLOP/s), "
                "A/cuBLASLt %.3f, B/cuBLASLt %.3f; rng static %.1f us, cores+finisher alone %.1f us; masks %s\n",
                sc.name, t_a, flops / t_a / 1e6, t_b, flops / t_b / 1e6, t_cub, flops / t_cub / 1e6, t_a / t_cub,
                t_b / t_cub, t_rng, T("rng-cores"), masks_ok ? "all equal to Static" : "MISMATCH");
    size_t best_c = 0;
    for (size_t i = 0; i < combos.size(); ++i) {
      const Combo& c = combos[i];
      const std::string n = c.gemm + "||" + c.m.name;
      const double tg = c.gemm == "A" ? t_a : c.gemm == "B" ? t_b : t_cub, to = T(n);
      const std::string an = "rng-" + (c.m.name.back() == 'g' ? c.m.name.substr(0, c.m.name.size() - 1) : c.m.name);
      const double ts = T(c.gemm + "+rng");  // the same GEMM then the Static RNG, measured interleaved
      std::printf("  %-16s %8.1f us  hidden vs own GEMM %5.2f (self %5.2f, vs measured serial %5.2f), vs cuBLASLt "
                  "%5.2f; cublas+rng serial / this %.3f; strips during GEMM %5.1f%%, GEMM ended at %.0f us, RNG on "
                  "%d SMs\n",
                  n.c_str(), to, hidden(tg, t_rng, to), hidden(tg, T(an), to), (ts - to) / std::min(tg, t_rng),
                  hidden(t_cub, t_rng, to), t_sc / to, probes[i].pct_during_gemm, probes[i].gemm_end_us, probes[i].sms);
      if (c.gemm != "cublas" && to < T(combos[best_c].gemm + "||" + combos[best_c].m.name)) best_c = i;
    }
    for (const char* g : {"A", "B", "cublas"}) {
      const double tg = g[0] == 'A' ? t_a : g[0] == 'B' ? t_b : t_cub;
      const std::string pl = std::string(g) + "||plain", se = std::string(g) + "+rng";
      std::printf("  %-16s %8.1f us  hidden %5.2f | serial %s %.1f us (sum alone %.1f)\n", pl.c_str(), T(pl),
                  hidden(tg, t_rng, T(pl)), se.c_str(), T(se), tg + t_rng);
    }
    const Combo& bc = combos[best_c];
    const std::string bn = bc.gemm + "||" + bc.m.name;
    const double tgb = bc.gemm == "A" ? t_a : t_b, tbo = T(bn), tao = T("A||cores");
    std::printf("  best own overlap: %s %.1f us: hidden vs own %.2f, vs cuBLASLt %.2f; end to end cublas+rng serial / "
                "best = %.3f (vs sum alone %.3f)\n",
                bn.c_str(), tbo, hidden(tgb, t_rng, tbo), hidden(t_cub, t_rng, tbo), t_sc / tbo, (t_cub + t_rng) / tbo);
    char line[1024];
    std::snprintf(line, sizeof line,
                  "%s,%s,%.1f,%.0f,%s,%.1f,%.0f,%.1f,%.0f,%.1f,%.1f,%.1f,%.2f,%.2f,%s,%.1f,%.2f,%.2f,%.1f,%.3f,%.1f,%d,%d",
                  sc.name, ga->config().name().c_str(), t_a, flops / t_a / 1e6, gb->config().name().c_str(), t_b,
                  flops / t_b / 1e6, t_cub, flops / t_cub / 1e6, t_rng, T("rng-cores"), tao, hidden(t_a, t_rng, tao),
                  hidden(t_cub, t_rng, tao), bn.c_str(), tbo, hidden(tgb, t_rng, tbo), hidden(t_cub, t_rng, tbo), t_sc,
                  t_sc / tbo, probes[best_c].pct_during_gemm, probes[best_c].sms, masks_ok ? 1 : 0);
    csv.push_back(line);

    // Clock and power per phase: each variant enqueued back to back for ~300 ms while a host thread samples
    // NVML every 5 ms (SM clock, board power, the SW-power-cap clock-event reason 0x4).
    if (nvml.ok) {
      const std::vector<std::pair<std::string, std::function<void()>>> phases = {
          {"A", run_a},
          {"cublas", run_cub},
          {"rng-static", [&] { launch_rng_mask(st, main_s); }},
          {"rng-ms128", [&] { overlap(Mech{"ms128", 128, true, false}, nullptr, false); }},
          {"A||ms128g", [&] { overlap(Mech{"ms128g", 128, true, true}, run_a, false); }},
          {"A||cores", [&] { overlap(Mech{"cores", 128, false, false}, run_a, false); }},
          {"A+rng", [&] { run_a(); launch_rng_mask(st, main_s); }},
          {"cublas+rng", [&] { run_cub(); launch_rng_mask(st, main_s); }},
      };
      for (const auto& ph : phases) {
        const double per_call_us = std::max(50.0, T(ph.first));
        const int n = std::max(4, static_cast<int>(300e3 / per_call_us));
        std::atomic<bool> stop{false};
        double clk_sum = 0, pw_sum = 0;
        int ns = 0, capped = 0;
        std::thread sampler([&] {
          while (!stop.load()) {
            unsigned c = 0, pw = 0;
            unsigned long long rs = 0;
            if (nvml.clock(nvml.dev, 1, &c) == 0 && nvml.power(nvml.dev, &pw) == 0 && nvml.reasons(nvml.dev, &rs) == 0) {
              clk_sum += c;
              pw_sum += pw / 1000.0;
              capped += (rs & 0x4ull) != 0;
              ++ns;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        });
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i += 32) {
          for (int j = i; j < std::min(n, i + 32); ++j) ph.second();
          DB_CUDA(cudaStreamSynchronize(main_s));
        }
        const double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        stop.store(true);
        sampler.join();
        std::printf("power %-5s %-11s %4d calls, %8.1f us a call (wall), SM clock %6.0f MHz, power %5.0f W, "
                    "SW power cap %3.0f%% of %d samples\n",
                    sc.name, ph.first.c_str(), n, wall / n, ns ? clk_sum / ns : 0.0, ns ? pw_sum / ns : 0.0,
                    ns ? 100.0 * capped / ns : 0.0, ns);
      }
    }

    // Diagnosis (first shape only): a spinner of the RNG kernel's footprint (no shared memory, 12 registers,
    // one block per SM) launched first for 3 x T_gemm, then the GEMM on the other stream. The GEMM ends near
    // T_gemm if its CTAs sit beside the spinner's, near 4 T_gemm if they wait for it; default carveout vs the
    // max-shared-memory preference.
    if (csv.size() == 1) {
      unsigned long long* d_bits = d_snap;
      for (int tag = 0; tag < 2; ++tag)
        for (int block : {128, 512})
          for (int which_gemm = 0; which_gemm < 3; ++which_gemm) {
            const std::function<void()>& g = which_gemm == 0 ? run_a : which_gemm == 1 ? run_b : run_cub;
            const double tg_alone = which_gemm == 0 ? t_a : which_gemm == 1 ? t_b : t_cub;
            const unsigned long long ns = static_cast<unsigned long long>(3 * tg_alone * 1e3);
            float best_t = 1e30f;
            int nsm = 0;
            for (int rep = 0; rep < 2; ++rep) {
              DB_CUDA(cudaMemsetAsync(d_bits, 0, 4 * sizeof(unsigned long long), main_s));
              cudaEvent_t e0, e1;
              DB_CUDA(cudaEventCreate(&e0));
              DB_CUDA(cudaEventCreate(&e1));
              DB_CUDA(cudaEventRecord(e0, main_s));
              fork_side();
              if (tag == 0) spin_kernel<0><<<sms, block, 0, side_s>>>(ns, d_bits);
              else spin_kernel<1><<<sms, block, 0, side_s>>>(ns, d_bits);
              DB_CUDA_LAUNCH();
              g();
              DB_CUDA(cudaEventRecord(e1, main_s));
              join_side();
              DB_CUDA(cudaStreamSynchronize(main_s));
              float t = 0;
              DB_CUDA(cudaEventElapsedTime(&t, e0, e1));
              best_t = std::min(best_t, t);
              unsigned long long bits[4];
              DB_CUDA(cudaMemcpy(bits, d_bits, sizeof bits, cudaMemcpyDeviceToHost));
              nsm = 0;
              for (int i = 0; i < 4; ++i) nsm += __builtin_popcountll(bits[i]);
              DB_CUDA(cudaEventDestroy(e0));
              DB_CUDA(cudaEventDestroy(e1));
            }
            std::printf("spin %s carveout, %3d threads x 12 regs on %d SMs for %.0f us, then GEMM %s (alone %.1f us): "
                        "GEMM ended at %.1f us -> %s\n",
                        tag ? "max-shared" : "default   ", block, nsm, ns / 1e3,
                        which_gemm == 0 ? "A" : which_gemm == 1 ? "B" : "cuBLASLt", tg_alone, best_t * 1e3,
                        best_t * 1e3 < 2 * tg_alone ? "CO-RESIDENT" : "waited for the spinner");
          }
    }

    DB_CUDA(cudaFree(mask));
    DB_CUDA(cudaFree(mask_ref));
    DB_CUDA(cudaFree(y_own));
  }
  std::printf("\ncsv: shape,A,A_us,A_tflops,B,B_us,B_tflops,cublas_us,cublas_tflops,rng_static_us,rng_cores_alone_us,"
              "A_cores_us,hidden_A_cores_vs_own,hidden_A_cores_vs_cublas,best,best_us,hidden_best_vs_own,"
              "hidden_best_vs_cublas,cublas_serial_us,e2e_cublas_serial_over_best,strips_during_gemm_pct,rng_sms,"
              "masks_ok\n");
  for (auto& l : csv) std::printf("csv: %s\n", l.c_str());
  return 0;
}
