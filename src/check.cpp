#include "check.hpp"

#include <cublasLt.h>
#include <fmt/format.h>

namespace dropbench {

void throw_cuda_error(const char* what, int code, const char* code_name, const char* call, const char* file,
                      int line) {
  throw CudaError(fmt::format("{}:{}: {} error {} ({}) in `{}`", file, line, what, code, code_name, call));
}

void check_cublas(int status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* name = cublasLtGetStatusName(static_cast<cublasStatus_t>(status));
  throw_cuda_error("cuBLAS", status, name ? name : "?", call, file, line);
}

}  // namespace dropbench
