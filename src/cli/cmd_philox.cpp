// `dropbench philox`: the host Philox4x32-R, so users can check their own implementation against ours.
#include <cstdio>

#include <fmt/format.h>

#include "kernels/common/check.hpp"
#include "src/cli/cli.hpp"
#include "kernels/rng/philox.cuh"

namespace dropbench {

Command make_philox_command() {
  struct Opts {
    int rounds = 10;
    std::vector<std::string> counter{"0", "0", "0", "0"};
    std::vector<std::string> key{"0", "0"};
  };
  auto o = std::make_shared<Opts>();
  Command c;
  c.name = "philox";
  c.summary = "Print Philox4x32-R(counter, key) in hex (host implementation)";
  c.help =
      "Example (Random123's known answer for R=7):\n"
      "  dropbench philox --rounds 7 --counter 0 0 0 0 --key 0 0\n"
      "  -> 5f6fb709 0d893f64 4f121f81 4f730a48\n"
      "Words are 32-bit, decimal or 0x-prefixed hex. The key is bumped by the Weyl constants\n"
      "(0x9E3779B9, 0xBB67AE85) between rounds; multipliers 0xD2511F53, 0xCD9E8D57.";
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    app.add_option("-r,--rounds", o->rounds, "Rounds R (1..16)")->check(CLI::Range(1, 16));
    app.add_option("-c,--counter", o->counter, "Four 32-bit counter words c0 c1 c2 c3")->expected(4);
    app.add_option("-k,--key", o->key, "Two 32-bit key words k0 k1")->expected(2);
  };
  c.run = [o](RunContext&) {
    auto word = [](const std::string& s, const char* field) -> uint32_t {
      try {
        size_t pos = 0;
        const unsigned long long v = std::stoull(s, &pos, 0);
        if (pos != s.size() || v > 0xFFFFFFFFull) throw std::out_of_range(s);
        return static_cast<uint32_t>(v);
      } catch (const std::exception&) {
        throw UsageError(fmt::format("{}: '{}' is not a 32-bit word (allowed: 0..4294967295 or 0x0..0xffffffff)", field, s));
      }
    };
    const u32x4 ctr{word(o->counter[0], "--counter"), word(o->counter[1], "--counter"), word(o->counter[2], "--counter"),
                    word(o->counter[3], "--counter")};
    const u32x4 r = philox4x32_rt(o->rounds, ctr, word(o->key[0], "--key"), word(o->key[1], "--key"));
    std::printf("%08x %08x %08x %08x\n", r.x, r.y, r.z, r.w);
    return 0;
  };
  return c;
}

}  // namespace dropbench
