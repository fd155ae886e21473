// The Hopper-native attention forward kernel and its dispatch rules (kernels/attention/wgmma/: the kernel split
// by concern, kernel.cuh composing it). Included by attention_wgmma.cu and by the tests that launch instances.
#pragma once
#include "kernels/attention/wgmma/dispatch.cuh"
#include "kernels/attention/wgmma/kernel.cuh"
