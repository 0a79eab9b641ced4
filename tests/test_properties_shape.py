"""Property tests of shape ops (views, slicing, concatenation, padding, ...) against eager
PyTorch, through torch2xla.testing: inputs in every memory layout (transposed, sliced with
poison between elements, misaligned, stride-0), slice bounds past the ends, 0-size dims."""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2xla.testing import assert_parity, layouts, parity_settings, tensors

# Every op must run in XLA: a graph break would compare eager with eager.
parity = functools.partial(assert_parity, fullgraph=True)
F = torch.nn.functional
# Slice bounds past int64 are drawn on purpose; torch warns that it truncates them.
pytestmark = pytest.mark.filterwarnings("ignore:Truncating the start/stop/step:UserWarning")


def _at_offset(offset: int) -> torch.Tensor:
    base = torch.full((24 + offset,), float("nan"))
    x = base[offset:].view(2, 3, 4)
    x.copy_(torch.arange(24.0).view(2, 3, 4))
    return x


def test_view_outputs_follow_the_input_storage_offset():
    # Dynamo does not guard storage offsets: a program compiled for an input at offset 0 must
    # rebuild its view outputs over a later input at offset 1 (it once read the wrong memory).
    f = torch.compile(lambda x: x.reshape(-1, 4), backend="xla", fullgraph=True)
    for offset in (0, 1, 3):
        x = _at_offset(offset)
        out = f(x)
        assert torch.equal(out, x.reshape(-1, 4))
        assert out.data_ptr() == x.data_ptr()


def shape_ops(x):
    return {
        "reshape": x.reshape(-1, 4),
        "flatten": x.flatten(),
        "permute": x.permute(2, 0, 1),
        "transpose": x.transpose(0, -1),
        "mT_contiguous": x.mT.contiguous(),
        "flip": x.flip(0, 2),
        "roll": torch.roll(x, shifts=(1, -2), dims=(0, 2)),
        "roll_flat": torch.roll(x, 3),
        "narrow": x.narrow(2, 1, 2),
        "slice_step": x[:, ::2, 1:],
        "slice_negative": x[..., -3:-1],
        "slice_past_end": x[:, 1:100],
        "select": x[1],
        "select_negative": x[:, -1],
        "squeeze": x[:, :1].squeeze(1),
        "squeeze_not_one": x.squeeze(0),
        "unsqueeze": x.unsqueeze(-2),
        "expand": x[:, :1].expand(-1, 4, -1),
        "repeat": x.repeat(2, 1, 1, 1),
        "cat": torch.cat([x, x.flip(1)], dim=1),
        "stack": torch.stack([x, x], -1),
        "split": x.split([1, 2], dim=1),
        "chunk": x.chunk(3, dim=2),
        "unbind": x.unbind(0),
        "pad": F.pad(x, (1, 2)),
        "pad_crop": F.pad(x, (-1, 1, 0, -2)),
        "tril": x.tril(1),
        "triu": x.triu(-1),
        "diagonal": torch.diagonal(x, 1, 1, 2),
        "movedim": torch.movedim(x, 0, -1),
        "unfold": x.unfold(2, 2, 1),
        "clone": x.clone(),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_shape_ops_on_every_layout(dtype):
    @parity_settings(max_examples=12)
    @given(x=tensors(dtype, (2, 3, 4), layout=layouts()))
    def check(x):
        parity(shape_ops, x)

    check()


@st.composite
def _slices(draw):
    bound = st.one_of(st.none(), st.integers(-7, 7), st.sampled_from([2**63 - 1, -(2**63)]))
    return draw(bound), draw(bound), draw(st.sampled_from([1, 2, 3]))


def test_slices_with_any_bounds():
    fns = {}

    def make(start, stop, step):
        def fn(x):
            return {
                "dim0": x[start:stop:step],
                "dim1": x[:, start:stop:step],
                "narrow_like": x[..., start:stop],
            }

        return fn

    @parity_settings(max_examples=15)
    @given(bounds=_slices(), x=tensors(torch.float32, (5, 4, 3)))
    def check(bounds, x):
        fn = fns.setdefault(bounds, make(*bounds))
        parity(fn, x)

    check()


def test_zero_size_and_zero_dim_tensors():
    def fn(e, s, x):
        return {
            "reshape_empty": e.reshape(0, 3, 4),
            "cat_empty": torch.cat([x, e.reshape(0, 4)], 0),
            "cat_legacy_empty": torch.cat([x, torch.empty(0)], 0),
            "stack_scalars": torch.stack([s, s * 2]),
            "unsqueeze_scalar": s.unsqueeze(0),
            "expand_scalar": s.expand(2, 3),
            "flip_empty": e.flip(0),
            "pad_empty": F.pad(e, (1, 1)),
            "permute_empty": e.permute(1, 0, 2),
            "sum_empty": e.sum(1),
        }

    @parity_settings(max_examples=8)
    @given(
        e=tensors(torch.float32, (3, 0, 4)),
        s=tensors(torch.float32, ()),
        x=tensors(torch.float32, (2, 4)),
    )
    def check(e, s, x):
        parity(fn, e, s, x)

    check()


def test_cat_promotes_dtypes():
    def fn(a, b, c):
        return {"cat": torch.cat([a, b, c], 0), "stack": torch.stack([a, b.to(a.dtype)], 1)}

    @parity_settings(max_examples=10)
    # b converts to int32, in range.
    @given(
        a=tensors(torch.int32, (2, 3)),
        b=tensors(torch.float16, (2, 3), min_value=-1e3, max_value=1e3),
        c=tensors(torch.bool, (1, 3)),
    )
    def check(a, b, c):
        parity(fn, a, b, c)

    check()
