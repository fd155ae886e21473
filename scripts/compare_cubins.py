#!/usr/bin/env python3
"""Compare the wgmma attention kernels two source trees compile to (no GPU; nvcc, ptxas, readelf, c++filt).

Compiles the wgmma attention translation units of each tree (kernels/attention/attention_wgmma*.cu, or --src) to
PTX and to sm_90a cubins, then prints per kernel instance: registers and spill bytes (ptxas -v), SASS bytes, and how
many 16-byte instructions the two cubins share in order (difflib on the instruction words: 1.000 = the same code).
Instances are matched by their schedule's named fields (WgCfg's template arguments read by position for each
signature the kernel has had), so a tree that dropped a knob at its default value still matches.
  scripts/compare_cubins.py OLD_TREE NEW_TREE [--filter TEXT] [--work DIR] [--src GLOB | --src-old G --src-new G]
                            [--reuse-old] [--kernels TEXT]
--kernels '' with --src kernels/dropout/dropout.cu (say) compares another family's kernels the same way.
--reuse-old takes the old tree's cubins and ptxas logs from an earlier run with the same --work (one compile of the
unchanged side instead of one per comparison).
With a disassembler (nvdisasm on PATH or in $NVDISASM; the CUDA toolkit's, or the nvidia-cuda-nvdisasm wheel) a last
column says how the code differs where the bytes do (instruction text, control bits not included): "same", "registers"
(the same instructions in the same order, other register or barrier numbers: ptxas allocated from differently
numbered PTX), "order" (the same instructions, scheduled differently), "operands" (the same opcode counts, other
offsets, immediates or predicates), the opcode counts that changed (new - old), or "?" (a listing it cannot read).
--self-test checks the listing parser and this classification (no compiler needed).
e.g. git archive HEAD~1 kernels | tar -x -C /tmp/old && scripts/compare_cubins.py /tmp/old .
"""
import argparse
import collections
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys

NVCC_FLAGS = ["-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr", "-std=c++20"]


def build(tree, work, tag, src_glob, reuse=False):
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    srcs = sorted(glob.glob(os.path.join(tree, src_glob)))
    if not srcs:
        sys.exit(f"compare_cubins: no source matches {src_glob} in {tree}")
    out = []
    for i, src in enumerate(srcs):
        ptx = os.path.join(work, f"{tag}{i}.ptx")
        cubin = os.path.join(work, f"{tag}{i}.cubin")
        logf = os.path.join(work, f"{tag}{i}.log")
        if not (reuse and os.path.exists(cubin) and os.path.exists(logf)):
            subprocess.run([nvcc, "-I", tree, *NVCC_FLAGS, "-ptx", src, "-o", ptx], check=True)
            log = subprocess.run(["ptxas", "-arch=sm_90a", "-O3", "-v", ptx, "-o", cubin], check=True,
                                 capture_output=True, text=True)
            with open(logf, "w") as f:
                f.write(log.stdout + log.stderr)
        out.append((cubin, open(logf).read()))
    return out


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


# WgCfg's template parameters in each signature the kernel has had (by argument count), and the value a dropped
# knob had wherever it was not set. An instance that used a dropped knob keeps it in its key, so it matches nothing.
WGCFG_FIELDS = {
    12: ["HD", "BN", "ST", "PP", "RS", "PA", "DI", "U2", "ER", "PF", "P", "WS"],
    11: ["HD", "BN", "ST", "PP", "RS", "PA", "DI", "U2", "ER", "PF", "P"],
    9: ["HD", "BN", "ST", "PP", "PA", "DI", "U2", "P", "WS"],
}
DROPPED_DEFAULTS = {"RS": "0", "ER": "0", "PF": "0", "P": "0", "WS": "0", "rngwarps": "0"}


def key(demangled):
    """An instance's schedule and kernel arguments as 'field=value' pairs, dropped knobs at their defaults left out."""
    s = re.sub(r"\(CUtensorMap.*", "", demangled).replace("dropbench::", "").replace("attn_wg::", "")
    m = re.search(r"WgCfg<([^<>]*)>\s*,\s*(.*)>\s*$", s)
    if not m:
        return s
    norm = lambda v: {"true": "1", "false": "0"}.get(v.strip(), re.sub(r"^\(\w+\)", "", v.strip()))
    cfg = [norm(v) for v in m.group(1).split(",")]
    rest = [norm(v) for v in m.group(2).split(",")]
    fields = dict(zip(WGCFG_FIELDS.get(len(cfg), [f"a{i}" for i in range(len(cfg))]), cfg))
    fields.update(zip(["mode", "R", "TW", "causal", "rngwarps"], rest))
    return " ".join(f"{k}={v}" for k, v in fields.items() if DROPPED_DEFAULTS.get(k) != v)


def resources(log):
    res, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            res.setdefault(cur, {})["spill"] = f"{m.group(1)}/{m.group(2)}"
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            res.setdefault(cur, {})["regs"] = int(m.group(1))
    return res


def text_sections(cubin):
    out = subprocess.run(["readelf", "-S", "-W", cubin], capture_output=True, text=True, check=True).stdout
    data = open(cubin, "rb").read()
    secs = {}
    for line in out.splitlines():
        m = re.search(r"\]\s+\.text\.(\S+)\s+\S+\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            off, size = int(m.group(2), 16), int(m.group(3), 16)
            secs[m.group(1)] = data[off:off + size]
    return secs


def nvdisasm_path():
    """$NVDISASM, else nvdisasm on PATH; None (with a warning for an unusable $NVDISASM) when there is none."""
    env = os.environ.get("NVDISASM")
    if env and not os.access(env, os.X_OK):
        print(f"compare_cubins: NVDISASM={env} is not executable; trying PATH", file=sys.stderr)
    for p in (env, shutil.which("nvdisasm")):
        if p and os.access(p, os.X_OK):
            return p
    return None


def parse_sass(text):
    """{mangled name: [instruction text]} of nvdisasm -c output. Branch labels (.L_x_N, numbered across the whole
    cubin) are renumbered per function in order of first use, so that a function's text does not depend on how many
    labels the functions before it have."""
    funcs, cur, labels = {}, None, {}
    for line in text.splitlines():
        m = re.match(r"\.text\.(\S+):$", line.strip())
        if m:
            cur, labels = funcs.setdefault(m.group(1), []), {}
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append(re.sub(r"\.L_x_\d+", lambda x: labels.setdefault(x.group(0), f"L{len(labels)}"), m.group(1)))
    return funcs


def sass_functions(cubin, tool):
    """parse_sass of one cubin; {} (with a warning) when nvdisasm fails on it."""
    try:
        out = subprocess.run([tool, "-c", cubin], capture_output=True, text=True, check=True).stdout
    except (subprocess.CalledProcessError, OSError) as e:
        print(f"compare_cubins: {tool} -c {cubin} failed ({e}); no code column for its instances", file=sys.stderr)
        return {}
    return parse_sass(out)


REGISTERS = re.compile(r"\b(U?)(R|P)\d+\b|\bB\d+\b")


def code_difference(x, y):
    """How two functions' instruction texts (control bits not included) differ: "same"; "registers" (the same
    instructions in the same order once register and barrier numbers are ignored); "order" (the same instructions
    in another order); "operands" (the same opcode counts, other operands: offsets, immediates, predicates); else the
    opcode counts that changed, new - old."""
    if x == y:
        return "same"
    norm = lambda i: REGISTERS.sub(lambda m: f"{m.group(1) or ''}{m.group(2) or 'B'}#", i)  # noqa: E731
    nx, ny = [norm(i) for i in x], [norm(i) for i in y]
    if nx == ny:
        return "registers"
    if collections.Counter(nx) == collections.Counter(ny):
        return "order"
    op = lambda i: re.sub(r"^@!?U?P\w+\s+", "", i).split()[0]  # noqa: E731
    cx, cy = collections.Counter(map(op, x)), collections.Counter(map(op, y))
    d = {o: cy[o] - cx[o] for o in sorted(set(cx) | set(cy)) if cx[o] != cy[o]}
    return "operands" if not d else " ".join(f"{o} {v:+d}" for o, v in d.items())


def code_column(bo, bn, so, sn):
    """The code column of one instance: its texts compared where both parsed to one instruction per 16 bytes, "?"
    otherwise (a listing this parser does not read)."""
    if bo == bn:
        return "same"
    if so is None or sn is None or len(so) * 16 != len(bo) or len(sn) * 16 != len(bn):
        return "?"
    return code_difference(so, sn)


def self_test():
    """No compiler, no disassembler: the listing parser and the classification on hand-made listings."""
    fails = []

    import selftest  # the self-tests' shared checks (scripts/selftest.py)

    ok = selftest.collector(fails)

    listing = """//--------------------- .text._Z1fv --------------------------
\t.section\t.text._Z1fv,"ax",@progbits
.text._Z1fv:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_7) ;
        /*0020*/                   NOP;
.L_x_7:
        /*0030*/                   EXIT ;
.text._Z1gv:
        /*0000*/                   BSSY B0, `(.L_x_9) ;
        /*0010*/                   S2R R2, SR_TID.X ;
"""
    f = parse_sass(listing)
    ok(f == {"_Z1fv": ["LDC R1, c[0x0][0x28]", "@!P0 BRA `(L0)", "NOP", "EXIT"],
             "_Z1gv": ["BSSY B0, `(L0)", "S2R R2, SR_TID.X"]}, f"parse_sass {f}")
    base = ["LDC R1, c[0x0][0x28]", "IADD3 R2, R1, 0x4, RZ", "@!P0 BRA `(L0)", "EXIT"]
    cases = [
        (base, "same"),
        (["LDC R3, c[0x0][0x28]", "IADD3 R2, R3, 0x4, RZ", "@!P1 BRA `(L0)", "EXIT"], "registers"),
        (["IADD3 R2, R1, 0x4, RZ", "LDC R1, c[0x0][0x28]", "@!P0 BRA `(L0)", "EXIT"], "order"),
        (["LDC R1, c[0x0][0x30]", "IADD3 R2, R1, 0x4, RZ", "@!P0 BRA `(L0)", "EXIT"], "operands"),
        (["LDC UR1, c[0x0][0x28]", "IADD3 R2, R1, 0x4, RZ", "@!P0 BRA `(L0)", "EXIT"], "operands"),
        (base + ["NOP", "NOP"], "NOP +2"),
    ]
    for y, want in cases:
        got = code_difference(base, y)
        ok(got == want, f"code_difference -> {got!r}, expected {want!r} for {y}")
    ok(code_column(b"x" * 64, b"x" * 64, None, None) == "same", "equal bytes")
    ok(code_column(b"x" * 64, b"y" * 64, [], []) == "?", "an empty parse is not 'same'")
    ok(code_column(b"x" * 64, b"y" * 64, base, base) == "same", "same text, other control bits")
    return selftest.report("compare_cubins", fails)


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--filter", default="")
    ap.add_argument("--work", default="/tmp/compare_cubins")
    ap.add_argument("--src", default="kernels/attention/attention_wgmma*.cu",
                    help="translation units holding the instances, a glob relative to each tree")
    ap.add_argument("--src-old", help="--src for the old tree only")
    ap.add_argument("--src-new", help="--src for the new tree only")
    ap.add_argument("--reuse-old", action="store_true", help="the old tree's cubins from an earlier run in --work")
    ap.add_argument("--kernels", default="wgmma_kernel",
                    help="compare the kernels whose demangled name contains this (default: the wgmma attention's); "
                         "'' for every kernel of the translation units")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tool = nvdisasm_path()
    sides = []
    for tree, tag, src, reuse in ((a.old, "old", a.src_old or a.src, a.reuse_old), (a.new, "new", a.src_new or a.src, False)):
        side = {}
        for cubin, log in build(tree, a.work, tag, src, reuse):
            secs, res = text_sections(cubin), resources(log)
            sass = sass_functions(cubin, tool) if tool else {}
            names = demangle(list(secs))
            side.update({key(names[n]): (secs[n], res.get(n, {}), sass.get(n)) for n in secs if a.kernels in names[n]})
        sides.append(side)
    old, new = sides
    print("| instance | regs old / new | spill st/ld old / new | SASS bytes old / new | instructions shared in order |"
          + (" code |" if tool else ""))
    print("|---|---|---|---|---:|" + ("---|" if tool else ""))
    for k in sorted(set(old) & set(new)):
        if a.filter not in k:
            continue
        (bo, ro, so), (bn, rn, sn) = old[k], new[k]
        io = [bo[i:i + 16] for i in range(0, len(bo), 16)]
        inn = [bn[i:i + 16] for i in range(0, len(bn), 16)]
        share = difflib.SequenceMatcher(None, io, inn, autojunk=False).ratio()
        code = f" {code_column(bo, bn, so, sn)} |" if tool else ""
        print(f"| `{k}` | {ro.get('regs')} / {rn.get('regs')} | {ro.get('spill')} / {rn.get('spill')} | "
              f"{len(bo)} / {len(bn)} | {share:.3f} |{code}")
    print(f"\n{len(set(old) & set(new))} instance(s) in both trees", file=sys.stderr)
    for tag, only in (("old", sorted(set(old) - set(new))), ("new", sorted(set(new) - set(old)))):
        if only:
            print(f"\n{len(only)} instance(s) in the {tag} tree only:", file=sys.stderr)
            for k in only:
                print(f"  {k}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
