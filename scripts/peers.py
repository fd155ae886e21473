#!/usr/bin/env python3
"""Peers for dropbench: PyTorch and Triton on the same sweep points as a dropbench config, written as a
dropbench report (schema "dropbench.report", version 1, command "peers"; docs/report-schema.md).

    scripts/peers.py --config configs/llama3-70b.json --sq 8192 -o results/h200/peers/llama3-70b.json

Four blocks, each point's variants tagged `"peer": true` and named "peer:...":

  attention  axes sq, causal (+ any of q_heads, kv_heads, head_dim, dropout_p, batch the config sweeps).
             F.scaled_dot_product_attention, bf16, with one backend forced at a time (flash, cudnn,
             efficient = memory-efficient), without dropout (":none") and with dropout_p (":dropout").
             Q/K/V are strided views of one bf16 QKV buffer [B*SQ, (Hq+2Hkv)*dH], as dropbench's attention
             reads them. GQA: `enable_gqa=True` with Hkv heads where the backend takes it, otherwise K/V
             expanded to Hq heads with repeat_interleave OUTSIDE the timed region; a backend that refuses
             the views gets contiguous copies, also untimed. extra.gqa / extra.layout say which was used.
             derived: tflops = 4*B*Hq*SQ^2*dH / t (halved when causal), x_none (time / same backend's none).
  gemm       axes sq, embed, dtype (dtype: the config's sweep, else fp8 and bf16 as `dropbench gemm`).
             Y[M, N] = X[M, K] W[N, K]^T with M = B*SQ, K = E, N = (Hq + 2Hkv)*dH.
             peer:scaled_mm  torch._scaled_mm, e4m3 inputs, per-tensor fp32 scales, bf16 out,
                             use_fast_accum=True, W passed as W.t() (column-major: cuBLASLt's TN).
             peer:matmul     torch.matmul(X, W.t()) in bf16.          derived: tflops = 2*M*N*K / t.
  dropout    axes elements, dropout_dtype. The standalone dropout of `elements` values:
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
  e2e        axes: those of `dropbench run` that the config sweeps (sq for the Llama-3 presets; peers have
             no Philox round count). One block as PyTorch users would write it: the QKV GEMM (fp8
             _scaled_mm or bf16 matmul, per workload.dtype; phase gemm) then SDPA with dropout_p on Q/K/V
             taken as views of the GEMM output (reshape + transpose, no copy; phase attention), with
             peer:e2e-flash and peer:e2e-cudnn. Anything a backend needs beyond the views (GQA expansion,
             contiguous copies) is done INSIDE the timed region and named in extra. extra.kernels lists the
             CUDA kernels one call launched (torch.profiler), so a hidden copy would show there.

Timing (one sample = one call, or one pass over the phases): CUDA event pairs around every sample,
measure.warmup untimed calls, then samples until both >= measure.min_samples and >= --min-time seconds of
samples (default: the config's measure.min_time, 0.2 s for the presets; the H200 is power-capped, so
sustained runs read 5-15 % slower than bursts: compare equal durations), at most measure.max_samples and
measure.timeout seconds. Stats as dropbench's (median, mean, min, max, stdev, rel_stdev, in SECONDS);
mean_clock_mhz = mean SM clock read through NVML every 2 ms during the samples (0 without pynvml).

A backend or kernel that refuses a setting is a `skipped` entry {"axes", "variant", "reason"} with the
exception (and warning) text: peers' skipped entries name their variant, so a point can be both measured
(its other variants) and skipped (that variant).

Other modes:
  --dry-run          the points of each block, no GPU
  --self-test        CPU only (no torch): argument parsing, config reading, the report writer, and
                     `dropbench compare` on the written report when the binary is there (--dropbench PATH)
  --versus RUN.json PEERS.json [--versus ...]
                     markdown: per preset, dropbench's best pipeline (at Philox-7 and at the best round
                     count) against the best peer end-to-end block

Exit codes: 0 done; 2 bad input, or no GPU / no PyTorch (one line on stderr).
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import socket
import statistics
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


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# Config: the subset of dropbench's config rules a peer needs (docs/config.md)
# ---------------------------------------------------------------------------------------------------------

WORKLOAD_DEFAULTS = {
    "batch": 1, "embed": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "sq": 4096, "causal": False,
    "dropout_p": 0.1, "dtype": "fp8", "rounds": 7, "threshold_bits": 8, "layout": "tile",
    "elements": 268435456, "dropout_dtype": "bf16", "pipeline": "baseline", "chunk": 0, "seed": "0x5eed5eed",
    "offset": 0,
}
MEASURE_DEFAULTS = {"min_samples": 10, "max_samples": 2000, "min_time": 0.2, "max_noise": 0.005, "timeout": 5.0,
                    "warmup": 3, "cold": False, "throttle": 0.75}
INT_FIELDS = {"batch", "embed", "q_heads", "kv_heads", "head_dim", "sq", "rounds", "threshold_bits", "elements",
              "chunk"}
CHOICES = {"dtype": ("fp8", "bf16"), "dropout_dtype": ("bf16", "fp32"), "head_dim": (64, 128),
           "rounds": (3, 5, 7, 10), "threshold_bits": (8, 16, 32), "layout": ("tile", "bits", "u8", "i32"),
           "pipeline": ("baseline", "fused", "overlap", "chunked")}
RANGES = {"batch": (1, 4096), "embed": (64, 65536), "q_heads": (1, 1024), "kv_heads": (1, 1024),
          "sq": (1, 1048576), "elements": (1, 2 ** 34), "chunk": (0, 1048576)}

# Axes of each block, in order; ALWAYS: recorded in the point's axes even when the config does not sweep them.
BLOCKS = ("attention", "gemm", "dropout", "e2e")
AXES = {
    "attention": ["sq", "q_heads", "kv_heads", "head_dim", "causal", "dropout_p", "batch"],
    "gemm": ["sq", "embed", "dtype", "batch", "q_heads", "kv_heads", "head_dim"],
    "dropout": ["elements", "dropout_dtype", "dropout_p"],
    "e2e": ["batch", "embed", "q_heads", "kv_heads", "head_dim", "sq", "causal", "dropout_p", "dtype"],
}
ALWAYS = {"attention": ["sq", "causal"], "gemm": ["sq", "embed", "dtype"], "dropout": ["elements", "dropout_dtype"],
          "e2e": []}
DEFAULT_VALUES = {"gemm": {"dtype": ["fp8", "bf16"]}}


def parse_int(v, where):
    if isinstance(v, bool):
        raise UsageError(f"config: {where}: {json.dumps(v)} must be an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == int(v):
        return int(v)
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)\s*", v)
        if m:
            return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()]
    raise UsageError(f"config: {where}: {json.dumps(v)} must be an integer (a number or a string like \"8K\")")


def check_field(name, v, where):
    """Normalise and check one workload value; raises UsageError naming `where`."""
    if name in INT_FIELDS:
        v = parse_int(v, where)
        lo, hi = RANGES.get(name, (None, None))
        if lo is not None and not lo <= v <= hi:
            raise UsageError(f"config: {where}: {v} is out of range (allowed: [{lo}, {hi}])")
        if name == "embed" and v % 16:
            raise UsageError(f"config: {where}: {v} is not a multiple of 16")
    elif name == "causal":
        if not isinstance(v, bool):
            raise UsageError(f"config: {where}: {json.dumps(v)} must be a boolean (allowed: true, false)")
    elif name == "dropout_p":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise UsageError(f"config: {where}: {json.dumps(v)} is out of range (allowed: [0, 1))")
        v = float(v)
    elif name in ("seed", "offset"):
        if isinstance(v, str):
            v = int(v, 16) if v.lower().startswith("0x") else int(v)
        v = int(v)
    if name in CHOICES and v not in CHOICES[name]:
        raise UsageError(f"config: {where}: {json.dumps(v)} is not allowed (allowed: "
                         f"{', '.join(str(c) for c in CHOICES[name])})")
    return v


def expand_axis(name, spec, where):
    if isinstance(spec, dict):
        if set(spec) == {"pow2"} and name in INT_FIELDS:
            lo, hi = (parse_int(x, where + ".pow2") for x in spec["pow2"])
            if lo <= 0 or hi < lo or lo & (lo - 1) or hi & (hi - 1):
                raise UsageError(f"config: {where}.pow2: [{lo}, {hi}] must be powers of two with lo <= hi")
            vals, v = [], lo
            while v <= hi:
                vals.append(v)
                v *= 2
        elif set(spec) == {"range"}:
            lo, hi, step = spec["range"]
            if name == "dropout_p":
                n = int(math.floor((hi - lo) / step + 1e-9)) + 1
                vals = [round(lo + i * step, 12) for i in range(n)]
            else:
                lo, hi, step = (parse_int(x, where + ".range") for x in (lo, hi, step))
                if step <= 0 or hi < lo:
                    raise UsageError(f"config: {where}.range: needs step > 0 and lo <= hi")
                vals = list(range(lo, hi + 1, step))
        else:
            raise UsageError(f"config: {where}: {json.dumps(spec)} is not a list, scalar, pow2 or range")
    elif isinstance(spec, list):
        if not spec:
            raise UsageError(f"config: {where}: an empty list is not allowed")
        vals = spec
    else:
        vals = [spec]
    out = []
    for i, v in enumerate(vals):
        v = check_field(name, v, f"{where}[{i}]")
        if v not in out:
            out.append(v)
    return out


def load_config(path):
    if path:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise UsageError(f"--config: {path}: {e.strerror or e}")
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise UsageError(f"--config: {path}: not JSON ({e})")
        name_default = Path(path).stem
    else:
        raw, name_default = {}, "default"
    if not isinstance(raw, dict):
        raise UsageError(f"--config: {path}: the top level must be a JSON object")
    allowed = {"name", "description", "workload", "sweep", "measure", "source"}
    for k in raw:
        if k not in allowed:
            raise UsageError(f"config: {k}: unknown key (allowed: {', '.join(sorted(allowed))})")
    cfg = {"name": raw.get("name", name_default), "description": raw.get("description", ""),
           "workload": dict(WORKLOAD_DEFAULTS), "sweep": {}, "measure": dict(MEASURE_DEFAULTS)}
    for k, v in raw.get("workload", {}).items():
        set_key(cfg, f"workload.{k}", v)
    for k, v in raw.get("sweep", {}).items():
        set_key(cfg, f"sweep.{k}", v)
    for k, v in raw.get("measure", {}).items():
        if k in MEASURE_DEFAULTS:
            set_key(cfg, f"measure.{k}", v)
        else:  # a measurement setting of a newer dropbench: kept in the report, not used by the peers
            cfg["measure"][k] = v
    if "source" in raw:
        cfg["source"] = raw["source"]
    validate(cfg)
    return cfg


def validate(cfg):
    w = cfg["workload"]
    if w["q_heads"] % w["kv_heads"]:
        divs = [d for d in range(1, w["q_heads"] + 1) if w["q_heads"] % d == 0]
        raise UsageError(f"config: workload.kv_heads: {w['kv_heads']} does not divide q_heads = {w['q_heads']} "
                         f"(allowed: {', '.join(map(str, divs))})")
    m = cfg["measure"]
    if m["max_samples"] < m["min_samples"]:
        raise UsageError("config: measure.max_samples: must be >= measure.min_samples")


def set_key(cfg, key, value):
    parts = key.split(".")
    if parts[0] in ("name", "description") and len(parts) == 1:
        cfg[parts[0]] = str(value)
        return
    if len(parts) != 2 or parts[0] not in ("workload", "sweep", "measure"):
        raise UsageError(f"{key}: unknown key (allowed: name, description, workload.FIELD, sweep.AXIS, measure.FIELD)")
    sec, field = parts
    if sec == "measure":
        if field not in MEASURE_DEFAULTS:
            raise UsageError(f"measure.{field}: unknown key (allowed: {', '.join(MEASURE_DEFAULTS)})")
        if field in ("min_samples", "max_samples", "warmup"):
            value = parse_int(value, key)
            if value < (0 if field == "warmup" else 1):
                raise UsageError(f"config: {key}: {value} is out of range")
        elif field == "cold":
            if not isinstance(value, bool):
                raise UsageError(f"config: {key}: {json.dumps(value)} must be a boolean")
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UsageError(f"config: {key}: {json.dumps(value)} must be a number >= 0")
            value = float(value)
        cfg["measure"][field] = value
        return
    if field not in WORKLOAD_DEFAULTS:
        raise UsageError(f"{sec}.{field}: unknown key (allowed: {', '.join(WORKLOAD_DEFAULTS)})")
    if sec == "workload":
        if isinstance(value, (list, dict)):
            raise UsageError(f"workload.{field}: {json.dumps(value)} is not a single value (allowed: one value; "
                             f"to sweep it use --set sweep.{field}=...)")
        cfg["workload"][field] = check_field(field, value, key)
    else:
        if field in ("seed", "offset"):
            raise UsageError(f"sweep.{field}: not sweepable")
        if value is None:
            cfg["sweep"].pop(field, None)
        else:
            cfg["sweep"][field] = expand_axis(field, value, key)


def parse_set_value(text):
    """VALUE of --set KEY=VALUE, read as docs/config.md says: JSON, pow2:LO:HI, range:LO:HI:STEP, comma list,
    K/M/G integer, bare word."""
    try:
        return json.loads(text)
    except ValueError:
        pass

    def item(s):
        s = s.strip()
        try:
            return json.loads(s)
        except ValueError:
            m = re.fullmatch(r"(\d+)([kKmMgG])", s)
            return int(m.group(1)) * {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()] if m else s

    if text.startswith("pow2:"):
        a = text.split(":")[1:]
        if len(a) == 2:
            return {"pow2": [item(a[0]), item(a[1])]}
    if text.startswith("range:"):
        a = text.split(":")[1:]
        if len(a) == 3:
            return {"range": [item(x) for x in a]}
    t = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if "," in t or t != text:
        return [item(x) for x in t.split(",") if x.strip()]
    return item(text)


def block_points(cfg, block):
    """Cartesian product of the block's axes, last fastest (as dropbench's expand_sweep)."""
    dims = []
    for name in AXES[block]:
        if name in cfg["sweep"]:
            dims.append((name, cfg["sweep"][name], True))
        elif name in DEFAULT_VALUES.get(block, {}):
            dims.append((name, DEFAULT_VALUES[block][name], True))
        else:
            dims.append((name, [cfg["workload"][name]], name in ALWAYS[block]))
    points = [({}, dict(cfg["workload"]))]
    for name, values, recorded in dims:
        nxt = []
        for axes, wl in points:
            for v in values:
                a = dict(axes)
                if recorded:
                    a[name] = v
                nxt.append((a, dict(wl, **{name: v})))
        points = nxt
    out = []
    for axes, wl in points:
        if wl["q_heads"] % wl["kv_heads"]:
            raise UsageError(f"config: sweep point {json.dumps(axes)}: kv_heads: {wl['kv_heads']} does not divide "
                             f"q_heads = {wl['q_heads']}")
        out.append((axes, wl))
    return out


def resolved_config(cfg):
    out = {"name": cfg["name"], "description": cfg["description"], "workload": dict(cfg["workload"]),
           "sweep": {k: list(v) for k, v in cfg["sweep"].items()}, "measure": dict(cfg["measure"])}
    out["workload"]["seed"] = "0x%x" % check_field("seed", out["workload"]["seed"], "workload.seed")
    if "source" in cfg:
        out["source"] = cfg["source"]
    return out


# ---------------------------------------------------------------------------------------------------------
# Statistics and the report (docs/report-schema.md)
# ---------------------------------------------------------------------------------------------------------

def finite_or_none(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def stats_of(samples, clock_mhz=0.0, discarded=0):
    """The nine stats keys, in order, of samples in seconds."""
    n = len(samples)
    if n == 0:
        return {"samples": 0, "median": 0, "mean": 0, "min": 0, "max": 0, "stdev": 0, "rel_stdev": 0,
                "discarded": discarded, "mean_clock_mhz": 0}
    mean = statistics.fmean(samples)
    sd = statistics.stdev(samples) if n >= 2 else 0.0
    return {"samples": n, "median": statistics.median(samples), "mean": mean, "min": min(samples),
            "max": max(samples), "stdev": sd, "rel_stdev": sd / mean if mean else 0.0, "discarded": discarded,
            "mean_clock_mhz": float(clock_mhz or 0.0)}


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


def check_report(doc):
    """Structural check of a dropbench.report document; returns a list of problems (empty = valid)."""
    bad = []
    if list(doc)[:8] != ["schema", "schema_version", "command", "context", "config", "summary", "points", "skipped"]:
        bad.append(f"top-level keys/order: {list(doc)}")
    if doc.get("schema") != "dropbench.report" or doc.get("schema_version") != 1:
        bad.append("schema / schema_version")
    keys = ["samples", "median", "mean", "min", "max", "stdev", "rel_stdev", "discarded", "mean_clock_mhz"]
    for i, p in enumerate(doc.get("points", [])):
        if list(p) != ["index", "axes", "workload", "variants", "derived"]:
            bad.append(f"points[{i}] keys {list(p)}")
        names = [v.get("name") for v in p.get("variants", [])]
        if len(set(names)) != len(names):
            bad.append(f"points[{i}]: duplicate variant names")
        for v in p.get("variants", []):
            if list(v) != ["name", "peer", "stats", "phases", "derived", "extra"]:
                bad.append(f"points[{i}] variant keys {list(v)}")
            if list(v.get("stats", {})) != keys:
                bad.append(f"points[{i}] {v.get('name')}: stats keys {list(v.get('stats', {}))}")
            for ph in v.get("phases", []):
                if list(ph) != ["name", "stats"] or list(ph["stats"]) != keys:
                    bad.append(f"points[{i}] {v.get('name')}: phase {ph}")
    for s in doc.get("skipped", []):
        if "axes" not in s or "reason" not in s:
            bad.append(f"skipped entry {s}")
    return bad


# ---------------------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------------------

def fmt3(x):
    if x is None or not isinstance(x, (int, float)) or not math.isfinite(x):
        return ""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def md_table(doc):
    lines = ["| block | axes | variant | median µs | rel stdev % | samples | MHz | figures | how |",
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for p in doc["points"]:
        axes = " ".join(f"{k}={v}" for k, v in p["axes"].items())
        for v in p["variants"]:
            s = v["stats"]
            figs = ", ".join(f"{k} {fmt3(x)}" for k, x in v["derived"].items() if isinstance(x, (int, float)))
            ph = " + ".join(f"{q['name']} {fmt3(q['stats']['median'] * 1e6)}" for q in v["phases"]) \
                if len(v["phases"]) > 1 else ""
            how = "; ".join(str(v["extra"][k]) for k in ("gqa", "layout") if k in v["extra"])
            lines.append(f"| {v['extra'].get('block', '')} | {axes} | {v['name']} | {fmt3(s['median'] * 1e6)} | "
                         f"{fmt3(s['rel_stdev'] * 100)} | {s['samples']} | {fmt3(s['mean_clock_mhz'])} | "
                         f"{figs}{' (' + ph + ')' if ph else ''} | {how} |")
    for s in doc["skipped"]:
        axes = " ".join(f"{k}={v}" for k, v in s["axes"].items())
        lines.append(f"| skipped | {axes} | {s.get('variant', '')} | | | | | {s['reason'][:300]} | |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# --versus: dropbench's best pipeline against the best peer end-to-end block
# ---------------------------------------------------------------------------------------------------------

PIPELINES = ("baseline", "fused", "overlap", "chunked")


def versus_rows(run_doc, peers_doc):
    """One row per e2e SQ present in both: dropbench best at Philox-7 and at the best R, and the best peer."""
    rows = []
    db = {}
    for p in run_doc.get("points", []):
        wl = p.get("workload", {})
        sq, r = p["axes"].get("sq", wl.get("sq")), p["axes"].get("rounds", wl.get("rounds"))
        for v in p.get("variants", []):
            if v["name"] in PIPELINES and v["stats"].get("median"):
                db.setdefault(sq, []).append((v["stats"]["median"], v["name"], r))
    for p in peers_doc.get("points", []):
        e2e = [v for v in p["variants"] if v["name"].startswith("peer:e2e") and v["stats"].get("median")]
        if not e2e:
            continue
        sq = p["axes"].get("sq", p["workload"].get("sq"))
        if sq not in db:
            continue
        best_peer = min(e2e, key=lambda v: v["stats"]["median"])
        r7 = [x for x in db[sq] if x[2] == 7]
        rows.append({"name": peers_doc.get("config", {}).get("name", "?"), "sq": sq,
                     "r7": min(r7) if r7 else None, "any": min(db[sq]), "peer": best_peer, "peers": e2e})
    return rows


def brief(paths):
    """Compact lines of peers reports, for a terminal."""
    out = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        c = doc.get("context", {})
        out.append(f"== {path}: {doc.get('config', {}).get('name')} on {c.get('device', {}).get('name')}, torch "
                   f"{c.get('torch_version')}, triton {c.get('triton_version')}, cudnn {c.get('cudnn_version')}")
        for p in doc["points"]:
            out.append("  " + " ".join(f"{k}={v}" for k, v in p["axes"].items()))
            for v in p["variants"]:
                s, e = v["stats"], v["extra"]
                figs = " ".join(f"{k}={fmt3(x)}" for k, x in v["derived"].items() if isinstance(x, (int, float)))
                ph = "+".join(fmt3(q["stats"]["median"] * 1e6) for q in v["phases"]) if len(v["phases"]) > 1 else ""
                tags = ",".join(t for t in (str(e.get("gqa", ""))[:12], str(e.get("layout", ""))[:12]) if t)
                kern = e.get("kernels")
                ks = (" k=" + "|".join(k[:40] for k in kern[:4])) if kern else ""
                cp = f" COPIES={e['copy_kernels']}" if e.get("copy_kernels") else ""
                out.append(f"    {v['name']:26s} {fmt3(s['median'] * 1e6):>7s} us ±{fmt3(s['rel_stdev'] * 100)}% "
                           f"n={s['samples']} {fmt3(s['mean_clock_mhz'])}MHz {figs} {('(' + ph + ')') if ph else ''} "
                           f"{tags}{ks}{cp}")
        for sk in doc["skipped"]:
            out.append(f"  SKIP {sk.get('variant', '')} {json.dumps(sk['axes'])}: {sk['reason'][:260]}")
    return "\n".join(out)


def versus_markdown(pairs):
    out = ["| preset | SQ | dropbench best, Philox-7 (µs) | dropbench best, any R (µs) | best peer end-to-end (µs) "
           "| peer phases: GEMM + attention (µs) | other peer | peer / dropbench (R7) | peer / dropbench (best R) |",
           "|---|---:|---|---|---|---|---|---:|---:|"]
    for run_path, peers_path in pairs:
        run_doc = json.loads(Path(run_path).read_text())
        peers_doc = json.loads(Path(peers_path).read_text())
        for r in versus_rows(run_doc, peers_doc):
            pv = r["peer"]
            tp = pv["stats"]["median"]
            ph = " + ".join(f"{fmt3(q['stats']['median'] * 1e6)}" for q in pv["phases"])
            others = ", ".join(f"{v['name'][5:]} {fmt3(v['stats']['median'] * 1e6)}" for v in r["peers"] if v is not pv)
            r7 = f"{r['r7'][1]} {fmt3(r['r7'][0] * 1e6)}" if r["r7"] else "n/a"
            anyr = f"{r['any'][1]} R{r['any'][2]} {fmt3(r['any'][0] * 1e6)}"
            out.append(f"| {r['name']} | {r['sq']} | {r7} | {anyr} | {pv['name'][5:]} {fmt3(tp * 1e6)} | {ph} | "
                       f"{others} | {tp / r['r7'][0] if r['r7'] else float('nan'):.2f}× | "
                       f"{tp / r['any'][0]:.2f}× |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------------------------------------

def git_sha():
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        if not sha:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
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
        self.seed = check_field("seed", cfg["workload"]["seed"], "workload.seed")
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
            est = max(statistics.median(total), 1e-6)
            if time.perf_counter() > t_end:
                break
        mhz = statistics.fmean(clocks) if clocks else 0.0
        return stats_of(total, mhz), [(n, stats_of(s, mhz)) for (n, _), s in zip(phases, per_phase)]

    def kernels_of(self, fn):
        """CUDA kernels one call of fn launches (torch.profiler); None where the profiler does not work."""
        if self.args.no_kernel_list:
            return None
        torch = self.torch
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
            return [n[:160] for n in names]
        except Exception as e:  # profiler unavailable here
            return [f"(profiler failed: {type(e).__name__}: {e})"[:200]]

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
        torch = self.torch
        from torch.nn.attention import sdpa_kernel
        errors = []
        for gqa, layout in self.sdpa_modes(wl):
            with warnings.catch_warnings(record=True) as caught, sdpa_kernel(backend):
                warnings.simplefilter("always")
                try:
                    out = self.sdpa_call(q, k, v, wl, p, gqa, layout)
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
        for axes, wl in points:
            b, s, hq, hkv, d = wl["batch"], wl["sq"], wl["q_heads"], wl["kv_heads"], wl["head_dim"]
            n = (hq + 2 * hkv) * d
            flops = 4.0 * b * hq * s * s * d / (2 if wl["causal"] else 1)
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
                         "gqa": {"enable_gqa": "enable_gqa=True (K/V with Hkv heads)",
                                 "repeat_interleave": "K/V expanded by repeat_interleave INSIDE the timed region",
                                 "none (MHA)": "none (Hq = Hkv)"}[gqa],
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
            if variants:
                best = min(variants, key=lambda x: x["stats"]["median"])
                derived = {"winner": best["name"], "t_best": best["stats"]["median"]}
                for v in variants:
                    derived["t_" + v["name"][len("peer:"):]] = v["stats"]["median"]
                self.report.add_point(axes, wl, variants, derived)


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


def run_gpu(args, cfg, blocks):
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
    report = Report(args.output, ctx, resolved_config(cfg))
    g = Gpu(args, cfg, report)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.inference_mode():
        for block in blocks:
            getattr(g, f"{block}_block")(block_points(cfg, block))
    summary = {"sm_mhz_at_end": nvml.sm_mhz(), "skipped_variants": len(report.doc["skipped"])}
    e2e = [p for p in report.doc["points"] if p["variants"] and p["variants"][0]["extra"].get("block") == "e2e"]
    if e2e:
        summary["e2e_winners"] = [{"axes": p["axes"], "winner": p["derived"]["winner"], "t": p["derived"]["t_best"]}
                                  for p in e2e]
    report.set_summary(summary)
    table = md_table(report.doc)
    print(table)
    if args.md:
        Path(args.md).write_text(f"# peers: {cfg['name']} on {ctx['device']['name']}\n\n"
                                 f"torch {ctx['torch_version']}, triton {ctx['triton_version']}, cuDNN "
                                 f"{ctx['cudnn_version']}, {ctx['date_utc']}, git {ctx['git_sha']}; "
                                 f"min_time {ctx['min_time_s']} s\n\n{table}\n")
    return 0


# ---------------------------------------------------------------------------------------------------------
# Self-test (CPU only)
# ---------------------------------------------------------------------------------------------------------

def find_dropbench(explicit):
    for c in ([explicit] if explicit else []) + [os.environ.get("DROPBENCH_BINARY", ""), str(REPO / "build/dropbench")]:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def self_test(args):
    t0 = time.time()
    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    # 1. argument parsing and config reading
    cfgfile = REPO / "configs/llama3-70b.json"
    a = parse_args(["--config", str(cfgfile), "--sq", "8192", "--set", "measure.min_samples=4",
                    "--only", "attention,e2e", "--min-time", "0.01"])
    cfg = build_config(a)
    ok(cfg["sweep"]["sq"] == [8192] and cfg["sweep"]["rounds"] == [3, 5, 7, 10], "--sq replaces sweep.sq")
    ok(cfg["measure"]["min_samples"] == 4 and cfg["workload"]["q_heads"] == 64, "config + --set")
    ok(a.only == "attention,e2e" and a.min_time == 0.01, "--only / --min-time")
    ok(parse_set_value("pow2:2K:8K") == {"pow2": [2048, 8192]} and parse_set_value("3,5,7") == [3, 5, 7]
       and parse_set_value("8K") == 8192 and parse_set_value("bf16") == "bf16"
       and parse_set_value("[2K,4K]") == [2048, 4096], "--set value forms")
    with tempfile.TemporaryDirectory() as td:
        f = Path(td) / "c.json"
        f.write_text(json.dumps({"measure": {"future_knob": 1}, "sweep": {"sq": ["8K"]}}))
        c3 = load_config(str(f))
        ok(c3["measure"]["future_knob"] == 1 and c3["sweep"]["sq"] == [8192] and c3["name"] == "c",
           "unknown measure keys kept, suffixed integers")
    c2 = load_config(None)
    set_key(c2, "sweep.sq", {"pow2": [2048, 8192]})
    set_key(c2, "sweep.dropout_p", {"range": [0, 0.3, 0.1]})
    ok(c2["sweep"]["sq"] == [2048, 4096, 8192] and c2["sweep"]["dropout_p"] == [0.0, 0.1, 0.2, 0.3], "pow2/range")
    for bad in (["--set", "workload.sqq=1"], ["--set", "workload.kv_heads=5"], ["--dtype", "fp16"],
                ["--set", "sweep.seed=1"], ["--sq", "0"]):
        try:
            build_config(parse_args(["--config", str(cfgfile)] + bad))
            ok(False, f"{bad} must be rejected")
        except UsageError:
            checks += 1
    pts = {b: block_points(cfg, b) for b in BLOCKS}
    ok([ax for ax, _ in pts["attention"]] == [{"sq": 8192, "causal": True}], "attention axes")
    ok([ax for ax, _ in pts["gemm"]] == [{"sq": 8192, "embed": 8192, "dtype": "fp8"},
                                          {"sq": 8192, "embed": 8192, "dtype": "bf16"}], "gemm axes")
    ok([ax for ax, _ in pts["dropout"]] == [{"elements": 2 ** 30, "dropout_dtype": "bf16"}], "dropout axes")
    ok([ax for ax, _ in pts["e2e"]] == [{"sq": 8192}] and pts["e2e"][0][1]["embed"] == 8192, "e2e axes (rounds dropped)")

    # 2. the report writer, on synthetic timings through the same helpers as the GPU mode
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        out = td / "peers.json"
        rep = Report(str(out), base_context(["--self-test"], "selftest"), resolved_config(cfg))
        ok(json.loads(out.read_text())["points"] == [], "empty report written at start")
        for block in BLOCKS:
            for axes, wl in pts[block]:
                vs = []
                for i, name in enumerate((f"peer:{block}-a", f"peer:{block}-b")):
                    s = [1e-3 * (1 + i) * (1 + 0.01 * j) for j in range(10)]
                    st = stats_of(s, 1500.0)
                    vs.append(make_variant(name, st, [("x", stats_of(s[:5])), ("y", stats_of(s[5:]))],
                                           {"tflops": 1.0, "nan": float("nan")}, {"block": block}))
                rep.add_point(axes, wl, vs, {"winner": vs[0]["name"]})
        rep.add_skipped({"sq": 8192, "causal": True}, "RuntimeError: No available kernel.\n  Aborting.",
                        variant="peer:sdpa-efficient:dropout")
        rep.set_summary({"e2e_winners": []})
        doc = json.loads(out.read_text())
        ok(out.read_text().endswith("}\n") and not list(td.glob("*.tmp.*")), "atomic write, trailing newline")
        ok(check_report(doc) == [], f"report structure: {check_report(doc)}")
        ok(doc["points"][0]["variants"][0]["derived"]["nan"] is None, "NaN written as null")
        ok(all(v["peer"] is True and v["name"].startswith("peer:") for p in doc["points"] for v in p["variants"]),
           "variants tagged as peers")
        ok(doc["skipped"][0]["reason"] == "RuntimeError: No available kernel. Aborting.", "one-line reason")
        ok("peer:gemm-a" in md_table(doc) and "peer:e2e-b" in brief([out]), "markdown table, --brief")
        st = doc["points"][0]["variants"][0]["stats"]
        ok(st["samples"] == 10 and abs(st["median"] - 1.045e-3) < 1e-12 and st["mean_clock_mhz"] == 1500.0, "stats")

        # 3. --versus on a synthetic `dropbench run` report
        run = {"schema": "dropbench.report", "schema_version": 1, "command": "run", "context": {}, "config": {},
               "summary": {}, "skipped": [], "points": [
                   {"index": i, "axes": {"sq": 8192, "rounds": r}, "workload": {"sq": 8192, "rounds": r},
                    "derived": {}, "variants": [make_variant(pn, stats_of([t * 1e-3]))
                                                for pn, t in (("baseline", 4.6 + 0.2 * i), ("fused", 4.9),
                                                              ("alone:gemm", 0.5))]}
                   for i, r in enumerate((3, 5, 7))]}
        e2e_doc = {"config": {"name": "syn"}, "points": [
            {"axes": {"sq": 8192}, "workload": {"sq": 8192}, "variants": [
                make_variant("peer:e2e-flash", stats_of([6e-3]), [("gemm", stats_of([1e-3])),
                                                                  ("attention", stats_of([5e-3]))]),
                make_variant("peer:e2e-cudnn", stats_of([5.5e-3]), [("gemm", stats_of([1e-3])),
                                                                    ("attention", stats_of([4.5e-3]))])]}]}
        (td / "run.json").write_text(json.dumps(run))
        (td / "e2e.json").write_text(json.dumps(e2e_doc))
        md = versus_markdown([(td / "run.json", td / "e2e.json")])
        ok("| syn | 8192 | fused 4900 | baseline R3 4600 | e2e-cudnn 5500 | 1000 + 4500 | e2e-flash 6000 | 1.12× | "
           "1.20× |" in md, f"versus table: {md}")

        # 4. dropbench compare reads it (when the binary is there)
        db = find_dropbench(args.dropbench)
        if db:
            r = subprocess.run([db, "compare", str(out), str(out), "--format", "json"], capture_output=True,
                               text=True, timeout=60)
            ok(r.returncode == 0, f"dropbench compare exit {r.returncode}: {r.stderr.strip()}")
            cj = json.loads(r.stdout)
            n_var = sum(len(p["variants"]) for p in doc["points"])
            rows = cj["comparisons"][0]["rows"]
            ok(len(rows) == n_var and all(x["verdict"] == "same" for x in rows) and cj["command"] == "peers",
               f"compare verdicts: {r.stdout[:400]}")
            r = subprocess.run([db, "compare", str(out), str(out)], capture_output=True, text=True, timeout=60)
            ok(r.returncode == 0 and "peer:e2e-a" in r.stdout, "compare markdown")
            compared = "dropbench compare: read and matched"
        else:
            compared = "dropbench compare: binary not found, skipped"

        # 5. the real mode without a GPU: one line, exit 2 (CUDA_VISIBLE_DEVICES= hides any GPU)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--config", str(cfgfile), "--sq", "8192",
                            "-o", str(td / "x.json"), "--quiet"], capture_output=True, text=True, env=env, timeout=300)
        ok(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
           and r.stderr.startswith("peers: no CUDA device found"), f"no-GPU path: rc {r.returncode}, {r.stderr!r}")
        # bad input: one line, exit 2
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--set", "workload.sqq=1"],
                           capture_output=True, text=True, timeout=60)
        ok(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "sqq" in r.stderr, f"bad input: {r.stderr!r}")
    print(f"peers self-test: {checks} checks passed; {compared} ({time.time() - t0:.1f} s)")
    return 0


# ---------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------

SHORTCUTS = ("batch", "sq", "embed", "q_heads", "kv_heads", "head_dim", "causal", "dropout_p", "dtype", "elements",
             "dropout_dtype")


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    ap = Parser(prog="scripts/peers.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a dropbench config (configs/*.json); default: the built-in quick defaults")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="as dropbench: workload.FIELD=, sweep.AXIS=, measure.FIELD= (repeatable)")
    for s in SHORTCUTS:
        ap.add_argument("--" + s.replace("_", "-"), dest="ax_" + s, metavar="V[,V...]",
                        help=f"shorthand for --set sweep.{s}=V[,V...]")
    ap.add_argument("--only", help="comma list of blocks: attention, gemm, dropout, e2e (default: all)")
    ap.add_argument("-o", "--output", help="report path (rewritten after every point)")
    ap.add_argument("--md", help="also write the markdown table here")
    ap.add_argument("--min-time", type=float, help="seconds of samples per measurement (default: measure.min_time)")
    ap.add_argument("--min-samples", type=int, help="= --set measure.min_samples=N")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--git-sha", help="context.git_sha (default: git rev-parse --short HEAD)")
    ap.add_argument("--no-kernel-list", action="store_true", help="skip the torch.profiler kernel listing")
    ap.add_argument("--dry-run", action="store_true", help="print each block's points; no GPU")
    ap.add_argument("--self-test", action="store_true", help="CPU-only checks (no torch needed)")
    ap.add_argument("--dropbench", help="--self-test: the dropbench binary for the compare check")
    ap.add_argument("--versus", nargs=2, action="append", metavar=("RUN.json", "PEERS.json"),
                    help="markdown: dropbench's best pipeline vs the best peer end-to-end block (repeatable)")
    ap.add_argument("--brief", nargs="+", metavar="PEERS.json", help="print compact lines of peers reports")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    a = ap.parse_args(argv)
    a.argv = list(argv)
    if a.min_time is not None and a.min_time < 0:
        raise UsageError("--min-time: must be >= 0")
    return a


def build_config(a):
    cfg = load_config(a.config)
    for s in a.set:
        if "=" not in s:
            raise UsageError(f"--set {s}: expected KEY=VALUE")
        key, val = s.split("=", 1)
        try:
            set_key(cfg, key.strip(), parse_set_value(val))
        except UsageError as e:
            raise UsageError(f"--set {s}: {e}")
    for s in SHORTCUTS:
        v = getattr(a, "ax_" + s)
        if v is not None:
            pv = parse_set_value(v)
            try:
                set_key(cfg, f"sweep.{s}", pv if isinstance(pv, (list, dict)) else [pv])
            except UsageError as e:
                raise UsageError(f"--{s.replace('_', '-')} {v}: {e}")
    if a.min_samples is not None:
        set_key(cfg, "measure.min_samples", a.min_samples)
        if cfg["measure"]["max_samples"] < a.min_samples:
            cfg["measure"]["max_samples"] = a.min_samples
    validate(cfg)
    for b in BLOCKS:
        block_points(cfg, b)  # cross-field checks of every point
    return cfg


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
        cfg = build_config(a)
        blocks = list(BLOCKS)
        if a.only:
            blocks = [b.strip() for b in a.only.split(",") if b.strip()]
            for b in blocks:
                if b not in BLOCKS:
                    raise UsageError(f"--only: {b!r} is not a block (allowed: {', '.join(BLOCKS)})")
        if a.dry_run:
            for b in blocks:
                for axes, wl in block_points(cfg, b):
                    print(f"{b}: {json.dumps(axes)}")
            return 0
        if a.output:
            d = Path(a.output).parent
            if not d.is_dir():
                raise UsageError(f"-o {a.output}: the directory {d} does not exist")
        rc = run_gpu(a, cfg, blocks)
        return rc
    except UsageError as e:
        print(f"peers: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
