#!/usr/bin/env bash
# Runs every GPU test binary (label gpu) of a build folder directly (no ctest needed, so a build folder
# copied to a GPU machine works) and prints one summary line per binary plus a total.
# Usage: scripts/gpu_tests.sh [BUILD_DIR] [LOG_DIR]    ($GPU_TEST_TIMEOUT: seconds per binary, default none)
set -uo pipefail
B="${1:-build}"
LOG="${2:-$B/gpu-test-logs}"
mkdir -p "$LOG"
total_pass=0 total_fail=0 total_skip=0 rc=0
for t in "$B"/tests/test_*_gpu; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  if [ -n "${GPU_TEST_TIMEOUT:-}" ]; then timeout "$GPU_TEST_TIMEOUT" "$t" --gtest_brief=0 >"$LOG/$name.log" 2>&1
  else "$t" --gtest_brief=0 >"$LOG/$name.log" 2>&1; fi
  r=$?
  [ $r -ne 0 ] && rc=1
  pass=$(grep -c '^\[       OK \]' "$LOG/$name.log")
  fail=$(grep -c '^\[  FAILED  \] .*(' "$LOG/$name.log")
  skip=$(grep -c '^\[  SKIPPED \] .*(' "$LOG/$name.log")
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail)); total_skip=$((total_skip + skip))
  printf '%-24s %3d passed %3d failed %3d skipped  (exit %d)\n' "$name" "$pass" "$fail" "$skip" "$r"
  grep -E '^\[  FAILED  \] .*\(' "$LOG/$name.log" | sed 's/^/    /'
done
echo "gpu tests: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $rc
