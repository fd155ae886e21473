// DB_CUDA / DB_CUBLAS throwers without fmt, for the nvcc-only builds of scripts/attention.sh and
// scripts/gemm_wgmma.sh (the CMake build links src/check.cpp instead).
#include <string>

#include "src/check.hpp"

namespace dropbench {

void throw_cuda_error(const char* what, int code, const char* code_name, const char* call, const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + what + " error " + std::to_string(code) + " (" +
                  code_name + ") in `" + call + "`");
}

void check_cublas(int status, const char* call, const char* file, int line) {
  if (status != 0) throw_cuda_error("cuBLAS", status, "status", call, file, line);
}

}  // namespace dropbench
