#!/usr/bin/env python3
"""Static SASS of the wgmma attention backward's consumer block loop, per block and thread (no GPU).

Compiles the four instance files (kernels/attention/bwd/attention_bwd_wgmma_hd{128,64}{,_fused}.cu) of a commit or
of the working tree for sm_90a (-lineinfo), disassembles them (nvdisasm -gi) and, per instance (dH 128 / 64; modes
none, mask, fused), finds the consumer loop over blocks (the first backward branch whose body holds HGMMA) and
enumerates its paths from the loop head to the back edge. A path is chosen by what it executes, not by line info:
  - every mbarrier spin succeeds at its first try; the fused mode's run-time (R, TW) switch is evaluated at
    Philox-7 / TW 8 (--rounds, --tw);
  - all HGMMA of the block (the most over all paths: the fast-mode dQ GEMM included), no TMA reduce (UTMAREDG) and no
    bulk wait (DEPBAR.LE SB0): those belong to the issuing thread t == 0 only; no zero dS^T store (STS of RZ: a block
    the consumer skips); the most BAR.SYNC and STS (fast-mode dQ: dS^T stored, the consumers meet); fused: the most
    IMAD.WIDE.U32 (the word is generated);
  - common path: a non-edge block (no -INF, mode mask's zeroing and the tile_read test skipped); edge path: an edge
    block (masking, zeroing and tile_read test run).
dH 64 alternates the dQ slice between the consumers: "common" is a block where the consumer owns it, "non-owner" one
where it does not (16 HGMMA). Prints a markdown table: total and per class, the edge path, the static loop body, and
ptxas registers / spill bytes per instance. Source lines are read from the snapshot the objects were built from.

  lab/scripts/bwd_loop_sass.py [REV ...]     # each REV a git revision, or WT for the working tree (default: WT)
Environment: NVCC (default /usr/local/cuda/bin/nvcc), NVDISASM (default: on PATH, else next to nvcc), DUMP (a
folder: each chosen path's instructions with their source lines, one file per revision, instance and path, for
diffing two revisions' paths line by line).
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
FLAGS = ["-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr", "-std=c++20",
         "-lineinfo", "-cubin", "-Xptxas", "-v"]
FILES = ["hd128", "hd128_fused", "hd64", "hd64_fused"]
INSTANCES = [("hd128", 0, "128 none"), ("hd128", 1, "128 mask"), ("hd128_fused", 2, "128 fused"),
             ("hd64", 0, "64 none"), ("hd64", 1, "64 mask"), ("hd64_fused", 2, "64 fused")]
CLASSES = ["int", "fp", "mufu", "mem", "wgmma", "branch/sync", "conv"]
ROUNDS, TW = 7, 8


def nvdisasm():
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    found = shutil.which("nvdisasm")
    return found or os.path.join(os.path.dirname(NVCC), "nvdisasm")


def build(rev, work):
    src = os.path.join(work, "src")
    os.makedirs(src)
    if rev == "WT":
        tar = subprocess.run(["tar", "-cf", "-", "kernels"], cwd=REPO, capture_output=True, check=True).stdout
    else:
        tar = subprocess.run(["git", "archive", rev, "kernels"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=tar, check=True)
    logs = {}
    for f in FILES:
        cu = os.path.join(src, f"kernels/attention/bwd/attention_bwd_wgmma_{f}.cu")
        r = subprocess.run([NVCC, "-I", src, *FLAGS, cu, "-o", os.path.join(work, f + ".cubin")], capture_output=True,
                           text=True, check=True)
        logs[f] = r.stdout + r.stderr
    return logs


SRC = {}


def srcline(loc):
    f, n = loc.rsplit(":", 1)
    if f not in SRC:
        try:
            SRC[f] = open(f).read().splitlines()
        except OSError:
            SRC[f] = []
    n = int(n)
    return SRC[f][n - 1].strip() if 0 < n <= len(SRC[f]) else ""


def parse(cubin, mode):
    text = subprocess.run([nvdisasm(), "-gi", "-c", cubin], capture_output=True, text=True, check=True).stdout
    ins, labels, cur, loc, fresh = [], {}, None, None, True
    for line in text.splitlines():
        m = re.match(r"^\.text\.(\S+):", line)
        if m:
            cur = m.group(1)
            continue
        if cur is None or f"DropoutModeE{mode}E" not in cur:
            continue
        m = re.match(r'^\s*//## File "([^"]+)", line (\d+)', line)
        if m:
            if fresh:  # the first line of a group is the innermost frame
                loc, fresh = f"{m.group(1)}:{m.group(2)}", False
            continue
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            fresh = True
            ins.append({"i": len(ins), "txt": m.group(2), "loc": loc or "?:0"})
    return ins, labels


def strip(t):
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", t)


def opc(t):
    return strip(t).split()[0]


def guard(t):
    m = re.match(r"^@(!?U?P[T0-9]+)\s+", t)
    return m.group(1) if m else None


def klass(op):
    b = op.split(".")[0]
    if b in ("HGMMA", "WARPGROUP"):
        return "wgmma"
    if b == "MUFU":
        return "mufu"
    if b in ("FADD", "FMUL", "FFMA", "FSEL", "FSETP", "FMNMX", "F2FP", "HADD2", "HFMA2", "HMUL2", "F2F"):
        return "fp"
    if b in ("LDS", "STS", "LDG", "STG", "LDL", "STL", "LDC", "ULDC", "LD", "ST", "SYNCS", "UBLKCP", "UTMALDG",
             "UTMAREDG", "UTMACCTL", "ATOMS", "RED", "REDG", "ATOMG", "FENCE", "MEMBAR", "UTMACMDFLUSH", "CCTL"):
        return "mem"
    if b in ("BRA", "BRX", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "BAR", "WARPSYNC", "YIELD", "NANOSLEEP", "ELECT",
             "VOTEU", "VOTE", "DEPBAR"):
        return "branch/sync"
    if b in ("I2F", "F2I", "I2FP", "F2IP"):
        return "conv"
    return "int"


def target(labels, x):
    m = re.search(r"`\((\.L_x_\d+)\)", x["txt"])
    return labels[m.group(1)] if m else None


def find_loop(ins, labels):
    for x in ins:  # the first back edge whose body holds HGMMA: the consumer's loop over blocks
        if opc(x["txt"]).startswith("BRA"):
            t = target(labels, x)
            if t is not None and t < x["i"] and any("HGMMA" in y["txt"] for y in ins[t:x["i"]]):
                return t, x["i"]
    raise SystemExit("no consumer loop found")


def static_body(ins, labels, lo, hi):
    body = ins[lo:hi + 1]
    starts = set(labels.values())
    for x in ins[hi + 1:]:  # out-of-line blocks branching back into the loop (spin retries)
        if opc(x["txt"]).startswith("BRA") and guard(x["txt"]) is None:
            t = target(labels, x)
            if t is not None and lo <= t <= hi:
                j = x["i"]
                while j > hi + 1 and j not in starts:
                    j -= 1
                body = body + ins[j:x["i"] + 1]
    return body


def eval_pred(ins, i, p):
    neg, p = p.startswith("!"), p.lstrip("!")
    if p in ("PT", "UPT"):
        return not neg
    for y in reversed(ins[max(0, i - 150):i]):
        t = strip(y["txt"])
        m = re.match(r"U?ISETP\.(NE|EQ|GE|GT|LT|LE)\.(AND|OR)\s+(U?P\d+),\s*U?PT,\s*U?R[\w.]+,\s*(0x[0-9a-f]+|\d+),\s*(!?U?P[T0-9]+)", t)
        if m and m.group(3) == p:
            imm, src = int(m.group(4), 0), srcline(y["loc"])
            if "a.rounds" in src or "a.tw" in src:  # the binary search over the lists (a.rounds < R, a.tw < T)
                v = ROUNDS if "a.rounds" in src else TW
            else:  # the pairwise tests: the two lists are disjoint
                v = ROUNDS if imm in (3, 5, 7, 10) else TW
            r = {"NE": v != imm, "EQ": v == imm, "GE": v >= imm, "GT": v > imm, "LT": v < imm, "LE": v <= imm}[m.group(1)]
            c = eval_pred(ins, y["i"], m.group(5))
            r = (r and c) if m.group(2) == "AND" else (r or c)
            return r != neg
        m = re.match(r"U?PLOP3\.LUT\s+(U?P\d+),\s*U?PT,\s*U?PT,\s*U?PT,\s*(!?U?P[T0-9]+),\s*0x80", t)
        if m and m.group(1) == p:
            return eval_pred(ins, y["i"], m.group(2)) != neg
    raise RuntimeError(f"predicate {p} not found before instruction {i}")


def dispatch_taken(ins, x):
    m = re.match(r"^@(!?U?P[T0-9]+)\s+BRA(\.\w+)*\s+(!?U?P[T0-9]+),", x["txt"])
    if m:
        return eval_pred(ins, x["i"], m.group(1)) and eval_pred(ins, x["i"], m.group(3))
    return eval_pred(ins, x["i"], guard(x["txt"]))


def paths(ins, labels, lo, hi, edge):
    out, stack = [], [(lo, [])]
    while stack:
        i, path = stack.pop()
        seen = set(path)
        while True:
            x = ins[i]
            if i in seen or opc(x["txt"]).startswith("EXIT") or i + 1 >= len(ins):
                path = None  # a cycle inside one iteration (an unresolved spin) or out of the loop
                break
            path.append(i)
            seen.add(i)
            if i == hi:
                break
            if not opc(x["txt"]).startswith("BRA"):
                i += 1
                continue
            t, p = target(labels, x), guard(x["txt"])
            if p is None:
                i = t
                continue
            src = srcline(x["loc"])
            spin = "mbar_wait" in src or "while (!done)" in src
            if "TRYWAIT" in ins[i - 1]["txt"] or (spin and any("TRYWAIT" in y["txt"] for y in ins[i - 60:i])):
                i = t if not p.startswith("!") else i + 1  # the wait succeeds at once
                continue
            if ("a.rounds == R && a.tw == TW" in src or "if (a.rounds < R)" in src or "if (a.tw < T)" in src or
                    "if (v < T) return search_list" in src):
                i = t if dispatch_taken(ins, x) else i + 1
                continue
            if t > i:
                ft = ins[i + 1:t]
                ftsrc = " ".join(srcline(y["loc"]) for y in ft)
                hot = any(k in y["txt"] for y in ft for k in ("HGMMA", "IMAD.WIDE"))
                small_mask = t - i < 24 and any("-INF" in y["txt"] for y in ft)
                if not hot and (small_mask or "a.geo.rows16()" in ftsrc or
                                "tile_read(a, static_cast<uint32_t>(q0 / 16 + j), c64)" in ftsrc):
                    i = i + 1 if edge else t  # per block: masking, zeroing, tile_read test on edge blocks only
                    continue
            stack.append((t, list(path)))  # both ways
            i += 1
        if path is not None:
            out.append(path)
    return out


def choose(ins, ps, edge, hgmma=None):
    def f(p):
        txt = [ins[i]["txt"] for i in p]
        return {"hgmma": sum("HGMMA" in t for t in txt), "inf": sum("-INF" in t for t in txt),
                "t0": sum("UTMAREDG" in t or "DEPBAR.LE SB0" in t for t in txt),
                "zero": sum(bool(re.match(r"STS\S*\s+\[[^\]]*\],\s*RZ", strip(t))) for t in txt),
                "wide": sum("IMAD.WIDE.U32" in t for t in txt), "bar": sum("BAR.SYNC" in t for t in txt),
                "sts": sum(opc(t).startswith("STS") for t in txt)}
    fs = [(p, f(p)) for p in ps]
    want = hgmma if hgmma is not None else max(x["hgmma"] for _, x in fs)
    ok = [(p, x) for p, x in fs if x["hgmma"] == want and x["t0"] == 0 and x["zero"] == 0 and (x["inf"] > 0) == edge]
    for k in ("wide", "bar", "sts"):
        if ok:
            m = max(x[k] for _, x in ok)
            ok = [(p, x) for p, x in ok if x[k] == m]
    lens = sorted({len(p) for p, _ in ok})
    return (ok[0][0] if ok else None), lens


def counts(seq):
    c = collections.Counter(klass(opc(x["txt"])) for x in seq)
    c["total"] = len(seq)
    return c


def resources(log):
    res, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = re.search(r"DropoutModeE(\d)", m.group(1)).group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            res.setdefault(cur, {})["spill"] = f"{m.group(1)}/{m.group(2)}"
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            res.setdefault(cur, {})["regs"] = m.group(1)
    warn = [l for l in log.splitlines() if "warning" in l.lower() or "C7512" in l]
    return res, warn


def fmt(c):
    return f"{c['total']} ({'/'.join(str(c.get(k, 0)) for k in CLASSES)})"


def dump(rev, name, kind, ins, p):
    d = os.environ.get("DUMP")
    if not d or not p:
        return
    os.makedirs(d, exist_ok=True)
    fn = os.path.join(d, f"{rev.replace('/', '_')}_{name.replace(' ', '_')}_{kind}.sass")
    with open(fn, "w") as f:
        for i in p:
            loc = ins[i]["loc"]
            f.write(f"{ins[i]['txt']:<70} // {os.path.basename(loc)} {srcline(loc)[:80]}\n")


def report(rev):
    work = tempfile.mkdtemp(prefix="bwd_loop_sass_")
    logs = build(rev, work)
    print(f"\n### {rev}\n")
    print(f"| instance | common path ({' / '.join(CLASSES)}) | edge path | dH 64 non-owner | static body | "
          "regs | spill st/ld |")
    print("|---|---|---|---|---|---|---|")
    for f, mode, name in INSTANCES:
        ins, labels = parse(os.path.join(work, f + ".cubin"), mode)
        lo, hi = find_loop(ins, labels)
        row = []
        for edge in (False, True):
            p, lens = choose(ins, paths(ins, labels, lo, hi, edge), edge)
            dump(rev, name, "edge" if edge else "common", ins, p)
            flag = "" if len(lens) == 1 else f" (ambiguous: {lens})"
            row.append(fmt(counts([ins[i] for i in p])) + flag if p else "none found")
        non = ""
        if f.startswith("hd64"):
            p, lens = choose(ins, paths(ins, labels, lo, hi, False), False, hgmma=16)
            non = (str(len(p)) + ("" if len(lens) == 1 else f" (ambiguous: {lens})")) if p else "none found"
        res, warn = resources(logs[f])
        r = res.get(str(mode), {})
        print(f"| {name} | {row[0]} | {row[1]} | {non} | {len(static_body(ins, labels, lo, hi))} | {r.get('regs')} | "
              f"{r.get('spill')} |")
        for w in warn:
            print(f"  ptxas: {w.strip()}")
    shutil.rmtree(work)


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["WT"]:
        report(rev)
