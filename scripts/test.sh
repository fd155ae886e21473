#!/usr/bin/env bash
# Set-up + configure + build + all tests. GPU tests (label gpu) skip cleanly where there is no GPU.
# Extra arguments go to ctest, e.g.  scripts/test.sh -L gpu   or   scripts/test.sh -LE gpu
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/env.sh
configure_and_build
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
