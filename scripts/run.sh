#!/usr/bin/env bash
# Set-up + build + the default sweep (configs/quick.json): the four dropout pipelines of one transformer
# block (dropbench run), then the RNG mask kernel and standalone dropout.
# Reports go to results/latest/. Without a GPU dropbench says so and this exits non-zero.
# Usage: scripts/run.sh [config.json] [extra dropbench options...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/env.sh
configure_and_build
cfg="${1:-configs/quick.json}"
shift || true
mkdir -p results/latest
"$BUILD_DIR/dropbench" devices
for cmd in run rng dropout; do
  echo "== dropbench $cmd --config $cfg" >&2
  "$BUILD_DIR/dropbench" "$cmd" --config "$cfg" -o "results/latest/$cmd.json" "$@"
done
