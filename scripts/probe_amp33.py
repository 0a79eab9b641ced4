"""Autocast and mixed precision as users write them on the CPU (session 33): autocast around
the compiled call and inside it, nested regions, ``torch.amp.custom_fwd``/``custom_bwd``
Functions, the output dtype of each op family, ``.grad`` of float32 parameters, autocast's
weight cache, the autocast state read inside compiled code, ``GradScaler`` steps (an inf
gradient included), model casts beside autocast, BatchNorm buffers.

Each scenario ``fn(C, rec)`` runs eagerly (``C`` the identity) and compiled (``C`` is
``torch.compile(backend="xla")``); what it records must be equal: dtypes, shapes, values
bitwise (NaN is NaN), ``None`` gradients, errors of eager's type. A value that differs is
printed with its largest difference in units of its dtype's last place; such a case is judged
against a float64 reference by hand before it is called a bug.

    PYTHONPATH=. python scripts/probe_amp33.py [substring ...]

Differences left (each checked by hand; the same with ``backend="aot_eager"``, torch's own):

- ``cache_*``: eager's autocast cache keeps the first cast of a leaf parameter for the whole
  region, so a parameter changed in place inside one region (``no_grad`` update, an optimizer
  step) is still read at its old value; the compiled graph casts it at each call.
- ``ops_bilinear_embbag``, ``ops_grad_family``, ``half_model_with_autocast``,
  ``transformer_layer_train``, ``double_backward_under_autocast``, ``ops_fp32_list_*``: eager's
  CPU kernels round through the autocast dtype inside (``_trilinear``'s products, mixed-dtype
  layer norm backward); the compiled values are closer to float64 than eager's.
- ``custom_fwd_fn_inside_region_with_disable`` (values right): torch2xla's split around a
  Function it runs in eager cuts the autocast regions (an ``_enter_autocast`` value as a
  segment's output); the segments fail to export and run in eager (a FallbackWarning).
- ``optimizer_step_inside_region``: compiled AdamW's bias corrections are float32 tensor
  arithmetic (``1 - beta2 ** step``), twenty times eager's error; not autocast's.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import describe, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
B, H, F32 = torch.bfloat16, torch.float16, torch.float32
SCENARIOS: dict = {}
# (a value within this many units in the last place of eager's is noted, not reported: XLA
# sums in another order; larger differences are judged against float64 by hand)
NEAR_ULPS = 2.0
NOTES: list = []


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def same(a, b, path):
    if a[0] != b[0]:
        return f"{path}: {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "L":
        return same_items(a, b, path, same)
    if a[0] != "T":
        return same_error_or_value(a, b, path)
    if a[1] != b[1] or a[2] != b[2]:
        return f"{path}: DTYPE/SHAPE {a[1]}{a[2]} (xla) vs {b[1]}{b[2]} (eager)"
    x, y = a[3], b[3]
    if x.is_floating_point():
        eq = (x == y) | (x.isnan() & y.isnan())
        if bool(eq.all()):
            return None
        d = (x.double() - y.double()).abs()
        d = torch.where(eq, torch.zeros_like(d), d)
        k = int(d.argmax())
        ulp = torch.finfo(x.dtype).eps * max(abs(float(y.flatten()[k])), 1e-30)
        if float(d.max()) / ulp <= NEAR_ULPS:
            NOTES.append(f"{path} {int((~eq).sum())}/{x.numel()} within {NEAR_ULPS} ulp")
            return None
        return (
            f"{path}: VALUE {x.dtype} {int((~eq).sum())}/{x.numel()} differ, worst "
            f"{float(x.flatten()[k])!r} vs {float(y.flatten()[k])!r} ({float(d.max()) / ulp:.1f} ulp)"
        )
    if not torch.equal(x, y):
        return f"{path}: VALUE {x.flatten()[:6].tolist()} vs {y.flatten()[:6].tolist()}"
    return None


def compare(name, fn):
    NOTES.clear()
    exp = observations(fn, lambda f: f, describe)

    def C(f):
        return torch.compile(f, backend="xla")

    got = observations(fn, C, describe)
    # (autocast's nesting count back at 0: a leaked count keeps its cache of casts for good)
    nesting = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    if nesting:
        for _ in range(nesting):
            torch.autocast_decrement_nesting()
        torch.clear_autocast_cache()
        return f"BAD {name}: autocast's nesting count left at {nesting}"
    from _probe_common import difference

    d = difference(got, exp, same)
    if d:
        return f"BAD {name}: {d}"
    return f"ok {name}" + (f"  ~{NOTES[:3]}" if NOTES else "")


def leaf(*shape, seed=0, dtype=F32, rg=True):
    return r(*shape, seed=seed).to(dtype).requires_grad_(rg)


def ac(dtype=B, **kw):
    return torch.autocast("cpu", dtype=dtype, **kw)


# ============================================================================================
# where the region is


@scenario
def outer_region_mlp_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    cm = C(m)
    for k in range(2):
        with ac():
            out = cm(r(3, 8, seed=k))
            loss = F.cross_entropy(out, torch.tensor([0, 1, 3]))
        rec(f"out{k}", out)
        rec(f"loss{k}", loss)
        loss.backward()
        rec(f"grads{k}", [p.grad for p in m.parameters()])


@scenario
def inner_region_mlp_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

    @C
    def step(x, y):
        with ac():
            out = m(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        return out, loss

    for k in range(2):
        rec(f"step{k}", step(r(3, 8, seed=k), torch.tensor([0, 1, 3])))
        rec(f"grads{k}", [p.grad for p in m.parameters()])


@scenario
def outer_f16_inner_bf16(C, rec):
    def f(x, w):
        a = x @ w
        with ac(B):
            b = x @ w
            c = a @ w.t()
        return a, b, c, (a.float() + b.float()).sum()

    with ac(H):
        rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def nested_disable_then_reenable(C, rec):
    def f(x, w):
        with ac():
            a = x @ w
            with torch.autocast("cpu", enabled=False):
                b = a @ w  # bf16 @ f32: eager raises? (no: mixed dtype matmul raises)
                with ac(H):
                    c = x @ w
            d = x @ w
        return a, b, c, d

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def nested_disable_float_cast(C, rec):
    def f(x, w):
        with ac():
            a = x @ w
            with torch.autocast("cpu", enabled=False):
                b = a.float() @ w
                s = a.float().softmax(-1)
            d = b @ w
        return a, b, s, d

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def nested_different_dtypes_grad(C, rec):
    x, w1, w2 = leaf(4, 6), leaf(6, 6, seed=1), leaf(6, 3, seed=2)

    def f(x, w1, w2):
        with ac(B):
            h = (x @ w1).relu()
            with ac(H):
                o = h @ w2
        return o

    o = C(f)(x, w1, w2)
    rec("o", o)
    o.float().sum().backward()
    rec("grads", [x.grad, w1.grad, w2.grad])


@scenario
def region_enabled_false_whole(C, rec):
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            return x @ w, F.linear(x, w.t())

    with ac():
        rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def autocast_decorator(C, rec):
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def f(x, w):
        return x @ w, (x @ w).softmax(-1)

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def amp_autocast_device_type_kw(C, rec):
    def f(x, w):
        with torch.amp.autocast(device_type="cpu", dtype=torch.float16):
            return torch.mm(x, w), torch.matmul(x.unsqueeze(0), w)

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def cuda_region_on_cpu_tensors(C, rec):
    def f(x, w):
        with torch.autocast("cuda", dtype=torch.float16):
            return x @ w

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def region_exit_between_calls(C, rec):
    def f(x, w):
        return x @ w

    cf = C(f)
    x, w = r(4, 6), r(6, 6, seed=1)
    rec("a", cf(x, w))
    with ac():
        rec("b", cf(x, w))
    rec("c", cf(x, w))
    with ac(H):
        rec("d", cf(x, w))
    with ac(B, enabled=False):
        rec("e", cf(x, w))


# ============================================================================================
# state queries


@scenario
def query_state_inside(C, rec):
    def f(x):
        on = torch.is_autocast_enabled()
        dt = torch.get_autocast_dtype("cpu")
        on_cpu = torch.is_autocast_enabled("cpu")
        y = x * 2 if on_cpu else x * 3
        if dt == torch.float16:
            y = y + 1
        return y, on, on_cpu

    cf = C(f)
    x = r(3)
    rec("off", cf(x))
    with ac():
        rec("bf16", cf(x))
    with ac(H):
        rec("f16", cf(x))


@scenario
def query_state_inside_region(C, rec):
    def f(x):
        with ac(H):
            a = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
            with torch.autocast("cpu", enabled=False):
                b = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
        c = torch.is_autocast_enabled("cpu")
        return x + 1, a, b, c

    rec("out", C(f)(r(3)))
    rec("after", [torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")])


@scenario
def state_after_exception_in_region(C, rec):
    def f(x):
        with ac():
            y = x @ x
            if y.sum() > -1e9:
                raise ValueError("boom")
        return y

    try:
        C(f)(r(3, 3))
    except ValueError as e:
        rec("err", str(e))
    rec("after", [torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")])


# ============================================================================================
# op families (output dtypes and values)


def _ops_case(name, fn, *make, dtype=B, grad=False):
    def sc(C, rec):
        args = [m() for m in make]

        def f(*a):
            with ac(dtype):
                return fn(*a)

        out = C(f)(*args)
        rec("out", out)
        if grad:
            flat = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
            sum(o.float().sum() for o in flat).backward()
            rec("grads", [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad])

    sc.__name__ = name
    scenario(sc)


for _dt in (B, H):
    _n = "bf16" if _dt == B else "f16"
    _ops_case(
        f"ops_lowp_{_n}",
        lambda x, w, c: (
            torch.addbmm(c[0], x, w),
            torch.matmul(x, w),
            torch.einsum("bij,bjk->bik", x, w),
            torch.linalg.vecdot(x, x),
            F.conv1d(x, w.transpose(1, 2)),
            F.conv_transpose1d(x, w),
            F.prelu(x, torch.tensor([0.25])),
            torch.baddbmm(c, x, w, beta=0.5, alpha=2.0),
            torch.addmm(c[0], x[0], w[0], beta=0.0),
        ),
        lambda: r(2, 4, 6),
        lambda: r(2, 6, 4, seed=1),
        lambda: r(2, 4, 4, seed=2),
        dtype=_dt,
    )
    _ops_case(
        f"ops_fp32_list_{_n}",
        lambda x, t: (
            (x @ x.mT).prod(-1),
            torch.cdist(x @ x.mT, x @ x.mT),
            torch.trace((x @ x.mT)[0]),
            F.pad(x @ x.mT, (1, 1), mode="reflect"),
            F.pad(x @ x.mT, (1, 1), mode="replicate"),
            F.l1_loss(x @ x.mT, t),
            F.smooth_l1_loss(x @ x.mT, t),
            F.huber_loss(x @ x.mT, t),
            F.kl_div((x @ x.mT).log_softmax(-1), t.softmax(-1), reduction="batchmean"),
            F.nll_loss((x @ x.mT)[0].log_softmax(-1), torch.tensor([0, 1, 2, 3])),
            F.soft_margin_loss(x @ x.mT, t.sign()),
            F.margin_ranking_loss((x @ x.mT)[0, 0], (x @ x.mT)[0, 1], t[0, 0].sign()),
            torch.fft.rfft(x @ x.mT).abs(),
            torch.linalg.norm(x @ x.mT),
            torch.linalg.vector_norm(x @ x.mT, dim=-1),
            F.binary_cross_entropy((x @ x.mT).sigmoid(), t.sigmoid()),
        ),
        lambda: r(2, 4, 6),
        lambda: r(2, 4, 4, seed=3),
        dtype=_dt,
    )
    _ops_case(
        f"ops_promote_{_n}",
        lambda x, w, h: (
            torch.cat([x @ w, h]),
            torch.stack([x @ w, h, h.double()]),
            torch.index_copy(h, 0, torch.tensor([1, 0]), x @ w),
            h.index_put((torch.tensor([0, 1]),), (x @ w)[:2]),
            torch.addcmul(h, x @ w, h, value=0.5),
            torch.addcdiv(h, x @ w, h.abs() + 1),
            torch.where(h > 0, x @ w, h),
            torch.lerp(h, x @ w, 0.3),
            (x @ w) * h,
            h.masked_scatter(h > 0, x @ w),
        ),
        lambda: r(2, 6),
        lambda: r(6, 4, seed=1),
        lambda: r(2, 4, seed=2),
        dtype=_dt,
    )
    _ops_case(
        f"ops_norms_{_n}",
        lambda x, w: (
            F.layer_norm(x @ w, (4,)),
            F.group_norm((x @ w).unsqueeze(-1), 2),
            F.rms_norm(x @ w, (4,)),
            (x @ w).softmax(-1),
            (x @ w).log_softmax(-1),
            (x @ w).sum(),
            (x @ w).cumsum(0),
            (x @ w).mean(0),
            (x @ w).var(0),
            F.mse_loss(x @ w, torch.zeros(3, 4)),
            F.cross_entropy(x @ w, torch.tensor([0, 1, 2]), label_smoothing=0.1),
            F.normalize(x @ w, dim=-1),
        ),
        lambda: r(3, 6),
        lambda: r(6, 4, seed=1),
        dtype=_dt,
    )

_ops_case(
    "ops_grad_family",
    lambda x, w, c: (
        torch.baddbmm(c, x, w),
        F.layer_norm(torch.bmm(x, w), (4,)),
        F.conv1d(x, w.transpose(1, 2)).sum(-1),
        F.mse_loss(x @ w, c),
    ),
    lambda: leaf(2, 4, 6),
    lambda: leaf(2, 6, 4, seed=1),
    lambda: leaf(2, 4, 4, seed=2),
    grad=True,
)
_ops_case(
    "ops_grad_promote",
    lambda x, w, h: (torch.cat([x @ w, h]), torch.index_copy(h, 0, torch.tensor([1, 0]), x @ w)),
    lambda: leaf(2, 6),
    lambda: leaf(6, 4, seed=1),
    lambda: leaf(2, 4, seed=2),
    grad=True,
)
_ops_case(
    "ops_f64_untouched",
    lambda x, w: (x @ w, F.linear(x, w.t()), (x @ w).softmax(-1), x.float() @ w.float()),
    lambda: r(3, 6).double(),
    lambda: r(6, 4, seed=1).double(),
)
_ops_case(
    "ops_int_and_mixed",
    lambda x, i: (x @ x.t(), i @ i.t(), (x @ x.t()) + i[:, :3], torch.mm(x.to(B), x.t().to(B))),
    lambda: r(3, 6),
    lambda: torch.arange(18).view(3, 6),
)
_ops_case(
    "ops_conv_pool_bn",
    lambda x, w, rm, rv, g, b: (
        F.batch_norm(F.conv2d(x, w), rm, rv, g, b, training=True),
        rm.clone(),
        rv.clone(),
        F.batch_norm(F.conv2d(x, w), rm, rv, g, b, training=False),
        F.avg_pool2d(F.conv2d(x, w), 2),
        F.adaptive_avg_pool2d(F.conv2d(x, w), 1),
        F.interpolate(F.conv2d(x, w), scale_factor=2, mode="bilinear"),
    ),
    lambda: r(2, 3, 6, 6),
    lambda: r(4, 3, 3, 3, seed=1),
    lambda: torch.zeros(4),
    lambda: torch.ones(4),
    lambda: r(4, seed=2),
    lambda: r(4, seed=3),
)
_ops_case(
    "ops_conv_pool3d",
    lambda x, w: (
        F.max_pool3d(F.conv3d(x, w), 2),
        F.avg_pool3d(F.conv3d(x, w), 2),
        F.adaptive_avg_pool3d(F.conv3d(x, w), 1),
        F.grid_sample(F.conv3d(x, w)[:, :, 0], torch.zeros(2, 2, 2, 2) + 0.3, align_corners=False),
    ),
    lambda: r(2, 3, 5, 6, 6),
    lambda: r(4, 3, 2, 3, 3, seed=1),
)
_ops_case(
    "ops_rnn_cells",
    lambda x, h, wih, whh: (
        torch.lstm_cell(x, (h, h), wih, whh),
        torch.gru_cell(x, h, wih[:12], whh[:12]),
        torch.rnn_tanh_cell(x, h, wih[:4], whh[:4]),
    ),
    lambda: r(3, 5),
    lambda: r(3, 4, seed=1),
    lambda: r(16, 5, seed=2),
    lambda: r(16, 4, seed=3),
)
_ops_case(
    "ops_bilinear_embbag",
    lambda x, w, e: (
        F.bilinear(x, x, w),
        F.embedding_bag(torch.tensor([0, 2, 1, 3]), e, torch.tensor([0, 2])),
        F.embedding(torch.tensor([0, 2]), e),
        torch.tensordot(x, x, dims=([1], [1])),
        torch.chain_matmul(x, x.t(), x),
        torch.linalg.multi_dot([x, x.t(), x]),
        torch.outer(x[0], x[1]),
        torch.dot(x[0], x[1]),
        torch.mv(x, x[0]),
        torch.inner(x, x),
    ),
    lambda: r(3, 5),
    lambda: r(2, 5, 5, seed=1),
    lambda: r(4, 5, seed=2),
)


for _dt in (B, H):
    _ops_case(
        f"ops_kernels_{'bf16' if _dt == B else 'f16'}",
        lambda x, y: (
            torch.addr(x[0, :4], x[0], y[0]),
            torch.kron(x[:2, :2], y[:2, :2]),
            F.pdist(x),
            F.cosine_similarity(x, y),
            F.pairwise_distance(x, y),
            F.unfold(x.view(1, 1, 4, 6), 2) @ torch.ones(6, 2),
            torch.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),
            F.embedding_bag(
                torch.tensor([0, 2, 1]),
                x,
                torch.tensor([0, 1]),
                per_sample_weights=y[:3, 0],
                mode="sum",
            ),
            torch.nn.functional.glu(x @ y.t()),
            torch.linalg.matrix_norm(x @ y.t()),
            torch.logsumexp(x @ y.t(), -1),
            torch.frobenius_norm(x @ y.t(), dim=(0, 1)),
        ),
        lambda: r(4, 6),
        lambda: r(4, 6, seed=1),
        dtype=_dt,
    )


# ============================================================================================
# custom_fwd / custom_bwd


class CastIn(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.bfloat16)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.inner = torch.is_autocast_enabled("cpu")
        return x @ w, (x @ w).softmax(-1)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g, gs):
        x, w = ctx.saved_tensors
        g = g + gs
        return g @ w.t(), x.t() @ g


class NoCast(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        # (autocast's state of the forward: the products are in its dtype)
        return g @ w.t(), x.t() @ g


class CastF32(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (g @ w.t()), (x.t() @ g)


def _fn_case(name, Fn, outer, dtype=B):
    def sc(C, rec):
        x, w = leaf(4, 6), leaf(6, 3, seed=1)
        w16 = leaf(6, 3, seed=1, dtype=B)

        def f(x, w, w16):
            if outer:
                return Fn.apply(x, w)
            with ac(dtype):
                a = Fn.apply(x, w)
                b = Fn.apply(x.to(B), w16) if Fn is not CastIn else Fn.apply(x, w16)
            return a, b

        if outer:
            with ac(dtype):
                out = C(f)(x, w, w16)
        else:
            out = C(f)(x, w, w16)
        rec("out", out)
        flat = [
            t
            for t in (out if isinstance(out, tuple) else (out,))
            for t in (t if isinstance(t, tuple) else (t,))
        ]
        sum(t.float().sum() for t in flat).backward()
        rec("grads", [x.grad, w.grad, w16.grad])

    sc.__name__ = name
    scenario(sc)


for _Fn in (CastIn, NoCast, CastF32):
    for _outer in (False, True):
        for _dt in (B, H):
            _fn_case(
                f"fn_{_Fn.__name__}_{'outer' if _outer else 'inner'}_{'bf16' if _dt == B else 'f16'}",
                _Fn,
                _outer,
                _dt,
            )


@scenario
def fn_castin_without_autocast(C, rec):
    x, w = leaf(4, 6), leaf(6, 3, seed=1)
    out = C(lambda x, w: CastIn.apply(x, w))(x, w)
    rec("out", out)
    (out[0].sum() + out[1].sum()).backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# gradients and parameters


@scenario
def grad_dtype_fp32_params(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5)
    )
    m(r(2, 3, 6, 6))
    cm = C(m)
    with ac():
        out = cm(r(2, 3, 6, 6, seed=1))
    rec("out", out)
    out.float().square().mean().backward()
    rec("grads", [p.grad for p in m.parameters()])
    rec("bufs", list(m.buffers()))


@scenario
def bn_buffers_under_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 2))
    cm = C(m)
    for k in range(3):
        with ac():
            out = cm(r(5, 4, seed=k))
        rec(f"out{k}", out)
        rec(f"bufs{k}", [b for b in m.buffers()])
    m.eval()
    with ac():
        rec("eval", cm(r(5, 4, seed=9)))


@scenario
def bf16_bn_fp32_model(C, rec):
    # BatchNorm kept in float32, the rest cast to bfloat16 (a common mixed model)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 3))
    m.to(B)
    m[1].float()
    cm = C(m)
    x = r(2, 3, 7, 7).to(B)
    for k in range(2):
        out = cm(x + k)
        rec(f"out{k}", out)
        out.float().sum().backward()
        rec(f"grads{k}", [p.grad for p in m.parameters()])
        rec(f"bufs{k}", list(m.buffers()))


@scenario
def half_model_with_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3)).bfloat16()
    m[1].float()
    cm = C(m)
    with ac():
        out = cm(r(4, 6))
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def half_model_f16_autocast_bf16(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).half()
    cm = C(m)
    with ac(B):
        out = cm(r(4, 6).half())
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def fp32_head_outside_region(C, rec):
    torch.manual_seed(0)
    body = nn.Sequential(nn.Linear(6, 8), nn.GELU())
    head = nn.Linear(8, 3)

    def f(x):
        with ac():
            h = body(x)
        return head(h.float()), head(h.float()).dtype, h

    out = C(f)(r(4, 6))
    rec("out", out)
    out[0].sum().backward()
    rec("grads", [p.grad for p in [*body.parameters(), *head.parameters()]])


@scenario
def to_dtype_inside_region(C, rec):
    def f(x, w):
        with ac():
            a = (x @ w).to(torch.float32)
            b = x.half() @ w.half()  # f16 operands under bf16 autocast: cast to bf16
            c = x.bfloat16().float() @ w
            d = (x @ w).double()
        return a, b, c, d

    rec("out", C(f)(r(4, 6), r(6, 3, seed=1)))


@scenario
def grad_accumulation_two_regions(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    cm = C(m)
    for k in range(2):
        with ac():
            out = cm(r(4, 6, seed=k))
        out.float().sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


# ============================================================================================
# autocast's weight cache


@scenario
def cache_param_modified_between_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    cm = C(m)
    x = r(4, 6)
    with ac():
        a = cm(x)
        with torch.no_grad():
            m.weight.add_(1.0)
        b = cm(x)
    rec("ab", [a, b])


@scenario
def cache_param_modified_inside_compiled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)

    def f(x):
        with ac():
            a = m(x)
            with torch.no_grad():
                m.weight.mul_(2.0)
            b = m(x)
        return a, b

    rec("ab", C(f)(r(4, 6)))
    rec("w", m.weight)


@scenario
def cache_optimizer_step_between(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    cm = C(m)
    x = r(4, 6)
    with ac():
        for k in range(3):
            out = cm(x)
            rec(f"out{k}", out)
            out.float().sum().backward()
            opt.step()
            opt.zero_grad()


@scenario
def cache_disabled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    cm = C(m)
    x = r(4, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        a = cm(x)
        with torch.no_grad():
            m.weight.add_(1.0)
        b = cm(x)
    rec("ab", [a, b])


# ============================================================================================
# GradScaler


def _scaler_loop(C, rec, compile_step, dtype=B, inf_at=1, n=4, **kw):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **kw)

    def fwd(x):
        with ac(dtype):
            return m(x).float().square().mean()

    cfwd = C(fwd)

    def step(x):
        loss = cfwd(x)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    cstep = C(step) if compile_step else step
    for k in range(n):
        x = r(5, 4, seed=k)
        if k == inf_at:
            x[0, 0] = float("inf")
        rec(f"loss{k}", cstep(x))
        rec(f"scale{k}", scaler.get_scale())
        rec(f"params{k}", list(m.parameters()))
        rec(f"growth{k}", scaler._get_growth_tracker())


@scenario
def scaler_eager_step_bf16(C, rec):
    _scaler_loop(C, rec, False, init_scale=2.0**6, growth_interval=2)


@scenario
def scaler_eager_step_f16(C, rec):
    _scaler_loop(C, rec, False, dtype=H, init_scale=2.0**6, growth_interval=1)


@scenario
def scaler_compiled_step(C, rec):
    _scaler_loop(C, rec, True, init_scale=2.0**6, growth_interval=1)


@scenario
def scaler_found_inf_tensor(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**20)

    @C
    def fwd(x):
        with ac(H):
            return m(x).float().sum() * 1e3

    for k in range(3):
        x = r(5, 4, seed=k) * (1e4 if k == 0 else 1)
        scaler.scale(fwd(x)).backward()
        scaler.unscale_(opt)
        st = scaler._per_optimizer_states[id(opt)]
        rec(f"found{k}", sum(v for v in st["found_inf_per_device"].values()))
        rec(f"grads{k}", [p.grad for p in m.parameters()])
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        rec(f"scale{k}", scaler.get_scale())
        rec(f"params{k}", list(m.parameters()))


@scenario
def scaler_compiled_unscale_inside(C, rec):
    # the scale and unscale in the compiled function, the step outside
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4, growth_interval=1)

    @C
    def step(x):
        with ac():
            loss = m(x).float().pow(2).sum()
        scaler.scale(loss).backward()
        return loss

    for k in range(3):
        x = r(5, 4, seed=k)
        if k == 1:
            x[1, 1] = float("nan")
        rec(f"loss{k}", step(x))
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        rec(f"scale{k}", scaler.get_scale())
        rec(f"params{k}", list(m.parameters()))


@scenario
def scaler_disabled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", enabled=False)

    @C
    def step(x):
        with ac():
            loss = m(x).float().sum()
        s = scaler.scale(loss)
        s.backward()
        return loss, s

    rec("out", step(r(5, 4)))
    scaler.step(opt)
    scaler.update()
    rec("params", list(m.parameters()))


# ============================================================================================
# regions and the rest of the capture


@scenario
def graph_break_inside_region(C, rec):
    def f(x, w):
        with ac():
            a = x @ w
            print(end="")  # (a graph break inside the region)
            b = a @ w.t()
            torch._dynamo.graph_break()
            c = (b @ w).softmax(-1)
        return a, b, c, c @ w.t()

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))
    rec("after", torch.is_autocast_enabled("cpu"))


@scenario
def item_inside_region(C, rec):
    def f(x, w):
        with ac():
            a = x @ w
            k = int((a > 0).sum().item())
            return a[:, :k] @ w[:k], k

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def nonzero_inside_region(C, rec):
    def f(x, w):
        with ac():
            a = x @ w
            idx = a.flatten().nonzero()
            return a.flatten()[idx[:, 0]] @ torch.ones(idx.shape[0]), idx

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def checkpoint_under_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3))

    def f(x):
        with ac():
            h = torch.utils.checkpoint.checkpoint(m, x, use_reentrant=False)
            return h.float().softmax(-1)

    x = leaf(4, 6)
    out = C(f)(x)
    rec("out", out)
    out.square().sum().backward()
    rec("grads", [x.grad, *[p.grad for p in m.parameters()]])


@scenario
def dynamic_shapes_under_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    cm = C(m)
    with ac():
        for n in (4, 5, 7):
            rec(f"out{n}", cm(r(n, 6, seed=n)))


@scenario
def no_grad_and_inference_under_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    cm = C(m)
    with torch.no_grad(), ac():
        rec("nograd", cm(r(4, 6)))
    with torch.inference_mode(), ac():
        rec("inference", cm(r(4, 6)))


@scenario
def mha_fast_path_eval(C, rec):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    cm = C(mha)
    x = r(2, 5, 8)
    with torch.no_grad(), ac():
        rec("out", cm(x, x, x, need_weights=False))
    with torch.no_grad(), ac():
        rec("weights", cm(x, x, x))


@scenario
def transformer_layer_eval(C, rec):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    cm = C(layer)
    with torch.no_grad(), ac():
        rec("out", cm(r(2, 5, 8)))
        rec(
            "masked",
            cm(r(2, 5, 8), src_key_padding_mask=torch.tensor([[0, 0, 0, 1, 1]] * 2).bool()),
        )


@scenario
def transformer_layer_train(C, rec):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    cm = C(layer)
    with ac():
        out = cm(r(2, 5, 8))
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [p.grad for p in layer.parameters()])


@scenario
def autocast_float32_dtype(C, rec):
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.float32):
            return x @ w, torch.is_autocast_enabled("cpu")

    rec("out", C(f)(r(4, 6).bfloat16(), r(6, 6, seed=1).bfloat16()))


@scenario
def autocast_float64_dtype(C, rec):
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.float64):
            return x @ w, torch.is_autocast_enabled("cpu")

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def deprecated_cpu_amp_autocast(C, rec):
    def f(x, w):
        with torch.cpu.amp.autocast():
            return x @ w, torch.get_autocast_dtype("cpu")

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))


@scenario
def set_autocast_enabled_inside(C, rec):
    def f(x, w):
        prev = torch.is_autocast_enabled("cpu")
        torch.set_autocast_enabled("cpu", True)
        a = x @ w
        torch.set_autocast_enabled("cpu", prev)
        return a, x @ w

    rec("out", C(f)(r(4, 6), r(6, 6, seed=1)))
    rec("after", torch.is_autocast_enabled("cpu"))


@scenario
def half_model_fp32_input_raises(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3).half()
    rec("out", C(m)(r(4, 6)))


@scenario
def half_model_fp32_input_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3).half()
    with ac(H):
        rec("out", C(m)(r(4, 6)))
    with ac(B):
        rec("out_bf16", C(m)(r(4, 6)))


@scenario
def linear_bf16_bias_fp32_input(C, rec):
    def f(x, w, b):
        with ac():
            return F.linear(x, w, b), F.linear(x.double(), w.double(), b)

    rec("out", C(f)(r(4, 6), r(3, 6, seed=1), r(3, seed=2).bfloat16()))


@scenario
def optimizer_step_inside_region(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)

    @C
    def step(x):
        with ac():
            loss = m(x).float().square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss

    for k in range(2):
        rec(f"loss{k}", step(r(4, 6, seed=k)))
        rec(f"params{k}", list(m.parameters()))


@scenario
def clip_and_grads_under_region(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)

    @C
    def step(x):
        with ac():
            loss = m(x).sum()
        loss.backward()
        with ac():
            n = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        return loss, n

    rec("out", step(r(4, 6)))
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def func_grad_under_autocast(C, rec):
    def loss(w, x):
        with ac():
            return (x @ w).float().square().sum()

    g = C(torch.func.grad(loss))
    rec("g", g(r(6, 3, seed=1), r(4, 6)))


@scenario
def double_backward_under_autocast(C, rec):
    x, w = leaf(4, 6), leaf(6, 3, seed=1)

    def f(x, w):
        with ac():
            y = (x @ w).float().tanh().sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        return gx.square().sum()

    out = C(f)(x, w)
    rec("out", out)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def conv_bn_relu_eval_fused(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU()).eval()
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    cm = C(m)
    with torch.no_grad(), ac():
        rec("out", cm(r(2, 3, 6, 6)))


@scenario
def embedding_layernorm_bf16_params(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 8)
    ln = nn.LayerNorm(8)
    lin = nn.Linear(8, 4)

    def f(i):
        with ac():
            h = ln(emb(i))
            return lin(h), h

    out = C(f)(torch.tensor([[1, 2, 3], [4, 5, 6]]))
    rec("out", out)
    out[0].float().sum().backward()
    rec("grads", [emb.weight.grad, ln.weight.grad, lin.weight.grad])


@scenario
def scaler_scale_iterable(C, rec):
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)

    @C
    def f(a, b):
        return scaler.scale([a.sum(), (a * b, b)])

    rec("out", f(r(3), r(3, seed=1)))


@scenario
def scaler_state_dict_roundtrip(C, rec):
    _scaler_loop(C, rec, False, init_scale=2.0**3, growth_interval=1, n=3, inf_at=0)


@scenario
def dtype_argument(C, rec):
    def f(x, w, dt, on):
        with torch.autocast("cpu", dtype=dt, enabled=on):
            return x @ w

    cf = C(f)
    x, w = r(4, 6), r(6, 3, seed=1)
    for dt, on in ((B, True), (H, True), (B, False), (H, True)):
        rec(f"{dt}{on}", cf(x, w, dt, on))


@scenario
def vmap_under_autocast(C, rec):
    def f(x, w):
        with ac():
            return torch.vmap(lambda a: (a @ w).softmax(-1))(x)

    rec("out", C(f)(r(3, 4, 6), r(6, 5, seed=1)))


@scenario
def functional_call_under_autocast(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(6, 3)
    params = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}

    def f(params, x):
        with ac():
            return torch.func.functional_call(m, params, (x,))

    out = C(f)(params, r(4, 6))
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [params["weight"].grad, params["bias"].grad])


@scenario
def custom_fwd_fn_inside_region_with_disable(C, rec):
    x, w = leaf(4, 6), leaf(6, 3, seed=1)

    def f(x, w):
        with ac():
            a = CastF32.apply(x, w)
            with torch.autocast("cpu", enabled=False):
                b = CastIn.apply(x, w)[0]
        return a, b

    out = C(f)(x, w)
    rec("out", out)
    (out[0].sum() + out[1].float().sum()).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def mha_fast_path_masks(C, rec):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    cm = C(mha)
    x = r(2, 5, 8)
    kpm = torch.tensor([[False, False, False, True, True], [False] * 5])
    for dt in (B, H):
        with torch.no_grad(), ac(dt):
            rec(f"kpm{dt}", cm(x, x, x, key_padding_mask=kpm, need_weights=False))
            rec(f"w{dt}", cm(x, x, x, key_padding_mask=kpm))


@scenario
def decoder_layer_eval(C, rec):
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    cm = C(layer)
    with torch.no_grad(), ac():
        rec("out", cm(r(2, 5, 8), r(2, 4, 8, seed=1)))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], SCENARIOS, compare))
