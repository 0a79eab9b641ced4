"""Issue 2 part 5: the models users start with, compiled with backend="xla", against eager."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import ProgramCounter, assert_same
from tests.models import CNN, MLP, GPT2Block, LSTMTagger, TinyGPT


def compare_module(model, *args, train=False, grad=False, atol=1e-5, rtol=1.3e-6):
    """Compile a copy of ``model``; compare outputs and (training) buffers with eager."""
    torch.manual_seed(0)
    ref = copy.deepcopy(model).train(train)
    model = model.train(train)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    ctx = torch.enable_grad() if grad else torch.no_grad()
    with ctx:
        out, expected = compiled(*args), ref(*args)
    assert_same(out, expected, atol=atol, rtol=rtol)
    assert_same(dict(model.named_buffers()), dict(ref.named_buffers()), atol=atol, rtol=rtol)
    return out


@pytest.mark.parametrize("grad", [False, True])
def test_mlp(grad):
    compare_module(MLP(), torch.randn(8, 32), grad=grad)


@pytest.mark.parametrize("train", [False, True])
def test_cnn(train):
    compare_module(CNN(), torch.randn(4, 3, 16, 16), train=train, grad=train)


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
        nn.Conv2d(4, 4, (3, 5), padding=(2, 1), dilation=(2, 1), groups=4),
        nn.Conv1d(4, 6, 5, stride=3, padding=2),
        nn.Conv3d(4, 2, 3, padding=1),
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        nn.Conv2d(4, 8, 3, padding="same", bias=False),
    ],
    ids=["grouped-strided", "dilated-rect-depthwise", "1d", "3d", "transposed", "same"],
)
def test_convolutions(conv):
    x = torch.randn(2, 4, *([9] * (conv.weight.ndim - 2)))
    compare_module(conv, x)


@pytest.mark.parametrize(
    "pool",
    [
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.MaxPool2d(2, ceil_mode=True),
        nn.MaxPool2d(3, stride=1, dilation=2),
        nn.AvgPool2d(3, stride=2, padding=1),
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
        nn.AdaptiveAvgPool2d((3, 2)),
        nn.AdaptiveAvgPool2d(1),
    ],
    ids=["max", "max-ceil", "max-dilated", "avg", "avg-nopad-ceil", "adaptive", "global"],
)
def test_pooling(pool):
    compare_module(pool, torch.randn(2, 3, 11, 10))


def test_maxpool_indices():
    f = lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    x = torch.randn(2, 3, 9, 8)
    out = torch.compile(f, backend="xla", options={"strict": True})(x)
    assert_same(out, f(x))


def test_embedding_layernorm():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16, padding_idx=0)
            self.ln = nn.LayerNorm(16)

        def forward(self, idx):
            return self.ln(self.emb(idx))

    compare_module(M(), torch.randint(0, 50, (4, 7)), grad=True)


@pytest.mark.parametrize("mask", ["causal", "bool", "float", "none"])
def test_scaled_dot_product_attention(mask):
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    kw = {}
    if mask == "causal":
        kw["is_causal"] = True
    elif mask == "bool":
        m = torch.rand(6, 6) > 0.4
        m[:, 0] = True
        kw["attn_mask"] = m
    elif mask == "float":
        kw["attn_mask"] = torch.randn(2, 1, 6, 6)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kw)

    out = torch.compile(f, backend="xla", options={"strict": True})(q, k, v)
    assert_same(out, f(q, k, v))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval", "eval-fastpath"])
def test_transformer_encoder_layer(mode, norm_first):
    layer = nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first, activation="gelu"
    )
    x = torch.randn(3, 7, 32)
    if mode == "eval-fastpath":  # eval + no_grad takes the fused _transformer_encoder_layer_fwd
        compare_module(layer, x, train=False, grad=False)
    else:
        compare_module(layer, x, train=mode == "train", grad=True)


def test_transformer_encoder_fastpath_with_mask():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    mask = nn.Transformer.generate_square_subsequent_mask(7)
    compare_module(layer, torch.randn(3, 7, 32), mask)


@pytest.mark.parametrize("rnn", ["lstm", "gru", "lstm-tagger"])
def test_rnns_really_compile(rnn, monkeypatch):
    counter = ProgramCounter(monkeypatch)
    if rnn == "lstm":
        model = nn.LSTM(8, 12, num_layers=2, batch_first=True)
    elif rnn == "gru":
        model = nn.GRU(8, 12, batch_first=True, bidirectional=True)
    else:
        model = LSTMTagger(8)
    compare_module(model, torch.randn(3, 5, 8), grad=True)
    assert counter.count >= 1, "the RNN frame ran eagerly instead of through XLA"


def test_gpt2_block():
    compare_module(GPT2Block(), torch.randn(2, 9, 32), grad=True)


def test_tiny_gpt():
    compare_module(TinyGPT(), torch.randint(0, 128, (2, 12)), atol=2e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a * 2.5,
        lambda a, b: a / b,
        lambda a, b: a // b,
        lambda a, b: a % b,
        lambda a, b: torch.fmod(a, b),
        lambda a, b: (a > b) + a,
        lambda a, b: torch.where(a > 0, a, 0.5),
        lambda a, b: a.sum(),
        lambda a, b: a.mean(dtype=torch.float64),
    ],
)
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.int32, torch.int64),
        (torch.int64, torch.float32),
        (torch.float16, torch.float64),
        (torch.bfloat16, torch.int8),
        (torch.uint8, torch.bool),
    ],
    ids=str,
)
def test_type_promotion_follows_torch(fn, dtypes):
    a = (torch.randn(5) * 10).to(dtypes[0])
    b = (torch.rand(5) * 5 + 1).to(dtypes[1])
    try:
        expected = fn(a, b)
    except RuntimeError:
        pytest.skip("eager rejects this combination")
    out = torch.compile(fn, backend="xla", options={"strict": True})(a, b)
    assert_same(
        out, expected, atol=1e-2 if torch.float16 in dtypes or torch.bfloat16 in dtypes else 1e-5
    )
