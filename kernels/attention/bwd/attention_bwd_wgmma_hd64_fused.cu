// Attention backward, Hopper-native kernel (wgmma/kernel.cuh), head_dim 64: mode fused (keep bits regenerated;
// every Philox round count and threshold width of dispatch.cuh, chosen at run time inside the kernel).
#include "kernels/attention/bwd/wgmma/kernel.cuh"

DB_ATTN_BWD_WGMMA_INSTANCE(64, dropbench::DropoutMode::Fused)
