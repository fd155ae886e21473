// Attention backward, Hopper-native kernel (wgmma/kernel.cuh), head_dim 128: modes none and mask.
#include "kernels/attention/bwd/wgmma/kernel.cuh"

DB_ATTN_BWD_WGMMA_INSTANCE(128, dropbench::DropoutMode::None)
DB_ATTN_BWD_WGMMA_INSTANCE(128, dropbench::DropoutMode::Mask)
