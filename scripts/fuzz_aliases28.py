"""Random tuples of outputs sharing memory (views of an input, of an intermediate, of another
output; ``.detach()``, views made under no_grad) returned by one compiled function (session 28):
each output's ``requires_grad``, ``grad_fn is None``, ``_is_view()`` and shape, the input's
gradient and errors compared with eager (``BAD-GRAD``: gradients or errors differ; ``BAD``:
metadata only; ``SHARE``: which outputs share memory differs).

    PYTHONPATH=. python scripts/fuzz_aliases28.py FIRST_SEED COUNT
"""

import random
import sys
import warnings

import torch

warnings.simplefilter("ignore")
EXPRS = [
    "y",
    "y[0]",
    "y.view(-1)",
    "y.t()",
    "y.detach()",
    "y.detach()[1]",
    "y[0].detach()",
    "NG(lambda: y[1])",
    "NG(lambda: y.view(-1))",
    "x",
    "x[0]",
    "x.t()",
    "x.detach()",
    "NG(lambda: x[1])",
    "x.view(-1)",
    "y.sum()",
    "y * 1",
    "z",
    "z[1:]",
    "NG(lambda: z.t())",
    "z.detach()",
]


def NG(fn):
    with torch.no_grad():
        return fn()


def make(choice):
    src = "def f(x):\n    y = x * 2\n    z = x.exp()\n    return (" + ", ".join(choice) + ",)\n"
    ns = {"NG": NG, "torch": torch}
    exec(src, ns)  # noqa: S102  (the program drawn)
    return ns["f"], src


def obs(f, C):
    x = torch.linspace(-1, 1, 6, dtype=torch.float64).view(2, 3).requires_grad_()
    outs = C(f)(x)
    meta = [(o.requires_grad, o.grad_fn is None, o._is_view(), tuple(o.shape)) for o in outs]
    ptrs = [o.untyped_storage().data_ptr() for o in outs] + [x.untyped_storage().data_ptr()]
    share = [[p == q for q in ptrs] for p in ptrs]
    loss = sum((o * (k + 2)).sum() for k, o in enumerate(outs) if o.requires_grad)
    err = None
    if isinstance(loss, torch.Tensor):
        try:
            loss.backward()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            err = type(e).__name__
    return meta, share, x.grad, err


seed0, n = int(sys.argv[1]), int(sys.argv[2])
bad = 0
for s in range(seed0, seed0 + n):
    rng = random.Random(s)
    choice = [rng.choice(EXPRS) for _ in range(rng.randint(1, 4))]
    f, src = make(choice)
    torch._dynamo.reset()
    e = obs(f, lambda f: f)
    torch._dynamo.reset()
    try:
        c = obs(f, lambda f: torch.compile(f, backend="xla"))
    except Exception as ex:  # noqa: BLE001  (the error is an observation)
        c = ("CRASH", type(ex).__name__, str(ex)[:200])
    if c[0] == "CRASH":
        ok = False
    else:
        okg = (e[2] is None) == (c[2] is None) and (e[2] is None or torch.allclose(e[2], c[2]))
        ok = e[0] == c[0] and okg and e[3] == c[3]
        shareok = e[1] == c[1]
    if not ok:
        bad += 1
        print(
            "BAD" + ("" if c[0] == "CRASH" or okg and e[3] == c[3] else "-GRAD"),
            s,
            choice,
            "\n  eager",
            e[0],
            e[2],
            e[3],
            "\n  xla  ",
            c if c[0] == "CRASH" else (c[0], c[2], c[3]),
        )
    elif not shareok:
        print("SHARE", s, choice)
print("done", n, "bad", bad)
