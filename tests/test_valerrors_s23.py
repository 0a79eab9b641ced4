"""Where eager raises from values or constant arguments that tracing does not check, we raise
(session 23, ``scripts/probe_valerrors.py``).

Each class below returned values before: ``torch.istft``'s check of the window's overlap-add
envelope (torch's traced composite divides by it without asking: NaN out), and arguments whose
fake kernels skip eager's check (``multinomial`` drawing more samples than classes without
replacement, ``uniform_`` bounds outside the dtype, ``mvlgamma``'s ``p``, ``searchsorted``'s
``side``, ``index_reduce``'s mode: a KeyError from our lowering in strict mode). Every case
raises eager's exception type with eager's message, naming the op and the user's line, under
the default options and strict; valid neighbours match eager.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2xla

THIS = __file__
MODES = [{}, {"strict": True}]
MODE_IDS = ["default", "strict"]


def _eager_error(fn, args) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    return info.value


def _assert_raises_as_eager(fn, args, line, options):
    eager = _eager_error(fn, args)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options=options)(*args)
    err = info.value
    assert isinstance(err, torch2xla.OpError), (type(err), err)
    message = str(err)
    assert message.startswith(str(eager)), (message, str(eager))
    assert "op: " in message, message
    assert f"user code: {THIS}:" in message and line in message, message
    return err


def _spec(n_fft=4, batch=()):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*batch, 16, generator=g)
    return torch.stft(x, n_fft, window=torch.ones(n_fft), return_complex=True)


def _two_sided():
    x = torch.randn(16, generator=torch.Generator().manual_seed(1), dtype=torch.complex64)
    return torch.stft(x, 4, window=torch.ones(4), onesided=False, return_complex=True)


# -- torch.istft: the window's overlap-add envelope ---------------------------------------------
def istft_window(s, w):
    return torch.istft(s, 4, window=w)


def istft_no_window_short(s):
    return torch.istft(s, 4, hop_length=2, win_length=2, center=False)


def istft_batched_length(s, w):
    return torch.istft(s, 4, window=w, length=12)


def istft_method(s, w):
    return s.istft(4, window=w) * 2


ISTFT_CASES = [
    ("zero_window", istft_window, (_spec(), torch.zeros(4)), "torch.istft(s, 4, window=w)"),
    (
        "one_sample_window",
        istft_window,
        (_spec(), torch.tensor([1.0, 0.0, 0.0, 0.0])),
        "torch.istft(s, 4, window=w)",
    ),
    (
        "uncovered_edges",
        istft_no_window_short,
        (_spec(),),
        "torch.istft(s, 4, hop_length=2, win_length=2, center=False)",
    ),
    (
        "batched_length",
        istft_batched_length,
        (_spec(batch=(2,)), torch.zeros(4, dtype=torch.float64)),
        "torch.istft(s, 4, window=w, length=12)",
    ),
    ("method", istft_method, (_spec(), torch.zeros(4)), "s.istft(4, window=w) * 2"),
]


@pytest.mark.filterwarnings("ignore:A window was not provided")
@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, fn, args, line", ISTFT_CASES, ids=[c[0] for c in ISTFT_CASES])
def test_istft_of_a_vanishing_window_envelope_raises_what_eager_raises(
    name, fn, args, line, options
):
    _assert_raises_as_eager(fn, args, line, options)


class Synth(nn.Module):
    def __init__(self):
        super().__init__()
        self.window = nn.Parameter(torch.zeros(4))

    def forward(self, s):
        return torch.istft(s, 4, window=self.window).pow(2).mean()


def test_istft_with_a_learned_window_raises_in_training_and_leaves_no_grad():
    model = Synth()
    eager = _eager_error(model, (_spec(),))
    step = torch.compile(model, backend="xla")
    with pytest.raises(type(eager)) as info:
        step(_spec()).backward()
    assert str(info.value).startswith(str(eager))
    assert "torch.istft(s, 4, window=self.window)" in str(info.value)
    assert model.window.grad is None
    with torch.no_grad():
        model.window.copy_(torch.hann_window(4, periodic=False) + 0.5)
    loss = step(_spec())
    loss.backward()
    grad = model.window.grad.clone()
    model.window.grad = None
    want = model(_spec())
    want.backward()
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(grad, model.window.grad)


VALID_ISTFT = [
    ("hann", istft_window, (_spec(), torch.hann_window(4))),
    (
        "ones_not_centered",
        lambda s, w: torch.istft(s, 4, window=w, center=False),
        (_spec(), torch.ones(4)),
    ),
    ("batched_length", istft_batched_length, (_spec(batch=(2,)), torch.ones(4))),
    ("no_window", lambda s: torch.istft(s, 4), (_spec(),)),
    (
        "two_sided_complex",
        lambda s, w: torch.istft(s, 4, window=w, onesided=False, return_complex=True),
        (_two_sided(), torch.ones(4)),
    ),
]


@pytest.mark.filterwarnings("ignore:A window was not provided")
@pytest.mark.parametrize("name, fn, args", VALID_ISTFT, ids=[c[0] for c in VALID_ISTFT])
def test_valid_istft_matches_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    want = fn(*args)
    assert out.dtype == want.dtype and out.shape == want.shape
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


# -- arguments eager's kernels check and the fake kernels do not ---------------------------------
def multinomial_more_than_classes(p):
    return torch.multinomial(p, 4)


def multinomial_rows(p):
    return torch.multinomial(p, 3) + 0


def uniform_to_inf(x):
    return x.clone().uniform_(0.0, float("inf"))


def uniform_from_nan(x):
    return x.clone().uniform_(float("nan"), 1.0)


def uniform_too_wide(x):
    return x.clone().uniform_(-3e38, 3e38)


def uniform_half_too_wide(x):
    return x.half().uniform_(-6e4, 6e4)


def mvlgamma_p0(x):
    return torch.mvlgamma(x, 0)


def searchsorted_side(s, x):
    return torch.searchsorted(s, x, side="middle")


def index_reduce_mode(x, idx, src):
    return x.index_reduce(0, idx, src, "sum")


def _x():
    return torch.rand(3) + 2


ARG_CASES = [
    (
        "multinomial_1d",
        multinomial_more_than_classes,
        (torch.tensor([0.2, 0.3, 0.5]),),
        "torch.multinomial(p, 4)",
    ),
    ("multinomial_2d", multinomial_rows, (torch.ones(2, 2),), "torch.multinomial(p, 3) + 0"),
    ("multinomial_no_classes", multinomial_rows, (torch.ones(2, 0),), "torch.multinomial(p, 3)"),
    ("uniform_to_inf", uniform_to_inf, (_x(),), 'uniform_(0.0, float("inf"))'),
    ("uniform_from_nan", uniform_from_nan, (_x(),), 'uniform_(float("nan"), 1.0)'),
    ("uniform_too_wide", uniform_too_wide, (_x(),), "uniform_(-3e38, 3e38)"),
    ("uniform_half_too_wide", uniform_half_too_wide, (_x(),), "uniform_(-6e4, 6e4)"),
    ("mvlgamma_p0", mvlgamma_p0, (_x(),), "torch.mvlgamma(x, 0)"),
    (
        "searchsorted_side",
        searchsorted_side,
        (torch.arange(3.0), torch.rand(2)),
        'torch.searchsorted(s, x, side="middle")',
    ),
    (
        "index_reduce_mode",
        index_reduce_mode,
        (torch.rand(3), torch.tensor([0]), torch.rand(1)),
        'x.index_reduce(0, idx, src, "sum")',
    ),
]


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, fn, args, line", ARG_CASES, ids=[c[0] for c in ARG_CASES])
def test_arguments_the_fake_kernels_accept_raise_what_eager_raises(name, fn, args, line, options):
    _assert_raises_as_eager(fn, args, line, options)


def test_multinomial_of_as_many_samples_as_classes_draws_each_once():
    fn = lambda p: torch.multinomial(p, 3).sort(-1).values
    p = torch.tensor([[0.2, 0.3, 0.5], [1.0, 1.0, 1.0]])
    out = torch.compile(fn, backend="xla", options={"strict": True})(p)
    assert torch.equal(out, fn(p))


def test_multinomial_with_replacement_draws_more_than_classes():
    fn = lambda p: torch.multinomial(p, 5, True)
    out = torch.compile(fn, backend="xla", options={"strict": True})(torch.tensor([0.0, 1.0]))
    assert torch.equal(out, torch.ones(5, dtype=torch.int64))


@pytest.mark.parametrize(
    "low, high, dtype",
    [(1.0, 1.0, torch.float32), (-1e38, 1e38, torch.float32), (-3e4, 3e4, torch.float16)],
)
def test_uniform_bounds_eager_accepts_draw_within_them(low, high, dtype):
    fn = lambda x: x.uniform_(low, high)
    out = torch.compile(fn, backend="xla", options={"strict": True})(torch.zeros(64, dtype=dtype))
    assert out.dtype == dtype
    assert bool(((out >= low) & (out <= high)).all())


def test_valid_arguments_of_the_same_ops_match_eager():
    def fn(x, s, v, idx, src):
        return (
            torch.mvlgamma(x, 1),
            torch.searchsorted(s, v, side="right"),
            x.index_reduce(0, idx, src, "amax"),
        )

    args = (_x(), torch.arange(3.0), torch.tensor([1.0, 1.5]), torch.tensor([0, 2]), torch.rand(2))
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    for o, w in zip(out, fn(*args)):
        assert o.dtype == w.dtype
        torch.testing.assert_close(o, w)


# -- random samplers at parameters outside their domain: eager's values, not NaN ------------------
def test_binomial_outside_the_domain_gives_eagers_draws():
    # (each entry is certain: no draws where count <= 0 or prob <= 0, all where prob >= 1)
    count = torch.tensor([-1.0, 0.0, 3.0, 4.0, 2.0, 5.0])
    prob = torch.tensor([0.5, 1.0, 1.5, 1.0, -0.5, 0.0])
    fn = lambda c, p: torch.binomial(c, p)
    out = torch.compile(fn, backend="xla", options={"strict": True})(count, prob)
    assert torch.equal(out, fn(count, prob))


def test_gamma_of_a_concentration_at_or_below_zero_is_the_smallest_normal():
    fn = lambda a: torch._standard_gamma(a)
    a = torch.tensor([-1.0, 0.0, 1e-30])
    out = torch.compile(fn, backend="xla", options={"strict": True})(a)
    assert torch.equal(out, fn(a))


# -- reductions along an empty dimension whose meta kernels do not check it -----------------------
def max_dim(x):
    return x.max(1).values


def min_dim_method(x):
    return torch.min(x, 0)


def mode_last(x):
    return torch.mode(x).values


def max_whole(x):
    return x.max()


EMPTY_CASES = [
    ("max_dim", max_dim, (torch.zeros(3, 0),), "x.max(1).values"),
    ("max_dim_int", max_dim, (torch.zeros(3, 0, dtype=torch.long),), "x.max(1).values"),
    ("min_dim", min_dim_method, (torch.zeros(0, 2),), "torch.min(x, 0)"),
    ("mode", mode_last, (torch.zeros(2, 0),), "torch.mode(x).values"),
    ("max_whole", max_whole, (torch.zeros(0),), "x.max()"),
]


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, fn, args, line", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_reductions_along_an_empty_dimension_raise_what_eager_raises(name, fn, args, line, options):
    _assert_raises_as_eager(fn, args, line, options)


def test_reductions_along_a_non_empty_dimension_of_an_empty_tensor_match_eager():
    def fn(x, s):
        return x.max(0).values, torch.min(x, 0).indices, torch.mode(x, 0).values, s.max(0)

    args = (torch.zeros(2, 0), torch.tensor(3.0))
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    for o, w in zip(out, fn(*args)):
        for a, b in zip(o if isinstance(o, tuple) else (o,), w if isinstance(w, tuple) else (w,)):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a, b)
