"""Execute the example notebooks in place, so that they are committed with their outputs.

    python scripts/run_notebooks.py [examples/quickstart.ipynb ...]

Runs each notebook top to bottom in a fresh kernel (this checkout's torch2xla first on the
path), with progress bars off so that outputs are the same kind on every machine. Plots are
PNG (matplotlib's inline backend); keep outputs small: the test suite checks their size.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

import nbclient
import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(path: pathlib.Path) -> None:
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        book,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    for cell in book.cells:  # drop per-run noise from the committed file
        cell.metadata.pop("execution", None)
    nbformat.write(book, path)
    print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KiB")


def main(argv: list[str]) -> None:
    paths = [pathlib.Path(a).resolve() for a in argv] or sorted((ROOT / "examples").glob("*.ipynb"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    os.environ["TORCH2XLA_PROGRESS"] = "0"
    os.environ.setdefault("TORCH2XLA_CACHE_DIR", tempfile.mkdtemp(prefix="torch2xla-nb-"))
    for path in paths:
        run(path)


if __name__ == "__main__":
    main(sys.argv[1:])
