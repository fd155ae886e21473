#!/usr/bin/env python3
"""List-scheduling makespan of the backward's causal grid (8 KV heads, nkb key blocks of 128 keys, key block j
visiting 2 * nkb - 2 j query blocks of 64) on 132 SMs, relative to ideal: today's order (every head's key block 0,
then key block 1, ...: heaviest first across heads) against head-major (a head's key blocks together, heaviest first
within the head)."""
import heapq


def makespan(order, slots=132):
    h = [0.0] * slots
    end = 0.0
    for w in order:
        t = heapq.heappop(h) + w
        end = max(end, t)
        heapq.heappush(h, t)
    return end


for hkv, nkb in ((8, 64), (8, 128)):  # SQ 8192, 16384
    work = [2 * nkb - 2 * j for j in range(nkb)]
    today = [work[j] for j in range(nkb) for _ in range(hkv)]
    head_major = [work[j] for _ in range(hkv) for j in range(nkb)]
    ideal = sum(today) / 132
    print(f"SQ {nkb * 128}: today {makespan(today) / ideal:.3f} x ideal, head-major {makespan(head_major) / ideal:.3f}")
