"""OpInfo parity harness: PyTorch's ``op_db`` run through ``torch.compile(backend="xla")``.

Files:
- ``harness.py``: builds one compiled function per (op, check) from an op's sample inputs (a
  few of ``sample_inputs`` and of ``reference_inputs``), runs it next to eager PyTorch and turns
  every difference into an ``Outcome`` (gradients with their None-ness exact); runs the op's
  ``error_inputs``, which must raise as in eager.
- ``expectations.py``: what we expect: ``XFail`` records (op, dtypes, check, reason), ops whose
  values are random or uninitialized, tolerance overrides, and the fast default subset.

``tests/test_opinfo.py`` drives it under pytest; ``scripts/gen_ops_doc.py`` renders the
outcomes into ``docs/ops.md``.
"""
