"""Derivatives computed inside the compiled graph (session 20): ``torch.func`` transforms
(grad, vjp, jacrev, jacfwd, vmap of grad, hessian) and ``torch.autograd.grad(create_graph=True)``
gradient penalties inside ``torch.compile(backend="xla")``, against eager, for activations,
losses, norms, convolutions, pooling, resizing and grid sampling, at ordinary values and at
special ones (NaN, infinities, signed zeros, each op's boundaries, max-pooling ties), in
float32, float64 and bfloat16. AOT puts the ops' backward ops (``aten.*_backward``) or their
decompositions into the graph we lower; ``direct_*`` cases call those backward ops themselves.

    PYTHONPATH=. python scripts/probe_functorch.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_functorch.py   # torch's own

Case names are ``<transform>/<op>/<dtype>``. Each case calls the compiled function on ordinary
and on special inputs (the special vector is tiled so that each value lands both in eager's
vectorized blocks and in their scalar tail, ``torch2xla/ops/_loops.py``). Observations:
values (NaN positions exact; floats within a tolerance per dtype; zeros' signs reported
apart as ``SIGN``), dtypes, shapes, errors. ``PROBE_OPS=1`` prints the backward ops each
case's graphs held.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F

os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")  # (lower every graph: PROBE_OPS)
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
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
aten = torch.ops.aten
NAN, INF = float("nan"), float("inf")
SEEN: set = set()  # backward ops in the graphs lowered


def _record_targets():
    """Record the backward ops the graphs held: those lowered whole, and those decomposed."""
    from torch2xla.autodiff import _remat
    from torch2xla.capture._lower import decomposition_table
    from torch2xla.runtime import _program

    for mod in (_program, _remat):
        inner = mod.to_jax_function

        def wrapped(gm, *a, _inner=inner, **k):
            for n in gm.graph.nodes:
                if n.op == "call_function" and "backward" in str(n.target):
                    SEEN.add(str(n.target))
            return _inner(gm, *a, **k)

        mod.to_jax_function = wrapped
    table = decomposition_table()  # (cached: the dict the export uses)
    for op, decomposition in list(table.items()):
        if "backward" in str(op):

            def decompose(*a, _op=op, _d=decomposition, **k):
                SEEN.add(str(_op) + "*")
                return _d(*a, **k)

            table[op] = decompose


_record_targets()


# -- comparison ---------------------------------------------------------------------------------
def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]}  ({a[1:3]} vs {b[1:3]})"
    if a[0] == "L":
        return same_items(a, b, path, same)
    if a[0] != "T":
        return same_error_or_value(a, b, path)
    if a[1:3] != b[1:3]:
        return f"{path}: dtype/shape {a[1:3]} (xla) vs {b[1:3]} (eager)"
    x, y = a[3], b[3]
    if not x.is_floating_point():
        return None if torch.equal(x, y) else f"{path}: values {x} vs {y}"
    x64, y64 = x.double(), y.double()
    nx, ny = x64.isnan(), y64.isnan()
    if not torch.equal(nx, ny):
        i = (nx != ny).nonzero()[0].tolist()
        return f"{path}: NaN at {i}: {x64[tuple(i)].item()} (xla) vs {y64[tuple(i)].item()} (eager)"
    tol = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 2e-5}.get(x.dtype, 1e-10)
    ok = (x64 == y64) | nx | ((x64 - y64).abs() <= tol * (1 + y64.abs()))
    if not bool(ok.all()):
        i = (~ok).nonzero()[0].tolist()
        return f"{path}: at {i}: {x64[tuple(i)].item()} (xla) vs {y64[tuple(i)].item()} (eager)"
    zx, zy = (x64 == 0) & x64.signbit(), (y64 == 0) & y64.signbit()
    if not torch.equal(zx, zy):
        i = (zx != zy).nonzero()[0].tolist()
        return f"SIGN {path}: zero's sign at {i}: {x64[tuple(i)].item()} vs {y64[tuple(i)].item()}"
    return None


# -- inputs -------------------------------------------------------------------------------------
GENERIC = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0]


def special_vector(extra=(), dtype=torch.float32, n=64):
    """The special values tiled over ``n`` elements, then once more (eager's scalar tail)."""
    vals = list(GENERIC) + list(extra)
    reps = [vals[i % len(vals)] for i in range(n)]
    return torch.tensor(reps + vals, dtype=torch.float64).to(dtype)


def with_specials(x, extra=()):
    """``x`` with special values written over a spread of its elements."""
    flat = x.detach().clone().reshape(-1)
    vals = list(GENERIC) + list(extra)
    for i, v in enumerate(vals):
        flat[(i * 7) % flat.numel()] = v
    return flat.reshape(x.shape)


class Op:
    """``fn(x, dtype)`` of one input, its input ``shape`` (a vmap adds a batch dimension in
    front; elementwise ops' inputs are the special vector), its boundaries ``extra``."""

    def __init__(self, fn, shape=None, extra=(), per_sample=None, specials=True):
        self.fn, self.shape, self.extra, self.specials = fn, shape, extra, specials
        self.per_sample = per_sample  # the shape of one sample for vmap (default shape[1:])

    def inputs(self, dtype, batch=False):
        if self.shape is None:
            n = len(special_vector(self.extra))
            ordinary = r(n, dtype=torch.float64) * 2
            special = special_vector(self.extra)
            if batch:
                ordinary, special = ordinary[:-2].reshape(2, -1), special[:-2].reshape(2, -1)
        else:
            shape = self.shape if not batch else (3, *self.shape)
            ordinary = r(*shape, dtype=torch.float64)
            special = with_specials(ordinary, self.extra)
        out = [ordinary.to(dtype)]
        if self.specials:
            out.append(special.to(dtype))
        return out


_WEIGHTS: dict = {}


def _w(shape, dtype, seed=5):
    """Seeded constants, made in the eager run (which runs first): a generator inside the
    compiled function would break its graph."""
    key = (tuple(shape), dtype, seed)
    if key not in _WEIGHTS:
        _WEIGHTS[key] = r(*shape, seed=seed, dtype=torch.float64).to(dtype)
    return _WEIGHTS[key]


def _target(x, dtype):
    return _w(x.shape, dtype, seed=3)


OPS: dict[str, Op] = {
    "hardtanh": Op(lambda x, d: F.hardtanh(x), extra=(-1.0, 1.0)),
    "hardtanh_lo_hi": Op(lambda x, d: F.hardtanh(x, -0.5, 2.0), extra=(-0.5, 2.0)),
    "relu6": Op(lambda x, d: F.relu6(x), extra=(6.0,)),
    "relu": Op(lambda x, d: F.relu(x)),
    "threshold": Op(lambda x, d: F.threshold(x, 0.5, -1.0), extra=(0.5,)),
    "gelu": Op(lambda x, d: F.gelu(x)),
    "gelu_tanh": Op(lambda x, d: F.gelu(x, approximate="tanh")),
    "silu": Op(lambda x, d: F.silu(x)),
    "mish": Op(lambda x, d: F.mish(x)),
    "softplus": Op(lambda x, d: F.softplus(x), extra=(20.0, 25.0)),
    "softplus_beta": Op(lambda x, d: F.softplus(x, beta=2, threshold=5), extra=(2.5, 3.0)),
    "elu": Op(lambda x, d: F.elu(x, alpha=1.5)),
    "celu": Op(lambda x, d: F.celu(x, alpha=0.5)),
    "selu": Op(lambda x, d: F.selu(x)),
    "leaky_relu": Op(lambda x, d: F.leaky_relu(x, 0.2)),
    "leaky_relu_neg": Op(lambda x, d: F.leaky_relu(x, -0.5)),
    "rrelu_eval": Op(lambda x, d: F.rrelu(x, training=False)),
    "tanh": Op(lambda x, d: torch.tanh(x), extra=(20.0, -20.0)),
    "sigmoid": Op(lambda x, d: torch.sigmoid(x), extra=(100.0, -100.0)),
    "logsigmoid": Op(lambda x, d: F.logsigmoid(x), extra=(100.0, -100.0)),
    "hardsigmoid": Op(lambda x, d: F.hardsigmoid(x), extra=(3.0, -3.0)),
    "hardswish": Op(lambda x, d: F.hardswish(x), extra=(3.0, -3.0)),
    "hardshrink": Op(lambda x, d: F.hardshrink(x, 0.5), extra=(0.5, -0.5)),
    "softshrink": Op(lambda x, d: F.softshrink(x, 0.5), extra=(0.5, -0.5)),
    "tanhshrink": Op(lambda x, d: F.tanhshrink(x)),
    "softsign": Op(lambda x, d: F.softsign(x)),
    "logit_eps": Op(lambda x, d: torch.logit(x, 0.25), extra=(0.25, 0.75)),
    "clamp": Op(lambda x, d: torch.clamp(x, -0.5, 0.5), extra=(-0.5, 0.5)),
    "clamp_min": Op(lambda x, d: torch.clamp_min(x, 0.5), extra=(0.5,)),
    "abs": Op(lambda x, d: torch.abs(x)),
    "sqrt_abs": Op(lambda x, d: torch.sqrt(x.abs())),
    "glu": Op(lambda x, d: F.glu(x.reshape(-1, 2), dim=-1)),
    "prelu": Op(lambda x, d: F.prelu(x, torch.tensor([0.3], dtype=d))),
    # losses
    "mse_loss": Op(lambda x, d: F.mse_loss(x, _target(x, d))),
    "mse_loss_none": Op(lambda x, d: F.mse_loss(x, _target(x, d), reduction="none")),
    "l1_loss": Op(lambda x, d: F.l1_loss(x, x.detach().round())),
    "smooth_l1": Op(lambda x, d: F.smooth_l1_loss(x, x.detach().round(), beta=0.5)),
    "huber": Op(lambda x, d: F.huber_loss(x, x.detach().round(), delta=0.5)),
    "soft_margin": Op(lambda x, d: F.soft_margin_loss(x, _target(x, d).sign())),
    "bce": Op(lambda x, d: F.binary_cross_entropy(torch.sigmoid(x), _target(x, d).sigmoid())),
    "bce_logits": Op(lambda x, d: F.binary_cross_entropy_with_logits(x, _target(x, d).sigmoid())),
    "kl_div": Op(lambda x, d: F.kl_div(F.log_softmax(x, -1), _target(x, d).softmax(-1))),
    "nll_loss": Op(
        lambda x, d: F.nll_loss(F.log_softmax(x, -1), torch.tensor([1, 0, 3])[: x.shape[0]]),
        shape=(3, 5),
    ),
    "cross_entropy": Op(
        lambda x, d: F.cross_entropy(x, torch.tensor([1, 0, 3])[: x.shape[0]], ignore_index=0),
        shape=(3, 5),
    ),
    "cross_entropy_ls": Op(
        lambda x, d: F.cross_entropy(x, torch.tensor([1, 0, 3])[: x.shape[0]], label_smoothing=0.1),
        shape=(3, 5),
    ),
    "softmax": Op(lambda x, d: F.softmax(x, -1), shape=(3, 5)),
    "log_softmax": Op(lambda x, d: F.log_softmax(x, -1), shape=(3, 5)),
    # norms
    "layer_norm": Op(lambda x, d: F.layer_norm(x, (6,), _w((6,), d), _w((6,), d, 6)), shape=(4, 6)),
    "layer_norm_noaffine": Op(lambda x, d: F.layer_norm(x, (6,)), shape=(4, 6)),
    "rms_norm": Op(lambda x, d: F.rms_norm(x, (6,), _w((6,), d)), shape=(4, 6)),
    "batch_norm": Op(
        lambda x, d: F.batch_norm(x, None, None, _w((3,), d), _w((3,), d, 6), training=True),
        shape=(4, 3, 2),
    ),
    "group_norm": Op(lambda x, d: F.group_norm(x, 2, _w((4,), d), _w((4,), d, 6)), shape=(2, 4, 3)),
    "instance_norm": Op(lambda x, d: F.instance_norm(x), shape=(2, 3, 4)),
    # convolution, pooling, resizing, sampling
    "conv2d": Op(lambda x, d: F.conv2d(x, _w((2, 3, 3, 3), d), _w((2,), d), padding=1), (3, 5, 5)),
    "conv1d": Op(lambda x, d: F.conv1d(x, _w((2, 3, 2), d), stride=2), (3, 7)),
    "conv_transpose2d": Op(
        lambda x, d: F.conv_transpose2d(x, _w((3, 2, 2, 2), d), stride=2), (3, 3, 3)
    ),
    "max_pool2d": Op(lambda x, d: F.max_pool2d(x, 2), (2, 4, 4)),
    "max_pool2d_ties": Op(lambda x, d: F.max_pool2d(x.round(), 3, 1, padding=1), (2, 4, 4)),
    "max_pool2d_ceil": Op(lambda x, d: F.max_pool2d(x, 2, ceil_mode=True), (2, 5, 5)),
    "max_pool1d": Op(lambda x, d: F.max_pool1d(x.round(), 3, 2, padding=1), (2, 7)),
    "max_pool3d": Op(lambda x, d: F.max_pool3d(x, 2), (1, 2, 4, 4)),
    "avg_pool2d": Op(lambda x, d: F.avg_pool2d(x, 3, 2, padding=1), (2, 5, 5)),
    "avg_pool2d_ceil": Op(
        lambda x, d: F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False), (2, 5, 5)
    ),
    "adaptive_avg_pool2d": Op(lambda x, d: F.adaptive_avg_pool2d(x, 3), (2, 5, 5)),
    "adaptive_max_pool2d": Op(lambda x, d: F.adaptive_max_pool2d(x.round(), 3), (2, 5, 5)),
    "upsample_nearest": Op(lambda x, d: F.interpolate(x, scale_factor=2), (1, 2, 3, 3)),
    "upsample_bilinear": Op(
        lambda x, d: F.interpolate(x, size=(5, 4), mode="bilinear"), (1, 2, 3, 3)
    ),
    "upsample_bilinear_ac": Op(
        lambda x, d: F.interpolate(x, size=(5, 4), mode="bilinear", align_corners=True),
        (1, 2, 3, 3),
    ),
    "upsample_bicubic": Op(
        lambda x, d: F.interpolate(x, size=(5, 4), mode="bicubic"), (1, 2, 3, 3)
    ),
    "upsample_linear1d": Op(lambda x, d: F.interpolate(x, size=7, mode="linear"), (2, 3, 4)),
    "grid_sample": Op(
        lambda x, d: F.grid_sample(x, _w((1, 3, 3, 2), d).tanh() * 1.2, align_corners=False),
        (1, 2, 4, 4),
        per_sample=None,
    ),
    "reflection_pad": Op(lambda x, d: F.pad(x, (2, 1), mode="reflect"), (2, 4)),
    "replication_pad": Op(lambda x, d: F.pad(x, (2, 1, 1, 1), mode="replicate"), (1, 2, 3)),
    "embedding_w": Op(
        lambda w, d: F.embedding(torch.tensor([[1, 0, 2], [2, 2, 4]]), w, padding_idx=0), (5, 3)
    ),
    "embedding_w_freq": Op(
        lambda w, d: F.embedding(torch.tensor([1, 3, 3, 2]), w, scale_grad_by_freq=True), (5, 3)
    ),
    "unfold": Op(lambda x, d: F.unfold(x, 2, stride=1), (1, 2, 3, 3)),
    "pixel_shuffle": Op(lambda x, d: F.pixel_shuffle(x, 2), (1, 4, 2, 2)),
    "cumsum_prod": Op(lambda x, d: torch.cumprod(x, 0)),
    "norm": Op(lambda x, d: torch.linalg.vector_norm(x, dim=-1, keepdim=True), (3, 4)),
    "max_reduce": Op(lambda x, d: x.round().amax(-1), (3, 4)),
    "where_div": Op(lambda x, d: torch.where(x > 0, x, 1.0).log()),
}


# -- transforms ---------------------------------------------------------------------------------
def _scalar(op, d):
    def loss(x):
        y = op.fn(x, d)
        w = _w(y.shape, y.dtype, seed=9)
        return (y * w).sum()

    return loss


def t_grad(op, d):
    return lambda x: torch.func.grad(_scalar(op, d))(x)


def t_vjp(op, d):
    def f(x):
        y, back = torch.func.vjp(lambda x: op.fn(x, d), x)
        return y, back(_w(y.shape, y.dtype, seed=9))[0]

    return f


def t_jacrev(op, d):
    return lambda x: torch.func.jacrev(lambda x: op.fn(x, d))(x)


def t_jacfwd(op, d):
    return lambda x: torch.func.jacfwd(lambda x: op.fn(x, d))(x)


def t_hessian(op, d):
    return lambda x: torch.func.hessian(lambda x: op.fn(x, d).sum())(x)


def t_vmapgrad(op, d):
    return lambda x: torch.vmap(torch.func.grad(_scalar(op, d)))(x)


def t_penalty(op, d):
    """A gradient penalty: the gradient with create_graph, its square summed; the caller
    differentiates the penalty again (outside the compiled function)."""

    def f(x):
        (g,) = torch.autograd.grad(_scalar(op, d)(x), x, create_graph=True)
        return g, (g * g).sum()

    return f


def t_backward(op, d):
    """No transform: the compiled forward, differentiated by the caller (the bridge's own
    backward), for comparison with the transforms."""
    return lambda x: op.fn(x, d)


TRANSFORMS = {
    "backward": (t_backward, (torch.float32, torch.float64, torch.bfloat16)),
    "grad": (t_grad, (torch.float32, torch.float64, torch.bfloat16)),
    "vjp": (t_vjp, (torch.float32,)),
    "jacrev": (t_jacrev, (torch.float32,)),
    "jacfwd": (t_jacfwd, (torch.float32,)),
    "hessian": (t_hessian, (torch.float32, torch.float64)),
    "vmapgrad": (t_vmapgrad, (torch.float32,)),
    "penalty": (t_penalty, (torch.float32, torch.float64, torch.bfloat16)),
}


def _make_weights(op, dtype, inputs):
    """Make the constants ``op`` and ``_scalar`` use outside every transform (made inside
    one, they would be its wrapped tensors)."""
    with torch.no_grad():
        for x in inputs:
            y = op.fn(x, dtype)
            _w(y.shape, y.dtype, seed=9)


def scenario(tname, opname, dtype):
    make, _ = TRANSFORMS[tname]
    op = OPS[opname]

    def fn(C, rec):
        f = C(make(op, dtype))
        inputs = op.inputs(dtype, batch=tname == "vmapgrad")
        _make_weights(op, dtype, [x[0] for x in inputs] if tname == "vmapgrad" else inputs)
        for i, x in enumerate(inputs):
            if tname == "backward":
                x = x.clone().requires_grad_()
                y = f(x)
                rec(f"in{i}.y", y)
                (y * _w(y.shape, y.dtype, seed=9)).sum().backward()
                rec(f"in{i}.x.grad", x.grad)
            elif tname == "penalty":
                x = x.clone().requires_grad_()
                g, p = f(x)
                rec(f"in{i}.grad", g)
                rec(f"in{i}.penalty", p)
                p.backward()
                rec(f"in{i}.x.grad", x.grad)
            else:
                rec(f"in{i}", f(x))

    return fn


# -- backward ops called directly -----------------------------------------------------------
def _g(x, seed=9):
    return _w(x.shape, x.dtype, seed)


def _direct(call, extra=()):
    """A case calling a backward op on (grad_output, special input)."""

    def make(d):
        return lambda x: call(_g(x), x)

    return make, extra


DIRECT = {
    "hardtanh_backward": _direct(lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0), (-1.0, 1.0)),
    "hardtanh_backward_0_6": _direct(lambda g, x: aten.hardtanh_backward(g, x, 0.0, 6.0), (6.0,)),
    "threshold_backward": _direct(lambda g, x: aten.threshold_backward(g, x, 0.5), (0.5,)),
    "threshold_backward_0": _direct(lambda g, x: aten.threshold_backward(g, x, 0.0)),
    "gelu_backward": _direct(lambda g, x: aten.gelu_backward(g, x)),
    "gelu_backward_tanh": _direct(lambda g, x: aten.gelu_backward(g, x, approximate="tanh")),
    "silu_backward": _direct(lambda g, x: aten.silu_backward(g, x)),
    "mish_backward": _direct(lambda g, x: aten.mish_backward(g, x)),
    "softplus_backward": _direct(lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0), (20.0,)),
    "softplus_backward_b2": _direct(lambda g, x: aten.softplus_backward(g, x, 2.0, 5.0), (2.5,)),
    "elu_backward": _direct(lambda g, x: aten.elu_backward(g, 1.5, 1.0, 1.0, False, x)),
    "elu_backward_result": _direct(
        lambda g, x: aten.elu_backward(g, 1.5, 1.0, 1.0, True, F.elu(x, 1.5))
    ),
    "leaky_relu_backward": _direct(lambda g, x: aten.leaky_relu_backward(g, x, 0.2, False)),
    "tanh_backward": _direct(lambda g, x: aten.tanh_backward(g, x)),
    "sigmoid_backward": _direct(lambda g, x: aten.sigmoid_backward(g, x)),
    "log_sigmoid_backward": _direct(
        lambda g, x: aten.log_sigmoid_backward(g, x, aten.log_sigmoid_forward(x)[1])
    ),
    "hardsigmoid_backward": _direct(lambda g, x: aten.hardsigmoid_backward(g, x), (3.0, -3.0)),
    "hardswish_backward": _direct(lambda g, x: aten.hardswish_backward(g, x), (3.0, -3.0)),
    "logit_backward": _direct(lambda g, x: aten.logit_backward(g, x, 0.25), (0.25, 0.75)),
    "logit_backward_none": _direct(lambda g, x: aten.logit_backward(g, x)),
    "mse_loss_backward": _direct(lambda g, x: aten.mse_loss_backward(g, x, _g(x, 3), 0)),
    "mse_loss_backward_mean": _direct(lambda g, x: aten.mse_loss_backward(g.sum(), x, _g(x, 3), 1)),
    "smooth_l1_backward": _direct(
        lambda g, x: aten.smooth_l1_loss_backward(g, x, x.round(), 0, 0.5), (0.5,)
    ),
    "huber_backward": _direct(lambda g, x: aten.huber_loss_backward(g, x, x.round(), 0, 0.5)),
    "soft_margin_backward": _direct(
        lambda g, x: aten.soft_margin_loss_backward(g, x, _g(x, 3).sign(), 0)
    ),
    "softshrink_backward": _direct(lambda g, x: aten.softshrink_backward(g, x, 0.5), (0.5, -0.5)),
    "hardshrink_backward": _direct(lambda g, x: aten.hardshrink_backward(g, x, 0.5), (0.5, -0.5)),
    "glu_backward": _direct(
        lambda g, x: aten.glu_backward(_g(x.reshape(-1, 2)[:, :1]), x.reshape(-1, 2), -1)
    ),
    "softmax_backward_data": _direct(
        lambda g, x: aten._softmax_backward_data(g, x.softmax(-1), -1, x.dtype)
    ),
    "log_softmax_backward_data": _direct(
        lambda g, x: aten._log_softmax_backward_data(g, x.log_softmax(-1), -1, x.dtype)
    ),
}


def direct_scenario(name, dtype):
    make, extra = DIRECT[name]

    def fn(C, rec):
        f = C(make(dtype))
        n = len(special_vector(extra))
        for i, x in enumerate((r(n, dtype=torch.float64) * 2, special_vector(extra))):
            rec(f"in{i}", f(x.to(dtype)))
            rec(f"in{i}.2d", f(x[:-2].to(dtype).reshape(2, -1).t()))  # a strided input

    return fn


TABLE: dict = {}
for _t, (_make, _dtypes) in TRANSFORMS.items():
    for _o in OPS:
        for _d in _dtypes:
            TABLE[f"{_t}/{_o}/{str(_d)[6:]}"] = scenario(_t, _o, _d)
for _n in DIRECT:
    for _d in (torch.float32, torch.float64, torch.bfloat16):
        TABLE[f"direct/{_n}/{str(_d)[6:]}"] = direct_scenario(_n, _d)


def observe(fn, compiled):
    def C(f):
        if not compiled:
            return f
        # (strict: a graph that fails to compile raises instead of running in eager)
        options = {"strict": True} if BACKEND == "xla" else None
        return torch.compile(f, backend=BACKEND, options=options)

    return observations(fn, C, describe)


def compare(name, fn) -> str:
    SEEN.clear()
    exp = observe(fn, False)
    SEEN.clear()
    got = observe(fn, True)
    ops = (
        f"  [{' '.join(sorted(s.split('.')[1] for s in SEEN))}]"
        if os.environ.get("PROBE_OPS")
        else ""
    )
    d = difference(got, exp, same)
    if d is None:
        return f"ok    {name}{ops}"
    if d.startswith("SIGN"):
        return f"ok    {name}  ({d}){ops}"
    return f"DIFF  {name}: {d}{ops}"


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], TABLE, compare))
