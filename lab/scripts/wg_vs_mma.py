#!/usr/bin/env python3
"""The wgmma attention's time against the mma kernel's measured in the same call, from
scripts/attention_peer_table.py tables (table.md) of several calls: per shape, wgmma / mma time for mode none and
for fused dropout. The mma kernel is old, unchanged code, so these ratios compare calls made on different GPUs
better than absolute times do.
  scripts/wg_vs_mma.py LABEL=TABLE.md [LABEL=TABLE.md ...]
"""
import sys


def read(path):
    rows = {}
    for line in open(path):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) < 13 or not c[0].isdigit():
            continue
        sq, hd, causal = c[0], c[1], c[2]
        wg_none, fused_r, mma_none, mma_fused_r = float(c[3]), float(c[7]), float(c[10]), float(c[11])
        # TFLOP/s columns: time ratio wgmma / mma = mma TFLOP/s / wgmma TFLOP/s (same FLOP count)
        rows[(int(sq), int(hd), causal)] = (mma_none / wg_none, (fused_r / wg_none) / (mma_fused_r / mma_none))
    return rows


def main():
    calls = [a.split("=", 1) for a in sys.argv[1:]]
    if not calls:
        sys.exit(__doc__)
    data = [(lab, read(p)) for lab, p in calls]
    keys = sorted(set().union(*(d.keys() for _, d in data)))
    print("| SQ | dH | causal | " + " | ".join(f"{lab} none / fused" for lab, _ in data) + " |")
    print("|---:|---:|---|" + "---|" * len(data))
    for k in keys:
        cells = [f"{d[k][0]:.3f} / {d[k][1]:.3f}" if k in d else "-" for _, d in data]
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
