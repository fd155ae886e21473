#!/usr/bin/env python3
"""Plots of dropbench reports (PNG + SVG, matplotlib Agg backend).

Usage:
  python3 scripts/plot.py                         # every report under results/h200 -> results/h200/plots/
  python3 scripts/plot.py A.json B.json DIR ...   # the given reports / result folders
  python3 scripts/plot.py -o OUT --peer-attention results/h200/model/inputs/peer_attention.md ...
  python3 scripts/plot.py --self-test             # builds every plot from synthetic reports in a temp dir

What is drawn, per input (docs/report-schema.md, schema_version 1):
  rng report        philox_ratio-<name>: runtime of Philox-R / Philox-7 per threshold width (tile layout),
                    the paper's H100 figures (Philox-3 0.67, Philox-5 0.81) marked; and Telem/s.
  dropout report    dropout-<name>: time per variant (copy, mask-i32, mask-u8, mask-bits, seeded) for bf16 and
                    fp32, the mask-generation phase shaded, "% of copy" (effective GB/s / copy GB/s) annotated.
  attention report  attention-<name>: TFLOP/s per mode (none / mask / rng+mask / fused) vs SQ, causal and not,
                    with PyTorch SDPA flash / cuDNN points from peer_attention.md when given or found.
  gemm report       gemm-<name>: dropbench (cuBLASLt) vs torch TFLOP/s per shape, with peer_gemm.json.
  run report        run_speedup-<name>: speedup over the baseline pipeline vs SQ, one line per Philox round
                    (error bars: the paired 95 % interval x_baseline_ci, where the report has it)
                    count (one panel per pipeline); run_phases-<name>: per-phase medians stacked per pipeline.
  any report whose  power_timeline-<name>-p<i>: instantaneous power (W) and SM clock (MHz) over each variant's
  variants carry    measurement window at point i, one line per pipeline (run) or variant (other commands);
  "power"           energy-<name>-p<i>: energy per block (run) / per iteration, mJ, per pipeline or variant, from
                    power.energy_mj_per_iter, else mean W x median time (hatched). Variants without measured
                    power are left out; points where none has it get no power plots (docs/power.md).
Reports are read and validated by scripts/dropbench_report.py (shared with scripts/peers.py). Unknown JSON
(devices.json...) is ignored; in a folder, unreadable reports are skipped with a note. Exit code 2 on an
unreadable report given by name, or without matplotlib.
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import dropbench_report as dr  # noqa: E402  (the shared report reader)
DEFAULT_RESULTS = REPO / "results" / "h200"
PAPER_RATIOS = {3: 0.67, 5: 0.81}  # Ma et al. (arXiv:2410.07531), H100: Philox-R runtime / Philox-7
# Preferred plotting order; pipelines not listed here (a new one in src/core/pipelines.cpp) follow in name order.
PIPELINE_ORDER = ["baseline", "fused", "overlap", "chunked"]
DROPOUT_ORDER = ["copy", "mask-i32", "mask-u8", "mask-bits", "seeded"]
ATTENTION_ORDER = ["none", "mask", "rng+mask", "fused"]

plt = None  # set by import_matplotlib()


def import_matplotlib():
    global plt
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        msg = (f"matplotlib is missing for {sys.executable}: install python3-matplotlib (scripts/setup.sh does) "
               "and run with /usr/bin/python3")
        if "--self-test" in sys.argv:  # ctest reports the self-test as skipped (SKIP_RETURN_CODE 77), not passed
            note(msg + "; self-test skipped")
            sys.exit(77)
        die(msg)
    plt = pyplot
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "figure.titlesize": 12, "legend.fontsize": 9,
                         "svg.hashsalt": "dropbench", "axes.grid": True, "grid.alpha": 0.3})


def note(msg):
    print(f"plot: {msg}", file=sys.stderr)


def die(msg):
    note(msg)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------

# Reports are read by the shared reader (scripts/dropbench_report.py): schema/version check, validation,
# Report / Point / Variant objects; a report number that is null reads as NaN.
num = dr.number
finite = dr.finite


def parse_peer_attention(path):
    """Lines of lab/scripts/attention_torch_ref.py: 'torch flash causal=0 p=0.1:   3.956 ms   277.9 TFLOP/s'."""
    rows = []
    pat = re.compile(r"torch\s+(\w+)\s+causal=(\d)\s+p=([0-9.]+)\s*:\s*([0-9.]+)\s*ms\s+([0-9.]+)\s*TFLOP/s")
    for line in Path(path).read_text(errors="replace").splitlines():
        m = pat.search(line)
        if not m:
            continue
        sq = re.search(r"\bsq=(\d+)", line)
        rows.append({"backend": m.group(1), "causal": m.group(2) == "1", "p": float(m.group(3)),
                     "ms": float(m.group(4)), "tflops": float(m.group(5)),
                     "sq": int(sq.group(1)) if sq else None})
    return rows


class Inputs:
    def __init__(self):
        self.reports = {}          # command -> [(path, dropbench_report.Report)]
        self.peer_gemm = []        # [(path, doc)]
        self.peer_attention = []   # [(path, rows)]
        self.raw = {}              # str(path) -> the report's JSON document (for variant["power"], which the reader skips)

    def add_json(self, path, explicit):
        try:
            doc = dr.read_json(path)
        except dr.ReportError as e:
            if explicit:
                die(str(e))
            note(f"{e}; skipped")
            return
        if dr.is_report(doc):
            try:
                rep = dr.Report.from_doc(doc, str(path))
            except dr.ReportError as e:
                if explicit:
                    die(str(e))
                note(f"{e}; skipped")
                return
            self.reports.setdefault(rep.command, []).append((Path(path), rep))
            self.raw[str(Path(path))] = doc
        elif isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "gemm" in str(doc.get("tool", "")):
            self.peer_gemm.append((Path(path), doc))
        elif explicit:
            note(f"{path}: not a dropbench report nor peer_gemm.json; ignored")

    def add_md(self, path, explicit):
        rows = parse_peer_attention(path)
        if rows:
            self.peer_attention.append((Path(path), rows))
        elif explicit:
            note(f"{path}: no 'torch <backend> causal=.. p=..: .. ms .. TFLOP/s' lines; ignored")

    def add(self, path, explicit=True):
        p = Path(path)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if "plots" in f.relative_to(p).parts or not f.is_file():
                    continue
                if f.suffix == ".json":
                    self.add_json(f, False)
                elif f.suffix == ".md" and f.name.startswith("peer_attention"):
                    self.add_md(f, False)
        elif p.is_file():
            (self.add_md if p.suffix == ".md" else self.add_json)(p, explicit)
        else:
            die(f"{path}: no such file or directory")


# ---------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------

# The report the plot being drawn comes from (set by plot_all): its caption names the file, git sha and date.
CURRENT = {"path": None, "rep": None}


def caption():
    path, rep = CURRENT["path"], CURRENT["rep"]
    if path is None:
        return None
    try:
        shown = os.path.relpath(path, REPO)
    except ValueError:
        shown = str(path)
    if shown.startswith(".."):
        shown = str(path)
    bits = [f"source: {shown}"]
    if rep is not None:
        if rep.git_sha:
            bits.append(f"git {rep.git_sha}")
        date = rep.context.get("date_utc") if isinstance(rep.context, dict) else None
        if date:
            bits.append(str(date)[:10])
        if rep.device_name:
            bits.append(str(rep.device_name))
    return " · ".join(bits)


def save(fig, out, name, written):
    out.mkdir(parents=True, exist_ok=True)
    cap = caption()
    if cap:
        # Below every plot's own footnotes (they sit down to y = -0.04); bbox_inches="tight" makes room.
        fig.text(0.0, -0.07, cap, fontsize=7, color="0.35", ha="left", va="top", transform=fig.transFigure)
    if any(f.stem == name and f.parent == out for f in written):
        # Two plots of one name would overwrite each other: the second gets a suffix, and a note says so.
        k = 2
        while any(f.stem == f"{name}-{k}" and f.parent == out for f in written):
            k += 1
        note(f"{name}: a plot of this name was already written; this one is {name}-{k}")
        name = f"{name}-{k}"
    for ext in ("png", "svg"):
        f = out / f"{name}.{ext}"
        fig.savefig(f, dpi=140 if ext == "png" else None, bbox_inches="tight",
                    metadata={"Date": None} if ext == "svg" else None)
        written.append(f)
    plt.close(fig)


# Reports whose file names (stems) collide get names from their folders too (set by plot_all), so that e.g.
# a/llama3-70b.json and b/llama3-70b.json do not overwrite each other's plots.
SLUGS = {}


def slug(path):
    return SLUGS.get(str(path)) or re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(path).stem)


def assign_slugs(paths):
    SLUGS.clear()
    by_stem = {}
    for p in paths:
        by_stem.setdefault(Path(p).stem, []).append(Path(p))
    for stem, ps in by_stem.items():
        if len({str(p.resolve()) for p in ps}) < 2:
            continue
        root = Path(os.path.commonpath([str(p.resolve().parent) for p in ps]))
        for p in ps:
            rel = p.resolve().relative_to(root).with_suffix("")
            SLUGS[str(p)] = re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(rel.parts))


def pow2_label(n):
    n = int(n)
    if n > 0 and n & (n - 1) == 0 and n >= 1024:
        return f"2^{n.bit_length() - 1}"
    return f"{n:,}"


def sq_label(v):
    v = int(v)
    return f"{v // 1024}K" if v % 1024 == 0 else str(v)


def ordered(names, preferred):
    return [n for n in preferred if n in names] + [n for n in names if n not in preferred]


def colors():
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def sq_axis(ax, sqs):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sqs)
    ax.set_xticklabels([sq_label(s) for s in sqs])
    ax.minorticks_off()
    if sqs:
        ax.set_xlim(sqs[0] / 1.25, sqs[-1] * 1.25)
    ax.set_xlabel("SQ (sequence length)")


# ---------------------------------------------------------------------------------------------------------
# (a) Philox R / R=7
# ---------------------------------------------------------------------------------------------------------

def plot_rng(path, rep, out, written):
    pts = [p for p in rep.points if p.variants]
    layouts = sorted({str(p.get("layout")) for p in pts})
    layout = "tile" if "tile" in layouts else (layouts[0] if layouts else None)
    pts = [p for p in pts if str(p.get("layout")) == layout]
    if not pts:
        note(f"{path}: no measured rng points; skipped")
        return
    sq = max(int(p.get("sq", 0) or 0) for p in pts)
    pts = [p for p in pts if int(p.get("sq", 0) or 0) == sq]
    t = {}      # (bits, rounds) -> median s
    gel = {}    # (bits, rounds) -> Gelem/s
    elements = None
    for p in pts:
        v = p.variants[0]
        key = (int(p.get("threshold_bits")), int(p.get("rounds")))
        t[key] = v.median
        gel[key] = num(v.derived.get("gelem_s"))
        elements = v.extra.get("elements", elements)
    bits = sorted({k[0] for k in t})
    rounds = sorted({k[1] for k in t})
    if 7 not in rounds:
        note(f"{path}: no Philox-7 points to divide by; skipped")
        return
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    w = 0.8 / len(rounds)
    col = {r: colors()[i % 10] for i, r in enumerate(rounds)}
    for i, r in enumerate(rounds):
        xs, ys, gs = [], [], []
        for j, b in enumerate(bits):
            ref = t.get((b, 7), math.nan)
            val = t.get((b, r), math.nan) / ref if finite(ref) else math.nan
            xs.append(j - 0.4 + w * (i + 0.5))
            ys.append(val)
            gs.append(gel.get((b, r), math.nan) / 1000.0)
        ax.bar(xs, ys, w * 0.92, color=col[r], label=f"Philox-{r}")
        for x, y in zip(xs, ys):
            if finite(y):
                ax.text(x, y + 0.02, f"{y:.2f}", ha="center", va="bottom", fontsize=8,
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.85})
        ax2.bar(xs, gs, w * 0.92, color=col[r], label=f"Philox-{r}")
    for r, ratio in PAPER_RATIOS.items():
        ax.axhline(ratio, color=col.get(r, "grey"), ls="--", lw=1.4, label=f"paper (H100): Philox-{r} = {ratio:.2f}")
    ax.axhline(1.0, color="black", lw=0.8)
    for a in (ax, ax2):
        a.set_xticks(range(len(bits)))
        a.set_xticklabels([f"{b}-bit thresholds" for b in bits])
        a.grid(axis="x", visible=False)
    ax.set_ylabel("runtime / runtime of Philox-7")
    ratios = [t[(b, r)] / t[(b, 7)] for b in bits for r in rounds
              if (b, 7) in t and (b, r) in t and finite(t[(b, r)]) and finite(t[(b, 7)])]
    ax.set_ylim(0, max([1.25] + ratios) + 0.4)
    ax.set_title("mask-generation runtime relative to Philox-7 (lower = cheaper)")
    ax.legend(loc="upper left", ncol=3, fontsize=8)
    ax2.set_ylabel("Telem/s")
    ax2.set_title("throughput")
    ax2.legend(loc="upper right", fontsize=8)
    dev = rep.device_name
    fig.suptitle(f"Philox4x32-R dropout masks, {layout} layout, SQ {sq_label(sq)}"
                 + (f", {pow2_label(elements)} elements" if elements else "") + (f" — {dev}" if dev else ""))
    fig.tight_layout()
    save(fig, out, f"philox_ratio-{slug(path)}", written)


# ---------------------------------------------------------------------------------------------------------
# (b) standalone dropout
# ---------------------------------------------------------------------------------------------------------

def plot_dropout(path, rep, out, written):
    by_dtype = {}
    for p in rep.points:
        if not p.variants:
            continue
        dt = str(p.get("dropout_dtype", "?"))
        el = int(p.get("elements", 0) or 0)
        if dt not in by_dtype or el > by_dtype[dt][0]:
            by_dtype[dt] = (el, p)
    if not by_dtype:
        note(f"{path}: no measured dropout points; skipped")
        return
    dtypes = ordered(sorted(by_dtype), ["bf16", "fp32"])
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.2 * len(dtypes), 5.0), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        el, p = by_dtype[dt]
        vs = {v.name: v for v in p.variants}
        names = ordered(list(vs), DROPOUT_ORDER)
        times = [vs[n].median * 1e6 for n in names]
        copy_t = vs["copy"].median * 1e6 if "copy" in vs else math.nan
        cols = ["#7f7f7f" if n == "copy" else "#2ca02c" if n == "seeded" else "#1f77b4" for n in names]
        ax.bar(range(len(names)), times, 0.7, color=cols)
        gen = []
        for n in names:
            ph = dict(vs[n].phase_medians())
            gen.append(ph.get("gen", math.nan) * 1e6)
        if any(finite(g) for g in gen):
            ax.bar(range(len(names)), [g if finite(g) else 0 for g in gen], 0.7, color="#ffbb78",
                   hatch="//", edgecolor="white", label="of which: mask generation (phase 'gen')")
            ax.legend(loc="upper right")
        top = max(t for t in times if finite(t))
        for i, n in enumerate(names):
            pct = num(vs[n].derived.get("pct_of_copy"))
            lines = []
            if finite(pct):
                lines.append(f"{pct:.0f}% of copy")
            if finite(copy_t) and n != "copy":
                lines.append(f"{times[i] / copy_t:.2f}× time")
            lines.append(f"{times[i]:.0f} µs")
            extra_b = num(vs[n].extra.get("extra_memory_bytes"))
            if finite(extra_b) and extra_b > 0:
                lines.append(f"mask {extra_b / 2**20:.0f} MiB")
            ax.text(i, times[i] + top * 0.015, "\n".join(lines), ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, top * 1.35)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("time per dropout pass (µs, median)")
        data_mib = vs["copy"].extra.get("data_bytes") if "copy" in vs else None
        ax.set_title(f"{dt}" + (f", {pow2_label(el)} elements" if el else "")
                     + (f" ({data_mib / 2**20:.0f} MiB)" if isinstance(data_mib, (int, float)) else ""))
    dev = rep.device_name
    fig.suptitle("Standalone dropout: mask tensor vs seeded (Philox in the apply kernel)"
                 + (f" — {dev}" if dev else "")
                 + "\n% of copy = effective GB/s (data + mask traffic) / D2D-copy GB/s;  × time = time / copy time",
                 fontsize=11)
    fig.tight_layout()
    save(fig, out, f"dropout-{slug(path)}", written)


# ---------------------------------------------------------------------------------------------------------
# (c) attention
# ---------------------------------------------------------------------------------------------------------

def peer_sq(row, heads, head_dim, batch):
    """SQ of a peer line: given, else solved from its time and TFLOP/s (4*B*H*SQ^2*dH, halved when causal)."""
    if row.get("sq"):
        return row["sq"]
    import dropbench_attn as dba  # the FLOP convention; it reads the kernels' headers, so only where used
    flops = row["tflops"] * 1e12 * row["ms"] * 1e-3
    # the convention is a multiple of SQ^2, so its value at SQ 1 is the FLOPs per SQ^2
    sq = math.sqrt(flops / dba.attention_flops(batch, heads, 1, head_dim, row["causal"]))
    return int(round(sq / 128.0) * 128)


def plot_attention(path, rep, out, written, peers, peer_sq_override):
    pts = [p for p in rep.points if p.variants]
    if not pts:
        note(f"{path}: no measured attention points; skipped")
        return
    # One Philox round count per plot (7 where swept, as the paper's baseline): lines of several would overlap.
    rounds = sorted({p.get("rounds") for p in pts if p.get("rounds") is not None})
    if len(rounds) > 1:
        keep = 7 if 7 in rounds else rounds[0]
        pts = [p for p in pts if p.get("rounds") == keep]
        note(f"{path}: rounds {rounds} swept; plotting Philox-{keep}")
    # Kernel families (attention_kernel axis) are separate lines: solid wgmma / auto, dashed mma.
    kernels = sorted({str(p.get("attention_kernel") or "") for p in pts})
    series = {}  # (causal, mode, kernel) -> {sq: tflops}
    for p in pts:
        c = bool(p.get("causal", False))
        sq = int(p.get("sq"))
        k = str(p.get("attention_kernel") or "")
        for v in p.variants:
            tf = num(v.derived.get("tflops"))
            if not finite(tf):
                fl, m = num(v.extra.get("flops")), v.median
                tf = fl / m / 1e12 if finite(fl) and finite(m) and m > 0 else math.nan
            series.setdefault((c, v.name, k), {})[sq] = tf
    if not any(finite(y) for d in series.values() for y in d.values()):
        note(f"{path}: no TFLOP/s (derived.tflops, or extra.flops and a median) at any point; skipped")
        return
    causals = sorted({k[0] for k in series})
    modes = ordered(sorted({k[1] for k in series}), ATTENTION_ORDER)
    w0 = pts[0].workload  # after the rounds filter: the title names the plotted round count
    heads, hd, batch = int(w0.get("q_heads", 32)), int(w0.get("head_dim", 128)), int(w0.get("batch", 1))
    peer_rows = []
    for ppath, rows in peers:
        for r in rows:
            # lab/scripts/attention_torch_ref.py measures B=1, H=32, dH=128 whatever the report's workload.
            r = dict(r, sq=peer_sq_override or peer_sq(r, 32, 128, 1))
            peer_rows.append(r)
    fig, axes = plt.subplots(1, len(causals), figsize=(6.6 * len(causals), 5.2), squeeze=False, sharey=True)
    col = {m: colors()[i % 10] for i, m in enumerate(modes)}
    peer_style = {("flash", 0.0): ("#9467bd", "D", "none"), ("flash", 0.1): ("#9467bd", "D", "full"),
                  ("cudnn", 0.0): ("#8c564b", "*", "none"), ("cudnn", 0.1): ("#8c564b", "*", "full")}
    all_sqs = sorted({int(p.get("sq")) for p in pts} | {r["sq"] for r in peer_rows})
    ymax = max([r["tflops"] for r in peer_rows] + [y for d in series.values() for y in d.values() if finite(y)])
    for ax, c in zip(axes[0], causals):
        ends = []  # (y, text, color) of the last point of every line, labelled right of it
        for m in modes:
            for k in kernels:
                d = series.get((c, m, k), {})
                xs = sorted(d)
                ys = [d[x] for x in xs]
                if not xs:
                    continue
                ax.plot(xs, ys, marker="o" if k != "mma" else "s", color=col[m], lw=2, ls="--" if k == "mma" else "-",
                        label=f"dropbench {m}" + (f" ({k})" if len(kernels) > 1 else ""))
                if finite(ys[-1]):
                    ends.append([ys[-1], f"{ys[-1]:.0f}", col[m]])
        # Keep the end labels apart (at least 5% of the axis height).
        ends.sort()
        for i in range(1, len(ends)):
            ends[i][0] = max(ends[i][0], ends[i - 1][0] + ymax * 0.05)
        for y, text, color in ends:
            ax.annotate(text, (max(all_sqs), y), textcoords="offset points", xytext=(7, -3), fontsize=8, color=color)
        groups = {}
        for r in peer_rows:
            if r["causal"] == c:
                groups.setdefault((r["backend"], r["p"]), []).append(r)
        for (be, pp), rows in sorted(groups.items()):
            rows.sort(key=lambda r: r["sq"])
            color, marker, fill = peer_style.get((be, pp), ("black", "s", "full"))
            shift = 0.93 if be == "flash" else 1.07  # drawn beside their SQ so that they do not hide the lines
            xs = [r["sq"] * shift for r in rows]
            ax.plot(xs, [r["tflops"] for r in rows], ls="--", marker=marker, ms=11, color=color, lw=1, zorder=5,
                    markerfacecolor="white" if fill == "none" else color,
                    markeredgecolor=color if fill == "none" else "black", markeredgewidth=1.2 if fill == "none" else 0.6,
                    label=f"torch SDPA {be}, p={pp:g}")
            for x, r in zip(xs, rows):
                ax.annotate(f"{r['tflops']:.0f}", (x, r["tflops"]), textcoords="offset points",
                            xytext=(-8 if be == "flash" else 8, 0), ha="right" if be == "flash" else "left",
                            va="center", fontsize=8, color=color, zorder=6)
        sq_axis(ax, all_sqs)
        ax.set_title("causal" if c else "not causal")
        ax.set_ylabel("TFLOP/s (causal: half the FLOPs)")
    axes[0][0].set_ylim(0, ymax * 1.12)
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, bbox_to_anchor=(0.5, -0.02), frameon=False)
    if peer_rows:
        fig.text(0.5, -0.04, "PyTorch SDPA (bf16, same machine) points are drawn just left (flash) / right (cuDNN) "
                 "of their SQ; hollow: p=0 (no dropout), filled: p=0.1", ha="center", va="bottom", fontsize=8,
                 color="dimgrey")
    dev = rep.device_name
    p_drop = w0.get("dropout_p")
    fig.suptitle(f"FlashAttention forward with dropout, B={batch} Hq={heads} dH={hd}"
                 + (f", p={p_drop:g}" if isinstance(p_drop, (int, float)) else "")
                 + (f", Philox-{w0.get('rounds')}" if w0.get("rounds") else "") + (f" — {dev}" if dev else "")
                 + ("\nmodes: none = no dropout; mask = reads a precomputed 1-bit mask; rng+mask = RNG kernel "
                    "then attention; fused = Philox in the attention kernel"), fontsize=11)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    save(fig, out, f"attention-{slug(path)}", written)


# ---------------------------------------------------------------------------------------------------------
# (d) GEMM vs torch
# ---------------------------------------------------------------------------------------------------------

def plot_gemm(path, rep, out, written, peers):
    ours = {}  # (dtype, sq, embed) -> tflops
    for p in rep.points:
        if p.variants:
            ours[(str(p.get("dtype")), int(p.get("sq")), int(p.get("embed")))] = num(p.variants[0].derived.get("tflops"))
    if not ours:
        note(f"{path}: no measured gemm points; skipped")
        return
    theirs, ops = {}, {}
    for _, pd in peers:
        for r in pd.get("rows") or []:
            try:
                k = (str(r["dtype"]), int(r["sq"]), int(r["embed"]))
            except (KeyError, TypeError, ValueError):
                continue
            theirs[k] = num(r.get("tflops"))
            ops[k[0]] = r.get("op", "torch")
    dtypes = ordered(sorted({k[0] for k in ours}), ["fp8", "bf16"])
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(12, 3.9 * len(dtypes)), squeeze=False)
    for ax, dt in zip(axes[:, 0], dtypes):
        shapes = sorted((k[1], k[2]) for k in ours if k[0] == dt)
        xs = range(len(shapes))
        a = [ours[(dt, s, e)] for s, e in shapes]
        b = [theirs.get((dt, s, e), math.nan) for s, e in shapes]
        have_peer = any(finite(y) for y in b)
        w = 0.38 if have_peer else 0.6
        ax.bar([x - (w / 2 if have_peer else 0) for x in xs], a, w, color="#1f77b4", label="dropbench (cuBLASLt)")
        if have_peer:
            ax.bar([x + w / 2 for x in xs], b, w, color="#ff7f0e", label=f"PyTorch ({ops.get(dt, 'torch')})")
        top = max(y for y in a + b if finite(y))
        for x, ya, yb in zip(xs, a, b):
            if finite(ya) and finite(yb) and yb > 0:
                ax.text(x, max(ya, yb) + top * 0.015, f"{ya / yb:.2f}×", ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, top * 1.32)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"SQ {sq_label(s)}\nE {sq_label(e)}" for s, e in shapes], fontsize=8)
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dt}: QKV projection [SQ, E] × [E, (Hq+2·Hkv)·dH]"
                     + ("  (label: dropbench / torch)" if have_peer else ""))
        ax.legend(loc="upper left", ncol=2, fontsize=8)
    dev = rep.device_name
    fig.suptitle("QKV GEMM: dropbench (cuBLASLt, top-k tuned) vs PyTorch" + (f" — {dev}" if dev else ""))
    fig.tight_layout()
    save(fig, out, f"gemm-{slug(path)}", written)


# ---------------------------------------------------------------------------------------------------------
# (e) pipelines (`dropbench run`)
# ---------------------------------------------------------------------------------------------------------

def run_records(rep):
    """Normalises a run report to records {group, sq, rounds, pipeline, median, phases[(name, median)]}.
    Pipelines are read from variant names (baseline/fused/overlap/chunked); a report that sweeps a
    `pipeline` axis with one variant per point is accepted too."""
    recs = []
    for p in rep.points:
        vs = p.variants
        by_axis = "pipeline" in p.axes and not any(v.is_pipeline for v in vs)
        other = {k: v for k, v in p.axes.items() if k not in ("sq", "rounds", "pipeline")}
        for v in (vs[:1] if by_axis else vs):
            pipe = str(p.get("pipeline")) if by_axis else v.name
            # Only the pipelines: `run` also reports the pieces alone ("alone:*"), the overlap mechanisms
            # ("mech:*") and graph replays ("<pipeline>:graph"), which are not pipelines.
            if not by_axis and not v.is_pipeline:
                continue
            # Chunked phases come per chunk ("rng[3]", "attention[3]"): summed under one name.
            merged = {}
            for qname, val in v.phase_medians():
                name = re.sub(r"\[\d+\]$", "", qname)
                merged[name] = (merged.get(name) or 0.0) + (val if finite(val) else 0.0)
            phases = list(merged.items())
            ci = v.derived.get("x_baseline_ci") if not by_axis else None
            recs.append({"group": tuple(sorted((k, json.dumps(x)) for k, x in other.items())),
                         "sq": int(p.get("sq", 0) or 0), "rounds": p.get("rounds"), "pipeline": pipe,
                         "median": v.median, "phases": phases,
                         "x_ci": ci if isinstance(ci, list) and len(ci) == 2 and all(finite(c) for c in ci) else None})
    return recs


def group_label(group):
    def cell(v):
        x = json.loads(v)
        return x if isinstance(x, str) else v
    return " ".join(f"{k}={cell(v)}" for k, v in group)


def plot_run(path, rep, out, written):
    recs = run_records(rep)
    if not recs:
        note(f"{path}: no measured run points; skipped")
        return
    base = {(r["group"], r["sq"], r["rounds"]): r["median"] for r in recs if r["pipeline"] == "baseline"}
    pipes = ordered(sorted({r["pipeline"] for r in recs}), PIPELINE_ORDER)
    others = [p for p in pipes if p != "baseline"]
    dev = rep.device_name
    sqs = sorted({r["sq"] for r in recs})
    groups = sorted({r["group"] for r in recs})
    rounds_all = sorted({r["rounds"] for r in recs}, key=lambda x: (x is None, x))

    if base and others:
        fig, axes = plt.subplots(1, len(others), figsize=(5.4 * len(others), 4.8), squeeze=False, sharey=True)
        col = {r: colors()[i % 10] for i, r in enumerate(rounds_all)}
        styles = ["-", "--", ":", "-."]
        # Groups (e.g. the attention kernels) differ by line style and marker: with one SQ there is no line to see.
        markers = ["o", "s", "^", "D"]
        ymin, ymax = 1.0, 1.0
        for ax, pipe in zip(axes[0], others):
            for gi, g in enumerate(groups):
                for rd in rounds_all:
                    pts = sorted((r["sq"], base[(g, r["sq"], rd)] / r["median"]) for r in recs
                                 if r["pipeline"] == pipe and r["group"] == g and r["rounds"] == rd
                                 and (g, r["sq"], rd) in base and finite(r["median"]) and r["median"] > 0
                                 and finite(base[(g, r["sq"], rd)]))
                    if not pts:
                        continue
                    lab = (f"Philox-{rd}" if rd is not None else "rounds ?") + (f" {group_label(g)}" if g else "")
                    ax.plot([x for x, _ in pts], [y for _, y in pts], marker=markers[gi % len(markers)], lw=2, color=col[rd],
                            ls=styles[gi % len(styles)], label=lab)
                    # The paired 95 % interval of each speedup (x_baseline_ci), where the report has it.
                    cis = {r["sq"]: r["x_ci"] for r in recs if r["pipeline"] == pipe and r["group"] == g
                           and r["rounds"] == rd and r.get("x_ci")}
                    bars = [(x, y, cis[x]) for x, y in pts if x in cis]
                    if bars:
                        ax.errorbar([x for x, _, _ in bars], [y for _, y, _ in bars],
                                    yerr=[[max(0.0, y - c[0]) for _, y, c in bars], [max(0.0, c[1] - y) for _, y, c in bars]],
                                    fmt="none", ecolor=col[rd], capsize=4, lw=1.2)
                    ymin = min([ymin] + [y for _, y in pts])
                    ymax = max([ymax] + [y for _, y in pts])
            ax.axhline(1.0, color="black", lw=0.8)
            sq_axis(ax, sqs)
            ax.set_title(f"{pipe} vs baseline")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
            else:
                ax.text(0.5, 0.5, "no measured points", transform=ax.transAxes, ha="center", color="grey")
        axes[0][0].set_ylabel("speedup over baseline (baseline time / time)")
        pad = (ymax - ymin) * 0.1 + 0.02
        axes[0][0].set_ylim(ymin - pad, ymax + pad)
        fig.suptitle("Attention-with-dropout pipelines: speedup over baseline" + (f" — {dev}" if dev else ""))
        fig.tight_layout()
        save(fig, out, f"run_speedup-{slug(path)}", written)
    else:
        note(f"{path}: no baseline pipeline to divide by; speedup plot skipped")

    # Per-phase medians at the largest SQ, one panel per (rounds, group).
    sq = max(sqs)
    panels = [(rd, g) for g in groups for rd in rounds_all
              if any(r["sq"] == sq and r["rounds"] == rd and r["group"] == g for r in recs)]
    if not panels:
        return
    panels = panels[:6]
    phase_names = []
    for r in recs:
        for n, _ in r["phases"]:
            if n not in phase_names:
                phase_names.append(n)
    pcol = {n: colors()[(i + 2) % 10] for i, n in enumerate(phase_names)}
    ncol = min(3, len(panels))
    nrow = (len(panels) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.8 * ncol, 4.6 * nrow), squeeze=False)
    for k, (rd, g) in enumerate(panels):
        ax = axes[k // ncol][k % ncol]
        rows = {r["pipeline"]: r for r in recs if r["sq"] == sq and r["rounds"] == rd and r["group"] == g}
        names = ordered(list(rows), PIPELINE_ORDER)
        for i, n in enumerate(names):
            bottom = 0.0
            for ph, m in rows[n]["phases"]:
                if not finite(m):
                    continue
                ax.bar(i, m * 1e6, 0.6, bottom=bottom, color=pcol[ph], edgecolor="white", lw=0.5)
                bottom += m * 1e6
            tot = rows[n]["median"] * 1e6
            if bottom == 0 and finite(tot):  # no phases recorded: the whole pipeline as one grey bar
                ax.bar(i, tot, 0.6, color="lightgrey", edgecolor="grey", lw=0.5)
            if finite(tot):
                ax.plot([i - 0.38, i + 0.38], [tot, tot], color="black", lw=2)
                ax.annotate(f"{tot:.0f} µs", (i, max(tot, bottom)), textcoords="offset points", xytext=(0, 4),
                            ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("µs (phase medians, stacked)")
        ax.set_title((f"Philox-{rd}" if rd is not None else "") + (f" {group_label(g)}" if g else ""))
        ax.margins(y=0.12)
    for k in range(len(panels), nrow * ncol):
        axes[k // ncol][k % ncol].set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=pcol[n]) for n in phase_names]
    handles.append(plt.Line2D([0], [0], color="black", lw=2))
    fig.legend(handles, phase_names + ["whole pipeline (median; phases may overlap)"], loc="lower center",
               ncol=min(5, len(handles)), bbox_to_anchor=(0.5, -0.01), frameon=False)
    fig.suptitle(f"Pipeline phases at SQ {sq_label(sq)}" + (f" — {dev}" if dev else ""))
    fig.tight_layout(rect=(0, 0.5 / fig.get_figheight(), 1, 1))
    save(fig, out, f"run_phases-{slug(path)}", written)


# ---------------------------------------------------------------------------------------------------------
# (f) power and energy (variant["power"]: src/core/power.hpp's window figures, docs/power.md)
# ---------------------------------------------------------------------------------------------------------

variant_power = dr.variant_power  # the shared reader's rule (a measured "power", or an older extra.power)


def power_points(rep, doc):
    """[(point, [(variant, power)])]: per point, the variants to plot that carry measured power. In a run report
    those are the pipelines; elsewhere every variant that is not a peer's."""
    out = []
    raw_points = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(raw_points, list):
        return out
    for p, rp in zip(rep.points, raw_points):
        rvs = rp.get("variants") if isinstance(rp, dict) else None
        if not isinstance(rvs, list):
            continue
        rows = []
        for v, rv in zip(p.variants, rvs):
            keep = v.is_pipeline if rep.command == "run" else not v.peer
            pw = variant_power(rv) if keep else None
            if pw is not None:
                rows.append((v, pw))
        if rows:
            out.append((p, rows))
    return out


def point_label(p):
    return " ".join(f"{k}={sq_label(v) if k == 'sq' and isinstance(v, int) else v}" for k, v in p.axes.items())


def energy_mj(v, pw):
    """(mJ per iteration, estimated?) from power.energy_mj_per_iter, else mean W x median time."""
    mj = num(pw.get("energy_mj_per_iter"))
    if finite(mj):
        return mj, False
    w, m = num(pw.get("mean_w")), v.median
    return (w * m * 1e3, True) if finite(w) and finite(m) else (math.nan, True)


def plot_power(path, rep, doc, out, written):
    pts = power_points(rep, doc)
    if not pts:
        if rep.command == "run":
            note(f"{path}: no variant carries measured power (no NVML, or a report from before the power sampler): "
                 "power plots skipped")
        return
    ctx = rep.context.get("power") if isinstance(rep.context, dict) else None
    cap = num(ctx.get("cap_w")) if isinstance(ctx, dict) else math.nan
    dev = rep.device_name
    what = "pipeline" if rep.command == "run" else "variant"
    per = "block" if rep.command == "run" else "iteration"
    for p, rows in pts:
        names = ordered([v.name for v, _ in rows], PIPELINE_ORDER)
        by = {v.name: (v, pw) for v, pw in rows}
        col = {n: colors()[i % 10] for i, n in enumerate(names)}
        label = point_label(p)
        suffix = f"p{p.index if p.index is not None else rep.points.index(p)}"

        # Timeline: W (top) and SM MHz (bottom) against seconds into each variant's measurement window.
        fig, (ax_w, ax_c) = plt.subplots(2, 1, figsize=(9, 6.2), sharex=True)
        drawn = 0
        for n in names:
            v, pw = by[n]
            tl = pw.get("timeline") if isinstance(pw.get("timeline"), dict) else {}
            t = [num(x) for x in tl.get("t_s") or []]
            w = [num(x) for x in tl.get("w") or []]
            c = [num(x) for x in tl.get("sm_mhz") or []]
            if not t:
                continue
            drawn += 1
            mean_w = num(pw.get("mean_w"))
            ax_w.plot(t[:len(w)], w, color=col[n], lw=1.6,
                      label=f"{n}" + (f" (mean {mean_w:.0f} W)" if finite(mean_w) else ""))
            ax_c.plot(t[:len(c)], c, color=col[n], lw=1.6, label=n)
        if not drawn:
            plt.close(fig)
        else:
            if finite(cap):
                ax_w.axhline(cap, color="black", ls="--", lw=1, label=f"power cap {cap:.0f} W")
            ax_w.set_ylabel("power (W, instantaneous reading)")
            ax_w.set_ylim(bottom=0)
            ax_w.legend(fontsize=8, loc="lower right")
            ax_c.set_ylabel("SM clock (MHz)")
            ax_c.set_xlabel("seconds into the measurement window")
            ax_c.set_ylim(bottom=0)
            fig.suptitle(f"Power and SM clock per {what}, {label}" + (f" — {dev}" if dev else ""))
            fig.tight_layout()
            save(fig, out, f"power_timeline-{slug(path)}-{suffix}", written)

        # Energy per block / iteration.
        vals = [energy_mj(*by[n]) for n in names]
        if not any(finite(mj) for mj, _ in vals):
            continue
        fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(names) + 2), 4.6))
        top = max(mj for mj, _ in vals if finite(mj))
        for i, n in enumerate(names):
            mj, est = vals[i]
            if not finite(mj):
                continue
            ax.bar(i, mj, 0.62, color=col[n], hatch="//" if est else None, edgecolor="white" if est else None)
            pw = by[n][1]
            lines = [("≈ " if est else "") + (f"{mj:.0f}" if mj >= 100 else f"{mj:.1f}" if mj >= 10 else f"{mj:.2f}") + " mJ"]
            if finite(num(pw.get("mean_w"))):
                lines.append(f"{num(pw.get('mean_w')):.0f} W")
            if finite(num(pw.get("capped_share"))):
                lines.append(f"capped {num(pw.get('capped_share')):.0%}")
            ax.text(i, mj + top * 0.015, "\n".join(lines), ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, top * 1.3)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.grid(axis="x", visible=False)
        ax.set_ylabel(f"energy per {per} (mJ)")
        if any(est for mj, est in vals if finite(mj)):
            fig.text(0.5, -0.02, "hatched (≈): mean W × median time (no energy_mj_per_iter in the report for it)",
                     ha="center", va="top", fontsize=8, color="dimgrey")
        ax.set_title(f"Energy per {per}, {label}" + (f" — {dev}" if dev else ""), fontsize=10)
        fig.tight_layout()
        save(fig, out, f"energy-{slug(path)}-{suffix}", written)

# ---------------------------------------------------------------------------------------------------------

def plot_peers_block(inputs, out, written):
    """One transformer block per preset: dropbench's four pipelines (Philox-7) beside the peers' end-to-end
    blocks (scripts/peers.py, variants peer:e2e-*), matched by config name and SQ."""
    runs = {}
    for path, rep in inputs.reports.get("run", []):
        name = rep.config_name or slug(path)
        for r in run_records(rep):
            if r["rounds"] in (7, None) and finite(r["median"]):
                runs.setdefault((name, r["sq"]), {})[r["pipeline"]] = r["median"]
    rows = []  # (label, {bar: seconds})
    for path, rep in inputs.reports.get("peers", []):
        name = rep.config_name or slug(path)
        for p in rep.points:
            e2e = {v.name.split(":", 1)[1]: v.median for v in p.variants if v.peer and v.name.startswith("peer:e2e-")}
            sq = int(p.get("sq", 0) or 0)
            if e2e and (name, sq) in runs:
                bars = {pl: runs[(name, sq)][pl] for pl in ordered(list(runs[(name, sq)]), PIPELINE_ORDER)}
                bars.update({f"torch {k[4:]}": t for k, t in e2e.items() if finite(t)})
                rows.append((f"{name}\nSQ {sq}", bars))
    if not rows:
        if inputs.reports.get("peers"):
            note("peers reports without a matching `dropbench run` report (same config name and SQ): block plot skipped")
        return
    import_matplotlib()
    names = []
    for _, bars in rows:
        names += [n for n in bars if n not in names]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(rows)), 4))
    w = 0.8 / len(names)
    ref = [bars.get("baseline") or min(bars.values()) for _, bars in rows]
    lo, hi = 1.0, 1.0
    for i, n in enumerate(names):
        xs = [k + (i - (len(names) - 1) / 2) * w for k in range(len(rows))]
        ys = [bars.get(n, float("nan")) / r for (_, bars), r in zip(rows, ref)]
        lo, hi = min([lo] + [y for y in ys if finite(y)]), max([hi] + [y for y in ys if finite(y)])
        ax.bar(xs, ys, w, label=n, hatch="//" if n.startswith("torch") else None, color=colors()[i % len(colors())])
    ax.set_ylim(lo - 0.4 * (hi - lo) - 0.02, hi + 0.15 * (hi - lo) + 0.01)
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    ax.set_xticks(range(len(rows)), [f"{r[0]}\nbaseline {t * 1e3:.2f} ms" for r, t in zip(rows, ref)])
    ax.set_ylabel("time / dropbench baseline (lower is faster)")
    ax.set_title("One block (QKV GEMM + attention with dropout): dropbench (Philox-7) vs PyTorch", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    save(fig, out, "peers_block", written)


def plot_all(inputs, out, peer_sq_override=None):
    written = []
    assign_slugs([path for reps in inputs.reports.values() for path, _ in reps])

    def each(kind, fn):
        for path, rep in inputs.reports.get(kind, []):
            CURRENT.update(path=path, rep=rep)
            fn(path, rep)
        CURRENT.update(path=None, rep=None)

    each("rng", lambda path, rep: plot_rng(path, rep, out, written))
    each("dropout", lambda path, rep: plot_dropout(path, rep, out, written))
    each("attention", lambda path, rep: plot_attention(path, rep, out, written, inputs.peer_attention,
                                                       peer_sq_override))

    def gemm(path, rep):
        if not inputs.peer_gemm:
            note(f"{path}: no peer_gemm.json given; plotting dropbench alone")
        plot_gemm(path, rep, out, written, inputs.peer_gemm)
    each("gemm", gemm)
    if inputs.reports.get("run"):
        each("run", lambda path, rep: plot_run(path, rep, out, written))
    else:
        note("no `dropbench run` report given: pipeline speedup and phase plots skipped")
    plot_peers_block(inputs, out, written)
    for kind in sorted(inputs.reports):
        each(kind, lambda path, rep: plot_power(path, rep, inputs.raw.get(str(path)), out, written))
    return written


# ---------------------------------------------------------------------------------------------------------
# Self-test: synthetic reports of every kind -> every plot, in a temp dir.
# ---------------------------------------------------------------------------------------------------------

def _stats(m, rs=0.01):
    return {"samples": 10, "median": m, "mean": m, "min": m * 0.99, "max": m * 1.02, "stdev": m * rs,
            "rel_stdev": rs, "discarded": 0, "mean_clock_mhz": 1980.0}


def _var(name, m, derived=None, phases=(), extra=None):
    return {"name": name, "peer": False, "stats": _stats(m), "derived": derived or {},
            "phases": [{"name": n, "stats": _stats(t)} for n, t in phases], "extra": extra or {}}


def _report(cmd, points):
    return {"schema": "dropbench.report", "schema_version": 1, "command": cmd,
            "context": {"tool": "dropbench", "device": {"name": "Synthetic GPU"}}, "config": {}, "summary": {},
            "points": [dict(p, index=i, derived={}) for i, p in enumerate(points)], "skipped": []}


def self_test(keep=None):
    """Synthetic reports of every kind -> every plot; with `keep`, the plots are written there too."""
    wl = {"batch": 1, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "dropout_p": 0.1, "rounds": 7}
    rng = _report("rng", [{"axes": {"sq": 8192, "rounds": r, "threshold_bits": b, "layout": "tile"}, "workload": wl,
                           "variants": [_var("rng", 1e-4 * (0.4 + 0.1 * r) * (1 + b / 32),
                                             {"gelem_s": 2000.0 / r}, extra={"elements": 2 ** 31})]}
                          for r in (3, 5, 7, 10) for b in (8, 16, 32)])
    dropout = _report("dropout", [{"axes": {"dropout_dtype": dt}, "workload": wl, "variants": [
        _var(n, t * (2 if dt == "fp32" else 1), {"pct_of_copy": 100.0 * 264 / t},
             [("gen", 60e-6), ("apply", t - 60e-6)] if n.startswith("mask") else [],
             {"data_bytes": 2 ** 29})
        for n, t in (("copy", 264e-6), ("mask-i32", 850e-6), ("mask-u8", 440e-6), ("mask-bits", 360e-6),
                     ("seeded", 287e-6))]} for dt in ("bf16", "fp32")])
    attention = _report("attention", [{"axes": {"sq": s, "causal": c}, "workload": wl, "variants": [
        _var(m, 1e-3, {"tflops": 400 - 30 * i - (40 if c else 0)}) for i, m in enumerate(ATTENTION_ORDER)]}
        for s in (4096, 8192, 16384) for c in (False, True)])
    gemm = _report("gemm", [{"axes": {"sq": s, "embed": e, "dtype": d}, "workload": wl,
                             "variants": [_var("cublaslt", 1e-3, {"tflops": 1350.0 if d == "fp8" else 710.0})]}
                            for s in (4096, 8192) for e in (4096, 8192) for d in ("fp8", "bf16")])
    peer_gemm = {"tool": "scripts/peer_gemm.py", "rows": [
        {"dtype": d, "sq": s, "embed": e, "tflops": 1300.0 if d == "fp8" else 690.0, "op": "torch.matmul"}
        for s in (4096, 8192) for e in (4096, 8192) for d in ("fp8", "bf16")]}
    def pipelines(sq, r, causal):
        f = (sq / 4096) ** 2 * (0.55 if causal else 1.0)
        gemm, rng, att = 0.4e-3 * sq / 4096, 0.03e-3 * r * f, 0.7e-3 * f
        fused_att = att * (1 + 0.012 * r)
        return [_var("baseline", gemm + rng + att, phases=[("gemm", gemm), ("rng", rng), ("attention", att)]),
                _var("fused", gemm + fused_att, phases=[("gemm", gemm), ("attention", fused_att)]),
                _var("overlap", max(gemm, rng) * 1.05 + att, phases=[("gemm", gemm), ("rng", rng), ("attention", att)]),
                _var("chunked", gemm + att + rng / 8, phases=[("gemm", gemm), ("rng+attention", att + rng / 8)])]
    run = _report("run", [{"axes": {"sq": sq, "rounds": r, "causal": c}, "workload": wl,
                           "variants": pipelines(sq, r, c)}
                          for sq in (4096, 8192, 16384) for r in (5, 7) for c in (False, True)])
    for doc in (run,):
        doc["config"] = {"name": "synthetic"}
    peers = _report("peers", [{"axes": {"sq": 8192}, "workload": wl, "variants": [
        dict(_var("peer:e2e-flash", 2.4e-3), peer=True), dict(_var("peer:e2e-cudnn", 2.2e-3), peer=True)]}])
    peers["config"] = {"name": "synthetic"}
    peer_attention = ("torch flash causal=0 p=0.0:   3.119 ms   352.5 TFLOP/s\n"
                      "torch flash causal=1 p=0.1:   2.166 ms   253.8 TFLOP/s\n"
                      "torch cudnn causal=0 p=0.1:   3.669 ms   299.7 TFLOP/s\n")
    with tempfile.TemporaryDirectory(prefix="dropbench_plot_") as tmp:
        tmp = Path(tmp)
        for name, doc in (("rng", rng), ("dropout", dropout), ("attention", attention), ("gemm", gemm),
                          ("peer_gemm", peer_gemm), ("run", run), ("peers", peers)):
            (tmp / f"{name}.json").write_text(json.dumps(doc))
        (tmp / "peer_attention.md").write_text(peer_attention)
        assert parse_peer_attention(tmp / "peer_attention.md")[0]["tflops"] == 352.5
        assert peer_sq(parse_peer_attention(tmp / "peer_attention.md")[0], 32, 128, 1) == 8192
        inputs = Inputs()
        inputs.add(tmp)
        out = tmp / "plots"
        written = plot_all(inputs, out)
        if keep:
            plot_all(inputs, Path(keep))
        expect = {f"{k}-{n}.{e}" for k, n in (("philox_ratio", "rng"), ("dropout", "dropout"),
                                               ("attention", "attention"), ("gemm", "gemm"),
                                               ("run_speedup", "run"), ("run_phases", "run"))
                  for e in ("png", "svg")} | {"peers_block.png", "peers_block.svg"}
        got = {f.name for f in written}
        missing = expect - got
        small = [f.name for f in written if f.stat().st_size < 2000]
        if missing or small:
            print(f"plot.py self-test: FAILED (missing {sorted(missing)}, too small {small})", file=sys.stderr)
            return 1
        # Without a run report the pipeline plots are skipped, not an error.
        inputs.reports.pop("run")
        if any(f.name.startswith(("run_", "peers_")) for f in plot_all(inputs, tmp / "plots2")):
            print("plot.py self-test: FAILED (run plots without a run report)", file=sys.stderr)
            return 1
        # Two run reports of one file name in different folders: both sets of plots survive, under distinct names.
        for sub in ("a", "b"):
            (tmp / "same" / sub).mkdir(parents=True)
            (tmp / "same" / sub / "run.json").write_text(json.dumps(run))
        same = Inputs()
        same.add(tmp / "same")
        names = {f.name for f in plot_all(same, tmp / "plots3")}
        if not {"run_speedup-a_run.png", "run_speedup-b_run.png"} <= names:
            print(f"plot.py self-test: FAILED (same-named reports: {sorted(names)})", file=sys.stderr)
            return 1
        problem = fixture_checks(tmp)
        if problem:
            print(f"plot.py self-test: FAILED ({problem})", file=sys.stderr)
            return 1
    print(f"plot.py self-test: ok ({len(expect)} files from synthetic reports; tests/fixtures/compare, model and "
          f"power reports read through dropbench_report.py, 10 files from them)")
    return 0


def fixture_checks(tmp):
    """The shared reader on the fixture reports, as plot.py meets files: a folder walk keeps the reports,
    recognises peer_gemm.json, skips what it cannot read; an explicit unreadable file stops with exit 2;
    the run and rng fixtures of tests/fixtures/model plot."""
    fixtures = REPO / "tests" / "fixtures" / "compare"
    inputs = Inputs()
    inputs.add(fixtures)
    att = sorted(p.name for p, _ in inputs.reports.get("attention", []))
    if att != ["base.json", "empty.json", "faster.json", "same.json", "slower_beyond.json", "slower_noise.json",
               "unmatched.json"] or [p.name for p, _ in inputs.reports.get("gemm", [])] != ["other_command.json"] \
            or [p.name for p, _ in inputs.peer_gemm] != ["not_report.json"]:
        return f"folder walk of {fixtures}: attention {att}, gemm {inputs.reports.get('gemm')}, peer_gemm {inputs.peer_gemm}"
    base = dict(inputs.reports["attention"])[fixtures / "base.json"]
    if base.points[1].get("sq") != 8192 or base.points[1].variant("fused").median != 0.0008:
        return f"base.json read as {base.points}"
    written = []
    plot_attention(fixtures / "base.json", base, tmp / "fixture_plots", written, [], None)  # no TFLOP/s: a note
    model = REPO / "tests" / "fixtures" / "model"
    for f in ("report_run.json", "report_rng.json"):
        inputs.add(model / f)
    plot_run(model / "report_run.json", inputs.reports["run"][0][1], tmp / "fixture_plots", written)
    plot_rng(model / "report_rng.json", inputs.reports["rng"][0][1], tmp / "fixture_plots", written)
    want = [f"{k}-{n}.{e}" for k, n in (("philox_ratio", "report_rng"), ("run_phases", "report_run"),
                                        ("run_speedup", "report_run")) for e in ("png", "svg")]
    if sorted(f.name for f in written) != want:
        return f"plots of the fixture reports: {sorted(f.name for f in written)}, expected {want}"
    problem = power_fixture_checks(tmp)
    if problem:
        return problem
    for name in ("wrong_version.json", "not_json.json"):
        try:
            Inputs().add(fixtures / name)
            return f"{name} given explicitly was accepted"
        except SystemExit as e:
            if e.code != 2:
                return f"{name}: exit {e.code}"
    return None


def power_fixture_checks(tmp):
    """tests/fixtures/power/run_power.json: point 0's pipelines with measured power (baseline, fused, overlap; not
    alone:gemm, which is no pipeline, nor chunked, which has no power) get a timeline and an energy plot; fused's
    energy is estimated (no energy_mj_per_iter); point 1 (no measured power) gets none; reports without power
    (the compare fixtures) get none either."""
    f = REPO / "tests" / "fixtures" / "power" / "run_power.json"
    inputs = Inputs()
    inputs.add(f)
    rep = inputs.reports["run"][0][1]
    doc = inputs.raw[str(f)]
    pts = power_points(rep, doc)
    got = [(p.index, [v.name for v, _ in rows]) for p, rows in pts]
    if got != [(0, ["baseline", "fused", "overlap"])]:
        return f"power points of {f.name}: {got}"
    by = {v.name: (v, pw) for v, pw in pts[0][1]}
    if energy_mj(*by["baseline"]) != (1310.0, False) or not energy_mj(*by["fused"])[1] \
            or abs(energy_mj(*by["fused"])[0] - by["fused"][1]["mean_w"] * 1.8e-3 * 1e3) > 1e-9:
        return f"energy per block of {f.name}: {[energy_mj(*by[n]) for n in by]}"
    written = []
    plot_power(f, rep, doc, tmp / "power_plots", written)
    want = sorted(f"{k}-run_power-p0.{e}" for k in ("energy", "power_timeline") for e in ("png", "svg"))
    if sorted(x.name for x in written) != want or any(x.stat().st_size < 2000 for x in written):
        return f"power plots of {f.name}: {sorted(x.name for x in written)}, expected {want}"
    cmp = Inputs()
    cmp.add(REPO / "tests" / "fixtures" / "compare" / "base.json")
    none = []
    plot_power("base.json", cmp.reports["attention"][0][1], cmp.raw[str(REPO / "tests" / "fixtures" / "compare" / "base.json")],
               tmp / "power_plots2", none)
    if none:
        return f"power plots of a report without power: {[x.name for x in none]}"
    if variant_power({"power": {"measured": False}}) is not None or variant_power({"extra": {"power": {"measured": True}}}) is None:
        return "variant_power: measured false accepted, or extra.power ignored"
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("paths", nargs="*", help="report JSONs, peer_gemm.json, peer_attention.md, or folders "
                    f"(default: {DEFAULT_RESULTS.relative_to(REPO)})")
    ap.add_argument("-o", "--out", help="output folder (default: results/h200/plots, or <first folder>/plots)")
    ap.add_argument("--peer-attention", action="append", default=[], metavar="MD",
                    help="PyTorch SDPA lines (scripts/attention_torch_ref.py output) to draw with attention")
    ap.add_argument("--peer-sq", type=int, help="SQ of the peer attention lines (default: solved from ms and TFLOP/s)")
    ap.add_argument("--self-test", action="store_true", help="plot synthetic reports into a temp dir and check (with -o: keep the plots there)")
    args = ap.parse_args(argv)
    import_matplotlib()
    if args.self_test:
        return self_test(args.out)
    paths = args.paths or [str(DEFAULT_RESULTS)]
    inputs = Inputs()
    for p in paths:
        inputs.add(p)
    for p in args.peer_attention:
        inputs.add(p)
    if args.out:
        out = Path(args.out)
    elif not args.paths or not Path(paths[0]).is_dir():
        out = DEFAULT_RESULTS / "plots"
    else:
        out = Path(paths[0]) / "plots"
    if not inputs.reports:
        note("no dropbench report among the inputs")
        return 2
    written = plot_all(inputs, out, args.peer_sq)
    for f in written:
        rel = os.path.relpath(f)
        print(f if rel.startswith("..") else rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
