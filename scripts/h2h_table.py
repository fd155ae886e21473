#!/usr/bin/env python3
"""The attention targets' ratios over several scripts/h2h_attention.py reports: each report's median, and the rounds of every
report pooled (no GPU, no torch).

    scripts/h2h_table.py results/h200/attention/h2h/h2h_s1234.json results/h200/attention/h2h/h2h_s99.json

Why: one h2h report has 16 rounds of ~60 ms bursts; at the H200's 700 W cap the SM clock moves between ~1.6 and
1.97 GHz inside a burst, so a single time has a 4-6 % spread and a ratio's 95 % interval is about +-4 % wide, wider than
the targets' margins. Reports of the same build run on the same kind of GPU measure the same ratios; pooling their
rounds narrows the interval by about sqrt(number of reports). Pairs are formed only inside a round of one report
(never across reports), as h2h_attention.py forms them. The per-report medians are printed beside the pooled one so
that a difference between runs (another GPU, another seed) stays visible: where the reports disagree by more than
their intervals, the pooled figure is not a better estimate of either, and the table says so ('apart').

Energy: a report whose context says its power came from NVML_FI_DEV_POWER_INSTANT (h2h_attention.py since 9e162bd)
gives J per call; earlier reports read NVML's total-energy counter, which changes every ~100 ms, longer than a burst,
and are left out of the energy columns (their j_per_call is None or far above the 700 W cap).
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dbstats import boot_median_ci, intervals_apart, paired_ratios  # noqa: E402
from h2h_attention import KEY_RATIOS  # noqa: E402

# Energy per call, paired per round like the times: (numerator, denominator, what).
ENERGY_RATIOS = (("wgmma:none", "cudnn:none", "J per call: wgmma none / cuDNN none"),
                 ("wgmma:mask", "wgmma:none", "J per call: wgmma mask / none"),
                 ("wgmma:fused", "wgmma:none", "J per call: wgmma fused / none"),
                 ("wgmma:fused", "cudnn:dropout", "J per call: wgmma fused / cuDNN dropout"))


def shape_key(s):
    return (s["sq"], s["head_dim"], bool(s["causal"]), s.get("q_heads"), s.get("kv_heads"), s.get("batch"),
            s.get("dropout_p"), s.get("philox_rounds"))


def instant_power(doc):
    return "INSTANT" in str(doc.get("context", {}).get("power_reading", ""))


def collect(docs):
    """{shape key: {"shape": ..., "runs": [(label, samples, energy_ok)]}} in first-seen order."""
    out = {}
    for label, doc in docs:
        for p in doc.get("points", []):
            if not p.get("samples"):
                continue
            k = shape_key(p["shape"])
            out.setdefault(k, {"shape": p["shape"], "runs": []})["runs"].append((label, p["samples"], instant_power(doc)))
    return out


def ratio_cell(runs, num, den, field, need_energy):
    """(per-run [(median, lo, hi)], pooled (median, lo, hi, n), apart): pooled over the rounds of every run."""
    per, pool = [], []
    for _, samples, energy_ok in runs:
        if need_energy and not energy_ok:
            continue
        r = paired_ratios(samples, num, den, field)
        if not r:
            continue
        per.append(boot_median_ci(r))
        pool.extend(r)
    if not pool:
        return per, None, False
    med, lo, hi = boot_median_ci(pool, seed=1)
    return per, (med, lo, hi, len(pool)), intervals_apart(per)  # apart: two runs' intervals do not overlap


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def table(groups, labels):
    lines = [f"Reports: {', '.join(labels)}. Per report: median of the per-round ratios; pooled: median "
             "[95 % bootstrap interval] over the rounds of all reports (n rounds); 'apart': two reports' intervals do "
             "not overlap.\n"]
    # the four targets, then (where reports have a --lib-b build) lib B against lib A and lib B's targets
    keyr = list(KEY_RATIOS[:4]) + [r for r in KEY_RATIOS if "lib B" in r[2]]
    specs = [(num, den, what + (f" (target {t})" if t else ""), "s_per_call", False) for num, den, what, t in keyr]
    specs += [(num, den, what, "j_per_call", True) for num, den, what in ENERGY_RATIOS]
    for num, den, what, field, need_energy in specs:
        rows = []
        for g in groups.values():
            per, pooled, apart = ratio_cell(g["runs"], num, den, field, need_energy)
            if pooled is None:
                continue
            s = g["shape"]
            rows.append(f"| {s['sq']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | "
                        + " / ".join(fmt(m) for m, _, _ in per)
                        + f" | {fmt(pooled[0])} [{fmt(pooled[1])}, {fmt(pooled[2])}] ({pooled[3]})"
                        + f" | {'apart' if apart else ''} |")
        if not rows:
            continue
        lines.append(f"**{what}** (ratio of {'energies' if need_energy else 'times'} per call)\n")
        lines.append("| SQ | dH | causal | per report | pooled | |")
        lines.append("|---:|---:|---|---|---|---|")
        lines.extend(rows)
        lines.append("")
    return "\n".join(lines)


def self_test():
    fails = []

    import selftest  # the self-tests' shared checks (scripts/selftest.py)

    ok = selftest.collector(fails)

    shape = {"sq": 8192, "head_dim": 128, "causal": False, "q_heads": 32, "kv_heads": 8, "batch": 1,
             "dropout_p": 0.1, "philox_rounds": 7}

    def rep(ratio, power, rounds=8, base=1.0):
        samples = {"wgmma:none": [], "wgmma:mask": [], "cudnn:none": []}
        for r in range(rounds):
            drift = 1 + 0.05 * ((r * 7) % 5)  # a clock drift common to a round cancels in the pair
            samples["wgmma:none"].append({"round": r, "s_per_call": base * drift, "j_per_call": 1.0 * drift})
            samples["wgmma:mask"].append({"round": r, "s_per_call": base * drift * ratio, "j_per_call": 1.1 * drift})
            samples["cudnn:none"].append({"round": r, "s_per_call": base * drift * 1.03, "j_per_call": None})
        return {"context": {"power_reading": power}, "points": [{"shape": shape, "samples": samples}]}

    a = rep(1.04, "NVML_FI_DEV_POWER_INSTANT polled every 2 ms")
    b = rep(1.06, "NVML_FI_DEV_POWER_INSTANT polled every 2 ms", rounds=6)
    c = rep(1.05, "")  # energy counter: no energy columns
    g = collect([("a", a), ("b", b), ("c", c)])
    ok(len(g) == 1 and len(next(iter(g.values()))["runs"]) == 3, "one shape, three runs")
    runs = next(iter(g.values()))["runs"]
    per, pooled, apart = ratio_cell(runs, "wgmma:mask", "wgmma:none", "s_per_call", False)
    ok([round(m, 6) for m, _, _ in per] == [1.04, 1.06, 1.05], f"per-run medians {per}")
    ok(pooled[3] == 8 + 6 + 8 and abs(pooled[0] - 1.05) < 1e-9, f"pooled {pooled}")
    ok(apart, "constant ratios 1.04 / 1.06 have disjoint intervals")
    per_e, pooled_e, _ = ratio_cell(runs, "wgmma:mask", "wgmma:none", "j_per_call", True)
    ok(len(per_e) == 2 and pooled_e[3] == 14 and abs(pooled_e[0] - 1.1) < 1e-9, f"energy only where instant {pooled_e}")
    ok(ratio_cell(runs, "wgmma:none", "cudnn:none", "j_per_call", True)[1] is None, "no energy where a side lacks it")
    _, same, apart2 = ratio_cell([runs[0], runs[0]], "wgmma:mask", "wgmma:none", "s_per_call", False)
    ok(not apart2 and same[3] == 16, "a report with itself is not apart")
    md = table(g, ["a", "b", "c"])
    ok("| 8192 | 128 | no | 1.040 / 1.060 / 1.050 | 1.050 [" in md and "apart" in md, md)
    ok("J per call: wgmma mask / none" in md and "cuDNN none / wgmma none" in md, md)
    # a shape that only one report measured has its own row; points without samples are skipped
    d = rep(1.02, "", rounds=4)
    d["points"][0]["shape"] = dict(shape, sq=16384)
    d["points"].append({"shape": shape, "samples": {}})
    g2 = collect([("a", a), ("d", d)])
    ok(len(g2) == 2 and len(g2[shape_key(shape)]["runs"]) == 1, f"shapes {list(g2)}")
    return selftest.report("h2h_table", fails)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="*", help="h2h_attention.py JSON reports")
    ap.add_argument("--label", action="append", help="a name per report, in order (default: the file names)")
    ap.add_argument("--md", help="write the table here too")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.reports:
        print("h2h_table.py: error: give at least one report", file=sys.stderr)
        return 2
    if a.label and len(a.label) != len(a.reports):
        print(f"h2h_table.py: error: --label: one per report ({len(a.reports)}), got {len(a.label)}", file=sys.stderr)
        return 2
    docs = []
    for i, path in enumerate(a.reports):
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"h2h_table.py: error: {path}: {e}", file=sys.stderr)
            return 2
        if doc.get("schema") != "dropbench.h2h_attention":
            print(f"h2h_table.py: error: {path}: not an h2h_attention report (schema {doc.get('schema')!r})",
                  file=sys.stderr)
            return 2
        docs.append((a.label[i] if a.label else Path(path).stem, doc))
    md = table(collect(docs), [lab for lab, _ in docs])
    if a.md:
        Path(a.md).write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
