"""Every fenced Python block in `docs/` and in the README runs.

Blocks of one page run in order in one namespace (as a reader follows the page). A block
whose info string is `python` runs; use `text`, `bash` or `pycon` for anything else. Pages
are collected at test time, so a new page is tested without registering it here.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = sorted(p for p in [*DOCS.rglob("*.md"), ROOT / "README.md"] if FENCE.search(p.read_text()))


def test_the_docs_have_runnable_examples():
    assert PAGES, "no page in docs/ has a ```python block"


@pytest.mark.standard_promotion  # pages show code as users write it, with JAX's defaults
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: pathlib.Path):
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for number, block in enumerate(FENCE.findall(page.read_text()), start=1):
        name = f"{page.relative_to(ROOT)} block {number}"
        exec(compile(block, name, "exec", dont_inherit=True), namespace)
