#!/usr/bin/env bash
# Set-up + configure + build + all tests. GPU tests (label gpu) skip cleanly where there is no GPU.
# Extra arguments go to ctest, e.g.  scripts/test.sh -L gpu   or   scripts/test.sh -LE gpu
# After ctest's own summary, one line counts every test: "N passed, N failed, N skipped" (ctest's "100% tests
# passed" counts a skipped test as passed). The exit code is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/env.sh
configure_and_build
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# ctest prints one status line per test: "Test #12: name ....   Passed", "***Skipped", "***Failed", "***Timeout",
# "***Exception: ...", "Not Run" ...; a skipped test is one that ran and asked to be skipped (GTEST_SKIP, a
# SKIP_RETURN_CODE).
awk '
  /^ *[0-9]+\/[0-9]+ Test +#[0-9]+:/ {
    if ($0 ~ / Passed +[0-9.]+ sec/) passed++;
    else if ($0 ~ /\*\*\*Skipped|Not Run/) skipped++;
    else failed++;
  }
  END { printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped }
' "$log"
exit "$rc"
