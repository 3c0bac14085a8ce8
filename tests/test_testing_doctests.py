"""The examples in the docstrings of `parallax.testing` run and print what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "parallax.testing._tolerance",
    "parallax.testing._reference",
    "parallax.testing._battery",
    "parallax.testing._contract",
    "parallax.testing._batch",
    "parallax.testing._marl",
    "parallax.testing._scripted",
    "parallax.finance._invariants",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
