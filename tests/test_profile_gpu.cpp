// `dropbench profile --kernels rng` under Nsight Compute on a GPU: every kernel it lists has a demand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_runner.hpp"
#include "gpu_guard.hpp"
#include "model.hpp"
#include "profile.hpp"

using namespace dropbench;
namespace fs = std::filesystem;

TEST(ProfileGpu, RngUnderNcu) {
  DB_REQUIRE_GPU();
  if (std::system("command -v ncu >/dev/null 2>&1") != 0) GTEST_SKIP() << "ncu (Nsight Compute) not on PATH";
  const fs::path out = fs::temp_directory_path() / "dropbench_profile_gpu.json";
  const auto r = dropbench_test::run_dropbench("profile --kernels rng --out '" + out.string() + "'");
  std::cout << r.out << r.err;
  if (r.err.find("ERR_NVGPUCTRPERM") != std::string::npos) GTEST_SKIP() << "ncu cannot read the counters here";
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(out);
  const json prof = json::parse(f);
  EXPECT_EQ(prof["collected"]["path"], "ncu") << prof["collected"].dump();
  EXPECT_NO_THROW(model::load_profile(out.string()));
  for (const std::string& k : profile::kernel_keys(profile::parse_kernels("rng"))) {
    SCOPED_TRACE(k);
    EXPECT_NE(r.out.find("| " + k), std::string::npos);
    ASSERT_TRUE(prof["sass"].contains(k));
    const json& n = prof["sass"][k]["ncu"];
    ASSERT_TRUE(n.is_object());
    ASSERT_FALSE(n["demand"].empty());
    EXPECT_GT(n["demand"].value("inst", 0.0), 0);
    const auto d = profile::table_demand(prof, k);
    EXPECT_FALSE(d.empty());
  }
  fs::remove(out);
}
