"""Train a small model with backend="xla" and with eager PyTorch, side by side.

    python examples/train.py [--steps 300]

The training loop is ordinary PyTorch (AdamW, cross-entropy, zero_grad/backward/step); only
``torch.compile(model, backend="xla")`` differs. Both runs start from the same weights and see
the same synthetic batches, so their loss curves should agree to float32 rounding. Printed:
the loss every 50 steps for both, and the median step time of each.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    """Token embedding, a transformer encoder layer, mean pooling, a linear head."""

    def __init__(self, vocab: int = 64, d: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.encoder = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(1))


def batches(steps: int, batch: int = 32, length: int = 16, vocab: int = 64, classes: int = 4):
    """Synthetic task: the label is which quarter of the vocabulary is most frequent."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (batch, length), generator=gen)
        labels = (tokens // (vocab // classes)).mode(dim=1).values
        yield tokens, labels


def train(model: nn.Module, steps: int) -> tuple[list[float], list[float]]:
    """(loss per step, seconds per step)."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses, times = [], []
    for tokens, labels in batches(steps):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(tokens), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return losses, times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Classifier()
    eager_model = copy.deepcopy(model)

    xla_losses, xla_times = train(torch.compile(model, backend="xla"), args.steps)
    eager_losses, eager_times = train(eager_model, args.steps)

    print(f"{'step':>5} {'xla loss':>10} {'eager loss':>11}")
    for i in range(0, args.steps, 50):
        print(f"{i:5d} {xla_losses[i]:10.4f} {eager_losses[i]:11.4f}")
    print(f"{args.steps - 1:5d} {xla_losses[-1]:10.4f} {eager_losses[-1]:11.4f}")
    diff = max(abs(a - b) for a, b in zip(xla_losses, eager_losses))
    print(f"largest loss difference over {args.steps} steps: {diff:.2e}")
    # The first xla step compiles; the median over the rest is the steady step time.
    xla_ms = statistics.median(xla_times[1:]) * 1e3
    eager_ms = statistics.median(eager_times[1:]) * 1e3
    print(f"first xla step (compiles): {xla_times[0]:.2f} s")
    print(
        f"median step time: xla {xla_ms:.2f} ms, eager {eager_ms:.2f} ms "
        f"(xla/eager {xla_ms / eager_ms:.2f})"
    )


if __name__ == "__main__":
    main()
