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
# SRC_C=DIR (optional): a third revision's export, built beside lib B; after step 3, its wgmma backward against this
# tree's in the same way (h2h_attention_bwd.py --lib-b, shapes $H2H_C_ARGS, default the 8 of step 3 at 4 rounds),
# into $OUT/ab_c.tgz (h2h_c.json, h2h_c.md and lib C's build log), so that one call A/Bs two changes.
# Files: $OUT/checks/{summary.txt,bwd_logs.tar.gz}, $OUT/timing/{summary.txt,bwd_logs.tar.gz,h2h_bwd.json,
# h2h_bwd.md}, $OUT/train_step_gpu.txt, $OUT/ab_build.txt (with SRC_C: $OUT/ab_c.tgz, lib B's build log inside): eight.
# Usage: [SRC_C=DIR] bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]     (BUILD_DIR default build-dev, BUDGET_S 560)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SRC_B="${1:?usage: bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]}"
B="${2:-build-dev}"
BUDGET="${3:-560}"
OUT0="${OUT:-$B/bwd-ab-out}"
mkdir -p "$OUT0"
. scripts/env.sh
T0=$(date +%s)
# build_lib SRC DIR LOG NAME: SRC's C ABI library into DIR in the background, its log in DIR/LOG. An export keeps
# the commit's time as every file's mtime, so a DIR left by an earlier call with an older export looks newer than the
# sources and ninja would keep its library: DIR is rebuilt from scratch whenever SRC's contents differ from the ones
# it was built from.
build_lib() {
  local sum
  sum=$(cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum | md5sum | cut -d' ' -f1)
  [ "$(cat "$2/.src_sum" 2> /dev/null)" = "$sum" ] || rm -rf "$2"
  mkdir -p "$2"
  echo "$sum" > "$2/.src_sum"
  (
    cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
      -DDROPBENCH_TESTS=OFF > "$2/$3" 2>&1 &&
      timeout 300 cmake --build "$2" -j 8 --target dropbench_attention >> "$2/$3" 2>&1
    echo "$4 build exit $? at $(($(date +%s) - T0)) s" >> "$2/$3"
  ) &
}
build_lib "$SRC_B" "$B-b" ab_build.txt "lib B"
BG=$!
BGC=
[ -n "${SRC_C:-}" ] && { build_lib "$SRC_C" "$B-c" ab_build_c.txt "lib C"; BGC=$!; }
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
[ -n "$BGC" ] && LEFT=$((LEFT * 55 / 100))  # lib C's comparison gets the rest
OUT="$OUT0/timing" BWD_PART=timing BWD_LIB_B="$LIB_B" bash scripts/bwd_device.sh "$B" "$LEFT"
if [ -n "$BGC" ]; then
  wait "$BGC"
  C="$OUT0/ab_c"
  mkdir -p "$C"
  cp "$B-c/ab_build_c.txt" "$C/"
  mv "$OUT0/ab_build.txt" "$C/"
  LEFT=$((BUDGET - ($(date +%s) - T0) - 10))
  if [ -f "$B-c/libdropbench_attention.so" ] && [ "$LEFT" -gt 30 ]; then
    # shellcheck disable=SC2086
    timeout "$LEFT" python3 scripts/h2h_attention_bwd.py --lib "$B/libdropbench_attention.so" \
      --lib-b "$B-c/libdropbench_attention.so" ${H2H_C_ARGS:---sq 8192,16384 --head-dim 128,64 --heads 32:8 --causal false,true --rounds 4} \
      --burst-ms 30 --warmup-s 1 -o "$C/h2h_c.json" --md "$C/h2h_c.md" > "$C/h2h_c.log" 2>&1
    echo "lib C h2h: exit $?"
    grep -E "^### |lib A / lib B" "$C/h2h_c.md" 2>/dev/null | head -40
  else
    echo "lib C: not built or no time left ($LEFT s): $(tail -n 1 "$C/ab_build_c.txt")"
  fi
  tar czf "$OUT0/ab_c.tgz" -C "$OUT0" ab_c && rm -rf "$C"
fi
