#!/usr/bin/env python3
"""Tabulate Nsight Compute raw-page CSVs (`ncu --csv --page raw`, one launch per file), e.g. the device stage
bwdncu's ncu_bwd_<dH>_<causal|full>_<mode>.csv: per file the launch's time, clock, throughput of the units that can
bound a kernel (tensor and other pipes, shared memory, L1, L2, DRAM, issue slots) and its top warp-stall reasons.

    python3 scripts/ncu_bwd_table.py FILE.csv [FILE.csv ...] [--md OUT.md] [--json OUT.json]
"""
import argparse
import csv
import json
import os
import re
import sys

# (label, metric name) of the per-launch figures, in the table's order; a metric a file lacks prints as "-".
KEYS = [
    ("time (us)", "gpu__time_duration.sum"),
    ("SM clock (MHz)", "gpc__cycles_elapsed.avg.per_second"),
    ("SM throughput %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("issue slots busy %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("warp instructions", "smsp__inst_executed.sum"),
    ("wgmma (warp instructions)", "smsp__sass_inst_executed_op_shared_gmma.sum"),
    ("tensor pipe active %", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("L1/shared throughput %", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    ("shared wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
    ("shared wavefronts: loads", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
    ("shared wavefronts: stores", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
    ("shared bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
    ("shared bank conflicts: stores", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    ("L2 throughput %", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 hit rate %", "lts__t_sector_hit_rate.pct"),
    ("DRAM throughput %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("achieved occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
]
PIPE = re.compile(r"^sm__(?:pipe_|inst_executed_pipe_)(.+?)(?:_cycles_active)?\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$")
STALL_ALT = re.compile(r"^smsp__average_warp_latency_issue_stalled_(.+)\.ratio$")


def number(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def read(path):
    """The first launch's {metric: (value, unit)} of a raw-page CSV (its header line, a units line, then rows)."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        raise ValueError(f"{path}: no launch in the file (an ncu raw-page CSV has a header, a units line and rows)")
    head, units, first = rows[0], rows[1], rows[2]
    return {h: (first[i], units[i]) for i, h in enumerate(head) if i < len(first)}


def summary(path):
    m = read(path)
    out = {"file": os.path.basename(path), "kernel": m.get("Kernel Name", ("", ""))[0]}
    for label, key in KEYS:
        v, unit = m.get(key, (None, ""))
        x = number(v) if v is not None else None
        if x is not None and key == "gpu__time_duration.sum":
            x = x / 1e3 if unit in ("ns", "nsecond") else x * 1e6 if unit in ("s", "second") else x
        if x is not None and key == "gpc__cycles_elapsed.avg.per_second":
            x = x / 1e6 if unit in ("hz", "cycle/second", "1/s") or x > 1e7 else x
        out[label] = x
    pipes = {}
    for k, (v, _) in m.items():
        g = PIPE.match(k)
        if g and number(v) is not None:
            pipes[g.group(1)] = max(pipes.get(g.group(1), 0.0), number(v))
    out["pipes"] = dict(sorted(pipes.items(), key=lambda kv: -kv[1]))
    stalls = {}
    for k, (v, _) in m.items():
        g = STALL.match(k) or STALL_ALT.match(k)
        if g and number(v) is not None and not g.group(1).endswith("not_issued"):
            stalls[g.group(1)] = number(v)
    out["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    return out


def fmt(x):
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def markdown(ss):
    names = [s["file"].replace("ncu_bwd_", "").replace(".csv", "") for s in ss]
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(ss)]
    for label, _ in KEYS:
        lines.append(f"| {label} | " + " | ".join(fmt(s[label]) for s in ss) + " |")
    for what, n in (("pipes", 6), ("stalls", 6)):
        lines.append("")
        lines.append(f"Top {n} {'pipes (% of peak, active cycles)' if what == 'pipes' else 'warp stall reasons (cycles per issued instruction)'}:")
        lines.append("")
        for s, name in zip(ss, names):
            top = list(s[what].items())[:n]
            lines.append(f"- {name}: " + ", ".join(f"{k} {fmt(v)}" for k, v in top) if top else f"- {name}: none in the file")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args()
    try:
        ss = [summary(p) for p in a.csv]
    except (OSError, ValueError) as e:
        print(f"ncu_bwd_table.py: {e}", file=sys.stderr)
        return 2
    md = markdown(ss)
    sys.stdout.write(md)
    if a.md:
        open(a.md, "w").write(md)
    if a.json:
        json.dump(ss, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
