"""Write, or check, the generated cells of every notebook: Colab badge, install cell, device cell.

    python notebooks/sync_notebooks.py            # rewrite the generated parts in place
    python notebooks/sync_notebooks.py --check    # exit 1 and name the notebooks out of date

The source address comes from `[project.urls] Source` in `pyproject.toml`, the one place it
is written, so no notebook holds a hand-typed address:

- the "Open In Colab" badge of the first cell points at the notebook in that repository;
- the cell tagged `install` installs this version from that repository, with the
  notebook's extras (PyPI's `parallax-rl` is an older, unrelated release), and is skipped
  when `parallax` already imports (a clone, CI), so the notebooks also run offline;
- the cell tagged `device`, right after it, prints `jax.devices()` and says what runs where
  (a Colab TPU or GPU runtime, or the CPU).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tomllib

import nbformat

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

# notebook -> the extras its install cell asks for
EXTRAS: dict[str, tuple[str, ...]] = {
    "quickstart": ("gymnasium",),
    "validate_your_env": ("gymnasium",),
    "adapters": ("adapters", "gymnasium"),
    "finance_ppo": ("train",),
}

BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"

INSTALL = '''\
# Colab, or any machine without Parallax: install this version from its source repository
# (PyPI's "parallax-rl" is an older, unrelated release). Skipped when parallax already
# imports (a clone with `make test`, or CI), so the notebook also runs offline.
import importlib.util

if importlib.util.find_spec("parallax") is None:
    %pip install --quiet "{requirement} @ git+{source}"'''

DEVICE = """\
# Where this notebook runs. JAX uses the best device it finds: on Colab, choose
# Runtime > Change runtime type > a TPU or GPU before running, or everything runs on the CPU.
import jax

backend = jax.default_backend()
print(f"JAX {jax.__version__}, backend {backend!r}, devices: {jax.devices()}")
if backend == "cpu":
    print("Environments, rollouts and training run on the CPU (the notebook's sizes suit it).")
else:
    print(f"Environments, rollouts and training run on the {backend.upper()}; plots and "
          "printing on the host CPU.")"""


def source_url(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> str:
    """`[project.urls] Source` of `pyproject.toml`."""
    return str(tomllib.loads(pyproject.read_text())["project"]["urls"]["Source"])


def colab_url(source: str, name: str) -> str:
    """The Colab address that opens notebook `name` of the GitHub repository `source`."""
    match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", source)
    if match is None:
        raise ValueError(f"[project.urls] Source must be a GitHub repository, got {source!r}")
    owner, repo = match.groups()
    return (
        f"https://colab.research.google.com/github/{owner}/{repo}/blob/main/notebooks/{name}.ipynb"
    )


def _tagged(nb: nbformat.NotebookNode, tag: str) -> int | None:
    found = [i for i, c in enumerate(nb.cells) if tag in c.metadata.get("tags", [])]
    if len(found) > 1:
        raise ValueError(f"more than one cell is tagged {tag!r}")
    return found[0] if found else None


def synced(nb: nbformat.NotebookNode, name: str, source: str) -> nbformat.NotebookNode:
    """A copy of `nb` whose badge, install cell and device cell are the generated ones."""
    nb = nbformat.from_dict(nb)  # a deep copy
    first = nb.cells[0]
    badge = f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(source, name)})"
    if first.cell_type != "markdown" or not BADGE.search(first.source):
        raise ValueError(f"{name}: the first cell must be markdown with an Open In Colab badge")
    first.source = BADGE.sub(lambda _: badge, first.source, count=1)

    extras = ",".join(EXTRAS[name])
    install = INSTALL.format(requirement=f"parallax-rl[{extras}]", source=source)
    at = _tagged(nb, "install")
    if at is None:
        raise ValueError(f"{name}: no cell is tagged 'install'")
    nb.cells[at].source = install

    device = _tagged(nb, "device")
    if device is None:
        cell = nbformat.v4.new_code_cell(DEVICE, metadata={"tags": ["device"]})
        nb.cells.insert(at + 1, cell)
    elif device != at + 1:
        raise ValueError(f"{name}: the cell tagged 'device' must follow the install cell")
    else:
        nb.cells[device].source = DEVICE
    return nb


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report what is out of date")
    args = parser.parse_args(argv)
    source = source_url()
    stale = []
    for name in EXTRAS:
        path = HERE / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        new = synced(nb, name, source)
        if _cells(new) == _cells(nb):
            continue
        stale.append(path.name)
        if not args.check:
            nbformat.write(new, path)
    if args.check and stale:
        print("out of date (run python notebooks/sync_notebooks.py):", *stale)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
