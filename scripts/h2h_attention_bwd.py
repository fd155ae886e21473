#!/usr/bin/env python3
"""Head to head for the attention BACKWARD: dropbench's backward (kernels/attention/bwd/, through
libdropbench_attention.so) and PyTorch's SDPA backward (cuDNN, FlashAttention-2) timed in ONE process, interleaved,
with the sampling, power polling and statistics of scripts/h2h_attention.py (its Runner, summarize, paired ratios:
median over rounds with a 95 % bootstrap interval).

    scripts/h2h_attention_bwd.py -o bwd.json --md bwd.md      # the grid of record: SQ 8K / 16K, dH 128 / 64,
                                                              # causal and not, 32 / 8 heads, 6 rounds of 30 ms
    scripts/h2h_attention_bwd.py --sq 8192 --head-dim 128 --rounds 20 -o one.json   # fewer shapes, more rounds

Variants (PASS:FAMILY:MODE):
  bwd:ours:{none,mask,fused}      our backward alone (fast mode), from the forward's O and LSE; mask reads the 1-bit
                                  mask the RNG kernel wrote before timing; fused regenerates with Philox-R (kernel auto:
                                  the Hopper-native backward on sm_90)
  bwd:ours-det:{none,mask,fused}  the same, deterministic dQ
  bwd:wg:{none,mask,fused}        the same with the Hopper-native (wgmma) backward pinned (kernel wgmma)
  bwd:wg-det:{none,mask,fused}    likewise, deterministic dQ
  bwd:mma:{none,mask,fused}       the same with the mma.sync (FlashAttention-2-class) backward pinned (kernel mma)
  bwd:wgB:{none,mask,fused}       with --lib-b LIB (a second build of the library): its wgmma backward, in the same
  bwd:wgB-det:{none,mask,fused}   rounds (an A/B of two kernel builds in one process); default variants gain
                                  bwd:wgB:{none,mask,fused} and the ratios lib A / lib B
  bwd:mmaB:{none,mask,fused}      with --lib-b LIB: its mma.sync backward (fast dQ), beside bwd:mma
  fb:ours:{none,mask,fused}       forward (wgmma) + backward; fb:ours:mask includes the RNG kernel writing the mask
  fb:wg:{none,mask,fused}         forward + the wgmma backward (fb:FAMILY pins the forward to the family's kernel too:
                                  fb:mma / fb:mmaB run the mma.sync forward)
  bwd:{cudnn,flash}:{none,dropout} torch.autograd.grad of SDPA's output (retain_graph), that backend forced
  fb:{cudnn,flash}:{none,dropout}  SDPA forward + that backward
TFLOP/s: backward 2.5 x the forward's 4*B*Hq*SQ^2*dH (halved when causal), fwd+bwd 3.5 x.

Checks before timing (a failure: exit 1): our dQKV fully written (NaN poison gone); ours (none) against the first
PyTorch backend's dQ, dK, dV without dropout, ||a - b|| / ||b|| <= 2e-2 each (each backward family in the variants);
our deterministic mask == fused bitwise (each family).
"""
import argparse
import datetime
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dropbench_attn as dba  # noqa: E402
import h2h_attention as h2h  # noqa: E402  (Runner: bursts, warm-up, rounds; statistics)
import selftest  # noqa: E402  (the self-tests' shared checks)

DEFAULT_VARIANTS = ("bwd:ours:none,bwd:ours:mask,bwd:ours:fused,bwd:ours-det:none,bwd:mma:none,bwd:wg:none,bwd:wg:mask,bwd:wg:fused,bwd:cudnn:none,bwd:cudnn:dropout,bwd:flash:none,"
                    "bwd:flash:dropout,fb:ours:none,fb:ours:mask,fb:ours:fused,fb:cudnn:none,fb:cudnn:dropout")
KEY_RATIOS = (("bwd:cudnn:none", "bwd:ours:none", "cuDNN bwd none / ours none (speed-up of ours)", ">= 1.0"),
              ("bwd:flash:none", "bwd:ours:none", "FA2 bwd none / ours none", ">= 1.3"),
              ("bwd:ours:mask", "bwd:ours:none", "ours bwd mask / none", "<= 1.05"),
              ("bwd:ours:fused", "bwd:ours:none", "ours bwd regen / none", "<= 1.20"),
              ("bwd:cudnn:none", "bwd:wg:none", "cuDNN bwd none / wgmma bwd none", ">= 1.0"),
              ("bwd:mma:none", "bwd:wg:none", "mma.sync bwd none / wgmma bwd none", ""),
              ("bwd:wg:mask", "bwd:wg:none", "wgmma bwd mask / none", "<= 1.05"),
              ("bwd:wg:fused", "bwd:wg:none", "wgmma bwd regen / none", "<= 1.20"),
              ("bwd:cudnn:dropout", "bwd:ours:mask", "cuDNN bwd dropout / ours mask", ">= 1.15"),
              ("bwd:cudnn:dropout", "bwd:ours:fused", "cuDNN bwd dropout / ours regen", ">= 1.05"),
              ("bwd:cudnn:dropout", "bwd:cudnn:none", "cuDNN bwd dropout / none", ""),
              ("bwd:ours-det:none", "bwd:ours:none", "ours deterministic / atomic dQ", ""),
              ("fb:cudnn:dropout", "fb:ours:mask", "cuDNN fwd+bwd dropout / ours RNG+mask", ">= 1.3"),
              ("fb:cudnn:dropout", "fb:ours:fused", "cuDNN fwd+bwd dropout / ours fused", ">= 1.3"),
              ("fb:cudnn:none", "fb:ours:none", "cuDNN fwd+bwd none / ours none", ""),
              ("bwd:wg:none", "bwd:wgB:none", "wgmma bwd none: lib A / lib B", ""),
              ("bwd:wg:mask", "bwd:wgB:mask", "wgmma bwd mask: lib A / lib B", ""),
              ("bwd:wg:fused", "bwd:wgB:fused", "wgmma bwd regen: lib A / lib B", ""),
              ("bwd:mma:none", "bwd:mmaB:none", "mma.sync bwd none: lib A / lib B", ""),
              ("bwd:mma:mask", "bwd:mmaB:mask", "mma.sync bwd mask: lib A / lib B", ""),
              ("bwd:mma:fused", "bwd:mmaB:fused", "mma.sync bwd regen: lib A / lib B", ""),
              ("bwd:cudnn:none", "bwd:wgB:none", "cuDNN bwd none / lib B wgmma bwd none", ">= 1.0"))
REL_ERR_MAX = 2e-2
# Our backward families: the kernel choice passed to the library (auto = the Hopper-native backward on sm_90, else the
# mma.sync one; wgmma and mma pinned) and whether dQ is deterministic.
LIB_A_FAMILIES = {"ours": ("auto", False), "ours-det": ("auto", True), "wg": ("wgmma", False),
                  "wg-det": ("wgmma", True), "mma": ("mma", False)}
# --lib-b's families: lib B's backward of the lib A family named (the same kernel choice and dQ mode).
LIB_B_FAMILIES = {"wgB": "wg", "wgB-det": "wg-det", "mmaB": "mma"}
OUR_FAMILIES = {**LIB_A_FAMILIES, **{fb: LIB_A_FAMILIES[fa] for fb, fa in LIB_B_FAMILIES.items()}}
OUR_MODES = ("none", "mask", "fused")
# The A/B pairs (lib A's family, lib B's) that run back to back in every round (h2h.round_orders).
AB_PAIRS = [(f"{pas}:{fa}:{m}", f"{pas}:{fb}:{m}") for pas in ("bwd", "fb")
            for fb, fa in LIB_B_FAMILIES.items() for m in OUR_MODES]


def variant_list(s, lib_b=False):
    out = []
    for v in s.split(","):
        v = v.strip()
        parts = v.split(":")
        ok = len(parts) == 3 and parts[0] in ("bwd", "fb") and (
            (parts[1] in OUR_FAMILIES and parts[2] in OUR_MODES) or
            (parts[1] in ("cudnn", "flash") and parts[2] in ("none", "dropout")))
        if not ok:
            raise h2h.UsageError(f"--variants: PASS:FAMILY:MODE, PASS bwd|fb, FAMILY ours|ours-det|wg|wg-det|mma|wgB|wgB-det|mmaB "
                                 f"(none|mask|fused) or cudnn|flash (none|dropout) (got {v!r})")
        if parts[1] in LIB_B_FAMILIES and not lib_b:
            raise h2h.UsageError(f"--variants: family {parts[1]} needs --lib-b (got {v!r})")
        if v not in out:
            out.append(v)
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="h2h_attention_bwd.py", description=__doc__.split("\n\n")[0])
    # The defaults are the backward's grid of record (its targets' shapes: SQ 8K and 16K, dH 128 and 64, causal and not),
    # which scripts/bwd_device.sh and bwd_device_ab.sh time without restating it.
    h2h.add_common_args(ap, sq="8192,16384", head_dim="128,64", rounds=6, burst_ms=30.0, warmup_s=1.0)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--lib-b", help="a second libdropbench_attention.so (another build): its wgmma backward is timed as "
                                    "family wgB in the same rounds (added to the default variants), its mma.sync "
                                    "backward as mmaB (named in --variants)")
    a = h2h.check_common_args(ap.parse_args(argv))
    if a.lib_b and a.variants == DEFAULT_VARIANTS:
        a.variants = DEFAULT_VARIANTS + ",bwd:wgB:none,bwd:wgB:mask,bwd:wgB:fused"
    a.variants = variant_list(a.variants, bool(a.lib_b))
    return a


def ratio_rows(samples):
    rows = []
    for num, den, what, target in KEY_RATIOS:
        r = h2h.paired_ratios(samples, num, den)
        if not r:
            continue
        med, lo, hi = h2h.boot_median_ci(r, seed=len(rows))
        rows.append({"num": num, "den": den, "what": what, "target": target, "median": med, "ci95": [lo, hi],
                     "rounds": len(r)})
    return rows


def shape(r, sq, hd, causal):
    torch, a, lib = r.torch, r.a, r.lib
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    for L in (lib, r.lib_b):
        if L is not None and not L.has_backward:
            raise RuntimeError(f"{L.path}: no dba_attention_backward (an older build)")
    b, hq, hkv = a.batch, a.hq, a.hkv
    fwd_flops = dba.attention_flops(b, hq, sq, hd, causal)
    dev = r.dev
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed + sq * 7 + hd * 3 + int(causal))
    y = torch.randn(b * sq, (hq + 2 * hkv) * hd, device=dev, dtype=torch.bfloat16, generator=gen)
    dout = torch.randn(b * sq, hq * hd, device=dev, dtype=torch.bfloat16, generator=gen)
    stream = torch.cuda.current_stream().cuda_stream
    fields = dict(batch=b, sq=sq, q_heads=hq, kv_heads=hkv, head_dim=hd, causal=causal, dropout_p=a.dropout_p,
                  seed=0x5EED5EED + sq, offset=0, rounds=a.philox_rounds, threshold_bits=dba.DEFAULT_THRESHOLD_BITS)
    o = torch.empty(b * sq, hq * hd, device=dev, dtype=torch.bfloat16)
    lse = torch.empty(b * hq * sq, device=dev, dtype=torch.float32)
    nbytes = lib.mask_bytes(lib.params(**fields))
    mask = torch.empty(max(nbytes // 4, 1), device=dev, dtype=torch.int32)
    lib.make_mask(lib.params(**fields), mask.data_ptr(), stream)
    # One workspace for both libraries: the larger of their layouts (another build may hold more, e.g. dK / dV partials).
    ws_bytes = max(L.backward_workspace_bytes(L.params(**fields), False) for L in (r.lib, r.lib_b) if L is not None)
    ws = torch.empty(ws_bytes // 4 + 64, device=dev, dtype=torch.float32)
    dqkv = {name: torch.empty_like(y) for name in ("a", "b")}

    def prm(mode, kernel="auto", L=lib):
        return L.params(qkv=y.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr(), kernel=kernel,
                          mask=mask.data_ptr() if mode == "mask" else 0, **fields)

    q = y[:, : hq * hd].view(b, sq, hq, hd).transpose(1, 2).contiguous().requires_grad_()
    k = y[:, hq * hd: (hq + hkv) * hd].view(b, sq, hkv, hd).transpose(1, 2).contiguous().requires_grad_()
    v = y[:, (hq + hkv) * hd:].view(b, sq, hkv, hd).transpose(1, 2).contiguous().requires_grad_()
    do4 = dout.view(b, sq, hq, hd).transpose(1, 2).contiguous()
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    calls, info, skipped, checks = {}, {}, {}, {}
    torch_grads = None

    # Each of our variants runs its forward (O, LSE) and one checked backward here; the timed backward-only calls then
    # read whatever O / LSE the last forward left (their values do not change the work); fb variants run both.
    ours_none = {}  # (library, kernel choice) -> our fast-mode dQKV without dropout, checked against PyTorch's

    def our_forward(mode, L=lib):
        if mode == "mask":
            L.make_mask(prm(mode, L=L), mask.data_ptr(), stream)
        L.attention(prm(mode, L=L), mode, stream)

    for name in a.variants:
        pas, fam, mode = name.split(":")
        if fam in OUR_FAMILIES:
            kern, det = OUR_FAMILIES[fam]
            L = r.lib_b if fam in LIB_B_FAMILIES else r.lib
            p = prm(mode, kern, L)
            out = dqkv["a"]
            info[name] = {"kernel": L.backward_kernel_name(p, mode, det), "forward": L.kernel_name(p, mode)}
            our_forward(mode, L)
            out.fill_(float("nan"))
            L.backward(p, mode, dout.data_ptr(), out.data_ptr(), ws.data_ptr(), det, stream)
            torch.cuda.synchronize()
            if not bool(torch.isfinite(out).all()):
                raise RuntimeError(f"{name}: dQKV not fully written at SQ {sq} dH {hd}")
            if pas == "bwd":
                # the timed backward reads this mode's O and LSE; other variants' forwards overwrite O / LSE, so
                # each backward-only call is preceded by nothing: O / LSE values do not change the work done.
                calls[name] = (lambda p=p, mode=mode, det=det, L=L: L.backward(
                    p, mode, dout.data_ptr(), dqkv["b"].data_ptr(), ws.data_ptr(), det, stream))
            else:
                def fb(p=p, mode=mode, det=det, L=L):
                    if mode == "mask":
                        L.make_mask(p, mask.data_ptr(), stream)
                    L.attention(p, mode, stream)
                    L.backward(p, mode, dout.data_ptr(), dqkv["b"].data_ptr(), ws.data_ptr(), det, stream)
                calls[name] = fb
            key = (str(L.path), kern)
            if mode == "none" and not det and key not in ours_none:
                ours_none[key] = out.clone()
        else:
            pd = a.dropout_p if mode == "dropout" else 0.0
            be = backends[fam]
            attempts = [("enable_gqa" if hq != hkv else "MHA", q, k, v)]
            if hq != hkv:  # a backend without GQA: K, V expanded to the query heads (the same attention work)
                ke = k.detach().repeat_interleave(hq // hkv, dim=1).requires_grad_()
                ve = v.detach().repeat_interleave(hq // hkv, dim=1).requires_grad_()
                attempts.append(("K, V expanded to Hq heads", q, ke, ve))
            err = None
            for how, qq, kk, vv in attempts:
                gqa = how == "enable_gqa"
                try:
                    with sdpa_kernel(be):
                        out = F.scaled_dot_product_attention(qq, kk, vv, dropout_p=pd, is_causal=causal, enable_gqa=gqa)
                    g = torch.autograd.grad(out, (qq, kk, vv), do4, retain_graph=True)
                    torch.cuda.synchronize()
                    err = None
                    break
                except Exception as e:
                    err = f"{type(e).__name__}: {e}"[:300]
            if err:
                skipped[name] = err
                continue
            if kk.shape[1] != hkv:
                g = (g[0], g[1].reshape(b, hkv, hq // hkv, sq, hd).sum(2), g[2].reshape(b, hkv, hq // hkv, sq, hd).sum(2))
            if mode == "none" and torch_grads is None:
                torch_grads = (fam, g)
            info[name] = {"kernel": f"torch SDPA {fam} backward (contiguous leaves, {how})", "dropout_p": pd}
            if pas == "bwd":
                calls[name] = (lambda out=out, qq=qq, kk=kk, vv=vv: torch.autograd.grad(out, (qq, kk, vv), do4,
                                                                                       retain_graph=True))
            else:
                def fbt(be=be, pd=pd, qq=qq, kk=kk, vv=vv, gqa=gqa):
                    with sdpa_kernel(be):
                        o2 = F.scaled_dot_product_attention(qq, kk, vv, dropout_p=pd, is_causal=causal, enable_gqa=gqa)
                    torch.autograd.grad(o2, (qq, kk, vv), do4)
                calls[name] = fbt

    # checks: ours none against PyTorch; deterministic mask == fused bitwise; per backward family in the variants
    if torch_grads is not None:
        fam, (gq, gk, gv) = torch_grads
        for (lpath, kern), ours in ours_none.items():
            kern = kern if lpath == str(r.lib.path) else f"lib B {kern}"
            parts = {"dQ": (ours[:, : hq * hd], gq, hq), "dK": (ours[:, hq * hd: (hq + hkv) * hd], gk, hkv),
                     "dV": (ours[:, (hq + hkv) * hd:], gv, hkv)}
            for nm, (mine, ref, nh) in parts.items():
                mine4 = mine.reshape(b, sq, nh, hd).transpose(1, 2).float()
                e = float((mine4 - ref.float()).norm() / ref.float().norm())
                checks[f"ours ({kern}) none {nm} vs {fam} rel err"] = e
                if not e <= REL_ERR_MAX:
                    raise RuntimeError(f"ours ({kern}) none {nm} differs from {fam}: rel err {e:.3g} > {REL_ERR_MAX}")
    kernels = sorted({("B" if n.split(":")[1] in LIB_B_FAMILIES else "A", OUR_FAMILIES[n.split(":")[1]][0])
                      for n in a.variants if n.split(":")[1] in OUR_FAMILIES})
    for which, kern in kernels or [("A", "auto")]:
        L = r.lib_b if which == "B" else r.lib
        tag = kern if which == "A" else f"lib B {kern}"
        our_forward("fused", L)
        L.backward(prm("fused", kern, L), "fused", dout.data_ptr(), dqkv["a"].data_ptr(), ws.data_ptr(), True, stream)
        L.make_mask(prm("mask", kern, L), mask.data_ptr(), stream)
        L.backward(prm("mask", kern, L), "mask", dout.data_ptr(), dqkv["b"].data_ptr(), ws.data_ptr(), True, stream)
        torch.cuda.synchronize()
        eq = bool(torch.equal(dqkv["a"], dqkv["b"]))
        checks[f"ours ({tag}) deterministic mask == fused bitwise"] = eq
        if not eq:
            raise RuntimeError(f"our deterministic mask and fused gradients differ (kernel {tag})")
        if which == "B":
            # lib A's deterministic gradients of the same mode, for the record (a changed dQ order may change bits)
            r.lib.backward(prm("mask", kern, r.lib), "mask", dout.data_ptr(), dqkv["a"].data_ptr(), ws.data_ptr(), True,
                           stream)
            torch.cuda.synchronize()
            checks[f"lib A == lib B ({kern}) deterministic mask gradients bitwise"] = bool(torch.equal(dqkv["a"], dqkv["b"]))

    order_seed = h2h.shape_seed(a.seed, sq, hd, causal)
    samples = r.time(calls, order_seed, AB_PAIRS)
    summary = {}
    for pas, name in (("bwd", "bwd"), ("fb", "fwd+bwd")):
        sub = {n: s for n, s in samples.items() if n.startswith(pas + ":")}
        summary.update(h2h.summarize(sub, dba.attention_flops(b, hq, sq, hd, causal, name)))
    for n, s in summary.items():
        s.update(info.get(n, {}))
    return {"shape": {"batch": b, "sq": sq, "q_heads": hq, "kv_heads": hkv, "head_dim": hd, "causal": causal,
                      "dropout_p": a.dropout_p, "philox_rounds": a.philox_rounds, "fwd_flops": fwd_flops,
                      "order_seed": order_seed},
            "checks": checks, "skipped": skipped, "summary": summary, "ratios": ratio_rows(samples),
            "samples": samples}


def md_tables(points):
    out = []
    for pt in points:
        s = pt["shape"]
        out.append(f"### SQ {s['sq']}, dH {s['head_dim']}, {s['q_heads']}/{s['kv_heads']} heads, "
                   f"{'causal' if s['causal'] else 'non-causal'}, p {s['dropout_p']}\n")
        out.append("| variant | median ms | 95 % CI ms | TFLOP/s | kernel |\n|---|---|---|---|---|")
        for n, v in pt["summary"].items():
            ci = v["ci95_s"]
            out.append(f"| {n} | {h2h.fmt(v['median_s'] * 1e3)} | {h2h.fmt(ci[0] * 1e3)}-{h2h.fmt(ci[1] * 1e3)} | "
                       f"{h2h.fmt(v['tflops'], 1)} | {v.get('kernel', '')} |")
        out.append("\n| ratio | median | 95 % CI | target |\n|---|---|---|---|")
        for rr in pt["ratios"]:
            out.append(f"| {rr['what']} | {h2h.fmt(rr['median'])} | {h2h.fmt(rr['ci95'][0])}-{h2h.fmt(rr['ci95'][1])} "
                       f"| {rr['target']} |")
        if pt["skipped"]:
            out.append("\nskipped: " + "; ".join(f"{k}: {v}" for k, v in pt["skipped"].items()))
        out.append("\nchecks: " + ", ".join(f"{k} = {v}" for k, v in pt["checks"].items()) + "\n")
    return "\n".join(out)


def self_test():
    """No torch, no GPU: the variant grammar, the lib B families, the A/B pairs and the ratio rows."""
    fails = []
    ok, refused = selftest.checker(fails, parse_args, h2h.UsageError)

    a = parse_args([])
    ok(a.variants == DEFAULT_VARIANTS.split(",") and not any(v.split(":")[1] in LIB_B_FAMILIES for v in a.variants),
       f"defaults {a.variants}")
    ab = parse_args(["--lib-b", "/x/lib.so"])
    ok(ab.variants[-3:] == ["bwd:wgB:none", "bwd:wgB:mask", "bwd:wgB:fused"], f"--lib-b adds wgB: {ab.variants}")
    mm = parse_args(["--lib-b", "/x", "--variants", "bwd:mma:fused,bwd:mmaB:fused,bwd:mma:fused"])
    ok(mm.variants == ["bwd:mma:fused", "bwd:mmaB:fused"], f"mmaB with --lib-b, duplicates dropped: {mm.variants}")
    refused(["--variants", "bwd:mmaB:none"], "needs --lib-b")
    refused(["--variants", "bwd:wgB-det:mask"], "needs --lib-b")
    refused(["--variants", "bwd:mma:dropout"], "--variants")
    refused(["--variants", "fwd:ours:none"], "--variants")
    refused(["--variants", "bwd:cudnn:fused"], "--variants")
    ok((OUR_FAMILIES["wgB"], OUR_FAMILIES["wgB-det"], OUR_FAMILIES["mmaB"]) ==
       (("wgmma", False), ("wgmma", True), ("mma", False)), "lib B families' kernels and dQ modes")
    ok(len(AB_PAIRS) == 18 and AB_PAIRS[0] == ("bwd:wg:none", "bwd:wgB:none")
       and ("bwd:mma:fused", "bwd:mmaB:fused") in AB_PAIRS and ("fb:wg-det:mask", "fb:wgB-det:mask") in AB_PAIRS,
       f"A/B pairs {AB_PAIRS}")
    grammar = [f"{p}:{f}:{m}" for p in ("bwd", "fb") for f in OUR_FAMILIES for m in OUR_MODES] + \
              [f"{p}:{f}:{m}" for p in ("bwd", "fb") for f in ("cudnn", "flash") for m in ("none", "dropout")]
    for num, den, what, _ in KEY_RATIOS:
        ok(num in grammar and den in grammar, f"ratio row {what!r} names a variant outside the grammar")
    samples = {n: [{"round": i, "s_per_call": t} for i, t in enumerate(ts)]
               for n, ts in (("bwd:mma:none", [2.0, 2.2, 2.4]), ("bwd:mmaB:none", [1.0, 1.1, 1.2]))}
    rows = ratio_rows(samples)
    ok([r["what"] for r in rows] == ["mma.sync bwd none: lib A / lib B"] and abs(rows[0]["median"] - 2.0) < 1e-9,
       f"lib A / lib B ratio row {rows}")
    # the FLOP convention the TFLOP/s columns use, against values worked by hand: 4 * 32 * 8192^2 * 128 = 2^40,
    # halved when causal, and the backward's 2.5x / fwd+bwd's 3.5x (kernels/common/shapes.hpp)
    fl = [dba.attention_flops(1, 32, 8192, 128, c, p) for c, p in ((False, "fwd"), (True, "fwd"), (True, "bwd"),
                                                                   (False, "fwd+bwd"))]
    ok(fl == [2.0 ** 40, 2.0 ** 39, 2.5 * 2.0 ** 39, 3.5 * 2.0 ** 40], f"attention_flops {fl}")
    return selftest.report("h2h_attention_bwd", fails)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--self-test"]:
        return self_test()
    try:
        a = parse_args(argv)
    except h2h.UsageError as e:
        print(f"h2h_attention_bwd.py: {e}", file=sys.stderr)
        return 2
    r = h2h.Runner(a)
    ctx = r.context(argv)
    ctx["tool"] = "scripts/h2h_attention_bwd.py"
    ctx["argv"] = ["scripts/h2h_attention_bwd.py"] + list(argv)
    points = []
    for hd in a.head_dim:
        for sq in a.sq:
            for causal in a.causal:
                print(f"h2h bwd: SQ {sq} dH {hd} causal {causal}", file=sys.stderr, flush=True)
                points.append(shape(r, sq, hd, causal))
                r.torch.cuda.empty_cache()
    ctx["sm_mhz_at_end"] = r.nvml.sm_mhz()
    ctx["date_utc_end"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"schema": "dropbench.h2h_attention_bwd", "schema_version": 1, "context": ctx, "points": points}
    md = md_tables(points)
    if a.output:
        Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    if a.md:
        Path(a.md).write_text(f"Backward head to head, one process, {ctx['date_utc']}, {ctx['device'].get('name')}, "
                              f"sha {ctx['git_sha']}, B {a.batch}, {a.hq}/{a.hkv} heads, p {a.dropout_p}, "
                              f"Philox-{a.philox_rounds}, {a.rounds} rounds of ~{a.burst_ms:g} ms bursts.\n\n" + md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
