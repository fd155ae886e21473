#!/usr/bin/env python3
"""GPU test of scripts/dropbench_torch.py (the PyTorch op over dropbench's attention forward and backward).

    tests/torch_op_gpu.py [--lib build/libdropbench_attention.so]

Exit 0: every check passed; 1: a check failed (each failure one line); 77: no PyTorch or no CUDA device (CTest's
SKIP_RETURN_CODE). Checks, each on fresh N(0, 1) inputs:
  - against autograd of the math attention in fp64 on the same bf16 inputs with the SAME keep bits (the RNG kernel's
    mask expanded to a dense matrix by the library, dba_mask_expand): O, dQ, dK, dV each ||ours - ref|| / ||ref||
    <= 1e-2, modes none / mask / fused, both dQ modes, causal and not, MHA / GQA / MQA, dH 64 / 128, ragged S, B > 1;
  - mode mask == mode fused bitwise (O and dQKV) in the deterministic mode; p = 0 in mask and fused == none bitwise;
  - the q / k / v wrapper's gradients == the packed op's; a side stream gives the default stream's bits;
  - outputs poisoned (NaN) before the raw calls and fully written;
  - the random stream: successive calls drop differently, torch.manual_seed repeats a call, and
    torch.utils.checkpoint's recomputation regenerates the forward's bits (gradients equal to no checkpointing);
  - the nn.Module: eval() is mode none, training drops; bad settings raise DbaError / ValueError naming the field.
"""
import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

REL_MAX = 1e-2
SKIP = 77


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_op_gpu.py")
    ap.add_argument("--lib")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch_op_gpu: skipped: PyTorch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("torch_op_gpu: skipped: no CUDA device")
        return SKIP
    import dropbench_torch as dbt
    lib = dbt.get_lib(a.lib)
    for need in ("has_backward", "has_mask_expand"):
        if not getattr(lib, need):
            print(f"torch_op_gpu: {lib.path} lacks {need[4:]} (an older build)", file=sys.stderr)
            return 1
    return Checks(torch, dbt, lib).run()


class Checks:
    def __init__(self, torch, dbt, lib):
        self.torch, self.dbt, self.lib = torch, dbt, lib
        self.dev = torch.device("cuda")
        self.gen = torch.Generator(device=self.dev)
        # Fresh inputs every run; DB_TORCH_SEED replays one (the seed is printed first and with every failure).
        env = os.environ.get("DB_TORCH_SEED")
        self.seed = int(env, 0) if env else int.from_bytes(os.urandom(8), "little") >> 1
        self.gen.manual_seed(self.seed)
        print(f"torch_op_gpu: input seed DB_TORCH_SEED={self.seed:#x}", flush=True)
        self.fails, self.passed = [], 0

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.fails.append(what)
            print(f"FAILED: {what} (DB_TORCH_SEED={self.seed:#x})", file=sys.stderr, flush=True)

    def randn(self, *shape):
        return self.torch.randn(*shape, device=self.dev, dtype=self.torch.bfloat16, generator=self.gen)

    # -- the fp64 reference: autograd of the math attention with the dense keep matrix ---------------------------
    def reference(self, shape, qkv, dout, keep):
        """(O, dQKV) in fp64, laid out as the op's. keep: bool [B, Hq, S, S] or None."""
        torch = self.torch
        b, s, hq, hkv, d = shape.batch, shape.sq, shape.q_heads, shape.kv_heads, shape.head_dim
        x = qkv.double().view(b, s, hq + 2 * hkv, d).transpose(1, 2).detach().requires_grad_()
        q, k, v = x[:, :hq], x[:, hq:hq + hkv], x[:, hq + hkv:]
        g = hq // hkv
        ke, ve = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        scale = shape.softmax_scale or d ** -0.5
        sc = (q @ ke.transpose(-1, -2)) * scale
        if shape.causal:
            tri = torch.ones(s, s, device=self.dev, dtype=torch.bool).tril()
            sc = sc.masked_fill(~tri, float("-inf"))
        pr = torch.softmax(sc, dim=-1)
        if keep is not None:
            p_eff, _ = self.lib.threshold(shape.params(self.lib))
            pr = pr * keep.double() / (1.0 - p_eff)
        o = pr @ ve
        o.backward(dout.double().view(b, s, hq, d).transpose(1, 2))
        o_flat = o.detach().transpose(1, 2).reshape(b * s, hq * d)
        return o_flat, x.grad.transpose(1, 2).reshape(b * s, shape.qkv_cols)

    def rel(self, a, b):
        a, b = a.double(), b.double()
        return float((a - b).norm() / b.norm().clamp_min(1e-300))

    def parts(self, shape, t):
        """dQ, dK, dV column blocks of a QKV-layout tensor."""
        hq, hkv, d = shape.q_heads, shape.kv_heads, shape.head_dim
        return {"dQ": t[:, :hq * d], "dK": t[:, hq * d:(hq + hkv) * d], "dV": t[:, (hq + hkv) * d:]}

    def op(self, shape, qkv, dout, rng):
        """O and dQKV through the autograd op."""
        x = qkv.detach().clone().requires_grad_()
        o = self.dbt.attention_packed(x, shape, rng=rng, lib=self.lib)
        o.backward(dout)
        return o.detach(), x.grad

    def vs_reference(self, b, s, hq, hkv, d, causal, mode, det, p=0.1):
        dbt = self.dbt
        shape = dbt.Shape(b, s, hq, hkv, d, causal=causal, dropout_p=p if mode != "none" else 0.0, mode=mode,
                          deterministic=det)
        qkv, dout = self.randn(b * s, shape.qkv_cols), self.randn(b * s, hq * d)
        rng = (0xC0FFEE + s, 3 + b)
        o, dqkv = self.op(shape, qkv, dout, rng)
        keep = dbt.dense_keep(self.lib, shape, *rng, self.dev) if mode != "none" else None
        o_ref, dqkv_ref = self.reference(shape, qkv, dout, keep)
        tag = f"B {b} S {s} H {hq}:{hkv} dH {d} causal {causal} {mode} det {det}"
        self.ok(bool(self.torch.isfinite(dqkv).all()) and bool(self.torch.isfinite(o).all()), f"{tag}: finite")
        errs = {"O": self.rel(o, o_ref)}
        ours, ref = self.parts(shape, dqkv), self.parts(shape, dqkv_ref)
        errs.update({k: self.rel(ours[k], ref[k]) for k in ours})
        self.ok(all(e <= REL_MAX for e in errs.values()),
                f"{tag}: rel err {', '.join(f'{k} {e:.2e}' for k, e in errs.items())} (<= {REL_MAX})")
        if keep is not None:  # the bits matter: without them the reference is far off
            o_nodrop, _ = self.reference(shape, qkv, dout, None)
            self.ok(self.rel(o, o_nodrop) > 5 * REL_MAX, f"{tag}: dropout changes O")

    def bitwise(self):
        torch, dbt = self.torch, self.dbt
        for b, s, hq, hkv, d, causal in ((2, 300, 4, 2, 128, True), (1, 513, 4, 1, 64, False)):
            qkv = self.randn(b * s, (hq + 2 * hkv) * d)
            dout = self.randn(b * s, hq * d)
            tag = f"B {b} S {s} H {hq}:{hkv} dH {d} causal {causal}"

            def run(mode, p, det=True, rng=(77, 5)):
                return self.op(dbt.Shape(b, s, hq, hkv, d, causal=causal, dropout_p=p, mode=mode,
                                         deterministic=det), qkv, dout, rng)
            om, gm = run("mask", 0.2)
            of, gf = run("fused", 0.2)
            self.ok(torch.equal(om, of) and torch.equal(gm, gf), f"{tag}: mask == fused bitwise (deterministic)")
            _, gma = run("mask", 0.2, det=False)
            _, gfa = run("fused", 0.2, det=False)
            pm, pf = self.parts(dbt.Shape(b, s, hq, hkv, d), gma), self.parts(dbt.Shape(b, s, hq, hkv, d), gfa)
            self.ok(torch.equal(pm["dK"], pf["dK"]) and torch.equal(pm["dV"], pf["dV"]),
                    f"{tag}: dK, dV mask == fused bitwise (atomic dQ)")
            on, gn = run("none", 0.0)
            for mode in ("mask", "fused"):
                o0, g0 = run(mode, 0.0)
                self.ok(torch.equal(o0, on) and torch.equal(g0, gn), f"{tag}: {mode} p 0 == none bitwise")
            o2, g2 = run("fused", 0.2, rng=(77, 6))
            self.ok(not torch.equal(o2, of), f"{tag}: another offset, other bits")
            # q / k / v wrapper: the same kernels on a packed copy
            x = qkv.detach().view(b, s, hq + 2 * hkv, d).transpose(1, 2)
            q, k, v = (t.detach().clone().requires_grad_() for t in (x[:, :hq], x[:, hq:hq + hkv], x[:, hq + hkv:]))
            o4 = dbt.attention(q, k, v, causal=causal, dropout_p=0.2, mode="fused", deterministic=True, rng=(77, 5),
                               lib=self.lib)
            o4.backward(dout.view(b, s, hq, d).transpose(1, 2))
            g4 = torch.cat([t.grad.transpose(1, 2).reshape(b * s, -1) for t in (q, k, v)], dim=1)
            self.ok(torch.equal(o4.transpose(1, 2).reshape(b * s, hq * d), of) and torch.equal(g4, gf),
                    f"{tag}: q/k/v wrapper == packed op bitwise")
            # a side stream: the op launches on the current stream
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                os_, gs = run("fused", 0.2)
            torch.cuda.current_stream().wait_stream(side)
            self.ok(torch.equal(os_, of) and torch.equal(gs, gf), f"{tag}: side stream == default stream")

    def poisoned_raw(self):
        torch, dbt = self.torch, self.dbt
        for mode in ("none", "mask", "fused"):
            for det in (False, True):
                shape = dbt.Shape(2, 77, 4, 2, 64, causal=True, dropout_p=0.1, mode=mode, deterministic=det)
                qkv = self.randn(2 * 77, shape.qkv_cols)
                o = torch.full((2 * 77, 4 * 64), float("nan"), device=self.dev, dtype=torch.bfloat16)
                lse = torch.full((2 * 4 * 77,), float("nan"), device=self.dev)
                o, lse, mask = dbt.forward_raw(self.lib, shape, qkv, 9, 1, o=o, lse=lse)
                dq = torch.full_like(qkv, float("nan"))
                dbt.backward_raw(self.lib, shape, qkv, o, lse, mask, self.randn(2 * 77, 4 * 64), 9, 1, dqkv=dq)
                self.ok(bool(torch.isfinite(o).all() and torch.isfinite(lse).all() and torch.isfinite(dq).all()),
                        f"poisoned O, LSE, dQKV fully written ({mode}, det {det})")
                self.ok((mask is not None) == (mode == "mask") and
                        (mask is None or mask.numel() * 4 == dbt.mask_bytes(2, 77, 4, True, self.lib)),
                        f"mask held only in mode mask, of mask_bytes ({mode})")

    def random_stream(self):
        torch, dbt = self.torch, self.dbt
        b, s, hq, hkv, d = 1, 256, 2, 2, 128
        qkv = self.randn(b, s, (hq + 2 * hkv) * d)

        def call(x):
            return dbt.attention_qkv(x, hq, hkv, d, causal=True, dropout_p=0.5, mode="fused", deterministic=True,
                                     lib=self.lib)
        torch.manual_seed(1234)
        a1, a2 = call(qkv), call(qkv)
        torch.manual_seed(1234)
        b1 = call(qkv)
        self.ok(not torch.equal(a1, a2), "successive calls drop differently")
        self.ok(torch.equal(a1, b1), "torch.manual_seed repeats the call's bits")
        # torch.utils.checkpoint recomputes the forward under the saved RNG state: the same bits as without it
        import torch.utils.checkpoint as ckpt
        dout = self.randn(b, s, hq * d)
        grads = []
        for use_ckpt in (False, True):
            x = qkv.detach().clone().requires_grad_()
            torch.manual_seed(99)
            y = ckpt.checkpoint(call, x, use_reentrant=False) if use_ckpt else call(x)
            y.backward(dout)
            grads.append(x.grad)
        self.ok(torch.equal(grads[0], grads[1]), "checkpoint's recomputation: the forward's bits")
        # the draw reads and advances the generator exactly as its state bytes say (seed, Philox offset), whichever
        # path the op takes (get_offset / set_offset, or get_state / set_state)
        gen = torch.cuda.default_generators[qkv.device.index or 0]
        torch.manual_seed(4321)
        for _ in range(3):
            before = gen.get_state().view(torch.int64)
            seed, off = dbt.next_seed_offset(qkv.device)
            after = gen.get_state().view(torch.int64)
            self.ok(seed == int(before[-2]) & 0xFFFFFFFFFFFFFFFF and off == int(before[-1]) // 4
                    and int(after[-1]) == int(before[-1]) + 4 and int(after[-2]) == int(before[-2]),
                    f"draw: seed {seed} offset {off}, state before {before[-2:].tolist()} after {after[-2:].tolist()}")

    def module(self):
        torch, dbt = self.torch, self.dbt
        m = dbt.DropbenchAttention(4, 2, 64, dropout_p=0.5, causal=True, mode="mask", deterministic=True,
                                   lib=self.lib)
        x = self.randn(2, 100, (4 + 4) * 64)
        ref = dbt.attention_qkv(x, 4, 2, 64, causal=True, dropout_p=0.0, lib=self.lib)
        m.eval()
        self.ok(torch.equal(m(x), ref), "module eval() == mode none")
        m.train()
        y = m(x)
        self.ok(y.shape == (2, 100, 256) and not torch.equal(y, ref), "module in training drops")
        for kw, needle in (({"head_dim": 96}, "head_dim"), ({"rounds": 4}, "rounds"),
                           ({"threshold_bits": 12}, "threshold_bits")):
            args = dict(q_heads=4, kv_heads=2, head_dim=64, dropout_p=0.1, lib=self.lib)
            args.update(kw)
            try:
                dbt.DropbenchAttention(**args)
                self.ok(False, f"module accepted {kw}")
            except dbt.DbaError as e:
                self.ok(needle in str(e) and e.code == 2, f"module {kw}: {e}")
        for bad, needle in ((self.randn(2, 100, 7 * 64), "qkv"), (x.float().cpu(), "qkv")):
            try:
                dbt.attention_packed(bad.reshape(200, -1), dbt.Shape(2, 100, 4, 2, 64), rng=(0, 0), lib=self.lib)
                self.ok(False, f"accepted qkv {list(bad.shape)} {bad.dtype} {bad.device}")
            except ValueError as e:
                self.ok(needle in str(e), f"bad qkv: {e}")
        try:  # the library's own check, before anything is launched
            dbt.attention_packed(self.randn(200, 10 * 64), dbt.Shape(2, 100, 4, 3, 64, dropout_p=0.1), rng=(0, 0),
                                 lib=self.lib)
            self.ok(False, "kv_heads 3 accepted")
        except dbt.DbaError as e:
            self.ok("kv_heads" in str(e) and e.code == 2, f"kv_heads 3: {e}")

    def run(self):
        cases = [(1, 37, 2, 1, 64, True), (1, 37, 2, 2, 128, False),           # tiny: fp64 reference
                 (2, 300, 4, 2, 128, False), (2, 300, 4, 2, 128, True),        # GQA, B 2, ragged
                 (1, 513, 4, 1, 64, True), (1, 1024, 2, 2, 128, True)]         # MQA, MHA at 1K
        for b, s, hq, hkv, d, causal in cases:
            for mode in ("none", "mask", "fused"):
                for det in (True, False):
                    self.vs_reference(b, s, hq, hkv, d, causal, mode, det)
        self.bitwise()
        self.poisoned_raw()
        self.random_stream()
        self.module()
        print(f"torch_op_gpu: {self.passed} passed, {len(self.fails)} failed")
        return 1 if self.fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
