"""torch.nn modules as users use them (session 29): each scenario builds modules, calls them
compiled (``torch.compile(m, backend="xla")``) several times in train and eval, with forward
and backward, and records outputs, every parameter's ``.grad`` (None-ness strict), buffers
(running stats, ``num_batches_tracked``, spectral norm's ``u``/``v``) and parameters after
each call (``max_norm`` renormalizes in place).

    PYTHONPATH=. python scripts/probe_modules29.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_modules29.py   # torch's own

The harness is ``probe_grads26``'s (three runs: compiled and eager in float32, eager with
float64 as the default dtype as the reference). Modules are built in float32 from one seed
and cast to the default dtype, so the reference holds the same weights.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations, parametrize, prune

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import probe_grads26 as h

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
leaf = h.leaf
# Differences that are torch's own (PROBE_BACKEND=aot_eager shows them too).
KNOWN = {
    "te_nested_fastpath": "torch's own: eager's fast path (nested tensors) zeroes padded "
    "positions, Dynamo traces the regular path",
    "te_nested_fastpath_final_norm": "torch's own: as te_nested_fastpath",
    "dropouts_eval": "torch's own: eval dropout returns its input itself in eager; Dynamo's "
    "example value is a clone, the output a new tensor with a grad_fn",
    "dtype_bfloat16_groupnorm_lrn": "the probe's: no float64 reference for half-precision "
    "modules (ours is closer to float64 than eager's)",
}


def mk(ctor, seed=0):
    """``ctor()`` built in float32 from ``seed``, cast to the default dtype."""
    dt = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        torch.manual_seed(seed)
        m = ctor()
    finally:
        torch.set_default_dtype(dt)
    return m.to(dt)


def weights_like(t, seed):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype)


def flat_floats(out):
    if isinstance(out, nn.utils.rnn.PackedSequence):
        return [out.data]
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() and out.requires_grad else []
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flat_floats(o)]
    return []


def observe_out(out):
    """``out``, with the strides of its tensors (where they tell)."""
    if isinstance(out, nn.utils.rnn.PackedSequence):
        return [out.data, out.batch_sizes, out.sorted_indices, out.unsorted_indices]
    if isinstance(out, torch.Tensor):
        return [out, strides(out)]
    if isinstance(out, (list, tuple)):
        return [observe_out(o) for o in out]
    return out


def _n(name):
    return name.replace("_orig_mod.", "")  # (a submodule compiled in place)


def state(m):
    return {
        "params": {_n(n): p.detach().clone() for n, p in m.named_parameters()},
        "buffers": {_n(n): b.clone() for n, b in m.named_buffers()},
    }


def strides(t):
    """``t``'s strides where they tell (dims of size 1 take any)."""
    return tuple(s for n, s in zip(t.shape, t.stride()) if n != 1)


def step(rec, label, cm, m, args, kwargs=None, loss=None, inputs=()):
    """One call of ``cm``: its outputs, the gradients of a weighted sum of its float outputs
    (every parameter's ``.grad``, None-ness included, and ``inputs``'), the module's state."""
    out = cm(*args, **(kwargs or {}))
    rec(f"{label} out", observe_out(out))
    if torch.is_grad_enabled():
        ts = flat_floats(out)
        if loss is not None:
            total = loss(out)
        elif ts:
            total = sum((t * weights_like(t, i)).sum() for i, t in enumerate(ts))
        else:
            total = None
        if total is not None and total.requires_grad:
            total.backward()
        rec(f"{label} grads", {_n(n): p.grad for n, p in m.named_parameters()})
        rec(f"{label} input grads", [x.grad for x in inputs])
        m.zero_grad(set_to_none=True)
        for x in inputs:
            x.grad = None
    rec(f"{label} state", state(m))
    return out


def module_case(name, ctor, make_args, modes=("train", "train", "eval", "nograd"), kw=None):
    """A scenario: ``ctor``'s module called compiled once per mode (``train``/``eval`` with
    backward, ``nograd``: eval under no_grad, ``trainnograd``: train under no_grad), fresh
    leaves from ``make_args(i)`` each call."""

    def fn(C, rec):
        m = mk(ctor)
        cm = C(m)
        for i, mode in enumerate(modes):
            m.train(mode.startswith("train"))
            args = make_args(i)
            kwargs = kw(i) if kw else {}
            leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            if mode.endswith("nograd"):
                with torch.no_grad():
                    step(rec, f"{i} {mode}", cm, m, args, kwargs)
            else:
                step(rec, f"{i} {mode}", cm, m, args, kwargs, inputs=leaves)

    fn.__name__ = name
    SCENARIOS[name] = fn


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def L(*shape, seed=0, rg=True):
    return leaf(*shape, seed=seed, rg=rg)


# ============================================================================================
# normalization

for _n, _ctor, _shape in [
    ("bn1d_momentum_none", lambda: nn.BatchNorm1d(3, momentum=None), (4, 3)),
    ("bn1d_3d_input", lambda: nn.BatchNorm1d(3), (4, 3, 5)),
    ("bn2d_affine_false", lambda: nn.BatchNorm2d(3, affine=False), (2, 3, 4, 4)),
    ("bn2d_no_running", lambda: nn.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 4)),
    ("bn3d", lambda: nn.BatchNorm3d(2, momentum=0.3), (2, 2, 3, 3, 3)),
    (
        "bn2d_momentum_none_affine_false",
        lambda: nn.BatchNorm2d(3, momentum=None, affine=False),
        (2, 3, 2, 2),
    ),
    ("in1d_track", lambda: nn.InstanceNorm1d(3, track_running_stats=True), (2, 3, 6)),
    (
        "in2d_track_affine",
        lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        (2, 3, 4, 4),
    ),
    ("in2d_affine", lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4)),
    ("in3d", lambda: nn.InstanceNorm3d(2), (2, 2, 3, 3, 3)),
    ("in1d_unbatched_track", lambda: nn.InstanceNorm1d(3, track_running_stats=True), (3, 6)),
    ("groupnorm", lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    ("groupnorm_noaffine", lambda: nn.GroupNorm(1, 4, affine=False), (2, 4, 5)),
    ("layernorm_noaffine", lambda: nn.LayerNorm([3, 4], elementwise_affine=False), (2, 3, 4)),
    ("layernorm_nobias", lambda: nn.LayerNorm(4, bias=False), (2, 3, 4)),
    ("rmsnorm", lambda: nn.RMSNorm(4), (2, 3, 4)),
    ("rmsnorm_eps_none_noaffine", lambda: nn.RMSNorm([3, 4], elementwise_affine=False), (2, 3, 4)),
    ("lrn", lambda: nn.LocalResponseNorm(3), (2, 5, 3, 3)),
    ("lrn_3d", lambda: nn.LocalResponseNorm(2, alpha=0.1, beta=0.5, k=2.0), (2, 4, 6)),
    ("cross_map_lrn", lambda: nn.CrossMapLRN2d(3), (2, 5, 3, 3)),
]:
    module_case(_n, _ctor, lambda i, s=_shape: (L(*s, seed=i),))


@scenario
def bn_eval_batch_of_one(C, rec):
    m = mk(lambda: nn.BatchNorm1d(3))
    cm = C(m)
    step(rec, "train", cm, m, (L(4, 3),))
    m.eval()
    step(rec, "eval 1", cm, m, (L(1, 3, seed=1),))
    m.train()
    step(rec, "train 1 raises", cm, m, (L(1, 3, seed=2),))


@scenario
def bn_train_eval_toggle_requires_grad(C, rec):
    m = mk(lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()))
    cm = C(m)
    for i in range(5):
        m.train(i % 2 == 0)
        m[1].weight.requires_grad_(i < 3)
        m[0].bias.requires_grad_(i != 2)
        step(rec, f"call {i}", cm, m, (L(2, 2, 5, 5, seed=i),))
        if i == 1:
            with torch.no_grad():
                step(rec, "nograd", cm, m, (L(2, 2, 5, 5, seed=9, rg=False),))


@scenario
def bn_channels_last_noncontig(C, rec):
    m = mk(lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)))
    cm = C(m)
    x = L(2, 3, 5, 5).detach().to(memory_format=torch.channels_last).requires_grad_()
    step(rec, "cl", cm, m, (x,), inputs=(x,))
    y = L(2, 5, 5, 3, seed=1)
    step(rec, "perm", cm, m, (y.permute(0, 3, 1, 2),), inputs=(y,))
    z = L(2, 3, 10, 5, seed=2)
    step(rec, "strided", cm, m, (z[:, :, ::2],), inputs=(z,))


@scenario
def sync_bn_falls_back(C, rec):
    m = mk(lambda: nn.SyncBatchNorm(3))
    cm = C(m)
    m.eval()
    step(rec, "eval", cm, m, (L(2, 3, 4),))


@scenario
def lazy_modules(C, rec):
    m = nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d())
    torch.manual_seed(0)
    m(torch.zeros(2, 5))  # materialize eagerly (seeded)
    m = mk(lambda: m)
    cm = C(m)
    step(rec, "a", cm, m, (L(4, 5),))


# ============================================================================================
# embeddings


def idx(*shape, hi=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, hi, shape, generator=g)


module_case(
    "emb_padding_idx",
    lambda: nn.Embedding(10, 3, padding_idx=2),
    lambda i: (torch.tensor([[2, 1, 2], [5, 2, 9]]),),
)
module_case(
    "emb_padding_idx_neg",
    lambda: nn.Embedding(10, 3, padding_idx=-1),
    lambda i: (torch.tensor([[9, 1, 9], [5, 2, 9]]),),
)
module_case(
    "emb_max_norm", lambda: nn.Embedding(10, 3, max_norm=1.0), lambda i: (idx(2, 4, seed=i),)
)
module_case(
    "emb_max_norm_type1",
    lambda: nn.Embedding(10, 3, max_norm=0.5, norm_type=1.0),
    lambda i: (idx(2, 4, seed=i),),
)
module_case(
    "emb_scale_grad_by_freq",
    lambda: nn.Embedding(10, 3, scale_grad_by_freq=True),
    lambda i: (torch.tensor([[1, 1, 2], [1, 3, 2]]),),
)
module_case(
    "emb_scale_freq_padding",
    lambda: nn.Embedding(10, 3, scale_grad_by_freq=True, padding_idx=1),
    lambda i: (torch.tensor([[1, 1, 2], [1, 3, 2]]),),
)
module_case(
    "emb_max_norm_padding",
    lambda: nn.Embedding(10, 3, max_norm=0.8, padding_idx=0),
    lambda i: (torch.tensor([[0, 1, 1], [4, 0, 2]]),),
)
module_case("emb_int32_idx", lambda: nn.Embedding(10, 3), lambda i: (idx(2, 4, seed=i).int(),))
module_case(
    "emb_from_pretrained_frozen",
    lambda: nn.Embedding.from_pretrained(torch.randn(6, 3), padding_idx=0),
    lambda i: (idx(3, hi=6, seed=i),),
)

for _mode in ("sum", "mean", "max"):
    module_case(
        f"embbag_{_mode}_offsets",
        lambda m=_mode: nn.EmbeddingBag(10, 3, mode=m),
        lambda i: (idx(7, seed=i), torch.tensor([0, 2, 2, 5])),
    )
    module_case(
        f"embbag_{_mode}_2d",
        lambda m=_mode: nn.EmbeddingBag(10, 3, mode=m),
        lambda i: (idx(3, 4, seed=i),),
    )
    module_case(
        f"embbag_{_mode}_padding",
        lambda m=_mode: nn.EmbeddingBag(10, 3, mode=m, padding_idx=2),
        lambda i: (torch.tensor([2, 1, 2, 2, 5, 7]), torch.tensor([0, 2, 3])),
    )
    module_case(
        f"embbag_{_mode}_last_offset",
        lambda m=_mode: nn.EmbeddingBag(10, 3, mode=m, include_last_offset=True),
        lambda i: (idx(7, seed=i), torch.tensor([0, 2, 2, 7])),
    )
module_case(
    "embbag_sum_psw",
    lambda: nn.EmbeddingBag(10, 3, mode="sum"),
    lambda i: (idx(7, seed=i), torch.tensor([0, 3, 5]), L(7, seed=i)),
)
module_case(
    "embbag_max_norm",
    lambda: nn.EmbeddingBag(10, 3, max_norm=1.0),
    lambda i: (idx(7, seed=i), torch.tensor([0, 3, 5])),
)
module_case(
    "embbag_scale_freq_mean",
    lambda: nn.EmbeddingBag(10, 3, mode="mean", scale_grad_by_freq=True),
    lambda i: (torch.tensor([1, 1, 2, 1, 3]), torch.tensor([0, 2])),
)


# ============================================================================================
# recurrent


def _rnn_cases():
    for cls in (nn.RNN, nn.GRU, nn.LSTM):
        n = cls.__name__.lower()
        module_case(
            f"{n}_bf_bidir_2layer",
            lambda c=cls: c(3, 4, num_layers=2, batch_first=True, bidirectional=True),
            lambda i: (L(2, 5, 3, seed=i),),
        )
        module_case(
            f"{n}_dropout0_train",
            lambda c=cls: c(3, 4, num_layers=2, dropout=0.0),
            lambda i: (L(5, 2, 3, seed=i),),
        )
        module_case(
            f"{n}_unbatched_h0",
            lambda c=cls: c(3, 4),
            lambda i, c=cls: (
                L(5, 3, seed=i),
                (L(1, 4, seed=9), L(1, 4, seed=8)) if c is nn.LSTM else L(1, 4, seed=9),
            ),
        )
        module_case(
            f"{n}_nobias", lambda c=cls: c(3, 4, bias=False), lambda i: (L(5, 2, 3, seed=i),)
        )

        def packed(i, c=cls):
            x = L(3, 5, 3, seed=i)
            p = nn.utils.rnn.pack_padded_sequence(
                x, torch.tensor([2, 5, 3]), batch_first=True, enforce_sorted=False
            )
            return (p,)

        module_case(f"{n}_packed_unsorted", lambda c=cls: c(3, 4, batch_first=True), packed)
    module_case(
        "lstm_proj",
        lambda: nn.LSTM(3, 5, proj_size=2, num_layers=2),
        lambda i: (L(4, 2, 3, seed=i),),
    )
    module_case(
        "lstm_proj_bidir_bf",
        lambda: nn.LSTM(3, 5, proj_size=2, bidirectional=True, batch_first=True),
        lambda i: (L(2, 4, 3, seed=i),),
    )
    module_case(
        "rnn_relu",
        lambda: nn.RNN(3, 4, nonlinearity="relu", num_layers=2),
        lambda i: (L(4, 2, 3, seed=i),),
    )
    module_case("lstmcell", lambda: nn.LSTMCell(3, 4), lambda i: (L(2, 3, seed=i),))
    module_case(
        "grucell_hx", lambda: nn.GRUCell(3, 4), lambda i: (L(2, 3, seed=i), L(2, 4, seed=i + 5))
    )
    module_case(
        "rnncell_unbatched",
        lambda: nn.RNNCell(3, 4, nonlinearity="relu"),
        lambda i: (L(3, seed=i),),
    )


_rnn_cases()


@scenario
def lstm_packed_roundtrip(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, batch_first=True, bidirectional=True))

    def f(x, lengths):
        p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = m(p)
        y, ls = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
        return y, ls, h, c

    cf = C(f)
    for i in range(2):
        x = L(3, 6, 3, seed=i)
        step(rec, f"{i}", cf, m, (x, torch.tensor([2, 6, 4 - i])), inputs=(x,))


@scenario
def rnn_dropout_train_stats(C, rec):
    m = mk(lambda: nn.GRU(8, 64, num_layers=2, dropout=0.5))
    cm = C(m)
    x = L(3, 4, 8)
    out, _ = cm(x)
    rec("shape", out.shape)
    m.eval()
    out, _h = cm(x)
    rec("eval", out)


# ============================================================================================
# transformers and attention


def _mha_case(name, ctor, args, kw=None, modes=("train", "eval", "nograd")):
    module_case(name, ctor, args, modes=modes, kw=kw)


_mha_case(
    "mha_need_weights",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 8, seed=i + 1), L(4, 2, 8, seed=i + 2)),
)
_mha_case(
    "mha_no_weights_bf",
    lambda: nn.MultiheadAttention(8, 2, batch_first=True),
    lambda i: (L(2, 3, 8, seed=i),) * 3,
    kw=lambda i: {"need_weights": False},
)
_mha_case(
    "mha_per_head_weights",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8, seed=i),) * 3,
    kw=lambda i: {"average_attn_weights": False},
)
_mha_case(
    "mha_kdim_vdim",
    lambda: nn.MultiheadAttention(8, 2, kdim=5, vdim=6),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 5, seed=i + 1), L(4, 2, 6, seed=i + 2)),
)
_mha_case(
    "mha_bias_kv_zero_attn",
    lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 8, seed=i + 1), L(4, 2, 8, seed=i + 2)),
    kw=lambda i: {
        "key_padding_mask": torch.tensor([[False, False, True, True], [False, True, False, False]])
    },
)
_mha_case(
    "mha_kpm_bool_selfattn_bf",
    lambda: nn.MultiheadAttention(8, 2, batch_first=True),
    lambda i: (L(2, 4, 8, seed=i),) * 3,
    kw=lambda i: {
        "key_padding_mask": torch.tensor([[False, False, True, True], [False, False, False, False]])
    },
)
_mha_case(
    "mha_kpm_float",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 8, seed=i + 1), L(4, 2, 8, seed=i + 2)),
    kw=lambda i: {"key_padding_mask": torch.tensor([[0.0, 0.0, -1e9, 0.5], [0.0, -2.0, 0.0, 0.0]])},
)
_mha_case(
    "mha_attn_mask_3d",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 8, seed=i + 1), L(4, 2, 8, seed=i + 2)),
    kw=lambda i: {
        "attn_mask": torch.rand(4, 3, 4, generator=torch.Generator().manual_seed(3)) > 0.3
    },
)
_mha_case(
    "mha_attn_mask_float_and_kpm_bool",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8, seed=i), L(4, 2, 8, seed=i + 1), L(4, 2, 8, seed=i + 2)),
    kw=lambda i: {
        "attn_mask": weights_like(torch.zeros(3, 4), 5),
        "key_padding_mask": torch.tensor(
            [[False, False, True, False], [False, False, False, False]]
        ),
    },
)
_mha_case(
    "mha_is_causal",
    lambda: nn.MultiheadAttention(8, 2, batch_first=True),
    lambda i: (L(2, 4, 8, seed=i),) * 3,
    kw=lambda i: {
        "attn_mask": nn.Transformer.generate_square_subsequent_mask(4),
        "is_causal": True,
        "need_weights": False,
    },
)
_mha_case(
    "mha_nobias_unbatched",
    lambda: nn.MultiheadAttention(8, 4, bias=False),
    lambda i: (L(3, 8, seed=i), L(5, 8, seed=i + 1), L(5, 8, seed=i + 2)),
)
_mha_case(
    "mha_fully_masked_row",
    lambda: nn.MultiheadAttention(4, 1, batch_first=True),
    lambda i: (L(2, 3, 4, seed=i),) * 3,
    kw=lambda i: {"key_padding_mask": torch.tensor([[True, True, True], [False, True, False]])},
)


def _src(i, shape=(2, 5, 8)):
    return (L(*shape, seed=i),)


_KPM = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])

module_case(
    "tel_kpm",
    lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
    _src,
    kw=lambda i: {"src_key_padding_mask": _KPM},
)
module_case(
    "tel_norm_first_gelu",
    lambda: nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
    ),
    _src,
    kw=lambda i: {"src_key_padding_mask": _KPM},
)
module_case(
    "tel_callable_activation",
    lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=F.silu),
    lambda i: (L(5, 2, 8, seed=i),),
    kw=lambda i: {"src_mask": nn.Transformer.generate_square_subsequent_mask(5), "is_causal": True},
)
module_case(
    "te_nested_fastpath",
    lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        2,
        enable_nested_tensor=True,
    ),
    _src,
    modes=("nograd", "eval", "nograd"),
    kw=lambda i: {"src_key_padding_mask": _KPM},
)
module_case(
    "te_nested_fastpath_final_norm",
    lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2, norm=nn.LayerNorm(8)
    ),
    _src,
    modes=("nograd", "train"),
    kw=lambda i: {"src_key_padding_mask": _KPM},
)
module_case(
    "tdl_masks",
    lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True),
    lambda i: (L(2, 4, 8, seed=i), L(2, 5, 8, seed=i + 3)),
    kw=lambda i: {
        "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
        "memory_key_padding_mask": _KPM,
        "tgt_is_causal": True,
    },
)
module_case(
    "transformer_full",
    lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0),
    lambda i: (L(5, 2, 8, seed=i), L(4, 2, 8, seed=i + 3)),
    kw=lambda i: {
        "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
        "src_key_padding_mask": _KPM,
        "memory_key_padding_mask": _KPM,
    },
)


# ============================================================================================
# convolution, folding, shuffles, resampling

module_case(
    "conv1d_same_dil",
    lambda: nn.Conv1d(3, 4, 4, padding="same", dilation=2),
    lambda i: (L(2, 3, 9, seed=i),),
)
for _pm in ("reflect", "circular", "replicate"):
    module_case(
        f"conv2d_{_pm}",
        lambda p=_pm: nn.Conv2d(2, 4, 3, padding=(1, 2), padding_mode=p, groups=2),
        lambda i: (L(2, 2, 5, 6, seed=i),),
    )
    module_case(
        f"conv1d_{_pm}_same",
        lambda p=_pm: nn.Conv1d(2, 2, 4, padding="same", padding_mode=p),
        lambda i: (L(2, 2, 7, seed=i),),
    )
module_case(
    "conv3d_groups_stride",
    lambda: nn.Conv3d(4, 4, 2, stride=(1, 2, 1), groups=4),
    lambda i: (L(1, 4, 3, 4, 3, seed=i),),
)
module_case("conv2d_unbatched_cl", lambda: nn.Conv2d(3, 2, 2), lambda i: (L(3, 4, 4, seed=i),))
module_case(
    "conv2d_bias_false_noncontig",
    lambda: nn.Conv2d(3, 2, 2, bias=False),
    lambda i: (L(2, 4, 4, 3, seed=i).permute(0, 3, 1, 2),),
)
module_case(
    "convT1d_outpad",
    lambda: nn.ConvTranspose1d(2, 3, 3, stride=2, output_padding=1),
    lambda i: (L(2, 2, 4, seed=i),),
)
module_case(
    "convT2d_groups_dil",
    lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, groups=2, dilation=2),
    lambda i: (L(1, 4, 3, 3, seed=i),),
)
module_case(
    "convT2d_output_size",
    lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
    lambda i: (L(1, 2, 3, 3, seed=i),),
    kw=lambda i: {"output_size": [6, 6]},
)
module_case(
    "convT3d", lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), lambda i: (L(1, 2, 2, 2, 2, seed=i),)
)
module_case(
    "fold",
    lambda: nn.Fold((4, 5), 2, stride=1, padding=1, dilation=1),
    lambda i: (L(2, 3 * 4, 30, seed=i),),
)
module_case(
    "unfold",
    lambda: nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2),
    lambda i: (L(2, 3, 5, 6, seed=i),),
)
module_case("pixel_shuffle", lambda: nn.PixelShuffle(2), lambda i: (L(2, 8, 3, 3, seed=i),))
module_case("pixel_unshuffle", lambda: nn.PixelUnshuffle(2), lambda i: (L(2, 2, 4, 6, seed=i),))
module_case("channel_shuffle", lambda: nn.ChannelShuffle(2), lambda i: (L(2, 6, 2, 2, seed=i),))
for _um, _ac in (
    ("nearest", None),
    ("nearest-exact", None),
    ("bilinear", True),
    ("bilinear", False),
    ("bicubic", True),
    ("bicubic", False),
):
    module_case(
        f"upsample_{_um}_{_ac}",
        lambda u=_um, a=_ac: nn.Upsample(scale_factor=1.7, mode=u, align_corners=a),
        lambda i: (L(2, 2, 3, 4, seed=i),),
    )
module_case(
    "upsample_trilinear_size",
    lambda: nn.Upsample(size=(3, 5, 4), mode="trilinear"),
    lambda i: (L(1, 2, 2, 3, 2, seed=i),),
)
module_case(
    "upsample_linear_1d",
    lambda: nn.Upsample(scale_factor=2.5, mode="linear"),
    lambda i: (L(2, 2, 5, seed=i),),
)
module_case(
    "upsampling_nearest2d",
    lambda: nn.UpsamplingNearest2d(scale_factor=2),
    lambda i: (L(1, 2, 3, 3, seed=i),),
)
module_case(
    "upsampling_bilinear2d",
    lambda: nn.UpsamplingBilinear2d(size=(5, 7)),
    lambda i: (L(1, 2, 3, 3, seed=i),),
)


class Interp(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


for _n, _kw in [
    ("bilinear_antialias_down", {"size": (3, 2), "mode": "bilinear", "antialias": True}),
    ("bicubic_antialias_down", {"scale_factor": 0.4, "mode": "bicubic", "antialias": True}),
    ("bilinear_antialias_up", {"scale_factor": 1.5, "mode": "bilinear", "antialias": True}),
    ("area_down", {"size": (3, 4), "mode": "area"}),
    ("nearest_recompute", {"scale_factor": 1.6, "mode": "nearest", "recompute_scale_factor": True}),
    ("bilinear_scale_nonrecompute", {"scale_factor": (0.6, 1.3), "mode": "bilinear"}),
    ("nearest_exact_down", {"scale_factor": 0.7, "mode": "nearest-exact"}),
    ("nearest_3d", {"scale_factor": (1.5, 2, 0.5), "mode": "nearest"}),
]:
    module_case(
        f"interp_{_n}",
        lambda kw=_kw: Interp(**kw),
        lambda i, n=_n: (L(1, 2, 7, 8, seed=i) if "3d" not in n else L(1, 2, 3, 4, 4, seed=i),),
    )

# ============================================================================================
# pooling

module_case(
    "adaptive_max2d_indices",
    lambda: nn.AdaptiveMaxPool2d((2, 3), return_indices=True),
    lambda i: (L(2, 2, 5, 7, seed=i),),
)
module_case(
    "adaptive_max1d_indices",
    lambda: nn.AdaptiveMaxPool1d(3, return_indices=True),
    lambda i: (L(2, 2, 7, seed=i),),
)
module_case(
    "adaptive_avg3d_none",
    lambda: nn.AdaptiveAvgPool3d((None, 2, 3)),
    lambda i: (L(1, 2, 3, 5, 7, seed=i),),
)
module_case(
    "adaptive_avg2d_unbatched", lambda: nn.AdaptiveAvgPool2d(3), lambda i: (L(2, 5, 7, seed=i),)
)
module_case(
    "adaptive_max3d", lambda: nn.AdaptiveMaxPool3d(2), lambda i: (L(1, 2, 3, 5, 4, seed=i),)
)
module_case(
    "maxpool2d_ceil_indices",
    lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True, return_indices=True),
    lambda i: (L(2, 2, 6, 7, seed=i),),
)
module_case(
    "maxpool1d_dil_ceil",
    lambda: nn.MaxPool1d(2, stride=2, dilation=2, ceil_mode=True),
    lambda i: (L(2, 2, 8, seed=i),),
)
module_case(
    "maxpool3d_indices",
    lambda: nn.MaxPool3d(2, return_indices=True),
    lambda i: (L(1, 2, 4, 4, 5, seed=i),),
)
module_case(
    "avgpool2d_ceil_noinclude",
    lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    lambda i: (L(2, 2, 6, 7, seed=i),),
)
module_case(
    "avgpool2d_divisor",
    lambda: nn.AvgPool2d(2, divisor_override=3),
    lambda i: (L(2, 2, 4, 5, seed=i),),
)
module_case(
    "avgpool1d_ceil",
    lambda: nn.AvgPool1d(3, stride=2, ceil_mode=True, padding=1),
    lambda i: (L(2, 2, 8, seed=i),),
)
module_case(
    "avgpool3d_noinclude_ceil",
    lambda: nn.AvgPool3d(2, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    lambda i: (L(1, 2, 3, 4, 5, seed=i),),
)
module_case("lppool2d", lambda: nn.LPPool2d(2, 2), lambda i: (L(2, 2, 4, 5, seed=i),))
module_case(
    "lppool1d_p3_ceil",
    lambda: nn.LPPool1d(3, 3, stride=2, ceil_mode=True),
    lambda i: (L(2, 2, 8, seed=i).abs(),),
)
module_case("lppool3d", lambda: nn.LPPool3d(1.5, 2), lambda i: (L(1, 2, 4, 4, 4, seed=i).abs(),))


class PoolUnpool(nn.Module):
    def __init__(self, d):
        super().__init__()
        P = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)[d - 1]
        U = (nn.MaxUnpool1d, nn.MaxUnpool2d, nn.MaxUnpool3d)[d - 1]
        self.pool = P(2, stride=2, return_indices=True)
        self.unpool = U(2, stride=2)

    def forward(self, x):
        y, i = self.pool(x)
        return self.unpool(y, i, output_size=x.shape[2:]), i


for _d, _s in ((1, (2, 2, 7)), (2, (2, 2, 5, 4)), (3, (1, 2, 4, 3, 4))):
    module_case(f"maxunpool{_d}d", lambda d=_d: PoolUnpool(d), lambda i, s=_s: (L(*s, seed=i),))


@scenario
def fractional_max_pool(C, rec):
    m = mk(lambda: nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True))
    cm = C(m)
    x = L(2, 2, 8, 8)
    y, i = cm(x)
    rec("shape", [y.shape, i.shape, i.dtype])
    # every output is the max of the input at its index
    rec(
        "consistent",
        torch.equal(x.detach().flatten(2).gather(2, i.flatten(2)), y.detach().flatten(2)),
    )
    y.sum().backward()
    rec("grad sum", x.grad.sum())
    x2 = L(2, 2, 9, 9, seed=1)
    s = torch.rand(2, 2, 2, generator=torch.Generator().manual_seed(0))
    f = C(lambda x, s: F.fractional_max_pool2d(x, 3, output_size=(4, 4), _random_samples=s))
    rec("samples", f(x2, s))


# ============================================================================================
# losses


class Loss(nn.Module):
    def __init__(self, cls, **kw):
        super().__init__()
        self.loss = cls(**kw)

    def forward(self, *a):
        return self.loss(*a)


def loss_case(name, ctor, args, modes=("train", "eval")):
    module_case(f"loss_{name}", ctor, args, modes=modes)


_T = torch.tensor
for _red in ("mean", "sum", "none"):
    loss_case(
        f"ce_w_ign_ls_{_red}",
        lambda r=_red: nn.CrossEntropyLoss(
            weight=_T([1.0, 2.0, 0.5, 3.0]), ignore_index=1, label_smoothing=0.2, reduction=r
        ),
        lambda i: (L(5, 4, seed=i), _T([0, 1, 3, 1, 2])),
    )
    loss_case(
        f"ce_probs_{_red}",
        lambda r=_red: nn.CrossEntropyLoss(reduction=r, label_smoothing=0.1),
        lambda i: (L(3, 4, 2, seed=i), L(3, 4, 2, seed=i + 1).softmax(1).detach()),
    )
    loss_case(
        f"ce_probs_w_{_red}",
        lambda r=_red: nn.CrossEntropyLoss(reduction=r, weight=_T([1.0, 2.0, 0.5])),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1).softmax(1)),
    )
    loss_case(
        f"nll_all_ignored_{_red}",
        lambda r=_red: nn.NLLLoss(ignore_index=2, reduction=r),
        lambda i: (L(3, 4, seed=i), _T([2, 2, 2])),
    )
    loss_case(
        f"nll_2d_w_{_red}",
        lambda r=_red: nn.NLLLoss(weight=_T([0.2, 1.0, 3.0]), ignore_index=0, reduction=r),
        lambda i: (L(2, 3, 2, 2, seed=i), _T([[[0, 1], [2, 2]], [[1, 0], [0, 0]]])),
    )
    loss_case(
        f"ctc_{_red}",
        lambda r=_red: nn.CTCLoss(blank=0, reduction=r, zero_infinity=False),
        lambda i: (
            L(6, 2, 4, seed=i).log_softmax(2),
            _T([[1, 2, 2], [3, 1, 0]]),
            _T([6, 5]),
            _T([3, 2]),
        ),
    )
    loss_case(
        f"ctc_zero_inf_{_red}",
        lambda r=_red: nn.CTCLoss(reduction=r, zero_infinity=True),
        lambda i: (
            L(3, 2, 4, seed=i).log_softmax(2),
            _T([[1, 1, 1], [3, 2, 1]]),
            _T([3, 3]),
            _T([3, 2]),
        ),
    )
    loss_case(
        f"margin_ranking_{_red}",
        lambda r=_red: nn.MarginRankingLoss(margin=0.3, reduction=r),
        lambda i: (L(5, seed=i), L(5, seed=i + 1), _T([1.0, -1, 1, -1, 1])),
    )
    loss_case(
        f"triplet_{_red}",
        lambda r=_red: nn.TripletMarginLoss(margin=0.5, p=1.5, swap=True, reduction=r),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1), L(4, 3, seed=i + 2)),
    )
    loss_case(
        f"cosine_emb_{_red}",
        lambda r=_red: nn.CosineEmbeddingLoss(0.1, reduction=r),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1), _T([1, -1, -1, 1])),
    )
    loss_case(
        f"kldiv_log_target_{_red}",
        lambda r=_red: nn.KLDivLoss(reduction=r if r != "mean" else "batchmean", log_target=True),
        lambda i: (L(3, 4, seed=i).log_softmax(1), L(3, 4, seed=i + 1).log_softmax(1)),
    )
    loss_case(
        f"kldiv_{_red}",
        lambda r=_red: nn.KLDivLoss(reduction=r),
        lambda i: (
            L(3, 4, seed=i).log_softmax(1),
            torch.cat(
                [L(3, 3, seed=i + 1, rg=False).softmax(1), torch.zeros(3, 1)], 1
            ).requires_grad_(),
        ),
    )
    loss_case(
        f"poisson_{_red}",
        lambda r=_red: nn.PoissonNLLLoss(log_input=False, full=True, reduction=r),
        lambda i: (L(5, seed=i).abs(), _T([0.0, 1.0, 3.0, 0.5, 2.0])),
    )
    loss_case(
        f"poisson_log_{_red}",
        lambda r=_red: nn.PoissonNLLLoss(reduction=r),
        lambda i: (L(5, seed=i), L(5, seed=i + 1).abs()),
    )
    loss_case(
        f"gaussian_{_red}",
        lambda r=_red: nn.GaussianNLLLoss(full=True, reduction=r),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1), L(4, 1, seed=i + 2).abs()),
    )
    loss_case(
        f"gaussian_scalar_var_{_red}",
        lambda r=_red: nn.GaussianNLLLoss(reduction=r),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1), L(4, seed=i + 2).abs()),
    )
    loss_case(
        f"huber_{_red}",
        lambda r=_red: nn.HuberLoss(reduction=r, delta=0.5),
        lambda i: (L(5, seed=i), L(5, seed=i + 1)),
    )
    loss_case(
        f"smoothl1_beta0_{_red}",
        lambda r=_red: nn.SmoothL1Loss(reduction=r, beta=0.0),
        lambda i: (L(5, seed=i), L(5, seed=i + 1)),
    )
    loss_case(
        f"mlsm_{_red}",
        lambda r=_red: nn.MultiLabelSoftMarginLoss(weight=_T([1.0, 2.0, 0.5]), reduction=r),
        lambda i: (L(4, 3, seed=i), _T([[1.0, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]])),
    )
    loss_case(
        f"bcel_posw_{_red}",
        lambda r=_red: nn.BCEWithLogitsLoss(
            pos_weight=_T([1.0, 3.0, 0.5]), weight=_T([2.0, 1.0, 1.0]), reduction=r
        ),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1).sigmoid()),
    )
    loss_case(
        f"bce_{_red}",
        lambda r=_red: nn.BCELoss(reduction=r),
        lambda i: (L(4, 3, seed=i).sigmoid(), _T([[1.0, 0, 0.3]] * 4)),
    )
    loss_case(
        f"multimargin_{_red}",
        lambda r=_red: nn.MultiMarginLoss(p=2, margin=0.7, weight=_T([1.0, 2.0, 0.3]), reduction=r),
        lambda i: (L(4, 3, seed=i), _T([0, 2, 1, 2])),
    )
    loss_case(
        f"multilabel_margin_{_red}",
        lambda r=_red: nn.MultiLabelMarginLoss(reduction=r),
        lambda i: (L(2, 4, seed=i), _T([[3, 0, -1, 1], [1, 2, 3, -1]])),
    )
    loss_case(
        f"soft_margin_{_red}",
        lambda r=_red: nn.SoftMarginLoss(reduction=r),
        lambda i: (L(5, seed=i), _T([1.0, -1, 1, 1, -1])),
    )
    loss_case(
        f"hinge_emb_{_red}",
        lambda r=_red: nn.HingeEmbeddingLoss(margin=0.5, reduction=r),
        lambda i: (L(5, seed=i), _T([1.0, -1, 1, -1, -1])),
    )
    loss_case(
        f"l1_bcast_{_red}",
        lambda r=_red: nn.L1Loss(reduction=r),
        lambda i: (L(3, 4, seed=i), L(4, seed=i + 1)),
    )
    loss_case(
        f"triplet_distfn_{_red}",
        lambda r=_red: nn.TripletMarginWithDistanceLoss(
            distance_function=nn.PairwiseDistance(), margin=0.5, swap=True, reduction=r
        ),
        lambda i: (L(4, 3, seed=i), L(4, 3, seed=i + 1), L(4, 3, seed=i + 2)),
    )
loss_case(
    "ce_label_smoothing_ignore_2d",
    lambda: nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.3),
    lambda i: (L(2, 3, 4, seed=i), _T([[0, -100, 2, 1], [-100, -100, -100, 1]])),
)
loss_case(
    "ce_all_ignored_mean",
    lambda: nn.CrossEntropyLoss(ignore_index=1),
    lambda i: (L(3, 4, seed=i), _T([1, 1, 1])),
)
loss_case(
    "ce_all_ignored_ls_mean",
    lambda: nn.CrossEntropyLoss(ignore_index=1, label_smoothing=0.1),
    lambda i: (L(3, 4, seed=i), _T([1, 1, 1])),
)
loss_case("ce_unbatched", lambda: nn.CrossEntropyLoss(), lambda i: (L(4, seed=i), _T(2)))
loss_case("nll_target_oob", lambda: nn.NLLLoss(), lambda i: (L(3, 4, seed=i), _T([0, 5, 1])))
loss_case(
    "ce_target_negative", lambda: nn.CrossEntropyLoss(), lambda i: (L(3, 4, seed=i), _T([0, -3, 1]))
)
loss_case("bce_out_of_range", lambda: nn.BCELoss(), lambda i: (L(3, seed=i) * 3, _T([0.0, 1, 1])))
loss_case(
    "gaussian_neg_var",
    lambda: nn.GaussianNLLLoss(),
    lambda i: (L(3, seed=i), L(3, seed=i + 1), -L(3, seed=i + 2).abs()),
)
loss_case(
    "ctc_int32_targets_1d",
    lambda: nn.CTCLoss(),
    lambda i: (
        L(6, 2, 4, seed=i).log_softmax(2),
        _T([1, 2, 2, 3, 1], dtype=torch.int32),
        _T([6, 5], dtype=torch.int32),
        _T([3, 2], dtype=torch.int32),
    ),
)


# ============================================================================================
# parametrizations, pruning, hooks


@scenario
def spectral_norm_param_train_eval(C, rec):
    m = mk(lambda: parametrizations.spectral_norm(nn.Conv2d(2, 3, 3), n_power_iterations=2))
    cm = C(m)
    for i, mode in enumerate(("train", "train", "eval", "train")):
        m.train(mode == "train")
        step(rec, f"{i} {mode}", cm, m, (L(2, 2, 5, 5, seed=i),))
    with torch.no_grad():
        step(rec, "nograd train", cm, m, (L(2, 2, 5, 5, seed=7),))


@scenario
def spectral_norm_old_api(C, rec):
    m = mk(lambda: nn.utils.spectral_norm(nn.Linear(4, 3)))
    cm = C(m)
    for i, mode in enumerate(("train", "train", "eval", "train")):
        m.train(mode == "train")
        step(rec, f"{i} {mode}", cm, m, (L(2, 4, seed=i),))


@scenario
def weight_norm_old_and_new(C, rec):
    m = mk(
        lambda: nn.Sequential(
            nn.utils.weight_norm(nn.Linear(4, 3)),
            parametrizations.weight_norm(nn.Linear(3, 2), dim=None),
        )
    )
    cm = C(m)
    for i in range(2):
        step(rec, f"{i}", cm, m, (L(2, 4, seed=i),))


@scenario
def orthogonal_variants(C, rec):
    for orth in ("matrix_exp", "cayley", "householder"):
        m = mk(lambda o=orth: parametrizations.orthogonal(nn.Linear(3, 3), orthogonal_map=o))
        cm = C(m)
        step(rec, orth, cm, m, (L(2, 3),))
        torch._dynamo.reset()


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = nn.Parameter(torch.tensor(2.0))

    def forward(self, X):
        return X * self.s


@scenario
def custom_parametrization_chain(C, rec):
    def ctor():
        m = nn.Linear(3, 3)
        parametrize.register_parametrization(m, "weight", Symmetric())
        parametrize.register_parametrization(m, "weight", Scale())
        parametrize.register_parametrization(m, "bias", Scale(), unsafe=True)
        return m

    m = mk(ctor)
    cm = C(m)
    for i in range(2):
        step(rec, f"{i}", cm, m, (L(2, 3, seed=i),))
    with parametrize.cached():
        step(rec, "cached", cm, m, (L(2, 3, seed=3),))


@scenario
def prune_variants(C, rec):
    def ctor():
        m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        prune.l1_unstructured(m[0], "weight", amount=0.5)
        prune.random_structured(m[1], "weight", amount=0.5, dim=0)
        prune.ln_structured(m[0], "bias", amount=1, n=1, dim=0)
        return m

    m = mk(ctor)
    cm = C(m)
    for i in range(2):
        step(rec, f"{i}", cm, m, (L(3, 4, seed=i),))
    prune.global_unstructured(
        [(m[0], "weight"), (m[1], "weight")], pruning_method=prune.L1Unstructured, amount=0.3
    )
    step(rec, "after global", cm, m, (L(3, 4, seed=5),))


class HookNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 3)
        self.c = nn.Linear(3, 2)

    def forward(self, x):
        return self.c(torch.tanh(self.b(self.a(x))))


@scenario
def hooks_modifying(C, rec):
    def ctor():
        m = HookNet()
        m.a.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        m.b.register_forward_hook(lambda mod, args, out: out + 1)
        m.c.register_forward_pre_hook(
            lambda mod, args, kwargs: ((args[0].relu(),), kwargs), with_kwargs=True
        )
        m.b.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
        m.c.register_full_backward_pre_hook(lambda mod, go: (go[0] * -1,))
        m.a.weight.register_hook(lambda g: g * 0.5)
        return m

    m = mk(ctor)
    cm = C(m)
    for i in range(2):
        step(rec, f"{i}", cm, m, (L(2, 4, seed=i),))


@scenario
def hooks_recording(C, rec):
    seen = []

    def ctor():
        m = HookNet()
        m.b.register_forward_hook(lambda mod, args, out: seen.append(out.detach().clone()))
        m.b.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].clone()))
        return m

    m = mk(ctor)
    cm = C(m)
    step(rec, "a", cm, m, (L(2, 4),))
    rec("seen", seen)


# ============================================================================================
# containers, misc modules


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = nn.ModuleDict({"x": nn.Linear(3, 3), "y": nn.Linear(3, 3)})
        self.pl = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(3)])
        self.pd = nn.ParameterDict(
            {"s": nn.Parameter(torch.randn(3)), "t": nn.Parameter(torch.randn(3))}
        )
        self.fl = nn.Flatten(1)
        self.un = nn.Unflatten(1, (3, 2))
        self.id = nn.Identity(54, unused=True)

    def forward(self, x):
        for k, mod in self.d.items():
            x = mod(x) * self.pd["s" if k == "x" else "t"]
        for p in self.pl[1:]:
            x = x + p
        y = self.un(torch.cat([x, x], 1))
        return self.id(self.fl(y))


module_case("containers", Containers, lambda i: (L(2, 3, seed=i),))
module_case(
    "dropouts_eval",
    lambda: nn.Sequential(
        nn.Dropout(0.5), nn.Dropout1d(0.3), nn.AlphaDropout(0.2), nn.FeatureAlphaDropout(0.2)
    ),
    lambda i: (L(2, 3, 4, seed=i),),
    modes=("eval", "nograd"),
)
module_case(
    "dropout2d_3d_eval",
    lambda: nn.Sequential(nn.Dropout2d(0.5), nn.Dropout3d(0.5)),
    lambda i: (L(2, 3, 4, 4, seed=i),),
    modes=("eval", "nograd"),
)
module_case(
    "dropout_p0_p1_train",
    lambda: nn.Sequential(nn.Dropout(0.0), nn.Linear(3, 3), nn.AlphaDropout(0.0)),
    lambda i: (L(2, 3, seed=i),),
    modes=("train", "train"),
)


@scenario
def dropout_p1_train(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 3), nn.Dropout(1.0)))
    cm = C(m)
    step(rec, "a", cm, m, (L(2, 3),))
    m2 = mk(lambda: nn.Sequential(nn.Linear(3, 3), nn.Dropout2d(1.0)))
    step(rec, "b", C(m2), m2, (L(2, 3, 4),))


module_case(
    "bilinear", lambda: nn.Bilinear(3, 4, 2), lambda i: (L(5, 3, seed=i), L(5, 4, seed=i + 1))
)
module_case(
    "bilinear_nobias_unbatched",
    lambda: nn.Bilinear(3, 4, 2, bias=False),
    lambda i: (L(3, seed=i), L(4, seed=i + 1)),
)
module_case(
    "cosine_similarity",
    lambda: nn.CosineSimilarity(dim=1, eps=1e-3),
    lambda i: (
        L(3, 4, seed=i),
        torch.cat([L(2, 4, seed=i + 1, rg=False), torch.zeros(1, 4)]).requires_grad_(),
    ),
)
module_case(
    "cosine_similarity_bcast",
    lambda: nn.CosineSimilarity(dim=-1),
    lambda i: (L(3, 1, 4, seed=i), L(2, 4, seed=i + 1)),
)
module_case(
    "pairwise_distance",
    lambda: nn.PairwiseDistance(p=1.5, keepdim=True),
    lambda i: (L(3, 4, seed=i), L(3, 4, seed=i + 1)),
)
module_case(
    "pairwise_distance_same",
    lambda: nn.PairwiseDistance(p=2, eps=0.0),
    lambda i: (L(3, 4, seed=i), L(3, 4, seed=i).detach().requires_grad_()),
)
module_case(
    "pairwise_distance_inf",
    lambda: nn.PairwiseDistance(p=float("inf")),
    lambda i: (L(3, 4, seed=i), L(4, seed=i + 1)),
)
module_case(
    "zeropad_negative", lambda: nn.ZeroPad2d((1, -1, 2, 0)), lambda i: (L(2, 2, 3, 4, seed=i),)
)
module_case(
    "reflpad3d",
    lambda: nn.ReflectionPad3d((1, 0, 1, 2, 0, 1)),
    lambda i: (L(1, 2, 3, 3, 3, seed=i),),
)
module_case(
    "replpad1d_const",
    lambda: nn.Sequential(
        nn.ReplicationPad1d((2, 3)), nn.ConstantPad1d((1, 1), 3.5), nn.CircularPad1d((1, 2))
    ),
    lambda i: (L(2, 2, 4, seed=i),),
)
module_case("circpad2d", lambda: nn.CircularPad2d((1, 2, 0, 1)), lambda i: (L(2, 2, 3, 4, seed=i),))


class InplaceActs(nn.Module):
    def __init__(self, acts):
        super().__init__()
        self.lin = nn.Linear(4, 6)
        self.acts = nn.ModuleList(acts)

    def forward(self, x):
        h = self.lin(x)
        v = h.view(2, 3, 2)
        for a in self.acts:
            v = a(v)
        t = h.t()  # h after the in-place activations
        return v, t


for _n, _acts in [
    ("relu", lambda: [nn.ReLU(inplace=True)]),
    ("relu6_hardtanh", lambda: [nn.ReLU6(inplace=True), nn.Hardtanh(-0.5, 0.5, inplace=True)]),
    (
        "elu_selu_celu",
        lambda: [nn.ELU(0.5, inplace=True), nn.SELU(inplace=True), nn.CELU(1.5, inplace=True)],
    ),
    ("leaky_rrelu_eval", lambda: [nn.LeakyReLU(0.2, inplace=True)]),
    (
        "silu_mish_hardswish",
        lambda: [
            nn.SiLU(inplace=True),
            nn.Mish(inplace=True),
            nn.Hardswish(inplace=True),
            nn.Hardsigmoid(inplace=True),
        ],
    ),
    ("threshold", lambda: [nn.Threshold(0.1, -2.0, inplace=True)]),
]:
    module_case(f"inplace_{_n}", lambda a=_acts: InplaceActs(a()), lambda i: (L(2, 4, seed=i),))


class InplaceOnInputView(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = x * 1
        self.act(y[:, 1:])
        return y


module_case("inplace_relu_slice", InplaceOnInputView, lambda i: (L(3, 4, seed=i),))


@scenario
def inplace_relu_on_input(C, rec):
    m = nn.ReLU(inplace=True)
    x = L(3, 4, rg=False)
    out = C(m)(x[:, :2])
    rec("out", out)
    rec("x", x)
    rec("same", out.data_ptr() == x.data_ptr())


@scenario
def rrelu_eval_and_train(C, rec):
    m = mk(lambda: nn.RReLU(0.1, 0.3))
    cm = C(m)
    m.eval()
    step(rec, "eval", cm, m, (L(3, 4),))
    m.train()
    x = L(50, 40, seed=1)
    out = cm(x)
    neg = x.detach() < 0
    ratio = out.detach()[neg] / x.detach()[neg]
    rec("ratio in range", bool(((ratio >= 0.1) & (ratio <= 0.3)).all()))
    rec("pos kept", torch.equal(out.detach()[~neg], x.detach()[~neg]))


module_case(
    "activations_misc",
    lambda: nn.Sequential(
        nn.PReLU(3),
        nn.GLU(1),
        nn.Softmax2d(),
        nn.LogSigmoid(),
        nn.Softplus(2.0, 1.0),
        nn.Softshrink(0.3),
        nn.Hardshrink(0.2),
        nn.Tanhshrink(),
        nn.Softsign(),
        nn.GELU("tanh"),
    ),
    lambda i: (L(2, 6, 3, 3, seed=i),),
)
module_case(
    "prelu_per_channel_cl",
    lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.PReLU(4)),
    lambda i: (
        L(2, 3, 3, 3, seed=i)
        .detach()
        .contiguous(memory_format=torch.channels_last)
        .requires_grad_(),
    ),
)
module_case(
    "softmin_logsoftmax",
    lambda: nn.Sequential(nn.Softmin(0), nn.LogSoftmax(-1)),
    lambda i: (L(3, 4, seed=i),),
)
module_case(
    "adaptive_log_softmax",
    lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[3, 6], div_value=2.0),
    lambda i: (L(5, 8, seed=i), _T([0, 4, 9, 7, 2])),
)


@scenario
def adaptive_log_softmax_methods(C, rec):
    m = mk(lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[3, 6]))
    step(rec, "log_prob", C(m.log_prob), m, (L(4, 8),))
    step(rec, "predict", C(m.predict), m, (L(4, 8, seed=1),))


@scenario
def linear_toggle_requires_grad_nograd(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)))
    cm = C(m)
    plan = [
        ("all", None),
        ("freeze0", m[0]),
        ("nograd", None),
        ("freezeln", m[1]),
        ("unfreeze", None),
    ]
    for i, (what, mod) in enumerate(plan):
        if what == "unfreeze":
            m.requires_grad_(True)
        elif mod is not None:
            mod.requires_grad_(False)
        if what == "nograd":
            with torch.no_grad():
                step(rec, f"{i} {what}", cm, m, (L(2, 3, seed=i),))
        else:
            step(rec, f"{i} {what}", cm, m, (L(2, 3, seed=i),))


@scenario
def identity_returns_input(C, rec):
    m = nn.Sequential(nn.Identity(), nn.Flatten(0, -1), nn.Unflatten(0, (2, 6)))
    x = L(3, 4)
    out = C(m)(x)
    rec("out", out)
    rec("is view", out._base is x)
    out.sum().backward()
    rec("g", x.grad)


@scenario
def flatten_noncontig_identity(C, rec):
    m = nn.Sequential(nn.Flatten(), nn.Identity())
    x = L(2, 3, 4).detach().transpose(1, 2).requires_grad_()
    out = C(m)(x)
    rec("out", [out, out.stride(), out.is_contiguous()])


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


# ============================================================================================
# the same compiled module called with changing shapes (automatic dynamic shapes)

_SIZES = [(2, 5), (3, 7), (4, 6), (2, 9)]


def dyn_case(name, ctor, make, modes=("train", "train", "train", "eval")):
    module_case(f"dyn_{name}", ctor, lambda i: make(*_SIZES[i], i), modes=modes)


dyn_case("bn1d", lambda: nn.BatchNorm1d(3, momentum=None), lambda b, n, i: (L(b, 3, n, seed=i),))
dyn_case("bn2d", lambda: nn.BatchNorm2d(3), lambda b, n, i: (L(b, 3, n, n - 1, seed=i),))
dyn_case(
    "in2d_track",
    lambda: nn.InstanceNorm2d(3, track_running_stats=True),
    lambda b, n, i: (L(b, 3, n, 4, seed=i),),
)
dyn_case("groupnorm", lambda: nn.GroupNorm(2, 4), lambda b, n, i: (L(b, 4, n, seed=i),))
dyn_case("layernorm", lambda: nn.LayerNorm(4), lambda b, n, i: (L(b, n, 4, seed=i),))
dyn_case("lrn", lambda: nn.LocalResponseNorm(3), lambda b, n, i: (L(b, n, 3, seed=i),))
dyn_case(
    "emb_max_norm", lambda: nn.Embedding(10, 3, max_norm=1.0), lambda b, n, i: (idx(b, n, seed=i),)
)
dyn_case(
    "embbag_mean",
    lambda: nn.EmbeddingBag(10, 3, mode="mean"),
    lambda b, n, i: (idx(b * n, seed=i), torch.arange(0, b * n, n)),
)
dyn_case(
    "embbag_max_psw",
    lambda: nn.EmbeddingBag(10, 3, mode="sum"),
    lambda b, n, i: (idx(b * n, seed=i), torch.arange(0, b * n, n), L(b * n, seed=i)),
)
dyn_case(
    "lstm_bf",
    lambda: nn.LSTM(3, 4, batch_first=True, num_layers=2),
    lambda b, n, i: (L(b, n, 3, seed=i),),
)
dyn_case(
    "gru_packed",
    lambda: nn.GRU(3, 4, batch_first=True),
    lambda b, n, i: (
        nn.utils.rnn.pack_padded_sequence(
            L(b, n, 3, seed=i), torch.arange(n, n - b, -1), batch_first=True, enforce_sorted=False
        ),
    ),
)
dyn_case(
    "mha_kpm",
    lambda: nn.MultiheadAttention(8, 2, batch_first=True),
    lambda b, n, i: (L(b, n, 8, seed=i),) * 3,
    modes=("train", "train", "eval", "nograd"),
)
dyn_case(
    "tel",
    lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
    lambda b, n, i: (L(b, n, 8, seed=i),),
    modes=("train", "train", "nograd", "nograd"),
)
dyn_case(
    "conv_reflect",
    lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
    lambda b, n, i: (L(b, 2, n, n + 1, seed=i),),
)
dyn_case(
    "conv_same",
    lambda: nn.Conv1d(2, 3, 4, padding="same", dilation=2),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_case(
    "convT_outsize",
    lambda: nn.ConvTranspose1d(2, 3, 3, stride=2),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_case(
    "upsample_bilinear",
    lambda: nn.Upsample(scale_factor=1.5, mode="bilinear"),
    lambda b, n, i: (L(b, 2, n, 4, seed=i),),
)
dyn_case(
    "upsample_nearest_exact",
    lambda: nn.Upsample(scale_factor=2.5, mode="nearest-exact"),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_case(
    "interp_antialias",
    lambda: Interp(scale_factor=0.5, mode="bilinear", antialias=True),
    lambda b, n, i: (L(b, 2, n, 8, seed=i),),
)
dyn_case(
    "adaptive_avg", lambda: nn.AdaptiveAvgPool2d((2, 3)), lambda b, n, i: (L(b, 2, n, 7, seed=i),)
)
dyn_case(
    "adaptive_max_idx",
    lambda: nn.AdaptiveMaxPool1d(3, return_indices=True),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_case(
    "maxpool_ceil",
    lambda: nn.MaxPool1d(3, stride=2, ceil_mode=True, padding=1),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_case(
    "avgpool_ceil_noinc",
    lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    lambda b, n, i: (L(b, 2, n, n, seed=i),),
)
dyn_case("unpool", lambda: PoolUnpool(1), lambda b, n, i: (L(b, 2, n, seed=i),))
dyn_case("fold", lambda: nn.Fold((4, 5), 2), lambda b, n, i: (L(b, 12, 12, seed=i),))
dyn_case("unfold", lambda: nn.Unfold(2, padding=1), lambda b, n, i: (L(b, 2, n, 4, seed=i),))
dyn_case("pixel_shuffle", lambda: nn.PixelShuffle(2), lambda b, n, i: (L(b, 4, n, 3, seed=i),))
dyn_case(
    "ce_ls_ign",
    lambda: nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1),
    lambda b, n, i: (L(b * n, 4, seed=i), idx(b * n, hi=4, seed=i)),
)
dyn_case(
    "ctc",
    lambda: nn.CTCLoss(),
    lambda b, n, i: (
        L(n, b, 4, seed=i).log_softmax(2),
        idx(b, 3, hi=4, seed=i).clamp(1),
        torch.full((b,), n),
        torch.full((b,), 3),
    ),
)
dyn_case(
    "nll_all_ignored",
    lambda: nn.NLLLoss(ignore_index=1),
    lambda b, n, i: (L(b, 3, seed=i), torch.ones(b, dtype=torch.long)),
)
dyn_case(
    "cosine_sim",
    lambda: nn.CosineSimilarity(),
    lambda b, n, i: (L(b, n, seed=i), L(b, n, seed=i + 1)),
)
dyn_case(
    "bilinear", lambda: nn.Bilinear(3, 4, 2), lambda b, n, i: (L(b, 3, seed=i), L(b, 4, seed=i + 1))
)
dyn_case(
    "spectral",
    lambda: parametrizations.spectral_norm(nn.Linear(4, 3)),
    lambda b, n, i: (L(b, 4, seed=i),),
)
dyn_case(
    "inplace_acts",
    lambda: InplaceActs([nn.ReLU(inplace=True), nn.ELU(inplace=True)]),
    lambda b, n, i: (L(2, 4, seed=i),),
)
dyn_case(
    "zeropad_neg", lambda: nn.ZeroPad2d((1, -1, 2, 0)), lambda b, n, i: (L(b, 2, n, 4, seed=i),)
)
dyn_case("reflpad", lambda: nn.ReflectionPad1d((2, 1)), lambda b, n, i: (L(b, 2, n, seed=i),))
dyn_case("channel_shuffle", lambda: nn.ChannelShuffle(2), lambda b, n, i: (L(b, 4, n, seed=i),))


# ============================================================================================
# gradients' layouts, dtypes, errors, state a forward keeps


@scenario
def grad_strides_channels_last_and_transposed(C, rec):
    def ctor():
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1))
        return m.to(memory_format=torch.channels_last)

    m = mk(ctor)
    lin = mk(lambda: nn.Linear(4, 3))
    lin.weight = nn.Parameter(lin.weight.detach().t().contiguous().t())  # (transposed strides)
    cm, cl = C(m), C(lin)
    for i in range(2):
        x = L(2, 3, 6, 6, seed=i)
        (cm(x) * weights_like(torch.zeros(2, 2, 4, 4), i)).sum().backward()
        rec(f"{i} conv grads", [(n, p.grad, strides(p.grad)) for n, p in m.named_parameters()])
        rec(f"{i} x grad stride", [x.grad, strides(x.grad)])
        cl(L(2, 4, seed=i)).pow(2).sum().backward()
        rec(f"{i} lin grad", [lin.weight.grad, strides(lin.weight.grad)])
        m.zero_grad(set_to_none=False)
        lin.zero_grad(set_to_none=False)


@scenario
def grad_strides_expanded_param(C, rec):
    m = mk(lambda: nn.Linear(4, 3))
    m.bias = nn.Parameter(torch.zeros(1).to(m.weight.dtype).expand(3))  # (stride 0)
    out = C(m)(L(2, 4))
    out.sum().backward()
    rec("bias grad", [m.bias.grad, strides(m.bias.grad)])


for _dt in (torch.bfloat16, torch.float16):
    _n = str(_dt).split(".")[1]
    module_case(
        f"dtype_{_n}_bn_conv",
        lambda d=_dt: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.GELU()).to(d),
        lambda i, d=_dt: (L(2, 2, 5, 5, seed=i).detach().to(d).requires_grad_(),),
    )
    module_case(
        f"dtype_{_n}_ln_emb",
        lambda d=_dt: nn.Sequential(nn.Embedding(10, 4, padding_idx=0), nn.LayerNorm(4)).to(d),
        lambda i: (idx(2, 5, seed=i),),
    )
    module_case(
        f"dtype_{_n}_mha",
        lambda d=_dt: nn.MultiheadAttention(8, 2, batch_first=True).to(d),
        lambda i, d=_dt: (L(2, 3, 8, seed=i).detach().to(d).requires_grad_(),) * 3,
    )
    module_case(
        f"dtype_{_n}_groupnorm_lrn",
        lambda d=_dt: nn.Sequential(nn.GroupNorm(2, 4), nn.LocalResponseNorm(2)).to(d),
        lambda i, d=_dt: (L(2, 4, 5, seed=i).detach().to(d).requires_grad_(),),
    )
    module_case(
        f"dtype_{_n}_ce_ls",
        lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
        lambda i, d=_dt: (L(4, 5, seed=i).detach().to(d).requires_grad_(), idx(4, hi=5)),
    )
module_case(
    "dtype_bn_half_input_float_params",
    lambda: nn.BatchNorm1d(3),
    lambda i: (L(4, 3, seed=i).detach().to(torch.bfloat16).requires_grad_(),),
)
module_case(
    "dtype_double_module_float_input",
    lambda: nn.Linear(3, 2).double(),
    lambda i: (L(2, 3, seed=i),),
)
module_case(
    "dtype_emb_double",
    lambda: nn.EmbeddingBag(5, 3, mode="max").double(),
    lambda i: (idx(2, 3, hi=5, seed=i),),
)


def err_case(name, ctor, args, kw=None):
    module_case(f"err_{name}", ctor, args, modes=("train",), kw=kw)


err_case("linear_shape", lambda: nn.Linear(3, 2), lambda i: (L(2, 4),))
err_case("conv_channels", lambda: nn.Conv2d(3, 2, 3), lambda i: (L(2, 4, 5, 5),))
err_case("conv_too_small", lambda: nn.Conv2d(3, 2, 3), lambda i: (L(2, 3, 2, 5),))
err_case("bn_channels", lambda: nn.BatchNorm1d(3), lambda i: (L(2, 4),))
err_case("bn_train_one", lambda: nn.BatchNorm2d(3), lambda i: (L(1, 3, 1, 1),))
err_case("emb_oob", lambda: nn.Embedding(5, 3), lambda i: (torch.tensor([1, 5]),))
err_case("emb_negative", lambda: nn.Embedding(5, 3), lambda i: (torch.tensor([1, -1]),))
err_case("emb_float_idx", lambda: nn.Embedding(5, 3), lambda i: (torch.tensor([1.0]),))
err_case(
    "embbag_offsets_bad",
    lambda: nn.EmbeddingBag(5, 3),
    lambda i: (torch.tensor([1, 2, 3]), torch.tensor([1, 2])),
)
err_case(
    "embbag_oob",
    lambda: nn.EmbeddingBag(5, 3),
    lambda i: (torch.tensor([1, 7, 3]), torch.tensor([0, 2])),
)
err_case("lstm_input_dim", lambda: nn.LSTM(3, 4), lambda i: (L(2, 5, 4),))
err_case("lstm_h0_shape", lambda: nn.GRU(3, 4), lambda i: (L(5, 2, 3), L(1, 3, 4)))
err_case("mha_embed", lambda: nn.MultiheadAttention(8, 2), lambda i: (L(3, 2, 6),) * 3)
err_case(
    "mha_kpm_shape",
    lambda: nn.MultiheadAttention(8, 2),
    lambda i: (L(3, 2, 8),) * 3,
    kw=lambda i: {"key_padding_mask": torch.zeros(2, 4, dtype=torch.bool)},
)
err_case(
    "ce_target_oob", lambda: nn.CrossEntropyLoss(), lambda i: (L(3, 4), torch.tensor([0, 4, 1]))
)
err_case("ce_probs_shape", lambda: nn.CrossEntropyLoss(), lambda i: (L(3, 4), L(3, 5)))
err_case("mse_shape_bcast", lambda: nn.MSELoss(), lambda i: (L(3, 4), L(4)))
err_case("bce_target_shape", lambda: nn.BCELoss(), lambda i: (L(3).sigmoid(), torch.ones(4)))
err_case(
    "ctc_target_too_long",
    lambda: nn.CTCLoss(),
    lambda i: (
        L(2, 1, 4).log_softmax(2),
        torch.tensor([[1, 2, 1]]),
        torch.tensor([2]),
        torch.tensor([3]),
    ),
)
err_case("unfold_2d", lambda: nn.Unfold(2), lambda i: (L(3, 4),))
err_case("pixel_shuffle_bad", lambda: nn.PixelShuffle(2), lambda i: (L(1, 3, 2, 2),))
err_case("adaptive_zero", lambda: nn.AdaptiveAvgPool2d(2), lambda i: (L(1, 2, 0, 3),))
err_case("maxpool_pad_too_big", lambda: nn.MaxPool2d(2, padding=2), lambda i: (L(1, 2, 5, 5),))
err_case("upsample_both", lambda: nn.Upsample(size=4, scale_factor=2), lambda i: (L(1, 2, 3),))
err_case("reflect_too_big", lambda: nn.ReflectionPad1d(3), lambda i: (L(1, 2, 3),))
err_case("groupnorm_groups", lambda: nn.GroupNorm(3, 4), lambda i: (L(2, 4, 3),))
err_case("layernorm_shape", lambda: nn.LayerNorm(4), lambda i: (L(2, 5),))
err_case("kldiv_shape", lambda: nn.KLDivLoss(reduction="batchmean"), lambda i: (L(2, 3), L(2, 4)))
err_case(
    "nll_weight_size",
    lambda: nn.NLLLoss(weight=torch.ones(3)),
    lambda i: (L(2, 4), torch.tensor([0, 1])),
)
err_case("fold_bad", lambda: nn.Fold((4, 5), 2), lambda i: (L(1, 12, 11),))
err_case("bilinear_shape", lambda: nn.Bilinear(3, 4, 2), lambda i: (L(2, 3), L(3, 4)))
err_case(
    "packed_len_too_big",
    lambda: nn.LSTM(3, 4),
    lambda i: (
        nn.utils.rnn.pack_padded_sequence(L(3, 2, 3), torch.tensor([4, 2]), enforce_sorted=False),
    ),
)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("ema", torch.zeros(3))
        self.register_buffer("tmp", torch.zeros(3), persistent=False)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        if self.training:
            self.steps += 1
            with torch.no_grad():
                self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
                self.lin.weight.clamp_(-0.3, 0.3)  # (weight clipping inside forward)
            self.tmp = y.detach().sum(0)  # (a buffer replaced)
        return y * self.calls + self.ema


@scenario
def forward_state_and_clipping(C, rec):
    m = mk(Counter)
    cm = C(m)
    for i, mode in enumerate(("train", "train", "eval", "train")):
        m.train(mode == "train")
        step(rec, f"{i} {mode}", cm, m, (L(2, 3, seed=i),))
        rec(f"{i} calls", m.calls)


@scenario
def alternating_eager_and_compiled(C, rec):
    m = mk(
        lambda: nn.Sequential(
            nn.Linear(3, 4), nn.BatchNorm1d(4), parametrizations.spectral_norm(nn.Linear(4, 2))
        )
    )
    cm = C(m)
    for i in range(4):
        f = cm if i % 2 == 0 else m
        step(rec, f"{i}", f, m, (L(5, 3, seed=i),))


@scenario
def submodule_compiled_inside_eager(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    m[1] = C(m[1])
    for i, mode in enumerate(("train", "eval", "train")):
        m.train(mode == "train")
        step(rec, f"{i}", m, m, (L(5, 3, seed=i),))


@scenario
def compiled_forward_method(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))
    m.compile(backend=h.BACKEND) if C(lambda: 0) is not None and C.__name__ == "C" else None
    for i in range(2):
        step(rec, f"{i}", m, m, (L(5, 3, seed=i),))


@scenario
def functional_call_buffers(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))
    params = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    bufs = {k: v.clone() for k, v in m.named_buffers()}

    def f(p, b, x):
        return torch.func.functional_call(m, (p, b), (x,))

    out = C(f)(params, bufs, L(5, 3))
    rec("out", out)
    out.pow(2).sum().backward()
    rec("grads", {k: v.grad for k, v in params.items()})
    rec("bufs", bufs)
    rec("module bufs", dict(m.named_buffers()))


@scenario
def requires_grad_false_input_train(C, rec):
    m = mk(
        lambda: nn.Sequential(nn.Conv1d(2, 3, 3), nn.InstanceNorm1d(3, affine=True), nn.LSTM(5, 4))
    )
    cm = C(m[:2])
    x = L(2, 2, 7, rg=False)
    y = cm(x)
    out, (h_, _c) = m[2](y)
    (out.sum() + h_.sum()).backward()
    rec("grads", {n: p.grad for n, p in m.named_parameters()})


# ============================================================================================
# sparse gradients, double backward, accumulation, retained graphs


@scenario
def embedding_sparse_grad(C, rec):
    m = mk(lambda: nn.Embedding(10, 3, sparse=True, padding_idx=1))
    cm = C(m)
    for i in range(2):
        (
            cm(torch.tensor([[1, 2, 2], [5, 1, 9]])) * weights_like(torch.zeros(2, 3, 3), i)
        ).sum().backward()
        g = m.weight.grad
        rec(f"{i} sparse", [g.is_sparse, g.to_dense()])
    m.zero_grad()


@scenario
def embedding_bag_sparse_grad(C, rec):
    m = mk(lambda: nn.EmbeddingBag(10, 3, mode="mean", sparse=True))
    out = C(m)(torch.tensor([1, 2, 2, 5, 9]), torch.tensor([0, 2]))
    (out * weights_like(out, 0)).sum().backward()
    rec("grad", [m.weight.grad.is_sparse, m.weight.grad.to_dense()])


def _gp(C, rec, ctor, shape):
    m = mk(ctor)
    cm = C(m)
    for i in range(2):
        x = L(*shape, seed=i)
        out = cm(x)
        (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        rec(f"{i} gx", gx)
        penalty = (gx.flatten(1).norm(dim=1) - 1).pow(2).mean()
        (penalty + out.mean()).backward()
        rec(f"{i} grads", {n: p.grad for n, p in m.named_parameters()})
        m.zero_grad()


@scenario
def gradient_penalty_conv_ln(C, rec):
    _gp(
        C,
        rec,
        lambda: nn.Sequential(
            nn.Conv2d(2, 3, 3), nn.LeakyReLU(0.2), nn.Flatten(), nn.LayerNorm(12), nn.Linear(12, 1)
        ),
        (2, 2, 4, 4),
    )


@scenario
def gradient_penalty_groupnorm_gelu(C, rec):
    _gp(
        C,
        rec,
        lambda: nn.Sequential(nn.Linear(3, 4), nn.GroupNorm(2, 4), nn.GELU(), nn.Linear(4, 1)),
        (5, 3),
    )


@scenario
def gradient_penalty_instancenorm_elu(C, rec):
    _gp(
        C,
        rec,
        lambda: nn.Sequential(
            nn.Conv1d(2, 3, 2),
            nn.InstanceNorm1d(3, affine=True),
            nn.ELU(),
            nn.Flatten(),
            nn.Linear(9, 1),
        ),
        (3, 2, 4),
    )


@scenario
def gradient_penalty_bn_train(C, rec):
    _gp(
        C,
        rec,
        lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 1)),
        (5, 3),
    )


@scenario
def gradient_penalty_embbag_mha(C, rec):
    _gp(
        C,
        rec,
        lambda: nn.Sequential(
            nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), nn.Flatten(0), nn.Linear(24, 1)
        ),
        (3, 2, 4),
    )


@scenario
def accumulate_without_zero_grad(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)))
    cm = C(m)
    m[0].weight.grad = torch.ones(3, 4).t()  # (a transposed grad already there)
    for i in range(3):
        cm(L(2, 3, seed=i)).pow(2).sum().backward()
        rec(f"{i}", [(n, p.grad, strides(p.grad)) for n, p in m.named_parameters()])


@scenario
def retain_graph_twice(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    out = C(m)(L(5, 3))
    loss = out.pow(2).sum()
    loss.backward(retain_graph=True)
    rec("1", {n: p.grad for n, p in m.named_parameters()})
    loss.backward()
    rec("2", {n: p.grad for n, p in m.named_parameters()})
    attempt_backward = None
    try:
        loss.backward()
    except RuntimeError as e:
        attempt_backward = e
    rec("3", attempt_backward)


@scenario
def pad_and_pack_sequence_inside(C, rec):
    m = mk(lambda: nn.GRU(3, 4, batch_first=True))

    def f(a, b, c):
        padded = nn.utils.rnn.pad_sequence([a, b, c], batch_first=True, padding_value=0.5)
        packed = nn.utils.rnn.pack_sequence([a, b, c], enforce_sorted=False)
        out, h = m(packed)
        return padded, out.data, h

    a, b, c = L(4, 3), L(2, 3, seed=1), L(5, 3, seed=2)
    step(rec, "a", C(f), m, (a, b, c), inputs=(a, b, c))


@scenario
def lstm_h0_grads_and_weight_edit(C, rec):
    m = mk(lambda: nn.LSTM(3, 4, num_layers=2))
    cm = C(m)
    for i in range(3):
        h0, c0 = L(2, 2, 4, seed=10 + i), L(2, 2, 4, seed=20 + i)
        x = L(5, 2, 3, seed=i)
        step(rec, f"{i}", cm, m, (x, (h0, c0)), inputs=(x, h0, c0))
        with torch.no_grad():
            m.weight_hh_l0.mul_(0.5)  # (a weight edited in place between calls)


@scenario
def forward_hook_always_call_and_global(C, rec):
    seen = []
    m = mk(lambda: nn.Sequential(nn.Linear(3, 3), nn.Softsign()))
    m[0].register_forward_hook(lambda mod, a, o: o * 2, always_call=True)
    handle = nn.modules.module.register_module_forward_hook(
        lambda mod, a, o: seen.append(type(mod).__name__)
    )
    try:
        step(rec, "a", C(m), m, (L(2, 3),))
    finally:
        handle.remove()
    rec("seen", sorted(set(seen)))


# ============================================================================================
# in-place renormalization read again, edge values


class TiedMaxNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, max_norm=1.0)

    def forward(self, a, b):
        h = self.emb(a).sum(1)  # (renormalizes rows of a in place)
        h2 = self.emb(b).sum(1)  # (again, rows of b)
        return h @ self.emb.weight.t() + h2.sum()  # (the weight after both writes)


module_case(
    "emb_max_norm_tied_twice", TiedMaxNorm, lambda i: (idx(2, 3, seed=i), idx(2, 2, seed=i + 5))
)
module_case(
    "embbag_max_all_padding",
    lambda: nn.EmbeddingBag(10, 3, mode="max", padding_idx=2),
    lambda i: (torch.tensor([2, 2, 1, 2, 5]), torch.tensor([0, 2, 2])),
)
module_case(
    "embbag_mean_all_padding",
    lambda: nn.EmbeddingBag(10, 3, mode="mean", padding_idx=2),
    lambda i: (torch.tensor([2, 2, 1, 2, 5]), torch.tensor([0, 2, 2])),
)
module_case(
    "in_track_eval_uses_running",
    lambda: nn.InstanceNorm1d(3, track_running_stats=True, momentum=0.5),
    lambda i: (L(2, 3, 5, seed=i),),
    modes=("train", "train", "eval", "nograd", "train"),
)


def _frozen_weight_bn():
    bn = nn.BatchNorm1d(3)
    bn.weight.requires_grad_(False)
    return bn


module_case("bn_weight_frozen_bias_trained", _frozen_weight_bn, lambda i: (L(4, 3, seed=i),))


module_case(
    "ctc_repeats_and_blank_targets",
    lambda: nn.CTCLoss(blank=0, reduction="sum"),
    lambda i: (
        L(8, 2, 4, seed=i).log_softmax(2),
        torch.tensor([[1, 1, 2, 2], [3, 3, 3, 0]]),
        torch.tensor([8, 7]),
        torch.tensor([4, 3]),
    ),
)
module_case(
    "lstm_proj_packed",
    lambda: nn.LSTM(3, 5, proj_size=2, batch_first=True),
    lambda i: (
        nn.utils.rnn.pack_padded_sequence(
            L(3, 4, 3, seed=i), torch.tensor([4, 2, 3]), batch_first=True, enforce_sorted=False
        ),
    ),
)
err_case("conv_same_stride", lambda: nn.Conv1d(2, 2, 3, padding="same"), lambda i: (L(1, 2, 0),))


class SpatialTransformer(nn.Module):
    def __init__(self, mode, padding_mode, align_corners):
        super().__init__()
        self.loc = nn.Linear(16, 6)
        self.kw = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
        self.ac = align_corners

    def forward(self, x):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3) * 0.3 + torch.eye(2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=self.ac)
        return F.grid_sample(x, grid, **self.kw)


for _mode in ("bilinear", "nearest", "bicubic"):
    for _pm in ("zeros", "border", "reflection"):
        module_case(
            f"stn_{_mode}_{_pm}",
            lambda m=_mode, p=_pm: SpatialTransformer(m, p, False),
            lambda i: (L(2, 1, 4, 4, seed=i),),
            modes=("train", "eval"),
        )
module_case(
    "stn_bilinear_ac",
    lambda: SpatialTransformer("bilinear", "zeros", True),
    lambda i: (L(2, 1, 4, 4, seed=i),),
    modes=("train",),
)


# ============================================================================================
# activation checkpointing of modules, dynamic=True


class Checkpointed(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.GELU(), nn.Linear(4, 4))
        self.head = nn.Linear(4, 2)
        self.reentrant = reentrant

    def forward(self, x):
        h = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=self.reentrant)
        return self.head(h)


module_case(
    "checkpoint_bn_nonreentrant",
    lambda: Checkpointed(False),
    lambda i: (L(5, 4, seed=i),),
    modes=("train", "train", "eval"),
)
module_case(
    "checkpoint_bn_reentrant",
    lambda: Checkpointed(True),
    lambda i: (L(5, 4, seed=i),),
    modes=("train", "eval"),
)


def dyn_true_case(name, ctor, make, modes=("train", "train", "train", "eval")):
    def fn(C, rec):
        m = mk(ctor)
        cm = C(m, dynamic=True)
        for i, mode in enumerate(modes):
            m.train(mode == "train")
            args = make(*_SIZES[i], i)
            leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            step(rec, f"{i} {mode}", cm, m, args, inputs=leaves)

    fn.__name__ = f"dyntrue_{name}"
    SCENARIOS[fn.__name__] = fn


dyn_true_case(
    "bn_momentum_none",
    lambda: nn.BatchNorm1d(3, momentum=None),
    lambda b, n, i: (L(b, 3, n, seed=i),),
)
dyn_true_case(
    "emb_max_norm", lambda: nn.Embedding(10, 3, max_norm=1.0), lambda b, n, i: (idx(b, n, seed=i),)
)
dyn_true_case(
    "lstm", lambda: nn.LSTM(3, 4, batch_first=True), lambda b, n, i: (L(b, n, 3, seed=i),)
)
dyn_true_case(
    "mha_kpm",
    lambda: nn.MultiheadAttention(8, 2, batch_first=True),
    lambda b, n, i: (L(b, n, 8, seed=i),) * 3,
)
dyn_true_case(
    "interp_scale",
    lambda: nn.Upsample(scale_factor=1.5, mode="bilinear"),
    lambda b, n, i: (L(b, 2, n, 4, seed=i),),
)
dyn_true_case(
    "adaptive_pool", lambda: nn.AdaptiveAvgPool1d(3), lambda b, n, i: (L(b, 2, n, seed=i),)
)
dyn_true_case(
    "ce_ignore",
    lambda: nn.CrossEntropyLoss(ignore_index=1, label_smoothing=0.2),
    lambda b, n, i: (L(b * n, 3, seed=i), idx(b * n, hi=3, seed=i)),
)
dyn_true_case(
    "unfold_fold",
    lambda: nn.Sequential(nn.Unfold(2), nn.Fold((4, 5), 2)),
    lambda b, n, i: (L(b, 2, 4, 5, seed=i),),
)
dyn_true_case(
    "embbag_offsets",
    lambda: nn.EmbeddingBag(10, 3, mode="max"),
    lambda b, n, i: (idx(b * n, seed=i), torch.arange(0, b * n, n)),
)
dyn_true_case(
    "conv_reflect",
    lambda: nn.Conv1d(2, 2, 3, padding=1, padding_mode="circular"),
    lambda b, n, i: (L(b, 2, n, seed=i),),
)
dyn_true_case("zeropad_neg", lambda: nn.ZeroPad1d((2, -1)), lambda b, n, i: (L(b, 2, n, seed=i),))
dyn_true_case(
    "channel_shuffle_cl",
    lambda: nn.ChannelShuffle(2),
    lambda b, n, i: (
        L(b, 4, n, 3, seed=i).detach().to(memory_format=torch.channels_last).requires_grad_(),
    ),
)


@scenario
def inference_mode_train_and_eval(C, rec):
    m = mk(
        lambda: nn.Sequential(
            nn.Conv1d(2, 3, 2),
            nn.BatchNorm1d(3),
            nn.InstanceNorm1d(3, track_running_stats=True),
            parametrizations.spectral_norm(nn.Linear(4, 2)),
            nn.Embedding(5, 2, max_norm=0.5) if False else nn.Identity(),
        )
    )
    cm = C(m)
    for i, mode in enumerate(("train", "eval", "train")):
        m.train(mode == "train")
        with torch.inference_mode():
            x = L(3, 2, 5, seed=i, rg=False)
            out = cm(x)
            rec(f"{i} out", [out, out.is_inference()])
        rec(f"{i} state", state(m))
        rec(f"{i} versions", [b._version > 0 for b in m.buffers()])
    step(rec, "after", cm, m, (L(3, 2, 5, seed=9),))


@scenario
def emb_max_norm_inference_mode(C, rec):
    m = mk(lambda: nn.Embedding(6, 3, max_norm=0.5))
    cm = C(m)
    with torch.inference_mode():
        out = cm(torch.tensor([[1, 2], [2, 5]]))
    rec("out", out)
    rec("weight", m.weight)
    step(rec, "after", cm, m, (torch.tensor([1, 3]),))


@scenario
def module_dtype_changes_between_calls(C, rec):
    m = mk(lambda: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.BatchNorm1d(4)))
    cm = C(m)
    step(rec, "f32", cm, m, (L(5, 3),))
    m.double()
    step(rec, "f64", cm, m, (L(5, 3, seed=1).detach().double().requires_grad_(),))
    m.to(torch.get_default_dtype())
    m.eval()
    with torch.no_grad():
        step(rec, "back", cm, m, (L(5, 3, seed=2),))


class NormThenGather(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)
        self.emb = nn.Embedding(4, 3, max_norm=1.0)
        self.ce = nn.CrossEntropyLoss()

    def forward(self, x, idx, target):
        h = self.bn(x)
        e = self.emb(idx)  # (renormalizes, then may be out of range)
        logits = h + e
        return self.ce(logits, target)


@scenario
def errors_on_a_later_call_keep_eager_side_effects(C, rec):
    m = mk(NormThenGather)
    cm = C(m)
    ok = (L(3, 3), torch.tensor([0, 1, 3]), torch.tensor([0, 2, 1]))
    step(rec, "ok", cm, m, ok)
    for label, idx_, target in (
        ("emb oob", [0, 4, 1], [0, 1, 2]),
        ("target oob", [0, 1, 2], [0, 3, 1]),
        ("negative", [0, -1, 2], [0, 1, 2]),
    ):
        try:
            step(rec, label, cm, m, (L(3, 3, seed=1), torch.tensor(idx_), torch.tensor(target)))
        except (RuntimeError, IndexError) as e:
            rec(f"{label} raised", e)
        rec(f"{label} state", state(m))
        m.zero_grad(set_to_none=True)
    step(rec, "ok again", cm, m, ok)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
