#!/usr/bin/env python3
"""An A/B of two builds of the attention library from two head-to-head runs with their roles swapped: the slots'
own bias taken out.

    scripts/h2h_ab.py AB.json SWAPPED.json [-o ab.json] [--md ab.md]

AB.json: `h2h_attention_bwd.py --lib X --lib-b Y` (or `h2h_attention.py`); SWAPPED.json: the same shapes with
`--lib Y --lib-b X`. The same library loaded in both slots reads lib A / lib B 0.97-0.99 rather than 1
(docs/measurement.md), so a ratio within a few per cent of 1 from one run says nothing about the code. For each shape
both runs measured and each mode, the per-round ratios time(X) / time(Y) of the first run (lib A over lib B) and of
the second (lib B over lib A) give dbstats.swapped_ratio_ci: X / Y with the slot's scale cancelled, its 95 %
interval, and the slot's scale itself (1 = no bias). Variants compared: the A/B pairs the two scripts time back to
back (h2h_attention.AB_PAIRS, h2h_attention_bwd.AB_PAIRS).

Bad input (a missing or unreadable file, runs whose libraries are not swapped, no shape in common): one line naming
it, exit 2, nothing written (train_model_check.run_cli, the checks' one command line). --self-test: synthetic runs
(no GPU).
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dbstats  # noqa: E402  (the scripts' one statistics module)
import h2h_attention  # noqa: E402  (the forward's A/B pairs)
import h2h_attention_bwd  # noqa: E402  (the backward's A/B pairs)
import train_model_check  # noqa: E402  (run_cli, check_outputs: the checks' one command line)

# (lib A's variant, lib B's) of both scripts.
PAIRS = h2h_attention.AB_PAIRS + h2h_attention_bwd.AB_PAIRS
UsageError = train_model_check.UsageError  # one class: run_cli catches it


def load(path):
    try:
        doc = json.loads(Path(path).read_text())
        ctx, points = doc["context"], doc["points"]
        return ctx, points
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a head-to-head run ({type(e).__name__}: {e})"[:300])


def shape_key(p):
    s = p["shape"]
    return (s["sq"], s["head_dim"], bool(s["causal"]), s.get("q_heads"), s.get("kv_heads"), s.get("batch"))


def combine(ctx1, pts1, ctx2, pts2):
    x_lib, y_lib = ctx1.get("library"), ctx1.get("library_b")
    if not y_lib or ctx2.get("library") != y_lib or ctx2.get("library_b") != x_lib:
        raise UsageError(f"library / library_b: the second run must swap the first's ({x_lib}, {y_lib}); it has "
                         f"({ctx2.get('library')}, {ctx2.get('library_b')})")
    second = {shape_key(p): p for p in pts2}
    rows = []
    for p in pts1:
        q = second.get(shape_key(p))
        if q is None:
            continue
        for a, b in PAIRS:
            ab = dbstats.paired_ratios(p["samples"], a, b)
            sw = dbstats.paired_ratios(q["samples"], b, a)
            if not ab or not sw:
                continue
            x, lo, hi, slot = dbstats.swapped_ratio_ci(ab, sw, seed=len(rows))
            rows.append({"shape": p["shape"], "variant": a, "x_over_y": x, "ci95": [lo, hi], "slot_scale": slot,
                         "rounds": [len(ab), len(sw)]})
    if not rows:
        raise UsageError("points: no shape and lib A / lib B variant in common between the two runs")
    return {"schema": "dropbench.h2h_ab", "schema_version": 1, "x": x_lib, "y": y_lib,
            "runs": [ctx1.get("date_utc"), ctx2.get("date_utc")], "device": [ctx1.get("device"), ctx2.get("device")],
            "rows": rows}


def markdown(doc):
    out = [f"X = {doc['x']}, Y = {doc['y']}; time(X) / time(Y) from two runs with the slots swapped "
           f"({doc['runs'][0]}, {doc['runs'][1]}); slot = the first slot's scale of a variant's time (1: no bias).\n",
           "| SQ | dH | causal | variant | X / Y | 95 % CI | slot | rounds |", "|---:|---:|---|---|---:|---|---:|---|"]
    for r in doc["rows"]:
        s = r["shape"]
        out.append(f"| {s['sq']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | {r['variant']} | "
                   f"{r['x_over_y']:.3f} | {r['ci95'][0]:.3f}-{r['ci95'][1]:.3f} | {r['slot_scale']:.3f} | "
                   f"{r['rounds'][0]} + {r['rounds'][1]} |")
    return "\n".join(out) + "\n"


def work(argv):
    ap = argparse.ArgumentParser(prog="h2h_ab.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("ab")
    ap.add_argument("swapped")
    ap.add_argument("-o", "--output")
    ap.add_argument("--md")
    a = train_model_check.check_outputs(ap.parse_args(argv))
    doc = combine(*load(a.ab), *load(a.swapped))
    return a, doc, markdown(doc)


def self_test():
    import contextlib
    import io
    import tempfile
    fails = []

    import selftest  # the self-tests' shared checks (scripts/selftest.py)

    ok = selftest.collector(fails)

    def fake(lib, lib_b, ta, tb):
        samples = {"bwd:wg:none": [{"round": r, "s_per_call": ta * (1 + 0.01 * (r % 3))} for r in range(6)],
                   "bwd:wgB:none": [{"round": r, "s_per_call": tb * (1 + 0.01 * (r % 3))} for r in range(6)]}
        shape = {"sq": 8192, "head_dim": 128, "causal": True, "q_heads": 32, "kv_heads": 8, "batch": 1}
        return {"library": lib, "library_b": lib_b, "date_utc": "t"}, [{"shape": shape, "samples": samples}]

    # X takes 1.1x Y's time; the first slot runs its variant at 0.97x
    doc = combine(*fake("X", "Y", 1.1 * 0.97, 1.0), *fake("Y", "X", 0.97, 1.1))
    r = doc["rows"][0]
    ok(len(doc["rows"]) == 1 and abs(r["x_over_y"] - 1.1) < 1e-9 and abs(r["slot_scale"] - 0.97) < 1e-9
       and r["ci95"][0] <= r["x_over_y"] <= r["ci95"][1] and r["rounds"] == [6, 6], f"combined {r}")
    ok("| 8192 | 128 | yes | bwd:wg:none | 1.100 |" in markdown(doc), markdown(doc))
    for bad, needle in (((fake("X", "Y", 1, 1), fake("X", "Y", 1, 1)), "library"),
                        ((fake("X", "Y", 1, 1), ({"library": "Y", "library_b": "X"}, [])), "points")):
        try:
            combine(*bad[0], *bad[1])
            fails.append(f"accepted {needle}")
        except UsageError as e:
            ok(needle in str(e), f"message {e}")
    with tempfile.TemporaryDirectory() as d:
        p1, p2 = Path(d, "a.json"), Path(d, "b.json")
        for path, (ctx, pts) in ((p1, fake("X", "Y", 1.0, 1.0)), (p2, fake("Y", "X", 1.0, 1.0))):
            path.write_text(json.dumps({"context": ctx, "points": pts}))
        out = Path(d, "ab.json")
        a, doc, text = work([str(p1), str(p2), "-o", str(out)])
        ok(a.output == str(out) and doc["rows"] and text == markdown(doc), "work")
        with contextlib.redirect_stdout(io.StringIO()):  # main prints the table
            ok(main([str(p1), str(p2), "-o", str(out)]) == 0 and json.loads(out.read_text())["rows"], "written")
        for argv, needle in (([str(p1), str(Path(d, "missing.json"))], "missing.json"),
                             ([str(p1), str(p2), "--md", str(Path(d, "no", "x.md"))], "--md")):
            try:
                work(argv)
                fails.append(f"accepted {argv}")
            except UsageError as e:
                ok(needle in str(e), f"message {e}")
            with contextlib.redirect_stderr(io.StringIO()) as err:
                ok(main(argv) == 2 and needle in err.getvalue(), f"exit 2 for {argv}")
    return selftest.report("h2h_ab", fails)


def main(argv=None):
    return train_model_check.run_cli("h2h_ab.py", argv, self_test, work)


if __name__ == "__main__":
    sys.exit(main())
