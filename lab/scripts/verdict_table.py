#!/usr/bin/env python3
"""The fuse-vs-separate verdict of a `dropbench run` report as one markdown table: per point (and attention
kernel) each pipeline's sampled median, the winner, the fused-vs-baseline and overlap-vs-baseline speedups with
their 95 % intervals, the sustained (power-pass) winner and the energy winner where the report has them.

    scripts/verdict_table.py REPORT.json [REPORT.json ...]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))  # dropbench_report
import dropbench_report as dr  # noqa: E402


def fmt_ci(d, key):
    v, ci = d.get(key), d.get(key + "_ci")
    if v is None:
        return "-"
    if isinstance(ci, list) and len(ci) == 2 and None not in ci:
        return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{v:.3f}"


def main(paths):
    cols = ["report", "point", "baseline µs", "fused µs", "overlap µs", "chunked µs", "winner",
            "fused vs baseline", "overlap vs baseline", "sustained winner (fused vs baseline)", "energy winner"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for path in paths:
        rep = dr.load(path)
        for p in rep.points:
            d = p.derived
            med = {v.name: v.median * 1e6 for v in p.variants if v.is_pipeline and dr.finite(v.median)}
            sus = d.get("sustained_winner", "-")
            if "speedup_fused_vs_baseline_sustained" in d:
                sus += f" ({d['speedup_fused_vs_baseline_sustained']:.3f})"
            cells = [os.path.basename(path), " ".join(f"{k}={x}" for k, x in p.axes.items())]
            cells += [f"{med[n]:.0f}" if n in med else "-" for n in ("baseline", "fused", "overlap", "chunked")]
            cells += [d.get("winner", "-"), fmt_ci(d, "speedup_fused_vs_baseline"),
                      fmt_ci(d, "speedup_overlap_vs_baseline"), sus, d.get("energy_winner", "-")]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
