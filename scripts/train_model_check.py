#!/usr/bin/env python3
"""The resource model against measured training steps: for each training-step report (`dropbench run`,
workload.pass = train), the model's step of every strategy at the same point, recomputed now by a dry run of the same
preset, dtype, SQ and R with --machine (the measured GPU's machine file) and the committed profile, beside the
measured step, forward and backward, and the attention backward's phase against the model's attention-backward
kernel, and every phase against the model's phase (the dry run's extra.model_phases). A phase that overlaps (GEMM
|| RNG) is timed on its own stream; the model's overlapped phase is compared with the later of its two sides'
ends (max of the GEMM side's phases and the RNG's). Each phase's kind (GEMMs, GEMM || RNG, attention forward,
attention backward, fp8 casts / transposes) gets its x per row, with the SM clock the model times that kind at.

Each step is compared twice: its sampled median (x) and its sustained time per step from the report's power pass
(x sustained: the strategy run back to back at the power cap, `power.time_per_iter_s`), where the report has one.

--clock model (default): the model's own clock per kernel (the profile's measured clock or the machine's max /
sustained); --clock step: every kernel at the measured step's mean SM clock (the variant's stats.mean_clock_mhz: the
harness's one-thread probe kernel between samples, not inside a phase), a dry run with --model-clock per clock: what
the model predicts at that clock. (The power pass's own mean SM clock, NVML's readings, is not the kernels' clock
either: at the largest preset it reads well below the probe's while the step takes the same time as sampled.)

    scripts/train_model_check.py --machine configs/machines/h100-sxm.json \\
        -o results/h100/train/model_check.json --md results/h100/train/model_check.md \\
        results/h100/train/train_llama3-*.json

x = measured / model (the x_model of a run report; 1.00 = exact). A report records the x_model of the model it was
run with; this script says what today's model and profile predict for the same measurements, without a GPU.
Needs build/dropbench (--dropbench). Bad arguments: one line naming the argument, exit 2.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import dbstats  # noqa: E402  (the one statistics module)
import peers  # noqa: E402  (git_sha: the sha as every report writes it)

class UsageError(Exception):
    pass


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="train_model_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--dropbench", default=str(ROOT / "build/dropbench"))
    ap.add_argument("-o", "--output")
    ap.add_argument("--md")
    ap.add_argument("--clock", default="model", choices=["model", "step"])
    a = ap.parse_args(argv)
    for r in a.reports:
        if not Path(r).is_file():
            raise UsageError(f"reports: {r!r} is not a file (allowed: training-step reports of `dropbench run`)")
    return check_common_args(a)


def check_common_args(a):
    """The options this check shares with cast_ncu.py (--machine, --dropbench, -o, --md), checked before any work."""
    if not Path(a.machine).is_file():
        raise UsageError(f"--machine: {a.machine!r} is not a file (allowed: configs/machines/*.json)")
    if not Path(a.dropbench).is_file():
        raise UsageError(f"--dropbench: {a.dropbench!r} is not a file (build it: cmake --build build --target dropbench)")
    return check_outputs(a)


def check_outputs(a):
    """-o and --md (either may be unset): their directories exist, checked before any work."""
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


# The phase kinds a row summarises, by the model's phase name (attention(...) / attention-bwd(...) by prefix).
KINDS = ("gemm", "gemm || rng", "attention", "attention-bwd", "casts")


def phase_kind(name):
    base = name.split("(")[0]
    if " || rng" in base:
        return "gemm || rng"
    if base.startswith("gemm"):
        return "gemm"
    if base in ("attention", "attention-bwd"):
        return base
    if base.startswith(("cast-", "transpose-")):
        return "casts"
    raise RuntimeError(f"model phase {name!r} has no kind")


def measured_phase(name, ph):
    """The measured time (us) of the model's phase `name` from the variant's phases ph (name -> us): an overlap
    ends with the later of its sides (both start at the fork), anything else is the phase of the same name.
    `dropbench model --report` maps phases by train_measured_phases (src/model/model_report.cpp); the test
    ModelReport.TrainPhaseRuleMatchesTheScript holds the two equal."""
    base = name.split("(")[0]
    if base == "gemm || rng":
        return max(ph["gemm"], ph["rng"])
    if base == "gemm-out-dx+dw || rng":
        side = sum(ph.get(k, 0.0) for k in ("cast-dy", "transpose-w-out", "gemm-out-dx", "gemm-out-dw"))
        return max(side, ph["rng-bwd"])
    if base not in ph:
        raise RuntimeError(f"the report has no phase {base!r} (model phase {name!r})")
    return ph[base]


def phase_rows(model_phases, ph):
    out = []
    for side in ("fwd", "bwd"):
        for q in model_phases[side]:
            m = measured_phase(q["phase"], ph)
            out.append({"phase": q["phase"], "kind": phase_kind(q["phase"]), "measured_us": m,
                        "model_us": q["model_us"], "x": m / q["model_us"], "limiter": q["limiter"],
                        "model_clock_mhz": q.get("clock_mhz")})
    return out


def kind_x(phases):
    """Per kind: summed measured / summed model time of its phases."""
    out = {}
    for k in KINDS:
        sel = [p for p in phases if p["kind"] == k]
        if sel:
            out[k] = sum(p["measured_us"] for p in sel) / sum(p["model_us"] for p in sel)
    return out


def dry_run(a, cfg, w0, sqs, rounds, clock):
    with tempfile.TemporaryDirectory() as td:
        dry_path = Path(td) / "dry.json"
        args = ["run", "--config", str(cfg), "--dry-run", "-q", "--machine", a.machine, "--set", "workload.pass=train",
                "--set", f"workload.dtype={w0['dtype']}", "--set", f"sweep.sq={json.dumps(sqs)}",
                "--set", f"sweep.rounds={json.dumps(rounds)}", "-o", str(dry_path)]
        if clock is not None:
            args += ["--model-clock", f"{clock:.1f}"]
        run(a, args)
        dry = json.loads(dry_path.read_text())
    return {json.dumps(p["axes"], sort_keys=True): p for p in dry["points"]}


def sustained_of(v):
    """The variant's sustained step (us) and SM clock (MHz) from its power pass, or (None, None) without one."""
    pw = v.get("power") or {}
    if not pw.get("measured") or not pw.get("time_per_iter_s"):
        return None, None
    return pw["time_per_iter_s"] * 1e6, pw.get("mean_sm_mhz")


def check_report(a, path):
    rep = json.loads(Path(path).read_text())
    rep["_path"] = path
    if rep["config"]["workload"].get("pass") != "train":
        raise UsageError(f"reports: {path} is not a training-step report (workload.pass = train)")
    cfg = preset_of(rep)
    w0 = rep["config"]["workload"]
    sqs = sorted({p["axes"].get("sq", w0["sq"]) for p in rep["points"]})
    rounds = sorted({p["axes"].get("rounds", w0["rounds"]) for p in rep["points"]})
    dries = {None: dry_run(a, cfg, w0, sqs, rounds, None)} if a.clock == "model" else {}
    rows = []
    for p in rep["points"]:
        w = p["workload"]
        for v in p["variants"]:
            if ":" in v["name"] or not v.get("phases"):
                continue
            clock = round(v["stats"]["mean_clock_mhz"], 1) if a.clock == "step" else None
            if clock not in dries:
                dries[clock] = dry_run(a, cfg, w0, sqs, rounds, clock)
            q = dries[clock].get(json.dumps(p["axes"], sort_keys=True))
            if q is None:
                raise RuntimeError(f"{path}: the dry run has no point {p['axes']}")
            st = q["derived"]["train"]["strategies"]
            if v["name"] not in st:
                continue
            mv = next(x for x in q["variants"] if x["name"] == v["name"])
            ph = {x["name"]: x["stats"]["median"] * 1e6 for x in v["phases"]}
            phases = phase_rows(mv["extra"]["model_phases"], ph)
            bwd = next(x for x in phases if x["kind"] == "attention-bwd")
            s = st[v["name"]]
            sus_us, sus_mhz = sustained_of(v)
            rows.append({"report": path, "dtype": w["dtype"], "q_heads": w["q_heads"], "kv_heads": w["kv_heads"],
                         "sq": w["sq"], "rounds": w["rounds"], "strategy": v["name"],
                         "clock_mhz": v["stats"].get("mean_clock_mhz"), "model_clock": q["derived"]["train"].get("model_clock"),
                         "measured_us": v["stats"]["median"] * 1e6, "model_us": s["model_us"],
                         "x": v["stats"]["median"] * 1e6 / s["model_us"],
                         "x_recorded": v.get("derived", {}).get("x_model"),
                         "sustained_us": sus_us, "sustained_clock_mhz": sus_mhz,
                         "x_sustained": sus_us / s["model_us"] if sus_us else None,
                         "measured_attn_bwd_us": bwd["measured_us"], "model_attn_bwd_us": bwd["model_us"],
                         "model_attn_bwd_kernel": bwd["phase"], "phases": phases, "kind_x": kind_x(phases)})
            ais = in_step_of(p, v["name"])
            if ais:
                rows[-1]["attention_in_step"] = ais
    return rows


def in_step_of(point, strategy):
    """The attention kernels measured alone at this point (a report's derived.train.measured.attention_in_step)
    whose in-step phase is this strategy's: variant -> its entry ({} for reports without them), with the alone
    variant's power pass share at the cap (capped_share, when it has one)."""
    ais = point.get("derived", {}).get("train", {}).get("measured", {}).get("attention_in_step", {})
    power = {v["name"]: v.get("power") or {} for v in point.get("variants", [])}
    out = {}
    for k, e in ais.items():
        if e.get("strategy") == strategy and e.get("x_alone"):
            out[k] = dict(e)
            if power.get(k, {}).get("capped_share") is not None:
                out[k]["alone_capped_share"] = power[k]["capped_share"]
    return out


def clock_quotient(e):
    """In step / alone over alone clock / step clock: 1.00 when the kernel's time follows the probe's clock."""
    a, s = e.get("alone_clock_mhz"), e.get("step_clock_mhz")
    return e["x_alone"] / (a / s) if a and s else None


def in_step_md(rows):
    """The attention in the step against the same kernel alone on the same GPU, where the reports measured it."""
    got = [(r, k, e) for r in rows for k, e in sorted(r.get("attention_in_step", {}).items())]
    if not got:
        return []
    out = ["", "The attention kernels inside the step against the same kernel alone, on the step's data in the same "
           "run (x = in step / alone; clocks: each group's probe; x / clock ratio = x over alone clock / step clock; "
           "sustained: the alone kernel's power pass per call over its sampled median, and its share at the cap):", "",
           "| heads | dtype | R | kernel | strategy | alone us | in step us | x | alone clock | step clock | "
           "x / clock ratio | sustained / alone | capped |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(x, f):
        return f"{x:{f}}" if x is not None else "-"
    for r, k, e in got:
        sus = e["alone_sustained_us"] / e["alone_us"] if e.get("alone_sustained_us") else None
        out.append(f"| {r['q_heads']}/{r['kv_heads']} | {r['dtype']} | {r['rounds']} | {k} | {r['strategy']} | "
                   f"{e['alone_us']:.0f} | {e['in_step_us']:.0f} | {e['x_alone']:.3f} | "
                   f"{e.get('alone_clock_mhz', 0):.0f} | {e.get('step_clock_mhz', 0):.0f} | "
                   f"{num(clock_quotient(e), '.3f')} | {num(sus, '.3f')} | {num(e.get('alone_capped_share'), '.2f')} |")
    out.append("")
    for name, pick in (("forward", lambda k: "-bwd-" not in k), ("backward", lambda k: "-bwd-" in k)):
        es = [e for _, k, e in got if pick(k)]
        if not es:
            continue
        xs, qs = [e["x_alone"] for e in es], [q for q in map(clock_quotient, es) if q is not None]
        line = f"- {name} ({len(es)}): x {min(xs):.3f}–{max(xs):.3f}"
        if qs:
            line += f", x / clock ratio {min(qs):.3f}–{max(qs):.3f}"
        out.append(line + ".")
    return out


def md(rows, machine, clock):
    at = ("each kernel at the model's own clock" if clock == "model" else
          "every kernel at the measured step's mean SM clock (--model-clock)")
    try:
        power = json.load(open(machine)).get("power") or {}
    except (OSError, ValueError):
        power = {}
    term = (f"; the power term with the machine file's power of {len(power)} kernels: each kernel no faster than "
            "its energy over the cap leaves" if power and clock == "model" else
            "; no power term: the measured clock is what the cap holds the kernels to" if power else "")
    out = [f"Model (today's profile, machine {machine}, {at}{term}) against measured training steps; x = measured / "
           "model (the sampled median; sustained: the power pass's time per step).\n",
           "| heads (Hq/Hkv) | dtype | R | strategy | step us | model us | x | sustained us | x sustained | x recorded | "
           "attention-bwd us | model us | x |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rec = f"{r['x_recorded']:.3f}" if r["x_recorded"] else "-"
        sus = (f"{r['sustained_us']:.0f} | {r['x_sustained']:.3f}" if r.get("x_sustained") else "- | -")
        ab = r["measured_attn_bwd_us"]
        out.append(f"| {r['q_heads']}/{r['kv_heads']} | {r['dtype']} | {r['rounds']} | {r['strategy']} | "
                   f"{r['measured_us']:.0f} | {r['model_us']:.0f} | {r['x']:.3f} | {sus} | {rec} | "
                   f"{ab:.0f} | {r['model_attn_bwd_us']:.0f} | {ab / r['model_attn_bwd_us']:.3f} |")
    out.append("")
    for name, key in (("steps", "x"), ("sustained steps (power pass)", "x_sustained")):
        xs = [r[key] for r in rows if r.get(key)]
        if xs:
            out.append(f"{len(xs)} {name}: x from {min(xs):.3f} to {max(xs):.3f}, mean |x - 1| "
                       f"{sum(abs(x - 1) for x in xs) / len(xs):.3f}; within 5 %: {sum(abs(x - 1) <= 0.05 for x in xs)}.")
    out += ["", "Per phase kind, x = the kind's summed measured phases / its summed model phases (an overlap: the "
            "later of its sides); the model's SM clock of each kind in MHz, the step's mean clock (the harness's probe between samples).", "",
            "| heads | dtype | R | strategy | step clock | " + " | ".join(f"{k} x (clock)" for k in KINDS) + " |",
            "|---|---|---|---|---|" + "---|" * len(KINDS)]
    for r in rows:
        cells = []
        for k in KINDS:
            if k not in r["kind_x"]:
                cells.append("-")
                continue
            clocks = sorted({round(p["model_clock_mhz"]) for p in r["phases"] if p["kind"] == k and p["model_clock_mhz"]})
            cells.append(f"{r['kind_x'][k]:.3f} ({'/'.join(str(c) for c in clocks)})")
        out.append(f"| {r['q_heads']}/{r['kv_heads']} | {r['dtype']} | {r['rounds']} | {r['strategy']} | "
                   f"{r['clock_mhz']:.0f} | " + " | ".join(cells) + " |")
    out.append("")
    for k in KINDS:
        for dt in sorted({r["dtype"] for r in rows}):
            ks = [r["kind_x"][k] for r in rows if k in r["kind_x"] and r["dtype"] == dt]
            if ks:
                out.append(f"{k}, {dt}: x from {min(ks):.3f} to {max(ks):.3f}, mean {dbstats.mean(ks):.3f} "
                           f"({len(ks)} steps).")
    out += in_step_md(rows)
    cast_rows = [r for r in rows if "casts" in r["kind_x"]]
    if cast_rows:
        out += ["", "The casts one by one (x = measured / model per phase; regen-overlap's cast-dy and transpose-w-out are "
                "inside its overlap phase, not here), and the steps with every cast phase at its measured time:", ""]
        for name, xs in phase_x(cast_rows, "casts").items():
            out.append(f"- {name}: x from {min(xs):.3f} to {max(xs):.3f} ({len(xs)} steps).")
        xs = [with_measured(r, "casts") for r in cast_rows]
        out.append(f"- the steps with the casts as measured: x from {min(xs):.3f} to {max(xs):.3f}; within 5 %: "
                   f"{sum(abs(x - 1) <= 0.05 for x in xs)} of {len(xs)}.")
    return "\n".join(out) + "\n"


def phase_x(rows, kind):
    """Per phase name of `kind`, in first-seen order: x of every row that has it."""
    out = {}
    for r in rows:
        for p in r["phases"]:
            if p["kind"] == kind:
                out.setdefault(p["phase"], []).append(p["x"])
    return out


def with_measured(row, kind):
    """The row's step x if the model's phases of `kind` took their measured time (the rest of the model as is)."""
    d = sum(p["measured_us"] - p["model_us"] for p in row["phases"] if p["kind"] == kind)
    return row["measured_us"] / (row["model_us"] + d)


def self_test():
    """The phase mapping on a synthetic step: composites, kinds, the per-kind ratio; a phase the report lacks."""
    ph = {"gemm": 100.0, "rng": 130.0, "attention": 50.0, "cast-dy": 5.0, "transpose-w-out": 3.0,
          "gemm-out-dx": 40.0, "gemm-out-dw": 40.0, "rng-bwd": 70.0, "attention-bwd": 300.0, "gemm-dx": 90.0}
    assert measured_phase("gemm || rng", ph) == 130.0
    assert measured_phase("gemm-out-dx+dw || rng", ph) == 88.0
    assert measured_phase("gemm-out-dx+dw || rng", dict(ph, **{"rng-bwd": 95.0})) == 95.0
    assert measured_phase("attention-bwd(regen)", ph) == 300.0
    assert [phase_kind(n) for n in ("gemm || rng", "gemm-out-dx+dw || rng", "gemm-dw", "attention(fused-write)",
                                    "attention-bwd(mask)", "cast-o", "transpose-x")] == \
        ["gemm || rng", "gemm || rng", "gemm", "attention", "attention-bwd", "casts", "casts"]
    model = {"fwd": [{"phase": "gemm || rng", "model_us": 100.0, "limiter": "mma", "clock_mhz": 1500},
                     {"phase": "attention(mask)", "model_us": 50.0, "limiter": "issue", "clock_mhz": 1756}],
             "bwd": [{"phase": "cast-dy", "model_us": 4.0, "limiter": "hbm", "clock_mhz": 1980},
                     {"phase": "transpose-w-out", "model_us": 4.0, "limiter": "hbm", "clock_mhz": 1980},
                     {"phase": "gemm-out-dx", "model_us": 50.0, "limiter": "mma", "clock_mhz": 1500},
                     {"phase": "attention-bwd(mask)", "model_us": 250.0, "limiter": "issue", "clock_mhz": 1807},
                     {"phase": "gemm-dx", "model_us": 30.0, "limiter": "mma", "clock_mhz": 1500}]}
    rows = phase_rows(model, ph)
    assert [r["measured_us"] for r in rows] == [130.0, 50.0, 5.0, 3.0, 40.0, 300.0, 90.0]
    kx = kind_x(rows)
    assert abs(kx["gemm"] - 130.0 / 80.0) < 1e-12 and abs(kx["casts"] - 1.0) < 1e-12
    assert abs(kx["attention-bwd"] - 1.2) < 1e-12 and abs(kx["gemm || rng"] - 1.3) < 1e-12
    step = {"measured_us": 700.0, "model_us": 600.0, "phases": rows}
    assert phase_x([step], "casts") == {"cast-dy": [1.25], "transpose-w-out": [0.75]}
    assert abs(with_measured(step, "casts") - 700.0 / 600.0) < 1e-12  # +1 and -1 us cancel
    assert abs(with_measured(step, "attention-bwd") - 700.0 / 650.0) < 1e-12
    v = {"power": {"measured": True, "time_per_iter_s": 0.0007, "mean_sm_mhz": 1612.26}}
    assert sustained_of(v) == (700.0, 1612.26) and sustained_of({"power": {"measured": False}}) == (None, None)
    try:
        phase_rows({"fwd": [{"phase": "softmax", "model_us": 1.0, "limiter": "issue"}], "bwd": []}, ph)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a phase without a kind was accepted")
    pt = {"derived": {"train": {"measured": {"attention_in_step": {
        "alone:attention-bwd-mask": {"strategy": "stored", "alone_us": 100.0, "in_step_us": 110.0, "x_alone": 1.1},
        "alone:attention-bwd-fused": {"strategy": "fused", "alone_us": 100.0, "in_step_us": 104.0, "x_alone": 1.04}}}}}}
    assert list(in_step_of(pt, "stored")) == ["alone:attention-bwd-mask"] and in_step_of({}, "stored") == {}
    row = {"q_heads": 64, "kv_heads": 8, "dtype": "fp8", "rounds": 7, "strategy": "stored",
           "attention_in_step": in_step_of(pt, "stored")}
    assert in_step_md([dict(row, attention_in_step={})]) == []
    assert "| alone:attention-bwd-mask | stored | 100 | 110 | 1.100 | 0 | 0 | - | - | - |" in "\n".join(in_step_md([row]))
    e = {"x_alone": 1.1, "alone_clock_mhz": 1900.0, "step_clock_mhz": 1700.0, "alone_us": 100.0, "in_step_us": 110.0,
         "alone_sustained_us": 105.0, "alone_capped_share": 1.0, "strategy": "stored"}
    assert abs(clock_quotient(e) - 1.1 * 1700 / 1900) < 1e-12 and clock_quotient({"x_alone": 1.1}) is None
    text = "\n".join(in_step_md([dict(row, attention_in_step={"alone:attention-bwd-mask": e})]))
    assert "| 0.984 | 1.050 | 1.00 |" in text and "- backward (1): x 1.100–1.100, x / clock ratio 0.984–0.984." in text
    print("train_model_check.py self-test: ok")
    return 0


def work(argv):
    a = parse_args(argv)
    rows = [r for path in a.reports for r in check_report(a, path)]
    doc = {"schema": "dropbench.train_model_check", "schema_version": 3, "machine": a.machine, "clock": a.clock,
           "git_sha": peers.git_sha(), "rows": rows}
    return a, doc, md(rows, a.machine, a.clock)


def run_cli(prog, argv, self_test_fn, work_fn):
    """The command line of this check, cast_ncu.py and h2h_ab.py: --self-test alone runs the self-test; otherwise
    work_fn(argv) -> (args, JSON document, markdown), written to -o, --md and stdout. Bad input (UsageError): one
    line naming it, exit 2, nothing written."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--self-test"]:
        return self_test_fn()
    try:
        a, doc, text = work_fn(argv)
    except UsageError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    if a.md:
        Path(a.md).write_text(text)
    print(text, end="")
    return 0


def main(argv=None):
    return run_cli("train_model_check.py", argv, self_test, work)


if __name__ == "__main__":
    sys.exit(main())
