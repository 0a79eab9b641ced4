"""Probe programs under the Dynamo settings and dynamic-shape modes users turn on:
``capture_scalar_outputs``/``capture_dynamic_output_shape_ops`` (unbacked sizes from ``.item()``,
``.tolist()``, ``nonzero``, masks, ``torch._check``), ``dynamic=True``/``mark_dynamic``/
``maybe_mark_dynamic``/``mark_static``, ``automatic_dynamic_shapes``, ``specialize_int``/
``specialize_float``, a small ``cache_size_limit``, ``torch.compiler.set_stance``,
``inline_inbuilt_nn_modules``, ``fullgraph=True``; symbolic sizes in arithmetic (views,
``narrow``, ``F.pad``, ``expand``, ``split``), SymFloats, ``torch.cond``/``while_loop`` with
data-dependent predicates, and sizes 0 and 1 after larger ones.

Each scenario runs three ways: eager (the reference for every observation), Dynamo with
``backend="aot_eager"`` (the reference for the number of Dynamo graphs, and for what is torch's
own) and ``backend="xla"``. Printed per scenario: ``ok``, ``TORCH`` (xla differs from eager
exactly as aot_eager does), ``DIFF`` (the first difference) or ``CRASH``; with the number of
Dynamo graphs (xla / aot_eager) and of XLA programs.

    PYTHONPATH=. python scripts/probe_dynconf30.py [substring ...]
"""

from __future__ import annotations

import math
import os
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]
os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")
import probe_guards as pg

import torch2xla

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
CONFIG: dict = {}
CAP = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


def scenario(**config):
    def deco(f):
        SCENARIOS[f.__name__] = f
        CONFIG[f.__name__] = config
        return f

    return deco


def rand(*shape, seed=0, rg=False, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_(rg)


def describe(v):
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return pg.describe(v)


def same(a, b, path=""):
    if a[0] == "E" and b[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[0] == "L" and b[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return pg.same(a, b, path)


class Programs:
    def __init__(self):
        self.count = 0
        self.original = torch2xla.runtime._program.XlaProgram.__init__
        me = self

        def counting(prog, *a, **kw):
            me.count += 1
            me.original(prog, *a, **kw)

        self.counting = counting

    def __enter__(self):
        torch2xla.runtime._program.XlaProgram.__init__ = self.counting
        return self

    def __exit__(self, *exc):
        torch2xla.runtime._program.XlaProgram.__init__ = self.original


def observe(fn, backend):
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def call(label, thunk):
        try:
            value = thunk()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            value = e
        rec(label, value)
        return value

    call.rec = rec

    def C(f, **kw):
        if backend is None:
            return f
        kw.setdefault("backend", backend)
        return torch.compile(f, **kw)

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    try:
        fn(C, call)
    except Exception as e:  # noqa: BLE001
        obs.append(("raised", describe(e)))
    finally:
        torch.compiler.set_stance("default")
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    return obs, graphs


def first_diff(got, exp):
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = same(g, e, lg)
        if d:
            return d
    if len(got) != len(exp):
        return f"{[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return None


def compare(name, fn) -> str:
    config = {"automatic_dynamic_local_pgo": False, **CONFIG[name]}
    with torch._dynamo.config.patch(**config):
        with Programs() as progs:
            got, g_xla = observe(fn, "xla")
        ref, g_aot = observe(fn, "aot_eager")
        exp, _ = observe(fn, None)
    tag = f"[graphs {g_xla}/{g_aot} aot, {progs.count} programs, {len(exp)} obs]"
    d = first_diff(got, exp)
    if d is None:
        # (fewer graphs than aot_eager: AOTAutograd's own guards; more: torch2xla's graph
        # breaks where eager raises, _fake_errors)
        if g_xla > g_aot and first_diff(ref, exp) is None:
            return f"GRAPH {name} {tag}: more Dynamo graphs than aot_eager"
        return f"ok    {name} {tag}"
    if first_diff(got, ref) is None:
        return f"TORCH {name} {tag}: {d}"
    return f"DIFF  {name} {tag}: {d}"


# ============================================================================================
# unbacked sizes from .item() / .tolist()
@scenario(**CAP)
def item_arange(C, call):
    def f(x, n):
        k = n.item()
        torch._check_is_size(k)
        return torch.arange(k, dtype=x.dtype) * x.sum(), x[:k] + 1

    g = C(f)
    for k in (3, 0, 1, 5, 2):
        call(f"k={k}", lambda k=k: g(rand(5), torch.tensor(k)))


@scenario(**CAP)
def item_arange_fullgraph(C, call):
    def f(x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return torch.arange(k) + x[:k].long(), torch.empty(k).fill_(2.0) * x[:k]

    g = C(f, fullgraph=True)
    for k in (3, 0, 1, 4):
        call(f"k={k}", lambda k=k: g(rand(4) * 3, torch.tensor(k)))


@scenario(**CAP)
def check_failing_raises(C, call):
    def f(x):
        k = (x > 0).sum().item()
        torch._check(k < 4, lambda: f"too many positives: {k}")
        return x * k

    g = C(f)
    call("ok", lambda: g(torch.tensor([1.0, -1.0, 2.0, -3.0])))
    call("fails", lambda: g(torch.tensor([1.0, 1.0, 2.0, 3.0])))
    call("ok again", lambda: g(torch.tensor([-1.0, -1.0, 2.0, 3.0])))


@scenario(**CAP)
def check_is_size_negative_raises(C, call):
    def f(x, n):
        k = n.item()
        torch._check_is_size(k)
        return x.new_zeros(k) + 1

    g = C(f)
    call("ok", lambda: g(rand(3), torch.tensor(2)))
    call("neg", lambda: g(rand(3), torch.tensor(-1)))


@scenario(**CAP)
def check_fullgraph_failing(C, call):
    def f(x, n):
        k = n.item()
        torch._check(k % 2 == 0)
        return x.reshape(k, -1)

    g = C(f, fullgraph=True)
    call("ok", lambda: g(rand(12), torch.tensor(4)))
    call("odd", lambda: g(rand(12), torch.tensor(3)))


@scenario(**CAP)
def item_float_scale(C, call):
    def f(x):
        s = x.abs().max().item()
        return x / s, x * (s * 2 + 1), torch.full((2,), s)

    g = C(f)
    call("a", lambda: g(rand(4)))
    call("b", lambda: g(rand(4, seed=1) * 10))


@scenario(**CAP)
def item_float_fullgraph_grad(C, call):
    def f(x):
        s = x.detach().abs().max().item()
        return (x / s).pow(2).sum() * math.sqrt(s)

    g = C(f, fullgraph=True)
    for i in range(2):
        x = rand(5, seed=i, rg=True)
        call(f"v{i}", lambda x=x: g(x))
        call(f"g{i}", lambda x=x: (g(x).backward(), x.grad)[1])


@scenario(**CAP)
def tolist_split_ragged(C, call):
    def f(x, lengths):
        parts = torch.split(x, lengths.tolist())
        padded = nn.utils.rnn.pad_sequence(parts, batch_first=True)
        return padded, torch.stack([p.sum(0) for p in parts])

    g = C(f)
    call("a", lambda: g(rand(6, 2), torch.tensor([1, 2, 3])))
    call("b", lambda: g(rand(6, 2), torch.tensor([3, 0, 3])))
    call("c", lambda: g(rand(9, 2), torch.tensor([4, 4, 1])))


@scenario(**CAP)
def tolist_split_fullgraph_grad(C, call):
    def f(x, lengths):
        sizes = lengths.tolist()
        for s in sizes:
            torch._check_is_size(s)
        parts = torch.split(x, sizes)
        return sum(p.mean(0) * (i + 1) for i, p in enumerate(parts)).sum()

    g = C(f, fullgraph=True)
    for i, ls in enumerate(([2, 2, 2], [1, 4, 1])):
        x = rand(6, 3, seed=i, rg=True)
        call(f"v{i}", lambda x=x, ls=ls: g(x, torch.tensor(ls)))
        call(f"g{i}", lambda x=x, ls=ls: (g(x, torch.tensor(ls)).backward(), x.grad)[1])


@scenario(**CAP)
def empty_data_dependent(C, call):
    def f(x):
        n = int(x.sum().item())
        out = torch.empty(n, 2)
        out.copy_(torch.ones(n, 2) * 3)
        return out, n

    g = C(f)
    call("3", lambda: g(torch.tensor([1.0, 2.0])))
    call("0", lambda: g(torch.tensor([0.0, 0.0])))
    call("5", lambda: g(torch.tensor([2.0, 3.0])))


@scenario(**CAP)
def slice_by_item_past_end(C, call):
    def f(x, n):
        k = n.item()
        return x[:k] * 2, x[k:].sum()

    g = C(f)
    for k in (2, 7, 0, -1):
        call(f"k={k}", lambda k=k: g(rand(5), torch.tensor(k)))


@scenario(**CAP)
def item_in_view(C, call):
    def f(x, n):
        k = n.item()
        torch._check(k > 0)
        torch._check(x.numel() % k == 0)
        return x.view(k, -1).sum(1), x.reshape(-1, k).t()

    g = C(f)
    for k in (2, 3, 6, 1):
        call(f"k={k}", lambda k=k: g(rand(6), torch.tensor(k)))


# ============================================================================================
# data-dependent output shapes
@scenario(**CAP)
def moe_topk_routing_train(C, call):
    torch.manual_seed(0)
    experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
    router = nn.Linear(4, 3)

    def moe(x):
        probs = router(x).softmax(-1)
        w, idx = probs.topk(2, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(experts):
            tok, slot = torch.where(idx == e)
            if tok.numel() == 0:
                continue
            y = expert(x[tok]) * w[tok, slot, None]
            out = out.index_add(0, tok, y)
        return out

    g = C(moe)
    for i, n in enumerate((6, 5, 1)):
        x = rand(n, 4, seed=i)
        call(f"n={n}", lambda x=x: g(x))
        for p in list(experts.parameters()) + list(router.parameters()):
            p.grad = None
        call(f"loss n={n}", lambda x=x: g(x).pow(2).sum().backward())
        call(
            f"grads n={n}",
            lambda: (
                [p.grad if p.grad is not None else "None" for p in experts.parameters()]
                + [router.weight.grad]
            ),
        )


@scenario(**CAP)
def moe_count_tokens_fullgraph(C, call):
    def f(x, idx):
        counts = torch.bincount(idx, minlength=3)
        order = idx.argsort(stable=True)
        sizes = counts.tolist()
        for s in sizes:
            torch._check_is_size(s)
        groups = torch.split(x[order], sizes)
        return torch.cat([gr * (k + 1) for k, gr in enumerate(groups)]), counts

    g = C(f, fullgraph=True)
    call("a", lambda: g(rand(5, 2), torch.tensor([0, 2, 2, 1, 0])))
    call("b", lambda: g(rand(4, 2), torch.tensor([2, 2, 2, 2])))


@scenario(**CAP)
def bincount_histogram(C, call):
    def f(v):
        h = torch.bincount(v)
        return h, h.float() / h.sum(), h.argmax()

    g = C(f)
    call("a", lambda: g(torch.tensor([0, 1, 1, 4])))
    call("b", lambda: g(torch.tensor([7, 7, 2])))
    call("empty", lambda: g(torch.tensor([], dtype=torch.long)))


@scenario(**CAP)
def bincount_weights(C, call):
    def f(v, w):
        return torch.bincount(v, weights=w, minlength=4)

    g = C(f)
    call("a", lambda: g(torch.tensor([0, 1, 1, 4]), rand(4)))
    call("b", lambda: g(torch.tensor([1, 2]), rand(2, dtype=torch.float64)))


@scenario(**CAP)
def nms_style_filter(C, call):
    def f(boxes, scores):
        keep = scores > 0.2
        b, s = boxes[keep], scores[keep]
        order = s.argsort(descending=True)
        b, s = b[order], s[order]
        x1, y1, x2, y2 = b.unbind(-1)
        area = (x2 - x1) * (y2 - y1)
        xx1 = torch.maximum(x1[:, None], x1[None])
        yy1 = torch.maximum(y1[:, None], y1[None])
        xx2 = torch.minimum(x2[:, None], x2[None])
        yy2 = torch.minimum(y2[:, None], y2[None])
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (area[:, None] + area[None] - inter)
        sup = (iou > 0.5).triu(1).any(0)
        return b[~sup], s[~sup], sup.sum()

    g = C(f)
    for i, n in enumerate((6, 3, 8)):
        xy = torch.rand(n, 2, generator=torch.Generator().manual_seed(i))
        wh = torch.rand(n, 2, generator=torch.Generator().manual_seed(i + 9)) + 0.2
        boxes = torch.cat([xy, xy + wh], -1)
        scores = torch.rand(n, generator=torch.Generator().manual_seed(i + 5))
        call(f"n={n}", lambda boxes=boxes, scores=scores: g(boxes, scores))
    call("none kept", lambda: g(torch.zeros(3, 4), torch.zeros(3)))


@scenario(**CAP)
def nonzero_topk_k_unbacked(C, call):
    def f(x):
        pos = x[x > 0]
        k = min(pos.numel(), 3)
        return pos.topk(k).values, pos.numel()

    g = C(f)
    call("a", lambda: g(torch.tensor([1.0, -2.0, 3.0, 4.0, 5.0])))
    call("b", lambda: g(torch.tensor([1.0, -2.0])))
    call("none", lambda: g(torch.tensor([-1.0, -2.0])))


@scenario(**CAP)
def repeat_interleave_tensor_grad(C, call):
    def f(x, reps):
        y = torch.repeat_interleave(x, reps, dim=0)
        return (y * torch.arange(y.shape[0])[:, None]).sum(), y.shape[0]

    g = C(f)
    for i, reps in enumerate(([1, 2, 0], [0, 0, 3], [2, 2, 2])):
        x = rand(3, 2, seed=i, rg=True)
        call(f"v{i}", lambda x=x, reps=reps: g(x, torch.tensor(reps)))
        call(f"g{i}", lambda x=x, reps=reps: (g(x, torch.tensor(reps))[0].backward(), x.grad)[1])


@scenario(**CAP)
def repeat_interleave_output_size(C, call):
    def f(x, reps):
        return torch.repeat_interleave(x, reps, output_size=int(reps.sum())) + 1

    g = C(f)
    call("a", lambda: g(rand(3), torch.tensor([1, 2, 3])))
    call("b", lambda: g(rand(3), torch.tensor([0, 1, 0])))


@scenario(**CAP)
def unique_inverse_counts(C, call):
    def f(x):
        u, inv, cnt = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
        return u, inv, cnt, (cnt[inv] * x).sum()

    g = C(f)
    call("a", lambda: g(torch.tensor([3, 1, 3, 2, 1])))
    call("b", lambda: g(torch.tensor([5, 5])))
    call("empty", lambda: g(torch.tensor([], dtype=torch.long)))


@scenario(**CAP)
def masked_select_grad_train_loop(C, call):
    w = nn.Parameter(rand(4))

    def f(x, m):
        return (torch.masked_select(x * w, m) ** 2).mean()

    g = C(f)
    for i in range(3):
        x = rand(3, 4, seed=i)
        m = x > (0.5 if i < 2 else 9.0)
        w.grad = None
        call(f"loss{i}", lambda x=x, m=m: g(x, m))
        call(f"bw{i}", lambda x=x, m=m: (g(x, m).backward(), w.grad)[1])


@scenario(**CAP)
def bool_mask_setitem_loop(C, call):
    def f(x, t):
        y = x.clone()
        y[y < t] = t
        y[y.abs() > 1.5] *= 0.5
        return y, (y == t).sum()

    g = C(f)
    for i, t in enumerate((0.0, -0.5, 5.0)):
        call(f"t={t}", lambda i=i, t=t: g(rand(3, 3, seed=i), t))


@scenario(**CAP)
def nonzero_as_index_fullgraph(C, call):
    def f(x):
        idx = x.nonzero()
        return x[idx[:, 0], idx[:, 1]].sum(), idx.shape[0], idx.float().mean(0)

    g = C(f, fullgraph=True)
    call("a", lambda: g(torch.tensor([[0.0, 1.0], [2.0, 0.0]])))
    call("zeros", lambda: g(torch.zeros(2, 3)))


@scenario(**CAP)
def arange_of_item_sequence_mask(C, call):
    def f(x, lengths):
        L = lengths.max().item()
        mask = torch.arange(L)[None] < lengths[:, None]
        return x[:, :L] * mask, mask.sum(1)

    g = C(f)
    call("a", lambda: g(rand(3, 5), torch.tensor([2, 4, 1])))
    call("b", lambda: g(rand(3, 5), torch.tensor([5, 5, 5])))
    call("c", lambda: g(rand(3, 5), torch.tensor([0, 0, 0])))


@scenario(**CAP)
def packed_sequence_lengths_tensor(C, call):
    torch.manual_seed(0)
    gru = nn.GRU(3, 4, batch_first=True)

    def f(x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        out, h = gru(packed)
        out, ls = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return out, h, ls

    g = C(f)
    call("a", lambda: g(rand(3, 5, 3), torch.tensor([5, 2, 3])))
    call("b", lambda: g(rand(2, 4, 3), torch.tensor([1, 4])))


# ============================================================================================
# symbolic sizes in arithmetic
@scenario()
def sym_views_halves(C, call):
    def f(x):
        n = x.shape[0]
        a = x[: n // 2].reshape(-1, x.shape[1])
        b = x.view(n, -1, 1).expand(n, x.shape[1], 3)
        c = x.narrow(0, n - 2, 2)
        return a, b.sum(-1), c, x.split(max(n // 3, 1))

    g = C(f, dynamic=True)
    for n in (6, 8, 4, 2, 3, 9):
        call(f"n={n}", lambda n=n: g(rand(n, 2)))


@scenario()
def sym_pad_to_multiple(C, call):
    def f(x):
        pad = (8 - x.shape[-1] % 8) % 8
        y = F.pad(x, (0, pad), value=-1.0)
        return y.view(x.shape[0], -1, 8).amax(-1), pad

    g = C(f, dynamic=True)
    for n in (5, 8, 13, 16, 1, 17):
        call(f"n={n}", lambda n=n: g(rand(2, n)))


@scenario()
def sym_pad_to_multiple_grad(C, call):
    def f(x):
        pad = (4 - x.shape[1] % 4) % 4
        y = F.pad(x, (0, 0, pad // 2, pad - pad // 2))
        return y.unflatten(1, (-1, 4)).mean(2).pow(2).sum()

    g = C(f, dynamic=True)
    for i, n in enumerate((5, 8, 3, 6)):
        x = rand(2, n, 3, seed=i, rg=True)
        call(f"g n={n}", lambda x=x: (g(x).backward(), x.grad)[1])


@scenario()
def sym_split_sections(C, call):
    def f(x):
        n = x.shape[0]
        a, b = x.split([n - n // 3, n // 3])
        return a.sum(0), b.sum(0), torch.tensor_split(x, 3)

    g = C(f, dynamic=True)
    for n in (6, 7, 3, 10):
        call(f"n={n}", lambda n=n: g(rand(n, 2)))


@scenario()
def sym_expand_batch(C, call):
    pos = nn.Parameter(rand(1, 8, 3))

    def f(x):
        b, t = x.shape[:2]
        p = pos[:, :t].expand(b, t, 3)
        return (x + p).sum()

    g = C(f, dynamic=True)
    for i, (b, t) in enumerate(((2, 5), (3, 8), (1, 1), (4, 2))):
        pos.grad = None
        call(f"bt={b, t}", lambda b=b, t=t, i=i: (g(rand(b, t, 3, seed=i)).backward(), pos.grad)[1])


@scenario()
def sym_float_scale(C, call):
    def f(x):
        d = x.shape[-1]
        s = d**-0.5
        return (x @ x.transpose(-1, -2)) * s, x / math.sqrt(d), x * (x.shape[0] / d)

    g = C(f, dynamic=True)
    for n, d in ((3, 4), (5, 9), (2, 2), (6, 7)):
        call(f"n,d={n, d}", lambda n=n, d=d: g(rand(n, d)))


@scenario()
def sym_where_symint_scalar(C, call):
    def f(x):
        n = x.shape[0]
        return torch.where(x > 0, x, n), torch.full_like(x, n) / x.shape[1], x.new_tensor(n) + 1

    g = C(f, dynamic=True)
    for n in (3, 5, 2, 7):
        call(f"n={n}", lambda n=n: g(rand(n, 2)))


@scenario()
def sym_index_last_and_arange(C, call):
    def f(x, lengths):
        last = x[torch.arange(x.shape[0]), lengths - 1]
        pos = torch.arange(x.shape[1], dtype=torch.float32) / (x.shape[1] - 1)
        return last, x * pos[None, :, None]

    g = C(f, dynamic=True)
    for b, t in ((2, 5), (3, 4), (4, 9), (2, 2)):
        call(f"bt={b, t}", lambda b=b, t=t: g(rand(b, t, 2), torch.full((b,), t)))


@scenario()
def sym_bool_python_branch(C, call):
    def f(x):
        if x.shape[0] > 4:
            return x[:4] * 2
        return x.flip(0)

    g = C(f, dynamic=True)
    for n in (6, 3, 8, 2, 5, 4):
        call(f"n={n}", lambda n=n: g(rand(n)))


# ============================================================================================
# mark_dynamic / maybe_mark_dynamic / mark_static / automatic dynamic / 0-1 specialization
@scenario()
def mark_dynamic_then_sizes_0_1(C, call):
    g = C(lambda x: (x.softmax(0), x.sum(0), x.shape[0] * x))
    for n in (5, 7, 1, 0, 9):
        x = rand(n, 3)
        torch._dynamo.mark_dynamic(x, 0)
        call(f"n={n}", lambda x=x: g(x))


@scenario()
def maybe_mark_dynamic_loop(C, call):
    g = C(lambda x: (x - x.mean(0)) / (x.std(0) + 1))
    for n in (4, 6, 1, 8, 3):
        x = rand(n, 2)
        torch._dynamo.maybe_mark_dynamic(x, 0)
        call(f"n={n}", lambda x=x: g(x))


@scenario()
def mark_static_under_dynamic_true(C, call):
    g = C(lambda x: x.reshape(x.shape[0], -1).sum(1) * x.shape[1], dynamic=True)
    for n, d in ((3, 4), (5, 4), (3, 6), (2, 2)):
        x = rand(n, d)
        torch._dynamo.mark_static(x, 1)
        call(f"n,d={n, d}", lambda x=x: g(x))


@scenario(automatic_dynamic_shapes=False)
def automatic_dynamic_off(C, call):
    g = C(lambda x: x.cumsum(0) * 2)
    for n in (3, 4, 5, 3, 4):
        call(f"n={n}", lambda n=n: g(rand(n)))


@scenario()
def automatic_dynamic_training_loop(C, call):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = C(lambda x, y: F.cross_entropy(model(x), y))
    for i, b in enumerate((4, 4, 6, 3, 1, 7)):
        x, y = rand(b, 3, seed=i), torch.arange(b) % 2
        opt.zero_grad()
        call(f"loss b={b}", lambda x=x, y=y: step(x, y))
        step(x, y).backward()
        opt.step()
        call(f"w b={b}", lambda: model[0].weight.detach().clone())


@scenario()
def dynamic_batch_grad_none_ness(C, call):
    w1 = nn.Parameter(rand(3, 3))
    w2 = nn.Parameter(rand(3, 3, seed=1))

    def f(x, use2):
        h = x @ w1
        if use2:
            h = h @ w2
        return h.sum()

    g = C(f, dynamic=True)
    for i, (b, use2) in enumerate(((2, False), (3, True), (1, False), (4, True))):
        w1.grad = w2.grad = None
        call(f"b={b}", lambda b=b, u=use2, i=i: g(rand(b, 3, seed=i), u).backward())
        call(f"grads b={b}", lambda: [w.grad if w.grad is not None else "None" for w in (w1, w2)])


# ============================================================================================
# specialize_int / specialize_float
@scenario(specialize_int=False)
def unspecialized_int_arg(C, call):
    def f(x, n):
        return x * n + n // 2, x[:n].sum(), torch.arange(n).float().mean()

    g = C(f)
    for n in (3, 4, 2, 5, 1):
        call(f"n={n}", lambda n=n: g(rand(6), n))


@scenario(specialize_float=False)
def unspecialized_float_arg(C, call):
    def f(x, s):
        return x * s + s**2, torch.full((2,), s), (x > s).sum(), math.floor(s) + x

    g = C(f)
    for s in (0.5, 1.25, -2.0, 3.0):
        call(f"s={s}", lambda s=s: g(rand(4), s))


@scenario(specialize_float=False)
def unspecialized_float_grad(C, call):
    def f(x, temp):
        return (x / temp).softmax(-1)[..., 0].sum()

    g = C(f)
    for i, t in enumerate((1.0, 0.5, 2.0)):
        x = rand(3, 4, seed=i, rg=True)
        call(f"t={t}", lambda x=x, t=t: (g(x, t).backward(), x.grad)[1])


# ============================================================================================
# cache limits and stances
@scenario(cache_size_limit=1, recompile_limit=1)
def cache_limit_one_dtypes(C, call):
    g = C(lambda x: x * 2 + 1)
    for i, dt in enumerate((torch.float32, torch.float64, torch.int64, torch.float32)):
        call(str(dt), lambda dt=dt, i=i: g(rand(3, seed=i, dtype=dt)))


@scenario(cache_size_limit=2, recompile_limit=2)
def cache_limit_shapes_static(C, call):
    g = C(lambda x: x.softmax(-1), dynamic=False)
    for n in (2, 3, 4, 5, 2):
        call(f"n={n}", lambda n=n: g(rand(n)))


@scenario()
def stance_force_eager(C, call):
    g = C(lambda x: x.sin() + 1)
    call("compiled", lambda: g(rand(3)))
    torch.compiler.set_stance("force_eager")
    call("forced eager", lambda: g(rand(4)))
    torch.compiler.set_stance("default")
    call("default", lambda: g(rand(3, seed=2)))


@scenario()
def stance_eager_on_recompile(C, call):
    g = C(lambda x: x.cos() * x.shape[0])
    call("first", lambda: g(rand(3)))
    torch.compiler.set_stance("eager_on_recompile")
    call("new shape eager", lambda: g(rand(5)))
    call("old shape", lambda: g(rand(3, seed=1)))
    call("new dtype", lambda: g(rand(3, dtype=torch.float64)))


@scenario()
def stance_fail_on_recompile(C, call):
    g = C(lambda x: x.cos() * 2)
    call("first", lambda: g(rand(3)))
    call("second", lambda: g(rand(4)))
    torch.compiler.set_stance("fail_on_recompile")
    call("dynamic covers", lambda: g(rand(7)))
    call("new dtype fails", lambda: g(rand(3, dtype=torch.float64)))


@scenario()
def stance_fail_on_recompile_dynamic_0_1(C, call):
    g = C(lambda x: x * 2, dynamic=True)
    call("first", lambda: g(rand(3)))
    torch.compiler.set_stance("fail_on_recompile")
    call("5", lambda: g(rand(5)))
    call("1", lambda: g(rand(1)))


# ============================================================================================
# nn modules, inline_inbuilt_nn_modules
@scenario(inline_inbuilt_nn_modules=False)
def not_inlined_module_dynamic(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    g = C(m, dynamic=True)
    for i, b in enumerate((2, 5, 1, 3)):
        x = rand(b, 3, seed=i)
        m.zero_grad()
        call(f"b={b}", lambda x=x: g(x))
        call(f"grad b={b}", lambda x=x: (g(x).pow(3).sum().backward(), m[0].weight.grad)[1])


@scenario(inline_inbuilt_nn_modules=True)
def inlined_module_param_swap(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    g = C(m, dynamic=True)
    call("a", lambda: g(rand(4, 3)))
    with torch.no_grad():
        m.weight.mul_(2)
    call("after inplace", lambda: g(rand(5, 3)))
    m.weight = nn.Parameter(rand(2, 3, seed=3))
    call("after swap", lambda: g(rand(2, 3)))


# ============================================================================================
# higher-order ops with data-dependent predicates
@scenario()
def cond_data_dependent_dynamic(C, call):
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: x.sin() * x.shape[0], lambda x: x.cos(), (x,))

    g = C(f, dynamic=True)
    for i, n in enumerate((3, 5, 2, 1)):
        call(f"n={n}", lambda n=n, i=i: g(rand(n, seed=i)))


@scenario()
def cond_symbool_pred(C, call):
    def f(x):
        return torch.cond(x.shape[0] > 3, lambda x: x[:3] * 2, lambda x: x[:1] + 1, (x,))

    g = C(f, dynamic=True)
    for n in (5, 2, 4, 3):
        call(f"n={n}", lambda n=n: g(rand(n)))


@scenario()
def cond_grad(C, call):
    w = nn.Parameter(rand(3))

    def f(x):
        return torch.cond(
            x.mean() > 0, lambda x: (x * w).sum(), lambda x: (x - w).pow(2).sum(), (x,)
        )

    g = C(f)
    for i in range(4):
        w.grad = None
        x = rand(3, seed=i)
        call(f"g{i}", lambda x=x: (g(x).backward(), w.grad)[1])


@scenario(**CAP)
def cond_item_pred(C, call):
    def f(x):
        k = x.sum().item()
        return torch.cond(k > 0, lambda x: x + 1, lambda x: x - 1, (x,)), k

    g = C(f)
    call("pos", lambda: g(torch.tensor([1.0, 2.0])))
    call("neg", lambda: g(torch.tensor([-1.0, -2.0])))


@scenario()
def while_loop_data_dependent_dynamic(C, call):
    from torch._higher_order_ops import while_loop

    def f(x):
        return while_loop(
            lambda i, y: (y.abs().sum() < 50) & (i < 20),
            lambda i, y: (i + 1, y * 2 + 0.5),
            (torch.tensor(0), x),
        )

    g = C(f, dynamic=True)
    for i, n in enumerate((3, 5, 1)):
        call(f"n={n}", lambda n=n, i=i: g(rand(n, seed=i)))


# ============================================================================================
# whole programs
@scenario(**CAP)
def ragged_batch_mean_pool_train(C, call):
    torch.manual_seed(0)
    proj = nn.Linear(3, 2)

    def f(tokens, offsets):
        counts = offsets.diff(append=torch.tensor([tokens.shape[0]]))
        seg = torch.repeat_interleave(torch.arange(counts.shape[0]), counts)
        h = proj(tokens)
        pooled = torch.zeros(counts.shape[0], 2).index_add(0, seg, h)
        return pooled / counts.clamp(min=1)[:, None]

    g = C(f, dynamic=True)
    for i, (n, offs) in enumerate(((6, [0, 2, 5]), (4, [0, 0, 1]), (9, [0, 4, 4, 8]))):
        proj.zero_grad()
        t = rand(n, 3, seed=i)
        call(f"v{i}", lambda t=t, o=offs: g(t, torch.tensor(o)))
        call(
            f"g{i}",
            lambda t=t, o=offs: (g(t, torch.tensor(o)).sum().backward(), proj.weight.grad)[1],
        )


@scenario(**CAP)
def mixed_dynamic_and_unbacked(C, call):
    def f(x):
        keep = x[:, 0] > 0
        y = x[keep]
        half = y.shape[0] // 2
        return y[:half], y[half:].flip(0), F.pad(y, (0, 0, 0, x.shape[0] - y.shape[0]))

    g = C(f, dynamic=True)
    for i, n in enumerate((6, 4, 7, 1)):
        call(f"n={n}", lambda n=n, i=i: g(rand(n, 2, seed=i)))


@scenario(**CAP)
def top_p_sampling_mask(C, call):
    def f(logits, p):
        probs = logits.softmax(-1)
        sp, si = probs.sort(-1, descending=True)
        cum = sp.cumsum(-1)
        cut = (cum - sp) > p
        sp = sp.masked_fill(cut, 0.0)
        keep = (~cut).sum(-1)
        return torch.zeros_like(probs).scatter(-1, si, sp), keep.max().item()

    g = C(f)
    call("a", lambda: g(rand(2, 6), 0.5))
    call("b", lambda: g(rand(2, 6, seed=1), 0.9))


# ============================================================================================
# pieces of a cut graph taking sizes computed from data-dependent ones
@scenario(**CAP)
def piece_pad_amount_from_unbacked(C, call):
    def f(x, k):
        y = x[x[:, 0] > 0]
        return F.pad(y, (0, 0, 0, k.item() - y.shape[0])).cumsum(0), y.shape[0] // 2 - x.shape[0]

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n, k in ((6, 5), (5, 1), (7, 3), (4, 0), (9, 6), (8, 2)):
            call(f"n,k={n, k}", lambda n=n, k=k: g(rand(n, 2, seed=n), torch.tensor(k)))


@scenario(**CAP)
def piece_cat_zeros_to_full_length(C, call):
    def f(x):
        y = x[x.sum(1) > 0]
        fill = y.new_zeros(x.shape[0] - y.shape[0], x.shape[1])
        return torch.cat([y, fill]).softmax(0), y.shape[0]

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (6, 5, 9, 3, 8):
            call(f"n={n}", lambda n=n: g(rand(n, 3, seed=n)))


@scenario(**CAP)
def piece_arange_from_difference(C, call):
    def f(x, lo, hi):
        a, b = lo.item(), hi.item()
        torch._check(b >= a)
        idx = torch.arange(b - a) + a
        return x[idx % x.shape[0]].sum(0), idx.float().mean()

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n, lo, hi in ((5, 1, 4), (6, 2, 9), (4, 0, 1), (7, 3, 5)):
            call(
                f"{n, lo, hi}",
                lambda n=n, lo=lo, hi=hi: g(rand(n, 2), torch.tensor(lo), torch.tensor(hi)),
            )


@scenario(**CAP)
def piece_view_by_unbacked_and_backed(C, call):
    def f(x, k):
        m = k.item()
        torch._check(m > 0)
        torch._check(x.shape[0] % m == 0)
        return x.view(m, x.shape[0] // m, -1).sum(1), x[: x.shape[0] - m].mean()

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n, k in ((6, 2), (6, 3), (8, 4), (9, 3), (4, 1)):
            call(f"n,k={n, k}", lambda n=n, k=k: g(rand(n, 2, seed=n), torch.tensor(k)))


@scenario(**CAP)
def piece_symfloat_and_symbool_inputs(C, call):
    def f(x):
        s = x.abs().max().item()
        y = x[x > 0]
        big = y.shape[0] > 2
        return y * s, torch.where(torch.tensor(big), y.sum(), -y.sum()), s > 1.0

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (5, 8, 3, 7, 2):
            call(f"n={n}", lambda n=n: g(rand(n, seed=n)))


@scenario(**CAP)
def piece_narrow_start_from_unbacked_training(C, call):
    w = nn.Parameter(rand(3))

    def f(x, start):
        s = start.item()
        torch._check(s >= 0)
        torch._check(s + 2 <= x.shape[0])
        return (x.narrow(0, s, 2) * w).sum() + (x[: x.shape[0] - s] * w).mean()

    g = C(f, dynamic=True)
    for n, st in ((5, 1), (6, 4), (4, 0), (7, 2)):
        w.grad = None
        call(
            f"n,s={n, st}",
            lambda n=n, st=st: (g(rand(n, 3, seed=n), torch.tensor(st)).backward(), w.grad)[1],
        )


@scenario(**CAP)
def piece_ragged_pad_to_max(C, call):
    def f(x, lengths):
        total = lengths.sum().item()
        torch._check(total <= x.shape[0])
        flat = x[:total]
        L = lengths.max().item()
        parts = torch.split(flat, lengths.tolist())
        return torch.stack([F.pad(p, (0, 0, 0, L - p.shape[0])) for p in parts])

    g = C(f, dynamic=True)
    with torch.no_grad():
        call("a", lambda: g(rand(8, 2), torch.tensor([3, 1, 2])))
        call("b", lambda: g(rand(9, 2), torch.tensor([1, 4, 4])))
        call("c", lambda: g(rand(7, 2), torch.tensor([2, 2, 2])))


@scenario(**CAP)
def piece_expand_to_unbacked(C, call):
    def f(x, v):
        y = x[x > 0]
        return v[None].expand(y.shape[0], -1) * y[:, None], v.expand(
            x.shape[0] - y.shape[0] + 1, -1
        ).sum(0)

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (6, 3, 9, 5):
            call(f"n={n}", lambda n=n: g(rand(n, seed=n), rand(1, 2)))


@scenario(**CAP)
def piece_reshape_minus_one_unbacked(C, call):
    def f(x):
        y = x[x[:, 0] > -10]  # (all rows: u0 == n, unknown to the trace)
        return y.reshape(-1, x.shape[1] * 2 if x.shape[0] % 2 == 0 else x.shape[1]).sum(0)

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (4, 6, 5, 8, 3):
            call(f"n={n}", lambda n=n: g(rand(n, 2, seed=n)))


# ============================================================================================
# batch 2
@scenario(**CAP)
def item_bool_and_new_full(C, call):
    def f(x, n, v):
        k = n.item()
        torch._check(k >= 0)
        out = x.new_full((k,), v.item())
        return out, out.sum() + x.sum(), (x > 0).any().item()

    g = C(f)
    with torch.no_grad():
        for i, (k, v) in enumerate(((3, 1.5), (0, 2.0), (5, -1.0), (1, 0.25))):
            call(
                f"{k, v}",
                lambda k=k, v=v, i=i: g(rand(4, seed=i), torch.tensor(k), torch.tensor(v)),
            )


@scenario(**CAP)
def scatter_add_unbacked_bins(C, call):
    def f(idx, src):
        k = idx.max().item() + 1
        torch._check(k >= 1)
        return torch.zeros(k).scatter_add_(0, idx, src), k

    g = C(f)
    with torch.no_grad():
        call("a", lambda: g(torch.tensor([0, 2, 2, 1]), rand(4)))
        call("b", lambda: g(torch.tensor([5, 0]), rand(2)))
        call("c", lambda: g(torch.tensor([0, 0, 0]), rand(3)))


@scenario(**CAP)
def index_select_unbacked_grad(C, call):
    w = nn.Parameter(rand(6, 3))

    def f(mask):
        idx = mask.nonzero().squeeze(1)
        return (w.index_select(0, idx) ** 2).sum() + w[idx].mean()

    g = C(f)
    for i, m in enumerate(([1, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1])):
        w.grad = None
        call(f"m{i}", lambda m=m: (g(torch.tensor(m, dtype=torch.bool)).backward(), w.grad)[1])


@scenario(**CAP)
def argwhere_and_nonzero_tuple(C, call):
    def f(x):
        r, c = torch.nonzero(x > 0, as_tuple=True)
        a = torch.argwhere(x < 0)
        return x[r, c] * c, a.sum(0), r.shape[0] + a.shape[0]

    g = C(f)
    with torch.no_grad():
        for i, n in enumerate((3, 4, 2)):
            call(f"n={n}", lambda n=n, i=i: g(rand(n, 3, seed=i)))


@scenario()
def int_output_from_sizes(C, call):
    def f(x):
        return x.shape[0] * 2, x.numel(), x.shape[0] // 3, x.sum() * x.shape[1]

    g = C(f, dynamic=True)
    for n in (4, 7, 1, 0):
        call(f"n={n}", lambda n=n: g(rand(n, 3)))


@scenario()
def torch_check_backed(C, call):
    def f(x):
        torch._check(x.shape[0] >= 2, lambda: "need two rows")
        return x[1] - x[0]

    g = C(f, dynamic=True)
    call("3", lambda: g(rand(3, 2)))
    call("5", lambda: g(rand(5, 2)))
    call("1 fails", lambda: g(rand(1, 2)))
    call("4", lambda: g(rand(4, 2)))


@scenario()
def mark_dynamic_min_max(C, call):
    g = C(lambda x: x.cumsum(0) / x.shape[0])
    for n in (4, 6, 3, 8):
        x = rand(n, 2)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
        call(f"n={n}", lambda x=x: g(x))


@scenario(cache_size_limit=2, recompile_limit=2)
def cache_limit_training_fallback(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    g = C(lambda x, p: (lin(x) * p).sum(), dynamic=False)
    for i, (b, p) in enumerate(((2, 1.0), (3, 2.0), (4, 3.0), (5, 0.5), (2, 1.5))):
        lin.zero_grad()
        call(
            f"b={b}",
            lambda b=b, p=p, i=i: (g(rand(b, 3, seed=i), p).backward(), lin.weight.grad)[1],
        )


@scenario()
def stance_eager_then_compile(C, call):
    g = C(lambda x: x.tanh() * x.shape[0], dynamic=True)
    torch.compiler.set_stance("eager_then_compile")
    for n in (3, 4, 5, 6):
        call(f"n={n}", lambda n=n: g(rand(n)))


@scenario()
def stance_force_eager_training(C, call):
    w = nn.Parameter(rand(3))
    g = C(lambda x: (x * w).pow(2).sum())
    w.grad = None
    call("compiled", lambda: (g(rand(3)).backward(), w.grad.clone())[1])
    torch.compiler.set_stance("force_eager")
    call("eager", lambda: (g(rand(3, seed=1)).backward(), w.grad.clone())[1])
    torch.compiler.set_stance("default")
    call("again", lambda: (g(rand(3, seed=2)).backward(), w.grad.clone())[1])


@scenario(**CAP)
def tolist_python_loop_counts(C, call):
    def f(x, counts):
        out = []
        start = 0
        for c in counts.tolist():
            out.append(x[start : start + c].sum(0))
            start += c
        return torch.stack(out)

    g = C(f, dynamic=True)
    with torch.no_grad():
        call("a", lambda: g(rand(6, 2), torch.tensor([1, 2, 3])))
        call("b", lambda: g(rand(8, 2), torch.tensor([4, 0, 4])))
        call("c", lambda: g(rand(9, 2), torch.tensor([3, 3, 3])))


@scenario(**CAP)
def topk_k_from_item_dynamic(C, call):
    def f(x, k):
        kk = k.item()
        torch._check(kk >= 1)
        torch._check(kk <= x.shape[-1])
        v, i = x.topk(kk, dim=-1)
        return v.softmax(-1), i

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n, k in ((6, 2), (8, 3), (5, 5), (7, 1)):
            call(f"n,k={n, k}", lambda n=n, k=k: g(rand(2, n, seed=n), torch.tensor(k)))


@scenario(**CAP)
def unbacked_softmax_bucketed(C, call):
    def f(x):
        y = x[x > -0.5]
        return y.softmax(0), y.cumsum(0), y.mean(), y.flip(0)[:2]

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (6, 9, 4, 12, 3, 7):
            call(f"n={n}", lambda n=n: g(rand(n, seed=n)))


@scenario(**CAP)
def unbacked_two_masks_attention(C, call):
    def f(q, k):
        qq = q[q.norm(dim=-1) > 1.0]
        kk = k[k.norm(dim=-1) > 1.0]
        att = (qq @ kk.t()).softmax(-1)
        return att @ kk, att.shape

    g = C(f, dynamic=True)
    with torch.no_grad():
        for n in (6, 9, 5, 8):
            call(f"n={n}", lambda n=n: g(rand(n, 3, seed=n), rand(n + 1, 3, seed=n + 50)))


# ============================================================================================
# batch 3: errors under unbacked sizes
@scenario(**CAP)
def err_view_not_dividing(C, call):
    def f(x, n):
        k = n.item()
        return x.view(k, -1).sum(1)

    g = C(f)
    call("ok", lambda: g(rand(6), torch.tensor(3)))
    call("bad", lambda: g(rand(6), torch.tensor(4)))
    call("ok2", lambda: g(rand(6), torch.tensor(2)))


@scenario(**CAP)
def err_index_unbacked_out_of_range(C, call):
    def f(x, n):
        k = n.item()
        return x[k] * 2

    g = C(f)
    call("ok", lambda: g(rand(4, 2), torch.tensor(1)))
    call("oob", lambda: g(rand(4, 2), torch.tensor(4)))
    call("neg", lambda: g(rand(4, 2), torch.tensor(-1)))
    call("neg oob", lambda: g(rand(4, 2), torch.tensor(-5)))


@scenario(**CAP)
def err_arange_negative(C, call):
    def f(n):
        return torch.arange(n.item()) * 2

    g = C(f)
    call("ok", lambda: g(torch.tensor(3)))
    call("neg", lambda: g(torch.tensor(-2)))


@scenario(**CAP)
def err_zeros_negative_size(C, call):
    def f(x, n):
        return torch.zeros(n.item(), 2) + x

    g = C(f)
    call("ok", lambda: g(rand(2), torch.tensor(3)))
    call("neg", lambda: g(rand(2), torch.tensor(-1)))


@scenario(**CAP)
def err_mask_shape_mismatch(C, call):
    def f(x, m):
        return x[m].sum()

    g = C(f, dynamic=True)
    call("ok", lambda: g(rand(4), torch.tensor([True, False, True, True])))
    call("bad", lambda: g(rand(4), torch.tensor([True, False, True])))


@scenario(**CAP)
def err_split_sizes_wrong_sum(C, call):
    def f(x, sizes):
        return [p.sum() for p in torch.split(x, sizes.tolist())]

    g = C(f)
    call("ok", lambda: g(rand(5), torch.tensor([2, 3])))
    call("bad", lambda: g(rand(5), torch.tensor([2, 2])))


@scenario(**CAP)
def err_repeat_interleave_negative(C, call):
    def f(x, r):
        return torch.repeat_interleave(x, r)

    g = C(f)
    call("ok", lambda: g(rand(3), torch.tensor([1, 0, 2])))
    call("neg", lambda: g(rand(3), torch.tensor([1, -1, 2])))


@scenario(**CAP)
def err_cat_mismatch_after_mask(C, call):
    def f(x, y):
        a = x[x > 0]
        return torch.stack([a, y[: a.shape[0] + 1]])

    g = C(f)
    call("bad", lambda: g(rand(5), rand(6)))


@scenario(**CAP)
def err_narrow_unbacked_past_end(C, call):
    def f(x, s):
        return x.narrow(0, s.item(), 2) + 1

    g = C(f)
    call("ok", lambda: g(rand(5), torch.tensor(1)))
    call("past", lambda: g(rand(5), torch.tensor(4)))


@scenario(**CAP)
def err_multinomial_like_check(C, call):
    def f(p):
        n = (p > 0).sum().item()
        torch._check(n > 0, lambda: "no positive probabilities")
        return p / p.sum()

    g = C(f, fullgraph=False)
    call("ok", lambda: g(torch.tensor([0.2, 0.0, 0.3])))
    call("bad", lambda: g(torch.tensor([0.0, 0.0])))


# ============================================================================================
# batch 4: modules with state under dynamic batches
@scenario(inline_inbuilt_nn_modules=False)
def batchnorm_dynamic_batch_not_inlined(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    g = C(m, dynamic=True)
    for i, b in enumerate((4, 6, 3, 1, 5)):
        x = rand(b, 3, seed=i)
        m.zero_grad()
        call(f"b={b}", lambda x=x: g(x))
        call(f"stats b={b}", lambda: (m[1].running_mean.clone(), m[1].num_batches_tracked.clone()))
    m.eval()
    call("eval b=1", lambda: g(rand(1, 3, seed=9)))


@scenario()
def batchnorm_mark_dynamic_train_steps(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv1d(2, 3, 3, padding=1), nn.BatchNorm1d(3))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    g = C(m)
    for i, (b, t) in enumerate(((2, 5), (3, 7), (2, 9), (4, 4))):
        x = rand(b, 2, t, seed=i)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 2)
        opt.zero_grad()
        call(f"loss {b, t}", lambda x=x: g(x).pow(2).mean())
        g(x).pow(2).mean().backward()
        opt.step()
        call(f"w {b, t}", lambda: (m[0].weight.detach().clone(), m[1].running_var.clone()))


@scenario()
def lstm_packed_dynamic_lengths(C, call):
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)

    def f(x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        _, (h, _) = lstm(packed)
        return h[-1]

    g = C(f, dynamic=True)
    for i, (b, t, ls) in enumerate(((2, 4, [4, 2]), (3, 6, [1, 6, 3]), (2, 3, [3, 3]))):
        call(f"{b, t}", lambda b=b, t=t, ls=ls, i=i: g(rand(b, t, 3, seed=i), torch.tensor(ls)))


@scenario()
def embedding_dynamic_vocab_slice(C, call):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 3)

    def f(ids):
        n = ids.shape[1]
        return emb(ids) * torch.arange(1, n + 1)[None, :, None] / n

    g = C(f, dynamic=True)
    for i, (b, t) in enumerate(((2, 3), (1, 5), (3, 1), (2, 8))):
        emb.zero_grad()
        ids = torch.randint(0, 10, (b, t), generator=torch.Generator().manual_seed(i))
        call(f"{b, t}", lambda ids=ids: (g(ids).sum().backward(), emb.weight.grad)[1])


# ============================================================================================
# batch 5: int arguments and static/dynamic defaults
@scenario(specialize_int=False)
def unspecialized_int_negative_and_zero(C, call):
    def f(x, n):
        return x[:n] * 2, x[n:].sum(), torch.ones(max(n, 0)) * n, x.roll(n)

    g = C(f)
    with torch.no_grad():
        for n in (3, 5, 0, -2, 1, 4, 2, -1, 7):
            call(f"n={n}", lambda n=n: g(rand(6), n))


@scenario(specialize_int=False)
def unspecialized_int_train(C, call):
    w = nn.Parameter(rand(8))

    def f(n):
        return (w[:n] * n).pow(2).sum() + w[n:].sum()

    g = C(f)
    for n in (3, 5, 0, 2, 8, 1):
        w.grad = None
        call(f"n={n}", lambda n=n: (g(n).backward(), w.grad)[1])


@scenario(assume_static_by_default=False)
def assume_dynamic_by_default(C, call):
    g = C(lambda x, y: (x @ y).relu().sum(-1))
    with torch.no_grad():
        for a, b, c in ((2, 3, 4), (5, 3, 4), (2, 6, 1), (1, 1, 1), (3, 2, 7)):
            call(f"{a, b, c}", lambda a=a, b=b, c=c: g(rand(a, b), rand(b, c, seed=1)))


@scenario(force_parameter_static_shapes=False)
def dynamic_parameter_shapes(C, call):
    def make(d):
        torch.manual_seed(d)
        return nn.Linear(d, 2)

    def f(m, x):
        return m(x).softmax(-1)

    g = C(f, dynamic=True)
    for d in (3, 5, 4):
        m = make(d)
        call(f"d={d}", lambda m=m, d=d: g(m, rand(2, d)))


@scenario()
def mark_dynamic_on_mutated_buffer(C, call):
    def f(buf, x):
        buf[: x.shape[0]] += x
        return buf.sum()

    g = C(f)
    buf = torch.zeros(8)
    for n in (3, 5, 2, 8):
        x = rand(n, seed=n)
        torch._dynamo.mark_dynamic(x, 0)
        call(f"n={n}", lambda x=x: g(buf, x))
        call(f"buf n={n}", lambda: buf.clone())


# ============================================================================================
# batch 6: unbacked sizes 0 and 1 after larger ones, in padded (no-grad) pieces
def _rows(n, keep):
    x = rand(n, 3, seed=n)
    x[:, 0] = torch.tensor([1.0 if i < keep else -1.0 for i in range(n)])
    return x


UNBACKED_01 = {
    "softmax": lambda y: y.softmax(0),
    "cumsum": lambda y: y.cumsum(0),
    "gram": lambda y: y.t() @ y,
    "outer_rows": lambda y: y @ y.t(),
    "std": lambda y: y.std(0),
    "mean_amax": lambda y: (y.mean(0), y.amax(0, keepdim=True)),
    "normalize": lambda y: F.normalize(y, dim=0),
    "logsumexp": lambda y: y.logsumexp(0),
    "expand_last": lambda y: y[-1:].expand(y.shape[0], -1) - y,
    "squeeze0": lambda y: y.squeeze(0) * 2,
    "sum_keepdim_bcast": lambda y: y - y.sum(0, keepdim=True),
    "pad_end": lambda y: F.pad(y, (0, 0, 0, 2)).cumsum(0),
    "flip_cat": lambda y: torch.cat([y, y.flip(0)]).cumsum(0),
    "reshape_flat": lambda y: y.reshape(-1).cumsum(0),
    "transpose_softmax": lambda y: y.t().softmax(-1),
    "sdpa": lambda y: F.scaled_dot_product_attention(y[None], y[None], y[None])[0],
    "layer_norm_rows": lambda y: F.layer_norm(y.t(), (y.shape[0],)),
}


def _unbacked_01(op):
    def run(C, call):
        g = C(lambda x: op(x[x[:, 0] > 0]), dynamic=True)
        with torch.no_grad():
            for n, keep in ((6, 5), (5, 1), (7, 0), (6, 3), (8, 1), (4, 2), (9, 0)):
                call(f"n,keep={n, keep}", lambda n=n, keep=keep: g(_rows(n, keep)))

    return run


for _name, _op in UNBACKED_01.items():
    SCENARIOS["u01_" + _name] = _unbacked_01(_op)
    CONFIG["u01_" + _name] = CAP


# ============================================================================================
# batch 7: whole user programs with fullgraph=True
@scenario(**CAP)
def moe_fullgraph_train(C, call):
    torch.manual_seed(0)
    w_in = nn.Parameter(torch.randn(3, 4, 4) * 0.3)
    router = nn.Linear(4, 3)

    def moe(x):
        w, idx = router(x).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(x)
        for e in range(3):
            tok, slot = torch.where(idx == e)
            y = (x[tok] @ w_in[e]) * w[tok, slot].unsqueeze(-1)
            out = out.index_add(0, tok, y)
        return out

    g = C(moe, fullgraph=True)
    for i, n in enumerate((6, 5, 2, 9)):
        x = rand(n, 4, seed=i)
        router.zero_grad()
        w_in.grad = None
        call(f"n={n}", lambda x=x: g(x))
        call(
            f"grads n={n}",
            lambda x=x: (g(x).pow(2).sum().backward(), w_in.grad, router.weight.grad)[1:],
        )


@scenario(**CAP)
def varlen_attention_cu_seqlens(C, call):
    def f(q, lengths):
        out = []
        for qs in torch.split(q, lengths.tolist()):
            a = (qs @ qs.t() / qs.shape[-1] ** 0.5).softmax(-1)
            out.append(a @ qs)
        return torch.cat(out)

    g = C(f, dynamic=True)
    with torch.no_grad():
        call("a", lambda: g(rand(7, 4), torch.tensor([3, 4])))
        call("b", lambda: g(rand(9, 4), torch.tensor([1, 6, 2])))
        call("c", lambda: g(rand(5, 4), torch.tensor([5])))


@scenario(**CAP)
def histogram_loss_train_loop(C, call):
    w = nn.Parameter(rand(5))

    def f(x, labels):
        counts = torch.bincount(labels, minlength=3).float()
        weights = (1.0 / counts.clamp(min=1))[labels]
        return ((x @ w.view(-1, 1)).squeeze(-1) * weights).sum()

    g = C(f, fullgraph=True, dynamic=True)
    for i, n in enumerate((4, 7, 3, 1)):
        w.grad = None
        x, lab = (
            rand(n, 5, seed=i),
            torch.randint(0, 3, (n,), generator=torch.Generator().manual_seed(i)),
        )
        call(f"n={n}", lambda x=x, lab=lab: (g(x, lab).backward(), w.grad)[1])


@scenario(**CAP)
def dedupe_and_scatter_mean(C, call):
    def f(keys, vals):
        u, inv = torch.unique(keys, return_inverse=True)
        sums = torch.zeros(u.shape[0], vals.shape[1]).index_add(0, inv, vals)
        cnt = torch.bincount(inv, minlength=u.shape[0]).clamp(min=1)
        return u, sums / cnt[:, None]

    g = C(f, dynamic=True)
    with torch.no_grad():
        call("a", lambda: g(torch.tensor([3, 1, 3, 7]), rand(4, 2)))
        call("b", lambda: g(torch.tensor([2, 2]), rand(2, 2)))
        call("c", lambda: g(torch.tensor([5, 4, 3, 2, 1, 0]), rand(6, 2)))


def main(argv):
    bad = 0
    for name, fn in SCENARIOS.items():
        if argv and not any(a in name for a in argv):
            continue
        try:
            line = compare(name, fn)
        except Exception:  # noqa: BLE001
            line = f"CRASH {name}: {traceback.format_exc()[-1500:]}"
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) not ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
