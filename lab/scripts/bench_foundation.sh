#!/usr/bin/env bash
# Issue-2 measurements on a GPU machine: devices, the RNG kernel (default sweep + 2^31 elements) and
# standalone dropout (default + 2^28 elements), JSON reports and markdown tables into OUT_DIR.
# Usage: scripts/bench_foundation.sh [BIN] [OUT_DIR]
set -euo pipefail
BIN="${1:-build/dropbench}"
OUT="${2:-results/h200}"
mkdir -p "$OUT"
"$BIN" devices | tee "$OUT/devices.md"
"$BIN" devices --format json >"$OUT/devices.json"
# Default sweeps (configs/quick.json): every R x threshold width x layout at SQ 2048, 4096.
"$BIN" rng --config configs/quick.json -q -o "$OUT/rng_quick.json" | tee "$OUT/rng_quick.md"
# 2^31 elements (B 1 x 32 heads x 8192^2): the Telem/s point, all R and widths, tile + bits layouts.
"$BIN" rng --config configs/quick.json -q --set sweep.sq=[8192] --set sweep.layout=[tile,bits] \
  --set measure.min_time=0.3 -o "$OUT/rng_2g.json" | tee "$OUT/rng_2g.md"
"$BIN" dropout --config configs/quick.json -q -o "$OUT/dropout_quick.json" | tee "$OUT/dropout_quick.md"
# 2^28 elements (512 MiB bf16): far past the L2, the bandwidth figure.
"$BIN" dropout --config configs/quick.json -q --set sweep.elements=[268435456] --set measure.min_time=0.3 \
  -o "$OUT/dropout_256m.json" | tee "$OUT/dropout_256m.md"
