#!/usr/bin/env python3
"""Run-to-run spread of one point's ratios over repeated `dropbench run` reports (issue 13's before/after check).

  scripts/repeat_spread.py --label before results/.../before_*.json --label after results/.../after_*.json

For each figure (the point's pipeline speedups, each fixed mechanism's hidden fraction, the pieces' medians):
the values of the repeats, their spread (max - min; relative to the mean for speedups and times), the reported
95 % intervals where the reports have them, and whether every repeat's value lies inside every other repeat's
interval. Markdown on stdout; --json FILE writes the same figures."""
import argparse
import json
import sys

SPEEDUPS = ["speedup_fused_vs_baseline", "speedup_overlap_vs_baseline", "speedup_overlap_vs_fused",
            "speedup_chunked_vs_baseline", "speedup_chunked_vs_overlap"]
MECHS = ["mech:plain", "mech:priority", "mech:coresident-w4"]
PIECES = ["alone:gemm", "alone:rng", "alone:attention-mask", "alone:attention-fused"]


def figures(path):
    d = json.load(open(path))
    p = d["points"][0]
    out = {}
    for k in SPEEDUPS:
        if k in p["derived"]:
            out[k] = (p["derived"][k], p["derived"].get(k + "_ci"))
    by = {v["name"]: v for v in p["variants"]}
    for m in MECHS:
        if m in by:
            out["hidden " + m] = (by[m]["derived"].get("hidden"), by[m]["derived"].get("hidden_ci"))
    for n in PIECES:
        if n in by:
            ci = by[n]["stats"].get("median_ci")
            out["median_us " + n] = (by[n]["stats"]["median"] * 1e6, [c * 1e6 for c in ci] if ci else None)
    return out


def spread(label, paths):
    runs = [figures(p) for p in paths]
    rows = []
    for key in runs[0]:
        vals = [r[key][0] for r in runs if key in r and r[key][0] is not None]
        cis = [r[key][1] for r in runs if key in r]
        if len(vals) < 2:
            continue
        absolute = key.startswith("hidden")
        mean = sum(vals) / len(vals)
        sp = max(vals) - min(vals)
        rel = sp if absolute else sp / mean
        inside = None
        if all(c for c in cis):
            inside = all(c[0] <= v <= c[1] for c in cis for v in vals)
        rows.append({"set": label, "figure": key, "values": vals, "cis": cis, "spread": rel,
                     "spread_kind": "absolute" if absolute else "relative", "all_inside_every_interval": inside})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", action="append", nargs="+", required=True, metavar=("LABEL", "REPORT"))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for group in a.label:
        if len(group) < 3:
            sys.exit("repeat_spread: --label needs a label and at least two reports")
        rows += spread(group[0], group[1:])
    print("| set | figure | values | spread | reported 95 % intervals | all inside every interval |")
    print("|---|---|---|---:|---|---|")
    for r in rows:
        f = "{:.4f}" if not r["figure"].startswith("median") else "{:.1f}"
        vals = ", ".join(f.format(v) for v in r["values"])
        sp = "{:.3f}".format(r["spread"]) if r["spread_kind"] == "absolute" else "{:.2f} %".format(100 * r["spread"])
        cis = "; ".join("[" + ", ".join(f.format(x) for x in c) + "]" if c else "-" for c in r["cis"])
        ins = {None: "-", True: "yes", False: "no"}[r["all_inside_every_interval"]]
        print(f"| {r['set']} | {r['figure']} | {vals} | {sp} | {cis} | {ins} |")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
