#!/usr/bin/env python3
"""A toy model of the wgmma backward's consumer loop: which GEMM issue order loses the least time (no GPU).

One SM sub-partition (SMSP) holds one warp of each consumer warpgroup; the other three SMSPs do the same, so one is
modelled. Shared per SMSP: one issue slot per cycle, the MUFU pipe (a warp's ex2 holds it MUFU cycles: 16 lanes per
SM and clock), the tensor pipe (a warp's share of m64nNk16 takes N / 2 cycles at peak, SS-N64 cycles for the
shared-memory-operand N = 64 GEMMs S^T, dP^T and dQ, to stand in for a shared-memory-bound rate). The tensor pipe
takes the two warps' wgmma either in issue order (fifo) or alternately from their queues (rr): which the hardware
does is not documented. An ordinary instruction holds its warp CPI cycles (dependences), a fence MEMBAR cycles, a
named barrier BAR cycles; the consumers' meeting holds both until the later one arrives.

The programs are the instruction counts of the consumer loop's common path (dH 128, mode none), segment by segment
between wgmma, waits and barriers, from `bwd_loop_sass.py`'s DUMP of each order's SASS:
  old        S^T, dP^T | wait dP^T, dS^T | dV, dK | meet, wait | dQ | wait, stage dQ     (276a2e6)
  dv-dq-dk   ... | wait dP^T, dS^T | dV | meet | dQ | dK | wait dQ, stage dQ under dK     (54648a3)
  early-dqdk ... | dV | wait dP^T, dS^T under dV | meet | dQ | dK | wait dQ, stage dQ     (e8d78df)
  early      ... | dV | wait dP^T, dS^T under dV | dK | meet, wait | dQ | wait, stage dQ  (the kernel's order)
Prints cycles per block of `old` and each order's time over it, for a grid of the unknowns. Instruction counts, not
measured latencies: a model for choosing what to measure, not a prediction of the time.
  lab/scripts/bwd_order_model.py
"""
import itertools


def programs(ss):
    sdp = [('alu', 4), ('mma', ss, 8), ('alu', 16), ('commit',), ('mma', ss, 8), ('alu', 13), ('commit',)]
    dq = [('mma', ss, 8), ('alu', 22), ('commit',)]
    stage = [('alu', 18), ('membar',), ('bar',), ('alu', 14)]
    probs = [('wait', 1), ('alu', 59), ('mufu', 32)]
    dst_late = [('wait', 0), ('alu', 145), ('membar',)]
    dv_early = [('wait', 1), ('alu', 80), ('mufu', 32), ('mma', 64, 4), ('alu', 5), ('commit',), ('wait', 1),
                ('alu', 133), ('membar',)]
    dq_dk = [('meet',), ('alu', 23), ('mma', ss, 8), ('alu', 16), ('commit',), ('mma', 64, 4), ('alu', 20),
             ('commit',), ('wait', 1), ('alu', 18), ('membar',), ('bar',), ('alu', 3), ('wait', 0), ('alu', 14)]
    top = [('alu', 38)] + sdp
    return {
        'old': top + probs + dst_late + [('mma', 64, 8), ('alu', 12), ('commit',), ('meet',), ('wait', 0),
                                         ('alu', 31)] + dq + [('wait', 0)] + stage,
        'dv-dq-dk': top + probs + dst_late + [('mma', 64, 4), ('alu', 5), ('commit',)] + dq_dk,
        'early-dqdk': top + dv_early + dq_dk,
        'early': top + dv_early + [('mma', 64, 4), ('alu', 11), ('commit',), ('meet',), ('wait', 0), ('alu', 31)] + dq
        + [('wait', 0)] + stage,
    }


def run(prog, policy, blocks=40, cpi=2, mufu=8, membar=40, grp_lat=20, bar=10):
    ops = [prog * blocks, prog * blocks]
    n = len(prog)
    pc, rem, busy = [0, 0], [None, None], [0, 0]
    groups, open_grp, queue = [[], []], [None, None], [[], []]
    tensor_free, last, mufu_free, meet, rr, t = 0, 1, 0, [None, None], 0, 0
    starts = [[], []]
    while pc[0] < len(ops[0]) or pc[1] < len(ops[1]):
        if tensor_free <= t:
            cand = [k for k in (0, 1) if queue[k]]
            if cand:
                k = min(cand, key=lambda j: queue[j][0][2]) if policy == 'fifo' else (
                    1 - last if 1 - last in cand else cand[0])
                cyc, g, _ = queue[k].pop(0)
                last, tensor_free = k, t + cyc
                g[0] -= 1
                if g[0] == 0 and g[2]:
                    g[1] = tensor_free + grp_lat
        issued = False
        for k in (rr, 1 - rr):
            if pc[k] >= len(ops[k]) or busy[k] > t:
                continue
            op = ops[k][pc[k]]
            if pc[k] % n == 0 and rem[k] is None:
                starts[k].append(t)
            kind = op[0]
            if kind == 'wait':
                pending = [g for g in groups[k] if g[1] is None or g[1] > t]
                if len(pending) <= op[1]:
                    groups[k] = pending
                    pc[k] += 1
                continue
            if kind == 'meet':
                meet[k] = t if meet[k] is None else meet[k]
                if meet[1 - k] is not None:
                    release = max(meet) + bar
                    for j in (0, 1):
                        busy[j], meet[j] = release, None
                        pc[j] += 1
                continue
            if kind in ('bar', 'membar'):
                busy[k] = t + (bar if kind == 'bar' else membar)
                pc[k] += 1
                continue
            if kind == 'commit':
                g = open_grp[k]
                g[2] = True
                if g[0] == 0:
                    g[1] = tensor_free + grp_lat
                open_grp[k] = None
                pc[k] += 1
                continue
            if issued or (kind == 'mufu' and mufu_free > t):
                continue
            if rem[k] is None:
                rem[k] = op[2] if kind == 'mma' else op[1]
                if kind == 'mma' and open_grp[k] is None:
                    open_grp[k] = [0, None, False]
                    groups[k].append(open_grp[k])
            rem[k] -= 1
            if kind == 'alu':
                busy[k] = t + cpi
            elif kind == 'mufu':
                mufu_free, busy[k] = t + mufu, t + 1
            else:
                open_grp[k][0] += 1
                queue[k].append((op[1], open_grp[k], t))
                busy[k] = t + 1
            issued, rr = True, 1 - k
            if rem[k] == 0:
                rem[k] = None
                pc[k] += 1
        t += 1
    h = blocks // 2
    return (starts[0][-1] - starts[0][h]) / (len(starts[0]) - 1 - h)


def main():
    print("| SS-N64 | CPI | tensor policy | old (cycles / block) | dv-dq-dk / old | early-dqdk / old | early / old |")
    print("|---|---|---|---|---|---|---|")
    for ss, cpi, policy in itertools.product((32, 48, 64), (2, 3), ('fifo', 'rr')):
        p = programs(ss)
        base = run(p['old'], policy, cpi=cpi)
        r = [run(p[k], policy, cpi=cpi) / base for k in ('dv-dq-dk', 'early-dqdk', 'early')]
        print(f"| {ss} | {cpi} | {policy} | {base:.0f} | " + " | ".join(f"{x:.3f}" for x in r) + " |")


if __name__ == '__main__':
    main()
