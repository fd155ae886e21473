#!/usr/bin/env bash
# The attention backward on a GPU machine, in one go (about 8 minutes on an H200 host with 16 cores):
#   1. configure + build only what it needs (the backward's tests, the C ABI library, the CLI) into BUILD_DIR, -j16;
#   2. resources of the backward kernels (cuobjdump -res-usage of their objects);
#   3. the backward GPU tests and the host tests (tests/test_attention_bwd_gpu, tests/test_attention_bwd);
#   4. compute-sanitizer memcheck and racecheck on the small backward cases (Kernels/AttentionBwdSanitize.*, both
#      families);
#   5. timing: scripts/h2h_attention_bwd.py -- ours (none / mask / regen Philox-7; backward alone and fwd+bwd)
#      against PyTorch SDPA's backward (cuDNN, flash) in one process, on the script's default grid (SQ 8K / 16K,
#      dH 128 / 64, causal and not, 32/8 heads);
#   6. the two backward families (mma, wgmma) through `dropbench attention` (pass bwd, none / mask / fused), SQ 8192,
#      dH 128 and 64, causal and not: the wgmma backward's first timings and its bitwise check against fused;
#   7. ours in the three modes beside cuDNN's backward alone, 20 rounds (h2h_bwd_modes, in the logs).
# Every step runs under `timeout`, within an overall budget; a failing step does not stop the others. A cold build
# can leave too little of the default budget for the timing steps (reported as skipped): a second call with the
# build kept runs them. Logs go to
# BUILD_DIR/bwd-logs, packed into $OUT/bwd_logs.tar.gz ($OUT or BUILD_DIR/bwd-out) beside summary.txt (printed last)
# and the timing's h2h_bwd.json / h2h_bwd.md: four files.
# Usage: bash scripts/bwd_device.sh BUILD_DIR [BUDGET_S]     (BUDGET_S default 470)
#   BWD_PART=checks: steps 1-4 only; BWD_PART=timing: steps 1, 2, 5-7 (a warm machine whose checks already ran, or a
#   build configured with -DDROPBENCH_TESTS=OFF: it builds the library and the CLI only); BWD_PART=all (default): all.
#   BWD_EXTRA_TARGETS="test_train_step_gpu ...": also built in step 1 (a later call on the warm machine finds them).
#   BWD_LIB_B=PATH: step 5 also times that build's wgmma backward in the same rounds (h2h --lib-b: an A/B of two
#   kernel builds in one process).
#   BWD_MODES=0: no step 7.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B="${1:?usage: bash scripts/bwd_device.sh BUILD_DIR [BUDGET_S]}"
BUDGET="${2:-470}"
PART="${BWD_PART:-all}"
case "$PART" in all | checks | timing) ;; *) echo "bwd_device.sh: BWD_PART=$PART (allowed: all, checks, timing)" >&2; exit 2 ;; esac
checks() { [ "$PART" != timing ]; }
timing() { [ "$PART" != checks ]; }
OUTDIR="${OUT:-$B/bwd-out}"
LOG="$B/bwd-logs"
# A kept build folder keeps only its build's logs: the summary reads every log present, so an earlier call's test or
# sanitizer logs would read as this call's.
rm -rf "$LOG"
mkdir -p "$LOG" "$OUTDIR"
. scripts/env.sh
. scripts/bwd_record.sh
# compute-sanitizer and cuobjdump live beside nvcc.
NVCC_DIR=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
export PATH="$PATH:$NVCC_DIR:/usr/local/cuda/bin"
T0=$(date +%s)
SUMMARY=()
FAILED=()

left() { echo $((BUDGET - ($(date +%s) - T0))); }
# step NAME CAP_S CMD...: runs CMD with timeout min(CAP_S, time left - RESERVE), log in $LOG/NAME.log.
RESERVE=10
step() {
  local name="$1" cap="$2"
  shift 2
  local t
  t=$(left)
  t=$((t - RESERVE))
  [ "$t" -gt "$cap" ] && t="$cap"
  if [ "$t" -lt 5 ]; then
    SUMMARY+=("$(printf '%-14s skipped (budget spent)' "$name")")
    return 99
  fi
  local s
  s=$(date +%s)
  timeout --kill-after=5 "$t" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  local what="ok"
  [ $rc -ne 0 ] && what="FAILED (exit $rc)"
  [ $rc -eq 124 ] && what="TIMED OUT after ${t}s"
  SUMMARY+=("$(printf '%-14s %-26s %4ds' "$name" "$what" $(($(date +%s) - s)))")
  [ $rc -ne 0 ] && FAILED+=("$name")
  return $rc
}

bwd_context >"$LOG/context.log"
smi_log "$LOG/smi.log"

if [ ! -f "$B/build.ninja" ]; then
  step configure 120 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)"
fi
# The timing part needs the library and the CLI only, so it also runs on a build configured without the tests.
TARGETS=(dropbench_attention)
checks && TARGETS+=(test_attention_bwd_gpu test_attention_bwd)
timing && TARGETS+=(dropbench)
step build 330 cmake --build "$B" -j 16 --target "${TARGETS[@]}" ${BWD_EXTRA_TARGETS:-}
build_rc=$?

# Registers / stack / local memory (spills) of every backward kernel, from the objects (a child shell: timeout runs
# programs, not functions).
RES='for o in "$1"/CMakeFiles/dropbench_kernels.dir/kernels/attention/bwd/attention_bwd_hd*.o \
           "$1"/CMakeFiles/dropbench_kernels.dir/kernels/attention/bwd/attention_bwd_wgmma_hd*.o; do
  echo "== $(basename "$o")"
  cuobjdump -res-usage "$o" 2>&1 | grep -A1 "Function" | grep -v "^--" | paste - - |
    sed -E "s/.*Function ([^ :]+):.*REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+).*/\1 REG \2 STACK \3 LOCAL \5/"
done'
[ $build_rc -eq 0 ] && step resources 30 bash -c "$RES" _ "$B"

# Order: correctness first (tests, memcheck, racecheck), then the timing, then the CLI smoke test; a step the
# budget no longer fits is reported as skipped.
T="$B/tests"
if checks && [ -x "$T/test_attention_bwd_gpu" ]; then
  step tests_host 30 "$T/test_attention_bwd"
  step tests_gpu 180 "$T/test_attention_bwd_gpu" --gtest_brief=0
  step memcheck 75 compute-sanitizer --tool memcheck --error-exitcode 1 "$T/test_attention_bwd_gpu" \
    --gtest_filter='*AttentionBwdSanitize.*'
elif checks; then
  SUMMARY+=("tests          not built")
fi

if checks && [ -x "$T/test_attention_bwd_gpu" ]; then
  step racecheck 240 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
    "$T/test_attention_bwd_gpu" --gtest_filter='*AttentionBwdSanitize.*'
fi

if timing && [ -f "$B/libdropbench_attention.so" ]; then
  step h2h_bwd 330 python3 scripts/h2h_attention_bwd.py --lib "$B/libdropbench_attention.so" \
    ${BWD_LIB_B:+--lib-b "$BWD_LIB_B"} -o "$OUTDIR/h2h_bwd.json" --md "$OUTDIR/h2h_bwd.md"
fi


# The wgmma backward against the mma one, through the core harness (one report; the kernel family is an axis).
if timing && [ -x "$B/dropbench" ]; then
  step cli_wgmma 120 "$B/dropbench" "${BWD_CLI_WGMMA[@]}" -o "$LOG/cli_wgmma.json"
fi

# The CLI's pass axis at one point (a smoke test of the integration; its checks: extra.bwd_bitwise_equal_fused).
if timing && [ -x "$B/dropbench" ]; then
  step cli_pass 60 "$B/dropbench" "${BWD_CLI_PASS[@]}" -o "$LOG/cli_pass.json"
fi
# The dropout modes' cost on their own: six rounds of the whole set resolve mask / none to about 10 % (one kernel
# timed twice there reads up to 0.11 apart), the target is 5 %; ours in three modes and cuDNN with and without
# dropout, 20 rounds, into the logs (h2h_bwd_modes.json / .md).
if timing && [ "${BWD_MODES:-1}" = 1 ] && [ -f "$B/libdropbench_attention.so" ]; then
  step h2h_modes 150 python3 scripts/h2h_attention_bwd.py --lib "$B/libdropbench_attention.so" "${BWD_MODES_ARGS[@]}" \
    -o "$LOG/h2h_bwd_modes.json" --md "$LOG/h2h_bwd_modes.md"
fi
smi_log "$LOG/smi.log"

{
  echo "bwd_device.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), sha $(git rev-parse --short=12 HEAD 2>/dev/null), $(($(date +%s) - T0)) s"
  printf '%s\n' "${SUMMARY[@]}"
  for f in "${FAILED[@]}"; do
    echo "--- $f: last lines of its log"
    tail -n 4 "$LOG/$f.log" | cut -c1-300 | sed 's/^/  /'
  done
  if [ -f "$LOG/tests_gpu.log" ]; then
    echo "gpu tests: $(grep -c '^\[       OK \]' "$LOG/tests_gpu.log") passed, $(grep -c '^\[  FAILED  \] .*(' "$LOG/tests_gpu.log") failed, $(grep -c '^\[  SKIPPED \] .*(' "$LOG/tests_gpu.log") skipped"
    grep -E '^\[  FAILED  \] .*\(' "$LOG/tests_gpu.log" | sed 's/^/  /'
    grep -E 'rel err' "$LOG/tests_gpu.log" | awk '{print $(NF)}' | sort -g | tail -1 | sed 's/^/  largest rel err printed: /'
  fi
  for t in memcheck racecheck; do
    [ -f "$LOG/$t.log" ] && echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/$t.log" | tail -1)"
  done
  [ -f "$LOG/resources.log" ] && { echo "resources (REG / STACK / LOCAL bytes):"; grep -E 'attn_bwd_(main|dq)_kernelILi(64|128)ELNS_11DropoutModeE[012]ELi7ELi8E|attn_bwd_wgmma_kernel' "$LOG/resources.log" | sed 's/^/  /'; }
  if [ -f "$LOG/cli_wgmma.json" ]; then
    echo "dropbench attention, backward families (SQ 8192, 32/8 heads):"
    grep -E 'bwd|wgmma|mma' "$LOG/cli_wgmma.log" | head -24 | sed 's/^/  /'
    grep -c '"bwd_bitwise_equal_fused": false' "$LOG/cli_wgmma.json" 2>/dev/null | sed 's/^/  bwd_bitwise_equal_fused false: /'
  fi
  if [ -f "$LOG/cli_pass.json" ]; then
    echo "dropbench attention, pass axis (SQ 4096, 32/8 heads, dH 128, causal):"
    grep -E 'fwd|bwd' "$LOG/cli_pass.log" | head -20 | sed 's/^/  /'
    grep -c '"bwd_bitwise_equal_fused": false' "$LOG/cli_pass.json" 2>/dev/null | sed 's/^/  bwd_bitwise_equal_fused false: /'
  fi
  if [ -f "$OUTDIR/h2h_bwd.md" ]; then
    echo "timing (scripts/h2h_attention_bwd.py):"
    grep -E '^### |^\| (bwd|fb):|^\| (cuDNN|FA2|ours)' "$OUTDIR/h2h_bwd.md" | sed 's/^/  /'
  fi
  if [ -f "$LOG/h2h_bwd_modes.md" ]; then
    echo "the modes alone, 20 rounds (h2h_bwd_modes.md in the logs):"
    grep -E '^### |^\| (cuDNN|ours)' "$LOG/h2h_bwd_modes.md" | sed 's/^/  /'
  fi
} >"$OUTDIR/summary.txt" 2>&1
cp "$OUTDIR/summary.txt" "$LOG/summary.txt"
tar -C "$B" -czf "$OUTDIR/bwd_logs.tar.gz" bwd-logs 2>/dev/null
cat "$OUTDIR/summary.txt"
