// The utility kernels the other GPU tests and the runners' checks stand on (kernels/util/util_kernels.cuh), each
// against a host computation on fresh random buffers: the word-difference count behind every "bitwise equal" check of
// the pipelines and the training step, the poison count behind "every element written", the order-independent
// checksum, the keep count, and poisoning itself. A count that returned 0 whatever its input would make those checks
// pass without checking anything: here every count is also asked for a known nonzero answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_guard.hpp"
#include "kernels/util/util_kernels.cuh"
#include "test_random.hpp"

#include "dev_buf.hpp"

namespace {

using dropbench::test::DevBuf;

uint64_t host_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// launch_checksum's definition, restated: the sum mod 2^64 of mix64(word ^ golden * (index + 1)) over the
// little-endian 8-byte words, a shorter tail zero-padded as one more word.
uint64_t host_checksum(const std::vector<unsigned char>& b) {
  const size_t words = b.size() / 8;
  uint64_t sum = 0;
  for (size_t i = 0; i <= words; ++i) {
    const size_t n = i < words ? 8 : b.size() % 8;
    if (n == 0) break;
    uint64_t w = 0;
    for (size_t k = 0; k < n; ++k) w |= static_cast<uint64_t>(b[8 * i + k]) << (8 * k);
    sum += host_mix64(w ^ (0x9E3779B97F4A7C15ull * (i + 1)));
  }
  return sum;
}

// Words (4 bytes) in which a and b differ, and one more if their partial last words differ.
uint64_t host_count_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  uint64_t n = 0;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) n += std::memcmp(&a[i], &b[i], 4) != 0;
  const size_t tail = a.size() % 4;
  if (tail) n += std::memcmp(&a[a.size() - tail], &b[a.size() - tail], tail) != 0;
  return n;
}

std::vector<unsigned char> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<unsigned char> v(n);
  for (auto& c : v) c = static_cast<unsigned char>(rng());
  return v;
}

unsigned long long run_count_diff(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                                  unsigned long long start) {
  DevBuf<unsigned char> da(a.size()), db(b.size());
  DevBuf<unsigned long long> cnt(1);
  da.put(a);
  db.put(b);
  cnt.put({start});
  dropbench::launch_count_diff(da.p, db.p, a.size(), cnt.p, nullptr);
  return cnt.get()[0];
}

// Sizes around the kernels' edges: shorter than a word, partial words, one block of 256 words, more than 2048 blocks'
// worth (the grid-stride loop).
const size_t kSizes[] = {1, 3, 4, 7, 8, 13, 1024, 1027, 4096 + 2, (size_t(2048) * 256 * 4) * 3 + 5};

}  // namespace

// The count of differing words equals the host's, on random pairs with a random number of changed words (none, one,
// many), the changes at random places including the partial last word; the count adds to what *count held.
TEST(UtilGpu, CountDiffMatchesHost) {
  DB_REQUIRE_GPU();
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (size_t bytes : kSizes) {
    const std::vector<unsigned char> a = random_bytes(bytes, rng);
    for (size_t changes : {size_t(0), size_t(1), size_t(3), bytes / 5 + 1}) {
      std::vector<unsigned char> b = a;
      for (size_t k = 0; k < changes; ++k) b[rng() % bytes] ^= static_cast<unsigned char>(1u << (rng() % 8));
      const uint64_t want = host_count_diff(a, b);
      EXPECT_EQ(run_count_diff(a, b, 0), want) << bytes << " bytes, " << changes << " changes, seed " << seed;
      EXPECT_EQ(run_count_diff(a, b, 5), want + 5) << bytes << " bytes: the count adds to *count, seed " << seed;
    }
    // One changed bit in the last byte: the partial word (or the last whole word) counts once.
    std::vector<unsigned char> b = a;
    b.back() ^= 0x80;
    EXPECT_EQ(run_count_diff(a, b, 0), 1u) << bytes << " bytes, last byte changed, seed " << seed;
  }
}

// The count of words equal to a pattern (the runners' "unwritten" check) equals the host's; bytes of a partial
// last word are not counted.
TEST(UtilGpu, CountWordMatchesHost) {
  DB_REQUIRE_GPU();
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  const uint32_t pattern = 0xFFFFFFFFu;
  for (size_t bytes : kSizes) {
    std::vector<unsigned char> a = random_bytes(bytes, rng);
    const size_t words = bytes / 4;
    for (size_t k = 0; words && k < words / 7 + 2; ++k) std::memcpy(&a[4 * (rng() % words)], &pattern, 4);
    if (bytes % 4) std::memset(&a[4 * words], 0xFF, bytes % 4);  // a partial word of the pattern: not a word
    uint64_t want = 0;
    for (size_t i = 0; i < words; ++i) want += std::memcmp(&a[4 * i], &pattern, 4) == 0;
    DevBuf<unsigned char> d(bytes);
    DevBuf<unsigned long long> cnt(1);
    d.put(a);
    cnt.put({0});
    dropbench::launch_count_word(d.p, bytes, pattern, cnt.p, nullptr);
    EXPECT_EQ(cnt.get()[0], want) << bytes << " bytes, seed " << seed;
    if (words) EXPECT_GT(want, 0u);
  }
}

// The checksum equals its definition computed on the host, and one changed bit, or two different words swapped,
// changes it (the sum is order-independent over places, not over contents: the index enters each term).
TEST(UtilGpu, ChecksumMatchesHost) {
  DB_REQUIRE_GPU();
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (size_t bytes : kSizes) {
    const std::vector<unsigned char> a = random_bytes(bytes, rng);
    DevBuf<unsigned char> d(bytes);
    DevBuf<unsigned long long> out(1);
    auto device_sum = [&](const std::vector<unsigned char>& v) {
      d.put(v);
      out.put({0x1234u});  // overwritten, not added to
      dropbench::launch_checksum(d.p, bytes, out.p, nullptr);
      return out.get()[0];
    };
    const uint64_t sa = device_sum(a);
    EXPECT_EQ(sa, host_checksum(a)) << bytes << " bytes, seed " << seed;
    std::vector<unsigned char> b = a;
    b[rng() % bytes] ^= static_cast<unsigned char>(1u << (rng() % 8));
    EXPECT_NE(device_sum(b), sa) << bytes << " bytes, one bit changed, seed " << seed;
    if (bytes >= 16) {
      std::vector<unsigned char> c = a;
      std::swap_ranges(c.begin(), c.begin() + 8, c.begin() + 8);
      if (std::memcmp(&a[0], &a[8], 8) != 0) EXPECT_NE(device_sum(c), sa) << bytes << " bytes, words swapped";
    }
  }
}

// The keep count of each mask layout (bits of words, nonzero bytes, nonzero int32) equals the host's.
TEST(UtilGpu, CountKeepMatchesHost) {
  DB_REQUIRE_GPU();
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (uint64_t n : {uint64_t(1), uint64_t(1000), uint64_t(1) << 20}) {
    std::vector<uint32_t> words(n);
    std::vector<uint8_t> bytes(n);
    std::vector<int32_t> ints(n);
    uint64_t bits = 0, nzb = 0, nzi = 0;
    for (uint64_t i = 0; i < n; ++i) {
      words[i] = static_cast<uint32_t>(rng());
      bytes[i] = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng());
      ints[i] = rng() % 4 == 0 ? 0 : static_cast<int32_t>(rng());
      bits += static_cast<uint64_t>(__builtin_popcount(words[i]));
      nzb += bytes[i] != 0;
      nzi += ints[i] != 0;
    }
    DevBuf<uint32_t> dw(n);
    DevBuf<uint8_t> dbt(n);
    DevBuf<int32_t> di(n);
    DevBuf<unsigned long long> cnt(1);
    dw.put(words);
    dbt.put(bytes);
    di.put(ints);
    const void* ptrs[] = {dw.p, dbt.p, di.p};
    const uint64_t want[] = {bits, nzb, nzi};
    for (int kind = 0; kind < 3; ++kind) {
      cnt.put({0});
      dropbench::launch_count_keep(ptrs[kind], n, kind, cnt.p, nullptr);
      EXPECT_EQ(cnt.get()[0], want[kind]) << "kind " << kind << ", n " << n << ", seed " << seed;
    }
  }
}

// Poisoning writes the pattern's bytes (little-endian, by the byte's place in its word) to every byte asked for, a
// partial last word included, and not one byte more.
TEST(UtilGpu, PoisonWritesExactlyTheBytes) {
  DB_REQUIRE_GPU();
  const uint32_t pattern = 0xA1B2C3D4u;
  for (size_t bytes : kSizes) {
    DevBuf<unsigned char> d(bytes + 8);
    DB_CUDA(cudaMemset(d.p, 0x5A, bytes + 8));
    dropbench::launch_poison(d.p, bytes, pattern, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const std::vector<unsigned char> h = d.get();
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += h[i] != static_cast<unsigned char>(pattern >> (8 * (i % 4)));
    EXPECT_EQ(bad, 0u) << bytes << " bytes";
    for (size_t i = bytes; i < bytes + 8; ++i) EXPECT_EQ(h[i], 0x5A) << bytes << " bytes: byte " << i << " written";
  }
}
