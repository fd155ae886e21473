#!/usr/bin/env python3
"""Table of the P V wait A/B: bench_attention BENCH_RR_SET=s15 logs (scripts/device_stages.sh stage wsrr at d1a6f75)
-> per shape, mode and WAIT_SPLIT level, the time ratio to the same mode at level 0, per pass.

Mode none: the per-round ratio's median [p10, p90] (the benchmark pairs every variant with the dispatched none in each
round). Mask and fused: the ratio of the two variants' median times (the benchmark prints no per-round ratio between
them). Also each mode's level-0 time over none's (per-round median).
  lab/scripts/wsrr_table.py LOG_DIR > table.md
"""
import glob
import os
import re
import sys
from collections import defaultdict

LINE = re.compile(r"rr SQ +(\d+) hd +(\d+) causal (\d)  (.+?) +median +([0-9.]+) ms .*?x none [0-9.]+ "
                  r"\(per-round ratio median ([0-9.]+), p10 ([0-9.]+) p90 ([0-9.]+)\)")
MODES = {"none": ["none", "none split1", "none split2", "none split3"],
         "mask": ["mask", "mask split1", "mask split2"],
         "fused": ["fused(a)", "fused(a) split1", "fused(a) split2"]}


def read(d):
    r = defaultdict(dict)
    for f in sorted(glob.glob(os.path.join(d, "wsrr_p*.log"))):
        p = re.search(r"_p(\d+)_", f).group(1)
        h = re.search(r"_h(\d+)_", f).group(1)
        for line in open(f):
            m = LINE.match(line)
            if m:
                sq, hd, c, name, med, prr, p10, p90 = m.groups()
                r[(int(sq), int(h), int(hd), int(c))][(name.strip(), p)] = tuple(map(float, (med, prr, p10, p90)))
    return r


def main():
    r = read(sys.argv[1])
    passes = sorted({p for d in r.values() for (_, p) in d})
    print("| SQ | heads | dH | causal | mode | level 0 / none | level 1 / 0 | level 2 / 0 | level 3 / 0 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in sorted(r):
        d = r[k]
        for mode, vs in MODES.items():
            cells = []
            base = " / ".join(f"{d[(vs[0], p)][1]:.3f}" for p in passes if (vs[0], p) in d)
            for v in vs[1:] + ([] if mode == "none" else [None]):
                if v is None:
                    cells.append("–")
                    continue
                per = []
                for p in passes:
                    if (v, p) not in d or (vs[0], p) not in d:
                        continue
                    if mode == "none":
                        _, prr, p10, p90 = d[(v, p)]
                        per.append(f"{prr:.3f} [{p10:.3f}, {p90:.3f}]")
                    else:
                        per.append(f"{d[(v, p)][0] / d[(vs[0], p)][0]:.3f}")
                cells.append(" / ".join(per) if per else "–")
            sq, h, hd, c = k
            print(f"| {sq} | {h} / 8 | {hd} | {'yes' if c else 'no'} | {mode} | {base} | " + " | ".join(cells) + " |")
    mism = sum(open(f).read().count("MISMATCH") for f in glob.glob(os.path.join(sys.argv[1], "wsrr_p*.log")))
    print(f"\nPasses: {', '.join(passes)} (one process per shape and pass). Bitwise mismatches reported: {mism}.")


if __name__ == "__main__":
    main()
