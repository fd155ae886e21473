#!/usr/bin/env python3
"""Regenerate the SASS-derived demand counts of configs/profiles/<machine>.json.

Compiles the RNG mask kernels (kernels/rng/rng_mask.cu) and the attention kernels (kernels/attention/attention.cu) for
sm_90a, disassembles them (cuobjdump -sass), finds the main loop of each kernel (the innermost backward
branch whose body holds the kernel's characteristic instruction: STG for the RNG kernels, HMMA for
attention), and counts the loop body's instructions by execution pipe. Forward branches inside the loop
split off conditional regions: a region that writes -INF (the causal / sequence-end masking of attention)
is counted apart as "edge", a region guarded by a warp vote (the skip-rescale of mode none) as "rescale";
everything else is counted as executed on every iteration.

Usage:
  scripts/profile_sass.py                       # compile the working tree, update configs/profiles/h200.json
  scripts/profile_sass.py --git-rev HEAD        # compile a clean export of a commit instead
  scripts/profile_sass.py --check               # recompute from the commit the stored counts came from and compare
  scripts/profile_sass.py --check --src .       # ... from the working tree instead (exit 1 on any change)
  scripts/profile_sass.py --print               # print the counts, write nothing

Only the "sass" objects (and "resources") of the profile's kernels are rewritten; everything else in the
file (HBM bytes, GEMM demands, derivation notes, "ncu") is left as it is. See docs/model.md.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, OrderedDict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import dropbench_attn as dba  # noqa: E402  (the instantiated rounds and threshold widths: kernels/common/dispatch.cuh)
ARCH = "-gencode=arch=compute_90a,code=sm_90a"
NVCC_FLAGS = [ARCH, "-std=c++20", "--expt-relaxed-constexpr", "-O3", "-I.", "-Ikernels", "-cubin"]

# ---------------------------------------------------------------------------------------------------------
# Instruction classes. Each SASS opcode maps to one execution class; the machine file gives each class a
# rate (warp instructions, or bytes/FLOPs, per clock per SM) and the unit it loads. Weights: how many
# issue-equivalents of that class's pipe one instruction takes.
# ---------------------------------------------------------------------------------------------------------
IMAD_PIPE = {"IMAD", "VIADD", "IMUL"}          # integer multiply-add datapath (FMA-heavy pipe)
ALU_PIPE = {"LOP3", "LOP", "SHF", "SHL", "SHR", "IADD3", "IADD", "PRMT", "VIMNMX", "IMNMX", "ISETP", "SEL",
            "LEA", "MOV", "FSEL", "FMNMX", "FSETP", "R2P", "P2R", "PLOP3", "BMSK", "SGXT", "FLO", "BREV",
            "IABS", "VOTE", "CSET", "CSETP", "ICMP", "FCMP", "I2IP", "LOP32I", "IADD32I", "VABSDIFF4",
            "VABSDIFF", "VSETP", "PSETP", "P2UR", "R2UR"}
FMA_PIPE = {"FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "HFMA2", "HADD2", "HMUL2", "FSWZADD",
            "F2FP", "HMNMX2", "FCHK"}
MUFU_PIPE = {"MUFU"}
CONV_PIPE = {"F2F", "F2I", "I2F", "I2FP", "F2IP", "FRND", "POPC"}
MMA_PIPE = {"HMMA", "HGMMA", "IMMA", "QGMMA", "BMMA", "DMMA"}
LSU_PIPE = {"LDG", "STG", "LDS", "STS", "LDSM", "LDGSTS", "LD", "ST", "LDL", "STL", "ATOM", "ATOMS", "ATOMG",
            "RED", "SHFL", "LDC", "ULDC", "MATCH", "LDGDEPBAR", "STSM", "REDUX"}
UNIFORM = re.compile(r"^U[A-Z0-9]")  # UIADD3, ULOP3, UIMAD...: the uniform datapath (not modelled)


def classify(op):
    base = op.split(".")[0]
    if base in MMA_PIPE:
        return "mma"
    if base in MUFU_PIPE:
        return "mufu"
    if base in CONV_PIPE:
        return "conv"
    if base in IMAD_PIPE:
        return "imad"
    if base in FMA_PIPE:
        return "fma"
    if base in LSU_PIPE and base not in ("LDC", "ULDC", "LDGDEPBAR"):
        return "lsu"
    if base in ALU_PIPE:
        return "alu"
    if UNIFORM.match(base):
        return "uniform"
    return "other"  # BRA, BAR, DEPBAR, NOP, S2R, CS2R, BSSY, BSYNC, EXIT, LDC, ...


def imad_weight(op):
    # IMAD.WIDE (64-bit result) and IMAD.HI (high half of the 64-bit product) occupy the 16-lane/SMSP
    # integer multiplier for two passes; every other IMAD form (incl. IMAD.MOV/.IADD/.SHL/.X) one.
    parts = op.split(".")
    return 2 if ("WIDE" in parts or "HI" in parts) else 1


def mma_flops(op):
    # mma.sync shapes: HMMA.16816 = m16n8k16, HMMA.1688 = m16n8k8; 2*M*N*K FLOPs per warp instruction.
    parts = op.split(".")
    if parts[0] == "HMMA":
        if "16816" in parts:
            return 2 * 16 * 8 * 16
        if "1688" in parts:
            return 2 * 16 * 8 * 8
    raise ValueError(f"unknown MMA shape in {op}")


def smem_bytes(op):
    """Shared-memory bytes moved by one warp instruction (reads or writes), 0 if none."""
    parts = op.split(".")
    base = parts[0]
    if base == "LDSM":  # ldmatrix: .M88.{1,2,4} 8x8 b16 matrices of 128 B
        n = 4 if "4" in parts else 2 if "2" in parts else 1
        return 128 * n
    if base in ("LDS", "STS", "LDGSTS"):
        width = 4
        for p in parts:
            if p in ("64", "128", "U8", "S8", "U16", "S16"):
                width = {"64": 8, "128": 16, "U8": 1, "S8": 1, "U16": 2, "S16": 2}[p]
        return 32 * width
    return 0


INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
PRED = re.compile(r"^(@!?U?P[0-9T]+)\s+")


def parse_sass(text):
    """[(addr, pred, opcode, operands)] of one function's SASS listing."""
    out = []
    for line in text.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        body = m.group(2).strip()
        pred = ""
        pm = PRED.match(body)
        if pm:
            pred = pm.group(1)
            body = body[pm.end():]
        op, _, rest = body.partition(" ")
        out.append((addr, pred, op, rest.strip()))
    return out


REG = re.compile(r"(?<![A-Z_])R(\d+)(\.reuse)?")


def reg_reads(op, operands):
    """Register-file reads of one warp instruction: source register operands not served by the operand
    reuse cache (.reuse), 64-bit operands counted twice, HMMA fragments at their width."""
    ops = [o.strip() for o in operands.split(",")] if operands else []
    base = op.split(".")[0]
    if base in ("STG", "STS", "ST", "STL", "RED", "ATOM", "BRA", "EXIT", "BAR", "LDGSTS", "STSM"):
        srcs = ops  # no register destination
    elif base in ("ISETP", "FSETP", "PLOP3", "VOTE", "R2P", "PSETP"):
        srcs = ops[1:]
        if base in ("ISETP", "FSETP") and len(ops) > 1:
            srcs = ops[2:]  # two predicate destinations
    else:
        srcs = ops[1:]
    if base == "HMMA":
        # A (4 regs), B (2 regs), C (4 regs for f32 accumulate; RZ = zero accumulator)
        n = 0
        widths = [4, 2, 4]
        for w, s in zip(widths, srcs[:3]):
            m = REG.search(s)
            if m and not s.startswith("RZ") and not m.group(2):
                n += w
        return n
    n = 0
    for s in srcs:
        for m in REG.finditer(s):
            if m.group(2):
                continue
            wide = ".64" in s[m.end():m.end() + 3] or (base == "IMAD" and "WIDE" in op and s is srcs[-1])
            n += 2 if wide else 1
    return n


def branch_target(operands):
    """Address of a BRA ("0x1710", or "P1, 0x38c0" with a second predicate), None if indirect."""
    m = re.search(r"(0x[0-9a-f]+)\s*$", operands)
    return int(m.group(1), 16) if m else None


def loops(insns):
    """Backward branches: (start_index, end_index) of each loop body, innermost first."""
    idx = {a: i for i, (a, _, _, _) in enumerate(insns)}
    out = []
    for i, (a, pred, op, rest) in enumerate(insns):
        if op.split(".")[0] != "BRA":
            continue
        t = branch_target(rest)
        if t is not None and t < a and t in idx:
            out.append((idx[t], i))
    out.sort(key=lambda r: r[1] - r[0])
    return out


def regions(insns, lo, hi):
    """Conditional regions inside loop [lo, hi]: forward branches to targets inside the loop skip
    instructions (branch+1 .. target-1). Returns [(kind, start, end_exclusive)]."""
    idx = {a: i for i, (a, _, _, _) in enumerate(insns)}
    regs = []
    for i in range(lo, hi):
        a, pred, op, rest = insns[i]
        if op.split(".")[0] != "BRA" or not pred:
            continue
        t = branch_target(rest)
        if t is None or t <= a or t not in idx or idx[t] > hi:
            continue
        s, e = i + 1, idx[t]
        body = insns[s:e]
        ops = [x[2] for x in body]
        text = " ".join(x[3] for x in body)
        if any(o.startswith("HMMA") for o in ops):
            kind = "hot"  # skips the whole block's work (causal: warp entirely before the key block)
        elif "-INF" in text and any(o.startswith("FSEL") for o in ops):
            kind = "edge"
        elif sum(o.startswith("FMUL") for o in ops) * 2 >= len(ops) and "VOTE" in [
                x[2].split(".")[0] for x in insns[lo:i]]:
            kind = "rescale"  # skip-rescale: O *= alpha, skipped when a warp vote says no row max changed
        else:
            kind = "hot"
        regs.append((kind, s, e))
    return regs


def count(insns, ranges, exclude=()):
    c = Counter()
    ops = Counter()
    for s, e in ranges:
        for i in range(s, e):
            if any(xs <= i < xe for xs, xe in exclude):
                continue
            _, _, op, rest = insns[i]
            cls = classify(op)
            ops[op] += 1
            c["issue"] += 1
            if cls != "mma":
                c["inst"] += 1
            c["regfile"] += reg_reads(op, rest)
            if cls == "imad":
                c["imad"] += imad_weight(op)
            elif cls == "mma":
                c["mma_sync_bf16_flops"] += mma_flops(op)
                if mma_flops(op) != 4096:
                    raise ValueError(f"only HMMA.16816 is modelled, found {op}")
                c["hmma16816"] += 1
            elif cls in ("alu", "fma", "mufu", "conv", "lsu"):
                c[cls] += 1
            b = smem_bytes(op)
            if b:
                c["smem_bytes"] += b
            base = op.split(".")[0]
            if base == "STG":
                c["stg"] += 1
            if base in ("LDG",):
                c["ldg"] += 1
    return c, ops


def loop_profile(insns, marker):
    """Profile of the innermost loop that contains `marker` (an opcode prefix)."""
    for lo, hi in loops(insns):
        if any(insns[i][2].startswith(marker) for i in range(lo, hi + 1)):
            regs = regions(insns, lo, hi + 1)
            cold = [(s, e) for k, s, e in regs if k != "hot"]
            hot, hot_ops = count(insns, [(lo, hi + 1)], exclude=cold)
            extra = {}
            for kind in ("edge", "rescale"):
                rr = [(s, e) for k, s, e in regs if k == kind]
                if rr:
                    extra[kind], _ = count(insns, rr)
            return {"loop": [insns[lo][0], insns[hi][0]], "hot": hot, "hot_opcodes": hot_ops, "extra": extra}
    raise RuntimeError(f"no loop containing {marker}")


def tools(args):
    def find(name, env):
        cand = [os.environ.get(env)] if os.environ.get(env) else []
        cand += [shutil.which(name), f"/usr/local/cuda/bin/{name}"]
        cand += [f"/tmp/cuobj/nvidia/cu13/bin/{name}", f"/tmp/cuobj2/nvidia/cu13/bin/{name}"]
        for c in cand:
            if c and os.path.exists(c):
                return c
        sys.exit(f"profile_sass.py: {name} not found (set {env})")
    nvcc = find("nvcc", "NVCC")
    cuobjdump = find("cuobjdump", "CUOBJDUMP")
    nvdisasm = find("nvdisasm", "NVDISASM")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    return nvcc, cuobjdump, env


def compile_cubin(nvcc, src_dir, source, out):
    subprocess.run([nvcc] + NVCC_FLAGS + ["-o", out, source], cwd=src_dir, check=True)


def sass_of(cuobjdump, env, cubin):
    txt = subprocess.run([cuobjdump, "-sass", cubin], env=env, check=True, capture_output=True, text=True).stdout
    funcs = {}
    cur = None
    buf = []
    for line in txt.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            if cur:
                funcs[cur] = "\n".join(buf)
            cur, buf = m.group(1), []
        elif cur:
            buf.append(line)
    if cur:
        funcs[cur] = "\n".join(buf)
    res = subprocess.run([cuobjdump, "-res-usage", cubin], env=env, check=True, capture_output=True, text=True).stdout
    usage = {}
    fn = None
    for line in res.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
        if m and fn:
            usage[fn] = {"registers": int(m.group(1)), "stack": int(m.group(2)), "static_smem": int(m.group(3)),
                         "local": int(m.group(4))}
    return funcs, usage


def find_fn(funcs, pattern):
    hits = [f for f in funcs if re.search(pattern, f)]
    if len(hits) != 1:
        raise RuntimeError(f"pattern {pattern} matched {len(hits)} functions")
    return hits[0]


def per_element(c, elements):
    keys = ["inst", "hmma16816", "imad", "alu", "fma", "mufu", "conv", "lsu", "smem_bytes", "regfile"]
    return OrderedDict((k, round(c.get(k, 0) / elements, 6)) for k in keys)


def rng_entries(funcs, usage):
    out = OrderedDict()
    for r in dba.PHILOX_ROUNDS:
        for tw in dba.THRESHOLD_BITS:
            for layout, kern in (("tile", "rng_tile_kernel"), ("bits", "rng_bits_kernel")):
                fn = find_fn(funcs, rf"{kern}ILi{r}ELi{tw}E")
                insns = parse_sass(funcs[fn])
                prof = loop_profile(insns, "STG")
                hot = prof["hot"]
                # Each STG stores one 32-bit keep word per lane = 32 elements per lane, 1024 per warp.
                elements = hot["stg"] * 1024
                key = f"rng_{layout}_r{r}_tw{tw}"
                out[key] = OrderedDict([
                    ("function", fn),
                    ("loop_pc", [hex(prof["loop"][0]), hex(prof["loop"][1])]),
                    ("elements_per_iteration", elements),
                    ("per_iteration", OrderedDict(sorted((k, v) for k, v in hot.items()))),
                    ("per_element", per_element(hot, elements)),
                    ("opcodes_per_iteration", OrderedDict(sorted(prof["hot_opcodes"].items()))),
                    ("resources", usage.get(fn, {})),
                    ("derivation", f"cuobjdump -sass of {fn} (sm_90a), main loop {hex(prof['loop'][0])}-"
                                   f"{hex(prof['loop'][1])}: every instruction counted once by pipe "
                                   f"(scripts/profile_sass.py classify()); one iteration stores {hot['stg']} keep "
                                   f"word(s) per lane = {elements} elements per warp; per_element = "
                                   f"per_iteration / {elements}"),
                    ("ncu", None),
                ])
    return out


ATTN_CASES = [
    # key, mode enum (0 none, 1 mask, 2 fused), R, TW, causal, skip-rescale config flag
    ("attn_none", 0, 7, 8, 0, 1),
    ("attn_none_causal", 0, 7, 8, 1, 1),
    ("attn_mask", 1, 7, 8, 0, 0),
    ("attn_mask_causal", 1, 7, 8, 1, 0),
    # Non-causal fused runs the skip-rescale tiling (kernels/attention/attention_kernel.cuh: CfgHd128FusedNc).
] + [(f"attn_fused_r{r}_tw{tw}", 2, r, tw, 0, 1) for r in dba.PHILOX_ROUNDS for tw in dba.THRESHOLD_BITS] + [
    (f"attn_fused_r{r}_tw{tw}_causal", 2, r, tw, 1, 0) for r in dba.PHILOX_ROUNDS for tw in dba.THRESHOLD_BITS]


def attn_entries(funcs, usage):
    out = OrderedDict()
    for key, mode, r, tw, causal, skip in ATTN_CASES:
        pat = rf"CfgILi128ELi4ELi2ELi64ELi2ELb{skip}EEELNS_11DropoutModeE{mode}ELi{r}ELi{tw}ELb{causal}EE"
        fn = find_fn(funcs, pat)
        insns = parse_sass(funcs[fn])
        prof = loop_profile(insns, "HMMA")
        hot = prof["hot"]
        # One iteration = one warp x one 64-key block x 2 strips of 16 rows = 2048 score elements.
        elements = 2048
        assert hot["hmma16816"] == 256, (key, hot["hmma16816"])
        e = OrderedDict([
            ("function", fn),
            ("loop_pc", [hex(prof["loop"][0]), hex(prof["loop"][1])]),
            ("elements_per_iteration", elements),
            ("per_iteration", OrderedDict(sorted((k, v) for k, v in hot.items()))),
            ("per_element", per_element(hot, elements)),
        ])
        for kind, c in prof["extra"].items():
            e[f"{kind}_extra_per_iteration"] = OrderedDict(sorted((k, v) for k, v in c.items()))
        e["opcodes_per_iteration"] = OrderedDict(sorted(prof["hot_opcodes"].items()))
        e["resources"] = usage.get(fn, {})
        e["derivation"] = (f"cuobjdump -sass of {fn} (sm_90a), key-block loop {hex(prof['loop'][0])}-"
                           f"{hex(prof['loop'][1])}: one iteration = one warp x one 64-key block x 2 strips of 16 "
                           f"rows = 2048 score elements, 256 HMMA.16816; conditional regions counted apart: "
                           f"edge (-INF masking, causal diagonal / sequence end), rescale (skip-rescale FMULs); "
                           f"everything else counted once; per_element = per_iteration / 2048")
        e["ncu"] = None
        out[key] = e
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=os.path.join(ROOT, "configs/profiles/h200.json"))
    ap.add_argument("--src", default=ROOT, help="source tree to compile (default: this checkout)")
    ap.add_argument("--git-rev", help="compile a clean `git archive` of this commit instead of --src")
    ap.add_argument("--check", action="store_true", help="compare with the stored counts; exit 1 if they differ")
    ap.add_argument("--print", action="store_true", help="print the counts as JSON, write nothing")
    args = ap.parse_args()

    if args.check and not args.git_rev and args.src == ROOT:
        # Check against the source the stored counts were generated from (a commit), not a working tree that
        # may be mid-edit.
        with open(args.profile) as f:
            rev = json.load(f).get("sass_meta", {}).get("git_rev")
        if rev:
            args.git_rev = rev
            print(f"profile_sass.py: checking against the stored source, git {rev} (use --src . for the working tree)")
    nvcc, cuobjdump, env = tools(args)
    work = tempfile.mkdtemp(prefix="profile_sass.")
    try:
        src = args.src
        if args.git_rev:
            src = os.path.join(work, "src")
            os.makedirs(src)
            arch = subprocess.run(["git", "-C", ROOT, "archive", args.git_rev, "kernels", "src"], check=True,
                                  capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", src], input=arch, check=True)
        rng_cubin = os.path.join(work, "rng_mask.cubin")
        attn_cubin = os.path.join(work, "attention.cubin")
        compile_cubin(nvcc, src, "kernels/rng/rng_mask.cu", rng_cubin)
        compile_cubin(nvcc, src, "kernels/attention/attention.cu", attn_cubin)
        rf, ru = sass_of(cuobjdump, env, rng_cubin)
        af, au = sass_of(cuobjdump, env, attn_cubin)
        sass = OrderedDict()
        sass.update(rng_entries(rf, ru))
        sass.update(attn_entries(af, au))
        nv = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
        if args.git_rev:
            sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=7", args.git_rev], check=True,
                                 capture_output=True, text=True).stdout.strip()
            source = f"git {sha} (clean export)"
            meta_rev = sha
        else:
            source = "working tree " + os.path.abspath(src)
        meta = OrderedDict([("nvcc", nv), ("flags", " ".join(NVCC_FLAGS[:-1])), ("source", source)])
        if args.git_rev:
            meta["git_rev"] = meta_rev
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if args.print:
        print(json.dumps({"sass_meta": meta, "sass": sass}, indent=2))
        return 0
    with open(args.profile) as f:
        prof = json.load(f, object_pairs_hook=OrderedDict)
    if args.check:
        old = prof.get("sass", {})
        bad = []
        for k, v in sass.items():
            o = old.get(k)
            if o is None:
                bad.append(f"{k}: missing in {args.profile}")
                continue
            if o.get("per_iteration") != json.loads(json.dumps(v["per_iteration"])):
                bad.append(f"{k}: per_iteration differs: stored {o.get('per_iteration')} vs now {dict(v['per_iteration'])}")
        for b in bad:
            print(b)
        print("profile_sass.py: " + ("counts match" if not bad else f"{len(bad)} kernels differ"))
        return 1 if bad else 0
    prof["sass_meta"] = meta
    prof["sass"] = sass
    tmp = args.profile + ".tmp"
    with open(tmp, "w") as f:
        json.dump(prof, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.profile)
    print(f"profile_sass.py: wrote {len(sass)} kernels' SASS counts into {args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
