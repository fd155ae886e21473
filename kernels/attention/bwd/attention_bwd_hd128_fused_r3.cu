// Attention backward instances, head_dim 128: mode fused (regenerated keep bits), Philox-3, every threshold width.
#include "kernels/attention/bwd/attention_bwd_kernel.cuh"

DB_ATTN_BWD_FUSED_INSTANCES(128, 3)
