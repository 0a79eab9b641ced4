"""Probe forward semantics for silent wrong answers and missing errors: small user-style
functions run once in eager PyTorch and once through ``torch.compile(backend="xla")``, every
observation compared strictly (values bit-for-bit for integers/bools and within a tight tolerance
for floats, nan positions, signs of zeros, dtype, shape, strides of outputs, inputs after the
call (mutations), errors raised by type).

    PYTHONPATH=. python scripts/probe_semantics.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_semantics.py   # torch's own differences

``case(name, f, make)``: ``make()`` builds fresh inputs; observed are ``f``'s outputs and every
input tensor after the call. ``scenario`` functions take ``(C, rec)`` as in probe_autograd.py for
cases with modules or globals. Prints ``ok`` / ``DIFF`` / ``CRASH`` per case.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def case(name, f, make):
    def run(C, rec):
        args = make()
        try:
            out = C(f)(*args)
        finally:
            rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        rec("out", out)

    CASES[name] = run


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.stride(), v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape", "stride"), a[1:4], b[1:4]):
            if x != y and not (n == "stride" and 0 in a[2]):
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[4], b[4]
        if x.is_floating_point() or x.is_complex():
            if x.is_floating_point() and not torch.equal(
                torch.signbit(x) & (x == 0), torch.signbit(y) & (y == 0)
            ):
                return f"{path}: signs of zeros differ\n{x}\n{y}"
            tol = {"rtol": 1e-5, "atol": 1e-6}
            if x.dtype in (torch.bfloat16, torch.float16):
                tol = {"rtol": 1e-3, "atol": 1e-3}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def observe(fn, compiled):
    def C(f):
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    d = difference(observe(fn, True), exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


def aliased(views, t):
    """Inputs that are views of one tensor ``t``."""
    return lambda: views(t.clone())


# ============================================================================================
# mutation through views of inputs
case("view_row_add_", lambda x: x[0].add_(1), lambda: (r(3, 4),))
case("view_t_mul_", lambda x: x.t().mul_(2), lambda: (r(3, 4),))
case("view_diag_zero_", lambda x: x.diagonal().zero_(), lambda: (r(4, 4),))
case(
    "view_unsqueeze_copy_",
    lambda x, y: x.unsqueeze(0).copy_(y),
    lambda: (r(3, 4), r(1, 3, 4, seed=1)),
)
case("view_step_slice_fill_", lambda x: x[::2, 1::2].fill_(7), lambda: (r(5, 6),))
case("view_chain_mutate_return_base", lambda x: (x.view(2, 6)[1].mul_(3), x), lambda: (r(3, 4),))
case("view_mutate_then_read", lambda x: (x[1].add_(1), x.sum()), lambda: (r(3, 4),))
case("view_of_view_transpose", lambda x: x.transpose(0, 1)[1:].sub_(1), lambda: (r(3, 4),))
case(
    "view_expand_read_after_mutate",
    lambda x: (x.mul_(2), x.expand(2, 3, 4) + 1),
    lambda: (r(3, 4),),
)
case(
    "view_unfold_mutate",
    lambda x: x.unfold(0, 2, 2).add_(1),
    lambda: (
        r(
            6,
        ),
    ),
)
case(
    "view_real_of_complex",
    lambda x: torch.view_as_real(x).mul_(2),
    lambda: (torch.randn(3, dtype=torch.complex64),),
)
case("view_select_neg", lambda x: x.select(1, -1).copy_(torch.arange(3.0)), lambda: (r(3, 4),))
case("view_noncontig_input_mutate", lambda x: x.add_(1), lambda: (r(4, 3).t(),))
case("view_input_is_view_mutate", lambda x: x.mul_(2), lambda: (r(4, 3)[1:],))
case("view_as_strided_mutate", lambda x: x.as_strided((2, 2), (1, 2)).add_(1), lambda: (r(6),))
# aliased inputs
case("alias_same_tensor", lambda a, b: (a.add_(b), b * 1), aliased(lambda t: (t, t), r(3)))
case("alias_overlap_slice", lambda a, b: a[:-1].add_(b), aliased(lambda t: (t, t[1:]), r(5)))
case("alias_view_and_base", lambda a, b: (b.mul_(2), a + 0), aliased(lambda t: (t, t[1]), r(3, 2)))
case("alias_copy_from_alias", lambda a, b: a.copy_(b), aliased(lambda t: (t[:3], t[2:]), r(5)))
case(
    "alias_two_views_mutate_both",
    lambda a, b: (a.add_(1), b.add_(10)),
    aliased(lambda t: (t[0], t[:, 0]), r(3, 3)),
)
# out= variants
case("out_add", lambda x, o: torch.add(x, 1, out=o), lambda: (r(3), torch.empty(3)))
case("out_resize", lambda x, o: (torch.mul(x, 2, out=o), o.shape), lambda: (r(3), torch.empty(0)))
case(
    "out_sum_dtype",
    lambda x, o: torch.sum(x, 0, out=o),
    lambda: (r(3, 2), torch.empty(2, dtype=torch.float64)),
)
case(
    "out_int_from_float_raise",
    lambda x, o: torch.add(x, 1, out=o),
    lambda: (r(3), torch.zeros(3, dtype=torch.int64)),
)
case("out_noncontig", lambda x, o: torch.neg(x, out=o), lambda: (r(3, 2), torch.empty(2, 3).t()))
case("out_view_of_input", lambda x: torch.exp(x[1], out=x[0]), lambda: (r(2, 3),))
case(
    "out_max_dim",
    lambda x, v, i: torch.max(x, 1, out=(v, i)),
    lambda: (r(3, 4), torch.empty(3), torch.empty(3, dtype=torch.long)),
)
case("out_cat", lambda x, o: torch.cat([x, x], out=o), lambda: (r(2), torch.empty(4)))
case("out_matmul", lambda x, o: torch.matmul(x, x, out=o), lambda: (r(3, 3), torch.empty(3, 3)))
# setitem
case("set_bool_mask_scalar", lambda x: x.__setitem__(x > 0, 0.5), lambda: (r(3, 4),))
case(
    "set_bool_mask_tensor",
    lambda x, v: x.__setitem__(x > 0, v),
    lambda: (torch.tensor([1.0, -1, 2, -2]), torch.tensor([9.0, 8])),
)
case("set_int_tensor", lambda x: x.__setitem__(torch.tensor([0, 2, -1]), 5.0), lambda: (r(5, 2),))
case(
    "set_int_tensor_dup",
    lambda x: x.__setitem__(torch.tensor([1, 1, 1]), torch.tensor([1.0, 2, 3])),
    lambda: (torch.zeros(3),),
)
case(
    "set_step_slice",
    lambda x: x.__setitem__((slice(None, None, 2), slice(1, None, 3)), -1.0),
    lambda: (r(5, 7),),
)
case("set_negative_index", lambda x: x.__setitem__((-1, -2), 3.0), lambda: (r(3, 4),))
case(
    "set_none_ellipsis",
    lambda x, v: x.__setitem__((None, ..., 1), v),
    lambda: (r(2, 3, 4), torch.arange(6.0).view(1, 2, 3)),
)
case(
    "set_broadcast_row",
    lambda x, v: x.__setitem__(slice(1, 3), v),
    lambda: (r(4, 3), torch.tensor([1.0, 2, 3])),
)
case(
    "set_other_dtype_value",
    lambda x, v: x.__setitem__(0, v),
    lambda: (torch.zeros(2, 3, dtype=torch.int32), torch.tensor([1.7, -2.7, 3.5])),
)
case(
    "set_float_to_int_tensor_scalar",
    lambda x: x.__setitem__(1, 2.9),
    lambda: (torch.zeros(3, dtype=torch.int64),),
)
case(
    "set_bool_tensor_val",
    lambda x: x.__setitem__(0, 5),
    lambda: (torch.zeros(3, dtype=torch.bool),),
)
case("set_uint8_neg", lambda x: x.__setitem__(0, -1), lambda: (torch.zeros(3, dtype=torch.uint8),))
case(
    "set_2d_index_tensors",
    lambda x: x.__setitem__((torch.tensor([0, 1]), torch.tensor([2, 0])), torch.tensor([7.0, 8])),
    lambda: (r(3, 3),),
)
case(
    "set_index_then_slice",
    lambda x: x.__setitem__((torch.tensor([0, 2]), slice(1, None)), 0.0),
    lambda: (r(3, 3),),
)
case(
    "set_slice_then_index",
    lambda x: x.__setitem__((slice(None), torch.tensor([2, 0])), torch.tensor([[1.0], [2], [3]])),
    lambda: (r(3, 3),),
)
case(
    "set_separated_indices",
    lambda x: x.__setitem__((torch.tensor([0, 1]), slice(None), torch.tensor([1, 0])), 9.0),
    lambda: (r(2, 3, 2),),
)
case("set_index_out_of_range", lambda x: x.__setitem__(torch.tensor([3]), 1.0), lambda: (r(3),))
case("set_int_out_of_range", lambda x: x.__setitem__(5, 1.0), lambda: (r(3),))
case("set_shape_mismatch", lambda x: x.__setitem__(slice(0, 2), torch.ones(3)), lambda: (r(3, 2),))
case(
    "set_bool_mask_2d_on_3d",
    lambda x: x.__setitem__(
        torch.tensor([[True, False], [False, True]]), torch.tensor([1.0, 2, 3])
    ),
    lambda: (r(2, 2, 3),),
)
case("set_bool_python_scalar_index", lambda x: x.__setitem__(True, 0.0), lambda: (r(3),))
case("set_zero_dim_tensor_index", lambda x: x.__setitem__(torch.tensor(1), 0.0), lambda: (r(3, 2),))
case("set_list_index", lambda x: x.__setitem__([0, 2], 1.0), lambda: (r(3, 2),))
case(
    "set_uint8_mask",
    lambda x: x.__setitem__(torch.tensor([1, 0, 1], dtype=torch.uint8), 0.0),
    lambda: (r(3),),
)
# index_put_ / scatter
case(
    "index_put_acc_dup",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (torch.zeros(4), torch.tensor([1, 1, 3, 1]), torch.tensor([1.0, 2, 3, 4])),
)
case(
    "index_put_acc_int_dup",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (
        torch.zeros(4, dtype=torch.int32),
        torch.tensor([1, 1, -1]),
        torch.tensor([1, 2, 3], dtype=torch.int32),
    ),
)
case(
    "index_put_acc_bool",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (torch.zeros(3, dtype=torch.bool), torch.tensor([1, 1]), torch.tensor([True, True])),
)
case(
    "index_put_acc_2d_idx",
    lambda x, i, j, v: x.index_put_((i, j), v, accumulate=True),
    lambda: (
        torch.zeros(3, 3),
        torch.tensor([0, 0, 2]),
        torch.tensor([1, 1, 2]),
        torch.tensor(1.5),
    ),
)
case(
    "index_put_noacc_dup_last",
    lambda x, i, v: x.index_put_((i,), v),
    lambda: (torch.zeros(4), torch.tensor([2, 2, 2, 2, 2]), torch.arange(5.0)),
)
case(
    "index_put_acc_neg_idx",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (torch.zeros(4), torch.tensor([-1, 3, -4]), torch.tensor([1.0, 2, 3])),
)
case(
    "index_put_acc_oob",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (torch.zeros(4), torch.tensor([4]), torch.tensor([1.0])),
)
case(
    "index_put_value_dtype_mismatch",
    lambda x, i, v: x.index_put_((i,), v),
    lambda: (torch.zeros(4), torch.tensor([1]), torch.tensor([1.0], dtype=torch.float64)),
)
case(
    "scatter_",
    lambda x, i, s: x.scatter_(1, i, s),
    lambda: (torch.zeros(2, 4), torch.tensor([[0, 1], [3, 3]]), torch.tensor([[1.0, 2], [3, 4]])),
)
case(
    "scatter_value",
    lambda x, i: x.scatter_(0, i, 2.5),
    lambda: (torch.zeros(3), torch.tensor([2, 0])),
)
case(
    "scatter_value_int_self",
    lambda x, i: x.scatter_(0, i, 2.5),
    lambda: (torch.zeros(3, dtype=torch.int64), torch.tensor([2, 0])),
)
case(
    "scatter_add_dup",
    lambda x, i, s: x.scatter_add_(0, i, s),
    lambda: (torch.ones(3), torch.tensor([0, 0, 2, 0]), torch.tensor([1.0, 2, 3, 4])),
)
case(
    "scatter_reduce_sum_noself",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "sum", include_self=False),
    lambda: (torch.full((4,), 10.0), torch.tensor([0, 0, 2]), torch.tensor([1.0, 2, 3])),
)
case(
    "scatter_reduce_prod_noself",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "prod", include_self=False),
    lambda: (torch.full((4,), 10.0), torch.tensor([0, 0, 2]), torch.tensor([1.0, 2, 3])),
)
case(
    "scatter_reduce_mean_self",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "mean"),
    lambda: (torch.full((4,), 10.0), torch.tensor([0, 0, 2]), torch.tensor([1.0, 2, 3])),
)
case(
    "scatter_reduce_mean_noself",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "mean", include_self=False),
    lambda: (torch.full((4,), 10.0), torch.tensor([0, 0, 2]), torch.tensor([1.0, 2, 3])),
)
case(
    "scatter_reduce_mean_int",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "mean", include_self=True),
    lambda: (torch.full((4,), 10), torch.tensor([0, 0, 2]), torch.tensor([1, 2, -3])),
)
case(
    "scatter_reduce_mean_int_noself",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "mean", include_self=False),
    lambda: (torch.full((4,), 10), torch.tensor([0, 0, 2]), torch.tensor([1, 2, -3])),
)
case(
    "scatter_reduce_amax_noself",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "amax", include_self=False),
    lambda: (torch.full((4,), 10.0), torch.tensor([0, 0, 2]), torch.tensor([1.0, 2, 3])),
)
case(
    "scatter_reduce_amin_nan",
    lambda x, i, s: x.scatter_reduce_(0, i, s, "amin"),
    lambda: (
        torch.tensor([1.0, float("nan"), 3]),
        torch.tensor([0, 0, 1]),
        torch.tensor([float("nan"), 2, 3]),
    ),
)
case(
    "scatter_reduce_2d",
    lambda x, i, s: x.scatter_reduce(1, i, s, "amax", include_self=False),
    lambda: (torch.zeros(2, 3), torch.tensor([[0, 0], [2, 1]]), torch.tensor([[-1.0, -2], [3, 4]])),
)
case(
    "scatter_idx_smaller_than_src",
    lambda x, i, s: x.scatter(0, i, s),
    lambda: (torch.zeros(2, 3), torch.tensor([[1, 0]]), r(3, 4)),
)
case(
    "scatter_reduce_add_str",
    lambda x, i, s: x.scatter_(0, i, s, reduce="add"),
    lambda: (torch.ones(3), torch.tensor([0, 0]), torch.tensor([1.0, 2])),
)
case(
    "scatter_reduce_multiply_str",
    lambda x, i: x.scatter_(0, i, 3.0, reduce="multiply"),
    lambda: (torch.ones(3) * 2, torch.tensor([0, 0])),
)
case(
    "masked_fill_",
    lambda x, m: x.masked_fill_(m, -1),
    lambda: (r(3, 4), torch.tensor([True, False, True, False])),
)
case(
    "masked_fill_tensor_val",
    lambda x, m: x.masked_fill_(m, torch.tensor(2.5)),
    lambda: (torch.zeros(3, dtype=torch.int64), torch.tensor([True, False, True])),
)
case(
    "masked_fill_float_on_int",
    lambda x, m: x.masked_fill(m, 2.7),
    lambda: (torch.zeros(3, dtype=torch.int64), torch.tensor([True, False, True])),
)
case(
    "masked_fill_mask_broadcast_self",
    lambda x, m: x.masked_fill_(m, 1.0),
    lambda: (torch.zeros(3), torch.ones(2, 3, dtype=torch.bool)),
)
case(
    "masked_fill_nonbool_mask",
    lambda x, m: x.masked_fill(m, 1.0),
    lambda: (torch.zeros(3), torch.tensor([1, 0, 1])),
)
case(
    "masked_fill_0d_val_nonzero_dim",
    lambda x, m: x.masked_fill(m, torch.tensor([2.0])),
    lambda: (torch.zeros(3), torch.tensor([True, False, True])),
)
case(
    "masked_scatter_",
    lambda x, m, s: x.masked_scatter_(m, s),
    lambda: (
        torch.zeros(2, 3),
        torch.tensor([[True, False, True], [False, True, True]]),
        torch.arange(6.0).view(2, 3),
    ),
)
case(
    "masked_scatter_bcast_mask",
    lambda x, m, s: x.masked_scatter_(m, s),
    lambda: (torch.zeros(2, 3), torch.tensor([True, False, True]), torch.arange(6.0)),
)
case(
    "masked_scatter_too_few",
    lambda x, m, s: x.masked_scatter_(m, s),
    lambda: (torch.zeros(4), torch.tensor([True, True, True, False]), torch.arange(2.0)),
)
case(
    "index_fill_",
    lambda x, i: x.index_fill_(1, i, -2.0),
    lambda: (r(3, 4), torch.tensor([0, 3, 0])),
)
case(
    "index_copy_dup",
    lambda x, i, s: x.index_copy_(0, i, s),
    lambda: (torch.zeros(3), torch.tensor([1, 1]), torch.tensor([5.0, 6])),
)
case(
    "index_add_alpha",
    lambda x, i, s: x.index_add_(0, i, s, alpha=2),
    lambda: (torch.zeros(3), torch.tensor([1, 1, 0]), torch.tensor([5.0, 6, 7])),
)
case(
    "index_add_int_alpha",
    lambda x, i, s: x.index_add(0, i, s, alpha=3),
    lambda: (torch.zeros(3, dtype=torch.int64), torch.tensor([1, 1, 0]), torch.tensor([5, 6, 7])),
)
case(
    "index_reduce_prod",
    lambda x, i, s: x.index_reduce_(0, i, s, "prod", include_self=False),
    lambda: (torch.full((3,), 2.0), torch.tensor([1, 1, 0]), torch.tensor([5.0, 6, 7])),
)
case(
    "index_reduce_mean_int",
    lambda x, i, s: x.index_reduce_(0, i, s, "mean"),
    lambda: (torch.full((3,), 2), torch.tensor([1, 1, 0]), torch.tensor([5, 6, -7])),
)
case(
    "put_",
    lambda x, i, s: x.put_(i, s),
    lambda: (torch.zeros(2, 3), torch.tensor([5, 0, -1]), torch.tensor([1.0, 2, 3])),
)
case(
    "put_acc",
    lambda x, i, s: x.put_(i, s, accumulate=True),
    lambda: (torch.zeros(2, 3), torch.tensor([5, 5, -1]), torch.tensor([1.0, 2, 3])),
)
case(
    "put_oob",
    lambda x, i, s: x.put_(i, s),
    lambda: (torch.zeros(2, 3), torch.tensor([6]), torch.tensor([1.0])),
)

# accumulating writes into bool and narrow integer tensors
B = lambda: torch.tensor([False, True, False, False])
I2 = lambda: torch.tensor([1, 1, 3])
BV = lambda: torch.tensor([True, True, False])
case(
    "bool_index_put_acc",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (B(), I2(), BV()),
)
case(
    "bool_index_put_acc_scalar",
    lambda x, i: x.index_put((i,), torch.tensor(True), accumulate=True),
    lambda: (B(), I2()),
)
case("bool_index_add", lambda x, i, v: x.index_add(0, i, v), lambda: (B(), I2(), BV()))
case(
    "bool_index_add_alpha",
    lambda x, i, v: x.index_add(0, i, v, alpha=True),
    lambda: (B(), I2(), BV()),
)
case("bool_scatter_add", lambda x, i, v: x.scatter_add(0, i, v), lambda: (B(), I2(), BV()))
case(
    "bool_scatter_reduce_sum",
    lambda x, i, v: x.scatter_reduce(0, i, v, "sum"),
    lambda: (B(), I2(), BV()),
)
case(
    "bool_scatter_reduce_prod",
    lambda x, i, v: x.scatter_reduce(0, i, v, "prod"),
    lambda: (~B(), I2(), BV()),
)
case(
    "bool_scatter_reduce_amax",
    lambda x, i, v: x.scatter_reduce(0, i, v, "amax", include_self=False),
    lambda: (B(), I2(), BV()),
)
case("bool_put_acc", lambda x, i, v: x.put_(i, v, accumulate=True), lambda: (B(), I2(), BV()))
case(
    "bool_index_reduce_prod",
    lambda x, i, v: x.index_reduce(0, i, v, "prod"),
    lambda: (~B(), I2(), BV()),
)
case(
    "bool_scatter_add_str",
    lambda x, i, v: x.scatter(0, i, v, reduce="add"),
    lambda: (B(), I2(), BV()),
)
case("bool_add_", lambda x, v: x.add_(v), lambda: (B(), torch.tensor([True, True, False, True])))
case("bool_mul_", lambda x, v: x.mul_(v), lambda: (B(), torch.tensor([True, True, False, True])))
case(
    "bool_cumsum",
    lambda x: (x.cumsum(0), x.cumsum(0, dtype=torch.bool), x.cumprod(0)),
    lambda: (torch.tensor([True, True, False, True]),),
)
case(
    "bool_sum_dtype_bool",
    lambda x: (x.sum(dtype=torch.bool), x.prod(dtype=torch.bool)),
    lambda: (torch.tensor([True, True, False, True]),),
)
case(
    "bool_index_put_acc_mask",
    lambda x, m, v: x.index_put_((m,), v, accumulate=True),
    lambda: (B(), torch.tensor([True, True, False, False]), torch.tensor(True)),
)
case("bool_bincount_weights", lambda x, w: torch.bincount(x, w), lambda: (I2(), BV()))
case("bool_histc", lambda x: torch.histc(x.float(), 3), lambda: (B(),))
case(
    "uint8_index_put_acc",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (
        torch.tensor([250, 0, 0, 0], dtype=torch.uint8),
        torch.tensor([0, 0, 1]),
        torch.tensor([5, 5, 7], dtype=torch.uint8),
    ),
)
case(
    "int8_scatter_add_wrap",
    lambda x, i, v: x.scatter_add(0, i, v),
    lambda: (
        torch.tensor([120, 0], dtype=torch.int8),
        torch.tensor([0, 0]),
        torch.tensor([5, 5], dtype=torch.int8),
    ),
)
case(
    "int8_index_add_alpha",
    lambda x, i, v: x.index_add(0, i, v, alpha=100),
    lambda: (
        torch.tensor([0, 0], dtype=torch.int8),
        torch.tensor([0, 0]),
        torch.tensor([1, 2], dtype=torch.int8),
    ),
)
case(
    "f16_index_add_many",
    lambda x, i, v: x.index_add(0, i, v),
    lambda: (
        torch.zeros(2, dtype=torch.float16),
        torch.zeros(3000, dtype=torch.long),
        torch.full((3000,), 0.1, dtype=torch.float16),
    ),
)
case(
    "bf16_scatter_add_many",
    lambda x, i, v: x.scatter_add(0, i, v),
    lambda: (
        torch.zeros(2, dtype=torch.bfloat16),
        torch.zeros(500, dtype=torch.long),
        torch.full((500,), 1.0, dtype=torch.bfloat16),
    ),
)
case(
    "f16_index_put_acc_many",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (
        torch.zeros(2, dtype=torch.float16),
        torch.zeros(3000, dtype=torch.long),
        torch.full((3000,), 0.1, dtype=torch.float16),
    ),
)
case(
    "bf16_embedding_bag_sum",
    lambda w, i: torch.nn.functional.embedding_bag(i, w, torch.tensor([0]), mode="sum"),
    lambda: (torch.full((3, 2), 1.0, dtype=torch.bfloat16), torch.zeros(600, dtype=torch.long)),
)

# ============================================================================================
# error parity
case(
    "err_gather_oob",
    lambda x, i: torch.gather(x, 1, i),
    lambda: (r(2, 3), torch.tensor([[0, 3], [1, 1]])),
)
case(
    "err_gather_neg",
    lambda x, i: torch.gather(x, 1, i),
    lambda: (r(2, 3), torch.tensor([[0, -1], [1, 1]])),
)
case(
    "err_scatter_oob", lambda x, i: x.scatter(1, i, 1.0), lambda: (r(2, 3), torch.tensor([[0, 3]]))
)
case(
    "err_scatter_add_neg",
    lambda x, i, s: x.scatter_add(0, i, s),
    lambda: (r(3), torch.tensor([-1]), torch.tensor([1.0])),
)
case(
    "err_index_select_oob",
    lambda x, i: x.index_select(0, i),
    lambda: (r(3, 2), torch.tensor([0, 3])),
)
case(
    "err_index_select_neg",
    lambda x, i: x.index_select(0, i),
    lambda: (r(3, 2), torch.tensor([0, -1])),
)
case(
    "err_embedding_oob",
    lambda w, i: torch.nn.functional.embedding(i, w),
    lambda: (r(4, 2), torch.tensor([1, 4])),
)
case(
    "err_embedding_neg",
    lambda w, i: torch.nn.functional.embedding(i, w),
    lambda: (r(4, 2), torch.tensor([1, -1])),
)
case("err_take_oob", lambda x, i: torch.take(x, i), lambda: (r(2, 2), torch.tensor([4])))
case("err_take_neg", lambda x, i: torch.take(x, i), lambda: (r(2, 2), torch.tensor([-4, -1])))
case("err_take_neg_oob", lambda x, i: torch.take(x, i), lambda: (r(2, 2), torch.tensor([-5])))
case(
    "err_index_add_oob",
    lambda x, i, s: x.index_add(0, i, s),
    lambda: (r(3), torch.tensor([3]), torch.tensor([1.0])),
)
case(
    "err_index_copy_oob",
    lambda x, i, s: x.index_copy(0, i, s),
    lambda: (r(3), torch.tensor([-4]), torch.tensor([1.0])),
)
case("err_index_fill_oob", lambda x, i: x.index_fill(0, i, 1.0), lambda: (r(3), torch.tensor([3])))
case("err_narrow_oob", lambda x: x.narrow(0, 2, 2), lambda: (r(3),))
case("err_select_oob", lambda x: x.select(0, 3), lambda: (r(3),))
case("err_index_tensor_oob", lambda x, i: x[i], lambda: (r(3), torch.tensor([3])))
case("err_index_tensor_neg_oob", lambda x, i: x[:, i], lambda: (r(2, 3), torch.tensor([-4])))
case("err_int_div_zero", lambda a, b: a // b, lambda: (torch.tensor([4, 5]), torch.tensor([2, 0])))
case("err_int_rem_zero", lambda a, b: a % b, lambda: (torch.tensor([4, 5]), torch.tensor([2, 0])))
case("err_int_div_scalar_zero", lambda a: a // 0, lambda: (torch.tensor([4, 5]),))
case("err_int_rem_scalar_zero", lambda a: torch.remainder(a, 0), lambda: (torch.tensor([4, 5]),))
case(
    "err_int_fmod_zero",
    lambda a, b: torch.fmod(a, b),
    lambda: (torch.tensor([4, 5]), torch.tensor([2, 0])),
)
case(
    "err_int_div_trunc_zero",
    lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    lambda: (torch.tensor([4, 5]), torch.tensor([2, 0])),
)
case(
    "int_true_div_zero",
    lambda a, b: a / b,
    lambda: (torch.tensor([4, 0, -1]), torch.tensor([0, 0, 0])),
)
case(
    "err_uint8_div_zero",
    lambda a, b: a // b,
    lambda: (torch.tensor([4, 5], dtype=torch.uint8), torch.tensor([2, 0], dtype=torch.uint8)),
)
case(
    "err_int_div_zero_inplace",
    lambda a, b: a.floor_divide_(b),
    lambda: (torch.tensor([4, 5]), torch.tensor([2, 0])),
)
case("err_cat_shape", lambda a, b: torch.cat([a, b]), lambda: (r(2, 3), r(2, 4)))
case("err_cat_dim", lambda a, b: torch.cat([a, b], dim=2), lambda: (r(2, 3), r(2, 3)))
case("err_stack_shape", lambda a, b: torch.stack([a, b]), lambda: (r(2, 3), r(3, 2)))
case("err_matmul_shape", lambda a, b: a @ b, lambda: (r(2, 3), r(2, 3)))
case("err_bmm_batch", lambda a, b: torch.bmm(a, b), lambda: (r(2, 2, 3), r(3, 3, 2)))
case("err_broadcast", lambda a, b: a + b, lambda: (r(2, 3), r(4)))
case("err_view_shape", lambda a: a.view(4, 2), lambda: (r(2, 3),))
case("err_view_noncontig", lambda a: a.t().view(6), lambda: (r(2, 3),))
case("err_reshape_shape", lambda a: a.reshape(-1, 4), lambda: (r(2, 3),))
case("err_float_index", lambda x, i: x[i], lambda: (r(3), torch.tensor([0.0, 1.0])))
case(
    "err_float_index_select",
    lambda x, i: x.index_select(0, i),
    lambda: (r(3), torch.tensor([0.0, 1.0])),
)
case("err_float_gather", lambda x, i: x.gather(0, i), lambda: (r(3), torch.tensor([0.0, 1.0])))
case(
    "err_int32_gather",
    lambda x, i: x.gather(0, i),
    lambda: (r(3), torch.tensor([0, 1], dtype=torch.int32)),
)
case("int32_index", lambda x, i: x[i], lambda: (r(3), torch.tensor([0, 2], dtype=torch.int32)))
case(
    "err_float_embedding",
    lambda w, i: torch.nn.functional.embedding(i, w),
    lambda: (r(4, 2), torch.tensor([1.0])),
)
case(
    "err_inplace_int_add_float", lambda x: x.add_(1.5), lambda: (torch.ones(3, dtype=torch.int64),)
)
case(
    "err_inplace_int_add_float_t",
    lambda x, y: x.add_(y),
    lambda: (torch.ones(3, dtype=torch.int64), r(3)),
)
case(
    "err_inplace_float_mul_complex",
    lambda x, y: x.mul_(y),
    lambda: (r(3), torch.ones(3, dtype=torch.complex64)),
)
case("err_inplace_bool_add_int", lambda x: x.add_(1), lambda: (torch.ones(3, dtype=torch.bool),))
case("inplace_int_div_", lambda x: x.div_(2), lambda: (torch.ones(3, dtype=torch.int64),))
case(
    "inplace_int_floordiv_float",
    lambda x: x.floor_divide_(2.0),
    lambda: (torch.tensor([5, -5, 3]),),
)
case(
    "inplace_int_mul_bool",
    lambda x, y: x.mul_(y),
    lambda: (torch.tensor([5, -5, 3]), torch.tensor([True, False, True])),
)
case(
    "inplace_f16_add_f32", lambda x, y: x.add_(y), lambda: (r(3, dtype=torch.float16), r(3, seed=1))
)
case("inplace_broadcast_self_raise", lambda x, y: x.add_(y), lambda: (r(3), r(2, 3)))
case("err_leaf_inplace", lambda x: x.add_(1), lambda: (r(3).requires_grad_(),))
case("err_leaf_view_inplace", lambda x: x[0].mul_(2), lambda: (r(3).requires_grad_(),))
case("err_sqrt_int_", lambda x: x.sqrt_(), lambda: (torch.tensor([4, 9]),))
case("err_max_empty", lambda x: x.max(), lambda: (torch.empty(0),))
case("err_max_empty_dim", lambda x: x.max(0), lambda: (torch.empty(0, 3),))
case("max_empty_other_dim", lambda x: x.max(1), lambda: (torch.empty(0, 3),))
case("err_argmax_empty", lambda x: x.argmax(), lambda: (torch.empty(0),))
case("err_amax_empty", lambda x: x.amax(0), lambda: (torch.empty(0, 2),))
case("err_min_empty", lambda x: torch.min(x), lambda: (torch.empty(2, 0),))
case("err_aminmax_empty", lambda x: torch.aminmax(x), lambda: (torch.empty(0),))
case("err_kthvalue_oob", lambda x: torch.kthvalue(x, 4), lambda: (r(3),))
case("err_topk_oob", lambda x: torch.topk(x, 4), lambda: (r(3),))
case("err_pow_int_neg", lambda x: x**-1, lambda: (torch.tensor([2, 3]),))
case(
    "err_pow_int_neg_tensor",
    lambda x, e: x**e,
    lambda: (torch.tensor([2, 3]), torch.tensor([-1, 1])),
)
case(
    "pow_int_neg_tensor_one",
    lambda x, e: x**e,
    lambda: (torch.tensor([1, -1, 2]), torch.tensor([-2, -3, 0])),
)
case("err_repeat_fewer_dims", lambda x: x.repeat(2), lambda: (r(2, 3),))
case("err_expand_bad", lambda x: x.expand(3, 4), lambda: (r(3, 2),))
case("err_split_sizes", lambda x: torch.split(x, [1, 1]), lambda: (r(3),))
case("err_chunk_zero", lambda x: torch.chunk(x, 0), lambda: (r(3),))
case("err_permute_dup", lambda x: x.permute(0, 0), lambda: (r(3, 3),))
case("err_dim_oob", lambda x: x.sum(2), lambda: (r(3, 3),))
case("err_softmax_dim", lambda x: x.softmax(2), lambda: (r(3, 3),))
case("err_linear_shape", lambda x, w: torch.nn.functional.linear(x, w), lambda: (r(2, 3), r(4, 2)))
case(
    "err_one_hot_oob", lambda x: torch.nn.functional.one_hot(x, 3), lambda: (torch.tensor([0, 3]),)
)
case(
    "err_one_hot_neg", lambda x: torch.nn.functional.one_hot(x, 3), lambda: (torch.tensor([0, -1]),)
)
case(
    "err_cross_entropy_target",
    lambda x, t: torch.nn.functional.cross_entropy(x, t),
    lambda: (r(2, 3), torch.tensor([0, 3])),
)
case(
    "err_nll_neg_target",
    lambda x, t: torch.nn.functional.nll_loss(x, t),
    lambda: (r(2, 3), torch.tensor([0, -2])),
)
case("err_bincount_neg", lambda x: torch.bincount(x), lambda: (torch.tensor([0, -1]),))
case(
    "err_repeat_interleave_neg",
    lambda x, n: torch.repeat_interleave(x, n),
    lambda: (r(2), torch.tensor([1, -1])),
)
case("err_multinomial_neg", lambda p: torch.multinomial(p, 1), lambda: (torch.tensor([0.5, -0.1]),))
case("err_randperm_neg", lambda x: x + torch.randperm(-1).sum(), lambda: (r(1),))
case("err_arange_bad", lambda x: x + torch.arange(0, 5, -1).sum(), lambda: (r(1),))
case("err_linspace_neg", lambda x: x + torch.linspace(0, 1, -1).sum(), lambda: (r(1),))
case("err_full_shape", lambda x: x + torch.full((2, -1), 1.0), lambda: (r(1),))
case("err_flip_dup", lambda x: x.flip(0, 0), lambda: (r(3),))
case("err_roll_shifts", lambda x: x.roll((1, 2), (0,)), lambda: (r(3),))
case("err_diag_embed_dims", lambda x: torch.diagonal(x, 0, 0, 0), lambda: (r(3, 3),))
case(
    "err_index_put_shape",
    lambda x, i, v: x.index_put((i,), v),
    lambda: (torch.zeros(4), torch.tensor([1, 2]), torch.ones(3)),
)
case(
    "err_where_shape",
    lambda c, a, b: torch.where(c, a, b),
    lambda: (torch.tensor([True, False]), r(3), r(3)),
)
case(
    "err_where_cond_not_bool",
    lambda c, a, b: torch.where(c, a, b),
    lambda: (torch.tensor([1, 0, 1]), r(3), r(3)),
)
case("err_clamp_bad_type", lambda x: torch.clamp(x, min=torch.tensor([1.0, 2])), lambda: (r(3),))
case(
    "err_lerp_dtype", lambda a, b: torch.lerp(a, b, 0.5), lambda: (r(3), r(3, dtype=torch.float64))
)
case("err_bitwise_float", lambda a: a & 1, lambda: (r(3),))
case("err_shift_float", lambda a: a << 1, lambda: (r(3),))
case("err_not_float", lambda a: ~a, lambda: (r(3),))
case("err_neg_bool", lambda a: -a, lambda: (torch.tensor([True]),))
case("err_sub_bool", lambda a, b: a - b, lambda: (torch.tensor([True]), torch.tensor([False])))
case("err_trace_3d", lambda a: torch.trace(a), lambda: (r(2, 2, 2),))
case("err_cumsum_dim", lambda a: a.cumsum(1), lambda: (r(3),))
case("err_gather_dims", lambda x, i: x.gather(0, i), lambda: (r(3, 2), torch.tensor([0, 1])))
case(
    "err_gather_index_bigger",
    lambda x, i: x.gather(1, i),
    lambda: (r(2, 2), torch.zeros(3, 2, dtype=torch.long)),
)
case(
    "err_scatter_src_small",
    lambda x, i, s: x.scatter(0, i, s),
    lambda: (r(4), torch.tensor([0, 1, 2]), torch.tensor([1.0, 2])),
)
case("err_mm_dtype", lambda a, b: a @ b, lambda: (r(2, 2), r(2, 2, dtype=torch.float64)))
case("err_index_too_many", lambda a: a[0, 0, 0], lambda: (r(2, 2),))
case("err_unflatten", lambda a: a.unflatten(0, (2, 2)), lambda: (r(3),))
case("err_squeeze_dim", lambda a: a.squeeze(3), lambda: (r(3),))
case("err_transpose_dim", lambda a: a.transpose(0, 2), lambda: (r(3, 2),))
case("err_item_multi", lambda a: a + a.sum(0).item(), lambda: (r(3, 2),))
case("err_int_of_multi", lambda a: int(a), lambda: (r(3),))

# ============================================================================================
# type promotion with Python scalars and 0-dim tensors
case("prom_int_mul_float", lambda x: x * 2.5, lambda: (torch.tensor([1, 2, 3]),))
case("prom_int32_add_int", lambda x: x + 2**40, lambda: (torch.tensor([1, 2], dtype=torch.int32),))
case(
    "prom_uint8_add_neg", lambda x: x + -1, lambda: (torch.tensor([0, 1, 200], dtype=torch.uint8),)
)
case(
    "prom_uint8_mul_big", lambda x: x * 300, lambda: (torch.tensor([1, 2, 200], dtype=torch.uint8),)
)
case("prom_int8_sub", lambda x: x - 200, lambda: (torch.tensor([0, 1, 127], dtype=torch.int8),))
case(
    "prom_uint8_0d_int64",
    lambda x, y: x + y,
    lambda: (torch.tensor([250, 1], dtype=torch.uint8), torch.tensor(10)),
)
case(
    "prom_uint8_int8",
    lambda x, y: x + y,
    lambda: (torch.tensor([250, 1], dtype=torch.uint8), torch.tensor([10, -1], dtype=torch.int8)),
)
case(
    "prom_bool_add_bool",
    lambda x, y: x + y,
    lambda: (torch.tensor([True, False, True]), torch.tensor([True, False, False])),
)
case("prom_bool_mul_int", lambda x: x * 3, lambda: (torch.tensor([True, False]),))
case("prom_bool_add_float", lambda x: x + 0.5, lambda: (torch.tensor([True, False]),))
case(
    "prom_bool_sum",
    lambda x: (x.sum(), x.sum().dtype, x.prod(), x.cumsum(0), x.mean(dtype=torch.float32)),
    lambda: (torch.tensor([True, False, True]),),
)
case(
    "prom_bool_max",
    lambda x: (x.max(), x.amax(), x.argmax()),
    lambda: (torch.tensor([True, False, True]),),
)
case(
    "prom_int64_overflow",
    lambda x: (x + 1, x * 2, -x - 2, x.abs()),
    lambda: (torch.tensor([2**63 - 1, -(2**63)]),),
)
case(
    "prom_int64_sum_overflow",
    lambda x: (x.sum(), x.cumsum(0)),
    lambda: (torch.tensor([2**62, 2**62, 2**62]),),
)
case(
    "prom_int32_sum_to_int64",
    lambda x: (x.sum(), x.cumsum(0), x.prod()),
    lambda: (torch.tensor([2**30, 2**30, 2**30], dtype=torch.int32),),
)
case(
    "prom_int8_cumsum",
    lambda x: (x.cumsum(0), x.cumprod(0)),
    lambda: (torch.tensor([100, 100, 100], dtype=torch.int8),),
)
case(
    "prom_f16_sum",
    lambda x: (x.sum(), x.mean(), x.cumsum(0)[-1], x.var()),
    lambda: (torch.full((5000,), 0.1, dtype=torch.float16),),
)
case(
    "prom_f16_sum_big",
    lambda x: (x.sum(), x.cumsum(0)),
    lambda: (torch.full((100,), 1000.0, dtype=torch.float16),),
)
case(
    "prom_bf16_cumsum",
    lambda x: x.cumsum(0),
    lambda: (torch.full((600,), 1.0, dtype=torch.bfloat16),),
)
case(
    "prom_bf16_cumprod",
    lambda x: x.cumprod(0),
    lambda: (torch.full((60,), 1.1, dtype=torch.bfloat16),),
)
case(
    "prom_f16_norm",
    lambda x: (x.norm(), torch.linalg.vector_norm(x)),
    lambda: (torch.full((1000,), 10.0, dtype=torch.float16),),
)
case(
    "prom_f16_softmax_overflow",
    lambda x: (x.softmax(0), x.logsumexp(0)),
    lambda: (torch.tensor([60000.0, 60000.0], dtype=torch.float16),),
)
case(
    "prom_0d_float_int_tensor",
    lambda x, y: x * y,
    lambda: (torch.tensor([1, 2]), torch.tensor(2.5)),
)
case("prom_0d_f64_f32", lambda x, y: x * y, lambda: (r(2), torch.tensor(2.5, dtype=torch.float64)))
case(
    "prom_0d_f16_int",
    lambda x, y: x * y,
    lambda: (torch.tensor([1, 2]), torch.tensor(2.5, dtype=torch.float16)),
)
case(
    "prom_int_div_scalar",
    lambda x: (x / 2, x // 2, x % 3, x // -2, x % -3),
    lambda: (torch.tensor([-7, -1, 0, 5, 7]),),
)
case(
    "prom_floor_divide_neg",
    lambda a, b: (a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc")),
    lambda: (torch.tensor([-7, 7, -7, 7, 0]), torch.tensor([2, -2, -2, 2, -3])),
)
case(
    "prom_floor_divide_float_neg",
    lambda a, b: (a // b, a % b, torch.fmod(a, b)),
    lambda: (
        torch.tensor([-7.5, 7.5, -7.5, 7.5, -0.0, 5.0]),
        torch.tensor([2.0, -2.0, -2.0, 2.0, 3.0, -5.0]),
    ),
)
case(
    "prom_remainder_float_inf",
    lambda a, b: (a % b, a // b),
    lambda: (
        torch.tensor([5.0, -5.0, float("inf"), 5.0]),
        torch.tensor([float("inf"), float("inf"), 2.0, 0.0]),
    ),
)
case(
    "prom_int_min_div_neg1",
    lambda a, b: (a // b, a % b),
    lambda: (torch.tensor([-(2**63)]), torch.tensor([-1])),
)
case(
    "prom_int32_min_div_neg1",
    lambda a, b: (a // b, a % b, torch.fmod(a, b)),
    lambda: (torch.tensor([-(2**31)], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32)),
)
case(
    "round_half_even",
    lambda x: (x.round(), torch.round(x, decimals=1), torch.round(x, decimals=-1)),
    lambda: (torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.25, 0.35, 15.0, 25.0, -25.0]),),
)
case(
    "round_int",
    lambda x: (x.round(), torch.round(x, decimals=-1)),
    lambda: (torch.tensor([15, 25, -25, 7]),),
)
case(
    "round_f16",
    lambda x: (x.round(), torch.round(x, decimals=2)),
    lambda: (torch.tensor([0.125, 2.5, 1.005], dtype=torch.float16),),
)
case(
    "clamp_min_gt_max",
    lambda x: (x.clamp(2, 1), torch.clamp(x, min=torch.tensor(3.0), max=torch.tensor(0.0))),
    lambda: (r(4),),
)
case(
    "clamp_int_float_bounds",
    lambda x: (x.clamp(0.5, 2.5), x.clamp(min=1.5)),
    lambda: (torch.tensor([-1, 0, 1, 2, 3]),),
)
case(
    "clamp_nan_bound",
    lambda x: (x.clamp(min=float("nan")), x.clamp(max=float("nan"))),
    lambda: (r(3),),
)
case(
    "clamp_nan_input",
    lambda x: (x.clamp(0, 1), x.clamp_min(0), torch.clip(x, -1, 1)),
    lambda: (torch.tensor([float("nan"), 2.0, -2.0]),),
)
case(
    "clamp_uint8_neg_bound",
    lambda x: x.clamp(min=-1, max=300),
    lambda: (torch.tensor([0, 5, 255], dtype=torch.uint8),),
)
case(
    "nan_max_min",
    lambda x: (
        x.max(),
        x.min(),
        x.amax(0),
        x.max(0),
        x.min(1),
        x.argmax(),
        x.argmin(0),
        x.aminmax(),
    ),
    lambda: (torch.tensor([[1.0, float("nan"), 3.0], [4.0, 0.0, float("nan")]]),),
)
case(
    "nan_maximum",
    lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b), torch.fmin(a, b)),
    lambda: (
        torch.tensor([1.0, float("nan"), float("nan"), 2.0]),
        torch.tensor([float("nan"), 2.0, float("nan"), 1.0]),
    ),
)
case(
    "nan_sort",
    lambda x: (x.sort(), x.sort(descending=True), x.argsort(), x.msort(), x.sort(stable=True)),
    lambda: (
        torch.tensor(
            [3.0, float("nan"), 1.0, float("-inf"), float("nan"), float("inf"), -0.0, 0.0]
        ),
    ),
)
case(
    "nan_topk",
    lambda x: (x.topk(3), x.topk(3, largest=False), x.kthvalue(2), x.median(), x.nanmedian()),
    lambda: (torch.tensor([3.0, float("nan"), 1.0, float("-inf"), 5.0, float("inf")]),),
)
case(
    "nan_cummax",
    lambda x: (x.cummax(0), x.cummin(0)),
    lambda: (torch.tensor([1.0, float("nan"), 3.0, 0.0, float("nan")]),),
)
case(
    "nan_unique",
    lambda x: torch.unique(x),
    lambda: (torch.tensor([1.0, float("nan"), 1.0, float("nan")]),),
)
case(
    "nan_mode", lambda x: x.mode(), lambda: (torch.tensor([1.0, float("nan"), float("nan"), 2.0]),)
)
case(
    "neg_zero",
    lambda x: (
        x.abs(),
        -x,
        x * 0,
        x.sign(),
        x.max(),
        torch.maximum(x, torch.zeros_like(x)),
        x.sort()[0],
        x.sqrt(),
        torch.atan2(x, torch.tensor(-1.0)),
        1 / x,
        x.floor(),
        x.round(),
        torch.copysign(torch.ones_like(x), x),
    ),
    lambda: (torch.tensor([-0.0, 0.0, -0.0]),),
)
case(
    "neg_zero_sum",
    lambda x: (x.sum(), x.prod(), x.cumsum(0), x + 0.0, x - 0.0, x.mean()),
    lambda: (torch.tensor([-0.0, -0.0]),),
)
case(
    "neg_zero_relu",
    lambda x: (
        torch.relu(x),
        torch.nn.functional.leaky_relu(x),
        x.clamp(min=0.0),
        torch.nn.functional.hardtanh(x),
        torch.nn.functional.relu6(x),
    ),
    lambda: (torch.tensor([-0.0, -1.0, 0.0]),),
)
case(
    "neg_zero_max_ties",
    lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), torch.max(torch.stack([x, y]), 0)),
    lambda: (torch.tensor([-0.0, 0.0]), torch.tensor([0.0, -0.0])),
)
case(
    "empty_reductions",
    lambda x: (
        x.sum(),
        x.prod(),
        x.mean(),
        x.sum(0),
        x.amax(1),
        x.logsumexp(0),
        x.std(),
        x.norm(),
        x.all(),
        x.any(),
        x.cumsum(0),
        x.count_nonzero(),
    ),
    lambda: (torch.empty(0, 3),),
)
case("empty_nansum", lambda x: (x.nansum(), x.nanmean(), x.var(0)), lambda: (torch.empty(0, 2),))
case("empty_matmul", lambda a, b: a @ b, lambda: (r(3, 0), r(0, 2)))
case("empty_sort", lambda x: (x.sort(), x.topk(0), x.argmax(1)), lambda: (torch.empty(2, 0),))
case(
    "empty_int_sum",
    lambda x: (x.sum(), x.prod(), x.sum().dtype),
    lambda: (torch.empty(0, dtype=torch.int32),),
)
case("empty_median", lambda x: x.median(), lambda: (torch.empty(0),))
case("empty_std_mean", lambda x: torch.std_mean(x), lambda: (torch.empty(0),))
case("empty_cat", lambda a, b: torch.cat([a, b]), lambda: (torch.empty(0), r(2, 3)))
case("empty_softmax", lambda x: x.softmax(0), lambda: (torch.empty(0, 3),))

# ties
case(
    "tie_sort_stable",
    lambda x: x.sort(stable=True),
    lambda: (torch.tensor([2, 1, 2, 1, 2, 1, 0] * 5),),
)
case(
    "tie_sort_desc_stable",
    lambda x: x.sort(descending=True, stable=True),
    lambda: (torch.tensor([2, 1, 2, 1, 2, 1, 0] * 5),),
)
case("tie_sort_default", lambda x: x.sort(), lambda: (torch.tensor([2, 1, 2, 1, 2, 1, 0] * 5),))
case("tie_argsort", lambda x: x.argsort(dim=1), lambda: (torch.tensor([[1.0, 1.0, 0.0, 1.0]] * 3),))
case("tie_topk_small", lambda x: x.topk(3), lambda: (torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 1.0]),))
case(
    "tie_topk_big", lambda x: x.topk(5), lambda: (torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 1.0] * 6),)
)
case(
    "tie_topk_min_big",
    lambda x: x.topk(5, largest=False),
    lambda: (torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 1.0] * 6),),
)
case("tie_mode_small", lambda x: x.mode(), lambda: (torch.tensor([1, 2, 2, 1, 3]),))
case("tie_mode_big", lambda x: x.mode(), lambda: (torch.tensor([1, 2, 2, 1, 3] * 5),))
case(
    "tie_mode_2d",
    lambda x: x.mode(1),
    lambda: (torch.tensor([[1, 2, 2, 1, 3] * 4, [5, 5, 0, 0, 0] * 4]),),
)
case(
    "tie_max_dim_index",
    lambda x: (x.max(0), x.min(0), x.argmax(), x.argmin()),
    lambda: (torch.tensor([1.0, 3.0, 3.0, 0.0, 0.0]),),
)
case("tie_kthvalue", lambda x: x.kthvalue(2), lambda: (torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0]),))
case(
    "tie_median",
    lambda x: (x.median(0), x.nanmedian(0)),
    lambda: (torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 2.0]),),
)
case(
    "tie_cummax",
    lambda x: (x.cummax(0), x.cummin(0)),
    lambda: (torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0]),),
)
case(
    "unique_variants",
    lambda x: (
        torch.unique(x, return_inverse=True, return_counts=True),
        torch.unique(x, sorted=False),
        torch.unique_consecutive(x, return_counts=True),
    ),
    lambda: (torch.tensor([3, 1, 3, 2, 2, 1, 3]),),
)
case(
    "unique_dim",
    lambda x: torch.unique(x, dim=0, return_inverse=True),
    lambda: (torch.tensor([[1, 2], [0, 1], [1, 2]]),),
)

# ============================================================================================
# tensor creation inside compiled code
case("arange_float_step", lambda x: x.sum() + torch.arange(0, 1, 0.1), lambda: (r(1),))
case("arange_float_step_len", lambda x: torch.arange(-1.0, 1.0, 0.3) + x, lambda: (r(1),))
case(
    "arange_int_dtype",
    lambda x: (
        torch.arange(5),
        torch.arange(5.0),
        torch.arange(0, 5, 2),
        torch.arange(1, 2.5, 0.5),
    ),
    lambda: (r(1),),
)
case("arange_f16", lambda x: torch.arange(0, 10, 0.7, dtype=torch.float16), lambda: (r(1),))
case(
    "arange_int_float_step_dtype",
    lambda x: torch.arange(0, 5, 1.5, dtype=torch.int64),
    lambda: (r(1),),
)
case("arange_bf16_long", lambda x: torch.arange(300, dtype=torch.bfloat16), lambda: (r(1),))
case(
    "linspace",
    lambda x: (
        torch.linspace(0, 1, 7),
        torch.linspace(-3, 3, 1),
        torch.linspace(0, 10, 5, dtype=torch.int64),
        torch.logspace(0, 2, 3),
    ),
    lambda: (r(1),),
)
case("linspace_int_frac", lambda x: torch.linspace(0, 10, 4, dtype=torch.int64), lambda: (r(1),))
case("linspace_f16", lambda x: torch.linspace(-1, 1, 11, dtype=torch.float16), lambda: (r(1),))
case("linspace_many", lambda x: torch.linspace(0.1, 3.3, 1000), lambda: (r(1),))
case(
    "full_dtype_inference",
    lambda x: (
        torch.full((2,), 3),
        torch.full((2,), 3.0),
        torch.full((2,), True),
        torch.full((2,), 1 + 2j),
    ),
    lambda: (r(1),),
)
case("tensor_from_list", lambda x: x + torch.tensor([1, 2, 3]), lambda: (r(3),))
case(
    "tensor_from_list_dtypes",
    lambda x: (
        torch.tensor([1, 2]),
        torch.tensor([1.0, 2]),
        torch.tensor([True]),
        torch.tensor(3),
        torch.tensor(2.5),
        torch.tensor([[1, 2.5]]),
    ),
    lambda: (r(1),),
)
case("tensor_big_int", lambda x: torch.tensor([2**40, -(2**62)]) + 1, lambda: (r(1),))
case(
    "tensor_f64_default", lambda x: torch.tensor([1.0], dtype=torch.float64) * 0.1, lambda: (r(1),)
)
case("tensor_from_scalar_item", lambda x: torch.tensor([x.shape[0], 2]), lambda: (r(3),))
case(
    "randperm_shape",
    lambda x: (torch.randperm(5).shape, torch.randperm(5).dtype, torch.randperm(5).sort()[0]),
    lambda: (r(1),),
)
case(
    "randint_shape",
    lambda x: (
        torch.randint(0, 3, (4,)).dtype,
        torch.randint(0, 3, (4,)).shape,
        torch.randint(3, (2, 2), dtype=torch.int32).dtype,
    ),
    lambda: (r(1),),
)
case(
    "randint_range",
    lambda x: (
        (torch.randint(-2, 3, (1000,)) >= -2).all(),
        (torch.randint(-2, 3, (1000,)) < 3).all(),
    ),
    lambda: (r(1),),
)
case(
    "rand_like_dtypes",
    lambda x: (torch.rand_like(x).dtype, torch.randn_like(x).shape, torch.randint_like(x, 5).dtype),
    lambda: (r(2, dtype=torch.float64),),
)
case(
    "new_zeros_strides",
    lambda x: (
        x.new_zeros(2, 3),
        x.new_ones((2,)),
        x.new_full((2,), 5),
        x.new_empty(3).shape,
        x.new_tensor([1, 2]),
    ),
    lambda: (r(3, 4).t(),),
)
case(
    "empty_like_strides",
    lambda x: (
        torch.empty_like(x).stride(),
        torch.zeros_like(x),
        torch.ones_like(x, dtype=torch.int32),
    ),
    lambda: (r(3, 4).t(),),
)
case(
    "zeros_like_channels_last",
    lambda x: torch.zeros_like(x),
    lambda: (r(1, 3, 2, 2).to(memory_format=torch.channels_last),),
)
case(
    "full_like_int_float",
    lambda x: (torch.full_like(x, 2.7), torch.ones_like(x) * 2.5),
    lambda: (torch.tensor([1, 2]),),
)
case(
    "eye_tril",
    lambda x: (torch.eye(3, 2), torch.tril(torch.ones(3, 3), -1), torch.triu_indices(3, 3, 1)),
    lambda: (r(1),),
)
case("zeros_size_from_input", lambda x: torch.zeros(x.shape[0] * 2) + 1, lambda: (r(3),))
case(
    "scalar_tensor",
    lambda x: (
        torch.scalar_tensor(3),
        torch.as_tensor(2.0),
        torch.as_tensor([1, 2], dtype=torch.int32),
    ),
    lambda: (r(1),),
)

# ============================================================================================
# integer bit ops, wraparound, edge values
I64 = torch.int64
case(
    "shift_left_wide",
    lambda x, s: (x << s, x >> s),
    lambda: (
        torch.tensor([1, -1, 5, -8] * 3),
        torch.tensor([0, 1, 63, 64, 65, 100, -1, 3, 62, 66, 200, 70]),
    ),
)
case(
    "shift_scalar_wide",
    lambda x: (x << 64, x >> 64, x << 70, x >> 63),
    lambda: (torch.tensor([1, -1, 5, -8]),),
)
case(
    "shift_int8_wide",
    lambda x, s: (x << s, x >> s),
    lambda: (
        torch.tensor([1, -1, 5, -128], dtype=torch.int8),
        torch.tensor([7, 8, 9, 100], dtype=torch.int8),
    ),
)
case(
    "shift_uint8_wide",
    lambda x, s: (x << s, x >> s),
    lambda: (
        torch.tensor([1, 255, 5, 128], dtype=torch.uint8),
        torch.tensor([7, 8, 9, 200], dtype=torch.uint8),
    ),
)
case(
    "shift_int32_wide",
    lambda x: (x << 32, x >> 32, x << 31),
    lambda: (torch.tensor([1, -1, 3], dtype=torch.int32),),
)
case("shift_ops_in_place", lambda x: (x.__ilshift__(65), x), lambda: (torch.tensor([1, -1, 3]),))
case(
    "bitwise_left_shift_fn",
    lambda x, s: torch.bitwise_left_shift(x, s),
    lambda: (torch.tensor([3, 3]), torch.tensor([64, 2])),
)
case(
    "abs_neg_int_min",
    lambda x: (x.abs(), -x, x.neg(), x.sign(), x // -1),
    lambda: (torch.tensor([-(2**63), 5]),),
)
case(
    "abs_int8_min",
    lambda x: (x.abs(), -x, x * -1, x.sum(dtype=torch.int8)),
    lambda: (torch.tensor([-128, 100, 100], dtype=torch.int8),),
)
case(
    "gcd_lcm_neg",
    lambda a, b: (torch.gcd(a, b), torch.lcm(a, b)),
    lambda: (torch.tensor([-12, 0, 7, -4, 0]), torch.tensor([18, -5, 0, -6, 0])),
)
case(
    "trunc_floor_int",
    lambda x: (x.floor(), x.ceil(), x.trunc(), x.round(), x.frac() if x.is_floating_point() else x),
    lambda: (torch.tensor([-3, 4]),),
)
case(
    "bool_bitwise_int",
    lambda a, b: (a & b, a | b, a ^ b, ~a),
    lambda: (torch.tensor([True, False]), torch.tensor([3, 2])),
)
case(
    "sum_int8_dtype",
    lambda x: (x.sum(dtype=torch.int8), x.cumsum(0, dtype=torch.int8), x.prod()),
    lambda: (torch.tensor([100, 100, 100], dtype=torch.int8),),
)
case(
    "prod_int_overflow",
    lambda x: (x.prod(), x.cumprod(0)),
    lambda: (torch.tensor([2**40, 2**30, 3]),),
)
case("mean_int_raises", lambda x: x.mean(), lambda: (torch.tensor([1, 2]),))
case("std_int_raises", lambda x: x.std(), lambda: (torch.tensor([1, 2]),))
case(
    "var_single",
    lambda x: (x.var(), x.std(0), x.var(unbiased=False)),
    lambda: (torch.tensor([1.5]),),
)
case(
    "pow_zero_neg",
    lambda x: (x**-1.0, torch.pow(x, -2), x**0, 0**x, torch.pow(2, x)),
    lambda: (torch.tensor([0.0, -0.0, 2.0, -8.0]),),
)
case(
    "pow_neg_base_frac",
    lambda x: (x ** (1 / 3), x**0.5, x**2.0, x ** float("inf"), x ** float("nan")),
    lambda: (torch.tensor([-8.0, -1.0, 1.0, 0.5]),),
)
case(
    "pow_int_scalar_float",
    lambda x: (x**2.5, x**0.5, 2.5**x, 2**x),
    lambda: (torch.tensor([0, 1, 4, 9]),),
)
case(
    "pow_int_int_tensor",
    lambda a, b: a**b,
    lambda: (torch.tensor([2, -3, 0, 7]), torch.tensor([62, 3, 0, 30])),
)
case("pow_uint8", lambda a: (a**2, a**9), lambda: (torch.tensor([3, 16, 255], dtype=torch.uint8),))
case(
    "div_rounding_float_scalar",
    lambda x: (
        torch.div(x, 0.0, rounding_mode="floor"),
        torch.div(x, 0.0, rounding_mode="trunc"),
        x // 0.0,
        x % 0.0,
    ),
    lambda: (torch.tensor([1.0, -1.0, 0.0]),),
)
case(
    "remainder_int_neg_scalar",
    lambda x: (x % -3, torch.remainder(-7, x), torch.fmod(x, -3), x // -3),
    lambda: (torch.tensor([-7, -6, 0, 7, 8]),),
)
case(
    "floor_divide_int_float_scalar",
    lambda x: (x // 2.5, x % 2.5, torch.floor_divide(x, 2.5)),
    lambda: (torch.tensor([-7, 7, 5]),),
)
case(
    "remainder_float_sign",
    lambda a, b: (a % b, torch.fmod(a, b)),
    lambda: (
        torch.tensor([5.0, -5.0, 5.0, -5.0, 1e-30, -1e-30]),
        torch.tensor([3.0, 3.0, -3.0, -3.0, 3.0, 3.0]),
    ),
)
case(
    "where_scalar_promote",
    lambda c, x: (
        torch.where(c, x, 2.5),
        torch.where(c, 1, 0),
        torch.where(c, x, torch.tensor(2.5, dtype=torch.float64)),
        torch.where(c, 1.0, 0),
    ),
    lambda: (torch.tensor([True, False]), torch.tensor([3, 4])),
)
case(
    "where_int8_scalar",
    lambda c, x: torch.where(c, x, 300),
    lambda: (torch.tensor([True, False]), torch.tensor([3, 4], dtype=torch.int8)),
)
case(
    "clamp_int_out_of_range",
    lambda x: (x.clamp(-1000, 1000), x.clamp(max=300)),
    lambda: (torch.tensor([3, 4, -128], dtype=torch.int8),),
)
case(
    "nan_to_num_f16",
    lambda x: (x.nan_to_num(), torch.nan_to_num(x, posinf=1e6)),
    lambda: (torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], dtype=torch.float16),),
)
case(
    "nan_to_num_bf16",
    lambda x: x.nan_to_num(),
    lambda: (torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=torch.bfloat16),),
)
case(
    "sign_nan",
    lambda x: (
        x.sign(),
        x.sgn(),
        torch.signbit(x),
        x.bool(),
        x.to(torch.int32) if False else x.isnan(),
    ),
    lambda: (torch.tensor([float("nan"), -0.0, 0.0, -2.0]),),
)
case(
    "logsumexp_all_neginf",
    lambda x: (x.logsumexp(0), x.softmax(0), x.log_softmax(0)),
    lambda: (torch.full((3,), -float("inf")),),
)
case(
    "logsumexp_inf",
    lambda x: x.logsumexp(0),
    lambda: (torch.tensor([float("inf"), 1.0, float("inf")]),),
)
case("logsumexp_int", lambda x: x.logsumexp(0), lambda: (torch.tensor([1, 2, 3]),))
case("softmax_int_raises", lambda x: x.softmax(0), lambda: (torch.tensor([1, 2]),))
case("normalize_zero", lambda x: torch.nn.functional.normalize(x, dim=0), lambda: (torch.zeros(3),))
case(
    "cosine_similarity_zero",
    lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=0),
    lambda: (torch.zeros(3), torch.ones(3)),
)
case(
    "median_even",
    lambda x: (x.median(), x.median(0), x.nanmedian()),
    lambda: (torch.tensor([4.0, 1.0, 3.0, 2.0]),),
)
case(
    "quantile",
    lambda x: (
        torch.quantile(x, 0.3),
        torch.quantile(x, torch.tensor([0.0, 0.5, 1.0]), interpolation="lower"),
        torch.quantile(x, 0.5, interpolation="nearest"),
        torch.quantile(x, 0.25, interpolation="midpoint"),
    ),
    lambda: (torch.tensor([4.0, 1.0, 3.0, 2.0, 7.0]),),
)
case(
    "quantile_nan",
    lambda x: (torch.quantile(x, 0.5), torch.nanquantile(x, 0.5)),
    lambda: (torch.tensor([4.0, float("nan"), 3.0]),),
)
case("quantile_bad_q", lambda x: torch.quantile(x, 1.5), lambda: (torch.tensor([4.0, 1.0]),))
case("topk_k0", lambda x: x.topk(0), lambda: (torch.tensor([4.0, 1.0]),))
case(
    "searchsorted_nan",
    lambda s, v: (
        torch.searchsorted(s, v),
        torch.searchsorted(s, v, right=True),
        torch.bucketize(v, s),
    ),
    lambda: (
        torch.tensor([1.0, 2.0, 2.0, 3.0]),
        torch.tensor([float("nan"), 2.0, -float("inf"), 0.0, 5.0]),
    ),
)
case(
    "searchsorted_unsorted",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (torch.tensor([3.0, 1.0, 2.0]), torch.tensor([1.5, 2.5])),
)
case(
    "unique_signed_zero",
    lambda x: torch.unique(x, return_counts=True),
    lambda: (torch.tensor([0.0, -0.0, 1.0, -0.0]),),
)
case(
    "histc_out_of_range",
    lambda x: (torch.histc(x, bins=4, min=0, max=4), torch.histc(x, bins=3)),
    lambda: (torch.tensor([-1.0, 0.0, 1.0, 3.9, 4.0, 5.0, float("nan")]),),
)
case(
    "bincount_minlength",
    lambda x: (torch.bincount(x, minlength=6), torch.bincount(x, torch.tensor([0.5, 1.0, 2.0]))),
    lambda: (torch.tensor([1, 1, 3]),),
)
case(
    "cumsum_empty", lambda x: (x.cumsum(1), x.cumprod(0), x.cummax(1)), lambda: (torch.empty(2, 0),)
)
case(
    "max_int8",
    lambda x: (x.max(), x.amax(0), x.argmax(), x.max(0)),
    lambda: (torch.tensor([-128, 127, 127], dtype=torch.int8),),
)
case("amax_bool", lambda x: (x.amax(), x.amin(), x.max(0)), lambda: (torch.tensor([False, True]),))
case(
    "float_to_bool_nan",
    lambda x: (x.bool(), x.to(torch.bool), x != 0, x.logical_not(), x.any(), x.all()),
    lambda: (torch.tensor([float("nan"), 0.0, -0.0, 1e-45]),),
)
case(
    "complex_ops",
    lambda x: (x.abs(), x.angle(), x * 2, x.real, x.conj() * x, torch.sgn(x), x.sum()),
    lambda: (torch.tensor([1 + 2j, -3j, 0j], dtype=torch.complex64),),
)
case(
    "div_int_by_int_exact",
    lambda a, b: (a / b, torch.true_divide(a, b), a.div(b), a.div(b, rounding_mode=None)),
    lambda: (torch.tensor([2**53 + 1, 7, -7]), torch.tensor([1, 2, 2])),
)
case(
    "int64_to_float32_big",
    lambda a: (a.float(), a.double(), a * 1.0, a.to(torch.float16)),
    lambda: (torch.tensor([2**53 + 1, 2**62 + 2**38 + 1, 70000]),),
)
case(
    "int_add_float_scalar_big",
    lambda a: a + 0.5,
    lambda: (torch.tensor([2**24 + 1], dtype=torch.int32),),
)
case("int64_mul_float_scalar", lambda a: a * 1.5, lambda: (torch.tensor([2**53 + 1]),))
case(
    "f16_scalar_mul_big",
    lambda a: (a * 100000.0, a + 70000, a / 1e-8),
    lambda: (torch.tensor([1.0, 2.0], dtype=torch.float16),),
)
case(
    "bf16_scalar_precision",
    lambda a: (a * 1.001, a + 1e-3, a - 0.1),
    lambda: (torch.tensor([1.0, 256.0], dtype=torch.bfloat16),),
)
case(
    "f16_0d_tensor_f32",
    lambda a, b: (a * b, a + b, torch.maximum(a, b)),
    lambda: (torch.tensor([1.0, 2.0], dtype=torch.float16), torch.tensor(1.001)),
)
case(
    "int32_0d_int64_tensor",
    lambda a, b: (a + b, (a + b).dtype, a * b),
    lambda: (torch.tensor([2**31 - 1], dtype=torch.int32), torch.tensor(1)),
)
case(
    "uint8_0d_neg",
    lambda a, b: a + b,
    lambda: (torch.tensor([0, 5], dtype=torch.uint8), torch.tensor(-1)),
)
case(
    "int_tensor_true_div_0d_int",
    lambda a, b: a / b,
    lambda: (torch.tensor([1, 2], dtype=torch.int32), torch.tensor(3)),
)
case(
    "float_floor_div_big",
    lambda a, b: (a // b, a % b),
    lambda: (torch.tensor([1e30, -1e30, 7.0]), torch.tensor([3.0, 3.0, 1e-30])),
)
case(
    "float_floor_div_precision",
    lambda a, b: (a // b, a % b),
    lambda: (torch.tensor([0.3, 1.0, -0.3, 5.9]), torch.tensor([0.1, 0.1, 0.1, 0.2])),
)
case(
    "atan2_zeros",
    lambda a, b: torch.atan2(a, b),
    lambda: (torch.tensor([0.0, -0.0, 0.0, -0.0]), torch.tensor([0.0, 0.0, -0.0, -0.0])),
)
case(
    "hypot_inf_nan",
    lambda a, b: torch.hypot(a, b),
    lambda: (
        torch.tensor([float("inf"), float("nan")]),
        torch.tensor([float("nan"), float("inf")]),
    ),
)
case(
    "copysign_int",
    lambda a, b: torch.copysign(a, b),
    lambda: (torch.tensor([1, -2]), torch.tensor([-0.0, 0.0])),
)
case(
    "exp_overflow_f16",
    lambda a: (a.exp(), a.sigmoid(), torch.nn.functional.softplus(a), a.tanh()),
    lambda: (torch.tensor([12.0, -20.0, 100.0], dtype=torch.float16),),
)
case(
    "log_neg",
    lambda a: (a.log(), a.sqrt(), a.rsqrt(), a.log1p(), torch.special.xlogy(a, a)),
    lambda: (torch.tensor([-1.0, 0.0, -0.0, float("inf")]),),
)
case(
    "fmod_inf",
    lambda a, b: (torch.fmod(a, b), torch.remainder(a, b)),
    lambda: (
        torch.tensor([5.0, float("inf"), -5.0, 0.0]),
        torch.tensor([float("inf"), 3.0, float("-inf"), float("inf")]),
    ),
)

# ============================================================================================
# more mutation shapes
case(
    "iadd_dup_index",
    lambda x, i: x.__setitem__(i, x[i] + 1),
    lambda: (torch.zeros(4), torch.tensor([1, 1, 2])),
)
case(
    "index_iadd_dup",
    lambda x, i: x.index_put_((i,), x[i] + 1),
    lambda: (torch.zeros(4), torch.tensor([1, 1, 2])),
)
case("mask_imul", lambda x: x.__setitem__(x > 0, x[x > 0] * 2), lambda: (r(6),))
case(
    "setitem_broadcast_lead",
    lambda x, v: x.__setitem__((slice(None), 0), v),
    lambda: (r(2, 3, 4), r(4, seed=1)),
)
case("setitem_from_self_overlap", lambda x: x.__setitem__(slice(1, None), x[:-1]), lambda: (r(5),))
case("setitem_from_self_reverse", lambda x: x.__setitem__(slice(None), x.flip(0)), lambda: (r(5),))
case("setitem_transposed_self", lambda x: x.copy_(x.t()), lambda: (r(3, 3),))
case("copy_broadcast", lambda x, y: x.copy_(y), lambda: (r(2, 3), r(3, seed=1)))
case(
    "copy_dtype",
    lambda x, y: x.copy_(y),
    lambda: (torch.zeros(3, dtype=torch.int32), torch.tensor([1.7, -1.7, 3e9])),
)
case(
    "copy_complex_to_real",
    lambda x, y: x.copy_(y),
    lambda: (torch.zeros(2), torch.tensor([1 + 2j, 3 - 1j])),
)
case("inplace_returns_self", lambda x: x.add_(1) is x, lambda: (r(3),))
case("inplace_chain", lambda x: x.mul_(2).add_(1).clamp_(max=1.0), lambda: (r(4),))
case("zero_then_view", lambda x: (x.zero_(), x.view(-1)), lambda: (r(2, 2),))
case("swap_rows", lambda x: x.__setitem__([0, 1], x[[1, 0]]), lambda: (r(2, 3),))
case(
    "swap_rows_tuple",
    lambda x: x.__setitem__(slice(0, 2), x[0:2].flip(0).clone()),
    lambda: (r(2, 3),),
)
case("resize_", lambda x: x.resize_(6), lambda: (r(2, 3),))
case("detach_inplace_shares", lambda x: (x.detach().add_(1), x), lambda: (r(3),))
case("data_assign", lambda x: (x.data.mul_(2), x), lambda: (r(3),))
case("squeeze_inplace", lambda x: (x.squeeze_(), x.shape), lambda: (r(1, 3, 1),))
case("t_inplace", lambda x: (x.t_(), x.shape, x.stride()), lambda: (r(2, 3),))
case("unsqueeze_inplace", lambda x: (x.unsqueeze_(0), x.shape), lambda: (r(3),))
case("transpose_inplace_then_add", lambda x: x.transpose_(0, 1).add_(1), lambda: (r(2, 3),))
case("as_strided_inplace", lambda x: x.as_strided_((2,), (2,)), lambda: (r(4),))
case("fill_diagonal", lambda x: x.fill_diagonal_(5.0, wrap=True), lambda: (r(7, 3),))
case("tril_inplace", lambda x: (x.tril_(-1), x.triu_()), lambda: (r(3, 3),))
case("clamp_tensor_inplace", lambda x, lo: x.clamp_(min=lo), lambda: (r(3, 2), torch.zeros(2)))
case(
    "addcmul_inplace_int",
    lambda x, a, b: x.addcmul_(a, b, value=2),
    lambda: (torch.ones(3, dtype=torch.int64), torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])),
)
case("lerp_inplace_view", lambda x, y: x[1:].lerp_(y, 0.3), lambda: (r(4), r(3, seed=1)))
case("relu_inplace_view", lambda x: torch.relu_(x[::2]), lambda: (r(6),))
case("F_relu_inplace", lambda x: torch.nn.functional.relu(x, inplace=True), lambda: (r(6),))
case(
    "dropout_inplace_eval",
    lambda x: torch.nn.functional.dropout(x, 0.5, training=False, inplace=True),
    lambda: (r(6),),
)
case("sigmoid_inplace_int_raises", lambda x: x.sigmoid_(), lambda: (torch.tensor([1, 2]),))
case(
    "exp_inplace_half",
    lambda x: x.exp_(),
    lambda: (torch.tensor([12.0, 1.0], dtype=torch.float16),),
)
case("out_arg_aliases_input", lambda x: torch.add(x, x, out=x), lambda: (r(3),))
case("out_arg_view", lambda x, o: torch.mul(x, 3, out=o[1]), lambda: (r(3), torch.zeros(2, 3)))
case(
    "out_arg_int_sum",
    lambda x, o: torch.sum(x, 0, out=o),
    lambda: (torch.tensor([[1, 2], [3, 4]]), torch.zeros(2, dtype=torch.int64)),
)
case(
    "out_arg_wrong_shape_warn",
    lambda x, o: (torch.add(x, 1, out=o), o.shape),
    lambda: (r(3), torch.zeros(5)),
)
case(
    "out_topk",
    lambda x, v, i: (torch.topk(x, 2, out=(v, i)), v, i),
    lambda: (r(5), torch.zeros(2), torch.zeros(2, dtype=torch.long)),
)
case(
    "out_sort_noncontig",
    lambda x, v, i: torch.sort(x, out=(v, i)),
    lambda: (r(3, 4), torch.zeros(4, 3).t(), torch.zeros(3, 4, dtype=torch.long)),
)
case(
    "out_float_to_f64",
    lambda x, o: torch.exp(x, out=o),
    lambda: (r(3), torch.zeros(3, dtype=torch.float64)),
)
case(
    "out_linspace",
    lambda x, o: (torch.linspace(0, 1, 5, out=o), x + 1),
    lambda: (r(1), torch.zeros(5)),
)
case(
    "out_arange",
    lambda x, o: (torch.arange(0, 4, out=o), x + 1),
    lambda: (r(1), torch.zeros(4, dtype=torch.long)),
)
case(
    "out_cumsum_dtype",
    lambda x, o: torch.cumsum(x, 0, out=o),
    lambda: (torch.tensor([1, 2]), torch.zeros(2)),
)
case(
    "out_where",
    lambda c, x, o: torch.where(c, x, 0.0, out=o),
    lambda: (torch.tensor([True, False]), r(2), torch.zeros(2)),
)
case(
    "out_clamp_int_out_float",
    lambda x, o: torch.clamp(x, 0, 1, out=o),
    lambda: (torch.tensor([2, -1]), torch.zeros(2)),
)
case(
    "int32_index_select",
    lambda x, i: (x.index_select(0, i), x[i], x.gather(0, i.long())),
    lambda: (r(4), torch.tensor([3, 0], dtype=torch.int32)),
)
case(
    "int32_index_put",
    lambda x, i: x.index_put_((i,), torch.tensor(1.0)),
    lambda: (r(4), torch.tensor([3, 0], dtype=torch.int32)),
)
case(
    "int16_index_raises", lambda x, i: x[i], lambda: (r(4), torch.tensor([3, 0], dtype=torch.int16))
)
case(
    "uint8_index_mask",
    lambda x, i: x[i],
    lambda: (r(4), torch.tensor([1, 0, 1, 1], dtype=torch.uint8)),
)
case("index_with_bool_list", lambda x: x[[True, False, True]], lambda: (r(3),))
case("index_with_nested_list", lambda x: x[[[0, 1], [1, 2]]], lambda: (r(3, 2),))
case("index_neg_step_raises", lambda x: x[::-1], lambda: (r(3),))
case(
    "index_ellipsis_none",
    lambda x: (x[..., None, 1], x[None, ..., 0:1], x[1, ..., None]),
    lambda: (r(2, 3, 4),),
)
case(
    "index_tensor_0d_bool",
    lambda x: (x[torch.tensor(True)], x[torch.tensor(False)]),
    lambda: (r(2),),
)
case("index_out_of_range_slice_ok", lambda x: (x[5:], x[-10:2], x[2:1]), lambda: (r(3),))

# ============================================================================================
# creation ops, more
case("arange_neg_step_float", lambda x: torch.arange(1.0, 0.0, -0.1), lambda: (r(1),))
case(
    "arange_fp_accum",
    lambda x: (torch.arange(0, 1, 1 / 3), torch.arange(0.1, 0.5, 0.1), torch.arange(-5, 5, 0.1)),
    lambda: (r(1),),
)
case(
    "arange_int32_dtype_big",
    lambda x: torch.arange(2**31 - 3, 2**31 - 1, dtype=torch.int64),
    lambda: (r(1),),
)
case("arange_tensor_bound", lambda x: torch.arange(x.shape[0] * 2.5), lambda: (r(3),))
case("arange_uint8", lambda x: torch.arange(250, 256, dtype=torch.uint8), lambda: (r(1),))
case(
    "linspace_int_neg",
    lambda x: (
        torch.linspace(-5, 5, 4, dtype=torch.int64),
        torch.linspace(10, 0, 4, dtype=torch.int32),
    ),
    lambda: (r(1),),
)
case(
    "linspace_steps_two_ends",
    lambda x: (torch.linspace(1, 2, 2), torch.linspace(0, 1, 0)),
    lambda: (r(1),),
)
case("linspace_bf16", lambda x: torch.linspace(0, 100, 51, dtype=torch.bfloat16), lambda: (r(1),))
case(
    "logspace_base",
    lambda x: (torch.logspace(0, 3, 4, base=2), torch.logspace(-1, 1, 3, dtype=torch.float64)),
    lambda: (r(1),),
)
case(
    "full_bool_int",
    lambda x: (
        torch.full((2,), 5, dtype=torch.bool),
        torch.full((2,), 2.7, dtype=torch.int32),
        torch.full((2,), -1, dtype=torch.uint8),
    ),
    lambda: (r(1),),
)
case(
    "full_inherit_default_f64",
    lambda x: (torch.full((2,), 1.0), torch.tensor(1.5).dtype),
    lambda: (r(1),),
)
case(
    "tensor_mixed_list",
    lambda x: (
        torch.tensor([1, 2.5, True]),
        torch.tensor([[True, False]]),
        torch.tensor([1, 2], dtype=torch.uint8) - 3,
    ),
    lambda: (r(1),),
)
case("tensor_of_tensors_item", lambda x: torch.tensor([x[0].item(), 2.0]), lambda: (r(2),))
case("tensor_from_shape", lambda x: torch.tensor(x.shape), lambda: (r(2, 5),))
case(
    "zeros_like_noncontig",
    lambda x: (
        torch.zeros_like(x).stride(),
        torch.ones_like(x[:, ::2]).stride(),
        torch.empty_like(x.t()).stride(),
        torch.rand_like(x).stride(),
    ),
    lambda: (r(3, 4),),
)
case(
    "new_tensor_dtype",
    lambda x: (x.new_tensor([1, 2]), x.new_tensor([1.5]), x.new_ones(2, dtype=torch.int8)),
    lambda: (torch.zeros(1, dtype=torch.float16),),
)
case(
    "eye_dtype",
    lambda x: (torch.eye(2, dtype=torch.int64), torch.eye(3, 1, dtype=torch.bool)),
    lambda: (r(1),),
)
case("empty_strided_shape", lambda x: torch.empty_strided((2, 3), (1, 2)).stride(), lambda: (r(1),))
case(
    "randn_dtype",
    lambda x: (
        torch.randn(2, dtype=torch.float64).dtype,
        torch.rand(2, 3).shape,
        torch.randn(()).shape,
        torch.normal(0.0, 1.0, (2,)).dtype,
    ),
    lambda: (r(1),),
)
case(
    "randint_dtype_default",
    lambda x: (
        torch.randint(5, (3,)).dtype,
        torch.randint(0, 2**40, (3,)).dtype,
        torch.randint_like(x, 10).dtype,
    ),
    lambda: (r(2),),
)
case(
    "randperm_dtype",
    lambda x: (
        torch.randperm(4, dtype=torch.int32).dtype,
        torch.randperm(0).shape,
        torch.randperm(1),
    ),
    lambda: (r(1),),
)
case(
    "bernoulli_shape",
    lambda x: (torch.bernoulli(x.clamp(0, 1)).dtype, torch.bernoulli(x.clamp(0, 1), p=0.0)),
    lambda: (r(3),),
)
case(
    "multinomial_shape",
    lambda x: (
        torch.multinomial(x.abs() + 0.1, 2).shape,
        torch.multinomial(x.abs() + 0.1, 2).dtype,
    ),
    lambda: (r(4),),
)
case(
    "rand_bf16_range",
    lambda x: (
        (torch.rand(10000, dtype=torch.bfloat16) < 1).all(),
        (torch.rand(10000, dtype=torch.float16) < 1).all(),
    ),
    lambda: (r(1),),
)
case(
    "complex_creation",
    lambda x: (
        torch.complex(x, x),
        torch.polar(x.abs(), x),
        torch.view_as_complex(torch.stack([x, x], -1)),
    ),
    lambda: (r(3),),
)

# ============================================================================================
# scenarios: module buffers and globals
G = torch.zeros(3)


@scenario
def global_tensor_mutation(C, rec):
    global G
    G = torch.zeros(3)

    def f(x):
        G.add_(x)
        return G * 2

    out = C(f)(torch.ones(3))
    out2 = C(f)(torch.ones(3))
    rec("outs", [out, out2, G])


@scenario
def global_tensor_rebind(C, rec):
    global G
    G = torch.zeros(3)

    def f(x):
        global G
        G = G + x
        return G.sum()

    out = C(f)(torch.ones(3))
    out2 = C(f)(torch.ones(3))
    rec("outs", [out, out2, G])


@scenario
def buffer_mutation(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.int64))
            self.register_buffer("acc", torch.zeros(3))

        def forward(self, x):
            self.count += 1
            self.acc[1:].mul_(0.5).add_(x[1:])
            return x * self.count

    m = M()
    cm = C(m)
    outs = [cm(torch.ones(3)), cm(torch.ones(3) * 2)]
    rec("outs", outs + [m.count, m.acc])


@scenario
def buffer_replace(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.zeros(2))

        def forward(self, x):
            self.s = self.s + x
            return self.s * 1

    m = M()
    cm = C(m)
    outs = [cm(torch.ones(2)), cm(torch.ones(2))]
    rec("outs", outs + [m.s])


@scenario
def list_append_side_effect(C, rec):
    store = []

    def f(x):
        store.append(x * 2)
        return x + 1

    out = C(f)(torch.ones(2))
    rec("outs", [out] + store)


@scenario
def attribute_tensor_state(C, rec):
    class Obj:
        pass

    o = Obj()
    o.t = torch.zeros(2)

    def f(x):
        o.t[0] = x.sum()
        o.u = x * 3
        return x

    C(f)(torch.ones(2))
    rec("outs", [o.t, o.u])


@scenario
def input_mutated_and_error_after(C, rec):
    def f(x, i):
        x.add_(1)
        return x[i]

    x = torch.zeros(3)
    try:
        C(f)(x, torch.tensor([5]))
    finally:
        rec("x", x)


@scenario
def parameter_inplace_no_grad(C, rec):
    lin = nn.Linear(2, 2)
    torch.nn.init.constant_(lin.weight, 1.0)

    def f(x):
        with torch.no_grad():
            lin.weight.mul_(2)
        return lin(x)

    out = C(f)(torch.ones(1, 2))
    rec("outs", [out.detach(), lin.weight.detach()])


@scenario
def version_counter_after_mutation(C, rec):
    def f(x):
        x.add_(1)
        x[0] = 3
        return x.sum()

    x = torch.zeros(3)
    v0 = x._version
    C(f)(x)
    rec("versions", x._version - v0 > 0)


@scenario
def buffer_view_mutation(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2, 3))
            self.plain = torch.zeros(3)  # a tensor attribute, not a buffer

        def forward(self, x):
            self.buf[0] += x
            self.buf[:, 1].mul_(2)
            self.buf.t()[2].fill_(-1)
            self.plain.add_(x)
            return self.buf.sum() + self.plain.sum()

    m = M()
    cm = C(m)
    outs = [cm(torch.ones(3)), cm(torch.arange(3.0))]
    rec("outs", [*outs, m.buf, m.plain])


@scenario
def closure_tensor_mutation(C, rec):
    state = {"t": torch.zeros(3), "l": [torch.ones(2)]}
    cell = torch.zeros(2)

    def f(x):
        state["t"][1:] += x[1:]
        state["l"][0].mul_(3)
        cell.copy_(x[:2])
        return x * 2

    out = C(f)(torch.arange(3.0))
    out2 = C(f)(torch.arange(3.0) + 1)
    rec("outs", [out, out2, state["t"], state["l"][0], cell])


@scenario
def global_view_mutation(C, rec):
    global G
    G = torch.zeros(2, 3)

    def f(x):
        G[1].add_(x)
        G.t()[0].sub_(1)
        return G.clone()

    out = C(f)(torch.ones(3))
    rec("outs", [out, G])


@scenario
def mutation_of_input_seen_by_later_read(C, rec):
    def f(x, y):
        y.copy_(x * 2)
        return x + y, y.sum()

    x = torch.arange(3.0)
    out = C(f)(x, x)  # same tensor twice
    rec("outs", [*out, x])


@scenario
def parameter_mutation_in_forward(C, rec):
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.fill_(0.5)
        lin.bias.zero_()

    def f(x):
        with torch.no_grad():
            lin.weight.add_(1.0)
            lin.bias[0] = 3.0
        return lin(x)

    out = C(f)(torch.ones(1, 3))
    rec("outs", [out.detach(), lin.weight.detach(), lin.bias.detach()])
    rec("rg", [lin.weight.requires_grad, out.requires_grad])


@scenario
def batchnorm_num_batches(C, rec):
    bn = nn.BatchNorm1d(3, momentum=None)
    cbn = C(bn)
    for k in range(3):
        cbn(torch.randn(4, 3, generator=torch.Generator().manual_seed(k)))
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])


@scenario
def mutated_input_noncontig_strides(C, rec):
    def f(x):
        x.mul_(2)
        return x

    base = torch.arange(12.0).view(3, 4)
    x = base.t()
    out = C(f)(x)
    rec("outs", [out, base, out.stride(), out is x])


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
