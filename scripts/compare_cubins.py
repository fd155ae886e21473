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
column says how the code differs where the bytes do: "same" (identical instructions), "registers" (the same
instructions in the same order, other register numbers: ptxas allocated from differently numbered PTX), "order"
(the same opcode counts, scheduled differently) or the opcode counts that changed (new - old).
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
    p = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    return p if p and os.access(p, os.X_OK) else None


def sass_functions(cubin, tool):
    """{mangled name: [instruction text]} of a cubin, from nvdisasm."""
    out = subprocess.run([tool, "-c", cubin], capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"\.text\.(\S+):$", line.strip())
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append(m.group(1))
    return funcs


def code_difference(x, y):
    """How two instruction lists differ: same, registers, order, or {opcode: count new - old}."""
    if x == y:
        return "same"
    regs = re.compile(r"\bU?R\d+\b|\bU?P\d\b")
    if [regs.sub("R", i) for i in x] == [regs.sub("R", i) for i in y]:
        return "registers"
    op = lambda i: re.sub(r"^@!?U?P\w+\s+", "", i).split()[0]  # noqa: E731
    cx, cy = collections.Counter(map(op, x)), collections.Counter(map(op, y))
    d = {o: cy[o] - cx[o] for o in sorted(set(cx) | set(cy)) if cx[o] != cy[o]}
    return "order" if not d else " ".join(f"{o} {v:+d}" for o, v in d.items())


def main():
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
        code = (f" {code_difference(so, sn)} |" if so is not None and sn is not None else " ? |") if tool else ""
        print(f"| `{k}` | {ro.get('regs')} / {rn.get('regs')} | {ro.get('spill')} / {rn.get('spill')} | "
              f"{len(bo)} / {len(bn)} | {share:.3f} |{code}")
    print(f"\n{len(set(old) & set(new))} instance(s) in both trees", file=sys.stderr)
    for tag, only in (("old", sorted(set(old) - set(new))), ("new", sorted(set(new) - set(old)))):
        if only:
            print(f"\n{len(only)} instance(s) in the {tag} tree only:", file=sys.stderr)
            for k in only:
                print(f"  {k}", file=sys.stderr)


if __name__ == "__main__":
    main()
