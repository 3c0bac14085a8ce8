"""Configuration of `make clients-brax`: this folder and two files of the main suite.

`make clients-brax` runs pytest with `--confcutdir=tests/clients_brax` in `.venv-brax`, so
`tests/conftest.py` is not loaded (its beartype import hook, its x64 fixture and its
compilation cache settings need the test extra). This file gives the main suite's files it
runs here (`tests/test_export_brax.py`, `tests/test_adapters_imports.py`) what they need of
it: the `xdist_group` marker they carry (pytest-xdist is not installed here) and the strict
numerics every test runs under unless it is marked `standard_promotion`. The strict numerics
are registered as a plugin, so they reach the files outside this folder.
"""

from __future__ import annotations

import jax
import pytest


class StrictNumerics:
    """Strict dtype promotion and rank promotion errors, as in the main suite."""

    @pytest.fixture(autouse=True)
    def _strict_jax(self, request: pytest.FixtureRequest):
        if request.node.get_closest_marker("standard_promotion"):
            yield
            return
        with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
            yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): a pytest-xdist group (unused here)")
    config.pluginmanager.register(StrictNumerics(), "clients-brax-strict-numerics")
