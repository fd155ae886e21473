#!/usr/bin/env python3
"""ctypes binding of libdropbench_attention.so (capi/dropbench_attention.h): dropbench's attention kernels and its
RNG mask kernel, callable on PyTorch tensors in the same process as PyTorch's own attention.

    from dropbench_attn import Lib
    lib = Lib()                                   # build/libdropbench_attention.so, or $DROPBENCH_ATTENTION_LIB
    prm = lib.params(qkv, o, batch=1, sq=8192, q_heads=32, kv_heads=8, head_dim=128, causal=True, dropout_p=0.1)
    lib.attention(prm, "fused", stream)           # stream: torch.cuda.current_stream().cuda_stream (an int)

Only ctypes here (no torch import): tensors are passed as data_ptr() integers by the caller.
"""
import ctypes
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _header(name, what):
    """(path, text) of kernels/common/NAME, the one place of the values the scripts read from it."""
    path = REPO / "kernels" / "common" / name
    try:
        return path, path.read_text()
    except OSError as e:
        raise RuntimeError(f"{path}: cannot read {what} ({e}); the scripts run from the source tree")


def _find(header, pattern, name):
    """The first group of pattern (multi-line) in a _header's text; RuntimeError naming the file if absent."""
    path, text = header
    m = re.search(pattern, text, re.M)
    if not m:
        raise RuntimeError(f"{path}: {name} not found")
    return m.group(1)


def _dispatch_values():
    """The instantiated values and the defaults, as kernels/common/dispatch.cuh states them."""
    h = _header("dispatch.cuh", "the instantiated values")
    lists = {n: tuple(int(x) for x in _find(h, rf"^inline constexpr int {n}\[\]\s*=\s*\{{([^}}]*)\}}", n).split(",")
                      if x.strip())
             for n in ("kPhiloxRounds", "kThresholdBits", "kHeadDims")}
    defaults = {n: int(_find(h, rf"^inline constexpr int {n}\s*=\s*(\d+)\s*;", n))
                for n in ("kDefaultRounds", "kDefaultThresholdBits")}
    return lists, defaults


_LISTS, _DEFAULTS = _dispatch_values()
PHILOX_ROUNDS = _LISTS["kPhiloxRounds"]          # (3, 5, 7, 10)
THRESHOLD_BITS = _LISTS["kThresholdBits"]        # (8, 16, 32)
HEAD_DIMS = _LISTS["kHeadDims"]                  # (64, 128)
DEFAULT_ROUNDS = _DEFAULTS["kDefaultRounds"]     # 7
DEFAULT_THRESHOLD_BITS = _DEFAULTS["kDefaultThresholdBits"]  # 8
# The backward's FLOPs over the forward's, as kernels/common/shapes.hpp states it.
BWD_FLOP_RATIO = float(_find(_header("shapes.hpp", "the backward's FLOP ratio"),
                             r"^inline constexpr double kAttentionBwdFlopRatio\s*=\s*([0-9.]+)\s*;",
                             "kAttentionBwdFlopRatio"))  # 2.5
PASS_FLOP_RATIOS = {"fwd": 1.0, "bwd": BWD_FLOP_RATIO, "fwd+bwd": 1.0 + BWD_FLOP_RATIO}


def attention_flops(batch, q_heads, sq, head_dim, causal, pass_="fwd"):
    """FLOPs of one attention pass over the whole problem (no row window) as dropbench counts them
    (kernels/attention/attention.cu): the forward's 4*B*Hq*SQ^2*dH, halved when causal, times the pass's ratio
    (PASS_FLOP_RATIOS: fwd, bwd, fwd+bwd)."""
    fwd = 4.0 * batch * q_heads * sq * sq * head_dim / (2 if causal else 1)
    return fwd * PASS_FLOP_RATIOS[pass_]


MODES = {"none": 0, "mask": 1, "fused": 2}
KERNELS = {"auto": 0, "mma": 1, "wgmma": 2}
ABI_VERSION = 2


class DbaError(RuntimeError):
    """A non-zero status of the library: .code is DBA_CUDA (1), DBA_USAGE (2) or DBA_OTHER (3)."""

    def __init__(self, code, msg):
        super().__init__(f"dropbench_attention: {msg} (status {code})")
        self.code = code


class Params(ctypes.Structure):
    _fields_ = [("qkv", ctypes.c_void_p), ("qkv_row_stride", ctypes.c_int64), ("o", ctypes.c_void_p),
                ("o_row_stride", ctypes.c_int64), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int32), ("sq", ctypes.c_int32), ("q_heads", ctypes.c_int32),
                ("kv_heads", ctypes.c_int32), ("head_dim", ctypes.c_int32), ("causal", ctypes.c_int32),
                ("softmax_scale", ctypes.c_float), ("dropout_p", ctypes.c_double), ("seed", ctypes.c_uint64),
                ("offset", ctypes.c_uint32), ("rounds", ctypes.c_int32), ("threshold_bits", ctypes.c_int32),
                ("kernel", ctypes.c_int32), ("mask", ctypes.c_void_p), ("mask_out", ctypes.c_void_p)]


_FIELD_NAMES = frozenset(name for name, _ in Params._fields_)


def default_path():
    env = os.environ.get("DROPBENCH_ATTENTION_LIB")
    return Path(env) if env else REPO / "build" / "libdropbench_attention.so"


class Lib:
    def __init__(self, path=None):
        self.path = Path(path) if path else default_path()
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: not built (cmake --build build --target dropbench_attention)")
        self.so = ctypes.CDLL(str(self.path))
        so = self.so
        so.dba_abi_version.restype = ctypes.c_int
        so.dba_params_size.restype = ctypes.c_size_t
        so.dba_last_error.restype = ctypes.c_char_p
        so.dba_params_init.argtypes = [ctypes.POINTER(Params)]
        so.dba_params_init.restype = None
        so.dba_attention.argtypes = [ctypes.POINTER(Params), ctypes.c_int, ctypes.c_void_p]
        so.dba_mask_bytes.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(ctypes.c_uint64)]
        so.dba_make_mask.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p, ctypes.c_void_p]
        so.dba_kernel_name.argtypes = [ctypes.POINTER(Params), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        so.dba_threshold.argtypes = [ctypes.POINTER(Params), ctypes.POINTER(ctypes.c_double),
                                     ctypes.POINTER(ctypes.c_float)]
        for f in ("dba_attention", "dba_mask_bytes", "dba_make_mask", "dba_kernel_name", "dba_threshold"):
            getattr(so, f).restype = ctypes.c_int
        # The backward (a library built before it lacks these: has_backward is then False).
        self.has_backward = hasattr(so, "dba_attention_backward")
        if self.has_backward:
            so.dba_attention_backward_workspace_bytes.argtypes = [ctypes.POINTER(Params), ctypes.c_int,
                                                                  ctypes.POINTER(ctypes.c_uint64)]
            so.dba_attention_backward.argtypes = [ctypes.POINTER(Params), ctypes.c_int, ctypes.c_void_p,
                                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            so.dba_backward_kernel_name.argtypes = [ctypes.POINTER(Params), ctypes.c_int, ctypes.c_int,
                                                    ctypes.c_char_p, ctypes.c_size_t]
            for f in ("dba_attention_backward_workspace_bytes", "dba_attention_backward", "dba_backward_kernel_name"):
                getattr(so, f).restype = ctypes.c_int
        # The dense expansion of a tile mask (host only; absent from a library built before it).
        self.has_mask_expand = hasattr(so, "dba_mask_expand")
        if self.has_mask_expand:
            so.dba_mask_expand.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p, ctypes.c_void_p]
            so.dba_mask_expand.restype = ctypes.c_int
        v = so.dba_abi_version()
        if v != ABI_VERSION:
            raise RuntimeError(f"{self.path}: ABI version {v}, this binding speaks {ABI_VERSION}")
        if so.dba_params_size() != ctypes.sizeof(Params):
            raise RuntimeError(f"{self.path}: dba_params is {so.dba_params_size()} bytes, this binding's "
                               f"{ctypes.sizeof(Params)}")

    def _check(self, status):
        if status != 0:
            raise DbaError(status, self.so.dba_last_error().decode(errors="replace"))

    def params(self, qkv=0, o=0, lse=0, mask=0, kernel="auto", **fields):
        """A Params with the library's defaults, then the given fields (qkv / o / lse / mask: data_ptr() ints)."""
        p = Params()
        self.so.dba_params_init(ctypes.byref(p))
        p.qkv, p.o, p.lse, p.mask = qkv or None, o or None, lse or None, mask or None
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)} (got {kernel!r})")
        p.kernel = KERNELS[kernel]
        for k, v in fields.items():
            if k not in _FIELD_NAMES:
                raise ValueError(f"unknown field {k!r}")
            setattr(p, k, int(v) if k == "causal" else v)
        return p

    @staticmethod
    def _mode(mode):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
        return MODES[mode]

    def attention(self, p, mode, stream=0):
        self._check(self.so.dba_attention(ctypes.byref(p), self._mode(mode), ctypes.c_void_p(stream or None)))

    def attention_raw(self, p, mode_code, stream=0):
        """Status code, no exception (the self-test's bad-input checks)."""
        return self.so.dba_attention(ctypes.byref(p), mode_code, ctypes.c_void_p(stream or None))

    def mask_bytes(self, p):
        n = ctypes.c_uint64()
        self._check(self.so.dba_mask_bytes(ctypes.byref(p), ctypes.byref(n)))
        return n.value

    def make_mask(self, p, mask_ptr, stream=0):
        self._check(self.so.dba_make_mask(ctypes.byref(p), ctypes.c_void_p(mask_ptr), ctypes.c_void_p(stream or None)))

    def mask_expand(self, p, words):
        """The dense keep matrix of a tile-layout mask, on the host: `words` (bytes-like, dba_mask_bytes(p) bytes, e.g.
        a device mask copied back) -> bytearray of batch * q_heads * sq * sq bytes, [bh][row][col] = 1 kept, 0 dropped
        or above the causal diagonal. The layout is the library's (kernels/rng/dropout_scheme.cuh), not restated here."""
        if not self.has_mask_expand:
            raise RuntimeError(f"{self.path}: no dba_mask_expand (an older build)")
        need = self.mask_bytes(p)
        if len(words) != need:
            raise ValueError(f"words: {need} bytes for this shape (got {len(words)})")
        src = (ctypes.c_char * need).from_buffer_copy(words)
        out = bytearray(p.batch * p.q_heads * p.sq * p.sq)
        dst = (ctypes.c_char * len(out)).from_buffer(out)
        self._check(self.so.dba_mask_expand(ctypes.byref(p), ctypes.cast(src, ctypes.c_void_p),
                                            ctypes.cast(dst, ctypes.c_void_p)))
        return out

    def kernel_name(self, p, mode):
        buf = ctypes.create_string_buffer(256)
        self._check(self.so.dba_kernel_name(ctypes.byref(p), self._mode(mode), buf, len(buf)))
        return buf.value.decode()

    def threshold(self, p):
        pe, sc = ctypes.c_double(), ctypes.c_float()
        self._check(self.so.dba_threshold(ctypes.byref(p), ctypes.byref(pe), ctypes.byref(sc)))
        return pe.value, sc.value

    def backward_workspace_bytes(self, p, deterministic=False):
        n = ctypes.c_uint64()
        self._check(self.so.dba_attention_backward_workspace_bytes(ctypes.byref(p), int(deterministic), ctypes.byref(n)))
        return n.value

    def backward(self, p, mode, dout_ptr, dqkv_ptr, workspace_ptr, deterministic=False, stream=0):
        """p: the forward's params (qkv, o, lse, mask, dropout fields); dout / dqkv / workspace: data_ptr() ints."""
        self._check(self.so.dba_attention_backward(ctypes.byref(p), self._mode(mode), ctypes.c_void_p(dout_ptr),
                                                   ctypes.c_void_p(dqkv_ptr), ctypes.c_void_p(workspace_ptr),
                                                   int(deterministic), ctypes.c_void_p(stream or None)))

    def backward_kernel_name(self, p, mode, deterministic=False):
        buf = ctypes.create_string_buffer(256)
        self._check(self.so.dba_backward_kernel_name(ctypes.byref(p), self._mode(mode), int(deterministic), buf, len(buf)))
        return buf.value.decode()

    def last_error(self):
        return self.so.dba_last_error().decode(errors="replace")
