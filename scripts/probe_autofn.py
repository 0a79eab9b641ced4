"""Probe: torch.autograd.Function with its own backward inside a compiled graph: programs,
graph breaks, FallbackWarnings, and gradients (values, None-ness) against eager."""

import warnings

import torch

import torch2xla  # noqa: F401


class STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1), None


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x) * 1.0

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.alpha, None


class QAT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x):
        h = STE.apply(torch.relu(self.a(x)), 4.0)
        return self.b(h).sum()


class GRL(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.nn.Linear(8, 8)
        self.d = torch.nn.Linear(8, 2)

    def forward(self, x):
        h = torch.tanh(self.f(x))
        return self.d(Reverse.apply(h, 0.5)).pow(2).sum() + h.sum()


def run(model_cls):
    torch.manual_seed(0)
    ref = model_cls()
    comp = model_cls()
    comp.load_state_dict(ref.state_dict())
    x = torch.randn(4, 8)
    ref(x).backward()
    torch._dynamo.reset()
    graphs = []

    def count(gm, ex):
        graphs.append(gm)
        return torch2xla.backend(gm, ex) if hasattr(torch2xla, "backend") else gm

    compiled = torch.compile(comp, backend="xla")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        compiled(x).backward()
    fallback = [str(m.message)[:90] for m in w if "Fallback" in type(m.message).__name__]
    explain = torch._dynamo.explain(comp)(x)
    same = all(
        torch.allclose(p.grad, q.grad, atol=1e-6)
        for p, q in zip(ref.parameters(), comp.parameters())
    )
    print(
        model_cls.__name__,
        "graphs",
        explain.graph_count,
        "breaks",
        explain.graph_break_count,
        "fallback warnings",
        fallback,
        "grads equal",
        same,
    )


if __name__ == "__main__":
    run(QAT)
    run(GRL)
