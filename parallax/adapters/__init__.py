"""Adapters: foreign JAX environments in, Parallax environments out to other trainers.

In (each a Parallax environment: pure `reset` / `step`, typed `State`, spaces):

- `GymnaxAdapter`: a gymnax environment (extra `gymnax`).
- `BraxAdapter`: a brax environment, its training wrappers stripped (extra `brax`).
- `MJXAdapter`: a MuJoCo Playground environment (extra `mjx`).
- `JaxMARLAdapter`: a JaxMARL multi-agent environment (MPE, ...), as `MARLState`s (extra
  `jaxmarl`).

Out (any Parallax environment, for the trainers people already run):

- `GymnasiumEnv`: a `gymnasium.Env` (extra `gymnasium`).
- `GymnasiumVectorEnv`: a vector env as a `gymnasium.vector.VectorEnv`, next-step
  auto-reset by default (extra `gymnasium`, Gymnasium >= 1.1).
- `to_gymnax`: a gymnax `Environment` for PureJaxRL-style code (extra `gymnax`).
- `to_brax`: an env with a bounded float `Box` action as a brax `Env`, for brax's training
  wrappers and trainers (extra `brax`).
- `to_pettingzoo`: a multi-agent env as a PettingZoo `ParallelEnv` (extra `pettingzoo`).
- `to_jumanji`: a Jumanji `Environment` (extra `jumanji`).
- `to_jaxmarl`: a multi-agent env as a JaxMARL `MultiAgentEnv` (extra `jaxmarl`).

Also: `from_gymnax_space`, `to_gymnasium_space`, `to_gymnax_space`, `from_jaxmarl_space`,
`to_jaxmarl_space`, and the state types `GymnaxEnvState`, `GymnaxExportState`,
`BraxPipelineState`, `JaxMARLExportState`, and the export's params
`GymnaxParams` / `NoParams`.

Importing this package never imports an optional library. The adapters import theirs when
they are built and, when it is missing, raise an `ImportError` that names the extra to
install (`pip install "parallax-rl[gymnax] @ git+<source>"`). The exports that subclass a
foreign class (Gymnasium's, PettingZoo's, Jumanji's) are resolved on first access; without
their library they resolve to stand-ins whose use raises that `ImportError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._brax import BraxAdapter as BraxAdapter
from ._gymnax import GymnaxAdapter as GymnaxAdapter
from ._gymnax import GymnaxEnvState as GymnaxEnvState
from ._gymnax import from_gymnax_space as from_gymnax_space
from ._jaxmarl import JaxMARLAdapter as JaxMARLAdapter
from ._jaxmarl import from_jaxmarl_space as from_jaxmarl_space
from ._mjx import MJXAdapter as MJXAdapter
from ._to_brax import BraxPipelineState as BraxPipelineState
from ._to_brax import to_brax as to_brax
from ._to_gymnax import GymnaxExportState as GymnaxExportState
from ._to_gymnax import GymnaxParams as GymnaxParams
from ._to_gymnax import NoParams as NoParams
from ._to_gymnax import to_gymnax as to_gymnax
from ._to_gymnax import to_gymnax_space as to_gymnax_space
from ._to_jaxmarl import JaxMARLExportState as JaxMARLExportState
from ._to_jaxmarl import to_jaxmarl as to_jaxmarl
from ._to_jaxmarl import to_jaxmarl_space as to_jaxmarl_space

if TYPE_CHECKING:
    from ._gymnasium import GymnasiumEnv as GymnasiumEnv
    from ._gymnasium_spaces import to_gymnasium_space as to_gymnasium_space
    from ._gymnasium_vector import GymnasiumVectorEnv as GymnasiumVectorEnv
    from ._jumanji import JumanjiEnv as JumanjiEnv
    from ._jumanji import to_jumanji as to_jumanji
    from ._pettingzoo import PettingZooEnv as PettingZooEnv
    from ._pettingzoo import to_pettingzoo as to_pettingzoo
    from ._to_gymnax import GymnaxEnv as GymnaxEnv
    from ._to_jaxmarl import JaxMARLEnv as JaxMARLEnv

__all__ = [
    "BraxAdapter",
    "BraxPipelineState",
    "GymnasiumEnv",
    "GymnasiumVectorEnv",
    "GymnaxAdapter",
    "GymnaxEnv",
    "GymnaxEnvState",
    "GymnaxExportState",
    "GymnaxParams",
    "JaxMARLAdapter",
    "JaxMARLEnv",
    "JaxMARLExportState",
    "JumanjiEnv",
    "MJXAdapter",
    "NoParams",
    "PettingZooEnv",
    "from_gymnax_space",
    "from_jaxmarl_space",
    "to_brax",
    "to_gymnasium_space",
    "to_gymnax",
    "to_gymnax_space",
    "to_jaxmarl",
    "to_jaxmarl_space",
    "to_jumanji",
    "to_pettingzoo",
]

# name -> (module, the extra whose library it needs); resolved on first access
_LAZY = {
    "GymnasiumEnv": ("._gymnasium", "gymnasium"),
    "GymnasiumVectorEnv": ("._gymnasium_vector", "gymnasium"),
    "to_gymnasium_space": ("._gymnasium_spaces", "gymnasium"),
    "PettingZooEnv": ("._pettingzoo", "pettingzoo"),
    "to_pettingzoo": ("._pettingzoo", "pettingzoo"),
    "JumanjiEnv": ("._jumanji", "jumanji"),
    "GymnaxEnv": ("._to_gymnax", "gymnax"),  # a gymnax subclass, built on first access
    "JaxMARLEnv": ("._to_jaxmarl", "jaxmarl"),  # a JaxMARL subclass, likewise
    "to_jumanji": ("._jumanji", "jumanji"),
}


def _missing(name: str, extra: str, error: BaseException | None) -> Any:
    """A stand-in for `name` whose use raises the "install the extra" `ImportError`."""
    from ._imports import install_hint

    message = f"{name} needs {extra}, which is not installed: {install_hint(extra)}"

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(message, name=extra) from error

    if name.startswith("to_"):
        fail.__name__ = fail.__qualname__ = name
        fail.__doc__ = message
        return fail
    return type(name, (), {"__init__": fail, "__doc__": message, "__module__": __name__})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, extra = _LAZY[name]
    try:
        module = importlib.import_module(module_name, __name__)
    except ImportError as error:  # gymnasium: ModuleNotFoundError; the others: require()'s
        if error.name not in ("gymnasium", extra):
            raise
        cause = error if isinstance(error, ModuleNotFoundError) else error.__cause__
        return _missing(name, extra, cause)  # not cached: installing it later works
    value = getattr(module, name)
    globals()[name] = value
    return value
