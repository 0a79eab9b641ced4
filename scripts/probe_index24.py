"""Probe indexing, masking, scatter and gather as users write them (session 24): values,
gradients (and their None-ness), the inputs after the call (in-place writes), and errors
(eager's type and message, naming the user's line), against eager PyTorch.

    PYTHONPATH=. python scripts/probe_index24.py [substring ...]

Cases:
- ``case``: call the compiled function once; the outputs or the error, the inputs after the
  call, then a valid call of the same compiled function where ``good`` is given.
- ``grad``: the inputs made with ``requires_grad`` where ``make`` says so (``G(t)``); the
  outputs, then ``backward`` of a weighted sum of the floating outputs, the leaves' ``.grad``
  (None stays None) and the inputs after.
- ``train``: a module and its loss, one step (``backward``), the parameters' gradients and
  values after (``max_norm`` embeddings renormalize their weight in place).

Each runs under the default options and under ``strict`` (``/default``, ``/strict``).
Prints ``ok`` / ``DIFF`` / ``NOLINE`` (raised, without the user's line in the message or the
traceback) / ``CRASH`` per case. ``PROBE_MODE=strict`` runs one mode only.

Left (session 24), all Dynamo's with any backend (``backend="eager"`` too), before ours runs:
``TorchRuntimeError`` DIFFs are its fake run raising its own words where eager raises others
(``masked_fill`` with a 1-d value, a bool-less mask or a smaller target; ``scatter``/
``index_add`` shape checks; ``x[::-1]``; ``F.embedding``'s padding_idx assert; integer
indices that do not broadcast in a read); ``get_uint8`` and ``ce_uint8_target`` raise where
eager runs (a uint8 index, a uint8 target: Dynamo's fake kernels refuse them);
``dead_getitem_oob`` returns where eager raises (Dynamo drops the unused read);
``sel_augmented_oob`` changes nothing before its error (Dynamo's trace raises for the index
value it guards, before any of the frame runs).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import (
    describe,
    difference,
    observations,
    r,
    run,
    same_error_or_value,
    same_items,
)

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
torch._logging.set_logs(graph_breaks=False, recompiles=False)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}
MODES = {"default": {}, "strict": {"strict": True}}
ONLY_MODE = os.environ.get("PROBE_MODE")


def _register(name, fn, modes=None):
    for mode, options in MODES.items():
        if ONLY_MODE and mode != ONLY_MODE:
            continue
        if modes is not None and mode not in modes:
            continue
        key = f"{name}/{mode}"
        assert key not in CASES, key
        CASES[key] = (fn, options)


def G(t):
    """``t`` as a leaf that requires grad."""
    return t.detach().clone().requires_grad_()


def _state():
    """The global state a raising graph could leave changed."""
    return [
        torch.is_grad_enabled(),
        torch.is_autocast_enabled("cpu"),
        torch._C._autograd._saved_tensors_hooks_is_enabled(),
        torch._C._functorch.get_dynamic_layer_stack_depth(),
    ]


def case(name, f, make, good=None, modes=None, no_grad=False):
    def run(C, rec):
        compiled = C(f)
        args = make()
        try:
            if no_grad:
                with torch.no_grad():
                    rec("out", compiled(*args))
            else:
                rec("out", compiled(*args))
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("raised", e)
        rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        rec("state", _state())
        if good is not None:
            args = good()
            rec("good", compiled(*args))
            rec("good inputs", [a for a in args if isinstance(a, torch.Tensor)])

    _register(name, run, modes)


def _weights(t: torch.Tensor) -> torch.Tensor:
    # Distinct weights per element so that gradients tell positions apart.
    n = t.numel()
    return (torch.arange(n, dtype=torch.float64).reshape(t.shape) % 7 - 2.5).to(t.dtype)


def grad(name, f, make, modes=None):
    def run(C, rec):
        compiled = C(f)
        args = make()
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        try:
            out = compiled(*args)
            rec("out", out)
            outs = out if isinstance(out, (tuple, list)) else [out]
            loss = sum(
                (o * _weights(o)).sum()
                for o in outs
                if isinstance(o, torch.Tensor) and o.requires_grad
            )
            if isinstance(loss, torch.Tensor):
                loss.backward()
        except Exception as e:  # noqa: BLE001
            rec("raised", e)
        rec("grads", [a.grad for a in leaves])
        rec("inputs", [a.detach() for a in args if isinstance(a, torch.Tensor)])

    _register(f"grad_{name}", run, modes)


def train(name, build, make, good=None, modes=None):
    """``build()`` -> (module, loss_fn(module, *batch)); one step on ``make()``, the loss, its
    error, the gradients and the parameters after, then one on ``good()``."""

    def run(C, rec):
        torch.manual_seed(0)
        model, loss_fn = build()
        step = C(lambda *batch: loss_fn(model, *batch))
        try:
            loss = step(*make())
            loss.backward()
            rec("loss", loss)
        except Exception as e:  # noqa: BLE001
            rec("raised", e)
        rec("grads", [p.grad for p in model.parameters()])
        rec("params", [p.detach().clone() for p in model.parameters()])
        if good is not None:
            model.zero_grad()
            loss = step(*good())
            loss.backward()
            rec("good", [loss] + [p.grad for p in model.parameters()])
            rec("good params", [p.detach().clone() for p in model.parameters()])

    _register(f"train_{name}", run, modes)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.layout != torch.strided or y.layout != torch.strided:
            if x.layout != y.layout:
                return f"{path}: layout {x.layout} (xla) vs {y.layout} (eager)"
            x, y = x.to_dense(), y.to_dense()
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def describe_tb(v):
    """``describe``, an error's message followed by the frames of this file in its traceback
    (eager's own error after a graph break names the user's line there, as eager's does)."""
    d = describe(v)
    if d[0] == "E":
        tb, frames = v.__traceback__, []
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith(THIS):
                frames.append(f"{THIS}:{tb.tb_lineno}")
            tb = tb.tb_next
        d = (*d[:3], d[3] + (f"\n[traceback: {' '.join(frames)}]" if frames else ""))
    return d


def compare(name, entry):
    fn, options = entry

    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, options=options, **kw)

    exp = observations(fn, lambda f, **kw: f, describe_tb)
    got = observations(fn, C, describe_tb)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for _, g in got:
        if g[0] == "E" and THIS not in g[3]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:300]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def b(*values):
    return torch.tensor(values, dtype=torch.bool)


# ============================================================================================
# 1. t[mask] = v and friends, as users write them


def mask_set_scalar(t):
    t[t > 0] = 0.5
    return t


def mask_set_0d(t, v):
    t[t < 0] = v
    return t


def mask_set_values(t, v):
    t[t > 0] = v
    return t


def mask_iadd(t):
    t[t > 0] += 1
    return t


def mask_imul_clone(x):
    y = x.clone()
    y[y < 0] *= -2
    return y


def mask_set_from_self(x):
    y = x.clone()
    y[x > 0] = y[x > 0] * 2
    return y


def mask_rows_set_row(t, m, v):
    t[m] = v
    return t


def mask_set_int_into_float(t):
    t[t > 0] = 3
    return t


def mask_set_float_into_int(t):
    t[t > 0] = 2.7
    return t


def mask_set_f64_into_f32(t, v):
    t[t > 0] = v
    return t


case("mask_set_scalar", mask_set_scalar, lambda: (r(3, 4),))
case("mask_set_0d", mask_set_0d, lambda: (r(3, 4), torch.tensor(9.0)))
case("mask_set_values_ok", mask_set_values, lambda: (i(1, -1, 2, -3).float(), r(2)))
case("mask_set_values_count_diff", mask_set_values, lambda: (i(1, -1, 2, 3).float(), r(2)))
case("mask_set_values_1elem", mask_set_values, lambda: (i(1, -1, 2, 3).float(), r(1)))
case("mask_set_values_none_sel", mask_set_values, lambda: (i(-1, -1, -2).float(), r(0)))
case("mask_set_values_none_sel_1", mask_set_values, lambda: (i(-1, -1, -2).float(), r(1)))
case("mask_set_values_none_sel_2", mask_set_values, lambda: (i(-1, -1, -2).float(), r(2)))
case("mask_set_values_all_sel", mask_set_values, lambda: (i(1, 1, 2).float(), r(3)))
case("mask_iadd", mask_iadd, lambda: (r(3, 4),))
case("mask_iadd_int", mask_iadd, lambda: (i(1, -2, 3, 0, 5),))
case("mask_imul_clone", mask_imul_clone, lambda: (r(5, 2),))
case("mask_set_from_self", mask_set_from_self, lambda: (r(4, 3),))
case("mask_rows_set_row", mask_rows_set_row, lambda: (r(4, 3), b(1, 0, 1, 1), r(3)))
case("mask_rows_set_rows", mask_rows_set_row, lambda: (r(4, 3), b(1, 0, 1, 1), r(3, 3)))
case("mask_rows_set_rows_bad", mask_rows_set_row, lambda: (r(4, 3), b(1, 0, 1, 0), r(3, 3)))
case("mask_rows_set_col", mask_rows_set_row, lambda: (r(4, 3), b(1, 0, 1, 1), r(3, 1)))
case("mask_rows_uint8", mask_rows_set_row, lambda: (r(4, 3), i(1, 0, 1, 1, dtype=torch.uint8), 1.5))
case("mask_set_int_into_float", mask_set_int_into_float, lambda: (r(6),))
case("mask_set_float_into_int", mask_set_float_into_int, lambda: (i(1, -2, 3),))
case("mask_set_f64_into_f32", mask_set_f64_into_f32, lambda: (r(6), r(3, dtype=torch.float64)))
case("mask_0d_true", lambda t: t[torch.tensor(True)], lambda: (r(3),))
case("mask_0d_false", lambda t: t[torch.tensor(False)], lambda: (r(3),))
case("mask_0d_true_set", mask_rows_set_row, lambda: (r(3), torch.tensor(True), 2.0))
case("mask_0d_false_set", mask_rows_set_row, lambda: (r(3), torch.tensor(False), 2.0))


def mask_full_shape_wrong(t, m, v):
    t[m] = v
    return t


case(
    "mask_bad_shape",
    mask_full_shape_wrong,
    lambda: (r(4, 3), b(1, 0, 1), 1.0),
)
case("mask_get", lambda t: t[t > 0], lambda: (r(3, 4),))
case("mask_get_rows", lambda t, m: t[m], lambda: (r(4, 3), b(0, 1, 1, 0)))
case("mask_get_rows_sum", lambda t, m: t[m].sum(0) * 2, lambda: (r(4, 3), b(0, 1, 1, 0)))
case("mask_get_inner", lambda t, m: t[:, m], lambda: (r(4, 3), b(1, 0, 1)))
case("mask_where_instead", lambda t: torch.where(t > 0, t, 0.0), lambda: (r(3, 4),))
case("masked_fill_int_value", lambda t: t.masked_fill(t > 0, 7), lambda: (r(3, 4),))
case(
    "masked_fill_0d_value", lambda t, v: t.masked_fill(t > 0, v), lambda: (r(3), torch.tensor(2.0))
)
case(
    "masked_fill_1d_value",
    lambda t, v: t.masked_fill(t > 0, v),
    lambda: (r(3), torch.tensor([2.0])),
)
case(
    "masked_fill_bcast_mask",
    lambda t, m: t.masked_fill(m, -1.0),
    lambda: (r(3, 4), b(1, 0, 0, 1)),
)
case(
    "masked_fill_mask_bigger",
    lambda t, m: t.masked_fill(m, -1.0),
    lambda: (r(4), b(1, 0, 0, 1).expand(2, 4)),
)
case(
    "masked_fill__mask_bigger",
    lambda t, m: t.masked_fill_(m, -1.0),
    lambda: (r(4), b(1, 0, 0, 1).expand(2, 4)),
)
case("masked_fill_int_mask", lambda t, m: t.masked_fill(m, -1.0), lambda: (r(4), i(1, 0, 0, 1)))
case("masked_select", lambda t, m: torch.masked_select(t, m), lambda: (r(3, 4), b(1, 0, 0, 1)))


def masked_scatter_(t, m, src):
    t.masked_scatter_(m, src)
    return t


case("masked_scatter_ok", masked_scatter_, lambda: (r(4), b(1, 0, 1, 1), r(5)))
case("masked_scatter_few", masked_scatter_, lambda: (r(4), b(1, 0, 1, 1), r(2)))
case(
    "masked_scatter_few_nograd", masked_scatter_, lambda: (r(4), b(1, 0, 1, 1), r(2)), no_grad=True
)
case("masked_scatter_bcast", masked_scatter_, lambda: (r(2, 4), b(1, 0, 1, 1), r(7)))
case("masked_scatter_2d_src", masked_scatter_, lambda: (r(2, 3), b(1, 0, 1), r(2, 2)))
case(
    "masked_scatter_func_few_computed",
    lambda t: t.masked_scatter(t > -5, t[:2] * 2),
    lambda: (r(4),),
)


# ============================================================================================
# 2. t[idx] = v with duplicates, t[idx] += v, index_put_(accumulate=True)


def idx_set(t, idx, v):
    t[idx] = v
    return t


def idx_iadd(t, idx, v):
    t[idx] += v
    return t


def idx_accumulate(t, idx, v):
    return t.index_put_((idx,), v, accumulate=True)


case("idx_set_dup_same", idx_set, lambda: (r(5), i(1, 3, 1), torch.tensor(4.0)))
case("idx_set_dup_vals", idx_set, lambda: (r(5), i(1, 3, 1, 1), r(4)))
case("idx_set_dup_neg", idx_set, lambda: (r(5), i(1, -4, 4, -1), r(4)))
case("idx_set_dup_rows", idx_set, lambda: (r(4, 3), i(2, 0, 2), r(3, 3)))
case("idx_iadd_dup", idx_iadd, lambda: (r(5), i(1, 3, 1), r(3)))
case("idx_iadd_dup_int", idx_iadd, lambda: (i(0, 0, 0, 0), i(2, 2, 2), i(1, 1, 1)))
case("idx_iadd_dup_scalar", idx_iadd, lambda: (r(5), i(1, 1, 1), 1.0))
case("idx_accumulate_dup", idx_accumulate, lambda: (r(5), i(1, 3, 1, 1), r(4)))
case("idx_accumulate_dup_int", idx_accumulate, lambda: (i(0, 0, 0), i(2, 2, 0), i(5, 6, 7)))
case("idx_accumulate_bool", idx_accumulate, lambda: (b(0, 0, 1), i(0, 0, 1), b(1, 1, 0)))
case(
    "idx_accumulate_half",
    idx_accumulate,
    lambda: (r(3, dtype=torch.float16), i(0, 0, 0), r(3, dtype=torch.float16)),
)
case("idx_accumulate_oob", idx_accumulate, lambda: (r(5), i(1, 5), r(2)))
case("idx_accumulate_neg_oob", idx_accumulate, lambda: (r(5), i(1, -6), r(2)))
case("idx_set_oob", idx_set, lambda: (r(5), i(1, 5), r(2)))
case("idx_set_oob_nograd", idx_set, lambda: (r(5), i(1, 7), r(2)), no_grad=True)
case("idx_set_empty", idx_set, lambda: (r(5), i(dtype=torch.int64), r(0)))
case("idx_set_empty_scalar", idx_set, lambda: (r(5), i(dtype=torch.int64), 3.0))
case("idx_set_empty_bad_vals", idx_set, lambda: (r(5), i(dtype=torch.int64), r(2)))
case("idx_set_int32", idx_set, lambda: (r(5), i(1, -1, dtype=torch.int32), r(2)))
case("idx_set_int32_oob", idx_set, lambda: (r(5), i(1, -9, dtype=torch.int32), r(2)))
case("idx_set_0d", idx_set, lambda: (r(5, 2), torch.tensor(-2), r(2)))
case("idx_set_0d_oob", idx_set, lambda: (r(5, 2), torch.tensor(5), r(2)))
case("idx_set_uint8_as_mask", idx_set, lambda: (r(3), i(1, 0, 1, dtype=torch.uint8), 0.0))
case("idx_set_list", lambda t, v: idx_set(t, [0, 2, -1], v), lambda: (r(4), r(3)))
case(
    "idx_set_bool_list",
    lambda t, v: idx_set(t, [True, False, True, False], v),
    lambda: (r(4), r(2)),
)
case("idx_set_int16", idx_set, lambda: (r(4), i(0, 1, dtype=torch.int16), 1.0))
case("idx_set_float_idx", idx_set, lambda: (r(4), torch.tensor([0.0, 1.0]), 1.0))


def idx_set_2d(t, a, c, v):
    t[a, c] = v
    return t


case("idx_set_2d_bcast", idx_set_2d, lambda: (r(4, 5), i(0, 3)[:, None], i(1, 2, 4), r(2, 3)))
case("idx_set_2d_bcast_dup", idx_set_2d, lambda: (r(4, 5), i(0, 0)[:, None], i(1, 1, 4), r(2, 3)))
case("idx_set_2d_oob_second", idx_set_2d, lambda: (r(4, 5), i(0, 3), i(1, 5), 1.0))
case("idx_set_2d_bad_bcast", idx_set_2d, lambda: (r(4, 5), i(0, 3, 1), i(1, 2), 1.0))


# ============================================================================================
# 3. reading: mixed advanced indexing, slices, None, Ellipsis


case(
    "get_idx_slice_mask",
    lambda t, ix, m: t[ix, :, m],
    lambda: (r(4, 3, 5), i(0, 3, -1), b(1, 0, 1, 1, 0)),
)
case(
    "get_idx_slice_mask_bad",
    lambda t, ix, m: t[ix, :, m],
    lambda: (r(4, 3, 5), i(0, 3), b(1, 0, 1, 1, 0)),
)
case("get_ellipsis_idx", lambda t, ix: t[..., ix], lambda: (r(2, 3, 4), i(3, 0, -4)))
case("get_none_idx", lambda t, ix: t[None, ix], lambda: (r(4, 3), i(3, 0, -4)))
case("get_idx_none_idx", lambda t, a, c: t[a, None, c], lambda: (r(4, 3), i(3, 0), i(2, 1)))
case(
    "get_nonadjacent",
    lambda t, a, c: t[a, :, c],
    lambda: (r(4, 3, 5), i(3, 0)[:, None], i(2, 1, 4)),
)
case("get_adjacent_mid", lambda t, a, c: t[:, a, c], lambda: (r(2, 4, 5), i(3, 0), i(2, 4)))
case("get_bcast_outer", lambda t, a, c: t[a[:, None], c], lambda: (r(4, 5), i(3, 0, 1), i(2, 4)))
case("get_bcast_bad", lambda t, a, c: t[a, c], lambda: (r(4, 5), i(3, 0, 1), i(2, 4)))
case("get_neg_idx", lambda t, ix: t[ix], lambda: (r(4, 2), i(-1, -4, 0)))
case("get_neg_oob", lambda t, ix: t[ix], lambda: (r(4, 2), i(-1, -5, 0)))
case("get_oob_2nd_dim", lambda t, ix: t[:, ix], lambda: (r(4, 2), i(0, 2)))
case("get_oob_3rd_dim", lambda t, ix: t[:, :, ix], lambda: (r(4, 2, 3), i(0, 3)))
case("get_int32", lambda t, ix: t[ix], lambda: (r(4), i(3, -1, dtype=torch.int32)))
case("get_int32_oob", lambda t, ix: t[ix], lambda: (r(4), i(3, 4, dtype=torch.int32)))
case("get_uint8", lambda t, ix: t[ix], lambda: (r(4), i(1, 0, 0, 1, dtype=torch.uint8)))
case("get_0d_idx", lambda t, ix: t[ix], lambda: (r(4, 3), torch.tensor(-1)))
case("get_0d_idx_pair", lambda t, a, c: t[a, c], lambda: (r(4, 3), torch.tensor(1), i(0, 2)))
case("get_empty_idx", lambda t, ix: t[ix], lambda: (r(4, 3), i(dtype=torch.int64)))
case(
    "get_empty_idx_2d", lambda t, ix: t[ix], lambda: (r(4, 3), torch.zeros(2, 0, dtype=torch.int64))
)
case("get_list", lambda t: t[[0, 3, -1]], lambda: (r(4, 3),))
case("get_list_list", lambda t: t[[0, 3], [1, 2]], lambda: (r(4, 3),))
case("get_list_oob", lambda t: t[[0, 4]], lambda: (r(4, 3),))
case("get_bool_list", lambda t: t[[True, False, True, True]], lambda: (r(4, 3),))
case("get_bool_list_short", lambda t: t[[True, False, True]], lambda: (r(4, 3),))
case("get_slice_step", lambda t: t[1::2, ::3], lambda: (r(5, 7),))
case("get_slice_neg_bounds", lambda t: t[-3:-1, -100:100], lambda: (r(5, 7),))
case("get_slice_empty", lambda t: t[3:1], lambda: (r(5, 7),))
case("get_slice_neg_step", lambda t: t[::-1], lambda: (r(5),))
case("get_int_oob", lambda t: t[5], lambda: (r(5),))
case("get_int_neg_oob", lambda t: t[-6], lambda: (r(5),))
case("get_slice_then_idx", lambda t, ix: t[1:, ix][::2], lambda: (r(5, 4), i(3, 0, 3)))
case(
    "get_idx_computed",
    lambda t, x: t[(x * 3).long()],
    lambda: (r(4), torch.tensor([0.1, 0.9, 1.2])),
)
case(
    "get_idx_computed_oob",
    lambda t, x: t[(x * 3).long()],
    lambda: (r(4), torch.tensor([0.1, 0.9, 1.4])),
)
case("get_idx_argmax_plus", lambda t, x: t[x.argmax(-1) + 2], lambda: (r(4), r(3, 3)))
case(
    "get_idx_argmax_plus_nograd",
    lambda t, x: t[x.argmax(-1) + 2],
    lambda: (r(4), r(3, 3)),
    no_grad=True,
)
case("get_mask_and_idx", lambda t, m, ix: t[m, ix], lambda: (r(3, 4), b(1, 0, 1), i(0, 3)))
case("get_mask_and_idx_bad", lambda t, m, ix: t[m, ix], lambda: (r(3, 4), b(1, 1, 1), i(0, 3)))
case("get_two_masks", lambda t, m, n: t[m, n], lambda: (r(3, 4), b(1, 0, 1), b(0, 1, 0, 1)))
case("get_mask_2d_of_3d", lambda t, m: t[m], lambda: (r(3, 4, 2), r(3, 4) > 0))
case("get_mask_ellipsis", lambda t, m: t[..., m], lambda: (r(3, 4, 2), b(1, 0)))
case("get_idx_idx_set_mixed", lambda t, ix: t[ix][:, ix], lambda: (r(4, 4), i(3, 1)))


def set_nonadjacent(t, a, c, v):
    t[a, :, c] = v
    return t


case("set_nonadjacent", set_nonadjacent, lambda: (r(4, 3, 5), i(3, 0), i(2, 1), r(2, 3)))
case("set_nonadjacent_bcast_val", set_nonadjacent, lambda: (r(4, 3, 5), i(3, 0), i(2, 1), r(3)))
case("set_nonadjacent_bad_val", set_nonadjacent, lambda: (r(4, 3, 5), i(3, 0), i(2, 1), r(3, 2)))


def set_ellipsis(t, ix, v):
    t[..., ix] = v
    return t


case("set_ellipsis", set_ellipsis, lambda: (r(2, 3, 4), i(0, -1), r(2, 3, 2)))
case("set_ellipsis_oob", set_ellipsis, lambda: (r(2, 3, 4), i(0, 4), 0.0))


def set_slice_step(t, v):
    t[::2, 1::2] = v
    return t


case("set_slice_step", set_slice_step, lambda: (r(5, 4), r(3, 2)))
case("set_slice_step_bcast", set_slice_step, lambda: (r(5, 4), r(2)))
case("set_slice_neg", lambda t: idx_set(t, slice(-3, -1), 0.0), lambda: (r(5),))


def set_mask_idx(t, m, ix, v):
    t[m, ix] = v
    return t


case(
    "set_mask_idx_iadd",
    lambda t, m, ix: set_mask_idx(t, m, ix, t[m, ix] + 1),
    lambda: (r(3, 4), b(1, 0, 1), i(0, 3)),
)


def set_mask_inner(t, m, v):
    t[:, m] = v
    return t


case("set_mask_inner_val", set_mask_inner, lambda: (r(3, 4), b(1, 0, 0, 1), r(3, 2)))
case("set_mask_inner_bad", set_mask_inner, lambda: (r(3, 4), b(1, 0, 1, 1), r(3, 2)))


# ============================================================================================
# 4. ops with index arguments: values and out-of-range errors


case(
    "index_select_dup_neg_err", lambda t, ix: t.index_select(0, ix), lambda: (r(4, 2), i(1, 1, -1))
)
case(
    "index_select_int32",
    lambda t, ix: t.index_select(1, ix),
    lambda: (r(4, 3), i(2, 0, 2, dtype=torch.int32)),
)
case("index_select_0d_idx", lambda t, ix: t.index_select(0, ix), lambda: (r(4, 3), torch.tensor(3)))
case("index_select_0d_self", lambda t, ix: t.index_select(0, ix), lambda: (torch.tensor(3.0), i(0)))
case(
    "index_select_0d_self_oob",
    lambda t, ix: t.index_select(0, ix),
    lambda: (torch.tensor(3.0), i(1)),
)
case(
    "index_select_2d_idx",
    lambda t, ix: t.index_select(0, ix),
    lambda: (r(4, 3), i(0, 1, 2, 3).view(2, 2)),
)
case(
    "index_select_empty",
    lambda t, ix: t.index_select(0, ix),
    lambda: (r(4, 3), i(dtype=torch.int64)),
)
case(
    "index_select_computed_oob",
    lambda t, x: t.index_select(0, (x > 0).long().cumsum(0)),
    lambda: (r(3, 2), torch.tensor([1.0, 1, 1])),
)
case("gather_oob_dim1", lambda t, ix: t.gather(1, ix), lambda: (r(3, 4), i(0, 4, 1).view(3, 1)))
case("gather_smaller_idx", lambda t, ix: t.gather(1, ix), lambda: (r(3, 4), i(3, 0).view(1, 2)))
case(
    "gather_bigger_idx",
    lambda t, ix: t.gather(1, ix),
    lambda: (r(3, 4), i(3, 0, 1, 2, 0, 1, 2, 1).view(4, 2)),
)
case(
    "gather_empty",
    lambda t, ix: t.gather(1, ix),
    lambda: (r(3, 4), torch.zeros(3, 0, dtype=torch.int64)),
)
case("gather_int32_err", lambda t, ix: t.gather(0, ix), lambda: (r(3), i(0, dtype=torch.int32)))
case(
    "take_along_dim_oob",
    lambda t, ix: torch.take_along_dim(t, ix, 1),
    lambda: (r(3, 4), i(0, 4, 1).view(3, 1)),
)
case(
    "take_along_dim_neg",
    lambda t, ix: torch.take_along_dim(t, ix, 1),
    lambda: (r(3, 4), i(0, -1, 1).view(3, 1)),
)
case(
    "take_along_dim_bcast",
    lambda t, ix: torch.take_along_dim(t, ix, 1),
    lambda: (r(3, 4), i(0, 3).view(1, 2)),
)
case(
    "take_along_dim_none", lambda t, ix: torch.take_along_dim(t, ix), lambda: (r(3, 4), i(0, 11, 5))
)
case(
    "take_along_dim_none_oob",
    lambda t, ix: torch.take_along_dim(t, ix),
    lambda: (r(3, 4), i(0, 12)),
)
case("take_neg", lambda t, ix: torch.take(t, ix), lambda: (r(3, 4), i(-12, 11)))
case("take_neg_oob", lambda t, ix: torch.take(t, ix), lambda: (r(3, 4), i(-13, 11)))
case("take_empty_self", lambda t, ix: torch.take(t, ix), lambda: (r(0), i(0)))
case("scatter_oob", lambda t, ix, s: t.scatter(0, ix, s), lambda: (r(3), i(3), r(1)))
case("scatter_neg", lambda t, ix, s: t.scatter(0, ix, s), lambda: (r(3), i(-1), r(1)))
case(
    "scatter_value_oob", lambda t, ix: t.scatter(1, ix, 2.0), lambda: (r(2, 3), i(0, 3).view(2, 1))
)
case("scatter_add_oob", lambda t, ix, s: t.scatter_add(0, ix, s), lambda: (r(3), i(0, 3), r(2)))
case(
    "scatter_add_dup", lambda t, ix, s: t.scatter_add(0, ix, s), lambda: (r(3), i(0, 2, 0, 0), r(4))
)
case(
    "scatter_add__oob_nograd",
    lambda t, ix, s: t.scatter_add_(0, ix, s),
    lambda: (r(3), i(0, 3), r(2)),
    no_grad=True,
)
case(
    "scatter_reduce_oob",
    lambda t, ix, s: t.scatter_reduce(0, ix, s, "amax"),
    lambda: (r(3), i(0, -1), r(2)),
)
case(
    "scatter_reduce_mean_int",
    lambda t, ix, s: t.scatter_reduce(0, ix, s, "mean", include_self=False),
    lambda: (i(1, 2, 3), i(0, 0, 2), i(4, -7, 5)),
)
case(
    "scatter_reduce_mean_int_self",
    lambda t, ix, s: t.scatter_reduce(0, ix, s, "mean"),
    lambda: (i(1, 2, 3), i(0, 0, 2), i(4, -7, 5)),
)
case("scatter_src_smaller", lambda t, ix, s: t.scatter(0, ix, s), lambda: (r(4), i(0, 1, 2), r(2)))
case(
    "scatter_idx_bigger_than_self",
    lambda t, ix, s: t.scatter(1, ix, s),
    lambda: (r(2, 3), i(0, 1, 2, 0, 1, 2, 0, 1, 2).view(3, 3), r(3, 3)),
)
case(
    "scatter_legacy_reduce_add_oob",
    lambda t, ix, s: t.scatter(0, ix, s, reduce="add"),
    lambda: (r(3), i(0, 9), r(2)),
)
case("index_add_oob", lambda t, ix, s: t.index_add(0, ix, s), lambda: (r(3, 2), i(0, 3), r(2, 2)))
case("index_add_neg", lambda t, ix, s: t.index_add(0, ix, s), lambda: (r(3, 2), i(0, -1), r(2, 2)))
case(
    "index_add_dup_alpha",
    lambda t, ix, s: t.index_add(0, ix, s, alpha=2),
    lambda: (r(3, 2), i(0, 0, 2), r(3, 2)),
)
case("index_add_dim1_oob", lambda t, ix, s: t.index_add(1, ix, s), lambda: (r(3, 2), i(2), r(3, 1)))
case(
    "index_add_int_dup",
    lambda t, ix, s: t.index_add_(0, ix, s),
    lambda: (i(0, 0, 0), i(1, 1, 1), i(1, 2, 3)),
)
case(
    "index_add_src_mismatch",
    lambda t, ix, s: t.index_add(0, ix, s),
    lambda: (r(3, 2), i(0, 1), r(3, 2)),
)
case("index_copy_oob", lambda t, ix, s: t.index_copy(0, ix, s), lambda: (r(3, 2), i(0, 3), r(2, 2)))
case(
    "index_copy_neg", lambda t, ix, s: t.index_copy(0, ix, s), lambda: (r(3, 2), i(0, -1), r(2, 2))
)
case(
    "index_copy_dim1", lambda t, ix, s: t.index_copy(1, ix, s), lambda: (r(3, 4), i(3, 0), r(3, 2))
)
case("index_fill_neg", lambda t, ix: t.index_fill(1, ix, -1.0), lambda: (r(3, 4), i(-1, 0)))
case("index_fill_oob", lambda t, ix: t.index_fill(1, ix, -1.0), lambda: (r(3, 4), i(-5, 0)))
case(
    "index_fill_tensor_val",
    lambda t, ix, v: t.index_fill(0, ix, v),
    lambda: (r(3, 4), i(2, 0), torch.tensor(5.0)),
)
case("index_fill_dup", lambda t, ix: t.index_fill_(0, ix, 0.0), lambda: (r(3, 4), i(2, 2, 2)))
case(
    "index_reduce_oob",
    lambda t, ix, s: t.index_reduce(0, ix, s, "prod"),
    lambda: (r(3), i(0, 3), r(2)),
)
case(
    "index_reduce_amax_excl",
    lambda t, ix, s: t.index_reduce(0, ix, s, "amax", include_self=False),
    lambda: (r(3), i(0, 0), r(2)),
)
case(
    "put_dup_accumulate",
    lambda t, ix, s: t.put(ix, s, accumulate=True),
    lambda: (r(2, 3), i(0, 5, 0, -1), r(4)),
)
case("put_oob", lambda t, ix, s: t.put(ix, s), lambda: (r(2, 3), i(0, 6), r(2)))
case(
    "put__neg_oob_acc",
    lambda t, ix, s: t.put_(ix, s, accumulate=True),
    lambda: (r(2, 3), i(0, -7), r(2)),
)
case(
    "index_put_func_oob",
    lambda t, ix, v: torch.index_put(t, (ix,), v),
    lambda: (r(3), i(0, 3), r(2)),
)
case(
    "index_put_func_acc_oob",
    lambda t, ix, v: torch.index_put(t, (ix,), v, True),
    lambda: (r(3), i(0, -4), r(2)),
)
case(
    "index_put_mask_too_many_dims",
    lambda t, m, v: torch.index_put(t, (m,), v),
    lambda: (r(3), b(1, 0, 1, 1), r(1)),
)


# embeddings, one_hot, bincount, searchsorted, losses
case("embedding_oob", lambda ix, w: F.embedding(ix, w), lambda: (i(0, 4), r(4, 2)))
case("embedding_neg", lambda ix, w: F.embedding(ix, w), lambda: (i(0, -1), r(4, 2)))
case(
    "embedding_int32",
    lambda ix, w: F.embedding(ix, w),
    lambda: (i(0, 3, dtype=torch.int32), r(4, 2)),
)
case(
    "embedding_int32_oob",
    lambda ix, w: F.embedding(ix, w),
    lambda: (i(0, 9, dtype=torch.int32), r(4, 2)),
)
case(
    "embedding_padding_neg",
    lambda ix, w: F.embedding(ix, w, padding_idx=-1),
    lambda: (i(0, 3, 3), r(4, 2)),
)
case(
    "embedding_padding_oob",
    lambda ix, w: F.embedding(ix, w, padding_idx=4),
    lambda: (i(0, 3), r(4, 2)),
)
case(
    "embedding_max_norm_oob",
    lambda ix, w: F.embedding(ix, w, max_norm=1.0),
    lambda: (i(0, 4), r(4, 2)),
)
case(
    "embedding_max_norm_values",
    lambda ix, w: F.embedding(ix, w, max_norm=0.5),
    lambda: (i(0, 2, 0), r(4, 2) * 3),
)
case(
    "embedding_computed_oob",
    lambda x, w: F.embedding((x * 10).long(), w),
    lambda: (torch.tensor([0.05, 0.41]), r(4, 2)),
)
case(
    "embedding_bag_oob",
    lambda ix, off, w: F.embedding_bag(ix, w, off),
    lambda: (i(0, 4, 1), i(0, 2), r(4, 2)),
)
case(
    "embedding_bag_neg",
    lambda ix, off, w: F.embedding_bag(ix, w, off),
    lambda: (i(0, -1, 1), i(0, 2), r(4, 2)),
)
case(
    "embedding_bag_max_oob",
    lambda ix, off, w: F.embedding_bag(ix, w, off, mode="max"),
    lambda: (i(0, 4, 1), i(0, 2), r(4, 2)),
)
case(
    "embedding_bag_2d_oob",
    lambda ix, w: F.embedding_bag(ix, w),
    lambda: (i(0, 4, 1, 2).view(2, 2), r(4, 2)),
)
case(
    "embedding_bag_psw_oob",
    lambda ix, off, w, p: F.embedding_bag(ix, w, off, per_sample_weights=p, mode="sum"),
    lambda: (i(0, 7, 1), i(0, 2), r(4, 2), r(3)),
)
case(
    "embedding_bag_padding",
    lambda ix, off, w: F.embedding_bag(ix, w, off, padding_idx=1),
    lambda: (i(0, 1, 1, 2), i(0, 2, 3), r(4, 2)),
)
case(
    "embedding_bag_padding_mean",
    lambda ix, off, w: F.embedding_bag(ix, w, off, padding_idx=1, mode="mean"),
    lambda: (i(1, 1, 1, 2), i(0, 2, 3), r(4, 2)),
)
case(
    "embedding_bag_padding_max",
    lambda ix, off, w: F.embedding_bag(ix, w, off, padding_idx=1, mode="max"),
    lambda: (i(1, 1, 0, 2), i(0, 2, 3), r(4, 2)),
)
case("one_hot_oob", lambda ix: F.one_hot(ix, 3), lambda: (i(0, 3),))
case("one_hot_neg", lambda ix: F.one_hot(ix, 3), lambda: (i(0, -1),))
case("one_hot_computed_oob", lambda x: F.one_hot(x.argmax(-1) + 1, 3), lambda: (r(2, 3),))
case("one_hot_int32", lambda ix: F.one_hot(ix, 3), lambda: (i(0, 2, dtype=torch.int32),))
case("one_hot_empty", lambda ix: F.one_hot(ix, 3), lambda: (i(dtype=torch.int64),))
case("bincount_neg", lambda ix: torch.bincount(ix, minlength=3), lambda: (i(0, -1),))
case(
    "bincount_weights",
    lambda ix, w: torch.bincount(ix, w, minlength=5),
    lambda: (i(0, 1, 1, 4), r(4)),
)
case(
    "bincount_computed_neg",
    lambda x: torch.bincount((x * 2).long(), minlength=4),
    lambda: (torch.tensor([0.2, -0.6, 1.1]),),
)
case(
    "searchsorted_ok",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (torch.tensor([0.0, 1, 2, 3]), r(5)),
)
case(
    "searchsorted_sorter_oob",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (torch.tensor([3.0, 1, 2]), r(2), i(1, 2, 3)),
)
case(
    "searchsorted_sorter_neg",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (torch.tensor([3.0, 1, 2]), r(2), i(1, 2, -1)),
)
case(
    "searchsorted_sorter_ok",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o, right=True),
    lambda: (torch.tensor([3.0, 1, 2]), r(4), i(1, 2, 0)),
)
case(
    "searchsorted_side_conflict",
    lambda s, v: torch.searchsorted(s, v, right=False, side="right"),
    lambda: (torch.tensor([0.0, 1]), r(2)),
)
case(
    "bucketize_int32",
    lambda v, s: torch.bucketize(v, s, out_int32=True),
    lambda: (r(5), torch.tensor([0.0, 1])),
)
case("nll_oob", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), i(0, 4, 1)))
case("nll_oob_nograd", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), i(0, 4, 1)), no_grad=True)
case(
    "nll_ignore_oob_ok",
    lambda x, t: F.nll_loss(x, t, ignore_index=7),
    lambda: (r(3, 4), i(0, 7, 1)),
)
case("nll_ignore_all", lambda x, t: F.nll_loss(x, t, ignore_index=1), lambda: (r(3, 4), i(1, 1, 1)))
case("ce_ignore_all", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), i(-100, -100, -100)))
case(
    "ce_ignore_all_sum",
    lambda x, t: F.cross_entropy(x, t, reduction="sum"),
    lambda: (r(3, 4), i(-100, -100, -100)),
)
case(
    "ce_ignore_all_weight",
    lambda x, t, w: F.cross_entropy(x, t, weight=w),
    lambda: (r(3, 4), i(-100, -100, -100), r(4).abs()),
)
case(
    "ce_ignore_smoothing",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2),
    lambda: (r(3, 4), i(-100, 2, -100)),
)
case("ce_computed_oob", lambda x: F.cross_entropy(x, x.argmax(-1) + 1), lambda: (r(3, 4),))
case(
    "ce_int32_ok",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(3, 4), i(0, 3, 1, dtype=torch.int32)),
)
case(
    "ce_uint8_target",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(3, 4), i(0, 3, 1, dtype=torch.uint8)),
)
case("multi_margin_ok", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(3, 4), i(0, 3, 1)))


# ============================================================================================
# 5. gradients


grad("getitem_dup", lambda x, ix: x[ix] * 2, lambda: (G(r(4, 2)), i(1, 1, -3, 3)))
grad("getitem_mask", lambda x: x[x > 0].exp(), lambda: (G(r(3, 4)),))
grad("getitem_mask_rows", lambda x, m: x[m] ** 2, lambda: (G(r(4, 3)), b(1, 0, 1, 1)))
grad(
    "getitem_nonadjacent",
    lambda x, a, c: x[a, :, c],
    lambda: (G(r(4, 3, 5)), i(3, 3)[:, None], i(2, 1, 2)),
)
grad("getitem_slice_step", lambda x: x[1::2, :: -1 if False else 2] * 3, lambda: (G(r(5, 4)),))
grad("getitem_list_dup", lambda x: x[[0, 0, 2]], lambda: (G(r(4)),))
grad("getitem_empty", lambda x, ix: x[ix], lambda: (G(r(4)), i(dtype=torch.int64)))
grad("index_select_dup", lambda x, ix: x.index_select(1, ix), lambda: (G(r(3, 4)), i(1, 1, 0, 1)))
grad(
    "gather_dup",
    lambda x, ix: x.gather(1, ix),
    lambda: (G(r(3, 4)), i(1, 1, 0, 3, 3, 3).view(3, 2)),
)
grad(
    "gather_sparse_grad",
    lambda x, ix: torch.gather(x, 1, ix, sparse_grad=True),
    lambda: (G(r(3, 4)), i(1, 1, 0, 3, 3, 3).view(3, 2)),
    modes=("default",),  # (strict: unsupported, eager's gradient is sparse)
)
grad("take_dup", lambda x, ix: torch.take(x, ix), lambda: (G(r(3, 4)), i(1, 1, -1, 11)))
grad(
    "take_along_dim_dup",
    lambda x, ix: torch.take_along_dim(x, ix, 0),
    lambda: (G(r(3, 4)), i(2, 2, 2, 2).view(1, 4)),
)


def set_mask_grad(x, v):
    y = x * 1.5
    y[x > 0] = v
    return y


def set_mask_scalar_v_grad(x, v):
    y = x.clone()
    y[y > 0] = v  # v 0-d
    return y


def set_idx_grad(x, ix, v):
    y = x.clone()
    y[ix] = v
    return y


def iadd_idx_grad(x, ix, v):
    y = x.clone()
    y[ix] += v
    return y


def iadd_mask_grad(x, v):
    y = x.clone()
    y[x > 0] += v
    return y


grad("set_mask_values", set_mask_grad, lambda: (G(i(1, -1, 2, -3).float()), G(r(2))))
grad("set_mask_0d_value", set_mask_scalar_v_grad, lambda: (G(r(3, 4)), G(torch.tensor(2.0))))
grad("set_mask_1elem_value", set_mask_scalar_v_grad, lambda: (G(r(3, 4)), G(torch.tensor([2.0]))))
grad(
    "set_mask_none_sel_value",
    set_mask_scalar_v_grad,
    lambda: (G(-r(3, 4).abs()), G(torch.tensor(2.0))),
)
grad("set_mask_x_nograd", set_mask_scalar_v_grad, lambda: (r(3, 4), G(torch.tensor(2.0))))
grad("set_mask_v_nograd", set_mask_scalar_v_grad, lambda: (G(r(3, 4)), torch.tensor(2.0)))
grad("set_idx_dup", set_idx_grad, lambda: (G(r(5)), i(1, 3, 1, 1), G(r(4))))
grad("set_idx_dup_0d", set_idx_grad, lambda: (G(r(5)), i(1, 3, 1, 1), G(torch.tensor(3.0))))
grad("set_idx_dup_bcast", set_idx_grad, lambda: (G(r(5, 3)), i(1, 1), G(r(3))))
grad("iadd_idx_dup", iadd_idx_grad, lambda: (G(r(5)), i(1, 3, 1, 1), G(r(4))))
grad("iadd_mask", iadd_mask_grad, lambda: (G(r(3, 4)), G(torch.tensor(2.0))))
grad(
    "index_put_acc_dup",
    lambda x, ix, v: x.index_put((ix,), v, accumulate=True),
    lambda: (G(r(5)), i(1, 3, 1, 1), G(r(4))),
)
grad(
    "index_put_acc_dup_bcast",
    lambda x, ix, v: x.index_put((ix,), v, accumulate=True),
    lambda: (G(r(5, 2)), i(1, 3, 1), G(r(2))),
)
grad(
    "index_put_2idx_dup",
    lambda x, a, c, v: x.index_put((a, c), v),
    lambda: (G(r(3, 4)), i(1, 1, 0), i(2, 2, 3), G(r(3))),
)
grad(
    "scatter_dup",
    lambda x, ix, s: x.scatter(1, ix, s),
    lambda: (G(r(2, 4)), i(1, 1, 3, 3).view(2, 2), G(r(2, 2))),
)
grad(
    "scatter_value",
    lambda x, ix: x.scatter(1, ix, 0.5),
    lambda: (G(r(2, 4)), i(1, 1, 3, 3).view(2, 2)),
)
grad(
    "scatter_src_bigger", lambda x, ix, s: x.scatter(0, ix, s), lambda: (G(r(4)), i(3, 0), G(r(5)))
)
grad(
    "scatter_add_dup",
    lambda x, ix, s: x.scatter_add(0, ix, s),
    lambda: (G(r(3)), i(0, 2, 0, 0), G(r(4))),
)
grad(
    "scatter_add_src_bigger",
    lambda x, ix, s: x.scatter_add(1, ix, s),
    lambda: (G(r(2, 3)), i(0, 2, 0, 0).view(2, 2), G(r(3, 3))),
)
for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _incl in (True, False):
        grad(
            f"scatter_reduce_{_red}_{'incl' if _incl else 'excl'}",
            lambda x, ix, s, red=_red, incl=_incl: x.scatter_reduce(
                0, ix, s, red, include_self=incl
            ),
            lambda: (
                G(i(1, 2, 3, 0, 2).float()),
                i(0, 0, 1, 2, 2, 2),
                G(i(1, 2, 3, 3, 0, 3).float()),
            ),
        )
        grad(
            f"index_reduce_{_red}_{'incl' if _incl else 'excl'}",
            lambda x, ix, s, red=_red, incl=_incl: x.index_reduce(0, ix, s, red, include_self=incl),
            lambda: (
                G(i(1, 2, 3, 0, 2).float()),
                i(0, 0, 1, 2, 2, 2),
                G(i(1, 2, 3, 3, 0, 3).float()),
            ),
        ) if _red != "sum" else None
grad(
    "scatter_reduce_amax_2d_ties",
    lambda x, ix, s: x.scatter_reduce(1, ix, s, "amax"),
    lambda: (
        G(torch.tensor([[1.0, 5, 2], [3, 3, 3]])),
        i(0, 0, 1, 1, 2, 2).view(2, 3),
        G(torch.tensor([[5.0, 1, 5], [3, 1, 3]])),
    ),
)
grad(
    "scatter_reduce_prod_zeros",
    lambda x, ix, s: x.scatter_reduce(0, ix, s, "prod"),
    lambda: (G(torch.tensor([0.0, 2, 0])), i(0, 0, 1, 2, 2), G(torch.tensor([3.0, 0, 4, 0, 5]))),
)
grad(
    "scatter_legacy_mul",
    lambda x, ix, s: x.scatter(0, ix, s, reduce="multiply"),
    lambda: (G(r(3)), i(0, 2), G(r(2))),
)
grad(
    "index_add_dup",
    lambda x, ix, s: x.index_add(0, ix, s, alpha=-2),
    lambda: (G(r(3, 2)), i(0, 0, 2), G(r(3, 2))),
)
grad(
    "index_copy", lambda x, ix, s: x.index_copy(1, ix, s), lambda: (G(r(3, 4)), i(3, 0), G(r(3, 2)))
)
grad("index_fill_scalar", lambda x, ix: x.index_fill(1, ix, 2.0), lambda: (G(r(3, 4)), i(3, 0)))
grad(
    "index_fill_tensor",
    lambda x, ix, v: x.index_fill(1, ix, v),
    lambda: (G(r(3, 4)), i(3, 0, 3), G(torch.tensor(2.0))),
)
grad(
    "masked_fill_tensor",
    lambda x, v: x.masked_fill(x > 0, v),
    lambda: (G(r(3, 4)), G(torch.tensor(2.0))),
)
grad(
    "masked_fill_tensor_bcast_mask",
    lambda x, m, v: x.masked_fill(m, v),
    lambda: (G(r(3, 4)), b(1, 0, 1, 1), G(torch.tensor(2.0))),
)
grad(
    "masked_fill_mask_bigger",
    lambda x, m: x.masked_fill(m, 0.0),
    lambda: (G(r(4)), b(1, 0, 0, 1, 0, 0, 1, 1).view(2, 4)),
)
grad(
    "masked_scatter",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (G(r(2, 3)), b(1, 0, 1), G(r(5))),
)
grad(
    "masked_scatter_src_2d",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (G(r(4)), b(1, 0, 1, 1), G(r(2, 3))),
)
grad(
    "masked_select_bcast",
    lambda x, m: torch.masked_select(x, m),
    lambda: (G(r(4)), b(1, 0, 0, 1, 0, 0, 1, 1).view(2, 4)),
)
grad("put_dup", lambda x, ix, s: x.put(ix, s), lambda: (G(r(2, 3)), i(0, 5, 0), G(r(3))))
grad(
    "put_acc_dup",
    lambda x, ix, s: x.put(ix, s, accumulate=True),
    lambda: (G(r(2, 3)), i(0, 5, 0, -1), G(r(4))),
)
grad(
    "embedding_padding",
    lambda ix, w: F.embedding(ix, w, padding_idx=0),
    lambda: (i(0, 2, 0, 2, 3), G(r(4, 2))),
)
grad(
    "embedding_padding_neg",
    lambda ix, w: F.embedding(ix, w, padding_idx=-1),
    lambda: (i(0, 3, 3), G(r(4, 2))),
)
grad(
    "embedding_scale_grad",
    lambda ix, w: F.embedding(ix, w, scale_grad_by_freq=True),
    lambda: (i(0, 2, 0, 2, 2), G(r(4, 2))),
)
grad(
    "embedding_scale_grad_pad",
    lambda ix, w: F.embedding(ix, w, padding_idx=2, scale_grad_by_freq=True),
    lambda: (i(0, 2, 0, 2, 2), G(r(4, 2))),
)
grad(
    "embedding_max_norm",
    lambda ix, w: F.embedding(ix, w, max_norm=1.0),
    lambda: (i(0, 2, 0, 3), G(r(4, 2) * 3)),
)
grad(
    "embedding_max_norm_pad",
    lambda ix, w: F.embedding(ix, w, max_norm=1.0, padding_idx=0),
    lambda: (i(0, 2, 0, 3), G(r(4, 2) * 3)),
)
grad(
    "embedding_sparse",
    lambda ix, w: F.embedding(ix, w, sparse=True),
    lambda: (i(0, 2, 0), G(r(4, 2))),
    modes=("default",),
)
for _mode in ("sum", "mean", "max"):
    grad(
        f"embedding_bag_{_mode}",
        lambda ix, off, w, m=_mode: F.embedding_bag(ix, w, off, mode=m),
        lambda: (i(0, 2, 0, 3, 3), i(0, 2, 2), G(r(4, 2))),
    )
    grad(
        f"embedding_bag_{_mode}_pad",
        lambda ix, off, w, m=_mode: F.embedding_bag(ix, w, off, mode=m, padding_idx=3),
        lambda: (i(0, 2, 0, 3, 3), i(0, 2, 3), G(r(4, 2))),
    )
grad(
    "embedding_bag_psw",
    lambda ix, off, w, p: F.embedding_bag(ix, w, off, per_sample_weights=p, mode="sum"),
    lambda: (i(0, 2, 0, 3), i(0, 2), G(r(4, 2)), G(r(4))),
)
grad(
    "embedding_bag_max_norm",
    lambda ix, off, w: F.embedding_bag(ix, w, off, max_norm=1.0),
    lambda: (i(0, 2, 0, 3), i(0, 2), G(r(4, 2) * 3)),
)
grad(
    "nll_ignore",
    lambda x, t: F.nll_loss(x.log_softmax(1), t, ignore_index=1),
    lambda: (G(r(3, 4)), i(1, 2, 0)),
)
grad("ce_ignore_all", lambda x, t: F.cross_entropy(x, t), lambda: (G(r(3, 4)), i(-100, -100, -100)))
grad(
    "ce_ignore_all_smoothing",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda: (G(r(3, 4)), i(-100, -100, -100)),
)
grad(
    "ce_weight_ignore",
    lambda x, t, w: F.cross_entropy(x, t, weight=w, ignore_index=0),
    lambda: (G(r(3, 4)), i(0, 2, 3), G(r(4).abs())),
)
grad(
    "bincount_weights",
    lambda ix, w: torch.bincount(ix, w, minlength=5),
    lambda: (i(0, 1, 1, 4), G(r(4))),
)
grad("unused_idx_value", lambda x, ix, v: x[ix] * 2, lambda: (G(r(4)), i(0, 1), G(r(2))))
grad(
    "int_self_float_values",
    lambda x, ix, v: x.index_put((ix,), v.long()).float() + v.sum(),
    lambda: (i(0, 0, 0), i(1, 2), G(r(2))),
)


def leaf_setitem(x, ix):
    x[ix] = 0.0
    return x


grad("leaf_setitem_err", leaf_setitem, lambda: (G(r(4)), i(0, 1)))


def setitem_nograd_then_use(x, ix):
    with torch.no_grad():
        x[ix] = 0.0
    return x * 2


grad("leaf_setitem_nograd", setitem_nograd_then_use, lambda: (G(r(4)), i(0, 1)))


def view_setitem(x, ix, v):
    y = x * 1
    z = y[1:]
    z[ix] = v
    return y


grad("view_setitem", view_setitem, lambda: (G(r(5)), i(0, -1), G(r(2))))


def mask_from_other(x, y):
    out = x.clone()
    out[y > 0] = y[y > 0]
    return out


grad("mask_from_other", mask_from_other, lambda: (G(r(3, 4)), G(r(3, 4, seed=1))))


def gather_into_ce(logits, t):
    return -logits.log_softmax(-1).gather(-1, t.unsqueeze(-1)).squeeze(-1).mean()


grad("gather_ce_dup", gather_into_ce, lambda: (G(r(4, 5)), i(1, 1, 4, 1)))


def topk_gather(x):
    v, ix = x.topk(2, dim=1)
    return x.gather(1, ix) * v


grad("topk_gather", topk_gather, lambda: (G(r(3, 5)),))


def sort_scatter(x):
    v, ix = x.sort(dim=1)
    return torch.zeros_like(x).scatter(1, ix, v * 2)


grad("sort_scatter", sort_scatter, lambda: (G(r(3, 5)),))


# ============================================================================================
# 6. training steps with index ops inside (errors inside training graphs, and gradients)


class Tagger(nn.Module):
    def __init__(self, vocab=6, dim=4, classes=3, **emb):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, **emb)
        self.out = nn.Linear(dim, classes)

    def forward(self, ix):
        return self.out(self.emb(ix))


def tagger_loss(model, ix, t):
    logits = model(ix)
    return F.cross_entropy(logits.flatten(0, 1), t.flatten())


def _tagger(**emb):
    return lambda: (Tagger(**emb), tagger_loss)


_IX, _T = (lambda: i(0, 5, 2, 1).view(2, 2)), (lambda: i(0, 2, 1, 1).view(2, 2))
train("tagger_ok", _tagger(), lambda: (_IX(), _T()))
train("tagger_emb_oob", _tagger(), lambda: (_IX() + 1, _T()), lambda: (_IX(), _T()))
train("tagger_target_oob", _tagger(), lambda: (_IX(), _T() + 1), lambda: (_IX(), _T()))
train("tagger_padding", _tagger(padding_idx=0), lambda: (_IX(), _T()))
train("tagger_max_norm", _tagger(max_norm=0.5), lambda: (_IX(), _T()), lambda: (_IX(), _T()))
train(
    "tagger_max_norm_oob", _tagger(max_norm=0.5), lambda: (_IX() + 1, _T()), lambda: (_IX(), _T())
)
train("tagger_scale_freq", _tagger(scale_grad_by_freq=True), lambda: (_IX() * 0 + 2, _T()))


class Pointer(nn.Module):
    """Picks positions computed from its own scores (indices computed inside the graph)."""

    def __init__(self, n=5, dim=3):
        super().__init__()
        self.proj = nn.Linear(dim, 1)
        self.table = nn.Parameter(torch.randn(n, dim))

    def forward(self, x, shift):
        scores = self.proj(x).squeeze(-1)
        ix = scores.argmax(-1) + shift
        picked = self.table[ix]
        gathered = x.gather(
            1, ix.view(-1, 1, 1).expand(-1, 1, x.shape[-1]).clamp(max=x.shape[1] - 1)
        )
        return picked.sum() + gathered.sum() + scores.sum()


def pointer_loss(model, x, shift):
    return model(x, shift)


train("pointer_ok", lambda: (Pointer(), pointer_loss), lambda: (r(2, 4, 3), 0))
train(
    "pointer_oob",
    lambda: (Pointer(), pointer_loss),
    lambda: (r(2, 4, 3), 5),
    lambda: (r(2, 4, 3), 0),
)


class MaskedWrite(nn.Module):
    """Writes a parameter into the masked positions of an activation (``h[mask] = p``)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.fill = nn.Parameter(torch.tensor(0.5))
        self.rows = nn.Parameter(torch.randn(4))

    def forward(self, x, pad):
        h = self.lin(x)
        h[pad] = self.fill
        h[h > 1.0] += self.rows[0]
        h[:, 0] = self.rows[1:3].sum()
        return h


def masked_write_loss(model, x, pad):
    return (model(x, pad) ** 2).sum()


train("masked_write", lambda: (MaskedWrite(), masked_write_loss), lambda: (r(3, 4), b(1, 0, 1)))
train("masked_write_all", lambda: (MaskedWrite(), masked_write_loss), lambda: (r(3, 4), b(1, 1, 1)))
train(
    "masked_write_none", lambda: (MaskedWrite(), masked_write_loss), lambda: (r(3, 4), b(0, 0, 0))
)


class ScatterPool(nn.Module):
    """Graph pooling: segment sums/means/maxes of node features by a batch vector."""

    def __init__(self, reduce):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.reduce = reduce

    def forward(self, x, batch):
        h = self.lin(x)
        out = torch.zeros(3, 3).scatter_reduce(
            0, batch[:, None].expand_as(h), h, self.reduce, include_self=False
        )
        return out


def pool_loss(model, x, batch):
    return (model(x, batch) * torch.arange(9.0).view(3, 3)).sum()


for _red in ("sum", "mean", "amax", "amin", "prod"):
    train(
        f"scatter_pool_{_red}",
        lambda red=_red: (ScatterPool(red), pool_loss),
        lambda: (r(5, 3), i(0, 0, 2, 2, 2)),
    )
train(
    "scatter_pool_oob",
    lambda: (ScatterPool("sum"), pool_loss),
    lambda: (r(5, 3), i(0, 0, 2, 2, 3)),
    lambda: (r(5, 3), i(0, 0, 2, 2, 2)),
)


# ============================================================================================
# 7. dynamic shapes and bucketing (padded programs): indices at the real sizes


def dyn(name, f, makes, modes=None, grad_of=None):
    """Compiled with ``dynamic=True`` (bucketing on by default), called on each of ``makes``
    in turn: outputs or errors and the inputs after each call."""

    def run(C, rec):
        compiled = C(f, dynamic=True)
        for k, make in enumerate(makes):
            args = make()
            try:
                out = compiled(*args)
                rec(f"out{k}", out)
                if grad_of is not None:
                    out.sum().backward()
                    rec(f"grad{k}", args[grad_of].grad)
            except Exception as e:  # noqa: BLE001
                rec(f"raised{k}", e)
            rec(f"inputs{k}", [a.detach() for a in args if isinstance(a, torch.Tensor)])

    _register(f"dyn_{name}", run, modes)


def _n(n, seed=0):
    return r(n, 3, seed=seed)


dyn(
    "getitem_last_idx",
    lambda x, ix: x[ix],
    [lambda: (_n(5), i(-1, 0)), lambda: (_n(6), i(-1, 2)), lambda: (_n(7), i(-7, 6))],
)
dyn(
    "getitem_oob_real",
    lambda x, ix: x[ix],
    [lambda: (_n(5), i(4)), lambda: (_n(6), i(6)), lambda: (_n(7), i(7))],
)
dyn(
    "getitem_neg_oob_real",
    lambda x, ix: x[ix],
    [lambda: (_n(5), i(-5)), lambda: (_n(6), i(-7)), lambda: (_n(7), i(-8))],
)
dyn(
    "index_select_oob_real",
    lambda x, ix: x.index_select(0, ix) * 2,
    [lambda: (_n(5), i(4)), lambda: (_n(6), i(6)), lambda: (_n(7), i(7))],
)
dyn(
    "gather_oob_real",
    lambda x, ix: x.gather(0, ix) + 1,
    [lambda: (_n(5), i(4, 0, 1).view(1, 3)), lambda: (_n(6), i(6, 0, 1).view(1, 3))],
)
dyn(
    "gather_along_dyn",
    lambda x, ix: x.gather(0, ix.expand(x.shape[0], 3) % x.shape[0]),
    [lambda: (_n(5), i(4, 0, 1).view(1, 3)), lambda: (_n(6), i(5, 0, 1).view(1, 3))],
)
dyn(
    "scatter_add_dyn",
    lambda x, ix, s: x.scatter_add(0, ix, s),
    [
        lambda: (_n(5), i(4, 0, 1).view(1, 3), r(1, 3)),
        lambda: (_n(6), i(6, 0, 1).view(1, 3), r(1, 3)),
    ],
)
dyn(
    "embedding_dyn_vocab",
    lambda ix, w: F.embedding(ix, w),
    [lambda: (i(0, 4), _n(5)), lambda: (i(5, 1), _n(6)), lambda: (i(7, 1), _n(7))],
)
dyn(
    "embedding_dyn_tokens",
    lambda ix, w: F.embedding(ix, w),
    [
        lambda: (i(0, 4, 1), _n(5)),
        lambda: (i(0, 4, 1, 2, 3), _n(5)),
        lambda: (i(0, 5, 1, 2), _n(5)),
    ],
)
dyn(
    "ce_dyn_batch",
    lambda x, t: F.cross_entropy(x, t),
    [
        lambda: (r(3, 4), i(0, 3, 1)),
        lambda: (r(5, 4), i(0, 3, 1, 2, 3)),
        lambda: (r(6, 4), i(0, 3, 1, 2, 3, 4)),
    ],
)
dyn(
    "ce_dyn_ignore",
    lambda x, t: F.cross_entropy(x, t),
    [lambda: (r(3, 4), i(-100, 3, 1)), lambda: (r(5, 4), i(-100, -100, -100, -100, -100))],
)
dyn(
    "mask_set_dyn",
    mask_set_scalar,
    [lambda: (r(5, 3),), lambda: (r(6, 3, seed=1),), lambda: (r(7, 3, seed=2),)],
)
dyn(
    "mask_set_values_dyn",
    mask_set_values,
    [
        lambda: (i(1, -1, 2, -3, 5).float(), r(3)),
        lambda: (i(1, -1, 2, -3, 5, 6).float(), r(4)),
        lambda: (i(1, -1, 2, -3, 5, -6).float(), r(4)),
    ],
)
dyn(
    "idx_set_neg_dyn",
    idx_set,
    [lambda: (_n(5), i(-1), 1.0), lambda: (_n(6), i(-1), 1.0), lambda: (_n(7), i(-2, -7), 1.0)],
)
dyn(
    "idx_accumulate_dyn",
    idx_accumulate,
    [
        lambda: (r(5), i(-1, 4), r(2)),
        lambda: (r(6), i(-1, 4), r(2)),
        lambda: (r(7), i(-1, 7), r(2)),
    ],
)
dyn(
    "take_dyn",
    lambda x, ix: torch.take(x, ix),
    [lambda: (_n(5), i(-1, 14)), lambda: (_n(6), i(-1, 17)), lambda: (_n(6), i(-1, 18))],
)
dyn(
    "masked_fill_dyn_sum",
    lambda x: x.masked_fill(x > 0, 0.0).sum(0),
    [lambda: (_n(5),), lambda: (_n(6, 1),), lambda: (_n(7, 2),)],
)
dyn(
    "scatter_reduce_amax_dyn",
    lambda x, ix, s: x.scatter_reduce(0, ix, s, "amax", include_self=False),
    [
        lambda: (r(5), i(4, 0, 4), r(3)),
        lambda: (r(6), i(5, 0, 5), r(3)),
        lambda: (r(7), i(5, 0, 7), r(3)),
    ],
)
dyn(
    "index_add_dyn",
    lambda x, ix, s: x.index_add(0, ix, s),
    [lambda: (_n(5), i(4, 4), r(2, 3)), lambda: (_n(6), i(5, -1), r(2, 3))],
)
dyn(
    "searchsorted_dyn",
    lambda s, v: torch.searchsorted(s, v),
    [
        lambda: (torch.arange(5.0), r(3)),
        lambda: (torch.arange(6.0), r(3)),
        lambda: (torch.arange(7.0), r(4) * 4),
    ],
)
dyn(
    "topk_gather_dyn",
    lambda x: x.gather(1, x.topk(2, dim=1).indices),
    [lambda: (r(3, 5),), lambda: (r(3, 6),), lambda: (r(3, 7),)],
)
dyn(
    "argmax_getitem_dyn",
    lambda x, y: y[x.argmax(0)],
    [lambda: (_n(5), r(3, 2)), lambda: (_n(6), r(3, 2))],
)


# ============================================================================================
# 8. more of what users write


def init_rows_nograd(w, ix):
    with torch.no_grad():
        w[ix] = 0.0
    return w * 1


grad("init_rows_nograd", init_rows_nograd, lambda: (G(r(4, 2)), i(1, 3)))


def where_tuple(x):
    rows, cols = torch.where(x > 0)
    return x[rows, cols] * 2


case("where_tuple_getitem", where_tuple, lambda: (r(3, 4),))
case("nonzero_as_tuple", lambda x: x[(x > 0).nonzero(as_tuple=True)], lambda: (r(3, 4),))
case(
    "gather_expanded_idx",
    lambda x, ix: x.gather(1, ix.expand(3, 2)),
    lambda: (r(3, 4), i(3, 0).view(1, 2)),
)
case(
    "gather_expanded_idx_oob",
    lambda x, ix: x.gather(1, ix.expand(3, 2)),
    lambda: (r(3, 4), i(3, 4).view(1, 2)),
)


def set_transposed(x, ix, v):
    y = x.t()
    y[:, ix] = v
    return x


case("set_transposed_input", set_transposed, lambda: (r(3, 4), i(2, 0), r(4, 2)))
case("set_view_offset", lambda x, ix, v: idx_set(x[1:], ix, v), lambda: (r(5, 2), i(0, -1), r(2)))


def set_from_other(x, y, a, c):
    x[a] = y[c]
    return x


case("set_from_other_dup", set_from_other, lambda: (r(5), r(6), i(0, 0, 4), i(5, 1, 1)))
case(
    "set_from_self_overlap",
    lambda x, a, c: set_from_other(x, x, a, c),
    lambda: (r(5), i(0, 1, 2), i(1, 2, 3)),
)


def scatter_inplace_dup(x, ix, s):
    x.scatter_(0, ix, s)
    return x


case("scatter__dup", scatter_inplace_dup, lambda: (r(4), i(1, 1, 2), r(3)))
case("list_dup_iadd", lambda t, v: idx_iadd(t, [0, 0, 2], v), lambda: (r(4), r(3)))
case(
    "index_add_int32",
    lambda t, ix, s: t.index_add_(0, ix, s),
    lambda: (r(3, 2), i(0, 2, dtype=torch.int32), r(2, 2)),
)
case(
    "index_copy_int32_err",
    lambda t, ix, s: t.index_copy(0, ix, s),
    lambda: (r(3, 2), i(0, 2, dtype=torch.int32), r(2, 2)),
)
case(
    "gather_sparse_grad_infer",
    lambda x, ix: torch.gather(x, 1, ix, sparse_grad=True),
    lambda: (r(3, 4), i(1, 1, 0, 3, 3, 3).view(3, 2)),
)
case(
    "one_hot_scatter_labels",
    lambda t: torch.zeros(t.shape[0], 4).scatter_(1, t.unsqueeze(1), 1.0),
    lambda: (i(0, 3, 1),),
)
case(
    "one_hot_scatter_labels_oob",
    lambda t: torch.zeros(t.shape[0], 4).scatter_(1, t.unsqueeze(1), 1.0),
    lambda: (i(0, 4, 1),),
)
case(
    "label_smooth_scatter",
    lambda x, t: torch.full_like(x, 0.1).scatter(1, t[:, None], 0.9),
    lambda: (r(3, 4), i(0, 3, 1)),
)


def counter_index(buf, step, v):
    buf[step] = v
    step += 1
    return buf, step


case("counter_tensor_index", counter_index, lambda: (r(4, 2), torch.tensor(1), r(2)))
case("counter_tensor_index_oob", counter_index, lambda: (r(4, 2), torch.tensor(4), r(2)))
case("argmax_select", lambda x: x[x.argmax()], lambda: (r(5),))
case("argmax_row", lambda x: x[x.sum(1).argmax()] * 2, lambda: (r(4, 3),))


# ============================================================================================
# 9. dtypes: half precision accumulation with many duplicates, complex, int overflow


def _many(dtype, n=600):
    return (
        torch.zeros(3, dtype=dtype),
        torch.zeros(n, dtype=torch.int64),
        torch.ones(n, dtype=dtype),
    )


for _dt in (torch.bfloat16, torch.float16):
    _tag = str(_dt).split(".")[1]
    case(f"accumulate_many_{_tag}", idx_accumulate, lambda dt=_dt: _many(dt))
    case(f"iadd_many_{_tag}", idx_iadd, lambda dt=_dt: _many(dt))
    case(f"index_add_many_{_tag}", lambda t, ix, s: t.index_add(0, ix, s), lambda dt=_dt: _many(dt))
    case(
        f"put_acc_many_{_tag}",
        lambda t, ix, s: t.put(ix, s, accumulate=True),
        lambda dt=_dt: _many(dt),
    )
    case(
        f"scatter_add_many_{_tag}",
        lambda t, ix, s: t.scatter_add(0, ix, s),
        lambda dt=_dt: _many(dt),
    )
    case(
        f"index_reduce_mean_many_{_tag}",
        lambda t, ix, s: t.index_reduce(0, ix, s, "mean"),
        lambda dt=_dt: _many(dt),
    )
    case(
        f"embedding_bag_many_{_tag}",
        lambda ix, w: F.embedding_bag(ix.view(1, -1), w, mode="sum"),
        lambda dt=_dt: (torch.zeros(600, dtype=torch.int64), torch.ones(3, 2, dtype=dt)),
    )
    grad(
        f"embedding_grad_many_{_tag}",
        lambda ix, w: F.embedding(ix, w),
        lambda dt=_dt: (torch.zeros(600, dtype=torch.int64), G(torch.ones(3, 2, dtype=dt))),
    )
    grad(
        f"gather_grad_many_{_tag}",
        lambda x, ix: x.gather(0, ix),
        lambda dt=_dt: (G(torch.ones(3, dtype=dt)), torch.zeros(600, dtype=torch.int64)),
    )
    for _op, _fn in (
        ("index_select", lambda x, ix: x.index_select(0, ix)),
        ("take", lambda x, ix: torch.take(x, ix)),
        ("take_along_dim", lambda x, ix: torch.take_along_dim(x, ix, 0)),
        ("put_values", lambda x, ix: torch.zeros(3, dtype=x.dtype).put(ix[:1], x[:1])),
        ("expand_getitem", lambda x, ix: x[ix].expand(2, -1)),
        ("index_2d", lambda x, ix: x.view(3, 1)[ix, ix]),
    ):
        grad(
            f"{_op}_grad_many_{_tag}",
            _fn,
            lambda dt=_dt: (G(torch.ones(3, dtype=dt)), torch.zeros(600, dtype=torch.int64)),
        )
    grad(
        f"embedding_bag_grad_many_{_tag}",
        lambda ix, w: F.embedding_bag(ix.view(1, -1), w, mode="mean"),
        lambda dt=_dt: (torch.zeros(600, dtype=torch.int64), G(torch.ones(3, 2, dtype=dt))),
    )
    grad(
        f"getitem_grad_many_{_tag}",
        lambda x, ix: x[ix],
        lambda dt=_dt: (G(torch.ones(3, dtype=dt)), torch.zeros(600, dtype=torch.int64)),
    )

_C = lambda *shape: torch.randn(
    *shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0)
)
case("complex_gather", lambda x, ix: x.gather(1, ix), lambda: (_C(3, 4), i(1, 3, 0).view(3, 1)))
case("complex_setitem_mask", lambda x: mask_rows_set_row(x, x.real > 0, 1j), lambda: (_C(3, 4),))
case("complex_index_put_acc", idx_accumulate, lambda: (_C(4), i(1, 1, 3), _C(3)))
case(
    "complex_scatter_add",
    lambda x, ix, s: x.scatter_add(0, ix, s),
    lambda: (_C(4), i(1, 1, 3), _C(3)),
)
case(
    "complex_index_add",
    lambda x, ix, s: x.index_add(0, ix, s, alpha=2),
    lambda: (_C(4), i(1, 1, 3), _C(3)),
)
grad("complex_getitem", lambda x, ix: torch.view_as_real(x[ix]), lambda: (G(_C(4)), i(1, 1, 3)))
grad(
    "complex_index_put",
    lambda x, ix, v: torch.view_as_real(x.index_put((ix,), v)),
    lambda: (G(_C(4)), i(1, 3), G(_C(2))),
)
case("int8_set_overflow", idx_set, lambda: (torch.zeros(3, dtype=torch.int8), i(0), 300))
case(
    "int8_mask_set_overflow",
    lambda t: mask_rows_set_row(t, t == 0, 300),
    lambda: (torch.zeros(3, dtype=torch.int8),),
)
case(
    "uint8_index_fill_neg",
    lambda t, ix: t.index_fill(0, ix, -1),
    lambda: (torch.zeros(3, dtype=torch.uint8), i(0)),
)
case(
    "bool_scatter_add",
    lambda t, ix, s: t.scatter_add(0, ix, s),
    lambda: (b(0, 0, 0), i(1, 1), b(1, 1)),
)
case(
    "int_index_add_alpha",
    lambda t, ix, s: t.index_add(0, ix, s, alpha=3),
    lambda: (i(1, 2, 3), i(1, 1), i(5, 6)),
)
case(
    "masked_fill_int_overflow",
    lambda t: t.masked_fill(t == 0, 1000),
    lambda: (torch.zeros(3, dtype=torch.int8),),
)


# ============================================================================================
# 10. second derivatives through index ops (gradient penalties)


def grad2(name, f, make):
    def run(C, rec):
        compiled = C(f)
        x, *rest = make()
        try:
            out = compiled(x, *rest)
            (g,) = torch.autograd.grad((out * _weights(out)).sum(), x, create_graph=True)
            rec("g", g)
            (g.pow(2) * _weights(g)).sum().backward()
            rec("gg", x.grad)
        except Exception as e:  # noqa: BLE001
            rec("raised", e)

    _register(f"grad2_{name}", run)


grad2(
    "gather",
    lambda x, ix: x.gather(1, ix).pow(3),
    lambda: (G(r(3, 4)), i(1, 1, 3, 0, 2, 2).view(3, 2)),
)
grad2("getitem_dup", lambda x, ix: x[ix].sin(), lambda: (G(r(4)), i(1, 1, 3)))
grad2(
    "index_put_acc",
    lambda x, ix: x.index_put((ix,), x[ix] ** 2, accumulate=True),
    lambda: (G(r(4)), i(1, 1, 3)),
)
grad2(
    "scatter_reduce_amax",
    lambda x, ix: torch.zeros(3).scatter_reduce(0, ix, x**2, "amax", include_self=False),
    lambda: (G(r(4)), i(0, 0, 2, 2)),
)
grad2("masked_fill", lambda x: x.masked_fill(x > 0, 0.0) ** 3, lambda: (G(r(5)),))
grad2("embedding", lambda w, ix: F.embedding(ix, w).pow(2), lambda: (G(r(4, 2)), i(1, 1, 3)))


# ============================================================================================
# 11. index ops inside control flow, transforms, checkpoints; dead ones; overlapping writes


def cond_gather(x, ix):
    return torch.cond(x.sum() > 0, lambda x, ix: x.gather(0, ix), lambda x, ix: x[:2] * 0, (x, ix))


case("cond_gather_ok", cond_gather, lambda: (r(4).abs(), i(3, 0)))
case("cond_gather_oob_taken", cond_gather, lambda: (r(4).abs(), i(4, 0)))
case("cond_gather_oob_untaken", cond_gather, lambda: (-r(4).abs(), i(4, 0)))


def map_getitem(xs, ix):
    from torch._higher_order_ops.map import map as hop_map

    return hop_map(lambda x, ix: x[ix], xs, ix)


case("map_getitem_oob", map_getitem, lambda: (r(3, 4), i(1, 4)))
case(
    "vmap_getitem",
    lambda xs, ixs: torch.vmap(lambda x, i: x[i])(xs, ixs),
    lambda: (r(3, 4), i(1, -1, 3)),
)
case(
    "vmap_getitem_oob",
    lambda xs, ixs: torch.vmap(lambda x, i: x[i])(xs, ixs),
    lambda: (r(3, 4), i(1, 4, 3)),
)
case(
    "vmap_gather",
    lambda xs, ixs: torch.vmap(lambda x, i: x.gather(0, i))(xs, ixs),
    lambda: (r(3, 4), i(1, 2, 3, 0, 0, 0).view(3, 2)),
)
case(
    "vmap_index_put",
    lambda xs, ixs, v: torch.vmap(lambda x, i: x.index_put((i,), v))(xs, ixs),
    lambda: (r(3, 4), i(1, 2, 3, 0, 0, 0).view(3, 2), r(2)),
)
case(
    "func_grad_gather",
    lambda x, ix: torch.func.grad(lambda x: x.gather(0, ix).pow(2).sum())(x),
    lambda: (r(4), i(1, 1, 3)),
)
case(
    "func_grad_gather_oob",
    lambda x, ix: torch.func.grad(lambda x: x.gather(0, ix).pow(2).sum())(x),
    lambda: (r(4), i(1, 4, 3)),
)


def ckpt_gather(x, ix):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(lambda x: x.gather(0, ix).exp(), x, use_reentrant=False)


grad("checkpoint_gather", ckpt_gather, lambda: (G(r(4)), i(1, 1, 3)))
grad("checkpoint_gather_oob", ckpt_gather, lambda: (G(r(4)), i(1, 4, 3)))


def dead_getitem(x, ix):
    y = x[ix]  # noqa: F841  (unused: eager still raises)
    return x * 2


def dead_setitem(x, ix):
    y = x.clone()
    y[ix] = 0.0
    return x * 2


case("dead_getitem_oob", dead_getitem, lambda: (r(4), i(1, 4)))
case("dead_setitem_oob", dead_setitem, lambda: (r(4), i(1, 4)))
case("dead_gather_oob_training", dead_getitem, lambda: (G(r(4)), i(1, -5)))
case("overlap_slice_copy", lambda x: idx_set(x, slice(1, None), x[:-1]), lambda: (r(5),))
case("overlap_index_copy", lambda x, ix: x.index_copy_(0, ix, x[2:4]), lambda: (r(5), i(0, 1)))
case(
    "overlap_index_put_values_view",
    lambda x, ix: x.index_put_((ix,), x[1:3]),
    lambda: (r(5), i(0, 2)),
)
case(
    "overlap_masked_scatter",
    lambda x, m: x.masked_scatter_(m, x[1:]),
    lambda: (r(5), b(1, 0, 1, 1, 0)),
)
case("overlap_scatter_src_self", lambda x, ix: x.scatter_(0, ix, x), lambda: (r(4), i(1, 0, 3, 2)))
case(
    "overlap_gather_out_self",
    lambda x, ix: torch.gather(x, 0, ix, out=x),
    lambda: (r(4), i(1, 0, 3, 2)),
)
for _name, _fn in (
    ("add_", lambda x, ix: x.add_(x)),
    ("mul_", lambda x, ix: x.mul_(x)),
    ("copy_", lambda x, ix: x.copy_(x)),
    ("index_add_", lambda x, ix: x.index_add_(0, ix, x)),
    ("index_copy_", lambda x, ix: x.index_copy_(0, ix, x)),
    ("scatter_add_", lambda x, ix: x.scatter_add_(0, ix, x)),
    ("scatter_reduce_", lambda x, ix: x.scatter_reduce_(0, ix, x, "amax")),
    ("masked_scatter_", lambda x, ix: x.masked_scatter_(x > 0, x)),
    ("put_", lambda x, ix: x.put_(ix, x)),
    ("index_put_", lambda x, ix: x.index_put_((ix,), x)),
    ("gather_out", lambda x, ix: torch.gather(x, 0, ix, out=x)),
    ("take_out", lambda x, ix: torch.take(x, ix, out=x)),
    ("index_select_out", lambda x, ix: torch.index_select(x, 0, ix, out=x)),
):
    case(f"self_read_{_name}", _fn, lambda: (r(4), i(1, 0, 3, 2)))
case(
    "index_select_out",
    lambda x, ix, o: torch.index_select(x, 0, ix, out=o),
    lambda: (r(4, 2), i(1, 3), torch.empty(2, 2)),
)
case(
    "index_select_out_wrong_dtype",
    lambda x, ix, o: torch.index_select(x, 0, ix, out=o),
    lambda: (r(4, 2), i(1, 3), torch.empty(2, 2, dtype=torch.float64)),
)


# ============================================================================================
# 12. errors inside ``with`` blocks: the state after the error is eager's


def nograd_oob(x, ix):
    with torch.no_grad():
        y = x[ix] * 2
    return y + x.sum()


def autocast_oob(x, ix):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x.gather(0, ix) @ x
    return y


def enable_grad_oob(x, ix):
    with torch.enable_grad():
        return x.index_select(0, ix) * 2


def vmap_oob(x, ix):
    return torch.vmap(lambda r: r[ix])(x)


case("with_no_grad_oob", nograd_oob, lambda: (G(r(4, 4)), i(1, 4)), lambda: (G(r(4, 4)), i(1, 3)))
case(
    "with_autocast_oob",
    autocast_oob,
    lambda: (r(4, 4), i(1, 4, 0, 0).view(1, 4)),
    lambda: (r(4, 4), i(1, 3, 0, 0).view(1, 4)),
)
case("with_enable_grad_oob", enable_grad_oob, lambda: (G(r(4)), i(1, 4)), no_grad=True)
case(
    "with_func_grad_oob",
    lambda x, ix: torch.func.grad(lambda x: x.gather(0, ix).pow(2).sum())(x),
    lambda: (r(4), i(1, 4, 3)),
    lambda: (r(4), i(1, 2, 3)),
)
case("with_vmap_oob", vmap_oob, lambda: (r(3, 4), i(1, 4)), lambda: (r(3, 4), i(1, 3)))


# ============================================================================================
# 13. writes into inputs with values that require grad (the input's history is rebased)


def rebased(name, f, make):
    """``f`` writes into its first input (no grad) values that require grad; then a backward
    through the written input."""

    def run(C, rec):
        compiled = C(f)
        args = make()
        t = args[0]
        try:
            compiled(*args)
            rec("t", t)
            rec("t requires grad", t.requires_grad)
            (t * _weights(t)).sum().backward()
            rec("grads", [a.grad for a in args[1:] if isinstance(a, torch.Tensor) and a.is_leaf])
        except Exception as e:  # noqa: BLE001
            rec("raised", e)

    _register(f"rebased_{name}", run)


rebased("setitem_idx", idx_set, lambda: (r(5), i(1, 3, 1), G(r(3))))
rebased("setitem_mask", mask_rows_set_row, lambda: (r(4), b(1, 0, 1, 1), G(r(3))))
rebased("setitem_mask_0d", mask_rows_set_row, lambda: (r(4), b(1, 0, 1, 1), G(torch.tensor(2.0))))
rebased(
    "index_put_acc",
    lambda t, ix, v: t.index_put_((ix,), v * 2, accumulate=True),
    lambda: (r(5), i(1, 1, 3), G(r(3))),
)
rebased("scatter_", lambda t, ix, v: t.scatter_(0, ix, v), lambda: (r(5), i(1, 0, 3), G(r(3))))
rebased(
    "index_copy_",
    lambda t, ix, v: t.index_copy_(0, ix, v.exp()),
    lambda: (r(5), i(1, 0, 3), G(r(3))),
)
rebased("masked_fill_", lambda t, v: t.masked_fill_(t > 0, v), lambda: (r(5), G(torch.tensor(1.5))))
rebased("masked_scatter_", lambda t, v: t.masked_scatter_(t > 0, v), lambda: (r(5), G(r(5))))


# ============================================================================================
# 14. 0-d integer tensors as subscripts (select at a runtime value)

_T = torch.tensor
_X = lambda: r(4, 3, 5)


def sel(name, f, make, **kw):
    case(f"sel_{name}", f, make, **kw)


# (eager's view is seen: the op runs in eager, strict mode refuses it)
_VIEW_SEEN = {"modes": ("default",)}


sel("read_scaled", lambda x, k: x[k] * 2, lambda: (_X(), _T(-1)))
sel("read_col", lambda x, k: x[:, k] + 1, lambda: (_X(), _T(2)))
sel("read_ellipsis", lambda x, k: x[..., k].exp(), lambda: (_X(), _T(4)))
sel("read_int_then", lambda x, k: x[1, k] * 3, lambda: (_X(), _T(2)))
sel("read_two", lambda x, a, c: x[a, :, c] * 3, lambda: (_X(), _T(3), _T(-5)))
sel("read_two_adjacent", lambda x, a, c: x[a, c] * 3, lambda: (_X(), _T(3), _T(-3)))
sel("read_none", lambda x, k: x[None, k, 1:] * 3, lambda: (_X(), _T(1)))
sel("read_int32", lambda x, k: x[k] * 2, lambda: (_X(), _T(2, dtype=torch.int32)))
sel("read_int16", lambda x, k: x[k] * 2, lambda: (_X(), _T(2, dtype=torch.int16)))
sel("read_1d_to_0d", lambda x, k: x[k] + 1, lambda: (r(5), _T(-2)))
sel("read_oob", lambda x, k: x[k] * 2, lambda: (_X(), _T(4)))
sel("read_oob_col", lambda x, k: x[:, k] * 2, lambda: (_X(), _T(-4)))
sel("read_oob_ellipsis", lambda x, k: x[..., k] * 2, lambda: (_X(), _T(5)))
sel("read_oob_none", lambda x, k: x[None, :, k] * 2, lambda: (_X(), _T(3)))
sel("read_oob_second", lambda x, a, c: x[a, :, c] * 3, lambda: (_X(), _T(3), _T(-6)))
sel("read_returned_view", lambda x, k: x[k], lambda: (_X(), _T(1)), **_VIEW_SEEN)
sel("read_view_returned", lambda x, k: x[k][1:], lambda: (_X(), _T(1)), **_VIEW_SEEN)


def read_then_write(x, k):
    row = x[k]
    x.add_(1)
    return row * 2


def read_write_row(x, k):
    row = x[k]
    row.mul_(2)
    return x.sum()


sel("read_then_write", read_then_write, lambda: (_X(), _T(1)), **_VIEW_SEEN)
sel("read_write_row", read_write_row, lambda: (_X(), _T(1)), **_VIEW_SEEN)


def emb_label(table, label):
    return table[label].sum()


sel("emb_label", emb_label, lambda: (r(6, 3), _T(5)))


def set_k(x, k, v):
    x[k] = v
    return x


def set_col(x, k, v):
    x[:, k] = v
    return x


def set_two(x, a, c, v):
    x[a, :, c] = v
    return x


sel("set_row_scalar", set_k, lambda: (_X(), _T(-1), 2.0))
sel("set_row_tensor", set_k, lambda: (_X(), _T(2), r(3, 5)))
sel("set_row_bcast", set_k, lambda: (_X(), _T(2), r(5)))
sel("set_row_leading_ones", set_k, lambda: (_X(), _T(2), r(1, 1, 3, 5)))
sel("set_row_0d", set_k, lambda: (_X(), _T(2), _T(7.0)))
sel("set_col_tensor", set_col, lambda: (_X(), _T(1), r(4, 5)))
sel("set_col_bcast", set_col, lambda: (_X(), _T(1), r(5)))
sel("set_col_bcast_col", set_col, lambda: (_X(), _T(1), r(4, 1)))
sel("set_col_bad", set_col, lambda: (_X(), _T(1), r(3, 5)))
sel("set_two", set_two, lambda: (_X(), _T(1), _T(4), r(3)))
sel("set_two_bcast", set_two, lambda: (_X(), _T(1), _T(4), r(1)))
sel("set_oob", set_k, lambda: (_X(), _T(4), 1.0))
sel("set_oob_col", set_col, lambda: (_X(), _T(3), 1.0))
sel("set_oob_two", set_two, lambda: (_X(), _T(1), _T(5), r(3)))
sel("set_int_dtype", set_k, lambda: (torch.zeros(4, 2, dtype=torch.int32), _T(3), 7))
sel("set_overflow", set_k, lambda: (torch.zeros(4, 2, dtype=torch.int8), _T(3), 300))
sel("iadd", lambda x, k: idx_iadd(x, k, 1.0), lambda: (_X(), _T(2)))


def augmented_mixed(x, k):
    x[k] += 1
    x[k] *= x[0].sum()
    x[:, k] -= x[k, 0]
    return x


def augmented_then_read(x, k):
    y = x[k]
    y += 1
    z = x[k] * 2  # (reads x between the view's write and the write back)
    x[k] = y
    return z


sel("augmented_mixed", augmented_mixed, lambda: (_X(), _T(2)))
sel("augmented_oob", augmented_mixed, lambda: (_X(), _T(3)))
sel("augmented_then_read", augmented_then_read, lambda: (_X(), _T(2)), **_VIEW_SEEN)
grad("sel_augmented", lambda x, k: augmented_mixed(x * 1, k), lambda: (G(_X()), _T(2)))
grad("sel_read", lambda x, k: x[k] * 2, lambda: (G(_X()), _T(-1)))
grad("sel_read_col", lambda x, k: x[:, k].exp(), lambda: (G(_X()), _T(2)))
grad("sel_set", lambda x, k, v: set_col(x * 1, k, v * 2), lambda: (G(_X()), _T(2), G(r(4, 5))))
grad("sel_set_0d_value", lambda x, k, v: set_k(x * 1, k, v), lambda: (G(_X()), _T(2), G(_T(3.0))))
dyn(
    "sel_dyn",
    lambda x, k: x[k] * 2,
    [lambda: (_n(5), _T(4)), lambda: (_n(6), _T(-6)), lambda: (_n(7), _T(7))],
)
dyn(
    "sel_set_dyn",
    set_k,
    [lambda: (_n(5), _T(4), 1.0), lambda: (_n(6), _T(-6), 2.0), lambda: (_n(7), _T(7), 3.0)],
)


class Buffer(nn.Module):
    """A ring buffer written at a step counter held as a tensor buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mem", torch.zeros(3, 2))
        self.register_buffer("step", torch.tensor(0))

    def forward(self, v):
        self.mem[self.step % 3] = v
        self.step += 1
        return self.mem.sum(0)


def ring(C, rec):
    m = Buffer()
    f = C(m)
    for k in range(4):
        rec(f"out{k}", f(torch.full((2,), float(k + 1))))
    rec("mem", m.mem)
    rec("step", m.step)


_register("sel_ring_buffer", ring)


def main():
    return run(sys.argv[1:], CASES, compare)


if __name__ == "__main__":
    sys.exit(main())
