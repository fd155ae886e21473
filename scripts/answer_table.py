#!/usr/bin/env python3
"""The answer table of `dropbench run` reports (no GPU): per point (preset, Philox rounds R) and attention kernel,
the winning pipeline (sampled medians), its margin over the best pipeline of the other strategy (fused against the best of the
separate-RNG pipelines baseline / overlap / chunked, and the other way round) with the report's 95 % interval, the
winner of the sustained power pass and the energy winner, and
dropbench's best block (any pipeline, any kernel, that R) against the best PyTorch end-to-end block of a peers
report at the same point (scripts/peers.py --blocks e2e).

    scripts/answer_table.py RUN.json[=PEERS.json] ... [--link-prefix PREFIX]

Each cell links the report it comes from (markdown), its path prefixed by PREFIX (e.g. results/h200/verdict/).
The margin is t(other) / t(winner) from the point's derived speedup_<a>_vs_<b> (and its _ci) where the report
has that pair, else the plain ratio of medians without an interval.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dropbench_report as dr  # noqa: E402

PIPELINES = ("baseline", "fused", "overlap", "chunked")


def margin(point, winner, runner):
    d = point.derived
    for a, b, inv in ((winner, runner, False), (runner, winner, True)):
        s = d.get(f"speedup_{a}_vs_{b}")
        if s is None:
            continue
        ci = d.get(f"speedup_{a}_vs_{b}_ci")
        if inv:
            s = 1 / s
            ci = [1 / ci[1], 1 / ci[0]] if ci else None
        return s, ci
    t = point.medians()
    return t[runner] / t[winner], None


def kernel_cell(point):
    t = {n: point.variant(n).median for n in PIPELINES if point.variant(n) and dr.finite(point.variant(n).median)}
    win = min(t, key=t.get)
    other = [n for n in t if (n == "fused") != (win == "fused")]
    run = min(other, key=t.get)
    s, ci = margin(point, win, run)
    iv = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    d = point.derived
    return win, run, f"**{win}** {s:.3f}{iv} over {run}", d.get("energy_winner", "-"), t[win], d.get("sustained_winner", "-")


def rows(pairs, prefix):
    out = []
    for run_path, peers_path in pairs:
        rep = dr.load(run_path)
        peers = dr.load(peers_path) if peers_path else None
        link = f"[{{}}]({prefix}{os.path.basename(run_path)})"
        by_r = {}
        for p in rep.points:
            by_r.setdefault(p.get("rounds"), {})[p.get("attention_kernel")] = p
        for r in sorted(by_r):
            cells = {k: kernel_cell(p) for k, p in by_r[r].items()}
            best_k = min(cells, key=lambda k: cells[k][4])
            best = cells[best_k]
            vs = "-"
            if peers:
                pp = next(iter(peers.points))
                e2e = [v for v in pp.variants if v.name.startswith("peer:e2e") and dr.finite(v.median)]
                if e2e:
                    pb = min(e2e, key=lambda v: v.median)
                    vs = (f"[{pb.median / best[4]:.2f}×]({prefix}{os.path.basename(peers_path)}): {best[0]} "
                          f"{best_k} {best[4] * 1e6:.0f} µs vs {pb.name[len('peer:'):]} {pb.median * 1e6:.0f} µs")
            name = (rep.config_name or "?").replace("llama3-", "").upper()
            kern = [link.format(cells[k][2]) if k in cells else "-" for k in ("wgmma", "mma")]
            energy = ", ".join(f"{k} {cells[k][3]}" for k in ("wgmma", "mma") if k in cells)
            sus = ", ".join(f"{k} {cells[k][5]}" for k in ("wgmma", "mma") if k in cells)
            out.append(f"| {name} | {r} | {kern[0]} | {kern[1]} | {vs} | {link.format(sus)} | {link.format(energy)} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", help="RUN.json or RUN.json=PEERS.json")
    ap.add_argument("--link-prefix", default="", help="prefix of each cell's link to its report")
    a = ap.parse_args(argv)
    pairs = [tuple(x.split("=", 1)) if "=" in x else (x, None) for x in a.reports]
    print("| preset | R | wgmma: winner, margin [95 % CI] | mma: winner, margin [95 % CI] "
          "| best block vs PyTorch's best | sustained winner (power pass) | energy winner |")
    print("|---|---|---|---|---|---|---|")
    try:
        print("\n".join(rows(pairs, a.link_prefix)))
    except dr.ReportError as e:
        print(f"answer_table.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
