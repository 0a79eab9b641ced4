"""Is a gradient error ours, or the problem's? Gradient accuracy against float64, with eager's spread.

A model's gradient, measured as its relative L2 distance from a float64 eager reference, can
jump by orders of magnitude when a float32 rounding moves a value across a ReLU's zero or a
max-pool's near-tie downstream: the result then depends on luck, not on the implementation.
This script reports, for one model and input:

- eager float32's error against float64;
- torch2xla's (``backend="xla"``) error against float64;
- eager float32's error with the input perturbed by one rounding (x * (1 + 2**-24 * noise)),
  over several draws: the spread that float32 rounding alone produces.

torch2xla is as accurate as eager when its error lies within that spread (session 11: the
shufflenet_v2 "5.5e-3 against eager's 9.8e-5" case was such a jump; ``tests/test_accuracy.py``
checks the stem layer by layer, where the problem is well conditioned).

Usage: python benchmarks/grad_conditioning.py [shufflenet_v2_x1_0 | levit_128s | stem] [--draws 8]
(torchvision / timm models need those packages.)
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn


def _model(name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.rand(2, 3, 64, 64) * 255  # image-like: positive, large mean
    if name == "stem":
        m = nn.Sequential(
            nn.Conv2d(3, 24, 3, 2, 1, bias=False),
            nn.BatchNorm2d(24),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
            nn.Flatten(),
            nn.Linear(24 * 16 * 16, 10),
        )
        return m.train(), x
    if name.startswith("levit"):
        import timm

        return timm.create_model(name, num_classes=10).train(), torch.randn(2, 3, 224, 224)
    import torchvision

    return getattr(torchvision.models, name)(num_classes=10).train(), x


def _grads(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    for p in model.parameters():
        p.grad = None
    out = model(x)
    F.cross_entropy(out, torch.arange(out.shape[0]) % out.shape[1]).backward()
    return torch.cat([p.grad.flatten().double() for p in model.parameters() if p.grad is not None])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="stem")
    ap.add_argument("--draws", type=int, default=8)
    args = ap.parse_args()
    model, x = _model(args.model)
    ref = _grads(copy.deepcopy(model).double(), x.double())

    def err(g: torch.Tensor) -> float:
        return ((g - ref).norm() / ref.norm()).item()

    eager = err(_grads(copy.deepcopy(model), x))
    xla = err(_grads(torch.compile(copy.deepcopy(model), backend="xla"), x))
    spread = []
    for seed in range(args.draws):
        g = torch.Generator().manual_seed(seed)
        xp = x * (1 + 2.0**-24 * torch.randn(x.shape, generator=g))
        spread.append(err(_grads(copy.deepcopy(model), xp)))
    spread.sort()
    print(f"{args.model}: relative L2 gradient error against float64")
    print(f"  eager float32          {eager:.2e}")
    print(f"  torch2xla              {xla:.2e}")
    print(
        f"  eager, input rounded   min {spread[0]:.2e}  median {spread[len(spread) // 2]:.2e}"
        f"  max {spread[-1]:.2e}  ({args.draws} draws)"
    )


if __name__ == "__main__":
    main()
