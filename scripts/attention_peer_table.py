#!/usr/bin/env python3
"""dropbench attention (both kernel families) against the PyTorch SDPA peers measured in the same session: per
(SQ, dH, causal) the wgmma kernel's TFLOP/s without dropout beside cuDNN's, mask / none and fused / none time
ratios, cuDNN-with-dropout's time over wgmma fused, FlashAttention-2 (flash backend) and the mma kernel; and for
both kernels the share of the RNG kernel's time that fusing hides, 1 - (fused - none) / RNG, with RNG the gen
phase of the rng+mask variant at the same point (the paper's "fusion hides only 10-20 %").

    scripts/attention_peer_table.py ATTENTION.json PEERS.json
    scripts/attention_peer_table.py ATTENTION.json       without peers: per point (any axes, e.g. rounds) and
                                                         kernel, mask / none, fused / none and what fusing hides
"""
import sys

import dropbench_report as dr


def shape(p):
    return (p.get("sq"), p.get("head_dim"), p.get("causal"))


def main(att_path, peers_path):
    peer = {}  # (sq, dH, causal, peer variant) -> (TFLOP/s, median s)
    for p in dr.load(peers_path).points:
        for v in p.variants:
            peer[shape(p) + (v.name,)] = (v.derived.get("tflops"), v.median)
    rows = {}  # ((sq, dH, causal), kernel) -> {variant: (TFLOP/s, median s)}, "rng": the rng+mask gen phase
    for p in dr.load(att_path).points:
        m = {v.name: (v.derived.get("tflops"), v.median) for v in p.variants}
        gen = dict(p.variant("rng+mask").phase_medians()).get("gen") if p.variant("rng+mask") else None
        if gen is not None:
            m["rng"] = (None, gen)
        rows[(shape(p), p.get("attention_kernel"))] = m
    print("| SQ | dH | causal | wgmma none TFLOP/s | cuDNN none | wgmma / cuDNN | mask / none | fused / none | "
          "cuDNN dropout / wgmma fused (time) | FA2 (flash) none | mma none | mma fused / none | "
          "fusion hides: wgmma | mma |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def hides_row(r):
        return hides({k: v[1] for k, v in r.items()}) if "rng" in r else float("nan")

    for key in sorted({k for k, _ in rows}):
        w, m = rows.get((key, "wgmma")), rows.get((key, "mma"))
        cn, cd = peer.get(key + ("peer:sdpa-cudnn:none",)), peer.get(key + ("peer:sdpa-cudnn:dropout",))
        fn = peer.get(key + ("peer:sdpa-flash:none",))
        if not (w and m and cn and cd):
            continue
        print(f"| {key[0]} | {key[1]} | {str(key[2]).lower()} | {w['none'][0]:.0f} | {cn[0]:.0f} | "
              f"{w['none'][0] / cn[0]:.2f} | {w['mask'][1] / w['none'][1]:.3f} | {w['fused'][1] / w['none'][1]:.3f} | "
              f"{cd[1] / w['fused'][1]:.2f} | {fn[0] if fn else float('nan'):.0f} | {m['none'][0]:.0f} | "
              f"{m['fused'][1] / m['none'][1]:.3f} | {100 * hides_row(w):.0f} % | {100 * hides_row(m):.0f} % |")


def hides(r):
    """1 - (fused - none) / RNG: the share of the standalone RNG kernel's time that fusing hides."""
    return 1 - (r["fused"] - r["none"]) / r["rng"]


def dropout_costs(att_path):
    print("| point | kernel | none µs | mask / none | fused / none | RNG kernel µs | fused - none µs | fusion hides |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for p in dr.load(att_path).points:
        m = {v.name: v.median for v in p.variants}
        gen = dict(p.variant("rng+mask").phase_medians()).get("gen") if p.variant("rng+mask") else None
        if gen is None or not {"none", "mask", "fused"} <= m.keys():
            continue
        m["rng"] = gen
        axes = " ".join(f"{k}={v}" for k, v in p.axes.items() if k != "attention_kernel")
        print(f"| {axes} | {p.get('attention_kernel')} | {m['none'] * 1e6:.0f} | {m['mask'] / m['none']:.3f} | "
              f"{m['fused'] / m['none']:.3f} | {gen * 1e6:.0f} | {(m['fused'] - m['none']) * 1e6:.0f} | "
              f"{100 * hides(m):.0f} % |")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        dropout_costs(sys.argv[1])
    elif len(sys.argv) == 3:
        main(*sys.argv[1:])
    else:
        sys.exit(__doc__)
