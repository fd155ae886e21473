// Host side of the Hopper-native attention kernel (attention_wgmma.cu): what launch_attention calls when the
// selected kernel family is AttentionKernel::Wgmma. Parameters are validated by launch_attention first.
#pragma once
#include <string>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"

namespace dropbench {
namespace attn_wg {

// Whether the wgmma kernel can run p on the current device: compute capability 9.0 and head_dim 64 or 128.
bool supported(const AttentionParams& p);
// Whether the current device is an sm_90 part (the only one the sm_90a image runs on).
bool device_is_sm90();
void launch(const AttentionParams& p, DropoutMode mode, cudaStream_t stream);
std::string kernel_name(const AttentionParams& p, DropoutMode mode);
AttentionKernelInfo kernel_info(const AttentionParams& p, DropoutMode mode);

// The two tensor maps the launcher builds over p's QKV buffer (Q boxes of q_rows rows, K/V boxes of kv_rows), for
// launching an instance of attention_wgmma_kernel.cuh directly (the tests' comparison of schedules).
void encode_tensor_maps(const AttentionParams& p, int q_rows, int kv_rows, CUtensorMap* tm_q, CUtensorMap* tm_kv);

}  // namespace attn_wg
}  // namespace dropbench
