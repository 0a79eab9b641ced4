"""torch 2.11 check of tests/test_userprog_s29's forward-writes Function: eager, aot_eager, xla."""

import torch

import torch2xla  # noqa: F401


class W(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.clone()
        y.mul_(2)
        y.add_(1)
        return y

    @staticmethod
    def backward(ctx, g):
        return g * 2


def fn(x):
    return W.apply(x) * 1


for backend in [None, "aot_eager", "xla"]:
    torch._dynamo.reset()
    x = torch.arange(3.0, requires_grad=True)
    f = fn if backend is None else torch.compile(fn, backend=backend)
    out = f(x)
    (out * torch.linspace(-1, 3, 3)).sum().backward()
    print(torch.__version__, backend, out.detach().tolist(), x.grad.tolist())
