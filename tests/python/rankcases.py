"""rankcases.py - run named test cases on every rank of a tide-run job.

A rank program lists its cases; `main(cases)` runs those named on the
command line (all by default) in order, prints "ok NAME" or the
traceback, and exits 1 if any failed.  Every rank runs every case, so a
case must be collective-safe: a failing assertion on one rank must not
leave the others waiting forever (they have deadlines).
"""
import sys
import traceback


def main(cases, setup, teardown):
    names = sys.argv[1:] or list(cases)
    ctx = setup()
    failed = 0
    for name in names:
        try:
            cases[name](ctx)
            print(f"ok {name}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
            break  # the job is out of step now; the rest would only time out
    teardown(ctx)
    sys.exit(1 if failed else 0)


def expect_raises(cls, fn, contains=""):
    try:
        fn()
    except cls as e:
        assert contains in str(e), f"{cls.__name__} without {contains!r}: {e}"
        return e
    raise AssertionError(f"expected {cls.__name__}")
