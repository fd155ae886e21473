// nvtx_probe: pushes a known tree of NVTX ranges, the way dropbench does (dropbench::NvtxRange: domain
// "dropbench", registered strings, push/pop), plus a few default-domain and ASCII ranges, so that
// test_nvtx can check that nvtx_recorder sees exactly this tree. Keep kExpected in test_nvtx.cpp in sync.
//
// Ranges pushed (domain: tree):
//   dropbench:   rng > point sq=256 > variant x > gen, apply
//                    > point sq=512 > variant x > gen, apply
//                probe ascii                      (ASCII message, nvtx3::scoped_range_in)
//   "" (default): probe main > probe ex > <unsupported>      (nvtxRangePushA, nvtxRangePushEx, nvtxRangePushW)
//   probe-thread: tick x kTicks                    (pushed from a second thread, concurrently)
#include <nvtx3/nvtx3.hpp>

#include <string>
#include <thread>

#include "src/core/nvtx.hpp"

namespace {

struct probe_thread_domain {
  static constexpr char const* name{"probe-thread"};
};

constexpr int kTicks = 200;

void dropbench_like_tree() {
  dropbench::NvtxRange cmd("rng");
  for (int sq : {256, 512}) {
    dropbench::NvtxRange point("point sq=" + std::to_string(sq));
    dropbench::NvtxRange variant("variant x");
    { dropbench::NvtxRange phase("gen"); }
    { dropbench::NvtxRange phase("apply"); }
  }
}

}  // namespace

int main() {
  // The second thread runs concurrently with the main thread's ranges: one log, interleaved lines, but
  // each domain's own sequence stays balanced.
  std::thread ticker([] {
    nvtx3::registered_string_in<probe_thread_domain> tick{"tick"};
    for (int i = 0; i < kTicks; ++i) {
      nvtx3::scoped_range_in<probe_thread_domain> r{tick};
    }
  });

  nvtxRangePushA("probe main");
  {
    nvtxEventAttributes_t attr{};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "probe ex";
    nvtxRangePushEx(&attr);
    nvtxRangePushW(L"wide");
    nvtxRangePop();
    nvtxRangePop();
  }
  nvtxRangePop();

  dropbench_like_tree();
  { nvtx3::scoped_range_in<dropbench::nvtx_domain> r{"probe ascii"}; }

  ticker.join();
  return 0;
}
