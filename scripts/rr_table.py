#!/usr/bin/env python3
"""Markdown table of bench_attention BENCH_MODE=rr logs: per shape (SQ, dH, causal) and variant, the median over
rounds of the per-round time ratio to the list's first none variant ("x none"), one column per variant, passes
joined with " / " (files named rr_p<pass>_*.log, as scripts/device_stages.sh's rr stage writes them).
  scripts/rr_table.py DIR [--ref2]   (--ref2: the ratios to the second none variant, the rr2 lines, instead)"""
import re, sys, glob, os, collections

def main():
    d = sys.argv[1]
    ref2 = "--ref2" in sys.argv
    pat = re.compile(r"^rr SQ\s+(\d+) hd\s+(\d+) causal (\d)\s+(.+?)\s+median\s+([\d.]+) ms.*?([\d.]+) TFLOP/s.*per-round ratio median ([\d.]+)")
    pat2 = re.compile(r"^rr2 SQ\s+(\d+) hd\s+(\d+) causal (\d)\s+(.+?)\s+x (.+?) per-round median ([\d.]+)")
    cell = collections.defaultdict(lambda: collections.defaultdict(list))
    names, tfl = [], collections.defaultdict(list)
    ref2_name = None
    for f in sorted(glob.glob(os.path.join(d, "rr_p*.log"))):
        for line in open(f):
            m = pat.match(line)
            if m and not ref2:
                sq, hd, c, name, ms, tf, r = m.groups()
                key = (int(hd), int(sq), int(c))
                cell[key][name].append(r)
                if name not in names: names.append(name)
                if len(tfl[key]) < 3 and name == names[0]: tfl[key].append(tf)
            m = pat2.match(line)
            if m and ref2:
                sq, hd, c, name, ref2_name, r = m.groups()
                key = (int(hd), int(sq), int(c))
                cell[key][name].append(r)
                if name not in names: names.append(name)
    print("| dH | SQ | causal | " + ("" if ref2 else "none TFLOP/s | ") + " | ".join(names) + " |")
    print("|---:|---:|---|" + ("" if ref2 else "---:|") + "---:|" * len(names))
    for key in sorted(cell, key=lambda k: (-k[0], k[1], k[2])):
        hd, sq, c = key
        row = [str(hd), str(sq), "yes" if c else "no"] + ([] if ref2 else [" / ".join(tfl[key])])
        row += [" / ".join(cell[key].get(n, ["-"])) for n in names]
        print("| " + " | ".join(row) + " |")
    if ref2 and ref2_name: print(f"\n(ratios to `{ref2_name}`)")

if __name__ == "__main__":
    main()
