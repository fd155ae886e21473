#!/usr/bin/env python3
"""`dropbench rng` reports as a markdown table of each point's mask kernel against the Philox ceiling measured
in the same interleaved group (variant `ceiling`): time, Gelem/s of both, and derived.ceiling_fraction with its
paired bootstrap interval (issue 16's figure of merit).

    scripts/rng_ceiling_table.py RNG_REPORT.json ...
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # dropbench_report
import dropbench_report as dr  # noqa: E402


def main(paths):
    print("| point | mask kernel µs | its Gelem/s | ceiling Gelem/s | % of ceiling [95 %] |")
    print("|---|---:|---:|---:|---|")
    for path in paths:
        for p in dr.load(path).points:
            k, c = p.variant("rng"), p.variant("ceiling")
            if k is None or c is None or "ceiling_fraction" not in k.derived:
                continue
            lo, hi = k.derived.get("ceiling_fraction_ci") or (float("nan"), float("nan"))
            axes = " ".join(f"{a}={v}" for a, v in p.axes.items())
            print(f"| {axes} | {k.median * 1e6:.1f} | {k.derived['gelem_s']:.0f} | {c.derived['gelem_s']:.0f} | "
                  f"{100 * k.derived['ceiling_fraction']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
