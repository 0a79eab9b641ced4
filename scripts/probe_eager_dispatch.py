"""Eager JAX ops on steady calls: each workload runs two warm-up calls, then its steady calls
are watched for JAX work run outside any compiled program (eager primitives, and jax's own
jitted helpers called from Python), with the torch2xla lines that made them.

    python scripts/probe_eager_dispatch.py [--cuda] [substring ...]

With ``--cuda`` every workload runs on the GPU (torch's default device), CPU tensors mixed in
where a workload says so.
"""

from __future__ import annotations

import os
import sys

# the checkout's torch2xla and tests, not an installed torch2xla
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla
from tests._eager_ops import EagerOps
from tests.models import CNN, MLP, LSTMTagger, TinyGPT


def C(fn, **options):
    return torch.compile(fn, backend="xla", options=options or None)


def train(model, make, loss=lambda o: o.float().square().mean(), opt=True, **options):
    m = C(model, **options)
    o = torch.optim.SGD(model.parameters(), lr=0.01) if opt else None

    def step():
        out = m(make())
        loss(out).backward()
        if o is not None:
            o.step()
            o.zero_grad()

    return step


def infer(model, make, **options):
    m = C(model, **options)

    def step():
        with torch.no_grad():
            m(make())

    return step


def w_some_outputs():
    def f(x, w):
        h = x @ w
        return h.sum(), h.tanh(), (x.double() * 3).sum(1), h[:, :2]

    x, w = torch.randn(5, 4, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    g = C(f)

    def step():
        outs = g(x, w)
        (outs[0] + outs[3].sum()).backward()

    return step


def w_complex():
    def f(x):
        z = torch.view_as_complex(x.reshape(-1, 2))
        return z * z, z.abs().sum()

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        z, s = g(x)
        (z.real.sum() + s).backward()

    return step


def w_complex_out_only():
    def f(x):
        z = torch.view_as_complex(x.reshape(-1, 2))
        return z * z, x.sum()

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        _z, s = g(x)
        s.backward()

    return step


def w_empty():
    def f(x):
        return x[:0] * 2, (x * 3).sum(), x.new_zeros(0, 3) + x[:0, :3]

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        _a, s, _e = g(x)
        s.backward()

    return step


def w_empty_used():
    def f(x):
        return x[:0] * 2, (x * 3).sum()

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        a, s = g(x)
        (a.sum() + s).backward()

    return step


def w_float64():
    def f(x):
        return (x.double() ** 2).sum(), x * 2

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        a, _b = g(x)
        a.backward()

    return step


def w_dropout():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.ReLU(), nn.Linear(32, 4))
    return train(model, lambda: torch.randn(8, 16))


def w_dropout_infer():
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.Linear(32, 4)).train()
    return infer(model, lambda: torch.randn(8, 16))


def w_rand():
    g = C(lambda x: x + torch.rand_like(x) + torch.randn(3, 4))
    return lambda: g(torch.ones(3, 4))


def w_dynamic():
    m = torch.compile(MLP(), backend="xla", dynamic=True)
    sizes = iter([5, 7, 9, 6, 11, 13, 10, 12, 14, 15] * 10)

    def step():
        out = m(torch.randn(next(sizes), 32))
        out.sum().backward()

    return step


def w_dynamic_infer():
    m = torch.compile(MLP(), backend="xla", dynamic=True)
    sizes = iter([5, 7, 9, 6, 11, 13, 10, 12, 14, 15] * 10)

    def step():
        with torch.no_grad():
            m(torch.randn(next(sizes), 32))

    return step


def w_checks():
    emb = nn.Embedding(10, 4)
    g = C(lambda i: emb(i).sum() * 2, checks=True)

    def step():
        g(torch.tensor([1, 2, 3])).backward()

    return step


def w_checks_div():
    g = C(lambda a, b: (a // b, a % b), checks=True)
    return lambda: g(torch.tensor([7, 8]), torch.tensor([2, 3]))


def w_retain_double():
    x = torch.randn(5, requires_grad=True)
    g = C(lambda x: (x.sin() * x).sum())

    def step():
        y = g(x)
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        gx.sum().backward(retain_graph=True)
        gx.sum().backward()
        x.grad = None

    return step


def w_retain():
    x = torch.randn(5, requires_grad=True)
    g = C(lambda x: (x.sin() * x).sum())

    def step():
        y = g(x)
        y.backward(retain_graph=True)
        y.backward()
        x.grad = None

    return step


def w_accum():
    model = MLP()
    m = C(model)
    o = torch.optim.AdamW(model.parameters())
    k = [0]

    def step():
        m(torch.randn(4, 32)).sum().backward()
        k[0] += 1
        if k[0] % 2 == 0:
            o.step()
            o.zero_grad()

    return step


def w_split(model, make):
    def make_step():  # (the model made here: on torch's default device)
        return train(model(), make, split_backward=0.004)

    return make_step


def w_adamw_compiled_step():
    model = MLP()
    m = C(model)
    o = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ostep = torch.compile(o.step, backend="xla")

    def step():
        m(torch.randn(4, 32)).sum().backward()
        ostep()
        o.zero_grad()

    return step


def w_hf_gpt2(compile_opt=False, infer_only=False):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=128, n_positions=64)
    model = GPT2LMHeadModel(cfg)
    m = C(model)
    ids = torch.randint(0, 128, (2, 16))
    if infer_only:
        model.eval()

        def step():
            with torch.no_grad():
                m(input_ids=ids)

        return step
    o = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ostep = torch.compile(o.step, backend="xla") if compile_opt else o.step

    def step():
        out = m(input_ids=ids, labels=ids)
        out.loss.backward()
        ostep()
        o.zero_grad()

    return step


def w_attention():
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    g = C(lambda x: mha(x, x, x, need_weights=False)[0])

    def step():
        g(torch.randn(2, 5, 16)).sum().backward()

    return step


def w_sdpa():
    g = C(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    q = torch.randn(2, 4, 8, 16, requires_grad=True)

    def step():
        g(q, q, q).sum().backward()

    return step


def w_inplace():
    buf = torch.zeros(4)

    def f(x):
        buf.add_(x)
        return buf * 2

    g = C(f)
    return lambda: g(torch.ones(4))


def w_inplace_input():
    def f(x, y):
        x.mul_(2)
        y[1:3] = 5
        return x + 1

    g = C(f)
    return lambda: g(torch.ones(4), torch.ones(5))


def w_data_dependent():
    def f(x):
        return x[x > 0].sum() + x.nonzero().shape[0]

    g = C(f)
    return lambda: g(torch.randn(8))


def w_item():
    def f(x):
        return x * x.sum().item()

    g = C(f)
    return lambda: g(torch.randn(8))


def w_int_outputs():
    g = C(lambda x: (x.argmax(), x.long() * 2, x > 0, x.to(torch.bfloat16), x.half()))
    return lambda: g(torch.randn(8))


def w_bf16_train():
    model = MLP().to(torch.bfloat16)
    return train(model, lambda: torch.randn(4, 32, dtype=torch.bfloat16))


def w_scalar_inputs():
    g = C(lambda x, a: x * a + 1)
    vals = iter(range(2, 1000))
    return lambda: g(torch.randn(4), next(vals))


def w_no_grad_outputs():
    def f(x, w):
        y = x @ w
        return y, y.argmax(1), y.detach() * 2

    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    g = C(f)

    def step():
        y, _i, _d = g(x, w)
        y.sum().backward()

    return step


def w_grad_of_input_not_param():
    g = C(lambda x, y: (x * y).sum())

    def step():
        x = torch.randn(4, requires_grad=True)
        y = torch.randn(4)
        g(x, y).backward()

    return step


def w_autograd_grad_subset():
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
    g = C(lambda x, w: ((x @ w).tanh(), (x * 2).sum()))

    def step():
        a, _b = g(x, w)
        torch.autograd.grad(a.sum(), [w])

    return step


def w_views_out():
    g = C(lambda x: (x.t(), x[1], x.view(-1), x.unsqueeze(0).expand(2, 3, 4)))
    return lambda: g(torch.randn(3, 4))


def w_cpu_scalar_tensor():
    g = C(lambda x, s: x * s)
    return lambda: g(torch.randn(4), torch.tensor(3.0, device="cpu"))


def w_cpu_scalar_tensor_train():
    w = torch.randn(4, requires_grad=True)
    g = C(lambda x, s, w: (x * s * w).sum())

    def step():
        g(torch.randn(4), torch.tensor(3.0, device="cpu"), w).backward()

    return step


def w_cpu_model():
    with torch.device("cpu"):
        model = MLP()
    m = C(model)

    def step():
        m(torch.randn(16, 32, device="cpu")).sum().backward()

    return step


def w_remat():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 32), nn.Dropout(0.2), nn.ReLU(), nn.Linear(32, 32), nn.Linear(32, 4)
    )
    return train(model, lambda: torch.randn(8, 16), remat=True, checks=True)


class _ConstGrads(nn.Module):
    """Gradients the backward returns as constants (a 0-d parameter through floor and sign)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(*[nn.Linear(32, 32) for _ in range(6)])
        self.s = nn.Parameter(torch.tensor(1.5))
        self.v = nn.Parameter(torch.ones(3, dtype=torch.float64))

    def forward(self, x):
        return self.body(x).tanh().sum() + self.s.floor() + self.v.round().sum() + self.s.sign()


def w_double_empty():
    x = torch.randn(4, requires_grad=True)
    e = torch.randn(0, 3, requires_grad=True)
    g = C(lambda x, e: ((x.sin() * x).sum() + (e * e).sum(), e * 2))

    def step():
        y, _ye = g(x, e)
        gx, ge = torch.autograd.grad(y, (x, e), create_graph=True)
        (gx.sum() + ge.sum()).backward()
        x.grad = e.grad = None

    return step


def w_generate():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=128, n_positions=64)
    model = GPT2LMHeadModel(cfg).eval()
    model.forward = torch.compile(model.forward, backend="xla")
    ids = torch.randint(0, 128, (1, 8))

    def step():
        with torch.no_grad():
            model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0)

    return step


def w_linalg_unchecked():
    g = C(
        lambda a: torch.linalg.inv(a) + torch.linalg.cholesky(a @ a.mT + 4 * torch.eye(3)),
        checks=False,
    )
    return lambda: g(torch.randn(2, 3, 3))


def w_linalg_checked():
    g = C(lambda a: torch.linalg.inv(a), checks=True)
    return lambda: g(torch.randn(2, 3, 3))


def w_eager_ops():
    w = torch.randn(4, 4, requires_grad=True)
    g = C(lambda x: ((x @ w).sin() @ w).tanh().sum(), eager_ops=[torch.ops.aten.sin])
    return lambda: g(torch.randn(3, 4)).backward()


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def w_custom_function():
    w = torch.randn(4, 4, requires_grad=True)
    g = C(lambda x: _Square.apply(x @ w).sum())
    return lambda: g(torch.randn(3, 4)).backward()


def w_hook():
    w = torch.randn(4, 4, requires_grad=True)

    def f(x):
        h = x @ w
        h.register_hook(lambda g: g * 2)
        return h.tanh().sum()

    g = C(f)
    return lambda: g(torch.randn(3, 4)).backward()


def w_lstm_infer():
    return infer(LSTMTagger(), lambda: torch.randn(3, 7, 16))


WORKLOADS = {
    "mlp_train": lambda: train(MLP(), lambda: torch.randn(16, 32)),
    "mlp_infer": lambda: infer(MLP(), lambda: torch.randn(16, 32)),
    "cnn_train": lambda: train(CNN(), lambda: torch.randn(4, 3, 16, 16)),
    "cnn_infer": lambda: infer(CNN().eval(), lambda: torch.randn(4, 3, 16, 16)),
    "lstm_train": lambda: train(LSTMTagger(), lambda: torch.randn(3, 7, 16)),
    "lstm_infer": w_lstm_infer,
    "gpt_train": lambda: train(TinyGPT(), lambda: torch.randint(0, 128, (2, 24))),
    "attention": w_attention,
    "sdpa": w_sdpa,
    "some_outputs": w_some_outputs,
    "complex": w_complex,
    "complex_out_only": w_complex_out_only,
    "empty": w_empty,
    "empty_used": w_empty_used,
    "float64": w_float64,
    "dropout": w_dropout,
    "dropout_infer": w_dropout_infer,
    "rand": w_rand,
    "dynamic": w_dynamic,
    "dynamic_infer": w_dynamic_infer,
    "checks": w_checks,
    "checks_div": w_checks_div,
    "retain_double": w_retain_double,
    "retain": w_retain,
    "accum": w_accum,
    "split_mlp": w_split(MLP, lambda: torch.randn(16, 32)),
    "split_gpt": w_split(TinyGPT, lambda: torch.randint(0, 128, (2, 24))),
    "split_lstm": w_split(LSTMTagger, lambda: torch.randn(3, 7, 16)),
    "split_cnn": w_split(CNN, lambda: torch.randn(4, 3, 16, 16)),
    "adamw_compiled": w_adamw_compiled_step,
    "hf_gpt2": w_hf_gpt2,
    "hf_gpt2_optc": lambda: w_hf_gpt2(compile_opt=True),
    "hf_gpt2_infer": lambda: w_hf_gpt2(infer_only=True),
    "inplace": w_inplace,
    "inplace_input": w_inplace_input,
    "data_dependent": w_data_dependent,
    "item": w_item,
    "int_outputs": w_int_outputs,
    "bf16_train": w_bf16_train,
    "scalar_inputs": w_scalar_inputs,
    "no_grad_outputs": w_no_grad_outputs,
    "grad_input": w_grad_of_input_not_param,
    "grad_subset": w_autograd_grad_subset,
    "views_out": w_views_out,
    "remat": w_remat,
    "eager_ops": w_eager_ops,
    "custom_function": w_custom_function,
    "hook": w_hook,
    "linalg_unchecked": w_linalg_unchecked,
    "linalg_checked": w_linalg_checked,
    "split_const_grads": w_split(_ConstGrads, lambda: torch.randn(8, 32)),
    "const_grads": lambda: train(_ConstGrads(), lambda: torch.randn(8, 32)),
    "double_empty": w_double_empty,
    "generate": w_generate,
    "cpu_scalar_tensor": w_cpu_scalar_tensor,
    "cpu_scalar_tensor_train": w_cpu_scalar_tensor_train,
    "cpu_model": w_cpu_model,
}


def _check_counter() -> None:
    import jax
    import jax.numpy as jnp

    x, f = jnp.ones(3), jax.jit(lambda a: a * 2)
    f(x)
    for op, expected in (
        (lambda: jnp.zeros(3), True),
        (lambda: x.astype(int), True),
        (lambda: f(x), False),
    ):
        ops = EagerOps()
        with ops.watch():
            op()
        assert bool(ops.total()) == expected, (ops.ops, expected)


def main(argv):
    print("torch2xla from", os.path.dirname(torch2xla.__file__))
    if "--cuda" in argv:
        argv = [a for a in argv if a != "--cuda"]
        torch.set_default_device("cuda")
    if "xla" not in torch._dynamo.list_backends(exclude_tags=()):  # (torch2xla not installed)
        torch._dynamo.register_backend(torch2xla.xla_backend, "xla")
    _check_counter()
    names = [n for n in WORKLOADS if not argv or any(a in n for a in argv)]
    for name in names:
        torch._dynamo.reset()
        torch.manual_seed(0)
        step = WORKLOADS[name]()
        step()
        step()
        ops = EagerOps()
        with ops.watch(stacks=True):
            step()
            step()
        print(f"{name}: {ops.total() / 2:g} eager ops a call", flush=True)
        for (event, fun), n in ops.compiles.items():
            print(f"    {n:3d} {event.rsplit('/', 1)[-1]:28s} {fun}")
        for (op, where), n in sorted(ops.where.items(), key=lambda kv: -kv[1]):
            print(f"    {n:3d} {op:28s} {' < '.join(reversed(where))}")


if __name__ == "__main__":
    main(sys.argv[1:])
