"""The two checks the scripts' --self-test functions share (no torch, no GPU)."""


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
