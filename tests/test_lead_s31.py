"""Session 31 (lead): regressions found outside the helpers' classes."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_fallback_warning_from_code_run_by_python_c():
    """A fallback warning of code run by ``python -c`` (or from stdin) crashed the call:
    ``__main__``'s loader is ``BuiltinImporter``, and ``warnings.warn_explicit`` given those
    globals raised ImportError looking for the source line. Eager runs such code."""
    code = textwrap.dedent(
        """
        import warnings
        import torch
        def f(x):
            return torch.ops.aten._masked_softmax(x, x > 0, 1, 2) + 1
        x = torch.randn(2, 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = torch.compile(f, backend="xla")(x)
        torch.testing.assert_close(got, f(x), rtol=0, atol=0, equal_nan=True)
        assert any("no lowering" in str(w.message) for w in caught), [str(w.message) for w in caught]
        print("ok")
        """
    )
    for args in (["-c", code], ["-"]):
        run = subprocess.run(
            [sys.executable, *args],
            input=code if args == ["-"] else None,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]
