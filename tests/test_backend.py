"""The backend's registration and options."""

import subprocess
import sys

import pytest
import torch

import torch2xla


def test_backend_registered_through_entry_point_without_import():
    code = (
        "import torch\n"
        "f = torch.compile(lambda x: x * 2 + 1, backend='xla')\n"
        "x = torch.arange(4.)\n"
        "assert torch.equal(f(x), x * 2 + 1)\n"
        "import sys; assert 'torch2xla' in sys.modules\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_xla_listed_among_backends():
    assert "xla" in torch._dynamo.list_backends()


def test_unknown_option_lists_known_ones():
    f = torch.compile(lambda x: x + 1, backend="xla", options={"stirct": True})
    with pytest.raises(Exception, match=r"unknown option.*stirct.*known options.*strict"):
        f(torch.ones(2))


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown mode"):
        torch2xla.Options.parse(mode="warp-speed")


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune"])
def test_modes_accepted(mode):
    f = torch.compile(lambda x: x.sin(), backend="xla", mode=mode)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.sin())


def test_options_accepted():
    f = torch.compile(lambda x: x.cos(), backend="xla", options={"strict": True, "cache_size": 4})
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.cos())


def test_global_jax_x64_config_untouched():
    import jax

    before = jax.config.jax_enable_x64
    f = torch.compile(lambda x: x * 2, backend="xla")
    x = torch.tensor([2**40 + 1], dtype=torch.int64)
    assert f(x).item() == 2 * (2**40 + 1)
    assert jax.config.jax_enable_x64 == before
