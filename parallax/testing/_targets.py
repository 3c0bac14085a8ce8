"""What `parallax check`, `parallax replay` and `require_fresh_report` accept as an env.

- `Target`: an env spec resolved to its factories (and the report path it defaults to).
- `load_target(spec)`: a registered id (`GridWorld-v0`), a `module:factory` path, or a
  project directory written by `parallax new` (its `env.py` defines `make_env`, its
  optional `reference.py` defines `make_reference`).
- `load_factory(spec)`: a `module:attr` path, imported.
- `PROJECT_REPORT`: the report file name inside a project directory.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = ["PROJECT_REPORT", "Target", "default_report_path", "load_factory", "load_target"]

PROJECT_REPORT = "validation_report.json"
"""The report of a project directory, `DIR/validation_report.json`."""


@dataclass(frozen=True)
class Target:
    """An env spec resolved.

    Attributes:
        spec: the spec as given (an id, `module:factory`, or a directory, made absolute).
        kind: `"id"`, `"factory"` or `"project"`.
        env_factory: `env_factory() -> env`.
        reference_factory: `reference_factory() -> Reference`, or None.
    """

    spec: str
    kind: str
    env_factory: Callable[[], Any]
    reference_factory: Callable[[], Any] | None = None


def load_factory(spec: str) -> Callable[[], Any]:
    """`module:attr` -> the attribute (a class or a function), imported."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"expected 'module:factory', got {spec!r}")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _module_from_file(path: str) -> ModuleType:
    """Import `path` under a name unique to its absolute path (re-imported if edited)."""
    digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name = f"_parallax_project_{digest}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - only for odd file systems
        raise ImportError(f"cannot import {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _project_factory(directory: str, filename: str, attr: str) -> Callable[[], Any]:
    module = _module_from_file(os.path.join(directory, filename))
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise AttributeError(
            f"{os.path.join(directory, filename)} must define a callable `{attr}()`, as "
            "`parallax new` writes it"
        )
    return factory  # type: ignore[no-any-return]


def is_project(spec: str) -> bool:
    """Whether `spec` names a project directory (one holding an `env.py`)."""
    return os.path.isdir(spec) and os.path.isfile(os.path.join(spec, "env.py"))


def load_target(spec: str) -> Target:
    """Resolve an env spec: a project directory, a registered id, or `module:factory`.

    Raises:
        ValueError: not a directory with an `env.py`, not a registered id, not
            `module:factory`.
        ImportError, AttributeError, TypeError: the module or factory cannot be loaded.
    """
    from .._registry import _NAMESPACES, _REGISTRY, _unknown, make

    if is_project(spec):
        directory = os.path.abspath(spec)
        reference = None
        if os.path.isfile(os.path.join(directory, "reference.py")):
            reference = _project_factory(directory, "reference.py", "make_reference")
        env = _project_factory(directory, "env.py", "make_env")
        return Target(directory, "project", env, reference)
    if os.path.isdir(spec):
        raise ValueError(
            f"{spec!r} is a directory without an env.py (a project written by `parallax new` "
            "has one)"
        )
    namespace, slash, _ = spec.partition("/")
    if spec in _REGISTRY or (slash and namespace in _NAMESPACES):
        return Target(spec, "id", lambda: make(spec))
    if ":" not in spec:
        raise ValueError(f"not a project directory or a module:factory path, and {_unknown(spec)}")
    return Target(spec, "factory", load_factory(spec))


def default_report_path(spec: str) -> str:
    """`DIR/validation_report.json` for a project, else `parallax-check-<id>.json`."""
    if is_project(spec):
        return os.path.join(spec, PROJECT_REPORT)
    return "parallax-check-" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_") + ".json"
