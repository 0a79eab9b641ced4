"""Property tests of indexing, gather and scatter lowerings against eager PyTorch, through
torch2xla.testing.

Indices are drawn valid (negative ones where torch accepts them); scatters that keep one of
several writes to the same place get unique indices (eager and XLA may pick different ones),
accumulating scatters get duplicates on purpose.
"""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2xla.testing import assert_parity, elements, parity_settings, tensors

# Every op must run in XLA: a graph break would compare eager with eager.
parity = functools.partial(assert_parity, fullgraph=True)

ROWS, COLS = 4, 5
i64 = torch.int64


def _index(n: int, shape: tuple, negative: bool = False) -> st.SearchStrategy:
    return tensors(
        i64, shape, elements=elements(i64, min_value=-n if negative else 0, max_value=n - 1)
    )


@st.composite
def _unique_index(draw, n: int, k: int, cols: int) -> torch.Tensor:
    """(k, cols) indices into a dim of size n, unique within each column (k <= n)."""
    columns = [draw(st.permutations(range(n)))[:k] for _ in range(cols)]
    return torch.tensor(columns, dtype=i64).t().contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_gather_scatter_along_each_dim(dtype):
    fns = {}

    def make(dim: int, reduce: str, include_self: bool):
        def fn(x, idx, uniq, src):
            out = {
                "gather": torch.gather(x, dim, idx),
                "take_along_dim": torch.take_along_dim(x, idx, dim),
                "scatter": x.scatter(dim, uniq, src),
                "scatter_value": x.scatter(dim, uniq, 2),
                "scatter_add": x.scatter_add(dim, idx, src),
                "scatter_reduce": x.scatter_reduce(
                    dim, idx, src, reduce, include_self=include_self
                ),
            }
            if dim == 0:
                out["gather_neg_dim"] = torch.gather(x, -2, idx)
            return out

        return fn

    values = {"min_value": -50, "max_value": 50}
    reduces = ["sum", "amax", "amin", "prod"] + (["mean"] if dtype.is_floating_point else [])

    @parity_settings(max_examples=12)
    @given(
        dim=st.sampled_from([0, 1]),
        reduce=st.sampled_from(reduces),
        include_self=st.booleans(),
        data=st.data(),
    )
    def check(dim, reduce, include_self, data):
        key = (dim, reduce, include_self)
        if key not in fns:
            fns[key] = make(*key)
        n = (ROWS, COLS)[dim]
        shape = (3, COLS) if dim == 0 else (ROWS, 3)
        x = data.draw(tensors(dtype, (ROWS, COLS), **values), label="x")
        idx = data.draw(_index(n, shape), label="idx")
        uniq = data.draw(_unique_index(n, 3, shape[1 - dim]), label="uniq")
        uniq = uniq if dim == 0 else uniq.t().contiguous()
        src = data.draw(tensors(dtype, shape, **values), label="src")
        parity(fns[key], x, idx, uniq, src)

    check()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool], ids=str)
def test_advanced_indexing_and_index_put(dtype):
    def fn(x, rows, cols, uniq_rows, mask, vals):
        return {
            "rows": x[rows],
            "cols": x[:, cols],
            "pairs": x[rows[:3], cols[:3]],
            "broadcast": x[rows[:2, None], cols[None, :3]],
            "index_select": torch.index_select(x, 1, cols % COLS),
            "put": x.index_put((uniq_rows,), vals),
            "put_accumulate": x.index_put(
                (rows,), vals[:1].expand(rows.shape[0], COLS), accumulate=dtype is not torch.bool
            ),
            "mask_put": x.masked_fill(mask, vals[0, 0]),
            "bool_index_put": x.index_put((mask,), vals[0, 0]),
        }

    @parity_settings(max_examples=12)
    @given(
        x=tensors(dtype, (ROWS, COLS), allow_nan=False),
        rows=_index(ROWS, (5,), negative=True),
        cols=_index(COLS, (4,), negative=True),
        uniq_rows=st.permutations(range(ROWS)).map(lambda p: torch.tensor(p[:2], dtype=i64)),
        mask=tensors(torch.bool, (ROWS, COLS)),
        vals=tensors(dtype, (2, COLS), allow_nan=False),
    )
    def check(x, rows, cols, uniq_rows, mask, vals):
        parity(fn, x, rows, cols, uniq_rows, mask, vals)

    check()


def test_index_add_copy_fill_along_dim():
    def fn(x, idx, uniq, src):
        return {
            "index_add": x.index_add(0, idx, src, alpha=2),
            "index_copy": x.index_copy(0, uniq, src[:2]),
            "index_fill": x.index_fill(1, idx[:2], -1.5),
        }

    @parity_settings(max_examples=12)
    @given(
        x=tensors(torch.float32, (ROWS, COLS), min_value=-50, max_value=50),
        idx=_index(ROWS, (3,)),
        uniq=st.permutations(range(ROWS)).map(lambda p: torch.tensor(p[:2], dtype=i64)),
        src=tensors(torch.float32, (3, COLS), min_value=-50, max_value=50),
    )
    def check(x, idx, uniq, src):
        parity(fn, x, idx, uniq, src)

    check()


def test_indexing_gradients_accumulate_over_duplicates():
    def fn(x, idx):
        return (x[idx] * 2).sum(0) + torch.gather(x, 1, idx[:ROWS, None] % 2).sum()

    @parity_settings(max_examples=8)
    @given(
        x=tensors(torch.float32, (ROWS, COLS), min_value=-5, max_value=5), idx=_index(ROWS, (6,))
    )
    def check(x, idx):
        parity(fn, x, idx, grad=True)

    check()
