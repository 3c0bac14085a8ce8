"""Lazy imports of the optional libraries that the adapters wrap.

- `require(module, extra=...)`: import `module`, or say which extra installs it.

Only a `ModuleNotFoundError` for the library itself (or its top-level package) becomes the
"install the extra" message. Any other import error, such as a dependency of the library
that is missing or broken, propagates unchanged, so real bugs are not hidden.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .._project import install_command

__all__ = ["install_hint", "require"]


def install_hint(extra: str) -> str:
    """The pip command that installs the optional dependency group `extra` of this version.

    It names the source repository: `pip install parallax-rl[...]` from PyPI would install an
    older, unrelated release of the same name.
    """
    return install_command([extra])


def require(module: str, *, extra: str, needed_by: str = "this adapter") -> ModuleType:
    """Import `module`; if it is not installed, raise an `ImportError` naming the extra.

    Args:
        module: dotted module name, e.g. `"gymnax"` or `"brax.envs"`.
        extra: the parallax-rl extra that installs it, e.g. `"gymnax"`.
        needed_by: who needs it, for the message (e.g. `"GymnaxAdapter"`).

    Returns:
        The imported module.

    Raises:
        ImportError: `module` (or its top-level package) is not installed; the message
            ends with `pip install "parallax-rl[<extra>] @ git+<source>"`.

    Example:
        >>> from parallax.adapters._imports import require
        >>> require("json", extra="none").__name__
        'json'
        >>> try:
        ...     require("surely_not_installed_lib", extra="gymnax", needed_by="GymnaxAdapter")
        ... except ImportError as error:
        ...     print(error)
        GymnaxAdapter needs surely_not_installed_lib, which is not installed: pip install "parallax-rl[gymnax] @ git+https://github.com/parallax-rl/parallax"
    """
    top = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name not in (module, top):
            raise  # a dependency of the library is missing: a real problem, not ours to hide
        raise ImportError(
            f"{needed_by} needs {top}, which is not installed: {install_hint(extra)}",
            name=top,
        ) from error
