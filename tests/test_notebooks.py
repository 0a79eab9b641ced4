"""The example notebooks: committed executed with small outputs (plots as PNG), they run
headless top to bottom against this checkout, and their first cell installs what they need.

Refresh the committed outputs with ``python scripts/run_notebooks.py``.
"""

from __future__ import annotations

import os
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
kernel_manager = pytest.importorskip("jupyter_client.manager")

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

MAX_BYTES = 160_000  # a notebook with its outputs
MAX_TEXT_LINES = 40  # one text output


def test_the_example_notebooks_are_there():
    names = {p.stem for p in NOTEBOOKS}
    assert names >= {"quickstart", "training", "dynamic_shapes", "parity_testing", "explain"}


def _code_cells(book) -> list:
    return [c for c in book.cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_executed_with_small_outputs(path):
    """Issue 27: committed without outputs, a notebook showed nothing on a code host."""
    assert path.stat().st_size <= MAX_BYTES, f"{path.name}: outputs too large"
    book = nbformat.read(path, as_version=4)
    cells = _code_cells(book)
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: run it top to bottom"
    outputs = [o for c in cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    for o in outputs:
        text = o.get("text") or o.get("data", {}).get("text/plain", "")
        assert text.count("\n") <= MAX_TEXT_LINES, f"{path.name}: a long text output"
        images = {k for k in o.get("data", {}) if k.startswith("image/")}
        assert images <= {"image/png"}, f"{path.name}: plots as PNG"
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} draws no plot"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_first_cell_installs_what_it_needs(path):
    """Issue 27: the README's first command does not install matplotlib; the first cell of a
    notebook failed for a new user."""
    book = nbformat.read(path, as_version=4)
    first = _code_cells(book)[0].source
    needs_matplotlib = any("matplotlib" in c.source for c in _code_cells(book)[1:]) or (
        "import matplotlib" in first
    )
    if needs_matplotlib:
        install = first.index('find_spec("matplotlib") is None')
        assert install < first.index("import matplotlib")
        assert '".[notebooks]"' in first  # and says which extra has it


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs(path, monkeypatch, tmp_path):
    book = nbformat.read(path, as_version=4)
    for cell in _code_cells(book):
        cell.outputs, cell.execution_count = [], None
    # The kernel imports this checkout's torch2xla (it inherits the environment).
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    monkeypatch.setenv("TORCH2XLA_PROGRESS", "0")
    monkeypatch.setenv("TORCH2XLA_CACHE_DIR", str(tmp_path / "cache"))
    # (over Unix sockets: with TCP, the two workers' kernels picked a free port each and one
    # died binding it, "zmq Address already in use", in a full run of session 31)
    km = kernel_manager.AsyncKernelManager(
        kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel")
    )
    client = nbclient.NotebookClient(
        book,
        km=km,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on failure
    outputs = [o for cell in _code_cells(book) for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name} draws no plot"
    versions = next(o.text for o in _code_cells(book)[0].outputs if o.output_type == "stream")
    assert "torch2xla" in versions
