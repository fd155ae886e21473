#!/usr/bin/env python3
"""Validates dropbench reports against docs/report.schema.json (JSON Schema 2020-12, python3-jsonschema).

  scripts/check_report_schema.py [FILE|DIR ...]    default: every report under results/ and tests/fixtures/
  scripts/check_report_schema.py --self-test        the schema against every committed report and fixture, and
                                                    known-bad documents that it must reject

A JSON file whose "schema" is not "dropbench.report" is not a report and is passed over; the fixtures that are
deliberately broken (not JSON, another schema_version) are named in BROKEN_FIXTURES. Exit 0 all valid, 1 a report
is invalid, 2 bad usage, 77 python3-jsonschema is missing (ctest counts that as skipped).
"""
import copy
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "docs" / "report.schema.json"
# tests/fixtures/compare: documents that exist to be refused by readers.
BROKEN_FIXTURES = {"not_json.json", "not_report.json", "wrong_version.json"}
# tests/fixtures/compare's hand-written reports carry no config sections and no date: compare's tests rely on
# exactly that ("date unknown", reports without a workload compare as before), so they are checked with those
# three requirements lifted and everything else as written.
MINIMAL_FIXTURES = ("tests", "fixtures", "compare")


def validators():
    """(full, minimal): the schema as written, and with the requirements the compare fixtures lack lifted."""
    try:
        import jsonschema
    except ImportError:
        print("check_report_schema: python3-jsonschema is missing (scripts/setup.sh installs it); skipped",
              file=sys.stderr)
        sys.exit(77)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    minimal = copy.deepcopy(schema)
    minimal["$defs"]["context"]["required"] = [k for k in schema["$defs"]["context"]["required"] if k != "date_utc"]
    minimal["$defs"]["config"]["required"] = []
    return jsonschema.Draft202012Validator(schema), jsonschema.Draft202012Validator(minimal)


def reports(paths):
    for p in paths:
        p = Path(p)
        files = sorted(p.rglob("*.json")) if p.is_dir() else [p]
        for f in files:
            if f.name in BROKEN_FIXTURES and "fixtures" in f.parts:
                continue
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and doc.get("schema") == "dropbench.report":
                yield f, doc


def errors_of(v, doc):
    return [f"{'/'.join(str(x) for x in e.absolute_path) or '(top)'}: {e.message}" for e in v.iter_errors(doc)]


def check(paths):
    v, vm = validators()
    n, bad = 0, 0
    for f, doc in reports(paths):
        n += 1
        minimal = tuple(f.resolve().parts[-4:-1]) == MINIMAL_FIXTURES
        errs = errors_of(vm if minimal else v, doc)
        if errs:
            bad += 1
            print(f"{f.relative_to(REPO) if f.is_relative_to(REPO) else f}: {len(errs)} error(s); first: {errs[0]}")
    print(f"check_report_schema: {n - bad} of {n} reports valid")
    return n, bad


def self_test():
    n, bad = check([REPO / "results", REPO / "tests" / "fixtures"])
    if n < 10 or bad:
        print(f"check_report_schema self-test: FAILED ({bad} invalid of {n})", file=sys.stderr)
        return 1
    v, _ = validators()
    good = json.loads((REPO / "results" / "h200" / "verdict" / "run_llama3-8b.json").read_text())
    cases = []
    for what, edit in [
        ("negative median", lambda d: d["points"][0]["variants"][0]["stats"].__setitem__("median", -1.0)),
        ("missing context.git_sha", lambda d: d["context"].pop("git_sha")),
        ("schema_version 2", lambda d: d.__setitem__("schema_version", 2)),
        ("variant without stats", lambda d: d["points"][0]["variants"][0].pop("stats")),
        ("skipped entry without reason", lambda d: d["skipped"].append({"axes": {}})),
        ("sweep axis not a list", lambda d: d["config"]["sweep"].__setitem__("sq", 4096)),
    ]:
        doc = copy.deepcopy(good)
        edit(doc)
        cases.append((what, errors_of(v, doc)))
    # A dry run's plan, on a committed dry-run report of `dropbench run` (tests/fixtures/dry_run/).
    plan = json.loads((REPO / "tests" / "fixtures" / "dry_run" / "run_plan.json").read_text())
    for what, edit in [
        ("plan without memory.need_bytes", lambda d: d["points"][0]["derived"]["plan"]["memory"].pop("need_bytes")),
        ("plan with a negative buffer", lambda d: d["points"][0]["derived"]["plan"]["memory"]["buffers"].__setitem__(
            "qkv", -1)),
        ("skipped plan without fits", lambda d: d["skipped"][0]["plan"].pop("fits")),
        ("model_us of 0", lambda d: d["points"][0]["variants"][0]["derived"].__setitem__("model_us", 0)),
        ("clocks.max_sm_mhz as text", lambda d: d["context"]["clocks"].__setitem__("max_sm_mhz", "1980")),
    ]:
        doc = copy.deepcopy(plan)
        edit(doc)
        cases.append((what, errors_of(v, doc)))
    missed = [what for what, errs in cases if not errs]
    if errors_of(v, good) or errors_of(v, plan) or missed:
        print(f"check_report_schema self-test: FAILED (accepted: {missed})", file=sys.stderr)
        return 1
    print(f"check_report_schema self-test: ok ({n} committed reports valid, {len(cases)} bad documents refused)")
    return 0


def main(argv):
    if argv[:1] == ["--self-test"]:
        return self_test()
    if any(a.startswith("-") for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    _, bad = check(argv or [REPO / "results", REPO / "tests" / "fixtures"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
