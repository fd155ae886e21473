#!/usr/bin/env python3
"""Warp-stall breakdown per kernel from Nsight Compute's source page (`ncu --import R.ncu-rep --page source --csv
--print-source sass`, plain or gzipped), as scripts/device_stages.sh stage ncu writes it.

For each kernel in the file: the sampled warp stalls by reason (share of all samples), the issued share, and the
SASS opcodes that collect the most samples, with what they stall on.
  scripts/ncu_stalls.py ncu_source_hd128.csv.gz [--top 8] [--md]
"""
import argparse
import csv
import gzip
import io
import re
import sys
from collections import Counter, defaultdict


def kernels(path):
    """(kernel name, rows) per kernel section of the source CSV."""
    raw = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
    name, header, rows, out = None, None, [], []
    for rec in csv.reader(raw):
        if not rec:
            continue
        if rec[0] == "Kernel Name":
            if name is not None:
                out.append((name, rows))
            name, header, rows = rec[1], None, []
        elif header is None and rec[0] == "Address":
            header = rec
        elif header is not None and len(rec) >= len(header) - 1:
            rows.append(dict(zip(header, rec)))
    if name is not None:
        out.append((name, rows))
    # the source page repeats a kernel's section (once per source view); keep each kernel once
    seen, uniq = set(), []
    for n, r in out:
        if n not in seen:
            seen.add(n)
            uniq.append((n, r))
    return uniq


def short(name):
    m = re.search(r"attn_fwd_wgmma_kernel<.*?WgCfg<([^>]*)>, \(dropbench::DropoutMode\)(\d)", name)
    if m:
        return f"ours wgmma mode {['none', 'mask', 'fused'][int(m.group(2))]} WgCfg<{re.sub(r'[(][a-z]+[)]', '', m.group(1))}>"
    return name[:70]


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


def summarize(rows, top):
    reasons = [c for c in rows[0] if c.startswith("stall_") and "(Not Issued)" not in c] if rows else []
    tot = Counter()
    by_op = defaultdict(Counter)
    for r in rows:
        op = r["Source"].strip().split(" ")[0] if r["Source"].strip() else "?"
        if op.startswith("@"):
            op = r["Source"].strip().split(" ")[1]
        op = op.split(".")[0]
        for c in reasons:
            v = num(r[c])
            tot[c] += v
            by_op[op][c] += v
        tot["samples"] += num(r["Warp Stall Sampling (All Samples)"])
        tot["not_issued"] += num(r["Warp Stall Sampling (Not-issued Samples)"])
        by_op[op]["samples"] += num(r["Warp Stall Sampling (All Samples)"])
    return tot, by_op, reasons


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source_csv")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    ks = kernels(a.source_csv)
    if not ks:
        sys.exit(f"ncu_stalls: no kernel section in {a.source_csv}")
    allreasons = set()
    summ = []
    for name, rows in ks:
        tot, by_op, reasons = summarize(rows, a.top)
        allreasons |= set(reasons)
        summ.append((short(name), tot, by_op))
    order = sorted(allreasons, key=lambda c: -max(t[c] / max(t["samples"], 1) for _, t, _ in summ))
    order = [c for c in order if max(t[c] / max(t["samples"], 1) for _, t, _ in summ) >= 0.01]
    print("| stall reason (share of samples) | " + " | ".join(n for n, _, _ in summ) + " |")
    print("|---|" + "---|" * len(summ))
    for c in order:
        print(f"| {c[6:]} | " + " | ".join(f"{t[c] / max(t['samples'], 1):.3f}" for _, t, _ in summ) + " |")
    for n, t, by_op in summ:
        print(f"\n{n}: SASS opcodes by share of samples (top {a.top}), with their two main stall reasons")
        for op, cnt in sorted(by_op.items(), key=lambda kv: -kv[1]["samples"])[:a.top]:
            main = sorted(((cnt[c], c[6:]) for c in cnt if c.startswith("stall_")), reverse=True)[:2]
            ns = max(cnt["samples"], 1)
            why = ", ".join(f"{r} {v / ns:.2f}" for v, r in main)
            print(f"- {op}: {cnt['samples'] / max(t['samples'], 1):.3f} ({why})")


if __name__ == "__main__":
    main()
