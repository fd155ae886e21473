#!/usr/bin/env python3
"""List-scheduling makespans (132 SMs, work in query blocks of 64) of the causal backward grid, 8 KV heads, B 1,
key block j of nkb visiting 2 nkb - 2 j query blocks per query head. L2 effects are not in them.
1. Launch order, group of 1: today's (every head's key block 0, then key block 1, ...: heaviest first across heads)
   against head-major (a head's key blocks together, heaviest first within the head), relative to ideal.
2. Groups 8 and 16 walked whole by each CTA (unsplit) or in subgroups of 4 heads one after another (split): whether
   giving up heaviest-first across subgroups costs a tail."""
import heapq


def makespan(order, slots=132):
    h = [0.0] * slots
    end = 0.0
    for w in order:
        t = heapq.heappop(h) + w
        end = max(end, t)
        heapq.heappush(h, t)
    return end


for nkb in (64, 128):  # SQ 8192, 16384
    work = [2 * nkb - 2 * j for j in range(nkb)]
    today = [work[j] for j in range(nkb) for _ in range(8)]
    head_major = [work[j] for _ in range(8) for j in range(nkb)]
    ideal = sum(today) / 132
    print(f"SQ {nkb * 128}: today {makespan(today) / ideal:.3f} x ideal, head-major {makespan(head_major) / ideal:.3f}")

for sq in (1024, 2048, 4096, 8192, 16384):
    nqb, nkb = sq // 64, sq // 128
    for g in (8, 16):
        unsplit = [g * (nqb - 2 * kb) for kb in range(nkb) for _ in range(8)]
        split = [4 * (nqb - 2 * kb) for _ in range(g // 4) for kb in range(nkb) for _ in range(8)]
        print(f"SQ {sq} group {g}: split / unsplit makespan {makespan(split) / makespan(unsplit):.3f}")
