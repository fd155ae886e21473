// Attention backward, Hopper-native kernel (wgmma/kernel.cuh), head_dim 64: modes none and mask.
#include "kernels/attention/bwd/wgmma/kernel.cuh"

DB_ATTN_BWD_WGMMA_INSTANCE(64, dropbench::DropoutMode::None)
DB_ATTN_BWD_WGMMA_INSTANCE(64, dropbench::DropoutMode::Mask)
