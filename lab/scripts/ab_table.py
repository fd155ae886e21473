#!/usr/bin/env python3
"""Tabulate lab/scripts/ab_bench_attention.sh's logs: per (shape, dH, causal, mode, kernel family) the B / A time
ratio of each A-B pair (the two binaries' processes run back to back on one GPU), their median, min and max, and both
sides' median ms (scripts/dbstats.py's median). Rows are keyed by kernel family (the instance name's first word), not
the instance name: the two commits may name a schedule differently (B's persistent mask ends in _persist).
  lab/scripts/ab_table.py OUTDIR
"""
import collections
import glob
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import dbstats  # noqa: E402  (the scripts' one statistics module)

ROW = re.compile(r"^(\d+)\s+(yes|no)\s+(.+?)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def rows(path):
    out = {}
    for line in open(path):
        m = ROW.match(line)
        if not m:
            continue
        hd, causal, mode, name, ms = m.group(1), m.group(2), m.group(3).strip(), m.group(4), float(m.group(5))
        if name.startswith("variant"):
            continue
        out[(hd, causal, mode, name.split("_")[0])] = (ms, name)
    return out


def main():
    d = sys.argv[1]
    runs = collections.defaultdict(dict)  # (sq, hq, k) -> side -> rows
    for p in glob.glob(os.path.join(d, "ab_*_*_*_[AB].log")):
        sq, hq, k, side = os.path.basename(p)[3:-4].split("_")
        runs[(int(sq), int(hq), int(k))][side] = rows(p)
    table = collections.defaultdict(lambda: {"r": [], "a": [], "b": [], "names": set()})
    for (sq, hq, k), sides in sorted(runs.items()):
        if "A" not in sides or "B" not in sides:
            continue
        for key, (ms_a, name_a) in sides["A"].items():
            if key not in sides["B"]:
                continue
            ms_b, name_b = sides["B"][key]
            t = table[(sq, hq) + key]
            t["r"].append(ms_b / ms_a)
            t["a"].append(ms_a)
            t["b"].append(ms_b)
            t["names"].add(name_a if name_a == name_b else f"{name_a} / {name_b}")
    print("| SQ | q heads | dH | causal | mode | family | pairs | A ms | B ms | B / A median [min, max] | instances (A / B) |")
    print("|---:|---:|---:|---|---|---|---:|---:|---:|---|---|")
    for key in sorted(table):
        t = table[key]
        sq, hq, hd, causal, mode, fam = key
        print(f"| {sq} | {hq} | {hd} | {causal} | {mode} | {fam} | {len(t['r'])} | {dbstats.median(t['a']):.3f} | "
              f"{dbstats.median(t['b']):.3f} | {dbstats.median(t['r']):.3f} [{min(t['r']):.3f}, {max(t['r']):.3f}] | "
              f"{'; '.join(sorted(t['names']))} |")


if __name__ == "__main__":
    main()
