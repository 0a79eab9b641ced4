"""Probe writes, indexing and their errors as users write them, against eager PyTorch (session
28): masked and advanced-index assignment over every dtype (bool, uint8, int8, int16, int32,
int64, float16, bfloat16, float32, float64, complex64) with values of other dtypes, duplicate
and negative indices, masks of several dims, empty and 0-d tensors; index_put_/index_add_/
index_copy_/index_fill_/scatter*/masked_*/put_/take over dtypes; writes into views of inputs,
parameters and buffers; ``out=``; out-of-bounds indices of every indexing op and integer
division by zero (eager's error type, its message, the user's line), compiled plainly and
with ``fullgraph=True``.

    PYTHONPATH=. python scripts/probe_writes28.py [substring ...]
    PROBE_FULLGRAPH=1 / PROBE_DYNAMIC=1 / PROBE_STRICT=1 / PROBE_BACKEND=aot_eager  (modes)

(``PYTHONPATH=.``: the venv's editable install points at /work/main, not at a worktree.)

A case is ``f(*args)`` called twice on fresh arguments (the second call with other values);
recorded: each output (dtype, shape, values) or the error (type, message, whether this file's
line is named), the arguments after the call (dtype, shape, values). Prints ok/DIFF/CRASH.

Session 28: 1956 cases. Fixed (tests/test_writes_s28.py): values into bool tensors through
``index_put`` went through int32 (0.3 was False); a complex 0-d value into float64 by a mask
and ``index_fill_`` of a complex number into a real tensor ran where eager raises; ``no_grad``
writes through views of parameters crashed the build or ran in eager (example values and
autograd walks read ``grad_fn`` of no_grad views whose base was written); ``prims.copy_strided``
had no lowering; a float input (``dynamic=True``) overflowing ``fill_``/``masked_fill_``/
``index_fill_``/``scatter_``/``full*`` wrote garbage; ``scatter_reduce`` mean in float16 divided
by an unrounded count; complex numbers without imaginary part into real fills ran in eager.
Left: ``oob_unused_result`` (Dynamo drops a dead ``x[i]`` before any backend: strict xfail);
with ``PROBE_FULLGRAPH=1`` the DIFFs are Dynamo's own (the same with aot_eager: ``out=`` of
another shape, data-dependent 0-d masks); with ``PROBE_STRICT=1`` ``masked_fill`` of a complex
number into a real tensor (torch's decomposition refuses it: runs in eager), ``where`` into
complex32 and ``full_like`` of a 0-d tensor value (``item()``) run in eager.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import traceback
import warnings

import torch
from torch import nn

import torch2xla  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, run

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def short(dt):
    return str(dt).replace("torch.", "")


def data(shape, dtype, seed=0):
    shape = (shape,) if isinstance(shape, int) else shape
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == torch.uint8:
        return torch.randint(0, 9, shape, generator=g).to(dtype)
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(
            dtype
        )
    return torch.randn(shape, generator=g, dtype=torch.float64).mul(3).to(dtype)


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
            if x.dtype in (torch.float16, torch.bfloat16):
                ok = torch.allclose(x.float(), y.float(), rtol=1e-2, atol=1e-2, equal_nan=True)
            else:
                ok = torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
            if not ok:
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        if b[2][:60] not in a[3]:
            return f"{path}: MSG {a[1].__name__}: {a[2]!r} (xla) vs {b[2]!r} (eager)"
        if THIS not in a[4]:
            return f"{path}: NOLINE {a[1].__name__}: {a[2]!r}"
        return None
    if a[1] != b[1] and not (a[1] != a[1] and b[1] != b[1]):
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


FULLGRAPH = bool(os.environ.get("PROBE_FULLGRAPH"))
DYNAMIC = bool(os.environ.get("PROBE_DYNAMIC"))
STRICT = bool(os.environ.get("PROBE_STRICT"))  # (an op run in eager is an error)


def observe(fn, make, compiled, kw):
    if compiled and FULLGRAPH:
        kw = {**kw, "fullgraph": True}
    if compiled and DYNAMIC:
        kw = {**kw, "dynamic": True}
    if compiled and STRICT:
        kw = {**kw, "options": {"strict": True}}
    obs = []
    torch._dynamo.reset()
    torch.manual_seed(0)
    f = torch.compile(fn, backend=BACKEND, **kw) if compiled else fn
    for call in range(2):
        args = make(call)
        try:
            out = f(*args)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            obs.append((f"err {call}", describe(e)))
        else:
            obs.append((f"out {call}", describe(out)))
        obs.append((f"args {call}", describe(list(args))))
    return obs


def add(name, fn, make, **kw):
    """A case ``name``: ``fn(*make(call))`` eager vs compiled (``kw`` to torch.compile); a
    ``make`` that takes no argument gives the same data on both calls."""
    mk = make if inspect.signature(make).parameters else lambda call: make()

    def cmp(n, _):
        exp = observe(fn, mk, False, {})
        d = difference(observe(fn, mk, True, kw), exp, same)
        return f"DIFF  {n}: {d}" if d else f"ok    {n}"

    CASES[name] = cmp


# ============================================================================================
# masked assignment over dtypes
def mask_scalar(x):
    x[x != x.flatten()[0]] = 1
    return x


def mask_float_scalar(x):
    x[x != x.flatten()[0]] = 2.5
    return x


def mask_bool_scalar(x):
    x[x != x.flatten()[0]] = True
    return x


def mask_0d(x, v):
    x[x != x.flatten()[0]] = v
    return x


def mask_3d_mask_2d(x, m):
    x[m] = 0
    return x


def mask_iadd(x):
    x[x != x.flatten()[0]] += 1
    return x


for dt in DTYPES:
    s = short(dt)
    add(f"mask_int_scalar_{s}", mask_scalar, lambda c, dt=dt: (data((4, 5), dt, c),))
    add(f"mask_float_scalar_{s}", mask_float_scalar, lambda c, dt=dt: (data((4, 5), dt, c),))
    add(f"mask_bool_scalar_{s}", mask_bool_scalar, lambda c, dt=dt: (data((4, 5), dt, c),))
    if dt != torch.bool:
        add(f"mask_iadd_{s}", mask_iadd, lambda c, dt=dt: (data((4, 5), dt, c),))
    for vt in (torch.bool, torch.int64, torch.float64, torch.float16, torch.complex64):
        add(
            f"mask_0d_{short(vt)}_into_{s}",
            mask_0d,
            lambda c, dt=dt, vt=vt: (data((4, 5), dt, c), data((), vt, c + 5)),
        )


def mask_1d_count(x, v):
    m = torch.zeros(4, 5, dtype=torch.bool)
    m[1, 2] = m[3, 0] = m[0, 4] = True
    x[m] = v
    return x


def mask_1d_count_input(x, m, v):
    x[m] = v
    return x


def mask_2d_of_3d(x, m, v):
    x[:, m] = v
    return x


def mask_ellipsis(x, m):
    x[..., m] = -1
    return x


for dt in (torch.int32, torch.float16, torch.float32, torch.complex64, torch.bool):
    s = short(dt)
    add(f"mask_1d_count_{s}", mask_1d_count, lambda c, dt=dt: (data((4, 5), dt, c), data(3, dt, 9)))
    add(
        f"mask_1d_count_input_{s}",
        mask_1d_count_input,
        lambda c, dt=dt: (data((4, 5), dt, c), torch.eye(4, 5, dtype=torch.bool), data(4, dt, 9)),
    )
    add(
        f"mask_1d_count_f64_into_{s}",
        mask_1d_count_input,
        lambda c, dt=dt: (
            data((4, 5), dt, c),
            torch.eye(4, 5, dtype=torch.bool),
            data(4, torch.float64, 9),
        ),
    )
add(
    "mask_1d_count_wrong",
    mask_1d_count_input,
    lambda c: (
        data((4, 5), torch.float32, c),
        torch.eye(4, 5, dtype=torch.bool),
        data(3, torch.float32),
    ),
)
add(
    "mask_2d_of_3d",
    mask_2d_of_3d,
    lambda c: (
        data((2, 3, 4), torch.float32, c),
        data((3, 4), torch.bool, c + 1),
        torch.tensor(7.0),
    ),
)
add(
    "mask_2d_of_3d_vec",
    mask_2d_of_3d,
    lambda: (
        data((2, 3, 4), torch.float32),
        torch.eye(3, 4, dtype=torch.bool),
        data((2, 3), torch.float32),
    ),
)
add(
    "mask_ellipsis",
    mask_ellipsis,
    lambda c: (data((2, 3, 4), torch.int32, c), data(4, torch.bool, c + 1)),
)
add(
    "mask_uint8_index",
    mask_1d_count_input,
    lambda: (data((4, 5), torch.float32), torch.eye(4, 5, dtype=torch.uint8), torch.tensor(3.0)),
)
add(
    "mask_empty_x",
    lambda x: x.__setitem__(x > 0, 1.0) or x,
    lambda: (torch.zeros(0, 5),),
)
add("mask_0d_x", lambda x: x.__setitem__(x > 0, 5.0) or x, lambda c: (torch.tensor(1.0 - 2 * c),))
add(
    "mask_0d_x_mask0d",
    lambda x, m: x.__setitem__(m, 5.0) or x,
    lambda c: (torch.tensor(1.0), torch.tensor(c == 0)),
)
add(
    "mask_of_row_0d_mask",
    lambda x, m: x.__setitem__(m, 5.0) or x,
    lambda c: (data((3,), torch.float32), torch.tensor(c == 0)),
)


# ============================================================================================
# advanced-index assignment
def idx_set(x, i, v):
    x[i] = v
    return x


def idx_iadd(x, i, v):
    x[i] += v
    return x


def idx2_set(x, i, j, v):
    x[i, j] = v
    return x


def idx_none_slice(x, v):
    x[..., None, 1:3] = v
    return x


def idx_col_set(x, i, v):
    x[:, i] = v
    return x


for dt in DTYPES:
    s = short(dt)
    add(
        f"idx_dup_set_{s}",
        idx_set,
        lambda c, dt=dt: (data((6,), dt, c), torch.tensor([1, -5, 3, 1]), data(4, dt, 3 + c)),
    )
    if dt != torch.bool:
        add(
            f"idx_dup_iadd_{s}",
            idx_iadd,
            lambda c, dt=dt: (data((6,), dt, c), torch.tensor([1, -5, 3, 1]), data(4, dt, 3 + c)),
        )
    add(
        f"idx2_set_{s}",
        idx2_set,
        lambda c, dt=dt: (
            data((4, 5), dt, c),
            torch.tensor([[0, 3], [-1, 2]]),
            torch.tensor([1, -2]),
            data((2, 2), dt, c + 4),
        ),
    )
    add(
        f"idx_none_slice_{s}",
        idx_none_slice,
        lambda c, dt=dt: (data((3, 4), dt, c), data((3, 1, 2), dt, c + 2)),
    )
    add(
        f"idx_set_f64_value_{s}",
        idx_set,
        lambda c, dt=dt: (data((6,), dt, c), torch.tensor([1, 2]), data(2, torch.float64, 3 + c)),
    )
add(
    "idx_col_set_bcast",
    idx_col_set,
    lambda c: (
        data((3, 5), torch.float32, c),
        torch.tensor([4, 0, 4]),
        data((3, 1), torch.float32),
    ),
)
add(
    "idx_empty_index",
    idx_set,
    lambda c: (
        data((3, 5), torch.float32, c),
        torch.zeros(0, dtype=torch.int64),
        torch.tensor(1.0),
    ),
)
add(
    "idx_empty_x",
    idx_set,
    lambda c: (torch.zeros(0, 5), torch.zeros(0, dtype=torch.int64), torch.tensor(1.0)),
)
add(
    "idx_int32_index",
    idx_set,
    lambda c: (data((6,), torch.float32, c), torch.tensor([1, -1], dtype=torch.int32), 2.0),
)
add(
    "idx_int8_index",
    idx_set,
    lambda c: (data((6,), torch.float32, c), torch.tensor([1, -1], dtype=torch.int8), 2.0),
)
add(
    "idx_0d_x",
    lambda x, v: x.__setitem__(..., v) or x,
    lambda c: (torch.tensor(1.0), torch.tensor(3.0 + c)),
)
add(
    "idx_none_0d",
    lambda x, v: x.__setitem__(None, v) or x,
    lambda c: (torch.tensor(1.0), torch.tensor([3.0 + c])),
)
add(
    "idx_list_index",
    lambda x: x.__setitem__([0, 2, 2], torch.tensor([1.0, 2.0, 3.0])) or x,
    lambda c: (data((4, 2), torch.float32, c),),
)
add(
    "idx_tuple_of_lists",
    lambda x: x.__setitem__(([0, 2, 2], [1, 0, 0]), 9) or x,
    lambda c: (data((4, 2), torch.int32, c),),
)
add(
    "idx_bool_list",
    lambda x: x.__setitem__([True, False, True, False], 0) or x,
    lambda c: (data((4, 2), torch.int32, c),),
)


def index_put_acc(x, i, v):
    return x.index_put_((i,), v, accumulate=True)


def index_put_acc2(x, i, j, v):
    return x.index_put_((i, j), v, accumulate=True)


for dt in DTYPES:
    s = short(dt)
    add(
        f"index_put_acc_{s}",
        index_put_acc,
        lambda c, dt=dt: (data((6,), dt, c), torch.tensor([1, 1, -1, 1]), data(4, dt, c + 1)),
    )
    add(
        f"index_put_acc2_{s}",
        index_put_acc2,
        lambda c, dt=dt: (
            data((3, 4), dt, c),
            torch.tensor([0, 0, 2]),
            torch.tensor([1, 1, -1]),
            data((), dt, c + 1),
        ),
    )
add(
    "index_put_acc_bool_mask",
    lambda x, m, v: x.index_put_((m,), v, accumulate=True),
    lambda c: (data((6,), torch.float32, c), data(6, torch.bool, c + 2), torch.tensor(1.0)),
)
add(
    "index_put_dtype_mismatch",
    lambda x, i, v: x.index_put_((i,), v),
    lambda c: (
        data((6,), torch.float32, c),
        torch.tensor([1]),
        torch.tensor([1], dtype=torch.int64),
    ),
)
add(
    "index_put_value_too_long",
    lambda x, i, v: x.index_put_((i,), v),
    lambda c: (data((6,), torch.float32, c), torch.tensor([1, 2]), data(3, torch.float32)),
)


# ============================================================================================
# index_add_/index_copy_/index_fill_/index_reduce_
def index_add(x, i, s):
    return x.index_add_(0, i, s, alpha=2)


def index_add1(x, i, s):
    return x.index_add_(1, i, s)


def index_copy(x, i, s):
    return x.index_copy_(0, i, s)


def index_fill(x, i):
    return x.index_fill_(1, i, 3)


def index_fill_0d(x, i, v):
    return x.index_fill_(0, i, v)


for dt in DTYPES:
    s = short(dt)
    if dt != torch.bool:
        add(
            f"index_add_{s}",
            index_add,
            lambda c, dt=dt: (
                data((4, 3), dt, c),
                torch.tensor([1, 1, 3]),
                data((3, 3), dt, c + 1),
            ),
        )
    add(
        f"index_add1_{s}",
        index_add1,
        lambda c, dt=dt: (data((3, 4), dt, c), torch.tensor([0, 3, 0]), data((3, 3), dt, c + 1)),
    )
    add(
        f"index_copy_{s}",
        index_copy,
        lambda c, dt=dt: (data((4, 3), dt, c), torch.tensor([2, 0]), data((2, 3), dt, c + 1)),
    )
    add(f"index_fill_{s}", index_fill, lambda c, dt=dt: (data((3, 4), dt, c), torch.tensor([0, 2])))
    add(
        f"index_fill_0d_f64_{s}",
        index_fill_0d,
        lambda c, dt=dt: (
            data((3, 4), dt, c),
            torch.tensor([0, 2]),
            torch.tensor(2.5, dtype=torch.float64),
        ),
    )
add(
    "index_add_dtype_mismatch",
    index_add,
    lambda c: (data((4, 3), torch.float32, c), torch.tensor([1]), data((1, 3), torch.float64)),
)
add(
    "index_copy_dtype_mismatch",
    index_copy,
    lambda c: (data((4, 3), torch.float32, c), torch.tensor([1]), data((1, 3), torch.float64)),
)
add(
    "index_add_int32_index",
    index_add,
    lambda c: (
        data((4, 3), torch.float32, c),
        torch.tensor([1, 3], dtype=torch.int32),
        data((2, 3), torch.float32),
    ),
)
add(
    "index_add_0d_self",
    lambda x, i, s: x.index_add_(0, i, s),
    lambda c: (torch.tensor(1.0 + c), torch.tensor([0, 0]), torch.tensor([2.0, 3.0])),
)
add(
    "index_copy_0d_index",
    lambda x, i, s: x.index_copy_(0, i, s),
    lambda c: (data((4, 3), torch.float32, c), torch.tensor(2), data((3,), torch.float32)),
)
for red in ("prod", "mean", "amax", "amin"):
    for inc in (True, False):
        for dt in (torch.int32, torch.float16, torch.float32, torch.int64):
            add(
                f"index_reduce_{red}_{inc}_{short(dt)}",
                lambda x, i, s, red=red, inc=inc: x.index_reduce_(0, i, s, red, include_self=inc),
                lambda c, dt=dt: (
                    data((4, 3), dt, c),
                    torch.tensor([1, 1, 3, 1]),
                    data((4, 3), dt, c + 1),
                ),
            )


# ============================================================================================
# scatter family
def scatter_(x, i, s):
    return x.scatter_(1, i, s)


def scatter_val(x, i):
    return x.scatter_(1, i, 7)


def scatter_add_(x, i, s):
    return x.scatter_add_(0, i, s)


IDX = torch.tensor([[0, 1, 2, 0], [2, 0, 0, 1], [2, 2, 0, 0]])
for dt in DTYPES:
    s = short(dt)
    add(
        f"scatter_{s}",
        scatter_,
        lambda c, dt=dt: (
            data((3, 4), dt, c),
            torch.tensor([[0, 1], [3, 3], [2, 0]]),
            data((3, 2), dt, c + 1),
        ),
    )
    add(
        f"scatter_val_{s}",
        scatter_val,
        lambda c, dt=dt: (data((3, 4), dt, c), torch.tensor([[0], [3], [2]])),
    )
    if dt != torch.bool:
        add(
            f"scatter_add_{s}",
            scatter_add_,
            lambda c, dt=dt: (data((3, 4), dt, c), IDX, data((3, 4), dt, c + 1)),
        )
    for red in ("sum", "prod", "mean", "amax", "amin"):
        if dt in (torch.bool, torch.complex64):
            continue
        for inc in (True, False):
            add(
                f"scatter_reduce_{red}_{inc}_{s}",
                lambda x, i, src, red=red, inc=inc: x.scatter_reduce(
                    0, i, src, red, include_self=inc
                ),
                lambda c, dt=dt: (data((3, 4), dt, c), IDX, data((3, 4), dt, c + 1)),
            )
for red in ("add", "multiply"):
    add(
        f"scatter_legacy_reduce_{red}",
        lambda x, i, src, red=red: x.scatter_(0, i, src, reduce=red),
        lambda c: (data((3, 4), torch.float32, c), IDX, data((3, 4), torch.float32, c + 1)),
    )
    add(
        f"scatter_legacy_reduce_val_{red}",
        lambda x, i, red=red: x.scatter_(0, i, 2.0, reduce=red),
        lambda c: (data((3, 4), torch.float32, c), IDX),
    )
add(
    "scatter_dtype_mismatch",
    scatter_,
    lambda c: (
        data((3, 4), torch.float32, c),
        torch.tensor([[0], [3], [2]]),
        data((3, 1), torch.float64),
    ),
)
add(
    "scatter_index_int32",
    scatter_,
    lambda c: (
        data((3, 4), torch.float32, c),
        torch.tensor([[0], [3], [2]], dtype=torch.int32),
        data((3, 1), torch.float32),
    ),
)
add(
    "scatter_smaller_index",
    scatter_add_,
    lambda c: (
        data((3, 4), torch.float32, c),
        torch.tensor([[0, 1], [2, 2]]),
        data((3, 4), torch.float32, 4),
    ),
)
add(
    "scatter_empty_index",
    scatter_add_,
    lambda c: (
        data((3, 4), torch.float32, c),
        torch.zeros(0, 4, dtype=torch.int64),
        data((3, 4), torch.float32, 4),
    ),
)
add(
    "scatter_0d",
    lambda x, i, s: x.scatter_(0, i, s),
    lambda c: (torch.tensor(1.0 + c), torch.tensor(0), torch.tensor(5.0)),
)
add(
    "scatter_reduce_nan_amax",
    lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=True),
    lambda c: (
        torch.tensor([1.0, float("nan"), 2.0]),
        torch.tensor([0, 0, 1, 2]),
        torch.tensor([float("nan"), 3.0, 5.0, -1.0]),
    ),
)
add(
    "gather_then_scatter_dim_neg",
    lambda x, i: x.scatter(-1, i, x.gather(-1, i) * 2),
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([[1], [0], [3]])),
)


# ============================================================================================
# masked_fill_/masked_scatter_/put_/take
for dt in DTYPES:
    s = short(dt)
    add(
        f"masked_fill_{s}",
        lambda x, m: x.masked_fill_(m, 1),
        lambda c, dt=dt: (data((3, 4), dt, c), data((3, 4), torch.bool, c + 1)),
    )
    add(
        f"masked_fill_0d_{s}",
        lambda x, m, v: x.masked_fill(m, v),
        lambda c, dt=dt: (data((3, 4), dt, c), data((4,), torch.bool, c + 1), data((), dt, c + 5)),
    )
    add(
        f"masked_scatter_{s}",
        lambda x, m, v: x.masked_scatter_(m, v),
        lambda c, dt=dt: (
            data((3, 4), dt, c),
            data((3, 4), torch.bool, c + 1),
            data((12,), dt, c + 5),
        ),
    )
    add(
        f"put_{s}",
        lambda x, i, v: x.put_(i, v),
        lambda c, dt=dt: (data((3, 4), dt, c), torch.tensor([0, -1, 5, 5]), data((4,), dt, c + 5)),
    )
    if dt != torch.bool:
        add(
            f"put_acc_{s}",
            lambda x, i, v: x.put_(i, v, accumulate=True),
            lambda c, dt=dt: (
                data((3, 4), dt, c),
                torch.tensor([0, -1, 5, 5]),
                data((4,), dt, c + 5),
            ),
        )
    add(
        f"take_{s}",
        lambda x, i: torch.take(x, i),
        lambda c, dt=dt: (data((3, 4), dt, c), torch.tensor([[0, -1], [5, 11]])),
    )
add(
    "masked_fill_0d_f64_into_f32",
    lambda x, m, v: x.masked_fill(m, v),
    lambda c: (
        data((3, 4), torch.float32, c),
        data((4,), torch.bool, c + 1),
        torch.tensor(2.5, dtype=torch.float64),
    ),
)
add(
    "masked_fill_0d_float_into_int",
    lambda x, m, v: x.masked_fill(m, v),
    lambda c: (data((3, 4), torch.int32, c), data((4,), torch.bool, c + 1), torch.tensor(2.5)),
)
add(
    "masked_fill_float_into_bool",
    lambda x, m: x.masked_fill(m, 0.5),
    lambda c: (data((3, 4), torch.bool, c), data((4,), torch.bool, c + 1)),
)
add(
    "masked_fill_complex_into_float",
    lambda x, m: x.masked_fill(m, 1j),
    lambda c: (data((3, 4), torch.float32, c), data((4,), torch.bool, c + 1)),
)
add(
    "masked_scatter_dtype_mismatch",
    lambda x, m, v: x.masked_scatter_(m, v),
    lambda c: (
        data((3, 4), torch.float32, c),
        data((3, 4), torch.bool, c + 1),
        data((12,), torch.float64),
    ),
)
add(
    "masked_scatter_bcast_mask",
    lambda x, m, v: x.masked_scatter_(m, v),
    lambda c: (
        data((3, 4), torch.float32, c),
        data((4,), torch.bool, c + 1),
        data((3, 4), torch.float32, 7),
    ),
)
add(
    "put_dtype_mismatch",
    lambda x, i, v: x.put_(i, v),
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0]), data((1,), torch.float64)),
)
add(
    "take_empty",
    lambda x, i: torch.take(x, i),
    lambda c: (data((3, 4), torch.float32, c), torch.zeros(0, 2, dtype=torch.int64)),
)
add(
    "put_empty_self_empty_index",
    lambda x, i, v: x.put_(i, v),
    lambda c: (torch.zeros(0), torch.zeros(0, dtype=torch.int64), torch.zeros(0)),
)


# ============================================================================================
# out-of-bounds indices: error type, message and the user's line
def oob_make(value):
    return lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, value]))


OOB = {
    "getitem": lambda x, i: x[i],
    "getitem_col": lambda x, i: x[:, i],
    "getitem_2": lambda x, i: x[i, i],
    "setitem": lambda x, i: x.__setitem__(i, 1.0) or x,
    "setitem_col": lambda x, i: x.__setitem__((slice(None), i), 1.0) or x,
    "setitem_iadd": lambda x, i: x.__setitem__(i, x[i] + 1) or x,
    "index_select0": lambda x, i: x.index_select(0, i),
    "index_select1": lambda x, i: x.index_select(1, i),
    "gather": lambda x, i: x.gather(1, i.expand(3, 2)),
    "scatter": lambda x, i: x.scatter(1, i.expand(3, 2), 1.0),
    "scatter_src": lambda x, i: x.scatter(1, i.expand(3, 2), x[:, :2]),
    "scatter_add": lambda x, i: x.scatter_add(1, i.expand(3, 2), x[:, :2]),
    "scatter_reduce": lambda x, i: x.scatter_reduce(1, i.expand(3, 2), x[:, :2], "amax"),
    "embedding": lambda x, i: torch.nn.functional.embedding(i, x),
    "take": lambda x, i: torch.take(x, i * 5),
    "put_": lambda x, i: x.put_(i * 5, torch.ones(2)),
    "index_put_": lambda x, i: x.index_put_((i,), torch.tensor(1.0)),
    "index_put_acc": lambda x, i: x.index_put_((i,), torch.tensor(1.0), accumulate=True),
    "index_add_": lambda x, i: x.index_add_(0, i, torch.ones(2, 4)),
    "index_copy_": lambda x, i: x.index_copy_(0, i, torch.ones(2, 4)),
    "index_fill_": lambda x, i: x.index_fill_(0, i, 2.0),
    "index_reduce_": lambda x, i: x.index_reduce_(0, i, torch.ones(2, 4), "prod"),
    "masked_then_index": lambda x, i: x[x > 0].clone()[i * 100],
}
for name, fn in OOB.items():
    add(f"oob_{name}_pos", fn, oob_make(7))
    add(f"oob_{name}_neg", fn, oob_make(-9))
    add(f"oob_{name}_neg1", fn, oob_make(-1))
add(
    "oob_0d_tensor_subscript",
    lambda x, i: x[i],
    lambda c: (data((3, 4), torch.float32, c), torch.tensor(5)),
)
add(
    "oob_second_call_only",
    lambda x, i: x.index_select(0, i) * 2,
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, 2 + 5 * c])),
)
add(
    "oob_gather_neg",
    lambda x, i: x.gather(0, i),
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([[0, -1, 0, 0]])),
)
EMB = nn.Embedding(5, 3)
add(
    "oob_embedding_module",
    lambda i: EMB(i),
    lambda c: (torch.tensor([[1, 5]]),),
)
add(
    "oob_one_hot",
    lambda i: torch.nn.functional.one_hot(i, 3),
    lambda c: (torch.tensor([0, 3]),),
)
add(
    "oob_cross_entropy",
    lambda x, t: torch.nn.functional.cross_entropy(x, t),
    lambda c: (data((2, 3), torch.float32, c), torch.tensor([0, 3])),
)
add(
    "oob_index_int32",
    lambda x, i: x[i],
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, 3], dtype=torch.int32)),
)
add(
    "oob_unused_result",
    lambda x, i: (x[i], x * 2)[1],
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, 3])),
)


# ============================================================================================
# integer division / remainder by zero
DIVS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "fmod": lambda a, b: torch.fmod(a, b),
    "remainder": lambda a, b: torch.remainder(a, b),
    "ifloordiv": lambda a, b: a.__ifloordiv__(b),
    "imod": lambda a, b: a.__imod__(b),
    "true_div": lambda a, b: a / b,
}
for name, fn in DIVS.items():
    for dt in INTS:
        add(
            f"divzero_{name}_{short(dt)}",
            fn,
            lambda c, dt=dt: (data((5,), dt, c), torch.tensor([1, 2, 0, 3, 1], dtype=dt)),
        )
    add(
        f"divzero_{name}_scalar", lambda a, fn=fn: fn(a, 0), lambda c: (data((5,), torch.int32, c),)
    )
    add(
        f"divzero_{name}_0d",
        fn,
        lambda c: (data((5,), torch.int64, c), torch.tensor(0)),
    )
    add(
        f"divzero_{name}_scalar_tensor",
        lambda b, fn=fn: fn(7, b),
        lambda c: (torch.tensor([1, 0]),),
    )
add("divzero_bool", lambda a, b: a // b, lambda: (torch.tensor([True]), torch.tensor([False])))
add(
    "divzero_int_float_divisor",
    lambda a, b: a // b,
    lambda c: (data((5,), torch.int32, c), torch.zeros(5)),
)


# ============================================================================================
# writes into views, parameters, buffers
class WithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(12.0).view(3, 4))
        self.register_buffer("b", torch.zeros(3, 4, dtype=torch.int32))
        self.register_buffer("h", torch.zeros(5, dtype=torch.float16))

    def forward(self, x, i):
        with torch.no_grad():
            self.w[i] = 0.5
            self.w[:, 1].index_fill_(0, i, -1)
            self.w.t()[0] += 1
        self.b[self.b == 0] = 3
        self.b.t().diagonal().add_(1)
        self.b.view(-1)[i] += 7
        self.h.masked_fill_(torch.arange(5) > 2, 65504.0)
        self.h[i] += 1.0
        return (self.w * x).sum(1), self.b.clone(), self.h.clone()


def _mod_case(compiled, kw):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = WithState()
    f = torch.compile(m, backend=BACKEND, **kw) if compiled else m
    obs = []
    for call in range(2):
        x = data((3, 4), torch.float32, call)
        try:
            out = f(x, torch.tensor([0, 2, 2]))
            obs.append((f"out {call}", describe(out)))
        except Exception as e:  # noqa: BLE001
            obs.append((f"err {call}", describe(e)))
        obs.append((f"state {call}", describe([t.detach() for t in m.state_dict().values()])))
    return obs


def _mod_compare(n, _):
    kw = {"fullgraph": True} if FULLGRAPH else {}
    d = difference(_mod_case(True, kw), _mod_case(False, {}), same)
    return f"DIFF  {n}: {d}" if d else f"ok    {n}"


CASES["module_state"] = _mod_compare


def view_writes(x, i, v):
    x.t()[i] = v
    x.diagonal()[x.diagonal() > 0] = 0
    x.view(-1).index_add_(0, i, v[:, 0].contiguous())
    x.unflatten(1, (2, 2))[:, :, i[:1]] = -3
    x[1:, ::2].scatter_(0, i[:2].view(2, 1).expand(2, 2), 9.0)
    return x


def unfold_writes(x, i):
    u = x.unfold(1, 2, 2)  # 4 columns -> 2 windows of 2: covered
    u[:, i] = 0
    return x


def diag_index_put(x, i):
    d = x.diagonal(offset=1)
    d[i] += 5
    return x


for dt in (torch.float32, torch.int32, torch.float16):
    add(
        f"view_writes_{short(dt)}",
        view_writes,
        lambda c, dt=dt: (data((4, 4), dt, c), torch.tensor([1, 3, 3]), data((3, 4), dt, c + 1)),
    )
add("unfold_writes", unfold_writes, lambda c: (data((3, 4), torch.float32, c), torch.tensor([1])))
add(
    "diag_index_put",
    diag_index_put,
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, 0, 2])),
)
add(
    "write_row_view_of_input",
    lambda x, i: x[1].index_put_((i,), torch.tensor(5.0), accumulate=True),
    lambda c: (data((3, 4), torch.float32, c), torch.tensor([0, 0, -1])),
)
add(
    "write_through_expand_raises",
    lambda x: x.expand(3, 4).index_fill_(0, torch.tensor([0]), 1.0),
    lambda c: (data((1, 4), torch.float32, c),),
)
add(
    "write_transpose_masked_scatter",
    lambda x, m: x.t().masked_scatter_(m, torch.arange(12.0)),
    lambda c: (data((3, 4), torch.float32, c), data((4, 3), torch.bool, c + 3)),
)
add(
    "input_noncontig",
    lambda x, i: x.index_put_((i,), torch.tensor(1.0)),
    lambda c: (data((4, 3), torch.float32, c).t(), torch.tensor([0, 2])),
)


# ============================================================================================
# out= arguments
OUTS = {
    "index_select": lambda x, i, o: torch.index_select(x, 0, i, out=o),
    "gather": lambda x, i, o: torch.gather(x, 0, i.view(-1, 1).expand(-1, 4), out=o),
    "take": lambda x, i, o: torch.take(x, i, out=o),
    "masked_select": lambda x, i, o: torch.masked_select(x, x > 0, out=o),
    "index_add": lambda x, i, o: torch.index_add(x, 0, i, x[:2], out=o),
    "index_copy": lambda x, i, o: torch.index_copy(x, 0, i, x[:2], out=o),
    "scatter": lambda x, i, o: torch.scatter(x, 0, i.view(-1, 1).expand(-1, 4), 2.0, out=o),
    "scatter_add": lambda x, i, o: torch.scatter_add(
        x, 0, i.view(-1, 1).expand(-1, 4), x[:2], out=o
    ),
    "index_put_out": lambda x, i, o: torch.ops.aten.index_put.out(x, [i], torch.tensor(1.0), out=o),
}
for name, fn in OUTS.items():
    add(
        f"out_{name}",
        fn,
        lambda c: (data((3, 4), torch.float32, c), torch.tensor([2, 0]), torch.zeros(2, 4)),
    )
    add(
        f"out_{name}_resize",
        fn,
        lambda c: (data((3, 4), torch.float32, c), torch.tensor([2, 0]), torch.zeros(0)),
    )
    add(
        f"out_{name}_wrong_dtype",
        fn,
        lambda c: (
            data((3, 4), torch.float32, c),
            torch.tensor([2, 0]),
            torch.zeros(2, 4, dtype=torch.float64),
        ),
    )


# ============================================================================================
# scalar values of other kinds into every dtype: Python numbers and 0-d tensors
SCALARS = [0.3, -0.7, 2.7, 300, -1, 1e10, float("nan"), float("inf"), True, 1j, 0.5 + 0j]
WRITES = {
    "mask": lambda x, v: x.__setitem__(x != x.flatten()[0], v) or x,
    "idx": lambda x, v: x.__setitem__(torch.tensor([0, 2]), v) or x,
    "slice": lambda x, v: x.__setitem__(slice(1, 3), v) or x,
    "int": lambda x, v: x.__setitem__(1, v) or x,
    "fill": lambda x, v: x.fill_(v),
    "masked_fill": lambda x, v: x.masked_fill_(x != x.flatten()[0], v),
    "index_fill": lambda x, v: x.index_fill_(0, torch.tensor([0, 2]), v),
    "scatter": lambda x, v: x.scatter_(0, torch.tensor([0, 2]), v),
    "where": lambda x, v: torch.where(x != x.flatten()[0], x, v),
    "full_like": lambda x, v: torch.full_like(x, v),
}
for wname, wfn in WRITES.items():
    for dt in (torch.bool, torch.uint8, torch.int8, torch.int32, torch.float16, torch.float64):
        for k, sv in enumerate(SCALARS):
            add(f"sv_{wname}_{short(dt)}_{k}", wfn, lambda c, dt=dt, sv=sv: (data(6, dt, c), sv))
            if not isinstance(sv, bool):
                vt = torch.complex64 if isinstance(sv, complex) else torch.float64
                add(
                    f"sv0d_{wname}_{short(dt)}_{k}",
                    wfn,
                    lambda c, dt=dt, sv=sv, vt=vt: (data(6, dt, c), torch.tensor(sv, dtype=vt)),
                )


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, lambda n, f: f(n, None)))
