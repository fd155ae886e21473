#!/usr/bin/env python3
"""Compare the wgmma attention kernels two source trees compile to (no GPU; nvcc, ptxas, readelf, c++filt).

Compiles kernels/attention/attention_wgmma.cu of each tree to PTX and to an sm_90a cubin, then prints per kernel
instance: registers and spill bytes (ptxas -v), SASS bytes, and how many 16-byte instructions the two cubins share
in order (difflib on the instruction words: 1.000 = the same code). Instances are matched by their template
arguments; WgCfg's PERSIST and WAIT_SPLIT flags (added in sessions 10 and 15) are dropped from the newer tree's names.
  scripts/compare_cubins.py OLD_TREE NEW_TREE [--filter TEXT] [--work DIR]
e.g. git archive 2aef497 kernels | tar -x -C /tmp/old && scripts/compare_cubins.py /tmp/old . --filter DropoutMode)2
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

NVCC_FLAGS = ["-O3", "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr", "-std=c++20"]


def build(tree, work, tag):
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    src = os.path.join(tree, "kernels/attention/attention_wgmma.cu")
    ptx = os.path.join(work, tag + ".ptx")
    cubin = os.path.join(work, tag + ".cubin")
    subprocess.run([nvcc, "-I", tree, *NVCC_FLAGS, "-ptx", src, "-o", ptx], check=True)
    log = subprocess.run(["ptxas", "-arch=sm_90a", "-O3", "-v", ptx, "-o", cubin], check=True, capture_output=True,
                         text=True)
    return cubin, log.stdout + log.stderr


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


def key(demangled, keep=10):
    """An instance's template arguments, short, with WgCfg's arguments after the first `keep` dropped (10: the two
    added last, PERSIST and WAIT_SPLIT, are dropped so that an older tree's names match; lab/scripts/wait_split_sass.py
    keeps 11)."""
    s = re.sub(r"\(CUtensorMap.*", "", demangled).replace("dropbench::", "").replace("attn_wg::", "")
    s = re.sub(r"(WgCfg<(?:[^<>,]+, ){%d})[^<>]+>" % keep, r"\1>", s)
    return s.replace(", >", ">").replace("void attn_fwd_wgmma_kernel", "")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--filter", default="")
    ap.add_argument("--work", default="/tmp/compare_cubins")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sides = []
    for tree, tag in ((a.old, "old"), (a.new, "new")):
        cubin, log = build(tree, a.work, tag)
        secs, res = text_sections(cubin), resources(log)
        names = demangle(list(secs))
        sides.append({key(names[n]): (secs[n], res.get(n, {})) for n in secs})
    old, new = sides
    print("| instance | regs old / new | spill st/ld old / new | SASS bytes old / new | instructions shared in order |")
    print("|---|---|---|---|---:|")
    for k in sorted(set(old) & set(new)):
        if a.filter not in k:
            continue
        (bo, ro), (bn, rn) = old[k], new[k]
        io = [bo[i:i + 16] for i in range(0, len(bo), 16)]
        inn = [bn[i:i + 16] for i in range(0, len(bn), 16)]
        share = difflib.SequenceMatcher(None, io, inn, autojunk=False).ratio()
        print(f"| `{k}` | {ro.get('regs')} / {rn.get('regs')} | {ro.get('spill')} / {rn.get('spill')} | "
              f"{len(bo)} / {len(bn)} | {share:.3f} |")
    missing = sorted(set(old) ^ set(new))
    if missing:
        print(f"\n{len(missing)} instance(s) in one tree only", file=sys.stderr)


if __name__ == "__main__":
    main()
