"""Probe aliasing, views and mutation semantics for silent wrong answers: small user-style
functions run once in eager PyTorch and once through ``torch.compile(backend="xla")``, and every
observation compared strictly: outputs (values, dtype, shape, strides), every input after the
call, which outputs share memory with which inputs or with each other (storage and offset), which
outputs *are* inputs, and errors (type and message start).

    PYTHONPATH=. python scripts/probe_views.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_views.py   # torch's own differences

``case(name, f, make)``: ``make()`` builds fresh inputs. ``scenario`` functions take ``(C, rec)``
for cases with modules, globals, graph breaks or several calls. Prints ``ok`` / ``DIFF`` /
``CRASH`` per case. The harness is probe_semantics.py's, plus the alias observations.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))
from _probe_common import difference, observations, r, ri, run
from probe_semantics import describe, same

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def aliasing(outs, ins):
    """For each output tensor: ('is', i), ('view', i, offset, shape, stride) of input i, ('out', j)
    sharing memory with an earlier output j, or None."""
    res = []
    for k, o in enumerate(outs):
        tag = None
        for i, a in enumerate(ins):
            if o is a:
                tag = ("is", i)
                break
            if o.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() and o.numel():
                tag = ("view", i, o.storage_offset(), tuple(o.shape), o.stride())
                break
        if tag is None:
            for j, p in enumerate(outs[:k]):
                if p.numel() and o.untyped_storage().data_ptr() == p.untyped_storage().data_ptr():
                    tag = ("out", j)
                    break
        res.append(tag)
    return ("V", res)


def case(name, f, make, alias=True):
    def run(C, rec):
        args = make()
        ins = [a for a in args if isinstance(a, torch.Tensor)]
        try:
            out = C(f)(*args)
        finally:
            rec("inputs", ins)
        rec("out", out)
        if alias:
            obs.append(("alias", aliasing(_tensors(out), ins)))

    CASES[name] = run


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


obs: list = []


def observe(fn, compiled):
    def C(f):
        return torch.compile(f, backend=BACKEND) if compiled else f

    obs.clear()
    return list(observations(fn, C, describe, obs))


def compare(name, fn):
    exp = observe(fn, False)
    d = difference(observe(fn, True), exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


T = torch.tensor


def let(value, body):
    """``body(value)``: a name for an intermediate inside a one-line case."""
    return body(value)


# ============================================================================================
# masked writes
case("mask_scalar", lambda t: t.__setitem__(t > 0, 1.5) or t, lambda: (r(3, 4),))
case("mask_neg_scalar_int", lambda t: t.__setitem__(t > 0, -3) or t, lambda: (ri(3, 4),))
case("mask_tensor_v", lambda t, v: t.__setitem__(t > 0, v) or t, lambda: (r(4), r(1)))
case(
    "mask_tensor_v_exact",
    lambda t, v: t.__setitem__(t > 0, v[: int((t > 0).sum())]) or t,
    lambda: (r(6), r(6, seed=1)),
)
case(
    "mask_row_prefix",
    lambda t, m: t.__setitem__(m, 0.0) or t,
    lambda: (r(3, 4), T([1, 0, 1]).bool()),
)
case(
    "mask_row_prefix_broadcast_v",
    lambda t, m, v: t.__setitem__(m, v) or t,
    lambda: (r(3, 4), T([True, False, True]), r(4, seed=1)),
)
case(
    "mask_prefix_2d_of_3d",
    lambda t, m: t.__setitem__(m, -1.0) or t,
    lambda: (r(2, 3, 4), r(2, 3, seed=1) > 0),
)
case("mask_imul", lambda t: t[t > 0].__imul__(2) and t, lambda: (r(3, 4),))
case("mask_setitem_imul", lambda t: t.__setitem__(t > 0, t[t > 0] * 2) or t, lambda: (r(3, 4),))
case("mask_iadd_pattern", lambda t: _iadd_mask(t), lambda: (r(3, 4),))


def _iadd_mask(t):
    t[t > 0] += 2
    return t


case(
    "mask_v_other_dtype_tensor_f64",
    lambda t, v: t.__setitem__(t > 0, v) or t,
    lambda: (r(4), T([2.5], dtype=torch.float64)),
)
case("mask_int_into_float", lambda t: t.__setitem__(t < 0, T(3)) or t, lambda: (r(5),))
case("mask_on_int_with_float", lambda t: t.__setitem__(t < 0, 2.7) or t, lambda: (ri(5),))
case(
    "mask_bool_tensor",
    lambda t, m: t.__setitem__(m, True) or t,
    lambda: (ri(5) > 0, ri(5, seed=2) > 0),
)
case("mask_all_false", lambda t: t.__setitem__(t > 100, 1.0) or t, lambda: (r(5),))
case("mask_view_of_input", lambda t: t[1:].__setitem__(t[1:] > 0, 0.0) or t, lambda: (r(3, 4),))
case("mask_col_slice", lambda t: t[:, 1].__setitem__(t[:, 1] > 0, 9.0) or t, lambda: (r(3, 4),))
case("masked_fill_view", lambda t: t.t().masked_fill_(t.t() > 0, 0.0), lambda: (r(3, 4),))
case("where_inplace_style", lambda t: t.copy_(torch.where(t > 0, t, 0.0)), lambda: (r(3, 4),))
case("masked_scatter_", lambda t, v: t.masked_scatter_(t > 0, v), lambda: (r(3, 4), r(12, seed=3)))
case(
    "mask_uint8_index_raises_or_works",
    lambda t: t.__setitem__((t > 0).to(torch.uint8), 0.0) or t,
    lambda: (r(4),),
)
# ============================================================================================
# advanced-index writes
case(
    "idx_dup_assign_same_value",
    lambda t, i: t.__setitem__(i, 5.0) or t,
    lambda: (r(5), T([1, 1, 3])),
)
case("idx_iadd_dup", lambda t, i: _iadd_idx(t, i), lambda: (r(5), T([1, 1, 3])))


def _iadd_idx(t, i):
    t[i] += 1
    return t


case("idx_neg", lambda t, i: t.__setitem__(i, 0.0) or t, lambda: (r(5), T([-1, -2])))
case(
    "idx_tensor_col",
    lambda x, i, y: x.__setitem__((slice(None), i), y) or x,
    lambda: (r(3, 4), T(2), r(3, seed=1)),
)
case(
    "idx_tensor_col_list",
    lambda x, i, y: x.__setitem__((slice(None), i), y) or x,
    lambda: (r(3, 4), T([0, 2]), r(3, 2, seed=1)),
)
case(
    "idx_two_tensors",
    lambda x, i, j: x.__setitem__((i, j), -1.0) or x,
    lambda: (r(3, 4), T([0, 2]), T([1, 3])),
)
case(
    "idx_broadcast_tensors",
    lambda x, i, j: x.__setitem__((i, j), 7.0) or x,
    lambda: (r(3, 4), T([[0], [2]]), T([1, 3])),
)
case(
    "idx_separated_adv",
    lambda x, i, j: x.__setitem__((i, slice(None), j), 0.0) or x,
    lambda: (r(3, 4, 5), T([0, 2]), T([1, 3])),
)
case("idx_ellipsis_none_slice", lambda t: _e_none(t), lambda: (r(2, 3, 4),))


def _e_none(t):
    t[..., None, 1:3] += 1
    return t


case("idx_none_first", lambda t: t.__setitem__((None, 0), 3.0) or t, lambda: (r(2, 3),))
case(
    "index_put_acc",
    lambda t, i, v: t.index_put_((i,), v, accumulate=True),
    lambda: (r(5), T([1, 1, 3, 1]), r(4, seed=2)),
)
case(
    "index_put_acc_2d",
    lambda t, i, j, v: t.index_put_((i, j), v, accumulate=True),
    lambda: (r(3, 3), T([0, 0, 2]), T([1, 1, 0]), r(3, seed=2)),
)
case(
    "index_put_acc_int",
    lambda t, i: t.index_put_((i,), T([1, 2, 3]), accumulate=True),
    lambda: (ri(4), T([0, 0, 0])),
)
case(
    "index_put_acc_bool_mask",
    lambda t, m, v: t.index_put_((m,), v, accumulate=True),
    lambda: (r(4), T([True, False, True, False]), T(2.0)),
)
case(
    "index_put_noacc_broadcast",
    lambda t, i: t.index_put_((i,), T(1.0)),
    lambda: (r(3, 2), T([0, 2])),
)
case(
    "index_put_functional",
    lambda t, i, v: (t.index_put((i,), v), t),
    lambda: (r(5), T([0, 3]), r(2, seed=2)),
)
case(
    "index_add_dup",
    lambda t, i, v: t.index_add_(0, i, v),
    lambda: (r(4, 2), T([1, 1, 0]), r(3, 2, seed=1)),
)
case(
    "index_copy_",
    lambda t, i, v: t.index_copy_(1, i, v),
    lambda: (r(3, 4), T([3, 0]), r(3, 2, seed=1)),
)
case(
    "scatter_add_dup",
    lambda t, i, v: t.scatter_add_(0, i, v),
    lambda: (torch.zeros(3), T([0, 0, 2, 0]), r(4, seed=1)),
)
case(
    "idx_nested_setitem_view",
    lambda t, i: t[1].__setitem__(i, 0.0) or t,
    lambda: (r(3, 4), T([0, 3])),
)
case(
    "idx_setitem_into_transposed",
    lambda t, i: t.t().__setitem__(i, 0.0) or t,
    lambda: (r(3, 4), T([1, 3])),
)
case(
    "idx_gather_then_write_back",
    lambda t, i: t.__setitem__(i, t[i] * 10) or t,
    lambda: (r(5), T([4, 0])),
)
case(
    "idx_bool_and_int",
    lambda t, m: t.__setitem__((m, 1), 0.0) or t,
    lambda: (r(3, 4), T([True, False, True])),
)
case("idx_list_of_ints", lambda t: t.__setitem__([0, 2], 9.0) or t, lambda: (r(4),))
case(
    "idx_slice_step_assign_tensor",
    lambda t, v: t.__setitem__(slice(None, None, 2), v) or t,
    lambda: (r(6), r(3, seed=1)),
)
case(
    "idx_setitem_broadcast_row",
    lambda t, v: t.__setitem__(slice(1, 3), v) or t,
    lambda: (r(4, 3), r(3, seed=1)),
)
case(
    "idx_setitem_other_dtype_tensor",
    lambda t, v: t.__setitem__(slice(0, 2), v) or t,
    lambda: (r(4), T([1, 2])),
)
case(
    "idx_setitem_f64_into_f32",
    lambda t, v: t.__setitem__(0, v) or t,
    lambda: (r(3, 2), r(2, dtype=torch.float64)),
)
case(
    "idx_setitem_int_tensor_into_float_view",
    lambda t: t[:, 0].__setitem__(slice(None), T([1, 2, 3])) or t,
    lambda: (r(3, 2),),
)
case("idx_put_", lambda t, i, v: t.put_(i, v), lambda: (r(2, 3), T([5, -1]), r(2, seed=1)))
case(
    "idx_take_along_write",
    lambda t, i: t.scatter_(1, i, -1.0),
    lambda: (r(3, 4), T([[0], [3], [1]])),
)
# ============================================================================================
# in-place on views of inputs
case("v_slice_mul_", lambda x: x[1:].mul_(2), lambda: (r(3, 4),))
case("v_t_add_", lambda x: x.t().add_(1), lambda: (r(3, 4),))
case("v_flat_step_zero_", lambda x: x.view(-1)[::2].zero_(), lambda: (r(3, 4),))
case("v_diag_fill_", lambda x: x.diagonal().fill_(0), lambda: (r(3, 4),))
case("v_diag_offset_fill_", lambda x: x.diagonal(1).fill_(0), lambda: (r(3, 4),))
case("v_diag_3d", lambda x: x.diagonal(0, 1, 2).mul_(-1), lambda: (r(2, 3, 3),))
case("v_unfold_overlap_add_raises", lambda x: x.unfold(0, 3, 1).add_(1), lambda: (r(6),))
case("v_unfold_2d", lambda x: x.unfold(1, 2, 2).mul_(3), lambda: (r(3, 4),))
case("v_expand_inplace_raises", lambda x: x.expand(3, 4).add_(1), lambda: (r(1, 4),))
case("v_chain", lambda x: x.view(2, 6)[:, 1:].t()[2].add_(5), lambda: (r(3, 4),))
case("v_narrow", lambda x: x.narrow(1, 1, 2).sub_(1), lambda: (r(3, 4),))
case("v_select", lambda x: x.select(0, 1).div_(2), lambda: (r(3, 4),))
case("v_as_strided", lambda x: x.as_strided((2, 3), (4, 1), 1).zero_(), lambda: (r(3, 4),))
case("v_unbind_add", lambda x: x.unbind()[1].add_(1) and x, lambda: (r(3, 4),))
case(
    "v_unbind_all_add", lambda x: [u.add_(i) for i, u in enumerate(x.unbind(1))], lambda: (r(3, 4),)
)
case("v_split_mutate", lambda x: x.split(2)[1].mul_(0), lambda: (r(5, 2),))
case(
    "v_split_all_mutate",
    lambda x: [s.add_(i) for i, s in enumerate(x.split([1, 3], 1))],
    lambda: (r(3, 4),),
)
case("v_chunk_mutate", lambda x: x.chunk(2, 1)[0].fill_(1), lambda: (r(3, 4),))
case("v_tensor_split_mutate", lambda x: x.tensor_split(3)[2].neg_(), lambda: (r(7),))
case("v_real_mul", lambda x: x.real.mul_(2), lambda: (torch.randn(3, dtype=torch.complex64),))
case("v_imag_zero", lambda x: x.imag.zero_(), lambda: (torch.randn(3, dtype=torch.complex64),))
case("v_view_as_complex", lambda x: torch.view_as_complex(x).mul_(1j), lambda: (r(3, 2),))
case("v_view_dtype_int", lambda x: x.view(torch.int32).bitwise_and_(0x7FFFFFFF), lambda: (r(4),))
case("v_movedim", lambda x: x.movedim(0, 2)[0].add_(1), lambda: (r(2, 3, 4),))
case("v_permute_mutate", lambda x: x.permute(2, 0, 1).mul_(2), lambda: (r(2, 3, 4),))
case("v_squeeze_view", lambda x: x.squeeze(1).add_(1), lambda: (r(3, 1, 2),))
case("v_unsqueeze_view_idx", lambda x: x.unsqueeze(0)[0, 1].zero_(), lambda: (r(3, 2),))
case("v_flatten_view", lambda x: x.flatten()[2:5].fill_(0), lambda: (r(3, 4),))
case("v_reshape_view", lambda x: x.reshape(4, 3)[1].fill_(0), lambda: (r(3, 4),))
case("v_reshape_copy_not_view", lambda x: x.t().reshape(-1).fill_(0), lambda: (r(3, 4),))
case("v_contiguous_of_view", lambda x: x.t().contiguous().fill_(0), lambda: (r(3, 4),))
case("v_contiguous_noop_is_view", lambda x: x.contiguous().fill_(0), lambda: (r(3, 4),))
case("v_detach_mutate", lambda x: x.detach().add_(1), lambda: (r(3),))
case("v_alias_of_view_returned", lambda x: (x[0], x[0].add_(1)), lambda: (r(3, 4),))
case("v_mutate_then_view_read", lambda x: (x.add_(1), x[1:].sum()), lambda: (r(3, 4),))
case("v_view_taken_before_mutation", lambda x: _view_before(x), lambda: (r(3, 4),))


def _view_before(x):
    v = x[1]
    x.mul_(2)
    return v + 0, v


case("v_two_views_both_mutated", lambda x: (x[0].add_(1), x[:, 0].add_(10)), lambda: (r(3, 3),))
case("v_mutate_input_noncontig_view", lambda x: x[:, ::2].mul_(2), lambda: (r(4, 3).t(),))
case(
    "v_channels_last",
    lambda x: x.add_(1) and x.mul_(2),
    lambda: (r(2, 3, 4, 4).to(memory_format=torch.channels_last),),
)
case(
    "v_channels_last_slice",
    lambda x: x[:, 1].zero_(),
    lambda: (r(2, 3, 4, 4).to(memory_format=torch.channels_last),),
)
case("v_zero_size", lambda x: x.add_(1), lambda: (r(0, 3),))
case("v_zero_size_view", lambda x: x[2:2].fill_(1), lambda: (r(3, 4),))
case("v_zero_size_out", lambda x: (x[:0], x * 2), lambda: (r(3, 4),))
case("v_clamp_view", lambda x: x[1].clamp_(min=0), lambda: (r(3, 4),))
case("v_copy_from_other_view", lambda x: x[0].copy_(x[2]), lambda: (r(3, 4),))
case("v_copy_from_self_transposed_square", lambda x: x.copy_(x.t().clone()), lambda: (r(3, 3),))
case("v_swap_rows_clone", lambda x: x[[0, 1]].copy_(x[[1, 0]]) and x, lambda: (r(3, 4),))
case("v_swap_rows_setitem", lambda x: x.__setitem__([0, 1], x[[1, 0]]) or x, lambda: (r(3, 4),))
case("v_roll_inplace_via_copy", lambda x: x.copy_(x.roll(1)), lambda: (r(5),))
case(
    "v_addcmul_view",
    lambda x, y: x[1:].addcmul_(y, y, value=0.5),
    lambda: (r(3, 4), r(2, 4, seed=1)),
)
case("v_bf16_view_mul", lambda x: x[0].mul_(1.5), lambda: (r(2, 3, dtype=torch.bfloat16),))
case("v_int_view_floordiv", lambda x: x[1:].floor_divide_(2), lambda: (ri(5),))
case("v_bool_view_logical", lambda x: x[1:].logical_not_(), lambda: (ri(4) > 0,))
case("v_int_inplace_float_raises", lambda x: x[1:].mul_(1.5), lambda: (ri(4),))
case(
    "v_sort_inplace_via_out",
    lambda x: torch.sort(x, out=(x.clone(), torch.empty(0, dtype=torch.long))),
    lambda: (r(4),),
)
# ============================================================================================
# metadata mutations of inputs
case("m_transpose_", lambda x: x.transpose_(0, 1) and x * 1, lambda: (r(3, 4),))
case("m_transpose_return", lambda x: x.transpose_(0, 1), lambda: (r(3, 4),))
case("m_unsqueeze_", lambda x: x.unsqueeze_(0), lambda: (r(3, 4),))
case("m_squeeze_", lambda x: x.squeeze_(), lambda: (r(3, 1, 4),))
case("m_squeeze_dim_", lambda x: x.squeeze_(1), lambda: (r(3, 1, 4),))
case("m_t_", lambda x: x.t_(), lambda: (r(3, 4),))
case("m_t_then_add", lambda x: x.t_().add_(1), lambda: (r(3, 4),))
case("m_resize_grow", lambda x: (x.resize_(4, 4)[3].fill_(0), x), lambda: (r(3, 4),))
case("m_resize_same_numel", lambda x: x.resize_(2, 6), lambda: (r(3, 4),))
case("m_resize_shrink", lambda x: x.resize_(2, 2), lambda: (r(3, 4),))
case("m_set_", lambda x, y: x.set_(y), lambda: (r(3), r(4, seed=1)))
case("m_as_strided_", lambda x: x.as_strided_((2, 2), (1, 2)), lambda: (r(6),))
case("m_swapdims_", lambda x: x.swapdims_(0, 1), lambda: (r(2, 3),))
case("m_unsqueeze_then_add", lambda x: x.unsqueeze_(1).add_(1), lambda: (r(3),))
case("m_resize_as_", lambda x, y: x.resize_as_(y), lambda: (r(3, 4), r(2, 6, seed=1)))
# ============================================================================================
# outputs that are views of inputs or of each other
case("o_view", lambda x: x.view(4, 3), lambda: (r(3, 4),))
case("o_index0", lambda x: x[0], lambda: (r(3, 4),))
case("o_input_itself", lambda x: x, lambda: (r(3, 4),))
case("o_input_twice", lambda x: (x, x), lambda: (r(3, 4),))
case("o_same_tensor_twice", lambda x: let(x * 2, lambda y: (y, y)), lambda: (r(3, 4),))
case("o_two_views_intermediate", lambda x: let(x * 2, lambda y: (y[0], y[1:])), lambda: (r(3, 4),))
case("o_view_and_base_intermediate", lambda x: let(x + 1, lambda y: (y, y.t())), lambda: (r(3, 4),))
case("o_input_and_view", lambda x: (x, x.t(), x[1]), lambda: (r(3, 4),))
case("o_expand_of_input", lambda x: x.expand(2, 3, 4), lambda: (r(3, 4),))
case("o_unflatten_of_input", lambda x: x.unflatten(1, (2, 2)), lambda: (r(3, 4),))
case("o_view_dtype", lambda x: x.view(torch.int32), lambda: (r(3, 4),))
case("o_split_all", lambda x: x.split(1), lambda: (r(3, 4),))
case("o_unbind_all", lambda x: x.unbind(1), lambda: (r(3, 4),))
case("o_chunk_intermediate", lambda x: (x * 2).chunk(2), lambda: (r(4, 2),))
case("o_diag_of_input", lambda x: x.diagonal(), lambda: (r(3, 4),))
case("o_view_of_mutated_input", lambda x: x.mul_(2).view(-1), lambda: (r(3, 4),))
case("o_view_of_other_input", lambda x, y: (x + 1, y[1:]), lambda: (r(3), r(4, seed=1)))
case("o_real_of_complex_input", lambda x: x.real, lambda: (torch.randn(3, dtype=torch.complex64),))
case(
    "o_view_as_real",
    lambda x: torch.view_as_real(x),
    lambda: (torch.randn(3, dtype=torch.complex64),),
)
case("o_input_view_of_view_input", lambda x: x[1:], lambda: (r(5)[1:],))
case("o_alias_op", lambda x: torch.ops.aten.alias(x), lambda: (r(3),))
case("o_detach_is_view", lambda x: x.detach(), lambda: (r(3),))
case("o_squeeze_noop", lambda x: x.squeeze(), lambda: (r(3, 4),))
case("o_reshape_noop", lambda x: x.reshape(3, 4), lambda: (r(3, 4),))
case("o_to_same_dtype", lambda x: x.to(torch.float32), lambda: (r(3, 4),))
case("o_type_as_same", lambda x, y: x.type_as(y), lambda: (r(3), r(2, seed=1)))
case("o_contiguous_noop", lambda x: x.contiguous(), lambda: (r(3, 4),))
case("o_float_noop", lambda x: x.float(), lambda: (r(3, 4),))
case("o_flatten_1d_noop", lambda x: x.flatten(), lambda: (r(5),))
case("o_view_as", lambda x, y: x.view_as(y), lambda: (r(3, 4), r(12, seed=1)))
case("o_narrow_of_input", lambda x: x.narrow(0, 1, 2), lambda: (r(3, 4),))
case("o_swapaxes", lambda x: x.swapaxes(0, 1), lambda: (r(3, 4),))
case("o_mT", lambda x: x.mT, lambda: (r(2, 3, 4),))
case("o_T_1d", lambda x: x.T if x.dim() < 2 else x, lambda: (r(3),))
case("o_expand_as", lambda x, y: x.expand_as(y), lambda: (r(1, 4), r(3, 4, seed=1)))
case("o_broadcast_to", lambda x: torch.broadcast_to(x, (2, 4)), lambda: (r(4),))
case("o_atleast_2d", lambda x: torch.atleast_2d(x), lambda: (r(4),))
case("o_views_and_mutation_after", lambda x: (x[0], x.add_(1)), lambda: (r(3, 4),))
# ============================================================================================
# out= and copy_
case(
    "out_wrong_size_resized",
    lambda a, b, c: (torch.add(a, b, out=c), c),
    lambda: (r(3), r(3, seed=1), torch.empty(5)),
)
case(
    "out_wrong_size_2d",
    lambda a, b, c: torch.mul(a, b, out=c),
    lambda: (r(2, 3), r(3, seed=1), torch.empty(3, 2)),
)
case("out_is_input", lambda a, b: torch.add(a, b, out=a), lambda: (r(3), r(3, seed=1)))
case("out_is_second_input", lambda a, b: torch.add(a, b, out=b), lambda: (r(3), r(3, seed=1)))
case(
    "out_of_other_dtype_float64",
    lambda a, c: torch.add(a, 1, out=c),
    lambda: (r(3), torch.empty(3, dtype=torch.float64)),
)
case(
    "out_int_from_float_raises",
    lambda a, c: torch.add(a, 1, out=c),
    lambda: (r(3), torch.zeros(3, dtype=torch.int64)),
)
case(
    "out_matmul_resize",
    lambda a, b, c: torch.matmul(a, b, out=c),
    lambda: (r(2, 3), r(3, 4, seed=1), torch.empty(0)),
)
case(
    "out_sum_keepdim",
    lambda a, c: torch.sum(a, 1, keepdim=True, out=c),
    lambda: (r(2, 3), torch.empty(2, 1)),
)
case(
    "out_noncontig_same_shape",
    lambda a, c: torch.exp(a, out=c.t()) and c,
    lambda: (r(3, 2), torch.empty(2, 3)),
)
case(
    "out_max_dim",
    lambda a, v, i: torch.max(a, 1, out=(v, i)),
    lambda: (r(3, 4), torch.empty(3), torch.empty(3, dtype=torch.long)),
)
case("out_cumsum", lambda a, c: torch.cumsum(a, 0, out=c), lambda: (r(4), torch.empty(4)))
case(
    "out_where",
    lambda m, a, b, c: torch.where(m, a, b, out=c),
    lambda: (T([True, False]), r(2), r(2, seed=1), torch.empty(2)),
)
case("out_arange", lambda c: torch.arange(5, out=c), lambda: (torch.empty(2, dtype=torch.long),))
case("copy_broadcast", lambda x, y: x.copy_(y), lambda: (r(3, 4), r(4, seed=1)))
case("copy_dtype_int_to_float", lambda x, y: x.copy_(y), lambda: (r(3), ri(3)))
case(
    "copy_dtype_float_to_int_trunc",
    lambda x, y: x.copy_(y),
    lambda: (ri(4), T([1.7, -1.7, 2.5, -0.5])),
)
case("copy_float_to_bool", lambda x, y: x.copy_(y), lambda: (ri(3) > 0, T([0.0, -0.0, 0.1])))
case(
    "copy_complex_to_float_drops_imag",
    lambda x, y: x.copy_(y),
    lambda: (r(3), torch.randn(3, dtype=torch.complex64)),
)
case(
    "copy_f64_to_bf16",
    lambda x, y: x.copy_(y),
    lambda: (r(3, dtype=torch.bfloat16), r(3, seed=1, dtype=torch.float64)),
)
case(
    "copy_into_view_broadcast_scalar_tensor",
    lambda x, y: x[:, 1].copy_(y),
    lambda: (r(3, 4), T(5.0)),
)
case("copy_into_transposed", lambda x, y: x.t().copy_(y), lambda: (r(3, 4), r(4, 3, seed=1)))
case("copy_non_blocking", lambda x, y: x.copy_(y, non_blocking=True), lambda: (r(3), r(3, seed=1)))
case("fill_tensor_value", lambda x, v: x.fill_(v), lambda: (r(3), T(2.5, dtype=torch.float64)))
case("fill_int_from_float_tensor", lambda x, v: x.fill_(v), lambda: (ri(3), T(2.7)))
case("zero_int", lambda x: x.zero_(), lambda: (ri(3),))
case("copy_inplace_op_chain", lambda x, y: x.copy_(y).mul_(2).add_(x), lambda: (r(3), r(3, seed=1)))
case("copy_from_overlapping_expand", lambda x: x.copy_(x[0:1].expand(3, 4)), lambda: (r(3, 4),))
# ============================================================================================
# reads after writes in the same graph
case(
    "rw_read_before_after",
    lambda x: (x.sum(), x.add_(1).sum(), x.sum()),
    lambda: (r(3),),
    alias=False,
)
case("rw_clone_before_mutate", lambda x: let(x.clone(), lambda c: (x.mul_(2), c)), lambda: (r(3),))
case("rw_view_sees_mutation", lambda x: let(x[1:], lambda v: (x.add_(1), v * 1)), lambda: (r(3),))
case(
    "rw_mutate_through_view_read_base",
    lambda x: let(x[1:], lambda v: (v.zero_(), x.sum())),
    lambda: (r(3),),
)
case("rw_loop_mutation", lambda x: _loop(x), lambda: (r(4),))


def _loop(x):
    for i in range(4):
        x[i] = x[i - 1] * 2 + 1
    return x


def _loop2(x, acc):
    for i in range(x.shape[0]):
        acc += x[i]
        x[i] = acc.sum()
    return acc


case("rw_loop_accumulate", _loop2, lambda: (r(3, 2), torch.zeros(2)))
case(
    "rw_mutate_and_return_old_value",
    lambda x: let(x * 1, lambda o: (x.add_(1), o)),
    lambda: (r(3),),
)
case(
    "rw_aliased_inputs_write_read",
    lambda a, b: (a.add_(1), b.sum()),
    lambda: let(r(4), lambda t: (t, t[1:])),
)
case(
    "rw_inplace_on_intermediate_view",
    lambda x: let(x * 2, lambda y: (y[0].add_(5), y)),
    lambda: (r(3, 2),),
)
case("rw_inplace_on_intermediate_view_then_reads", lambda x: _intermediate(x), lambda: (r(3, 2),))


def _intermediate(x):
    y = x * 2
    v = y.t()
    v[0] = 0
    return y, v, y.sum()


case("rw_intermediate_view_returned_then_base_mutated", lambda x: _inter2(x), lambda: (r(3, 2),))


def _inter2(x):
    y = x.clone()
    v = y[1]
    y.mul_(10)
    return v


case(
    "rw_cumulative_inplace_ops", lambda x: x.mul_(2).add_(1).div_(3).pow_(2).neg_(), lambda: (r(4),)
)
case("rw_relu_inplace_view_returned", lambda x: torch.relu_(x[1:]), lambda: (r(4),))
case("rw_sigmoid_inplace_then_read", lambda x: (torch.sigmoid_(x), x * 2), lambda: (r(4),))
case(
    "rw_setitem_with_self_alias_read",
    lambda x: x.__setitem__(slice(1, None), x[:-1]) or x,
    lambda: (r(5),),
)
case(
    "rw_setitem_from_clone",
    lambda x: x.__setitem__(slice(1, None), x[:-1].clone()) or x,
    lambda: (r(5),),
)
case("rw_add_self_view_nonoverlap", lambda x: x[:2].add_(x[2:]), lambda: (r(4),))
case("rw_transposed_self_add", lambda x: x.add_(x.t()), lambda: (r(3, 3),))
case(
    "rw_zero_size_index_put",
    lambda x, i: x.index_put_((i,), T(1.0)),
    lambda: (r(3), T([], dtype=torch.long)),
)
case("rw_mutate_int_then_float_op", lambda x: (x.add_(1), x / 2), lambda: (ri(3),))


# ============================================================================================
# scenarios: modules, globals, graph breaks, repeated calls
@scenario
def sc_buffer_count_and_copy(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.int64))
            self.register_buffer("buf", torch.zeros(3))
            self.register_buffer("hist", torch.zeros(4, 3))

        def forward(self, x, i):
            self.count += 1
            self.buf.copy_(x)
            self.hist[i] = x * self.count
            return self.buf * 2

    m = M()
    cm = C(m)
    outs = [cm(r(3, seed=k), T(k % 4)) for k in range(3)]
    rec("outs", outs + [m.count, m.buf, m.hist])


@scenario
def sc_buffer_index_assign_python_int(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("hist", torch.zeros(4, 3))
            self.pos = 0

        def forward(self, x):
            self.hist[self.pos] = x
            self.pos += 1
            return self.hist.sum(0)

    m = M()
    cm = C(m)
    outs = [cm(r(3, seed=k)) for k in range(3)]
    rec("outs", outs + [m.hist, T(m.pos)])


@scenario
def sc_kv_cache_style(C, rec):
    cache = torch.zeros(2, 5, 3)

    def f(x, pos):
        cache[:, pos : pos + x.shape[1]] = x
        return cache[:, : pos + x.shape[1]].sum(1)

    cf = C(f)
    outs = [cf(r(2, 2, 3), 0), cf(r(2, 1, 3, seed=1), 2), cf(r(2, 1, 3, seed=2), 3)]
    rec("outs", outs + [cache])


@scenario
def sc_kv_cache_tensor_pos(C, rec):
    cache = torch.zeros(5, 3)

    def f(x, pos):
        cache.index_copy_(0, pos, x)
        return cache.sum(0)

    cf = C(f)
    outs = [cf(r(1, 3, seed=k), T([k])) for k in range(3)]
    rec("outs", outs + [cache])


@scenario
def sc_global_setitem(C, rec):
    g = torch.zeros(4)

    def f(x, i):
        g[i] = x.sum()
        return g * 1

    cf = C(f)
    outs = [cf(r(3, seed=k), T(k)) for k in range(3)]
    rec("outs", outs + [g])


@scenario
def sc_graph_break_between_mutations(C, rec):
    def f(x):
        x.add_(1)
        print(end="")
        x.mul_(2)
        return x.sum()

    x = r(3)
    out = C(f)(x)
    rec("outs", [out, x])


@scenario
def sc_graph_break_view_across(C, rec):
    def f(x):
        v = x[1:]
        v.add_(1)
        torch._dynamo.graph_break()
        v.mul_(2)
        return v, x.sum()

    x = r(4)
    out = C(f)(x)
    rec("outs", list(out) + [x])
    obs.append(("alias", aliasing(list(out), [x])))


@scenario
def sc_graph_break_intermediate_view_mutated(C, rec):
    def f(x):
        y = x * 2
        v = y[1:]
        torch._dynamo.graph_break()
        v.zero_()
        return y

    x = r(4)
    rec("outs", [C(f)(x), x])


@scenario
def sc_graph_break_view_mutated_before_break(C, rec):
    def f(x):
        y = x * 2
        v = y.t()
        v[0] = -1
        torch._dynamo.graph_break()
        return y + 0, v * 1

    x = r(3, 2)
    rec("outs", list(C(f)(x)) + [x])


@scenario
def sc_graph_break_returned_view_of_intermediate(C, rec):
    def f(x):
        y = x + 1
        a = y[0]
        torch._dynamo.graph_break()
        y.mul_(3)
        return a, y

    x = r(3, 2)
    out = C(f)(x)
    rec("outs", list(out) + [x])
    obs.append(("alias", aliasing(list(out), [x])))


@scenario
def sc_graph_break_unsupported_op(C, rec):
    def f(x, y):
        x[0] += 1
        z = torch.nonzero(y)  # data-dependent
        x[1:] *= z.shape[0]
        return x, z

    x = r(3)
    out = C(f)(x, T([1, 0, 2]))
    rec("outs", list(out) + [x])


@scenario
def sc_mutate_after_call_output_view(C, rec):
    def f(x):
        y = x * 2
        return y[0], y[1:]

    a, b = C(f)(r(3, 2))
    a.add_(100)  # eager: b unaffected (disjoint rows) but both view y
    rec("outs", [a, b, a._base is not None, b._base is not None])


@scenario
def sc_mutate_after_call_overlapping_views(C, rec):
    def f(x):
        y = x * 2
        return y, y[1:]

    a, b = C(f)(r(3, 2))
    a.add_(100)
    rec("outs", [a, b])


@scenario
def sc_mutate_after_call_same_out_twice(C, rec):
    def f(x):
        y = x * 2
        return y, y

    a, b = C(f)(r(3))
    a.add_(100)
    rec("outs", [a, b, a is b])


@scenario
def sc_mutate_after_call_input_returned(C, rec):
    def f(x):
        return x, x.t()

    x = r(3, 2)
    a, b = C(f)(x)
    a.add_(1)
    rec("outs", [a, b, x, a is x])


@scenario
def sc_mutate_after_call_view_of_mutated(C, rec):
    def f(x):
        x.mul_(2)
        return x[0]

    x = r(3, 2)
    a = C(f)(x)
    a.fill_(0)
    rec("outs", [a, x])


@scenario
def sc_second_call_different_alias(C, rec):
    def f(a, b):
        a.add_(1)
        return b * 1

    cf = C(f)
    x = r(4)
    o1 = cf(x, r(4, seed=1))
    o2 = cf(x, x)
    y = r(4, seed=3)
    o3 = cf(y[:2], y[2:])
    rec("outs", [o1, o2, o3, x, y])


@scenario
def sc_data_assign(C, rec):
    def f(x, y):
        x.data = y * 2
        return x + 1

    x, y = r(3), r(3, seed=1)
    out = C(f)(x, y)
    rec("outs", [out, x])


@scenario
def sc_data_mutate(C, rec):
    def f(x):
        x.data.mul_(2)
        return x + 1

    x = r(3)
    out = C(f)(x)
    rec("outs", [out, x])


@scenario
def sc_param_data_mutate_in_forward(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        lin.weight.data.clamp_(-0.1, 0.1)
        return lin(x)

    out = C(f)(r(1, 3))
    rec("outs", [out.detach(), lin.weight.detach()])


@scenario
def sc_module_list_state(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("ema", torch.zeros(3))

        def forward(self, x):
            self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
            return x - self.ema

    m = M()
    cm = C(m)
    outs = [cm(r(4, 3, seed=k)) for k in range(3)]
    rec("outs", outs + [m.ema])


@scenario
def sc_buffer_view_returned(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.arange(6.0).view(2, 3))

        def forward(self, x):
            self.b[0] += x
            return self.b[0]

    m = M()
    out = C(m)(r(3))
    out.mul_(10)  # eager: writes into m.b
    rec("outs", [out, m.b])


@scenario
def sc_param_view_returned(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        return lin.weight[0], lin.bias

    with torch.no_grad():
        a, b = C(f)(r(3))
        a.zero_()
    rec("outs", [lin.weight.detach(), b is lin.bias])


@scenario
def sc_inference_mode_mutation(C, rec):
    def f(x):
        x[0] = 5
        return x * 2

    with torch.inference_mode():
        x = r(3)
        out = C(f)(x)
    rec("outs", [out, x])


@scenario
def sc_no_grad_mutation_of_requires_grad_leaf(C, rec):
    w = r(3).requires_grad_()

    def f(x):
        with torch.no_grad():
            w.add_(x)
        return (w * x).sum()

    out = C(f)(r(3, seed=1))
    out.backward()
    rec("outs", [out.detach(), w.detach(), w.grad])


@scenario
def sc_mutation_of_non_leaf_requires_grad(C, rec):
    def f(w, x):
        y = w * 2
        y[0] = x.sum()
        y.mul_(3)
        return y.sum()

    w = r(3).requires_grad_()
    out = C(f)(w, r(2, seed=1))
    out.backward()
    rec("outs", [out.detach(), w.grad])


@scenario
def sc_view_of_requires_grad_input_mutated_raises(C, rec):
    def f(w):
        w[0].add_(1)
        return w

    w = r(3).requires_grad_()
    C(f)(w)


@scenario
def sc_mutate_input_then_grad(C, rec):
    def f(w, x):
        x.mul_(2)
        return (w * x).sum()

    w, x = r(3).requires_grad_(), r(3, seed=1)
    out = C(f)(w, x)
    out.backward()
    rec("outs", [out.detach(), w.grad, x])


@scenario
def sc_out_view_of_intermediate_grad(C, rec):
    def f(w):
        y = w * 2
        return y[0], y[1:]

    w = r(3, 2).requires_grad_()
    a, b = C(f)(w)
    (a.sum() * 3 + b.sum()).backward()
    rec("outs", [a.detach(), b.detach(), w.grad])


@scenario
def sc_repeated_calls_inplace_input(C, rec):
    def f(x):
        x[x > 0] = 0
        x.add_(1)
        return x

    cf = C(f)
    x = r(5)
    for _ in range(3):
        o = cf(x)
    rec("outs", [o, x, o is x])


@scenario
def sc_dynamic_shapes_mutation(C, rec):
    def f(x, i):
        x[i] += 1
        x[:, 1:].mul_(2)
        return x.sum(1)

    cf = torch.compile(f, backend=BACKEND, dynamic=True) if C(f) is not f else f
    outs, ins = [], []
    for n in (3, 4, 5):
        x = r(n, 3, seed=n)
        outs.append(cf(x, T([0, n - 1, 0])))
        ins.append(x)
    rec("outs", outs + ins)


@scenario
def sc_mutated_input_aliasing_buffer(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(4))

        def forward(self, x):
            self.b.add_(1)
            x.mul_(2)
            return self.b[:3] + x

    m = M()
    cm = C(m)
    out = cm(m.b[1:].view(3))  # an input that is a view of the buffer
    rec("outs", [out, m.b])


@scenario
def sc_global_list_tensor_inplace_in_loop(C, rec):
    hist = [torch.zeros(2) for _ in range(3)]

    def f(x):
        for h in hist:
            h.add_(x)
            x = x * 2
        return x

    out = C(f)(T([1.0, 2.0]))
    rec("outs", [out] + hist)


@scenario
def sc_optimizer_like_foreach(C, rec):
    ps = [r(3, seed=k) for k in range(3)]
    gs = [r(3, seed=10 + k) for k in range(3)]

    def f(ps, gs):
        torch._foreach_add_(ps, gs, alpha=-0.1)
        torch._foreach_mul_(ps, 0.5)
        return ps[0].sum()

    out = C(f)(ps, gs)
    rec("outs", [out] + ps)


@scenario
def sc_foreach_aliasing_params(C, rec):
    base = r(6)
    ps = [base[:3], base[3:]]
    gs = [r(3, seed=10), r(3, seed=11)]

    def f(ps, gs):
        torch._foreach_add_(ps, gs)

    C(f)(ps, gs)
    rec("outs", [base] + ps)


@scenario
def sc_tensor_subclass_param_inplace(C, rec):
    p = nn.Parameter(r(3))

    def f(x):
        with torch.no_grad():
            p.copy_(x)
            p[0] = -1
        return p * 2

    out = C(f)(r(3, seed=1))
    rec("outs", [out.detach(), p.detach()])


@scenario
def sc_resize_input_in_graph(C, rec):
    def f(x, y):
        x.resize_(y.shape)
        x.copy_(y)
        return x

    x = r(2)
    out = C(f)(x, r(2, 3, seed=1))
    rec("outs", [out, x, out is x])


@scenario
def sc_set_source_storage(C, rec):
    def f(x, y):
        x.set_(y.untyped_storage(), 1, (2,), (1,))
        return x * 1

    x, y = r(3), r(4, seed=1)
    out = C(f)(x, y)
    rec("outs", [out, x])


# ============================================================================================
# round 2: duplicates with different values, offsets, conj/neg inputs, saved tensors
case(
    "dup_idx_assign_diff_values",
    lambda t, i, v: t.__setitem__(i, v) or t,
    lambda: (r(5), T([1, 3, 1, 1]), T([1.0, 2.0, 3.0, 4.0])),
)
case(
    "dup_idx_2d_rows",
    lambda t, i, v: t.__setitem__(i, v) or t,
    lambda: (r(3, 2), T([0, 0]), r(2, 2, seed=1)),
)
case(
    "dup_scatter_diff_values",
    lambda t, i, v: t.scatter_(0, i, v),
    lambda: (torch.zeros(3), T([1, 1, 1]), T([1.0, 2.0, 3.0])),
)
case(
    "dup_index_copy",
    lambda t, i, v: t.index_copy_(0, i, v),
    lambda: (torch.zeros(3), T([2, 2]), T([5.0, 6.0])),
)
case(
    "dup_put_noacc",
    lambda t, i, v: t.put_(i, v),
    lambda: (torch.zeros(4), T([0, 0, 0]), T([1.0, 2.0, 3.0])),
)
case(
    "dup_index_put_bf16_acc",
    lambda t, i, v: t.index_put_((i,), v, accumulate=True),
    lambda: (
        torch.zeros(2, dtype=torch.bfloat16),
        T([0] * 300 + [1]),
        torch.full((301,), 1.0, dtype=torch.bfloat16),
    ),
)
case(
    "dup_index_add_bf16",
    lambda t, i, v: t.index_add_(0, i, v),
    lambda: (
        torch.zeros(2, dtype=torch.bfloat16),
        T([0] * 300),
        torch.full((300,), 1.0, dtype=torch.bfloat16),
    ),
)
case(
    "dup_index_put_f16_acc_2d",
    lambda t, i, v: t.index_put_((i,), v, accumulate=True),
    lambda: (
        torch.zeros(2, 2, dtype=torch.float16),
        T([0] * 3000),
        torch.full((3000, 2), 1.0, dtype=torch.float16),
    ),
)
case(
    "off_as_strided_abs_offset", lambda x: x.as_strided((2,), (1,), 0).add_(1), lambda: (r(6)[2:],)
)
case("off_as_strided_out", lambda x: x.as_strided((2,), (2,), 1), lambda: (r(6)[2:],))
case("off_as_strided_read", lambda x: x.as_strided((3,), (1,), 0) * 2, lambda: (r(6)[2:],))
case("off_input_view_mutated_return_view", lambda x: x.add_(1)[1:], lambda: (r(6)[2:],))
case(
    "conj_input_mutated",
    lambda x: x.mul_(2j),
    lambda: (torch.randn(3, dtype=torch.complex64).conj(),),
)
case(
    "conj_input_add_real",
    lambda x: x.add_(1),
    lambda: (torch.randn(3, dtype=torch.complex64).conj(),),
)
case(
    "neg_view_input_mutated",
    lambda x: x.add_(1),
    lambda: (torch.randn(3, dtype=torch.complex64).conj().imag,),
)
case("expanded_input_mutated_raises", lambda x: x.add_(1), lambda: (torch.zeros(1).expand(3),))
case(
    "expanded_input_copy_raises",
    lambda x, y: x.copy_(y),
    lambda: (torch.zeros(1, 3).expand(2, 3), r(2, 3)),
)
case(
    "expanded_input_index_put",
    lambda x: x.__setitem__(0, 1.0) or x,
    lambda: (torch.zeros(1, 3).expand(2, 3),),
)
case("view_noncontig_raises", lambda x: x.view(-1).add_(1), lambda: (r(3, 4).t(),))
case("copy_full_self_transposed", lambda x: x.copy_(x.t()), lambda: (r(3, 3),))
case("inplace_0d_int", lambda x: x.add_(3), lambda: (T(4),))
case(
    "inplace_0d_python_iadd_returned", lambda x: let(x.__iadd__(1), lambda y: y), lambda: (T(4.0),)
)
case(
    "setitem_ellipsis",
    lambda x, y: x.__setitem__(Ellipsis, y) or x,
    lambda: (r(2, 3), r(3, seed=1)),
)
case(
    "setitem_none", lambda x, y: x.__setitem__(None, y) or x, lambda: (r(2, 3), r(1, 2, 3, seed=1))
)
case(
    "setitem_requires_grad_value",
    lambda x, y: (x.__setitem__(0, y), x.requires_grad, x * 1)[1:],
    lambda: (r(2, 3), r(3, seed=1).requires_grad_()),
    alias=False,
)
case(
    "dropout_inplace_eval_noop",
    lambda x: torch.nn.functional.dropout(x, 0.5, training=False, inplace=True),
    lambda: (r(3),),
)
case("relu_module_inplace_on_input_view", lambda x: nn.ReLU(inplace=True)(x[1:]), lambda: (r(4),))
case(
    "hardtanh_inplace_input",
    lambda x: torch.nn.functional.hardtanh(x, inplace=True),
    lambda: (r(4),),
)
case("leaky_relu_inplace_input", lambda x: torch.nn.functional.leaky_relu_(x, 0.2), lambda: (r(4),))
case("elu_inplace_input", lambda x: torch.nn.functional.elu(x, inplace=True), lambda: (r(4),))
case("threshold_inplace", lambda x: torch.nn.functional.threshold_(x, 0.1, 20.0), lambda: (r(4),))
case(
    "out_requires_grad_raises",
    lambda a, c: torch.add(a, 1, out=c),
    lambda: (r(3), torch.zeros(3).requires_grad_()),
)
case(
    "out_noncontig_resized",
    lambda a, c: torch.add(a, 1, out=c.t()),
    lambda: (r(3), torch.zeros(2, 3)),
)
case("out_arg_offset_view", lambda a, c: torch.mul(a, 2, out=c[1:]), lambda: (r(3), torch.zeros(4)))
case("out_same_as_other_arg_view", lambda a: torch.add(a[:2], a[2:], out=a[:2]), lambda: (r(4),))
case("return_dict_views", lambda x: [x[0], x, x * 2], lambda: (r(2, 3),), alias=False)
case(
    "nested_list_inputs_mutated",
    lambda xs: [x.add_(i) for i, x in enumerate(xs)],
    lambda: ([r(2), r(3, seed=1)],),
    alias=False,
)
case(
    "same_tensor_in_list_twice",
    lambda xs: xs[0].add_(1) + xs[1],
    lambda: let(r(3), lambda t: ([t, t],)),
    alias=False,
)
case(
    "mask_from_other_input_mutated_after",
    lambda x, m: (x.__setitem__(m, 0.0), m.fill_(False), x * 1)[2],
    lambda: (r(4), T([True, False, True, True])),
)
case("idx_input_mutated_before_use", lambda x, i: (i.add_(1), x[i])[1], lambda: (r(5), T([0, 2])))
case("idx_mutated_after_use", lambda x, i: (x[i], i.add_(1))[0], lambda: (r(5), T([0, 2])))
case(
    "inplace_on_result_of_mutating_view_fn",
    lambda x: x.unsqueeze(0).squeeze(0).transpose(0, 1).contiguous().add_(1),
    lambda: (r(2, 3),),
)
case("inplace_pow_self", lambda x: x.pow_(x), lambda: (r(3).abs(),))
case("inplace_mul_self_view_same", lambda x: x[1:].mul_(x[1:]), lambda: (r(4),))
case("lerp_inplace_self_weight", lambda x, y: x.lerp_(y, x), lambda: (r(3).abs(), r(3, seed=1)))
case(
    "addmm_inplace_input",
    lambda c, a, b: c.addmm_(a, b, beta=0.5),
    lambda: (r(2, 2), r(2, 3, seed=1), r(3, 2, seed=2)),
)
case(
    "baddbmm_inplace_view",
    lambda c, a, b: c[1:].baddbmm_(a, b),
    lambda: (r(3, 2, 2), r(2, 2, 3, seed=1), r(2, 3, 2, seed=2)),
)
case("clamp_inplace_int_input", lambda x: x.clamp_(-2, 2), lambda: (ri(6),))
case("round_inplace_decimals", lambda x: x.round_(decimals=1), lambda: (r(4),))
case("cumsum_inplace_view", lambda x: x[:, 1:].cumsum_(1), lambda: (r(3, 4),))
case("sort_values_into_input", lambda x: x.copy_(x.sort().values), lambda: (r(5),))
case("fill_diagonal_wrap", lambda x: x.fill_diagonal_(5.0, wrap=True), lambda: (r(7, 3),))
case("triu_inplace_view", lambda x: x[1:].triu_(), lambda: (r(4, 4),))
case(
    "index_fill_neg_dim_view",
    lambda x, i: x.t().index_fill_(-1, i, -2.0),
    lambda: (r(3, 4), T([0, 2])),
)
case(
    "masked_fill_broadcast_mask",
    lambda x, m: x.masked_fill_(m, 0.0),
    lambda: (r(3, 4), T([True, False, False, True])),
)
case(
    "masked_fill_mask_bigger_raises",
    lambda x, m: x.masked_fill_(m, 0.0),
    lambda: (r(4), r(3, 4) > 0),
)
case(
    "where_out_is_input",
    lambda c, x, y: torch.where(c, x, y, out=x),
    lambda: (T([True, False, True]), r(3), r(3, seed=1)),
)
case(
    "set_item_int_tensor_0d_negative",
    lambda x, i: x.__setitem__(i, 0.0) or x,
    lambda: (r(4), T(-1)),
)
case("setitem_bool_0d_true", lambda x: x.__setitem__(T(True), 0.0) or x, lambda: (r(3),))
case("setitem_bool_0d_false", lambda x: x.__setitem__(T(False), 0.0) or x, lambda: (r(3),))
case("setitem_python_bool", lambda x: x.__setitem__(True, 0.0) or x, lambda: (r(3),))
case("getitem_bool_0d_then_mutate", lambda x: x[T(True)].add_(1), lambda: (r(3),))
case("getitem_none_view_mutate", lambda x: x[None].add_(1), lambda: (r(3),))
case("getitem_ellipsis_view_mutate", lambda x: x[..., 1].add_(1), lambda: (r(2, 3),))
case("index_select_is_copy", lambda x, i: x.index_select(0, i).add_(1), lambda: (r(3), T([0, 1])))
case("adv_index_is_copy_mutate", lambda x, i: x[i].add_(1), lambda: (r(3), T([0, 1])))
case("mask_index_is_copy_mutate", lambda x: x[x > 0].add_(1), lambda: (r(5),))


@scenario
def sc_saved_input_mutated_after_forward(C, rec):
    def f(w, x):
        return (w * x).sum()

    w, x = r(3).requires_grad_(), r(3, seed=1)
    out = C(f)(w, x)
    x.add_(100)
    out.backward()  # eager: x was saved by mul and modified: raises
    rec("outs", [w.grad])


@scenario
def sc_saved_input_mutated_in_graph(C, rec):
    def f(w, x):
        y = (w * x).sum()
        x.add_(1)
        return y

    w, x = r(3).requires_grad_(), r(3, seed=1)
    out = C(f)(w, x)
    out.backward()
    rec("outs", [w.grad, x])


@scenario
def sc_saved_param_mutated_after_forward(C, rec):
    lin = nn.Linear(3, 2)
    x = r(4, 3, seed=1).requires_grad_()
    out = C(lin)(x)
    with torch.no_grad():
        lin.weight.mul_(2)
    out.sum().backward()  # eager: weight saved for x's grad and modified: raises
    rec("outs", [x.grad])


@scenario
def sc_output_mutated_before_backward(C, rec):
    def f(w):
        return w.exp()

    w = r(3).requires_grad_()
    y = C(f)(w)
    y.mul_(2)  # eager: exp saved its output: backward raises
    y.sum().backward()
    rec("outs", [w.grad])


@scenario
def sc_output_view_of_input_mutated_before_backward(C, rec):
    def f(w, x):
        return w * x, x[1:]

    w, x = r(3).requires_grad_(), r(3, seed=1)
    y, v = C(f)(w, x)
    v.zero_()  # writes into x, which mul saved
    y.sum().backward()
    rec("outs", [w.grad, x])


@scenario
def sc_grad_of_mutated_leaf_view_input(C, rec):
    def f(x, y):
        x.mul_(y)
        return x.sum()

    base = r(4).requires_grad_()
    y = r(2, seed=1).requires_grad_()
    v = base[1:3] * 1
    out = C(f)(v, y)
    out.backward()
    rec("outs", [out.detach(), base.grad, y.grad])


@scenario
def sc_p_grad_mutation(C, rec):
    lin = nn.Linear(3, 2)
    lin(r(4, 3)).sum().backward()

    def f():
        for p in lin.parameters():
            p.grad.mul_(0.5)
            p.grad[0] = 1
        return lin.weight.grad.sum()

    out = C(f)()
    rec("outs", [out, lin.weight.grad, lin.bias.grad])


@scenario
def sc_sgd_step_compiled(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    lin(r(4, 3)).sum().backward()

    @C
    def step():
        opt.step()

    step()
    step()
    rec("outs", [lin.weight.detach(), lin.bias.detach()])


@scenario
def sc_global_and_arg_same_tensor(C, rec):
    g = r(3)

    def f(x):
        g.mul_(2)
        return x + 1

    out = C(f)(g)
    rec("outs", [out, g])


@scenario
def sc_arg_is_view_of_global_mutated(C, rec):
    g = r(4)

    def f(x):
        g.add_(1)
        x.mul_(10)
        return g * 1

    out = C(f)(g[1:3])
    rec("outs", [out, g])


@scenario
def sc_buffer_and_input_same(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))

        def forward(self, x):
            self.b.add_(1)
            return x * 2

    m = M()
    out = C(m)(m.b)
    rec("outs", [out, m.b])


@scenario
def sc_graph_break_output_view_of_input_mutated_later(C, rec):
    def f(x):
        v = x.t()
        torch._dynamo.graph_break()
        x.add_(1)
        return v

    x = r(2, 3)
    out = C(f)(x)
    rec("outs", [out, x])
    obs.append(("alias", aliasing([out], [x])))


@scenario
def sc_graph_break_metadata_mutation(C, rec):
    def f(x):
        x.unsqueeze_(0)
        torch._dynamo.graph_break()
        x.add_(1)
        return x.shape

    x = r(2, 3)
    out = C(f)(x)
    rec("outs", [x, T(list(out))])


@scenario
def sc_graph_break_transpose_inplace_then_write(C, rec):
    def f(x):
        x.t_()
        print(end="")
        x[0] = 7
        return x

    x = r(2, 3)
    out = C(f)(x)
    rec("outs", [out, x, out is x])


@scenario
def sc_recompile_on_mutated_shape(C, rec):
    def f(x):
        x.resize_(x.numel() + 1)
        x[-1] = 3
        return x.sum()

    cf = C(f)
    x = torch.zeros(2)
    outs = [cf(x) for _ in range(3)]
    rec("outs", outs + [x])


@scenario
def sc_inplace_in_custom_autograd_fn(C, rec):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def f(x):
        return F.apply(x)

    x = r(3)
    out = C(f)(x)
    rec("outs", [out, x, out is x])


@scenario
def sc_module_param_replaced_data(C, rec):
    lin = nn.Linear(2, 2)

    def f(x):
        lin.weight.data = lin.weight.data * 0
        return lin(x)

    out = C(f)(r(1, 2))
    rec("outs", [out.detach(), lin.weight.detach()])


@scenario
def sc_running_stats_shared_bn(C, rec):
    bn = nn.BatchNorm1d(3)
    seq = nn.Sequential(bn, nn.ReLU(), bn)
    out = C(seq)(r(4, 3))
    rec("outs", [out.detach(), bn.running_mean, bn.running_var, bn.num_batches_tracked])


@scenario
def sc_inplace_mul_on_buffer_via_register_hook_free(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", torch.ones(4, dtype=torch.bool))

        def forward(self, x):
            self.mask &= x > 0
            return x.masked_fill(~self.mask, 0)

    m = M()
    cm = C(m)
    outs = [cm(r(4, seed=k)) for k in range(3)]
    rec("outs", outs + [m.mask])


# ============================================================================================
# round 3: autograd through views and writes (gradients compared)
def grad_case(name, f, make):
    """``f`` compiled on fresh inputs (those floating point require grad); observed: outputs,
    the inputs after the call, and the gradients of a weighted sum of the outputs."""

    def run(C, rec):
        args = make()
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        ins = [a.detach() if a.requires_grad else a for a in args if isinstance(a, torch.Tensor)]
        out = C(f)(*args)
        outs = _tensors(out)
        rec("out", [o.detach() for o in outs])
        rec("requires_grad", [o.requires_grad for o in outs])
        loss = sum(
            (o * torch.linspace(-1, 2, o.numel()).view(o.shape)).sum()
            for o in outs
            if o.requires_grad
        )
        if isinstance(loss, torch.Tensor):
            loss.backward()
        rec("grads", [a.grad if a.grad is not None else T(-999.0) for a in leaves])
        rec("inputs", ins)

    CASES[name] = run


def rg(*shape, seed=0):
    return r(*shape, seed=seed).requires_grad_()


def _g_setitem_intermediate(x):
    y = x * 2
    y[0] = 0
    return y


def _g_setitem_value_grad(x, v):
    y = x.clone()
    y[y > 0] = v
    return y


def _g_view_inplace_mul(x):
    h = x.exp()
    h[:, :2] *= 0.5
    return h


def _g_relu_inplace(x):
    h = x * 3
    torch.relu_(h)
    return h.sum(0)


def _g_two_views_written(x):
    y = x + 1
    a, b = y[0], y[:, 0]
    a.mul_(2)
    b.add_(a.sum())
    return y


def _g_index_put_acc(x, v):
    y = x * 1
    y.index_put_((T([0, 0, 2]),), v, accumulate=True)
    return y


def _g_index_put_dup(x, v):
    y = x * 1
    y[T([1, 1])] = v
    return y


def _g_mutate_input_not_requiring_grad(w, x):
    x.mul_(w)  # x does not require grad: eager makes it part of the graph
    return x


def _g_copy_into_buffer(w, buf):
    buf.copy_(w * 2)
    return buf * 3


def _g_view_of_output_returned(x):
    y = x.sigmoid()
    return y, y.t(), y[1]


def _g_diag_write(x):
    y = x.clone()
    y.diagonal().copy_(x.sum(1))
    return y


def _g_masked_fill_view(x):
    y = x.tanh()
    y[1:].masked_fill_(y[1:] > 0, 0.0)
    return y


def _g_scatter_inplace(x, v):
    y = x.clone()
    y.scatter_(1, T([[0], [2]]), v)
    return y


def _g_unbind_writes(x):
    y = x * 1
    for i, row in enumerate(y.unbind(0)):
        row.mul_(i + 1)
    return y


def _g_cat_out(x):
    out = torch.empty(0)
    torch.cat([x, x * 2], out=out)
    return out


def _g_inplace_on_expand_of_intermediate(x):
    y = x.sum(0, keepdim=True)
    z = y.expand(3, 2).clone()
    z[1] = 0
    return z


def _g_detach_inplace(x):
    y = x * 2
    y.detach().zero_()  # eager: writes y's memory, autograd does not see it
    return y


def _g_no_grad_write_into_requires_grad_intermediate(x):
    y = x * 2
    with torch.no_grad():
        y[0] = 100
    return y * x


def _g_data_write(x):
    y = x * 2
    y.data[1] = 7
    return y * x


grad_case("g_setitem_intermediate", _g_setitem_intermediate, lambda: (rg(3, 2),))
grad_case("g_setitem_value_grad", _g_setitem_value_grad, lambda: (rg(5), rg(1, seed=1)))
grad_case("g_view_inplace_mul", _g_view_inplace_mul, lambda: (rg(3, 4),))
grad_case("g_relu_inplace", _g_relu_inplace, lambda: (rg(3, 4),))
grad_case("g_two_views_written", _g_two_views_written, lambda: (rg(3, 3),))
grad_case("g_index_put_acc", _g_index_put_acc, lambda: (rg(3, 2), rg(3, 2, seed=1)))
grad_case("g_index_put_dup", _g_index_put_dup, lambda: (rg(3, 2), rg(2, 2, seed=1)))
grad_case(
    "g_mutate_input_not_requiring_grad",
    _g_mutate_input_not_requiring_grad,
    lambda: (rg(3), r(3, seed=1)),
)
grad_case("g_copy_into_buffer", _g_copy_into_buffer, lambda: (rg(3), torch.zeros(3)))
grad_case("g_view_of_output_returned", _g_view_of_output_returned, lambda: (rg(3, 2),))
grad_case("g_diag_write", _g_diag_write, lambda: (rg(3, 3),))
grad_case("g_masked_fill_view", _g_masked_fill_view, lambda: (rg(3, 2),))
grad_case("g_scatter_inplace", _g_scatter_inplace, lambda: (rg(2, 3), rg(2, 1, seed=1)))
grad_case("g_unbind_writes", _g_unbind_writes, lambda: (rg(3, 2),))
grad_case("g_cat_out", _g_cat_out, lambda: (rg(3),))
grad_case(
    "g_inplace_on_expand_of_intermediate", _g_inplace_on_expand_of_intermediate, lambda: (rg(2, 2),)
)
grad_case("g_detach_inplace", _g_detach_inplace, lambda: (rg(3),))
grad_case(
    "g_no_grad_write_into_requires_grad_intermediate",
    _g_no_grad_write_into_requires_grad_intermediate,
    lambda: (rg(3),),
)
grad_case("g_data_write", _g_data_write, lambda: (rg(3),))
grad_case("g_input_view_returned", lambda x: (x[1:], x.t()), lambda: (rg(3, 2),))
grad_case("g_input_returned_itself", lambda x: (x, x * 2), lambda: (rg(3),))


@scenario
def sc_g_output_view_of_leaf_mutated_after_raises(C, rec):
    def f(x):
        return x[1:]

    x = rg(3)
    v = C(f)(x)
    v.mul_(2)  # eager: a view of a leaf that requires grad used in an in-place op: raises


@scenario
def sc_g_output_mutated_after_then_backward(C, rec):
    def f(x):
        return x * 2, (x * 3)[1:]

    x = rg(3)
    a, b = C(f)(x)
    a.mul_(a)  # a's grad_fn is rebased: d(a^2)
    b.add_(1)
    (a.sum() + b.sum() * 2).backward()
    rec("outs", [a.detach(), b.detach(), x.grad])


@scenario
def sc_g_intermediate_views_mutated_after_then_backward(C, rec):
    def f(x):
        y = x.exp()
        return y[:2], y[1:]

    x = rg(3)
    a, b = C(f)(x)
    a.mul_(10)  # eager: y[1] changes, so b[0] too, and b's grad_fn is rebased onto a's write
    (b * torch.arange(2.0)).sum().backward()
    rec("outs", [a.detach(), b.detach(), x.grad])


@scenario
def sc_g_grad_accumulation_buffer(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.register_buffer("acc", torch.zeros(2))

        def forward(self, x):
            y = self.lin(x)
            self.acc += y.detach().sum(0)
            return y

    torch.manual_seed(0)
    m = M()
    cm = C(m)
    for k in range(2):
        cm(r(4, 3, seed=k)).sum().backward()
    rec("outs", [m.acc, m.lin.weight.grad, m.lin.bias.grad])


@scenario
def sc_g_inplace_param_update_between_calls(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 1)
    cl = C(lin)
    outs = []
    for k in range(3):
        out = cl(r(2, 3, seed=k)).sum()
        out.backward()
        with torch.no_grad():
            for p in lin.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        outs.append(out.detach())
    rec("outs", outs + [lin.weight.detach(), lin.bias.detach()])


# ============================================================================================
# round 4: dtype views of one memory, autocast writes, masks on views, repeated signatures
case(
    "dtype_two_views_one_written",
    lambda a, b: (a.add_(1), b * 1),
    lambda: let(r(4), lambda t: (t, t.view(torch.int32))),
)
case(
    "dtype_view_written_read_float",
    lambda a, b: (b.bitwise_xor_(1), a * 1),
    lambda: let(r(4), lambda t: (t, t.view(torch.int32))),
)
case(
    "bool_mask_acc_on_view",
    lambda t, m, v: t[1:].index_put_((m,), v, accumulate=True),
    lambda: (r(4), T([True, False, True]), T(2.0)),
)
case(
    "mask_setitem_on_transposed_input",
    lambda t, m: t.__setitem__(m, 0.0) or t,
    lambda: (r(4, 3).t(), r(3, 4, seed=1) > 0),
)
case(
    "mask_setitem_on_channels_last",
    lambda t: t.__setitem__(t > 0, 0.0) or t,
    lambda: (r(2, 3, 2, 2).to(memory_format=torch.channels_last),),
)
case(
    "index_add_channels_last",
    lambda t, v: t.index_add_(1, T([0, 2]), v),
    lambda: (r(2, 3, 2, 2).to(memory_format=torch.channels_last), r(2, 2, 2, 2, seed=1)),
)
case(
    "inplace_channels_last_returns_layout",
    lambda t: t.mul_(2),
    lambda: (r(2, 3, 2, 2).to(memory_format=torch.channels_last),),
)
case(
    "out_channels_last",
    lambda a, o: torch.mul(a, 2, out=o),
    lambda: (r(2, 3, 2, 2), torch.zeros(2, 3, 2, 2).to(memory_format=torch.channels_last)),
)
case(
    "copy_into_channels_last_from_contig",
    lambda o, a: o.copy_(a),
    lambda: (torch.zeros(2, 3, 2, 2).to(memory_format=torch.channels_last), r(2, 3, 2, 2)),
)
case(
    "add_out_transposed_target",
    lambda a, b, o: torch.add(a, b, out=o),
    lambda: (r(3, 4), r(3, 4, seed=1), torch.zeros(4, 3).t()),
)
case(
    "mm_out_into_view",
    lambda a, b, o: torch.mm(a, b, out=o[1:]),
    lambda: (r(2, 3), r(3, 2, seed=1), torch.zeros(3, 2)),
)


def _autocast_write(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        x.add_(y)
        return y, x * 1


case("autocast_inplace_float_input", _autocast_write, lambda: (r(2, 2), r(2, 2, seed=1)))


def _autocast_setitem(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x[0] = (x @ w)[0]
    return x


case("autocast_setitem_bf16_into_f32", _autocast_setitem, lambda: (r(2, 2), r(2, 2, seed=1)))


@scenario
def sc_output_view_passed_back_and_written(C, rec):
    def view(x):
        return x[1:]

    def write(a, b):
        a.add_(1)
        b.mul_(2)
        return a.sum() + b.sum()

    x = r(4)
    v = C(view)(x)
    out = C(write)(x, v)
    rec("outs", [out, x, v])


@scenario
def sc_dynamic_views_of_inputs_written_after(C, rec):
    def f(x):
        x[0] += 1
        return x[1:], x.t()

    cf = torch.compile(f, backend=BACKEND, dynamic=True) if C(f) is not f else f
    outs = []
    for n in (2, 3, 5):
        x = r(n, 2, seed=n)
        a, b = cf(x)
        a.mul_(10)
        outs += [a, b, x]
    rec("outs", outs)


@scenario
def sc_dynamic_shared_intermediate_views(C, rec):
    def f(x):
        y = x * 2
        return y[:-1], y[1:]

    cf = torch.compile(f, backend=BACKEND, dynamic=True) if C(f) is not f else f
    outs = []
    for n in (3, 4, 6):
        a, b = cf(r(n, seed=n))
        a.add_(100)
        outs += [a, b]
    rec("outs", outs)


@scenario
def sc_cache_hits_alias_views(C, rec):
    def f(x):
        return x.view(2, -1), x[0]

    cf = C(f)
    outs = []
    for k in range(3):
        x = r(4, seed=k)
        a, b = cf(x)
        b.fill_(k)
        outs += [a, x]
    rec("outs", outs)


@scenario
def sc_module_returns_buffer_and_view(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(2, 3))

        def forward(self, x):
            self.b.add_(x)
            return self.b, self.b[1], x * 1

    m = M()
    cm = C(m)
    a, b, c = cm(r(3))
    b.fill_(-1)
    rec("outs", [a, b, c, m.b, T(a is m.b)])


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
