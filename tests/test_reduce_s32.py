"""Reductions and norms at their edges against eager (session 32): the warning of ``var``/``std``
past their degrees of freedom, which eager's kernels issue and tracing never ran; the
variance's derivative on slices holding an infinity (eager's ``var_backward`` has no mean
term: -inf/inf on the finite elements, where JAX's derivative was NaN everywhere); the 2-norm's
derivative at a zero vector, which keeps a NaN gradient NaN (``F.normalize(x, eps=0)`` of a
zero row)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from tests._util import assert_same, leaf

INF, NAN = float("inf"), float("nan")


def _warned(fn, *args):
    """``fn(*args)``'s output and its warnings about degrees of freedom: (message up to the
    build's own suffix, category, file, line)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    found = [
        (str(w.message).split(" (Triggered internally")[0], w.category, w.filename, w.lineno)
        for w in caught
        if "degrees of freedom" in str(w.message)
    ]
    return out, found


def _var_calls(x):
    return {
        "var_dim": lambda: x.var(0, correction=4),
        "var_all": lambda: x.var(correction=12),
        "std_dim": lambda: torch.std(x, 1, correction=3.5),
        "var_mean": lambda: torch.var_mean(x, 1, correction=5),
        "std_mean": lambda: torch.std_mean(x, (0, 1), correction=20),
        "single": lambda: x[:1, :1].var(),
        "empty_dim": lambda: x[:0].var(0),
        "empty_other_dim": lambda: x[:0].std(1),
        "complex": lambda: torch.complex(x, x).var(0, correction=4),  # (eager: twice)
        "half": lambda: x.half().std(0, correction=6),
        "fine_dim": lambda: x.var(0),
        "fine_frac": lambda: x.std(1, correction=2.5),
        "fine_unbiased_false": lambda: x[:1].var(0, unbiased=False),
    }


@pytest.mark.parametrize("call", list(_var_calls(torch.zeros(1))))
def test_degrees_of_freedom_warning_as_eager(call):
    def fn(x):
        return _var_calls(x)[call]()

    x = leaf(4, 3, rg=False)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla", fullgraph=True)
    out, got = _warned(compiled, x)
    ref, want = _warned(fn, x)
    assert_same(out, ref)
    assert got == want
    if call.startswith("fine"):
        assert not want


def test_degrees_of_freedom_warning_at_the_users_line_under_default_filters():
    # (Python's default filters show a warning once per line: eager's and ours alike)
    def fn(x):
        return x.std(0) * 2

    compiled = torch.compile(fn, backend="xla")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for n in (1, 1, 2):  # (two programs: one 1-row input, one 2-row)
            compiled(torch.ones(n, 3))
    lines = [(w.filename, w.lineno) for w in caught if "degrees of freedom" in str(w.message)]
    assert lines == [(__file__, fn.__code__.co_firstlineno + 1)]


def _rows():
    x = leaf(5, 4, rg=False)
    x[0, 1] = INF
    x[1, [0, 3]] = -INF
    x[2] = INF
    x[3, 2] = NAN
    return x


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
@pytest.mark.parametrize(
    "reduce",
    [
        lambda x: x.var(1),
        lambda x: x.var(0, correction=0),
        lambda x: x.var(),
        lambda x: x.std(1, keepdim=True),
        lambda x: torch.var_mean(x, 1)[0],
        lambda x: torch.std_mean(x, -1, correction=2)[0],
        lambda x: x.var(1, correction=4),  # (past its degrees of freedom)
        lambda x: x.double().var((0, 1)),
    ],
    ids=["var", "var_biased", "var_all", "std_keep", "var_mean", "std_mean", "var_dof0", "f64"],
)
def test_variance_gradient_on_slices_with_infinities(reduce):
    grads = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = _rows().requires_grad_()
        fn = torch.compile(reduce, backend="xla") if compiled else reduce
        out = fn(x)
        out.backward(leaf(*out.shape, 1, seed=3, rg=False).reshape(out.shape).to(out.dtype))
        grads.append((out, x.grad))
    assert_same(*grads)


def test_variance_gradient_of_finite_values_unchanged():
    grads = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = leaf(6, 5)

        def fn(x):
            return x.var(0), x.std(1, correction=0), torch.var_mean(x, (0, 1))

        out = (torch.compile(fn, backend="xla") if compiled else fn)(x)
        (out[0].sum() + out[1].square().sum() + out[2][0] * 3 + out[2][1]).backward()
        grads.append((out, x.grad))
    assert_same(*grads)


def _zero_rows():
    x = leaf(3, 4, rg=False)
    x[0] = 0
    x[1, 1] = 0
    return x.requires_grad_()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.normalize(x, dim=1, eps=0),
        lambda x: torch.linalg.vector_norm(x, dim=1) * torch.tensor([NAN, INF, 1.0]),
        lambda x: x.norm(dim=-1, keepdim=True).log().exp(),  # (a NaN cotangent at 0: 0 * inf)
        lambda x: torch.linalg.vector_norm(x * 0) / torch.linalg.vector_norm(x * 0),
        lambda x: torch.dist(x[0], torch.zeros(4)).sqrt(),
    ],
    ids=["normalize_eps0", "nan_cotangent", "log_exp", "whole_zero", "dist"],
)
def test_two_norm_keeps_a_nan_gradient_at_zero_vectors(fn):
    grads = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = _zero_rows()
        out = (torch.compile(fn, backend="xla") if compiled else fn)(x)
        out.backward(torch.ones_like(out))
        grads.append((out, x.grad))
    assert_same(*grads)
    assert grads[1][1].isnan().any()  # (the case this test is about)


@pytest.mark.parametrize("shape", [(2, 3), (4,), ()])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_over_no_dims_as_eager(shape, keepdim):
    # eager reduces over every dim but adds back the maximum with its dims kept: it raises
    # unless keepdim (or a 0-dim input); the meta kernel traced it
    def fn(x):
        return torch.logsumexp(x, (), keepdim=keepdim)

    x = leaf(*shape, 1, rg=False).reshape(shape)
    try:
        want = fn(x)
    except RuntimeError as e:
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match=str(e).split("[")[0]):
            torch.compile(fn, backend="xla", fullgraph=True)(x)
        return
    torch._dynamo.reset()
    assert_same(torch.compile(fn, backend="xla", fullgraph=True)(x), want)


def _hvp_rows():
    x = leaf(4, 5, dtype=torch.float64, rg=False)
    x[1] = 0
    x[2, 1] = 0
    x[3] = 2.0
    return x


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.linalg.vector_norm(x, 1, dim=1).pow(2).sum(),
        lambda x: (F.normalize(x, p=1, dim=1) * torch.arange(5.0)).sum(),
        lambda x: (F.normalize(x, dim=1) * torch.arange(5.0)).sum(),
        lambda x: x.abs().sum().pow(2),
        lambda x: (torch.var_mean(x, 1)[0] * torch.var_mean(x, 1)[1]).sum(),
        lambda x: x.std(1).sum(),
    ],
    ids=["l1_norm", "normalize_p1", "normalize", "abs", "var_mean", "std"],
)
def test_second_derivatives_at_zeros_as_eager(fn):
    # (reverse over reverse: abs's rule returned jnp.abs as its primal, whose derivative at 0
    # is 1 where torch's is 0; the 2-norm's ratio is NaN at a zero vector in eager's double
    # backward, 0 / 0)
    v = leaf(4, 5, seed=5, dtype=torch.float64, rg=False)
    got = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = _hvp_rows().requires_grad_()
        y = (torch.compile(fn, backend="xla") if compiled else fn)(x)
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (h,) = torch.autograd.grad((g * v).sum(), x)
        got.append((g.detach(), h))
    assert_same(*got, rtol=1e-9, atol=1e-9)


def _error(got, exact):
    return (got.double() - exact).abs().max().item()


@pytest.mark.parametrize(
    "src,dtype",
    [
        (torch.float32, torch.float16),
        (torch.float32, torch.bfloat16),
        (torch.float16, torch.float16),
        (torch.float16, torch.float32),
        (torch.float32, torch.float64),
    ],
    ids=str,
)
def test_cumsum_dtype_sums_as_eager(src, dtype):
    # eager rounds the input to ``dtype``, then sums half precision in float32 (XLA's scan in
    # float16 was 2x eager's error); its derivative sums the gradient in the input's dtype
    # (``cumsum_backward(grad.to(self.scalar_type()))``: the transpose of the casts rounded
    # the sums to ``dtype``, thousands of times eager's error). XLA's scan adds in another
    # order: compared by the error against the exact sums (float64 of the rounded operands).
    def fn(x):
        return x.cumsum(0, dtype=dtype) * 3

    x0 = (leaf(3000, 2, rg=False) * 4).to(src)
    g0 = leaf(3000, 2, seed=1, rg=False).to(dtype)
    exact_out = x0.to(dtype).double().cumsum(0) * 3
    exact_grad = (g0.double() * 3).flip(0).cumsum(0).flip(0)
    got = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = x0.clone().requires_grad_()
        out = (torch.compile(fn, backend="xla") if compiled else fn)(x)
        out.backward(g0)
        assert (out.dtype, x.grad.dtype) == (dtype, src)
        got.append((_error(out.detach(), exact_out), _error(x.grad, exact_grad)))
    (out_err, grad_err), (eager_out_err, eager_grad_err) = got
    assert out_err <= 2 * eager_out_err + 1e-12
    # (the gradient's float32 sums: XLA's reversed scan in float32 is up to ~2.5x eager's
    # sequential error, as for a cumsum without dtype)
    assert grad_err <= (2 if src == torch.float16 else 4) * eager_grad_err + 1e-12


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
@pytest.mark.parametrize("correction", [3, 4, 12, 1])
def test_complex_variance_gradient_past_its_degrees_of_freedom(correction):
    # eager's var_backward on a complex input: 2 / dof * grad * (x - mean), +-inf at dof 0
    # (JAX's derivative of a division by zero: NaN), real inf/NaN for the whole input
    def fn(x):
        z = torch.complex(x, x * 2)
        return z.var(None if correction == 12 else 0, correction=correction)

    got = []
    for compiled in (True, False):
        torch._dynamo.reset()
        x = leaf(3, 4)
        out = (torch.compile(fn, backend="xla") if compiled else fn)(x)
        out.backward(torch.ones_like(out))
        got.append((out, x.grad))
    assert_same(*got)
