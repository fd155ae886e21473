#!/usr/bin/env python3
"""The fp8 step's cast / transpose kernels under Nsight Compute against the model: for each preset, the isolated
launches of kernels/gemm/cast_transpose (one fp8 training step of `dropbench run` under ncu, the device_stages.sh
stage `casts`) matched to the model's cast phases, with each launch's DRAM bytes read and written beside the bytes
the model counts, its duration beside the model's time, its achieved DRAM rate, and that rate over the device-to-
device copy measured on the same GPU (`dropbench dropout`, variant copy) and over the machine file's hbm_gbs.

    scripts/cast_ncu.py --machine configs/machines/h100-sxm.json --copy dropout.json \\
        -o cast_ncu.json --md cast_ncu.md configs/llama3-8b.json=ncu_casts_8b.csv ...

Each NCU_CSV is `ncu --csv --page details --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,
dram__bytes_write.sum,...` of the cast_transpose kernel launches (any other metrics are kept in the JSON). The
model's casts come from a dry run of the preset at workload.dtype = fp8 (the fused strategy's cast phases, in the
step's order); a launch window of the step matches when its input types follow the model's cast order (bf16 casts,
e4m3 transposes). The bytes the model counts = its time x hbm_gbs (every cast is an HBM-bound piece). Needs
build/dropbench (--dropbench). Bad arguments: one line naming the argument, exit 2.
"""
import argparse
import csv
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import dbstats  # noqa: E402  (the one statistics module)
import peers  # noqa: E402  (git_sha: the sha as every report writes it)
import train_model_check  # noqa: E402  (the dry run and the phase kinds, as the step check reads them)


UsageError = train_model_check.UsageError  # one class: the dry run raises it too


DURATION, READ, WRITE = "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"
# ncu's units (--print-units base gives the first of each; the others in case a run left them scaled).
SCALE = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
         "second": 1.0, "byte": 1.0, "B": 1.0, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9,
         "GB": 1e9}


def parse_ncu(text):
    """ncu --csv --page details text (anything before the header ignored) -> launches in ID order, each
    {"id", "kernel", "input", "grid", "metrics": {name: value in seconds / bytes / as printed}}."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise UsageError("ncu csv: no header line starting with \"ID\" (allowed: ncu --csv --page details output)")
    launches = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("Metric Name"):
            continue
        k = int(row["ID"])
        name = row["Kernel Name"]
        if "cast_transpose_kernel" not in name:
            continue
        targs = name.split("cast_transpose_kernel<", 1)[1] if "cast_transpose_kernel<" in name else ""
        first = targs.split(",", 1)[0]
        inp = "bf16" if "bfloat16" in first else "e4m3" if "e4m3" in first else "?"
        grid = tuple(int(x) for x in row["Grid Size"].strip("()").split(","))
        l = launches.setdefault(k, {"id": k, "kernel": name, "input": inp, "grid": grid, "metrics": {}})
        try:
            v = float(row["Metric Value"].replace(",", ""))
        except ValueError:  # a section's text-valued metric
            continue
        l["metrics"][row["Metric Name"]] = v * SCALE.get(row.get("Metric Unit", ""), 1.0)
    return [launches[k] for k in sorted(launches)]


def cast_input(phase):
    """The input type the step's cast phase reads: its bf16 activations and gradients are cast (cast-*), its e4m3
    operands transposed (transpose-*)."""
    return "bf16" if phase.startswith("cast-") else "e4m3"


def match(launches, casts):
    """Launch windows of the step: consecutive launches whose input types follow `casts` (the model's cast phases
    in order). -> {phase: [launch, ...]} over every window found."""
    want = [cast_input(c["phase"]) for c in casts]
    out = {c["phase"]: [] for c in casts}
    i = 0
    while i + len(want) <= len(launches):
        win = launches[i:i + len(want)]
        if [l["input"] for l in win] == want:
            for c, l in zip(casts, win):
                out[c["phase"]].append(l)
            i += len(want)
        else:
            i += 1
    return out


def rows_for(preset, casts, matched, hbm_gbs, copy_gbs):
    rows = []
    for c in casts:
        ls = matched[c["phase"]]
        if not ls:
            raise RuntimeError(f"{preset}: no launch of the step matches {c['phase']}")
        grids = {l["grid"] for l in ls}
        if len(grids) != 1:
            raise RuntimeError(f"{preset}: {c['phase']} matched launches of grids {sorted(grids)}")
        med = lambda k: dbstats.median([l["metrics"][k] for l in ls])  # noqa: E731
        t = med(DURATION)
        rd, wr = med(READ), med(WRITE)
        model_bytes = c["model_us"] * 1e-6 * hbm_gbs * 1e9
        r = {"preset": preset, "phase": c["phase"], "input": cast_input(c["phase"]), "grid": list(ls[0]["grid"]),
             "launches": len(ls), "duration_us": t * 1e6, "model_us": c["model_us"], "x": t * 1e6 / c["model_us"],
             "dram_read_bytes": rd, "dram_write_bytes": wr, "model_bytes": model_bytes,
             "dram_over_model_bytes": (rd + wr) / model_bytes, "dram_gbs": (rd + wr) / t / 1e9,
             "model_bytes_gbs": model_bytes / t / 1e9, "over_hbm_gbs": (rd + wr) / t / 1e9 / hbm_gbs,
             "metrics": {k: med(k) for k in ls[0]["metrics"]}}
        if copy_gbs:
            r["over_copy"] = r["dram_gbs"] / copy_gbs
        rows.append(r)
    return rows


def md(rows, hbm_gbs, copy_gbs):
    src = f"the copy {copy_gbs:.0f} GB/s" if copy_gbs else "no copy report"
    out = [f"The fp8 step's casts under Nsight Compute (isolated launches) against the model (hbm_gbs {hbm_gbs:.0f}; "
           f"{src}); x = ncu duration / model time.\n",
           "| preset | phase | input | grid | launches | ncu us | model us | x | DRAM MB read / written | model MB | "
           "DRAM / model bytes | DRAM GB/s | / hbm_gbs | / copy |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        oc = f"{r['over_copy']:.3f}" if "over_copy" in r else "-"
        out.append(f"| {r['preset']} | {r['phase']} | {r['input']} | {r['grid'][0]}x{r['grid'][1]} | {r['launches']} | "
                   f"{r['duration_us']:.1f} | {r['model_us']:.1f} | {r['x']:.3f} | {r['dram_read_bytes'] / 1e6:.1f} / "
                   f"{r['dram_write_bytes'] / 1e6:.1f} | {r['model_bytes'] / 1e6:.1f} | {r['dram_over_model_bytes']:.3f} | "
                   f"{r['dram_gbs']:.0f} | {r['over_hbm_gbs']:.3f} | {oc} |")
    return "\n".join(out) + "\n"


def model_casts(a, cfg):
    """The fused strategy's cast phases of a dry run of the preset at fp8, SQ 8192, R 7, in the step's order."""
    (point,) = train_model_check.dry_run(a, cfg, {"dtype": "fp8"}, [8192], [7], None).values()
    v = next(x for x in point["variants"] if x["name"] == "fused")
    mp = v["extra"]["model_phases"]
    return [q for side in ("fwd", "bwd") for q in mp[side] if train_model_check.phase_kind(q["phase"]) == "casts"]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="cast_ncu.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="CONFIG=NCU_CSV")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--copy", help="a `dropbench dropout` report of the same GPU (its copy variant's GB/s)")
    ap.add_argument("--dropbench", default=str(ROOT / "build/dropbench"))
    ap.add_argument("-o", "--output")
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    for p in a.pairs:
        cfg, _, path = p.partition("=")
        if not path or not Path(cfg).is_file() or not Path(path).is_file():
            raise UsageError(f"pairs: {p!r} (allowed: CONFIG=NCU_CSV, both existing files)")
    train_model_check.check_common_args(a)
    if a.copy and not Path(a.copy).is_file():
        raise UsageError(f"--copy: {a.copy!r} is not a file (allowed: a dropbench dropout report)")
    return a


def copy_rate(path):
    r = json.loads(Path(path).read_text())
    for p in r["points"]:
        for v in p["variants"]:
            if v["name"] == "copy":
                return v["derived"]["gb_s"]
    raise UsageError(f"--copy: {path} has no copy variant (allowed: a dropbench dropout report)")


def self_test():
    """Parsing (units, the kernel's input type), window matching past a setup launch, bytes and rates."""
    casts = [{"phase": "cast-o", "model_us": 10.0}, {"phase": "cast-dy", "model_us": 10.0},
             {"phase": "transpose-w-out", "model_us": 5.0}]
    head = '"ID","Kernel Name","Grid Size","Section Name","Metric Name","Metric Unit","Metric Value"'
    k_b = "void dropbench::(anonymous namespace)::cast_transpose_kernel<__nv_bfloat16, __nv_fp8_e4m3>(const T1 *)"
    k_e = "void dropbench::(anonymous namespace)::cast_transpose_kernel<__nv_fp8_e4m3, __nv_fp8_e4m3>(const T1 *)"
    rows = ["==PROF== noise", "| a table | line |", head]
    # ID 0: the setup cast (bf16, another grid); then two steps: bf16, bf16, e4m3.
    seq = [(k_b, "(64, 64, 1)", 3.0), (k_b, "(128, 64, 1)", 12.0), (k_b, "(128, 64, 1)", 11.0),
           (k_e, "(64, 64, 1)", 7.0), (k_b, "(128, 64, 1)", 12.0), (k_b, "(128, 64, 1)", 13.0), (k_e, "(64, 64, 1)", 8.0)]
    for i, (k, g, us) in enumerate(seq):
        rows.append(f'"{i}","{k}","{g}","Command line profiler metrics","{DURATION}","nsecond","{us * 1000:,.0f}"')
        rows.append(f'"{i}","{k}","{g}","Command line profiler metrics","{READ}","Mbyte","{us:.1f}"')
        rows.append(f'"{i}","{k}","{g}","Command line profiler metrics","{WRITE}","byte","{us * 1e6:,.0f}"')
    ls = parse_ncu("\n".join(rows))
    assert [l["input"] for l in ls] == ["bf16", "bf16", "bf16", "e4m3", "bf16", "bf16", "e4m3"]
    assert abs(ls[1]["metrics"][DURATION] - 12e-6) < 1e-15 and abs(ls[1]["metrics"][READ] - 12e6) < 1e-3
    m = match(ls, casts)
    assert [l["id"] for l in m["cast-o"]] == [1, 4] and [l["id"] for l in m["transpose-w-out"]] == [3, 6]
    out = rows_for("t", casts, m, hbm_gbs=2000.0, copy_gbs=1000.0)
    o = out[0]  # cast-o: 12 and 12 us; 24 MB moved; model 10 us x 2000 GB/s = 20 MB
    assert abs(o["duration_us"] - 12.0) < 1e-9 and abs(o["x"] - 1.2) < 1e-9
    assert abs(o["model_bytes"] - 20e6) < 1e-3 and abs(o["dram_over_model_bytes"] - 1.2) < 1e-9
    assert abs(o["dram_gbs"] - 2000.0) < 1e-6 and abs(o["over_hbm_gbs"] - 1.0) < 1e-9 and abs(o["over_copy"] - 2.0) < 1e-9
    assert abs(out[1]["duration_us"] - 12.0) < 1e-9 and abs(out[2]["duration_us"] - 7.5) < 1e-9
    try:
        rows_for("t", casts + [{"phase": "transpose-x", "model_us": 1.0}], dict(m, **{"transpose-x": []}), 1.0, 0)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a cast without a launch was accepted")
    try:
        parse_ncu("no header\n")
    except UsageError:
        pass
    else:
        raise AssertionError("a csv without a header was accepted")
    assert "| t | cast-o | bf16 | 128x64 | 2 | 12.0 | 10.0 | 1.200 |" in md(out, 2000.0, 1000.0)
    print("cast_ncu.py self-test: ok")
    return 0


def work(argv):
    a = parse_args(argv)
    hbm = json.loads(Path(a.machine).read_text())["hbm_gbs"]["value"]
    copy_gbs = copy_rate(a.copy) if a.copy else 0.0
    rows = []
    for p in a.pairs:
        cfg, _, path = p.partition("=")
        casts = model_casts(a, cfg)
        rows += rows_for(Path(cfg).stem, casts, match(parse_ncu(Path(path).read_text()), casts), hbm, copy_gbs)
    doc = {"schema": "dropbench.cast_ncu", "schema_version": 1, "machine": a.machine, "hbm_gbs": hbm,
           "copy_gbs": copy_gbs or None, "git_sha": peers.git_sha(), "rows": rows}
    return a, doc, md(rows, hbm, copy_gbs)


def main(argv=None):
    return train_model_check.run_cli("cast_ncu.py", argv, self_test, work)


if __name__ == "__main__":
    sys.exit(main())
