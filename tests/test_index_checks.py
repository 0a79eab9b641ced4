"""Offsets and indices that eager rejects are rejected the same way, not read as garbage."""

import pytest
import torch
import torch.nn.functional as F

import torch2xla


def _bag(indices, weight, offsets):
    return F.embedding_bag(indices, weight, offsets)


@pytest.mark.parametrize(
    "offsets",
    [[0, 5], [1, 2], [0, -1], [0, 3], [0, 1]],
    ids=["last-past-the-end", "first-not-zero", "negative", "empty-last-bag", "valid"],
)
def test_embedding_bag_offsets_as_eager(offsets):
    weight, indices = torch.randn(4, 3), torch.tensor([0, 1, 2])
    offsets = torch.tensor(offsets)
    compiled = torch.compile(_bag, backend="xla")
    try:
        want = _bag(indices, weight, offsets)
    except (RuntimeError, IndexError) as eager:
        with pytest.raises(type(eager)) as info:
            compiled(indices, weight, offsets)
        assert isinstance(info.value, torch2xla.OpError)
        first_line = str(eager).splitlines()[0]
        assert str(info.value).startswith(first_line), (str(info.value), first_line)
        assert "return F.embedding_bag(indices, weight, offsets)" in str(info.value)
        return
    torch.testing.assert_close(compiled(indices, weight, offsets), want)
