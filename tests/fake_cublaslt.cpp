// A stand-in libcublasLt of another major version (12.9.0), for the loader's refusal test.
#include <cstddef>

extern "C" size_t cublasLtGetVersion() { return 120900; }
