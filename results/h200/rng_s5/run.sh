#!/usr/bin/env bash
# Issue 16 on the H200: what each device call ran (results/h200/rng_s5/README.md). From the repository root:
#   results/h200/rng_s5/run.sh OLD_TREE OUT_DIR [peers]
# OLD_TREE: the merge base's kernels/ (git archive), linked into bench_rng beside the current kernels.
# Steps: nvidia-smi; cmake build of dropbench + the rng/dropout/mask/pipelines/attention GPU tests (background);
# bench_rng old vs new (RNG vs ceiling, seeded dropout vs copy, bit-for-bit checks); ncu of the new and old tile
# kernels and the ceiling (R 7, 8-bit); the GPU tests; `dropbench rng` (tile, 8-bit, R 3/5/7/10, 2^31 elements,
# with the ceiling variant) and `dropbench dropout` (2^29 elements, bf16 and fp32); with `peers`, the Triton peer.
set -uo pipefail
OLD="$1"
OUT="$2"
PEERS="${3:-}"
mkdir -p "$OUT"
T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$OUT/steps.log"; }
smi() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv,noheader >>"$OUT/smi.txt"; }
smi
B=/tmp/b_rng16
EXTRA_TARGETS="${EXTRA_TARGETS:-}"   # e.g. test_attention_gpu (call 1 built and ran it)
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
  cmake --build $B -j 12 --target dropbench test_rng_gpu test_dropout_gpu test_pipelines_gpu bench_rng $EXTRA_TARGETS \
    >>"$OUT/build.log" 2>&1; echo "cmake build rc=$?" >>"$OUT/build.log" ) &
BUILD=$!
scripts/rng_bench.sh /tmp/rb/bench_rng "$OLD" >"$OUT/bench_build.log" 2>&1
step "bench_rng built rc=$?"
/tmp/rb/bench_rng 8192 32 $((1 << 29)) 30 all 2>&1 | tee "$OUT/bench.log"
step "bench_rng done"
smi
M=sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_fmaheavy.sum,sm__inst_executed_pipe_fmalite.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,gpu__time_duration.sum
timeout 60 ncu --clock-control none --kernel-name regex:"rng_tile|philox_ceiling" --launch-count "${NCU_LAUNCHES:-5}" --csv --page raw \
  --metrics "$M" --section WarpStateStats --section SchedulerStats \
  /tmp/rb/bench_rng 8192 32 0 1 ncu >"$OUT/ncu_rng.csv" 2>"$OUT/ncu.err"
step "ncu rc=$?"
wait $BUILD
step "$(tail -1 "$OUT/build.log")"
( cd $B && ctest -L gpu -R "${TESTS_RE:-Rng|Dropout|Mask|Pipelines}" -E "BenchSmoke.Attention" --output-on-failure ) >"$OUT/gpu_tests.log" 2>&1
step "gpu tests rc=$? ($(grep -E 'tests passed|tests failed' "$OUT/gpu_tests.log"))"
Q=(--config configs/quick.json --set workload.sq=8192 --set measure.min_time=0.2 --set measure.timeout=5)
$B/dropbench rng "${Q[@]}" --set sweep.sq=[8192] --set sweep.rounds=[3,5,7,10] --set sweep.threshold_bits=[8] \
  --set sweep.layout=[tile] -o "$OUT/rng.json" 2>&1 | tee "$OUT/rng.log"
step "dropbench rng done"
smi
$B/dropbench dropout "${Q[@]}" --set sweep.elements=[536870912] -o "$OUT/dropout.json" 2>&1 | tee "$OUT/dropout.log"
step "dropbench dropout done"
smi
if [[ "$PEERS" == peers ]]; then
  PYTHONUNBUFFERED=1 timeout 75 python3 scripts/peers.py --dropbench $B/dropbench --only dropout --config configs/quick.json \
    --set sweep.elements=[536870912] --min-time 0.2 --git-sha "${SHA:-unknown}" -o "$OUT/peers_dropout.json" --md "$OUT/peers_dropout.md" \
    2>&1 | tail -30 | tee "$OUT/peers.log"
  step "peers rc=$?"
fi
smi
