#!/usr/bin/env python3
"""List-scheduling makespan (132 SMs, work in query blocks) of the causal backward grid, 8 KV heads, B 1, with the
group walked whole by each CTA (unsplit) or in subgroups of 4 heads one after another (split), SQ 1K-16K: whether
giving up heaviest-first across subgroups costs a tail. L2 effects are not in it."""
import heapq


def makespan(order, slots=132):
    h = [0.0] * slots
    end = 0.0
    for w in order:
        t = heapq.heappop(h) + w
        end = max(end, t)
        heapq.heappush(h, t)
    return end


for sq in (1024, 2048, 4096, 8192, 16384):
    nqb, nkb = sq // 64, sq // 128
    for g in (8, 16):
        unsplit = [g * (nqb - 2 * kb) for kb in range(nkb) for _ in range(8)]
        split = [4 * (nqb - 2 * kb) for _ in range(g // 4) for kb in range(nkb) for _ in range(8)]
        print(f"SQ {sq} group {g}: split / unsplit makespan {makespan(split) / makespan(unsplit):.3f}")
