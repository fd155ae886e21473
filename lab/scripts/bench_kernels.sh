#!/usr/bin/env bash
# Issue-3 measurements on a GPU machine: `dropbench gemm` (cuBLASLt, fp8 and bf16, top-8 tuning) and
# `dropbench attention` (none / mask / rng+mask / fused) on configs/quick.json's Llama-3-8B-shaped block,
# plus the same-machine peers (torch._scaled_mm / matmul; SDPA flash and cuDNN) when PyTorch is present.
# Usage: scripts/bench_kernels.sh [BIN] [OUT_DIR]
set -euo pipefail
BIN="${1:-build/dropbench}"
OUT="${2:-results/h200}"
mkdir -p "$OUT"
# The peers' shapes: SQ 4K-16K x E 4K-16K, N = (32 + 2*8)*128 = 6144. Measured for 0.5 s each, like the peer
# below: sustained fp8 GEMMs run the H200 into its power limit (SM clock 1.5-1.8 GHz), short bursts do not.
"$BIN" gemm --config configs/quick.json -q --top-k 8 --set sweep.sq=[4096,8192,16384] --set measure.min_time=0.5 \
  --set measure.max_samples=5000 -o "$OUT/gemm.json" | tee "$OUT/gemm.md"
"$BIN" attention --config configs/quick.json -q --set sweep.sq=[4096,8192,16384] -o "$OUT/attention.json" \
  | tee "$OUT/attention.md"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 scripts/peer_gemm.py --min-time 0.5 --json "$OUT/peer_gemm.json" | tee "$OUT/peer_gemm.md" || echo "peer_gemm failed" >&2
  python3 lab/scripts/attention_torch_ref.py 8192 | tee "$OUT/peer_attention.md" || echo "peer attention failed" >&2
fi
