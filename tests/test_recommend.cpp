// recommend's ranking (src/model/recommend.{hpp,cpp}) as a library, on the hand-made fixtures of
// tests/fixtures/model/: order, ties, the reference round count, the co-resident what-if, the reference
// machine (ignored when it is the same machine) and the regions.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kernels/common/dispatch.cuh"
#include "model_fixtures.hpp"
#include "src/model/model_report.hpp"
#include "src/model/recommend.hpp"

using namespace dropbench;
using namespace dropbench::model;

namespace {

constexpr double kUs = 1e-6;

Machine tiny() { return dropbench_test::tiny_machine(); }
using dropbench_test::tiny_profile;

// B 1, 1 query / 1 KV head, dH 128, SQ 1024, E 1024, non-causal, fp8, 8-bit thresholds (test_model.cpp's w0).
Workload shape() { return dropbench_test::tiny_workload(builtin_config().workload); }

}  // namespace

TEST(Recommend, RanksEveryPipelineAtEveryRoundCount) {
  const Machine m = tiny();
  const Recommendation rec = recommend(m, tiny_profile(), shape(), {std::begin(kPhiloxRounds), std::end(kPhiloxRounds)}, {}, nullptr);
  ASSERT_EQ(rec.ranking.size(), 16u);
  for (size_t i = 1; i < rec.ranking.size(); ++i) EXPECT_LE(rec.ranking[i - 1].seconds, rec.ranking[i].seconds);
  // Fused Philox-3: 49.152 + (680 x 512 / 8e9 + 131.072 us) = 223.744 us.
  EXPECT_EQ(rec.ranking[0].pipeline, "fused");
  EXPECT_EQ(rec.ranking[0].rounds, 3);
  EXPECT_NEAR(rec.ranking[0].seconds, 223.744 * kUs, 1e-12);
  EXPECT_EQ(rec.reference_rounds, 7);
  EXPECT_NEAR(rec.rng_over_gemm, 25.6 / 49.152, 1e-9);
  EXPECT_EQ(region_of(rec.rng_over_gemm), "RNG <~ GEMM");
  ASSERT_NE(rec.best_clean(), nullptr);
  EXPECT_GE(rec.best_clean()->rounds, 5);
  EXPECT_TRUE(rec.ranks(3));
  EXPECT_FALSE(rec.reference);  // none given
  // The what-if: a co-resident RNG vanishes under the GEMM (overlap = GEMM + attention(mask)).
  ASSERT_TRUE(rec.coresident);
  EXPECT_NEAR(rec.coresident->overlap.seconds, (49.152 + 169.472) * kUs, 1e-12);
  EXPECT_NEAR(rec.coresident->saved_seconds,
              rec.at_reference_rounds().pipeline("baseline")->seconds - rec.coresident->overlap.seconds, 1e-15);
}

TEST(Recommend, ReferenceRoundsAndCoresidentOption) {
  Options o;
  o.residency = "coresident";
  const Recommendation rec = recommend(tiny(), tiny_profile(), shape(), {5, 10}, o, nullptr);
  EXPECT_EQ(rec.reference_rounds, 10);  // no 7 asked: the last one
  EXPECT_FALSE(rec.coresident);         // already co-resident: no what-if
  EXPECT_FALSE(rec.ranks(3));
  EXPECT_EQ(rec.ranking[0].pipeline, "overlap");
}

TEST(Recommend, ReferenceMachine) {
  const Machine m = tiny();
  const Profile p = tiny_profile();
  EXPECT_FALSE(recommend(m, p, shape(), {7}, {}, &m).reference);  // the same machine: nothing to compare
  Machine other = m;
  other.name = "tiny-other";
  const Recommendation rec = recommend(m, p, shape(), {3, 7}, {}, &other);
  ASSERT_TRUE(rec.reference);
  EXPECT_EQ(rec.reference->name, "tiny-other");
  ASSERT_EQ(rec.reference->rng_share_of_baseline.size(), 2u);
  // Same rates under another name: the same shares.
  EXPECT_DOUBLE_EQ(rec.reference->rng_share_of_baseline.at(7), rng_share_of_baseline(rec.predictions.at(7)));
  EXPECT_DOUBLE_EQ(rec.reference->rng_share_of_gemm_rng, rng_share_of_gemm_rng(rec.predictions.at(7)));
}

TEST(Recommend, Regions) {
  EXPECT_EQ(region_of(0.49), "GEMM >> RNG");
  EXPECT_EQ(region_of(0.5), "RNG <~ GEMM");
  EXPECT_EQ(region_of(1.0), "RNG <~ GEMM");
  EXPECT_EQ(region_of(1.01), "RNG > GEMM");
}

// Ranking by energy: energy = dynamic energy of the kernels + static power x time. On the power
// fixture the fused pipeline is the fastest but costs the most energy; without power data nothing is ranked.
TEST(Recommend, RanksByEnergyAndSaysWhenItDiffers) {
  const Machine m = tiny();
  const Recommendation plain = recommend(m, tiny_profile(), shape(), {7}, {}, nullptr);
  EXPECT_TRUE(plain.energy_ranking.empty());
  EXPECT_FALSE(plain.energy_differs);
  for (const RankedEntry& e : plain.ranking) EXPECT_LT(e.energy_j, 0);

  const PowerFits f = fit_power(m, tiny_profile(), {load_measured_report(dropbench_test::kModelFixtures + "report_run_power.json")});
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(dropbench_test::kModelFixtures + "profile.json"));
  j["power"] = power_json(f);
  const Profile pp = profile_from_json(j, "tiny+power");
  const Recommendation rec = recommend(m, pp, shape(), {7}, {}, nullptr);
  ASSERT_EQ(rec.energy_ranking.size(), 4u);  // every pipeline's kernels have power data at R 7
  EXPECT_EQ(rec.ranking.front().pipeline, "fused");
  // baseline: 200 W x 49.152 + 100 W x 25.6 + 150 W x 169.472 us dynamic + 100 W x 244.224 us static.
  const RankedEntry* base = nullptr;
  for (const RankedEntry& e : rec.energy_ranking)
    if (e.pipeline == "baseline") base = &e;
  ASSERT_NE(base, nullptr);
  EXPECT_NEAR(base->energy_j, (200 * 49.152 + 100 * 25.6 + 150 * 169.472 + 100 * 244.224) * 1e-6, 1e-12);
  EXPECT_NE(rec.energy_ranking.front().pipeline, "fused");
  for (size_t i = 1; i < rec.energy_ranking.size(); ++i)
    EXPECT_LE(rec.energy_ranking[i - 1].energy_j, rec.energy_ranking[i].energy_j);
  EXPECT_TRUE(rec.energy_best_differs);
  EXPECT_TRUE(rec.energy_differs);
  // The co-resident what-if respects the energy bound: at most 50 % of the RNG hides.
  ASSERT_TRUE(rec.coresident);
  EXPECT_NEAR(rec.coresident->max_hidden, 0.5, 1e-9);
  EXPECT_NEAR(rec.coresident->overlap.seconds, (61.952 + 169.472) * kUs, 1e-12);
}
