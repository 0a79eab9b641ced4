"""``@parity_test``: a function plus strategies becomes a hypothesis test of XLA/eager parity."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import hypothesis
import torch
from hypothesis import strategies as st

from torch2xla.testing import _settings
from torch2xla.testing._compare import describe_value
from torch2xla.testing._parity import _REPRODUCE_AS, assert_parity

__all__ = ["parity_settings", "parity_test"]


def parity_settings(max_examples: int | None = None, **kwargs: Any) -> hypothesis.settings:
    """Hypothesis settings for parity tests: hypothesis's own (the loaded profile, e.g.
    ``pytest --hypothesis-profile=ci``), without a deadline, and the number of examples
    only when asked for.

    No deadline: the first example of each shape and dtype compiles, which takes far longer
    than later ones. No explain phase (it would point at the kit's own comparison code).
    The number of examples is ``pytest --parity-examples=N`` when given, else
    ``max_examples``, else the profile's (hypothesis's default is 100; each example runs the
    function twice, and each new shape or dtype compiles: register a profile with fewer,
    ``settings.register_profile("dev", max_examples=20)``, for quick local runs).

    Args:
        max_examples: examples to try; keep it modest, and the set of shapes small.
        kwargs: other ``hypothesis.settings`` fields.

    Example:
        >>> @parity_settings(max_examples=30)
        ... @given(x=tensors())
        ... def test_exp(x):
        ...     assert_parity(torch.exp, x)
    """
    n = _settings.max_examples_override or max_examples
    if n is not None:
        kwargs["max_examples"] = n
    kwargs.setdefault("deadline", None)
    if "phases" not in kwargs:
        # Hypothesis's explain phase lists the lines "always and only run by failing test
        # cases": for a parity test, the kit's comparison code, never the user's.
        phases = hypothesis.settings().phases
        kwargs["phases"] = tuple(p for p in phases if p is not hypothesis.Phase.explain)
    return hypothesis.settings(**kwargs)


def parity_test(
    *arg_strategies: st.SearchStrategy[Any],
    args: st.SearchStrategy[tuple] | None = None,
    kwargs: Mapping[str, st.SearchStrategy[Any]] | None = None,
    max_examples: int | None = None,
    settings: Mapping[str, Any] | None = None,
    **parity_options: Any,
) -> Callable[[Callable | torch.nn.Module], Callable[[], None]]:
    """Turn a function (or module) into a hypothesis test that it runs the same through
    ``backend="xla"`` as in eager PyTorch.

    Each example draws the arguments, then calls :func:`assert_parity`. On a failure,
    hypothesis shrinks the input (smaller shapes, simpler values) and reports the minimal
    example together with the :class:`ParityError` message (worst element, errors, inputs).

    Args:
        arg_strategies: one strategy per positional argument of the function.
        args: instead of ``arg_strategies``, one strategy for the whole tuple of positional
            arguments (e.g. :func:`module_inputs`).
        kwargs: strategies for keyword arguments, by name.
        max_examples: examples to try (see :func:`parity_settings`).
        settings: other ``hypothesis.settings`` fields, e.g. ``{"derandomize": True}``.
        parity_options: passed to :func:`assert_parity` (``grad``, ``rtol``, ``atol``, ...).

    Returns:
        A decorator; the test it returns takes no arguments, so pytest collects it when its
        name starts with ``test``.

    Example:
        >>> @parity_test(tensors(torch.float32, (2, 3)), tensors(torch.float32, (3,)))
        ... def test_add(x, y):
        ...     return x + y
        >>> test_mlp = parity_test(args=module_inputs(torch.randn(4, 8)))(MLP())  # doctest: +SKIP
    """
    if arg_strategies and args is not None:
        raise TypeError("torch2xla.testing.parity_test: give strategies positionally or args=")
    try:
        inspect.signature(assert_parity).bind_partial(None, **parity_options)
    except TypeError as e:
        raise TypeError(f"torch2xla.testing.parity_test: {e} (options of assert_parity)") from None
    _check_strategies(arg_strategies, args, kwargs)
    args_strategy = args if args is not None else st.tuples(*arg_strategies)
    kwargs_strategy = st.fixed_dictionaries(dict(kwargs or {}))

    def decorate(fn: Callable | torch.nn.Module) -> Callable[[], None]:
        name = getattr(fn, "__name__", None) or type(fn).__name__

        def test(args: tuple, kwargs: dict) -> None:
            _check(fn, args, kwargs, parity_options, f"{name}.parity_target")

        test.__name__ = name
        test.__qualname__ = getattr(fn, "__qualname__", name)
        test.__module__ = getattr(fn, "__module__", test.__module__)
        test.__doc__ = getattr(fn, "__doc__", None)
        wrapped = hypothesis.given(
            args=args_strategy.map(_Drawn), kwargs=kwargs_strategy.map(_DrawnKwargs)
        )(test)
        wrapped = parity_settings(max_examples, **dict(settings or {}))(wrapped)
        wrapped.parity_target = fn  # type: ignore[attr-defined]
        return wrapped

    return decorate


def _check_strategies(arg_strategies: tuple, args: Any, kwargs: Mapping[str, Any] | None) -> None:
    """A clear error where a strategy argument of ``parity_test`` is not a strategy."""
    where = "torch2xla.testing.parity_test"
    if args is not None and not isinstance(args, st.SearchStrategy):
        raise TypeError(
            f"{where}: args= takes one strategy for the whole tuple of positional arguments "
            f"(module_inputs(...), st.tuples(...)), got {type(args).__name__}; give one "
            "strategy per argument positionally instead: parity_test(s1, s2)"
        )
    named = [(f"argument {i}", s) for i, s in enumerate(arg_strategies)]
    named += [(f"kwargs[{k!r}]", s) for k, s in (kwargs or {}).items()]
    for name, strategy in named:
        if not isinstance(strategy, st.SearchStrategy):
            raise TypeError(
                f"{where}: {name} must be a hypothesis strategy, got "
                f"{type(strategy).__name__} (for a fixed value: st.just(value))"
            )


class _Drawn(tuple):
    """Drawn positional arguments; hypothesis prints a failing example with this short repr
    (shapes, dtypes and ranges: the ``ParityError`` names the file with the exact values)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"({', '.join(describe_value(a) for a in self)})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis's pretty printer
        p.text(repr(self))


class _DrawnKwargs(dict):
    """Drawn keyword arguments, printed as ``_Drawn`` is."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {describe_value(v)}" for k, v in self.items()) + "}"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


def _check(fn: Any, args: tuple, kwargs: dict, options: Mapping, name: str) -> None:
    """One example of a parity test: ``assert_parity``, its report naming ``name``."""
    __tracebackhide__ = True
    token = _REPRODUCE_AS.set(name)
    try:
        assert_parity(fn, *args, kwargs=kwargs, **options)
    finally:
        _REPRODUCE_AS.reset(token)
