"""What the scripts' --self-test functions share (no torch, no GPU): the two checks and the closing report."""

import sys


def collector(fails):
    """ok(cond, what): a failure `what`, appended to `fails`, unless cond."""

    def ok(cond, what):
        if not cond:
            fails.append(what)

    return ok


def checker(fails, parse, error):
    """ok(cond, what): collector's; refused(argv, needle): parse(argv) must raise `error` with a one-line message (bad
    input is refused in one line) that contains needle. Both append what fails to `fails`."""
    ok = collector(fails)

    def refused(argv, needle):
        try:
            parse(argv)
        except error as e:
            msg = str(e)
            ok(needle in msg and "\n" not in msg, f"{argv}: message {msg!r} should be one line naming {needle!r}")
            return
        fails.append(f"{argv}: accepted")

    return ok, refused


def report(name, fails, ok_note=""):
    """The self-test's end: each failure on stderr as "<name> self-test FAILED: ...", else "<name> self-test: ok"
    (plus ok_note) on stdout; returns the exit status."""
    for f in fails:
        print(f"{name} self-test FAILED:", f, file=sys.stderr)
    if not fails:
        print(f"{name} self-test: ok{ok_note}")
    return 1 if fails else 0
