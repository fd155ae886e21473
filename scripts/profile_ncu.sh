#!/usr/bin/env bash
# Nsight Compute counters for the kernels the resource model uses (docs/model.md): the RNG tile kernel
# (Philox-7, 8-bit), the mma.sync attention in modes none / fused, the wgmma attention in every mode (SQ 8192,
# with scheduler and warp-state sections), and the cuBLASLt FP8 QKV GEMM — one launch each, at
# the clocks the card runs (--clock-control none), sections SpeedOfLight, ComputeWorkloadAnalysis,
# InstructionStats, MemoryWorkloadAnalysis, as CSV. Usage: scripts/profile_ncu.sh [BIN] [OUT_DIR]
# (The per-pipe counts the model uses come from `dropbench profile --ncu-csv DIR`, which runs every kernel
# under ncu's raw metrics and writes them into a profile: docs/model.md, "Collecting a profile". This script
# gives ncu's section pages for reading.)
set -uo pipefail
BIN="${1:-build/dropbench}"
OUT="${2:-results/h200/model/ncu}"
mkdir -p "$OUT"
command -v ncu >/dev/null || { echo "profile_ncu: ncu (Nsight Compute) not on PATH" >&2; exit 2; }
NCU=(ncu --clock-control none --csv --section SpeedOfLight --section ComputeWorkloadAnalysis
     --section InstructionStats --section MemoryWorkloadAnalysis --launch-count 1)
Q=(--config configs/quick.json -q --set measure.min_samples=1 --min-time 0 --set measure.warmup=0 --set measure.max_samples=1
   --set measure.throttle=0)
"${NCU[@]}" --kernel-name regex:rng_tile "$BIN" rng "${Q[@]}" --set sweep.sq=[4096] --set sweep.rounds=[7] \
  --set sweep.threshold_bits=[8] --set sweep.layout=[tile] >"$OUT/rng_tile_r7_tw8.csv" 2>"$OUT/rng.err"
# attention launches per point: the fused reference first, then one sample each of none, mask, rng+mask, fused.
# The mma.sync kernel (attn_fwd_kernel) pinned; `auto` picks the wgmma kernel on sm_90.
for m in "fused 0" "none 1"; do
  set -- $m
  "${NCU[@]}" --kernel-name regex:attn_fwd_kernel --launch-skip "$2" "$BIN" attention "${Q[@]}" --set sweep.sq=[4096] \
    --set sweep.causal=[false] --set workload.attention_kernel=mma >"$OUT/attention_$1.csv" 2>"$OUT/attention_$1.err"
done
# The Hopper-native kernel (attn_fwd_wgmma_kernel) at SQ 8192, Philox-7, non-causal: every launch of the point
# (none, mask, rng+mask's mask, fused), with the scheduler and warp-state sections (issue slots, stall reasons).
WG=(ncu --clock-control none --csv --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats
    --section SchedulerStats --section WarpStateStats --launch-count 4)
"${WG[@]}" --kernel-name regex:attn_fwd_wgmma "$BIN" attention "${Q[@]}" --set sweep.sq=[8192] --set sweep.rounds=[7] \
  --set sweep.causal=[false] --set workload.attention_kernel=wgmma >"$OUT/attention_wgmma_8k.csv" 2>"$OUT/attention_wgmma.err"
"${NCU[@]}" --kernel-name regex:"gemm|xmma|cutlass|sm90" "$BIN" gemm "${Q[@]}" --set sweep.sq=[8192] \
  --set sweep.embed=[8192] --set sweep.dtype=[fp8] >"$OUT/gemm_fp8.csv" 2>"$OUT/gemm.err"
wc -l "$OUT"/*.csv
