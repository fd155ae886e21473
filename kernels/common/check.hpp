// One idiom for every status check in dropbench, kernels and host layers alike: DB_CUDA(call), DB_CUBLAS(call)
// throw dropbench::CudaError carrying file:line and the failing call's text (implementation: check.cpp beside this,
// inside the kernels library). Bad user input throws dropbench::UsageError; main() turns it into one line on
// stderr and exit code 2.
#pragma once
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace dropbench {

// A CUDA/cuBLAS/driver failure: the run cannot continue (exit code 1).
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad user input (config field out of range, unknown key, no GPU where one is needed): exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown when the tool needs a GPU and there is none; also exit code 2, with a distinct message.
struct NoDeviceError : UsageError {
  using UsageError::UsageError;
};

[[noreturn]] void throw_cuda_error(const char* what, int code, const char* code_name, const char* call,
                                   const char* file, int line);

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda_error("CUDA", static_cast<int>(e), cudaGetErrorString(e), call, file, line);
}
void check_cublas(int status, const char* call, const char* file, int line);  // cublasStatus_t as int

// UsageError "<what>: <field> must be one of <allowed> (got <got>)". Out of line, so that kernel objects that
// report bad values carry no std::string code of their own (kernels/common/dispatch.cuh).
[[noreturn]] void throw_unsupported_value(const char* what, const char* field, int got, const char* allowed);

}  // namespace dropbench

#define DB_CUDA(call) ::dropbench::check_cuda((call), #call, __FILE__, __LINE__)
// After a kernel launch: catches launch-configuration errors without synchronising.
#define DB_CUDA_LAUNCH() ::dropbench::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
#define DB_CUBLAS(call) ::dropbench::check_cublas(static_cast<int>(call), #call, __FILE__, __LINE__)
