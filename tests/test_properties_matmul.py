"""Property tests of matrix products against eager PyTorch, through torch2xla.testing.

matmul's broadcasting rules (1-d operands, batch broadcasting), empty and zero-length
contractions, mm/bmm/addmm/baddbmm/linear/mv/dot/outer/einsum, over float and integer dtypes,
with NaN and infinities in the operands.
"""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2xla.testing import assert_parity, parity_settings, tensors

# Every op must run in XLA: a graph break would compare eager with eager.
parity = functools.partial(assert_parity, fullgraph=True)

F = torch.nn.functional

# (a, b) pairs covering matmul's cases: vector.vector, matrix.vector, vector.matrix,
# matrix.matrix, batched with broadcasting, and zero-size dims (an empty K gives zeros).
MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 4)),
    ((1, 2, 3), (4, 3, 2)),
    ((0, 3), (3, 2)),
    ((2, 0), (0, 3)),
]


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64], ids=str
)
def test_matmul_broadcasting_and_empty_contractions(dtype):
    def fn(a, b):
        return torch.matmul(a, b)

    values = {"min_value": -100, "max_value": 100}
    if dtype.is_floating_point:
        values.update(allow_nan=True, allow_infinity=True)

    @parity_settings(max_examples=12)
    @given(shapes=st.sampled_from(MATMUL_SHAPES), data=st.data())
    def check(shapes, data):
        a = data.draw(tensors(dtype, shapes[0], **values), label="a")
        b = data.draw(tensors(dtype, shapes[1], **values), label="b")
        parity(fn, a, b)

    check()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_matrix_product_ops(dtype):
    def fn(m, n, v, w, bias, batch, batch2):
        return {
            "mm": torch.mm(m, n),
            "addmm": torch.addmm(bias, m, n, beta=0.5, alpha=2.0),
            "mv": torch.mv(m, v),
            "dot": torch.dot(v, v),
            "outer": torch.outer(v, w),
            "bmm": torch.bmm(batch, batch2),
            "baddbmm": torch.baddbmm(torch.ones(2, 3, 4, dtype=m.dtype), batch, batch2, beta=2),
            "linear": F.linear(m, n.t(), bias),
            "einsum": torch.einsum("bij,bjk->bik", batch, batch2),
            "transposed_mm": torch.mm(n.t(), m.t()),
        }

    values = {"min_value": -10, "max_value": 10}

    @parity_settings(max_examples=12)
    @given(
        m=tensors(dtype, (3, 5), **values),
        n=tensors(dtype, (5, 4), **values),
        v=tensors(dtype, (5,), **values),
        w=tensors(dtype, (4,), **values),
        bias=tensors(dtype, (4,), **values),
        batch=tensors(dtype, (2, 3, 5), **values),
        batch2=tensors(dtype, (2, 5, 4), **values),
    )
    def check(m, n, v, w, bias, batch, batch2):
        parity(fn, m, n, v, w, bias, batch, batch2)

    check()


def test_matmul_gradients():
    def fn(a, b):
        return torch.matmul(a, b).tanh()

    @parity_settings(max_examples=8)
    @given(
        shapes=st.sampled_from([((2, 3), (3,)), ((2, 2, 3), (3, 4)), ((3,), (3, 4))]),
        data=st.data(),
    )
    def check(shapes, data):
        a = data.draw(tensors(torch.float32, shapes[0], min_value=-3, max_value=3), label="a")
        b = data.draw(tensors(torch.float32, shapes[1], min_value=-3, max_value=3), label="b")
        parity(fn, a, b, grad=True)

    check()
