#!/usr/bin/env bash
# The model with and without the power term on measured reports (issue 12), no GPU needed: fits per-kernel power
# from the power reports (the run reports: --power-from) into a copy of the profile, then writes `dropbench model`
# (md + json) for every report with it (model_<name>.*: the rows carry err_no_power_%, the summary held_out /
# held_out_no_power / held_out_sustained) and with the committed profile (model_<name>_committed.*: what the
# accuracy tests read), and a table of all of them (summary.md, summary.json).
#   scripts/power_model.sh BUILD OUTDIR POWER_REPORT... [-- OTHER_REPORT...]
#   e.g. scripts/power_model.sh build results/h200/model/session6 results/h200/session6/presets/run_llama3-*.json \
#          -- results/h200/model/inputs/attention_fit.json results/h200/model/inputs/rng_fit.json
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$1; O=$2; shift 2
power=(); other=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; other=("$@"); break; fi
  power+=("$1"); shift
done
mkdir -p "$O"
args=()
for r in "${power[@]}"; do args+=(--power-from "$r"); done
"$B/dropbench" profile "${args[@]}" --out "$O/profile_with_power.json" > "$O/profile_with_power.md"
names=()
for r in "${power[@]}" "${other[@]}"; do
  n=$(basename "$r" .json); n=${n#power_}
  names+=("$n")
  "$B/dropbench" model --profile "$O/profile_with_power.json" --report "$r" > "$O/model_$n.md"
  "$B/dropbench" model --profile "$O/profile_with_power.json" --report "$r" --format json > "$O/model_$n.json"
  "$B/dropbench" model --report "$r" > "$O/model_${n}_committed.md"
  "$B/dropbench" model --report "$r" --format json > "$O/model_${n}_committed.json"
done
sha=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src configs || echo "+dirty")
python3 - "$O" "$sha" "${names[@]}" <<'PY'
import json, sys, datetime
out, sha, names = sys.argv[1], sys.argv[2], sys.argv[3:]
rows, js = [], {}
def pct(x): return f"{100 * x:.1f} %" if x is not None else "-"
for n in names:
    d = json.load(open(f"{out}/model_{n}.json")); s = d["summary"]
    c = json.load(open(f"{out}/model_{n}_committed.json"))["summary"]
    ov = [r for r in d["rows"] if r.get("piece") == "pipeline:overlap"]
    def f(key, src=s):
        v = src.get(key, {})
        return v.get("mean_abs_err") if v.get("n") else None
    e = {"held_out_sampled_with_power": f("held_out"), "held_out_sampled_without_power": f("held_out_no_power"),
         "held_out_sustained_with_power": f("held_out_sustained"),
         "held_out_sustained_rows_without_power_vs_sampled": f("held_out_sustained_no_power"),
         "committed_profile_held_out_sampled": f("held_out", c), "n": s["held_out"]["n"],
         "n_sustained": s.get("held_out_sustained", {}).get("n", 0),
         "overlap": [{"attention_kernel": r.get("attention_kernel", ""), "err_with_power_pct": r.get("err_%"),
                      "err_without_power_pct": r.get("err_no_power_%"), "err_sustained_pct": r.get("err_sustained_%")}
                     for r in ov]}
    js[n] = e
    ovs = "; ".join(f"{o['attention_kernel']}: {o['err_with_power_pct']} / {o['err_without_power_pct']} (sustained {o['err_sustained_pct']})" for o in e["overlap"]) or "-"
    rows.append(f"| {n} | {e['n']} | {pct(e['held_out_sampled_with_power'])} | {pct(e['held_out_sampled_without_power'])} | "
                f"{e['n_sustained']} | {pct(e['held_out_sustained_with_power'])} | {pct(e['committed_profile_held_out_sampled'])} | {ovs} |")
runs = [js[n] for n in names if n.startswith("run_")]
mean = lambda k: sum(r[k] for r in runs) / len(runs) if runs and all(r[k] is not None for r in runs) else None
js["_presets_mean"] = {k: mean(k) for k in ("held_out_sampled_with_power", "held_out_sampled_without_power",
                                              "held_out_sustained_with_power", "committed_profile_held_out_sampled")}
js["_meta"] = {"sha": sha, "date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), "script": "lab/scripts/power_model.sh"}
with open(f"{out}/summary.json", "w") as fh: json.dump(js, fh, indent=2); fh.write("\n")
m = js["_presets_mean"]
with open(f"{out}/summary.md", "w") as fh:
    fh.write(f"Model vs measured, held-out mean |err| (lab/scripts/power_model.sh, {js['_meta']['date_utc']} UTC, {sha}); "
             "power term: the per-kernel power fitted on the power reports (profile_with_power.json).\n\n"
             "| report | n | sampled, with power term | sampled, without | n sustained | sustained (power pass), with power term | committed profile (no power data), sampled | overlap pipeline err %: with / without power term |\n"
             "|---|---:|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n\n"
             f"Mean over the presets' reports: sampled {pct(m['held_out_sampled_with_power'])} with the power term, "
             f"{pct(m['held_out_sampled_without_power'])} without; sustained {pct(m['held_out_sustained_with_power'])} with; "
             f"committed profile {pct(m['committed_profile_held_out_sampled'])}.\n")
print(open(f"{out}/summary.md").read())
PY
