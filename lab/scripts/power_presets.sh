#!/usr/bin/env bash
# Issue 12's evidence in one device call: the three Llama-3 presets (SQ 8192, Philox-7, every overlap mechanism)
# through `dropbench run` with the power pass on, so each report carries W, J and capped share per variant, the
# energy per block per pipeline and each mechanism's hidden fraction beside its energy bound. nvidia-smi before and
# after each run. Reports under $OUT (or results-power/).   scripts/power_presets.sh BUILD
set -uo pipefail
cd "$(dirname "$0")/../.."
B=$1
O=${OUT:-results-power}
mkdir -p "$O"
. scripts/env.sh
smi() { smi_log "$O/smi.csv"; }
smi
for p in 8b 70b 405b; do
  t0=$(date +%s)
  timeout 150 "$B/dropbench" run --config configs/llama3-$p.json -q --set 'sweep.sq=[8192]' --set 'sweep.rounds=[7]' \
    --top-k 1 --min-time 0.1 --max-noise 0.01 --set measure.timeout=2 --set measure.throttle=0 \
    --set measure.power_time=0.5 -o "$O/power_llama3-$p.json" > "$O/power_llama3-$p.md" 2>> "$O/power_err.log"
  echo "power run $p: exit $? in $(( $(date +%s) - t0 )) s"; smi
done
