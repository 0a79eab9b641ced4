"""torch2xla quickstart: compile a model with backend="xla" and compare with eager PyTorch.

No `import torch2xla` is needed: the backend is found through its entry point.
"""

import torch
from torch import nn


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 64), nn.ReLU()
        )
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(self.body(x)), dim=-1)


def main() -> None:
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(8, 32)
    fast = torch.compile(model, backend="xla")
    with torch.no_grad():
        out = fast(x)
        ref = model(x)
    print("xla output (first row):  ", out[0, :5])
    print("eager output (first row):", ref[0, :5])
    diff = (out - ref).abs().max().item()
    print(f"max difference: {diff:.3e}")
    assert diff < 1e-5, "outputs differ more than float32 tolerance"


if __name__ == "__main__":
    main()
