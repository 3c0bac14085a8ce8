"""How this version is installed: one source address, used everywhere a user is told to install.

`pip install parallax-rl` from PyPI installs an older, unrelated release, so every install
instruction (the README, the getting-started page, the install hints of missing extras, the
notebooks' install cells and Colab badges) names the source repository, and all of them take
its address from `[project.urls] Source` in `pyproject.toml`.
"""

from __future__ import annotations

import pathlib
import re
import tomllib

from parallax._project import SOURCE_URL, install_command, source_url
from parallax.adapters._imports import install_hint

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCE = PYPROJECT["project"]["urls"]["Source"]


def test_the_fallback_address_is_the_pyproject_source():
    assert SOURCE_URL == SOURCE
    assert source_url() == SOURCE  # from the installed metadata


def test_install_hints_name_the_source_repository_not_pypi():
    assert install_hint("gymnax") == f'pip install "parallax-rl[gymnax] @ git+{SOURCE}"'
    assert install_command() == f'pip install "parallax-rl @ git+{SOURCE}"'


def test_install_instructions_in_the_readme_and_docs_use_the_source():
    for page in (ROOT / "README.md", ROOT / "docs" / "getting_started.md"):
        text = page.read_text()
        lines = [line for line in text.splitlines() if line.startswith("pip install")]
        assert lines, f"{page.name} has no install line"
        for line in lines:
            assert f"@ git+{SOURCE}" in line, f"{page.name}: {line!r} installs from PyPI"
        # and no page sends users to any other repository address
        others = set(re.findall(r"git\+(https://[^\s\"']+)", text)) - {SOURCE}
        assert not others, others
