"""Probe error parity, session 26: user-style mistakes (shapes, dtypes, indices, in-place
writes autograd needs, asserts) in functions and modules compiled with
``torch.compile(backend="xla")``, against eager: whether each raises, eager's exception
type, eager's first line in our message, and the user's line (this file) in our message or
traceback; where eager runs, eager's values; then a valid call of the same compiled function.

    PYTHONPATH=. python scripts/probe_errors26.py [substring ...]

Harness as ``probe_errors.py`` (``case``/``scenario``), but an error's observation holds its
traceback too, so that an error eager raises after a graph break (its own traceback through
the user's line) counts as naming the line.
Prints ``ok`` / ``DIFF`` / ``NOLINE`` / ``CRASH`` per case.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, ri, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        tb = "".join(traceback.format_exception(v))
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v), tb)
    return ("V", v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, equal_nan=True, rtol=1e-5, atol=1e-6):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def case(name, f, make, good=None, dynamic=None, fullgraph=False):
    def run_case(C, rec):
        compiled = C(f, dynamic=dynamic, fullgraph=fullgraph)
        args = make()
        try:
            rec("out", compiled(*args))
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("raised", e)
        rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        if good is not None:
            args = good()
            rec("good", compiled(*args))

    assert name not in CASES, name
    CASES[name] = run_case


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


def observe(fn, compiled):
    def C(f, dynamic=None, **kw):
        if not compiled:
            return f
        return torch.compile(f, backend=BACKEND, dynamic=dynamic, **kw)

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for label, g in got:
        if g[0] == "E" and THIS not in g[3] and THIS not in g[4]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:300]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


# ============================================================================================
# shapes eager rejects (Dynamo's fake run sees them first)
def mlp_wrong_features(x, w1, w2):
    h = torch.relu(x @ w1)
    return h @ w2


case(
    "mm_inner_mismatch",
    mlp_wrong_features,
    lambda: (r(2, 3), r(3, 4), r(5, 2)),
    lambda: (r(2, 3), r(3, 4), r(4, 2)),
)
case("mm_method", lambda a, b: a.mm(b) + 1, lambda: (r(2, 3), r(4, 2)), lambda: (r(2, 3), r(3, 2)))
case("bmm_batch", lambda a, b: torch.bmm(a, b), lambda: (r(2, 2, 3), r(3, 3, 2)))
case("matmul_1d", lambda a, b: torch.matmul(a, b), lambda: (r(3), r(4)))
case("broadcast_add", lambda a, b: (a + b).sum(), lambda: (r(2, 3), r(4, 2)))
case("broadcast_mul_inplace", lambda a, b: a.mul_(b), lambda: (r(3), r(2, 3)))
case("view_noncontig", lambda a: a.t().view(-1) * 2, lambda: (r(3, 4),), lambda: (r(1, 4),))
case("view_wrong_numel", lambda a: a.view(5, -1), lambda: (r(3, 4),))
case("reshape_impossible", lambda a: a.reshape(5, 3), lambda: (r(3, 4),))
case("expand_smaller", lambda a: a.expand(2, 2), lambda: (r(2, 3),))
case("expand_nonsingleton", lambda a: a.expand(4, 3), lambda: (r(2, 3),))
case("cat_mismatch", lambda a, b: torch.cat([a, b], dim=0), lambda: (r(2, 3), r(2, 4)))
case("cat_ndim_mismatch", lambda a, b: torch.cat([a, b]), lambda: (r(2, 3), r(3)))
case("stack_mismatch", lambda a, b: torch.stack([a, b]), lambda: (r(3), r(4)))
case("repeat_fewer_dims", lambda a: a.repeat(2), lambda: (r(2, 3),))
case("permute_repeated", lambda a: a.permute(0, 0), lambda: (r(2, 3),))
case("softmax_dim_oob", lambda a: F.softmax(a, dim=2), lambda: (r(2, 3),))
case("sum_dim_oob", lambda a: a.sum(dim=3) + 1, lambda: (r(2, 3),))
case("transpose_dim_oob", lambda a: a.transpose(0, 2), lambda: (r(2, 3),))
case("squeeze_dim_oob", lambda a: a.squeeze(4), lambda: (r(2, 3),))
case("unsqueeze_dim_oob", lambda a: a.unsqueeze(4), lambda: (r(2, 3),))
case("int_index_oob", lambda a: a[5] + 1, lambda: (r(3, 2),))
case("int_index_col_oob", lambda a: a[:, 7] + 1, lambda: (r(3, 2),))
case("select_int_oob", lambda a: a.select(1, -3), lambda: (r(3, 2),))
case("narrow_too_long", lambda a: a.narrow(0, 2, 5), lambda: (r(3, 2),))
case("chunk_zero", lambda a: a.chunk(0), lambda: (r(3, 2),))
case("split_sizes_sum", lambda a: a.split([1, 1], dim=0), lambda: (r(3, 2),))
case("zeros_negative", lambda a: torch.zeros(-1) + a.sum(), lambda: (r(3),))
case("arange_step_zero", lambda a: torch.arange(0, 10, 0) + a.sum(), lambda: (r(3),))
case("index_select_2d_index", lambda a, j: a.index_select(0, j), lambda: (r(3), i(0, 1).view(1, 2)))
case("gather_ndim", lambda a, j: a.gather(1, j), lambda: (r(3, 4), i(0, 1)))
case("einsum_bad", lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda: (r(2, 3), r(4, 2)))
case("einsum_bad_spec", lambda a: torch.einsum("ij->ijk", a), lambda: (r(2, 3),))
case("pad_reflect_too_big", lambda a: F.pad(a, (4, 4), mode="reflect"), lambda: (r(1, 2, 3),))
case("item_many", lambda a: a.item() + 1, lambda: (r(3),))
case("int_of_many", lambda a: a * int(a), lambda: (r(3),))
case("bool_of_many", lambda a: a * 2 if a else a, lambda: (r(3),))
case(
    "masked_fill_value_1d",
    lambda a, m, v: a.masked_fill(m, v),
    lambda: (r(3), i(1, 0, 1, dtype=torch.bool), r(1)),
)
case("new_shape_float", lambda a: a.view(2.0, 6), lambda: (r(3, 4),))


# dtypes eager rejects
case("linear_dtype", lambda x, w: F.linear(x, w), lambda: (r(2, 3), r(4, 3, dtype=torch.float64)))
case("mm_f32_f64", lambda a, b: a.mm(b), lambda: (r(2, 3), r(3, 2, dtype=torch.float64)))
case("matmul_f32_f64", lambda a, b: a @ b, lambda: (r(2, 3), r(3, 2, dtype=torch.float64)))
case("bmm_f32_f64", lambda a, b: a.bmm(b), lambda: (r(1, 2, 3), r(1, 3, 2, dtype=torch.float64)))
case("int_add_float_", lambda a, b: a.add_(b), lambda: (ri(3), r(3)))
case("int_iadd_float", lambda a: a.__iadd__(0.5), lambda: (ri(3),))
case("cat_bool_float", lambda a, b: torch.cat([a, b]), lambda: (ri(3) > 0, r(3)))
case("where_mixed", lambda c, a, b: torch.where(c, a, b), lambda: (ri(3) > 0, r(3), ri(3)))
case(
    "index_put_dtype",
    lambda x, j, v: x.index_put_((j,), v),
    lambda: (r(4), i(0, 2), r(2, dtype=torch.float64)),
)
case(
    "setitem_dtype_ok",
    lambda x, j, v: x.__setitem__(j, v) or x,
    lambda: (r(4), i(0, 2), r(2, dtype=torch.float64)),
)
case("float_index", lambda x, j: x[j], lambda: (r(4), torch.tensor([0.0, 1.0])))
case("float_index_select", lambda x, j: x.index_select(0, j), lambda: (r(4), torch.tensor([0.0])))
case("embedding_float_ids", lambda x, w: F.embedding(x, w), lambda: (torch.tensor([0.0]), r(3, 2)))
case("conv_input_channels", lambda x, w: F.conv2d(x, w), lambda: (r(1, 4, 5, 5), r(2, 3, 3, 3)))
case("conv_dtype", lambda x, w: F.conv2d(x, w), lambda: (r(1, 3, 5, 5), r(2, 3, 3, 3).double()))
case("cross_entropy_batch", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), i(0, 1)))
case(
    "cross_entropy_float_target_shape", lambda x, t: F.cross_entropy(x, t), lambda: (r(3, 4), r(3))
)
case(
    "nll_loss_int_target_dtype", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), i(0, 1, 2).int())
)
case("mse_int", lambda a, b: F.mse_loss(a, b), lambda: (ri(3), ri(3)))
case("bce_out_of_range", lambda a, b: F.binary_cross_entropy(a, b), lambda: (r(3) + 2, r(3).abs()))
case("bce_target_shape", lambda a, b: F.binary_cross_entropy(a.sigmoid(), b), lambda: (r(3), r(4)))


# module errors users make
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


@scenario
def module_wrong_input_features(C, rec):
    torch.manual_seed(0)
    m = Net().eval()
    g = C(m)
    rec("ok", g(r(2, 4)))
    try:
        rec("bad", g(r(2, 5)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("again", g(r(3, 4)))


@scenario
def module_training_batch_one(C, rec):
    torch.manual_seed(0)
    m = Net().train()
    g = C(m)
    try:
        rec("bad", g(r(1, 4)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("stats", [m.bn.running_mean, m.bn.num_batches_tracked])


@scenario
def module_conv_channels(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 3 * 3, 2))
    g = C(m)
    rec("ok", g(r(1, 3, 5, 5)))
    try:
        rec("bad", g(r(1, 3, 6, 6)))  # flattened size no longer matches the Linear
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


@scenario
def embedding_bad_token_train(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 3)

    def step(tok, y):
        loss = F.cross_entropy(head(emb(tok).mean(1)), y)
        loss.backward()
        return loss

    g = C(step)
    rec("ok", g(i(1, 2, 3).view(1, 3), i(1)))
    try:
        rec("bad", g(i(1, 10, 3).view(1, 3), i(1)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("grads", [emb.weight.grad, head.weight.grad])
    try:
        rec("bad_label", g(i(1, 2, 3).view(1, 3), i(3)))
    except Exception as e:  # noqa: BLE001
        rec("raised_label", e)
    rec("ignored_label", g(i(1, 2, 3).view(1, 3), i(-100)))


# ============================================================================================
# indices out of range, the graph already compiled (cached program, dynamic shapes)
@scenario
def cached_then_oob(C, rec):
    g = C(lambda x, j: x[j] * 2)
    for k, j in enumerate([i(0, 2), i(1, 1), i(0, 3), i(-4), i(-3)]):
        try:
            rec(f"c{k}", g(r(3), j))
        except Exception as e:  # noqa: BLE001
            rec(f"e{k}", e)


@scenario
def dynamic_oob(C, rec):
    g = C(lambda x, j: x.index_select(0, j).sum(0), dynamic=True)
    for k, (n, j) in enumerate([(3, i(0, 2)), (5, i(4, 1)), (6, i(6)), (7, i(-1)), (4, i(3))]):
        try:
            rec(f"c{k}", g(r(n, 2), j))
        except Exception as e:  # noqa: BLE001
            rec(f"e{k}", e)


@scenario
def dynamic_gather_take_along(C, rec):
    g = C(lambda x, j: torch.take_along_dim(x, j, dim=1), dynamic=True)
    for k, (n, j) in enumerate([(3, i(0, 2)), (5, i(4, 1)), (6, i(6, 0)), (4, i(-5, 0))]):
        try:
            rec(f"c{k}", g(r(2, n), j.view(1, 2).expand(2, 2)))
        except Exception as e:  # noqa: BLE001
            rec(f"e{k}", e)


@scenario
def one_hot_loop(C, rec):
    g = C(lambda y: F.one_hot(y, 4).float().sum(0))
    for k, y in enumerate([i(0, 3), i(1, 2), i(4, 0), i(-1, 0), i(3, 3)]):
        try:
            rec(f"c{k}", g(y))
        except Exception as e:  # noqa: BLE001
            rec(f"e{k}", e)


@scenario
def int_position_cache(C, rec):
    cache = torch.zeros(4, 2)

    def step(pos, v):
        cache[pos] = v
        return cache.sum()

    g = C(step)
    for p in range(6):
        try:
            rec(f"s{p}", g(p, r(2, seed=p)))
        except Exception as e:  # noqa: BLE001
            rec(f"e{p}", e)
    rec("cache", cache)


@scenario
def int_position_read(C, rec):
    g = C(lambda x, pos: x[pos] * 2)
    for p in (0, 1, 2, 3, -3, -4):
        try:
            rec(f"s{p}", g(r(3, 2), p))
        except Exception as e:  # noqa: BLE001
            rec(f"e{p}", e)


@scenario
def int_narrow_start(C, rec):
    g = C(lambda x, s: x.narrow(0, s, 2) + 1)
    for s in (0, 1, 2, 3):
        try:
            rec(f"s{s}", g(r(4, 2), s))
        except Exception as e:  # noqa: BLE001
            rec(f"e{s}", e)


# ============================================================================================
# integer division by zero; float division by zero runs
case("floordiv_zero", lambda a, b: a // b, lambda: (i(4, 5), i(2, 0)), lambda: (i(4, 5), i(2, 3)))
case("mod_zero", lambda a, b: a % b, lambda: (i(4, 5), i(0, 1)))
case("div_floor_zero", lambda a, b: torch.div(a, b, rounding_mode="floor"), lambda: (i(4), i(0)))
case("div_trunc_zero", lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda: (i(4), i(0)))
case("div_true_int_zero_ok", lambda a, b: a / b, lambda: (i(4, 0), i(0, 0)))
case("float_floordiv_zero_ok", lambda a, b: a // b, lambda: (r(3), torch.zeros(3)))
case("float_mod_zero_ok", lambda a, b: a % b, lambda: (r(3), torch.zeros(3)))
case("int32_floordiv_zero", lambda a, b: (a // b).sum(), lambda: (i(4, 5).int(), i(1, 0).int()))


def average_per_class(x, y, counts):
    totals = torch.zeros(3, dtype=torch.long).index_add_(0, y, x)
    return totals // counts


case(
    "per_class_mean_zero_count",
    average_per_class,
    lambda: (i(3, 4, 5), i(0, 0, 1), i(2, 1, 0)),
    lambda: (i(3, 4, 5), i(0, 0, 1), i(2, 1, 1)),
)


# ============================================================================================
# asserts in user code, data-dependent checks, linear algebra
def checked_norm(x):
    torch._assert((x > 0).all(), "x must be positive")
    return x.log()


def python_assert_all(x):
    assert (x > 0).all(), "x must be positive"
    return x.log()


def check_then_index(x, j):
    assert j.max() < x.shape[0], "index too large"
    return x[j]


case("torch_assert_all", checked_norm, lambda: (-r(3).abs(),), lambda: (r(3).abs() + 0.1,))
case("python_assert_all", python_assert_all, lambda: (-r(3).abs(),), lambda: (r(3).abs() + 0.1,))
case("assert_index_max", check_then_index, lambda: (r(3), i(0, 3)), lambda: (r(3), i(0, 2)))
case("cholesky_not_pd", lambda a: torch.linalg.cholesky(a), lambda: (torch.eye(2) - 2,))
case("inv_singular", lambda a: torch.linalg.inv(a) + 1, lambda: (torch.ones(2, 2),))
case("solve_singular", lambda a, b: torch.linalg.solve(a, b), lambda: (torch.ones(2, 2), r(2)))


# ============================================================================================
# errors of the backward
@scenario
def backward_modified_saved_inside(C, rec):
    x = r(3).requires_grad_()

    def f(x):
        y = x.sigmoid()
        y.mul_(2)
        return y.sum()

    loss = C(f)(x)
    rec("loss", loss)
    loss.backward()
    rec("grad", x.grad)


@scenario
def backward_modified_output_outside(C, rec):
    x = r(3).requires_grad_()
    y = C(lambda x: x.exp())(x)
    y.add_(1)
    y.sum().backward()
    rec("grad", x.grad)


@scenario
def backward_modified_input_outside(C, rec):
    w = r(3).requires_grad_()
    x = r(3)
    y = C(lambda w, x: (w * x).sum())(w, x)
    x.mul_(2)
    y.backward()
    rec("grad", w.grad)


@scenario
def backward_twice(C, rec):
    x = r(3).requires_grad_()
    y = C(lambda x: (x.sin() * x).sum())(x)
    y.backward()
    y.backward()
    rec("grad", x.grad)


@scenario
def backward_non_scalar(C, rec):
    x = r(3).requires_grad_()
    y = C(lambda x: x * 2)(x)
    y.backward()


@scenario
def leaf_inplace_inside(C, rec):
    w = r(3).requires_grad_()
    C(lambda w: w.add_(1))(w)


@scenario
def no_grad_backward(C, rec):
    x = r(3)
    y = C(lambda x: (x * 2).sum())(x)
    y.backward()


# ============================================================================================
# Python-level and module-level mistakes (Python's errors and nn's own checks)
case("shape_tuple_oob", lambda a: a * a.shape[5], lambda: (r(2, 3),))
case("size_dim_oob", lambda a: a * a.size(3), lambda: (r(2, 3),))
case("len_0d", lambda a: a * len(a), lambda: (torch.tensor(1.0),))
case("iter_0d", lambda a: [v for v in a], lambda: (torch.tensor(1.0),))
case("numpy_requires_grad", lambda a: a.numpy(), lambda: (r(2).requires_grad_(),))
case("to_cuda", lambda a: a.to("cuda") + 1, lambda: (r(2),))
case("interpolate_2d", lambda a: F.interpolate(a, scale_factor=2), lambda: (r(2, 3),))
case(
    "embedding_padding_idx", lambda x, w: F.embedding(x, w, padding_idx=5), lambda: (i(0), r(3, 2))
)
case(
    "gather_index_too_big", lambda a, j: a.gather(1, j), lambda: (r(3, 4), i(0, 1, 2, 3).view(4, 1))
)
case(
    "scatter_src_small",
    lambda a, j, s: a.scatter(1, j, s),
    lambda: (r(3, 4), i(0, 1, 2).view(3, 1), r(2, 1)),
)
case(
    "index_add_source_shape",
    lambda a, j, s: a.index_add(0, j, s),
    lambda: (r(3, 4), i(0, 1), r(2, 3)),
)
case("unfold_too_big", lambda a: a.unfold(0, 5, 1), lambda: (r(3),))
case("solve_shapes", lambda a, b: torch.linalg.solve(a, b), lambda: (r(3, 3), r(2)))
case("nll_3d_target_shape", lambda x, t: F.nll_loss(x, t), lambda: (r(2, 3, 4), i(0, 1)))
case("view_dtype_size", lambda a: a.view(torch.int16)[..., :3], lambda: (r(3, 3)[:, :1],))
case(
    "pad_sequence_dims", lambda a, b: nn.utils.rnn.pad_sequence([a, b]), lambda: (r(2, 3), r(2, 4))
)


def raise_on_shape(x):
    if x.shape[0] != 4:
        raise ValueError(f"expected 4 rows, got {x.shape[0]}")
    return x * 2


case("user_raise_on_shape", raise_on_shape, lambda: (r(3),), lambda: (r(4),))


def dict_lookup(x, d):
    return x * d["scale"]


case("user_key_error", dict_lookup, lambda: (r(3), {"scal": 2.0}))


@scenario
def lstm_wrong_input_size(C, rec):
    torch.manual_seed(0)
    m = nn.LSTM(4, 3, batch_first=True)
    g = C(m)
    rec("ok", g(r(1, 2, 4))[0])
    try:
        rec("bad", g(r(1, 2, 5)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


@scenario
def mha_wrong_embed(C, rec):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    g = C(lambda q: m(q, q, q)[0])
    try:
        rec("bad", g(r(1, 2, 6)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


@scenario
def transformer_bad_mask(C, rec):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    g = C(lambda x, m: layer(x, src_mask=m))
    try:
        rec("bad", g(r(1, 3, 8), torch.zeros(4, 4, dtype=torch.bool)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


@scenario
def train_step_bad_label_then_ok(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    g = C(step)
    rec("l0", g(r(2, 4), i(0, 2)))
    try:
        rec("l1", g(r(2, 4), i(0, 3)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("params", [p.detach().clone() for p in m.parameters()])
    rec("l2", g(r(2, 4), i(1, 2)))


@scenario
def inference_mode_oob(C, rec):
    g = C(lambda x, j: x[j] + 1)
    with torch.inference_mode():
        rec("ok", g(r(3), i(0, 2)))
        try:
            rec("bad", g(r(3), i(0, 3)))
        except Exception as e:  # noqa: BLE001
            rec("raised", e)


@scenario
def no_grad_train_index(C, rec):
    w = nn.Parameter(r(4, 3))
    g = C(lambda j: w[j].sum())
    with torch.no_grad():
        try:
            rec("bad", g(i(5)))
        except Exception as e:  # noqa: BLE001
            rec("raised", e)
    rec("ok", g(i(3)))


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
