#!/usr/bin/env python3
"""dropbench attention (both kernel families) against the PyTorch SDPA peers measured in the same session: per
(SQ, dH, causal) the wgmma kernel's TFLOP/s without dropout beside cuDNN's, mask / none and fused / none time
ratios, cuDNN-with-dropout's time over wgmma fused, FlashAttention-2 (flash backend) and the mma kernel; and for
both kernels the share of the RNG kernel's time that fusing hides, 1 - (fused - none) / RNG, with RNG the gen
phase of the rng+mask variant at the same point (the paper's "fusion hides only 10-20 %").

    scripts/attention_peer_table.py ATTENTION.json PEERS.json
"""
import json
import sys


def main(att_path, peers_path):
    a, pz = json.load(open(att_path)), json.load(open(peers_path))
    peer = {}
    for p in pz["points"]:
        key = (p["axes"].get("sq"), p["axes"].get("head_dim"), p["axes"].get("causal"))
        for v in p["variants"]:
            peer[key + (v["name"],)] = (v["derived"].get("tflops"), v["stats"]["median"])
    rows = {}
    for p in a["points"]:
        ax = p["axes"]
        key = (ax["sq"], ax.get("head_dim", p["workload"]["head_dim"]), ax["causal"])
        m = {v["name"]: (v["derived"].get("tflops"), v["stats"]["median"]) for v in p["variants"]}
        for v in p["variants"]:
            for ph in v.get("phases", []):
                if v["name"] == "rng+mask" and ph["name"] == "gen":
                    m["rng"] = (None, ph["stats"]["median"])
        rows[(key, ax["attention_kernel"])] = m
    print("| SQ | dH | causal | wgmma none TFLOP/s | cuDNN none | wgmma / cuDNN | mask / none | fused / none | "
          "cuDNN dropout / wgmma fused (time) | FA2 (flash) none | mma none | mma fused / none | "
          "fusion hides: wgmma | mma |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def hides(r):
        return 1 - (r["fused"][1] - r["none"][1]) / r["rng"][1] if "rng" in r else float("nan")

    for key in sorted({k for k, _ in rows}):
        w, m = rows.get((key, "wgmma")), rows.get((key, "mma"))
        cn, cd = peer.get(key + ("peer:sdpa-cudnn:none",)), peer.get(key + ("peer:sdpa-cudnn:dropout",))
        fn = peer.get(key + ("peer:sdpa-flash:none",))
        if not (w and m and cn and cd):
            continue
        print(f"| {key[0]} | {key[1]} | {str(key[2]).lower()} | {w['none'][0]:.0f} | {cn[0]:.0f} | "
              f"{w['none'][0] / cn[0]:.2f} | {w['mask'][1] / w['none'][1]:.3f} | {w['fused'][1] / w['none'][1]:.3f} | "
              f"{cd[1] / w['fused'][1]:.2f} | {fn[0] if fn else float('nan'):.0f} | {m['none'][0]:.0f} | "
              f"{m['fused'][1] / m['none'][1]:.3f} | {100 * hides(w):.0f} % | {100 * hides(m):.0f} % |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
