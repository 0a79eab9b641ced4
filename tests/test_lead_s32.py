"""Lead's regression tests of session 32, strictly against eager."""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3])
def test_topk_puts_nan_of_either_sign_where_eager_does(largest, k):
    # ``0 / 0`` is -NaN on x86; lax.top_k alone ordered it below -inf (a value left out)
    x = torch.randn(3, 8)
    x[0, 3] = torch.zeros(()) / 0
    x[1, 5] = float("nan")
    x[2, 1] = -float("inf")
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: t.topk(k, largest=largest), backend="xla")
    got, want = compiled(x), x.topk(k, largest=largest)
    assert_same(got.indices, want.indices)
    assert_same(got.values, want.values)


def test_topk_gradient_goes_to_the_chosen_elements():
    w = torch.randn(4, 6, requires_grad=True)
    want = torch.autograd.grad(w.topk(2).values.square().sum(), w)[0]
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: t.topk(2).values.square().sum(), backend="xla")
    got = torch.autograd.grad(compiled(w), w)[0]
    assert_same(got, want)
