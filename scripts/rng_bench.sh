#!/usr/bin/env bash
# Builds bench/bench_rng.cu with nvcc alone (no CMake, ~30 s on 16 cores): the current tree's RNG, ceiling and
# dropout kernels, plus, when OLD_TREE is given, the kernels of that tree (e.g. the merge base, from `git archive`)
# compiled with their namespace renamed (-Ddropbench=dropbench_old) and linked beside them, so one binary times
# and checks old against new (bench/bench_rng_old.cu). Usage: scripts/rng_bench.sh OUT_BIN [OLD_TREE]
set -euo pipefail
OUT_BIN="$1"
OLD="${2:-}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OBJ="$(dirname "$OUT_BIN")/rng_bench_obj"
mkdir -p "$OBJ"
NVCC=(nvcc -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -std=c++20 -O3 -lineinfo)
objs=()
compile() {  # out src include-root [extra flags]
  local out="$1" src="$2" inc="$3"
  shift 3
  "${NVCC[@]}" "$@" -I"$inc" -c "$src" -o "$out" &
  objs+=("$out")
}
for f in kernels/rng/rng_mask.cu kernels/rng/philox_ceiling.cu kernels/dropout/dropout.cu kernels/common/check.cpp; do
  compile "$OBJ/new_$(basename "$f").o" "$ROOT/$f" "$ROOT" -x cu
done
DEF=()
if [[ -n "$OLD" ]]; then
  for f in kernels/rng/rng_mask.cu kernels/dropout/dropout.cu kernels/common/check.cpp; do
    compile "$OBJ/old_$(basename "$f").o" "$OLD/$f" "$OLD" -x cu -Ddropbench=dropbench_old
  done
  compile "$OBJ/old_wrap.o" "$ROOT/bench/bench_rng_old.cu" "$OLD" -Ddropbench=dropbench_old
  DEF=(-DDROPBENCH_BENCH_OLD)
fi
compile "$OBJ/bench_rng.o" "$ROOT/bench/bench_rng.cu" "$ROOT" "${DEF[@]}"
wait
"${NVCC[@]}" "${objs[@]}" -lcublasLt -o "$OUT_BIN"
echo "built $OUT_BIN ${OLD:+with the kernels of $OLD}"
