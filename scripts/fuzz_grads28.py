"""Random programs differentiated eagerly and under ``torch.compile(..., backend="xla")``
(session 28): chains of unary and binary ops (detach, no_grad, integer and boolean paths,
views, in-place writes of clones, indexing with duplicates, graph breaks, data-dependent
shapes) of three 3x3 inputs; several outputs of which some feed the loss. Each program is
compiled once and called with several signatures (which inputs require grad, float32 or
float64, contiguous, transposed or sliced inputs), every call compared with eager: outputs
(values, ``requires_grad``), errors, and every input's ``.grad`` (None is not zeros).

    PYTHONPATH=. python scripts/fuzz_grads28.py FIRST_SEED COUNT [CALLS]

Found the persistent cache's executables shared by training programs reading other inputs,
and ``return y.detach(), y`` losing ``y``'s history (``tests/test_grads_s28.py``).
"""

import random
import sys
import warnings

import torch

warnings.simplefilter("ignore")


def _write_first_row(a):
    c = a.clone()
    c[0].mul_(2)
    return c


UN = [
    ("sin", lambda a: a.sin()),
    ("relu", lambda a: a.relu()),
    ("detach", lambda a: a.detach()),
    ("long", lambda a: (a * 3).long().to(a.dtype)),
    ("gt", lambda a: (a > 0).to(a.dtype)),
    ("t", lambda a: a.t()),
    ("flip", lambda a: a.flip(0)),
    ("idx", lambda a: a[[1, 0, 1]]),
    ("slice", lambda a: a[1:, :]),
    (
        "sum0",
        lambda a: a.sum(0, keepdim=True).expand_as(a) if a.dim() == 2 and a.shape[0] > 0 else a,
    ),
    ("cumsum", lambda a: a.cumsum(-1)),
    ("sort", lambda a: a.sort(-1).values),
    ("amax", lambda a: a.amax(-1, keepdim=True) * a),
    ("clone_", lambda a: a.clone().mul_(2)),
    ("masked", lambda a: a.masked_fill(a > 0.5, 0.0)),
    ("view", lambda a: a.reshape(-1).reshape(a.shape)),
    ("round", lambda a: a.round()),
    ("nograd", None),
    ("softmax", lambda a: a.softmax(-1)),
    ("abs", lambda a: a.abs()),
    ("inplace_view", _write_first_row),
    ("exp_add_", lambda a: a.exp().add_(1)),
    ("stack", lambda a: torch.stack([a, a * 2]).sum(0)),
    ("clamp", lambda a: a.clamp(-0.5, 0.5)),
    ("norm", lambda a: a.norm(dim=-1, keepdim=True) * a),
    ("unbind", lambda a: torch.stack(a.unbind(0)[::-1])),
    ("where_scalar", lambda a: torch.where(a > 0, a, 0.0)),
    (
        "scatter_add",
        lambda a: torch.zeros_like(a).scatter_add(
            0, torch.tensor([[0, 1, 0], [2, 2, 0], [0, 0, 0]]), a
        ),
    ),
    ("identity", lambda a: a),
    ("expand", lambda a: a[:1].expand(3, 3)),
    ("diag", lambda a: a.diagonal().unsqueeze(0) * a),
    ("masked_fill_", lambda a: (a * 1).masked_fill_(a < 0, 1.0)),
    ("logsumexp", lambda a: a.logsumexp(-1, keepdim=True) - a),
    ("break", lambda a: (torch._dynamo.graph_break(), a)[1] * 1.5),
    ("item", lambda a: a * a.detach().abs().sum().item()),
    ("masked_sel", lambda a: torch.zeros_like(a).masked_scatter(a > 0, a[a > 0] * 2)),
    (
        "nonzero",
        lambda a: (
            a[(a > 0).nonzero()[:, 0]].sum(0, keepdim=True).expand_as(a) if a.dim() == 2 else a
        ),
    ),
    ("argmaxidx", lambda a: a.gather(-1, a.argmax(-1, keepdim=True)).expand_as(a)),
]
BIN = [
    ("add", lambda a, b: a + b),
    ("mul", lambda a, b: a * b),
    ("where", lambda a, b: torch.where(a > b, a, b)),
    ("max", lambda a, b: torch.maximum(a, b)),
    ("mm", lambda a, b: a @ b.t() @ a if a.shape == b.shape else a + b),
    ("where_detach", lambda a, b: torch.where(a > 0, a, b.detach())),
    ("lerp", lambda a, b: torch.lerp(a, b, 0.3)),
    ("index_add", lambda a, b: a.index_add(0, torch.tensor([0, 0, 2]), b)),
    ("cat_view", lambda a, b: torch.cat([a, b]).view(2, 3, 3)[1]),
    ("copy_", lambda a, b: (a * 1).copy_(b)),
    ("mul_", lambda a, b: (a * 1).mul_(b)),
    ("atan2", lambda a, b: torch.atan2(a, b)),
    ("pow", lambda a, b: a.abs().pow(b)),
    (
        "index_put",
        lambda a, b: a.index_put((torch.tensor([0, 2, 0]),), b[0]) if a.shape == b.shape else a * b,
    ),
]


def build(rng):
    prog = []
    n = rng.randint(2, 6)
    for i in range(n):
        if rng.random() < 0.4:
            prog.append(("b", rng.randrange(len(BIN)), rng.randrange(100), rng.randrange(100)))
        else:
            prog.append(("u", rng.randrange(len(UN)), rng.randrange(100)))
    nout = rng.randint(1, 3)
    outs = [rng.randrange(100) for _ in range(nout)]
    return prog, outs


def make_fn(prog, outs):
    def f(x, w, v):
        vals = [x, w, v]
        for p in prog:
            if p[0] == "u":
                _name, op = UN[p[1]]
                a = vals[p[2] % len(vals)]
                if op is None:
                    with torch.no_grad():
                        r = a * 2
                else:
                    r = op(a)
            else:
                _name, op = BIN[p[1]]
                r = op(vals[p[2] % len(vals)], vals[p[3] % len(vals)])
            vals.append(r)
        return tuple(vals[3 + o % (len(vals) - 3)] for o in outs)

    return f


def run(f, C, rgs, used, seed, dtype=torch.float64, layout=0):
    g = torch.Generator().manual_seed(seed)
    args = [torch.randn(3, 3, generator=g, dtype=torch.float64).to(dtype) for r in rgs]
    if layout == 1:
        args = [a.t().contiguous().t() for a in args]
    elif layout == 2:
        args = [torch.randn(3, 6, generator=g, dtype=dtype)[:, ::2] for a in args]
    args = [a.requires_grad_(r) for a, r in zip(args, rgs)]
    try:
        outs = C(f)(*args)
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        return (
            "E",
            type(e).__mro__[-3].__name__ if type(e).__name__ == "OpError" else type(e).__name__,
            str(e).split(chr(10))[0][:80],
        )
    loss = 0
    w = torch.Generator().manual_seed(seed + 1)
    for i, o in enumerate(outs):
        if i in used and o.requires_grad:
            loss = loss + (o * torch.randn(o.shape, generator=w, dtype=o.dtype)).sum()
    res = [("o", o.detach().clone(), o.requires_grad) for o in outs]
    if isinstance(loss, torch.Tensor):
        try:
            loss.backward()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            return res + [("E", type(e).__name__)]
    return res + [(a.grad,) for a in args]


def same(a, b):
    if type(a) != type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        tol = 1e-9 if a.dtype == torch.float64 else 1e-4
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and torch.allclose(a, b, atol=tol, rtol=tol, equal_nan=True)
        )
    return a == b


seed0 = int(sys.argv[1])
n = int(sys.argv[2])
CALLS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
bad = 0
for s in range(seed0, seed0 + n):
    rng = random.Random(s)
    prog, outs = build(rng)
    rgs = [rng.random() < 0.7 for _ in range(3)]
    used = {i for i in range(len(outs)) if rng.random() < 0.7}
    f = make_fn(prog, outs)
    torch._dynamo.reset()
    cf = torch.compile(f, backend="xla")
    sigs = [(rgs, torch.float64, 0)] + [
        (
            [rng.random() < 0.7 for _ in range(3)],
            rng.choice([torch.float32, torch.float64]),
            rng.randrange(3),
        )
        for _ in range(CALLS - 1)
    ]
    for rgs_i, dt, lay in sigs:
        e = run(f, lambda f: f, rgs_i, used, s, dt, lay)
        c = run(f, lambda f, cf=cf: cf, rgs_i, used, s, dt, lay)
        if not same(c, e):
            bad += 1
            desc = [(p[0], (UN if p[0] == "u" else BIN)[p[1]][0], *p[2:]) for p in prog]
            print("BAD", s, desc, outs, rgs_i, dt, lay, used)
            print("   eager", e)
            print("   xla  ", c)
            break
print("done", n, "bad", bad)
