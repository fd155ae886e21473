#!/usr/bin/env python3
"""Opcode histograms of a kernel's SASS and of each of its loops (a backward branch and the code back to its target),
from `cuobjdump -sass` (needs cuobjdump and nvdisasm on PATH). Used to check the Philox ceiling and the RNG tile
kernel per Philox call (docs/rng-scheme.md, "The Philox ceiling").

    scripts/rng_sass.py FILE FUNCTION_SUBSTRING [--dump]

FILE: a cubin, object or executable (e.g. nvcc -cubin -gencode=arch=compute_90a,code=sm_90a ... kernels/rng/philox_ceiling.cu);
FUNCTION_SUBSTRING: part of the mangled name (philox_ceiling_kernelILi7E, rng_tile8_kernelILi7ELb0).
Loops under 30 instructions are not listed."""
import collections
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, pat = sys.argv[1], sys.argv[2]
    out = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, check=True).stdout
    for body in re.split(r"\n\s*Function : ", out)[1:]:
        name = body.split("\n", 1)[0]
        if pat not in name:
            continue
        ins = []
        for line in body.split("\n"):
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)", line)
            if m:
                ins.append((int(m.group(1), 16), m.group(3), m.group(4), line.strip()))
        hist = collections.Counter(op for _, op, _, _ in ins)
        print(f"== {name}: {len(ins)} instructions")
        print("   " + ", ".join(f"{k} {v}" for k, v in hist.most_common()))
        for addr, op, rest, _ in ins:
            m = re.search(r"0x([0-9a-f]+)", rest) if op == "BRA" else None
            if m and int(m.group(1), 16) < addr:
                lo = int(m.group(1), 16)
                loop = collections.Counter(o for a, o, _, _ in ins if lo <= a <= addr)
                n = sum(loop.values())
                if n >= 30:
                    print(f"   loop {lo:#x}..{addr:#x}: {n} instructions: "
                          + ", ".join(f"{k} {v}" for k, v in loop.most_common()))
        if "--dump" in sys.argv:
            print("\n".join(l for _, _, _, l in ins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
