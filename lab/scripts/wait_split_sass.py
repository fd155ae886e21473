#!/usr/bin/env python3
"""Where ptxas puts the P V wait in the wgmma attention's main loop, at each WgCfg WAIT_SPLIT level (no GPU).

Compiles kernels/attention/attention_wgmma.cu to an sm_90a cubin once per level (DROPBENCH_WG_WAIT_SPLIT=0: as
dispatched; 1-3: every schedule at that level), disassembles them (cuobjdump -sass; it needs nvdisasm beside it or on
PATH) and, for every kernel instance, walks each main-loop block: from the S wait (`WARPGROUP.DEPBAR.LE gsb0, 0x1`,
S_j done, P_{j-1} V_{j-1} may still run) to the next HGMMA or turn barrier. It counts the softmax's MUFU.EX2 before
the P V wait (`WARPGROUP.DEPBAR.LE gsb0, 0x0`), i.e. the share of the exponentials that can run under
P_{j-1} V_{j-1}, and the instructions after the wait (what the warpgroup still does once P V is done, before its
next turn).
  scripts/wait_split_sass.py [--tree DIR] [--levels 0,1,2,3] [--filter TEXT] [--md OUT.md] [--work DIR]
Tools: nvcc (CUDA 12.4+), cuobjdump and nvdisasm (a CUDA toolkit's, or PyPI's nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels: their nvidia/cu13/bin), c++filt. --self-test checks the parser on a made-up listing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from compare_cubins import NVCC_FLAGS, demangle, key  # noqa: E402  (the same compile flags and instance names)

INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def tool(name):
    env = os.environ.get(name.upper())
    if env:
        return env
    p = shutil.which(name)
    if p:
        return p
    for d in ("/usr/local/cuda/bin",):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    sys.exit(f"wait_split_sass.py: {name} not found (set {name.upper()} or PATH)")


def functions(sass):
    """{mangled name: [instruction text]} from cuobjdump -sass output."""
    out, cur = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        m = INSN.match(line)
        if m and cur:
            out[cur].append(m.group(2))
    return out


def loop_blocks(insns):
    """Per main-loop block (S wait to the next HGMMA or turn barrier): (EX2 before the P V wait, EX2 after it, P V
    wait seen, instructions after the wait)."""
    blocks = []
    i = 0
    while i < len(insns):
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in insns[i]:
            before = after = tail = 0
            seen = False
            j = i + 1
            while j < len(insns) and "HGMMA" not in insns[j] and "BAR.SYNC" not in insns[j]:
                t = insns[j]
                if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in t:
                    seen = True
                else:
                    tail += seen
                    if "MUFU.EX2" in t:
                        if seen:
                            after += 1
                        else:
                            before += 1
                j += 1
            blocks.append((before, after, seen, tail))
            i = j
        else:
            i += 1
    return blocks


def summary(insns):
    """(EX2 before the P V wait, EX2 in all, blocks, mean instructions after the wait) over the blocks with a wait."""
    bl = [b for b in loop_blocks(insns) if b[2]]
    if not bl:
        return None
    return sum(b[0] for b in bl), sum(b[0] + b[1] for b in bl), len(bl), sum(b[3] for b in bl) / len(bl)


def short(demangled):
    """The instance's arguments without WAIT_SPLIT (the 12th WgCfg argument): the builds' names then match."""
    return key(demangled, keep=11)


def build(tree, work, split, cuobjdump):
    """{mangled name: instructions} of attention_wgmma.cu compiled with DROPBENCH_WG_WAIT_SPLIT=split."""
    cubin = os.path.join(work, f"split{split}.cubin")
    src = os.path.join(tree, "kernels/attention/attention_wgmma.cu")
    subprocess.run([tool("nvcc"), "-I", tree, *NVCC_FLAGS, f"-DDROPBENCH_WG_WAIT_SPLIT={split}", "-cubin", src, "-o", cubin],
                   check=True)
    sass = subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True, text=True).stdout
    return functions(sass)


def self_test():
    listing = """
        Function : _Z1fv
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], RZ, !UPT, gsb0 ;
        /*0010*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0020*/                   MUFU.EX2 R1, R1 ;
        /*0030*/                   MUFU.EX2 R2, R2 ;
        /*0040*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0050*/                   MUFU.EX2 R3, R3 ;
        /*0058*/                   FMUL R5, R5, R6 ;
        /*0060*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], RZ, !UPT ;
        /*0070*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0080*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0090*/                   MUFU.EX2 R3, R3 ;
        /*00a0*/                   MUFU.EX2 R4, R4 ;
        /*00b0*/                   EXIT ;
        Function : _Z1gv
        /*0000*/                   MUFU.EX2 R3, R3 ;
    """
    f = functions(listing)
    ok = set(f) == {"_Z1fv", "_Z1gv"} and len(f["_Z1fv"]) == 13
    ok = ok and loop_blocks(f["_Z1fv"]) == [(2, 1, True, 2), (0, 2, True, 3)] and summary(f["_Z1fv"]) == (2, 5, 2, 2.5)
    ok = ok and summary(f["_Z1gv"]) is None
    key = short("void dropbench::attn_wg::attn_fwd_wgmma_kernel<dropbench::attn_wg::WgCfg<128, 128, 3, true, 0, false, "
                "1, true, false, 0, false, 2>, (dropbench::DropoutMode)0, 7, 8, false, false>(CUtensorMap_st, ...)")
    ok = ok and key == "<WgCfg<128, 128, 3, true, 0, false, 1, true, false, 0, false>, (DropoutMode)0, 7, 8, false, false>"
    print("wait_split_sass self-test:", "ok" if ok else f"FAILED ({f}, {key})")
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--filter", default="", help="only instances whose demangled name contains this")
    ap.add_argument("--levels", default="0,1,2,3", help="WAIT_SPLIT levels to build (default 0,1,2,3)")
    ap.add_argument("--md", help="write the table here too")
    ap.add_argument("--work", help="keep the cubins here (default: a temporary folder)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    cuobjdump = tool("cuobjdump")
    work = a.work or tempfile.mkdtemp(prefix="wait_split_")
    os.makedirs(work, exist_ok=True)
    try:
        levels = [int(x) for x in a.levels.split(",")]
        assert levels and all(0 <= x <= 3 for x in levels)
    except (ValueError, AssertionError):
        print(f"wait_split_sass.py: error: --levels: comma-separated 0 to 3 (got {a.levels!r})", file=sys.stderr)
        return 2
    builds = {lv: build(a.tree, work, lv, cuobjdump) for lv in levels}
    names = demangle([m for fns in builds.values() for m in fns])
    by_key = {}
    for lv, fns in builds.items():
        for mangled, insns in fns.items():
            k = short(names[mangled])
            if a.filter and a.filter not in k:
                continue
            by_key.setdefault(k, {})[lv] = summary(insns)
    lines = ["Per WAIT_SPLIT level (0 = the dispatched build): the main loop's softmax exponentials (MUFU.EX2) issued "
             "before the P V wait (`WARPGROUP.DEPBAR.LE gsb0, 0x0`), i.e. under P_{j-1} V_{j-1} (before / all, over "
             "the loop's blocks in the SASS), and the mean instructions per block after the wait (before the next "
             "turn or GEMM). Instances: WgCfg<HD, BN, stages, ping-pong, RNG stages, Philox ahead, coding, unroll2, "
             "early rescale, mask prefetch, persist>, mode (0 none, 1 mask, 2 fused), rounds, threshold width, "
             "causal, RNG warps.\n",
             "| instance | " + " | ".join(f"level {lv}" for lv in levels) + " |", "|---|" + "---|" * len(levels)]

    def cell(v):
        if v is None:
            return "-"
        share = f"{100.0 * v[0] / v[1]:.0f} %" if v[1] else "-"
        return f"{v[0]} / {v[1]} ({share}); {v[3]:.0f} after"

    for k in sorted(by_key):
        v = by_key[k]
        lines.append(f"| `{k}` | " + " | ".join(cell(v.get(lv)) for lv in levels) + " |")
    md = "\n".join(lines) + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
