#!/usr/bin/env bash
# The model with and without the power term on power reports (issue 12), no GPU needed: fits per-kernel power
# from the reports into a copy of the profile, then writes `dropbench model` (md + json) for each report with it.
#   scripts/power_model.sh BUILD OUTDIR REPORT...     e.g. scripts/power_model.sh build results/h200/session4/model results/h200/session4/power/power_llama3-*.json
set -euo pipefail
cd "$(dirname "$0")/.."
B=$1; O=$2; shift 2
mkdir -p "$O"
args=()
for r in "$@"; do args+=(--power-from "$r"); done
"$B/dropbench" profile "${args[@]}" --out "$O/profile_with_power.json" > "$O/profile_with_power.md"
for r in "$@"; do
  n=$(basename "$r" .json); n=${n#power_}
  "$B/dropbench" model --profile "$O/profile_with_power.json" --report "$r" > "$O/model_$n.md"
  "$B/dropbench" model --profile "$O/profile_with_power.json" --report "$r" --format json > "$O/model_$n.json"
done
