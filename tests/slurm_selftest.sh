#!/bin/bash
# scripts/slurm/ without Slurm: both scripts parse (bash -n); submit.sh, against a stand-in sbatch that records
# what it was asked, submits an array of N tasks and a merge job after it (afterok); sweep.sbatch, run as each
# array task would be (SLURM_ARRAY_TASK_ID set), writes its shard, resumes an interrupted one; the recorded merge
# command then joins the shards into a complete report equal to one unsharded run.
#   tests/slurm_selftest.sh BUILD/dropbench
set -euo pipefail
dropbench=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "slurm self-test: FAILED: $*" >&2; exit 1; }

bash -n "$repo/scripts/slurm/sweep.sbatch" || fail "sweep.sbatch does not parse"
bash -n "$repo/scripts/slurm/submit.sh" || fail "submit.sh does not parse"

sweep=(rng --dry-run -q --set 'sweep.sq=[64,128,256]' --set 'sweep.rounds=[3,5,7]' --set 'sweep.threshold_bits=[8]'
       --set 'sweep.layout=[tile]')

# A stand-in sbatch: logs each call's arguments (one per line, calls separated by ---), keeps --wrap's command.
mkdir -p "$tmp/bin"
cat > "$tmp/bin/sbatch" <<'FAKE'
#!/bin/bash
n=$(cat "$FAKE_DIR/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$FAKE_DIR/count"
{ printf '%s\n' "$@"; echo ---; } >> "$FAKE_DIR/log"
for a in "$@"; do case $a in --wrap=*) printf '%s\n' "${a#--wrap=}" > "$FAKE_DIR/wrap" ;; esac; done
echo "$((1000 + n));cluster"
FAKE
chmod +x "$tmp/bin/sbatch"
out="$tmp/out"
FAKE_DIR=$tmp PATH="$tmp/bin:$PATH" "$repo/scripts/slurm/submit.sh" -n 3 -o "$out" -p gpu -- "$dropbench" "${sweep[@]}" \
  > "$tmp/submit.txt"
[ "$(cat "$tmp/count")" = 2 ] || fail "submit.sh made $(cat "$tmp/count") sbatch calls, expected 2"
grep -qx -- '--array=0-2' "$tmp/log" || fail "no --array=0-2 in: $(cat "$tmp/log")"
grep -qx -- '--dependency=afterok:1000' "$tmp/log" || fail "the merge job does not wait for the array (afterok:1000)"
grep -qx -- 'gpu' "$tmp/log" || fail "-p gpu not passed on"
grep -q "merge .*shard-2-of-3.json -o .*all.json" "$tmp/wrap" || fail "merge command: $(cat "$tmp/wrap")"

# The array tasks, as Slurm would start them; task 1 is interrupted once and then resumes.
task() { SLURM_ARRAY_TASK_ID=$1 DROPBENCH_SHARDS=3 bash "$repo/scripts/slurm/sweep.sbatch" "$out" "$dropbench" "${sweep[@]}" >/dev/null; }
task 0
rc=0
DROPBENCH_TEST_INTERRUPT_AFTER=1 task 1 2>/dev/null || rc=$?
[ "$rc" = 130 ] || fail "interrupted task exit $rc, expected 130"
grep -q '"complete": false' "$out/shard-1-of-3.json" || fail "interrupted shard not marked incomplete"
task 1
grep -q '"resumed_from"' "$out/shard-1-of-3.json" || fail "task 1 did not resume its incomplete report"
task 2
task 0  # submitted again: a complete shard is resumed (nothing measured), not measured over
grep -q '"points_kept": 3' "$out/shard-0-of-3.json" || fail "a complete shard was not kept when its task ran again"
bash -c "$(cat "$tmp/wrap")" 2>/dev/null || fail "merge job failed"
"$dropbench" "${sweep[@]}" -o "$tmp/one.json" >/dev/null
python3 - "$out/all.json" "$tmp/one.json" <<'PY' || fail "merged report differs from the unsharded run"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["complete"] is True, a.get("incomplete_reason")
assert a["points"] == b["points"], "points differ"
assert len(a["merged_from"]) == 3
PY
echo "slurm self-test: ok"
