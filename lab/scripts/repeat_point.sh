#!/usr/bin/env bash
# Issue 13's run-to-run check: the same `dropbench run` point (Llama-3 70B, SQ 8192, Philox-7, every overlap
# mechanism) N times back to back; one report per run under $OUT (or results-repeat/): ${TAG}_i.json, their tables
# in ${TAG}_out.md, stderr in ${TAG}_err.log; then the spread of its ratios (scripts/repeat_spread.py ->
# ${TAG}_spread.md and .json). N + 4 files: within the device's 8 files back for N = 3.
#   scripts/repeat_point.sh BUILD [N=3] [TAG=run] [extra dropbench args...]
# REPEATS=K (env) measures every group K times inside each run (measure.repeats, docs/measurement.md) with
# groups of a fixed length (ROUNDS rounds per repeat, default 200: max_noise is set unreachably low so neither a
# noise rule nor min_time ends a group early), GAP idle seconds between repeats (default 1), no power pass and
# the per-round series kept. Sized for N=3 runs in under 4 minutes on the H200 (an estimate from the 2026-12-01
# runs, ~1 min each with longer groups; each run is killed after RUN_TIMEOUT, default 300 s). The script prints
# the wall time. Without REPEATS: the settings of the 2026-12-01 before/after runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$1; N=${2:-3}; TAG=${3:-run}; shift 3 || shift $#
O=${OUT:-results-repeat}
mkdir -p "$O"
if [[ -n "${REPEATS:-}" ]]; then
  SET=(--top-k 1 --set measure.throttle=0 --set measure.power_time=0 --set "measure.repeats=$REPEATS"
       --set "measure.repeat_gap=${GAP:-1}" --set "measure.max_samples=${ROUNDS:-200}" --set measure.min_samples=10
       --set measure.min_time=0 --set measure.max_noise=1e-9 --set measure.timeout=2 --set measure.keep_series=true)
else
  SET=(--top-k 1 --min-time 0.1 --max-noise 0.01 --set measure.timeout=2 --set measure.throttle=0)
fi
t_all=$(date +%s)
reports=()
for i in $(seq 1 "$N"); do
  t0=$(date +%s)
  timeout "${RUN_TIMEOUT:-300}" "$B/dropbench" run --config configs/llama3-70b.json -q --set 'sweep.sq=[8192]' \
    --set 'sweep.rounds=[7]' "${SET[@]}" "$@" -o "$O/${TAG}_$i.json" >> "$O/${TAG}_out.md" 2>> "$O/${TAG}_err.log"
  echo "$TAG run $i: exit $? in $(( $(date +%s) - t0 )) s"
  [[ -s "$O/${TAG}_$i.json" ]] && reports+=("$O/${TAG}_$i.json")
done
echo "$TAG: $N runs in $(( $(date +%s) - t_all )) s"
if (( ${#reports[@]} >= 2 )); then
  python3 lab/scripts/repeat_spread.py --label "$TAG" "${reports[@]}" --json "$O/${TAG}_spread.json" > "$O/${TAG}_spread.md"
  cat "$O/${TAG}_spread.md"
fi
