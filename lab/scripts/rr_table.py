#!/usr/bin/env python3
"""Markdown table of bench_attention BENCH_MODE=rr logs: per shape (SQ, dH, causal) and variant, the median over
rounds of the per-round time ratio to the list's first none variant ("x none"), one column per variant, passes
joined with " / " (files named rr_p<pass>_*.log, as scripts/device_stages.sh's rr stage writes them).
  scripts/rr_table.py DIR [--ref2] [--pair A=B ...]
    --ref2: the ratios to the second none variant (the rr2 lines) instead;
    --pair A=B: a column A / B, the quotient of the two variants' per-round-ratio medians (the logs keep no
      per-round times, so this is the ratio of medians, not the median of per-round ratios)"""
import argparse, collections, glob, os, re, sys

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--ref2", action="store_true", help="ratios to the second none variant (rr2 lines)")
    ap.add_argument("--pair", action="append", default=[], metavar="A=B", help="add a column A / B (ratio of medians)")
    args = ap.parse_args()
    pairs = []
    for p in args.pair:
        if "=" not in p: sys.exit(f"rr_table.py: --pair wants A=B (got {p!r})")
        pairs.append(tuple(x.strip() for x in p.split("=", 1)))
    d, ref2 = args.dir, args.ref2
    pat = re.compile(r"^rr SQ\s+(\d+) hd\s+(\d+) causal (\d)\s+(.+?)\s+median\s+([\d.]+) ms.*?([\d.]+) TFLOP/s.*per-round ratio median ([\d.]+)")
    pat2 = re.compile(r"^rr2 SQ\s+(\d+) hd\s+(\d+) causal (\d)\s+(.+?)\s+x (.+?) per-round median ([\d.]+)")
    cell = collections.defaultdict(lambda: collections.defaultdict(list))
    names, tfl = [], collections.defaultdict(list)
    ref2_name = None
    def pass_no(f):  # rr_p<pass>_...: numeric, so p10 sorts after p2
        m = re.match(r"rr_p(\d+)_", os.path.basename(f))
        return (int(m.group(1)) if m else 0, f)
    files = sorted(glob.glob(os.path.join(d, "rr_p*.log")), key=pass_no)
    if not files:
        sys.exit(f"rr_table.py: no rr_p*.log in {d}")
    mismatches = 0
    for f in files:
        for line in open(f):
            mismatches += "MISMATCH" in line
            m = pat.match(line)
            if m and not ref2:
                sq, hd, c, name, ms, tf, r = m.groups()
                key = (int(hd), int(sq), int(c))
                cell[key][name].append(r)
                if name not in names: names.append(name)
                if name == names[0]: tfl[key].append(tf)
            m = pat2.match(line)
            if m and ref2:
                sq, hd, c, name, ref2_name, r = m.groups()
                key = (int(hd), int(sq), int(c))
                cell[key][name].append(r)
                if name not in names: names.append(name)
    if not cell:
        sys.exit(f"rr_table.py: no rr lines in {d}")
    for a, b in pairs:
        for n in (a, b):
            if n not in names: sys.exit(f"rr_table.py: --pair: no variant {n!r} (have: {', '.join(names)})")
    pair_cols = [f"{a} / {b}" for a, b in pairs]
    print("| dH | SQ | causal | " + ("" if ref2 else "none TFLOP/s | ") + " | ".join(names + pair_cols) + " |")
    print("|---:|---:|---|" + ("" if ref2 else "---:|") + "---:|" * (len(names) + len(pairs)))
    for key in sorted(cell, key=lambda k: (-k[0], k[1], k[2])):
        hd, sq, c = key
        row = [str(hd), str(sq), "yes" if c else "no"] + ([] if ref2 else [" / ".join(tfl[key])])
        row += [" / ".join(cell[key].get(n, ["-"])) for n in names]
        for a, b in pairs:  # per pass
            ra, rb = cell[key].get(a, []), cell[key].get(b, [])
            row.append(" / ".join(f"{float(x) / float(y):.3f}" for x, y in zip(ra, rb)) or "-")
        print("| " + " | ".join(row) + " |")
    if ref2 and ref2_name: print(f"\n(ratios to `{ref2_name}`)")
    if mismatches:
        print(f"\n**{mismatches} MISMATCH line(s)** in the logs: some variant was not bitwise equal to its reference")

if __name__ == "__main__":
    main()
