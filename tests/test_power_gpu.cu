// GPU: the PowerSampler on a spin kernel of known length (every SM busy with FMA chains for 1.5 s, timed by
// %globaltimer): the window's energy is positive and agrees with the mean instantaneous power times its length
// within 20 %, its length is the host time around the kernel, it holds readings, and it draws more than an idle
// window before it. Skips without a GPU, and without NVML (the sampler says why).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gpu_guard.hpp"
#include "kernels/common/check.hpp"
#include "kernels/common/ptx.cuh"
#include "src/core/device_buffer.hpp"
#include "src/core/power.hpp"

using namespace dropbench;

namespace {

using dropbench::ptx::globaltimer_ns;

// Each thread runs four independent FMA chains until `ns` have passed since it started; all blocks are resident
// at once (the grid is one wave), so the kernel lasts ~ns. elapsed[0]: block 0's own measure of that.
__global__ void power_spin(unsigned long long ns, float* sink, unsigned long long* elapsed) {
  const unsigned long long t0 = globaltimer_ns();
  float a = threadIdx.x * 1e-3f, b = a + 1.f, c = a + 2.f, d = a + 3.f;
  const float m = 0.999f, k = 1e-4f;
  while (globaltimer_ns() - t0 < ns) {
#pragma unroll
    for (int i = 0; i < 256; ++i) {
      a = fmaf(a, m, k);
      b = fmaf(b, m, k);
      c = fmaf(c, m, k);
      d = fmaf(d, m, k);
    }
  }
  if (a + b + c + d == -1.f) sink[blockIdx.x] = a;  // never true (the chains stay positive); keeps them alive
  if (threadIdx.x == 0 && blockIdx.x == 0) elapsed[0] = globaltimer_ns() - t0;
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

constexpr double kSpinSeconds = 1.5;

}  // namespace

TEST(PowerGpu, SpinKernelEnergy) {
  DB_REQUIRE_GPU();
  int dev = 0;
  DB_CUDA(cudaGetDevice(&dev));
  std::string why;
  auto sampler = PowerSampler::open(dev, &why);
  if (!sampler) GTEST_SKIP() << "power not measured here: " << why;

  int sms = 0;
  DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int blocks = sms * 4, threads = 256;  // 1024 threads per SM: one wave on any recent GPU
  DeviceBuffer sink(blocks * sizeof(float));
  DeviceBuffer elapsed(sizeof(unsigned long long));
  cudaEvent_t e0, e1;
  DB_CUDA(cudaEventCreate(&e0));
  DB_CUDA(cudaEventCreate(&e1));
  power_spin<<<blocks, threads>>>(10'000'000ull, sink.get<float>(), elapsed.get<unsigned long long>());  // warm-up
  DB_CUDA_LAUNCH();
  DB_CUDA(cudaDeviceSynchronize());

  sleep_s(0.5);  // the sampler learns the counter's update interval
  const double idle0 = PowerSampler::now();
  sleep_s(0.8);
  const double idle1 = PowerSampler::now();

  const double t0 = PowerSampler::now();
  DB_CUDA(cudaEventRecord(e0));
  power_spin<<<blocks, threads>>>(static_cast<unsigned long long>(kSpinSeconds * 1e9), sink.get<float>(),
                                  elapsed.get<unsigned long long>());
  DB_CUDA_LAUNCH();
  DB_CUDA(cudaEventRecord(e1));
  DB_CUDA(cudaDeviceSynchronize());
  const double t1 = PowerSampler::now();
  sleep_s(0.05);  // the sampler's last readings up to t1 land

  float event_ms = 0;
  DB_CUDA(cudaEventElapsedTime(&event_ms, e0, e1));
  unsigned long long spin_ns = 0;
  DB_CUDA(cudaMemcpy(&spin_ns, elapsed.get(), sizeof spin_ns, cudaMemcpyDeviceToHost));
  DB_CUDA(cudaEventDestroy(e0));
  DB_CUDA(cudaEventDestroy(e1));

  const PowerWindow w = sampler->window(t0, t1);
  const PowerWindow idle = sampler->window(idle0, idle1);
  const auto info = sampler->info();
  std::printf("power: %s, cap %.0f W; spin %.3f s (events %.3f s, host window %.3f s): %.1f J from the %s "
              "(%zu changes), mean %.1f W, instantaneous mean %.1f W, max %.1f W, SM %.0f MHz, capped %.2f, "
              "%zu readings; idle %.1f W; counter update %.1f ms, query %.2f ms\n",
              info["device"].get<std::string>().c_str(), sampler->cap_w(), spin_ns * 1e-9, event_ms * 1e-3,
              w.seconds, w.energy_j, w.energy_source.c_str(), w.counter_changes, w.mean_w, w.mean_instant_w,
              w.max_w, w.mean_sm_mhz, w.capped_share, w.readings, idle.mean_w,
              info["counter_update_interval_ms"].is_number() ? info["counter_update_interval_ms"].get<double>() : NAN,
              info["energy_query_ms"].is_number() ? info["energy_query_ms"].get<double>() : NAN);

  // The kernel ran as long as it was told, inside the host window.
  EXPECT_GE(spin_ns * 1e-9, kSpinSeconds);
  EXPECT_LT(spin_ns * 1e-9, kSpinSeconds + 0.05);
  ASSERT_TRUE(w.measured) << w.note;
  EXPECT_DOUBLE_EQ(w.seconds, t1 - t0);
  // The events lie inside [t0, t1]; they are timed by the GPU's clock, the window by the host's, hence the 1 ms.
  EXPECT_GT(w.seconds, event_ms * 1e-3 - 1e-3);
  EXPECT_LT(w.seconds - event_ms * 1e-3, 0.1);  // launch and synchronisation only

  if (info["energy_counter"].get<bool>()) {
    EXPECT_EQ(w.energy_source, "counter") << w.note;  // 1.5 s hold ~15 changes at the H200's 100 ms
  }
  EXPECT_GT(w.readings, 0u);
  EXPECT_GT(w.energy_j, 0.0);
  ASSERT_TRUE(std::isfinite(w.mean_instant_w));
  const double from_readings = w.mean_instant_w * w.seconds;
  EXPECT_NEAR(w.energy_j, from_readings, 0.2 * from_readings)
      << "counter " << w.energy_j << " J vs mean instantaneous power x time " << from_readings << " J";
  EXPECT_GT(w.mean_sm_mhz, 0.0);
  if (std::isfinite(sampler->cap_w())) EXPECT_LT(w.mean_w, 1.1 * sampler->cap_w());

  // Every SM busy draws more than the idle GPU did just before.
  ASSERT_TRUE(idle.measured) << idle.note;
  EXPECT_GT(w.mean_w, idle.mean_w);

  // 50 ms inside the spin hold at most one counter change (every ~100 ms): energy from the readings instead.
  const PowerWindow shortw = sampler->window(t0 + 0.6, t0 + 0.65);
  ASSERT_TRUE(shortw.measured) << shortw.note;
  EXPECT_EQ(shortw.energy_source, "instant");
  EXPECT_GT(shortw.energy_j, 0.0);
  EXPECT_GT(shortw.readings, 0u);
}
