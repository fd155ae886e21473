// The throwers behind DB_CUDA / DB_CUBLAS. They live in the kernels library itself (plain std::string, no fmt,
// nothing from src/), so that anything linking dropbench_kernels alone links: the library has no link cycle
// with the host layers above it.
#include "kernels/common/check.hpp"

#include <string>

#include <cublasLt.h>

namespace dropbench {

void throw_cuda_error(const char* what, int code, const char* code_name, const char* call, const char* file,
                      int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + what + " error " + std::to_string(code) +
                  " (" + code_name + ") in `" + call + "`");
}

void check_cublas(int status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* name = cublasLtGetStatusName(static_cast<cublasStatus_t>(status));
  throw_cuda_error("cuBLAS", status, name ? name : "?", call, file, line);
}

void throw_unsupported_value(const char* what, const char* field, int got, const char* allowed) {
  throw UsageError(std::string(what) + ": " + field + " must be one of " + allowed + " (got " + std::to_string(got) +
                   ")");
}

}  // namespace dropbench
