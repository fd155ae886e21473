#!/usr/bin/env python3
"""Peers for dropbench: PyTorch and Triton on the same sweep points as a dropbench config, written as a
dropbench report (schema "dropbench.report", version 1, command "peers"; docs/report-schema.md).

    scripts/peers.py --config configs/llama3-70b.json --sq 8192 -o results/h200/peers/llama3-70b.json

The points come from dropbench itself: each block runs `dropbench COMMAND --config .. --set .. --dry-run
--format json` (binary: --dropbench PATH, else $DROPBENCH_BINARY, else build/dropbench; no GPU needed) and
times that command's points, read from the dry run's report with scripts/dropbench_report.py, as is the
resolved config (workload, sweep, measure) that the peers report carries. --config, --set and the axis
shortcuts (--sq V = --set sweep.sq=V, ...) go to dropbench unchanged, so its rules and its one-line errors
apply, except that each command gets only the `sweep.AXIS` of axes it sweeps (AXES; dropbench refuses the
others), and the peers report's config carries every block's sweeps. A point's axes that no peer has (rounds, threshold_bits, chunk) are dropped and the points that then
coincide are timed once. An axis a block records (below) that the config does not sweep is held at the
workload's value (`--set sweep.AXIS=[value]`), so a preset is timed at its own shape even where the command
would sweep defaults of its own. context.points_from names the binary and every dry run.

Five blocks, each point's variants tagged `"peer": true` and named "peer:...":

  attention  the points of `dropbench attention`: axes sq, causal (+ any of q_heads, kv_heads, head_dim,
             dropout_p the config sweeps).
             F.scaled_dot_product_attention, bf16, with one backend forced at a time (flash, cudnn,
             efficient = memory-efficient), without dropout (":none") and with dropout_p (":dropout").
             Q/K/V are strided views of one bf16 QKV buffer [B*SQ, (Hq+2Hkv)*dH], as dropbench's attention
             reads them. GQA: `enable_gqa=True` with Hkv heads where the backend takes it, otherwise K/V
             expanded to Hq heads with repeat_interleave OUTSIDE the timed region; a backend that refuses
             the views gets contiguous copies, also untimed. extra.gqa / extra.layout say which was used.
             derived: tflops = 4*B*Hq*SQ^2*dH / t (halved when causal), x_none (time / same backend's none).
  gemm       the points of `dropbench gemm`: axes sq, embed, dtype (dtype: the config's sweep, else the
             command's fp8 and bf16); batch and the heads come from the workload, as in dropbench gemm.
             Y[M, N] = X[M, K] W[N, K]^T with M = B*SQ, K = E, N = (Hq + 2Hkv)*dH.
             peer:scaled_mm  torch._scaled_mm, e4m3 inputs, per-tensor fp32 scales, bf16 out,
                             use_fast_accum=True, W passed as W.t() (column-major: cuBLASLt's TN).
             peer:matmul     torch.matmul(X, W.t()) in bf16.          derived: tflops = 2*M*N*K / t.
  dropout    the points of `dropbench dropout`: axes elements, dropout_dtype (+ dropout_p where swept).
             The standalone dropout of `elements` values:
             peer:copy                y.copy_(x), the device-to-device bandwidth ceiling
             peer:torch-dropout       torch.nn.functional.dropout(x, p, training=True) (native_dropout,
                                      which also writes a 1-byte mask)
             peer:triton-mask         mask made beforehand (phase gen: a uint8 keep tensor from
                                      torch.bernoulli_), then a Triton kernel reads x and it (phase apply)
             peer:triton-rand         Triton, tl.rand(seed, offset) per element (Philox-4x32-10)
             peer:triton-rand4x       Triton, tl.rand4x: 4 values per Philox call (Philox-4x32-10)
             peer:triton-rand4x-r7    the same with 7 Philox rounds, dropbench's default
             peer:triton-randint4x    Triton, tl.randint4x with an integer threshold (Philox-4x32-10)
             derived: gb_s = every byte moved (x, y, mask written and read) / t, as dropbench's dropout;
             xy_gb_s = (x + y bytes) / t; pct_of_copy = gb_s / copy's gb_s * 100 (dropbench's definition);
             pct_of_copy_time = copy's time / t * 100.
  e2e        the points of `dropbench run`, its axes without rounds / threshold_bits / chunk (sq for the
             Llama-3 presets). One block as PyTorch users would write it: the QKV GEMM (fp8
             _scaled_mm or bf16 matmul, per workload.dtype; phase gemm) then SDPA with dropout_p on Q/K/V
             taken as views of the GEMM output (reshape + transpose, no copy; phase attention), with
             peer:e2e-flash and peer:e2e-cudnn. Anything a backend needs beyond the views (GQA expansion,
             contiguous copies) is done INSIDE the timed region and named in extra. extra.kernels lists the
             CUDA kernels one call launched (torch.profiler), so a hidden copy would show there.
  train      the points of `dropbench run --set workload.pass=train` (its training step; axes as e2e's, e.g.
             --dtype bf16,fp8 for both precisions). One training step of the block as PyTorch users would write
             it, one sample = phase fwd then phase bwd, peer:train-cudnn and peer:train-flash (SDPA backend
             forced):
               fwd  Y_qkv = X W_qkv^T; Q/K/V = Y_qkv.split(..) viewed [B, H, SQ, dH] (no copy); SDPA with
                    dropout_p and is_causal of the workload (GQA as e2e: enable_gqa, else repeat_interleave,
                    inside the timed region); Y = O W_out^T with O = attention output reshaped [B*SQ, Hq*dH]
               bwd  torch.autograd.grad(Y, [X, W_qkv, W_out], grad_outputs=dY) with a fixed random dY: dX and
                    dW of both GEMMs and the attention backward, as dropbench's step computes them
             GEMMs per workload.dtype: bf16 = torch.matmul with autograd; fp8 = Transformer Engine's recipe in
             a torch.autograd.Function (PyTorch has no autograd for _scaled_mm): forward _scaled_mm with e4m3
             operands (per-tensor scales, W as W.t(), fast accumulation; X and the weights cast to e4m3 before
             the step, untimed, as dropbench's step takes them in e4m3; O cast in the forward); backward: dY
             cast to e5m2, the transposed fp8 copies cuBLASLt's TN-only fp8 GEMMs need made by .t().contiguous()
             inside the timed backward (TE's cast-transpose), dA = _scaled_mm(dY e5m2, W^T e4m3) and
             dW = _scaled_mm(dY^T e5m2, A^T e4m3), without fast accumulation. A backend or _scaled_mm that
             refuses the step (forward or backward) at set-up is a skipped entry of its variant.
             derived: t_step, t_fwd, t_bwd (s), fwd_share, peak_memory_gib (torch.cuda.max_memory_allocated
             over one step less what was allocated before it); extra: backend, gemm, gqa, layout, kernels (one
             step's CUDA kernels, torch.profiler), copy_kernels, peak_memory_bytes.

Timing (one sample = one call, or one pass over the phases): CUDA event pairs around every sample,
measure.warmup untimed calls, then samples until both >= measure.min_samples and >= --min-time seconds of
samples (default: the config's measure.min_time, 0.2 s for the presets; the H200 is power-capped, so
sustained runs read 5-15 % slower than bursts: compare equal durations), at most measure.max_samples and
measure.timeout seconds. Stats as dropbench's (median, mean, min, max, stdev, rel_stdev, in SECONDS; scripts/dbstats.py);
mean_clock_mhz = mean SM clock read through NVML every 2 ms during the samples (0 without pynvml).

A backend or kernel that refuses a setting is a `skipped` entry {"axes", "variant", "reason"} with the
exception (and warning) text: peers' skipped entries name their variant, so a point can be both measured
(its other variants) and skipped (that variant).

Other modes:
  --dry-run          the points of each block, no GPU
  --self-test        CPU only (no torch): argument parsing, the points from the binary's dry runs (and its
                     refusals), the report writer read back through dropbench_report.py, --versus, and
                     `dropbench compare` on the written report; needs the binary (--dropbench PATH). Where
                     PyTorch is importable (a GPU is not needed), also the train block's step (bf16 and fp8, GQA
                     and MHA, every SDPA call form it may take) against the same step in fp32 on the CPU
  --versus RUN.json PEERS.json [--versus ...]
                     markdown: per preset, dropbench's best pipeline (a forward `run` report) or best training-step
                     strategy (fused / stored / regen-overlap / fused-write where measured; a `run` report at
                     pass train), at Philox-7 and at the best round count, against the best peer block of the
                     same pass (e2e or train) at the same axes; with train rows, a last line says at how many the
                     peer takes >= 1.2x dropbench's step at Philox-7

Exit codes: 0 done; 2 bad input, or no GPU / no PyTorch (one line on stderr).
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

TOOL_VERSION = "1"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import dropbench_report as dr  # noqa: E402  (the shared report reader, scripts/dropbench_report.py)
import dbstats  # noqa: E402  (sample summaries, scripts/dbstats.py)


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# Points: dropbench's own, from a dry run of the command each block mirrors (no copy of its config rules)
# ---------------------------------------------------------------------------------------------------------

# `<dropbench> COMMAND --config .. --set .. --dry-run --format json -o R.json` loads the config, applies the
# --set overrides, expands and validates the sweep exactly as COMMAND would, and R.json lists every point
# (axes + full workload) and the resolved config (measure settings included), without a GPU.
BLOCKS = ("attention", "gemm", "dropout", "e2e", "train")
COMMAND = {"attention": "attention", "gemm": "gemm", "dropout": "dropout", "e2e": "run", "train": "run"}
# Options a block adds to its command's dry run, after the user's: the train block's points are `dropbench run`'s
# at pass train (`--set workload.pass=train`, as dropbench's training step takes it).
BLOCK_ARGS = {"train": ["--set", "workload.pass=train"]}
# The pass a block's points must have (workload.pass; dropbench leaves the field out at the default, fwd): a `run`
# sweep of both passes (`--set sweep.pass=[fwd,train]`) gives e2e its forward points and train its training-step
# points; the pass axis itself is then dropped, as each block has one pass.
PASS = {"e2e": "fwd", "train": "train"}
# The workload fields that a block's peers read. A point's axes outside them (rounds, threshold_bits, chunk:
# dropbench's own RNG and pipeline settings, which no peer has) are dropped; points that then coincide are
# timed once, and their workload keeps the config's value of the dropped fields.
USES = {
    "attention": ("sq", "q_heads", "kv_heads", "head_dim", "causal", "dropout_p", "batch"),
    "gemm": ("sq", "embed", "dtype", "batch", "q_heads", "kv_heads", "head_dim"),
    "dropout": ("elements", "dropout_dtype", "dropout_p"),
    "e2e": ("batch", "embed", "q_heads", "kv_heads", "head_dim", "sq", "causal", "dropout_p", "dtype"),
    "train": ("batch", "embed", "q_heads", "kv_heads", "head_dim", "sq", "causal", "dropout_p", "dtype"),
}
# Axes that a block always records and, when the config does not sweep them, holds at the workload's value:
# the peers time a preset's own shape (llama3-70b: E 8192, causal, bf16 dropout tensor) where the command
# sweeps defaults of its own (`dropbench COMMAND --help`). Passed as `--set sweep.AXIS=[value]`. gemm's dtype is
# left to `dropbench gemm` (its fp8 and bf16 unless the config sweeps dtype).
PINNED = {"attention": ("sq", "causal"), "gemm": ("sq", "embed"), "dropout": ("elements", "dropout_dtype"),
          "e2e": (), "train": ()}
# The axes each command sweeps (its expand_sweep list in src/cli/cmd_*.cpp): dropbench refuses a --set sweep.AXIS
# its command does not sweep, so each dry run gets only its command's own; the self-test checks these lists
# against the binary.
AXES = {
    "attention": ("batch", "sq", "q_heads", "kv_heads", "head_dim", "causal", "dropout_p", "rounds", "threshold_bits",
                  "attention_kernel"),
    "gemm": ("sq", "embed", "dtype"),
    "dropout": ("elements", "dropout_dtype", "rounds", "threshold_bits", "dropout_p"),
    "run": ("batch", "embed", "q_heads", "kv_heads", "head_dim", "sq", "causal", "dropout_p", "dtype", "rounds",
            "threshold_bits", "chunk", "attention_kernel"),
}
ALL_AXES = {ax for axes in AXES.values() for ax in axes} | {"layout"}
SHORTCUTS = ("batch", "sq", "embed", "q_heads", "kv_heads", "head_dim", "causal", "dropout_p", "dtype", "elements",
             "dropout_dtype")


def find_dropbench(explicit):
    """--dropbench PATH, else $DROPBENCH_BINARY, else the build folder's build/dropbench."""
    if explicit:
        if Path(explicit).is_file() and os.access(explicit, os.X_OK):
            return str(explicit)
        raise UsageError(f"--dropbench {explicit}: not an executable file")
    for c in (os.environ.get("DROPBENCH_BINARY", ""), str(REPO / "build" / "dropbench")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise UsageError("no dropbench binary (the points come from its --dry-run; looked for $DROPBENCH_BINARY and "
                     f"{REPO / 'build' / 'dropbench'}): cmake --build build --target dropbench, or pass --dropbench PATH")


def dry_run(binary, command, args):
    """dropbench's report (dropbench_report.Report) of `COMMAND ARGS --dry-run`; UsageError with dropbench's
    one-line message when it refuses the input."""
    with tempfile.TemporaryDirectory(prefix="peers_dry_run_") as td:
        out = Path(td) / f"{command}.json"
        argv = [binary, command, *args, "--dry-run", "--format", "json", "-q", "-o", str(out)]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise UsageError(f"dropbench {command} --dry-run: {e}")
        if r.returncode != 0:
            lines = [x.strip() for x in r.stderr.splitlines() if x.strip()]
            msg = re.sub(r"^dropbench: (error: )?", "", lines[-1]) if lines else f"exit code {r.returncode}"
            raise UsageError(f"dropbench {command}: {msg}")
        try:
            return dr.load(out)
        except dr.ReportError as e:
            raise UsageError(f"dropbench {command} --dry-run: {e}")


def dropbench_args(a):
    """The config part of peers' command line as dropbench options: --config, every --set in order, then the
    shortcuts (--sq V is --set sweep.sq=V; dropbench reads V: 8192, 4096,8192, pow2:2K:16K, ...)."""
    out = ["--config", a.config] if a.config else []
    for s in a.set:
        out += ["--set", s]
    for s in SHORTCUTS:
        v = getattr(a, "ax_" + s)
        if v is not None:
            out += ["--set", f"sweep.{s}={v}"]
    return out


def sweep_axis(arg):
    """AXIS of a `sweep.AXIS=...` --set value, else None."""
    m = re.match(r"sweep\.([A-Za-z_]+)=", arg)
    return m.group(1) if m else None


def command_args(args, command):
    """dropbench_args() for one command: a `--set sweep.AXIS=` of an axis another command sweeps but this one
    does not is left out (dropbench would refuse it); any other --set goes as is, so dropbench judges it."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "--set" and i + 1 < len(args):
            ax = sweep_axis(args[i + 1])
            if not (ax in ALL_AXES and ax not in AXES[command]):
                out += args[i:i + 2]
            i += 2
        else:
            out.append(args[i])
            i += 1
    return out


def block_points(rep, block, base_workload):
    """[(axes, workload)] of a block from the dry-run report of its command."""
    uses = USES[block]
    out, seen = [], set()
    for p in rep.points:
        if block in PASS and p.workload.get("pass", "fwd") != PASS[block]:
            continue
        missing = [k for k in uses if k not in p.workload]
        if missing:
            raise UsageError(f"dropbench {rep.command} --dry-run: points[{p.index}].workload lacks "
                             f"{', '.join(missing)} (peers' {block} block reads them)")
        axes = {k: x for k, x in p.axes.items() if k in uses}
        key = json.dumps(axes, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        wl = dict(p.workload)
        for k in p.axes:
            if k not in uses and k in base_workload:
                wl[k] = base_workload[k]
        out.append((axes, wl))
    return out


def plan(a, blocks):
    """(resolved config, {block: [(axes, workload)]}, where the points came from), all from dropbench."""
    binary = find_dropbench(a.dropbench)
    args = dropbench_args(a)
    first, first_extra = COMMAND[blocks[0]], BLOCK_ARGS.get(blocks[0], [])
    probe = dry_run(binary, first, command_args(args, first) + first_extra)
    if a.min_samples is not None:  # as before: --min-samples N also lifts measure.max_samples to N
        if dr.number(probe.config.get("measure", {}).get("max_samples")) < a.min_samples:
            args += ["--set", f"measure.max_samples={a.min_samples}"]
        args += ["--set", f"measure.min_samples={a.min_samples}"]
        probe = dry_run(binary, first, command_args(args, first) + first_extra)
    # An axis that no selected block's command sweeps would be dropped everywhere: refuse it, as dropbench would.
    mine = sorted({ax for b in blocks for ax in AXES[COMMAND[b]]})
    for x in args:
        ax = sweep_axis(x)
        if ax in ALL_AXES and ax not in mine:
            raise UsageError(f"--set sweep.{ax}: no selected block's command sweeps it (allowed axes: {', '.join(mine)})")
    cfg = probe.config
    # Swept by the config or the user: the probe's sweep, plus the --set sweeps it was not given.
    swept = set(cfg.get("sweep") or {}) | {sweep_axis(x) for x in args if sweep_axis(x)}
    for sec, keys in (("workload", ("seed",)), ("measure", ("min_samples", "max_samples", "min_time", "timeout",
                                                            "warmup"))):
        lacks = [k for k in keys if k not in (cfg.get(sec) or {})]
        if lacks:
            raise UsageError(f"dropbench {first} --dry-run: config.{sec} lacks {', '.join(lacks)}")
    points, runs = {}, {}
    for b in blocks:
        pins = []
        pinned = set()
        for ax in PINNED[b]:
            if ax not in swept:
                pinned.add(ax)
                if ax not in cfg["workload"]:
                    raise UsageError(f"dropbench {first} --dry-run: config.workload lacks {ax}")
                pins += ["--set", f"sweep.{ax}={json.dumps([cfg['workload'][ax]])}"]
        own = command_args(args, COMMAND[b]) + BLOCK_ARGS.get(b, [])
        same = not pins and COMMAND[b] == first and BLOCK_ARGS.get(b, []) == first_extra
        rep = probe if same else dry_run(binary, COMMAND[b], own + pins)
        points[b] = block_points(rep, b, cfg["workload"])
        runs[b] = ["dropbench", COMMAND[b], *own, *pins, "--dry-run"]
        for ax, values in (rep.config.get("sweep") or {}).items():  # the resolved config: every block's sweeps
            if ax not in pinned:
                cfg.setdefault("sweep", {}).setdefault(ax, values)
    source = {"binary": binary, "version": probe.context.get("version"), "git_sha": probe.context.get("git_sha"),
              "dry_runs": runs}
    return cfg, points, source


def seed_of(cfg):
    """workload.seed of a resolved config (dropbench writes it as a "0x..." string) as an integer."""
    s = cfg["workload"]["seed"]
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    s = str(s).strip()
    return int(s, 16) if s.lower().startswith("0x") else int(s)


# ---------------------------------------------------------------------------------------------------------
# Statistics and the report (docs/report-schema.md)
# ---------------------------------------------------------------------------------------------------------

# The nine stats keys, in order, of samples in seconds (scripts/dbstats.py: the scripts' one statistics module).
stats_of = dbstats.summary


def make_variant(name, stats, phases=(), derived=None, extra=None):
    return {"name": name, "peer": True, "stats": stats,
            "phases": [{"name": n, "stats": s} for n, s in phases], "derived": derived or {}, "extra": extra or {}}


def sanitize(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): sanitize(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [sanitize(v) for v in x]
    return x


class Report:
    """The whole document, rewritten atomically (tmp + fsync + rename) after every change."""

    def __init__(self, path, context, config):
        self.path = path
        self.doc = {"schema": "dropbench.report", "schema_version": 1, "command": "peers", "context": context,
                    "config": config, "summary": {}, "points": [], "skipped": []}
        self.write()

    def add_point(self, axes, workload, variants, derived=None):
        self.doc["points"].append({"index": len(self.doc["points"]) + len(self.doc["skipped"]), "axes": axes,
                                   "workload": workload, "variants": variants, "derived": derived or {}})
        self.write()

    def add_skipped(self, axes, reason, variant=None):
        s = {"axes": axes, "reason": " ".join(str(reason).split())[:2000]}
        if variant:
            s = {"axes": axes, "variant": variant, "reason": s["reason"]}
        self.doc["skipped"].append(s)
        self.write()

    def set_summary(self, summary):
        self.doc["summary"] = summary
        self.write()

    def write(self):
        if not self.path:
            return
        path = Path(self.path)
        tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(sanitize(self.doc), indent=2, allow_nan=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            raise SystemExit(f"peers: cannot write {path}: {e.strerror or e}")



# ---------------------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------------------

def fmt3(x):
    if not dr.finite(x):
        return ""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def md_table(rep):
    """The table of a peers report (dropbench_report.Report)."""
    lines = ["| block | axes | variant | median µs | rel stdev % | samples | MHz | figures | how |",
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for p, v in rep.each_variant():
        axes = " ".join(f"{k}={x}" for k, x in p.axes.items())
        s = v.stats
        figs = ", ".join(f"{k} {fmt3(x)}" for k, x in v.derived.items() if isinstance(x, (int, float)))
        ph = " + ".join(f"{q.name} {fmt3(q.median * 1e6)}" for q in v.phases) if len(v.phases) > 1 else ""
        how = "; ".join(str(v.extra[k]) for k in ("gqa", "layout") if k in v.extra)
        lines.append(f"| {v.extra.get('block', '')} | {axes} | {v.name} | {fmt3(s.median * 1e6)} | "
                     f"{fmt3(s.rel_stdev * 100)} | {s.samples} | {fmt3(s.mean_clock_mhz)} | "
                     f"{figs}{' (' + ph + ')' if ph else ''} | {how} |")
    for s in rep.skipped:
        axes = " ".join(f"{k}={x}" for k, x in s.axes.items())
        lines.append(f"| skipped | {axes} | {s.variant or ''} | | | | | {s.reason[:300]} | |")
    return "\n".join(lines)


def read_report(path):
    try:
        return dr.load(path)
    except dr.ReportError as e:
        raise UsageError(str(e))


# ---------------------------------------------------------------------------------------------------------
# --versus: dropbench's best pipeline or training-step strategy against the best peer block of the same pass
# ---------------------------------------------------------------------------------------------------------

def measured(v):
    return dr.finite(v.median) and v.median > 0


# The peer blocks --versus compares with dropbench's `run`: the forward (e2e) and the training step (train). A run
# point and a peer point are matched on the peer point's axes and on the pass (workload.pass, fwd where absent),
# so a forward report meets only e2e points and a training-step report only train points.
VERSUS_PREFIXES = ("peer:e2e", "peer:train")


def pass_of(point):
    return point.get("pass") or "fwd"


def versus_rows(run_rep, peers_rep):
    """One row per peer point present in both (matched on every axis of the peer point: sq, and embed, dtype etc.
    where the sweep has them, and on the pass): dropbench's best pipeline (pass fwd) or strategy (pass train) at
    Philox-7 and at the best R, and the best peer block."""
    rows = []
    for pp in peers_rep.points:
        blocks = [v for v in pp.variants if v.name.startswith(VERSUS_PREFIXES) and measured(v)]
        if not blocks:
            continue
        db = [(v.median, v.name, p.get("rounds")) for p in run_rep.points
              if pass_of(p) == pass_of(pp) and all(p.get(k) == x for k, x in pp.axes.items())
              for v in p.variants if v.is_pipeline and measured(v)]
        if not db:
            continue
        best_peer = min(blocks, key=lambda v: v.median)
        r7 = [x for x in db if x[2] == 7]
        point = " ".join(f"{k}={x}" for k, x in pp.axes.items() if k != "pass")
        if "dtype" not in pp.axes and pp.get("dtype"):
            point += f" ({pp.get('dtype')})"
        rows.append({"name": peers_rep.config_name or "?", "sq": pp.get("sq"), "pass": pass_of(pp), "point": point,
                     "r7": min(r7) if r7 else None, "any": min(db), "peer": best_peer, "peers": blocks})
    return rows


def brief(paths):
    """Compact lines of peers reports, for a terminal."""
    out = []
    for path in paths:
        rep = read_report(path)
        c = rep.context
        out.append(f"== {path}: {rep.config_name} on {rep.device_name}, torch {c.get('torch_version')}, triton "
                   f"{c.get('triton_version')}, cudnn {c.get('cudnn_version')}")
        for p in rep.points:
            out.append("  " + " ".join(f"{k}={x}" for k, x in p.axes.items()))
            for v in p.variants:
                s, e = v.stats, v.extra
                figs = " ".join(f"{k}={fmt3(x)}" for k, x in v.derived.items() if isinstance(x, (int, float)))
                ph = "+".join(fmt3(q.median * 1e6) for q in v.phases) if len(v.phases) > 1 else ""
                tags = ",".join(t for t in (str(e.get("gqa", ""))[:12], str(e.get("layout", ""))[:12]) if t)
                kern = e.get("kernels")
                ks = (" k=" + "|".join(k[:40] for k in kern[:4])) if kern else ""
                cp = f" COPIES={e['copy_kernels']}" if e.get("copy_kernels") else ""
                out.append(f"    {v.name:26s} {fmt3(s.median * 1e6):>7s} us ±{fmt3(s.rel_stdev * 100)}% "
                           f"n={s.samples} {fmt3(s.mean_clock_mhz)}MHz {figs} {('(' + ph + ')') if ph else ''} "
                           f"{tags}{ks}{cp}")
        for sk in rep.skipped:
            out.append(f"  SKIP {sk.variant or ''} {json.dumps(sk.axes)}: {sk.reason[:260]}")
    return "\n".join(out)


# The training step's target: the best peer block at least this many times dropbench's best strategy's step time.
TRAIN_TARGET = 1.2


def versus_markdown(pairs):
    out = ["| preset | pass | point | dropbench best, Philox-7 (µs) | dropbench best, any R (µs) | best peer block (µs) "
           "| peer phases (µs) | other peer | peer / dropbench (R7) | peer / dropbench (best R) |",
           "|---|---|---:|---|---|---|---|---|---:|---:|"]
    train = []
    for run_path, peers_path in pairs:
        for r in versus_rows(read_report(run_path), read_report(peers_path)):
            pv = r["peer"]
            tp = pv.median
            ph = " + ".join(f"{q.name} {fmt3(q.median * 1e6)}" for q in pv.phases)
            others = ", ".join(f"{v.name[5:]} {fmt3(v.median * 1e6)}" for v in r["peers"] if v is not pv)
            r7 = f"{r['r7'][1]} {fmt3(r['r7'][0] * 1e6)}" if r["r7"] else "n/a"
            anyr = f"{r['any'][1]} R{r['any'][2]} {fmt3(r['any'][0] * 1e6)}"
            x7 = f"{tp / r['r7'][0]:.2f}×" if r["r7"] else "n/a (no Philox-7 point)"
            out.append(f"| {r['name']} | {r['pass']} | {r['point']} | {r7} | {anyr} | {pv.name[5:]} {fmt3(tp * 1e6)} | "
                       f"{ph} | {others} | {x7} | {tp / r['any'][0]:.2f}× |")
            if r["pass"] == "train":
                train.append((r, tp / r["r7"][0] if r["r7"] else None))
    if train:
        met = [r for r, x in train if x is not None and x >= TRAIN_TARGET]
        miss = [f"{r['name']} {r['point']} ({x:.2f}×)" if x is not None else f"{r['name']} {r['point']} (no Philox-7)"
                for r, x in train if x is None or x < TRAIN_TARGET]
        out.append("")
        out.append(f"training step, peer / dropbench at Philox-7 >= {TRAIN_TARGET}×: {len(met)} of {len(train)} rows"
                   + (f"; not met: {', '.join(miss)}" if miss else ""))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------------------------------------

def git_sha():
    """REPO's own sha (12 digits, with -dirty), as cmake/gitsha.cmake writes it into the binary: a tree that is not
    its own repository (exported with `git archive` and unpacked inside another checkout, or no git at all) reports
    its cmake/source-sha.txt as "<sha>-archive", not the enclosing checkout's sha (a copy unpacked inside another
    checkout would otherwise report that checkout's stale sha)."""
    def run(*cmd):
        return subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        top = run("rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        top = ""
    if not top or os.path.realpath(top) != os.path.realpath(REPO):
        try:
            archived = (REPO / "cmake" / "source-sha.txt").read_text().strip().splitlines()[0]
        except (OSError, ValueError, IndexError):
            return "unknown"
        return "unknown" if not archived or "Format" in archived else archived + "-archive"
    try:
        sha = run("rev-parse", "--short=12", "HEAD")
        if not sha:
            return "unknown"
        return sha + ("-dirty" if run("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def base_context(argv, sha):
    return {"tool": "scripts/peers.py", "version": TOOL_VERSION, "git_sha": sha or git_sha(),
            "argv": ["scripts/peers.py"] + list(argv),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hostname": socket.gethostname(), "python": platform.python_version()}


class Nvml:
    """SM clock through NVML (pynvml / nvidia-ml-py); every method returns None where it cannot."""

    def __init__(self, index):
        self.h = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no pynvml, no driver access
            self.h = None

    def sm_mhz(self):
        try:
            return float(self.nv.nvmlDeviceGetClockInfo(self.h, self.nv.NVML_CLOCK_SM)) if self.h else None
        except Exception:
            return None

    def info(self):
        out = {}
        if not self.h:
            return out
        for key, fn in (("driver_version", lambda: self.nv.nvmlSystemGetDriverVersion()),
                        ("max_sm_clock_mhz", lambda: self.nv.nvmlDeviceGetMaxClockInfo(self.h, self.nv.NVML_CLOCK_SM)),
                        ("max_mem_clock_mhz", lambda: self.nv.nvmlDeviceGetMaxClockInfo(self.h, self.nv.NVML_CLOCK_MEM)),
                        ("power_limit_w", lambda: self.nv.nvmlDeviceGetEnforcedPowerLimit(self.h) / 1000.0)):
            try:
                v = fn()
                out[key] = v.decode() if isinstance(v, bytes) else v
            except Exception:
                pass
        return out


class ClockPoller:
    """Mean SM clock over a timed batch: reads NVML every `interval` s in a thread."""

    def __init__(self, nvml, interval=0.002):
        self.nvml, self.interval, self.readings = nvml, interval, []
        self._stop = threading.Event()
        self._t = None

    def __enter__(self):
        if self.nvml and self.nvml.h:
            self._t = threading.Thread(target=self._run, daemon=True)
            self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            v = self.nvml.sm_mhz()
            if v:
                self.readings.append(v)
            self._stop.wait(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        if self._t:
            self._t.join()


# ---------------------------------------------------------------------------------------------------------
# GPU mode
# ---------------------------------------------------------------------------------------------------------

# extra.gqa of the blocks that call SDPA inside their timed region (e2e, train): what a GQA shape took.
GQA_TIMED = {"enable_gqa": "enable_gqa=True (K/V with Hkv heads)",
             "repeat_interleave": "K/V expanded by repeat_interleave INSIDE the timed region",
             "none (MHA)": "none (Hq = Hkv)"}


def cuda_kernels_of(torch, fn, width=160):
    """The CUDA kernels one call of fn launches, in first-launch order (torch.profiler), each name cut to width
    characters: the plan a backend picked. One '(profiler failed: ...)' entry where the profiler does not work."""
    try:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Profiler clears events at the end of each cycle"
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
        names = []
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name not in names:
                names.append(e.name)
        return [n[:width] for n in names]
    except Exception as e:  # profiler unavailable here
        return [f"(profiler failed: {type(e).__name__}: {e})"[:200]]


class Gpu:
    def __init__(self, args, cfg, report):
        import torch
        self.torch = torch
        self.args, self.cfg, self.report = args, cfg, report
        self.ms = dict(cfg["measure"])
        if args.min_time is not None:
            self.ms["min_time"] = args.min_time
        self.dev = torch.device("cuda", args.device)
        self.nvml = Nvml(args.device)
        self.seed = seed_of(cfg)
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(self.seed)
        self.verbose = not args.quiet

    def log(self, msg):
        if self.verbose:
            print(msg, file=sys.stderr, flush=True)

    # -- timing ---------------------------------------------------------------------------------------
    def measure(self, phases):
        """phases: [(name, fn)]. Returns (stats, [(name, stats)]) over samples of all phases in a row."""
        torch = self.torch
        ms = self.ms
        for _ in range(max(1, int(ms["warmup"]))):
            for _, f in phases:
                f()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _, f in phases:
            f()
        e1.record()
        torch.cuda.synchronize()
        est = max(e0.elapsed_time(e1) * 1e-3, 1e-6)
        total, per_phase = [], [[] for _ in phases]
        clocks = []
        t_end = time.perf_counter() + float(ms["timeout"])
        while len(total) < ms["max_samples"]:
            need_n = ms["min_samples"] - len(total)
            need_t = ms["min_time"] - sum(total)
            if need_n <= 0 and need_t <= 0:
                break
            k = max(need_n, math.ceil(need_t / est) if need_t > 0 else 0, 1)
            k = min(k, ms["max_samples"] - len(total), 4096)
            evs = [[torch.cuda.Event(enable_timing=True) for _ in range(len(phases) + 1)] for _ in range(k)]
            with ClockPoller(self.nvml) as cp:
                for ev in evs:
                    ev[0].record()
                    for i, (_, f) in enumerate(phases):
                        f()
                        ev[i + 1].record()
                torch.cuda.synchronize()
            clocks += cp.readings
            for ev in evs:
                total.append(ev[0].elapsed_time(ev[-1]) * 1e-3)
                for i in range(len(phases)):
                    per_phase[i].append(ev[i].elapsed_time(ev[i + 1]) * 1e-3)
            est = max(dbstats.median(total), 1e-6)
            if time.perf_counter() > t_end:
                break
        mhz = dbstats.mean(clocks) if clocks else 0.0
        return stats_of(total, mhz), [(n, stats_of(s, mhz)) for (n, _), s in zip(phases, per_phase)]

    def kernels_of(self, fn):
        """CUDA kernels one call of fn launches (cuda_kernels_of); None under --no-kernel-list."""
        return None if self.args.no_kernel_list else cuda_kernels_of(self.torch, fn)

    @staticmethod
    def copy_kernels(names):
        if not names:
            return []
        return [n for n in names if re.search(r"copy|Memcpy|elementwise|repeat|index", n, re.I)]

    def clear(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    # -- attention ------------------------------------------------------------------------------------
    def backends(self):
        from torch.nn.attention import SDPBackend
        return [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]

    def qkv_views(self, y, wl):
        b, s, hq, hkv, d = wl["batch"], wl["sq"], wl["q_heads"], wl["kv_heads"], wl["head_dim"]
        q = y[:, : hq * d].view(b, s, hq, d).transpose(1, 2)
        k = y[:, hq * d: (hq + hkv) * d].view(b, s, hkv, d).transpose(1, 2)
        v = y[:, (hq + hkv) * d:].view(b, s, hkv, d).transpose(1, 2)
        return q, k, v

    def sdpa_modes(self, wl):
        """Ways to call SDPA, most direct first: (gqa, layout). gqa: enable_gqa | repeat_interleave | none."""
        gqa_modes = ["none (MHA)"] if wl["q_heads"] == wl["kv_heads"] else ["enable_gqa", "repeat_interleave"]
        return [(g, lay) for lay in ("views", "contiguous") for g in gqa_modes]

    def sdpa_call(self, q, k, v, wl, p, gqa, layout):
        import torch.nn.functional as F
        rep = wl["q_heads"] // wl["kv_heads"]
        if gqa == "repeat_interleave":
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if layout == "contiguous":
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        kw = {"enable_gqa": True} if gqa == "enable_gqa" else {}
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=wl["causal"], **kw)

    def find_mode(self, backend, q, k, v, wl, p):
        """The first (gqa, layout) the backend accepts, and the refusals met on the way."""
        return self.first_mode(backend, wl, lambda gqa, layout: self.sdpa_call(q, k, v, wl, p, gqa, layout))

    def first_mode(self, backend, wl, attempt):
        """The first (gqa, layout) of sdpa_modes for which attempt(gqa, layout) runs under the backend, and the
        refusals (exception and warning text) met on the way."""
        torch = self.torch
        from torch.nn.attention import sdpa_kernel
        errors = []
        for gqa, layout in self.sdpa_modes(wl):
            with warnings.catch_warnings(record=True) as caught, sdpa_kernel(backend):
                warnings.simplefilter("always")
                try:
                    out = attempt(gqa, layout)
                    torch.cuda.synchronize()
                    del out
                    return (gqa, layout), errors
                except Exception as e:
                    msg = f"{gqa}/{layout}: {type(e).__name__}: {e}"
                    ws = "; ".join(str(w.message) for w in caught)
                    errors.append(" ".join((msg + (" [warnings: " + ws + "]" if ws else "")).split())[:700])
        return None, errors

    def attention_block(self, points):
        torch = self.torch
        from torch.nn.attention import sdpa_kernel
        import dropbench_attn as dba  # the FLOP convention; it reads the kernels' headers, so only where used
        for axes, wl in points:
            b, s, hq, hkv, d = wl["batch"], wl["sq"], wl["q_heads"], wl["kv_heads"], wl["head_dim"]
            n = (hq + 2 * hkv) * d
            flops = dba.attention_flops(b, hq, s, d, wl["causal"])
            self.log(f"peers: attention {axes}")
            try:
                y = torch.randn(b * s, n, device=self.dev, dtype=torch.bfloat16, generator=self.gen)
            except torch.OutOfMemoryError as e:
                self.report.add_skipped(axes, f"QKV buffer: {e}")
                continue
            q, k, v = self.qkv_views(y, wl)
            variants, none_t = [], {}
            for bname, backend in self.backends():
                for mode_name, p in (("none", 0.0), ("dropout", wl["dropout_p"])):
                    name = f"peer:sdpa-{bname}:{mode_name}"
                    if mode_name == "dropout" and p == 0:
                        continue
                    try:
                        mode, errors = self.find_mode(backend, q, k, v, wl, p)
                        if mode is None:
                            self.report.add_skipped(axes, " | ".join(errors), variant=name)
                            continue
                        gqa, layout = mode
                        # GQA expansion and copies are prepared here, outside the timed region.
                        kk, vv = k, v
                        if gqa == "repeat_interleave":
                            kk, vv = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
                        qq = q
                        if layout == "contiguous":
                            qq, kk, vv = q.contiguous(), kk.contiguous(), vv.contiguous()
                        g2 = "enable_gqa" if gqa == "enable_gqa" else "none (MHA)"

                        def call(qq=qq, kk=kk, vv=vv, p=p, g2=g2, backend=backend):
                            with sdpa_kernel(backend):
                                return self.sdpa_call(qq, kk, vv, wl, p, g2, "views")

                        with sdpa_kernel(backend):
                            st, _ = self.measure([("attention", lambda: self.sdpa_call(qq, kk, vv, wl, p, g2, "views"))])
                        kern = self.kernels_of(call)
                        del qq, kk, vv
                    except Exception as e:
                        self.report.add_skipped(axes, f"{type(e).__name__}: {e}", variant=name)
                        self.clear()
                        continue
                    if mode_name == "none":
                        none_t[bname] = st["median"]
                    extra = {"block": "attention", "backend": bname, "dropout_p": p, "dtype": "bf16",
                             "flops": flops,
                             "gqa": {"enable_gqa": "enable_gqa=True (K/V with Hkv heads)",
                                     "repeat_interleave": "K/V expanded to Hq heads by repeat_interleave, untimed",
                                     "none (MHA)": "none (Hq = Hkv)"}[gqa],
                             "layout": "strided views of the QKV buffer" if layout == "views"
                             else "contiguous copies of the views, untimed",
                             "op": "torch.nn.functional.scaled_dot_product_attention", "kernels": kern}
                    if errors:
                        extra["refused_first"] = errors
                    derived = {"tflops": flops / st["median"] / 1e12 if st["median"] else None}
                    if mode_name == "dropout" and bname in none_t and none_t[bname]:
                        derived["x_none"] = st["median"] / none_t[bname]
                    variants.append(make_variant(name, st, [("attention", st)], derived, extra))
                    self.log(f"peers:   {name}: {st['median'] * 1e6:.1f} us ({gqa}, {layout})")
            del q, k, v, y
            self.clear()
            if variants:
                dv = [x for x in variants if x["name"].endswith(":dropout")]
                derived = {"best_dropout": min(dv, key=lambda x: x["stats"]["median"])["name"]} if dv else {}
                self.report.add_point(axes, wl, variants, derived)

    # -- GEMM -----------------------------------------------------------------------------------------
    def gemm_setup(self, wl, dtype):
        """Operands and a zero-argument call returning Y[M, N] bf16."""
        torch = self.torch
        m, kdim = wl["batch"] * wl["sq"], wl["embed"]
        n = (wl["q_heads"] + 2 * wl["kv_heads"]) * wl["head_dim"]
        # Real values in [-1, 1); fp8 stores them divided by per-tensor scales (amax 300 / 200), as dropbench.
        x = torch.rand(m, kdim, device=self.dev, generator=self.gen, dtype=torch.float32) * 2 - 1
        w = torch.rand(n, kdim, device=self.dev, generator=self.gen, dtype=torch.float32) * 2 - 1
        if dtype == "fp8":
            sx = torch.tensor(1 / 300, device=self.dev, dtype=torch.float32)
            sw = torch.tensor(1 / 200, device=self.dev, dtype=torch.float32)
            xq, wq = (x / sx).to(torch.float8_e4m3fn), (w / sw).to(torch.float8_e4m3fn)
            del x, w
            wt = wq.t()  # [K, N] column-major view, no copy

            def fn():
                return torch._scaled_mm(xq, wt, scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16, use_fast_accum=True)
            info = {"op": "torch._scaled_mm", "fast_accum": True, "inputs": "e4m3, per-tensor fp32 scales",
                    "w_layout": "W.t() (column-major)"}
        else:
            xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
            del x, w

            def fn():
                return torch.matmul(xb, wb.t())
            info = {"op": "torch.matmul", "inputs": "bf16"}
        return fn, m, n, kdim, info

    def gemm_block(self, points):
        for axes, wl in points:
            self.log(f"peers: gemm {axes}")
            dt = wl["dtype"]
            name = "peer:scaled_mm" if dt == "fp8" else "peer:matmul"
            try:
                fn, m, n, k, info = self.gemm_setup(wl, dt)
                out = fn()
                assert tuple(out.shape) == (m, n) and out.dtype == self.torch.bfloat16, "unexpected output"
                del out
                st, _ = self.measure([("gemm", fn)])
                del fn
            except Exception as e:
                self.report.add_skipped(axes, f"{type(e).__name__}: {e}", variant=name)
                self.clear()
                continue
            self.clear()
            flops = 2.0 * m * n * k
            extra = dict(block="gemm", m=m, n=n, k=k, flops=flops, dtype=dt, **info)
            self.report.add_point(axes, wl, [make_variant(name, st, [("gemm", st)],
                                                          {"tflops": flops / st["median"] / 1e12}, extra)])
            self.log(f"peers:   {name}: {st['median'] * 1e6:.1f} us")

    # -- standalone dropout ---------------------------------------------------------------------------
    def dropout_block(self, points):
        torch = self.torch
        import torch.nn.functional as F
        try:
            sys.path.insert(0, str(HERE))
            import peers_triton
            tri_err = None
        except Exception as e:  # no Triton
            peers_triton, tri_err = None, f"Triton unavailable: {type(e).__name__}: {e}"
        for axes, wl in points:
            self.log(f"peers: dropout {axes}")
            n, p = wl["elements"], wl["dropout_p"]
            dt = torch.bfloat16 if wl["dropout_dtype"] == "bf16" else torch.float32
            esz = 2 if dt == torch.bfloat16 else 4
            data = n * esz
            try:
                x = torch.randn(n, device=self.dev, dtype=dt, generator=self.gen)
                y = torch.empty_like(x)
            except torch.OutOfMemoryError as e:
                self.report.add_skipped(axes, f"x and y: {e}")
                continue
            scale = 1.0 / (1.0 - p)
            variants, copy_t = [], None
            keep_holder = {}

            def gen_mask():
                keep_holder["k"] = torch.empty(n, device=self.dev, dtype=torch.uint8).bernoulli_(1.0 - p, generator=self.gen)

            tri = lambda kind, **kw: (lambda: peers_triton.launch(kind, x, y, p, self.seed, **kw))  # noqa: E731
            specs = [
                ("peer:copy", [("copy", lambda: y.copy_(x))], 2 * data, 0,
                 {"op": "Tensor.copy_ (device-to-device)"}),
                ("peer:torch-dropout", [("dropout", lambda: F.dropout(x, p, training=True))], 2 * data + n, n,
                 {"op": "torch.nn.functional.dropout (native_dropout)", "mask_written_bytes": n,
                  "rng": "PyTorch's CUDA generator (Philox-4x32-10)"}),
                ("peer:triton-mask", [("gen", gen_mask),
                                      ("apply", lambda: peers_triton.launch("mask", x, y, p, self.seed,
                                                                            keep=keep_holder["k"]))],
                 2 * data + 2 * n, n,
                 {"op": "torch.Tensor.bernoulli_ (uint8 keep mask) + Triton kernel reading x and the mask",
                  "block_elems": 2048, "rng": "PyTorch's CUDA generator (Philox-4x32-10)"}),
                ("peer:triton-rand", [("dropout", tri("rand", rounds=10))], 2 * data, 0,
                 {"op": "Triton, tl.rand(seed, offsets) per element", "philox_rounds": 10, "block_elems": 2048,
                  "philox_calls_per_element": 1.0}),
                ("peer:triton-rand4x", [("dropout", tri("rand4x", rounds=10))], 2 * data, 0,
                 {"op": "Triton, tl.rand4x: 4 uniform floats per Philox call", "philox_rounds": 10,
                  "block_elems": 4096, "philox_calls_per_element": 0.25}),
                ("peer:triton-rand4x-r7", [("dropout", tri("rand4x", rounds=7))], 2 * data, 0,
                 {"op": "Triton, tl.rand4x with n_rounds=7", "philox_rounds": 7, "block_elems": 4096,
                  "philox_calls_per_element": 0.25}),
                ("peer:triton-randint4x", [("dropout", tri("randint4x", rounds=10))], 2 * data, 0,
                 {"op": "Triton, tl.randint4x, uint32 word >= round(p * 2^32)", "philox_rounds": 10,
                  "block_elems": 4096, "philox_calls_per_element": 0.25}),
            ]
            for name, phases, moved, extra_mem, info in specs:
                if name.startswith("peer:triton") and peers_triton is None:
                    self.report.add_skipped(axes, tri_err, variant=name)
                    continue
                try:
                    if name == "peer:torch-dropout":
                        out = F.dropout(x, p, training=True)
                        keep_frac = torch.count_nonzero(out).item() / n
                        del out
                    else:
                        for _, f in phases:
                            f()
                        keep_frac = torch.count_nonzero(y).item() / n if name != "peer:copy" else 1.0
                        if name != "peer:copy":
                            # the kept elements must equal x / (1 - p)
                            m = min(n, 1 << 22)
                            ys, xs = y[:m].float(), x[:m].float()
                            kept = ys != 0
                            err = ((ys[kept] - xs[kept] * scale).abs() / (xs[kept].abs() * scale + 1e-30)).max().item() \
                                if kept.any() else 0.0
                            info = dict(info, max_rel_err_kept=err)
                    st, ph = self.measure(phases)
                except Exception as e:
                    self.report.add_skipped(axes, f"{type(e).__name__}: {e}", variant=name)
                    self.clear()
                    continue
                t = st["median"]
                if name == "peer:copy":
                    copy_t = t
                derived = {"gb_s": moved / t / 1e9, "xy_gb_s": 2 * data / t / 1e9}
                if copy_t:
                    derived["pct_of_copy"] = derived["gb_s"] / (2 * data / copy_t / 1e9) * 100
                    derived["pct_of_copy_time"] = copy_t / t * 100
                if name == "peer:triton-mask":
                    derived["apply_gb_s"] = (2 * data + n) / ph[1][1]["median"] / 1e9
                extra = dict(block="dropout", data_bytes=data, bytes_moved=moved, extra_memory_bytes=extra_mem,
                             keep_effective=keep_frac, scale=scale, **info)
                variants.append(make_variant(name, st, ph, derived, extra))
                self.log(f"peers:   {name}: {t * 1e6:.1f} us, {derived['xy_gb_s']:.0f} GB/s (x+y)")
            keep_holder.clear()
            del x, y
            self.clear()
            if variants:
                self.report.add_point(axes, wl, variants)

    def add_block_point(self, axes, wl, variants):
        """A point of the blocks compared with dropbench's run (e2e, train): derived.winner, t_best and t_<variant>."""
        if not variants:
            return
        best = min(variants, key=lambda x: x["stats"]["median"])
        derived = {"winner": best["name"], "t_best": best["stats"]["median"]}
        for v in variants:
            derived["t_" + v["name"][len("peer:"):]] = v["stats"]["median"]
        self.report.add_point(axes, wl, variants, derived)

    # -- end-to-end block -----------------------------------------------------------------------------
    def e2e_block(self, points):
        from torch.nn.attention import sdpa_kernel
        for axes, wl in points:
            self.log(f"peers: e2e {axes}")
            hq, hkv = wl["q_heads"], wl["kv_heads"]
            p = wl["dropout_p"]
            try:
                gemm, m, n, k, info = self.gemm_setup(wl, wl["dtype"])
            except Exception as e:
                self.report.add_skipped(axes, f"GEMM operands: {type(e).__name__}: {e}")
                continue
            variants = []
            for bname, backend in self.backends()[:2]:
                name = f"peer:e2e-{bname}"
                try:
                    y0 = gemm()
                    q, kk, vv = self.qkv_views(y0, wl)
                    mode, errors = self.find_mode(backend, q, kk, vv, wl, p)
                    del q, kk, vv, y0
                    if mode is None:
                        self.report.add_skipped(axes, " | ".join(errors), variant=name)
                        continue
                    gqa, layout = mode
                    state = {}

                    def ph_gemm():
                        state["y"] = gemm()

                    def ph_attn(gqa=gqa, layout=layout):
                        q, kk, vv = self.qkv_views(state["y"], wl)
                        # expansion / copies, if the backend needs them, are inside the timed region here
                        return self.sdpa_call(q, kk, vv, wl, p, gqa, layout)

                    def one():
                        with sdpa_kernel(backend):
                            ph_gemm()
                            return ph_attn()

                    with sdpa_kernel(backend):
                        st, ph = self.measure([("gemm", ph_gemm), ("attention", ph_attn)])
                    kern = self.kernels_of(one)
                    state.clear()
                except Exception as e:
                    self.report.add_skipped(axes, f"{type(e).__name__}: {e}", variant=name)
                    self.clear()
                    continue
                copies = self.copy_kernels(kern)
                extra = {"block": "e2e", "gemm": info["op"], "gemm_dtype": wl["dtype"], "m": m, "n": n, "k": k,
                         "attention": f"SDPA {bname}, dropout_p={p}, is_causal={wl['causal']}",
                         "gqa": GQA_TIMED[gqa],
                         "layout": "Q/K/V are strided views of the GEMM output (no copy by this script)"
                         if layout == "views" else ".contiguous() copies of the views INSIDE the timed region",
                         "kernels": kern, "copy_kernels": copies}
                if errors:
                    extra["refused_first"] = errors
                derived = {"gemm_share": ph[0][1]["median"] / st["median"] if st["median"] else None}
                variants.append(make_variant(name, st, ph, derived, extra))
                self.log(f"peers:   {name}: {st['median'] * 1e6:.1f} us (gemm {ph[0][1]['median'] * 1e6:.1f} + "
                         f"attention {ph[1][1]['median'] * 1e6:.1f}; {gqa}, {layout}; copies: {copies})")
            del gemm
            self.clear()
            self.add_block_point(axes, wl, variants)


    # -- training step --------------------------------------------------------------------------------
    def train_operands(self, wl):
        """The step's leaves and fixed dY: X [B*SQ, E], W_qkv [(Hq+2Hkv)*dH, E], W_out [E, Hq*dH] (bf16, requiring
        grad) and dY [B*SQ, E]; for fp8 also the e4m3 copies of X and the weights, made here (untimed): dropbench's
        step, too, takes X and the weights in e4m3 and times only their transposes."""
        torch = self.torch
        m, e = wl["batch"] * wl["sq"], wl["embed"]
        hq, hkv, d = wl["q_heads"], wl["kv_heads"], wl["head_dim"]
        n = (hq + 2 * hkv) * d

        def uniform(*shape):  # real values in [-1, 1), as gemm_setup's
            return (torch.rand(*shape, device=self.dev, generator=self.gen, dtype=torch.float32) * 2 - 1)

        ops = {"x": uniform(m, e).to(torch.bfloat16).requires_grad_(),
               "w_qkv": uniform(n, e).to(torch.bfloat16).requires_grad_(),
               "w_out": uniform(e, hq * d).to(torch.bfloat16).requires_grad_(),
               "dy": uniform(m, e).to(torch.bfloat16)}
        if wl["dtype"] == "fp8":
            f32 = torch.float32
            # Per-tensor scales (dequantisation factors, _scaled_mm's scale_a / scale_b): amax 300 for X, 200 for
            # the weights as gemm_setup; unit scales for O and the gradients, as dropbench's casts.
            ops["sx"] = torch.tensor(1 / 300, device=self.dev, dtype=f32)
            ops["sw"] = torch.tensor(1 / 200, device=self.dev, dtype=f32)
            ops["one"] = torch.tensor(1.0, device=self.dev, dtype=f32)
            with torch.no_grad():
                ops["xq"] = (ops["x"].float() / ops["sx"]).to(torch.float8_e4m3fn)
                ops["w_qkv_q"] = (ops["w_qkv"].float() / ops["sw"]).to(torch.float8_e4m3fn)
                ops["w_out_q"] = (ops["w_out"].float() / ops["sw"]).to(torch.float8_e4m3fn)
        return ops, m, n, e

    def fp8_linear(self):
        """A torch.autograd.Function for Y = A W^T in fp8 as Transformer Engine computes it (PyTorch has no autograd
        for torch._scaled_mm): forward _scaled_mm(A e4m3, W e4m3 as W.t(), fast accumulation), A cast to e4m3 here
        when no e4m3 copy is given (the out-projection's O, unit scale), the fp8 operands saved; backward: dY cast
        to e5m2 (unit scale), the transposed fp8 copies that cuBLASLt's TN-only fp8 GEMMs need made with
        .t().contiguous() (TE's cast-transpose), dA = _scaled_mm(dY e5m2, (W^T e4m3).t()) and dW = _scaled_mm(dY^T e5m2, (A^T e4m3).t()),
        without fast accumulation (TE's split accumulator), bf16 out."""
        if getattr(self, "_fp8_linear", None) is not None:
            return self._fp8_linear
        torch = self.torch
        e4m3, e5m2, bf16 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16

        class Fp8Linear(torch.autograd.Function):
            # O and the gradients have unit scales (sa = sg = 1 where the cast happens here), so each cast is one
            # .to() kernel, as TE's fused scale-and-cast is one pass.
            @staticmethod
            def forward(ctx, a, w, aq, wq, sa, sw, sg):
                if aq is None:
                    aq = a.to(e4m3)
                y = torch._scaled_mm(aq, wq.t(), scale_a=sa, scale_b=sw, out_dtype=bf16, use_fast_accum=True)
                ctx.save_for_backward(aq, wq, sa, sw, sg)
                return y

            @staticmethod
            def backward(ctx, dy):
                aq, wq, sa, sw, sg = ctx.saved_tensors
                dyq = dy.to(e5m2)
                dyq_t = dyq.t().contiguous()  # dY^T e5m2 [N, M]
                wq_t = wq.t().contiguous()    # W^T e4m3 [K, N]
                aq_t = aq.t().contiguous()    # A^T e4m3 [K, M]
                da = torch._scaled_mm(dyq, wq_t.t(), scale_a=sg, scale_b=sw, out_dtype=bf16, use_fast_accum=False)
                dw = torch._scaled_mm(dyq_t, aq_t.t(), scale_a=sg, scale_b=sa, out_dtype=bf16, use_fast_accum=False)
                return da, dw, None, None, None, None, None

        self._fp8_linear = Fp8Linear
        return Fp8Linear

    def train_forward(self, ops, wl, p, gqa, layout):
        """The block's forward as a PyTorch user writes it: QKV GEMM, split into Q/K/V views (reshape + transpose),
        SDPA with dropout, output projection. Returns Y [B*SQ, E]."""
        torch = self.torch
        b, s, hq, hkv, d = wl["batch"], wl["sq"], wl["q_heads"], wl["kv_heads"], wl["head_dim"]
        if wl["dtype"] == "fp8":
            lin = self.fp8_linear()
            y = lin.apply(ops["x"], ops["w_qkv"], ops["xq"], ops["w_qkv_q"], ops["sx"], ops["sw"], ops["one"])
        else:
            y = torch.matmul(ops["x"], ops["w_qkv"].t())
        q, k, v = y.split([hq * d, hkv * d, hkv * d], dim=1)
        q = q.view(b, s, hq, d).transpose(1, 2)
        k = k.view(b, s, hkv, d).transpose(1, 2)
        v = v.view(b, s, hkv, d).transpose(1, 2)
        o = self.sdpa_call(q, k, v, wl, p, gqa, layout)  # expansion / copies, if any, inside the timed region
        o = o.transpose(1, 2).reshape(b * s, hq * d)
        if wl["dtype"] == "fp8":
            return lin.apply(o, ops["w_out"], None, ops["w_out_q"], ops["one"], ops["sw"], ops["one"])
        return torch.matmul(o, ops["w_out"].t())

    def train_backward(self, y, ops):
        """The step's backward from the fixed dY: the gradients of X, W_qkv and W_out."""
        return self.torch.autograd.grad(y, [ops["x"], ops["w_qkv"], ops["w_out"]], grad_outputs=ops["dy"])

    def train_find_mode(self, backend, ops, wl, p):
        """The first (gqa, layout) with which the backend runs the whole step (forward and backward), and the
        refusals met on the way."""
        return self.first_mode(backend, wl,
                               lambda gqa, layout: self.train_backward(self.train_forward(ops, wl, p, gqa, layout), ops))

    def train_block(self, points):
        """One sample = one training step of the block: phase fwd (QKV GEMM, SDPA with dropout, output projection)
        then phase bwd (torch.autograd.grad of the output w.r.t. X, W_qkv and W_out, given a fixed dY)."""
        torch = self.torch
        from torch.nn.attention import sdpa_kernel
        for axes, wl in points:
            self.log(f"peers: train {axes}")
            p = wl["dropout_p"]
            try:
                ops, m, n, e = self.train_operands(wl)
            except Exception as ex:
                self.report.add_skipped(axes, f"operands: {type(ex).__name__}: {ex}")
                self.clear()
                continue
            fp8 = wl["dtype"] == "fp8"
            gemm_op = ("torch._scaled_mm through a torch.autograd.Function (TE's recipe: e4m3 forward operands, e5m2 "
                       "gradients, per-tensor scales, fast accumulation in the forward only)" if fp8 else
                       "torch.matmul (bf16) with autograd")
            variants = []
            backends = dict(self.backends())
            for bname in ("cudnn", "flash"):
                backend, name, state = backends[bname], f"peer:train-{bname}", {}
                try:
                    mode, errors = self.train_find_mode(backend, ops, wl, p)
                    if mode is None:
                        self.report.add_skipped(axes, " | ".join(errors), variant=name)
                        self.clear()
                        continue
                    gqa, layout = mode

                    def ph_fwd(gqa=gqa, layout=layout):
                        state.pop("grads", None)
                        state["y"] = self.train_forward(ops, wl, p, gqa, layout)

                    def ph_bwd():
                        state["grads"] = self.train_backward(state.pop("y"), ops)

                    def one(backend=backend):
                        with sdpa_kernel(backend):
                            ph_fwd()
                            ph_bwd()

                    with sdpa_kernel(backend):
                        st, ph = self.measure([("fwd", ph_fwd), ("bwd", ph_bwd)])
                    state.clear()
                    kern = self.kernels_of(one)
                    state.clear()
                    # Peak memory of one step above what is allocated before it (operands, dY).
                    self.clear()
                    base = torch.cuda.memory_allocated(self.dev)
                    torch.cuda.reset_peak_memory_stats(self.dev)
                    one()
                    torch.cuda.synchronize()
                    peak = torch.cuda.max_memory_allocated(self.dev) - base
                    state.clear()
                except Exception as ex:
                    self.report.add_skipped(axes, f"{type(ex).__name__}: {ex}", variant=name)
                    state.clear()
                    self.clear()
                    continue
                copies = self.copy_kernels(kern)
                extra = {"block": "train", "backend": bname, "gemm": gemm_op, "gemm_dtype": wl["dtype"],
                         "m": m, "n_qkv": n, "embed": e,
                         "attention": f"SDPA {bname}, dropout_p={p}, is_causal={wl['causal']}, forward and backward",
                         "backward": "torch.autograd.grad(Y, [X, W_qkv, W_out], grad_outputs=dY): dX and dW of both "
                                     "GEMMs and the attention backward",
                         "gqa": GQA_TIMED[gqa],
                         "layout": "Q/K/V are views of the QKV GEMM output (split + view + transpose, no copy by "
                                   "this script)" if layout == "views"
                         else ".contiguous() copies of the views INSIDE the timed region",
                         "peak_memory_bytes": peak,
                         "peak_memory": "torch.cuda.max_memory_allocated over one step less what was allocated "
                                        "before it (the leaves, dY and the fp8 copies)",
                         "kernels": kern, "copy_kernels": copies}
                if fp8:
                    extra["fp8_inputs"] = ("X, W_qkv and W_out cast to e4m3 before the step (untimed, as dropbench's "
                                           "step takes them in e4m3); O cast in the forward, dY cast and every "
                                           "transposed fp8 copy (.t().contiguous()) made in the timed backward")
                if errors:
                    extra["refused_first"] = errors
                t_f, t_b = ph[0][1]["median"], ph[1][1]["median"]
                derived = {"t_step": st["median"], "t_fwd": t_f, "t_bwd": t_b,
                           "fwd_share": t_f / st["median"] if st["median"] else None,
                           "peak_memory_gib": peak / 2 ** 30}
                variants.append(make_variant(name, st, ph, derived, extra))
                self.log(f"peers:   {name}: {st['median'] * 1e6:.1f} us (fwd {t_f * 1e6:.1f} + bwd {t_b * 1e6:.1f}; "
                         f"{gqa}, {layout}; peak {peak / 2 ** 30:.2f} GiB; copies: {copies})")
            ops.clear()
            self.clear()
            self.add_block_point(axes, wl, variants)


def device_context(torch, args, nvml):
    props = torch.cuda.get_device_properties(args.device)
    dev = {"index": args.device, "name": props.name, "cc": f"{props.major}.{props.minor}",
           "sms": props.multi_processor_count, "total_mem_bytes": props.total_memory}
    for attr, key in (("L2_cache_size", "l2_bytes"),):
        if hasattr(props, attr):
            dev[key] = getattr(props, attr)
    info = nvml.info()
    for key in ("max_sm_clock_mhz", "max_mem_clock_mhz", "power_limit_w"):
        if key in info:
            dev[key] = info[key]
    ctx = {"device": dev, "driver_version": info.get("driver_version"), "runtime_version": torch.version.cuda,
           "torch_version": torch.__version__}
    try:
        ctx["cudnn_version"] = torch.backends.cudnn.version()
    except Exception as e:
        ctx["cudnn_version"] = f"unknown ({type(e).__name__})"

    try:
        import triton
        ctx["triton_version"] = triton.__version__
    except Exception:
        ctx["triton_version"] = None
    ctx["clocks"] = {"sm_mhz_at_start": nvml.sm_mhz()}
    return ctx



def run_gpu(args, cfg, blocks, points, source):
    try:
        import torch
    except Exception as e:
        print(f"peers: no CUDA device found: PyTorch is not importable ({type(e).__name__}: {e}); the peers need a "
              "CUDA GPU with PyTorch and Triton", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() <= args.device:
        print(f"peers: no CUDA device found: torch {torch.__version__} sees {torch.cuda.device_count()} device(s)",
              file=sys.stderr)
        return 2
    torch.cuda.set_device(args.device)
    nvml = Nvml(args.device)
    ctx = base_context(args.argv, args.git_sha)
    ctx.update(device_context(torch, args, nvml))
    ctx["timing"] = ("CUDA event pair around every sample; warm-up; samples until >= min_samples and >= min_time s; "
                     "median; SM clock from NVML every 2 ms")
    ctx["min_time_s"] = args.min_time if args.min_time is not None else cfg["measure"]["min_time"]
    ctx["points_from"] = source
    report = Report(args.output, ctx, cfg)
    g = Gpu(args, cfg, report)
    torch.backends.cuda.matmul.allow_tf32 = False
    for block in blocks:
        # The training step needs autograd; every other block runs under inference mode.
        with contextlib.nullcontext() if block == "train" else torch.inference_mode():
            getattr(g, f"{block}_block")(points[block])
    report.set_summary(final_summary(report, nvml.sm_mhz()))
    table = md_table(dr.Report.from_doc(report.doc, args.output or "<peers>"))
    print(table)
    if args.md:
        Path(args.md).write_text(f"# peers: {cfg['name']} on {ctx['device']['name']}\n\n"
                                 f"torch {ctx['torch_version']}, triton {ctx['triton_version']}, cuDNN "
                                 f"{ctx['cudnn_version']}, {ctx['date_utc']}, git {ctx['git_sha']}; "
                                 f"min_time {ctx['min_time_s']} s\n\n{table}\n")
    return 0


def final_summary(report, sm_mhz):
    rep = dr.Report.from_doc(report.doc, report.path or "<peers>")
    summary = {"sm_mhz_at_end": sm_mhz, "skipped_variants": len(rep.skipped)}
    for block in ("e2e", "train"):
        pts = [p for p in rep.points if p.variants and p.variants[0].extra.get("block") == block]
        if pts:
            summary[f"{block}_winners"] = [{"axes": p.axes, "winner": p.derived["winner"], "t": p.derived["t_best"]}
                                           for p in pts]
    return summary


# ---------------------------------------------------------------------------------------------------------
# Self-test (CPU only, no torch): the points from dropbench's dry run, the report writer, --versus, compare
# ---------------------------------------------------------------------------------------------------------

FAKE_DROPBENCH = """#!{python}
# A stand-in dropbench for peers' self-test: PEERS_FAKE=fail refuses the input, PEERS_FAKE=lacks writes a
# report whose workload lacks `elements`.
import json, os, sys
if os.environ.get("PEERS_FAKE") == "fail":
    print("dropbench: warning: a first line", file=sys.stderr)
    print("dropbench: error: config: workload.sq: the last line is the message", file=sys.stderr)
    sys.exit(2)
doc = {{"schema": "dropbench.report", "schema_version": 1, "command": sys.argv[1], "context": {{}},
       "config": {{"name": "fake", "workload": {{"sq": 1, "seed": "0x1", "dropout_dtype": "bf16"}}, "sweep": {{"elements": [1]}},
                  "measure": {{"min_samples": 1, "max_samples": 1, "min_time": 0, "timeout": 1, "warmup": 0}}}},
       "summary": {{}}, "skipped": [],
       "points": [{{"index": 0, "axes": {{}}, "workload": {{"sq": 1, "dropout_dtype": "bf16", "dropout_p": 0.1}},
                   "variants": [], "derived": {{}}}}]}}
open(sys.argv[sys.argv.index("-o") + 1], "w").write(json.dumps(doc))
"""


def self_test(args):
    t0 = time.time()
    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    def refused(argv, needle, blocks=BLOCKS):
        nonlocal checks
        try:
            plan(parse_args(argv), list(blocks))
        except UsageError as e:
            if needle not in str(e) or "\n" in str(e):
                raise AssertionError(f"{argv}: message {str(e)!r} lacks {needle!r} or is not one line")
            checks += 1
            return
        raise AssertionError(f"{argv} must be refused")

    binary = find_dropbench(args.dropbench)  # UsageError (exit 2) when there is none: the points need it
    db = ["--dropbench", binary]
    cfgfile = str(REPO / "configs/llama3-70b.json")

    # 1. argument parsing: peers' options, and the config part handed to dropbench as is
    a = parse_args(["--config", cfgfile, "--sq", "8192", "--set", "measure.min_samples=4", "--only", "attention,e2e",
                    "--min-time", "0.01", "--causal", "false,true"] + db)
    ok(a.only == "attention,e2e" and a.min_time == 0.01 and selected_blocks(a) == ["attention", "e2e"],
       "--only / --min-time")
    ok(dropbench_args(a) == ["--config", cfgfile, "--set", "measure.min_samples=4", "--set", "sweep.sq=8192",
                             "--set", "sweep.causal=false,true"], f"dropbench args: {dropbench_args(a)}")
    ok(selected_blocks(parse_args(["--only", "train"])) == ["train"]
       and selected_blocks(parse_args(["--only", " e2e, train "])) == ["e2e", "train"]
       and selected_blocks(parse_args([])) == list(BLOCKS) and "train" in BLOCKS, "--only train")
    for bad, needle in ((["--only", "attention,flops"], "'flops' is not a block"), (["--min-time", "-1"], ">= 0"),
                        (["--only", "training"], "'training' is not a block (allowed: attention, gemm, dropout, "
                                                  "e2e, train)")):
        try:
            selected_blocks(parse_args(bad))
            ok(False, f"{bad} must be rejected")
        except UsageError as e:
            ok(needle in str(e), f"{bad}: {e}")

    # 2. the points, from `dropbench COMMAND --dry-run` (README's example: llama3-70b at SQ 8192)
    cfg, pts, src = plan(parse_args(["--config", cfgfile, "--sq", "8192", "--set", "measure.min_samples=4"] + db),
                         list(BLOCKS))
    ok(cfg["name"] == "llama3-70b" and cfg["sweep"] == {"sq": [8192], "rounds": [3, 5, 7, 10]}
       and cfg["measure"]["min_samples"] == 4 and cfg["workload"]["q_heads"] == 64 and seed_of(cfg) == 0x5eed5eed,
       f"resolved config from dropbench: {cfg['sweep']}, {cfg['measure']}")
    ok([ax for ax, _ in pts["attention"]] == [{"sq": 8192, "causal": True}], f"attention: {pts['attention']}")
    ok([ax for ax, _ in pts["gemm"]] == [{"sq": 8192, "embed": 8192, "dtype": "fp8"},
                                          {"sq": 8192, "embed": 8192, "dtype": "bf16"}], "gemm axes")
    ok([ax for ax, _ in pts["dropout"]] == [{"elements": 2 ** 30, "dropout_dtype": "bf16"}], "dropout axes")
    e2e_wl = pts["e2e"][0][1]
    ok([ax for ax, _ in pts["e2e"]] == [{"sq": 8192}] and e2e_wl["embed"] == 8192 and e2e_wl["rounds"] == 7
       and e2e_wl["q_heads"] == 64 and e2e_wl["causal"] is True, "e2e: rounds dropped, workload = config's rounds")
    tr_wl = pts["train"][0][1]
    ok([ax for ax, _ in pts["train"]] == [{"sq": 8192}] and tr_wl["pass"] == "train" and tr_wl["rounds"] == 7
       and tr_wl["embed"] == 8192 and tr_wl["kv_heads"] == 8 and tr_wl["dtype"] == "fp8"
       and e2e_wl.get("pass", "fwd") == "fwd", f"train: pass train from the dry run, rounds dropped: {pts['train']}")
    ok(src["dry_runs"]["train"][1] == "run" and src["dry_runs"]["train"][-3:] == ["--set", "workload.pass=train",
                                                                                   "--dry-run"]
       and "workload.pass=train" not in src["dry_runs"]["e2e"], f"train's dry run: {src['dry_runs']['train']}")
    ok(all(wl["sq"] == 8192 and wl["seed"] == "0x5eed5eed" for b in BLOCKS for _, wl in pts[b]), "workloads")
    ok("sweep.causal=[true]" in src["dry_runs"]["attention"] and "sweep.embed=[8192]" in src["dry_runs"]["gemm"]
       and src["dry_runs"]["e2e"][1] == "run" and src["binary"] == binary, f"pinned axes: {src['dry_runs']}")
    # a swept axis is the user's, not pinned; coinciding points (threshold_bits) are timed once
    _, p2, _ = plan(parse_args(["--config", cfgfile, "--causal", "false,true", "--embed", "4096,8192", "--set",
                                "sweep.dropout_dtype=[bf16,fp32]", "--set", "sweep.threshold_bits=[8,16]",
                                "--sq", "pow2:4K:8K"] + db), list(BLOCKS))
    ok([(ax["sq"], ax["causal"]) for ax, _ in p2["attention"]] == [(4096, False), (4096, True), (8192, False),
                                                                   (8192, True)], f"attention: {p2['attention']}")
    ok(len(p2["gemm"]) == 8 and [ax["dropout_dtype"] for ax, _ in p2["dropout"]] == ["bf16", "fp32"]
       and [ax for ax, _ in p2["e2e"]] == [{"embed": e, "sq": s, "causal": c} for e in (4096, 8192)
                                           for s in (4096, 8192) for c in (False, True)], f"user sweeps: {p2}")
    ok([ax for ax, _ in p2["train"]] == [ax for ax, _ in p2["e2e"]]
       and all(wl["pass"] == "train" for _, wl in p2["train"]), f"train, user sweeps: {p2['train']}")
    # train alone: its dry run is the probe (the resolved config says pass train); --dtype sweeps the precision;
    # a run sweep of both passes gives e2e the forward points and train the training-step points
    c4, p4, s4 = plan(parse_args(["--config", cfgfile, "--sq", "8192", "--dtype", "bf16,fp8", "--only", "train"]
                                 + db), ["train"])
    ok(c4["workload"]["pass"] == "train" and sorted(ax["dtype"] for ax, _ in p4["train"]) == ["bf16", "fp8"]
       and all(ax["sq"] == 8192 and wl["dtype"] == ax["dtype"] for ax, wl in p4["train"]) and list(s4["dry_runs"]) == ["train"],
       f"train with --dtype: {p4}")
    _, p5, _ = plan(parse_args(["--config", cfgfile, "--sq", "8192", "--set", "sweep.pass=[fwd,train]"] + db),
                    ["e2e", "train"])
    ok([ax for ax, _ in p5["e2e"]] == [{"sq": 8192}] and p5["e2e"][0][1].get("pass", "fwd") == "fwd"
       and [ax for ax, _ in p5["train"]] == [{"sq": 8192}] and p5["train"][0][1]["pass"] == "train",
       f"sweep.pass splits by block: {p5}")
    c3, p3, _ = plan(parse_args(["--min-samples", "3000"] + db), ["dropout"])
    ok(c3["name"] == "quick" and c3["measure"]["min_samples"] == 3000 and c3["measure"]["max_samples"] == 3000
       and [ax for ax, _ in p3["dropout"]] == [{"elements": 2 ** 26, "dropout_dtype": "bf16"}],
       f"--min-samples lifts max_samples; the built-in config: {c3['measure']}")
    # bad input: dropbench's own one-line message
    for bad, needle in ((["--set", "workload.sqq=1"], "workload.sqq: unknown key"),
                        (["--set", "workload.kv_heads=5"], "does not divide"), (["--dtype", "fp16"], "\"fp16\""),
                        (["--set", "sweep.seed=1"], "not sweepable"), (["--sq", "0"], "sweep.sq: 0 is out of range"),
                        (["--config", "/nonexistent.json"], "cannot open")):
        refused(["--config", cfgfile] + bad + db, needle)
    refused(["--config", cfgfile, "--set", "sweep.layout=[tile]"] + db, "--set sweep.layout: no selected block's")
    refused(["--config", cfgfile, "--embed", "4096"] + db, "--set sweep.embed: no selected block's",
            blocks=["attention", "dropout"])
    refused(["--dropbench", "/nonexistent/dropbench"], "--dropbench /nonexistent/dropbench: not an executable")
    # AXES against the binary: each command takes a one-value sweep of every axis listed for it, and refuses
    # (exit 2, one line) an axis that only other commands sweep; so command_args drops what dropbench refuses.
    wl0 = c3["workload"]
    for cmd, axes in AXES.items():
        sets = [x for ax in axes for x in ("--set", f"sweep.{ax}={json.dumps([wl0[ax]])}")]
        rep = dry_run(binary, cmd, sets)
        ok(all(ax in rep.config["sweep"] for ax in axes), f"{cmd} sweeps {axes}")
        other = sorted(ALL_AXES - set(axes))[0]
        r = subprocess.run([binary, cmd, "--dry-run", "-q", "--set", f"sweep.{other}={json.dumps([wl0[other]])}"],
                           capture_output=True, text=True, timeout=60)
        ok(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "does not sweep" in r.stderr,
           f"{cmd} refuses sweep.{other}: {r.returncode} {r.stderr!r}")
        ok(command_args(["--set", f"sweep.{other}=[1]", "--set", "workload.sq=1"], cmd) == ["--set", "workload.sq=1"],
           f"command_args drops sweep.{other} for {cmd}")
    with tempfile.TemporaryDirectory() as td:
        fake = Path(td) / "dropbench"
        fake.write_text(FAKE_DROPBENCH.format(python=sys.executable))
        fake.chmod(0o755)
        old = os.environ.get("PEERS_FAKE")
        try:
            os.environ["PEERS_FAKE"] = "fail"
            refused(["--dropbench", str(fake)], "dropbench attention: config: workload.sq: the last line is")
            os.environ["PEERS_FAKE"] = "lacks"
            refused(["--dropbench", str(fake)], "points[0].workload lacks elements", blocks=["dropout"])
        finally:
            os.environ.pop("PEERS_FAKE") if old is None else os.environ.update(PEERS_FAKE=old)

    # 3. the report writer, on synthetic timings through the same helpers as the GPU mode
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        out = td / "peers.json"
        ctx = dict(base_context(["--self-test"], "selftest"), points_from=src)
        rep = Report(str(out), ctx, cfg)
        ok(json.loads(out.read_text())["points"] == [], "empty report written at start")
        for block in BLOCKS:
            for axes, wl in pts[block]:
                vs = []
                for i, name in enumerate((f"peer:{block}-a", f"peer:{block}-b")):
                    s = [1e-3 * (1 + i) * (1 + 0.01 * j) for j in range(10)]
                    st = stats_of(s, 1500.0)
                    vs.append(make_variant(name, st, [("x", stats_of(s[:5])), ("y", stats_of(s[5:]))],
                                           {"tflops": 1.0, "nan": float("nan")}, {"block": block}))
                derived = {"winner": vs[0]["name"], "t_best": vs[0]["stats"]["median"]}
                rep.add_point(axes, wl, vs, derived)
        rep.add_skipped({"sq": 8192, "causal": True}, "RuntimeError: No available kernel.\n  Aborting.",
                        variant="peer:sdpa-efficient:dropout")
        rep.set_summary(final_summary(rep, None))
        doc = json.loads(out.read_text())
        ok(out.read_text().endswith("}\n") and not list(td.glob("*.tmp.*")), "atomic write, trailing newline")
        ok(dr.layout_problems(doc) == [], f"report layout: {dr.layout_problems(doc)}")
        back = dr.load(out)
        ok(back.command == "peers" and back.config == cfg and back.context["points_from"]["dry_runs"]
           and len(back.points) == 6 and all(v.peer and v.name.startswith("peer:") for _, v in back.each_variant())
           and not list(back.each_variant(peer=False)), "read back: config, context, peer variants")
        ok(math.isnan(back.points[0].variants[0].derived.get("nan") or math.nan)
           and doc["points"][0]["variants"][0]["derived"]["nan"] is None, "NaN written as null")
        ok(back.skipped[0].reason == "RuntimeError: No available kernel. Aborting."
           and back.skipped[0].variant == "peer:sdpa-efficient:dropout", "one-line reason, variant")
        w = back.summary["e2e_winners"]
        ok(len(w) == 1 and w[0]["axes"] == {"sq": 8192} and w[0]["winner"] == "peer:e2e-a"
           and abs(w[0]["t"] - 1.045e-3) < 1e-12 and back.summary["skipped_variants"] == 1, f"summary: {back.summary}")
        w = back.summary["train_winners"]
        ok(len(w) == 1 and w[0]["axes"] == {"sq": 8192} and w[0]["winner"] == "peer:train-a", f"summary: {w}")
        ok("peer:gemm-a" in md_table(back) and "peer:e2e-b" in brief([out]), "markdown table, --brief")
        st = back.points[0].variants[0].stats
        ok(st.samples == 10 and abs(st.median - 1.045e-3) < 1e-12 and st.mean_clock_mhz == 1500.0, "stats")

        # 4. --versus on a synthetic `dropbench run` report and a peers report
        run = Report(str(td / "run.json"), {"tool": "dropbench"}, {"name": "syn"})
        run.doc["command"] = "run"
        for r, base in ((3, 4.6), (5, 4.8), (7, 5.0)):
            run.add_point({"sq": 8192, "rounds": r}, {"sq": 8192, "rounds": r},
                          [dict(make_variant(pn, stats_of([t * 1e-3])), peer=False)
                           for pn, t in (("baseline", base), ("fused", 4.9), ("alone:gemm", 0.5))])
        e2e = Report(str(td / "e2e.json"), {"tool": "scripts/peers.py"}, {"name": "syn"})
        e2e.add_point({"sq": 8192}, {"sq": 8192}, [
            make_variant("peer:e2e-flash", stats_of([6e-3]), [("gemm", stats_of([1e-3])),
                                                              ("attention", stats_of([5e-3]))]),
            make_variant("peer:e2e-cudnn", stats_of([5.5e-3]), [("gemm", stats_of([1e-3])),
                                                                ("attention", stats_of([4.5e-3]))])])
        md = versus_markdown([(td / "run.json", td / "e2e.json")])
        ok("| syn | fwd | sq=8192 | fused 4900 | baseline R3 4600 | e2e-cudnn 5500 | gemm 1000 + attention 4500 | "
           "e2e-flash 6000 | 1.12× | 1.20× |" in md and "training step" not in md, f"versus table: {md}")
        # Points that differ in another axis (embed) are matched on it too, not on sq alone.
        run2 = Report(str(td / "run2.json"), {"tool": "dropbench"}, {"name": "syn2"})
        run2.doc["command"] = "run"
        for e, t in ((4096, 2.0), (16384, 3.0)):
            run2.add_point({"embed": e, "sq": 8192, "rounds": 7}, {"embed": e, "sq": 8192, "rounds": 7},
                           [dict(make_variant("baseline", stats_of([t * 1e-3])), peer=False)])
        e2e2 = Report(str(td / "e2e2.json"), {"tool": "scripts/peers.py"}, {"name": "syn2"})
        for e, t in ((4096, 4.0), (16384, 6.0)):
            e2e2.add_point({"embed": e, "sq": 8192}, {"embed": e, "sq": 8192},
                           [make_variant("peer:e2e-cudnn", stats_of([t * 1e-3]), [("gemm", stats_of([1e-3]))])])
        md2 = versus_markdown([(td / "run2.json", td / "e2e2.json")])
        ok("| syn2 | fwd | embed=4096 sq=8192 | baseline 2000 |" in md2
           and "| syn2 | fwd | embed=16384 sq=8192 | baseline 3000 |" in md2 and md2.count("2.00×") == 4,
           f"versus matches embed: {md2}")
        # The training step: a `dropbench run` report at pass train (variants: the strategies; pieces alone:* /
        # overlap:* and an unmeasured fused-write are not strategies to compare) against peers' train points,
        # matched on the pass and on dtype (an axis of the peers' points, a workload field of the run's). The run
        # report also holds a forward point, which only the peers' e2e point may meet.
        def run_variant(name, ms):
            return dict(make_variant(name, stats_of([ms * 1e-3] if ms else [])), peer=False)

        for dt, stored7 in (("bf16", 11.5), ("fp8", 11.0)):
            trn = Report(str(td / f"train_{dt}.json"), {"tool": "dropbench"}, {"name": "llama3-70b"})
            trn.doc["command"] = "run"
            for r, fused, stored in ((3, 11.9, stored7 - 0.5), (7, 12.0, stored7)):
                wl = {"sq": 8192, "rounds": r, "pass": "train", "dtype": dt}
                trn.add_point({"sq": 8192, "rounds": r}, wl, [
                    run_variant("fused", fused), run_variant("stored", stored), run_variant("regen-overlap", 11.8),
                    run_variant("fused-write", 0), run_variant("alone:gemm", 0.5), run_variant("overlap:fwd", 0.9)])
            trn.add_point({"sq": 8192, "rounds": 7, "pass": "fwd"}, {"sq": 8192, "rounds": 7, "dtype": dt},
                          [run_variant("baseline", 1.0)])
        ptr = Report(str(td / "peers_train.json"), {"tool": "scripts/peers.py"}, {"name": "llama3-70b"})
        for dt, cudnn, flash in (("bf16", 15.0, 16.0), ("fp8", 12.0, 13.0)):
            ptr.add_point({"sq": 8192, "dtype": dt}, {"sq": 8192, "dtype": dt, "pass": "train"}, [
                make_variant(f"peer:train-{b}", stats_of([t * 1e-3]),
                             [("fwd", stats_of([t / 3 * 1e-3])), ("bwd", stats_of([t * 2 / 3 * 1e-3]))],
                             {"t_step": t * 1e-3}, {"block": "train"})
                for b, t in (("cudnn", cudnn), ("flash", flash))])
        ptr.add_point({"sq": 8192}, {"sq": 8192, "dtype": "bf16"},
                      [make_variant("peer:e2e-cudnn", stats_of([5.5e-3]), [("gemm", stats_of([1e-3]))])])
        md3 = versus_markdown([(td / "train_bf16.json", td / "peers_train.json"),
                               (td / "train_fp8.json", td / "peers_train.json")])
        rows3 = [x for x in md3.splitlines() if x.startswith("| llama3-70b")]
        ok(rows3 == [
            "| llama3-70b | train | sq=8192 dtype=bf16 | stored 11500 | stored R3 11000 | train-cudnn 15000 | "
            "fwd 5000 + bwd 10000 | train-flash 16000 | 1.30× | 1.36× |",
            "| llama3-70b | fwd | sq=8192 (bf16) | baseline 1000 | baseline R7 1000 | e2e-cudnn 5500 | gemm 1000 |  "
            "| 5.50× | 5.50× |",
            "| llama3-70b | train | sq=8192 dtype=fp8 | stored 11000 | stored R3 10500 | train-cudnn 12000 | "
            "fwd 4000 + bwd 8000 | train-flash 13000 | 1.09× | 1.14× |",
            "| llama3-70b | fwd | sq=8192 (bf16) | baseline 1000 | baseline R7 1000 | e2e-cudnn 5500 | gemm 1000 |  "
            "| 5.50× | 5.50× |"]
           and md3.splitlines()[-1] == "training step, peer / dropbench at Philox-7 >= 1.2×: 1 of 2 rows; not met: "
                                       "llama3-70b sq=8192 dtype=fp8 (1.09×)", f"versus, training step: {md3}")
        (td / "not_report.json").write_text("{\"rows\": []}")
        try:
            versus_markdown([(td / "run.json", td / "not_report.json")])
            ok(False, "--versus on a file that is not a report")
        except UsageError as e:
            ok("not_report.json: not a dropbench report" in str(e), str(e))

        # 5. dropbench compare reads the peers report
        r = subprocess.run([binary, "compare", str(out), str(out), "--format", "json"], capture_output=True,
                           text=True, timeout=60)
        ok(r.returncode == 0, f"dropbench compare exit {r.returncode}: {r.stderr.strip()}")
        cj = json.loads(r.stdout)
        rows = cj["comparisons"][0]["rows"]
        ok(len(rows) == sum(len(p.variants) for p in back.points) and all(x["verdict"] == "same" for x in rows)
           and cj["command"] == "peers", f"compare verdicts: {r.stdout[:400]}")
        r = subprocess.run([binary, "compare", str(out), str(out)], capture_output=True, text=True, timeout=60)
        ok(r.returncode == 0 and "peer:e2e-a" in r.stdout, "compare markdown")

        # 6. the command line end to end: --dry-run lists the points; without a GPU (CUDA_VISIBLE_DEVICES= hides
        # any) one line and exit 2; bad input one line and exit 2
        me = [sys.executable, str(Path(__file__).resolve())]
        r = subprocess.run(me + ["--config", cfgfile, "--sq", "8192", "--dry-run"] + db, capture_output=True,
                           text=True, timeout=120)
        ok(r.returncode == 0 and r.stdout.splitlines() == [
            'attention: {"sq": 8192, "causal": true}', 'gemm: {"sq": 8192, "embed": 8192, "dtype": "fp8"}',
            'gemm: {"sq": 8192, "embed": 8192, "dtype": "bf16"}',
            'dropout: {"elements": 1073741824, "dropout_dtype": "bf16"}', 'e2e: {"sq": 8192}',
            'train: {"sq": 8192}'],
           f"--dry-run: rc {r.returncode} {r.stdout!r} {r.stderr!r}")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        r = subprocess.run(me + ["--config", cfgfile, "--sq", "8192", "-o", str(td / "x.json"), "--quiet"] + db,
                           capture_output=True, text=True, env=env, timeout=300)
        ok(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
           and r.stderr.startswith("peers: no CUDA device found"), f"no-GPU path: rc {r.returncode}, {r.stderr!r}")
        r = subprocess.run(me + ["--set", "workload.sqq=1"] + db, capture_output=True, text=True, timeout=60)
        ok(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "sqq" in r.stderr
           and r.stderr.startswith("peers: dropbench attention: --set workload.sqq=1"), f"bad input: {r.stderr!r}")

        # 7. provenance: this script copied into an exported tree (cmake/source-sha.txt filled in) that lies
        # inside another git checkout reports the export's "<sha>-archive", not the enclosing checkout's sha
        if shutil.which("git"):
            outer = td / "outer"
            inner = outer / "inner"
            (inner / "scripts").mkdir(parents=True)
            (inner / "cmake").mkdir()
            (inner / "cmake" / "source-sha.txt").write_text("abc1234\n")
            for f in ("peers.py", "dropbench_report.py", "dbstats.py"):
                shutil.copy(Path(__file__).resolve().parent / f, inner / "scripts" / f)
            subprocess.run(["git", "init", "-q", str(outer)], check=True, timeout=30)
            probe = "import sys; sys.path.insert(0, 'scripts'); import peers; print(peers.git_sha())"
            r = subprocess.run([sys.executable, "-c", probe], cwd=inner, capture_output=True, text=True, timeout=60)
            ok(r.returncode == 0 and r.stdout.strip() == "abc1234-archive", f"archive sha: {r.stdout!r} {r.stderr!r}")
    # 8. where PyTorch is importable (the device machine; CPU suffices): the train block's step against an fp32
    # reference on small shapes
    try:
        import torch
    except Exception:
        torch = None
    if torch is not None:
        for what in train_step_check(torch):
            ok(what[1], what[0])
        step = "; the train block's step checked against fp32 on the CPU"
    else:
        step = "; the train block's step against fp32: not checked (no PyTorch here)"
    print(f"peers self-test: {checks} checks passed; points from {binary} --dry-run{step} ({time.time() - t0:.1f} s)")
    return 0


def train_step_check(torch):
    """[(what, passed)]: the train block's step (Gpu.train_operands / train_forward / train_backward, on the CPU
    with SDPA's default backend and no dropout) against the same step in fp32 with plain autograd, bf16 and fp8,
    GQA and MHA, causal and not, every (gqa, layout) the block may take; and the fp8 GEMM's autograd function
    against the products of its dequantised fp8 operands."""
    g = Gpu.__new__(Gpu)
    g.torch, g.dev = torch, torch.device("cpu")
    g.gen = torch.Generator().manual_seed(7)
    out = []

    def rel(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    for dtype in ("bf16", "fp8"):
        for hq, hkv, causal in ((4, 2, True), (4, 4, False)):
            wl = {"batch": 2, "sq": 64, "q_heads": hq, "kv_heads": hkv, "head_dim": 16, "embed": 64, "causal": causal,
                  "dropout_p": 0.0, "dtype": dtype}
            ops, _, _, _ = g.train_operands(wl)
            with torch.no_grad():  # smaller values: a softmax that is not one-hot, O within e4m3's range
                for k in ("x", "w_qkv", "w_out"):
                    ops[k].mul_(0.25)
                if dtype == "fp8":
                    ops["xq"] = (ops["x"].float() / ops["sx"]).to(e4m3)
                    ops["w_qkv_q"] = (ops["w_qkv"].float() / ops["sw"]).to(e4m3)
                    ops["w_out_q"] = (ops["w_out"].float() / ops["sw"]).to(e4m3)
            # the reference: fp32 operands (the fp8 ones dequantised), O rounded to e4m3 where the peer casts it
            if dtype == "fp8":
                x, wq, wo = (ops["xq"].float() * ops["sx"], ops["w_qkv_q"].float() * ops["sw"],
                             ops["w_out_q"].float() * ops["sw"])
            else:
                x, wq, wo = (ops[k].detach().float() for k in ("x", "w_qkv", "w_out"))
            x, wq, wo = (t.clone().requires_grad_() for t in (x, wq, wo))
            b, s, d = wl["batch"], wl["sq"], wl["head_dim"]
            q, k, v = (x @ wq.t()).split([hq * d, hkv * d, hkv * d], 1)
            q, k, v = (t.reshape(b, s, -1, d).transpose(1, 2) for t in (q, k, v))
            k, v = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
            att = (q @ k.transpose(-1, -2)) / d ** 0.5
            if causal:
                att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
            o = (att.softmax(-1) @ v).transpose(1, 2).reshape(b * s, hq * d)
            if dtype == "fp8":
                o = o + (o.detach().to(e4m3).float() - o.detach())
            y_ref = o @ wo.t()
            ref = torch.autograd.grad(y_ref, [x, wq, wo], grad_outputs=ops["dy"].float())
            tol = 0.02 if dtype == "bf16" else 0.15  # fp8: e5m2 gradients carry 2 mantissa bits
            for gqa, layout in g.sdpa_modes(wl):
                y = g.train_forward(ops, wl, 0.0, gqa, layout)
                grads = g.train_backward(y, ops)
                errs = [rel(y, y_ref)] + [rel(a, r) for a, r in zip(grads, ref)]
                out.append((f"train step {dtype} Hq {hq} Hkv {hkv} causal {causal} {gqa}/{layout}: relative errors of "
                            f"Y, dX, dW_qkv, dW_out {[round(e, 4) for e in errs]} (tolerance {tol})",
                            max(errs) < tol and all(t.dtype == torch.bfloat16 for t in grads)))
    lin = g.fp8_linear()
    a = (torch.rand(64, 96) * 2 - 1).bfloat16().requires_grad_()
    w = (torch.rand(48, 96) * 2 - 1).bfloat16().requires_grad_()
    sa, sw, one = torch.tensor(1 / 300), torch.tensor(1 / 200), torch.tensor(1.0)
    aq, wq = (a.detach().float() / sa).to(e4m3), (w.detach().float() / sw).to(e4m3)
    dy = (torch.rand(64, 48) * 2 - 1).bfloat16()
    for given in (True, False):
        y = lin.apply(a, w, aq if given else None, wq, sa if given else one, sw, one)
        af = aq.float() * sa if given else a.detach().to(e4m3).float()
        wf, dyf = wq.float() * sw, dy.to(e5m2).float()
        da, dw = torch.autograd.grad(y, [a, w], dy)
        errs = [rel(y, af @ wf.t()), rel(da, dyf @ wf), rel(dw, dyf.t() @ af)]
        out.append((f"fp8 GEMM function (A's e4m3 copy {'given' if given else 'cast in the forward'}): Y, dA, dW "
                    f"against the dequantised operands' products {[round(e, 4) for e in errs]}", max(errs) < 0.01))
    return out


# ---------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    ap = Parser(prog="scripts/peers.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a dropbench config (configs/*.json); default: dropbench's built-in quick config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to dropbench: workload.FIELD=, sweep.AXIS=, measure.FIELD= (repeatable)")
    for s in SHORTCUTS:
        ap.add_argument("--" + s.replace("_", "-"), dest="ax_" + s, metavar="V[,V...]",
                        help=f"shorthand for --set sweep.{s}=V[,V...]")
    ap.add_argument("--only", help="comma list of blocks: attention, gemm, dropout, e2e, train (default: all)")
    ap.add_argument("-o", "--output", help="report path (rewritten after every point)")
    ap.add_argument("--md", help="also write the markdown table here")
    ap.add_argument("--min-time", type=float, help="seconds of samples per measurement (default: measure.min_time)")
    ap.add_argument("--min-samples", type=int, help="= --set measure.min_samples=N (lifting max_samples to N)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--git-sha", help="context.git_sha (default: the sha as the build writes it: "
                                      "git rev-parse --short=12 HEAD, or cmake/source-sha.txt in an export)")
    ap.add_argument("--no-kernel-list", action="store_true", help="skip the torch.profiler kernel listing")
    ap.add_argument("--dry-run", action="store_true", help="print each block's points; no GPU")
    ap.add_argument("--self-test", action="store_true", help="CPU-only checks (no torch needed)")
    ap.add_argument("--dropbench", metavar="PATH",
                    help="the dropbench binary whose --dry-run gives the points (default: $DROPBENCH_BINARY, "
                    "else build/dropbench)")
    ap.add_argument("--versus", nargs=2, action="append", metavar=("RUN.json", "PEERS.json"),
                    help="markdown: dropbench's best pipeline or training-step strategy vs the best peer block of "
                         "the same pass (e2e or train) (repeatable)")
    ap.add_argument("--brief", nargs="+", metavar="PEERS.json", help="print compact lines of peers reports")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    a = ap.parse_args(argv)
    a.argv = list(argv)
    if a.min_time is not None and a.min_time < 0:
        raise UsageError("--min-time: must be >= 0")
    return a


def selected_blocks(a):
    if not a.only:
        return list(BLOCKS)
    blocks = [b.strip() for b in a.only.split(",") if b.strip()]
    for b in blocks:
        if b not in BLOCKS:
            raise UsageError(f"--only: {b!r} is not a block (allowed: {', '.join(BLOCKS)})")
    if not blocks:
        raise UsageError(f"--only: no block given (allowed: {', '.join(BLOCKS)})")
    return blocks


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        a = parse_args(argv)
        if a.self_test:
            return self_test(a)
        if a.brief:
            print(brief(a.brief))
            return 0
        if a.versus:
            print(versus_markdown(a.versus))
            return 0
        blocks = selected_blocks(a)
        cfg, points, source = plan(a, blocks)
        if a.dry_run:
            for b in blocks:
                for axes, _ in points[b]:
                    print(f"{b}: {json.dumps(axes)}")
            return 0
        if a.output:
            d = Path(a.output).parent
            if not d.is_dir():
                raise UsageError(f"-o {a.output}: the directory {d} does not exist")
        return run_gpu(a, cfg, blocks, points, source)
    except UsageError as e:
        print(f"peers: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
