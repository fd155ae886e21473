// Attention backward instances, head_dim 64: mode fused (regenerated keep bits), Philox-5, every threshold width.
#include "kernels/attention/bwd/attention_bwd_kernel.cuh"

DB_ATTN_BWD_FUSED_INSTANCES(64, 5)
