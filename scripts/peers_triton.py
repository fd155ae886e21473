"""Triton dropout kernels for scripts/peers.py, written the way Triton's low-memory dropout tutorial does.

Imported only in the real (GPU) mode of peers.py, never by --self-test.

    mask_apply       the mask was generated beforehand as a uint8 tensor; the kernel reads x and the mask.
    seeded_rand      one Philox call per element: tl.rand(seed, offset) keeps the first of its four words.
    seeded_rand4x    one Philox call per four elements: tl.rand4x gives four uniform floats per counter, each
                     applied to its own quarter of the program's block (so every load stays coalesced).
    seeded_randint4x as seeded_rand4x with tl.randint4x and an integer threshold (no int->float conversion).

All keep an element when its uniform number u satisfies u > p (integer form: word >= round(p * 2^32)) and
scale the kept ones by 1 / (1 - p). Offsets are int32 while n <= 2^31 (as in the tutorial) and int64
(WIDE) above; Triton then splits the 64-bit counter into two 32-bit Philox words, still Philox-4x32.
"""
import triton
import triton.language as tl


@triton.jit
def _block_offsets(BLOCK: tl.constexpr, WIDE: tl.constexpr):
    pid = tl.program_id(0)
    if WIDE:
        start = pid.to(tl.int64) * BLOCK
    else:
        start = pid * BLOCK
    return start + tl.arange(0, BLOCK)


@triton.jit
def mask_apply_kernel(x_ptr, keep_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    offs = _block_offsets(BLOCK, WIDE)
    inb = offs < n
    x = tl.load(x_ptr + offs, mask=inb)
    keep = tl.load(keep_ptr + offs, mask=inb, other=0)
    y = tl.where(keep != 0, x.to(tl.float32) * scale, 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=inb)


@triton.jit
def seeded_rand_kernel(x_ptr, y_ptr, n, p, scale, seed, BLOCK: tl.constexpr, WIDE: tl.constexpr,
                       ROUNDS: tl.constexpr):
    offs = _block_offsets(BLOCK, WIDE)
    inb = offs < n
    x = tl.load(x_ptr + offs, mask=inb)
    u = tl.rand(seed, offs, ROUNDS)  # the element's own Philox counter: one call per element
    y = tl.where(u > p, x.to(tl.float32) * scale, 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=inb)


@triton.jit
def _apply_quarter(x_ptr, y_ptr, offs, n, keep, scale):
    inb = offs < n
    x = tl.load(x_ptr + offs, mask=inb)
    y = tl.where(keep, x.to(tl.float32) * scale, 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=inb)


@triton.jit
def _quarter_counters(BLOCK: tl.constexpr, WIDE: tl.constexpr):
    # Counter c of the program's quarter-block; the program covers elements [pid*BLOCK, (pid+1)*BLOCK) and
    # quarter k of it takes word k of the Philox call at counter pid*(BLOCK/4) + i.
    Q: tl.constexpr = BLOCK // 4
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    return pid * BLOCK, pid * Q + tl.arange(0, Q)


@triton.jit
def seeded_rand4x_kernel(x_ptr, y_ptr, n, p, scale, seed, BLOCK: tl.constexpr, WIDE: tl.constexpr,
                         ROUNDS: tl.constexpr):
    Q: tl.constexpr = BLOCK // 4
    start, ctr = _quarter_counters(BLOCK, WIDE)
    u0, u1, u2, u3 = tl.rand4x(seed, ctr, ROUNDS)  # four uniform floats per Philox call
    idx = tl.arange(0, Q)
    _apply_quarter(x_ptr, y_ptr, start + idx, n, u0 > p, scale)
    _apply_quarter(x_ptr, y_ptr, start + Q + idx, n, u1 > p, scale)
    _apply_quarter(x_ptr, y_ptr, start + 2 * Q + idx, n, u2 > p, scale)
    _apply_quarter(x_ptr, y_ptr, start + 3 * Q + idx, n, u3 > p, scale)


@triton.jit
def seeded_randint4x_kernel(x_ptr, y_ptr, n, thresh, scale, seed, BLOCK: tl.constexpr, WIDE: tl.constexpr,
                            ROUNDS: tl.constexpr):
    Q: tl.constexpr = BLOCK // 4
    start, ctr = _quarter_counters(BLOCK, WIDE)
    w0, w1, w2, w3 = tl.randint4x(seed, ctr, ROUNDS)  # four uint32 words per Philox call
    t = thresh.to(tl.uint32)
    idx = tl.arange(0, Q)
    _apply_quarter(x_ptr, y_ptr, start + idx, n, w0 >= t, scale)
    _apply_quarter(x_ptr, y_ptr, start + Q + idx, n, w1 >= t, scale)
    _apply_quarter(x_ptr, y_ptr, start + 2 * Q + idx, n, w2 >= t, scale)
    _apply_quarter(x_ptr, y_ptr, start + 3 * Q + idx, n, w3 >= t, scale)


def launch(kind, x, y, p, seed, keep=None, block=None, rounds=10, num_warps=4, wide=None):
    """Launch one kernel over the flat tensors x -> y (same dtype and size). Returns nothing; asynchronous.
    wide: int64 offsets (default: only when n > 2^31)."""
    n = x.numel()
    wide = n > 2 ** 31 if wide is None else wide
    scale = 1.0 / (1.0 - p)
    if kind == "mask":
        blk = block or 2048
        mask_apply_kernel[(triton.cdiv(n, blk),)](x, keep, y, n, scale, BLOCK=blk, WIDE=wide, num_warps=num_warps)
    elif kind == "rand":
        blk = block or 2048
        seeded_rand_kernel[(triton.cdiv(n, blk),)](x, y, n, p, scale, seed, BLOCK=blk, WIDE=wide, ROUNDS=rounds,
                                                   num_warps=num_warps)
    elif kind == "rand4x":
        blk = block or 4096
        seeded_rand4x_kernel[(triton.cdiv(n, blk),)](x, y, n, p, scale, seed, BLOCK=blk, WIDE=wide, ROUNDS=rounds,
                                                     num_warps=num_warps)
    elif kind == "randint4x":
        blk = block or 4096
        thresh = min(int(round(p * 2 ** 32)), 2 ** 32 - 1)
        seeded_randint4x_kernel[(triton.cdiv(n, blk),)](x, y, n, thresh, scale, seed, BLOCK=blk, WIDE=wide,
                                                        ROUNDS=rounds, num_warps=num_warps)
    else:
        raise ValueError(f"unknown Triton dropout kernel {kind!r}")
