#!/usr/bin/env python3
"""What an h2h_attention_bwd.py run's lib A / lib B pairs and its round orders show, from its JSON (plain or .gz):

  - per family pair (bwd:wg against bwd:wgB, bwd:ours against bwd:wgB), the geometric mean of the per-round time
    ratios over every shape and mode, their standard deviation (of the log) and the mean SM-clock ratio of the
    same samples; run on a null A/B (one library loaded as lib A and as lib B) it is the harness's bias;
  - the slope of log(time / the variant's median) against the position in the round;
  - the mean of that log by the family that ran just before (a predecessor that leaves the GPU in another power
    state shows here).

    python3 lab/scripts/ab_null.py lab/journal/data/2026-12-06-bwd-staging-order-null-ab/null1.json.gz
"""
import collections
import gzip
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import dbstats  # noqa: E402  (the scripts' one statistics module: paired ratios, mean, stdev)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def slope(xs, ys):
    mx, my = dbstats.mean(xs), dbstats.mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def pair_lines(points):
    out = []
    for fam in ("wg", "ours"):
        logs, mhz = [], []
        for p in points:
            for m in ("none", "mask", "fused"):
                a, b = f"bwd:{fam}:{m}", f"bwd:wgB:{m}"
                logs += [math.log(x) for x in dbstats.paired_ratios(p["samples"], a, b)]
                mhz += dbstats.paired_ratios(p["samples"], a, b, field="mean_mhz")
        if len(logs) > 1:
            out.append(f"bwd:{fam} / bwd:wgB: geometric mean {math.exp(dbstats.mean(logs)):.4f} over {len(logs)} "
                       f"pairs, sd of log {dbstats.stdev(logs):.3f}, SM clock ratio "
                       f"{dbstats.mean(mhz) if mhz else float('nan'):.3f}")
    return out


def order_lines(points):
    pos, dev = [], []
    after = collections.defaultdict(list)
    for p in points:
        med = {n: dbstats.median(x["s_per_call"] for x in v) for n, v in p["samples"].items()}
        rounds = collections.defaultdict(dict)
        for n, v in p["samples"].items():
            for x in v:
                d = math.log(x["s_per_call"] / med[n])
                pos.append(x["pos"])
                dev.append(d)
                rounds[x["round"]][x["pos"]] = (n, d)
        for seq in rounds.values():
            for k in sorted(seq):
                if k > 0 and k - 1 in seq:
                    after[seq[k - 1][0].split(":")[1]].append(seq[k][1])
    out = [f"log(time / median) against the position in the round: slope {slope(pos, dev):+.4f} per position"]
    out += [f"  after {fam}: mean log(time / median) {dbstats.mean(v):+.4f} ({len(v)} samples)"
            for fam, v in sorted(after.items())]
    return out


def main(argv):
    if len(argv) != 1:
        print("usage: ab_null.py H2H_BWD_JSON", file=sys.stderr)
        return 2
    try:
        doc = load(argv[0])
        points = doc["points"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ab_null.py: {argv[0]}: not an h2h_attention_bwd.py report ({e})", file=sys.stderr)
        return 2
    ctx = doc.get("context", {})
    print(f"{argv[0]}: {ctx.get('device', {}).get('name')} {ctx.get('device', {}).get('uuid')} {ctx.get('date_utc')}")
    for line in pair_lines(points) + order_lines(points):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
