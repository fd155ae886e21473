#!/usr/bin/env bash
# The attention backward of this tree against another source tree's, in one device call (about 5 minutes on an H100
# host with 16 cores):
#   1. SRC_B's C ABI library (dropbench_attention) builds in the background into BUILD_DIR-b (-j8), while
#   2. this tree's checks run: scripts/bwd_device.sh with BWD_PART=checks (build, resources, the backward's GPU and
#      host tests, memcheck, racecheck), plus tests/test_train_step_gpu (the training step's GPU tests);
#   3. the timing part of scripts/bwd_device.sh with BWD_LIB_B = SRC_B's library: ours, lib B's wgmma backward,
#      cuDNN and FlashAttention-2 in the same interleaved rounds (h2h_bwd.md's "lib A / lib B" rows and the
#      "lib A == lib B ... bitwise" check), then the CLI's backward families and pass axis.
# SRC_B is an export of the other revision's build inputs, made on a machine with the repository, e.g.
#   mkdir -p ab-src && git archive REV CMakeLists.txt cmake capi kernels src tests scripts configs | tar -x -C ab-src
# (/ab-src/ is ignored by git: pass it to the device call's carry).
# Files: $OUT/checks/{summary.txt,bwd_logs.tar.gz}, $OUT/timing/{summary.txt,bwd_logs.tar.gz,h2h_bwd.json,
# h2h_bwd.md}, $OUT/train_step_gpu.txt, $OUT/ab_build.txt: eight.
# Usage: bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]     (BUILD_DIR default build-dev, BUDGET_S 560)
set -uo pipefail
cd "$(dirname "$0")/.."
SRC_B="${1:?usage: bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]}"
B="${2:-build-dev}"
BUDGET="${3:-560}"
OUT0="${OUT:-$B/bwd-ab-out}"
mkdir -p "$OUT0" "$B-b"
. scripts/env.sh
T0=$(date +%s)
(
  cmake -S "$SRC_B" -B "$B-b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
    -DDROPBENCH_TESTS=OFF > "$B-b/ab_build.txt" 2>&1 &&
    timeout 300 cmake --build "$B-b" -j 8 --target dropbench_attention >> "$B-b/ab_build.txt" 2>&1
  echo "lib B build exit $? at $(($(date +%s) - T0)) s" >> "$B-b/ab_build.txt"
) &
BG=$!
OUT="$OUT0/checks" BWD_PART=checks BWD_EXTRA_TARGETS="dropbench test_train_step_gpu" \
  bash scripts/bwd_device.sh "$B" $((BUDGET * 6 / 10))
timeout 90 "$B/tests/test_train_step_gpu" > "$OUT0/train_step_gpu.txt" 2>&1
echo "exit $?" >> "$OUT0/train_step_gpu.txt"
tail -n 3 "$OUT0/train_step_gpu.txt"
wait $BG
cp "$B-b/ab_build.txt" "$OUT0/"
tail -n 1 "$OUT0/ab_build.txt"
LEFT=$((BUDGET - ($(date +%s) - T0)))
LIB_B="$B-b/libdropbench_attention.so"
[ -f "$LIB_B" ] || { echo "lib B not built: the timing runs without it"; LIB_B=; }
OUT="$OUT0/timing" BWD_PART=timing BWD_LIB_B="$LIB_B" bash scripts/bwd_device.sh "$B" "$LEFT"
