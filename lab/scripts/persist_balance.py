#!/usr/bin/env python3
"""Work balance of the persistent wgmma attention's causal tile orders (no GPU).

For B x Hq (batch, head) pairs of nq query blocks (block j of a causal tile reads j + 1 key blocks when BN = Br), a
grid of G CTAs and an order, prints max / mean key blocks per CTA: what a static persistent schedule loses to its
busiest CTA. Orders: 'heads' = the kernel's (every pair's heaviest query block, then the next heaviest, ...; odd
rounds in reverse CTA order); 'groups' = session 11's rejected try (pairs in groups of gh, each group heaviest first).
  scripts/persist_balance.py [--sq 8192 16384] [--heads 32] [--kv-heads 8] [--batch 1] [--grid 132]
  scripts/persist_balance.py --self-test   (every tile exactly once in both orders; the kernel's order balanced)
"""
import argparse
import sys


def cta_work(nq, pairs, grid, gh=None, seen=None):
    tiles = nq * pairs
    work = [0] * grid
    for i in range(grid):
        k = 0
        while True:
            pos = k * grid + ((grid - 1 - i) if k & 1 else i)
            if pos >= tiles:
                break
            if gh is None:
                qb = nq - 1 - pos // pairs
            else:
                g = pos // (gh * nq)
                r = pos - g * gh * nq
                gs = min(gh, pairs - g * gh)
                qb = nq - 1 - r // gs
                pair = g * gh + r % gs
            if gh is None:
                pair = pos % pairs
            if seen is not None:
                seen[(pair, qb)] = seen.get((pair, qb), 0) + 1
            work[i] += qb + 1
            k += 1
    return work


def group_size(nq, pairs, grid, group):
    gh = min(group, pairs)
    while gh < pairs and gh * nq < 2 * grid:
        gh = min(2 * gh, pairs)
    return gh


def self_test():
    for nq, pairs, grid, group in ((64, 32, 132, 4), (128, 32, 132, 4), (8, 6, 3, 2), (9, 5, 1, 1), (64, 64, 132, 8)):
        for gh in (None, group_size(nq, pairs, grid, group)):
            seen = {}
            w = cta_work(nq, pairs, grid, gh, seen)
            assert len(seen) == nq * pairs and set(seen.values()) == {1}, (nq, pairs, grid, gh)
            assert sum(w) == pairs * nq * (nq + 1) // 2
    for nq in (64, 128):
        w = cta_work(nq, 32, 132)
        assert max(w) / (sum(w) / len(w)) < 1.01, nq
    print("persist_balance self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sq", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--grid", type=int, default=132)
    ap.add_argument("--br", type=int, default=128)
    a = ap.parse_args()
    pairs = a.heads * a.batch
    print("| SQ | order | heads per group | max / mean work per CTA |")
    print("|---:|---|---:|---:|")
    for sq in a.sq:
        nq = (sq + a.br - 1) // a.br
        grid = min(a.grid, nq * pairs)
        for name, gh in (("heads", None), ("groups", group_size(nq, pairs, grid, a.heads // a.kv_heads))):
            w = cta_work(nq, pairs, grid, gh)
            print(f"| {sq} | {name} | {gh or pairs} | {max(w) / (sum(w) / len(w)):.3f} |")


if __name__ == "__main__":
    main()
