#!/usr/bin/env python3
"""Reader of dropbench's JSON reports (schema "dropbench.report", version 1; docs/report-schema.md).

The one place where Python scripts (scripts/plot.py, scripts/peers.py) read a report: the schema and version
check, structural validation with errors that name the file and the JSON path, and a small object model.

    import dropbench_report as dr
    rep = dr.load("results/h200/verdict/run_llama3-70b.json")  # dr.ReportError on anything unreadable
    rep.command, rep.config_name, rep.device_name, rep.context, rep.config, rep.summary
    for point in rep.points:                                 # Point: index, axes, workload, variants, derived
        point.get("sq")                                      #   an axis value, else the workload's field
        for v in point.variants:                             # Variant: name, peer, stats, phases, derived, extra
            v.median, v.stats.rel_stdev, v.phase_medians()   #   seconds; NaN where the report has null
    for point, v in rep.each_variant(peer=True): ...         # only the variants another tool measured
    rep.skipped                                              # Skipped: axes, reason, variant (peers name one)

Reading follows the schema's rules for readers: unknown keys are ignored, `null` is accepted wherever a number
is documented (it reads as NaN), and a report whose schema_version is not 1 is refused (UnsupportedVersion).
What a reader relies on is checked: the eight top-level keys' types, every point's `axes` (scalars), `workload`
and `variants`, every variant's `name` (unique in its point), `peer`, `stats` and `phases`. `layout_problems()`
is the stricter writer-side check (every key present, in the documented order) for tools that write reports.

CLI:
    scripts/dropbench_report.py REPORT.json ...          one line per (point, variant): axes, name, median µs,
                                                         rel. stdev, samples (a peer variant is marked *)
    scripts/dropbench_report.py --check REPORT.json ...  also the writer-side layout check; exit 1 on problems
    scripts/dropbench_report.py --self-test              the reader on tests/fixtures and synthetic documents
Exit codes: 0 read; 1 --check found layout problems / self-test failed; 2 a file is not a readable report.
"""
import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
from pathlib import Path

SCHEMA = "dropbench.report"
SCHEMA_VERSION = 1
TOP_KEYS = ("schema", "schema_version", "command", "context", "config", "summary", "points", "skipped")
POINT_KEYS = ("index", "axes", "workload", "variants", "derived")
VARIANT_KEYS = ("name", "peer", "stats", "phases", "derived", "extra")
STATS_KEYS = ("samples", "median", "mean", "min", "max", "stdev", "rel_stdev", "discarded", "mean_clock_mhz")
INT_STATS = ("samples", "discarded")


class ReportError(ValueError):
    """A file that is not a readable dropbench report; the message names the file and the JSON path."""


class NotAReport(ReportError):
    """JSON, but not a dropbench report (no "schema": "dropbench.report"); other tools' files raise this."""


class UnsupportedVersion(ReportError):
    """A dropbench report of a schema_version this reader does not read."""


# ---------------------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------------------

def number(x):
    """A report number as float; null (a non-finite value in the report) and non-numbers read as NaN."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return math.nan
    return float(x)


def finite(x):
    """True for a finite int or float (not bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------------------------------------------------
# Validation helpers: each raises ReportError("<source>: <path>: ...")
# ---------------------------------------------------------------------------------------------------------

def _show(x):
    s = json.dumps(x, default=str)
    return s if len(s) <= 60 else s[:57] + "..."


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _Checker:
    def __init__(self, source):
        self.source = source

    def fail(self, where, what):
        raise ReportError(f"{self.source}: {where}: {what}")

    def obj(self, x, where, missing_ok=True):
        if x is None and missing_ok:
            return {}
        if not isinstance(x, dict):
            self.fail(where, f"expected an object, got {_show(x)}")
        return x

    def arr(self, x, where, missing_ok=True):
        if x is None and missing_ok:
            return []
        if not isinstance(x, list):
            self.fail(where, f"expected an array, got {_show(x)}")
        return x

    def string(self, x, where):
        if not isinstance(x, str) or not x:
            self.fail(where, f"expected a non-empty string, got {_show(x)}")
        return x


# ---------------------------------------------------------------------------------------------------------
# The object model
# ---------------------------------------------------------------------------------------------------------

class Stats:
    """The nine stats figures of a variant or phase (seconds; NaN where the report has null or lacks one)."""
    __slots__ = STATS_KEYS + ("raw",)

    def __init__(self, raw, chk, where):
        self.raw = chk.obj(raw, where, missing_ok=False)
        for k in STATS_KEYS:
            x = self.raw.get(k)
            if x is not None and not _is_number(x):
                chk.fail(f"{where}.{k}", f"expected a number or null, got {_show(x)}")
            if k in INT_STATS:
                if x is not None and x != int(x):
                    chk.fail(f"{where}.{k}", f"expected an integer, got {_show(x)}")
                setattr(self, k, int(x) if x is not None else 0)
            else:
                setattr(self, k, number(x))

    def __repr__(self):
        return f"Stats(median={self.median!r}, samples={self.samples!r})"


class Phase:
    __slots__ = ("name", "stats")

    def __init__(self, raw, chk, where):
        raw = chk.obj(raw, where, missing_ok=False)
        self.name = chk.string(raw.get("name"), f"{where}.name")
        self.stats = Stats(raw.get("stats"), chk, f"{where}.stats")

    @property
    def median(self):
        return self.stats.median

    def __repr__(self):
        return f"Phase({self.name!r}, median={self.median!r})"


def variant_power(raw_variant):
    """A variant's measured power figures (its "power" object, or an older report's extra.power; a dict), or None:
    none there, or power not measured (docs/report-schema.md)."""
    if not isinstance(raw_variant, dict):
        return None
    pw = raw_variant.get("power")
    if not isinstance(pw, dict):
        extra = raw_variant.get("extra")
        pw = extra.get("power") if isinstance(extra, dict) else None
    if not isinstance(pw, dict) or pw.get("measured") is not True:
        return None
    return pw


class Variant:
    """One implementation measured at a point. `peer` is true when another tool (scripts/peers.py) measured it;
    `power` its power-pass figures (variant_power) or None."""
    __slots__ = ("name", "peer", "stats", "phases", "derived", "extra", "power")

    def __init__(self, raw, chk, where):
        raw = chk.obj(raw, where, missing_ok=False)
        self.name = chk.string(raw.get("name"), f"{where}.name")
        peer = raw.get("peer", False)
        if not isinstance(peer, bool):
            chk.fail(f"{where}.peer", f"expected true or false, got {_show(peer)}")
        self.peer = peer
        self.stats = Stats(raw.get("stats"), chk, f"{where}.stats")
        self.phases = [Phase(q, chk, f"{where}.phases[{i}]")
                       for i, q in enumerate(chk.arr(raw.get("phases"), f"{where}.phases"))]
        self.derived = chk.obj(raw.get("derived"), f"{where}.derived")
        self.extra = chk.obj(raw.get("extra"), f"{where}.extra")
        self.power = variant_power(raw)

    @property
    def median(self):
        return self.stats.median

    @property
    def is_pipeline(self):
        """In a `dropbench run` report, the pipeline variants are those whose name has no ':' (alone:*, mech:*,
        <pipeline>:graph and peer:* are not pipelines; src/core/pipelines.hpp), so no list of names is kept here."""
        return not self.peer and ":" not in self.name

    def phase_medians(self):
        """[(phase name, median s)] in execution order (names may repeat, e.g. per chunk)."""
        return [(q.name, q.median) for q in self.phases]

    def __repr__(self):
        return f"Variant({self.name!r}, median={self.median!r}{', peer' if self.peer else ''})"


class Point:
    """One sweep point: the axes that define it, the full workload at it, its variants and point figures."""
    __slots__ = ("index", "axes", "workload", "variants", "derived")

    def __init__(self, raw, chk, where):
        raw = chk.obj(raw, where, missing_ok=False)
        idx = raw.get("index")
        if idx is not None and not (_is_number(idx) and idx == int(idx)):
            chk.fail(f"{where}.index", f"expected an integer, got {_show(idx)}")
        self.index = int(idx) if idx is not None else None
        self.axes = chk.obj(raw.get("axes"), f"{where}.axes", missing_ok=False)
        for k, x in self.axes.items():
            if isinstance(x, (dict, list)):
                chk.fail(f"{where}.axes.{k}", f"expected a scalar, got {_show(x)}")
        self.workload = chk.obj(raw.get("workload"), f"{where}.workload")
        self.variants = [Variant(v, chk, f"{where}.variants[{i}]")
                         for i, v in enumerate(chk.arr(raw.get("variants"), f"{where}.variants", missing_ok=False))]
        names = [v.name for v in self.variants]
        for i, n in enumerate(names):
            if n in names[:i]:
                chk.fail(f"{where}.variants[{i}].name", f"{_show(n)} appears twice in the point")
        self.derived = chk.obj(raw.get("derived"), f"{where}.derived")

    def get(self, key, default=None):
        """An axis value of the point, else the workload's field, else default."""
        if key in self.axes:
            return self.axes[key]
        return self.workload.get(key, default)

    def variant(self, name, default=None):
        for v in self.variants:
            if v.name == name:
                return v
        return default

    def medians(self):
        """{variant name: median s}."""
        return {v.name: v.median for v in self.variants}

    def label(self):
        """"sq=8192 causal=true": the axes as the stdout tables show them."""
        return " ".join(f"{k}={json.dumps(x) if isinstance(x, bool) else x}" for k, x in self.axes.items())

    def __repr__(self):
        return f"Point({self.label()!r}, {[v.name for v in self.variants]})"


class Skipped:
    __slots__ = ("axes", "reason", "variant")

    def __init__(self, raw, chk, where):
        raw = chk.obj(raw, where, missing_ok=False)
        self.axes = chk.obj(raw.get("axes"), f"{where}.axes", missing_ok=False)
        r = raw.get("reason")
        if not isinstance(r, str):
            chk.fail(f"{where}.reason", f"expected a string, got {_show(r)}")
        self.reason = r
        self.variant = raw.get("variant")  # peers' skipped entries name the variant that was refused
        if self.variant is not None and not isinstance(self.variant, str):
            chk.fail(f"{where}.variant", f"expected a string, got {_show(self.variant)}")


class Report:
    """A validated dropbench report. Build with load(path) or Report.from_doc(doc, source)."""

    def __init__(self, doc, source):
        chk = _Checker(source)
        doc = chk.obj(doc, "top level", missing_ok=False)
        if doc.get("schema") != SCHEMA:
            raise NotAReport(f"{source}: not a dropbench report (schema is {_show(doc.get('schema'))}, "
                             f"expected \"{SCHEMA}\")")
        ver = doc.get("schema_version")
        if ver != SCHEMA_VERSION or isinstance(ver, bool):
            raise UnsupportedVersion(f"{source}: schema_version {_show(ver)} is not supported "
                                     f"(this reader reads {SCHEMA_VERSION})")
        self.source = source
        self.path = Path(source) if source and not source.startswith("<") else None
        self.doc = doc
        self.command = chk.string(doc.get("command"), "command")
        self.context = chk.obj(doc.get("context"), "context")
        self.config = chk.obj(doc.get("config"), "config")
        self.summary = chk.obj(doc.get("summary"), "summary")
        self.points = [Point(p, chk, f"points[{i}]")
                       for i, p in enumerate(chk.arr(doc.get("points"), "points", missing_ok=False))]
        self.skipped = [Skipped(s, chk, f"skipped[{i}]")
                        for i, s in enumerate(chk.arr(doc.get("skipped"), "skipped"))]

    @classmethod
    def from_doc(cls, doc, source="<memory>"):
        return cls(doc, str(source))

    @property
    def config_name(self):
        n = self.config.get("name")
        return n if isinstance(n, str) and n else ""

    @property
    def device_name(self):
        dev = self.context.get("device")
        return dev.get("name") if isinstance(dev, dict) and isinstance(dev.get("name"), str) else ""

    @property
    def git_sha(self):
        return self.context.get("git_sha")

    def each_variant(self, peer=None):
        """(point, variant) for every variant; peer=True / False keeps only peers' / dropbench's own."""
        for p in self.points:
            for v in p.variants:
                if peer is None or v.peer == peer:
                    yield p, v

    def __repr__(self):
        return f"Report({self.source!r}, command={self.command!r}, {len(self.points)} points)"


def read_json(path):
    """The parsed JSON of a file; ReportError when it cannot be read or is not JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})")
    try:
        return json.loads(text)
    except ValueError as e:
        raise ReportError(f"{path}: not JSON ({e})")


def is_report(doc):
    """True for a parsed document that claims to be a dropbench report (any schema_version)."""
    return isinstance(doc, dict) and doc.get("schema") == SCHEMA


def load(path):
    """Read and validate a report file; raises ReportError (NotAReport, UnsupportedVersion)."""
    return Report(read_json(path), str(path))


# ---------------------------------------------------------------------------------------------------------
# Writer-side layout check
# ---------------------------------------------------------------------------------------------------------

def layout_problems(doc):
    """What a report written by a tool does differently from docs/report-schema.md's layout: every key
    present, in order, nine stats keys, the version. Returns a list of problems (empty: as documented)."""
    bad = []
    if not isinstance(doc, dict):
        return ["the top level is not an object"]
    if tuple(doc)[:len(TOP_KEYS)] != TOP_KEYS:
        bad.append(f"top-level keys {list(doc)}, expected {list(TOP_KEYS)} first")
    if doc.get("schema") != SCHEMA or doc.get("schema_version") != SCHEMA_VERSION:
        bad.append(f"schema / schema_version: {_show(doc.get('schema'))} / {_show(doc.get('schema_version'))}")
    for i, p in enumerate(doc.get("points") or []):
        if not isinstance(p, dict):
            bad.append(f"points[{i}]: not an object")
            continue
        if tuple(p) != POINT_KEYS:
            bad.append(f"points[{i}]: keys {list(p)}, expected {list(POINT_KEYS)}")
        for j, v in enumerate(p.get("variants") or []):
            where = f"points[{i}].variants[{j}]"
            if not isinstance(v, dict):
                bad.append(f"{where}: not an object")
                continue
            if tuple(v) != VARIANT_KEYS:
                bad.append(f"{where}: keys {list(v)}, expected {list(VARIANT_KEYS)}")
            if tuple(v.get("stats") or {}) != STATS_KEYS:
                bad.append(f"{where}.stats: keys {list(v.get('stats') or {})}")
            for k, q in enumerate(v.get("phases") or []):
                if not isinstance(q, dict) or tuple(q) != ("name", "stats") or tuple(q["stats"]) != STATS_KEYS:
                    bad.append(f"{where}.phases[{k}]: {_show(q)}")
    for i, s in enumerate(doc.get("skipped") or []):
        if not isinstance(s, dict) or "axes" not in s or "reason" not in s:
            bad.append(f"skipped[{i}]: {_show(s)}")
    try:
        Report.from_doc(doc)
    except ReportError as e:
        bad.append(str(e).split(": ", 1)[1])
    return bad


# ---------------------------------------------------------------------------------------------------------
# CLI: a compact listing
# ---------------------------------------------------------------------------------------------------------

def _fmt(x):
    if not finite(x):
        return "-"
    return f"{x:.4g}" if abs(x) < 10000 else f"{x:.0f}"


def listing(rep):
    lines = [f"== {rep.source}: {rep.command}, config {rep.config_name or '?'}"
             + (f", {rep.device_name}" if rep.device_name else "")
             + f", {len(rep.points)} points, {len(rep.skipped)} skipped"]
    for p, v in rep.each_variant():
        lines.append(f"  {p.label():40s} {v.name + ('*' if v.peer else ''):28s} {_fmt(v.median * 1e6):>9s} us "
                     f"±{v.stats.rel_stdev * 100:.2g}% n={v.stats.samples}")
    for s in rep.skipped:
        lines.append(f"  skipped {json.dumps(s.axes)}{' ' + s.variant if s.variant else ''}: {s.reason[:200]}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# Self-test: tests/fixtures reports and synthetic documents
# ---------------------------------------------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def _synthetic():
    st = {k: (10 if k in INT_STATS else 1e-3) for k in STATS_KEYS}
    return {"schema": SCHEMA, "schema_version": 1, "command": "run", "context": {"device": {"name": "GPU X"}},
            "config": {"name": "syn"}, "summary": {},
            "points": [{"index": 0, "axes": {"sq": 8192, "causal": True}, "workload": {"sq": 8192, "rounds": 7},
                        "variants": [{"name": "baseline", "peer": False, "stats": dict(st),
                                      "phases": [{"name": "gemm", "stats": dict(st, median=4e-4)}],
                                      "derived": {}, "extra": {}},
                                     {"name": "peer:e2e-cudnn", "peer": True, "stats": dict(st, median=None),
                                      "phases": [], "derived": {}, "extra": {}}],
                        "derived": {}}],
            "skipped": [{"axes": {"sq": 4096}, "variant": "peer:x", "reason": "refused"}]}


def self_test():
    checks = 0

    def ok(cond, what):
        nonlocal checks
        if not cond:
            raise AssertionError(what)
        checks += 1

    def refused(fn, exc, needle):
        nonlocal checks
        try:
            fn()
        except exc as e:
            if needle not in str(e):
                raise AssertionError(f"message {str(e)!r} lacks {needle!r}")
            checks += 1
            return str(e)
        raise AssertionError(f"{needle}: not refused")

    cmp = FIXTURES / "compare"
    # 1. the fixture reports of `dropbench compare` and the model
    base = load(cmp / "base.json")
    ok(base.command == "attention" and base.config_name == "compare-fixture" and len(base.points) == 2,
       f"base.json: {base!r}")
    p1 = base.points[1]
    ok(p1.axes == {"sq": 8192, "causal": True} and p1.get("sq") == 8192 and p1.get("rounds", 7) == 7
       and p1.label() == "sq=8192 causal=true", "axes / get / label")
    ok(p1.medians() == {"none": 0.0004, "fused": 0.0008} and p1.variant("fused").stats.samples == 100
       and p1.variant("nope") is None, "medians, stats, variant()")
    ok([v.name for _, v in base.each_variant(peer=False)] == ["none", "fused"] * 2
       and not list(base.each_variant(peer=True)), "each_variant / peer flag")
    ok(layout_problems(base.doc) == [], f"base.json layout: {layout_problems(base.doc)}")
    ok(load(cmp / "empty.json").points == [], "empty report")
    un = load(cmp / "unmatched.json")
    ok(any(math.isnan(v.median) for _, v in un.each_variant()), "a null median reads as NaN")
    ok(load(cmp / "other_command.json").command == "gemm", "other command")
    for f in ("report_run.json", "report_rng.json"):
        r = load(FIXTURES / "model" / f)
        ok(r.points and all(v.stats.samples > 0 for _, v in r.each_variant()), f"model/{f}")
    run = load(FIXTURES / "model" / "report_run.json")
    ok(all(isinstance(n, str) and isinstance(m, float) for _, v in run.each_variant() for n, m in v.phase_medians()),
       "phase medians")
    refused(lambda: load(cmp / "not_json.json"), ReportError, "not JSON")
    refused(lambda: load(cmp / "not_report.json"), NotAReport, "not a dropbench report")
    refused(lambda: load(cmp / "wrong_version.json"), UnsupportedVersion, "schema_version 2 is not supported")
    refused(lambda: load(cmp / "no_such_file.json"), ReportError, "cannot read")
    ok(is_report(read_json(cmp / "wrong_version.json")) and not is_report(read_json(cmp / "not_report.json")),
       "is_report")

    # 2. synthetic documents: the peer flag, nulls, and one error per broken field, naming its path
    syn = Report.from_doc(_synthetic(), "syn.json")
    ok(syn.device_name == "GPU X" and [v.name for _, v in syn.each_variant(peer=True)] == ["peer:e2e-cudnn"],
       "device name, peer variants")
    ok(math.isnan(syn.points[0].variant("peer:e2e-cudnn").median)
       and syn.points[0].variants[0].phase_medians() == [("gemm", 4e-4)], "null median, phases")
    ok(syn.skipped[0].variant == "peer:x" and syn.skipped[0].reason == "refused", "skipped entry with variant")
    ok(layout_problems(_synthetic()) == [], f"synthetic layout: {layout_problems(_synthetic())}")

    def broken(edit):
        d = _synthetic()
        edit(d)
        return lambda: Report.from_doc(d, "b.json")

    def setp(d, path, value):
        *head, last = path
        for k in head:
            d = d[k]
        if value is KeyError:
            del d[last]
        else:
            d[last] = value

    cases = [
        (("points",), {"a": 1}, "b.json: points: expected an array"),
        (("points", 0, "axes"), KeyError, "points[0].axes: expected an object, got null"),
        (("points", 0, "axes", "sq"), [1], "points[0].axes.sq: expected a scalar"),
        (("points", 0, "variants", 1, "name"), "", "points[0].variants[1].name: expected a non-empty string"),
        (("points", 0, "variants", 1, "name"), "baseline", "points[0].variants[1].name: \"baseline\" appears twice"),
        (("points", 0, "variants", 0, "stats", "median"), "1ms",
         "points[0].variants[0].stats.median: expected a number or null, got \"1ms\""),
        (("points", 0, "variants", 0, "stats", "samples"), 2.5, "stats.samples: expected an integer"),
        (("points", 0, "variants", 0, "peer"), "yes", "points[0].variants[0].peer: expected true or false"),
        (("points", 0, "variants", 0, "phases", 0, "stats"), KeyError, "phases[0].stats: expected an object"),
        (("points", 0, "variants", 0, "extra"), [], "points[0].variants[0].extra: expected an object"),
        (("command",), None, "b.json: command: expected a non-empty string"),
        (("skipped", 0, "reason"), 3, "skipped[0].reason: expected a string"),
        (("schema_version",), True, "schema_version true is not supported"),
    ]
    for path, value, needle in cases:
        refused(broken(lambda d, path=path, value=value: setp(d, path, value)), ReportError, needle)
    d = _synthetic()
    d["points"][0] = {k: d["points"][0][k] for k in reversed(POINT_KEYS)}
    d["points"][0]["variants"][0]["stats"].pop("mean")
    probs = layout_problems(d)
    ok(len(probs) == 2 and "points[0]: keys" in probs[0] and "stats: keys" in probs[1], f"layout problems: {probs}")
    d = _synthetic()
    d["future_key"] = {"x": 1}
    d["points"][0]["variants"][0]["new_field"] = 1
    ok(Report.from_doc(d).points[0].variants[0].name == "baseline", "unknown keys are ignored")

    # 3. the CLI: listing, --check, one-line errors with exit 2
    with tempfile.TemporaryDirectory(prefix="dropbench_report_") as td:
        good = Path(td) / "syn.json"
        good.write_text(json.dumps(_synthetic()))
        ok("peer:e2e-cudnn*" in listing(load(good)) and "1000 us" in listing(load(good)), "listing")
        bad = Path(td) / "bad.json"
        d = _synthetic()
        d["points"][0]["variants"][0]["stats"].pop("mean")
        bad.write_text(json.dumps(d))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rcs = (main([str(good), "--check"]), main(["--check", str(bad)]), main([str(cmp / "wrong_version.json")]))
        ok(rcs == (0, 1, 2), f"exit codes of --check good / --check bad / unreadable: {rcs}")
        ok(err.getvalue().count("\n") == 2 and "bad.json: points[0].variants[0].stats: keys" in err.getvalue()
           and "wrong_version.json: schema_version 2" in err.getvalue(), f"one line per problem: {err.getvalue()!r}")
    print(f"dropbench_report self-test: {checks} checks passed")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scripts/dropbench_report.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("reports", nargs="*", metavar="REPORT.json")
    ap.add_argument("--check", action="store_true", help="also check the writer-side layout (key order, ...)")
    ap.add_argument("--self-test", action="store_true", help="check the reader on tests/fixtures")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.reports:
        ap.error("give REPORT.json files, or --self-test")
    rc = 0
    for path in a.reports:
        try:
            rep = load(path)
        except ReportError as e:
            print(f"dropbench_report: {e}", file=sys.stderr)
            return 2
        print(listing(rep))
        if a.check:
            for prob in layout_problems(rep.doc):
                print(f"dropbench_report: {path}: {prob}", file=sys.stderr)
                rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
