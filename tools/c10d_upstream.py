"""c10d_upstream.py - run one of PyTorch's own c10d test files with every
Gloo process group made by tide instead (tools/c10d_upstream.sh).

    TIDE_C10D_BACKEND=tide|gloo python3 c10d_upstream.py TEST_FILE.py [-k PATTERN]

With tide, every Gloo group a test makes is tide's, made as a user
would make it: init_process_group(backend="gloo") becomes
init_process_group(backend="tide") (so new_group's groups are tide's
too), and torch's ProcessGroupGloo class is replaced, where the tests and
torch.distributed look it up, by a stand-in whose constructor returns a
tide group over the same store (`c10d.ProcessGroupGloo(store, rank, size,
opts)` in a test; new_group(backend="gloo")).  The class's own
attributes (_Options, create_device, ...) still answer from Gloo's.
With gloo nothing is changed: the baseline.

The swap is made at import, at the top of this file: torch's
MultiProcessTestCase starts its ranks with multiprocessing's "spawn",
which imports the main module (this one) again in every rank before it
runs the test there.  Prints one line per test:
"RESULT pass|fail|skip test_id"."""
import datetime
import importlib.util
import os
import sys
import types
import unittest

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d_module

BACKEND = os.environ.get("TIDE_C10D_BACKEND", "tide")


def _stand_in_for_expecttest():
    """torch's test helpers import expecttest for the base class of their
    TestCase (its assertExpectedInline, which no c10d test calls); Debian
    12 packages no expecttest, so a plain unittest.TestCase stands in."""
    if importlib.util.find_spec("expecttest") is None:
        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase
        stand_in.ACCEPT = False
        sys.modules["expecttest"] = stand_in


_stand_in_for_expecttest()


def _swap_gloo_for_tide():
    import tide
    import tide.torch as tide_torch

    gloo = c10d_module.ProcessGroupGloo
    made = [0]  # groups made in this process: every rank makes them in one order

    def _members(store, rank, size, world):
        """The world ranks of a group known only by its store, rank and size
        (all a Gloo constructor is told): each member publishes its own."""
        made[0] += 1
        prefix = f"tide/members/{made[0]}/"
        store.set(prefix + str(rank), str(world.rank))
        return [int(store.get(prefix + str(r))) for r in range(size)]

    def _timeout(args, kwargs):
        opts = kwargs.get("options") or (args[0] if args else None)
        timeout = kwargs.get("timeout") or getattr(opts, "_timeout", None)
        return timeout or datetime.timedelta(seconds=60)

    class _Meta(type):
        def __getattr__(cls, name):
            return getattr(gloo, name)

        def __instancecheck__(cls, obj):
            return isinstance(obj, (gloo, tide_torch.TideProcessGroup))

    class ProcessGroupGloo(metaclass=_Meta):
        """Gloo's constructor, answered by tide: the first group of a
        process bootstraps tide's world over the store, later ones are
        groups of it."""

        def __new__(cls, store, rank, size, *args, **kwargs):
            world = tide.world()
            if world is None:
                comm = tide_torch._join_world(store, rank, size, _timeout(args, kwargs))
            else:
                comm = world.create_group(_members(store, rank, size, world))
            return tide_torch.TideProcessGroup(comm, rank, size)

    dist.ProcessGroupGloo = ProcessGroupGloo
    c10d_module.ProcessGroupGloo = ProcessGroupGloo

    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if backend is None or str(backend).lower() == "gloo":
            backend = tide_torch.BACKEND
        return init(backend, *args, **kwargs)

    dist.init_process_group = init_process_group


if BACKEND == "tide":
    _swap_gloo_for_tide()


class _Lines(unittest.TextTestResult):
    """One line a test, whatever unittest's verbosity prints."""

    def _say(self, test, what):
        sys.__stdout__.write(f"RESULT {what} {test.id()}\n")
        sys.__stdout__.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._say(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._say(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._say(test, "fail")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._say(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._say(test, "pass")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._say(test, "fail")


def main():
    path = sys.argv[1]
    pattern = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "-k" else None
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    name = os.path.splitext(os.path.basename(path))[0]
    module = __import__(name)
    loader = unittest.TestLoader()
    if pattern:
        loader.testNamePatterns = [f"*{pattern}*"]
    suite = loader.loadTestsFromModule(module)
    # Failures' tracebacks go to stderr (the script keeps it in a log).
    runner = unittest.TextTestRunner(stream=sys.stderr, resultclass=_Lines, verbosity=0)
    runner.run(suite)


if __name__ == "__main__":
    main()
