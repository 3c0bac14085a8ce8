"""Strip outputs from the notebooks before they are committed, or check that they are stripped.

    python notebooks/strip_outputs.py            # strip every notebook in notebooks/ in place
    python notebooks/strip_outputs.py --check    # exit 1 and name the notebooks with outputs
    python notebooks/strip_outputs.py a.ipynb    # only these

Stripped means: no outputs, no execution counts, and no execution metadata (timings) in any
code cell, and no widget state in the notebook metadata. Cell sources and tags are kept.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import nbformat

HERE = pathlib.Path(__file__).resolve().parent
CELL_METADATA_DROPPED = ("execution", "collapsed", "scrolled", "outputId", "colab")
NOTEBOOK_METADATA_DROPPED = ("widgets",)


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """What is not stripped in `nb`, one line per cell or metadata key."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            found.append(f"cell {index}: {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            found.append(f"cell {index}: execution_count {cell.execution_count}")
        for key in CELL_METADATA_DROPPED:
            if key in cell.metadata:
                found.append(f"cell {index}: metadata {key!r}")
    for key in NOTEBOOK_METADATA_DROPPED:
        if key in nb.metadata:
            found.append(f"notebook metadata {key!r}")
    return found


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`nb` with outputs, execution counts and run-time metadata removed (in place)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        for key in CELL_METADATA_DROPPED:
            cell.metadata.pop(key, None)
    for key in NOTEBOOK_METADATA_DROPPED:
        nb.metadata.pop(key, None)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="report, do not modify")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(HERE.glob("*.ipynb"))
    dirty = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        found = problems(nb)
        if args.check:
            if found:
                dirty += 1
                print(f"{path}: not stripped: {'; '.join(found)}")
            continue
        if found:
            nbformat.write(strip(nb), path)
            print(f"{path}: stripped ({len(found)} item(s))")
    if args.check and dirty:
        print(f"run: python {pathlib.Path(__file__).name} to strip", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
