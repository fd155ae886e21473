#!/usr/bin/env python3
"""The resource model against measured training steps: for each training-step report (`dropbench run`,
workload.pass = train), the model's step of every strategy at the same point, recomputed now by a dry run of the same
preset, dtype, SQ and R with --machine (the measured GPU's machine file) and the committed profile, beside the
measured step, forward and backward, and the attention backward's phase against the model's attention-backward
kernel (from `dropbench recommend --pass train`, the same model). Phases that overlap (GEMM || RNG) are timed on
their own streams and do not add up to the step, so the step is compared whole and the attention backward (one
kernel, never overlapped) phase by phase.

    scripts/train_model_check.py --machine configs/machines/h100-sxm.json \\
        -o results/h100/train/model_check.json --md results/h100/train/model_check.md \\
        results/h100/train/train_llama3-*.json

x = measured / model (the x_model of a run report; 1.00 = exact). A report records the x_model of the model it was
run with; this script says what today's model and profile predict for the same measurements, without a GPU.
Needs build/dropbench (--dropbench). Bad arguments: one line naming the argument, exit 2.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

class UsageError(Exception):
    pass


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="train_model_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--dropbench", default=str(ROOT / "build/dropbench"))
    ap.add_argument("-o", "--output")
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    for r in a.reports:
        if not Path(r).is_file():
            raise UsageError(f"reports: {r!r} is not a file (allowed: training-step reports of `dropbench run`)")
    if not Path(a.machine).is_file():
        raise UsageError(f"--machine: {a.machine!r} is not a file (allowed: configs/machines/*.json)")
    if not Path(a.dropbench).is_file():
        raise UsageError(f"--dropbench: {a.dropbench!r} is not a file (build it: cmake --build build --target dropbench)")
    for path, name in ((a.output, "-o"), (a.md, "--md")):
        if path and not Path(path).resolve().parent.is_dir():
            raise UsageError(f"{name}: the directory of {path!r} does not exist")
    return a


def run(a, args):
    return subprocess.run([a.dropbench] + args, check=True, capture_output=True, text=True, cwd=ROOT).stdout


def preset_of(rep):
    """configs/llama3-*.json the report was run from (its config's embed / heads / layers)."""
    w = rep["config"]["workload"]
    for cfg in sorted((ROOT / "configs").glob("llama3-*.json")):
        c = json.loads(cfg.read_text())["workload"]
        if all(c.get(k) == w.get(k) for k in ("embed", "q_heads", "kv_heads", "head_dim", "layers")):
            return cfg
    raise UsageError(f"reports: no configs/llama3-*.json has the workload of {rep.get('_path')}")


def model_bwd_kernels(a, w, rounds):
    """The model's attention-backward kernel times (us) at w, R: (mask, regen), from recommend --pass train."""
    shape = (f"b={w['batch']},sq={w['sq']},e={w['embed']},hq={w['q_heads']},hkv={w['kv_heads']},dh={w['head_dim']},"
             f"causal={int(bool(w['causal']))},dtype={w['dtype']}")
    out = run(a, ["recommend", "--shape", shape, "--pass", "train", "--rounds", str(rounds), "--machine", a.machine])
    m = re.search(r"attention backward \(mask\) (\d+) us, \(regen\) (\d+) us", out)
    if not m:
        raise RuntimeError(f"recommend printed no attention-backward kernel times at {shape}")
    return float(m.group(1)), float(m.group(2))


def check_report(a, path):
    rep = json.loads(Path(path).read_text())
    rep["_path"] = path
    if rep["config"]["workload"].get("pass") != "train":
        raise UsageError(f"reports: {path} is not a training-step report (workload.pass = train)")
    cfg = preset_of(rep)
    w0 = rep["config"]["workload"]
    sqs = sorted({p["axes"].get("sq", w0["sq"]) for p in rep["points"]})
    rounds = sorted({p["axes"].get("rounds", w0["rounds"]) for p in rep["points"]})
    with tempfile.TemporaryDirectory() as td:
        dry_path = Path(td) / "dry.json"
        run(a, ["run", "--config", str(cfg), "--dry-run", "-q", "--machine", a.machine, "--set", "workload.pass=train",
                "--set", f"workload.dtype={w0['dtype']}", "--set", f"sweep.sq={json.dumps(sqs)}",
                "--set", f"sweep.rounds={json.dumps(rounds)}", "-o", str(dry_path)])
        dry = json.loads(dry_path.read_text())
    model_at = {json.dumps(p["axes"], sort_keys=True): p for p in dry["points"]}
    rows = []
    for p in rep["points"]:
        q = model_at.get(json.dumps(p["axes"], sort_keys=True))
        if q is None:
            raise RuntimeError(f"{path}: the dry run has no point {p['axes']}")
        st = q["derived"]["train"]["strategies"]
        w = p["workload"]
        k_mask, k_regen = model_bwd_kernels(a, w, w["rounds"])
        for v in p["variants"]:
            if v["name"] not in st or not v.get("phases"):
                continue
            ph = {x["name"]: x["stats"]["median"] * 1e6 for x in v["phases"]}
            s = st[v["name"]]
            regen = v["name"] == "fused"
            rows.append({"report": path, "dtype": w["dtype"], "q_heads": w["q_heads"], "kv_heads": w["kv_heads"],
                         "sq": w["sq"], "rounds": w["rounds"], "strategy": v["name"],
                         "measured_us": v["stats"]["median"] * 1e6, "model_us": s["model_us"],
                         "x": v["stats"]["median"] * 1e6 / s["model_us"],
                         "x_recorded": v.get("derived", {}).get("x_model"),
                         "measured_attn_bwd_us": ph.get("attention-bwd"),
                         "model_attn_bwd_us": k_regen if regen else k_mask,
                         "model_attn_bwd_kernel": "regen" if regen else "mask"})
    return rows


def md(rows, machine):
    out = [f"Model (today's profile, machine {machine}) against measured training steps; x = measured / model.\n",
           "| heads (Hq/Hkv) | dtype | R | strategy | step us | model us | x | x recorded | attention-bwd us | "
           "model us | x |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rec = f"{r['x_recorded']:.3f}" if r["x_recorded"] else "-"
        ab = r["measured_attn_bwd_us"]
        out.append(f"| {r['q_heads']}/{r['kv_heads']} | {r['dtype']} | {r['rounds']} | {r['strategy']} | "
                   f"{r['measured_us']:.0f} | {r['model_us']:.0f} | {r['x']:.3f} | {rec} | "
                   f"{ab:.0f} | {r['model_attn_bwd_us']:.0f} | {ab / r['model_attn_bwd_us']:.3f} |")
    xs = [r["x"] for r in rows]
    out.append(f"\n{len(rows)} steps: x from {min(xs):.3f} to {max(xs):.3f}, mean |x - 1| "
               f"{sum(abs(x - 1) for x in xs) / len(xs):.3f}; within 5 %: {sum(abs(x - 1) <= 0.05 for x in xs)}.")
    return "\n".join(out) + "\n"


def main(argv=None):
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        rows = [r for path in a.reports for r in check_report(a, path)]
    except UsageError as e:
        print(f"train_model_check.py: {e}", file=sys.stderr)
        return 2
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    doc = {"schema": "dropbench.train_model_check", "schema_version": 1, "machine": a.machine,
           "git_sha": sha + ("-dirty" if dirty else ""), "rows": rows}
    text = md(rows, a.machine)
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    if a.md:
        Path(a.md).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
