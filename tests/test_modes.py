"""torch.compile's ``mode=`` and ``options={"compiler_options": ...}`` reach XLA's compiler."""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same
from torch2xla._options import MODE_COMPILER_OPTIONS


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


@pytest.mark.parametrize("mode", [m for m in MODE_COMPILER_OPTIONS if m is not None])
def test_every_mode_trains_like_eager(mode):
    """Each mode's XLA options compile (the GPU ones are parsed by the CPU compiler too) and give
    eager's outputs and gradients."""
    model, ref_model = _mlp(), _mlp()
    x = torch.randn(8, 16)
    # (torch.compile takes mode= or options=, not both)
    compiled = torch.compile(model, backend="xla", mode=mode)
    out = compiled(x)
    ref = ref_model(x)
    assert_same(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    for p, r in zip(model.parameters(), ref_model.parameters()):
        assert_same(p.grad, r.grad)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_compiler_options_reach_every_program(tmp_path, train):
    """``xla_dump_to`` (XLA writes each program it compiles there) reaches the inference
    program, and the training forward and backward."""

    def f(x, y):
        return torch.sin(x * y + 1) * 2

    x, y = torch.randn(64, requires_grad=train), torch.randn(64)
    options = {"strict": True, "compiler_options": {"xla_dump_to": str(tmp_path)}}
    out = torch.compile(f, backend="xla", options=options)(x, y)
    assert_same(out, f(x, y))
    if train:
        out.sum().backward()
        assert_same(x.grad, torch.cos(x * y + 1).detach() * 2 * y)
    names = {p.name.split(".")[1] for p in tmp_path.iterdir() if p.name.startswith("module_")}
    # the inference program is jit(flat_fn); training: jit(_traced), then the backward of a
    # freed graph
    expected = {"jit__traced", "jit__backward_freed"} if train else {"jit_flat_fn"}
    assert expected <= names, names


def test_user_options_override_the_mode():
    opts = torch2xla.Options.parse(
        "max-autotune", {"compiler_options": {"xla_gpu_autotune_level": 0}}
    )
    merged = opts.xla_compiler_options()
    assert merged["xla_gpu_autotune_level"] == 0
    assert merged["xla_gpu_exhaustive_tiling_search"] is True
    assert torch2xla.Options.parse(None, {}).xla_compiler_options() is None


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ({"xla_no_such_option": 1}, ValueError, "xla_no_such_option"),
        ({"xla_gpu_enable_command_buffer": "WARP"}, ValueError, "WARP"),
        ({"xla_gpu_autotune_level": [1]}, TypeError, "bool, int, float or str"),
        (["xla_gpu_autotune_level"], TypeError, "must be a dict"),
    ],
)
def test_bad_compiler_options_raise_clearly(bad, error, match):
    with pytest.raises(error, match=match):
        torch2xla.Options.parse(None, {"compiler_options": bad})
