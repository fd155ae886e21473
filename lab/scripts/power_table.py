#!/usr/bin/env python3
"""Power and energy of `dropbench run` reports as markdown (issue 12's evidence): per point and pipeline the
sampled time, the sustained (power-pass) time, mean W, energy per block, capped share and SM clock, with the
energy estimate of each phase; per point the pieces alone (W, capped share, clock: what each phase draws on
its own); per point the best overlap mechanism's hidden fraction against the energy bound (the most any
schedule could hide given the two kernels' energies, the cap and the static power; src/core/energy.hpp).

    scripts/power_table.py REPORT.json ...
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # dropbench_report
import dropbench_report as dr  # noqa: E402

PIPELINES = ("baseline", "fused", "overlap", "chunked")
PIECES = ("alone:gemm", "alone:rng", "alone:attention-mask", "alone:attention-fused")


def f(x, spec):
    return "-" if x is None else format(x, spec)


def label(rep, point):
    return f"{rep.config_name} {point.get('attention_kernel') or ''}".strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    reps = [dr.load(r) for r in a.reports]
    print("| report, kernel | pipeline | sampled µs | sustained µs | mean W | energy / block (mJ) | capped share "
          "| SM MHz | phase energy est. (mJ) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for rep in reps:
        for pt in rep.points:
            sus = pt.derived.get("t_sustained") or {}
            for name in PIPELINES:
                v = pt.variant(name)
                if v is None:
                    continue
                pw, dv = v.power or {}, v.derived
                ph = dv.get("phase_energy_mj_est") or {}
                phs = ", ".join(f"{k} {e:.0f}" for k, e in ph.items()) or "-"
                t = sus.get(name)
                print(f"| {label(rep, pt)} | {name} | {v.median * 1e6:.0f} | {f(t and t * 1e6, '.0f')} "
                      f"| {f(pw.get('mean_w'), '.0f')} | {f(dv.get('energy_mj'), '.0f')} "
                      f"| {f(pw.get('capped_share'), '.2f')} | {f(pw.get('mean_sm_mhz'), '.0f')} | {phs} |")
    print()
    print("| report, kernel | piece alone | sampled µs | mean W | energy per call, power pass (mJ) | capped share "
          "| SM MHz |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for rep in reps:
        for pt in rep.points:
            for name in PIECES:
                v = pt.variant(name)
                if v is None:
                    continue
                pw = v.power or {}
                print(f"| {label(rep, pt)} | {name} | {v.median * 1e6:.0f} | {f(pw.get('mean_w'), '.0f')} "
                      f"| {f(pw.get('energy_mj_per_iter'), '.0f')} | {f(pw.get('capped_share'), '.2f')} | {f(pw.get('mean_sm_mhz'), '.0f')} |")
    print()
    print("| report, kernel | time winner | sustained winner | energy winner | best mechanism | its hidden fraction "
          "[95 %] | energy bound |")
    print("|---|---|---|---|---|---|---:|")
    for rep in reps:
        for pt in rep.points:
            d = pt.derived
            ci = d.get("best_hidden_ci") or [None, None]
            print(f"| {label(rep, pt)} | {d.get('winner', '-')} | {d.get('sustained_winner', '-')} "
                  f"| {d.get('energy_winner', '-')} | {d.get('best_mechanism', '-')} "
                  f"| {f(d.get('best_hidden'), '.3f')} [{f(ci[0], '.3f')}, {f(ci[1], '.3f')}] "
                  f"| {f(d.get('best_hidden_energy_bound'), '.3f')} |")


if __name__ == "__main__":
    main()
