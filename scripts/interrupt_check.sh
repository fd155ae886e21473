#!/usr/bin/env bash
# On a GPU: a real SIGINT in the middle of a measuring `dropbench run` sweep, then --resume to finish it.
# Checks exit 130, "complete": false with the reason, then a resumed report with every point and "complete": true.
#   scripts/interrupt_check.sh BUILD      (reports and logs under $OUT or results-interrupt/)
set -uo pipefail
cd "$(dirname "$0")/.."
B=$1
O=${OUT:-results-interrupt}
mkdir -p "$O"
ARGS=(run --config configs/llama3-8b.json -q --no-explore --set 'sweep.sq=[2048,4096,8192]' --set 'sweep.rounds=[7]'
      --min-time 0.05 --max-noise 0.02 --set measure.timeout=1 --set measure.throttle=0 --set measure.power_time=0.2)
"$B/dropbench" "${ARGS[@]}" -o "$O/interrupted.json" > /dev/null 2> "$O/interrupted.err" &
pid=$!
sleep "${DELAY:-12}"
kill -INT "$pid"
wait "$pid"; rc=$?
echo "interrupted run: exit $rc"; cat "$O/interrupted.err"
python3 - "$O/interrupted.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("complete:", d.get("complete"), "points kept:", len(d["points"]), "of", d.get("total_points"),
      "reason:", json.dumps(d.get("incomplete_reason")))
PY
cp "$O/interrupted.json" "$O/resumed.json"
"$B/dropbench" "${ARGS[@]}" --resume "$O/resumed.json" -o "$O/resumed.json" > /dev/null 2> "$O/resumed.err"; echo "resumed run: exit $?"
python3 - "$O/resumed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("complete:", d.get("complete"), "points:", [p["index"] for p in d["points"]], "of", d.get("total_points"))
PY
