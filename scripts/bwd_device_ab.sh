#!/usr/bin/env bash
# The attention backward of this tree against another source tree's, in one device call (about 5 minutes on an H100
# host with 16 cores):
#   1. SRC_B's C ABI library (dropbench_attention) builds in the background into BUILD_DIR-b (-j8), while
#   2. this tree's checks run: scripts/bwd_device.sh with BWD_PART=checks (build, resources, the backward's GPU and
#      host tests, memcheck, racecheck), plus tests/test_train_step_gpu (the training step's GPU tests);
#   3. the timing part of scripts/bwd_device.sh with BWD_LIB_B = SRC_B's library: ours, lib B's wgmma backward,
#      cuDNN and FlashAttention-2 in the same interleaved rounds (h2h_bwd.md's "lib A / lib B" rows and the
#      "lib A == lib B ... bitwise" check), then the CLI's backward families and pass axis.
#   4. (SWAP=1, the default) the same shapes again with the slots swapped, lib B's library as lib A, 4 rounds; both
#      runs combined by scripts/h2h_ab.py into this tree / lib B per shape and mode with the slots' own bias taken
#      out (one library in both slots reads lib A / lib B 0.97-0.99: docs/measurement.md).
# SRC_B is an export of the other revision's build inputs, made on a machine with the repository, e.g.
#   mkdir -p ab-src && git archive REV CMakeLists.txt cmake capi kernels src tests scripts configs | tar -x -C ab-src
# (/ab-src/ is ignored by git: pass it to the device call's carry).
# SRC_C=DIR (optional): a third revision's export, built beside lib B; after step 4, its wgmma backward against this
# tree's in the same way (4 rounds, and with SWAP=1 swapped and combined too), so that one call A/Bs two changes.
# Files: $OUT/checks/{summary.txt,bwd_logs.tar.gz}, $OUT/timing/{bwd_logs.tar.gz (its summary.txt inside),h2h_bwd.json,
# h2h_bwd.md}, $OUT/train_step_gpu.txt and $OUT/ab.tgz (ab/: lib B's and lib C's build logs, swap_b.*, ab_b.* = the
# combined lib A / lib B, c.*, swap_c.*, ab_c.*): eight with the caller's own log. H2H_ARGS is refused here.
# AB_ONLY=1: the A/B alone, for a short device window (about 70 s on an H100 host for 4 rounds of the four dH 64
# shapes, libraries built included): no checks, no PyTorch peers (the variants are ours and lib B's wgmma backward in the three modes). This
# tree's C ABI library (BUILD_DIR-a) and lib B's (and lib C's) build side by side; then lib A / lib B (first_b) and,
# with SWAP=1, swapped and combined (swap_b, ab_b); SRC_C likewise (c, swap_c, ab_c). ab.tgz is the only file (with
# ab_build_a.txt and first_b.* in it). Its timings are a screen: a candidate lands after the full call.
# H2H_ARGS (AB_ONLY=1 only): h2h_attention_bwd.py arguments added to every run of it, after the defaults, so that
# they win (e.g. "--head-dim 128 --rounds 12 --variants bwd:wg:none,bwd:wg:mask,bwd:wgB:none,bwd:wgB:mask").
# Usage: [SRC_C=DIR] [AB_ONLY=1] [H2H_ARGS=...] bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]
#   (BUILD_DIR default build-dev, BUDGET_S 560)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SRC_B="${1:?usage: bash scripts/bwd_device_ab.sh SRC_B [BUILD_DIR] [BUDGET_S]}"
B="${2:-build-dev}"
BUDGET="${3:-560}"
OUT0="${OUT:-$B/bwd-ab-out}"
mkdir -p "$OUT0"
. scripts/env.sh
T0=$(date +%s)
# lib_build SRC DIR LOG NAME: configure SRC into DIR (tests off) and build its C ABI library, output and a last
# line "NAME build exit RC at T s" into LOG.
lib_build() {
  {
    cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
      -DDROPBENCH_TESTS=OFF && timeout 300 cmake --build "$2" -j 8 --target dropbench_attention
    echo "$4 build exit $? at $(($(date +%s) - T0)) s"
  } > "$3" 2>&1
}
# export_lib_build_bg SRC DIR LOG NAME: lib_build of the export SRC into DIR in the background, its log in DIR/LOG.
# An export keeps the commit's time as every file's mtime, so a DIR left by an earlier call with an older export
# looks newer than the sources and ninja would keep its library: DIR is rebuilt from scratch whenever SRC's contents
# differ from the ones it was built from.
export_lib_build_bg() {
  local sum
  sum=$(cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum | md5sum | cut -d' ' -f1)
  [ "$(cat "$2/.src_sum" 2> /dev/null)" = "$sum" ] || rm -rf "$2"
  mkdir -p "$2"
  echo "$sum" > "$2/.src_sum"
  lib_build "$1" "$2" "$2/$3" "$4" &
}
AB_ONLY="${AB_ONLY:-0}"
# The full call's first lib A / lib B run is bwd_device.sh's, which takes no extra arguments: both runs of a combined
# pair must be made with the same ones.
if [ -n "${H2H_ARGS:-}" ] && [ "$AB_ONLY" != 1 ]; then
  echo "bwd_device_ab.sh: H2H_ARGS is for AB_ONLY=1 only (the full call's timing part takes no extra arguments)" >&2
  exit 2
fi
EXTRA=()
[ "$AB_ONLY" = 1 ] && EXTRA=(--variants "bwd:wg:none,bwd:wg:mask,bwd:wg:fused,bwd:wgB:none,bwd:wgB:mask,bwd:wgB:fused")
read -ra H2H <<< "${H2H_ARGS:-}"
EXTRA+=("${H2H[@]}")
export_lib_build_bg "$SRC_B" "$B-b" ab_build.txt "lib B"
BG=$!
BGC=
[ -n "${SRC_C:-}" ] && { export_lib_build_bg "$SRC_C" "$B-c" ab_build_c.txt "lib C"; BGC=$!; }
LIB_A="$B/libdropbench_attention.so"
if [ "$AB_ONLY" = 1 ]; then
  # This tree's library alone, in a build dir of its own (its sources' mtimes are real: ninja rebuilds what changed).
  LIB_A="$B-a/libdropbench_attention.so"
  rm -f "$LIB_A"  # a failed build must not leave an earlier call's library to be timed as this tree's
  lib_build . "$B-a" "$OUT0/ab_build_a.txt" "lib A"
  tail -n 1 "$OUT0/ab_build_a.txt"
  [ -f "$LIB_A" ] || { echo "lib A not built: no A/B"; LIB_A=; }
else
  OUT="$OUT0/checks" BWD_PART=checks BWD_EXTRA_TARGETS="dropbench test_train_step_gpu" \
    bash scripts/bwd_device.sh "$B" $((BUDGET * 6 / 10))
  timeout 90 "$B/tests/test_train_step_gpu" > "$OUT0/train_step_gpu.txt" 2>&1
  echo "exit $?" >> "$OUT0/train_step_gpu.txt"
  tail -n 3 "$OUT0/train_step_gpu.txt"
fi
wait $BG
X="$OUT0/ab"  # what the A/B adds to bwd_device.sh's files, packed into ab.tgz at the end
mkdir -p "$X"
cp "$B-b/ab_build.txt" "$X/"
[ "$AB_ONLY" = 1 ] && mv "$OUT0/ab_build_a.txt" "$X/"
tail -n 1 "$X/ab_build.txt"
LIB_B="$B-b/libdropbench_attention.so"
[ -f "$LIB_B" ] || { echo "lib B not built: the timing runs without it"; LIB_B=; }
SWAP="${SWAP:-1}"
# The timing part gets what the 4-round runs after it leave (about 70 s each: swapped lib B, lib C, swapped lib C).
RESERVE=0
[ -n "$LIB_B" ] && [ "$SWAP" = 1 ] && RESERVE=70
[ -n "$BGC" ] && RESERVE=$((RESERVE + 70 * (1 + SWAP)))
T_LEFT=$((BUDGET - ($(date +%s) - T0) - RESERVE))
[ "$T_LEFT" -lt 60 ] && T_LEFT=60
FIRST="$OUT0/timing/h2h_bwd.json"  # the lib A / lib B run that the swapped one is combined with
[ "$AB_ONLY" = 1 ] && FIRST="$X/first_b.json"
rm -f "$FIRST"  # (OUT0 may hold an earlier call's)
if [ "$AB_ONLY" != 1 ]; then
  OUT="$OUT0/timing" BWD_PART=timing BWD_MODES=0 BWD_LIB_B="$LIB_B" bash scripts/bwd_device.sh "$B" "$T_LEFT"
  # Its summary was printed and is inside timing/bwd_logs.tar.gz: the file itself would be a ninth file for the
  # device call's eight, and the machine drops one of them.
  rm -f "$OUT0/timing/summary.txt"
fi
# h2h_pair NAME LIB1 LIB2: h2h_attention_bwd.py with LIB1 as lib A and LIB2 as lib B, 4 rounds of the timing part's
# shapes (AB_ONLY=1: its variants and H2H_ARGS), into $X/NAME.{json,md,log}.
h2h_pair() {
  local left=$((BUDGET - ($(date +%s) - T0) - 5))
  [ "$left" -gt 30 ] || { echo "$1: not run ($left s left)"; return 1; }
  timeout "$left" python3 scripts/h2h_attention_bwd.py --lib "$2" --lib-b "$3" --rounds 4 "${EXTRA[@]}" \
    -o "$X/$1.json" --md "$X/$1.md" > "$X/$1.log" 2>&1
  local rc=$?
  echo "$1: exit $rc"
  return $rc
}
# both NAME FIRST SWAPPED: the two runs' lib A / lib B combined with the slots' bias taken out (scripts/h2h_ab.py,
# which also prints the table).
both() {
  python3 scripts/h2h_ab.py "$2" "$3" -o "$X/$1.json" --md "$X/$1.md"
}
if [ "$AB_ONLY" = 1 ] && [ -n "$LIB_A" ] && [ -n "$LIB_B" ] && h2h_pair first_b "$LIB_A" "$LIB_B"; then
  grep -E "^### |lib A / lib B" "$X/first_b.md" 2> /dev/null | head -40
fi
if [ -n "$LIB_A" ] && [ -n "$LIB_B" ] && [ "$SWAP" = 1 ] && [ -f "$FIRST" ] && h2h_pair swap_b "$LIB_B" "$LIB_A"; then
  both ab_b "$FIRST" "$X/swap_b.json"
fi
if [ -n "$BGC" ]; then
  wait "$BGC"
  cp "$B-c/ab_build_c.txt" "$X/"
  LIB_C="$B-c/libdropbench_attention.so"
  if [ -n "$LIB_A" ] && [ -f "$LIB_C" ] && h2h_pair c "$LIB_A" "$LIB_C"; then
    grep -E "^### |lib A / lib B" "$X/c.md" 2>/dev/null | head -40
    [ "$SWAP" = 1 ] && h2h_pair swap_c "$LIB_C" "$LIB_A" && both ab_c "$X/c.json" "$X/swap_c.json"
  else
    echo "lib C: not built or not run: $(tail -n 1 "$X/ab_build_c.txt")"
  fi
fi
tar czf "$OUT0/ab.tgz" -C "$OUT0" ab && rm -rf "$X"
