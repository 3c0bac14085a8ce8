"""Execute the notebooks and store the executed copies under `docs/notebooks/` for the site.

    python notebooks/render_docs.py            # execute every notebook, write the copies
    python notebooks/render_docs.py quickstart # only these
    python notebooks/render_docs.py --check    # exit 1 if a copy's code differs from its notebook

The notebooks in `notebooks/` are stored without outputs (`strip_outputs.py`); the site shows
them executed, with their printed numbers and plots, through mkdocs-jupyter (which renders
the copies as they are and executes nothing at build time). Each copy is the notebook run
top to bottom at the sizes it picks for a CPU (its `SMALL` settings), with execution
timings and widget state dropped. `--check` (run by the tests) compares cell types and
sources only, so a copy goes stale, and fails the check, exactly when its notebook's code
changes.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "notebooks"
NAMES = ("quickstart", "validate_your_env", "adapters", "finance_ppo")


def _code(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def execute(name: str, timeout: int = 900) -> nbformat.NotebookNode:
    """`notebooks/<name>.ipynb` executed in a fresh kernel from the `notebooks/` folder."""
    nb = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    NotebookClient(
        nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": str(HERE)}}
    ).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def stale(names: tuple[str, ...] = NAMES) -> list[str]:
    """The notebooks whose executed copy is missing or holds other code."""
    out = []
    for name in names:
        copy = DOCS / f"{name}.ipynb"
        source = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
        if not copy.exists() or _code(nbformat.read(copy, as_version=4)) != _code(source):
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {NAMES}; default: all")
    parser.add_argument("--check", action="store_true", help="only report stale copies")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(NAMES))
    if unknown:
        parser.error(f"unknown notebooks {unknown}; choose from {NAMES}")
    names = tuple(args.names) or NAMES
    if args.check:
        old = stale(names)
        if old:
            print("stale executed copies (run python notebooks/render_docs.py):", *old)
        return 1 if old else 0
    DOCS.mkdir(parents=True, exist_ok=True)
    for name in names:
        nbformat.write(execute(name), DOCS / f"{name}.ipynb")
        print("executed", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
