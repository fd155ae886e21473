#!/usr/bin/env bash
# Issue 16, seeded dropout (results/h200/dropout_s6/README.md): everything of the one device call. From the
# repository root:  results/h200/dropout_s6/run.sh OUT_DIR
# Steps: nvidia-smi; cmake build of dropbench, bench_rng and the rng/dropout GPU tests (background); bench_rng
# built with nvcc alone (scripts/rng_bench.sh) for an early start: its dropout checks (every kind's y == kind 3's,
# in a process of their own, so a broken kind is dropped from the timing instead of ending it), then its dropout
# section round-robin (copy, plain copy kernel, every seeded kind, the pattern copies); the GPU tests;
# the Triton peer (scripts/peers.py --only dropout); `dropbench dropout` with the kind the bench found fastest for
# bf16 and fp32 together (DROPBENCH_SEEDED_KERNEL), then with the built-in default. BUDGET (s, default
# 190): the last three steps are skipped, each logged, where they would end past it. PRE=DIR: binaries built
# beforehand (cmake targets dropbench, bench_rng, test_dropout_gpu, test_rng_gpu) instead of building here; the
# GPU tests then run as the test binaries themselves (all their tests) plus bench_rng's smoke run.
set -uo pipefail
OUT="$1"
mkdir -p "$OUT"
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
step() { echo "[$(el) s] $*" | tee -a "$OUT/steps.log"; }
BUDGET=${BUDGET:-190}  # seconds this script may take; a late step that would not fit is skipped (and logged)
fits() { (($(el) + $1 <= BUDGET)) || { step "skipped (needs $1 s): $2"; false; }; }
smi() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv,noheader >>"$OUT/smi.txt" 2>&1
  nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader >>"$OUT/smi.txt" 2>&1
}
smi
if [[ -n "${PRE:-}" ]]; then
  # PRE: a folder of binaries built beforehand (dropbench, bench_rng, test_dropout_gpu, test_rng_gpu), no build here
  B=$PRE BR=$PRE/bench_rng
  step "prebuilt binaries: $(ls "$PRE" | tr '\n' ' ')"
else
  B=/tmp/b_do16 BR=/tmp/rb/bench_rng
  ( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
    cmake --build $B -j 16 --target dropbench test_dropout_gpu test_rng_gpu bench_rng >>"$OUT/build.log" 2>&1
    echo "cmake build rc=$?" >>"$OUT/build.log" ) &
  BUILD=$!
  scripts/rng_bench.sh $BR >"$OUT/bench_build.log" 2>&1
  step "bench_rng built rc=$?"
fi
N=$((1 << 29))
timeout 25 $BR 8192 32 $N 1 check >"$OUT/check.log" 2>&1
RC=$?
KINDS=""
for k in 0 1 2 3 4 5 6 7; do
  [[ $(grep -c "kind $k == kind 3: yes" "$OUT/check.log") == 4 ]] && KINDS="$KINDS$k"
done
step "check rc=$RC kinds passing: ${KINDS:-none}"
[[ -n "$KINDS" ]] || KINDS=0123
BENCH_RNG_KINDS=$KINDS timeout 60 $BR 8192 32 $N "${ROUNDS:-150}" dropout 2>&1 | tee "$OUT/bench.log"
step "bench_rng rc=$?"
smi
# The kind with the highest min(bf16, fp32) per-round median % of copy.
BEST=$(awk '$1=="seeded" && $2 ~ /^k[0-9]$/ && ($3=="bf16" || $3=="fp32") && NF==6 {k=substr($2,2); v=$4;
  if (!(k in m) || v < m[k]) m[k]=v} END {b=-1; for (k in m) if (b < 0 || m[k] > m[b]) b=k; print b}' "$OUT/bench.log")
step "fastest kind for bf16 and fp32: $BEST"
if [[ -n "${PRE:-}" ]]; then
  { for t in test_dropout_gpu test_rng_gpu; do [[ -x $B/$t ]] && timeout 40 $B/$t; echo "$t rc=$?"; done
    timeout 20 $BR 256 2 1048576 2 >/dev/null; echo "BenchSmoke.Rng (bench_rng 256 2 1048576 2) rc=$?"; } >"$OUT/gpu_tests.log" 2>&1
  step "gpu tests: $(grep -E ' rc=' "$OUT/gpu_tests.log" | tr '\n' ' ') $(grep -c '^\[  PASSED' "$OUT/gpu_tests.log") binaries passed, $(grep -c '^\[  FAILED  \]' "$OUT/gpu_tests.log") FAILED lines"
else
  wait $BUILD
  step "$(tail -1 "$OUT/build.log")"
  ( cd $B && timeout 60 ctest -L gpu -R "Rng|Dropout" --output-on-failure ) >"$OUT/gpu_tests.log" 2>&1
  step "gpu tests rc=$? ($(grep -E 'tests passed|tests failed' "$OUT/gpu_tests.log"))"
fi
Q=(--config configs/quick.json --set workload.sq=8192 --set measure.min_time=0.2 --set measure.timeout=5
   --set sweep.elements=[536870912])
if fits 22 "peers"; then
  PYTHONUNBUFFERED=1 timeout 40 python3 scripts/peers.py --dropbench $B/dropbench --only dropout --config configs/quick.json \
    --set sweep.elements=[536870912] --min-time 0.2 --git-sha "${SHA:-unknown}" -o "$OUT/peers_dropout.json" \
    --md "$OUT/peers_dropout.md" >"$OUT/peers.log" 2>&1
  step "peers rc=$?"
  smi
fi
if fits 16 "dropbench dropout (kind $BEST)"; then
  DROPBENCH_SEEDED_KERNEL=$BEST timeout 30 $B/dropbench dropout "${Q[@]}" -o "$OUT/dropout_best.json" 2>&1 | tee "$OUT/dropout_best.log"
  step "dropbench dropout (kind $BEST) rc=$?"
  smi
fi
if fits 16 "dropbench dropout (built-in default)"; then
  timeout 30 $B/dropbench dropout "${Q[@]}" -o "$OUT/dropout_default.json" 2>&1 | tee "$OUT/dropout_default.log"
  step "dropbench dropout (built-in default) rc=$?"
  smi
fi
step "end"
