#!/usr/bin/env python3
"""The kernels alone (a `dropbench run` report's alone:* variants) in two sessions' reports of the same presets:
per point and kernel, the sampled median (and its mean clock) and the sustained time and energy per call from the
power pass, old -> new, with new / old. A kernel whose code did not change (here the mma attention) shows how much
of the rest is the GPU (another H200 of the pool) rather than the code.
  scripts/phase_drift.py OLD_RUN.json NEW_RUN.json [OLD NEW ...]
  scripts/phase_drift.py --hides RUN.json [RUN.json ...]
--hides: per point, the share of the standalone RNG kernel's time that fusing hides, (rng + mask-reading attention -
fused attention) / rng, from the kernels alone (sampled medians; negative: fusing costs more than the RNG kernel).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # dropbench_report
import dropbench_report as dr  # noqa: E402


def alone(path):
    """git sha, {(rounds, attention kernel, piece): (sampled µs, its mean clock, sustained µs, energy mJ / call)}."""
    rep = dr.load(path)
    out = {}
    for p, v in rep.each_variant(peer=False):
        if not v.name.startswith("alone:"):
            continue
        pw = v.power or {}
        out[(p.get("rounds"), p.get("attention_kernel"), v.name[6:])] = (
            v.median * 1e6, v.stats.mean_clock_mhz, (pw.get("time_per_iter_s") or 0) * 1e6, pw.get("energy_mj_per_iter"))
    return rep.git_sha, out


def hides(paths):
    print("| report | R | attention kernel | rng µs | attention-mask µs | attention-fused µs | fusion hides |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for path in paths:
        _, d = alone(path)
        name = os.path.basename(path).replace("run_", "").replace(".json", "")
        for r, k in sorted({(r, k) for r, k, _ in d}, key=lambda x: (x[1] or "", x[0] or 0)):
            try:
                rng, mask, fused = (d[(r, k, n)][0] for n in ("rng", "attention-mask", "attention-fused"))
            except KeyError:
                continue
            print(f"| {name} | {r} | {k} | {rng:.0f} | {mask:.0f} | {fused:.0f} | {(rng + mask - fused) / rng:+.0%} |")


def main():
    a = sys.argv[1:]
    if a and a[0] == "--hides":
        return hides(a[1:])
    if len(a) < 2 or len(a) % 2:
        sys.exit(__doc__)
    print("| preset | R | attention kernel | kernel alone | sampled µs old -> new (new / old) | clock MHz old -> new | "
          "sustained µs old -> new (new / old) | energy mJ / call old -> new (new / old) |")
    print("|---|---:|---|---|---|---|---|---|")
    for old, new in zip(a[0::2], a[1::2]):
        sha_o, o = alone(old)
        sha_n, n = alone(new)
        name = os.path.basename(new).replace("run_", "").replace(".json", "")
        for k in sorted(set(o) & set(n), key=lambda k: (k[1] or "", k[0] or 0, k[2])):
            so, co, to, eo = o[k]
            sn, cn, tn, en = n[k]
            tt = f"{to:.0f} -> {tn:.0f} ({tn / to:.3f})" if to and tn else "-"
            ee = f"{eo:.0f} -> {en:.0f} ({en / eo:.3f})" if eo and en else "-"
            print(f"| {name} | {k[0]} | {k[1]} | {k[2]} | {so:.0f} -> {sn:.0f} ({sn / so:.3f}) | {co:.0f} -> {cn:.0f} | {tt} | {ee} |")
    print(f"\nold: {sha_o}, new: {sha_n}")


if __name__ == "__main__":
    main()
