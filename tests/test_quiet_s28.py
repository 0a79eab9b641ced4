"""Warnings silenced for one thread only (``torch2xla/_quiet.py``): compiling's eager probes and
JAX traces used ``warnings.catch_warnings``, which replaces the process-wide filters: other
threads' warnings were dropped while a graph compiled, and their filters undone."""

from __future__ import annotations

import threading
import warnings

from torch2xla._quiet import quiet


def _in_thread(fn):
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def test_only_the_quiet_thread_is_silenced():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet():
            warnings.warn("mine", UserWarning)
            _in_thread(lambda: warnings.warn("other thread's", UserWarning))
        warnings.warn("mine, after", UserWarning)
    assert [str(w.message) for w in seen] == ["other thread's", "mine, after"]


def test_a_pattern_silences_only_its_messages():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet("Some donated buffers"):
            warnings.warn("Some donated buffers were not usable", UserWarning)
            warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in seen] == ["something else"]


def test_an_error_filter_added_later_does_not_raise_inside():
    with warnings.catch_warnings(record=True) as seen:
        with quiet():
            pass
        warnings.simplefilter("error")  # (ahead of ours in the list now)
        with quiet():
            warnings.warn("probe's", UserWarning)  # silenced, not raised
        other = []

        def warn():
            try:
                warnings.warn("other thread's", UserWarning)
            except UserWarning as e:
                other.append(e)

        with quiet():
            _in_thread(warn)
    assert seen == [] and [str(e) for e in other] == ["other thread's"]


def test_other_threads_filters_are_kept():
    """A filter another thread adds while this one is quiet stays after it leaves."""
    with warnings.catch_warnings():
        with quiet():
            _in_thread(lambda: warnings.filterwarnings("ignore", message="added meanwhile"))
        assert any(f[1] is not None and f[1].pattern == "added meanwhile" for f in warnings.filters)
