"""Values eager's kernels refuse or pass through, met as users meet them: a NaN reaching an SVD,
an inf in a matrix, a target outside [0, 1]. Eager's error (type and first line, naming the
user's line) or eager's values; never a hang."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import assert_same


def _outcome(fn, *args):
    """(value, None) or (None, error) of ``fn(*args)``."""
    try:
        return fn(*args), None
    except (RuntimeError, IndexError) as e:
        return None, e


def _compare(fn, *args):
    want, eager = _outcome(fn, *args)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla")
    if eager is None:
        got = compiled(*args)
        assert_same(got, want)
        return got
    with pytest.raises(type(eager)) as info:
        compiled(*args)
    assert isinstance(info.value, torch2xla.OpError)
    first_line = str(eager).splitlines()[0]
    assert str(info.value).startswith(first_line), (str(info.value), first_line)
    return info.value


def _with(value, *where, shape=(2, 3, 4)):
    torch.manual_seed(0)
    m = torch.randn(shape)
    for index in where:
        m[index] = value
    return m


def svd_values(a):
    return torch.linalg.svdvals(a)


def svd_factors(a):
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return u @ torch.diag_embed(s) @ vh


def spectral_norm(a):
    return torch.linalg.matrix_norm(a, ord=2)


def pseudo_inverse(a):
    return torch.linalg.pinv(a)


@pytest.mark.parametrize("fn", [svd_values, svd_factors, spectral_norm, pseudo_inverse])
@pytest.mark.parametrize("batched", [True, False])
def test_svd_of_a_matrix_with_a_nan_raises_eagers_error(fn, batched):
    # LAPACK's gesdd refuses it; XLA's SVD returned NaNs
    m = _with(float("nan"), (1, 0, 2))
    error = _compare(fn, m if batched else m[1])
    assert isinstance(error, torch.linalg.LinAlgError)
    if batched:
        assert "(Batch element 1)" in str(error)


def test_svd_of_a_matrix_with_an_inf_returns():
    # XLA's SVD with singular vectors never returned on it. Eager's singular values are NaN
    # there (its vectors whatever LAPACK left), the finite matrix beside it factored as usual.
    m = _with(float("inf"), (0, 1, 1))
    want = torch.linalg.svdvals(m)
    u, s, vh = torch.compile(lambda a: torch.linalg.svd(a, full_matrices=False), backend="xla")(m)
    assert_same(s, want)
    assert torch.isnan(u[0]).all() and torch.isnan(vh[0]).all()
    assert_same(u[1] @ torch.diag(s[1]) @ vh[1], m[1], atol=1e-5)
    _compare(svd_values, m)


def eigenvalues(a):
    return torch.linalg.eig(a).eigenvalues


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_eig_of_a_matrix_with_an_inf_or_nan_as_eager(value):
    # eig checks its input. (eigvals without grad does not, but eager's own eigvals of such a
    # matrix may abort the process in LAPACK: not compared here.)
    m = _with(value, (0, 1), shape=(3, 3))
    _compare(eigenvalues, m)


def _bce(x, target):
    return F.binary_cross_entropy(x, target)


@pytest.mark.parametrize(
    "bad",
    [{}, {"target": 3}, {"input": 1, "target": 3}, {"input": 4, "target": 2}, {"input_nan": 2}],
    ids=["valid", "target", "input-first", "target-first", "nan-input"],
)
def test_binary_cross_entropy_checks_input_and_target_in_eagers_order(bad):
    # eager checks element by element, the input before the target: the first element outside
    # [0, 1] names which one
    torch.manual_seed(0)
    x, target = torch.rand(6), torch.rand(6)
    if "input" in bad:
        x[bad["input"]] = 1.5
    if "input_nan" in bad:
        x[bad["input_nan"]] = float("nan")
    if "target" in bad:
        target[bad["target"]] = -0.25
    _compare(_bce, x, target)
