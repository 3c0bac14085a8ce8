"""Optional dependencies stay optional.

`parallax.adapters` imports without gymnax, brax, MuJoCo Playground and Gymnasium; a missing
library gives an `ImportError` naming the extra to install when an adapter is built; any
other import error propagates unchanged. Libraries are made missing by putting `None` in
`sys.modules` (which makes `import` raise `ModuleNotFoundError`), and a broken library by a
meta-path finder, both undone by `monkeypatch`.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

import parallax
from parallax.adapters._imports import require

OPTIONAL = ("gymnax", "brax", "mujoco_playground", "gymnasium")


def _hide(monkeypatch, *tops):
    """Make `import top` (and its submodules) raise ModuleNotFoundError."""
    for name in list(sys.modules):
        if name.split(".")[0] in tops:
            monkeypatch.setitem(sys.modules, name, None)
    for top in tops:
        monkeypatch.setitem(sys.modules, top, None)


def _fresh_adapters(monkeypatch):
    """Import `parallax.adapters` anew (the old modules come back after the test)."""
    monkeypatch.setattr(parallax, "adapters", sys.modules.get("parallax.adapters"), raising=False)
    for name in list(sys.modules):
        if name == "parallax.adapters" or name.startswith("parallax.adapters."):
            monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("parallax.adapters")


def test_adapters_import_without_any_optional_library(monkeypatch):
    _hide(monkeypatch, *OPTIONAL)
    adapters = _fresh_adapters(monkeypatch)
    from parallax.adapters import (  # noqa: F401
        BraxAdapter,
        GymnasiumEnv,
        GymnasiumVectorEnv,
        GymnaxAdapter,
        MJXAdapter,
    )

    for name in OPTIONAL:
        assert sys.modules[name] is None  # nothing tried to import them
    cases = [
        (adapters.GymnaxAdapter, "gymnax"),
        (adapters.BraxAdapter, "brax"),
        (adapters.MJXAdapter, "mjx"),
        (adapters.GymnasiumEnv, "gymnasium"),
        (adapters.GymnasiumVectorEnv, "gymnasium"),
    ]
    for cls, extra in cases:
        with pytest.raises(
            ImportError, match=rf"pip install \"parallax-rl\[{extra}\] @ git\+https://"
        ) as info:
            cls(object())
        assert isinstance(info.value.__cause__, ModuleNotFoundError)
    with pytest.raises(
        ImportError, match=r"pip install \"parallax-rl\[gymnasium\] @ git\+https://"
    ):
        adapters.to_gymnasium_space(None)


def test_missing_library_names_the_extra(monkeypatch):
    _hide(monkeypatch, "gymnax")
    from parallax.adapters import GymnaxAdapter

    with pytest.raises(ImportError) as info:
        GymnaxAdapter(object())
    assert str(info.value) == (
        "GymnaxAdapter needs gymnax, which is not installed: "
        'pip install "parallax-rl[gymnax] @ git+https://github.com/parallax-rl/parallax"'
    )
    assert info.value.name == "gymnax"


def test_registry_listing_skips_missing_libraries(monkeypatch):
    _hide(monkeypatch, "gymnax", "brax", "mujoco_playground")
    from parallax.adapters import _registry

    for names in (_registry.gymnax_names, _registry.brax_names, _registry.mjx_names):
        with pytest.raises(ImportError, match=r"pip install \"parallax-rl\["):
            names()
    ids = parallax.registered_ids()
    assert "GridWorld-v0" in ids
    assert not any(i.split("/")[0] in ("gymnax", "brax", "mjx") for i in ids)
    with pytest.raises(ImportError, match=r"pip install \"parallax-rl\[gymnax\] @ git\+https://"):
        parallax.make("gymnax/CartPole-v1")
    with pytest.raises(ImportError, match=r"pip install \"parallax-rl\[mjx\] @ git\+https://"):
        parallax.make("mjx/CartpoleBalance")


class _Broken:
    """A meta-path finder: importing `library` fails with `error`."""

    def __init__(self, library, error):
        self.library, self.error = library, error

    def find_spec(self, name, path=None, target=None):
        if name == self.library:
            raise self.error
        return None


@pytest.mark.parametrize(
    "error",
    [
        ModuleNotFoundError("No module named 'flax'", name="flax"),  # a dependency is missing
        ImportError("cannot import name 'struct' from 'flax'"),  # a broken installation
        RuntimeError("CUDA initialisation failed"),
    ],
    ids=["dependency-missing", "import-error", "other-error"],
)
def test_other_import_errors_propagate_unchanged(monkeypatch, error):
    for name in list(sys.modules):
        if name.split(".")[0] == "gymnax":
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Broken("gymnax", error), *sys.meta_path])
    from parallax.adapters import GymnaxAdapter

    with pytest.raises(type(error)) as info:
        GymnaxAdapter(object())
    assert info.value is error


def test_require_translates_only_the_library_itself(tmp_path, monkeypatch):
    (tmp_path / "needs_dependency_lib").mkdir()
    (tmp_path / "needs_dependency_lib" / "__init__.py").write_text(
        textwrap.dedent("import parallax_surely_missing_dependency\n")
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"needs parallax_missing_lib, .*\[demo\]") as info:
        require("parallax_missing_lib.sub", extra="demo")
    assert info.value.name == "parallax_missing_lib"
    with pytest.raises(ModuleNotFoundError) as info:
        require("needs_dependency_lib", extra="demo")
    assert info.value.name == "parallax_surely_missing_dependency"  # unchanged
    assert require("json", extra="demo") is sys.modules["json"]


def test_docstring_examples_run():
    import doctest

    from parallax.adapters import _imports

    for module in (_imports,):
        result = doctest.testmod(
            module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_exports_name_their_extra_when_the_library_is_missing(monkeypatch):
    _hide(monkeypatch, *OPTIONAL, "pettingzoo", "jumanji", "jaxmarl")
    adapters = _fresh_adapters(monkeypatch)
    from parallax.envs import GridWorld, Race

    cases = [
        (lambda: adapters.to_gymnax(GridWorld()), "gymnax"),
        (lambda: adapters.to_brax(GridWorld()), "brax"),
        (lambda: adapters.to_pettingzoo(Race()), "pettingzoo"),
        (lambda: adapters.PettingZooEnv(Race()), "pettingzoo"),
        (lambda: adapters.to_jumanji(GridWorld()), "jumanji"),
        (lambda: adapters.JumanjiEnv(GridWorld()), "jumanji"),
        (lambda: adapters.to_jaxmarl(Race()), "jaxmarl"),
        (lambda: adapters.JaxMARLAdapter(Race()), "jaxmarl"),
        (lambda: adapters.to_jaxmarl_space(Race.action_space), "jaxmarl"),
    ]
    for build, extra in cases:
        with pytest.raises(ImportError, match=rf"pip install \"parallax-rl\[{extra}\] @ git\+"):
            build()
    for name in (*OPTIONAL, "pettingzoo", "jumanji", "jaxmarl"):
        assert sys.modules[name] is None  # nothing imported them
