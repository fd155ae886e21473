#!/usr/bin/env python3
"""Run-to-run spread of one point's ratios over repeated `dropbench run` reports (issue 13's before/after check).

  scripts/repeat_spread.py --label before results/.../before_*.json --label after results/.../after_*.json

For each figure (the point's pipeline speedups, each fixed mechanism's hidden fraction, the pieces' medians):
the values of the runs, their spread (max - min; relative to the mean for speedups and times), the reported
95 % intervals (`*_ci`: the combined interval when the reports were made with measure.repeats > 1), and in how
many (run i, run j != i) pairs run i's value lies inside run j's interval: the combined one ("inside the
combined interval") and the within-run one (`*_ci_within`; the same as `*_ci` without repeats). Markdown on
stdout; --json FILE writes the same figures."""
import argparse
import json
import sys

SPEEDUPS = ["speedup_fused_vs_baseline", "speedup_overlap_vs_baseline", "speedup_overlap_vs_fused",
            "speedup_chunked_vs_baseline", "speedup_chunked_vs_overlap"]
MECHS = ["mech:plain", "mech:priority", "mech:coresident-w4"]
PIECES = ["alone:gemm", "alone:rng", "alone:attention-mask", "alone:attention-fused"]


def figures(path):
    """figure -> (value, combined interval, within-run interval, per-repeat values)"""
    d = json.load(open(path))
    p = d["points"][0]
    out = {}

    def take(obj, key, value, scale=1.0):
        ci = obj.get(key + "_ci")
        within = obj.get(key + "_ci_within", ci)
        reps = (obj.get(key + "_repeats") or {}).get("values")
        sc = (lambda c: [x * scale for x in c] if c else None)
        return (value * scale if value is not None else None, sc(ci), sc(within),
                [x * scale if x is not None else None for x in reps] if reps else None)

    for k in SPEEDUPS:
        if k in p["derived"]:
            out[k] = take(p["derived"], k, p["derived"][k])
    by = {v["name"]: v for v in p["variants"]}
    for m in MECHS:
        if m in by:
            out["hidden " + m] = take(by[m]["derived"], "hidden", by[m]["derived"].get("hidden"))
    for n in PIECES:
        if n in by:
            out["median_us " + n] = take(by[n]["stats"], "median", by[n]["stats"]["median"], 1e6)
    return out


def inside_pairs(vals, cis):
    """(pairs i != j with vals[i] inside cis[j], pairs), or None when some run has no interval"""
    if not all(cis):
        return None
    n = len(vals)
    hit = sum(1 for i in range(n) for j in range(n) if i != j and cis[j][0] <= vals[i] <= cis[j][1])
    return hit, n * (n - 1)


def spread(label, paths):
    runs = [figures(p) for p in paths]
    rows = []
    for key in runs[0]:
        have = [r[key] for r in runs if key in r and r[key][0] is not None]
        if len(have) < 2:
            continue
        vals = [h[0] for h in have]
        cis, within = [h[1] for h in have], [h[2] for h in have]
        absolute = key.startswith("hidden")
        mean = sum(vals) / len(vals)
        sp = max(vals) - min(vals)
        rel = sp if absolute else sp / mean
        rows.append({"set": label, "figure": key, "values": vals, "cis": cis, "cis_within": within,
                     "repeats": [h[3] for h in have], "spread": rel,
                     "spread_kind": "absolute" if absolute else "relative",
                     "inside_combined": inside_pairs(vals, cis), "inside_within": inside_pairs(vals, within)})
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
    print("| set | figure | values | spread | reported 95 % intervals (combined) | inside the combined interval "
          "| inside the within-run interval |")
    print("|---|---|---|---:|---|---|---|")
    for r in rows:
        f = "{:.4f}" if not r["figure"].startswith("median") else "{:.1f}"
        vals = ", ".join(f.format(v) for v in r["values"])
        sp = "{:.3f}".format(r["spread"]) if r["spread_kind"] == "absolute" else "{:.2f} %".format(100 * r["spread"])
        cis = "; ".join("[" + ", ".join(f.format(x) for x in c) + "]" if c else "-" for c in r["cis"])

        def pairs(p):
            return "-" if p is None else ("yes" if p[0] == p[1] else "no") + " ({}/{})".format(*p)
        print(f"| {r['set']} | {r['figure']} | {vals} | {sp} | {cis} | {pairs(r['inside_combined'])} "
              f"| {pairs(r['inside_within'])} |")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
