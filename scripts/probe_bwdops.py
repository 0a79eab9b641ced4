"""Which backward ops reach the registry from user-style code (``scripts/probe_lowerings.py``
scans OpInfos; this one calls F.* and nn modules the way users do): ``torch.func.grad`` of
distances, embedding bags, batch norm, every ``F.interpolate`` mode (anti-aliased too),
weight norm, attention, masked scatter, and second derivatives of activations, each compiled
in strict mode. Prints ``ok``, ``MISS`` (the ops without a lowering), ``FAIL`` (a lowering
raised) or ``ERR`` (another error: compare with eager before reading it as ours).

    PYTHONPATH=. python scripts/probe_bwdops.py
"""

# (B023: each case's lambdas run inside ``rep``, in their loop iteration)
# ruff: noqa: B023

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla
from torch2xla._errors import LoweringError, op_name

torch._dynamo.config.cache_size_limit = 64


def strict(f):
    torch._dynamo.reset()
    return torch.compile(f, backend="xla", options={"strict": True}, dynamic=False)


def rep(name, thunk):
    try:
        thunk()
        print("ok  ", name)
    except torch2xla.UnsupportedOpsError as e:
        print("MISS", name, sorted({op_name(u.node) for u in e.unsupported}))
    except LoweringError as e:
        print(
            "FAIL",
            name,
            op_name(e.node) if e.node is not None else "?",
            str(e).splitlines()[0][:150],
        )
    except Exception as e:  # noqa: BLE001  (the probe reports every error, eager's too)
        print("ERR ", name, type(e).__name__, str(e).splitlines()[0][:150])


def g(f, *args, argnums=0):
    return lambda: strict(lambda *a: torch.func.grad(lambda *b: f(*b).sum(), argnums)(*a))(*args)


def gg(f, x):
    def second(x):
        return torch.func.grad(lambda y: f(y).sum())(x).sum()

    return lambda: strict(lambda x: torch.func.grad(second)(x))(x)


def ag(f, *args):
    def h(*a):
        a = [t.detach().requires_grad_() for t in a]
        with torch.enable_grad():
            out = f(*a).sum()
            return torch.autograd.grad(out, a, create_graph=True)

    return lambda: strict(h)(*args)


r = lambda *s: torch.randn(*s, dtype=torch.float64)
x, y = r(2, 5, 3), r(2, 4, 3)
rep("cdist", g(lambda a, b: torch.cdist(a, b), x, y, argnums=(0, 1)))
rep("cdist p1", g(lambda a, b: torch.cdist(a, b, p=1), x, y, argnums=(0, 1)))
rep(
    "cdist mm",
    g(lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), x, y, argnums=(0, 1)),
)
rep("cdist ag", ag(lambda a, b: torch.cdist(a, b, p=3), x, y))
rep("pdist", g(lambda a: F.pdist(a), r(5, 3)))
rep("pdist p1", g(lambda a: F.pdist(a, 1), r(5, 3)))
rep("pdist ag", ag(lambda a: F.pdist(a), r(5, 3)))
w = r(10, 3)
idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
off = torch.tensor([0, 4])
for mode in ("sum", "mean", "max"):
    rep(f"embedding_bag {mode}", g(lambda w: F.embedding_bag(idx, w, off, mode=mode), w))
    rep(
        f"embedding_bag {mode} psw",
        g(
            lambda w, ps: F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=ps),
            w,
            r(8),
            argnums=(0, 1),
        ),
    ) if mode == "sum" else None
    rep(
        f"embedding_bag {mode} sparse",
        g(
            lambda w: F.embedding_bag(
                idx, w, off, mode=mode, sparse=False, scale_grad_by_freq=True
            ),
            w,
        ),
    ) if mode != "max" else None
    rep(f"embedding_bag {mode} ag", ag(lambda w: F.embedding_bag(idx, w, off, mode=mode), w))
rep("embedding", g(lambda w: F.embedding(idx, w), w))
rep("embedding sgf", g(lambda w: F.embedding(idx, w, scale_grad_by_freq=True), w))
rep("embedding ag", ag(lambda w: F.embedding(idx, w, padding_idx=2), w))
bn = nn.BatchNorm2d(3).double()
xb = r(4, 3, 5, 5)
rep("bn train grad x", g(lambda a: bn(a), xb))
rep(
    "bn train functional_call",
    lambda: strict(
        lambda p, a: torch.func.grad(lambda p: torch.func.functional_call(bn, p, (a,)).sum())(p)
    )({k: v.detach() for k, v in bn.named_parameters()}, xb),
)
rep("bn train ag", ag(lambda a: bn(a), xb))
rep(
    "bn F train",
    g(
        lambda a, w, b: F.batch_norm(a, None, None, w, b, training=True),
        xb,
        r(3),
        r(3),
        argnums=(0, 1, 2),
    ),
)
bn.eval()
rep("bn eval grad", g(lambda a: bn(a), xb))
bn.train()
rep("bn1d", g(lambda a: nn.BatchNorm1d(3).double()(a), r(4, 3)))
rep("instnorm", g(lambda a: F.instance_norm(a), xb))
rep("groupnorm", g(lambda a: F.group_norm(a, 3), xb))
rep("layernorm", g(lambda a: F.layer_norm(a, (5, 5)), xb))
rep("layernorm ag", ag(lambda a, w: F.layer_norm(a, (5,), w), xb, r(5)))
xi = r(2, 3, 6, 7)
x1 = r(2, 3, 7)
x3 = r(1, 2, 4, 5, 6)
for mode, xx in [
    ("nearest", xi),
    ("nearest-exact", xi),
    ("bilinear", xi),
    ("bicubic", xi),
    ("area", xi),
    ("linear", x1),
    ("nearest", x1),
    ("trilinear", x3),
    ("nearest", x3),
    ("nearest-exact", x3),
]:
    for ac in (None,) if mode in ("nearest", "nearest-exact", "area") else (False, True):
        rep(
            f"interp {mode} {xx.dim()}d ac={ac}",
            g(lambda a: F.interpolate(a, scale_factor=1.7, mode=mode, align_corners=ac), xx),
        )
    rep(
        f"interp {mode} {xx.dim()}d size",
        g(lambda a: F.interpolate(a, size=tuple(s + 2 for s in xx.shape[2:]), mode=mode), xx),
    )
for mode in ("bilinear", "bicubic"):
    for ac in (False, True):
        rep(
            f"interp aa {mode} ac={ac}",
            g(
                lambda a: F.interpolate(
                    a, size=(4, 3), mode=mode, align_corners=ac, antialias=True
                ),
                xi,
            ),
        )
        rep(
            f"interp aa up {mode} ac={ac}",
            g(
                lambda a: F.interpolate(
                    a, size=(9, 11), mode=mode, align_corners=ac, antialias=True
                ),
                xi,
            ),
        )
    rep(
        f"interp aa {mode} ag",
        ag(lambda a: F.interpolate(a, size=(4, 3), mode=mode, antialias=True), xi),
    )
rep("interp bilinear ag", ag(lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"), xi))
rep("interp nearest ag", ag(lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), xi))
lin = nn.utils.weight_norm(nn.Linear(3, 4).double())
rep(
    "weight_norm",
    lambda: strict(
        lambda p, a: torch.func.grad(lambda p: torch.func.functional_call(lin, p, (a,)).sum())(p)
    )({k: v.detach() for k, v in lin.named_parameters()}, r(2, 3)),
)
rep(
    "weight_norm fn",
    g(lambda v, gg_: torch._weight_norm(v, gg_, 0), r(4, 3), r(4, 1), argnums=(0, 1)),
)
rep(
    "weight_norm fn dim1",
    g(lambda v, gg_: torch._weight_norm(v, gg_, 1), r(4, 3), r(1, 3), argnums=(0, 1)),
)
lin2 = nn.utils.parametrizations.weight_norm(nn.Linear(3, 4).double())
rep(
    "param weight_norm",
    lambda: strict(
        lambda p, a: torch.func.grad(lambda p: torch.func.functional_call(lin2, p, (a,)).sum())(p)
    )({k: v.detach() for k, v in lin2.named_parameters()}, r(2, 3)),
)
q, k, v = r(2, 3, 5, 4), r(2, 3, 6, 4), r(2, 3, 6, 4)
rep("sdpa", g(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v, argnums=(0, 1, 2)))
rep(
    "sdpa causal",
    g(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        q,
        k,
        k,
        argnums=(0, 1, 2),
    ),
)
rep(
    "sdpa f32",
    g(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        q.float(),
        k.float(),
        v.float(),
        argnums=(0, 1, 2),
    ),
)
rep("sdpa ag", ag(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v))
mha = nn.MultiheadAttention(4, 2, batch_first=True).double()
rep("mha", g(lambda a: mha(a, a, a)[0], r(2, 5, 4)))
mask = torch.rand(3, 4) > 0.5
rep("masked_scatter", g(lambda a, s: a.masked_scatter(mask, s), r(3, 4), r(12), argnums=(0, 1)))
rep("masked_scatter ag", ag(lambda a, s: a.masked_scatter(mask, s), r(3, 4), r(12)))
rep("abs gg", gg(torch.abs, r(5)))
rep(
    "abs ag2",
    lambda: strict(
        lambda x: torch.func.grad(lambda y: torch.func.grad(lambda z: z.abs().sum())(y).sum())(x)
    )(r(5)),
)
for name, f in [
    ("relu", F.relu),
    ("hardshrink", F.hardshrink),
    ("softshrink", F.softshrink),
    ("sgn", torch.sgn),
    ("sign", torch.sign),
    ("round", torch.round),
    ("floor", torch.floor),
    ("relu6", F.relu6),
    ("hardtanh", F.hardtanh),
    ("leaky", F.leaky_relu),
    ("elu", F.elu),
    ("gelu", F.gelu),
    ("silu", F.silu),
    ("mish", F.mish),
    ("hardswish", F.hardswish),
    ("hardsigmoid", F.hardsigmoid),
    ("softplus", F.softplus),
    ("logsigmoid", F.logsigmoid),
    ("tanhshrink", F.tanhshrink),
    ("threshold", lambda a: F.threshold(a, 0.1, 2.0)),
    ("prelu", lambda a: F.prelu(a, torch.tensor([0.25], dtype=a.dtype))),
    ("glu", lambda a: F.glu(a.reshape(-1, 2) if a.numel() % 2 == 0 else a)),
    ("max", lambda a: a.max()),
    ("amax", lambda a: a.amax()),
    ("norm", lambda a: a.norm()),
    ("logsumexp", lambda a: a.logsumexp(0)),
    ("softmax", lambda a: a.softmax(0)),
    ("log_softmax", lambda a: a.log_softmax(0)),
    ("sigmoid", torch.sigmoid),
    ("tanh", torch.tanh),
]:
    rep(f"gg {name}", gg(f, r(6)))
