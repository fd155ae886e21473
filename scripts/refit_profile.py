#!/usr/bin/env python3
"""Write `dropbench model --fit-kernels` into a profile: the RNG tile kernels' own efficiencies
(kernels.rng.efficiency) and the wgmma attention kernel's (kernels.attention_wgmma: issue_efficiency,
mma_efficiency, cta_overhead_cycles), each with its source. Run after `dropbench profile` has refreshed the
ncu blocks (docs/model.md, "Calibration"); `Model.CommittedKernelFitsAreTheFit` checks the result.
Usage: scripts/refit_profile.py [--dropbench build/dropbench] [--profile configs/profiles/h200.json]
"""
import argparse, collections, json, subprocess, sys

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--dropbench", default="build/dropbench")
ap.add_argument("--profile", default="configs/profiles/h200.json")
ap.add_argument("--machine", default="configs/machines/h200.json")
a = ap.parse_args()
out = subprocess.run([a.dropbench, "model", "--fit-kernels", "--format", "json", "--profile", a.profile,
                      "--machine", a.machine], check=True, capture_output=True, text=True).stdout
fits = json.loads(out)
prof = json.load(open(a.profile), object_pairs_hook=collections.OrderedDict)


def src(f, what):
    return (f"fitted: `dropbench model --fit-kernels` on the {f['points']} {what} ncu launches of this profile "
            f"(durations at their measured clocks; least mean |err|: {100 * f['mean_abs_err']:.1f}%, max "
            f"{100 * f['max_abs_err']:.1f}%)")


if "rng" in fits:
    f = fits["rng"]
    prof["kernels"]["rng"]["efficiency"] = collections.OrderedDict(
        (u, {"value": v, "source": src(f, "RNG tile kernel") + "; time = max(issue / e_issue, alu / e_alu, imad / e_imad)"})
        for u, v in sorted(f["efficiency"].items()))
if "wgmma" in fits:
    f = fits["wgmma"]
    w = prof["kernels"]["attention_wgmma"]
    s = src(f, "wgmma attention") + "; cycles = max(issue / e_issue, mma / e_mma) x tail + CTA waves x overhead"
    w["issue_efficiency"] = {"value": f["efficiency"]["issue"], "source": s}
    w["mma_efficiency"] = {"value": f["efficiency"]["mma"], "source": s}
    w["cta_overhead_cycles"] = {"value": round(f["cta_overhead_cycles"], 1), "source": s}
with open(a.profile, "w") as fh:
    json.dump(prof, fh, indent=2)
    fh.write("\n")
print(json.dumps({k: {"efficiency": v["efficiency"], "mean_abs_err": v["mean_abs_err"]} for k, v in fits.items()}))
