// cuBLASLt loaded on first use (kernels/gemm/cublaslt_loader.cpp): the process starts without the library, the
// first call maps it, and the calls that need no GPU (version, status names, descriptors, preferences) reach the
// library's own functions. The GPU ones (handle, heuristic, matmul) are test_gemm_gpu's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

#include <cublasLt.h>

#include "kernels/gemm/gemm.cuh"

namespace {

bool cublaslt_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcublasLt") != std::string::npos) return true;
  return false;
}

// First in the file: run alone (as ctest runs each test) or first of the whole binary, nothing has called cuBLASLt.
TEST(CublasLtLoader, LoadedOnFirstCallOnly) {
  EXPECT_FALSE(cublaslt_mapped()) << "libcublasLt is mapped before any call: linked again?";
  EXPECT_GT(cublasLtGetVersion(), 0u);
  EXPECT_TRUE(cublaslt_mapped());
}

TEST(CublasLtLoader, VersionAndStatusNamesAreTheLibrarys) {
  EXPECT_EQ(cublasLtGetVersion() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  EXPECT_EQ(dropbench::QkvGemm::cublaslt_version_string().rfind(std::to_string(CUBLAS_VER_MAJOR) + ".", 0), 0u)
      << dropbench::QkvGemm::cublaslt_version_string();
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
}

TEST(CublasLtLoader, DescriptorsLayoutsAndPreferencesRoundTrip) {
  cublasLtMatmulDesc_t op = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  ASSERT_NE(op, nullptr);
  const cublasOperation_t t = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
  // A wrong size is the library's own refusal, not a loader's.
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, 1), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayout_t a = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 128, 64, 128), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a, nullptr);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const size_t ws = 32u << 20;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(op), CUBLAS_STATUS_SUCCESS);
}

// Another major version is refused with the reason, and every call then fails cleanly: checked in a child process
// (the loader decides once per process) that this test starts with DROPBENCH_CUBLASLT naming a fake 12.9 library.
TEST(CublasLtLoader, AnotherMajorVersionIsRefusedWithTheReason) {
  if (std::getenv("DROPBENCH_LOADER_CHILD")) {
    EXPECT_EQ(cublasLtGetVersion(), 0u);
    EXPECT_EQ(dropbench::QkvGemm::cublaslt_version_string(), "unavailable");
    cublasLtHandle_t h = nullptr;
    EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_NOT_INITIALIZED);
    const std::string why = cublasLtGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_NE(why.find("libcublasLt 120900 is not major version"), std::string::npos) << why;
    EXPECT_FALSE(cublaslt_mapped());
    return;
  }
  const std::string cmd = std::string("DROPBENCH_LOADER_CHILD=1 DROPBENCH_CUBLASLT='") + FAKE_CUBLASLT_PATH +
                          "' /proc/" + std::to_string(getpid()) +
                          "/exe --gtest_filter=CublasLtLoader.AnotherMajorVersionIsRefusedWithTheReason > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
