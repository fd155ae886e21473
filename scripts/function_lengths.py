#!/usr/bin/env python3
"""Lines per function in C++ / CUDA sources (no compiler needed): every named function's body, from the line of its
opening brace's declaration to its closing brace; lambdas and local structs count towards the function around
them, member functions of a class count on their own.
  scripts/function_lengths.py [--max N] [--top K] PATH...   (directories: every .cu .cuh .cpp .hpp .h .cc below)
Prints the K longest (default 10) and exits 1 if any is longer than --max (default: no limit).
"""
import argparse
import os
import re
import sys

EXTS = (".cu", ".cuh", ".cpp", ".hpp", ".h", ".cc")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|else|do)\b|\b(if|for|while|switch|catch)\s*\(")


def strip(text):
    """Comments, strings, characters and preprocessor lines blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n" or text[:i].rstrip(" \t").endswith("\n")):
            j = i
            while True:  # continued preprocessor lines
                k = text.find("\n", j)
                k = n if k < 0 else k
                if text[k - 1:k] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    res, stack, header_start = [], [], 0  # stack: (kind, name, start line)
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            header_start = i + 1
        elif c == "{":
            header = text[header_start:i]
            inside_fn = any(k == "fn" for k, _, _ in stack)
            kind = "block"
            if not inside_fn:
                h = " ".join(header.split())
                if re.search(r"\b(namespace|struct|class|union|enum)\b[^()]*$", h) or h.startswith("extern"):
                    kind = "scope"
                elif ")" in h and not CONTROL.search(h) and not re.search(r"=\s*$", h):
                    kind = "fn"
            name = ""
            if kind == "fn":
                names = [n for n in re.findall(r"([~\w:]+|operator\S+)\s*(?:<[^<>()]*>)?\s*\(", header)
                         if not n.startswith("__") and n not in ("decltype", "alignas", "noexcept")]
                name = names[-1] if names else "?"
                # the declaration's first line: the header's first non-blank line
                hl = header.lstrip("\n \t")
                start = line - hl.count("\n")
            stack.append((kind, name, start if kind == "fn" else line))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "fn":
                    res.append((line - start + 1, path, start, name))
            header_start = i + 1
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--max", type=int, default=0)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    files = []
    for p in a.paths:
        if os.path.isdir(p):
            for d, _, fs in os.walk(p):
                files += [os.path.join(d, f) for f in fs if f.endswith(EXTS)]
        else:
            files.append(p)
    allf = sorted((f for p in sorted(files) for f in functions(p)), reverse=True)
    for n, path, start, name in allf[: a.top]:
        print(f"{n:5d}  {path}:{start}  {name}")
    over = [f for f in allf if a.max and f[0] > a.max]
    if over:
        print(f"{len(over)} function(s) longer than {a.max} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
