// Attention backward instances, head_dim 64: modes none and mask (attention_bwd_kernel.cuh).
#include "kernels/attention/bwd/attention_bwd_kernel.cuh"

DB_ATTN_BWD_INSTANCE(64, dropbench::DropoutMode::None, 7, 8)
DB_ATTN_BWD_INSTANCE(64, dropbench::DropoutMode::Mask, 7, 8)
