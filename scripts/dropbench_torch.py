#!/usr/bin/env python3
"""dropbench's attention forward and backward as a PyTorch autograd op (through the C ABI, capi/dropbench_attention.h,
loaded by scripts/dropbench_attn.py), on PyTorch tensors and PyTorch's current CUDA stream.

    import dropbench_torch as dbt
    o = dbt.attention_qkv(qkv, q_heads=32, kv_heads=8, head_dim=128, causal=True, dropout_p=0.1, mode="fused")
    o = dbt.attention(q, k, v, causal=True, dropout_p=0.1)        # q [B, Hq, S, D], k / v [B, Hkv, S, D]
    attn = dbt.DropbenchAttention(32, 8, 128, dropout_p=0.1)        # nn.Module: qkv [B, S, (Hq+2Hkv)*D] -> [B, S, Hq*D]

The op's input is the packed QKV buffer the kernels read, [B*S, (Hq + 2*Hkv) * D] bf16 (a QKV projection's output
as it comes: query heads, then key heads, then value heads, D columns each); its output O is [B*S, Hq * D] bf16 and
its gradient dQKV has QKV's layout, so the projection's backward reads it directly. The wrappers reshape around it.

Dropout modes (the same keep bits in all three for the same seed and offset, kernels/rng/dropout_scheme.cuh):
  none   no dropout.
  mask   "stored": the forward runs the RNG mask kernel (dba_make_mask) into a 1-bit tile-layout mask, the attention
         reads it, and the mask is saved for the backward, which reads it again. Memory held from forward to backward
         per call: mask_bytes() = B * Hq * ceil(S/16) * ceil(S/64) * 128 bytes (one bit per element of the padded
         S x S matrix; causal masks are allocated whole, their tiles above the diagonal are never written).
  fused  the forward and the backward kernels each generate the bits with Philox-R; nothing is held.
deterministic=True gives a fixed-order dQ in the backward (mask and fused gradients then bitwise equal); False uses
fp32 reduce-adds for dQ (faster, dQ's last bits depend on the order of the adds). dK and dV are deterministic in both.

Random stream: every call that drops draws a fresh (seed, offset) from PyTorch's CUDA default generator of the
tensor's device, as PyTorch's own dropout does: seed = the generator's seed, offset = its Philox offset / 4, and the
generator's offset advances by 4. So successive calls use different keep bits, torch.manual_seed(s) makes a run
repeatable, and torch.utils.checkpoint's recomputation (it saves and restores the CUDA RNG state) regenerates the
same bits. The 32-bit counter word our scheme gives the offset wraps after 2^32 calls per seed. The offset is a host
value baked into the launch, so the op must not be captured in a CUDA graph (replays would reuse one mask). rng=
(seed, offset) overrides the draw (tests, reproducing one call).

Errors: the library's checks (shapes, heads, head_dim 64 / 128, rounds 3/5/7/10, threshold_bits 8/16/32, dropout_p
in [0, 1)) raise dropbench_attn.DbaError with the library's one-line message naming the field, before anything is
launched; tensors of the wrong dtype / device / shape raise ValueError naming the argument.

--self-test [--lib LIB]: the parts that need neither torch nor a GPU (the library's dense mask expansion, its refusals
surfaced as DbaError, the memory formula); exit 0 / 1.
"""
import argparse
import ctypes
import math
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dropbench_attn as dba  # noqa: E402
from dropbench_attn import DbaError  # noqa: E402,F401  (re-exported: callers catch dropbench_torch.DbaError)

try:
    import torch
except ImportError:  # the self-test and the peers' argument checks run without torch
    torch = None

MODES = tuple(dba.MODES)
# PyTorch's CUDA generators advance their Philox offset in multiples of 4 (one Philox call yields 4 words per
# thread); a call of ours takes one step, so our 32-bit offset is the generator's offset / 4.
TORCH_OFFSET_STEP = 4

_libs = {}


def get_lib(path=None):
    """The library, loaded once per path (None: $DROPBENCH_ATTENTION_LIB or build/libdropbench_attention.so)."""
    key = str(path) if path else str(dba.default_path())
    if key not in _libs:
        _libs[key] = dba.Lib(path)
    return _libs[key]


def mask_bytes(batch, sq, q_heads, causal=False, lib=None):
    """Bytes mode "mask" holds from the forward to the backward for one call (the library's dba_mask_bytes)."""
    lib = lib or get_lib()
    return lib.mask_bytes(lib.params(batch=batch, sq=sq, q_heads=q_heads, kv_heads=1, causal=causal))


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")


def next_seed_offset(device):
    """(seed, offset) for one call, drawn from PyTorch's default CUDA generator of `device` (see the module's doc);
    the generator's Philox offset advances by TORCH_OFFSET_STEP. Through the generator's get_offset / set_offset
    where this PyTorch has them (no state tensor per call: the op runs once per layer and pass), else through its
    state (get_state), whose last 16 bytes are the seed (u64) and the Philox offset (i64) (older releases put a
    fixed-size legacy block before them)."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    gen = torch.cuda.default_generators[idx]
    if hasattr(gen, "get_offset") and hasattr(gen, "set_offset"):
        seed, offset = gen.initial_seed(), gen.get_offset()
        gen.set_offset(offset + TORCH_OFFSET_STEP)
    else:
        state = gen.get_state()
        if state.numel() < 16 or state.numel() % 8:
            raise RuntimeError(f"PyTorch's CUDA generator state is {state.numel()} bytes, this op reads its last 16 "
                               "(seed, offset): pass rng=(seed, offset) explicitly")
        words = state.view(torch.int64)
        seed, offset = int(words[-2]), int(words[-1])
        words[-1] = offset + TORCH_OFFSET_STEP  # a view: the state tensor itself changes
        gen.set_state(state)
    return seed & 0xFFFFFFFFFFFFFFFF, (offset // TORCH_OFFSET_STEP) & 0xFFFFFFFF


class Shape:
    """The attention's shape and dropout settings, as the C ABI's dba_params takes them. Treated as immutable once
    made: shape_of() shares one per distinct setting between calls, and it keeps the library's Params for it (and the
    backward's workspace size), so a call copies a struct instead of rebuilding it."""

    __slots__ = ("batch", "sq", "q_heads", "kv_heads", "head_dim", "causal", "softmax_scale", "dropout_p", "mode",
                 "rounds", "threshold_bits", "kernel", "deterministic", "_lib", "_template", "_ws_bytes")

    def __init__(self, batch, sq, q_heads, kv_heads, head_dim, causal=False, softmax_scale=None, dropout_p=0.0,
                 mode="fused", rounds=dba.DEFAULT_ROUNDS, threshold_bits=dba.DEFAULT_THRESHOLD_BITS, kernel="auto",
                 deterministic=False):
        _check_mode(mode)
        self.batch, self.sq, self.q_heads, self.kv_heads, self.head_dim = (int(batch), int(sq), int(q_heads),
                                                                           int(kv_heads), int(head_dim))
        self.causal, self.deterministic = bool(causal), bool(deterministic)
        self.softmax_scale = float(softmax_scale) if softmax_scale else 0.0  # 0: the library's 1/sqrt(dH)
        self.dropout_p, self.mode = float(dropout_p), mode
        self.rounds, self.threshold_bits, self.kernel = int(rounds), int(threshold_bits), kernel
        self._lib = self._template = self._ws_bytes = None

    @property
    def qkv_cols(self):
        return (self.q_heads + 2 * self.kv_heads) * self.head_dim

    def params(self, lib, seed=0, offset=0, **ptrs):
        """A fresh Params for one call: the shape's fields (built by lib.params once per library), then seed, offset
        and the call's pointers / row strides (ptrs: Params field names)."""
        if self._lib is not lib:
            self._template = lib.params(kernel=self.kernel, batch=self.batch, sq=self.sq, q_heads=self.q_heads,
                                        kv_heads=self.kv_heads, head_dim=self.head_dim, causal=self.causal,
                                        softmax_scale=self.softmax_scale, dropout_p=self.dropout_p,
                                        rounds=self.rounds, threshold_bits=self.threshold_bits)
            self._lib, self._ws_bytes = lib, None
        p = dba.Params.from_buffer_copy(self._template)
        p.seed, p.offset = seed, offset
        for k, v in ptrs.items():
            setattr(p, k, v)
        return p

    def workspace_bytes(self, lib, p):
        """The backward's workspace bytes (the library's dba_attention_backward_workspace_bytes), once per shape."""
        if self._ws_bytes is None or self._lib is not lib:
            self._ws_bytes = lib.backward_workspace_bytes(p, self.deterministic)
        return self._ws_bytes


_shapes = {}


def shape_of(*args, **kwargs):
    """Shape(*args, **kwargs), one object per distinct setting (a model calls the op with a handful of settings)."""
    key = (args, tuple(sorted(kwargs.items())))
    sh = _shapes.get(key)
    if sh is None:
        if len(_shapes) >= 256:
            _shapes.clear()
        sh = _shapes[key] = Shape(*args, **kwargs)
    return sh


# ---------------------------------------------------------------------------------------------------------------
# The raw calls: explicit output tensors (tests poison them), the current stream, no autograd.
# ---------------------------------------------------------------------------------------------------------------

def _check_qkv(qkv, shape):
    if torch is None:
        raise RuntimeError("dropbench_torch: needs PyTorch")
    if not qkv.is_cuda or qkv.dtype != torch.bfloat16 or qkv.dim() != 2:
        raise ValueError(f"qkv: a 2-D bf16 CUDA tensor (got {qkv.dim()}-D {qkv.dtype} on {qkv.device})")
    if qkv.shape[0] != shape.batch * shape.sq or qkv.shape[1] != shape.qkv_cols:
        raise ValueError(f"qkv: [batch*sq, (q_heads + 2*kv_heads)*head_dim] = [{shape.batch * shape.sq}, "
                         f"{shape.qkv_cols}] (got {list(qkv.shape)})")


def _row_stride(t):
    """t's row stride for the library, or None where t must be copied first: rows of unit-stride elements, each row
    16-byte aligned (the kernels' vector loads)."""
    if t.stride(1) != 1 or t.stride(0) < t.shape[1]:
        return None
    if t.data_ptr() % 16 or (t.stride(0) * t.element_size()) % 16:
        return None
    return t.stride(0)


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def forward_raw(lib, shape, qkv, seed, offset, o=None, lse=None, mask=None):
    """O = attention(QKV) on the current stream; returns (o, lse, mask). mode "mask": the RNG kernel first writes the
    keep bits into `mask` (allocated here if None), which the backward then reads. qkv: dense or row-strided."""
    _check_qkv(qkv, shape)
    if _row_stride(qkv) is None:
        qkv = qkv.contiguous()
    dev = qkv.device
    rows = shape.batch * shape.sq
    o = torch.empty(rows, shape.q_heads * shape.head_dim, device=dev, dtype=torch.bfloat16) if o is None else o
    lse = torch.empty(shape.batch * shape.q_heads * shape.sq, device=dev, dtype=torch.float32) if lse is None else lse
    stream = _stream(dev)
    p = shape.params(lib, seed, offset, qkv=qkv.data_ptr(), qkv_row_stride=qkv.stride(0), o=o.data_ptr(),
                     o_row_stride=o.stride(0), lse=lse.data_ptr())
    if shape.mode == "mask":
        if mask is None:
            mask = torch.empty(lib.mask_bytes(p) // 4, device=dev, dtype=torch.int32)
        p.mask = mask.data_ptr()
        lib.make_mask(p, mask.data_ptr(), stream)
    else:
        mask = None
    lib.attention(p, shape.mode, stream)
    return o, lse, mask


def backward_raw(lib, shape, qkv, o, lse, mask, dout, seed, offset, dqkv=None):
    """dQKV (QKV's layout, dense) from the forward's QKV, O, LSE (and mask in mode "mask") and dO, on the current
    stream; the workspace comes from PyTorch's caching allocator."""
    _check_qkv(qkv, shape)
    if _row_stride(qkv) is None:
        qkv = qkv.contiguous()
    dout = dout.contiguous()
    if dout.dtype != torch.bfloat16 or dout.shape != o.shape:
        raise ValueError(f"dout: bf16 {list(o.shape)} (got {dout.dtype} {list(dout.shape)})")
    dev = qkv.device
    if dqkv is None:
        dqkv = torch.empty(qkv.shape[0], shape.qkv_cols, device=dev, dtype=torch.bfloat16)
    p = shape.params(lib, seed, offset, qkv=qkv.data_ptr(), qkv_row_stride=qkv.stride(0), o=o.data_ptr(),
                     o_row_stride=o.stride(0), lse=lse.data_ptr(), mask=mask.data_ptr() if mask is not None else 0)
    ws_bytes = shape.workspace_bytes(lib, p)
    ws = torch.empty(max(ws_bytes, 1), device=dev, dtype=torch.uint8)
    lib.backward(p, shape.mode, dout.data_ptr(), dqkv.data_ptr(), ws.data_ptr(), shape.deterministic, _stream(dev))
    return dqkv


def dense_keep(lib, shape, seed, offset, device):
    """The keep bits of (shape, seed, offset) as a dense bool tensor [B, Hq, S, S] on `device` (False above the causal
    diagonal): the RNG kernel's mask expanded by the library (dba_mask_expand). Mode "fused" generates the same bits.
    For references; S^2 bytes per head on the host."""
    p = shape.params(lib, seed, offset)
    words = torch.empty(lib.mask_bytes(p) // 4, device=device, dtype=torch.int32)
    lib.make_mask(p, words.data_ptr(), _stream(device))
    host = words.cpu()  # synchronises with the stream
    keep = lib.mask_expand(p, ctypes.string_at(host.data_ptr(), host.numel() * 4))
    t = torch.frombuffer(keep, dtype=torch.uint8).view(shape.batch, shape.q_heads, shape.sq, shape.sq)
    return t.to(device=device, dtype=torch.bool)


# ---------------------------------------------------------------------------------------------------------------
# autograd
# ---------------------------------------------------------------------------------------------------------------

if torch is not None:
    class DropbenchAttentionFunction(torch.autograd.Function):
        """O = attention(QKV) with dropbench's kernels; backward: dQKV. Saved for the backward: QKV, O, LSE (fp32,
        B*Hq*S*4 bytes) and, in mode "mask", the keep-bit mask; the (seed, offset) of the call."""

        @staticmethod
        def forward(ctx, qkv, shape, seed, offset, lib):
            o, lse, mask = forward_raw(lib, shape, qkv, seed, offset)
            saved = (qkv, o, lse) + ((mask,) if mask is not None else ())
            ctx.save_for_backward(*saved)
            ctx.shape, ctx.seed, ctx.offset, ctx.lib = shape, seed, offset, lib
            return o

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, dout):
            saved = ctx.saved_tensors
            qkv, o, lse = saved[:3]
            mask = saved[3] if len(saved) > 3 else None
            dqkv = backward_raw(ctx.lib, ctx.shape, qkv, o, lse, mask, dout, ctx.seed, ctx.offset)
            return dqkv, None, None, None, None


def attention_packed(qkv, shape, rng=None, lib=None):
    """The op on the packed buffer: qkv [B*S, (Hq+2Hkv)*D] bf16 -> O [B*S, Hq*D] bf16, differentiable in qkv.
    rng: (seed, offset), or None for a fresh draw from PyTorch's generator (only when the mode drops)."""
    lib = lib or get_lib()
    if rng is None:
        rng = next_seed_offset(qkv.device) if shape.mode != "none" and shape.dropout_p > 0 else (0, 0)
    seed, offset = int(rng[0]), int(rng[1])
    return DropbenchAttentionFunction.apply(qkv, shape, seed, offset, lib)


def attention_qkv(qkv, q_heads, kv_heads, head_dim, causal=False, dropout_p=0.0, mode="fused", deterministic=False,
                  rounds=dba.DEFAULT_ROUNDS, threshold_bits=dba.DEFAULT_THRESHOLD_BITS, softmax_scale=None,
                  kernel="auto", rng=None, lib=None):
    """qkv [B, S, (Hq+2Hkv)*D] (a QKV projection's output; any float dtype, cast to bf16) -> O [B, S, Hq*D] bf16.
    dropout_p 0 or mode "none": no dropout."""
    if qkv.dim() != 3:
        raise ValueError(f"qkv: [batch, seq, (q_heads + 2*kv_heads)*head_dim] (got {list(qkv.shape)})")
    b, s, cols = qkv.shape
    if dropout_p == 0:
        mode = "none"
    shape = shape_of(b, s, q_heads, kv_heads, head_dim, causal=causal, softmax_scale=softmax_scale,
                     dropout_p=dropout_p, mode=mode, rounds=rounds, threshold_bits=threshold_bits, kernel=kernel,
                     deterministic=deterministic)
    flat = qkv.to(torch.bfloat16).reshape(b * s, cols)
    return attention_packed(flat, shape, rng=rng, lib=lib).view(b, s, q_heads * head_dim)


def attention(q, k, v, causal=False, dropout_p=0.0, mode="fused", deterministic=False, rounds=dba.DEFAULT_ROUNDS,
              threshold_bits=dba.DEFAULT_THRESHOLD_BITS, softmax_scale=None, kernel="auto", rng=None, lib=None):
    """SDPA-style: q [B, Hq, S, D], k and v [B, Hkv, S, D] -> O [B, Hq, S, D] bf16. Packs Q, K, V into the QKV
    buffer (one copy; its backward splits dQKV back); a model that has a packed projection should call attention_qkv
    and save the copy."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] \
            or q.shape[2] != k.shape[2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q, k, v: [B, Hq, S, D], [B, Hkv, S, D], [B, Hkv, S, D] (got {list(q.shape)}, "
                         f"{list(k.shape)}, {list(v.shape)})")
    b, hq, s, d = q.shape
    hkv = k.shape[1]
    qkv = torch.cat([t.to(torch.bfloat16).transpose(1, 2).reshape(b, s, t.shape[1] * d) for t in (q, k, v)], dim=-1)
    o = attention_qkv(qkv, hq, hkv, d, causal=causal, dropout_p=dropout_p, mode=mode, deterministic=deterministic,
                      rounds=rounds, threshold_bits=threshold_bits, softmax_scale=softmax_scale, kernel=kernel,
                      rng=rng, lib=lib)
    return o.view(b, s, hq, d).transpose(1, 2)


if torch is not None:
    class DropbenchAttention(torch.nn.Module):
        """Attention over a packed QKV projection output, for use in a model: forward(qkv [B, S, (Hq+2Hkv)*D]) ->
        [B, S, Hq*D] bf16. Dropout (mode, p) applies in training only; eval() runs mode "none"."""

        def __init__(self, q_heads, kv_heads, head_dim, dropout_p=0.0, causal=True, mode="fused",
                     deterministic=False, rounds=dba.DEFAULT_ROUNDS, threshold_bits=dba.DEFAULT_THRESHOLD_BITS,
                     softmax_scale=None, kernel="auto", lib=None):
            super().__init__()
            _check_mode(mode)
            if not 0.0 <= dropout_p < 1.0:
                raise ValueError(f"dropout_p must be in [0, 1) (got {dropout_p})")
            self.q_heads, self.kv_heads, self.head_dim = q_heads, kv_heads, head_dim
            self.dropout_p, self.causal, self.mode, self.deterministic = dropout_p, causal, mode, deterministic
            self.rounds, self.threshold_bits, self.softmax_scale, self.kernel = rounds, threshold_bits, softmax_scale, kernel
            self.lib = lib or get_lib()
            # The library refuses a bad head_dim, rounds, threshold or p here, at construction, not at the first step.
            self.lib.kernel_name(Shape(1, 128, q_heads, kv_heads, head_dim, causal, softmax_scale, dropout_p,
                                       mode, rounds, threshold_bits, kernel).params(self.lib), mode)

        def forward(self, qkv):
            p = self.dropout_p if self.training else 0.0
            return attention_qkv(qkv, self.q_heads, self.kv_heads, self.head_dim, causal=self.causal, dropout_p=p,
                                 mode=self.mode, deterministic=self.deterministic, rounds=self.rounds,
                                 threshold_bits=self.threshold_bits, softmax_scale=self.softmax_scale,
                                 kernel=self.kernel, lib=self.lib)

        def extra_repr(self):
            return (f"q_heads={self.q_heads}, kv_heads={self.kv_heads}, head_dim={self.head_dim}, "
                    f"dropout_p={self.dropout_p}, causal={self.causal}, mode={self.mode}, "
                    f"deterministic={self.deterministic}, rounds={self.rounds}")


# ---------------------------------------------------------------------------------------------------------------
# self-test (CI: no torch, no GPU)
# ---------------------------------------------------------------------------------------------------------------

def self_test(lib_path):
    fails = []

    import selftest  # the self-tests' shared checks (scripts/selftest.py)

    ok = selftest.collector(fails)

    lib = dba.Lib(lib_path)
    if not lib.has_mask_expand:
        print(f"dropbench_torch self-test FAILED: {lib.path} has no dba_mask_expand (an older build)", file=sys.stderr)
        return 1
    ok(lib.so.dba_params_size() == ctypes.sizeof(dba.Params), "dba_params size")

    def words_of(p, setter):
        n = lib.mask_bytes(p) // 4
        w = [0] * n
        setter(w)
        return struct.pack(f"<{n}I", *w)

    # One bit set: lane 5, bit 2 of tile (r16 0, c64 0) is element (row 9, col 2) (the scheme's m16n8 layout:
    # row = lane/4 + 8 ((bit/2) % 2), col = 8 (bit/4) + 2 (lane % 4) + bit % 2).
    p = lib.params(batch=1, sq=20, q_heads=1, kv_heads=1, head_dim=64)
    keep = lib.mask_expand(p, words_of(p, lambda w: w.__setitem__(5, 1 << 2)))
    ok([(i // 20, i % 20) for i, x in enumerate(keep) if x] == [(9, 2)], "lane 5 bit 2 -> (9, 2)")
    # SQ 100, B 2, 3 heads: tile (r16 1, c64 1) of matrix bh 4 is word ((4 * 7 + 1) * 2 + 1) * 32 + lane;
    # lane 31 bit 31 -> row 16 + 7 + 8 = 31, col 64 + 8 * 7 + 6 + 1 = 127 (past SQ: not in the dense matrix);
    # lane 30 bit 29 -> row 16 + 7 + 8 = 31, col 64 + 56 + 4 + 1 = 125 (past SQ); lane 1 bit 0 -> (16, 66).
    p = lib.params(batch=2, sq=100, q_heads=3, kv_heads=1, head_dim=64)
    base = ((4 * 7 + 1) * 2 + 1) * 32

    def set_some(w):
        w[base + 31] = 1 << 31
        w[base + 30] = 1 << 29
        w[base + 1] = 1

    keep = lib.mask_expand(p, words_of(p, set_some))
    hits = [(i // 10000, (i // 100) % 100, i % 100) for i, x in enumerate(keep) if x]
    ok(hits == [(4, 16, 66)], f"B 2 H 3 SQ 100: {hits}")
    # every word bit of a full tile maps to a distinct element: all ones keep all SQ^2 (non-causal) and exactly the
    # lower triangle with the diagonal (causal)
    for causal, want in ((False, 77 * 77), (True, 77 * 78 // 2)):
        p = lib.params(batch=1, sq=77, q_heads=1, kv_heads=1, head_dim=128, causal=causal)
        keep = lib.mask_expand(p, words_of(p, lambda w: w.__setitem__(slice(None), [0xFFFFFFFF] * len(w))))
        ok(sum(keep) == want and all(keep[r * 77 + c] == (0 if causal and c > r else 1)
                                     for r in range(77) for c in range(77)), f"all ones, causal {causal}")
    # refusals: one line naming the field, as DbaError (status 2) or ValueError (the binding's length check)
    p = lib.params(batch=1, sq=20, q_heads=1, kv_heads=1, head_dim=64)
    try:
        lib.mask_expand(p, b"\0" * 4)
        fails.append("a short mask accepted")
    except ValueError as e:
        ok("words" in str(e), f"short mask: {e}")
    for field, value, needle in (("causal", 2, "causal"), ("dropout_p", 1.0, "dropout_p"),
                                 ("threshold_bits", 12, "threshold_bits")):
        q = lib.params(batch=1, sq=20, q_heads=1, kv_heads=1, head_dim=64)
        setattr(q, field, value)
        try:
            lib.mask_expand(q, b"\0" * 256)
            fails.append(f"{field} {value} accepted")
        except DbaError as e:
            ok(e.code == 2 and needle in str(e), f"{field}: {e}")
    # the checks DropbenchAttention runs at construction (host only: the forward's instance for the settings)
    for field, value, needle in (("head_dim", 96, "head_dim"), ("rounds", 4, "rounds"),
                                 ("threshold_bits", 16, None)):
        q = lib.params(batch=1, sq=64, q_heads=4, kv_heads=2, head_dim=128, dropout_p=0.1)
        setattr(q, field, value)
        try:
            name = lib.kernel_name(q, "fused")
            ok(needle is None and "tw16" in name, f"kernel_name: {field} {value} accepted ({name})")
        except DbaError as e:
            ok(needle is not None and e.code == 2 and needle in str(e), f"kernel_name {field}: {e}")
    # the memory mode "mask" holds: one bit per element of the 16 x 64-padded matrix, whole also when causal
    for b, s, h, causal in ((1, 8192, 64, True), (2, 300, 4, False), (1, 77, 1, False)):
        want = b * h * math.ceil(s / 16) * math.ceil(s / 64) * 128
        ok(mask_bytes(b, s, h, causal, lib) == want, f"mask bytes B {b} S {s} H {h}")
    ok(mask_bytes(1, 8192, 64, True, lib) == 512 << 20, "Llama-3 70B heads, SQ 8K: 512 MiB per layer")
    # a shared Shape: one object per setting; each call's Params a fresh copy of the library's, then its own fields
    sh = shape_of(2, 300, 4, 2, 64, causal=True, dropout_p=0.1, mode="mask", rounds=5)
    ok(sh is shape_of(2, 300, 4, 2, 64, causal=True, dropout_p=0.1, mode="mask", rounds=5)
       and sh is not shape_of(2, 300, 4, 2, 64, causal=True, dropout_p=0.1, mode="mask", rounds=7), "shape_of shares")
    p1, p2 = sh.params(lib, 5, 6, qkv=4096, qkv_row_stride=1024), sh.params(lib, 7, 8)
    want = lib.params(batch=2, sq=300, q_heads=4, kv_heads=2, head_dim=64, causal=True, dropout_p=0.1, rounds=5,
                      seed=5, offset=6, qkv=4096, qkv_row_stride=1024)
    ok(bytes(p1) == bytes(want), "Shape.params: the library's fields, then the call's")
    ok(p2.seed == 7 and p2.offset == 8 and not p2.qkv and p1.seed == 5 and p1.qkv == 4096, "Shape.params: fresh copies")
    try:
        _check_mode("stored")
        fails.append("mode 'stored' accepted")
    except ValueError as e:
        ok("none, mask, fused" in str(e), f"mode: {e}")

    return selftest.report("dropbench_torch", fails)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="dropbench_torch.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--self-test", action="store_true", required=True)
    ap.add_argument("--lib")
    a = ap.parse_args()
    sys.exit(self_test(a.lib))
