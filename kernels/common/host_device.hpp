// DB_HD: a function callable from host and device code (forceinline on the device), and a plain inline function
// where the header is compiled by a host-only compiler (.cpp files).
#pragma once

#if defined(__CUDACC__)
#define DB_HD __host__ __device__ __forceinline__
#else
#define DB_HD inline
#endif
