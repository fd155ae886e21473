#!/usr/bin/env python3
"""Refit every fitted factor of the model (docs/model.md, "Calibration") and write it into the data files:

1. `dropbench model --fit-kernels`: the RNG tile kernels' own efficiencies and per-strip cost
   (kernels.rng.efficiency, kernels.rng.strip_overhead_cycles: the ncu launches plus the report rows the machine's
   rng_strip fit points name) and the wgmma attention kernels' (kernels.attention_wgmma and, where the profile has
   it, kernels.attention_bwd_wgmma: issue_efficiency, mma_efficiency, cta_overhead_cycles), into the profile, and
   the GEMMs' tile model where the machine's gemm_tile_model.<dtype> names fit_reports (mma_efficiency,
   tile_overhead_cycles), into the machine (--gemm-only: that alone);
2. `dropbench model --report R --uncalibrated --fit` on every report the machine's calibration.fit_points name:
   with --demand ncu into the profile's ncu_calibration, with --demand sass into the machine's units.*.efficiency.

Step 2 reads what step 1 wrote (a fit point's efficiency is taken net of the fixed costs, e.g. the RNG's strips).
`Model.CommittedKernelFitsAreTheFit` and `Model.CommittedNcuCalibrationIsTheFit` check the result.
--rng-report PATH re-points the machine's rng fit points to another rng report first (e.g. when a complete
report replaces a partial one: `--rng-report results/h200/rng/rng.json`).
Usage: scripts/refit_profile.py [--dropbench build/dropbench] [--profile configs/profiles/h200.json]
                                [--machine configs/machines/h200.json] [--rng-report PATH] [--kernels-only]
                                [--gemm-only]
"""
import argparse, collections, json, os, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--dropbench", default="build/dropbench")
ap.add_argument("--profile", default="configs/profiles/h200.json")
ap.add_argument("--machine", default="configs/machines/h200.json")
ap.add_argument("--rng-report", help="re-point the machine's rng fit points to this report first")
ap.add_argument("--kernels-only", action="store_true", help="step 1 only (the kernel-family fits)")
ap.add_argument("--gemm-only", action="store_true",
                help="the machine's GEMM tile model only (e.g. --machine configs/machines/h100-sxm.json: the "
                     "profile's kernel fits are the profile machine's)")
a = ap.parse_args()
OD = collections.OrderedDict


def load(path):
    return json.load(open(path), object_pairs_hook=OD)


def save(path, doc):
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")


def dropbench(*args):
    return json.loads(subprocess.run([a.dropbench, "model", "--format", "json", "--profile", a.profile, "--machine",
                                      a.machine, *args], check=True, capture_output=True, text=True).stdout)


if a.rng_report:
    # Axes a report does not list (a sweep axis of one value may be left out) cannot match: such keys are dropped
    # from the fit points (the per-strip fit takes tile rows only either way).
    # A dropped axis must be one the report holds at the fit point's value (its workload field), or the fit point
    # would silently move to another shape or match every row.
    pts = load(a.rng_report)["points"]
    have = None
    for pt in pts:
        have = set(pt.get("axes", {})) if have is None else have & set(pt.get("axes", {}))
    mach = load(a.machine)
    for fp in mach["calibration"]["fit_points"]:
        if fp["command"] == "rng":
            for k, v in fp["axes"].items():
                if k in (have or set()):
                    continue
                held = {json.dumps(pt.get("workload", {}).get(k)) for pt in pts}
                if held != {json.dumps(v)}:
                    sys.exit(f"refit_profile.py: --rng-report {a.rng_report}: the {fp['unit']} fit point's axis "
                             f"{k} = {v} is neither swept there nor its only value (workload: {sorted(held)})")
            fp["report"] = a.rng_report
            fp["axes"] = OD((k, v) for k, v in fp["axes"].items() if k in (have or set()))
    save(a.machine, mach)

# ---- 1. kernel families ----
fits = dropbench("--fit-kernels")
prof = load(a.profile)


def src(f, what):
    if f.get("fitted_on") == "report rows":  # the backward: the harness's rows of the section's fit_reports
        on = (f"the {f['points']} {what} rows of the reports in fit_reports (harness medians of back-to-back calls at "
              "their measured clocks, less the model's memory-bound launches around the kernel")
    else:
        on = f"the {f['points']} {what} ncu launches of this profile (durations at their measured clocks"
    return (f"fitted: `dropbench model --fit-kernels` on {on}; least mean |err|: {100 * f['mean_abs_err']:.1f}%, max "
            f"{100 * f['max_abs_err']:.1f}%)")


if "rng" in fits:
    f = fits["rng"]
    r = prof["kernels"]["rng"]
    s = src(f, "RNG tile kernel") + "; time = max(issue / e_issue, alu / e_alu, imad / e_imad)"
    r["efficiency"] = OD((u, {"value": v, "source": s}) for u, v in sorted(f["efficiency"].items()))
    if f.get("report_points"):
        r["strip_overhead_cycles"] = {
            "value": round(f["strip_overhead_cycles"], 1),
            "source": ("fitted: `dropbench model --fit-kernels` on the " + str(f["report_points"]) + " report rows of the "
                       "machine's rng_strip fit points (least squares on the relative errors; mean |err| "
                       f"{100 * f['strip_mean_abs_err']:.1f}%, max {100 * f['strip_max_abs_err']:.1f}%); SM cycles per "
                       "16-row strip (batch x head x row strip) summed over the device; with it the tile kernel's time "
                       "is carried from its ncu launch: (duration - its strips' cost) per generated tile, plus the "
                       "strips' cost")}
    else:
        r.pop("strip_overhead_cycles", None)
for family, section, what in (("wgmma", "attention_wgmma", "wgmma attention"),
                              ("wgmma_bwd", "attention_bwd_wgmma", "wgmma attention backward")):
    if family not in fits:
        continue
    f = fits[family]
    w = prof["kernels"][section]
    s = src(f, what) + "; cycles = max(issue / e_issue, mma / e_mma) x tail + CTA waves x overhead"
    w["issue_efficiency"] = {"value": f["efficiency"]["issue"], "source": s}
    w["mma_efficiency"] = {"value": f["efficiency"]["mma"], "source": s}
    w["cta_overhead_cycles"] = {"value": round(f["cta_overhead_cycles"], 1), "source": s}
# The GEMMs' tile model is the machine's (its GEMM cycles are the card's): into --machine.
mach = load(a.machine)
for dt in ("fp8", "bf16"):
    family = "gemm_" + dt
    if family not in fits:
        continue
    f = fits[family]
    g = mach["gemm_tile_model"][dt]
    s = (f"fitted: `dropbench model --fit-kernels` on the {f['points']} {dt} GEMM rows of the reports in fit_reports "
         f"(standalone cuBLASLt launches, harness medians at their measured clocks, {f['clock_mhz']:.0f} MHz weighted "
         f"by time; least mean |err|: {100 * f['mean_abs_err']:.1f}%, max {100 * f['max_abs_err']:.1f}%); cycles = "
         "mma / e_mma x tail + waves x overhead, the profile's tiles of tile_m x tile_n in waves of SMs x blocks_per_sm")
    g["mma_efficiency"] = {"value": f["efficiency"]["mma"], "source": s}
    g["tile_overhead_cycles"] = {"value": round(f["tile_overhead_cycles"], 1), "source": s}
save(a.machine, mach)
if a.gemm_only:
    sys.exit(0)
save(a.profile, prof)
print(json.dumps({k: {"efficiency": v["efficiency"], "strip_overhead_cycles": v.get("strip_overhead_cycles"),
                      "mean_abs_err": v["mean_abs_err"], "strip_mean_abs_err": v.get("strip_mean_abs_err")}
                  for k, v in fits.items()}))
if a.kernels_only:
    sys.exit(0)

# ---- 2. the machine's fit points, with measured (ncu) and static (sass) demand ----
mach = load(a.machine)
reports = sorted({fp["report"] for fp in mach["calibration"]["fit_points"] if fp["unit"] != "rng_strip"})
by_unit = {"ncu": {}, "sass": {}}
for rep in reports:
    for demand in ("ncu", "sass"):
        for f in dropbench("--report", rep, "--uncalibrated", "--fit", "--demand", demand)["summary"]["fit_points"]:
            by_unit[demand][f["unit"]] = (f["efficiency"], rep, f["axes"], f["variant"], f.get("fixed_s", 0))


def where(rep, axes, variant, fixed):
    ax = ", ".join(f"{k} {json.dumps(v)}" for k, v in axes.items())
    return f"{rep} ({ax}; variant {variant}" + (f"; net of {1e6 * fixed:.1f} us fixed costs)" if fixed else ")")


prof = load(a.profile)
cal = prof["ncu_calibration"]
cal["units"] = OD()
for u, (e, rep, axes, variant, fixed) in sorted(by_unit["ncu"].items()):
    static = by_unit["sass"].get(u)
    cal["units"][u] = {"value": round(e, 4), "source": f"fitted with ncu demand: {where(rep, axes, variant, fixed)}" +
                       (f" (machine, static demand: {static[0]:.4f})" if static else "")}
save(a.profile, prof)
for u, (e, rep, axes, variant, fixed) in sorted(by_unit["sass"].items()):
    mach["units"][u]["efficiency"] = {"value": round(e, 4), "source": f"fitted with static demand: "
                                      f"{where(rep, axes, variant, fixed)}; predicted at efficiency 1 / measured "
                                      "(scripts/refit_profile.py)"}
save(a.machine, mach)
print(json.dumps({d: {u: round(v[0], 4) for u, v in by_unit[d].items()} for d in by_unit}))
