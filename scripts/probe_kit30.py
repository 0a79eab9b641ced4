"""Probe of the parity kit itself (session 30): deliberately wrong "compiled" functions (they
behave differently under torch.compile, via ``torch.compiler.is_compiling()``) must raise a
ParityError; correct ones (legitimate NaN, empty, ints, bools, nested, low precision) must pass.

    PYTHONPATH=$PWD python scripts/probe_kit30.py [substring ...]
"""

from __future__ import annotations

import math
import sys

import torch

from torch2xla.testing import ParityError, assert_parity

C = torch.compiler.is_compiling
CASES: list = []


def case(expect, *args, **opts):
    def deco(fn):
        CASES.append((fn.__name__, expect, fn, args, opts))
        return fn

    return deco


x3 = torch.tensor([1.0, -2.0, 3.0])


# ---- wrong functions: must fail -------------------------------------------------------------
@case("fail", torch.tensor([1.0, 2.0]), grad=True)
def zeros_instead_of_none_grad(x):
    # eager: no grad reaches x (detached); compiled: x gets zeros
    return x.detach() * 2 + (x * 0 if C() else 0)


@case("fail", x3)
def f64_vs_f32(x):
    return x.double() if C() else x * 1


@case("fail", torch.tensor([1, 2], dtype=torch.int64))
def i32_vs_i64(x):
    return x.int() if C() else x * 1


@case("fail", torch.tensor([1.0, 2.0, 3.0]))
def shape_broadcasts_equal(x):
    return x.sum().reshape(1) if C() else x.sum().reshape(())


@case("fail", torch.tensor([1.0]))
def shape_11_vs_1(x):
    return x.reshape(1, 1) if C() else x * 1


@case("fail", torch.tensor([1.0, 2.0]))
def nan_vs_number(x):
    return x / 0 * 0 if C() else x * 1


@case("fail", torch.tensor([1.0, 2.0]), check_signed_zero=True)
def neg_zero_requested(x):
    return -(x * 0) if C() else x * 0


@case("fail", torch.tensor([1.0, 2.0]))
def inf_sign(x):
    return -x / 0 if C() else x / 0


@case("fail", torch.tensor([1.0, 2.0]))
def inf_vs_finite(x):
    return x * 1e30 if C() else x / 0


@case("fail", torch.tensor([1.0, 2.0]))
def finite_vs_inf(x):
    return x / 0 if C() else x * 1e30


@case("fail", torch.randn(3, 4))
def noncontig_vs_contig(x):
    return x.t().contiguous() if C() else x.t()


@case("fail", torch.randn(3, 4))
def contig_vs_noncontig(x):
    return (x * 2).t() if C() else (x * 2).t().contiguous()


@case("fail", torch.ones(3))
def missing_input_mutation(x):
    if not C():
        x.add_(1)
    return x * 2


@case("fail", torch.ones(3))
def extra_input_mutation(x):
    if C():
        x.add_(1)
    return x.sum()


@case("fail", torch.randn(3, 4))
def view_vs_copy(x):
    return x.view(12).clone() if C() else x.view(12)


@case("fail", torch.randn(3, 4))
def returns_input_vs_copy(x):
    return x.clone() if C() else x


@case("fail", torch.randn(3))
def outputs_alias_each_other(x):
    y = x * 2
    return (y, y.clone()) if C() else (y, y)


@case("fail", torch.randn(3), check_errors=True)
def different_exception_type(x):
    if C():
        return x.reshape(7)  # RuntimeError while tracing
    raise ValueError("boom")


@case("error", torch.randn(3))
def swallowed_exception(x):
    if not C():
        raise ValueError("eager only")
    return x


@case("fail", torch.randn(3), check_errors=True)
def swallowed_exception_check(x):
    if not C():
        raise ValueError("eager only")
    return x


@case("fail", torch.linspace(1, 2, 100))
def off_on_few_elements(x):
    y = x * 2
    if C():
        y = torch.where(torch.arange(100) == 7, y * 1.001, y)
    return y


@case("fail", torch.tensor([1.0, 2.0], requires_grad=True))
def requires_grad_mismatch(x):
    return (x * 2).detach() if C() else x * 2


@case("fail", torch.tensor([1.0, 2.0], requires_grad=True))
def grad_fn_presence(x):
    # eager returns the leaf itself (is_leaf, no grad_fn); compiled a non-leaf
    return x * 1 if C() else x


@case("fail", x3)
def tuple_vs_list(x):
    return [x * 2, x] if C() else (x * 2, x)


@case("fail", x3)
def scalar_vs_0d(x):
    return (x * 2, x.sum()) if C() else (x * 2, x.sum().item())


@case("fail", x3)
def float_vs_int_scalar(x):
    return (x * 2, 3.0) if C() else (x * 2, 3)


@case("pass", x3)
def pyfloat_neg_zero(x):
    return (x * 2, -0.0) if C() else (x * 2, 0.0)


@case("fail", x3, check_signed_zero=True)
def pyfloat_neg_zero_requested(x):
    return (x * 2, -0.0) if C() else (x * 2, 0.0)


@case("fail", x3)
def complex_vs_real(x):
    return torch.complex(x, x * 0) if C() else x * 1


@case("fail", x3, check_dtype=False)
def complex_vs_real_nodtype(x):
    return torch.complex(x, x * 0 + 1) if C() else x * 1


@case("fail", torch.tensor([1.7, 2.2]), check_dtype=False)
def float_vs_int_values_nodtype(x):
    return x * 1 if C() else x.long()


@case("fail", torch.tensor([1.0, 2.0], requires_grad=True))
def different_leaf_grad_in_call(x):
    (x * (3 if C() else 2)).sum().backward()
    return x.detach() * 1


@case("fail", torch.tensor([1.0, 2.0], requires_grad=True))
def missing_leaf_grad_in_call(x):
    if not C():
        (x * 2).sum().backward()
    return x.detach() * 1


@case("fail", torch.randn(3))
def extra_rng_draw(x):
    if C():
        torch.rand(1)
    return x * 2


@case("fail", torch.randn(3), grad=True)
def wrong_grad(x):
    return x.detach() * 2 + x - x.detach() if C() else x * 2


@case("fail", torch.randn(3, 4))
def input_metadata_mutation(x):
    if C():
        x.t_()
    return x * 2


class Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def step(self, x):
        if not C():
            self.lin.weight.data.mul_(2)
        return self.lin(x)


CASES.append(("bound_method_state", "fail", Step().step, (torch.randn(2, 3),), {}))


def train_step(model, opt, x):
    opt.zero_grad()
    loss = model(x).pow(2).sum() * (1.5 if C() else 1.0)
    loss.backward()
    opt.step()
    return loss.detach()


_m = torch.nn.Linear(3, 2)
CASES.append(
    (
        "train_step_wrong",
        "fail",
        train_step,
        (_m, torch.optim.SGD(_m.parameters(), lr=0.1), torch.randn(4, 3)),
        {},
    )
)


def train_step_ok(model, opt, x):
    opt.zero_grad()
    loss = model(x).pow(2).sum()
    loss.backward()
    opt.step()
    return loss.detach()


_m2 = torch.nn.Linear(3, 2)
CASES.append(
    (
        "train_step_ok",
        "pass",
        train_step_ok,
        (_m2, torch.optim.SGD(_m2.parameters(), lr=0.1, momentum=0.9), torch.randn(4, 3)),
        {},
    )
)


_A, _B = torch.randn(16, 512), torch.randn(512, 16)


@case("fail", _A.bfloat16(), _B.bfloat16())
def bf16_mm_wrong_few(a, b):
    y = a @ b
    return torch.where(torch.arange(16) == 3, y * 1.05, y) if C() else y


@case("fail", _A, _B)
def f32_mm_wrong_few(a, b):
    y = a @ b
    return torch.where(torch.arange(16) == 3, y * (1 + 1e-4), y) if C() else y


@case("fail", torch.randn(64) * 10)
def round_trick_wrong(x):
    return x * 1 if C() else (x + 2**23) - 2**23


@case("fail", (torch.randn(8, 512) + 10).bfloat16(), grad=True)
def bf16_var_grad_wrong(x):
    y = x.var(-1)
    return y + (y * 0.05 - (y * 0.05).detach()) if C() else y


@case("pass", (torch.randn(8, 512) + 10).bfloat16(), grad=True)
def bf16_var_grad(x):
    return x.var(-1)


@case("pass", torch.randn(64) * 10)
def round_trick(x):
    return (x + 2**23) - 2**23


# ---- modules -------------------------------------------------------------------------------
class NonPersistent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1), persistent=False)
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        if not C():
            self.count.add_(1)
        return self.lin(x)


@case("fail", torch.randn(2, 3))
def module_nonpersistent_buffer(x):
    pass


CASES[-1] = ("module_nonpersistent_buffer", "fail", NonPersistent(), (torch.randn(2, 3),), {})


class ParamMut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        if C():
            with torch.no_grad():
                self.w.mul_(2)
        return x * 1


CASES.append(("module_param_mutation", "fail", ParamMut(), (torch.randn(3),), {}))


class ParamGradNone(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.ones(3))
        self.b = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * self.a + (self.b * 0 if C() else 0)


CASES.append(
    ("module_param_zeros_vs_none_grad", "fail", ParamGradNone(), (torch.randn(3),), {"grad": True})
)


class ReturnsParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return (x * 1, self.w * 1 if C() else self.w)


CASES.append(("module_returns_param_alias", "fail", ReturnsParam(), (torch.randn(3),), {}))


# ---- correct functions: must pass --------------------------------------------------------
@case("pass", torch.tensor([-1.0, 0.0, 1.0, math.inf, -math.inf, math.nan]))
def legit_nan(x):
    return x.log(), x * math.inf, x / 0


@case("pass", torch.empty(0, 3))
def empty(x):
    return x * 2, x.sum(0), x.t()


@case("pass", torch.tensor([3, -7, 2**31 - 1], dtype=torch.int32))
def integers(x):
    return x * 3, x // 2, x % 5, x.sum()


@case("pass", torch.tensor([1.0, -2.0, 0.0]))
def bools(x):
    return x > 0, (x > 0) & (x < 1), (x == 0).any()


@case("pass", x3)
def nested(x):
    return {"a": (x * 2, [x.sum(), x.max()]), "b": x.shape[0], "c": None}


@case("pass", torch.linspace(-3, 3, 64).to(torch.bfloat16))
def bf16_chain(x):
    return torch.nn.functional.gelu(x) * x.sigmoid() + x.tanh()


@case("pass", torch.linspace(-3, 3, 64).to(torch.float16))
def f16_softmax(x):
    return torch.softmax(x.reshape(8, 8), -1)


@case("pass", torch.randn(16, 32).to(torch.bfloat16), torch.randn(32, 8).to(torch.bfloat16))
def bf16_matmul(a, b):
    return a @ b


@case("pass", torch.randn(4, 256))
def f32_sum_cancel(x):
    return x - x.mean(-1, keepdim=True), x.sum(-1)


@case("pass", x3)
def pyfloat_from_item(x):
    return x.sum().item()


@case("pass", torch.randn(3, 4))
def view_output(x):
    return x.view(12), x.t(), x[1]


@case("pass", torch.randn(3, 4), require_xla=False)
def returns_input(x):
    return x


@case("pass", torch.randn(3, 4))
def inplace_returns_input(x):
    return x.mul_(2)


@case("pass", torch.randn(3), grad=True)
def grads(x):
    return x.sin() * 2, x.cos()


@case("pass", torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0]))
def grad_none_input(x, y):
    return x * 2


@case("pass", torch.tensor([1.0, 2.0]), grad=True)
def grad_of_two_with_none(x, y=None):
    return x * 2


@case("pass", torch.randn(3), check_errors=True)
def same_exception(x):
    raise ValueError("boom")


@case("pass", torch.randn(3, 4), check_errors=True)
def same_exception_shape(x):
    return x @ x


@case("pass", torch.randn(3, 4), check_errors=True)
def index_error(x):
    return x[torch.tensor([5])]


@case("pass", torch.tensor([1.0, 2.0], requires_grad=True))
def backward_inside(x):
    (x * 2).sum().backward()
    return x.detach() * 1


@case("pass", torch.randn(3), torch.randn(3, dtype=torch.complex64))
def complex_out(x, z):
    return z * x, z.abs()


@case("pass", torch.randn(8, 3))
def random_op(x):
    return x * 2, torch.rand(3).shape


CASES.append(("module_bn", "pass", torch.nn.BatchNorm1d(3), (torch.randn(4, 3),), {"grad": True}))
CASES.append(
    (
        "module_nonpersistent_ok",
        "pass",
        type(
            "NP2",
            (NonPersistent,),
            {"forward": lambda self, x: (self.count.add_(1), self.lin(x))[1]},
        )(),
        (torch.randn(2, 3),),
        {},
    )
)


def main(argv):
    bad = 0
    for name, expect, fn, args, opts in CASES:
        if argv and not any(a in name for a in argv):
            continue
        torch._dynamo.reset()
        try:
            assert_parity(fn, *args, **opts)
            got, msg = "pass", ""
        except ParityError as e:
            got, msg = "fail", str(e).split("inputs:")[0].strip().replace("\n", " | ")
        except Exception as e:  # noqa: BLE001  (a probe: records what else went wrong)
            got, msg = "error", f"{type(e).__name__}: {str(e)[:200]}"
        ok = got == expect
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:34s} expect {expect} got {got}: {msg[:300]}")
    print(f"{bad} bad")


if __name__ == "__main__":
    main(sys.argv[1:])
