"""Bad and unusual indices as users write them, against eager (session 33): indices computed in
the compiled function (argmax, topk, nonzero, searchsorted, a step counter, ``%``/``fmod`` of
negative numbers, ``.long()`` of floats), narrow index dtypes, every indexing op family
(``take_along_dim``, ``scatter_reduce``, ``index_reduce``, ``put_``, ``embedding_bag``,
``bincount``, ``histc``, ``searchsorted``/``bucketize`` with ``sorter``/``right``/``out_int32``,
``narrow``/``roll`` with tensor positions, ``masked_select``, losses with ``ignore_index``), in
forward and backward, with ``dynamic=True``, under ``no_grad``, in a training step, and the
same compiled function called with good then bad indices (and bad then good).

    PYTHONPATH=. python scripts/probe_index33.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_index33.py   # torch's own

Observations: values, dtypes, shapes, the None-ness of gradients, the inputs after each call
(eager's writes before an error stay done), and errors: the type, eager's message at the start
of ours, and the user's line named in the message or traceback.

Fixed (session 33): ``put_uint8``/``one_hot_uint8`` (computed where eager refuses a uint8
index: ``ops/_dtype_probes``). Not observed here: eager's uint8-mask warning on writes, and a
restored check's line (``runtime/_checks``): ``tests/test_index_s33.py``.

Left: ``fn_backward_oob`` (a Function's backward reading an index out of range gives a
gradient: the custom_vjp's backward has no runtime checks; a strict xfail in
``tests/test_index_s33.py``); ``bag_offsets_unsorted`` (offsets that decrease: eager's kernel
leaves the bags after the decrease empty, ours sums ``[offsets[b], offsets[b + 1])``; torch
documents no behaviour for it).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

import torch2xla  # noqa: F401

warnings.simplefilter("ignore")
torch._logging.set_logs(graph_breaks=False, recompiles=False)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
SCENARIOS: dict = {}


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.requires_grad, v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        text = "".join(traceback.format_exception(v))
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v), THIS in text)
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]} ({a[1:3]} vs {b[1:3]})"
    if a[0] == "L":
        return same_items(a, b, path, same)
    if a[0] == "E":
        d = same_error_or_value(a, b, path)
        if d is None and a[4] != b[4]:
            d = f"{path}: NOLINE {a[2]!r}"
        return d
    if a[0] != "T":
        return same_error_or_value(a, b, path)
    for n, x, y in zip(("dtype", "shape", "requires_grad"), a[1:4], b[1:4]):
        if x != y:
            return f"{path}: {n} {x} (xla) vs {y} (eager)"
    x, y = a[4], b[4]
    if x.is_floating_point():
        if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
            return f"{path}: values differ\n{x}\n{y}"
    elif not torch.equal(x, y):
        return f"{path}: values {x} vs {y}"
    return None


def compare(name, fn) -> str:
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw)

    got = observations(fn, C, describe)
    exp = observations(fn, lambda f, **kw: f, describe)
    d = difference(got, exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def case(name, f, *makes, dynamic=None, grad=False, no_grad=False):
    """One compiled ``f`` called with each of ``makes()`` in turn (good then bad, bad then
    good...): outputs or the error, then the inputs after, then (``grad``) the gradients of
    the float inputs."""

    def sc(C, rec):
        g = C(f, dynamic=dynamic)
        for k, make in enumerate(makes):
            args = _clone(make())
            if grad:
                args = [
                    a.requires_grad_()
                    if isinstance(a, torch.Tensor) and a.is_floating_point()
                    else a
                    for a in args
                ]
            try:
                if no_grad:
                    with torch.no_grad():
                        out = g(*args)
                else:
                    out = g(*args)
                rec(f"out{k}", out)
                if grad:
                    outs = out if isinstance(out, (tuple, list)) else (out,)
                    tot = sum(
                        (o.float() * (1 + torch.arange(o.numel()).reshape(o.shape))).sum()
                        for o in outs
                        if isinstance(o, torch.Tensor) and o.requires_grad
                    )
                    tot.backward()
                    rec(
                        f"grads{k}", [a.grad if isinstance(a, torch.Tensor) else None for a in args]
                    )
            except Exception as e:  # noqa: BLE001  (an observation; the next call still runs)
                rec(f"raised{k}", e)
            rec(f"args{k}", [a.detach() if isinstance(a, torch.Tensor) else a for a in args])

    assert name not in SCENARIOS, name
    SCENARIOS[name] = sc


def I(*v, dtype=torch.int64):
    return torch.tensor(v, dtype=dtype)


# -- indices computed inside the compiled function --------------------------------------------
def argmax_next(x, y):
    return y[x.argmax() + 1]


case("argmax_next_ok", argmax_next, lambda: (I(3, 9, 1).float(), r(4)))
case("argmax_next_oob", argmax_next, lambda: (I(3, 1, 9).float(), r(3)))
case(
    "argmax_next_good_bad",
    argmax_next,
    lambda: (I(9, 1, 1).float(), r(3)),
    lambda: (I(1, 1, 9).float(), r(3)),
)
case(
    "argmax_next_bad_good",
    argmax_next,
    lambda: (I(1, 1, 9).float(), r(3)),
    lambda: (I(9, 1, 1).float(), r(3)),
)


def topk_shift(x, y):
    _, idx = x.topk(2, dim=1)
    return torch.gather(y, 1, idx + 2)


case("topk_gather_shift_ok", topk_shift, lambda: (r(2, 5), r(2, 8)))
case("topk_gather_shift_oob", topk_shift, lambda: (r(2, 5), r(2, 5)))
case("topk_gather_shift_grad_oob", topk_shift, lambda: (r(2, 5), r(2, 5)), grad=True)
case("topk_gather_shift_grad_ok", topk_shift, lambda: (r(2, 5), r(2, 8)), grad=True)


def nonzero_next(x, y):
    nz = (x > 0).nonzero().squeeze(1)
    return y[nz + 1]


case("nonzero_next_ok", nonzero_next, lambda: (I(1, 0, 1, 0).float(), r(4)))
case("nonzero_next_oob", nonzero_next, lambda: (I(1, 0, 0, 1).float(), r(4)))


def counter_mod(buf, step, v):
    buf[step % buf.shape[0]] = v
    step += 1
    return buf.sum()


case("counter_mod_neg", counter_mod, lambda: (torch.zeros(5), I(-3)[0], r(())))
case(
    "counter_mod_wrap",
    counter_mod,
    lambda: (torch.zeros(5), I(7)[0], r(())),
    lambda: (torch.zeros(5), I(-7)[0], r(())),
)


def fmod_index(x, k):
    return x[torch.fmod(k, 4)]


case("fmod_neg_index", fmod_index, lambda: (r(4), I(-3, 5, -6)))
case("fmod_neg_index_oob", fmod_index, lambda: (r(2), I(-3, 5, -6)))


def float_long_index(x, s):
    return x[(s * 4).long()]


case("float_long_index", float_long_index, lambda: (r(4), torch.tensor([-0.2, 0.5, 0.9])))
case("float_long_index_oob", float_long_index, lambda: (r(4), torch.tensor([-0.2, 1.0])))
case("float_long_index_neg_oob", float_long_index, lambda: (r(4), torch.tensor([-1.3])))


def counter_index(buf, step):
    return buf[step - 1]


case("counter_dyn", counter_index, lambda: (r(6), I(0)[0]), lambda: (r(6), I(7)[0]), dynamic=True)


def searchsorted_edges(edges, v):
    return edges[torch.searchsorted(edges, v)]


case(
    "searchsorted_edges_ok", searchsorted_edges, lambda: (I(0, 2, 4, 6).float(), I(1, 3, 5).float())
)
case("searchsorted_edges_oob", searchsorted_edges, lambda: (I(0, 2, 4, 6).float(), I(1, 7).float()))


def bucket_onehot(edges, v):
    return F.one_hot(torch.bucketize(v, edges), 3)


case("bucket_onehot_ok", bucket_onehot, lambda: (I(0, 2).float(), I(-1, 1, 3).float()))
case("bucket_onehot_oob", bucket_onehot, lambda: (I(0, 2, 4).float(), I(-1, 1, 5).float()))

# -- index dtypes ------------------------------------------------------------------------------
for _dt in (torch.int32, torch.int16, torch.uint8, torch.int8):
    _t = str(_dt).split(".")[-1]
    case(f"get_{_t}", lambda x, i: x[i], lambda dt=_dt: (r(5), I(1, 3, dtype=dt)))
    case(f"get_col_{_t}", lambda x, i: x[:, i], lambda dt=_dt: (r(2, 5), I(1, 3, dtype=dt)))
    case(
        f"index_select_{_t}",
        lambda x, i: x.index_select(0, i),
        lambda dt=_dt: (r(5), I(1, 3, dtype=dt)),
    )
    case(f"gather_{_t}", lambda x, i: x.gather(0, i), lambda dt=_dt: (r(5), I(1, 3, dtype=dt)))
    case(f"take_{_t}", lambda x, i: x.take(i), lambda dt=_dt: (r(5), I(1, 3, dtype=dt)))
    case(
        f"take_along_dim_{_t}",
        lambda x, i: torch.take_along_dim(x, i),
        lambda dt=_dt: (r(5), I(1, 3, dtype=dt)),
    )
    case(
        f"embedding_{_t}",
        lambda w, i: F.embedding(i, w),
        lambda dt=_dt: (r(5, 2), I(1, 3, dtype=dt)),
    )
    case(
        f"scatter_add_{_t}",
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda dt=_dt: (r(5), I(1, 3, dtype=dt), r(2)),
    )
    case(
        f"index_add_{_t}",
        lambda x, i, s: x.index_add(0, i, s),
        lambda dt=_dt: (r(5), I(1, 3, dtype=dt), r(2)),
    )
    case(f"put_{_t}", lambda x, i, s: x.put_(i, s), lambda dt=_dt: (r(5), I(1, 3, dtype=dt), r(2)))
    case(f"one_hot_{_t}", lambda i: F.one_hot(i, 5), lambda dt=_dt: (I(1, 3, dtype=dt),))
    case(
        f"nll_target_{_t}",
        lambda x, t: F.nll_loss(x, t),
        lambda dt=_dt: (r(2, 4), I(1, 3, dtype=dt)),
    )
    case(
        f"bincount_{_t}",
        lambda i: torch.bincount(i, minlength=5),
        lambda dt=_dt: (I(1, 3, 3, dtype=dt),),
    )
    case(f"int_idx_oob_{_t}", lambda x, i: x[i], lambda dt=_dt: (r(3), I(1, 3, dtype=dt)))
    case(
        f"index_select_oob_{_t}",
        lambda x, i: x.index_select(0, i),
        lambda dt=_dt: (r(3), I(1, 3, dtype=dt)),
    )
    case(
        f"embedding_oob_{_t}",
        lambda w, i: F.embedding(i, w),
        lambda dt=_dt: (r(3, 2), I(1, 3, dtype=dt)),
    )

# -- op families -------------------------------------------------------------------------------
case(
    "take_along_dim_oob",
    lambda x, i: torch.take_along_dim(x, i, dim=1),
    lambda: (r(2, 3), I(0, 3).reshape(2, 1)),
)
case(
    "take_along_dim_neg",
    lambda x, i: torch.take_along_dim(x, i, dim=1),
    lambda: (r(2, 3), I(0, -1).reshape(2, 1)),
)
case("take_along_dim_none_oob", lambda x, i: torch.take_along_dim(x, i), lambda: (r(2, 3), I(0, 6)))
case(
    "take_along_dim_bcast",
    lambda x, i: torch.take_along_dim(x, i, dim=1),
    lambda: (r(2, 3), I(2, 0).reshape(1, 2)),
)
for _red in ("sum", "prod", "mean", "amax", "amin"):
    case(
        f"scatter_reduce_{_red}_oob",
        lambda x, i, s, red=_red: x.scatter_reduce(0, i, s, red),
        lambda: (r(4), I(0, 4), r(2)),
    )
    case(
        f"scatter_reduce_{_red}_neg",
        lambda x, i, s, red=_red: x.scatter_reduce(0, i, s, red, include_self=False),
        lambda: (r(4), I(0, -1), r(2)),
    )
    case(
        f"scatter_reduce_{_red}_dup",
        lambda x, i, s, red=_red: x.scatter_reduce(0, i, s, red, include_self=False),
        lambda: (r(4), I(0, 2, 2, 0), r(4)),
        grad=_red in ("sum", "mean", "amax"),
    )
for _red in ("prod", "mean", "amax", "amin"):
    case(
        f"index_reduce_{_red}_oob",
        lambda x, i, s, red=_red: x.index_reduce(0, i, s, red),
        lambda: (r(4, 2), I(0, 4), r(2, 2)),
    )
    case(
        f"index_reduce_{_red}_neg",
        lambda x, i, s, red=_red: x.index_reduce(0, i, s, red),
        lambda: (r(4, 2), I(0, -1), r(2, 2)),
    )
    case(
        f"index_reduce_{_red}_dup",
        lambda x, i, s, red=_red: x.index_reduce(0, i, s, red, include_self=False),
        lambda: (r(4, 2), I(1, 1, 3), r(3, 2)),
    )
case(
    "scatter_value_oob", lambda x, i: x.scatter(1, i, 2.0), lambda: (r(2, 3), I(0, 3).reshape(2, 1))
)
case(
    "scatter_reduce_str_oob",
    lambda x, i, s: x.scatter(1, i, s, reduce="add"),
    lambda: (r(2, 3), I(0, 3).reshape(2, 1), r(2, 1)),
)
case("scatter_inplace_oob", lambda x, i, s: x.scatter_(0, i, s), lambda: (r(4), I(1, 5), r(2)))
case(
    "scatter_add_inplace_neg",
    lambda x, i, s: x.scatter_add_(0, i, s),
    lambda: (r(4), I(1, -1), r(2)),
)
case(
    "index_put_acc_neg",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (r(4), I(-1, -1, 0), r(3)),
)
case(
    "index_put_acc_neg_oob",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (r(4), I(-1, -5, 0), r(3)),
)
case(
    "index_put_2d_acc_oob",
    lambda x, i, j, v: x.index_put_((i, j), v, accumulate=True),
    lambda: (r(3, 3), I(0, 2), I(1, 3), r(2)),
)
case("index_copy_neg", lambda x, i, s: x.index_copy(0, i, s), lambda: (r(4), I(-1, 0), r(2)))
case("index_fill_2d_oob", lambda x, i: x.index_fill(1, i, -1.0), lambda: (r(2, 3), I(0, 3)))
case("index_fill_2d_neg", lambda x, i: x.index_fill(1, i, -1.0), lambda: (r(2, 3), I(0, -3)))
case("put_acc_oob", lambda x, i, s: x.put_(i, s, accumulate=True), lambda: (r(2, 2), I(1, 4), r(2)))
case(
    "put_acc_neg",
    lambda x, i, s: x.put(i, s, accumulate=True),
    lambda: (r(2, 2), I(-1, -1, -4), r(3)),
)
case(
    "put_2d_idx_neg",
    lambda x, i, s: x.put(i, s),
    lambda: (r(2, 3), I(-1, 0, -6, 5).reshape(2, 2), r(2, 2)),
)
case("take_2d_neg", lambda x, i: x.take(i), lambda: (r(2, 3), I(-1, 0, -6, 5).reshape(2, 2)))
case("take_2d_oob", lambda x, i: x.take(i), lambda: (r(2, 3), I(-7, 0).reshape(1, 2)))

# embedding and embedding_bag
case(
    "embedding_pad_neg",
    lambda w, i: F.embedding(i, w, padding_idx=-1),
    lambda: (r(4, 2), I(3, 1, 3)),
    grad=True,
)
case("embedding_pad_oob", lambda w, i: F.embedding(i, w, padding_idx=4), lambda: (r(4, 2), I(3, 1)))
case(
    "embedding_pad_neg_oob",
    lambda w, i: F.embedding(i, w, padding_idx=-5),
    lambda: (r(4, 2), I(3, 1)),
)
case(
    "embedding_2d_oob",
    lambda w, i: F.embedding(i, w),
    lambda: (r(4, 2), I(3, 1, 0, 4).reshape(2, 2)),
)
case("embedding_oob_grad", lambda w, i: F.embedding(i, w), lambda: (r(4, 2), I(3, 4)), grad=True)
case("embedding_neg_grad", lambda w, i: F.embedding(i, w), lambda: (r(4, 2), I(-1, 0)), grad=True)
case(
    "embedding_good_bad_good",
    lambda w, i: F.embedding(i, w).sum(0),
    lambda: (r(4, 2), I(3, 1)),
    lambda: (r(4, 2), I(3, 9)),
    lambda: (r(4, 2), I(0, 0)),
)
for _mode in ("sum", "mean", "max"):
    case(
        f"bag_{_mode}_oob",
        lambda w, i, o, m=_mode: F.embedding_bag(i, w, o, mode=m),
        lambda: (r(4, 2), I(0, 1, 4), I(0, 2)),
    )
    case(
        f"bag_{_mode}_neg",
        lambda w, i, o, m=_mode: F.embedding_bag(i, w, o, mode=m),
        lambda: (r(4, 2), I(0, -1, 2), I(0, 2)),
    )
    case(
        f"bag_{_mode}_2d_oob",
        lambda w, i, m=_mode: F.embedding_bag(i, w, mode=m),
        lambda: (r(4, 2), I(0, 1, 2, 5).reshape(2, 2)),
    )
    case(
        f"bag_{_mode}_pad",
        lambda w, i, o, m=_mode: F.embedding_bag(i, w, o, mode=m, padding_idx=1),
        lambda: (r(4, 2), I(0, 1, 1, 3), I(0, 2, 3)),
        grad=True,
    )
    case(
        f"bag_{_mode}_pad_neg",
        lambda w, i, o, m=_mode: F.embedding_bag(i, w, o, mode=m, padding_idx=-1),
        lambda: (r(4, 2), I(0, 3, 3, 3), I(0, 1, 3)),
        grad=True,
    )
    case(
        f"bag_{_mode}_last_offset",
        lambda w, i, o, m=_mode: F.embedding_bag(i, w, o, mode=m, include_last_offset=True),
        lambda: (r(4, 2), I(0, 1, 2, 3), I(0, 1, 4)),
        grad=True,
    )
case(
    "bag_int32_idx_int64_off",
    lambda w, i, o: F.embedding_bag(i, w, o),
    lambda: (r(4, 2), I(0, 1, dtype=torch.int32), I(0, 1)),
)
case(
    "bag_psw_oob",
    lambda w, i, o, p: F.embedding_bag(i, w, o, per_sample_weights=p),
    lambda: (r(4, 2), I(0, 4), I(0, 1), r(2)),
)
case(
    "bag_offsets_unsorted",
    lambda w, i, o: F.embedding_bag(i, w, o),
    lambda: (r(4, 2), I(0, 1, 2), I(0, 2, 1)),
)

# one_hot, bincount, histc, searchsorted, bucketize
case("one_hot_auto_classes_neg", lambda i: F.one_hot(i), lambda: (I(0, -1),))
case("one_hot_auto_classes", lambda i: F.one_hot(i), lambda: (I(0, 3, 1),))
case("one_hot_2d_oob", lambda i: F.one_hot(i, 3), lambda: (I(0, 1, 2, 3).reshape(2, 2),))
case(
    "bincount_weights",
    lambda i, w: torch.bincount(i, w, minlength=3),
    lambda: (I(0, 4, 4, 1), r(4)),
)
case("bincount_neg", lambda i: torch.bincount(i), lambda: (I(0, -1),))
case("bincount_2d", lambda i: torch.bincount(i), lambda: (I(0, 1).reshape(1, 2),))
case("bincount_weights_len", lambda i, w: torch.bincount(i, w), lambda: (I(0, 1), r(3)))
case(
    "histc_out_of_range",
    lambda x: torch.histc(x, bins=4, min=0, max=1),
    lambda: (torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0, 0.99]),),
)
case(
    "histc_auto_range",
    lambda x: torch.histc(x, bins=3),
    lambda: (torch.tensor([1.0, 2.0, 2.0, 5.0]),),
)
case("histc_const", lambda x: torch.histc(x, bins=3), lambda: (torch.tensor([2.0, 2.0]),))
case("histc_minmax_bad", lambda x: torch.histc(x, bins=3, min=2, max=1), lambda: (r(4),))
case("histc_nan", lambda x: torch.histc(x, bins=3), lambda: (torch.tensor([1.0, float("nan")]),))
case(
    "searchsorted_right_i32",
    lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
    lambda: (I(0, 1, 1, 3).float(), I(-1, 1, 3, 4).float()),
)
case(
    "searchsorted_side",
    lambda s, v: torch.searchsorted(s, v, side="right"),
    lambda: (I(0, 1, 1, 3).float(), I(1, 2).float()),
)
case(
    "searchsorted_side_conflict",
    lambda s, v: torch.searchsorted(s, v, right=False, side="right"),
    lambda: (I(0, 1, 3).float(), I(1, 2).float()),
)
case(
    "searchsorted_sorter",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (I(3, 0, 1).float(), I(1, 2, 4).float(), I(1, 2, 0)),
)
case(
    "searchsorted_sorter_oob",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (I(3, 0, 1).float(), I(1, 2).float(), I(1, 3, 0)),
)
case(
    "searchsorted_sorter_neg",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (I(3, 0, 1).float(), I(1, 2).float(), I(1, -1, 0)),
)
case(
    "searchsorted_sorter_i32",
    lambda s, v, o: torch.searchsorted(s, v, sorter=o),
    lambda: (I(3, 0, 1).float(), I(1, 2).float(), I(1, 2, 0, dtype=torch.int32)),
)
case(
    "searchsorted_2d",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (I(0, 1, 2, 0, 5, 9).float().reshape(2, 3), I(1, 6).float().reshape(2, 1)),
)
case(
    "searchsorted_2d_rows",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (I(0, 1, 2, 0, 5, 9).float().reshape(2, 3), I(1, 6).float().reshape(1, 2)),
)
case("searchsorted_scalar", lambda s: torch.searchsorted(s, 2.5), lambda: (I(0, 1, 2, 3).float(),))
case(
    "searchsorted_int_float",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (I(0, 2, 4), torch.tensor([1.5, 2.0])),
)
case(
    "searchsorted_nan",
    lambda s, v: torch.searchsorted(s, v),
    lambda: (torch.tensor([0.0, 1.0, float("nan")]), torch.tensor([float("nan"), 0.5])),
)
case(
    "bucketize_right_i32",
    lambda v, b: torch.bucketize(v, b, out_int32=True, right=True),
    lambda: (I(-1, 1, 3, 4).float().reshape(2, 2), I(0, 1, 1, 3).float()),
)
case("bucketize_scalar", lambda b: torch.bucketize(2, b), lambda: (I(0, 1, 2, 3),))
case("bucketize_2d_bounds", lambda v, b: torch.bucketize(v, b), lambda: (r(3), r(2, 2)))

# narrow, select, unbind, roll with tensor positions
case("narrow_tensor_start", lambda x, s: x.narrow(0, s, 2), lambda: (r(5), I(1)[0]))
case("narrow_tensor_start_oob", lambda x, s: x.narrow(0, s, 2), lambda: (r(5), I(4)[0]))
case("narrow_tensor_start_neg", lambda x, s: x.narrow(0, s, 2), lambda: (r(5), I(-2)[0]))
case("narrow_tensor_start_neg_oob", lambda x, s: x.narrow(0, s, 2), lambda: (r(5), I(-6)[0]))
case(
    "narrow_tensor_good_bad",
    lambda x, s: x.narrow(0, s, 2),
    lambda: (r(5), I(1)[0]),
    lambda: (r(5), I(4)[0]),
)
case("select_tensor_pos", lambda x, s: x.select(0, s), lambda: (r(3, 2), I(2)[0]))
case("select_tensor_pos_oob", lambda x, s: x.select(0, s), lambda: (r(3, 2), I(3)[0]))
case("select_tensor_pos_neg_oob", lambda x, s: x.select(1, s), lambda: (r(3, 2), I(-3)[0]))
case("unbind_index", lambda x, k: x.unbind(0)[k], lambda: (r(3, 2), 2))
case("roll_tensor_shift", lambda x, s: torch.roll(x, s.item()), lambda: (r(5), I(-7)[0]))
case("roll_tensor_shift_direct", lambda x, s: torch.roll(x, s), lambda: (r(5), I(-7)[0]))
case("roll_neg_big", lambda x: torch.roll(x, -13, 0), lambda: (r(5),))
case("roll_2d_shifts", lambda x: torch.roll(x, (7, -4), (0, 1)), lambda: (r(3, 4),))
case("roll_dim_oob", lambda x: torch.roll(x, 1, 2), lambda: (r(3, 4),))
case("roll_empty", lambda x: torch.roll(x, 3), lambda: (r(0, 2),))
case("item_index", lambda x, k: x[k.item()], lambda: (r(5), I(-2)[0]))
case("item_index_oob", lambda x, k: x[k.item()], lambda: (r(5), I(5)[0]))
case("item_index_neg_oob", lambda x, k: x[k.item()], lambda: (r(5), I(-6)[0]))
case("int_of_tensor_index", lambda x, k: x[int(k)], lambda: (r(5), I(9)[0]))
case("tensor_0d_getitem_oob", lambda x, k: x[k], lambda: (r(5), I(5)[0]))
case("tensor_0d_setitem_oob", lambda x, k: x.__setitem__(k, 1.0), lambda: (r(5), I(-6)[0]))
case("tensor_0d_slice_start", lambda x, k: x[k:], lambda: (r(5), I(2)[0]))
case("tensor_0d_slice_start_big", lambda x, k: x[k:], lambda: (r(5), I(9)[0]))
case("tensor_0d_slice_end_neg", lambda x, k: x[:k], lambda: (r(5), I(-9)[0]))

# masks
case("masked_select_bcast", lambda x, m: x.masked_select(m), lambda: (r(2, 3), I(1, 0, 1).bool()))
case("masked_select_bad", lambda x, m: x.masked_select(m), lambda: (r(2, 3), I(1, 0).bool()))
case(
    "masked_select_uint8",
    lambda x, m: x.masked_select(m),
    lambda: (r(3), I(1, 0, 1, dtype=torch.uint8)),
)
case(
    "masked_scatter_bcast_mask",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(2, 3), I(1, 0, 1).bool(), r(6)),
)
case(
    "masked_scatter_src_2d_few",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(2, 3), I(1, 1, 1).bool(), r(2, 2)),
)
case(
    "masked_scatter_mask_bad",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(2, 3), I(1, 1).bool(), r(6)),
)
case(
    "masked_fill_bcast_mask_bigger",
    lambda x, m: x.masked_fill(m, 0.0),
    lambda: (r(3), I(1, 0, 1, 1, 0, 0).bool().reshape(2, 3)),
)
case("mask_wrong_len_get", lambda x, m: x[m], lambda: (r(4), I(1, 0, 1).bool()))
case("mask_wrong_len_set", lambda x, m: x.__setitem__(m, 0.0), lambda: (r(4), I(1, 0, 1).bool()))
case("mask_wrong_inner", lambda x, m: x[:, m], lambda: (r(2, 4), I(1, 0, 1).bool()))
case(
    "mask_wrong_inner_set",
    lambda x, m: x.__setitem__((slice(None), m), 0.0),
    lambda: (r(2, 4), I(1, 0, 1).bool()),
)
case("mask_computed_wrong", lambda x, y: x[y > 0], lambda: (r(4), r(5)))
case("mask_uint8_get", lambda x, m: x[m], lambda: (r(3), I(1, 0, 1, dtype=torch.uint8)))
case(
    "mask_uint8_set",
    lambda x, m: x.__setitem__(m, 2.0),
    lambda: (r(3), I(1, 0, 1, dtype=torch.uint8)),
)
case("mask_0d_with_idx", lambda x, m, i: x[m, i], lambda: (r(3), torch.tensor(True), I(0, 2)))

# losses
case("nll_ignore_neg_oob", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), I(0, -1, 2)))
case(
    "nll_ignore_custom",
    lambda x, t: F.nll_loss(x, t, ignore_index=7),
    lambda: (r(3, 4), I(0, 7, 2)),
    grad=True,
)
case(
    "nll_ignore_custom_oob",
    lambda x, t: F.nll_loss(x, t, ignore_index=7),
    lambda: (r(3, 4), I(0, 5, 7)),
)
case(
    "nll_ignore_in_range",
    lambda x, t: F.nll_loss(x, t, ignore_index=2),
    lambda: (r(3, 4), I(0, 2, 2)),
    grad=True,
)
case("nll_none_oob", lambda x, t: F.nll_loss(x, t, reduction="none"), lambda: (r(3, 4), I(0, 4, 1)))
case(
    "nll_sum_oob_weight",
    lambda x, t, w: F.nll_loss(x, t, w, reduction="sum"),
    lambda: (r(3, 4), I(0, 4, 1), r(4).abs()),
)
case(
    "nll_2d_oob",
    lambda x, t: F.nll_loss(x, t),
    lambda: (r(1, 3, 2, 2), I(0, 1, 2, 3).reshape(1, 2, 2)),
)
case(
    "nll_2d_ignore",
    lambda x, t: F.nll_loss(x, t),
    lambda: (r(1, 3, 2, 2), I(0, -100, 2, -100).reshape(1, 2, 2)),
    grad=True,
)
case("nll_1d_input_oob", lambda x, t: F.nll_loss(x, t), lambda: (r(4), I(4)[0]))
case("ce_oob_grad", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), I(0, 5, 1)), grad=True)
case("ce_neg_oob", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), I(0, -2, 1)))
case(
    "ce_smooth_oob",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda: (r(3, 4), I(0, 4, 1)),
)
case(
    "ce_smooth_ignore",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=1),
    lambda: (r(3, 4), I(0, 1, 3)),
    grad=True,
)
case(
    "ce_smooth_ignore_neg",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda: (r(3, 4), I(0, -100, 3)),
    grad=True,
)
case(
    "ce_smooth_weight_ignore",
    lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.2),
    lambda: (r(3, 4), I(0, -100, 3), r(4).abs()),
    grad=True,
)
case(
    "ce_3d_oob",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(2, 3, 2), I(0, 1, 2, 3).reshape(2, 2)),
)
case(
    "ce_good_bad_good",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(3, 4), I(0, 1, 2)),
    lambda: (r(3, 4), I(0, 4, 2)),
    lambda: (r(3, 4), I(3, 3, 3)),
)
case(
    "ce_dyn_oob",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(3, 4), I(0, 1, 2)),
    lambda: (r(5, 4), I(0, 1, 2, 3, 9)),
    dynamic=True,
)
case("multi_margin_oob", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(3, 4), I(0, 4, 1)))
case(
    "multilabel_margin_oob",
    lambda x, t: F.multilabel_margin_loss(x, t),
    lambda: (r(2, 3), I(0, 3, -1, 1, -1, 0).reshape(2, 3)),
)
case(
    "multilabel_margin_ok",
    lambda x, t: F.multilabel_margin_loss(x, t),
    lambda: (r(2, 3), I(0, 2, -1, 1, -1, 0).reshape(2, 3)),
    grad=True,
)


# -- no_grad / dynamic / cached paths -------------------------------------------------------------
def gather_rows(x, i):
    return x[i].sum(1)


case(
    "nograd_good_bad_good",
    gather_rows,
    lambda: (r(4, 2), I(0, 3)),
    lambda: (r(4, 2), I(0, 4)),
    lambda: (r(4, 2), I(-4)),
    no_grad=True,
)
case(
    "dyn_good_bad",
    gather_rows,
    lambda: (r(4, 2), I(0, 3)),
    lambda: (r(6, 2), I(0, 6, 1)),
    dynamic=True,
)
case(
    "dyn_bad_good",
    gather_rows,
    lambda: (r(4, 2), I(0, -5)),
    lambda: (r(6, 2), I(0, -6, 1)),
    dynamic=True,
)
case(
    "dyn_grad_bad",
    gather_rows,
    lambda: (r(4, 2), I(0, 3)),
    lambda: (r(6, 2), I(0, 7)),
    dynamic=True,
    grad=True,
)


def iadd_then_oob(x, i, v):
    x[i] += v
    return x[i + 1]


case("iadd_dup_then_oob", iadd_then_oob, lambda: (r(4), I(1, 1, 3), r(3)))
case("iadd_dup_then_ok", iadd_then_oob, lambda: (r(4), I(1, 1, 2), r(3)))


def write_then_oob(buf, x, i):
    buf.add_(1)
    buf[0] = x.sum()
    return x[i]


case("write_then_oob", write_then_oob, lambda: (torch.zeros(2), r(3), I(0, 3)))
case(
    "write_then_oob_good_bad",
    write_then_oob,
    lambda: (torch.zeros(2), r(3), I(0, 2)),
    lambda: (torch.zeros(2), r(3), I(0, 3)),
)


def index_copy_then_oob(x, i, s, j):
    x.index_copy_(0, i, s)
    return x.index_select(0, j)


case("index_copy_then_oob", index_copy_then_oob, lambda: (r(4), I(0, 1), r(2), I(5)))


# -- training step with an optimizer ---------------------------------------------------------
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(6, 3, padding_idx=0)
        self.out = nn.Linear(3, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, ix):
        self.steps += 1
        return self.out(self.emb(ix))


def train_case(name, batches, dynamic=None):
    def sc(C, rec):
        m = Tagger()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)

        def step(ix, t):
            opt.zero_grad()
            loss = F.cross_entropy(m(ix).flatten(0, 1), t.flatten())
            loss.backward()
            opt.step()
            return loss

        g = C(step, dynamic=dynamic)
        for k, (ix, t) in enumerate(batches()):
            try:
                rec(f"loss{k}", g(ix, t))
            except Exception as e:  # noqa: BLE001  (an observation)
                rec(f"raised{k}", e)
            rec(f"state{k}", [*(p.detach() for p in m.parameters()), m.steps])
            rec(f"grads{k}", [p.grad for p in m.parameters()])

    SCENARIOS[name] = sc


def _b(ix, t):
    return I(*ix).reshape(2, -1), I(*t).reshape(2, -1)


train_case("train_ok", lambda: [_b((1, 2, 0, 5), (0, 1, 2, 3)), _b((3, 0, 1, 2), (3, 2, -100, 0))])
train_case(
    "train_emb_oob_second", lambda: [_b((1, 2, 0, 5), (0, 1, 2, 3)), _b((3, 6, 1, 2), (3, 2, 1, 0))]
)
train_case(
    "train_target_oob_second",
    lambda: [_b((1, 2, 0, 5), (0, 1, 2, 3)), _b((3, 4, 1, 2), (3, 4, 1, 0))],
)
train_case(
    "train_emb_oob_first", lambda: [_b((1, 2, 0, 6), (0, 1, 2, 3)), _b((3, 1, 1, 2), (3, 2, 1, 0))]
)
train_case(
    "train_dyn_oob",
    lambda: [_b((1, 2, 0, 5), (0, 1, 2, 3)), _b((3, 1, 1, 2, 4, 4), (3, 2, 1, 0, 1, 7))],
    dynamic=True,
)


# -- batch 2: extremes, empty dims, hooks, graph breaks, queues --------------------------------
case("idx_huge", lambda x, i: x[i], lambda: (r(4), I(2**40)))
case("idx_huge_neg", lambda x, i: x[i], lambda: (r(4), I(-(2**63))))
case("idx_int64_max", lambda x, i: x[i], lambda: (r(4), I(2**63 - 1)))
case("idx_i32_wrap", lambda x, i: x[i * 1000000000], lambda: (r(4), I(0, 5, dtype=torch.int32)))
case("gather_huge", lambda x, i: x.gather(0, i), lambda: (r(4), I(2**32 + 1)))
case("index_select_huge", lambda x, i: x.index_select(0, i), lambda: (r(4), I(2**32)))
case("embedding_huge", lambda w, i: F.embedding(i, w), lambda: (r(4, 2), I(2**32 + 2)))
case("scatter_huge", lambda x, i, s: x.scatter(0, i, s), lambda: (r(4), I(2**32 + 1), r(1)))
case("take_huge", lambda x, i: x.take(i), lambda: (r(4), I(-(2**40))))
case("nll_huge", lambda x, t: F.nll_loss(x, t), lambda: (r(2, 4), I(0, 2**32 + 1)))
case("one_hot_huge", lambda i: F.one_hot(i, 4), lambda: (I(0, 2**32 + 1),))
case("empty_dim_idx", lambda x, i: x[i], lambda: (r(0, 3), I(0)))
case("empty_dim_idx_empty", lambda x, i: x[i], lambda: (r(0, 3), I()))
case("empty_dim_gather", lambda x, i: x.gather(1, i), lambda: (r(2, 0), I(0, 0).reshape(2, 1)))
case("empty_dim_index_select", lambda x, i: x.index_select(1, i), lambda: (r(2, 0), I(0)))
case("empty_dim_setitem", lambda x, i: x.__setitem__(i, 1.0), lambda: (r(0), I(0)))
case("scalar_index_select", lambda x, i: x.index_select(0, i), lambda: (r(()), I(1)))
case("scalar_gather", lambda x, i: x.gather(0, i), lambda: (r(()), I(1)[0]))
case("arange_oob", lambda x: x[torch.arange(x.shape[0] + 1)], lambda: (r(3),))
case("clamp_oob", lambda x, i: x[i.clamp(max=x.shape[0])], lambda: (r(3), I(1, 7)))
case("where_idx_next", lambda x: x[torch.where(x > 0)[0] + 1], lambda: (I(1, -1, 1).float(),))
case(
    "max_unpool_oob",
    lambda x, i: F.max_unpool1d(x, i, 2),
    lambda: (r(1, 1, 2), I(0, 4).reshape(1, 1, 2)),
)
case(
    "max_unpool_neg",
    lambda x, i: F.max_unpool1d(x, i, 2),
    lambda: (r(1, 1, 2), I(0, -1).reshape(1, 1, 2)),
)
case("repeat_interleave_neg", lambda x, rp: x.repeat_interleave(rp), lambda: (r(3), I(1, -1, 2)))
case(
    "segment_reduce_bad",
    lambda x, n: torch.segment_reduce(x, "sum", lengths=n),
    lambda: (r(4), I(2, 3)),
)
case(
    "grid_sample_oob",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    lambda: (r(1, 1, 3, 3), torch.tensor([[[[1.5, -2.0], [0.2, 0.9]]]])),
)
case(
    "grid_sample_border",
    lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=True),
    lambda: (r(1, 1, 3, 3), torch.tensor([[[[1.5, -2.0], [0.2, 0.9]]]])),
)
case(
    "grid_sample_reflect",
    lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
    lambda: (r(1, 1, 3, 3), torch.tensor([[[[3.5, -2.7], [0.2, 0.9]]]])),
)
case(
    "grid_sample_nearest_inf",
    lambda x, g: F.grid_sample(x, g, mode="nearest", align_corners=False),
    lambda: (r(1, 1, 3, 3), torch.tensor([[[[float("inf"), 0.0], [float("nan"), 0.9]]]])),
)
case("kthvalue_k_oob", lambda x: x.kthvalue(4), lambda: (r(3),))
case("topk_k_oob", lambda x: x.topk(4), lambda: (r(3),))
case("flip_dup_dims", lambda x: x.flip(0, 0), lambda: (r(3),))
case("pad_neg_big", lambda x: F.pad(x, (-2, -2)), lambda: (r(3),))
case(
    "index_put_tuple_bool_long",
    lambda x, m, i, v: x.index_put_((m, i), v),
    lambda: (r(2, 3), I(1, 0).bool(), I(2), r(())),
)
case(
    "scatter_multiply",
    lambda x, i, s: x.scatter_(0, i, s, reduce="multiply"),
    lambda: (r(4), I(1, 1, 3), r(3)),
)
case(
    "gather_sparse_grad",
    lambda x, i: x.gather(1, i, sparse_grad=False),
    lambda: (r(2, 3), I(0, 2, 2, 1).reshape(2, 2)),
    grad=True,
)
case(
    "take_along_dim_dup_grad",
    lambda x, i: torch.take_along_dim(x, i, 1),
    lambda: (r(2, 3), I(0, 0, 2, 2).reshape(2, 2)),
    grad=True,
)
case(
    "index_add_alpha_dup_grad",
    lambda x, i, s: x.index_add(0, i, s, alpha=-2.0),
    lambda: (r(3, 2), I(1, 1, 0), r(3, 2)),
    grad=True,
)
case(
    "index_put_acc_grad",
    lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True),
    lambda: (r(3), I(1, 1, -1), r(3)),
    grad=True,
)
case(
    "index_put_dup_grad",
    lambda x, i, v: x.clone().index_put_((i,), v),
    lambda: (r(3), I(1, 2, -1), r(3)),
    grad=True,
)
case(
    "emb_max_norm_dup", lambda w, i: F.embedding(i, w, max_norm=0.5), lambda: (r(4, 2), I(1, 1, 3))
)


def hook_oob(x, i):
    y = x * 2
    y.register_hook(lambda g: g[i])
    return y.sum()


def hook_case(name, make):
    def sc(C, rec):
        g = C(hook_oob)
        x, i = make()
        x = x.clone().requires_grad_()
        try:
            out = g(x, i)
            rec("out", out)
            out.backward()
            rec("grad", x.grad)
        except Exception as e:  # noqa: BLE001  (an observation)
            rec("raised", e)
        rec("grad_after", x.grad)

    SCENARIOS[name] = sc


hook_case("hook_ok", lambda: (r(3), I(2, 1, 0)))
hook_case("hook_oob", lambda: (r(3), I(2, 1, 3)))


def break_then_oob(buf, x, i):
    buf.add_(1)
    print(end="")
    return x[i]


case("break_then_oob", break_then_oob, lambda: (torch.zeros(2), r(3), I(0, 3)))


def oob_then_write(buf, x, i):
    y = x[i]
    buf.add_(1)
    return y


case("oob_then_write", oob_then_write, lambda: (torch.zeros(2), r(3), I(0, 3)))


def setitem_oob_partial(x, i, v):
    x[i] = v
    return x


case(
    "setitem_oob_partial",
    setitem_oob_partial,
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)
case(
    "iadd_oob_partial",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)
case(
    "index_add_oob_partial",
    lambda x, i, v: x.index_add_(0, i, v),
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)
case(
    "scatter_oob_partial",
    lambda x, i, v: x.scatter_(0, i, v),
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)
case(
    "index_copy_oob_partial",
    lambda x, i, v: x.index_copy_(0, i, v),
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)
case(
    "index_fill_oob_partial",
    lambda x, i: x.index_fill_(0, i, 1.0),
    lambda: (torch.zeros(4), I(0, 1, 9, 2)),
)
case(
    "put_oob_partial",
    lambda x, i, v: x.put_(i, v),
    lambda: (torch.zeros(4), I(0, 1, 9, 2), torch.ones(4)),
)


class Queue(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.register_buffer("queue", torch.zeros(n, 2))
        self.register_buffer("ptr", torch.zeros((), dtype=torch.long))

    def forward(self, keys):
        b = keys.shape[0]
        idx = (self.ptr + torch.arange(b)) % self.queue.shape[0]
        self.queue[idx] = keys
        self.ptr.copy_((self.ptr + b) % self.queue.shape[0])
        return self.queue.sum(0)


def queue_case(name, sizes, ptr=0, dynamic=None):
    def sc(C, rec):
        q = Queue()
        q.ptr.fill_(ptr)
        g = C(q, dynamic=dynamic)
        for k, n in enumerate(sizes):
            try:
                rec(f"out{k}", g(r(n, 2, seed=k)))
            except Exception as e:  # noqa: BLE001  (an observation)
                rec(f"raised{k}", e)
            rec(f"state{k}", [q.queue, q.ptr])

    SCENARIOS[name] = sc


queue_case("queue_wrap", [3, 3, 3])
queue_case("queue_neg_ptr", [3, 2], ptr=-6)
queue_case("queue_dyn", [1, 3, 2, 3], dynamic=True)


class Ring(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))
        self.ptr = 0

    def forward(self, v):
        self.buf[self.ptr] = v
        self.ptr = (self.ptr + 1) % 3
        return self.buf * 1


def ring(C, rec):
    m = Ring()
    g = C(m)
    for k in range(5):
        rec(f"out{k}", g(torch.tensor(float(k + 1))))
    rec("ptr", m.ptr)


SCENARIOS["ring_python_ptr"] = ring


# -- batch 3: several bad indices (which one eager names), several failing ops (which first) ----
case("two_bad_get", lambda x, i: x[i], lambda: (r(4), I(1, 5, 9)))
case("two_bad_get_desc", lambda x, i: x[i], lambda: (r(4), I(1, 9, 5)))
case("two_bad_get_neg", lambda x, i: x[i], lambda: (r(4), I(1, -7, 9)))
case("two_bad_get_2d", lambda x, i: x[i], lambda: (r(4), I(1, 9, 5, 4).reshape(2, 2)))
case("two_bad_set", lambda x, i: x.__setitem__(i, 0.0), lambda: (r(4), I(1, 9, 5)))
case("two_bad_gather", lambda x, i: x.gather(0, i), lambda: (r(4), I(1, 9, 5)))
case(
    "two_bad_gather_2d", lambda x, i: x.gather(1, i), lambda: (r(2, 3), I(0, 1, 7, 4).reshape(2, 2))
)
case("two_bad_index_select", lambda x, i: x.index_select(0, i), lambda: (r(4), I(1, 9, 5)))
case("two_bad_index_select_neg", lambda x, i: x.index_select(0, i), lambda: (r(4), I(1, 9, -1)))
case("two_bad_index_select_dim1", lambda x, i: x.index_select(1, i), lambda: (r(2, 4), I(1, 9, 5)))
case("two_bad_embedding", lambda w, i: F.embedding(i, w), lambda: (r(4, 2), I(1, 9, 5)))
case("two_bad_embedding_neg", lambda w, i: F.embedding(i, w), lambda: (r(4, 2), I(1, 5, -1)))
case("two_bad_take", lambda x, i: x.take(i), lambda: (r(4), I(1, 9, 5)))
case("two_bad_scatter", lambda x, i, s: x.scatter(0, i, s), lambda: (r(4), I(1, 9, 5), r(3)))
case("two_bad_index_add", lambda x, i, s: x.index_add(0, i, s), lambda: (r(4), I(1, 9, 5), r(3)))
case("two_bad_index_copy", lambda x, i, s: x.index_copy(0, i, s), lambda: (r(4), I(1, 9, 5), r(3)))
case("two_bad_index_fill", lambda x, i: x.index_fill(0, i, 1.0), lambda: (r(4), I(1, 9, 5)))
case("two_bad_put", lambda x, i, s: x.put(i, s), lambda: (r(4), I(1, 9, 5), r(3)))
case("two_bad_nll", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), I(1, 9, 5)))
case("two_bad_nll_neg", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), I(1, 9, -3)))
case("two_bad_ce", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), I(1, 9, 5)))
case("two_bad_one_hot", lambda i: F.one_hot(i, 4), lambda: (I(1, 9, 5),))
case(
    "two_bad_bag", lambda w, i, o: F.embedding_bag(i, w, o), lambda: (r(4, 2), I(1, 9, 5), I(0, 1))
)
case("two_bad_xy", lambda x, i, j: x[i, j], lambda: (r(3, 3), I(1, 2), I(7, 5)))
case("two_bad_xy_first_dim", lambda x, i, j: x[i, j], lambda: (r(3, 3), I(1, 5), I(7, 1)))
case(
    "two_bad_scatter_reduce",
    lambda x, i, s: x.scatter_reduce(0, i, s, "amax"),
    lambda: (r(4), I(1, 9, 5), r(3)),
)
case(
    "two_bad_index_reduce",
    lambda x, i, s: x.index_reduce(0, i, s, "amax"),
    lambda: (r(4, 1), I(1, 9, 5), r(3, 1)),
)
case(
    "two_bad_unpool",
    lambda x, i: F.max_unpool1d(x, i, 2),
    lambda: (r(1, 1, 3), I(0, 9, 7).reshape(1, 1, 3)),
)


def gather_then_index(x, i, j):
    a = x.gather(0, j)
    b = x[i]
    return a, b


def index_then_gather(x, i, j):
    b = x[i]
    a = x.gather(0, j)
    return a, b


def index_after_use(x, i, j):
    b = x[i] * 2
    a = x.gather(0, j) + b.sum()
    return a


case("order_gather_then_index", gather_then_index, lambda: (r(4), I(5), I(6)))
case("order_index_then_gather", index_then_gather, lambda: (r(4), I(5), I(6)))
case("order_index_after_use", index_after_use, lambda: (r(4), I(5), I(6)))
case("order_grad", index_then_gather, lambda: (r(4), I(5), I(6)), grad=True)
case("order_div_then_index", lambda x, k, n: x[n // k], lambda: (r(4), I(0), I(7)))
case("order_index_then_div", lambda x, k, n: (x[n], n // k), lambda: (r(4), I(0), I(7)))


def param_write_then_oob(w, x, i):
    with torch.no_grad():
        w.mul_(2)
    return (w * x)[i]


case("param_write_then_oob", param_write_then_oob, lambda: (r(3), r(3), I(4)), grad=True)


def view_out_then_oob(x, i):
    v = x[1:]
    v.add_(1)
    return v, x[i]


case("view_out_then_oob", view_out_then_oob, lambda: (r(4), I(4)))


# -- batch 4: each family with dynamic=True, good then bad (another size), bad then good --------
_FAMILIES = {
    "get": (lambda x, i, s: x[i], 1),
    "get_col": (lambda x, i, s: x[:, i], 1),
    "set": (lambda x, i, s: x.__setitem__((slice(None), i), s), 1),
    "iadd": (lambda x, i, s: x.index_put_((slice(None), i) and (i,), s.sum(0), accumulate=True), 0),
    "gather": (lambda x, i, s: x.gather(1, i.expand(x.shape[0], -1)), 1),
    "scatter_add": (lambda x, i, s: x.scatter_add(1, i.expand(x.shape[0], -1), s), 1),
    "index_select": (lambda x, i, s: x.index_select(1, i), 1),
    "index_add": (lambda x, i, s: x.index_add(1, i, s), 1),
    "index_copy": (lambda x, i, s: x.index_copy(1, i, s), 1),
    "index_fill": (lambda x, i, s: x.index_fill(1, i, 0.5), 1),
    "take": (lambda x, i, s: x.take(i), None),
    "put": (lambda x, i, s: x.put(i, s.flatten()[: i.numel()]), None),
    "embedding": (lambda x, i, s: F.embedding(i, x), 0),
    "nll": (lambda x, i, s: F.nll_loss(x[: i.numel()], i), 1),
    "one_hot": (lambda x, i, s: F.one_hot(i, x.shape[1]).float() + x[0, 0], 1),
    "take_along": (lambda x, i, s: torch.take_along_dim(x, i.expand(x.shape[0], -1), 1), 1),
}


def _dyn_args(n, bad, dim):
    x = r(n, n, seed=n)
    size = n * n if dim is None else n
    i = I(0, size if bad else size - 1, 1)
    return x, i.reshape(1, 3) if False else i, r(n, 3, seed=1)


for _fam, (_f, _d) in _FAMILIES.items():
    case(
        f"dyn_{_fam}_good_bad",
        _f,
        lambda d=_d: _dyn_args(4, False, d),
        lambda d=_d: _dyn_args(5, True, d),
        lambda d=_d: _dyn_args(6, False, d),
        dynamic=True,
    )
    case(
        f"dyn_{_fam}_bad_good",
        _f,
        lambda d=_d: _dyn_args(4, True, d),
        lambda d=_d: _dyn_args(5, False, d),
        dynamic=True,
    )
    case(
        f"static_{_fam}_good_bad_good",
        _f,
        lambda d=_d: _dyn_args(4, False, d),
        lambda d=_d: _dyn_args(4, True, d),
        lambda d=_d: _dyn_args(4, False, d),
    )

case("gather_dims_mismatch", lambda x, i: x.gather(0, i), lambda: (r(2, 3), I(0, 1)))
case(
    "gather_index_bigger",
    lambda x, i: x.gather(1, i),
    lambda: (r(2, 3), I(0, 1, 0, 0, 0, 0).reshape(3, 2)),
)
case(
    "scatter_add_index_bigger_src",
    lambda x, i, s: x.scatter_add(1, i, s),
    lambda: (r(2, 3), I(0, 1, 2, 0).reshape(2, 2), r(2, 1)),
)
case("histc_int", lambda x: torch.histc(x, bins=3), lambda: (I(0, 1, 2),))
case(
    "histogram_tensor_bins",
    lambda x, b: torch.histogram(x, b),
    lambda: (torch.tensor([0.5, 1.5, 9.0, -1.0]), torch.tensor([0.0, 1.0, 2.0])),
)
case("list_of_tensors_index", lambda x, i, j: x[[i, j]], lambda: (r(3, 3), I(0, 2), I(1, 3)))
case("none_then_idx_oob", lambda x, i: x[None, i], lambda: (r(3), I(3)))
case("ellipsis_idx_none_oob", lambda x, i: x[..., i, None], lambda: (r(2, 3), I(-4)))
case(
    "inverse_perm",
    lambda p: torch.empty_like(p).scatter_(0, p, torch.arange(p.numel())),
    lambda: (torch.randperm(5, generator=torch.Generator().manual_seed(0)),),
)
case(
    "inverse_perm_setitem",
    lambda p: torch.zeros_like(p).index_put_((p,), torch.arange(p.numel())),
    lambda: (I(2, 0, 1),),
)
case(
    "expanded_index_select",
    lambda x, i: x.expand(3, 4).index_select(1, i),
    lambda: (r(1, 4), I(3, 4)),
)
case("gumbel_hard", lambda x: F.gumbel_softmax(x, hard=True).sum(), lambda: (r(2, 3),))
case(
    "unique_inverse_index",
    lambda x: x[torch.unique(x, return_inverse=True)[1]],
    lambda: (I(3, 1, 3, 2).float(),),
)


# -- batch 5: padded dynamic sizes (buckets) under computed indices --------------------------------
def _neg(n, seed=0):
    return -(r(n, seed=seed).abs() + 1)


def _dyn3(name, f, make, sizes=(5, 6, 7), **kw):
    case(name, f, *(lambda n=n: make(n) for n in sizes), dynamic=True, **kw)


_dyn3("pad_argmax_neg", lambda x: x.argmax(), lambda n: (_neg(n),))
_dyn3("pad_argmin_pos", lambda x: x.argmin(), lambda n: (r(n).abs() + 1,))
_dyn3("pad_argmax_index_next", lambda x, y: y[x.argmax() + 1], lambda n: (_neg(n), r(n)))
_dyn3("pad_topk_idx", lambda x: x.topk(2).indices, lambda n: (_neg(n),))
_dyn3("pad_topk_smallest", lambda x: x.topk(2, largest=False), lambda n: (r(n).abs() + 1,))
_dyn3("pad_sort_idx", lambda x: x.sort().indices, lambda n: (_neg(n),))
_dyn3("pad_argsort_desc", lambda x: x.argsort(descending=True), lambda n: (_neg(n),))
_dyn3(
    "pad_searchsorted_seq",
    lambda s, v: torch.searchsorted(s, v),
    lambda n: (torch.arange(n).float() + 1, I(0, 3, 100).float()),
)
_dyn3(
    "pad_searchsorted_vals",
    lambda s, v: torch.searchsorted(s, v),
    lambda n: (I(1, 3, 5).float(), torch.arange(n).float()),
)
_dyn3(
    "pad_searchsorted_right",
    lambda s, v: torch.searchsorted(s, v, right=True),
    lambda n: (torch.arange(n).float() - 2, I(-9, 0, 100).float()),
)
_dyn3(
    "pad_bucketize_bounds",
    lambda v, b: torch.bucketize(v, b),
    lambda n: (I(-1, 3, 100).float(), torch.arange(n).float()),
)
_dyn3(
    "pad_histc", lambda x: torch.histc(x, bins=4, min=-1, max=1), lambda n: (r(n).clamp(-0.9, 0.9),)
)
_dyn3("pad_histc_auto", lambda x: torch.histc(x, bins=4), lambda n: (r(n).abs() + 1,))
_dyn3(
    "pad_bincount_minlen",
    lambda i: torch.bincount(i, minlength=10),
    lambda n: (torch.arange(n) % 3 + 1,),
)
_dyn3(
    "pad_bincount_weights",
    lambda i, w: torch.bincount(i, w, minlength=10),
    lambda n: (torch.arange(n) % 3 + 1, r(n)),
)
_dyn3("pad_one_hot_auto", lambda i: F.one_hot(i, 10).sum(0), lambda n: (torch.arange(n) % 3 + 1,))
_dyn3(
    "pad_scatter_add_counts",
    lambda i: torch.zeros(4).scatter_add(0, i, torch.ones(i.shape[0])),
    lambda n: (torch.arange(n) % 3 + 1,),
)
_dyn3(
    "pad_index_add_counts",
    lambda i: torch.zeros(4).index_add(0, i, torch.ones(i.shape[0])),
    lambda n: (torch.arange(n) % 3 + 1,),
)
_dyn3(
    "pad_accumulate_counts",
    lambda i: torch.zeros(4).index_put((i,), torch.ones(i.shape[0]), accumulate=True),
    lambda n: (torch.arange(n) % 3 + 1,),
)
_dyn3(
    "pad_scatter_reduce_amin",
    lambda i, v: torch.zeros(4).scatter_reduce(0, i, v, "amin", include_self=False),
    lambda n: (torch.arange(n) % 3 + 1, r(n).abs() + 1),
)
_dyn3(
    "pad_scatter_reduce_prod",
    lambda i, v: torch.ones(4).scatter_reduce(0, i, v, "prod"),
    lambda n: (torch.arange(n) % 3 + 1, r(n)),
)
_dyn3(
    "pad_scatter_reduce_mean",
    lambda i, v: torch.zeros(4).scatter_reduce(0, i, v, "mean", include_self=False),
    lambda n: (torch.arange(n) % 3 + 1, r(n)),
)
_dyn3(
    "pad_index_reduce_amax",
    lambda i, v: torch.zeros(4).index_reduce(0, i, v, "amax", include_self=False),
    lambda n: (torch.arange(n) % 3 + 1, -r(n).abs() - 1),
)
_dyn3(
    "pad_nll_mean",
    lambda x, t: F.nll_loss(x, t),
    lambda n: (r(n, 3), torch.arange(n) % 3),
    grad=True,
)
_dyn3(
    "pad_ce_ignore",
    lambda x, t: F.cross_entropy(x, t, ignore_index=0),
    lambda n: (r(n, 3), torch.arange(n) % 3),
    grad=True,
)
_dyn3(
    "pad_ce_smooth",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda n: (r(n, 3), torch.arange(n) % 3),
    grad=True,
)
_dyn3(
    "pad_bag_offsets",
    lambda w, i, o: F.embedding_bag(i, w, o, mode="max"),
    lambda n: (r(4, 2), torch.arange(n) % 4, I(0, 2)),
)
_dyn3(
    "pad_bag_offsets_dyn",
    lambda w, i, o: F.embedding_bag(i, w, o, mode="mean"),
    lambda n: (r(4, 2), I(0, 1, 2, 3, 1, 2, 3), torch.arange(n)),
)
_dyn3(
    "pad_bag_2d",
    lambda w, i: F.embedding_bag(i, w, mode="sum"),
    lambda n: (r(10, 2), torch.arange(2 * n).reshape(2, n) % 10),
)
_dyn3(
    "pad_unique_counts",
    lambda x: torch.unique(x, return_counts=True),
    lambda n: (torch.arange(n) % 3,),
)
_dyn3("pad_cummax_idx", lambda x: x.cummax(0).indices, lambda n: (_neg(n),))
_dyn3("pad_kthvalue", lambda x: x.kthvalue(2), lambda n: (_neg(n),))
_dyn3("pad_max_dim", lambda x: x.max(1), lambda n: (-r(2, n).abs() - 1,))
_dyn3("pad_mode", lambda x: torch.mode(x), lambda n: (torch.arange(n) % 2 + 1,))
_dyn3("pad_median_idx", lambda x: x.median(0), lambda n: (_neg(n),))
_dyn3("pad_nonzero", lambda x: (x > 0).nonzero(), lambda n: (r(n),))
_dyn3("pad_masked_select", lambda x: x[x > -100], lambda n: (_neg(n),))
_dyn3(
    "pad_multinomial_free",
    lambda x: F.one_hot(x.argmax(1), x.shape[1]),
    lambda n: (-r(2, n).abs() - 1,),
)
_dyn3("pad_roll", lambda x: torch.roll(x, 2), lambda n: (r(n),))
_dyn3("pad_roll_neg", lambda x: torch.roll(x, -1, 0), lambda n: (r(n, 2),))
_dyn3("pad_flip_idx", lambda x, y: y[x.flip(0).argmax()], lambda n: (_neg(n), r(n)))
_dyn3(
    "pad_cumsum_idx",
    lambda i, x: x[i.cumsum(0) % x.shape[0]],
    lambda n: (torch.ones(n, dtype=torch.long), r(n)),
)
_dyn3("pad_last_idx", lambda x: x[x.shape[0] - 1] + x[-1], lambda n: (r(n),))
_dyn3("pad_neg_idx_tensor", lambda x, i: x[i], lambda n: (r(n), I(-1, -n)))
_dyn3("pad_neg_idx_tensor_oob", lambda x, i: x[i], lambda n: (r(n), I(-1, -n - 1)))
_dyn3("pad_gather_neg_oob", lambda x, i: x.gather(0, i), lambda n: (r(n), I(-1)))
_dyn3("pad_take_neg", lambda x, i: x.take(i), lambda n: (r(n), I(-1, -n)))
_dyn3("pad_take_2d_neg", lambda x, i: x.take(i), lambda n: (r(n, 3), I(-1, -3 * n, 3 * n - 1)))
_dyn3("pad_take_2d_oob", lambda x, i: x.take(i), lambda n: (r(n, 3), I(3 * n)))
_dyn3("pad_put_2d_neg", lambda x, i: x.put(i, torch.ones(2)), lambda n: (r(n, 3), I(-1, -3 * n)))
_dyn3("pad_index_select_neg", lambda x, i: x.index_select(0, i), lambda n: (r(n), I(-1)))
_dyn3("pad_emb_dyn_table", lambda w, i: F.embedding(i, w), lambda n: (r(n, 2), I(n - 1, 0)))
_dyn3("pad_emb_dyn_table_oob", lambda w, i: F.embedding(i, w), lambda n: (r(n, 2), I(n, 0)))
_dyn3(
    "pad_emb_dyn_table_neg_pad",
    lambda w, i: F.embedding(i, w, padding_idx=-1),
    lambda n: (r(n, 2), I(n - 1, 0)),
    grad=True,
)
_dyn3("pad_index_fill_neg", lambda x, i: x.index_fill(0, i, 9.0), lambda n: (r(n), I(-1, -n)))
_dyn3(
    "pad_index_copy_last",
    lambda x, i: x.index_copy(0, i, torch.ones(1)),
    lambda n: (r(n), I(n - 1)),
)
_dyn3("pad_scatter_last", lambda x, i: x.scatter(0, i, 5.0), lambda n: (r(n), I(n - 1)))
_dyn3("pad_scatter_oob", lambda x, i: x.scatter(0, i, 5.0), lambda n: (r(n), I(n)))
_dyn3(
    "pad_setitem_neg",
    lambda x, i: x.index_put_((i,), torch.tensor(7.0)),
    lambda n: (r(n), I(-1, -n)),
)
_dyn3(
    "pad_setitem_neg_acc",
    lambda x, i: x.index_put_((i,), torch.tensor(7.0), accumulate=True),
    lambda n: (r(n), I(-1, -1, -n)),
)
_dyn3("pad_narrow_end", lambda x: x.narrow(0, x.shape[0] - 2, 2), lambda n: (r(n),))
_dyn3("pad_select_neg", lambda x: x.select(0, -2), lambda n: (r(n, 2),))


# -- batch 6: custom backward that indexes, inference_mode, torch.func --------------------------
class _PickGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, i):
        ctx.save_for_backward(i)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (i,) = ctx.saved_tensors
        return g[i], None


case("fn_backward_ok", lambda x, i: _PickGrad.apply(x, i), lambda: (r(3), I(2, 1, 0)), grad=True)
case("fn_backward_oob", lambda x, i: _PickGrad.apply(x, i), lambda: (r(3), I(2, 1, 3)), grad=True)


def inference_mode_case(name, f, make):
    def sc(C, rec):
        g = C(f)
        with torch.inference_mode():
            try:
                rec("out", g(*make()))
            except Exception as e:  # noqa: BLE001  (an observation)
                rec("raised", e)

    SCENARIOS[name] = sc


inference_mode_case("inference_mode_oob", lambda x, i: x[i], lambda: (r(3), I(3)))
inference_mode_case(
    "inference_mode_emb_oob", lambda w, i: F.embedding(i, w), lambda: (r(3, 2), I(3))
)
case("func_grad_oob", lambda x, i: torch.func.grad(lambda y: y[i].sum())(x), lambda: (r(3), I(3)))
case("func_grad_ok", lambda x, i: torch.func.grad(lambda y: y[i].sum())(x), lambda: (r(3), I(2, 2)))
case(
    "func_vmap_gather_oob",
    lambda x, i: torch.func.vmap(lambda a, b: a[b])(x, i),
    lambda: (r(2, 3), I(0, 3)),
)


def main(argv: list[str]) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
