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
@pytest.mark.parametrize(
    "page",
    [
        # the README's blocks run in `make test`; the docs pages' (whole programs, some of them
        # compiling the order book) in `make test-slow`
        pytest.param(p, marks=[] if p.parent == ROOT else [pytest.mark.slow])
        for p in PAGES
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_python_blocks_run(page: pathlib.Path):
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for number, block in enumerate(FENCE.findall(page.read_text()), start=1):
        name = f"{page.relative_to(ROOT)} block {number}"
        exec(compile(block, name, "exec", dont_inherit=True), namespace)


def fence_problems(text: str) -> list[str]:
    """Lines where a code fence is not alone on its line, or a fence left open at the end.

    Markdown closes a fence only on a line holding nothing but the fence, so text after a
    closing fence silently turns the rest of the page into code (and `mkdocs --strict` does
    not notice).
    """
    problems, open_at = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if "```" not in stripped:
            continue
        if not stripped.startswith("```"):
            problems.append(f"line {number}: a fence after other text: {stripped[:60]!r}")
        elif open_at is None:
            open_at = number
        elif stripped == "```":
            open_at = None
        else:
            problems.append(f"line {number}: text after a closing fence: {stripped[:60]!r}")
    if open_at is not None:
        problems.append(f"line {open_at}: a fence that never closes")
    return problems


ALL_PAGES = sorted([*DOCS.rglob("*.md"), ROOT / "README.md"])


@pytest.mark.parametrize("page", ALL_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_closes_on_its_own_line(page: pathlib.Path):
    assert fence_problems(page.read_text()) == []


def test_the_fence_check_catches_text_after_a_closing_fence():
    broken = "```python\nx = 1\n``` More prose.\n\nstill prose\n"
    assert fence_problems(broken) == [
        "line 3: text after a closing fence: '``` More prose.'",
        "line 1: a fence that never closes",
    ]
    assert fence_problems("```python\nx = 1\n```\n") == []
