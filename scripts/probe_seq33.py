"""Sequence models and NLP utilities as users write them (session 33): recurrent layers and
cells in Python loops, packed sequences, embeddings (``max_norm``'s in-place renorm), bags,
one-hot, CTC, attention masks, transformer stacks and beam search, each scenario run eagerly
and under ``torch.compile(..., backend="xla")``.

    PYTHONPATH=. python scripts/probe_seq33.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_seq33.py   # torch's own

The harness is ``probe_grads26``'s (compiled and eager in float32, eager in float64 as the
reference; ``.grad`` None-ness, dtypes, shapes and errors strict).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import rnn as rnn_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import probe_grads26 as h

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
leaf = h.leaf
KNOWN: dict[str, str] = {
    "beam_topk_ties": "implementation-defined: the order of tied elements in topk (eager's CPU "
    "kernel: libstdc++'s partial_sort or nth_element + sort, its own order per size; CUDA's "
    "another); XLA's top_k keeps the lower index first",
}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def mk(ctor, seed=0):
    dt = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        torch.manual_seed(seed)
        m = ctor()
    finally:
        torch.set_default_dtype(dt)
    return m.to(dt)


def grads(m):
    return {n: p.grad for n, p in m.named_parameters()}


def params(m):
    return {n: p.detach().clone() for n, p in m.named_parameters()}


def wsum(out, seed=7):
    ts = out if isinstance(out, (list, tuple)) else [out]
    tot = 0
    for i, t in enumerate(ts):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad:
            tot = tot + (t * leaf(*t.shape, seed=seed + i, rg=False)).sum()
    return tot


def ids(*shape, hi=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, hi, shape, generator=g)


# ============================================================================================
# recurrent layers


@scenario
def lstm_h0c0_grads_2layer_bidir_bf(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True))
    cm = C(m)
    for i in range(2):
        x = leaf(2, 5, 3, seed=i)
        h0 = leaf(4, 2, 4, seed=10 + i)
        c0 = leaf(4, 2, 4, seed=20 + i)
        out, (hn, cn) = cm(x, (h0, c0))
        rec(f"{i} out", [out, hn, cn])
        wsum([out, hn, cn]).backward()
        rec(f"{i} grads", [x.grad, h0.grad, c0.grad])
        rec(f"{i} pgrads", grads(m))
        m.zero_grad()


@scenario
def lstm_proj_h0c0(C, rec):
    m = mk(lambda: nn.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True))
    cm = C(m)
    x = leaf(4, 2, 3)
    h0 = leaf(4, 2, 2, seed=1)
    c0 = leaf(4, 2, 5, seed=2)
    out, (hn, cn) = cm(x, (h0, c0))
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("grads", [x.grad, h0.grad, c0.grad])
    rec("pgrads", grads(m))


@scenario
def lstm_only_h0_requires_grad(C, rec):
    m = mk(lambda: nn.LSTM(3, 4))
    m.requires_grad_(False)
    cm = C(m)
    x = leaf(5, 2, 3, rg=False)
    h0 = leaf(1, 2, 4, seed=1)
    c0 = leaf(1, 2, 4, seed=2, rg=False)
    out, (hn, cn) = cm(x, (h0, c0))
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("grads", [x.grad, h0.grad, c0.grad])
    rec("pgrads", grads(m))


@scenario
def lstm_partly_frozen(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2))
    m.weight_ih_l0.requires_grad_(False)
    m.bias_hh_l1.requires_grad_(False)
    cm = C(m)
    out, (_, cn) = cm(leaf(5, 2, 3))
    rec("out", out)
    (out.sum() + cn.pow(2).sum()).backward()
    rec("pgrads", grads(m))


@scenario
def lstm_dropout_one_train(C, rec):
    # dropout=1 between layers: the second layer sees zeros (deterministic)
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0))
    cm = C(m)
    x = leaf(5, 2, 3)
    out, (hn, cn) = cm(x)
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("x grad", x.grad)
    rec("pgrads", grads(m))


@scenario
def gru_dropout_train_then_eval(C, rec):
    m = mk(lambda: nn.GRU(3, 16, num_layers=3, dropout=0.5))
    cm = C(m)
    x = leaf(6, 2, 3)
    out, hn = cm(x)
    rec("shape", [tuple(out.shape), tuple(hn.shape)])
    rec("last layer hn == out[-1]", torch.equal(hn[-1], out[-1]))
    out2, _ = cm(x)
    rec("train calls differ", not torch.equal(out, out2))
    m.eval()
    out3, hn3 = cm(x)
    rec("eval", [out3, hn3])


@scenario
def gru_truncated_bptt(C, rec):
    m = mk(lambda: nn.GRU(3, 4, batch_first=True))
    head = mk(lambda: nn.Linear(4, 2), seed=1)
    opt = torch.optim.SGD([*m.parameters(), *head.parameters()], lr=0.1)

    def step(x, hid, y):
        out, hid = m(x, hid)
        loss = F.mse_loss(head(out), y)
        return loss, hid

    cstep = C(step)
    hid = None
    for i in range(3):
        opt.zero_grad()
        loss, hid = cstep(leaf(2, 4, 3, seed=i, rg=False), hid, leaf(2, 4, 2, seed=5 + i))
        loss.backward()
        opt.step()
        hid = hid.detach()
        rec(f"{i} loss", loss)
        rec(f"{i} hid", hid)
    rec("params", params(m))


@scenario
def lstm_noncontig_input(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, batch_first=True))
    cm = C(m)
    base = leaf(5, 2, 3)
    out, (hn, cn) = cm(base.transpose(0, 1))
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("grad", base.grad)


@scenario
def bidir_hn_classifier(C, rec):
    rnn = mk(lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True))
    fc = mk(lambda: nn.Linear(8, 2), seed=1)

    def f(x):
        _, hn = rnn(x)
        hn = hn.view(2, 2, x.shape[1], 4)[-1]
        feat = torch.cat([hn[0], hn[1]], dim=-1)
        return F.cross_entropy(fc(feat), torch.tensor([0, 1, 1]))

    loss = C(f)(leaf(5, 3, 3))
    rec("loss", loss)
    loss.backward()
    rec("grads", grads(rnn))


@scenario
def lstm_shared_twice(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, batch_first=True))

    def f(a, b):
        _, (ha, _) = m(a)
        _, (hb, _) = m(b)
        return F.cosine_similarity(ha[-1], hb[-1])

    out = C(f)(leaf(2, 5, 3), leaf(2, 3, 3, seed=1))
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(m))


@scenario
def lstm_float64_module(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2)).double()
    x = leaf(5, 2, 3).double().detach().requires_grad_()
    out, (hn, cn) = C(m)(x)
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("grad", x.grad)
    rec("pgrads", grads(m))


@scenario
def lstm_bad_h0_shape(C, rec):
    m = mk(lambda: nn.LSTM(3, 4))
    out = C(m)(leaf(5, 2, 3), (leaf(1, 3, 4), leaf(1, 3, 4)))
    rec("out", out)


@scenario
def gru_bad_input_size(C, rec):
    m = mk(lambda: nn.GRU(3, 4))
    out = C(m)(leaf(5, 2, 4))
    rec("out", out)


@scenario
def rnn_weights_changed_between_calls(C, rec):
    m = mk(lambda: nn.RNN(3, 4))
    cm = C(m)
    x = leaf(5, 2, 3, rg=False)
    rec("0", cm(x)[0])
    with torch.no_grad():
        m.weight_hh_l0.mul_(0.5)
    rec("1", cm(x)[0])


@scenario
def lstm_flatten_parameters_in_forward(C, rec):
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 4, batch_first=True)

        def forward(self, x):
            self.rnn.flatten_parameters()
            out, _ = self.rnn(x)
            return out.mean(1)

    m = mk(Enc)
    out = C(m)(leaf(2, 5, 3))
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(m))


# ============================================================================================
# cells in Python loops


@scenario
def lstmcell_loop(C, rec):
    cell = mk(lambda: nn.LSTMCell(3, 4))
    head = mk(lambda: nn.Linear(4, 1), seed=1)

    def f(x):
        hx = x.new_zeros(x.size(1), 4)
        cx = x.new_zeros(x.size(1), 4)
        outs = []
        for t in range(x.size(0)):
            hx, cx = cell(x[t], (hx, cx))
            outs.append(head(hx))
        return torch.stack(outs, 0), hx, cx

    x = leaf(6, 2, 3)
    out = C(f)(x)
    rec("out", out)
    wsum(out).backward()
    rec("x grad", x.grad)
    rec("grads", grads(cell))


@scenario
def grucell_loop_teacher_forcing(C, rec):
    emb = mk(lambda: nn.Embedding(10, 3))
    cell = mk(lambda: nn.GRUCell(3, 4), seed=1)
    proj = mk(lambda: nn.Linear(4, 10), seed=2)

    def f(tgt, h):
        loss = 0
        for t in range(tgt.size(1) - 1):
            h = cell(emb(tgt[:, t]), h)
            loss = loss + F.cross_entropy(proj(h), tgt[:, t + 1])
        return loss / (tgt.size(1) - 1), h

    h0 = leaf(2, 4, seed=3)
    loss, hT = C(f)(ids(2, 5), h0)
    rec("loss", [loss, hT])
    loss.backward()
    rec("h0 grad", h0.grad)
    rec("grads", {**grads(emb), **grads(cell), **grads(proj)})


@scenario
def rnncell_loop_masked_update(C, rec):
    cell = mk(lambda: nn.RNNCell(3, 4, nonlinearity="tanh"))

    def f(x, lengths):
        hcur = torch.zeros(x.size(0), 4)
        for t in range(x.size(1)):
            new = cell(x[:, t], hcur)
            mask = (t < lengths).unsqueeze(1)
            hcur = torch.where(mask, new, hcur)
        return hcur

    x = leaf(3, 5, 3)
    out = C(f)(x, torch.tensor([5, 2, 3]))
    rec("out", out)
    out.sum().backward()
    rec("x grad", x.grad)
    rec("grads", grads(cell))


@scenario
def lstmcell_unbatched_loop(C, rec):
    cell = mk(lambda: nn.LSTMCell(3, 4))

    def f(x):
        state = None
        for t in range(x.size(0)):
            state = cell(x[t], state)
        return state

    out = C(f)(leaf(4, 3))
    rec("out", out)
    wsum(out).backward()
    rec("grads", grads(cell))


# ============================================================================================
# packed and padded sequences


@scenario
def packed_sorted_lengths_list_h0(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2))

    def f(x, h0, c0):
        p = rnn_utils.pack_padded_sequence(x, [5, 3, 2])
        out, (hn, cn) = m(p, (h0, c0))
        y, lens = rnn_utils.pad_packed_sequence(out, padding_value=-1.0)
        return y, lens, hn, cn

    x, h0, c0 = leaf(5, 3, 3), leaf(2, 3, 4, seed=1), leaf(2, 3, 4, seed=2)
    out = C(f)(x, h0, c0)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [x.grad, h0.grad, c0.grad])
    rec("pgrads", grads(m))


@scenario
def packed_unsorted_h0_gru(C, rec):
    m = mk(lambda: nn.GRU(3, 4, bidirectional=True, batch_first=True))

    def f(x, lengths, h0):
        p = rnn_utils.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hn = m(p, h0)
        y, lens = rnn_utils.pad_packed_sequence(out, batch_first=True)
        return y, lens, hn

    x, h0 = leaf(3, 6, 3), leaf(2, 3, 4, seed=1)
    out = C(f)(x, torch.tensor([2, 6, 4]), h0)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [x.grad, h0.grad])


@scenario
def packed_mean_pool_classify(C, rec):
    emb = mk(lambda: nn.Embedding(12, 3, padding_idx=0))
    m = mk(lambda: nn.LSTM(3, 4, batch_first=True), seed=1)

    def f(tokens, lengths):
        e = emb(tokens)
        p = rnn_utils.pack_padded_sequence(e, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = m(p)
        y, lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=tokens.size(1))
        return y.sum(1) / lens.unsqueeze(1).to(y.dtype)

    tok = ids(3, 6, hi=12)
    lengths = torch.tensor([6, 3, 4])
    tok[1, 3:] = 0
    tok[2, 4:] = 0
    out = C(f)(tok, lengths)
    rec("out", out)
    out.sum().backward()
    rec("grads", {**grads(emb), **grads(m)})


@scenario
def pack_sequence_list(C, rec):
    m = mk(lambda: nn.RNN(3, 4))

    def f(a, b, c):
        p = rnn_utils.pack_sequence([a, b, c], enforce_sorted=False)
        _, hn = m(p)
        return hn

    a, b, c = leaf(2, 3), leaf(4, 3, seed=1), leaf(3, 3, seed=2)
    out = C(f)(a, b, c)
    rec("out", out)
    out.sum().backward()
    rec("grads", [a.grad, b.grad, c.grad])


@scenario
def pad_sequence_sides(C, rec):
    def f(a, b, c):
        r = rnn_utils.pad_sequence([a, b, c], batch_first=True, padding_value=-2.0)
        out = [r]
        try:
            out.append(rnn_utils.pad_sequence([a, b, c], padding_side="left"))
        except TypeError:
            pass
        return out

    a, b, c = leaf(2, 3), leaf(4, 3, seed=1), leaf(3, 3, seed=2)
    out = C(f)(a, b, c)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [a.grad, b.grad, c.grad])


@scenario
def pad_sequence_int_tokens(C, rec):
    def f(a, b):
        return rnn_utils.pad_sequence([a, b], batch_first=True, padding_value=1)

    rec("out", C(f)(ids(3), ids(5, seed=1)))


@scenario
def packed_zero_length_raises(C, rec):
    m = mk(lambda: nn.GRU(3, 4))

    def f(x):
        p = rnn_utils.pack_padded_sequence(x, torch.tensor([3, 0]), enforce_sorted=False)
        return m(p)[1]

    rec("out", C(f)(leaf(3, 2, 3)))


@scenario
def unpad_sequence_roundtrip(C, rec):
    def f(x, lengths):
        seqs = rnn_utils.unpad_sequence(x, lengths, batch_first=True)
        return [s.sum(0) for s in seqs]

    x = leaf(3, 5, 2)
    out = C(f)(x, torch.tensor([5, 2, 3]))
    rec("out", out)
    wsum(out).backward()
    rec("grad", x.grad)


# ============================================================================================
# embeddings


@scenario
def emb_max_norm_tied_output(C, rec):
    # the renorm happens before the weight's second use (tied output projection)
    emb = mk(lambda: nn.Embedding(10, 4, max_norm=1.0))
    with torch.no_grad():
        emb.weight.mul_(3)

    def f(tok):
        hdn = emb(tok)
        return hdn @ emb.weight.t()

    out = C(f)(ids(2, 3))
    rec("out", out)
    rec("weight after", emb.weight)
    wsum(out).backward()
    rec("grad", emb.weight.grad)


@scenario
def emb_max_norm_weight_read_before(C, rec):
    emb = mk(lambda: nn.Embedding(10, 4, max_norm=1.0))
    with torch.no_grad():
        emb.weight.mul_(3)

    def f(tok):
        norms = emb.weight.norm(dim=1)
        hdn = emb(tok)
        return hdn.sum(-1), norms

    out = C(f)(ids(2, 3))
    rec("out", out)
    rec("weight after", emb.weight)
    wsum(out).backward()
    rec("grad", emb.weight.grad)


@scenario
def emb_max_norm_functional_two_calls(C, rec):
    w = (leaf(8, 3) * 2).detach().requires_grad_()

    def f(a, b):
        return F.embedding(a, w, max_norm=1.5) + F.embedding(b, w, max_norm=0.5)

    out = C(f)(ids(4, hi=8), ids(4, hi=8, seed=1))
    rec("out", out)
    rec("w after", w)
    out.sum().backward()
    rec("grad", w.grad)


@scenario
def emb_max_norm_nograd_eval(C, rec):
    emb = mk(lambda: nn.Embedding(10, 4, max_norm=1.0, padding_idx=0))
    with torch.no_grad():
        emb.weight.mul_(3)
    emb.eval()
    cm = C(emb)
    with torch.no_grad():
        rec("out", cm(ids(2, 5)))
    rec("weight after", emb.weight)


@scenario
def emb_padding_idx_grad_dupes(C, rec):
    emb = mk(lambda: nn.Embedding(6, 3, padding_idx=2))
    tok = torch.tensor([[2, 1, 1, 2], [0, 2, 5, 5]])
    out = C(emb)(tok)
    rec("out", out)
    (out * leaf(2, 4, 3, rg=False)).sum().backward()
    rec("grad", emb.weight.grad)


@scenario
def emb_from_pretrained_frozen(C, rec):
    emb = nn.Embedding.from_pretrained(leaf(6, 3, rg=False), freeze=True)
    lin = mk(lambda: nn.Linear(3, 2))

    def f(t):
        return lin(emb(t)).sum()

    out = C(f)(ids(2, 3, hi=6))
    rec("out", out)
    out.backward()
    rec("grads", [emb.weight.grad, *grads(lin).values()])


@scenario
def emb_out_of_range_raises(C, rec):
    emb = mk(lambda: nn.Embedding(5, 3))
    rec("out", C(emb)(torch.tensor([1, 5])))


@scenario
def embbag_psw_last_offset(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True))
    inp = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    off = torch.tensor([0, 3, 3, 8])
    psw = leaf(8)
    out = C(bag)(inp, off, per_sample_weights=psw)
    rec("out", out)
    (out * leaf(3, 3, rg=False)).sum().backward()
    rec("grads", [bag.weight.grad, psw.grad])


@scenario
def embbag_max_empty_bag_grad(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3, mode="max"))
    inp = torch.tensor([1, 2, 4, 5, 4, 3])
    off = torch.tensor([0, 2, 2, 5])
    out = C(bag)(inp, off)
    rec("out", out)
    (out * leaf(4, 3, rg=False)).sum().backward()
    rec("grad", bag.weight.grad)


@scenario
def embbag_mean_2d_padding_idx(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3, mode="mean", padding_idx=0))
    inp = torch.tensor([[1, 0, 4], [0, 0, 0], [5, 5, 0]])
    out = C(bag)(inp)
    rec("out", out)
    (out * leaf(3, 3, rg=False)).sum().backward()
    rec("grad", bag.weight.grad)


@scenario
def embbag_functional_max_norm(C, rec):
    w = (leaf(10, 3) * 2).detach().requires_grad_()

    def f(inp, off):
        return F.embedding_bag(inp, w, off, max_norm=1.0, mode="mean")

    out = C(f)(torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 4]))
    rec("out", out)
    rec("w after", w)
    out.sum().backward()
    rec("grad", w.grad)


@scenario
def one_hot_matmul(C, rec):
    W = leaf(5, 3)

    def f(t):
        return F.one_hot(t, num_classes=5).float() @ W

    out = C(f)(ids(2, 4, hi=5))
    rec("out", out)
    out.sum().backward()
    rec("grad", W.grad)


@scenario
def one_hot_infer_classes(C, rec):
    def f(t):
        oh = F.one_hot(t)
        return oh, oh.sum(0)

    rec("out", C(f)(ids(6, hi=4)))


@scenario
def one_hot_negative_raises(C, rec):
    def f(t):
        return F.one_hot(t, 4)

    rec("out", C(f)(torch.tensor([1, -1])))


@scenario
def one_hot_too_big_raises(C, rec):
    def f(t):
        return F.one_hot(t, 4)

    rec("out", C(f)(torch.tensor([1, 4])))


@scenario
def label_smoothing_one_hot(C, rec):
    def f(logits, y):
        oh = F.one_hot(y, logits.size(-1)).to(logits.dtype)
        soft = oh * 0.9 + 0.1 / logits.size(-1)
        return -(soft * logits.log_softmax(-1)).sum(-1).mean()

    lg = leaf(4, 6)
    out = C(f)(lg, ids(4, hi=6))
    rec("out", out)
    out.backward()
    rec("grad", lg.grad)


# ============================================================================================
# CTC


def _ctc_inputs(T=8, N=3, Cn=5, S=4, seed=0):
    logits = leaf(T, N, Cn, seed=seed)
    tgt = ids(N, S, hi=Cn - 1, seed=seed) + 1
    return logits, tgt


@scenario
def ctc_2d_targets_reductions(C, rec):
    for red in ("mean", "sum", "none"):

        def f(logits, tgt, il, tl, red=red):
            return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl, reduction=red)

        logits, tgt = _ctc_inputs()
        out = C(f)(logits, tgt, torch.tensor([8, 7, 6]), torch.tensor([4, 2, 3]))
        rec(f"{red} out", out)
        out.sum().backward()
        rec(f"{red} grad", logits.grad)


@scenario
def ctc_1d_concat_targets_blank_last(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits.log_softmax(2), tgt, il, tl, blank=4)

    logits = leaf(8, 3, 5)
    tgt = torch.tensor([0, 1, 1, 2, 3, 0, 2, 2, 1])
    out = C(f)(logits, tgt, torch.tensor([8, 8, 5]), torch.tensor([4, 2, 3]))
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


@scenario
def ctc_zero_infinity(C, rec):
    for zi in (True, False):

        def f(logits, tgt, il, tl, zi=zi):
            return F.ctc_loss(
                logits.log_softmax(-1), tgt, il, tl, reduction="none", zero_infinity=zi
            )

        logits, tgt = _ctc_inputs()
        tgt[1] = torch.tensor([1, 1, 1, 1])
        out = C(f)(logits, tgt, torch.tensor([8, 3, 6]), torch.tensor([4, 4, 3]))
        rec(f"{zi} out", out)
        out.sum().backward()
        rec(f"{zi} grad", logits.grad)


@scenario
def ctc_lengths_as_lists(C, rec):
    def f(logits, tgt):
        return F.ctc_loss(logits.log_softmax(-1), tgt, [8, 7, 6], [4, 2, 3])

    logits, tgt = _ctc_inputs()
    out = C(f)(logits, tgt)
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


@scenario
def ctc_module_int32_targets(C, rec):
    crit = nn.CTCLoss(blank=0, zero_infinity=True)

    def f(logits, tgt, il, tl):
        return crit(logits.log_softmax(-1), tgt, il, tl)

    logits, tgt = _ctc_inputs()
    out = C(f)(logits, tgt.int(), torch.tensor([8, 7, 6]).int(), torch.tensor([4, 2, 3]).int())
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


@scenario
def ctc_unbatched(C, rec):
    def f(logits, tgt):
        return F.ctc_loss(logits.log_softmax(-1), tgt, torch.tensor(8), torch.tensor(3))

    logits = leaf(8, 5)
    out = C(f)(logits, torch.tensor([1, 2, 2]))
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


# ============================================================================================
# attention and transformers


@scenario
def mha_kdim_vdim_per_head_weights_float_kpm(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, kdim=5, vdim=6, batch_first=True))
    cm = C(m)
    q, k, v = leaf(2, 3, 8), leaf(2, 4, 5, seed=1), leaf(2, 4, 6, seed=2)
    kpm = torch.zeros(2, 4)
    kpm[0, 3] = float("-inf")
    kpm[1, 1] = -2.0
    out, w = cm(q, k, v, key_padding_mask=kpm, need_weights=True, average_attn_weights=False)
    rec("out", [out, w])
    wsum([out, w]).backward()
    rec("grads", [q.grad, k.grad, v.grad])
    rec("pgrads", grads(m))


@scenario
def mha_eval_fastpath_kpm_bool(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, batch_first=True)).eval()
    x = leaf(2, 4, 8, rg=False)
    kpm = torch.tensor([[False, False, True, True], [False, False, False, False]])
    with torch.no_grad():
        out, w = C(m)(x, x, x, key_padding_mask=kpm, need_weights=False)
    rec("out", [out, w])


@scenario
def mha_3d_bool_attn_mask(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2))
    q = leaf(3, 2, 8)
    am = torch.rand(4, 3, 3, generator=torch.Generator().manual_seed(0)) > 0.6
    am[:, :, 0] = False
    out, w = C(m)(q, q, q, attn_mask=am)
    rec("out", [out, w])
    wsum([out, w]).backward()
    rec("grad", q.grad)


@scenario
def mha_causal_is_causal_flag(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, batch_first=True))

    def f(x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        return m(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]

    x = leaf(2, 4, 8)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def square_mask_dtype_device(C, rec):
    def f(x):
        m1 = nn.Transformer.generate_square_subsequent_mask(x.size(0), dtype=torch.float64)
        m2 = nn.Transformer.generate_square_subsequent_mask(3, device=x.device)
        return m1, m2, x + m2[: x.size(0), : x.size(0)]

    rec("out", C(f)(leaf(3, 3, rg=False)))


@scenario
def decoder_all_masks(C, rec):
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    m = mk(lambda: nn.TransformerDecoder(layer, 2))

    def f(tgt, mem, tkpm, mkpm):
        L = tgt.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(L)
        return m(
            tgt,
            mem,
            tgt_mask=mask,
            tgt_key_padding_mask=tkpm,
            memory_key_padding_mask=mkpm,
            tgt_is_causal=True,
        )

    tgt, mem = leaf(2, 4, 8), leaf(2, 5, 8, seed=1)
    tkpm = torch.tensor([[False, False, False, True], [False] * 4])
    mkpm = torch.tensor([[False, False, True, True, True], [False] * 5])
    out = C(f)(tgt, mem, tkpm, mkpm)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [tgt.grad, mem.grad])
    rec("pgrads", grads(m))


@scenario
def encoder_nested_eval_nograd_kpm(C, rec):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    m = mk(lambda: nn.TransformerEncoder(layer, 2, enable_nested_tensor=True)).eval()
    x = leaf(3, 5, 8, rg=False)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True], [False] * 4 + [True]])
    with torch.no_grad():
        out = C(m)(x, src_key_padding_mask=kpm)
    rec("out", out)


@scenario
def encoder_float_kpm_train(C, rec):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True)
    m = mk(lambda: nn.TransformerEncoder(layer, 2, enable_nested_tensor=False))
    x = leaf(5, 2, 8)
    kpm = torch.zeros(2, 5)
    kpm[1, 3:] = float("-inf")
    out = C(m)(x, src_key_padding_mask=kpm)
    rec("out", out)
    wsum(out).backward()
    rec("grad", x.grad)


@scenario
def transformer_full_eval_nograd(C, rec):
    m = mk(lambda: nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, batch_first=True)).eval()
    src, tgt = leaf(2, 5, 8, rg=False), leaf(2, 4, 8, rg=False, seed=1)
    skpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        out = C(m)(
            src,
            tgt,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(4),
            src_key_padding_mask=skpm,
            memory_key_padding_mask=skpm,
        )
    rec("out", out)


# ============================================================================================
# decoding


@scenario
def greedy_decode_gru(C, rec):
    emb = mk(lambda: nn.Embedding(7, 4))
    cell = mk(lambda: nn.GRU(4, 6, batch_first=True), seed=1)
    proj = mk(lambda: nn.Linear(6, 7), seed=2)

    @torch.no_grad()
    def decode(start, hcur, steps: int = 5, eos: int = 3):
        tok = start
        out = []
        done = torch.zeros_like(start, dtype=torch.bool)
        for _ in range(steps):
            o, hcur = cell(emb(tok).unsqueeze(1), hcur)
            nxt = proj(o[:, -1]).argmax(-1)
            nxt = torch.where(done, torch.zeros_like(nxt), nxt)
            done = done | (nxt == eos)
            out.append(nxt)
            tok = nxt
        return torch.stack(out, 1), done, hcur

    rec("out", C(decode)(torch.tensor([1, 2, 5]), leaf(1, 3, 6, rg=False)))


@scenario
def beam_search_lstm(C, rec):
    V, H, B, K = 9, 5, 2, 3
    emb = mk(lambda: nn.Embedding(V, 4))
    lstm = mk(lambda: nn.LSTM(4, H, num_layers=2), seed=1)
    proj = mk(lambda: nn.Linear(H, V), seed=2)

    @torch.no_grad()
    def beam(h0, c0, steps: int = 4, eos: int = 2):
        hcur = h0.repeat_interleave(K, dim=1)
        ccur = c0.repeat_interleave(K, dim=1)
        tok = torch.ones(B * K, dtype=torch.long)
        scores = torch.zeros(B, K)
        scores[:, 1:] = float("-inf")
        finished = torch.zeros(B * K, dtype=torch.bool)
        hist = []
        for _ in range(steps):
            o, (hcur, ccur) = lstm(emb(tok).unsqueeze(0), (hcur, ccur))
            logp = proj(o[0]).log_softmax(-1)
            logp = torch.where(
                finished.unsqueeze(1),
                torch.full_like(logp, float("-inf")).index_fill(1, torch.tensor([0]), 0.0),
                logp,
            )
            cand = (scores.view(-1, 1) + logp).view(B, K * V)
            top, idx = cand.topk(K, dim=-1)
            beam_idx = torch.div(idx, V, rounding_mode="floor")
            tok = (idx % V).view(-1)
            flat = (beam_idx + torch.arange(B).unsqueeze(1) * K).view(-1)
            hcur = hcur.index_select(1, flat)
            ccur = ccur[:, flat]
            finished = finished.gather(0, flat) | (tok == eos)
            hist = [hh.gather(0, flat) for hh in hist] + [tok]
            scores = top
        return torch.stack(hist, 1), scores, finished, hcur

    h0, c0 = leaf(2, B, H, rg=False), leaf(2, B, H, seed=1, rg=False)
    rec("out", C(beam)(h0, c0))


@scenario
def topk_sampling_filter(C, rec):
    def f(logits, k: int = 3):
        v, _ = torch.topk(logits, k)
        logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
        probs = F.softmax(logits, dim=-1)
        return probs, probs.argmax(-1, keepdim=True)

    rec("out", C(f)(leaf(3, 8, rg=False)))


@scenario
def gather_states_by_beam_grad(C, rec):
    def f(hs, beam_idx):
        sel = hs.gather(1, beam_idx[:, :, None].expand(-1, -1, hs.size(-1)))
        return sel.tanh().sum()

    hs = leaf(2, 4, 3)
    out = C(f)(hs, torch.tensor([[0, 0, 3], [1, 2, 2]]))
    rec("out", out)
    out.backward()
    rec("grad", hs.grad)


# ============================================================================================
# session 33, second round


@scenario
def lstm_dropout_one_changing_lengths(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0, batch_first=True))
    cm = C(m)
    for i, t in enumerate((5, 7, 6)):
        x = leaf(2, t, 3, seed=i)
        out, (hn, cn) = cm(x)
        rec(f"{i} out", [out, hn, cn])
        wsum([out, hn, cn]).backward()
        rec(f"{i} grad", x.grad)
        rec(f"{i} pgrads", grads(m))
        m.zero_grad()


@scenario
def lstm_dropout_one_autocast(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0))
    x = leaf(5, 2, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (hn, cn) = C(m)(x)
    rec("dtypes", [out.dtype, hn.dtype, cn.dtype])
    rec("layer2 input dropped", torch.equal(out[:, 0], out[:, 1]))


@scenario
def lstm_dropout_one_functional_call(C, rec):
    m = mk(lambda: nn.GRU(3, 4, num_layers=2, dropout=1.0))
    ps = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}

    def f(ps, x):
        return torch.func.functional_call(m, ps, (x,))[0].sum()

    out = C(f)(ps, leaf(5, 2, 3))
    rec("out", out)
    out.backward()
    rec("grads", {k: v.grad for k, v in ps.items()})


@scenario
def stateful_hidden_attribute(C, rec):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 3)
            self.rnn = nn.LSTM(3, 4, batch_first=True)
            self.out = nn.Linear(4, 10)
            self.hidden = None

        def forward(self, tok):
            o, hid = self.rnn(self.emb(tok), self.hidden)
            self.hidden = tuple(t.detach() for t in hid)
            return self.out(o)

    m = mk(LM)
    cm = C(m)
    for i in range(3):
        logits = cm(ids(2, 4, seed=i))
        loss = F.cross_entropy(logits.flatten(0, 1), ids(8, seed=10 + i))
        loss.backward()
        rec(f"{i} loss", loss)
        rec(f"{i} hidden", list(m.hidden))
        rec(f"{i} hidden grad", [t.requires_grad for t in m.hidden])
    rec("grads", grads(m))


@scenario
def emb_max_norm_buffer_weight(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(6, 3) * 3)

        def forward(self, t):
            return F.embedding(t, self.table, max_norm=1.0).sum(-1)

    m = mk(M)
    out = C(m)(ids(2, 3, hi=6))
    rec("out", out)
    rec("table", m.table)


@scenario
def emb_from_pretrained_max_norm(C, rec):
    emb = nn.Embedding.from_pretrained(leaf(6, 3, rg=False) * 3, max_norm=1.0)
    out = C(emb)(ids(2, 3, hi=6))
    rec("out", out)
    rec("weight", emb.weight)


@scenario
def emb_max_norm_linear_tied_module(C, rec):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(8, 4, max_norm=1.0)
            self.head = nn.Linear(4, 8, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, t):
            return self.head(torch.tanh(self.emb(t)))

    m = mk(Tied)
    with torch.no_grad():
        m.emb.weight.mul_(3)
    cm = C(m)
    for i in range(2):
        out = cm(ids(2, 3, hi=8, seed=i))
        rec(f"{i} out", out)
        wsum(out).backward()
        rec(f"{i} grads", grads(m))
        rec(f"{i} weight", m.emb.weight)
        m.zero_grad()


@scenario
def mha_add_bias_kv_kpm_weights(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True))
    q = leaf(3, 2, 8)
    kpm = torch.tensor([[False, False, True], [False, False, False]])
    out, w = C(m)(q, q, q, key_padding_mask=kpm, average_attn_weights=False)
    rec("out", [out, w])
    wsum([out, w]).backward()
    rec("grad", q.grad)
    rec("pgrads", grads(m))


@scenario
def mha_mixed_mask_types(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    q = leaf(2, 3, 8)
    am = torch.zeros(3, 3)
    am[0, 2] = float("-inf")
    kpm = torch.tensor([[False, False, True], [False, False, False]])
    out, w = C(m)(q, q, q, key_padding_mask=kpm, attn_mask=am)
    rec("out", [out, w])
    wsum([out, w]).backward()
    rec("grad", q.grad)


@scenario
def tel_eval_fastpath_float_kpm(C, rec):
    m = mk(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)).eval()
    x = leaf(2, 4, 8, rg=False)
    kpm = torch.zeros(2, 4)
    kpm[0, 3] = float("-inf")
    with torch.no_grad():
        rec("out", C(m)(x, src_key_padding_mask=kpm))


@scenario
def tel_eval_fastpath_causal(C, rec):
    m = mk(lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True)).eval()
    x = leaf(2, 4, 8, rg=False)
    with torch.no_grad():
        rec(
            "out",
            C(m)(x, src_mask=nn.Transformer.generate_square_subsequent_mask(4), is_causal=True),
        )


@scenario
def ctc_float64(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl, reduction="sum")

    logits = leaf(8, 3, 5).double().detach().requires_grad_()
    tgt = ids(3, 4, hi=4) + 1
    out = C(f)(logits, tgt, torch.tensor([8, 7, 6]), torch.tensor([4, 2, 3]))
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


@scenario
def ctc_input_length_too_long_raises(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl)

    logits, tgt = _ctc_inputs()
    rec("out", C(f)(logits, tgt, torch.tensor([9, 7, 6]), torch.tensor([4, 2, 3])))


@scenario
def ctc_repeated_labels_short_input(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl, reduction="none")

    logits = leaf(6, 2, 4)
    tgt = torch.tensor([[1, 1, 1], [2, 3, 2]])
    out = C(f)(logits, tgt, torch.tensor([5, 6]), torch.tensor([3, 3]))
    rec("out", out)
    out.sum().backward()
    rec("grad", logits.grad)


@scenario
def embbag_offsets_not_zero_raises(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3))
    rec("out", C(bag)(torch.tensor([1, 2, 3]), torch.tensor([1, 2])))


@scenario
def embbag_psw_mean_raises(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3, mode="mean"))
    rec("out", C(bag)(torch.tensor([1, 2, 3]), torch.tensor([0, 2]), leaf(3)))


@scenario
def lstm_h0_from_encoder_seq2seq(C, rec):
    enc = mk(lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True))
    dec = mk(lambda: nn.LSTM(3, 8, num_layers=2, batch_first=True), seed=1)

    def f(src, tgt):
        _, (h, c) = enc(src)
        h = h.view(2, 2, src.size(0), 4).transpose(1, 2).reshape(2, src.size(0), 8)
        c = c.view(2, 2, src.size(0), 4).permute(0, 2, 1, 3).flatten(2)
        out, _ = dec(tgt, (h.contiguous(), c.contiguous()))
        return out

    src, tgt = leaf(2, 5, 3), leaf(2, 4, 3, seed=1)
    out = C(f)(src, tgt)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [src.grad, tgt.grad])
    rec("pgrads", {**grads(enc), **grads(dec)})


@scenario
def gru_h0_noncontig(C, rec):
    m = mk(lambda: nn.GRU(3, 4, num_layers=2))
    base = leaf(3, 2, 4)  # (batch, layers, hidden)
    out, hn = C(m)(leaf(5, 3, 3, seed=1), base.transpose(0, 1))
    rec("out", [out, hn])
    wsum([out, hn]).backward()
    rec("grad", base.grad)


@scenario
def emb_max_norm_inf_norm_dupes(C, rec):
    w = (leaf(8, 3) * 3).detach().requires_grad_()

    def f(t):
        return F.embedding(t, w, max_norm=1.0, norm_type=float("inf"))

    out = C(f)(torch.tensor([[1, 1, 2], [7, 2, 1]]))
    rec("out", out)
    rec("w", w)
    wsum(out).backward()
    rec("grad", w.grad)


@scenario
def emb_max_norm_nonleaf_weight(C, rec):
    base = leaf(8, 3)

    def f(t):
        w = base * 2
        e = F.embedding(t, w, max_norm=1.0)
        return e, w

    out = C(f)(ids(2, 3, hi=8))
    rec("out", out)
    wsum(out).backward()
    rec("grad", base.grad)


@scenario
def emb_max_norm_weight_view_of_base(C, rec):
    big = leaf(8, 5, rg=False) * 3

    def f(t):
        return F.embedding(t, big[:, 1:4], max_norm=1.0)

    out = C(f)(ids(2, 3, hi=8))
    rec("out", out)
    rec("big", big)


@scenario
def emb_max_norm_row_exactly_at_norm(C, rec):
    w = torch.tensor([[3.0, 4.0], [0.6, 0.8], [6.0, 8.0]])

    def f(t):
        return F.embedding(t, w, max_norm=1.0) + F.embedding(t, w, max_norm=5.0)

    rec("out", C(f)(torch.tensor([0, 1, 2, 2])))
    rec("w", w)


@scenario
def emb_max_norm_scale_grad_by_freq_padding(C, rec):
    emb = mk(lambda: nn.Embedding(8, 3, max_norm=1.0, scale_grad_by_freq=True, padding_idx=1))
    with torch.no_grad():
        emb.weight.mul_(3)
    t = torch.tensor([[1, 2, 2, 3], [3, 3, 3, 1]])
    out = C(emb)(t)
    rec("out", out)
    rec("w", emb.weight)
    wsum(out).backward()
    rec("grad", emb.weight.grad)


@scenario
def embbag_max_norm_psw_sum(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(8, 3, max_norm=1.0, mode="sum"))
    with torch.no_grad():
        bag.weight.mul_(3)
    psw = leaf(6)
    out = C(bag)(torch.tensor([1, 2, 2, 5, 7, 1]), torch.tensor([0, 3]), per_sample_weights=psw)
    rec("out", out)
    rec("w", bag.weight)
    wsum(out).backward()
    rec("grads", [bag.weight.grad, psw.grad])


def _half_rnn(cls, dt, **kw):
    def fn(C, rec):
        m = mk(lambda: cls(3, 4, **kw)).to(dt)
        x = leaf(5, 2, 3).to(dt).detach().requires_grad_()
        out = C(m)(x)
        rec("out", out)
        wsum([out[0]]).backward()
        rec("grad", x.grad)
        rec("pgrads", grads(m))

    return fn


for _cls in (nn.LSTM, nn.GRU):
    for _dt in (torch.bfloat16, torch.float16):
        _name = f"half_{_cls.__name__.lower()}_{str(_dt)[6:]}"
        SCENARIOS[_name] = _half_rnn(_cls, _dt, num_layers=2)


def _edge_rnn(cls, shape, **kw):
    def fn(C, rec):
        m = mk(lambda: cls(3, 4, **kw))
        x = leaf(*shape)
        out = C(m)(x)
        rec("out", out)
        if x.numel():
            wsum([out[0]]).backward()
            rec("grad", x.grad)

    return fn


for _cls in (nn.LSTM, nn.GRU, nn.RNN):
    _n = _cls.__name__.lower()
    SCENARIOS[f"edge_{_n}_zero_steps"] = _edge_rnn(_cls, (0, 2, 3))
    SCENARIOS[f"edge_{_n}_zero_batch"] = _edge_rnn(_cls, (5, 0, 3))
    SCENARIOS[f"edge_{_n}_one_step_bidir"] = _edge_rnn(_cls, (1, 2, 3), bidirectional=True)


@scenario
def lstmcell_bad_hx_raises(C, rec):
    cell = mk(lambda: nn.LSTMCell(3, 4))
    rec("out", C(cell)(leaf(2, 3), (leaf(3, 4), leaf(2, 4))))


@scenario
def grucell_3d_input_raises(C, rec):
    cell = mk(lambda: nn.GRUCell(3, 4))
    rec("out", C(cell)(leaf(2, 2, 3)))


@scenario
def ctc_zero_target_length(C, rec):
    for red in ("mean", "none"):

        def f(logits, tgt, il, tl, red=red):
            return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl, reduction=red)

        logits, tgt = _ctc_inputs()
        out = C(f)(logits, tgt, torch.tensor([8, 7, 6]), torch.tensor([4, 0, 3]))
        rec(f"{red} out", out)
        out.sum().backward()
        rec(f"{red} grad", logits.grad)


@scenario
def ctc_raw_logits_not_normalized(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits, tgt, il, tl, reduction="sum")

    logits, tgt = _ctc_inputs()
    out = C(f)(logits, tgt, torch.tensor([8, 7, 6]), torch.tensor([4, 2, 3]))
    rec("out", out)
    out.backward()
    rec("grad", logits.grad)


@scenario
def gru_dropout_one_h0_bidir_bf(C, rec):
    m = mk(lambda: nn.GRU(3, 4, num_layers=3, dropout=1.0, bidirectional=True, batch_first=True))
    x, h0 = leaf(2, 5, 3), leaf(6, 2, 4, seed=1)
    out, hn = C(m)(x, h0)
    rec("out", [out, hn])
    wsum([out, hn]).backward()
    rec("grads", [x.grad, h0.grad])
    rec("pgrads", grads(m))


@scenario
def lstm_dropout_one_nograd_train(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0))
    with torch.no_grad():
        rec("out", C(m)(leaf(5, 2, 3, rg=False)))


@scenario
def attention_pooling_lengths(C, rec):
    att = mk(lambda: nn.Linear(4, 1))

    def f(hs, lengths):
        mask = torch.arange(hs.size(1))[None, :] < lengths[:, None]
        scores = att(hs).squeeze(-1).masked_fill(~mask, float("-inf"))
        w = scores.softmax(-1)
        return (w.unsqueeze(-1) * hs).sum(1), w

    hs = leaf(3, 5, 4)
    out = C(f)(hs, torch.tensor([5, 1, 3]))
    rec("out", out)
    wsum(out).backward()
    rec("grads", [hs.grad, *grads(att).values()])


@scenario
def mha_dropout_one_train(C, rec):
    m = mk(lambda: nn.MultiheadAttention(8, 2, dropout=1.0, batch_first=True))
    for nw in (True, False):
        q = leaf(2, 3, 8)
        out, w = C(m)(q, q, q, need_weights=nw)
        rec(f"{nw} out", [out, w])
        wsum([out]).backward()
        rec(f"{nw} grads", [q.grad, *grads(m).values()])
        m.zero_grad()


@scenario
def tel_dropout_one_train(C, rec):
    m = mk(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=1.0, batch_first=True))
    x = leaf(2, 3, 8)
    out = C(m)(x)
    rec("out", out)
    wsum(out).backward()
    rec("grads", [x.grad, *grads(m).values()])


@scenario
def lstm_dropout_one_dynamic(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0))
    cm = C(m, dynamic=True)
    for i, (t, b) in enumerate(((5, 2), (7, 3))):
        x = leaf(t, b, 3, seed=i)
        out, (hn, cn) = cm(x)
        rec(f"{i} out", [out, hn, cn])
        wsum([out, hn, cn]).backward()
        rec(f"{i} grad", x.grad)


class WeightDrop(nn.Module):
    """AWD-LSTM's weight drop: the raw recurrent weight a parameter, the LSTM's weight a
    dropped-out tensor set before each call."""

    def __init__(self, module, p):
        super().__init__()
        self.module, self.p = module, p
        w = module.weight_hh_l0
        del module._parameters["weight_hh_l0"]
        module.register_parameter("weight_hh_l0_raw", nn.Parameter(w.data))

    def forward(self, x):
        w = F.dropout(self.module.weight_hh_l0_raw, p=self.p, training=self.training)
        self.module.weight_hh_l0 = w
        return self.module(x)


@scenario
def awd_weight_drop(C, rec):
    for p in (1.0, 0.0):
        m = mk(lambda p=p: WeightDrop(nn.LSTM(3, 4), p))
        cm = C(m)
        for mode in ("train", "eval"):
            m.train(mode == "train")
            x = leaf(5, 2, 3)
            out, (hn, cn) = cm(x)
            rec(f"{p} {mode} out", [out, hn, cn])
            wsum([out, hn, cn]).backward()
            rec(f"{p} {mode} grads", [x.grad, *grads(m).values()])
            m.zero_grad()


@scenario
def lstm_weight_norm_parametrized(C, rec):
    from torch.nn.utils import parametrizations

    m = mk(lambda: parametrizations.weight_norm(nn.LSTM(3, 4), "weight_hh_l0"))
    cm = C(m)
    x = leaf(5, 2, 3)
    out, (hn, cn) = cm(x)
    rec("out", [out, hn, cn])
    wsum([out, hn, cn]).backward()
    rec("grads", [x.grad, *grads(m).values()])


@scenario
def lstm_param_reassigned(C, rec):
    m = mk(lambda: nn.LSTM(3, 4))
    cm = C(m)
    x = leaf(5, 2, 3, rg=False)
    rec("0", cm(x))
    m.weight_hh_l0 = nn.Parameter(m.weight_hh_l0.detach() * 0.5)
    out = cm(x)
    rec("1", out)
    out[0].sum().backward()
    rec("grads", grads(m))


@scenario
def lstm_weight_data_swapped(C, rec):
    m = mk(lambda: nn.LSTM(3, 4))
    cm = C(m)
    x = leaf(5, 2, 3, rg=False)
    rec("0", cm(x))
    m.weight_ih_l0.data = m.weight_ih_l0.data * -1
    rec("1", cm(x))


@scenario
def encoder_nested_inference_mode(C, rec):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    m = mk(lambda: nn.TransformerEncoder(layer, 2)).eval()
    x = leaf(3, 5, 8, rg=False)
    kpm = torch.tensor([[False] * 5, [False, False, True, True, True], [False] * 4 + [True]])
    with torch.inference_mode():
        out = C(m)(x, src_key_padding_mask=kpm)
    rec("out", out)
    rec("inference", out.is_inference())


@scenario
def encoder_nested_mask_check_false(C, rec):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=False)
    m = mk(lambda: nn.TransformerEncoder(layer, 2, mask_check=False)).eval()
    x = leaf(2, 5, 8, rg=False)
    kpm = torch.tensor([[False, False, False, True, True], [False] * 5])
    with torch.no_grad():
        out = C(m)(x, src_key_padding_mask=kpm)
    rec("out", out)


@scenario
def encoder_fastpath_lstm_stack_inference(C, rec):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 8, padding_idx=0)
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 1)
            self.rnn = nn.GRU(8, 4, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(8, 3)

        def forward(self, tok):
            pad = tok == 0
            h = self.enc(self.emb(tok), src_key_padding_mask=pad)
            o, _ = self.rnn(h)
            o = o.masked_fill(pad.unsqueeze(-1), 0)
            return self.fc(o.sum(1) / (~pad).sum(1, keepdim=True))

    m = mk(Model).eval()
    tok = ids(3, 6, hi=12)
    tok[1, 4:] = 0
    tok[2, 2:] = 0
    tok[:, 0] = 5
    with torch.inference_mode():
        rec("out", C(m)(tok))


@scenario
def bahdanau_seq2seq_teacher_forcing(C, rec):
    class S2S(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(9, 4, padding_idx=0)
            self.enc = nn.GRU(4, 5, batch_first=True, bidirectional=True)
            self.cell = nn.GRUCell(4 + 10, 5)
            self.wa = nn.Linear(10, 5, bias=False)
            self.ua = nn.Linear(5, 5)
            self.va = nn.Linear(5, 1, bias=False)
            self.out = nn.Linear(5, 9)

        def forward(self, src, tgt):
            smask = src != 0
            enc, hn = self.enc(self.emb(src))
            hcur = hn[0] + hn[1]
            keys = self.wa(enc)
            loss = enc.new_zeros(())
            for t in range(tgt.size(1) - 1):
                e = self.va(torch.tanh(keys + self.ua(hcur).unsqueeze(1))).squeeze(-1)
                a = e.masked_fill(~smask, -1e9).softmax(-1)
                ctxv = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
                hcur = self.cell(torch.cat([self.emb(tgt[:, t]), ctxv], -1), hcur)
                loss = loss + F.cross_entropy(self.out(hcur), tgt[:, t + 1], ignore_index=0)
            return loss

    m = mk(S2S)
    src = torch.tensor([[3, 4, 5, 0], [2, 2, 0, 0]])
    tgt = torch.tensor([[1, 6, 7, 2], [1, 8, 2, 0]])
    loss = C(m)(src, tgt)
    rec("loss", loss)
    loss.backward()
    rec("grads", grads(m))


@scenario
def one_hot_int32_raises(C, rec):
    rec("out", C(lambda t: F.one_hot(t, 4))(torch.tensor([1, 2], dtype=torch.int32)))


@scenario
def ctc_bf16(C, rec):
    def f(logits, tgt, il, tl):
        return F.ctc_loss(logits.log_softmax(-1), tgt, il, tl)

    logits, tgt = _ctc_inputs()
    logits = logits.to(torch.bfloat16).detach().requires_grad_()
    out = C(f)(logits, tgt, torch.tensor([8, 7, 6]), torch.tensor([4, 2, 3]))
    rec("out", out)


@scenario
def embbag_int32_input_int64_offsets(C, rec):
    bag = mk(lambda: nn.EmbeddingBag(10, 3))
    out = C(bag)(torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([0, 2]))
    rec("out", out)


@scenario
def emb_int32_max_norm(C, rec):
    emb = mk(lambda: nn.Embedding(10, 3, max_norm=0.5))
    out = C(emb)(ids(2, 3).int())
    rec("out", out)
    rec("w", emb.weight)


@scenario
def beam_topk_ties(C, rec):
    # an untrained (uniform) model: every candidate tied
    def f(scores, k: int = 5):
        return scores.topk(k, dim=-1)

    rec("out", C(f)(torch.tensor([[1.0, 3, 3, 2, 3, 1, 3, 0, 3, 3, 3, 3]])))


@scenario
def lstm_with_data_dependent_partition(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, batch_first=True))

    def f(x, keep):
        out, (hn, _) = m(x)
        sel = out[keep]  # boolean mask: a data-dependent shape
        return sel.tanh().sum() + hn.sum(), sel.shape[0]

    x = leaf(3, 5, 3)
    keep = torch.tensor([[True, False, True, True, False]] * 3)
    loss, n = C(f)(x, keep)
    rec("out", [loss, n])
    loss.backward()
    rec("grads", [x.grad, *grads(m).values()])


@scenario
def lstm_double_backward_grad_penalty(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2))

    def f(x):
        out, _ = m(x)
        (g,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
        return out.sum() + g.pow(2).sum()

    x = leaf(4, 2, 3)
    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("grads", [x.grad, *grads(m).values()])


@scenario
def gru_create_graph_outside(C, rec):
    m = mk(lambda: nn.GRU(3, 4, batch_first=True))
    x = leaf(2, 4, 3)
    out, _ = C(m)(x)
    (g,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    rec("g", g)
    g.pow(2).sum().backward()
    rec("grads", [x.grad, *grads(m).values()])


@scenario
def lstm_vmap_over_models(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, batch_first=True))
    ps = {k: torch.stack([v.detach(), v.detach() * 0.5]) for k, v in m.named_parameters()}

    def f(ps, x):
        return torch.func.vmap(lambda p: torch.func.functional_call(m, p, (x,))[0])(ps)

    rec("out", C(f)(ps, leaf(2, 5, 3, rg=False)))


@scenario
def grucell_jacrev(C, rec):
    cell = mk(lambda: nn.GRUCell(3, 4))

    def f(x, hcur):
        return torch.func.jacrev(lambda hh: cell(x, hh))(hcur)

    rec("out", C(f)(leaf(3, rg=False), leaf(4, seed=1, rg=False)))


@scenario
def lstm_dropout_one_under_func_grad(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0))
    ps = {k: v.detach() for k, v in m.named_parameters()}

    def f(ps, x):
        return torch.func.grad(lambda p: torch.func.functional_call(m, p, (x,))[0].sum())(ps)

    rec("out", C(f)(ps, leaf(5, 2, 3, rg=False)))


def main(argv) -> int:
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = h.compare(n, SCENARIOS[n])
        except Exception as e:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {type(e).__name__}: {e}"
        if not line.startswith("ok") and n in KNOWN:
            line = f"known {n}: {KNOWN[n]}"
        elif not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
