"""Session 19: what a run of the suite under torch 2.11 found.

torch 2.11 keeps ``torch.compile(dynamic=...)``'s settings in Dynamo's process-wide config for
each call (2.13: per thread), so threads calling a compiled function at once left
``assume_static_by_default=False`` behind them and every later graph of the process was
dynamic (tests/conftest.py restores the config after each test). Those dynamic graphs showed
where ours differed from eager under dynamic shapes, which any user gets with
``dynamic=True`` or once Dynamo recompiles a function for a new size: each test here compiles
with ``dynamic=True`` and compares with eager, on both torch versions.
"""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same

T = torch.tensor


def _dynamic(fn, **options):
    return torch.compile(fn, backend="xla", dynamic=True, options={"strict": True, **options})


# -- an in-place op's result is its input, in a bucketed (padded) program ----------------------
IN_PLACE_RETURNED = {
    "masked_fill_": lambda x: x.masked_fill_(x > 4, -1.5),
    "add_then_mul_": lambda x: x.add_(1).mul_(2),
    "iadd": lambda x: x.__iadd__(1),
    "copy_": lambda x: x.copy_(x * 3),
}


@pytest.mark.parametrize("write", IN_PLACE_RETURNED.values(), ids=IN_PLACE_RETURNED.keys())
def test_in_place_result_is_the_input_in_a_padded_program(write):
    # (a size between buckets: the program runs on a padded copy; the output was the copy's
    # unpadded slice, detached, where eager returns the input itself)
    compiled = _dynamic(write)
    for n in (3, 5):
        x, ex = torch.arange(4.0 * n).reshape(n, 4), torch.arange(4.0 * n).reshape(n, 4)
        out, ref = compiled(x), write(ex)
        assert ref is ex and out is x
        assert_same(x, ex)
        assert x._version == ex._version


# -- half-precision add/sub with alpha in a padded program ---------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: torch.add(x, m, alpha=0.1),
        lambda x, m: x.clone().sub_(m, alpha=0.3),
    ],
    ids=["add", "sub_"],
)
def test_half_precision_add_with_alpha_in_a_dynamic_graph(fn, dtype):
    # eager's CPU kernel rounds the last numel % 16 (or 32) products apart: padding 37 to 64
    # moved that tail, so the bucket is refused and each size is compiled
    compiled = _dynamic(fn)
    for n in (37, 100):
        g = torch.Generator().manual_seed(n)
        x = (torch.randn(n, generator=g) * 10).to(dtype)
        m = (torch.randn(n, generator=g) * 10).to(dtype)
        if n == 100:
            with pytest.warns(torch2xla.BucketingWarning, match="alpha in half precision"):
                out = compiled(x, m)
        else:
            out = compiled(x, m)
        assert_same(out, fn(x, m), rtol=0, atol=0)
