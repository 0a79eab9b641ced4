import os
import zlib

# The persistent cache would let one test's compile serve another's (and a run serve the next):
# tests that look at what a compile does would depend on what ran before. Off, except where a
# test switches it on (tests/test_persistent_cache.py).
os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")

import pytest
import torch

# Imported before any test: pytester's in-process runs drop the modules imported while they run,
# and torch's first compile imports this one, whose re-import registers its backend twice.
import torch._dynamo.repro.after_dynamo
from hypothesis import settings

from torch2xla.testing import _settings as _parity_settings

# Global backend flags frozen from the start, as torch's common_utils freezes them when a test
# imports it (the OpInfo tests do): a test that sets a flag directly fails in every order, not
# only where it ran after an OpInfo test in its worker. Tests switch flags through flags().
torch.backends.disable_global_flags()

# CI (CI=true) replays the same hypothesis examples on every run, so a submission's result does
# not depend on a random draw; locally hypothesis keeps exploring new examples.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Our property tests draw floats over their dtypes' whole range (inf, NaN, the extremes) where
# they give no bounds: the kit's default for users is values a model sees.
_parity_settings.full_range = True


@pytest.fixture(autouse=True)
def _seeded(request):
    # torch's global generator seeded from the test's id: a test that draws its data with
    # torch.randn gets the same data on every run, whatever ran before it in its worker (a
    # draw that tripped a tolerance made CI red once and green the next time).
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def _reset_dynamo():
    # Each test's first graph as in a fresh process: where a job id is set (the GPU host),
    # Dynamo keeps the sizes each code object saw in a profile on disk (PGO), and a function
    # of an earlier run at the same file and line that saw two sizes made this test's first
    # graph dynamic (example inputs holding SymInts, which no persistent-cache key describes).
    config = torch._dynamo.config
    saved = config.get_config_copy()
    with config.patch(automatic_dynamic_local_pgo=False, automatic_dynamic_remote_pgo=False):
        torch._dynamo.reset()
        yield
    # Dynamo's settings as before the test: torch 2.11 sets ``torch.compile(dynamic=...)``'s
    # settings (``assume_static_by_default``) for each call of the compiled function in the
    # process-wide config, not per thread as 2.13 does, so threads calling one at once left
    # ``assume_static_by_default=False`` behind them (test_guards.py's threads), and every
    # later test's first graph was dynamic.
    now = config.get_config_copy()
    for name, value in saved.items():
        if now.get(name) != value:
            setattr(config, name, value)


@pytest.fixture
def lowered_ops(monkeypatch):
    """The call_function targets of every ATen graph lowered while the test runs."""
    import torch2xla._backend
    import torch2xla.capture._lower

    seen: list = []
    original = torch2xla.capture._lower.lower

    def recording(gm, args):
        lowered = original(gm, args)
        seen.extend(n.target for n in lowered.gm.graph.nodes if n.op == "call_function")
        return lowered

    monkeypatch.setattr(torch2xla._backend, "lower", recording)
    return seen


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup``'s groups (``xdist_group``), on a pytest whose items keep their id in
    ``_id``: pytest-xdist (3.8) marks a grouped item by appending ``@group`` to ``_nodeid``,
    which pytest 9.2 no longer reads, so the groups were ignored and ``test_distributed.py``'s
    module fixture (2 spawned ranks compiling every scenario, ~50 s of both cores) ran once per
    worker. Here the mark goes on the id pytest reads, where xdist's did not take."""
    if not getattr(config.option, "loadgroup", False):  # (set on xdist's workers)
        return
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        if not names or "@" in item.nodeid.rpartition("]")[2].rpartition("::")[2]:
            continue
        grouped = f"{item.nodeid}@{'_'.join(sorted(names))}"
        if hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(grouped)
        else:
            item._nodeid = grouped
