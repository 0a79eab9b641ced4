"""Backend options and modes are checked when the backend receives them.

``torch.compile`` calls a backend lazily: it keeps ``mode`` and ``options`` and hands them over
when Dynamo compiles the first frame, so a bad one raises on the compiled function's first
call, before anything is traced, with an error naming the option, the value given and the
values accepted.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np
import pytest
import torch

import torch2xla
from torch2xla import OptionError, Options
from torch2xla._options import MODES
from torch2xla.testing import assert_parity

# (option, value): each is rejected. A string or an int where a bool is meant is a mistake
# (options={"strict": "false"} used to turn strict mode on).
BAD = [
    ("strict", "false"),
    ("strict", "yes"),
    ("strict", 1),
    ("strict", None),
    ("remat", 1),
    ("remat", "True"),
    ("cache_size", True),
    ("cache_size", 0),
    ("cache_size", 2.0),
    ("cache_size", "64"),
    ("dump_dir", 123),
    ("dump_dir", b"/tmp"),
    ("passes", 1),
    ("passes", [1]),
    ("passes", "fold_constants"),
    ("eager_ops", "aten.sin"),
    ("eager_ops", ["aten.sin"]),
    ("eager_ops", torch.sin),
    ("buckets", "pow3"),
    ("buckets", 16),
    ("buckets", [0, 8]),
    ("residual_layouts", "nhwc"),
    ("residual_layouts", None),
    ("compiler_options", ["xla_gpu_autotune_level"]),
    ("compiler_options", {"xla_gpu_autotune_level": [1]}),
    ("compiler_options", {1: 0}),
    ("split_backward", "yes"),
    ("split_backward", 0),
    ("split_backward", None),
    ("checks", "yes"),
    ("checks", 1),
    ("checks", None),
]


# (ids name functions by name: a repr with an address differs between xdist workers)
@pytest.mark.parametrize(
    "name, value", BAD, ids=[f"{n}={getattr(v, '__name__', v)!r}" for n, v in BAD]
)
def test_a_bad_value_names_the_option_the_value_and_what_is_accepted(name, value):
    accepts = next(f for f in dataclasses.fields(Options) if f.name == name).metadata["check"]
    with pytest.raises(OptionError) as info:
        Options.parse(None, {name: value})
    message = str(info.value)
    assert f"option {name} must be {accepts.accepts}" in message
    assert repr(value) in message and type(value).__name__ in message


def test_every_option_has_a_check():
    # A new option is one field with its Check; a field without one would go unchecked.
    for field in dataclasses.fields(Options):
        assert isinstance(field.metadata.get("check"), torch2xla._options.Check), field.name


def test_the_error_comes_on_the_first_call_of_the_compiled_function():
    """The error is torch2xla.OptionError, as the README says (it was Dynamo's
    BackendCompilerFailed wrapping it, which ``except OptionError`` misses), every call."""
    f = torch.compile(lambda x: x + 1, backend="xla", options={"strict": "false"})
    for _ in range(2):
        with pytest.raises(OptionError, match=r"option strict must be True or False, got 'false'"):
            f(torch.ones(2))
    g = torch.compile(lambda x: x + 1, backend="xla", options={"dump_dir": 123})
    with pytest.raises(OptionError, match=r"option dump_dir must be .*, got 123 \(int\)"):
        g(torch.ones(2))


def test_explain_and_the_parity_kit_check_options_first():
    with pytest.raises(OptionError, match="option remat must be True or False, got 1"):
        torch2xla.Explanation(lambda x: x + 1, options={"remat": 1})
    with pytest.raises(OptionError, match="option cache_size must be a positive int"):
        assert_parity(lambda x: x + 1, torch.ones(2), options={"cache_size": True})


@pytest.mark.parametrize("mode", ["fast", 3, "max_autotune"])
def test_an_unknown_mode_is_rejected(mode):
    with pytest.raises(OptionError, match=f"unknown mode {mode!r}.*mode must be one of"):
        Options.parse(mode)
    f = torch.compile(lambda x: x + 1, backend="xla", mode=mode)
    with pytest.raises(Exception, match="unknown mode"):
        f(torch.ones(2))


def test_options_must_be_a_dict():
    with pytest.raises(OptionError, match="options must be a dict"):
        Options.parse(None, ["strict"])


def test_good_values_become_canonical():
    aten = torch.ops.aten
    opts = Options.parse(
        None,
        {
            "strict": True,
            "cache_size": np.int64(8),
            "dump_dir": pathlib.Path("/tmp/d"),
            "passes": torch2xla.fold_constants,
            "eager_ops": aten.cos,
            "buckets": [16, 8],
            "split_backward": 2.5,
        },
    )
    assert opts.strict is True
    assert opts.cache_size == 8 and type(opts.cache_size) is int
    assert opts.dump_dir == os.fspath(pathlib.Path("/tmp/d"))
    assert opts.passes == (torch2xla.fold_constants,)
    assert aten.cos.default in opts.eager_ops
    assert opts.buckets == (16, 8)
    hash(opts)  # options are part of cache keys
    for mode in MODES:
        assert Options.parse(mode).mode == mode
