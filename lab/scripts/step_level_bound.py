#!/usr/bin/env python3
"""The model's power term per kernel against one energy bound for the whole training step. (No GPU.)

    lab/scripts/step_level_bound.py --machine configs/machines/h100-sxm.json [--rev REV] [--dropbench build/dropbench]
                                    [REPORT.json ...]   (default: results/h100/train/train_llama3-*.json)

For every strategy of the training-step reports (read from the tree, or from git at --rev), three predictions from
the dry runs scripts/train_model_check.py makes (its dry_run, preset_of and sustained_of):
  per-kernel  the model as it is: each kernel no faster than its dynamic energy over what the cap leaves;
  no power    the same machine file without its per-kernel power and cap (each kernel at its unit times alone);
  step-level  max(no power, the step's summed dynamic energy / (cap - static)): one cap for the whole step, as a
              power limiter that averages over windows longer than a step would set it.
Printed per prediction: measured / model over the sampled medians and over the power passes' sustained times
(range, within 5 %, mean |x - 1|), then the steps that miss 5 % under either bound.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import train_model_check as tmc  # noqa: E402  (the training-step model check's dry runs and report reading)


def fail(msg):
    sys.exit(f"step_level_bound: {msg}")


def load_report(path, rev):
    if not rev:
        return json.loads(Path(path).read_text())
    rel = os.path.relpath(Path(path).resolve(), ROOT)
    r = subprocess.run(["git", "show", f"{rev}:{rel}"], capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        fail(f"--rev {rev}: {rel}: {(r.stderr.strip().splitlines() or ['git show failed'])[-1]}")
    return json.loads(r.stdout)


def dry_points(machine, dropbench, rep):
    """The dry run of the report's preset, dtype, SQs and rounds with `machine`: points keyed by their axes."""
    w0 = rep["config"]["workload"]
    sqs = sorted({p["axes"].get("sq", w0["sq"]) for p in rep["points"]})
    rounds = sorted({p["axes"].get("rounds", w0["rounds"]) for p in rep["points"]})
    try:
        return tmc.dry_run(argparse.Namespace(machine=machine, dropbench=dropbench), tmc.preset_of(rep), w0, sqs,
                           rounds, None)
    except subprocess.CalledProcessError as e:
        fail(f"dry run with {machine}: exit {e.returncode}: {(e.stderr.strip().splitlines() or [''])[-1]}")


def summary(name, xs, xsu):
    def part(v):
        if not v:
            return "-"
        return (f"{min(v):.3f}-{max(v):.3f}, {sum(abs(x - 1) <= 0.05 for x in v)} of {len(v)} within 5 %, "
                f"mean |x - 1| {sum(abs(x - 1) for x in v) / len(v):.4f}")
    return f"{name:11s} sampled {part(xs)}; sustained {part(xsu)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--rev", default="", help="read the reports at this git revision")
    ap.add_argument("--dropbench", default=str(ROOT / "build/dropbench"))
    ap.add_argument("reports", nargs="*")
    a = ap.parse_args()
    reports = a.reports or sorted(str(p) for p in (ROOT / "results/h100/train").glob("train_llama3-*.json"))
    if not Path(a.dropbench).is_file():
        fail(f"--dropbench: {a.dropbench!r} is not a file (build it: cmake --build build --target dropbench)")
    m = json.loads(Path(a.machine).read_text())
    if "power" not in m or "cap_w" not in m or "static_w" not in m:
        fail(f"--machine: {a.machine} has no power, cap_w or static_w")
    cap, static = m["cap_w"]["value"], m["static_w"]["value"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "no_power.json"
        # no per-kernel power and no cap: the power term cannot act (the profile carries no power either)
        bare.write_text(json.dumps({k: v for k, v in m.items() if k not in ("power", "cap_w", "static_w")}))
        for path in reports:
            rep = load_report(path, a.rev)
            pw_pts, np_pts = dry_points(a.machine, a.dropbench, rep), dry_points(str(bare), a.dropbench, rep)
            for pt in rep["points"]:
                key = json.dumps(pt["axes"], sort_keys=True)
                pw = {v["name"]: v["derived"] for v in pw_pts[key]["variants"]}
                np_ = {v["name"]: v["derived"] for v in np_pts[key]["variants"]}
                for v in pt["variants"]:
                    s = v["name"]
                    if s not in pw_pts[key]["derived"]["train"]["strategies"]:
                        continue
                    if "model_energy_mj" not in pw[s]:
                        fail(f"{path} {pt['axes']} {s}: the model has no energy (a kernel without power data)")
                    dyn_j = pw[s]["model_energy_mj"] * 1e-3 - static * pw[s]["model_us"] * 1e-6
                    rows.append({"point": f"{Path(path).stem} R {pt['axes'].get('rounds')} {s}",
                                 "meas": v["stats"]["median"] * 1e6, "sus": tmc.sustained_of(v)[0],
                                 "per-kernel": pw[s]["model_us"], "no power": np_[s]["model_us"],
                                 "step-level": max(np_[s]["model_us"], dyn_j / (cap - static) * 1e6)})
    for name in ("per-kernel", "no power", "step-level"):
        print(summary(name, [r["meas"] / r[name] for r in rows], [r["sus"] / r[name] for r in rows if r["sus"]]))
    print("\nmisses (x sampled / sustained):")
    for r in rows:
        xs = {n: (r["meas"] / r[n], r["sus"] / r[n] if r["sus"] else None) for n in ("per-kernel", "step-level")}
        if any(x is not None and abs(x - 1) > 0.05 for p in xs.values() for x in p):
            print(f"  {r['point']:42s} " + "  ".join(
                f"{n} {p[0]:.3f} / {'-' if p[1] is None else f'{p[1]:.3f}'}" for n, p in xs.items()))


if __name__ == "__main__":
    main()
