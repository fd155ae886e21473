#!/usr/bin/env python3
"""The answer table of `dropbench run` reports (no GPU): per point (preset, Philox rounds R) and attention kernel,
the winning pipeline (sampled medians), its margin over the best pipeline of the other strategy (fused against the best of the
separate-RNG pipelines baseline / overlap / chunked, and the other way round) with the report's 95 % interval, the
winner of the sustained power pass and the energy winner, and
dropbench's best block (any pipeline, any kernel, that R) against the best PyTorch end-to-end block of a peers
report at the same point (scripts/peers.py --blocks e2e).

    scripts/answer_table.py RUN.json[=PEERS.json] ... [--link-prefix PREFIX]

Each cell links the report it comes from (markdown), its path prefixed by PREFIX (e.g. results/h200/verdict/).
The margin is t(other) / t(winner) from the point's derived speedup_<a>_vs_<b> (and its _ci) where the report
has that pair, else the plain ratio of medians without an interval.

Reports of the training step (`dropbench run`, workload.pass = train; PEERS.json from scripts/peers.py --only train)
give the training-step table instead, one row per point (preset, GEMM precision, R): the fastest strategy at every
budget of network mask memory with its margin over the runner-up within that budget (derived.train.measured.verdict,
paired 95 % interval), the least-energy and the sustained (power pass) strategy per budget, the share of the RNG each
overlap hides in the forward and the backward (95 % interval), the model against the measurement (x_model per
strategy, and x_model_step_clock, the model at the step's measured clock, where the report has it) and the best step against PyTorch's best training step at the same point. A command line takes one kind.
    scripts/answer_table.py TRAIN_RUN.json[=TRAIN_PEERS.json] ...
    scripts/answer_table.py --self-test
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dropbench_report as dr  # noqa: E402

PIPELINES = ("baseline", "fused", "overlap", "chunked")


def margin(point, winner, runner):
    d = point.derived
    for a, b, inv in ((winner, runner, False), (runner, winner, True)):
        s = d.get(f"speedup_{a}_vs_{b}")
        if s is None:
            continue
        ci = d.get(f"speedup_{a}_vs_{b}_ci")
        if inv:
            s = 1 / s
            ci = [1 / ci[1], 1 / ci[0]] if ci else None
        return s, ci
    t = point.medians()
    return t[runner] / t[winner], None


def kernel_cell(point):
    t = {n: point.variant(n).median for n in PIPELINES if point.variant(n) and dr.finite(point.variant(n).median)}
    win = min(t, key=t.get)
    other = [n for n in t if (n == "fused") != (win == "fused")]
    run = min(other, key=t.get)
    s, ci = margin(point, win, run)
    d = point.derived
    return win, run, f"**{win}** {s:.3f}{ci_text(ci)} over {run}", d.get("energy_winner", "-"), t[win], d.get("sustained_winner", "-")


def loaded(pairs, prefix):
    """(run report, peers report or None, the run's link template, the peers' link template) per pair."""
    for run_path, peers_path in pairs:
        link = f"[{{}}]({prefix}{os.path.basename(run_path)})"
        plink = f"[{{}}]({prefix}{os.path.basename(peers_path)})" if peers_path else link
        yield dr.load(run_path), dr.load(peers_path) if peers_path else None, link, plink


def rows(pairs, prefix):
    out = []
    for rep, peers, link, plink in loaded(pairs, prefix):
        by_r = {}
        for p in rep.points:
            by_r.setdefault(p.get("rounds"), {})[p.get("attention_kernel")] = p
        for r in sorted(by_r):
            cells = {k: kernel_cell(p) for k, p in by_r[r].items()}
            best_k = min(cells, key=lambda k: cells[k][4])
            best = cells[best_k]
            vs = "-"
            if peers:
                pp = next(iter(peers.points))
                e2e = [v for v in pp.variants if v.name.startswith("peer:e2e") and dr.finite(v.median)]
                if e2e:
                    pb = min(e2e, key=lambda v: v.median)
                    vs = (plink.format(f"{pb.median / best[4]:.2f}×") + f": {best[0]} "
                          f"{best_k} {best[4] * 1e6:.0f} µs vs {pb.name[len('peer:'):]} {pb.median * 1e6:.0f} µs")
            name = (rep.config_name or "?").replace("llama3-", "").upper()
            kern = [link.format(cells[k][2]) if k in cells else "-" for k in ("wgmma", "mma")]
            energy = ", ".join(f"{k} {cells[k][3]}" for k in ("wgmma", "mma") if k in cells)
            sus = ", ".join(f"{k} {cells[k][5]}" for k in ("wgmma", "mma") if k in cells)
            out.append(f"| {name} | {r} | {kern[0]} | {kern[1]} | {vs} | {link.format(sus)} | {link.format(energy)} |")
    return out


# ---- the training step ----

def bytes_text(b):
    """As the C++ side's model::bytes_text: 40.0 GiB, 512 MiB, 12 KiB, 7 B."""
    if b >= 1 << 30:
        return f"{b / (1 << 30):.1f} GiB"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.0f} MiB"
    if b >= 1 << 10:
        return f"{b / (1 << 10):.0f} KiB"
    return f"{b} B"


def is_train(point):
    return point.get("pass") == "train"


def ci_text(ci):
    return f" [{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(ci, list) and len(ci) == 2 else ""


def ladder_cell(verdict, cost, unit):
    """The budget ladder of one cost, most memory first: "≥ 40.0 GiB: **stored** 12.3 ms, 1.016× [..] over
    fused-write" (time steps carry a margin)."""
    lad = (verdict or {}).get(cost, {}).get("ladder") or []
    if not lad:
        return "-"
    parts = []
    for step in reversed(lad):
        key = "energy_mj" if cost == "energy" else "t_us"
        val = step.get(key)
        fig = f" {val / 1e3:.2f} {unit}" if dr.finite(val) else ""
        cell = f"≥ {bytes_text(step['from_bytes'])}: **{step['strategy']}**{fig}"
        if cost == "time":
            if step.get("runner_up"):
                cell += f", {step['margin']:.3f}×{ci_text(step.get('margin_ci'))} over {step['runner_up']}"
            else:
                cell += ", alone at this budget"
        parts.append(cell)
    return "<br>".join(parts)


def hidden_cell(measured):
    out = []
    for side in ("fwd", "bwd"):
        o = measured.get(f"overlap_{side}")
        if isinstance(o, dict) and dr.finite(o.get("hidden")):
            out.append(f"{side} {pct(o['hidden'])} %{ci_pct(o.get('hidden_ci'))}")
    return ", ".join(out) or "-"


def pct(x):
    """A share as a whole percent; a small negative share reads 0, not -0."""
    return f"{round(x * 100):d}"


def ci_pct(ci):
    return f" [{pct(ci[0])}, {pct(ci[1])}]" if isinstance(ci, list) and len(ci) == 2 else ""


def model_cell(point):
    """x_model's range over the strategies (the model at its own clocks) with the worst one; where the report has it,
    the same at the step's measured clock (x_model_step_clock)."""
    cell = "-"
    for key, label in (("x_model", ""), ("x_model_step_clock", "at the step's clock ")):
        xs = {v.name: v.derived.get(key) for v in point.variants if v.is_pipeline}
        xs = {k: x for k, x in xs.items() if dr.finite(x)}
        if not xs:
            continue
        worst = max(xs, key=lambda k: abs(xs[k] - 1))
        text = f"{label}{min(xs.values()):.3f}–{max(xs.values()):.3f} (worst {worst})"
        cell = text if cell == "-" else f"{cell}<br>{text}"
    return cell


def peer_cell(point, peers, link):
    if not peers:
        return "-"
    for pp in peers.points:
        if not is_train(pp) or not all(point.get(k) == x for k, x in pp.axes.items()):
            continue
        blocks = [v for v in pp.variants if v.name.startswith("peer:train") and dr.finite(v.median) and v.median > 0]
        ours = [v for v in point.variants if v.is_pipeline and dr.finite(v.median) and v.median > 0]
        if not blocks or not ours:
            continue
        pb, ob = min(blocks, key=lambda v: v.median), min(ours, key=lambda v: v.median)
        return link.format(f"{pb.median / ob.median:.2f}×") + (f": {ob.name} {ob.median * 1e3:.2f} ms vs "
                                                              f"{pb.name[len('peer:'):]} {pb.median * 1e3:.2f} ms")
    return "-"


def train_rows(pairs, prefix):
    out = []
    for rep, peers, link, plink in loaded(pairs, prefix):
        name = (rep.config_name or "?").replace("llama3-", "").upper()
        for p in rep.points:
            if not is_train(p):
                continue
            m = p.derived.get("train", {}).get("measured")
            if not isinstance(m, dict):
                continue
            v = m.get("verdict")
            out.append(f"| {name} | {p.get('dtype', '?')} | {p.get('rounds')} | {link.format(ladder_cell(v, 'time', 'ms'))} "
                       f"| {ladder_cell(v, 'energy', 'J')} | {ladder_cell(v, 'sustained', 'ms')} | {hidden_cell(m)} "
                       f"| {model_cell(p)} | {peer_cell(p, peers, plink)} |")
    return out


TRAIN_HEADER = ("| preset | GEMMs | R | fastest by network mask budget, margin over the runner-up [95 % CI] "
                "| least energy per step | fastest sustained (power pass) | RNG hidden by the overlap [95 % CI] "
                "| measured / model | best step vs PyTorch's best |\n|---|---|---|---|---|---|---|---|---|")
FWD_HEADER = ("| preset | R | wgmma: winner, margin [95 % CI] | mma: winner, margin [95 % CI] "
              "| best block vs PyTorch's best | sustained winner (power pass) | energy winner |\n"
              "|---|---|---|---|---|---|---|")


def table(pairs, prefix=""):
    """The markdown table of the reports (forward or training step, by their points' pass)."""
    train = [any(is_train(p) for p in dr.load(r).points) for r, _ in pairs]
    if any(train) and not all(train):
        raise dr.ReportError("the reports mix the forward and the training step: give one kind per command line")
    if all(train):
        return TRAIN_HEADER + "\n" + "\n".join(train_rows(pairs, prefix))
    return FWD_HEADER + "\n" + "\n".join(rows(pairs, prefix))


def self_test():
    """Synthetic training-step reports through the table (no GPU)."""
    import selftest  # the self-tests' closing report (scripts/selftest.py)

    def variant(name, median, **derived):
        return {"name": name, "stats": {"median": median, "samples": 10}, "derived": derived}

    def report(points, name="llama3-70b"):
        return {"schema": dr.SCHEMA, "schema_version": dr.SCHEMA_VERSION, "command": "run", "config": {"name": name},
                "points": points}

    gib, mib = 1 << 30, 1 << 20
    verdict = {"time": {"ladder": [
        {"from_bytes": 0, "strategy": "fused", "t_us": 13000.0, "runner_up": None},
        {"from_bytes": 512 * mib, "strategy": "regen-overlap", "t_us": 12600.0, "runner_up": "fused",
         "margin": 1.0317, "margin_ci": [1.028, 1.035]},
        {"from_bytes": 40 * gib, "strategy": "stored", "t_us": 12300.0, "runner_up": "fused-write",
         "margin": 1.0163, "margin_ci": [1.012, 1.020]}]},
        "energy": {"ladder": [{"from_bytes": 0, "strategy": "fused", "energy_mj": 9000.0}]}}
    point = {"axes": {"rounds": 7}, "workload": {"pass": "train", "dtype": "fp8", "sq": 8192},
             "variants": [variant("fused", 13e-3, x_model=1.04, x_model_step_clock=1.01),
                          variant("stored", 12.3e-3, x_model=0.97, x_model_step_clock=0.98),
                          variant("alone:gemm", 1e-3)],
             "derived": {"train": {"measured": {"verdict": verdict, "overlap_fwd": {"hidden": 0.42,
                                                                                   "hidden_ci": [0.40, 0.44]}}}}}
    peer = {"axes": {"sq": 8192, "dtype": "fp8"}, "workload": {"pass": "train"},
            "variants": [dict(variant("peer:train-cudnn", 16e-3), peer=True),
                         dict(variant("peer:train-flash", 19e-3), peer=True)]}
    fwd_point = {"axes": {"rounds": 7}, "workload": {"sq": 8192}, "variants": [variant("fused", 1e-3)]}
    fails = []
    with tempfile.TemporaryDirectory() as td:
        paths = {}
        for tag, doc in (("run", report([point])), ("peers", report([peer])), ("fwd", report([fwd_point]))):
            paths[tag] = os.path.join(td, tag + ".json")
            with open(paths[tag], "w") as f:
                json.dump(doc, f)
        md = table([(paths["run"], paths["peers"])], "r/")
        row = md.splitlines()[2]
        for want in ("| 70B | fp8 | 7 |", "≥ 40.0 GiB: **stored** 12.30 ms, 1.016× [1.012, 1.020] over fused-write",
                     "≥ 512 MiB: **regen-overlap**", "≥ 0 B: **fused** 13.00 ms, alone at this budget",
                     "≥ 0 B: **fused** 9.00 J", "fwd 42 % [40, 44]", "0.970–1.040 (worst fused)<br>at the step's clock 0.980–1.010 (worst stored)",
                     "[1.30×](r/peers.json): stored 12.30 ms vs train-cudnn 16.00 ms", "(r/run.json)"):
            if want not in row:
                fails.append(f"train row lacks {want!r}: {row}")
        if row.split(" | ")[3].count("<br>") != 2:
            fails.append(f"time ladder: three steps, two breaks: {row}")
        try:
            table([(paths["run"], None), (paths["fwd"], None)])
            fails.append("a forward and a training-step report together were accepted")
        except dr.ReportError:
            pass
    return selftest.report("answer_table", fails)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", help="RUN.json or RUN.json=PEERS.json")
    ap.add_argument("--link-prefix", default="", help="prefix of each cell's link to its report")
    a = ap.parse_args(argv)
    pairs = [tuple(x.split("=", 1)) if "=" in x else (x, None) for x in a.reports]
    try:
        print(table(pairs, a.link_prefix))
    except dr.ReportError as e:
        print(f"answer_table.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
