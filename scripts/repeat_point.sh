#!/usr/bin/env bash
# Issue 13's before/after check: the same `dropbench run` point (Llama-3 70B, SQ 8192, Philox-7, every overlap
# mechanism) N times back to back; one report per repeat under $OUT (or results-repeat/), then the spread of its
# ratios (scripts/repeat_spread.py).   scripts/repeat_point.sh BUILD [N=3] [TAG=run] [extra dropbench args...]
set -uo pipefail
cd "$(dirname "$0")/.."
B=$1; N=${2:-3}; TAG=${3:-run}; shift 3 || shift $#
O=${OUT:-results-repeat}
mkdir -p "$O"
for i in $(seq 1 "$N"); do
  t0=$(date +%s)
  timeout 300 "$B/dropbench" run --config configs/llama3-70b.json -q --set 'sweep.sq=[8192]' --set 'sweep.rounds=[7]' \
    --top-k 1 --min-time 0.1 --max-noise 0.01 --set measure.timeout=2 --set measure.throttle=0 "$@" \
    -o "$O/${TAG}_$i.json" > "$O/${TAG}_$i.md" 2>> "$O/${TAG}_err.log"
  echo "$TAG repeat $i: exit $? in $(( $(date +%s) - t0 )) s"
done
