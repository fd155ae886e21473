// `dropbench philox`: the host Philox4x32-R, so users can check their own implementation against ours.
#include <charconv>
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
      "Words are 32-bit hex, like the output; 0x is optional (10 is 0x10), so a line of Random123's\n"
      "kat_vectors pastes: --rounds 10 --counter 243f6a88 85a308d3 13198a2e 03707344 --key a4093822 299f31d0\n"
      "-> d16cfe09 94fdcceb 5001e420 24126ea1. The key is bumped by the Weyl constants\n"
      "(0x9E3779B9, 0xBB67AE85) between rounds; multipliers 0xD2511F53, 0xCD9E8D57.";
  c.sweeps = false;
  c.add_options = [o](CLI::App& app) {
    app.add_option("-r,--rounds", o->rounds, "Rounds R (1..16)")->check(CLI::Range(1, 16));
    app.add_option("-c,--counter", o->counter, "Four 32-bit counter words c0 c1 c2 c3, hex (0x optional)")->expected(4);
    app.add_option("-k,--key", o->key, "Two 32-bit key words k0 k1, hex (0x optional)")->expected(2);
  };
  c.run = [o](RunContext&) {
    // Hex always, as printed and as Random123's kat_vectors write them: read as decimal or octal (stoull
    // base 0), "03707344" gave a wrong answer without an error.
    auto word = [](const std::string& s, const char* field) -> uint32_t {
      const bool prefixed = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
      const std::string digits = prefixed ? s.substr(2) : s;
      uint32_t v = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 16);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        throw UsageError(fmt::format(
            "{}: '{}' is not a 32-bit hex word (allowed: 0..ffffffff, 0x optional, e.g. 243f6a88 or 0x243f6a88)",
            field, s));
      return v;
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
