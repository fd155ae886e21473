#!/usr/bin/env python3
"""Peer numbers for `dropbench gemm`: the QKV projection GEMM through PyTorch on the same shapes.

    Y[M, N] = X[M, K] @ W[N, K]^T    M = batch*SQ, K = E, N = (Hq + 2*Hkv)*dH

fp8: torch._scaled_mm on e4m3 inputs with per-tensor fp32 scales, bf16 output, use_fast_accum=True
     (W passed as W.t(), i.e. column-major, which is cuBLASLt's "TN" layout: the same one dropbench uses).
bf16: torch.matmul(X, W.t()).

Method (as dropbench's harness): random inputs (never zeros), warm-up, a CUDA event pair around every
single GEMM, the median of --reps (>= 50) kept. TFLOP/s = 2*M*N*K / median.

N does NOT grow with E by default: Hq/Hkv/dH default to 32/8/128 (N = 6144), as in dropbench's built-in
workload. --heads-from-embed sets Hq = Hkv = E/dH (multi-head attention, N = 3E).

Prints a markdown table on stdout; --json FILE writes the rows (plus torch/cuda versions and the device).
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dbstats  # noqa: E402  (the scripts' one statistics module)


def parse_list(s):
    return [int(v) for v in s.split(",") if v]


def time_fields(times_ms):
    """A row's timing fields from the per-GEMM times (ms): median, min, max and the relative stdev."""
    st = dbstats.summary(times_ms)
    return dict(median_ms=st["median"], min_ms=st["min"], max_ms=st["max"], rel_stdev=st["rel_stdev"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sq", default="4096,8192,16384", help="sequence lengths (comma list)")
    ap.add_argument("--embed", default="4096,8192,16384", help="model widths E = K (comma list)")
    ap.add_argument("--dtype", default="fp8,bf16", help="fp8 and/or bf16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--q-heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--heads-from-embed", action="store_true", help="Hq = Hkv = E / head_dim (N = 3E)")
    ap.add_argument("--reps", type=int, default=50, help="timed GEMMs per point (>= 50)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=0.0,
                    help="keep timing until this many seconds of GEMMs (at most 5000 reps): the same steady-state "
                         "duration as dropbench's measure.min_time, so both see the clocks a sustained run gets")
    ap.add_argument("--no-fast-accum", action="store_true", help="fp8: use_fast_accum=False")
    ap.add_argument("--json", default="", help="write the rows here")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    if a.reps < 50:
        ap.error("--reps must be >= 50")

    import torch

    if not torch.cuda.is_available():
        print("peer_gemm: no CUDA device", file=sys.stderr)
        return 2
    torch.cuda.set_device(a.device)
    dev = torch.device("cuda", a.device)
    gen = torch.Generator(device=dev)
    gen.manual_seed(0x5EED)

    rows = []
    for sq in parse_list(a.sq):
        for e in parse_list(a.embed):
            hq, hkv = (e // a.head_dim, e // a.head_dim) if a.heads_from_embed else (a.q_heads, a.kv_heads)
            m, k, n = a.batch * sq, e, (hq + 2 * hkv) * a.head_dim
            # Real-valued operands in [-1, 1); fp8 stores them divided by the per-tensor scale (amax 300 / 200,
            # inside e4m3's 448), as dropbench does.
            x = torch.rand(m, k, device=dev, generator=gen, dtype=torch.float32) * 2 - 1
            w = torch.rand(n, k, device=dev, generator=gen, dtype=torch.float32) * 2 - 1
            for dt in a.dtype.split(","):
                if dt == "fp8":
                    sx = torch.tensor(1 / 300, device=dev, dtype=torch.float32)
                    sw = torch.tensor(1 / 200, device=dev, dtype=torch.float32)
                    xq = (x / sx).to(torch.float8_e4m3fn)
                    wq = (w / sw).to(torch.float8_e4m3fn)
                    wt = wq.t()  # [K, N] column-major view: no copy
                    fast = not a.no_fast_accum

                    def fn(xq=xq, wt=wt, sx=sx, sw=sw, fast=fast):
                        return torch._scaled_mm(xq, wt, scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16,
                                                use_fast_accum=fast)
                elif dt == "bf16":
                    xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)

                    def fn(xb=xb, wb=wb):
                        return torch.matmul(xb, wb.t())
                else:
                    ap.error(f"unknown dtype {dt}")
                out = fn()
                assert out.shape == (m, n) and out.dtype == torch.bfloat16
                for _ in range(a.warmup):
                    fn()
                torch.cuda.synchronize()
                reps = a.reps
                if a.min_time > 0:  # estimate one GEMM, then cover min_time
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn()
                    e1.record()
                    torch.cuda.synchronize()
                    reps = min(5000, max(a.reps, int(a.min_time / (e0.elapsed_time(e1) * 1e-3)) + 1))
                evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(reps)]
                for s, t in evs:
                    s.record()
                    fn()
                    t.record()
                torch.cuda.synchronize()
                tf = time_fields([s.elapsed_time(t) for s, t in evs])
                tflops = 2.0 * m * n * k / (tf["median_ms"] * 1e-3) / 1e12
                rows.append(dict(dtype=dt, sq=sq, embed=e, batch=a.batch, q_heads=hq, kv_heads=hkv,
                                 head_dim=a.head_dim, m=m, n=n, k=k, reps=reps, **tf, tflops=tflops,
                                 op="torch._scaled_mm" if dt == "fp8" else "torch.matmul",
                                 fast_accum=(not a.no_fast_accum) if dt == "fp8" else None))
                del out
            del x, w
            torch.cuda.empty_cache()

    print("| dtype | SQ | E | M | N | K | median ms | TFLOP/s | op |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['sq']} | {r['embed']} | {r['m']} | {r['n']} | {r['k']} | "
              f"{r['median_ms']:.3f} | {r['tflops']:.1f} | {r['op']} |")
    if a.json:
        doc = dict(tool="scripts/peer_gemm.py", torch=torch.__version__, cuda=torch.version.cuda,
                   device=torch.cuda.get_device_name(dev), rows=rows)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
