"""Adapters: foreign JAX environments in, Gymnasium out.

In (each a Parallax environment: pure `reset` / `step`, typed `State`, spaces):

- `GymnaxAdapter`: a gymnax environment (extra `gymnax`).
- `BraxAdapter`: a brax environment, its training wrappers stripped (extra `brax`).
- `MJXAdapter`: a MuJoCo Playground environment (extra `mjx`).

Out (for tools that speak Gymnasium, extra `gymnasium`):

- `GymnasiumEnv`: any Parallax environment as a `gymnasium.Env`.
- `GymnasiumVectorEnv`: any `VmapWrapper`-ed environment as a `gymnasium.vector.VectorEnv`.

Also: `from_gymnax_space`, `to_gymnasium_space`, and the `env_state` types `GymnaxEnvState`.

Importing this package never imports an optional library. The adapters import theirs when
they are built and, when it is missing, raise an `ImportError` that names the extra to
install (`pip install "parallax-rl[gymnax] @ git+<source>"`). `GymnasiumEnv` / `GymnasiumVectorEnv` subclass
Gymnasium's classes, so they are resolved on first access; without Gymnasium they resolve to
stand-ins whose construction raises that `ImportError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._brax import BraxAdapter as BraxAdapter
from ._gymnax import GymnaxAdapter as GymnaxAdapter
from ._gymnax import GymnaxEnvState as GymnaxEnvState
from ._gymnax import from_gymnax_space as from_gymnax_space
from ._mjx import MJXAdapter as MJXAdapter

if TYPE_CHECKING:
    from ._gymnasium import GymnasiumEnv as GymnasiumEnv
    from ._gymnasium import GymnasiumVectorEnv as GymnasiumVectorEnv
    from ._gymnasium import to_gymnasium_space as to_gymnasium_space

__all__ = [
    "BraxAdapter",
    "GymnasiumEnv",
    "GymnasiumVectorEnv",
    "GymnaxAdapter",
    "GymnaxEnvState",
    "MJXAdapter",
    "from_gymnax_space",
    "to_gymnasium_space",
]

_GYMNASIUM_NAMES = ("GymnasiumEnv", "GymnasiumVectorEnv", "to_gymnasium_space")


def _missing_gymnasium(name: str, error: ModuleNotFoundError) -> Any:
    """A stand-in for `name` whose use raises the "install the extra" `ImportError`."""
    from ._imports import install_hint

    message = f"{name} needs gymnasium, which is not installed: {install_hint('gymnasium')}"

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(message, name="gymnasium") from error

    if name == "to_gymnasium_space":
        fail.__name__ = fail.__qualname__ = name
        fail.__doc__ = message
        return fail
    return type(name, (), {"__init__": fail, "__doc__": message, "__module__": __name__})


def __getattr__(name: str) -> Any:
    if name not in _GYMNASIUM_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("._gymnasium", __name__)
    except ModuleNotFoundError as error:
        if error.name != "gymnasium":
            raise
        return _missing_gymnasium(name, error)  # not cached: installing it later works
    value = getattr(module, name)
    globals()[name] = value
    return value
