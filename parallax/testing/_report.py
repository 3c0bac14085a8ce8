"""What the battery verified: one check's record, and the validation report of a run.

- `CheckReport`: what a passing check verified, returned by every `check_*` function.
- `REPORT_SCHEMA`: the schema name of `validation_report.json` (written by `parallax check`).
- `source_files(*objects)`: the source files defining factories, envs (through their
  wrappers' `.env` chain) and references.
- `source_hashes(paths)`: `{absolute path: sha256 hex digest}` of those files.
- `environment_info()`: parallax, jax and Python versions, the backend and its devices.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["REPORT_SCHEMA", "CheckReport", "environment_info", "source_files", "source_hashes"]

REPORT_SCHEMA = "parallax-validation-report/1"


@dataclass
class CheckReport:
    """The record of a passing check.

    Attributes:
        check: the check's name (`"check_env"`, `"check_marl_env"`, ...).
        passed: the sub-checks that ran and passed, in order.
        notes: facts worth knowing (e.g. how often a rule was exercised).
        stats: numbers the check measured (steps, instances, traces, ...).
    """

    check: str
    passed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: CheckReport) -> None:
        """Append another report's sub-checks and notes (prefixed by its name)."""
        self.passed.extend(f"{other.check}/{name}" for name in other.passed)
        self.notes.extend(f"{other.check}: {note}" for note in other.notes)
        self.stats.update({f"{other.check}.{k}": v for k, v in other.stats.items()})

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "check": self.check,
            "passed": list(self.passed),
            "notes": list(self.notes),
            "stats": dict(self.stats),
        }


def _defining_file(obj: Any) -> str | None:
    while isinstance(obj, functools.partial):
        obj = obj.func
    target: Any = obj if inspect.isclass(obj) or inspect.isroutine(obj) else type(obj)
    if inspect.isroutine(target):
        target = inspect.unwrap(target)
    try:
        path = inspect.getsourcefile(target)
    except TypeError:  # builtins, C extensions
        return None
    return None if path is None or not os.path.isfile(path) else os.path.abspath(path)


def source_files(*objects: Any) -> list[str]:
    """The source files that define `objects` (classes, functions or instances).

    An instance counts through its class; a wrapper (anything with an `.env` attribute)
    also through the env it wraps, all the way down. Files are absolute, each listed once,
    in order of appearance; objects without a Python source file are left out.

    Example:
        >>> from parallax.envs import GridWorld
        >>> from parallax.testing._report import source_files
        >>> [p.rsplit("/", 1)[-1] for p in source_files(GridWorld)]
        ['_gridworld.py']
    """
    out: list[str] = []
    for obj in objects:
        seen = 0
        while obj is not None and seen < 64:  # a wrapper chain, bounded against cycles
            path = _defining_file(obj)
            if path is not None and path not in out:
                out.append(path)
            obj = (
                None
                if inspect.isclass(obj) or inspect.isroutine(obj)
                else getattr(obj, "env", None)
            )
            seen += 1
    return out


def source_hashes(paths: Iterable[str]) -> dict[str, str]:
    """`{path: sha256 hex digest of its bytes}`."""
    out = {}
    for path in paths:
        with open(path, "rb") as fh:
            out[path] = hashlib.sha256(fh.read()).hexdigest()
    return out


def environment_info() -> dict[str, Any]:
    """Versions (parallax, jax, jaxlib, numpy, Python), the platform, the backend, devices."""
    import jax
    import numpy as np

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "x64_default": bool(jax.config.read("jax_enable_x64")),
    }
    try:
        import jaxlib

        info["jaxlib"] = jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover - jax without jaxlib
        pass
    try:
        import parallax

        info["parallax"] = parallax.__version__
    except (ImportError, AttributeError):  # pragma: no cover - a broken install
        pass
    return info
