#!/usr/bin/env python3
"""Head to head: dropbench's attention kernels and PyTorch's SDPA backends timed in ONE process, interleaved, with
power and clocks beside every sample.

    scripts/h2h_attention.py --sq 8192,16384 --head-dim 128,64 --causal false,true -o h2h.json --md h2h.md

Why this exists: `dropbench attention` and scripts/peers.py time ours and cuDNN in two processes, minutes apart,
each point for ~0.1 s. On the power-capped H200 a 0.1 s window can end before the power controller settles, and
cuDNN's figure moved by up to 13 % from GPU to GPU while ours moved by <= 1.2 %. Here every variant runs
in the same thermal / power steady state:
  - a warm-up of --warmup-s seconds cycling through all variants (the GPU reaches its capped clock);
  - --rounds rounds; in each, every variant once in a fresh random order (seeded per shape, recorded; lib B's variant
    right beside lib A's, which of them first alternating by round: round_orders), one sample = a burst of
    back-to-back calls lasting about --burst-ms, timed with CUDA events, with the SM clock and the instantaneous
    board power (NVML_FI_DEV_POWER_INSTANT) polled every 2 ms in a thread (mean MHz, mean W; J per call = W x time).
    NVML's total-energy counter is not used: it changes every ~100 ms (docs/power.md), longer than a burst;
  - ratios are formed per round (the two variants ran seconds apart in the same state) and summarised as the
    median over rounds with a 95 % bootstrap interval (percentile, 2000 resamples; scripts/dbstats.py).

Variants (--variants, FAMILY:MODE): ours through libdropbench_attention.so (scripts/dropbench_attn.py) --
wgmma:{none,mask,fused}, mma:{none,mask,fused} (mask: the attention reading a 1-bit mask the RNG kernel wrote
before timing); PyTorch's -- cudnn:{none,dropout}, flash:{none,dropout} (F.scaled_dot_product_attention with
that backend forced; Q/K/V strided views of the one QKV buffer ours reads, enable_gqa=True; a backend that refuses
the views gets contiguous copies made outside the timing, as in peers.py).

--lib-b LIB: a second build of the library (another revision) whose wgmma kernels run as family wgmmaB (added to
the default variants) and whose mma.sync kernels run as mmaB (named in --variants, beside the mma variant of the same
mode) in the same rounds, each lib B variant back to back with lib A's: an A/B of two kernel builds in one process,
beside cuDNN. --settle-ms T: each sample is preceded by T ms of the same variant, untimed and queued
without a gap, so it is timed in that variant's own power / clock state rather than in the tail of the previous one's
(at the 700 W cap a 60 ms burst otherwise spends part of its time in the previous variant's state).

Checks before timing, per shape (any failure: exit 1, nothing timed for that run): every output of ours poisoned
with NaN and then fully written; ours (mode none) against cuDNN's output, ||a - b|| / ||b|| <= 2e-2 (both bf16;
measured ~3e-3); wgmma mask == wgmma fused bitwise (the same keep bits), also mma's; with --lib-b each lib B
variant == lib A's of the same family and mode bitwise (a variant named without its lib A partner is not checked).

--self-test runs without torch or a GPU: argument errors, the statistics, the table; with --lib also the library's
ABI and its refusals of bad parameters.
"""
import argparse
import datetime
import json
import os
import platform
import random
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dropbench_attn as dba  # noqa: E402
import dbstats  # noqa: E402  (the scripts' one statistics module)
import selftest  # noqa: E402  (the self-tests' shared checks)
# Re-exported: scripts that import this one as a library (import h2h_attention as h2h) use them under these names.
from dbstats import boot_median_ci, paired_ratios  # noqa: E402,F401

TOOL_VERSION = "1"
OURS = {"wgmma": ("none", "mask", "fused"), "mma": ("none", "mask", "fused")}
# --lib-b: a second build of the library (an A/B of two kernel builds in one process): its wgmma kernels as family
# "wgmmaB" (what the default variants gain) and its mma.sync kernels as "mmaB", each checked bitwise against lib A's
# family of the same kernel.
LIB_B_FAMILIES = {"wgmmaB": "wgmma", "mmaB": "mma"}
LIB_B_FAMILY = "wgmmaB"
# The A/B pairs (lib A's variant, lib B's) that run back to back in every round (round_orders).
AB_PAIRS = [(f"{fa}:{m}", f"{fb}:{m}") for fb, fa in LIB_B_FAMILIES.items() for m in OURS[fa]]
SDPA = {"cudnn": ("none", "dropout"), "flash": ("none", "dropout")}
DEFAULT_VARIANTS = ("wgmma:none,wgmma:mask,wgmma:fused,cudnn:none,cudnn:dropout,flash:none,flash:dropout,"
                    "mma:none,mma:fused")
# (numerator, denominator, what the ratio of times means, the attention kernel's target on it)
KEY_RATIOS = (("cudnn:none", "wgmma:none", "cuDNN none / wgmma none (speed-up of ours)", ">= 1.02 (dH 64: >= 0.9)"),
              ("wgmma:mask", "wgmma:none", "wgmma mask / none", "<= 1.05"),
              ("wgmma:fused", "wgmma:none", "wgmma fused / none", "<= 1.35"),
              ("cudnn:dropout", "wgmma:fused", "cuDNN dropout / wgmma fused (speed-up of ours)", ">= 1.4"),
              ("cudnn:dropout", "cudnn:none", "cuDNN dropout / none", ""),
              ("flash:none", "wgmma:none", "FA2 none / wgmma none", ""),
              ("mma:none", "wgmma:none", "mma none / wgmma none", ""),
              ("mma:fused", "mma:none", "mma fused / none", ""),
              ("wgmmaB:none", "wgmma:none", "lib B / lib A, wgmma none", ""),
              ("wgmmaB:mask", "wgmma:mask", "lib B / lib A, wgmma mask", ""),
              ("wgmmaB:fused", "wgmma:fused", "lib B / lib A, wgmma fused", ""),
              ("mmaB:none", "mma:none", "lib B / lib A, mma none", ""),
              ("mmaB:mask", "mma:mask", "lib B / lib A, mma mask", ""),
              ("mmaB:fused", "mma:fused", "lib B / lib A, mma fused", ""),
              ("cudnn:none", "wgmmaB:none", "cuDNN none / lib B wgmma none", ">= 1.02 (dH 64: >= 0.9)"),
              ("wgmmaB:mask", "wgmmaB:none", "lib B wgmma mask / none", "<= 1.05"))
REL_ERR_MAX = 2e-2


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------------------------------------------

def int_list(field, lo, hi):
    def parse(s):
        try:
            v = [int(x) for x in s.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--{field}: comma-separated integers in [{lo}, {hi}] (got {s!r})")
        if not v or any(x < lo or x > hi for x in v):
            raise UsageError(f"--{field}: comma-separated integers in [{lo}, {hi}] (got {s!r})")
        return v
    return parse


def bool_list(s):
    out = []
    for x in s.split(","):
        x = x.strip().lower()
        if x not in ("true", "false", "1", "0"):
            raise UsageError(f"--causal: comma-separated true/false (got {s!r})")
        out.append(x in ("true", "1"))
    if not out:
        raise UsageError(f"--causal: comma-separated true/false (got {s!r})")
    return out


def parse_variants(s, allowed):
    """A comma-separated list of FAMILY:MODE, each FAMILY a key of `allowed` and MODE one of its modes; duplicates
    dropped, order kept. The one parser of the variant lists of the peer scripts that compare with PyTorch."""
    out = []
    for v in s.split(","):
        v = v.strip()
        fam, _, mode = v.partition(":")
        if fam not in allowed or mode not in allowed[fam]:
            choices = ", ".join(f"{f}:{m}" for f, ms in allowed.items() for m in ms)
            raise UsageError(f"--variants: each one of {choices} (got {v!r})")
        if v not in out:
            out.append(v)
    return out


def variant_list(s, lib_b=False):
    return parse_variants(s, {**OURS, **SDPA, **({fb: OURS[fa] for fb, fa in LIB_B_FAMILIES.items()} if lib_b else {})})


def heads(s, max_hq=256):
    """HQ:HKV, 1 <= HQ <= max_hq, HKV >= 1 dividing HQ."""
    try:
        hq, hkv = (int(x) for x in s.split(":"))
    except ValueError:
        hq = hkv = 0
    if hq < 1 or hkv < 1 or hq % hkv or hq > max_hq:
        raise UsageError(f"--heads: HQ:HKV, 1 <= HQ <= {max_hq}, HKV >= 1 dividing HQ (got {s!r})")
    return hq, hkv


def add_common_args(ap, sq="8192,16384", head_dim="128", rounds=16, burst_ms=60.0, warmup_s=3.0):
    """The options both head-to-head scripts (forward, backward) take: shapes, dropout, sampling, library, outputs."""
    ap.add_argument("--sq", default=sq, help=f"sequence lengths (default {sq})")
    ap.add_argument("--head-dim", default=head_dim, help=f"64 and/or 128 (default {head_dim})")
    ap.add_argument("--causal", default="false,true", help="default false,true")
    ap.add_argument("--heads", default="32:8", help="query:KV heads (default 32:8, Llama 3 8B)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dropout-p", type=float, default=0.1)
    ap.add_argument("--philox-rounds", type=int, default=dba.DEFAULT_ROUNDS,
                    help=f"rounds of ours ({', '.join(map(str, dba.PHILOX_ROUNDS))})")
    ap.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds per shape (2..200; default {rounds})")
    ap.add_argument("--burst-ms", type=float, default=burst_ms, help=f"length of one sample (5..2000 ms; default {burst_ms:g})")
    ap.add_argument("--warmup-s", type=float, default=warmup_s,
                    help=f"warm-up per shape, all variants (0..120 s; default {warmup_s:g})")
    ap.add_argument("--settle-ms", type=float, default=0.0,
                    help="before each sample, the same variant runs this long untimed, so the sample starts in that "
                         "variant's own power / clock state (0..5000 ms; default 0: right after the previous variant)")
    ap.add_argument("--seed", type=int, default=1234, help="inputs and round orders")
    ap.add_argument("--lib", help="libdropbench_attention.so (default: $DROPBENCH_ATTENTION_LIB, build/)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("-o", "--output", help="JSON report")
    ap.add_argument("--md", help="markdown table")


def check_common_args(a):
    """Parses and checks the options of add_common_args in place (UsageError: the option and its allowed range)."""
    a.sq = int_list("sq", 128, 65536)(a.sq)
    a.head_dim = int_list("head-dim", min(dba.HEAD_DIMS), max(dba.HEAD_DIMS))(a.head_dim)
    if any(d not in dba.HEAD_DIMS for d in a.head_dim):
        raise UsageError(f"--head-dim: {' and/or '.join(map(str, dba.HEAD_DIMS))} (got {a.head_dim})")
    a.causal = bool_list(a.causal)
    a.hq, a.hkv = heads(a.heads)
    if not 0.0 <= a.settle_ms <= 5000.0:
        raise UsageError(f"--settle-ms: in [0, 5000] (got {a.settle_ms})")
    if not 1 <= a.batch <= 64:
        raise UsageError(f"--batch: in [1, 64] (got {a.batch})")
    if not 0.0 < a.dropout_p < 1.0:
        raise UsageError(f"--dropout-p: in (0, 1) (got {a.dropout_p})")
    if a.philox_rounds not in dba.PHILOX_ROUNDS:
        raise UsageError(f"--philox-rounds: one of {', '.join(map(str, dba.PHILOX_ROUNDS))} (got {a.philox_rounds})")
    if not 2 <= a.rounds <= 200:
        raise UsageError(f"--rounds: in [2, 200] (got {a.rounds})")
    if not 5.0 <= a.burst_ms <= 2000.0:
        raise UsageError(f"--burst-ms: in [5, 2000] (got {a.burst_ms})")
    if not 0.0 <= a.warmup_s <= 120.0:
        raise UsageError(f"--warmup-s: in [0, 120] (got {a.warmup_s})")
    return a


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="h2h_attention.py", description=__doc__.split("\n\n")[0])
    add_common_args(ap)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--lib-b", help="a second libdropbench_attention.so (another build): its wgmma kernels are timed "
                                    "as family wgmmaB in the same rounds (added to the default variants), its mma.sync "
                                    "kernels as mmaB (named in --variants)")
    ap.add_argument("--profile-once", action="store_true",
                    help="after the checks, run each variant once inside an NVTX range 'dbprof' and time nothing: for "
                         "Nsight Compute, e.g. ncu --nvtx --nvtx-include 'dbprof/' --section WarpStateStats ... "
                         "scripts/h2h_attention.py --profile-once --sq 8192 --causal false")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return a
    check_common_args(a)
    lib_b = bool(a.lib_b)
    if lib_b and a.variants == DEFAULT_VARIANTS:
        a.variants = DEFAULT_VARIANTS + "," + ",".join(f"{LIB_B_FAMILY}:{m}" for m in OURS["wgmma"])
    a.variants = variant_list(a.variants, lib_b)
    return a


# ---------------------------------------------------------------------------------------------------------------
# statistics and tables (no torch)
# ---------------------------------------------------------------------------------------------------------------

def summarize(samples, flops):
    out = {}
    for name, ss in samples.items():
        t = [s["s_per_call"] for s in ss]
        med, lo, hi = boot_median_ci(t)
        j = [s["j_per_call"] for s in ss if s.get("j_per_call") is not None]
        mhz = [s["mean_mhz"] for s in ss if s.get("mean_mhz")]
        out[name] = {"median_s": med, "ci95_s": [lo, hi], "tflops": flops / med / 1e12 if med else None,
                     "j_per_call": dbstats.median(j) if j else None,
                     "watts": dbstats.median([s["j_per_call"] / s["s_per_call"] for s in ss
                                              if s.get("j_per_call") is not None]) if j else None,
                     "mean_mhz": dbstats.mean(mhz) if mhz else None, "samples": len(t)}
    return out


def ratio_rows(samples):
    rows = []
    for num, den, what, target in KEY_RATIOS:
        r = paired_ratios(samples, num, den)
        if not r:
            continue
        med, lo, hi = boot_median_ci(r, seed=len(rows))
        rows.append({"num": num, "den": den, "what": what, "target": target, "median": med, "ci95": [lo, hi],
                     "rounds": len(r)})
    return rows


def fmt(x, nd=3):
    return "-" if x is None else f"{x:.{nd}f}"


def md_tables(points):
    lines = []
    names = []
    for p in points:
        for n in p["summary"]:
            if n not in names:
                names.append(n)
    lines.append("Time per call: TFLOP/s (median over rounds) / W / SM MHz:\n")
    lines.append("| SQ | dH | causal | " + " | ".join(names) + " |")
    lines.append("|---:|---:|---|" + "---:|" * len(names))
    for p in points:
        s = p["shape"]
        cells = []
        for n in names:
            v = p["summary"].get(n)
            cells.append("-" if not v else f"{fmt(v['tflops'], 0)} / {fmt(v['watts'], 0)} / {fmt(v['mean_mhz'], 0)}")
        lines.append(f"| {s['sq']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | " + " | ".join(cells) + " |")
    lines.append("\nRatios of times, paired per round: median [95 % bootstrap interval]:\n")
    whats = []
    for p in points:
        for r in p["ratios"]:
            if (r["what"], r["target"]) not in whats:
                whats.append((r["what"], r["target"]))
    lines.append("| SQ | dH | causal | " + " | ".join(f"{w}{' (target ' + t + ')' if t else ''}" for w, t in whats) + " |")
    lines.append("|---:|---:|---|" + "---|" * len(whats))
    for p in points:
        s = p["shape"]
        byw = {r["what"]: r for r in p["ratios"]}
        cells = [f"{fmt(byw[w]['median'])} [{fmt(byw[w]['ci95'][0])}, {fmt(byw[w]['ci95'][1])}]" if w in byw else "-"
                 for w, _ in whats]
        lines.append(f"| {s['sq']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check_outputs(outs, equal, rel_err):
    """The checks before timing, on {variant: output}: each of our none against cuDNN's (relative error <=
    REL_ERR_MAX), and bit for bit where two of ours must agree (mask == fused; lib B == lib A, builds that differ in
    schedule, not in arithmetic), where both ran. equal(a, b) -> bool, rel_err(o, ref) -> float. Raises
    RuntimeError on a failure; returns what was checked."""
    res = {}

    def same(a, b, why):
        if outs.get(a) is not None and outs.get(b) is not None:
            eq = bool(equal(outs[a], outs[b]))
            res[f"{a} == {b} bitwise"] = eq
            if not eq:
                raise RuntimeError(f"{a} and {b} outputs differ ({why})")

    ref = outs.get("cudnn:none")
    for fam in OURS:
        o = outs.get(f"{fam}:none")
        if o is not None and ref is not None:
            d = rel_err(o, ref)
            res[f"{fam}:none vs cudnn:none rel err"] = d
            if not d <= REL_ERR_MAX:
                raise RuntimeError(f"{fam}:none differs from cuDNN: rel err {d:.3g} > {REL_ERR_MAX}")
        same(f"{fam}:mask", f"{fam}:fused", "keep bits not the same")
    for fb, fa in LIB_B_FAMILIES.items():
        for mode in OURS[fa]:
            same(f"{fb}:{mode}", f"{fa}:{mode}", "the builds' arithmetic differs")
    return res


# ---------------------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------------------

def shape_seed(seed, sq, hd, causal):
    """The rounds' order seed of one shape: --seed and the shape, so that the shapes of a run get different orders (a
    variant's neighbours then differ from shape to shape instead of repeating in every row of the table)."""
    return seed * 1_000_003 + sq * 1009 + hd * 31 + int(causal)


def round_orders(names, rounds, seed, pairs=()):
    """The variants' order in each round: a fresh shuffle per round (random.Random(seed)). The two variants of a pair
    (the same family from two builds, an A/B) run back to back as one unit of the shuffle, the first of them
    alternating from round to round. A burst's speed depends on what ran just before it (2.1-2.7 % faster after
    FlashAttention-2's or the mma family's backward: docs/measurement.md); paired, each twin follows the unit's
    predecessor in half of an even number of rounds and its twin in the other half, so such a neighbour weighs on
    both alike instead of on one of them."""
    twin = {x: y for x, y in pairs if x in names and y in names and x != y}
    second = set(twin.values())
    units = [[n, twin[n]] if n in twin else [n] for n in names if n not in second]
    rng = random.Random(seed)
    first_b = rng.random() < 0.5
    out = []
    for r in range(rounds):
        order = units[:]
        rng.shuffle(order)
        flip = (r % 2 == 1) != first_b
        out.append([n for u in order for n in (u[::-1] if flip and len(u) == 2 else u)])
    return out


class Runner:
    def __init__(self, a):
        import torch
        import peers  # Nvml, ClockPoller, device_context, git_sha, cuda_kernels_of: the same handling as the peers
        self.torch, self.peers, self.a = torch, peers, a
        self.dev = torch.device("cuda", a.device)
        torch.cuda.set_device(self.dev)
        self.lib = dba.Lib(a.lib)
        self.lib_b = dba.Lib(a.lib_b) if a.lib_b else None
        self.nvml = peers.Nvml(a.device)
        self.power_ok = self.nvml.h is not None and self._power_w() is not None

    def _power_w(self):
        """Instantaneous board power (NVML_FI_DEV_POWER_INSTANT, W), else None. The total-energy counter is not
        used: it changes every ~100 ms (docs/power.md), longer than one burst."""
        try:
            nv = self.nvml.nv
            f = nv.nvmlDeviceGetFieldValues(self.nvml.h, [nv.NVML_FI_DEV_POWER_INSTANT])[0]
            return f.value.uiVal * 1e-3 if f.nvmlReturn == 0 else None
        except Exception:
            return None

    def context(self, argv):
        torch, peers = self.torch, self.peers
        ctx = {"tool": "scripts/h2h_attention.py", "version": TOOL_VERSION, "git_sha": peers.git_sha(),
               "argv": ["scripts/h2h_attention.py"] + list(argv),
               "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "hostname": socket.gethostname(), "python": platform.python_version(),
               "library": str(self.lib.path), "library_b": str(self.lib_b.path) if self.lib_b else None,
               "settle_ms": self.a.settle_ms,
               "power_reading": "NVML_FI_DEV_POWER_INSTANT polled every 2 ms" if self.power_ok else "none"}
        ctx.update(peers.device_context(torch, self.a, self.nvml))
        try:
            ctx["device"]["uuid"] = self.nvml.nv.nvmlDeviceGetUUID(self.nvml.h)
            if isinstance(ctx["device"]["uuid"], bytes):
                ctx["device"]["uuid"] = ctx["device"]["uuid"].decode()
        except Exception:
            pass
        ctx["method"] = ("one process; warm-up cycling all variants; per round every variant once in a seeded random "
                         "order (seed per shape; an A/B pair back to back, its first alternating by round); sample = burst of back-to-back calls (CUDA events), SM clock and instantaneous power "
                         "polled every 2 ms (W = their mean in the burst, J per call = W x time per call); ratios paired per round, median + 95 % "
                         "percentile bootstrap over rounds")
        return ctx

    # -- one shape ----------------------------------------------------------------------------------------------
    def shape(self, sq, hd, causal):
        torch, a, lib = self.torch, self.a, self.lib
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
        b, hq, hkv = a.batch, a.hq, a.hkv
        flops = dba.attention_flops(b, hq, sq, hd, causal)
        gen = torch.Generator(device=self.dev)
        gen.manual_seed(a.seed + sq * 7 + hd * 3 + int(causal))
        y = torch.randn(b * sq, (hq + 2 * hkv) * hd, device=self.dev, dtype=torch.bfloat16, generator=gen)
        stream = torch.cuda.current_stream().cuda_stream
        fields = dict(batch=b, sq=sq, q_heads=hq, kv_heads=hkv, head_dim=hd, causal=causal, dropout_p=a.dropout_p,
                      seed=0x5EED5EED + sq, offset=0, rounds=a.philox_rounds, threshold_bits=8)
        p_eff, _ = lib.threshold(lib.params(**fields))
        mask = None
        if any(v.endswith(":mask") for v in a.variants):
            nbytes = lib.mask_bytes(lib.params(**fields))
            mask = torch.empty(nbytes // 4, device=self.dev, dtype=torch.int32)
            lib.make_mask(lib.params(mask=mask.data_ptr(), **fields), mask.data_ptr(), stream)
        q = y[:, : hq * hd].view(b, sq, hq, hd).transpose(1, 2)
        k = y[:, hq * hd: (hq + hkv) * hd].view(b, sq, hkv, hd).transpose(1, 2)
        v = y[:, (hq + hkv) * hd:].view(b, sq, hkv, hd).transpose(1, 2)
        backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
        calls, info, outs, skipped = {}, {}, {}, {}
        for name in a.variants:
            fam, mode = name.split(":")
            if fam in OURS or fam in LIB_B_FAMILIES:
                # families wgmmaB / mmaB: lib B's kernels, reading the mask lib A's RNG kernel wrote (the same bits)
                lb = self.lib_b if fam in LIB_B_FAMILIES else lib
                o = torch.empty(b * sq, hq * hd, device=self.dev, dtype=torch.bfloat16)
                prm = lb.params(qkv=y.data_ptr(), o=o.data_ptr(), mask=mask.data_ptr() if mask is not None else 0,
                                kernel=LIB_B_FAMILIES.get(fam, fam), **fields)
                try:
                    info[name] = {"kernel": lb.kernel_name(prm, mode)}
                except dba.DbaError as e:
                    skipped[name] = str(e)
                    continue
                o.fill_(float("nan"))
                lb.attention(prm, mode, stream)
                torch.cuda.synchronize()
                if not bool(torch.isfinite(o).all()):
                    raise RuntimeError(f"{name}: output not fully written (NaN poison left) at SQ {sq} dH {hd}")
                outs[name] = o
                calls[name] = (lambda prm=prm, mode=mode, lb=lb: lb.attention(prm, mode, stream))
            else:
                p = a.dropout_p if mode == "dropout" else 0.0
                be = backends[fam]
                qq, kk, vv, how, err = q, k, v, "strided views", None
                for attempt in ("views", "contiguous"):
                    if attempt == "contiguous":
                        qq, kk, vv, how = q.contiguous(), k.contiguous(), v.contiguous(), "contiguous copies (untimed)"
                    try:
                        with sdpa_kernel(be):
                            out = F.scaled_dot_product_attention(qq, kk, vv, dropout_p=p, is_causal=causal,
                                                                 enable_gqa=hq != hkv)
                        torch.cuda.synchronize()
                        err = None
                        break
                    except Exception as e:  # this backend refuses the shape or the layout
                        err = f"{type(e).__name__}: {e}"[:300]
                if err:
                    skipped[name] = err
                    continue
                if mode == "none":
                    outs[name] = out.transpose(1, 2).reshape(b * sq, hq * hd)
                info[name] = {"kernel": f"torch SDPA {fam} ({how}, enable_gqa={hq != hkv})", "dropout_p": p}

                def call(qq=qq, kk=kk, vv=vv, p=p, be=be):
                    with sdpa_kernel(be):
                        F.scaled_dot_product_attention(qq, kk, vv, dropout_p=p, is_causal=causal, enable_gqa=hq != hkv)
                info[name]["cuda_kernels"] = self.kernels_of(call)
                calls[name] = call
        checks = self.check(outs)
        del outs
        shape = {"batch": b, "sq": sq, "q_heads": hq, "kv_heads": hkv, "head_dim": hd, "causal": causal,
                 "dropout_p": a.dropout_p, "dropout_p_effective_ours": p_eff, "philox_rounds": a.philox_rounds,
                 "flops": flops}
        if a.profile_once:
            for name, fn in calls.items():
                fn()
                fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push("dbprof")
                fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
            return {"shape": shape, "checks": checks, "skipped": skipped, "profiled": list(calls), "info": info}
        shape["order_seed"] = shape_seed(a.seed, sq, hd, causal)
        samples = self.time(calls, shape["order_seed"], AB_PAIRS)
        summary = summarize(samples, flops)
        for n, s in summary.items():
            s.update(info.get(n, {}))
        return {"shape": shape, "checks": checks, "skipped": skipped, "summary": summary, "ratios": ratio_rows(samples),
                "samples": samples}

    def kernels_of(self, fn):
        """The CUDA kernels one call launches, for naming the plan a backend picked (the peers' lister)."""
        return self.peers.cuda_kernels_of(self.torch, fn, width=200)

    def check(self, outs):
        torch = self.torch
        return check_outputs(outs, lambda a, b: bool(torch.equal(a, b)),
                             lambda o, ref: float((o.float() - ref.float()).norm() / ref.float().norm()))

    def burst(self, fn, n, settle_n=0):
        """Seconds per call, J per call (mean instant power x time; None without power readings), mean SM MHz.
        settle_n untimed calls first, queued right before the timed ones (no idle gap); clocks and power are averaged
        only once the GPU has reached the timed part (the first event has completed)."""
        import threading
        torch = self.torch
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        clocks, watts, stop = [], [], threading.Event()

        def poll():
            while not stop.is_set():
                if settle_n and not e0.query():
                    stop.wait(0.002)
                    continue
                c = self.nvml.sm_mhz()
                if c:
                    clocks.append(c)
                if self.power_ok:
                    w = self._power_w()
                    if w:
                        watts.append(w)
                stop.wait(0.002)
        for _ in range(settle_n):
            fn()
        e0.record()  # before the poller starts: an event not yet recorded reads as complete
        th = threading.Thread(target=poll, daemon=True)
        th.start()
        for _ in range(n):
            fn()
        e1.record()
        e1.synchronize()
        stop.set()
        th.join()
        t = e0.elapsed_time(e1) * 1e-3 / n
        w = dbstats.mean(watts) if watts else None
        return t, (w * t if w is not None else None), (dbstats.mean(clocks) if clocks else None)

    def time(self, calls, seed, pairs=()):
        """Samples of every variant in calls: --rounds rounds in the orders of round_orders(seed, pairs)."""
        a = self.a
        names = list(calls)
        n = {}
        settle = {}
        for name in names:  # calls per burst from one timed call (after a first, untimed one)
            calls[name]()
            t, _, _ = self.burst(calls[name], 3)
            n[name] = max(1, int(round(a.burst_ms * 1e-3 / t)))
            settle[name] = int(round(a.settle_ms * 1e-3 / t))
        t_end = time.perf_counter() + a.warmup_s
        while time.perf_counter() < t_end:
            for name in names:
                self.burst(calls[name], n[name])
        samples = {name: [] for name in names}
        for r, order in enumerate(round_orders(names, a.rounds, seed, pairs)):
            for pos, name in enumerate(order):
                t, j, mhz = self.burst(calls[name], n[name], settle[name])
                samples[name].append({"round": r, "pos": pos, "calls": n[name], "settle_calls": settle[name],
                                      "s_per_call": t, "j_per_call": j, "mean_mhz": mhz})
        return samples


def run(a, argv):
    r = Runner(a)
    ctx = r.context(argv)
    points = []
    for hd in a.head_dim:
        for sq in a.sq:
            for causal in a.causal:
                print(f"h2h: SQ {sq} dH {hd} causal {causal}", file=sys.stderr, flush=True)
                points.append(r.shape(sq, hd, causal))
                r.torch.cuda.empty_cache()
    ctx["sm_mhz_at_end"] = r.nvml.sm_mhz()
    if a.profile_once:
        for pt in points:
            print(f"profiled once each (NVTX range dbprof): {', '.join(pt['profiled'])} at {pt['shape']}")
        if a.output:
            Path(a.output).write_text(json.dumps({"schema": "dropbench.h2h_attention.profile", "context": ctx,
                                                  "points": points}, indent=1) + "\n")
        return 0
    doc = {"schema": "dropbench.h2h_attention", "schema_version": 1, "context": ctx, "points": points}
    md = md_tables(points)
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    if a.md:
        head = (f"Head to head, one process (`scripts/h2h_attention.py`), {ctx['date_utc']}, {ctx['device'].get('name')} "
                f"{ctx['device'].get('uuid', '')}, sha {ctx['git_sha']}, B {a.batch}, {a.hq}/{a.hkv} heads, p {a.dropout_p}, "
                f"Philox-{a.philox_rounds}, {a.rounds} rounds of ~{a.burst_ms:g} ms bursts"
                f"{f' (each after {a.settle_ms:g} ms of the same variant, untimed)' if a.settle_ms else ''} after "
                f"{a.warmup_s:g} s warm-up{'; lib B: ' + str(a.lib_b) if a.lib_b else ''}.\n\n")
        Path(a.md).write_text(head + md)
    print(md)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# self-test (CI: no torch, no GPU)
# ---------------------------------------------------------------------------------------------------------------

def self_test(lib_path):
    fails = []
    ok, refused = selftest.checker(fails, parse_args, UsageError)

    refused(["--sq", "100"], "--sq")
    refused(["--head-dim", "96"], "--head-dim")
    refused(["--causal", "maybe"], "--causal")
    refused(["--variants", "wgmma:dropout"], "--variants")
    refused(["--variants", "cudnn:fused"], "--variants")
    refused(["--heads", "32:5"], "--heads")
    refused(["--rounds", "1"], "--rounds")
    refused(["--dropout-p", "0"], "--dropout-p")
    refused(["--philox-rounds", "4"], "--philox-rounds")
    refused(["--variants", "wgmmaB:none"], "--variants")  # lib B's family only with --lib-b
    refused(["--settle-ms", "6000"], "--settle-ms")
    a = parse_args([])
    ok(a.variants[0] == "wgmma:none" and a.hq == 32 and a.hkv == 8 and a.causal == [False, True], "defaults")
    ok(a.settle_ms == 0.0 and not any(v.startswith(LIB_B_FAMILY) for v in a.variants), "no lib B by default")
    ab = parse_args(["--lib-b", "/x/lib.so", "--settle-ms", "200"])
    ok(ab.variants[-3:] == [f"{LIB_B_FAMILY}:none", f"{LIB_B_FAMILY}:mask", f"{LIB_B_FAMILY}:fused"] and ab.settle_ms == 200,
       f"--lib-b adds lib B's variants: {ab.variants}")
    ok(parse_args(["--lib-b", "/x", "--variants", "wgmma:none,wgmmaB:none"]).variants == ["wgmma:none", "wgmmaB:none"],
       "explicit variants with lib B")
    ok(parse_args(["--lib-b", "/x", "--variants", "mma:fused,mmaB:fused"]).variants == ["mma:fused", "mmaB:fused"],
       "lib B's mma.sync family")
    refused(["--variants", "mmaB:none"], "--variants")
    ok(("mma:mask", "mmaB:mask") in AB_PAIRS and ("wgmma:none", "wgmmaB:none") in AB_PAIRS, f"A/B pairs {AB_PAIRS}")
    # the rounds' orders: permutations; a pair back to back, its first alternating; seeds per shape differ
    names = ["wgmma:none", "cudnn:none", "flash:none", f"{LIB_B_FAMILY}:none", "mma:none"]
    pair = ("wgmma:none", f"{LIB_B_FAMILY}:none")
    orders = round_orders(names, 6, 11, [pair, ("cudnn:none", "absent:none")])
    ok(all(sorted(o) == sorted(names) for o in orders), f"every round a permutation: {orders}")
    firsts = []
    for o in orders:
        i, j = o.index(pair[0]), o.index(pair[1])
        ok(abs(i - j) == 1, f"the pair back to back: {o}")
        firsts.append(i < j)
    ok(all(firsts[k] != firsts[k + 1] for k in range(5)), f"the pair's first alternates: {firsts}")
    ok(round_orders(names, 6, 11, [pair]) == orders, "seeded")
    seeds = {shape_seed(7, sq, hd, c) for sq in (8192, 16384) for hd in (64, 128) for c in (False, True)}
    ok(len(seeds) == 8, f"one seed per shape: {seeds}")
    ok(len({tuple(map(tuple, round_orders(names, 4, x))) for x in seeds}) > 1, "the shapes' orders differ")
    # statistics: a known median and an interval that contains it and narrows with more rounds
    med, lo, hi = boot_median_ci([1.0, 2.0, 3.0, 4.0, 100.0])
    ok(med == 3.0 and lo <= med <= hi, f"bootstrap median {med} [{lo}, {hi}]")
    rng = random.Random(5)
    xs = [1.0 + rng.gauss(0, 0.01) for _ in range(200)]
    m2, l2, h2 = boot_median_ci(xs)
    ok(h2 - l2 < 0.01 and l2 < 1.0 + 0.005 and h2 > 1.0 - 0.005, f"bootstrap width {h2 - l2}")
    # pairing is per round: a drift common to both variants cancels
    samples = {"wgmma:none": [{"round": r, "s_per_call": 1.0 * (1 + 0.1 * r)} for r in range(6)],
               "wgmma:mask": [{"round": r, "s_per_call": 1.04 * (1 + 0.1 * r)} for r in range(6)],
               "cudnn:none": [{"round": r, "s_per_call": 1.1 * (1 + 0.1 * r), "j_per_call": 1.0, "mean_mhz": 1700}
                              for r in range(5)]}
    pr = paired_ratios(samples, "wgmma:mask", "wgmma:none")
    ok(len(pr) == 6 and all(abs(x - 1.04) < 1e-12 for x in pr), f"paired ratios {pr}")
    ok(len(paired_ratios(samples, "cudnn:none", "wgmma:none")) == 5, "pairs only where both ran")
    rows = ratio_rows(samples)
    ok([r["what"] for r in rows][:2] == [KEY_RATIOS[0][2], KEY_RATIOS[1][2]], f"ratio rows {rows}")
    ok(abs(rows[0]["median"] - 1.1) < 1e-9 and rows[0]["ci95"] == [rows[0]["ci95"][0], rows[0]["ci95"][1]], "ratio")
    summ = summarize(samples, 1e12)
    ok(abs(summ["cudnn:none"]["watts"] - 1.0 / (1.1 * 1.2)) < 1e-9 and summ["wgmma:none"]["watts"] is None, "watts")
    pts = [{"shape": {"sq": 8192, "head_dim": 128, "causal": True}, "summary": summ, "ratios": rows}]
    md = md_tables(pts)
    ok("| 8192 | 128 | yes |" in md and "target <= 1.05" in md and "1.040 [1.040, 1.040]" in md, md)
    # the checks before timing (lists stand in for tensors)
    eq = lambda a, b: a == b  # noqa: E731
    rel = lambda o, r: max(abs(x - y) for x, y in zip(o, r))  # noqa: E731
    outs = {"cudnn:none": [1.0, 2.0], "wgmma:none": [1.0, 2.001], "wgmma:mask": [3], "wgmma:fused": [3],
            "wgmmaB:mask": [3], "wgmmaB:none": [1.0, 2.001]}
    res = check_outputs(outs, eq, rel)
    ok(set(res) == {"wgmma:none vs cudnn:none rel err", "wgmma:mask == wgmma:fused bitwise",
                    "wgmmaB:none == wgmma:none bitwise", "wgmmaB:mask == wgmma:mask bitwise"}, f"checks {res}")
    for bad, needle in (({**outs, "wgmmaB:mask": [4]}, "wgmmaB:mask and wgmma:mask"),
                        ({**outs, "wgmma:fused": [4]}, "wgmma:mask and wgmma:fused"),
                        ({**outs, "wgmma:none": [1.0, 2.5]}, "differs from cuDNN"),
                        ({**outs, "mma:fused": [5], "mmaB:fused": [6]}, "mmaB:fused and mma:fused")):
        try:
            check_outputs(bad, eq, rel)
            fails.append(f"check_outputs accepted {needle}")
        except RuntimeError as e:
            ok(needle in str(e), f"check_outputs message {e}")
    # the library: ABI, struct layout, thresholds, refusals (no GPU needed for any of these)
    if lib_path:
        lib = dba.Lib(lib_path)
        prm = lib.params(batch=1, sq=256, q_heads=4, kv_heads=2, head_dim=128, causal=True, dropout_p=0.1)
        pe, sc = lib.threshold(prm)
        ok(abs(pe - 26 / 256) < 1e-12 and abs(sc - 256 / 230) < 1e-6, f"threshold {pe} {sc}")
        # mask bytes: B*Hq matrices of (SQ/16) x (SQ/64) tiles of 32 words
        ok(lib.mask_bytes(prm) == 4 * 16 * 4 * 32 * 4, f"mask bytes {lib.mask_bytes(prm)}")
        for field, val, needle in (("dropout_p", 1.0, "dropout_p"), ("threshold_bits", 12, "threshold_bits"),
                                   ("causal", 3, "causal")):
            bad = lib.params(sq=256, **{field: val}) if field != "causal" else lib.params(sq=256)
            if field == "causal":
                bad.causal = 3
            st = lib.attention_raw(bad, 0)
            ok(st == 2 and needle in lib.last_error(), f"{field}={val}: status {st}, {lib.last_error()!r}")
        st = lib.attention_raw(prm, 7)
        ok(st == 2 and "mode" in lib.last_error(), f"mode 7: status {st}, {lib.last_error()!r}")
        bad = lib.params(sq=256)
        bad.kernel = 9
        st = lib.attention_raw(bad, 0)
        ok(st == 2 and "kernel" in lib.last_error(), f"kernel 9: status {st}, {lib.last_error()!r}")
        st = lib.attention_raw(lib.params(sq=256, dropout_p=0.1), 1)
        ok(st == 2 and "mask" in lib.last_error(), f"mask NULL: status {st}, {lib.last_error()!r}")
        try:
            lib.attention(prm, "dropout")
            fails.append("mode 'dropout' accepted by the binding")
        except ValueError:
            pass
        # exported symbols: the dba_* functions only (hidden visibility, --exclude-libs)
        try:
            import subprocess
            out = subprocess.run(["nm", "-D", "--defined-only", str(lib.path)], capture_output=True, text=True,
                                 timeout=60).stdout
            syms = [ln.split()[-1] for ln in out.splitlines() if ln.strip() and ln.split()[-2] in ("T", "D", "B")]
            ok(syms and all(s.startswith("dba_") for s in syms), f"exported symbols: {syms[:10]}")
        except (OSError, IndexError):
            pass
    return selftest.report("h2h_attention", fails, f" (with {lib_path})" if lib_path else "")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        a = parse_args(argv)
        if a.self_test:
            return self_test(a.lib)
    except UsageError as e:
        print(f"h2h_attention.py: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("h2h_attention.py: needs PyTorch (and a CUDA GPU)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("h2h_attention.py: no CUDA GPU", file=sys.stderr)
        return 2
    return run(a, argv)


if __name__ == "__main__":
    sys.exit(main())
