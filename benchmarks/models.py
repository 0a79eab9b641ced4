"""The benchmark suite's models and inputs. Plain torch; the GPU-only ones come from
``transformers`` configs (random weights, nothing downloaded) and ``torchvision``.

Every entry of ``CASES`` builds ``(model, inputs, loss_fn)`` for a device: ``model(*inputs)`` is
the inference call, ``loss_fn(output)`` the scalar a training step differentiates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# --- plain-torch models -------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d_in: int = 512, hidden: int = 1024, d_out: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short = None
        if stride != 1 or c_in != c_out:
            self.short = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNetSmall(nn.Module):
    """A ResNet-style CNN (BatchNorm, residual blocks, strided downsampling) for 32x32 images."""

    def __init__(self, width: int = 32, classes: int = 10) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(
            nn.Conv2d(3, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU()
        )
        self.layers = nn.Sequential(
            BasicBlock(w, w, 1), BasicBlock(w, 2 * w, 2), BasicBlock(2 * w, 4 * w, 2)
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.stem(x)))


class BNCNN(nn.Module):
    """Two conv-BatchNorm-ReLU-maxpool blocks (3 -> 32 -> 64 channels), dropout and a linear
    classifier: the CPU workload of issue 25, at 64x64 images."""

    def __init__(self, size: int = 64, classes: int = 10) -> None:
        super().__init__()

        def block(c_in: int, c_out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                nn.BatchNorm2d(c_out),
                nn.ReLU(),
                nn.MaxPool2d(2),
            )

        self.features = nn.Sequential(block(3, 32), block(32, 64))
        self.head = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.5), nn.Linear(64 * (size // 4) ** 2, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class GPTBlock(nn.Module):
    """GPT-2 block in plain torch: pre-norm causal self-attention, GELU(tanh) MLP, residuals."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class SmallGPT(nn.Module):
    """A GPT-2-style decoder: token and position embeddings, blocks, final norm, tied head."""

    def __init__(
        self, vocab: int = 2048, d: int = 256, heads: int = 4, layers: int = 4, max_len: int = 128
    ) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tok.weight.t()


class LSTMTagger(nn.Module):
    def __init__(self, vocab: int = 1000, d: int = 128, hidden: int = 256, tags: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(idx))
        return self.out(h)


# --- losses ---------------------------------------------------------------------------------


def _classify(classes: int, batch: int, device) -> Callable:
    labels = torch.randint(0, classes, (batch,), generator=torch.Generator().manual_seed(1))
    labels = labels.to(device)
    return lambda out: F.cross_entropy(_logits(out).float(), labels)


def _lm(vocab: int, shape: tuple[int, int], device) -> Callable:
    targets = torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))
    targets = targets.to(device)
    return lambda out: F.cross_entropy(_logits(out).flatten(0, 1).float(), targets.flatten())


def _mean_square(out) -> torch.Tensor:
    return _logits(out).float().pow(2).mean()


def _logits(out):
    """The main tensor of a model's output (plain tensor or a transformers ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return out
    for name in ("logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    return out[0]


def _tokens(vocab: int, shape: tuple[int, int], device) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0)).to(device)


def _images(shape: tuple[int, ...], device) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device)


# --- cases ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One model at one size: ``build(device) -> (model, inputs, loss_fn)``."""

    name: str
    description: str
    build: Callable
    gpu_only: bool = False
    # Tokens a training step processes and the model's parameter count drive the MFU estimate.
    tokens: int | None = None


def _mlp(device):
    return MLP().to(device), (_images((64, 512), device),), _classify(10, 64, device)


def _cnn(device):
    model = ResNetSmall().to(device)
    return model, (_images((16, 3, 32, 32), device),), _classify(10, 16, device)


def _bncnn(device):
    return BNCNN().to(device), (_images((32, 3, 64, 64), device),), _classify(10, 32, device)


def _transformer(device, cpu=True):
    b, t, d = (8, 64, 256) if cpu else (32, 256, 768)
    # dropout 0: with it, the training step's numbers could not be compared with eager's.
    layer = nn.TransformerEncoderLayer(d, d // 64, 4 * d, dropout=0.0, batch_first=True)
    return layer.to(device), (_images((b, t, d), device),), _mean_square


def _gpt(device):
    model = SmallGPT().to(device)
    return model, (_tokens(2048, (8, 128), device),), _lm(2048, (8, 128), device)


def _lstm(device):
    model = LSTMTagger().to(device)
    return model, (_tokens(1000, (16, 32), device),), _lm(16, (16, 32), device)


def _hf_gpt2(device):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    model = GPT2LMHeadModel(config).to(device)
    ids = _tokens(config.vocab_size, (8, 512), device)
    return model, (ids,), _lm(config.vocab_size, (8, 512), device)


def _hf_bert(device):
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertModel(config, add_pooling_layer=False).to(device)
    return model, (_tokens(config.vocab_size, (32, 128), device),), _mean_square


class OwnLoss:
    """A transformers model's own loss, as its users train it: the step calls
    ``model(*inputs, **kwargs)`` (``labels=`` among them) and differentiates ``output.loss``;
    inference calls it without them."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs

    def __call__(self, out) -> torch.Tensor:
        return out.loss


def _hf_gpt2_lm(device):
    from transformers import GPT2Config, GPT2LMHeadModel

    # transformers' defaults, dropout 0.1 included, as a user builds it
    config = GPT2Config(use_cache=False)
    model = GPT2LMHeadModel(config).to(device)
    ids = _tokens(config.vocab_size, (8, 512), device)
    return model, (ids,), OwnLoss(labels=ids)


def _hf_bert_cls(device):
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(BertConfig(num_labels=2)).to(device)
    labels = torch.randint(0, 2, (32,), generator=torch.Generator().manual_seed(1)).to(device)
    return model, (_tokens(30522, (32, 128), device),), OwnLoss(labels=labels)


def _resnet50(device):
    import torchvision

    model = torchvision.models.resnet50().to(device)
    return model, (_images((64, 3, 224, 224), device),), _classify(1000, 64, device)


def _vit(device):
    import torchvision

    model = torchvision.models.vit_b_16(dropout=0.0, attention_dropout=0.0).to(device)
    # torchvision zero-initializes the head: outputs would not depend on the rest of the model.
    torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    return model, (_images((64, 3, 224, 224), device),), _classify(1000, 64, device)


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("mlp", "MLP 512-1024-1024-10, batch 64", _mlp),
        Case("cnn", "ResNet-style CNN (3 residual blocks, BatchNorm), 16x3x32x32", _cnn),
        Case(
            "bncnn",
            "2x (conv 3x3 - BatchNorm - ReLU - maxpool 2), 3 -> 32 -> 64 channels, dropout 0.5,"
            " linear; 32x3x64x64",
            _bncnn,
        ),
        Case(
            "transformer",
            "nn.TransformerEncoderLayer d=256 h=4, 8x64 tokens (GPU: d=768, 32x256)",
            _transformer,
        ),
        Case(
            "gpt",
            "GPT-2-style decoder in plain torch, 4 layers d=256, 8x128 tokens",
            _gpt,
            tokens=8 * 128,
        ),
        Case("lstm", "Embedding + 2-layer LSTM(128->256) + Linear, 16x32 tokens", _lstm),
        Case(
            "gpt2",
            "GPT-2 124M (transformers config, random weights), 8x512 tokens",
            _hf_gpt2,
            gpu_only=True,
            tokens=8 * 512,
        ),
        Case(
            "bert",
            "BERT-base (transformers config, random weights), 32x128 tokens",
            _hf_bert,
            gpu_only=True,
            tokens=32 * 128,
        ),
        Case(
            "gpt2-lm",
            "GPT-2 124M as users train it: transformers' default config (dropout 0.1), its own"
            " `labels=` loss over the 50257-wide LM head, 8x512 tokens",
            _hf_gpt2_lm,
            gpu_only=True,
            tokens=8 * 512,
        ),
        Case(
            "bert-cls",
            "BertForSequenceClassification (default config, dropout 0.1, pooler), its own"
            " `labels=` loss, 32x128 tokens",
            _hf_bert_cls,
            gpu_only=True,
            tokens=32 * 128,
        ),
        Case("resnet50", "torchvision ResNet-50, batch 64 at 224x224", _resnet50, gpu_only=True),
        Case("vit", "torchvision ViT-B/16, batch 64 at 224x224", _vit, gpu_only=True),
    )
}


def build(name: str, device: str):
    """``(model, inputs, loss_fn)`` of case ``name`` on ``device`` (seeded: same weights each
    time)."""
    torch.manual_seed(0)
    if name == "transformer":
        return _transformer(device, cpu=not device.startswith("cuda"))
    return CASES[name].build(device)
