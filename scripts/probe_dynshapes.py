"""Probe dynamic and data-dependent shapes for wrong values, crashes and unbounded compiles:
user-style loops over sizes (``dynamic=True``, ``mark_dynamic``, automatic dynamic after a
second size; sizes 0, 1, 2, primes, large; a DataLoader's last partial batch, padded text of
varying length, odd image sizes), ops whose output shape depends on values (boolean masks,
``nonzero``, ``unique``, ``bincount``, ``.item()`` used as a size, packed sequences), and views
of dynamic tensors (``narrow`` at a dynamic start, negative pads, ``flip``, ``cat`` of an empty
piece). Each scenario runs compiled and in eager, every call compared (dtype, shape, strides,
requires_grad, grad_fn presence, values, gradients and their None-ness, errors); the number of
XLA programs the compiled run built is printed beside the number of calls.

    PYTHONPATH=. python scripts/probe_dynshapes.py [substring ...]

Data-dependent scenarios run twice: with Dynamo's defaults (graph breaks) and with
``capture_dynamic_output_shape_ops``/``capture_scalar_outputs`` (suffix ``+cap``: the ops reach
the backend, which runs them in eager between compiled pieces).
"""

from __future__ import annotations

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
CAPTURE: set = set()


def scenario(fn=None, *, capture=False):
    def deco(f):
        SCENARIOS[f.__name__] = f
        if capture:
            CAPTURE.add(f.__name__)
        return f

    return deco(fn) if fn is not None else deco


def rand(*shape, seed=0, rg=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(rg)


def grads(call, label, loss, *leaves):
    """Backward of ``loss`` (a thunk), then every leaf's grad (None recorded as such)."""

    def run():
        for t in leaves:
            t.grad = None
        loss().backward()
        return [t.grad if t.grad is not None else "None" for t in leaves]

    call(label, run)


class Counter:
    def __init__(self):
        self.count = 0
        self.original = torch2xla.runtime._program.XlaProgram.__init__
        counter = self

        def counting(prog, *a, **kw):
            counter.count += 1
            counter.original(prog, *a, **kw)

        self.counting = counting

    def __enter__(self):
        torch2xla.runtime._program.XlaProgram.__init__ = self.counting
        return self

    def __exit__(self, *exc):
        torch2xla.runtime._program.XlaProgram.__init__ = self.original


def compare(name, fn, capture: bool) -> str:
    patch = torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=capture,
        capture_scalar_outputs=capture,
        automatic_dynamic_local_pgo=False,
    )
    with patch, Counter() as counter:
        got = pg.observe(fn, True)
    with patch:
        exp = pg.observe(fn, False)
    tag = f"[{counter.count} programs / {len(exp)} obs]"
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return (
                f"DIFF  {name} {tag}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
            )
        d = pg.same(g, e, lg)
        if d:
            return f"DIFF  {name} {tag}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name} {tag}: {[x for x, _ in got]} (xla) vs {[x for x, _ in exp]} (eager)"
    return f"ok    {name} {tag}"


# ============================================================================================
# dynamic sizes
@scenario
def dyn_true_edge_sizes(C, call):
    f = C(lambda x: (x.sin() * 2 + x.sum(), x.mean(), x.amax(0, keepdim=True)), dynamic=True)
    for n in (2, 3, 7, 13, 1, 0, 4099, 5):
        call(f"n={n}", lambda n=n: f(rand(n, 3)))


@scenario
def dyn_true_edge_sizes_grad(C, call):
    f = C(lambda x, w: ((x @ w).tanh() * x.shape[0]).sum(), dynamic=True)
    w = rand(3, 4, seed=1, rg=True)
    for n in (2, 3, 7, 1, 0, 513):
        x = rand(n, 3, rg=True)
        grads(call, f"n={n}", lambda x=x: f(x, w), x, w)


@scenario
def mark_dynamic_loop(C, call):
    f = C(lambda x: x.softmax(-1) * x.shape[-1])
    for n in (5, 8, 11, 8, 2):
        x = rand(3, n)
        torch._dynamo.mark_dynamic(x, 1)
        call(f"n={n}", lambda x=x: f(x))


@scenario
def automatic_dynamic_loop(C, call):
    f = C(lambda x: torch.cumsum(x, 0) / torch.arange(1, x.shape[0] + 1))
    for n in (3, 4, 5, 6, 7, 17, 31, 64, 65, 1, 0):
        call(f"n={n}", lambda n=n: f(rand(n)))


@scenario
def automatic_dynamic_many_sizes_inference(C, call):
    lin = nn.Linear(6, 6)
    f = C(lambda x: lin(x).relu().sum(0))
    with torch.no_grad():
        for n in range(2, 40, 3):
            call(f"n={n}", lambda n=n: f(rand(n, 6)))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(self.a(x).relu())


@scenario
def dataloader_last_partial_batch(C, call):
    torch.manual_seed(0)
    model = MLP()
    m = C(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data, target = rand(27, 5), torch.arange(27) % 3
    for epoch in range(2):
        for i in range(0, 27, 8):  # 8, 8, 8, 3
            x, y = data[i : i + 8], target[i : i + 8]
            loss = F.cross_entropy(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            call(f"e{epoch} b{i}", lambda loss=loss: loss.detach())
    call("w", lambda: model.a.weight.detach().clone())


@scenario
def dataloader_batch_size_one(C, call):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    m = C(model)
    for n in (4, 4, 1):  # batch norm in training with one sample: eager's ValueError
        call(f"n={n}", lambda n=n: m(rand(n, 4)))
    model.eval()
    call("eval n=1", lambda: m(rand(1, 4)))


class TextModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.lin = nn.Linear(8, 2)

    def forward(self, tokens, mask):
        h = self.emb(tokens) * mask[..., None]
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.lin(pooled)


def _padded_batch(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = max(lengths)
    tokens = torch.randint(1, 20, (len(lengths), t), generator=g)
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    return tokens * mask, mask.float()


@scenario
def text_varying_length_train(C, call):
    torch.manual_seed(0)
    model = TextModel()
    m = C(model)
    for lengths in ([3, 5], [7, 2], [1, 1], [11, 4], [6, 6], [13, 1]):
        tokens, mask = _padded_batch(lengths)
        grads(
            call,
            f"L={lengths}",
            lambda tokens=tokens, mask=mask: m(tokens, mask).square().sum(),
            model.emb.weight,
            model.lin.weight,
        )


@scenario
def text_varying_length_inference(C, call):
    torch.manual_seed(0)
    model = TextModel().eval()
    m = C(model)
    with torch.no_grad():
        for lengths in ([3, 5], [7, 2], [1, 1], [11, 4], [6, 6], [13, 1], [9, 9, 9]):
            tokens, mask = _padded_batch(lengths)
            call(f"L={lengths}", lambda tokens=tokens, mask=mask: m(tokens, mask))


@scenario
def mha_key_padding_mask(C, call):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    f = C(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm))
    for lengths in ([3, 5], [7, 2], [4, 4], [9, 1]):
        t = max(lengths)
        x = rand(2, t, 8, rg=True)
        kpm = torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]
        out = call(f"L={lengths}", lambda x=x, kpm=kpm: f(x, kpm))
        if isinstance(out, tuple):
            grads(call, f"g L={lengths}", lambda x=x, kpm=kpm: f(x, kpm)[0].sum(), x)


@scenario
def mha_all_keys_masked_row(C, call):
    mha = nn.MultiheadAttention(4, 1, batch_first=True)
    f = C(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm, need_weights=False)[0])
    for t in (3, 5):
        x = rand(2, t, 4)
        kpm = torch.zeros(2, t, dtype=torch.bool)
        kpm[1] = True  # the second sequence has no key: NaN rows in eager
        call(f"t={t}", lambda x=x, kpm=kpm: f(x, kpm))


@scenario
def transformer_encoder_padding(C, call):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    f = C(lambda x, kpm: layer(x, src_key_padding_mask=kpm))
    for lengths in ([3, 5], [6, 2], [7, 7]):
        t = max(lengths)
        x = rand(2, t, 8)
        kpm = torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]
        call(f"L={lengths}", lambda x=x, kpm=kpm: f(x, kpm))


@scenario
def sdpa_mask_from_lengths(C, call):
    def fn(q, lengths):
        t = q.shape[2]
        keep = torch.arange(t)[None, :] < lengths[:, None]
        return F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])

    f = C(fn, dynamic=True)
    for t in (3, 5, 8, 2):
        q = rand(2, 2, t, 4, rg=True)
        lengths = torch.tensor([t, max(1, t // 2)])
        grads(call, f"t={t}", lambda q=q, lengths=lengths: f(q, lengths).sum(), q)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.p = nn.MaxPool2d(2, ceil_mode=True)
        self.a = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        y = self.p(self.c(x).relu())
        return self.a(y), F.adaptive_avg_pool2d(y, (3, 2))


@scenario
def images_odd_sizes(C, call):
    torch.manual_seed(0)
    net = ConvNet()
    m = C(net)
    for h, w in ((7, 9), (8, 8), (11, 5), (13, 13), (3, 3), (7, 9)):
        x = rand(2, 3, h, w, rg=True)
        call(f"{h}x{w}", lambda x=x: m(x))
        grads(call, f"g {h}x{w}", lambda x=x: sum(t.sum() for t in m(x)), x, net.c.weight)


@scenario
def images_odd_sizes_inference(C, call):
    torch.manual_seed(0)
    net = ConvNet().eval()
    m = C(net)
    with torch.no_grad():
        for h, w in ((7, 9), (8, 8), (11, 5), (13, 13), (3, 3), (6, 10), (12, 12)):
            call(f"{h}x{w}", lambda h=h, w=w: m(rand(2, 3, h, w)))


@scenario
def interpolate_odd_sizes(C, call):
    def fn(x):
        a = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        b = F.interpolate(x, size=(x.shape[-2] // 2 + 1, 3), mode="nearest")
        c = F.interpolate(x, scale_factor=0.5, mode="bicubic", align_corners=True)
        return a, b, c

    f = C(fn)
    for h in (5, 7, 9, 4, 11):
        x = rand(1, 2, h, h + 2, rg=True)
        grads(call, f"h={h}", lambda x=x: sum(t.sum() for t in f(x)), x)
        call(f"v h={h}", lambda x=x: f(x))


@scenario
def max_pool_ceil_indices(C, call):
    f = C(lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True, return_indices=True))
    for h in (5, 6, 7, 10, 1):
        call(f"h={h}", lambda h=h: f(rand(1, 2, h, h + 1)))


@scenario
def pool1d_ceil_mode_edge(C, call):
    f = C(lambda x: (F.max_pool1d(x, 2, 2, ceil_mode=True), F.avg_pool1d(x, 2, 2, ceil_mode=True)))
    for n in (3, 4, 5, 7, 1):
        call(f"n={n}", lambda n=n: f(rand(1, 2, n)))


# ============================================================================================
# data-dependent shapes
@scenario(capture=True)
def bool_mask_select(C, call):
    f = C(lambda x: x[x > 0] * 2)
    for s in range(4):
        x = rand(7, seed=s, rg=True)
        grads(call, f"s={s}", lambda x=x: f(x).sum(), x)
        call(f"v s={s}", lambda x=x: f(x))
    call("all false", lambda: f(-rand(5).abs() - 1))


@scenario(capture=True)
def bool_mask_2d_rows(C, call):
    f = C(lambda x, m: x[m].sum(0))
    for s in range(3):
        x = rand(6, 3, seed=s, rg=True)
        grads(call, f"s={s}", lambda x=x, s=s: f(x, rand(6, seed=s + 9) > 0).sum(), x)


@scenario(capture=True)
def bool_mask_setitem(C, call):
    def fn(x, v):
        y = x.clone()
        y[y > 0] = v
        return y

    f = C(fn)
    for s in range(3):
        x = rand(8, seed=s, rg=True)
        v = torch.tensor(-1.0, requires_grad=True)
        grads(call, f"s={s}", lambda x=x, v=v: (f(x, v) * torch.arange(8)).sum(), x, v)


@scenario(capture=True)
def bool_mask_setitem_values(C, call):
    def fn(x):
        y = x.clone()
        m = y > 0
        y[m] = y[m].sqrt()
        return y

    f = C(fn)
    for s in range(3):
        x = rand(9, seed=s, rg=True)
        grads(call, f"s={s}", lambda x=x: f(x).sum(), x)
        call(f"v s={s}", lambda x=x: f(x))


@scenario(capture=True)
def nonzero_variants(C, call):
    f = C(lambda x: (torch.nonzero(x > 0), torch.nonzero(x > 0, as_tuple=True), (x > 9).nonzero()))
    for s in range(3):
        call(f"s={s}", lambda s=s: f(rand(3, 4, seed=s)))
    call("empty", lambda: f(rand(0, 4)))


@scenario(capture=True)
def masked_select_grad(C, call):
    f = C(lambda x, m: torch.masked_select(x, m) * 3)
    for s in range(3):
        x = rand(4, 5, seed=s, rg=True)
        m = rand(5, seed=s + 1) > 0  # broadcast mask
        grads(call, f"s={s}", lambda x=x, m=m: f(x, m).square().sum(), x)


@scenario(capture=True)
def unique_variants(C, call):
    def fn(x):
        r = x.round()
        u, inv, cnt = torch.unique(r, sorted=True, return_inverse=True, return_counts=True)
        return u, inv, cnt, torch.unique(r, dim=0), torch.unique_consecutive(r, return_counts=True)

    f = C(fn)
    for s in range(3):
        call(f"s={s}", lambda s=s: f(rand(5, 2, seed=s)))


@scenario(capture=True)
def where_one_arg(C, call):
    def fn(x):
        rows, cols = torch.where(x > 0)
        y = x.clone()
        y[rows, cols] = 0.0
        return rows, cols, y

    f = C(fn)
    for s in range(3):
        call(f"s={s}", lambda s=s: f(rand(3, 4, seed=s)))


@scenario(capture=True)
def bincount_variants(C, call):
    f = C(
        lambda i, w: (
            torch.bincount(i),
            torch.bincount(i, minlength=10),
            torch.bincount(i, weights=w),
        )
    )
    for s in range(3):
        i = torch.randint(0, 6 + s, (12,), generator=torch.Generator().manual_seed(s))
        call(f"s={s}", lambda i=i, s=s: f(i, rand(12, seed=s)))
    call("empty", lambda: f(torch.zeros(0, dtype=torch.long), torch.zeros(0)))


@scenario(capture=True)
def repeat_interleave_tensor(C, call):
    f = C(lambda x, r: torch.repeat_interleave(x, r, dim=0) * 2)
    for s in range(3):
        x = rand(4, 2, seed=s, rg=True)
        r = torch.randint(0, 4, (4,), generator=torch.Generator().manual_seed(s))
        grads(call, f"s={s}", lambda x=x, r=r: (f(x, r) ** 2).sum(), x)


@scenario(capture=True)
def item_as_sizes(C, call):
    def fn(x, k):
        n = int(k.item())
        return x[:n] * 2, torch.arange(n) + x.sum(), x[: 2 * n].view(n, -1)

    f = C(fn)
    for n in (2, 3, 1, 0):
        x = rand(12, seed=n, rg=True)
        call(f"n={n}", lambda x=x, n=n: f(x, torch.tensor(n)))


@scenario(capture=True)
def item_view_error(C, call):
    f = C(lambda x, k: x.view(int(k.item()), -1))
    call("ok", lambda: f(rand(12), torch.tensor(3)))
    call("bad", lambda: f(rand(12), torch.tensor(5)))  # eager's RuntimeError


@scenario(capture=True)
def tolist_split_sizes(C, call):
    def fn(x, sizes):
        parts = torch.split(x, sizes.tolist())
        return [p.sum(0) for p in parts]

    f = C(fn)
    for sizes in ([2, 3, 1], [1, 1, 4], [6, 0, 0], [3, 2, 1]):
        x = rand(6, 2, rg=True)
        grads(call, f"{sizes}", lambda x=x, s=sizes: sum(t.sum() for t in f(x, torch.tensor(s))), x)
        call(f"v {sizes}", lambda x=x, s=sizes: f(x, torch.tensor(s)))


@scenario(capture=True)
def split_from_counts(C, call):
    def fn(x, labels):
        counts = torch.bincount(labels, minlength=3)
        groups = torch.split(x[labels.argsort()], counts.tolist())
        return torch.stack([g.mean(0) for g in groups])

    f = C(fn)
    for s in range(3):
        labels = torch.randint(0, 3, (9,), generator=torch.Generator().manual_seed(s))
        call(f"s={s}", lambda s=s, labels=labels: f(rand(9, 2, seed=s), labels))


@scenario
def pack_padded_lstm(C, call):
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)

    def fn(x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        out, (h, _) = lstm(packed)
        padded, lens = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return padded, lens, h

    f = C(fn)
    for lengths in ([5, 3, 2], [4, 4, 1], [6, 2, 2]):
        x = rand(3, max(lengths), 3, rg=True)
        ln = torch.tensor(lengths)
        call(f"{lengths}", lambda x=x, ln=ln: f(x, ln))
        grads(call, f"g {lengths}", lambda x=x, ln=ln: f(x, ln)[0].sum(), x, lstm.weight_hh_l0)


@scenario(capture=True)
def masked_loss_all_false(C, call):
    def fn(pred, target, mask):
        loss = (pred - target) ** 2
        return loss[mask].mean()

    f = C(fn)
    for s, p in ((0, 0.5), (1, 0.0), (2, 0.8), (3, 0.0)):
        pred = rand(6, seed=s, rg=True)
        mask = torch.rand(6, generator=torch.Generator().manual_seed(s)) < p
        grads(call, f"s={s}", lambda pred=pred, mask=mask: f(pred, torch.zeros(6), mask), pred)
        call(f"v s={s}", lambda pred=pred, mask=mask: f(pred, torch.zeros(6), mask))


@scenario(capture=True)
def masked_loss_many_counts(C, call):
    w = rand(4, 1, rg=True)
    f = C(lambda x, y: ((x @ w).squeeze(-1) - y)[y > 0].abs().mean())
    for s in range(10):
        grads(call, f"s={s}", lambda s=s: f(rand(32, 4, seed=s), rand(32, seed=s + 50)), w)


@scenario(capture=True)
def masked_loss_many_counts_inference(C, call):
    f = C(lambda x: x[x > 0].log().sum() + x.sum())
    with torch.no_grad():
        for s in range(12):
            call(f"s={s}", lambda s=s: f(rand(64, seed=s)))


@scenario(capture=True)
def nonzero_gather_per_size(C, call):
    f = C(lambda x: x[torch.nonzero(x > 0.5).squeeze(1)].cumsum(0))
    for s in range(8):
        call(f"s={s}", lambda s=s: f(rand(40, seed=s)))


@scenario(capture=True)
def masked_scatter_and_fill(C, call):
    f = C(lambda x, m, src: (x.masked_scatter(m, src), x.masked_fill(m, 0.5)))
    for s in range(3):
        m = rand(3, 4, seed=s) > 0
        call(f"s={s}", lambda m=m, s=s: f(rand(3, 4, seed=s), m, rand(12, seed=s + 5)))


@scenario(capture=True)
def one_hot_auto_classes(C, call):
    f = C(lambda i: F.one_hot(i))
    for s in range(3):
        i = torch.randint(0, 3 + s, (5,), generator=torch.Generator().manual_seed(s))
        call(f"s={s}", lambda i=i: f(i))


@scenario(capture=True)
def item_to_python_control(C, call):
    def fn(x):
        n = (x > 0).sum().item()
        if n > 3:
            return x * n
        return x - n

    f = C(fn)
    for s in range(4):
        call(f"s={s}", lambda s=s: f(rand(6, seed=s)))


@scenario(capture=True)
def topk_from_item(C, call):
    f = C(lambda x: x.topk(int((x > 0).sum().item()) or 1).values)
    for s in range(3):
        call(f"s={s}", lambda s=s: f(rand(8, seed=s)))


# ============================================================================================
# symbolic strides and views
@scenario
def dyn_views(C, call):
    def fn(x):
        b, t, c = x.shape
        a = x.reshape(b * t, c).t()
        v = x.view(b, t, 2, c // 2).transpose(1, 2)
        u = x.flatten(1).unflatten(1, (t, c))
        return a, v, u, x[..., None], x[:, None, -1]

    f = C(fn, dynamic=True)
    for t in (3, 1, 5, 0, 8):
        x = rand(2, t, 4, rg=True)
        call(f"t={t}", lambda x=x: f(x))
        grads(call, f"g t={t}", lambda x=x: sum((o * o).sum() for o in f(x)), x)


@scenario
def dyn_output_views_of_input(C, call):
    f = C(lambda x: (x.t(), x[1:], x.view(-1), x.unsqueeze(0).expand(3, -1, -1)), dynamic=True)
    for n in (3, 5, 2, 7):
        call(f"n={n}", lambda n=n: f(rand(n, 4)))


@scenario
def expand_to_dynamic(C, call):
    f = C(lambda x, y: (x.expand(y.shape[0], -1) * y, x.expand_as(y).contiguous()), dynamic=True)
    for n in (3, 4, 1, 9):
        x = rand(1, 4, rg=True)
        y = rand(n, 4, seed=n)
        grads(call, f"n={n}", lambda x=x, y=y: sum(t.sum() for t in f(x, y)), x)


@scenario
def narrow_dynamic_start(C, call):
    f = C(lambda x, s: x.narrow(0, s, 3) * 2)
    for s in (0, 2, 5, 3, 1):
        x = rand(8, 2, rg=True)
        grads(call, f"s={s}", lambda x=x, s=s: f(x, s).sum(), x)
        call(f"v s={s}", lambda x=x, s=s: f(x, s))
    call("past end", lambda: f(rand(8, 2), 6))


@scenario
def narrow_dynamic_length(C, call):
    f = C(lambda x, n: x.narrow(-1, 1, n).sum(-1), dynamic=True)
    for n in (2, 3, 5, 0):
        call(f"n={n}", lambda n=n: f(rand(3, 7), n))


@scenario
def pad_negative_dynamic(C, call):
    f = C(lambda x: (F.pad(x, (-1, 2)), F.pad(x, (1, -2, 0, 1), value=3.0)), dynamic=True)
    for n in (4, 5, 3, 8):
        x = rand(3, n, rg=True)
        call(f"n={n}", lambda x=x: f(x))
        grads(call, f"g n={n}", lambda x=x: sum(t.square().sum() for t in f(x)), x)


@scenario
def pad_reflect_replicate_odd(C, call):
    f = C(
        lambda x: (F.pad(x, (2, 1), mode="reflect"), F.pad(x, (1, 3, 2, 0), mode="replicate")),
        dynamic=True,
    )
    for n in (3, 4, 7, 5):
        call(f"n={n}", lambda n=n: f(rand(1, 2, n, n + 1)))


@scenario
def flip_negative_steps(C, call):
    f = C(lambda x: (x.flip(0), x.flip(-1)[1:], torch.fliplr(x), x.flip(0).cumsum(0)), dynamic=True)
    for n in (3, 4, 1, 6):
        x = rand(n, 3, rg=True)
        call(f"n={n}", lambda x=x: f(x))
        grads(call, f"g n={n}", lambda x=x: sum((t * t).sum() for t in f(x)), x)


@scenario
def negative_step_slice_error(C, call):
    f = C(lambda x: x[::-1])
    call("err", lambda: f(rand(4)))


@scenario
def cat_empty_dynamic_piece(C, call):
    f = C(lambda x, y: (torch.cat([x, y[:0], y]), torch.cat([x[:0], y], 1)), dynamic=True)
    for n in (3, 5, 2, 6):
        x, y = rand(n, 2, rg=True), rand(n, 2, seed=1)
        grads(call, f"n={n}", lambda x=x, y=y: sum(t.sum() for t in f(x, y)), x)
        call(f"v n={n}", lambda x=x, y=y: f(x, y))


@scenario
def cat_legacy_empty_1d(C, call):
    f = C(lambda x, k: torch.cat([x, torch.zeros(0), x[:k]]), dynamic=True)
    for k in (3, 0, 2, 5):
        call(f"k={k}", lambda k=k: f(rand(4, 2), k))


@scenario
def chunk_unbind_dynamic(C, call):
    f = C(lambda x: (x.chunk(3), x.tensor_split(4), x.split(2)), dynamic=True)
    for n in (7, 8, 3, 11, 2):
        call(f"n={n}", lambda n=n: f(rand(n)))


@scenario
def sizes_as_values(C, call):
    def fn(x):
        n = x.shape[0]
        return (
            x * n,
            x.sum() / x.numel(),
            torch.full((n // 2,), float(n)),
            torch.linspace(0, 1, n),
            torch.arange(0, n, 0.5),
        )

    f = C(fn, dynamic=True)
    for n in (4, 5, 9, 0, 1, 2):
        call(f"n={n}", lambda n=n: f(rand(n)))


@scenario
def reductions_over_empty_dynamic(C, call):
    f = C(lambda x: (x.sum(0), x.mean(0), x.std(0), x.prod(0), x.softmax(0)), dynamic=True)
    for n in (3, 4, 0, 1, 5):
        call(f"n={n}", lambda n=n: f(rand(n, 2)))


@scenario
def max_over_empty_dynamic(C, call):
    f = C(lambda x: x.amax(0), dynamic=True)
    for n in (3, 4, 0):
        call(f"n={n}", lambda n=n: f(rand(n, 2)))


@scenario
def view_size_arith_error(C, call):
    f = C(lambda x: x.view(x.shape[0] // 2, -1), dynamic=True)
    for n in (4, 6, 5, 0):
        call(f"n={n}", lambda n=n: f(rand(n, 3)))


@scenario
def topk_sort_dynamic_k(C, call):
    f = C(lambda x: (x.topk(x.shape[0] // 2), x.sort(descending=True), x.argsort()), dynamic=True)
    for n in (4, 5, 9, 1, 2):
        call(f"n={n}", lambda n=n: f(rand(n)))


@scenario
def scatter_gather_dynamic(C, call):
    def fn(x, idx):
        out = torch.zeros(x.shape[0], 3).scatter_add(1, idx, x)
        return out, x.gather(1, idx)

    f = C(fn, dynamic=True)
    for n in (3, 6, 4, 1):
        x = rand(n, 2, rg=True)
        idx = torch.randint(0, 2, (n, 2), generator=torch.Generator().manual_seed(n))
        grads(call, f"n={n}", lambda x=x, idx=idx: sum(t.sum() for t in f(x, idx)), x)


@scenario
def embedding_bag_offsets(C, call):
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 3, mode="mean")
    f = C(lambda i, o: bag(i, o))
    for n in (5, 7, 3, 9):
        i = torch.randint(0, 10, (n,), generator=torch.Generator().manual_seed(n))
        o = torch.tensor([0, n // 2, n - 1])
        call(f"n={n}", lambda i=i, o=o: f(i, o))


@scenario
def layer_norm_dynamic_last(C, call):
    f = C(lambda x: F.layer_norm(x, x.shape[-1:]) + F.group_norm(x[:, :4], 2), dynamic=True)
    for n in (4, 6, 1, 9):
        x = rand(4, n, rg=True)
        grads(
            call,
            f"n={n}",
            lambda x=x, n=n: f(x[None].expand(2, -1, -1).reshape(2, 4 * n // 4, n)).sum(),
            x,
        )


@scenario
def nll_all_ignored_dynamic(C, call):
    f = C(lambda x, t: (F.cross_entropy(x, t, ignore_index=-100), F.nll_loss(x, t)), dynamic=True)
    for n in (3, 5, 2):
        t = torch.full((n,), -100)
        call(f"n={n}", lambda n=n, t=t: f(rand(n, 4), t))


@scenario
def cross_entropy_label_smoothing_batches(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(4, 5)
    f = C(lambda x, t: F.cross_entropy(lin(x), t, label_smoothing=0.1, ignore_index=2))
    for n in (8, 8, 3, 1, 5):
        t = torch.randint(0, 5, (n,), generator=torch.Generator().manual_seed(n))
        grads(call, f"n={n}", lambda n=n, t=t: f(rand(n, 4, seed=n), t), lin.weight)


@scenario
def unfold_dynamic(C, call):
    f = C(
        lambda x: (x.unfold(0, 3, 2), F.unfold(x[None, None].expand(1, 1, -1, -1), 2)), dynamic=True
    )
    for n in (5, 6, 8, 3):
        call(f"n={n}", lambda n=n: f(rand(n, n)))


@scenario
def arange_mask_from_shape_inference(C, call):
    def fn(x, lengths):
        t = x.shape[1]
        mask = torch.arange(t)[None, :] < lengths[:, None]
        return (x * mask).sum(1) / lengths.clamp(min=1)

    f = C(fn, dynamic=True)
    with torch.no_grad():
        for t in (3, 6, 9, 12, 17, 25, 33):
            call(f"t={t}", lambda t=t: f(rand(2, t), torch.tensor([t, t // 2])))


@scenario
def int_arg_sizes_tensor(C, call):
    f = C(lambda x, n: torch.ones(n, x.shape[0]) @ x)
    for n in (2, 3, 4, 5, 6, 7):
        call(f"n={n}", lambda n=n: f(rand(3, 2), n))


@scenario
def setitem_dynamic_slice(C, call):
    def fn(x, k):
        y = x.clone()
        y[k:] = 0
        y[:, -k:] += 1
        return y

    f = C(fn, dynamic=True)
    for k in (1, 2, 3, 0):
        call(f"k={k}", lambda k=k: f(rand(4, 4), k))


@scenario
def mark_dynamic_size_one(C, call):
    f = C(lambda x: x * 2 + x.mean(0))
    for n in (3, 1, 4):
        x = rand(n, 2)
        torch._dynamo.mark_dynamic(x, 0)
        call(f"n={n}", lambda x=x: f(x))


@scenario
def dynamic_batch_matmul_broadcast(C, call):
    f = C(lambda a, b: (a @ b, torch.einsum("bij,jk->bik", a, b[0])), dynamic=True)
    for n in (3, 1, 4, 2):
        call(f"n={n}", lambda n=n: f(rand(n, 2, 3), rand(1, 3, 4)))


# ============================================================================================
# padded (bucketed) inference: ops that read a dynamic dim as a whole, at sizes across buckets
PADDED_SIZES = (3, 5, 6, 7, 9, 3, 12)
PADDED: dict = {
    "chunk": lambda x: x.chunk(2, 1),
    "split2": lambda x: x.split(2, 1),
    "tensor_split": lambda x: x.tensor_split(3, 1),
    "unbind_sum": lambda x: sum(x.unbind(1)),
    "glu": lambda x: F.glu(x, 1),
    "diagonal_gram": lambda x: (x.transpose(1, 2) @ x).diagonal(),
    "diagonal_outer": lambda x: (x @ x.transpose(1, 2)).diagonal(dim1=1, dim2=2),
    "trace_like": lambda x: (x @ x.transpose(1, 2)).diagonal(dim1=1, dim2=2).sum(-1),
    "diag_embed": lambda x: torch.diag_embed(x[..., 0]),
    "cdist": lambda x: torch.cdist(x, x),
    "kthvalue": lambda x: x.kthvalue(2, 1),
    "median": lambda x: x.median(1),
    "quantile": lambda x: x.quantile(0.5, 1),
    "max_pool1d_seq": lambda x: F.max_pool1d(x.transpose(1, 2), 2, ceil_mode=True),
    "adaptive_avg_seq": lambda x: F.adaptive_avg_pool1d(x.transpose(1, 2), 2),
    "adaptive_max_seq": lambda x: F.adaptive_max_pool1d(x.transpose(1, 2), 2),
    "reflect_pad_seq": lambda x: F.pad(x.transpose(1, 2), (2, 2), mode="reflect"),
    "replicate_pad_seq": lambda x: F.pad(x.transpose(1, 2), (0, 2), mode="replicate"),
    "circular_pad_seq": lambda x: F.pad(x.transpose(1, 2), (1, 1), mode="circular"),
    "rfft_seq": lambda x: torch.fft.rfft(x, dim=1).abs(),
    "fft_seq": lambda x: torch.fft.fft(x, dim=1).real,
    "conv_same": lambda x: F.conv1d(x.transpose(1, 2), torch.ones(4, 4, 3), padding="same"),
    "conv_stride2": lambda x: F.conv1d(x.transpose(1, 2), torch.ones(4, 4, 2), stride=2),
    "pixel_shuffle": lambda x: F.pixel_shuffle(x[:, None].expand(-1, 4, -1, -1), 2),
    "upsample": lambda x: F.interpolate(x.transpose(1, 2), scale_factor=2, mode="linear"),
    "rot90": lambda x: torch.rot90(x, 1, (1, 2)),
    "trapezoid": lambda x: torch.trapezoid(x, dim=1),
    "cumtrapz": lambda x: torch.cumulative_trapezoid(x, dim=1),
    "searchsorted": lambda x: torch.searchsorted(
        x.sort(1).values.transpose(1, 2).contiguous(), x.transpose(1, 2).contiguous()
    ),
    "bucketize": lambda x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])),
    "histc": lambda x: torch.histc(x, 5, -2, 2),
    "square_solve": lambda x: torch.linalg.solve(
        (x @ x.transpose(1, 2)) + 5 * torch.eye(x.shape[1]), x
    ),
    "square_det": lambda x: torch.linalg.det((x @ x.transpose(1, 2)) + torch.eye(x.shape[1])),
    "square_inv": lambda x: torch.linalg.inv((x @ x.transpose(1, 2)) + 3 * torch.eye(x.shape[1])),
    "eye_like": lambda x: torch.eye(x.shape[1]) + x[:, :, :1] * 0,
    "tensordot": lambda x: torch.tensordot(x, x, dims=([1, 2], [1, 2])),
    "kron": lambda x: torch.kron(x[0], torch.ones(2, 1)),
    "vander": lambda x: torch.linalg.vander(x[0, :, 0], N=3),
    "cross": lambda x: torch.linalg.cross(x[..., :3], x[..., 1:], dim=-1),
    "cov": lambda x: torch.cov(x[0].t()),
    "normalize_seq": lambda x: F.normalize(x, dim=1),
    "logsoftmax_seq": lambda x: F.log_softmax(x, 1),
    "softmin_seq": lambda x: F.softmin(x, 1),
    "gumbel_free_argmin": lambda x: x.argmin(1),
    "max_with_index": lambda x: x.max(1),
    "aminmax": lambda x: torch.aminmax(x, dim=1),
    "nanmedian": lambda x: x.nanmedian(1),
    "mode": lambda x: x.round().mode(1),
    "var_mean": lambda x: torch.var_mean(x, 1),
    "layer_norm_seq_feat": lambda x: F.layer_norm(x.transpose(1, 2), (x.shape[1],)),
    "instance_norm_seq": lambda x: F.instance_norm(x.transpose(1, 2)),
    "group_norm_seq": lambda x: F.group_norm(x.transpose(1, 2), 2),
    "rms_norm_seq": lambda x: F.rms_norm(x.transpose(1, 2), (x.shape[1],)),
    "cosine_sim_seq": lambda x: F.cosine_similarity(x, x.flip(2), dim=1),
    "pairwise_dist": lambda x: F.pairwise_distance(x, x + 1),
    "kl_div_batchmean": lambda x: F.kl_div(x.log_softmax(1), x.softmax(1), reduction="batchmean"),
    "mse_mean": lambda x: F.mse_loss(x, torch.zeros_like(x)),
    "ce_seq_classes": lambda x: F.cross_entropy(
        x, torch.zeros(x.shape[0], x.shape[2], dtype=torch.long)
    ),
    "ce_seq_batch_tokens": lambda x: F.cross_entropy(
        x.reshape(-1, 4), torch.ones(x.shape[0] * x.shape[1], dtype=torch.long)
    ),
    "nll_seq_sum": lambda x: F.nll_loss(
        x.reshape(-1, 4), torch.ones(x.shape[0] * x.shape[1], dtype=torch.long), reduction="sum"
    ),
    "embedding_bag_mean": lambda x: F.embedding_bag(
        torch.arange(x.shape[1]).remainder(5)[None].expand(2, -1), x[0, :5], mode="mean"
    ),
    "masked_mean": lambda x: (x * (x > 0)).sum(1) / (x > 0).sum(1).clamp(min=1),
    "logical_all_seq": lambda x: (x > -10).all(1),
    "count_eq": lambda x: (x.round() == 0).sum(1),
    "std_unbiased": lambda x: x.std(1, correction=1),
    "renorm": lambda x: torch.renorm(x, 2, 1, 1.0),
    "cummax_rev": lambda x: x.flip(1).cummax(1).values,
    "index_last_token": lambda x: x[:, x.shape[1] - 1],
    "gather_last_by_len": lambda x: x.gather(1, torch.full((2, 1, 4), x.shape[1] - 1)),
    "argsort_stable": lambda x: x.round().argsort(1, stable=True),
    "unique_dim_free": lambda x: torch.unique_consecutive(x.round(), dim=1),
    "diff_prepend": lambda x: torch.diff(x, dim=1, prepend=x[:, :1]),
    "tril_indices": lambda x: x[0][tuple(torch.tril_indices(x.shape[1], 4))],
    "meshgrid": lambda x: (
        torch.meshgrid(torch.arange(x.shape[1]), torch.arange(3), indexing="ij")[0] * x[0, :, :3]
    ),
    "combinations": lambda x: torch.combinations(x[0, :, 0], 2),
    "cartesian": lambda x: torch.cartesian_prod(x[0, :, 0], x[0, :2, 1]),
    "bilinear_grid_sample": lambda x: F.grid_sample(
        x[:, None], torch.zeros(2, 3, 3, 2), align_corners=False
    ),
    "affine_grid_seq": lambda x: F.affine_grid(
        torch.eye(2, 3)[None].expand(2, -1, -1), (2, 1, x.shape[1], 4), align_corners=False
    ),
}


def _padded(op):
    def run(C, call):
        f = C(op, dynamic=True)
        with torch.no_grad():
            for i, n in enumerate(PADDED_SIZES):
                call(f"n={n}", lambda n=n, i=i: f(rand(2, n, 4, seed=i)))

    return run


for _name, _op in PADDED.items():
    SCENARIOS["pad_" + _name] = _padded(_op)


def main(argv: list[str]) -> int:
    bad = 0
    for name, fn in SCENARIOS.items():
        for cap in (False, True) if name in CAPTURE else (False,):
            label = name + ("+cap" if cap else "")
            if argv and not any(w in label for w in argv):
                continue
            try:
                line = compare(label, fn, cap)
            except Exception:  # noqa: BLE001
                line = f"CRASH {label}: {traceback.format_exc()[-1500:]}"
            bad += not line.startswith("ok")
            print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
