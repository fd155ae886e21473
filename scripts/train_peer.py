#!/usr/bin/env python3
"""The training-loop peer: a small causal LM trained for a few hundred steps with dropbench's attention op
(scripts/dropbench_torch.py) and with PyTorch's SDPA (cuDNN, FlashAttention-2), dropout on the attention
probabilities, all variants in ONE process with their step windows interleaved.

    scripts/train_peer.py -o train_peer.json --md train_peer.md
    scripts/train_peer.py --variants ours:fused,ours:mask,cudnn:dropout,flash:dropout --seq 4096 --layers 4

Model: token + learned position embedding -> --layers pre-norm blocks (LayerNorm -> packed QKV projection ->
attention (causal, dropout p on the probabilities) -> output projection; LayerNorm -> MLP, GELU) -> LayerNorm -> LM
head; d_model = Hq * head_dim. --precision autocast (fp32 parameters, bf16 autocast; default) or bf16 (bf16
parameters). AdamW with --lr-warmup steps of linear warm-up and the gradient norm clipped at --clip (the usual
stabilisers: without them the loss spikes now and then in every variant, and a spike inside the last k steps decides
the loss comparison). Only the attention differs between variants (VARIANT = FAMILY:MODE):
  ours:{none,mask,fused}      dropbench's forward and backward through the C ABI (mask: the RNG kernel's 1-bit mask,
  ours-det:{none,mask,fused}  held from forward to backward; fused: Philox in both kernels); ours-det: fixed-order dQ
  cudnn:{none,dropout}        F.scaled_dot_product_attention with that backend forced (sdpa_kernel); Q, K, V strided
  flash:{none,dropout}        views of the QKV projection with enable_gqa, else contiguous copies, else K / V
                              expanded to the query heads (recorded per variant as sdpa_layout)
Data: a fixed-seed token stream with learnable structure, the same batches for every variant: the first half of each
sequence follows a random sparse Markov chain (4 successors per token: entropy ln 4), the second half repeats the
first (copying needs attention), so the loss falls from ln(vocab) towards ~ln(4)/2.

Measurement (one method for every variant, /work/.library/device/METHOD.md): --replicas training runs per variant
(replica r: the same initial weights and data for every variant, its own dropout stream); time is cut into windows of
--window steps; in each window every (variant, replica) runs its next --window steps as one burst, in a fresh seeded
random order, timed with CUDA events with the SM clock and board power polled beside it (scripts/h2h_attention.py's
Runner.burst: J per step = mean instantaneous W x time). The first --warmup-windows windows are not timed. Per
variant and window, the step time is the mean over its replicas; reported: median over windows with a 95 % bootstrap
interval (scripts/dbstats.py), and for each ours / SDPA pair the median of per-window ratios (paired: the two ran
in the same window, seconds apart). Peak memory: torch.cuda.max_memory_allocated during each of the variant's bursts
(absolute, and above what was allocated at the burst's start: the step's activations, gradients and, for ours:mask,
the masks held). Attention share: the attention's forward + backward alone (random bf16 QKV of the model's shape,
the same module), interleaved rounds of --attn-burst-ms bursts, times --layers, over the median step time.

Loss curves agree? Per replica, m = the mean training loss over the last --last-k steps. Replica r of two variants
shares initial weights and batches, so d_r = m(variant, r) - m(reference, r) pairs out both; the 95 % Student t
interval of mean(d) over replicas (dbstats.mean_ci_t: replicas are independent runs) is compared with --loss-margin
(nats), a two one-sided test of equivalence at 2.5 % per side: "equivalent" when the whole interval lies within
+-margin, "different" when it lies wholly outside, "inconclusive" otherwise (more replicas or steps narrow it). Also
reported: whether the interval excludes 0 (a detectable difference, e.g. from a different effective dropout p: ours
samples p at 2^-threshold_bits resolution). The reference: --loss-ref, default the first SDPA variant with dropout;
only variants with the same dropout p as the reference are compared.

Host or GPU bound (--host-reps N, default 5; 0 = off; after the timed run): per variant a fresh replica-0 model runs
PROFILE_WARM_STEPS steps, then N times one step issued while a GPU sleep of a few step times runs ahead of it: the
host's issue time per step (median, min) beside the step time. Issue time near the step time means the step is
host-bound (Python and launch work decide it, not the kernels); far below, the GPU never waits for the host.

Where the step's time goes (--profile-steps N, after the timed run): per variant a fresh replica-0 model runs
PROFILE_WARM_STEPS steps, then N steps under torch.profiler (CPU + CUDA activity); reported per step: host wall time,
GPU busy time (the union of every kernel's, memset's and memcpy's interval), GPU idle time (wall - busy: waiting for
the host), kernel time by family (attention / GEMM / other, by kernel name) and the top kernels; --profile-trace DIR
also writes each variant's Chrome trace there. Profiled steps are not timed steps: the profiler adds host work.

JSON (-o): context (device, clocks, power limit, driver, torch, cuDNN, date, git sha), the configuration, per variant
the figures above with every window's sample and the mean loss curve. Without a CUDA GPU or PyTorch: one line, exit 2.
Bad arguments: one line naming the argument and its allowed range, exit 2, before anything runs; -o is written only
at the end of a complete run. --self-test: argument checks, the loss-agreement statistic on synthetic curves and the
report writer, without torch or a GPU.
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dbstats  # noqa: E402  (the scripts' one statistics module)
from peers import sanitize  # noqa: E402  (NaN / inf -> null, as every peer report writes them)
import dropbench_attn as dba  # noqa: E402  (the instantiated head dims and rounds: kernels/common/dispatch.cuh)
import h2h_attention as h2h  # noqa: E402  (the variant and heads parsers; Runner.burst: CUDA-event bursts)
import selftest  # noqa: E402  (the self-tests' shared checks)

TOOL_VERSION = "1"
OURS = {"ours": ("none", "mask", "fused"), "ours-det": ("none", "mask", "fused")}
SDPA = {"cudnn": ("none", "dropout"), "flash": ("none", "dropout")}
DEFAULT_VARIANTS = "ours:fused,ours:mask,cudnn:dropout,flash:dropout"
MARKOV_SUCCESSORS = 4
PROFILE_WARM_STEPS = 3
# The host-time probe's GPU sleep, in multiples of the variant's median step time, at an assumed 2 GHz SM clock (a
# slower clock only lengthens the sleep).
HOST_SLEEP_STEPS = 4
SLEEP_CYCLES_PER_S = 2.0e9
# Host-bound: issuing one step takes at least this share of the step time while the GPU is busy elsewhere.
HOST_BOUND_SHARE = 0.9
# Kernel families of a profiled step, by the kernel's (demangled) name: the first pattern that matches.
KERNEL_GROUPS = (("attention", r"dropbench|attn|sdpa|fmha|flash|cudnn"), ("gemm", r"gemm|nvjet|cutlass|xmma"),
                 ("other", r""))


UsageError = h2h.UsageError  # one exception for bad arguments across the peer scripts


# ---------------------------------------------------------------------------------------------------------------
# arguments (no torch)
# ---------------------------------------------------------------------------------------------------------------

def _int(name, lo, hi):
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi:
            raise UsageError(f"--{name}: an integer in [{lo}, {hi}] (got {s!r})")
        return v
    return parse


def _float(name, lo, hi, lo_open=False, hi_open=False):
    def parse(s):
        try:
            v = float(s)
        except ValueError:
            v = None
        ok = v is not None and math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
        if not ok:
            raise UsageError(f"--{name}: a number in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'} "
                             f"(got {s!r})")
        return v
    return parse


def _choice(name, choices, conv=str):
    def parse(s):
        try:
            v = conv(s)
        except ValueError:
            v = None
        if v not in choices:
            raise UsageError(f"--{name}: one of {', '.join(str(c) for c in choices)} (got {s!r})")
        return v
    return parse


def variant_list(s):
    return h2h.parse_variants(s, {**OURS, **SDPA})


def heads(s):
    return h2h.heads(s, max_hq=128)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors (unknown option, missing value): one line, exit 2
        raise UsageError(message)


def parse_args(argv):
    ap = _Parser(prog="train_peer.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, type=variant_list)
    ap.add_argument("--layers", default=4, type=_int("layers", 1, 64))
    ap.add_argument("--seq", default=2048, type=_int("seq", 64, 16384))
    ap.add_argument("--batch", default=4, type=_int("batch", 1, 64))
    ap.add_argument("--heads", default="8:8", type=heads)
    ap.add_argument("--head-dim", default=128, type=_choice("head-dim", dba.HEAD_DIMS, int))
    ap.add_argument("--vocab", default=4096, type=_int("vocab", 64, 131072))
    ap.add_argument("--mlp-ratio", default=4, type=_int("mlp-ratio", 1, 8))
    ap.add_argument("--precision", default="autocast", type=_choice("precision", ("autocast", "bf16")))
    ap.add_argument("--lr", default=1e-3, type=_float("lr", 0, 1, lo_open=True))
    ap.add_argument("--lr-warmup", default=50, type=_int("lr-warmup", 0, 100000))
    ap.add_argument("--clip", default=1.0, type=_float("clip", 0, 1e6))
    ap.add_argument("--dropout-p", default=0.1, type=_float("dropout-p", 0, 1, lo_open=True, hi_open=True))
    ap.add_argument("--philox-rounds", default=dba.DEFAULT_ROUNDS,
                    type=_choice("philox-rounds", dba.PHILOX_ROUNDS, int))
    ap.add_argument("--steps", default=300, type=_int("steps", 10, 100000))
    ap.add_argument("--window", default=10, type=_int("window", 1, 1000))
    ap.add_argument("--warmup-windows", default=2, type=_int("warmup-windows", 0, 100))
    ap.add_argument("--replicas", default=4, type=_int("replicas", 2, 16))
    ap.add_argument("--last-k", default=50, type=_int("last-k", 1, 100000))
    ap.add_argument("--loss-margin", default=0.02, type=_float("loss-margin", 0, 10, lo_open=True))
    ap.add_argument("--loss-ref", default=None)
    ap.add_argument("--attn-rounds", default=10, type=_int("attn-rounds", 2, 200))
    ap.add_argument("--attn-burst-ms", default=20.0, type=_float("attn-burst-ms", 1, 1000))
    ap.add_argument("--profile-steps", default=0, type=_int("profile-steps", 0, 1000))
    ap.add_argument("--host-reps", default=5, type=_int("host-reps", 0, 100))
    ap.add_argument("--profile-trace", default=None)
    ap.add_argument("--seed", default=1234, type=_int("seed", 0, 2 ** 31 - 1))
    ap.add_argument("--device", default=0, type=_int("device", 0, 63))
    ap.add_argument("--lib", default=None)
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--md", default=None)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    a.hq, a.hkv = a.heads
    a.heads = f"{a.hq}:{a.hkv}"
    need = a.window * (a.warmup_windows + 2)
    if a.steps < need:
        raise UsageError(f"--steps: at least --window x (--warmup-windows + 2) = {need}, two timed windows (got {a.steps})")
    if a.last_k > a.steps:
        raise UsageError(f"--last-k: in [1, --steps = {a.steps}] (got {a.last_k})")
    if a.loss_ref is None:
        a.loss_ref = next((v for v in a.variants if v.endswith(":dropout")), a.variants[0])
    elif a.loss_ref not in a.variants:
        raise UsageError(f"--loss-ref: one of --variants ({', '.join(a.variants)}) (got {a.loss_ref!r})")
    for path, name in ((a.output, "-o"), (a.md, "--md")):
        if path and not Path(path).resolve().parent.is_dir():
            raise UsageError(f"{name}: the directory of {path!r} does not exist")
    if a.profile_trace and not Path(a.profile_trace).is_dir():
        raise UsageError(f"--profile-trace: {a.profile_trace!r} is not a directory")
    if a.profile_trace and not a.profile_steps:
        raise UsageError("--profile-trace: needs --profile-steps in [1, 1000]")
    for name, n in (("--profile-steps", a.profile_steps), ("--host-reps", a.host_reps)):
        if n + PROFILE_WARM_STEPS > a.steps:
            raise UsageError(f"{name}: in [0, --steps - {PROFILE_WARM_STEPS} = {a.steps - PROFILE_WARM_STEPS}] "
                             f"(got {n})")
    return a


def variant_p(name, p):
    """The dropout probability a variant trains with: 0 for the modes without dropout."""
    return 0.0 if name.split(":")[1] == "none" else p


# ---------------------------------------------------------------------------------------------------------------
# the loss-curve statistic (no torch)
# ---------------------------------------------------------------------------------------------------------------

def last_k_means(curves, k):
    """Per replica: the mean of its last k losses. curves: one list of per-step losses per replica."""
    return [dbstats.mean(c[-k:]) for c in curves]


def equivalence_verdict(lo, hi, margin):
    """The two one-sided tests at 2.5 % per side on a 95 % interval [lo, hi] of a difference, margin > 0."""
    if -margin <= lo and hi <= margin:
        return "equivalent"
    if lo > margin or hi < -margin:
        return "different"
    return "inconclusive"


def loss_agreement(curves, ref, last_k, margin, p_of):
    """Rows comparing every variant with `ref`: curves {variant: [per-replica per-step losses]}, replica r of every
    variant paired (same initial weights and batches); p_of {variant: dropout p}. Variants with another p than the
    reference are listed as not comparable."""
    rows = []
    m_ref = last_k_means(curves[ref], last_k)
    for v, cs in curves.items():
        if v == ref:
            continue
        if p_of[v] != p_of[ref]:
            rows.append({"variant": v, "reference": ref, "verdict": "not comparable",
                         "why": f"dropout p {p_of[v]:g} vs the reference's {p_of[ref]:g}"})
            continue
        m = last_k_means(cs, last_k)
        n = min(len(m), len(m_ref))
        d = [m[r] - m_ref[r] for r in range(n)]
        mean, lo, hi = dbstats.mean_ci_t(d)
        rows.append({"variant": v, "reference": ref, "replicas": n, "last_k": last_k,
                     "loss_last_k": dbstats.mean(m[:n]), "loss_last_k_reference": dbstats.mean(m_ref[:n]),
                     "diff_mean": mean, "diff_ci95": [lo, hi], "diff_per_replica": d, "margin": margin,
                     "verdict": equivalence_verdict(lo, hi, margin), "detectable_difference": lo > 0 or hi < 0})
    return rows


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------

def write_atomic(path, text):
    """tmp + fsync + rename: a reader never sees half a report, and a failed run leaves the old one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=str(path.resolve().parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def report_json(doc):
    return json.dumps(sanitize(doc), indent=1, allow_nan=False) + "\n"


def _fmt(x, nd=3):
    return "—" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def host_verdict(h):
    """A variant's host verdict from its --host-reps measurement: issuing one step takes HOST_BOUND_SHARE of the step
    time or more while the GPU is busy elsewhere (host-bound: Python and launch work decide the step), less
    (GPU-bound), or the step waits for the GPU inside it (a synchronising call), which hides the issue time."""
    if h["synchronises"]:
        return "synchronises inside the step"
    return "host-bound" if h["issue_over_step"] >= HOST_BOUND_SHARE else "GPU-bound"


def md_tables(doc):
    lines = ["| variant | step ms (95 % CI) | J / step | attention ms / step (share) | peak MiB (above start) | "
             "loss, last k |", "|---|---|---|---|---|---|"]
    for name, v in doc["variants"].items():
        if "skipped" in v:
            lines.append(f"| {name} | skipped: {v['skipped']} | | | | |")
            continue
        st, at = v["step_s"], v.get("attention") or {}
        ci = st["ci95"]
        share = at.get("share")
        lines.append(f"| {name} | {_fmt(st['median'] * 1e3, 2)} ({_fmt(ci[0] * 1e3, 2)}–{_fmt(ci[1] * 1e3, 2)}) | "
                     f"{_fmt(v.get('j_per_step'), 2)} | {_fmt((at.get('per_step_s') or 0) * 1e3, 2)} "
                     f"({_fmt(share * 100 if share is not None else None, 1)} %) | "
                     f"{v['peak_allocated_bytes'] / 2 ** 20:.0f} ({v['step_peak_above_start_bytes'] / 2 ** 20:.0f}) | "
                     f"{_fmt(v['loss_last_k_mean'])} |")
    host = {name: v["host"] for name, v in doc["variants"].items() if v.get("host")}
    if host:
        lines += ["", "| host issue time (one step, GPU busy elsewhere) | median ms | min ms | / step time | verdict |",
                  "|---|---|---|---|---|"]
        for name, h in host.items():
            lines.append(f"| {name} | {_fmt(h['issue_s']['median'] * 1e3, 2)} | {_fmt(h['issue_s']['min'] * 1e3, 2)} | "
                         f"{_fmt(h['issue_over_step'])} | {host_verdict(h)} |")
    if doc.get("ratios"):
        lines += ["", "| step time ratio | median | 95 % CI | windows |", "|---|---|---|---|"]
        for r in doc["ratios"]:
            lines.append(f"| {r['num']} / {r['den']} | {_fmt(r['median'])} | {_fmt(r['ci95'][0])}–{_fmt(r['ci95'][1])} "
                         f"| {r['windows']} |")
        bound = [n for n in dict.fromkeys(x for r in doc["ratios"] for x in (r["num"], r["den"]))
                 if host.get(n) and host_verdict(host[n]) == "host-bound"]
        if bound:
            lines += ["", f"Host-bound on this machine: {', '.join(bound)}. Their steps wait on Python and launch work, "
                      "so a ratio with them in it compares the host's work as well as the kernels; the attention "
                      "column compares the kernels alone."]
    if doc.get("loss_agreement"):
        lines += ["", f"| loss vs {doc['loss_agreement'][0]['reference']} | mean diff (nats) | 95 % CI | verdict |",
                  "|---|---|---|---|"]
        for r in doc["loss_agreement"]:
            if "diff_mean" in r:
                lines.append(f"| {r['variant']} | {_fmt(r['diff_mean'], 4)} | {_fmt(r['diff_ci95'][0], 4)}–"
                             f"{_fmt(r['diff_ci95'][1], 4)} | {r['verdict']} (margin {r['margin']:g}) |")
            else:
                lines.append(f"| {r['variant']} | | | {r['verdict']}: {r['why']} |")
    prof = {name: v["profile"] for name, v in doc["variants"].items() if v.get("profile")}
    if prof:
        groups = [g for g, _ in KERNEL_GROUPS]
        lines += ["", "| profiled step (torch.profiler) | wall ms | GPU busy ms | GPU idle ms | "
                  + " | ".join(f"{g} ms" for g in groups) + " | kernels |", "|---" * (5 + len(groups)) + "|"]
        for name, p in prof.items():
            if "error" in p:
                lines.append(f"| {name} | not profiled: {p['error']} |" + " |" * (3 + len(groups)))
                continue
            lines.append(f"| {name} | {_fmt(p['wall_ms'], 2)} | {_fmt(p['gpu_busy_ms'], 2)} | "
                         f"{_fmt(p['gpu_idle_ms'], 2)} | " + " | ".join(_fmt(p["group_ms"][g], 2) for g in groups)
                         + f" | {p['kernels_per_step']:.1f} |")
    return "\n".join(lines) + "\n"


def gpu_activity(events, cuda):
    """[(name, start_us, end_us)] of the GPU's kernels, memsets and memcpys among torch.profiler's events: device
    events that are not user annotations (a record_function range, e.g. Optimizer.step's, also has a GPU span that
    covers its kernels and the gaps between them)."""
    return [(e.name, e.time_range.start, e.time_range.end) for e in events
            if e.device_type == cuda and not getattr(e, "is_user_annotation", False)]


def profile_summary(kernels, steps, wall_s, top=8):
    """Per step, from one profiled run of `steps` steps: `kernels` = [(name, start_us, end_us)] of every GPU kernel,
    memset and memcpy; wall_s = host time of the steps (synchronised at both ends). busy = the union of the kernels'
    intervals (concurrent kernels count once), idle = wall - busy: the time the GPU waited for the host; groups and
    top = summed kernel durations (concurrent kernels each count)."""
    busy, end = 0.0, None
    for _, t0, t1 in sorted(kernels, key=lambda k: k[1]):
        if end is None or t0 > end:
            busy += t1 - t0
            end = t1
        elif t1 > end:
            busy += t1 - end
            end = t1
    groups = {g: 0.0 for g, _ in KERNEL_GROUPS}
    by_name = {}
    for name, t0, t1 in kernels:
        g = next(g for g, pat in KERNEL_GROUPS if re.search(pat, name, re.IGNORECASE))
        groups[g] += t1 - t0
        n = by_name.setdefault(name, [0.0, 0])
        n[0] += t1 - t0
        n[1] += 1
    ms = 1e-3 / steps
    wall_ms = wall_s * 1e3 / steps
    return {"steps": steps, "wall_ms": wall_ms, "gpu_busy_ms": busy * ms, "gpu_idle_ms": wall_ms - busy * ms,
            "kernels_per_step": len(kernels) / steps, "group_ms": {g: t * ms for g, t in groups.items()},
            "top": [{"name": n[:160], "ms": t * ms, "calls": c / steps}
                    for n, (t, c) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]]}


# ---------------------------------------------------------------------------------------------------------------
# GPU part
# ---------------------------------------------------------------------------------------------------------------

def make_data(torch, a, dev):
    """[steps, batch, seq + 1] int64 tokens: per sequence a Markov walk (MARKOV_SUCCESSORS successors per token) for
    the first half, repeated in the second half; fixed by --seed, the same for every variant."""
    g = torch.Generator(device=dev)
    g.manual_seed(a.seed)
    n, length = a.steps * a.batch, a.seq + 1
    half = (length + 1) // 2
    succ = torch.randint(0, a.vocab, (a.vocab, MARKOV_SUCCESSORS), device=dev, generator=g)
    pick = torch.randint(0, MARKOV_SUCCESSORS, (n, half), device=dev, generator=g)
    seq = torch.empty(n, length, dtype=torch.long, device=dev)
    cur = torch.randint(0, a.vocab, (n,), device=dev, generator=g)
    for t in range(half):
        seq[:, t] = cur
        cur = succ[cur, pick[:, t]]
    seq[:, half:] = seq[:, :length - half]
    return seq.view(a.steps, a.batch, length)


def build_classes(torch):
    nn, F = torch.nn, torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}

    class SdpaAttention(nn.Module):
        """SDPA on a packed QKV projection output [B, S, (Hq+2Hkv)*D] -> [B, S, Hq*D], one backend forced. layout:
        "views+gqa" (strided views, enable_gqa), "contiguous+gqa", or "expanded" (K, V repeated to the query heads)."""
        LAYOUTS = ("views+gqa", "contiguous+gqa", "expanded")

        def __init__(self, family, hq, hkv, hd, p):
            super().__init__()
            self.backend, self.hq, self.hkv, self.hd, self.p = backends[family], hq, hkv, hd, p
            self.layout = self.LAYOUTS[0]

        def forward(self, qkv):
            b, s, _ = qkv.shape
            x = qkv.view(b, s, self.hq + 2 * self.hkv, self.hd).transpose(1, 2)
            q, k, v = x[:, :self.hq], x[:, self.hq:self.hq + self.hkv], x[:, self.hq + self.hkv:]
            if self.layout != "views+gqa":
                q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            gqa = self.hq != self.hkv
            if self.layout == "expanded" and gqa:
                k = k.repeat_interleave(self.hq // self.hkv, dim=1)
                v = v.repeat_interleave(self.hq // self.hkv, dim=1)
                gqa = False
            with sdpa_kernel(self.backend):
                o = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                                   is_causal=True, enable_gqa=gqa)
            return o.transpose(1, 2).reshape(b, s, self.hq * self.hd)

    class Block(nn.Module):
        def __init__(self, d, cols, hq, hd, mlp, attn):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, cols, bias=False)
            self.proj = nn.Linear(hq * hd, d, bias=False)
            self.fc1, self.fc2 = nn.Linear(d, mlp * d), nn.Linear(mlp * d, d)
            self.attn = attn

        def forward(self, x):
            x = x + self.proj(self.attn(self.qkv(self.ln1(x))))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class CausalLM(nn.Module):
        def __init__(self, a, make_attn):
            super().__init__()
            d = a.hq * a.head_dim
            cols = (a.hq + 2 * a.hkv) * a.head_dim
            self.tok, self.pos = nn.Embedding(a.vocab, d), nn.Embedding(a.seq, d)
            self.blocks = nn.ModuleList(Block(d, cols, a.hq, a.head_dim, a.mlp_ratio, make_attn())
                                        for _ in range(a.layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, a.vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    return SdpaAttention, CausalLM


class Trainee:
    """One training run: a variant's model, optimizer and per-step losses (kept on the device until the end)."""

    def __init__(self, torch, a, variant, replica, model, data):
        self.torch, self.a, self.variant, self.replica, self.model, self.data = torch, a, variant, replica, model, data
        try:
            self.opt = torch.optim.AdamW(model.parameters(), lr=a.lr, fused=True)
        except (RuntimeError, TypeError):
            self.opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
        self.losses = torch.zeros(a.steps, device=data.device, dtype=torch.float32)
        self.i = 0

    def step(self):
        torch, a = self.torch, self.a
        batch = self.data[self.i]
        x, y = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "autocast"):
            logits = self.model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab), y.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.clip)
        if self.i < a.lr_warmup:  # after the warm-up the rate stays at --lr (set on the last warm-up step)
            for g in self.opt.param_groups:
                g["lr"] = a.lr * min(1.0, (self.i + 1) / a.lr_warmup)
        self.opt.step()
        self.losses[self.i] = loss.detach()
        self.i += 1


class Peer:
    def __init__(self, a):
        import torch
        import peers                # device_context, git_sha: the same context as every peer script
        self.torch, self.h2h, self.peers, self.a = torch, h2h, peers, a
        self.runner = h2h.Runner(argparse.Namespace(lib=a.lib, lib_b=None, device=a.device, settle_ms=0.0))
        self.dev = self.runner.dev
        import dropbench_torch as dbt
        self.dbt = dbt
        self.lib = dbt.get_lib(a.lib)
        self.SdpaAttention, self.CausalLM = build_classes(torch)

    def make_attn(self, variant):
        fam, mode = variant.split(":")
        a = self.a
        p = variant_p(variant, a.dropout_p)
        if fam in OURS:
            return self.dbt.DropbenchAttention(a.hq, a.hkv, a.head_dim, dropout_p=p, causal=True,
                                               mode="none" if p == 0 else mode, deterministic=fam == "ours-det",
                                               rounds=a.philox_rounds, lib=self.lib)
        return self.SdpaAttention(fam, a.hq, a.hkv, a.head_dim, p)

    def probe(self, variant):
        """The attention module for the variant, with an SDPA layout the backend accepts (fwd + bwd tried on the
        model's shape); raises RuntimeError where none does."""
        torch, a = self.torch, self.a
        attn = self.make_attn(variant).to(self.dev)
        qkv = torch.randn(a.batch, a.seq, (a.hq + 2 * a.hkv) * a.head_dim, device=self.dev, dtype=torch.bfloat16,
                          requires_grad=True)
        layouts = attn.LAYOUTS if isinstance(attn, self.SdpaAttention) else (None,)
        errors = []
        for layout in layouts:
            if layout:
                attn.layout = layout
            try:
                attn(qkv).float().sum().backward()
                torch.cuda.synchronize()
                return attn
            except RuntimeError as e:
                errors.append(f"{layout}: {str(e).splitlines()[0][:200]}")
        raise RuntimeError("; ".join(errors))

    def trainee(self, variant, replica, layouts, data):
        """A training run of the variant: replica r starts from the same weights in every variant."""
        torch, a = self.torch, self.a
        torch.manual_seed(a.seed * 1000 + replica)
        model = self.CausalLM(a, lambda: self.make_attn(variant)).to(self.dev)
        for blk in model.blocks:
            if isinstance(blk.attn, self.SdpaAttention):
                blk.attn.layout = layouts[variant]
        if a.precision == "bf16":
            model = model.to(torch.bfloat16)
        return Trainee(torch, a, variant, replica, model.train(), data)

    def run(self, argv):
        torch, a = self.torch, self.a
        runner = self.runner
        data = make_data(torch, a, self.dev)
        variants, skipped, layouts = [], {}, {}
        for v in a.variants:
            try:
                attn = self.probe(v)
                layouts[v] = getattr(attn, "layout", None)
                variants.append(v)
            except RuntimeError as e:
                skipped[v] = str(e)
                print(f"train_peer: {v} skipped: {e}", file=sys.stderr, flush=True)
        trainees = [self.trainee(v, r, layouts, data) for v in variants for r in range(a.replicas)]
        torch.manual_seed(a.seed)  # the dropout streams (PyTorch's generator, also for ours)
        windows = math.ceil(a.steps / a.window)
        order_rng = random.Random(a.seed)
        samples = {v: [] for v in variants}
        peak = {v: 0 for v in variants}
        peak_above = {v: 0 for v in variants}
        print(f"train_peer: {len(trainees)} runs x {a.steps} steps, {windows} windows", file=sys.stderr, flush=True)
        t_start = time.time()
        for w in range(windows):
            n = min(a.window, a.steps - w * a.window)
            order = trainees[:]
            order_rng.shuffle(order)
            per = {v: [] for v in variants}
            for pos, tr in enumerate(order):
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                t, j, mhz = runner.burst(tr.step, n)
                pk = torch.cuda.max_memory_allocated()
                peak[tr.variant] = max(peak[tr.variant], pk)
                peak_above[tr.variant] = max(peak_above[tr.variant], pk - base)
                per[tr.variant].append((t, j, mhz, pos))
            if w >= a.warmup_windows:
                for v, xs in per.items():
                    js = [x[1] for x in xs if x[1] is not None]
                    ms = [x[2] for x in xs if x[2] is not None]
                    samples[v].append({"round": w, "s_per_step": dbstats.mean([x[0] for x in xs]),
                                       "j_per_step": dbstats.mean(js) if len(js) == len(xs) else None,
                                       "mean_mhz": dbstats.mean(ms) if ms else None,
                                       "positions": [x[3] for x in xs], "steps": n})
        print(f"train_peer: training done in {time.time() - t_start:.0f} s", file=sys.stderr, flush=True)
        curves = {v: [tr.losses.tolist() for tr in trainees if tr.variant == v] for v in variants}
        del trainees  # their models and optimizer states: the attention-alone and profiled runs need the memory
        attn = self.attention_alone(variants, layouts)
        host = self.host_time(variants, layouts, data, samples) if a.host_reps else {}
        prof = self.profile(variants, layouts, data) if a.profile_steps else {}
        return self.document(argv, variants, skipped, layouts, samples, peak, peak_above, curves, attn, host, prof)

    def warm_trainee(self, variant, layouts, data):
        """A fresh replica-0 run of `variant` after PROFILE_WARM_STEPS steps, the GPU idle (the start of the host-time
        probe and of the profiled steps)."""
        tr = self.trainee(variant, 0, layouts, data)
        for _ in range(PROFILE_WARM_STEPS):
            tr.step()
        self.torch.cuda.synchronize()
        return tr

    def host_time(self, variants, layouts, data, samples):
        """Per variant, the host's time to issue one training step while the GPU is busy elsewhere: a fresh replica-0
        model trained PROFILE_WARM_STEPS steps, then --host-reps times: a GPU sleep of HOST_SLEEP_STEPS median step
        times, one step issued under it (timed on the host), a synchronise. A step that issues in less time than the
        GPU takes to run it leaves the GPU no idle time waiting for Python; one that issues in about as long is
        host-bound, and host work then decides its time. A step that waits for the GPU inside (a synchronising call)
        shows as an issue time near the sleep's and is flagged."""
        torch, a = self.torch, self.a
        out = {}
        for v in variants:
            step_s = dbstats.median([x["s_per_step"] for x in samples[v]])
            sleep_s = HOST_SLEEP_STEPS * step_s
            tr = self.warm_trainee(v, layouts, data)
            issue = []
            for _ in range(a.host_reps):
                torch.cuda._sleep(int(sleep_s * SLEEP_CYCLES_PER_S))
                t0 = time.perf_counter()
                tr.step()
                issue.append(time.perf_counter() - t0)
                torch.cuda.synchronize()
            med = dbstats.median(issue)
            out[v] = {"issue_s": {"median": med, "min": min(issue), "samples": issue}, "sleep_s": sleep_s,
                      "issue_over_step": med / step_s, "synchronises": med > 0.5 * sleep_s}
            del tr
        return out

    def profile(self, variants, layouts, data):
        """Per variant, a fresh replica-0 model trained PROFILE_WARM_STEPS steps, then --profile-steps steps under
        torch.profiler: where the step's GPU time goes (profile_summary), and the Chrome trace under --profile-trace."""
        torch, a = self.torch, self.a
        from torch.profiler import ProfilerActivity, profile
        out = {}
        for v in variants:
            tr = self.warm_trainee(v, layouts, data)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                t0 = time.perf_counter()
                for _ in range(a.profile_steps):
                    tr.step()
                torch.cuda.synchronize()
                wall = time.perf_counter() - t0
            kernels = gpu_activity(prof.events(), torch.autograd.DeviceType.CUDA)
            if not kernels:
                out[v] = {"error": "the profiler recorded no GPU activity (CUPTI unavailable?)"}
                continue
            out[v] = profile_summary(kernels, a.profile_steps, wall)
            if a.profile_trace:
                path = Path(a.profile_trace) / f"train_peer_{v.replace(':', '_')}.trace.json"
                prof.export_chrome_trace(str(path))
                out[v]["trace"] = str(path)
            del tr
        return out

    def attention_alone(self, variants, layouts):
        """Seconds per attention forward + backward alone, per variant: interleaved rounds of bursts."""
        torch, a, runner = self.torch, self.a, self.runner
        cols = (a.hq + 2 * a.hkv) * a.head_dim
        qkv = torch.randn(a.batch, a.seq, cols, device=self.dev, dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(a.batch, a.seq, a.hq * a.head_dim, device=self.dev, dtype=torch.bfloat16)
        calls = {}
        for v in variants:
            m = self.make_attn(v).to(self.dev).train()
            if isinstance(m, self.SdpaAttention):
                m.layout = layouts[v]

            def call(m=m):
                qkv.grad = None
                m(qkv).backward(dout)
            calls[v] = call
        n = {}
        for v, fn in calls.items():
            fn()
            t, _, _ = runner.burst(fn, 3)
            n[v] = max(1, int(round(a.attn_burst_ms * 1e-3 / t)))
        rng = random.Random(a.seed + 1)
        out = {v: [] for v in variants}
        for r in range(a.attn_rounds):
            order = list(variants)
            rng.shuffle(order)
            for v in order:
                t, j, mhz = runner.burst(calls[v], n[v])
                out[v].append({"round": r, "s_per_call": t, "j_per_call": j, "mean_mhz": mhz, "calls": n[v]})
        return out

    def context(self, argv):
        torch, peers, runner = self.torch, self.peers, self.runner
        ctx = {"tool": "scripts/train_peer.py", "version": TOOL_VERSION, "git_sha": peers.git_sha(),
               "argv": ["scripts/train_peer.py"] + list(argv),
               "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "hostname": socket.gethostname(), "python": platform.python_version(), "library": str(self.lib.path),
               "power_reading": "NVML_FI_DEV_POWER_INSTANT polled every 2 ms" if runner.power_ok else "none"}
        ctx.update(peers.device_context(torch, self.a, runner.nvml))
        ctx["clocks"]["sm_mhz_at_end"] = runner.nvml.sm_mhz()
        ctx["method"] = ("one process; per window every (variant, replica) runs its next steps as one burst in a seeded "
                         "random order (CUDA events; SM clock and instantaneous power polled every 2 ms); step time per "
                         "variant and window = mean over replicas; median over windows + 95 % percentile bootstrap; "
                         "ratios paired per window; loss agreement: 95 % t interval of the paired last-k mean loss "
                         "difference over replicas against +-margin")
        return ctx

    def document(self, argv, variants, skipped, layouts, samples, peak, peak_above, curves, attn, host, prof):
        a = self.a
        doc = {"schema": "dropbench.train_peer", "schema_version": 1, "context": self.context(argv),
               "config": {k: getattr(a, k) for k in ("variants", "layers", "seq", "batch", "heads", "head_dim",
                                                     "vocab", "mlp_ratio", "precision", "lr", "lr_warmup", "clip", "dropout_p",
                                                     "philox_rounds", "steps", "window", "warmup_windows",
                                                     "replicas", "last_k", "loss_margin", "loss_ref", "attn_rounds",
                                                     "attn_burst_ms", "profile_steps", "host_reps", "seed")},
               "variants": {}, "ratios": [], "loss_agreement": []}
        doc["config"]["d_model"] = a.hq * a.head_dim
        for v in a.variants:
            if v in skipped:
                doc["variants"][v] = {"skipped": skipped[v]}
                continue
            ts = [s["s_per_step"] for s in samples[v]]
            med, lo, hi = dbstats.boot_median_ci(ts, seed=0)
            js = [s["j_per_step"] for s in samples[v] if s["j_per_step"] is not None]
            at = [s["s_per_call"] for s in attn[v]]
            amed, alo, ahi = dbstats.boot_median_ci(at, seed=1)
            ent = {"step_s": {"median": med, "ci95": [lo, hi], "windows": len(ts), "stats": dbstats.summary(ts)},
                   "j_per_step": dbstats.median(js) if js else None,
                   "mean_mhz": dbstats.mean([s["mean_mhz"] for s in samples[v] if s["mean_mhz"]] or [0.0]),
                   "peak_allocated_bytes": peak[v], "step_peak_above_start_bytes": peak_above[v],
                   "attention": {"fwd_bwd_s": {"median": amed, "ci95": [alo, ahi], "rounds": len(at)},
                                 "per_step_s": amed * a.layers, "share": amed * a.layers / med,
                                 "share_range": [alo * a.layers / hi, ahi * a.layers / lo]},
                   "dropout_p": variant_p(v, a.dropout_p), "samples": samples[v], "attention_samples": attn[v],
                   "loss_last_k_per_replica": last_k_means(curves[v], a.last_k),
                   "loss_curve_mean": [dbstats.mean(col) for col in zip(*curves[v])],
                   "loss_curves": curves[v]}
            ent["loss_last_k_mean"] = dbstats.mean(ent["loss_last_k_per_replica"])
            fam, mode = v.split(":")
            if fam in OURS:
                sh = self.dbt.Shape(a.batch, a.seq, a.hq, a.hkv, a.head_dim, causal=True,
                                    dropout_p=ent["dropout_p"], mode=mode if ent["dropout_p"] else "none",
                                    rounds=a.philox_rounds, deterministic=fam == "ours-det")
                p = sh.params(self.lib)
                ent["kernels"] = {"forward": self.lib.kernel_name(p, sh.mode),
                                  "backward": self.lib.backward_kernel_name(p, sh.mode, sh.deterministic)}
                ent["p_effective"], _ = self.lib.threshold(p)
                if sh.mode == "mask":
                    ent["mask_bytes_per_layer"] = self.lib.mask_bytes(p)
                    ent["mask_bytes_model"] = ent["mask_bytes_per_layer"] * a.layers
            else:
                ent["sdpa_layout"] = layouts[v]
            if v in host:
                ent["host"] = dict(host[v], verdict=host_verdict(host[v]))
            if v in prof:
                ent["profile"] = prof[v]
            doc["variants"][v] = ent
        ours = [v for v in variants if v.split(":")[0] in OURS]
        theirs = [v for v in variants if v.split(":")[0] in SDPA]
        for o in ours:
            for t in theirs:
                if variant_p(o, a.dropout_p) != variant_p(t, a.dropout_p):
                    continue
                r = dbstats.paired_ratios(samples, t, o, field="s_per_step")
                med, lo, hi = dbstats.boot_median_ci(r, seed=len(doc["ratios"]) + 2)
                doc["ratios"].append({"num": t, "den": o, "what": f"{t} / {o} step time (speed-up of ours)",
                                      "median": med, "ci95": [lo, hi], "windows": len(r)})
        if a.loss_ref in curves:
            doc["loss_agreement"] = loss_agreement(curves, a.loss_ref, a.last_k, a.loss_margin,
                                                   {v: variant_p(v, a.dropout_p) for v in curves})
        return doc


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        a = parse_args(argv)
    except UsageError as e:
        print(f"train_peer.py: {e}", file=sys.stderr)
        return 2
    if a.self_test:
        return self_test()
    try:
        import torch
    except ImportError as e:
        print(f"train_peer.py: no CUDA GPU: PyTorch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() <= a.device:
        print(f"train_peer.py: no CUDA GPU: torch {torch.__version__} sees {torch.cuda.device_count()} device(s)",
              file=sys.stderr)
        return 2
    try:
        peer = Peer(a)
    except (FileNotFoundError, RuntimeError) as e:
        print(f"train_peer.py: --lib: {e}", file=sys.stderr)
        return 2
    doc = peer.run(argv)
    md = md_tables(doc)
    if a.output:
        write_atomic(a.output, report_json(doc))
    if a.md:
        c = doc["context"]
        write_atomic(a.md, f"Training-loop peer (`scripts/train_peer.py`), {c['date_utc']}, {c['device'].get('name')}, "
                           f"sha {c['git_sha']}: {a.layers} layers, d {a.hq * a.head_dim}, heads {a.heads}, dH "
                           f"{a.head_dim}, B {a.batch}, S {a.seq}, p {a.dropout_p}, {a.steps} steps x {a.replicas} "
                           f"replicas, windows of {a.window} steps.\n\n" + md)
    print(md)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# self-test (CI: no torch, no GPU)
# ---------------------------------------------------------------------------------------------------------------

def self_test():
    import subprocess
    fails = []
    ok, refused = selftest.checker(fails, parse_args, UsageError)

    a = parse_args([])
    ok(a.variants == DEFAULT_VARIANTS.split(",") and a.hq == 8 and a.hkv == 8 and a.loss_ref == "cudnn:dropout"
       and a.steps == 300 and a.head_dim == 128, f"defaults {vars(a)}")
    a = parse_args(["--variants", "ours:mask, flash:dropout,ours:mask", "--heads", "32:8", "--steps", "40",
                    "--window", "10", "--warmup-windows", "2", "--last-k", "40", "--head-dim", "64"])
    ok(a.variants == ["ours:mask", "flash:dropout"] and (a.hq, a.hkv) == (32, 8) and a.loss_ref == "flash:dropout"
       and a.head_dim == 64, f"parsed {vars(a)}")
    ok(parse_args(["--variants", "ours:none,ours-det:fused"]).loss_ref == "ours:none", "no SDPA dropout: first")
    for argv, needle in ((["--variants", "ours:stored"], "--variants"), (["--variants", "cudnn:fused"], "--variants"),
                         (["--heads", "8:3"], "--heads"), (["--heads", "x"], "--heads"), (["--heads", "0:0"], "--heads"),
                         (["--head-dim", "96"], "--head-dim"), (["--layers", "0"], "--layers: an integer in [1, 64]"),
                         (["--seq", "63"], "--seq"), (["--batch", "65"], "--batch"), (["--vocab", "1e3"], "--vocab"),
                         (["--dropout-p", "0"], "--dropout-p: a number in (0, 1)"), (["--dropout-p", "1"], "--dropout-p"),
                         (["--dropout-p", "nan"], "--dropout-p"), (["--lr", "0"], "--lr"),
                         (["--lr-warmup", "-1"], "--lr-warmup"), (["--clip", "-0.5"], "--clip"),
                         (["--philox-rounds", "4"], "--philox-rounds: one of 3, 5, 7, 10"),
                         (["--precision", "fp8"], "--precision"), (["--replicas", "1"], "--replicas: an integer in [2, 16]"),
                         (["--steps", "30"], "--steps: at least"), (["--last-k", "301"], "--last-k"),
                         (["--loss-ref", "flash:none"], "--loss-ref"), (["--loss-margin", "-1"], "--loss-margin"),
                         (["--attn-rounds", "1"], "--attn-rounds"), (["--seed", "-1"], "--seed"),
                         (["--window", "0"], "--window"), (["--bogus"], "unrecognized"), (["--steps"], "--steps"),
                         (["-o", "/nonexistent-dir/x.json"], "-o"), (["--profile-steps", "-1"], "--profile-steps"),
                         (["--profile-steps", "298"], "--profile-steps: in [0, --steps - 3 = 297]"),
                         (["--profile-trace", "/tmp"], "--profile-trace: needs --profile-steps"),
                         (["--profile-steps", "5", "--profile-trace", "/nonexistent-dir"], "--profile-trace"),
                         (["--steps", "50", "--host-reps", "48"], "--host-reps: in [0, --steps - 3 = 47]"),
                         (["--host-reps", "-1"], "--host-reps")):
        refused(argv, needle)
    ok(parse_args(["--profile-steps", "297"]).profile_steps == 297, "--profile-steps at its bound")

    # the profile's summary: overlapping kernels count once in busy, each in its group; idle = wall - busy
    # (unsorted; a kernel nested inside another; a user annotation's GPU span that gpu_activity drops)
    class Ev:
        def __init__(self, name, t0, t1, dev="cuda", annotation=False):
            self.name, self.device_type, self.is_user_annotation = name, dev, annotation
            self.time_range = argparse.Namespace(start=t0, end=t1)
    evs = [Ev("sm90_xmma_gemm_bf16", 200.0, 260.0), Ev("void dropbench::attn_fwd_wgmma_kernel<128>", 0.0, 110.0),
           Ev("Optimizer.step#AdamW.step", 190.0, 500.0, annotation=True), Ev("aten::mm", 0.0, 5.0, dev="cpu"),
           Ev("cudnn_generated_fort_native_sdpa_sm90", 400.0, 440.0), Ev("vectorized_elementwise_kernel", 300.0, 310.0),
           Ev("nvjet_tst_128x256_h_bz", 50.0, 150.0), Ev("Memset (Device)", 20.0, 30.0)]
    ks = gpu_activity(evs, "cuda")
    ok(len(ks) == 6 and not any(k[0].startswith(("Optimizer", "aten")) for k in ks), f"gpu activity {ks}")
    ps = profile_summary(ks, 2, 0.0005)
    ok(abs(ps["gpu_busy_ms"] - 0.130) < 1e-12 and abs(ps["wall_ms"] - 0.25) < 1e-12
       and abs(ps["gpu_idle_ms"] - 0.12) < 1e-12 and ps["kernels_per_step"] == 3
       and abs(ps["group_ms"]["attention"] - 0.075) < 1e-12 and abs(ps["group_ms"]["gemm"] - 0.08) < 1e-12
       and abs(ps["group_ms"]["other"] - 0.01) < 1e-12 and ps["top"][0]["name"].startswith("void dropbench")
       and ps["top"][1]["name"].startswith("nvjet") and ps["top"][0]["calls"] == 0.5, f"profile summary {ps}")

    # the statistic on synthetic curves: replica r shares its start (init) across variants, each run has its own noise
    def curves(offset, noise, replicas, steps=200, seed=0):
        rng = random.Random(seed)
        out = []
        for r in range(replicas):
            level = 0.05 * r  # the replica's own level (its initial weights): paired out
            out.append([8.0 * math.exp(-t / 30) + 1.0 + level + offset + rng.gauss(0, noise) for t in range(steps)])
        return out
    p_of = {"ref": 0.1, "same": 0.1, "shifted": 0.1, "noisy": 0.1, "nodrop": 0.0}
    cs = {"ref": curves(0.0, 0.01, 4, seed=1), "same": curves(0.0, 0.01, 4, seed=2),
          "shifted": curves(0.3, 0.01, 4, seed=3), "noisy": curves(0.0, 0.6, 4, seed=4),
          "nodrop": curves(0.0, 0.01, 4, seed=5)}
    rows = {r["variant"]: r for r in loss_agreement(cs, "ref", 50, 0.02, p_of)}
    ok(set(rows) == {"same", "shifted", "noisy", "nodrop"}, f"rows {sorted(rows)}")
    ok(rows["same"]["verdict"] == "equivalent" and not rows["same"]["detectable_difference"], f"same {rows['same']}")
    ok(rows["shifted"]["verdict"] == "different" and rows["shifted"]["detectable_difference"]
       and abs(rows["shifted"]["diff_mean"] - 0.3) < 0.01, f"shifted {rows['shifted']}")
    ok(rows["noisy"]["verdict"] == "inconclusive", f"noisy {rows['noisy']}")
    ok(rows["nodrop"]["verdict"] == "not comparable", f"nodrop {rows['nodrop']}")
    ok(last_k_means([[1.0, 2.0, 3.0, 5.0]], 2) == [4.0], "last-k mean")
    ok(equivalence_verdict(-0.01, 0.02, 0.02) == "equivalent" and equivalence_verdict(0.03, 0.05, 0.02) == "different"
       and equivalence_verdict(-0.05, -0.021, 0.02) == "different" and equivalence_verdict(0.0, 0.03, 0.02)
       == "inconclusive", "verdicts at the margin")
    # paired d_r cancels the replica levels: without pairing the replica spread (0.05 per replica) would dominate
    ok(rows["same"]["diff_ci95"][1] - rows["same"]["diff_ci95"][0] < 0.02, f"paired width {rows['same']['diff_ci95']}")

    # the report: NaN / inf to null, atomic write, Markdown of a document with a skipped variant
    doc = {"variants": {"ours:fused": {"step_s": {"median": 0.02, "ci95": [0.019, 0.021]}, "j_per_step": float("nan"),
                                       "attention": {"per_step_s": 0.005, "share": 0.25},
                                       "peak_allocated_bytes": 3 << 30, "step_peak_above_start_bytes": 1 << 30,
                                       "loss_last_k_mean": 1.2345, "profile": ps,
                                       "host": {"issue_s": {"median": 0.0185, "min": 0.018}, "issue_over_step": 0.925,
                                                "synchronises": False}},
                        "cudnn:dropout": {"step_s": {"median": 0.02, "ci95": [0.019, 0.021]}, "j_per_step": 7.0,
                                          "attention": {}, "peak_allocated_bytes": 0,
                                          "step_peak_above_start_bytes": 0, "loss_last_k_mean": 1.0,
                                          "host": {"issue_s": {"median": 0.005, "min": 0.004}, "issue_over_step": 0.25,
                                                   "synchronises": False}},
                        "flash:dropout": {"skipped": "no kernel"}},
           "ratios": [{"num": "flash:dropout", "den": "ours:fused", "median": 1.1, "ci95": [1.05, 1.15], "windows": 28}],
           "loss_agreement": [rows["same"], rows["nodrop"]], "x": [float("inf"), (1, 2)]}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.json"
        path.write_text("old\n")
        write_atomic(path, report_json(doc))
        back = json.loads(path.read_text())
        ok(back["variants"]["ours:fused"]["j_per_step"] is None and back["x"] == [None, [1, 2]]
           and os.listdir(d) == ["r.json"], f"written {back.get('x')} {os.listdir(d)}")
        md = md_tables(doc)
        ok("| ours:fused | 20.00 (19.00–21.00) | — | 5.00 (25.0 %) | 3072 (1024) | 1.234 |" in md
           and "skipped: no kernel" in md and "| flash:dropout / ours:fused | 1.100 |" in md
           and "equivalent (margin 0.02)" in md and "not comparable" in md
           and "| ours:fused | 0.25 | 0.13 | 0.12 | 0.07 | 0.08 | 0.01 | 3.0 |" in md
           and "| ours:fused | 18.50 | 18.00 | 0.925 | host-bound |" in md
           and "| cudnn:dropout | 5.00 | 4.00 | 0.250 | GPU-bound |" in md
           and "Host-bound on this machine: ours:fused." in md, f"markdown:\n{md}")
        doc["variants"]["cudnn:dropout"]["host"]["issue_over_step"] = 0.95
        ok("Host-bound on this machine: ours:fused." in md_tables(doc), "a host-bound variant in no ratio is not named")
        doc["variants"]["ours:fused"]["host"]["issue_over_step"] = 0.5
        ok("Host-bound on this machine" not in md_tables(doc), "no host-bound line when every side is GPU-bound")
        # a refused run leaves an existing report as it was, prints one line, exits 2
        path.write_text("keep\n")
        r = subprocess.run([sys.executable, __file__, "--layers", "99", "-o", str(path)], capture_output=True,
                           text=True, timeout=60)
        ok(r.returncode == 2 and r.stderr.count("\n") == 1 and "--layers" in r.stderr and path.read_text() == "keep\n",
           f"refused run: rc {r.returncode} {r.stderr!r}")
        # without PyTorch (CI): one line saying there is no GPU, exit 2, nothing written
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
        if not have_torch:
            r = subprocess.run([sys.executable, __file__, "-o", str(path)], capture_output=True, text=True, timeout=60)
            ok(r.returncode == 2 and r.stderr.count("\n") == 1 and "no CUDA GPU" in r.stderr
               and path.read_text() == "keep\n", f"no GPU: rc {r.returncode} {r.stderr!r}")

    return selftest.report("train_peer", fails)


if __name__ == "__main__":
    sys.exit(main())
