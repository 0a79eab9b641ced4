"""Parity testing with torch2xla.testing: does backend="xla" give a model eager PyTorch's
numbers across many inputs, and what is the smallest input where it does not?

    python examples/parity.py

1. checks one call of a small model (outputs, every parameter gradient, BatchNorm's running
   statistics);
2. runs a hypothesis parity test over drawn batch sizes and values;
3. plants a discrepancy (a function that behaves differently when compiled, standing in for a
   lowering bug) and shows it caught and shrunk to a minimal input.
"""

import torch
from hypothesis import strategies as st
from torch import nn

from torch2xla.testing import ParityError, assert_parity, module_inputs, parity_test, tensors


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(16, 32), nn.GELU(), nn.BatchNorm1d(32), nn.Linear(32, 4)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.body(x), dim=-1)


def main() -> None:
    torch.manual_seed(0)
    model = SmallNet().train()

    # 1. One call: outputs, gradients of every parameter, and the BatchNorm buffer updates.
    report = assert_parity(model, torch.randn(8, 16), grad=True)
    print(
        f"1. one call: {report.xla_runs} XLA graph run(s), max |xla - eager| = "
        f"{report.max_abs_diff:.2e}"
    )

    # 2. A property test: batch sizes from a small set (each one compiles), random values.
    #    Gradients through BatchNorm on tiny batches are ill-conditioned: keep batches >= 6.
    test_model = parity_test(
        args=module_inputs(torch.randn(8, 16), sizes=(6, 12)),
        grad=True,
        max_examples=10,
        rtol=1e-4,
        atol=1e-5,
    )(model)
    test_model()
    print("2. parity test over 10 drawn inputs: passed")

    # 3. A planted discrepancy: when compiled, values above 100 come out 0.1% too large.
    tried = []

    @parity_test(
        tensors(
            torch.float32, st.sampled_from([(1,), (4,), (3, 4)]), min_value=-1e4, max_value=1e4
        ),
        max_examples=200,
        settings={"derandomize": True},
    )
    def planted(x):
        if torch.compiler.is_compiling():
            return torch.where(x > 100, x * 1.001, x)
        tried.append(x.clone())
        return x * 1

    try:
        planted()
    except ParityError as e:
        print(
            f"3. planted discrepancy caught after {len(tried)} eager runs; hypothesis shrank "
            f"it to shape {tuple(tried[-1].shape)}, value {tried[-1].item()!r}:\n"
        )
        print(str(e).split("\nFailing test case")[0])
    else:
        raise SystemExit("the planted discrepancy was not caught")


if __name__ == "__main__":
    main()
