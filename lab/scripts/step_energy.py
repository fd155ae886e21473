#!/usr/bin/env python3
"""Does a training step's energy add up from its pieces measured alone on the same GPU, and does energy over the
power cap give the sustained step time? (No GPU.)

    lab/scripts/step_energy.py TRAIN_DIR GEMM_DIR [--machine configs/machines/h100-sxm.json] [--md OUT.md]

TRAIN_DIR holds `dropbench run` reports at workload.pass = train (train_llama3-<preset>_<dtype>.json); GEMM_DIR
holds `dropbench gemm` reports of the step's five GEMM shapes with power passes (gemm_<preset>_<qkv|out|out-dw|
qkv-dx|qkv-dw>.json, bf16 and fp8 points), run on the same GPU. Presets without GEMM reports are left out.

Per strategy the pieces' energies per call (each piece's power pass, energy_mj_per_iter) are summed:
  QKV GEMM (overlap:fwd where the strategy runs the RNG beside it), the output projection (`out`), the attention
  forward alone (mask or fused), the output projection's dX (`out`, the same shape) and dW (`out-dw`; for
  regen-overlap the overlap:bwd energy less alone:gemm-out-bwd's is added: its RNG), the attention backward alone
  (mask, or fused for the fused strategy), the QKV GEMM's dX and dW. The fp8 casts and transposes are not measured
  alone with power: their phases' time in the step at the step's own mean power is added (about 1 % of an fp8 step).
Printed: sum / the step's power-pass energy per step, and (sum / cap) / the sustained step time, with the machine
file's cap_w (in the energy counter's units, as every energy here).
"""
import argparse
import glob
import json
import os
import sys

STRATEGIES = ("fused", "stored", "regen-overlap", "fused-write")


def gemm_energies(gemm_dir):
    out = {}
    for f in glob.glob(os.path.join(gemm_dir, "gemm_*_*.json")):
        preset, name = os.path.basename(f)[len("gemm_"):-len(".json")].split("_", 1)
        for pt in json.load(open(f))["points"]:
            v = pt["variants"][0]
            if v.get("power"):
                out[(preset, name, pt["axes"]["dtype"])] = v["power"]["energy_mj_per_iter"]
    return out


def rows(train_dir, gemms, cap_w):
    for f in sorted(glob.glob(os.path.join(train_dir, "train_llama3-*_*.json"))):
        preset, dtype = os.path.basename(f)[len("train_llama3-"):-len(".json")].split("_")
        if (preset, "qkv", dtype) not in gemms:
            continue
        g = lambda n: gemms[(preset, n, dtype)]
        for pt in json.load(open(f))["points"]:
            var = {v["name"]: v for v in pt["variants"]}
            e = lambda n: var[n]["power"]["energy_mj_per_iter"]
            for s in STRATEGIES:
                pw = var[s]["power"]
                phases = {p["name"]: p["stats"]["median"] for p in var[s]["phases"]}
                casts_s = sum(t for n, t in phases.items() if n.startswith(("cast", "transpose")))
                mask_fwd = s in ("stored", "regen-overlap")
                fwd_gemm = e("overlap:fwd") if mask_fwd else g("qkv")
                attn_fwd = e("alone:attention-mask" if mask_fwd else "alone:attention-fused")
                attn_bwd = e("alone:attention-bwd-fused" if s == "fused" else "alone:attention-bwd-mask")
                out_bwd = g("out") + g("out-dw")
                if s == "regen-overlap":
                    out_bwd += e("overlap:bwd") - e("alone:gemm-out-bwd")
                total = (fwd_gemm + g("out") + attn_fwd + out_bwd + attn_bwd + g("qkv-dx") + g("qkv-dw")
                         + casts_s * pw["mean_w"] * 1e3)
                yield {"preset": preset, "dtype": dtype, "rounds": pt["axes"]["rounds"], "strategy": s,
                       "sum_mj": total, "step_mj": pw["energy_mj_per_iter"],
                       "energy_ratio": total / pw["energy_mj_per_iter"],
                       "sustained_us": pw["time_per_iter_s"] * 1e6, "step_w": pw["mean_w"],
                       "time_ratio": total / cap_w * 1e3 / (pw["time_per_iter_s"] * 1e6)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train_dir")
    ap.add_argument("gemm_dir")
    ap.add_argument("--machine", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                      "configs", "machines", "h100-sxm.json"))
    ap.add_argument("--md")
    a = ap.parse_args()
    cap_w = json.load(open(a.machine))["cap_w"]["value"]
    rs = list(rows(a.train_dir, gemm_energies(a.gemm_dir), cap_w))
    if not rs:
        sys.exit("step_energy: no training-step report with GEMM reports of its preset")
    lines = ["| preset | dtype | R | strategy | pieces' energy mJ | step's energy mJ | pieces / step | step's mean W | "
             f"(pieces / {cap_w:.1f} W) / sustained step |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['preset']} | {r['dtype']} | {r['rounds']} | {r['strategy']} | {r['sum_mj']:.0f} | "
                     f"{r['step_mj']:.0f} | {r['energy_ratio']:.3f} | {r['step_w']:.0f} | {r['time_ratio']:.3f} |")
    er = [r["energy_ratio"] for r in rs]
    tr = [r["time_ratio"] for r in rs]
    w = [r["step_w"] for r in rs]
    lines += ["", f"{len(rs)} steps: pieces / step energy {min(er):.3f}–{max(er):.3f}; the steps' mean power "
              f"{min(w):.0f}–{max(w):.0f} W; energy over {cap_w:.1f} W / sustained step {min(tr):.3f}–{max(tr):.3f}, "
              f"within 5 %: {sum(abs(x - 1) <= 0.05 for x in tr)} of {len(rs)}."]
    text = "\n".join(lines) + "\n"
    if a.md:
        open(a.md, "w").write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
