"""Probe higher-order ops the way users write them inside ``torch.compile(backend="xla")``:
``torch.cond``, ``while_loop``, ``map``, ``scan``, ``associative_scan``,
``torch.compiler.nested_compile_region`` (invoke_subgraph), ``flex_attention`` and activation
checkpointing; with gradients (their values and None-ness), closures over module parameters,
nested use and data-dependent predicates. Each scenario runs in eager and compiled; every
observation is compared strictly (dtype, shape, requires_grad, values). The compiled run also
records its FallbackWarnings: a scenario listed in ``LOWERED`` must not warn (the op runs in
XLA), any warning must name the op and a line of this file.

    PYTHONPATH=. python scripts/probe_hops.py [substring ...]

Prints one line per scenario: ``ok`` (with ``eager`` where the HOP ran in eager), ``DIFF``
(a silent wrong answer: the first difference), ``WARN`` (a warning problem) or ``CRASH``.
flex_attention has no CPU backward in eager: its scenarios compare against a dense float64
reference (``softmax(score_mod(q @ k^T * scale)) @ v``) instead of eager.
"""

from __future__ import annotations

import sys
import warnings

import torch
from _probe_common import describe as _describe
from _probe_common import difference, r, run
from torch import nn
from torch._higher_order_ops import associative_scan, while_loop
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan

import torch2xla

SCENARIOS: dict = {}
# scenarios that must run without a FallbackWarning once the HOP is lowered
LOWERED: set[str] = set()


def scenario(lowered=True):
    def register(f):
        SCENARIOS[f.__name__] = f
        if lowered:
            LOWERED.add(f.__name__)
        return f

    return register


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.requires_grad, v.detach().clone())
    if v is None:
        return ("V", None)
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    return _describe(v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]}"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape", "requires_grad"), a[1:4], b[1:4]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[4], b[4]
        if x.is_floating_point():
            y = y.to(x.dtype)
            if not torch.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True):
                return f"{path}: values differ, max {(x - y).abs().max().item():.3g}"
        elif not torch.equal(x, y):
            return f"{path}: values {x} vs {y}"
        return None
    if a[0] == "L":
        if len(a[2]) != len(b[2]):
            return f"{path}: lengths {len(a[2])} vs {len(b[2])}"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]}"
        return None
    return None if a[1] == b[1] else f"{path}: {a[1]!r} vs {b[1]!r}"


def observe(fn, compiled: bool, reference: bool = False):
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def C(f):
        return torch.compile(f, backend="xla") if compiled else f

    C.compiled = compiled
    C.reference = reference
    torch._dynamo.reset()
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(C, rec)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            obs.append(("raised", describe(e)))
    fallback = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    return obs, fallback


def compare(name, fn) -> str:
    got, fallback = observe(fn, True)
    exp, _ = observe(fn, False, reference=True)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for t in fallback:
        if "probe_hops.py:" not in t:
            return f"WARN  {name}: warning without the user's line: {t}"
    if fallback and name in LOWERED:
        return f"WARN  {name}: runs in eager: {fallback[0].splitlines()[1].strip()}"
    return f"ok    {name}" + ("  (eager, warned)" if fallback else "")


def grads(*ts):
    return [t.grad for t in ts]


def leaf(*shape, seed=0, dtype=torch.float32):
    return r(*shape, seed=seed, dtype=dtype).requires_grad_(True)


# ============================================================================================
# torch.cond
@scenario()
def cond_forward(C, rec):
    def f(x, y):
        return torch.cond(x.sum() > 0, lambda a, b: a.sin() + b, lambda a, b: a.cos() * b, (x, y))

    for s in (1, 2, 3):
        rec(f"out{s}", C(f)(r(5, seed=s), r(5, seed=s + 10)))


@scenario()
def cond_grad(C, rec):
    def f(x, y):
        return torch.cond(
            x.sum() > 0, lambda a, b: a.sin() * b, lambda a, b: a.cos() + 2 * a, (x, y)
        )

    for s in (1, 2):
        x, y = leaf(5, seed=s), leaf(5, seed=s + 5)
        out = C(f)(x, y)
        rec("out", out)
        out.sum().backward()
        rec("grads", grads(x, y))


@scenario()
def cond_int_and_multi_output(C, rec):
    def f(x, n):
        def t(x, n):
            return x * 2, n + 1, (x > 0).sum()

        def e(x, n):
            return x - 1, n * 3, (x < 0).sum()

        return torch.cond(n.sum() > 3, t, e, (x, n))

    rec("a", C(f)(r(4, dtype=torch.float64), torch.tensor([1, 2])))
    rec("b", C(f)(r(4, seed=3, dtype=torch.float64), torch.tensor([3, 4])))


@scenario()
def cond_module_params(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cond(
                x.mean() > 0, lambda x: self.a(x).relu(), lambda x: self.b(x) * 2, (x,)
            )

    torch.manual_seed(0)
    m = M()
    for s in (1, 2, 4):
        m.zero_grad()
        out = C(m)(r(3, 4, seed=s))
        rec(f"out{s}", out)
        out.sum().backward()
        rec(f"grads{s}", [p.grad for p in m.parameters()])


@scenario()
def cond_closure_tensor(C, rec):
    w = leaf(4, seed=7)

    def f(x):
        return torch.cond(x[0] > 0, lambda x: x * w, lambda x: x + w.exp(), (x,))

    x = leaf(4, seed=1)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(x, w))


@scenario()
def cond_nested(C, rec):
    def inner(x):
        return torch.cond(x.max() > 1, lambda x: x * 3, lambda x: x - 3, (x,))

    def f(x):
        return torch.cond(x.sum() > 0, lambda x: inner(x).sin(), lambda x: x.cos(), (x,))

    for s in (0, 1, 2, 5):
        x = leaf(6, seed=s)
        out = C(f)(x)
        rec(f"out{s}", out)
        out.sum().backward()
        rec(f"g{s}", x.grad)


@scenario()
def cond_no_grad_branch(C, rec):
    # one branch ignores an operand: its gradient is zeros (eager) not None
    def f(x, y):
        return torch.cond(x.sum() > 0, lambda x, y: x * 2, lambda x, y: x * y, (x, y))

    x, y = leaf(3, seed=2), leaf(3, seed=3)
    C(f)(x, y).sum().backward()
    rec("grads", grads(x, y))


@scenario()
def cond_index_check(C, rec):
    # an index out of range in the taken branch raises as eager; in the other it does not
    def f(x, i):
        return torch.cond(i.sum() > 0, lambda x, i: x[i] * 2, lambda x, i: x[:2] + 1, (x, i))

    rec("in range", C(f)(r(4), torch.tensor([1, 3])))
    rec("untaken", C(f)(r(4), torch.tensor([-9, 7])))
    rec("taken", C(f)(r(4), torch.tensor([1, 9])))


@scenario(lowered=False)
def cond_unlowered_op_inside(C, rec):
    # an op without a lowering inside a branch: the cond runs in eager, the warning names it
    @torch.library.custom_op("probe_hops::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    twice.register_fake(lambda x: torch.empty_like(x))

    def f(x):
        return torch.cond(x.sum() > 0, lambda x: twice(x).sin(), lambda x: x.cos(), (x,))

    rec("a", C(f)(r(4)))
    rec("b", C(f)(-r(4).abs()))


@scenario()
def scan_random_steps_differ(C, rec):
    # dropout in a scan body draws a new mask each step (eager does)
    def combine(c, x):
        return c + 1, torch.nn.functional.dropout(x, 0.5, training=True)

    def f(xs):
        return scan(combine, torch.zeros(()), xs)[1]

    ys = C(f)(torch.ones(6, 64))
    rec("steps differ", bool((ys[1:] != ys[:1]).any(1).all()))
    rec("kept values", sorted(set(ys.flatten().tolist())))


@scenario()
def stop_points_inside_subgraphs(C, rec):
    # .detach() and no_grad inside a branch or a scan step stop gradients as in eager
    def branch(x):
        with torch.no_grad():
            y = x * 3
        return y * x + x.detach() * x

    def f(x, xs):
        a = torch.cond(x.sum() > 0, branch, lambda x: x * 2, (x,))
        c = scan(lambda c, x: (c + x.detach() * x, c * x), torch.zeros(3), xs)[0]
        return a + c

    x, xs = leaf(3, seed=5).abs().detach().requires_grad_(True), leaf(4, 3)
    C(f)(x, xs).sum().backward()
    rec("grads", grads(x, xs))


# ============================================================================================
# while_loop
@scenario()
def while_loop_forward(C, rec):
    def f(x, n):
        return while_loop(
            lambda i, x: i < n, lambda i, x: (i + 1, x * 1.5 + 1), (torch.tensor(0), x)
        )

    rec("a", C(f)(r(3), torch.tensor(4)))
    rec("b", C(f)(r(3), torch.tensor(7)))


@scenario()
def while_loop_data_dependent(C, rec):
    def f(x):
        return while_loop(lambda x: x.sum() < 100, lambda x: (x * 2 + 1,), (x.abs(),))

    rec("a", C(f)(r(4)))
    rec("b", C(f)(r(4, seed=2) * 10))


@scenario()
def while_loop_params(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return while_loop(
            lambda i, x: i < 3, lambda i, x: (i + 1, lin(x).tanh()), (torch.tensor(0), x)
        )

    with torch.no_grad():
        rec("out", C(f)(r(2, 3)))


@scenario(lowered=False)
def while_loop_grad(C, rec):
    # eager's while_loop has no autograd for a loop whose carries require grad
    def f(x):
        return while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x.sin()), (torch.tensor(0), x))

    x = leaf(3)
    out = C(f)(x)
    rec("out", out)
    out[1].sum().backward()
    rec("g", x.grad)


# ============================================================================================
# map / scan / associative_scan
@scenario()
def map_forward_grad(C, rec):
    w = leaf(4, seed=4)

    def f(xs, y):
        return hop_map(lambda x, y: (x * y + w).sin(), xs, y)

    xs, y = leaf(3, 4), leaf(4, seed=1)
    out = C(f)(xs, y)
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(xs, y, w))


@scenario()
def scan_cumsum_grad(C, rec):
    def combine(c, x):
        nc = c * 0.9 + x
        return nc, nc.sin()

    def f(init, xs):
        return scan(combine, init, xs)

    init, xs = leaf(4), leaf(5, 4, seed=1)
    c, ys = C(f)(init, xs)
    rec("c", c)
    rec("ys", ys)
    (c.sum() + ys.pow(2).sum()).backward()
    rec("grads", grads(init, xs))


@scenario()
def scan_reverse_dim_params(C, rec):
    lin = nn.Linear(4, 4)

    def combine(c, x):
        h = torch.tanh(lin(x) + c)
        return h, h * 2

    def f(init, xs):
        return scan(combine, init, xs, dim=1, reverse=True)

    init, xs = leaf(2, 4), leaf(2, 6, 4, seed=1)
    c, ys = C(f)(init, xs)
    rec("c", c)
    rec("ys", ys)
    (c.sum() + ys.sum()).backward()
    rec("grads", [init.grad, xs.grad, lin.weight.grad, lin.bias.grad])


@scenario()
def associative_scan_grad(C, rec):
    def f(x):
        return associative_scan(lambda a, b: a * b + b, x, dim=0, combine_mode="generic")

    x = leaf(6, 3)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("g", x.grad)


@scenario()
def associative_scan_pointwise(C, rec):
    def f(x):
        return associative_scan(lambda a, b: a + b, x, dim=1, reverse=True)

    rec("out", C(f)(r(3, 5)))


# ============================================================================================
# nested_compile_region (invoke_subgraph)
@scenario()
def invoke_subgraph_grad(C, rec):
    @torch.compiler.nested_compile_region
    def block(x, w):
        return (x @ w).relu() + x

    def f(x, w1, w2):
        return block(block(x, w1), w2).sum(0)

    x, w1, w2 = leaf(3, 4), leaf(4, 4, seed=1), leaf(4, 4, seed=2)
    out = C(f)(x, w1, w2)
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(x, w1, w2))


@scenario()
def invoke_subgraph_module(C, rec):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        @torch.compiler.nested_compile_region
        def forward(self, x):
            return torch.nn.functional.gelu(self.lin(x))

    torch.manual_seed(0)
    m = nn.Sequential(Block(), Block())
    out = C(m)(r(2, 4))
    rec("out", out)
    out.sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


# ============================================================================================
# checkpoint (already lowered: the HOP is inlined by AOT)
@scenario()
def checkpoint_grad(C, rec):
    from torch.utils.checkpoint import checkpoint

    lin = nn.Linear(4, 4)

    def f(x):
        return checkpoint(lambda x: lin(x).sin() * x, x, use_reentrant=False).sum()

    x = leaf(2, 4)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad])


# ============================================================================================
# flex_attention (eager has no CPU backward: compared against a float64 dense reference)
def _flex(C, rec, score_mod=None, mask_mod=None, grad=True, gqa=False, lse=False):
    """With ``grad``: the compiled flex_attention's gradients against the float64 dense
    reference (eager's CPU flex_attention refuses inputs that require grad, even in its
    forward: its device check is lifted for the compiled run, as on a GPU). Without: the
    forward against eager's own."""
    from torch.nn.attention import flex_attention as fa

    B, H, L, S, D = 2, 4, 8, 8, 16
    Hk = 2 if gqa else H
    q, k, v = (r(B, n, m, D, seed=i) for i, (n, m) in enumerate(((H, L), (Hk, S), (Hk, S))))
    if grad:
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    block_mask = None
    if mask_mod is not None:
        block_mask = fa.create_block_mask(mask_mod, B, H, L, S, device="cpu")
    kw = {"return_lse": True} if lse else {}

    def f(q, k, v):
        return fa.flex_attention(
            q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa, **kw
        )

    if C.compiled or not grad:
        check, fa._validate_device = fa._validate_device, lambda *a: None
        try:
            out = C(f)(q, k, v)
        finally:
            fa._validate_device = check
    else:  # the dense reference, float64
        q, k, v = (t.detach().double().requires_grad_(True) for t in (q, k, v))
        kx, vx = (t.repeat_interleave(H // Hk, 1) for t in (k, v))
        s = q @ kx.transpose(-1, -2) / D**0.5
        b, h, i, j = torch.meshgrid(*(torch.arange(n) for n in (B, H, L, S)), indexing="ij")
        if score_mod is not None:
            s = score_mod(s, b, h, i, j)
        if mask_mod is not None:
            s = s.masked_fill(~mask_mod(b, h, i, j), float("-inf"))
        dead = (s == float("-inf")).all(-1, keepdim=True)  # (rows eager's safe softmax zeros)
        probs = torch.softmax(s.masked_fill(dead, 0), -1).masked_fill(dead, 0)
        out = probs @ vx
        if lse:
            out = (out, torch.logsumexp(s, -1))
    if lse:
        out, l = out
        rec("lse", l.float())
    rec("out", out.float())
    if grad:
        (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).sum().backward()
        rec("grads", [t.grad.float() for t in (q, k, v)])


@scenario()
def flex_plain(C, rec):
    _flex(C, rec)


@scenario()
def flex_score_mod_bias(C, rec):
    bias = r(4, 8, 8, seed=9)

    def rel(score, b, h, i, j):
        return score + (i - j).abs() * 0.1 + bias.to(score.dtype)[h, i, j]

    _flex(C, rec, score_mod=rel)


@scenario()
def flex_causal_mask(C, rec):
    _flex(C, rec, mask_mod=lambda b, h, i, j: i >= j)


@scenario()
def flex_softcap_sliding_gqa_lse(C, rec):
    def cap(score, b, h, i, j):
        return torch.tanh(score / 5) * 5

    _flex(C, rec, score_mod=cap, mask_mod=lambda b, h, i, j: (i - j).abs() <= 2, gqa=True, lse=True)


@scenario()
def flex_forward_vs_eager(C, rec):
    def mod(s, b, h, i, j):
        return s * (h + 1)

    _flex(C, rec, score_mod=mod, mask_mod=lambda b, h, i, j: i >= j, grad=False)


@scenario()
def flex_forward_lse_gqa_vs_eager(C, rec):
    bias = r(8, seed=4)

    def mod(s, b, h, i, j):
        return s + bias[j] * b

    _flex(
        C,
        rec,
        score_mod=mod,
        mask_mod=lambda b, h, i, j: j <= i + 1,
        gqa=True,
        lse=True,
        grad=False,
    )


@scenario()
def flex_fully_masked_rows_vs_eager(C, rec):
    _flex(C, rec, mask_mod=lambda b, h, i, j: (i > 2) & (j < i), lse=True, grad=False)


@scenario()
def flex_fully_masked_rows_grad(C, rec):
    _flex(C, rec, mask_mod=lambda b, h, i, j: (i > 2) & (j < i), grad=True)


@scenario()
def flex_float64_lse_vs_eager(C, rec):
    # flex_attention's fake kernel says the lse is float32 whatever the query's dtype; eager's
    # math kernel returns it in float64 for float64 queries (compiled gave float32)
    from torch.nn.attention import flex_attention as fa

    q, k, v = (
        r(1, 2, 4, 8, dtype=torch.float64),
        r(1, 2, 12, 8, seed=1, dtype=torch.float64),
        r(1, 2, 12, 8, seed=2, dtype=torch.float64),
    )
    bm = fa.create_block_mask(lambda b, h, i, j: j <= i + 8, None, None, 4, 12, "cpu")

    def f(q, k, v):
        mod = lambda s, b, h, i, j: s - (i - j).abs()
        return fa.flex_attention(q, k, v, mod, block_mask=bm, scale=0.3, return_lse=True)

    rec("out", C(f)(q, k, v))


def main(argv) -> int:
    warnings.simplefilter("ignore")
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
