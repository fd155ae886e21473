// The cuBLASLt entry points the GEMM family calls, loaded on first use. A process that links libcublasLt (540 MB)
// faults in about 200 MB of it before main (0.15 s), whether or not it multiplies a matrix: `dropbench --help`,
// model, recommend, compare, merge, every test process. These definitions have the library's own signatures
// (cublasLt.h), so the callers are unchanged; each resolves its symbol once, and is hidden (a shared library built
// from this one must not take over another cuBLASLt user's calls in its process). Without the library, or with
// another major version, a call returns CUBLAS_STATUS_NOT_INITIALIZED (cublasLtGetVersion 0) and
// cublasLtGetStatusName says why, so DB_CUBLAS's message names the cause.
#include <cstdlib>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "kernels/common/dl.hpp"

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

// Loaded once and never unloaded (nor destroyed: a status name may be asked for during exit).
const Library& library() {
  static const Library* lib = [] {
    auto* l = new Library;
    std::vector<std::string> names;
    if (const char* env = std::getenv("DROPBENCH_CUBLASLT")) names.push_back(env);
#ifdef DROPBENCH_CUBLASLT_LIB
    names.push_back(DROPBENCH_CUBLASLT_LIB);  // the toolkit's library found at build time
#endif
    names.push_back("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
    std::string tried;
    void* h = dropbench::dlopen_first(names, &tried);
    if (!h) {
      l->error = "libcublasLt not found (tried " + tried + "; set DROPBENCH_CUBLASLT=/path/to/it)";
      return l;
    }
    // The enums and structs passed to it are this header's: another major version is refused.
    using Version = size_t (*)();
    const auto version = reinterpret_cast<Version>(dlsym(h, "cublasLtGetVersion"));
    const size_t v = version ? version() : 0;
    if (v / 10000 != CUBLAS_VER_MAJOR) {
      l->error = "libcublasLt " + std::to_string(v) + " is not major version " + std::to_string(CUBLAS_VER_MAJOR) +
                 " (the headers dropbench was built with); set DROPBENCH_CUBLASLT=/path/to/libcublasLt.so." +
                 std::to_string(CUBLAS_VER_MAJOR);
      dlclose(h);
      return l;
    }
    l->handle = h;
    return l;
  }();
  return *lib;
}

template <class F>
F resolve(const char* name) {
  const Library& lib = library();
  return lib.handle ? reinterpret_cast<F>(dlsym(lib.handle, name)) : nullptr;
}

}  // namespace

#define DB_LT_HIDDEN __attribute__((visibility("hidden")))
// DB_LT(return type, name, (parameters), (arguments), value without the library)
#define DB_LT(R, NAME, PARAMS, ARGS, MISSING)              \
  extern "C" DB_LT_HIDDEN R CUBLASWINAPI NAME PARAMS {     \
    using Fn = R(CUBLASWINAPI*) PARAMS;                    \
    static const Fn fn = resolve<Fn>(#NAME);               \
    return fn ? fn ARGS : MISSING;                         \
  }
#define DB_LT_STATUS(NAME, PARAMS, ARGS) DB_LT(cublasStatus_t, NAME, PARAMS, ARGS, CUBLAS_STATUS_NOT_INITIALIZED)

DB_LT(size_t, cublasLtGetVersion, (void), (), 0)
DB_LT_STATUS(cublasLtCreate, (cublasLtHandle_t* h), (h))
DB_LT_STATUS(cublasLtDestroy, (cublasLtHandle_t h), (h))
DB_LT_STATUS(cublasLtMatmulDescCreate, (cublasLtMatmulDesc_t* d, cublasComputeType_t c, cudaDataType_t s), (d, c, s))
DB_LT_STATUS(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))
DB_LT_STATUS(cublasLtMatmulDescSetAttribute,
             (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* buf, size_t n), (d, a, buf, n))
DB_LT_STATUS(cublasLtMatrixLayoutCreate, (cublasLtMatrixLayout_t* l, cudaDataType t, uint64_t r, uint64_t c, int64_t ld),
             (l, t, r, c, ld))
DB_LT_STATUS(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))
DB_LT_STATUS(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t* p), (p))
DB_LT_STATUS(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))
DB_LT_STATUS(cublasLtMatmulPreferenceSetAttribute,
             (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* buf, size_t n),
             (p, a, buf, n))
DB_LT_STATUS(cublasLtMatmulAlgoGetHeuristic,
             (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int want,
              cublasLtMatmulHeuristicResult_t results[], int* got),
             (h, op, a, b, c, d, pref, want, results, got))
DB_LT_STATUS(cublasLtMatmulAlgoConfigGetAttribute,
             (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t a, void* buf, size_t n,
              size_t* written),
             (algo, a, buf, n, written))
DB_LT_STATUS(cublasLtMatmul,
             (cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A, cublasLtMatrixLayout_t a,
              const void* B, cublasLtMatrixLayout_t b, const void* beta, const void* C, cublasLtMatrixLayout_t c,
              void* D, cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo, void* ws, size_t ws_bytes,
              cudaStream_t stream),
             (h, op, alpha, A, a, B, b, beta, C, c, D, d, algo, ws, ws_bytes, stream))

// The library's own name for a status, or, without the library, why it is missing.
DB_LT(const char*, cublasLtGetStatusName, (cublasStatus_t status), (status), library().error.c_str())
