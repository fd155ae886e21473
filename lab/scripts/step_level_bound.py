#!/usr/bin/env python3
"""The model's power term per kernel against one energy bound for the whole training step. (No GPU.)

    lab/scripts/step_level_bound.py --machine configs/machines/h100-sxm.json [--reports results/h100/train]
                                    [--rev REV] [--dropbench build/dropbench]

For every strategy of the training-step reports (train_llama3-<8b|70b|405b>_<bf16|fp8>.json in --reports, or in git
at --rev), three predictions from dry runs of the same point (`dropbench run --dry-run --machine ...`):
  per-kernel  the model as it is: each kernel no faster than its dynamic energy over what the cap leaves;
  no power    the same machine file without its per-kernel power (each kernel at its unit times alone);
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESETS, DTYPES = ("8b", "70b", "405b"), ("bf16", "fp8")
STRATEGIES = ("fused", "stored", "regen-overlap", "fused-write")


def run(cmd, what):
    """cmd's stdout; on failure one line naming what failed and the tool's last message, exit 1."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    except FileNotFoundError:
        sys.exit(f"step_level_bound: {what}: {cmd[0]} not found")
    except subprocess.CalledProcessError as e:
        last = (e.stderr.strip().splitlines() or ["(no message)"])[-1]
        sys.exit(f"step_level_bound: {what}: exit {e.returncode}: {last}")


def load_report(a, preset, dtype):
    name = f"train_llama3-{preset}_{dtype}.json"
    if a.rev:
        return json.loads(run(["git", "show", f"{a.rev}:results/h100/train/{name}"], f"--rev {a.rev}: {name}"))
    with open(os.path.join(a.reports, name)) as f:
        return json.load(f)


def dry_run(a, machine, preset, dtype, rounds, tmp):
    out = os.path.join(tmp, f"{os.path.basename(machine)}_{preset}_{dtype}_{rounds}.json")
    run([a.dropbench, "run", "--config", os.path.join(ROOT, f"configs/llama3-{preset}.json"), "--dry-run",
         "--machine", machine, "--set", "sweep.sq=[8192]", "--set", "workload.pass=train",
         "--set", f"workload.dtype={dtype}", "--set", f"sweep.rounds=[{rounds}]", "-o", out],
        f"dry run of {preset} {dtype} R {rounds} with {machine}")
    with open(out) as f:
        return {v["name"]: v["derived"] for v in json.load(f)["points"][0]["variants"]}


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
    ap.add_argument("--reports", default="", help="folder of the reports (default results/h100/train)")
    ap.add_argument("--rev", default="", help="read the reports of results/h100/train/ at this git revision")
    ap.add_argument("--dropbench", default=os.path.join(ROOT, "build/dropbench"))
    a = ap.parse_args()
    if a.rev and a.reports:
        sys.exit("step_level_bound: --rev and --reports: give one (--rev reads results/h100/train/ at the revision)")
    a.reports = a.reports or os.path.join(ROOT, "results/h100/train")
    with open(a.machine) as f:
        m = json.load(f)
    if "power" not in m or "cap_w" not in m or "static_w" not in m:
        sys.exit(f"step_level_bound: --machine: {a.machine} has no power, cap_w or static_w")
    cap, static = m["cap_w"]["value"], m["static_w"]["value"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bare = os.path.join(tmp, "no_power.json")
        with open(bare, "w") as f:
            # no per-kernel power and no cap: the power term cannot act (the profile carries no power either)
            json.dump({k: v for k, v in m.items() if k not in ("power", "cap_w", "static_w")}, f)
        for preset in PRESETS:
            for dtype in DTYPES:
                rep = load_report(a, preset, dtype)
                for pt in rep["points"]:
                    r = pt["axes"]["rounds"]
                    pw, np_ = dry_run(a, a.machine, preset, dtype, r, tmp), dry_run(a, bare, preset, dtype, r, tmp)
                    v = {x["name"]: x for x in pt["variants"]}
                    for s in STRATEGIES:
                        meas = v[s]["stats"]["median"] * 1e6
                        sus = (v[s].get("power") or {}).get("time_per_iter_s")
                        if "model_energy_mj" not in pw[s]:
                            sys.exit(f"step_level_bound: {preset} {dtype} R {r} {s}: the model has no energy "
                                     f"(a kernel without power data in {a.machine})")
                        dyn_j = pw[s]["model_energy_mj"] * 1e-3 - static * pw[s]["model_us"] * 1e-6
                        step_level = max(np_[s]["model_us"], dyn_j / (cap - static) * 1e6)
                        rows.append({"point": f"{preset} {dtype} R {r} {s}", "meas": meas,
                                     "sus": sus * 1e6 if sus else None, "per-kernel": pw[s]["model_us"],
                                     "no power": np_[s]["model_us"], "step-level": step_level})
    for name in ("per-kernel", "no power", "step-level"):
        print(summary(name, [r["meas"] / r[name] for r in rows], [r["sus"] / r[name] for r in rows if r["sus"]]))
    print("\nmisses (x sampled / sustained):")
    for r in rows:
        xs = {n: (r["meas"] / r[n], r["sus"] / r[n] if r["sus"] else None) for n in ("per-kernel", "step-level")}
        if any(x is not None and abs(x - 1) > 0.05 for p in xs.values() for x in p):
            print(f"  {r['point']:28s} " + "  ".join(
                f"{n} {p[0]:.3f} / {'-' if p[1] is None else f'{p[1]:.3f}'}" for n, p in xs.items()))


if __name__ == "__main__":
    main()
